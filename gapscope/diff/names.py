"""Kernel and op names normalised for matching across two traces.

Two captures of the same program name the same kernel differently: template arguments
change with a dtype or a tile choice (``gemm<float, 128>`` vs ``gemm<half, 64>``), a
parameter list may or may not be recorded (``computeOffsetsKernel`` vs
``computeOffsetsKernel(ComputeOffsetsParams)``), and addresses or counters are baked
into some names (``triton_poi_fused_add_0``, ``0x7f3a…``). ``family`` keeps what names
the work: the qualified name without ``void``, template arguments, parameter list,
hex addresses and digits.
"""

from __future__ import annotations

import re

import numpy as np

__all__ = ["family", "families_of"]

_HEX = re.compile(r"0x[0-9a-fA-F]+")
_DIGITS = re.compile(r"\d+")
_SPACES = re.compile(r"\s+")


def _drop_balanced(s: str, open_ch: str, close_ch: str) -> str:
    """``s`` without every balanced ``open_ch … close_ch`` part (any depth); an
    unbalanced closing character is kept as text."""
    out, depth = [], 0
    for ch in s:
        if ch == open_ch:
            depth += 1
        elif ch == close_ch and depth:
            depth -= 1
        elif not depth:
            out.append(ch)
    return "".join(out) if depth == 0 else s


def family(name: str) -> str:
    """The normalised name of a kernel or op (``str`` in, ``str`` out).

    ``void at::native::vectorized_elementwise_kernel<4, AddFunctor<float>>(int, …)``
    → ``at::native::vectorized_elementwise_kernel``; ``sm80_gemm_128x64`` →
    ``sm#_gemm_#x#``; ``Memcpy HtoD (Pageable -> Device)`` → ``Memcpy HtoD``. A name
    that would become empty is kept (made lower-case, spaces collapsed) so it still
    matches itself.
    """
    s = str(name).strip()
    if s.startswith("void "):
        s = s[5:]
    s = _drop_balanced(s, "(", ")")
    s = _drop_balanced(s, "<", ">")
    s = _HEX.sub("#", s)
    s = _DIGITS.sub("#", s)
    s = _SPACES.sub(" ", s).strip()
    return s or _SPACES.sub(" ", str(name)).strip()


def families_of(names: tuple[str, ...], name_ids: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Family id per element of ``name_ids`` (int64 array of ids into ``names``) and the
    family strings (index = id). Each distinct name is normalised once."""
    ids = np.asarray(name_ids, dtype=np.int64)
    uniq, inv = np.unique(ids, return_inverse=True)
    fam_of_uniq = [family(names[int(k)]) for k in uniq]
    labels = sorted(set(fam_of_uniq))
    index = {f: k for k, f in enumerate(labels)}
    per_uniq = np.array([index[f] for f in fam_of_uniq], dtype=np.int64)
    return (per_uniq[inv] if ids.size else np.zeros(0, np.int64)), labels
