"""Tests of trtprof/engines/."""
