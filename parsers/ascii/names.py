"""Name → kind table of ASCII timelines (see ``docs/ascii-timelines.md``).

A sketch names events in words (``tensor.item()``, ``launch matmul``, ``H2D 6 ms``),
not with Kineto categories. This table turns those words into the ``Kind`` (and copy
direction) that analysis trusts, the same way ``cat`` does for Kineto traces. Matching
is case-insensitive; the first rule that matches wins, in the order written below.

CPU text (in order):

1. launch call (``Kind.LAUNCH``): text starting with ``launch `` or naming
   ``cudaLaunchKernel`` / ``cuLaunchKernel`` / ``cudaGraphLaunch`` / ``hipLaunchKernel``.
2. sync call (``Kind.SYNC_CALL``): ``.item()``, ``item()``, ``synchronize``,
   ``print(``, ``.tolist()``, ``_local_scalar_dense``, ``is_nonzero``, the word ``wait``.
3. copy call (``Kind.MEMCPY_CALL``): ``.cpu()``, ``.numpy()``, ``np.array``,
   ``.tolist`` (D2H); ``.cuda()``, ``.to(``, ``tensor(``, ``from_numpy`` (H2D);
   ``H2D``/``HtoD``, ``D2H``/``DtoH``, ``memcpy``, ``copy_``.
4. host work: ``sample`` (``Kind.CPU_OP``: sampling runs as framework ops); ``tokenize``,
   ``detokenize``, ``json``, ``logging``/``log``, ``python``, ``dataloader``/``data``,
   ``collate``, ``callback`` (``Kind.PYTHON``). A CPU *range* (``X begin``/``X end``,
   ``[-- X --]``) that is not a call is a user annotation (``Kind.ANNOTATION``).
5. anything else on a CPU lane: ``Kind.PYTHON`` for points (uninstrumented Python work).

GPU text: ``H2D``/``HtoD`` → ``MEMCPY`` H2D, ``D2H``/``DtoH`` → ``MEMCPY`` D2H,
``D2D``/``DtoD`` → ``MEMCPY`` D2D, ``memcpy``/``copy`` → ``MEMCPY`` (direction unknown),
``memset`` → ``MEMSET``; everything else (matmul, attention, gemm, graph, kernel, ``k``)
→ ``KERNEL``.
"""

from __future__ import annotations

import re

from gapscope.parsers.model import CopyKind, Kind

__all__ = ["cpu_kind", "gpu_kind", "copy_direction", "is_host_word", "launch_target", "HOST_WORDS"]

_LAUNCH_RE = re.compile(r"^\s*launch\b|cudaLaunchKernel|cuLaunchKernel|cudaGraphLaunch|hipLaunchKernel", re.I)
_SYNC_RE = re.compile(r"\.?item\(\)|synchroni[sz]e|print\(|\.tolist\(\)|_local_scalar_dense|is_nonzero|\bwait\b", re.I)
_D2H_CALL_RE = re.compile(r"\.cpu\(|\.numpy\(\)|np\.array|\bD2H\b|\bDtoH\b", re.I)
_H2D_CALL_RE = re.compile(r"\.cuda\(|\.to\(|\btensor\(|from_numpy|\bH2D\b|\bHtoD\b", re.I)
_COPY_CALL_RE = re.compile(r"memcpy|copy_", re.I)
_SAMPLE_RE = re.compile(r"\bsampl(e|ing)", re.I)
#: Words that mark CPU text as host work (evidence of the "host" cause class).
HOST_WORDS = (
    "tokenize",
    "detokenize",
    "json",
    "logging",
    "log",
    "python",
    "sample",
    "sampling",
    "dataloader",
    "data",
    "collate",
    "callback",
)
_HOST_RE = re.compile(
    r"\b(tokeniz\w*|detokeniz\w*|json|log|logging|logger|python|sampl\w*|dataloader|data|collate|callback)\b",
    re.I,
)

_GPU_COPY = (
    (re.compile(r"\bH2D\b|\bHtoD\b", re.I), CopyKind.H2D),
    (re.compile(r"\bD2H\b|\bDtoH\b", re.I), CopyKind.D2H),
    (re.compile(r"\bD2D\b|\bDtoD\b", re.I), CopyKind.D2D),
    (re.compile(r"memcpy|\bcopy\b", re.I), CopyKind.UNKNOWN),
)
_MEMSET_RE = re.compile(r"memset", re.I)
#: Any word that can make GPU text other than a kernel (a prefilter for ``gpu_kind``).
_GPU_NOT_KERNEL_RE = re.compile(r"h2d|htod|d2h|dtoh|d2d|dtod|memcpy|copy|memset", re.I)


def copy_direction(text: str) -> CopyKind:
    """Copy direction named by CPU or GPU ``text`` (``CopyKind.NONE`` when none).

    D2H words (``.cpu()``, ``.numpy()``, ``np.array``, ``D2H``) win over H2D words, since
    ``np.array ← tensor.cpu()`` names the host side of a device-to-host copy.
    """
    if _D2H_CALL_RE.search(text):
        return CopyKind.D2H
    if _H2D_CALL_RE.search(text):
        return CopyKind.H2D
    for rx, ck in _GPU_COPY:
        if rx.search(text):
            return ck
    return CopyKind.NONE


def cpu_kind(text: str, *, span: bool = False) -> Kind:
    """Kind of a CPU event named ``text`` (rules 1-5 of the module docstring).

    ``span`` is True for ranges (``X begin``/``X end``, bracketed lane-art spans): those
    are annotations unless the text names a call.
    """
    if _LAUNCH_RE.search(text):
        return Kind.LAUNCH
    if _SYNC_RE.search(text):
        return Kind.SYNC_CALL
    if _D2H_CALL_RE.search(text) or _H2D_CALL_RE.search(text) or _COPY_CALL_RE.search(text):
        return Kind.MEMCPY_CALL
    if span:
        return Kind.ANNOTATION
    if _SAMPLE_RE.search(text):
        return Kind.CPU_OP
    return Kind.PYTHON


def is_host_word(text: str) -> bool:
    """True when ``text`` names known host work (tokenize, json, logging, python, ...)."""
    return _HOST_RE.search(text) is not None


def gpu_kind(text: str) -> tuple[Kind, CopyKind]:
    """(kind, copy direction) of a GPU event named ``text`` (GPU table above)."""
    if _GPU_NOT_KERNEL_RE.search(text) is None:
        return Kind.KERNEL, CopyKind.NONE
    for rx, ck in _GPU_COPY:
        if rx.search(text):
            return Kind.MEMCPY, ck
    if _MEMSET_RE.search(text):
        return Kind.MEMSET, CopyKind.NONE
    return Kind.KERNEL, CopyKind.NONE


def launch_target(text: str) -> str:
    """What a launch line launches: ``launch fused decode graph`` → ``fused decode graph``.

    Returns "" when the text names no target (``cudaLaunchKernel``).
    """
    m = re.match(r"^\s*launch\s+(.*)$", text, re.I)
    return m.group(1).strip() if m else ""
