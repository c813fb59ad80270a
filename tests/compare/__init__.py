"""Tests of trtprof/compare/."""
