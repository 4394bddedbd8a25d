"""The few ``args`` fields a timeline needs, decoded in one batch per trace.

Kineto ``args``: ``correlation`` (CUPTI/roctracer correlation id), ``device``,
``stream``, ``bytes`` (copies, memsets), ``External id`` (``external id`` in 2020
files), ``memcpy kind``/``kind`` and ``src kind``/``dst kind`` (copy direction and
pageable host memory). Other args stay raw bytes until the detail view asks.
"""

from __future__ import annotations

import dataclasses
from operator import attrgetter

import msgspec
import numpy as np

from .chrome_schema import KinetoArgs
from .kinds import copy_kind_of, is_pageable
from .model import CopyKind, Kind

__all__ = ["ArgColumns", "extract_args", "ARG_KINDS"]

#: Kinds whose args are decoded while loading (Python functions and generic slices are not).
ARG_KINDS = np.array([int(k) for k in (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.LAUNCH, Kind.SYNC_CALL,
                                       Kind.MEMCPY_CALL, Kind.RUNTIME, Kind.CPU_OP, Kind.ANNOTATION,
                                       Kind.GPU_ANNOTATION, Kind.SYNC_MARKER)], dtype=np.int8)
_COPY_KINDS = np.array([int(Kind.MEMCPY), int(Kind.MEMSET), int(Kind.MEMCPY_CALL)], dtype=np.int8)
_ARGS_LIST = msgspec.json.Decoder(list[KinetoArgs])
_ARGS_ONE = msgspec.json.Decoder(KinetoArgs)
_EMPTY = KinetoArgs()


@dataclasses.dataclass
class ArgColumns:
    """Per-event columns from args (-1 = absent)."""

    correlation: np.ndarray
    device: np.ndarray
    stream: np.ndarray
    bytes: np.ndarray
    external_id: np.ndarray
    copy_kind: np.ndarray
    pageable: np.ndarray

    @classmethod
    def empty(cls, n: int) -> "ArgColumns":
        m = lambda: np.full(n, -1, dtype=np.int64)  # noqa: E731
        return cls(m(), m(), m(), m(), m(), np.zeros(n, np.int8), np.zeros(n, bool))

    @classmethod
    def concat(cls, a: "ArgColumns", extra: int) -> "ArgColumns":
        b = cls.empty(extra)
        return cls(*(np.concatenate((getattr(a, f.name), getattr(b, f.name))) for f in dataclasses.fields(cls)))

    def take(self, idx) -> "ArgColumns":
        return ArgColumns(*(getattr(self, f.name)[idx] for f in dataclasses.fields(self)))


def _int_col(values: list) -> np.ndarray:
    """int64 column from decoded scalars; -1 for None or anything not an integer id."""
    types = set(map(type, values))
    if types <= {int}:
        try:
            return np.array(values, dtype=np.int64)
        except OverflowError:
            pass
    out = np.full(len(values), -1, dtype=np.int64)
    for i, v in enumerate(values):
        out[i] = _as_int(v)
    return out


def _as_int(v) -> int:
    if v is None or isinstance(v, bool):
        return -1
    if isinstance(v, int):
        return v if -(1 << 63) <= v < (1 << 63) else -1
    if isinstance(v, float):
        return int(v) if v == v and abs(v) < 9.2e18 and v.is_integer() else -1
    if isinstance(v, str):
        t = v.strip()
        try:
            return int(t, 0) if t.lower().startswith("0x") else int(t)
        except ValueError:
            return -1
    return -1


def _decode_batch(raws: list) -> list[KinetoArgs]:
    if not raws:
        return []
    buf = b"".join((b"[", b",".join(raws), b"]"))
    try:
        return _ARGS_LIST.decode(buf)
    except (msgspec.DecodeError, msgspec.ValidationError):
        pass
    out = []
    for r in raws:
        try:
            out.append(_ARGS_ONE.decode(r))
        except (msgspec.DecodeError, msgspec.ValidationError):
            out.append(_EMPTY)
    return out


def extract_args(raws: list, kind: np.ndarray, name_id: np.ndarray, names: list) -> ArgColumns:
    """Decode the args of events whose kind is in ``ARG_KINDS`` into columns.

    ``raws``: one ``msgspec.Raw`` per event; ``kind``: int8 kinds; ``name_id``/
    ``names``: event names, for the copy direction and pageable flag of Kineto copy
    names (``Memcpy HtoD (Pageable -> Device)``). One batched decode; an unusable
    args value gives -1s, never an error.
    """
    n = len(raws)
    cols = ArgColumns.empty(n)
    sel = np.flatnonzero(np.isin(kind, ARG_KINDS))
    if sel.size == 0:
        return cols
    sub = [raws[i] for i in sel.tolist()]
    decoded = _decode_batch(sub)
    del sub
    get = lambda f: list(map(attrgetter(f), decoded))  # noqa: E731
    cols.correlation[sel] = _int_col(get("correlation"))
    cols.device[sel] = _int_col(get("device"))
    cols.stream[sel] = _int_col(get("stream"))
    ext = _int_col(get("external_id"))
    old = _int_col(get("external_id_old"))
    cols.external_id[sel] = np.where(ext >= 0, ext, old)
    copies = np.flatnonzero(np.isin(kind[sel], _COPY_KINDS))
    for j in copies.tolist():
        a = decoded[j]
        i = int(sel[j])
        name = names[int(name_id[i])]
        name = name if isinstance(name, str) else str(name)
        b = _as_int(a.bytes)
        if b < 0:
            b = _as_int(a.size)
        cols.bytes[i] = b
        if kind[i] != Kind.MEMSET:
            cols.copy_kind[i] = int(copy_kind_of(name, a.memcpy_kind if a.memcpy_kind is not None else a.kind))
            cols.pageable[i] = is_pageable(name, a.src_kind, a.dst_kind)
    return cols
