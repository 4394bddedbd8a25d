"""Bundled sample timelines (ASCII) and GPU captures, shipped as package data.

``path(name)`` returns the filesystem path of a bundled sample.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

DEFAULT = "decode_step.txt"


def path(name: str = DEFAULT) -> Path:
    """Path of the bundled sample ``name`` (e.g. ``"decode_step.txt"``)."""
    return Path(str(resources.files(__name__).joinpath(name)))


def names() -> list[str]:
    """Names of the bundled samples (files, not folders), sorted."""
    root = resources.files(__name__)
    return sorted(
        p.name for p in root.iterdir() if p.is_file() and not p.name.startswith(("_", ".")) and p.name != "README.md"
    )
