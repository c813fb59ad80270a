"""Fakes for contract tests. Nothing here is a backend: fakes record calls and return canned
structures so tests can check how trtprof drives an API it cannot install here."""
