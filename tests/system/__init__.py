"""Tests of trtprof/system/."""
