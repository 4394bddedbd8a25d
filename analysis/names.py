"""Kernel and range names as a reader takes them in (no terminal escaping here).

C++ kernel names in Kineto and Nsight traces are demangled signatures (``void
at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, …>(int,
…)``), up to some thousands of characters. Profilers (Nsight Systems' "short name",
HTA's kernel tables) show them without the return type, the parameter list and the
namespaces, with nested template arguments folded: ``vectorized_elementwise_kernel<…>``.
The full name stays available wherever a short one is shown (one key or field away).
"""

from __future__ import annotations

import functools
import re

__all__ = ["short_kernel_name"]

_NAMESPACES = re.compile(r"\b(?:[A-Za-z_]\w*::)+")


def _drop_params(name: str) -> str:
    """Drop a trailing balanced ``(...)`` parameter list (C++ signature)."""
    if not name.endswith(")"):
        return name
    depth = 0
    for k in range(len(name) - 1, -1, -1):
        ch = name[k]
        if ch == ")":
            depth += 1
        elif ch == "(":
            depth -= 1
            if depth == 0:
                return name[:k].rstrip() if k > 0 else name
    return name


def _collapse_templates(name: str, keep_depth: int) -> str:
    """Replace template arguments nested deeper than ``keep_depth`` by ``…``."""
    out, depth = [], 0
    for ch in name:
        if ch == "<":
            depth += 1
            if depth == keep_depth + 1:
                out.append("<…")
            elif depth <= keep_depth:
                out.append(ch)
            continue
        if ch == ">" and depth > 0:
            depth -= 1
            if depth <= keep_depth:
                out.append(">")
            continue
        if depth <= keep_depth:
            out.append(ch)
    return "".join(out)


@functools.lru_cache(maxsize=4096)
def short_kernel_name(name: str, max_chars: int = 48) -> str:
    """``name`` (str, verbatim from the trace) shortened only when longer than
    ``max_chars``: without a ``void`` return type, the trailing parameter list and
    namespace qualifiers, with template arguments folded to ``<…>`` from the deepest
    level up until it fits, then cut with ``…``. A name that fits is returned as it
    is. Not made terminal-safe: surfaces still escape it. Cost: linear in the name, once
    per (name, max_chars): the result is remembered (a 5M-event trace asks for the same
    few hundred kernel names 16k times while grouping its gaps)."""
    s = str(name)
    if len(s) <= max_chars:
        return s
    t = s[5:] if s.startswith("void ") else s
    t = _NAMESPACES.sub("", _drop_params(t))
    for depth in (2, 1, 0):
        if len(t) <= max_chars:
            break
        t = _collapse_templates(t, depth)
    if len(t) > max_chars > 1:
        t = t[: max_chars - 1] + "…"
    return t
