"""Tests of trtprof/backends/."""
