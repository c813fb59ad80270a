"""Tests of trtprof/model/."""
