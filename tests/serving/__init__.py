"""Tests of trtprof/serving/."""
