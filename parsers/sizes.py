"""Sizes as people write them in environment variables: ``"64M"``, ``"2G"``, ``"1.5g"``.

A leaf (imports nothing of ours): ``gapscope.parsers.detect`` reads
``GAPSCOPE_MAX_TRACE_BYTES`` with it, ``gapscope.parsers.cache`` the cache's limits.
"""

from __future__ import annotations

import re

__all__ = ["parse_size"]

_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int | None:
    """``"123"``, ``"64M"``, ``"2G"``, ``"1.5g"`` (powers of 1024; an optional ``B`` or
    ``iB`` after the suffix) to bytes; None if not a size."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(?:i?[bB])?\s*", text)
    if not m:
        return None
    return int(float(m.group(1)) * _SUFFIX[m.group(2).upper()])
