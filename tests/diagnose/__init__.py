"""Tests of trtprof/diagnose/."""
