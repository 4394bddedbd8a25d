"""Columns from the few ``args`` fields a timeline needs (decoded with the events).

Kineto ``args``: ``correlation`` (CUPTI/roctracer correlation id), ``device``,
``stream``, ``bytes`` (copies, memsets), ``External id`` (``external id`` in 2020
files), ``memcpy kind``/``kind`` and ``src kind``/``dst kind`` (copy direction and
pageable host memory). Other args stay raw bytes until the detail view asks.
"""

from __future__ import annotations

import array
import dataclasses
from operator import attrgetter, itemgetter

import numpy as np

from gapscope.parsers.chrome.interner import Interner
from gapscope.parsers.kinds import copy_kind_of, is_pageable
from gapscope.parsers.model import Kind

__all__ = ["ArgColumns", "extract_args", "old_external_ids", "GPU_SIDE_KINDS", "COPY_KINDS"]

#: Kinds whose ``args.device``/``args.stream`` place a lane on a GPU.
GPU_SIDE_KINDS = np.array(
    [int(k) for k in (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.GPU_ANNOTATION, Kind.SYNC_MARKER)], dtype=np.int8
)
#: Kinds whose ``args`` give a copy's bytes, direction and pageable flag.
COPY_KINDS = np.array([int(Kind.MEMCPY), int(Kind.MEMSET), int(Kind.MEMCPY_CALL)], dtype=np.int8)


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
    def empty(cls, n: int) -> ArgColumns:
        m = lambda: np.full(n, -1, dtype=np.int64)  # noqa: E731
        return cls(m(), m(), m(), m(), m(), np.zeros(n, np.int8), np.zeros(n, bool))

    @classmethod
    def concat(cls, a: ArgColumns, extra: int) -> ArgColumns:
        """``a`` grown (extra > 0) or cut (extra < 0) by ``extra`` absent rows."""
        if extra <= 0:
            return a.take(slice(0, a.correlation.size + extra))
        b = cls.empty(extra)
        return cls(*(np.concatenate((getattr(a, f.name), getattr(b, f.name))) for f in dataclasses.fields(cls)))

    def take(self, idx) -> ArgColumns:
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


def _field_col(args: list, field: str) -> np.ndarray:
    """int64 column of one ``KinetoArgs`` field (-1 where absent or not an integer).
    The fast path is taken only when every value is an int: ``np.fromiter`` would
    truncate 93.5 to 93, where ``_as_int`` gives -1."""
    get = attrgetter(field)
    try:  # ``array('q')`` refuses floats and strings (``np.fromiter`` would truncate 93.5)
        return np.frombuffer(array.array("q", map(get, args)), dtype=np.int64)
    except (TypeError, OverflowError):
        return _int_col(list(map(get, args)))


def extract_args(
    args: list,
    kind: np.ndarray,
    name_id: np.ndarray,
    names: list,
    total: int | None = None,
    old_external_id: bool = True,
) -> ArgColumns:
    """Columns from the decoded ``KinetoArgs`` of each event.

    ``args``: one ``KinetoArgs`` per event (``NO_ARGS`` when the event had none);
    ``kind``: int8 kinds; ``name_id``/``names``: event names, for the copy direction
    and pageable flag of Kineto copy names (``Memcpy HtoD (Pageable -> Device)``).
    Values that are not integer ids give -1, never an error. The columns have
    ``total`` rows (default ``len(args)``); rows past ``len(args)`` stay absent.
    ``old_external_id``: also read the 2020 spelling ``external id``.
    """
    n = len(args)
    size = n if total is None else total
    if n == 0:
        return ArgColumns.empty(size)

    def grown(a: np.ndarray) -> np.ndarray:
        if size == n:
            return a
        out = np.empty(size, dtype=np.int64)
        out[:n] = a[:size]
        out[n:] = -1
        return out

    m = lambda: np.full(size, -1, dtype=np.int64)  # noqa: E731
    cols = ArgColumns(
        grown(_field_col(args, "correlation")),
        m(),
        m(),
        m(),
        np.zeros(0, np.int64),
        np.zeros(size, np.int8),
        np.zeros(size, bool),
    )
    gpu = np.isin(kind, GPU_SIDE_KINDS)
    if gpu.any():
        sel = np.flatnonzero(gpu)
        sub = list(itemgetter(*sel.tolist())(args)) if sel.size > 1 else [args[int(sel[0])]]
        cols.device[sel] = _field_col(sub, "device")
        cols.stream[sel] = _field_col(sub, "stream")
    ext = _field_col(args, "external_id")
    if old_external_id:
        old = _field_col(args, "external_id_old")
        ext = np.where(ext >= 0, ext, old)
    cols.external_id = grown(ext)
    rows = np.flatnonzero(np.isin(kind, COPY_KINDS))
    if rows.size:
        sub = [args[i] for i in rows.tolist()]
        b = _field_col(sub, "bytes")
        cols.bytes[rows] = np.where(b >= 0, b, _field_col(sub, "size"))
        moved = np.flatnonzero(kind[rows] != int(Kind.MEMSET))
        if moved.size:
            # the direction and pageable flag by distinct (name, kind, src, dst): copies
            # repeat a few of them (mtia_rank_0: 22k copies, 6 keys)
            keys = Interner()
            key_id = np.fromiter(
                map(keys.__getitem__, map(_copy_key, [sub[j] for j in moved.tolist()], name_id[rows[moved]].tolist())),
                dtype=np.int64,
                count=moved.size,
            )
            got = [_copy_of(key, names) for key in keys]
            cols.copy_kind[rows[moved]] = np.array([g[0] for g in got], dtype=np.int8)[key_id]
            cols.pageable[rows[moved]] = np.array([g[1] for g in got], dtype=bool)[key_id]
    return cols


def _copy_key(a, name_id: int) -> tuple:
    """What decides a copy's direction and pageable flag: (name id, type and value of
    its kind field, src and dst kinds). The kind field is the first present of
    ``memcpy_kind``, ``kind`` and ``direction`` (a string only: any JSON value may
    stand there)."""
    mk = a.memcpy_kind
    if mk is None:
        mk = a.kind
        if mk is None and isinstance(a.direction, str):
            mk = a.direction
    return (name_id, type(mk), mk, a.src_kind, a.dst_kind)


def _copy_of(key: tuple, names: list) -> tuple[int, bool]:
    """(``CopyKind`` int, pageable) of a ``_copy_key``."""
    name_id, _, mk, src_kind, dst_kind = key
    name = names[name_id]
    name = name if isinstance(name, str) else str(name)
    return int(copy_kind_of(name, mk)), is_pageable(name, src_kind, dst_kind)


def old_external_ids(args: list) -> np.ndarray:
    """int64 ``args["external id"]`` (the 2020 spelling; -1 where absent) of each
    decoded ``KinetoXArgs``: for a part of a list whose other parts decide that the
    old spelling is read (``chrome_scan.merge_all``)."""
    return _field_col(args, "external_id_old") if args else np.zeros(0, np.int64)
