"""What an Nsight Systems SQLite export holds, whatever its version.

Sources: the Nsight Systems "SQLite Export Schema Reference" and the real exports of
2021-2025 (``shared/traces/public/extrap``, ``nvfuser``): schema 2.x has
``EXPORT_META_DATA`` and no enum tables, 3.x has ``META_DATA_EXPORT`` and ``ENUM_*``
tables, exports from 2021 have neither. Enums are read from the file's ``ENUM_*``
table when it has one, else from the tables below (Nsight's own numbering, which is not
CUPTI's for memory kinds: 0 is pageable). Kineto's names are used where Kineto names
the same thing (``Memcpy HtoD (Pageable -> Device)``, ``Stream Sync``), so a diagnosis
reads the same on both.

Ids: ``globalTid`` / ``globalPid`` are serialized ids, the process id in bits 24-47
and the thread id in bits 0-23 (the export documentation's
``globalTid / 0x1000000 % 0x1000000`` and ``globalTid % 0x1000000``).
"""

from __future__ import annotations

import re

import numpy as np

from gapscope.parsers.model import CopyKind

__all__ = [
    "KERNEL",
    "MEMCPY",
    "MEMSET",
    "RUNTIME",
    "SYNC",
    "NVTX",
    "OSRT",
    "OVERHEAD",
    "CUDA_TABLES",
    "NSIGHT_MARKER_TABLES",
    "INVALID_ID",
    "pid_of",
    "tid_of",
    "api_name",
    "Enums",
    "export_info",
    "SYNC_NAMES",
    "sync_name_of_call",
    "RANGE",
    "MARK",
    "DOMAIN",
    "TESTED_SCHEMA_MAJOR",
    "API_CLASSES",
]

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
SYNC = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
NVTX = "NVTX_EVENTS"
OSRT = "OSRT_API"
OVERHEAD = "PROFILER_OVERHEAD"
#: Tables of CUDA trace; an export with none of them was captured without ``--trace=cuda``.
CUDA_TABLES = (KERNEL, MEMCPY, MEMSET, RUNTIME, SYNC)
#: Any of these (or a ``CUPTI_ACTIVITY_KIND_*`` table) marks a file as an Nsight export.
NSIGHT_MARKER_TABLES = (
    "StringIds",
    "ThreadNames",
    "TARGET_INFO_GPU",
    "META_DATA_EXPORT",
    "EXPORT_META_DATA",
    NVTX,
    OSRT,
    "TARGET_INFO_SESSION_START_TIME",
)
#: ``CUPTI_SYNCHRONIZATION_INVALID_VALUE`` / ``CUPTI_INVALID_STREAM_ID``: "not applicable".
INVALID_ID = 0xFFFFFFFF
#: Export schema majors this reader was checked against (2.x of 2022, 3.x of 2023-2025).
TESTED_SCHEMA_MAJOR = (2, 3)


def pid_of(global_id: np.ndarray) -> np.ndarray:
    """int64 process ids of serialized ``globalTid``/``globalPid`` values."""
    return (np.asarray(global_id, dtype=np.int64) >> 24) & 0xFFFFFF


def tid_of(global_tid: np.ndarray) -> np.ndarray:
    """int64 thread ids of serialized ``globalTid`` values."""
    return np.asarray(global_tid, dtype=np.int64) & 0xFFFFFF


_API_VERSION = re.compile(r"_v\d{4,5}$")


def api_name(name: str) -> str:
    """A CUDA API name without the ABI version suffix the export adds
    (``cudaLaunchKernel_v7000`` → ``cudaLaunchKernel``, as Kineto and the CUDA
    documentation name it; ``cuGetProcAddress_v2`` is kept: ``_v2`` is part of it)."""
    return _API_VERSION.sub("", name)


# ------------------------------------------------------------------ enumerations
#: ``copyKind`` (``ENUM_CUDA_MEMCPY_OPER``; CUPTI's ``CUpti_ActivityMemcpyKind``).
_MEMCPY_BY_ID = {
    0: "UNKNOWN",
    1: "HTOD",
    2: "DTOH",
    3: "HTOA",
    4: "ATOH",
    5: "ATOA",
    6: "ATOD",
    7: "DTOA",
    8: "DTOD",
    9: "HTOH",
    10: "PTOP",
    11: "UVM_HTOD",
    12: "UVM_DTOH",
    13: "UVM_DTOD",
}
#: Enum word → (Kineto's label, ``CopyKind``). Array copies count with the device side.
_MEMCPY_WORDS = {
    "HTOD": ("HtoD", CopyKind.H2D),
    "DTOH": ("DtoH", CopyKind.D2H),
    "HTOA": ("HtoA", CopyKind.H2D),
    "ATOH": ("AtoH", CopyKind.D2H),
    "ATOA": ("AtoA", CopyKind.D2D),
    "ATOD": ("AtoD", CopyKind.D2D),
    "DTOA": ("DtoA", CopyKind.D2D),
    "DTOD": ("DtoD", CopyKind.D2D),
    "HTOH": ("HtoH", CopyKind.H2H),
    "PTOP": ("PtoP", CopyKind.P2P),
}
#: ``srcKind``/``dstKind``/``memKind`` (``ENUM_CUDA_MEM_KIND``, Nsight's numbering).
_MEM_KIND_BY_ID = {
    0: "Pageable",
    1: "Pinned",
    2: "Device",
    3: "Array",
    4: "Managed",
    5: "Device Static",
    6: "Managed Static",
    7: "Unknown",
}
#: ``syncType`` (``ENUM_CUPTI_SYNC_TYPE``) → Kineto's name of the ``cuda_sync`` record.
SYNC_NAMES = {0: "Unknown Sync", 1: "Event Sync", 2: "Stream Wait Event", 3: "Stream Sync", 4: "Context Sync"}
_SYNC_WORDS = (
    ("STREAM_WAIT", "Stream Wait Event"),
    ("STREAM_SYNC", "Stream Sync"),
    ("EVENT_SYNC", "Event Sync"),
    ("CONTEXT_SYNC", "Context Sync"),
)
_SYNC_BY_CALL = {
    "cudaStreamSynchronize": "Stream Sync",
    "cuStreamSynchronize": "Stream Sync",
    "cudaDeviceSynchronize": "Context Sync",
    "cudaThreadSynchronize": "Context Sync",
    "cuCtxSynchronize": "Context Sync",
    "cudaEventSynchronize": "Event Sync",
    "cuEventSynchronize": "Event Sync",
    "cudaStreamWaitEvent": "Stream Wait Event",
    "cuStreamWaitEvent": "Stream Wait Event",
}
#: NVTX ``eventType`` (``ENUM_NSYS_EVENT_TYPE``): what each is to the timeline.
RANGE, MARK, DOMAIN = "range", "mark", "domain"
_NVTX_BY_ID = {59: RANGE, 60: RANGE, 70: RANGE, 71: RANGE, 34: MARK, 65: MARK, 75: DOMAIN}
_NVTX_BY_NAME = {
    "NvtxPushPopRange": RANGE,
    "NvtxStartEndRange": RANGE,
    "NvtxtPushPopRange": RANGE,
    "NvtxtStartEndRange": RANGE,
    "NvtxMark": MARK,
    "NvtxtMark": MARK,
    "NvtxDomainCreate": DOMAIN,
}
#: ``eventClass`` of ``CUPTI_ACTIVITY_KIND_RUNTIME`` / ``OSRT_API`` (``ENUM_NSYS_EVENT_CLASS``).
_EVENT_CLASS_BY_ID = {
    0: "CUDA runtime",
    1: "CUDA driver",
    26: "CUDA API",
    27: "OSRT runtime",
    31: "OSRT start",
    32: "OSRT finish",
    67: "CUDA backtrace",
}
#: Event classes that are API calls (the rest duplicate or frame them).
API_CLASSES = frozenset({"CUDA runtime", "CUDA driver", "CUDA API", "OSRT runtime"})


def sync_name_of_call(call: str) -> str | None:
    """Kineto's sync-record name for the API call that made it (``cudaStreamSynchronize``
    → ``Stream Sync``), or None for other calls."""
    return _SYNC_BY_CALL.get(call)


class Enums:
    """The file's enumerations, with the built-in tables where it has none.

    Built from ``db`` (a ``gapscope.parsers.nsys.sql.Database``); every lookup takes an
    int64 array of codes and returns numpy lookup results, never a per-row loop.
    """

    def __init__(self, db) -> None:
        self._db = db
        self._cache: dict[str, dict[int, str]] = {}

    def _table(self, name: str, column: str = "name") -> dict[int, str]:
        got = self._cache.get(name + column)
        if got is None:
            got = {}
            if column in self._db.columns(name) and "id" in self._db.columns(name):
                for i, v in self._db.rows(f'SELECT id, "{column}" FROM "{name}"', what=name):
                    if isinstance(i, int) and isinstance(v, str):
                        got[i] = v
            self._cache[name + column] = got
        return got

    def memcpy(self, codes: np.ndarray) -> tuple[list[str], np.ndarray, np.ndarray]:
        """(label per distinct code, ``CopyKind`` int8 per row, index into the labels
        per row) for ``copyKind`` codes."""
        names = self._table("ENUM_CUDA_MEMCPY_OPER") or {k: "CUDA_MEMCPY_KIND_" + v for k, v in _MEMCPY_BY_ID.items()}
        uniq, inv = np.unique(codes, return_inverse=True)
        labels, kinds = [], []
        for c in uniq.tolist():
            word = names.get(c, "").upper()
            hit = next((v for w, v in _MEMCPY_WORDS.items() if word.endswith(w)), ("Unknown", CopyKind.UNKNOWN))
            labels.append(hit[0])
            kinds.append(int(hit[1]))
        return labels, np.array(kinds, dtype=np.int8)[inv], inv

    def mem_kinds(self) -> dict[int, str]:
        """Memory kind code → Kineto's label (``Pageable``, ``Pinned``, ``Device``...)."""
        labels = self._table("ENUM_CUDA_MEM_KIND", "label")
        if not labels:
            return dict(_MEM_KIND_BY_ID)
        return {k: v for k, v in labels.items()}

    def sync_names(self) -> dict[int, str]:
        """``syncType`` code → Kineto's record name."""
        names = self._table("ENUM_CUPTI_SYNC_TYPE")
        if not names:
            return dict(SYNC_NAMES)
        out = {}
        for k, v in names.items():
            up = v.upper()
            out[k] = next((lab for w, lab in _SYNC_WORDS if w in up), "Unknown Sync")
        return out

    def nvtx_roles(self) -> dict[int, str]:
        """NVTX ``eventType`` code → ``RANGE``, ``MARK`` or ``DOMAIN`` (others absent)."""
        names = self._table("ENUM_NSYS_EVENT_TYPE")
        if not names:
            return dict(_NVTX_BY_ID)
        out = {k: _NVTX_BY_NAME[v] for k, v in names.items() if v in _NVTX_BY_NAME}
        return out or dict(_NVTX_BY_ID)

    def event_classes(self) -> dict[int, str]:
        """``eventClass`` code → label (``CUDA runtime``, ``CUDA backtrace``...)."""
        labels = self._table("ENUM_NSYS_EVENT_CLASS", "label")
        out = dict(_EVENT_CLASS_BY_ID)
        out.update(labels)
        return out


def export_info(db) -> dict[str, str]:
    """``EXPORT_*`` name → value from ``META_DATA_EXPORT`` (3.x) or ``EXPORT_META_DATA``
    (2.x); empty for the exports of 2021, which have neither."""
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        cols = db.columns(table)
        if "name" in cols and "value" in cols:
            return {
                str(k): str(v)
                for k, v in db.rows(f'SELECT name, value FROM "{table}"', what=table)
                if k is not None and v is not None
            }
    return {}
