"""Tests of trtprof/layers/."""
