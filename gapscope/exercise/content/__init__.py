"""Bundled exercise files (``*.toml``, package data); see ``docs/exercises.md``."""
