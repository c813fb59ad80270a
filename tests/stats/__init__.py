"""Tests of trtprof/stats/."""
