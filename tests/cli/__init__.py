"""Tests through the CLI: commands, user errors, fault injection."""
