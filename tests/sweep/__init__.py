"""Tests of trtprof/sweep/."""
