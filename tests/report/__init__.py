"""Tests of trtprof/report/."""
