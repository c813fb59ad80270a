"""Tests of the project itself: docs, the import checker, benchmark scripts, schemas."""
