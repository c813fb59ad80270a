"""Engines: the content-addressed cache, its administration, and building one engine per precision."""
