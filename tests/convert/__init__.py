"""Tests of trtprof/convert/."""
