"""``Interner``: the dense ids the loader's columns give categories, names and lanes.

A leaf (the standard library only): every stage of the Chrome loader interns with it
(``scan``, ``fastscan``, ``phases``, ``args``, ``parallel.transfer``), so none of them
imports another stage for it.
"""

from __future__ import annotations

__all__ = ["Interner"]


class Interner(dict):
    """value → dense id (0, 1, 2, ... in order of first sight), assigned on first
    lookup: ``ids[value]`` adds an unseen value."""

    def __missing__(self, key):
        v = self[key] = len(self)
        return v
