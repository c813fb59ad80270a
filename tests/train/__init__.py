"""Tests of trtprof/train/."""
