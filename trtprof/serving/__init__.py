"""Serving: the concurrent driver, the concurrency sweep, its page sections and plots."""
