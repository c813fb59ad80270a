"""Tests of trtprof/measure/."""
