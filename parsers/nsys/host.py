"""CPU-thread activity of an Nsight Systems export, one ``Block`` per table.

- ``CUPTI_ACTIVITY_KIND_RUNTIME``: CUDA runtime and driver calls, named without the
  export's ABI suffix (``cudaLaunchKernel_v7000`` → ``cudaLaunchKernel``) and sorted
  into launch / sync / memcpy / other runtime calls by that name
  (``gapscope.parsers.kinds.runtime_kind``), with their ``correlationId``: the launch
  link of the GPU ops they enqueued. Rows of other event classes that repeat a call
  already listed (``CUDA backtrace`` rows, written with ``--cudabacktrace``) are left
  out with a warning.
- ``NVTX_EVENTS``: push/pop and start/end ranges → ``Kind.ANNOTATION`` on the thread
  that opened them (steps are found from their names), marks → ``Kind.INSTANT``; text
  from the ``text`` column or the registered string (``textId`` → ``StringIds``);
  ranges never closed are drawn to the end of the capture.
- ``OSRT_API``: OS runtime calls (``read``, ``ioctl``, ``pthread_cond_wait``...) →
  host work (``Kind.OTHER``) on their thread.
- ``PROFILER_OVERHEAD``: Nsight's own work on the application's threads →
  ``Kind.OTHER`` named ``profiler overhead: <what>``, so a gap it explains says so.
"""

from __future__ import annotations

import numpy as np

from gapscope.parsers.kinds import runtime_kind
from gapscope.parsers.model import Kind
from gapscope.parsers.nsys.blocks import Block, Context
from gapscope.parsers.nsys.names import distinct
from gapscope.parsers.nsys.schema import (
    API_CLASSES,
    DOMAIN,
    MARK,
    NVTX,
    OSRT,
    OVERHEAD,
    RANGE,
    RUNTIME,
    api_name,
    pid_of,
)

__all__ = ["read_runtime", "read_nvtx", "read_osrt", "read_overhead", "Calls"]


class Calls:
    """Correlation id → API call name, per process (for naming sync records)."""

    def __init__(self, correlation: np.ndarray, pid: np.ndarray, name: np.ndarray) -> None:
        key = (pid.astype(np.int64) << 32) | (correlation & 0xFFFFFFFF)
        ok = correlation >= 0
        order = np.argsort(key[ok], kind="stable")
        self._key = key[ok][order]
        self._name = name[ok][order]

    def __call__(self, correlation: np.ndarray, pid: np.ndarray) -> np.ndarray:
        """int32 name id of the call per row (-1 when none has that id)."""
        out = np.full(correlation.shape[0], -1, dtype=np.int32)
        if self._key.size == 0 or correlation.size == 0:
            return out
        key = (pid.astype(np.int64) << 32) | (correlation & 0xFFFFFFFF)
        pos = np.minimum(np.searchsorted(self._key, key), self._key.size - 1)
        hit = (self._key[pos] == key) & (correlation >= 0)
        out[hit] = self._name[pos[hit]]
        return out


def _thread_columns(
    ctx: Context, table: str, extra: list[str], what: str, times: bool = True
) -> tuple[list[np.ndarray], np.ndarray | None] | None:
    """(start, dur (or the raw end when not ``times``), globalTid, extra columns..., rowid)
    of a table of thread events, or None when it is missing or has no times."""
    cols = set(ctx.db.columns(table))
    if not cols:
        return None
    missing = [c for c in ("start", "end") if c not in cols and (times or c == "start")]
    if missing:
        ctx.warn(table, f"{table} has no {', '.join(missing)} column: its {what} are not read")
        return None
    if "globalTid" not in cols:
        ctx.warn(f"{table}.globalTid", f"{table} has no globalTid column: its {what} are drawn on one lane")
    gtid = "globalTid" if "globalTid" in cols else "NULL"
    second = "end - start" if times else ("end" if "end" in cols else "NULL")
    high = f"{gtid} >> 24"
    first = ctx.first_value(table, high)
    values, rowid, (differing,) = ctx.db.int_columns(
        table, ["start", second, f"{gtid} & 16777215"] + extra, aggregates=[ctx.same_check(high, first)]
    )
    values[2] = ctx.global_tids(table, values[2], first, differing)
    return values, rowid


def _name_and_class(cols: set, name_col: str = "nameId") -> str:
    """SQL: the name id and the event class in one value (class in the low 8 bits)."""
    cls = "(eventClass & 255)" if "eventClass" in cols else "0"
    return f"(({name_col} << 8) | {cls})" if name_col in cols else f"(-256 | {cls})"


def read_runtime(ctx: Context) -> Block | None:
    """``CUPTI_ACTIVITY_KIND_RUNTIME`` → launch / sync / memcpy / other runtime calls."""
    cols = set(ctx.db.columns(RUNTIME))
    corr = "correlationId" if "correlationId" in cols else "-1"
    if cols and corr == "-1":
        ctx.warn(
            f"{RUNTIME}.correlationId",
            f"{RUNTIME} has no correlationId column: GPU ops are not linked to the calls that launched them",
        )
    got = _thread_columns(ctx, RUNTIME, [corr, _name_and_class(cols)], "CUDA API calls")
    if got is None:
        return None
    (start, dur, gtid, correlation, name_class), rowid = got
    correlation[correlation == 0] = -1  # CUPTI numbers calls from 1: 0 is "none"
    classes = ctx.enums.event_classes()
    name, _, _ = ctx.names.of_string_ids(name_class >> 8, transform=api_name)
    # kind and class per distinct (name, class) value: no per-row work
    nc_uniq, nc_inv = distinct(name_class)
    kind_lut = np.array(
        [int(runtime_kind(api_name(ctx.names.strings.get(v >> 8) or ""))) for v in nc_uniq.tolist()], dtype=np.int8
    )
    api_lut = np.array([classes.get(v & 255, f"eventClass {v & 255}") in API_CLASSES for v in nc_uniq.tolist()])
    kind = kind_lut[nc_inv]
    pid = pid_of(gtid)
    keep = ctx.check_times(RUNTIME, start, dur)
    api = api_lut[nc_inv]
    if not api.all():
        key = (pid << 32) | (correlation & 0xFFFFFFFF)
        repeat = ~api & np.isin(key, key[api]) & (correlation >= 0)
        for v in np.unique(name_class[repeat] & 255).tolist():
            n = int((repeat & ((name_class & 255) == v)).sum())
            ctx.warn(
                f"{RUNTIME}.eventClass",
                f"{n} {RUNTIME} row(s) of event class {v} "
                f"({classes.get(v, 'unknown')}) repeat API calls listed already; "
                "skipped",
            )
            ctx.ignore(f"{RUNTIME} {classes.get(v, f'eventClass {v}')} rows", n)
        keep &= ~repeat
    b = Block(RUNTIME, start, dur, kind, name, ctx.lanes.cpu(gtid), rowid, correlation, pid)
    return b if keep.all() else b.take(keep)


def read_nvtx(ctx: Context) -> tuple[Block | None, dict[int, str]]:
    """``NVTX_EVENTS`` → annotations and marks; also the domain names by ``domainId``."""
    db = ctx.db
    cols = set(db.columns(NVTX))
    if not cols:
        return None, {}
    if "eventType" not in cols or "start" not in cols:
        ctx.warn(NVTX, f"{NVTX} has no eventType or start column: NVTX ranges are not read")
        return None, {}
    domain = "domainId" if "domainId" in cols else "-1"
    got = _thread_columns(ctx, NVTX, ["eventType", domain], "NVTX ranges", times=False)
    # checked above: the table has columns and a start column, all that _thread_columns
    # needs without times (the end column may be missing)
    assert got is not None
    (start, end_ns, gt, etype, dom), rowid = got
    text_sql = "n.text" if "text" in cols else "NULL"
    join = ""
    if "textId" in cols and db.has("StringIds"):
        text_sql = f"coalesce({text_sql}, s.value)"
        join = " LEFT JOIN StringIds AS s ON s.id = n.textId"
    texts = db.texts(f'SELECT {text_sql} FROM "{NVTX}" AS n{join} ORDER BY n.rowid', what=NVTX)
    if len(texts) != start.shape[0]:
        ctx.warn(NVTX, f"{NVTX} changed while read; NVTX ranges are not read")
        return None, {}
    roles = ctx.enums.nvtx_roles()
    e_uniq, e_inv = np.unique(etype, return_inverse=True)
    codes = {RANGE: 1, MARK: 2, DOMAIN: 3}
    role = np.array([codes.get(roles.get(int(e), ""), 0) for e in e_uniq.tolist()], dtype=np.int8)[e_inv]
    is_range, is_mark, is_domain = role == 1, role == 2, role == 3
    domains = {
        int(d): t
        for d, t in zip(dom[is_domain].tolist(), [texts[i] for i in np.flatnonzero(is_domain)])
        if isinstance(t, str)
    }
    ctx.ignore(f"{NVTX} records other than ranges, marks and domains", int((role == 0).sum()))
    keep = is_range | is_mark
    open_ended = is_range & (end_ns < 0)
    dur = np.where(is_range & ~open_ended, end_ns - start, 0)
    name = ctx.names.intern_all([t if isinstance(t, str) else "" for t in texts])
    unnamed = name == ctx.names.intern("")
    if unnamed.any():
        name[unnamed & is_range] = ctx.names.intern("(unnamed NVTX range)")
        name[unnamed & ~is_range] = ctx.names.intern("(unnamed NVTX mark)")
    kind = np.where(is_range, int(Kind.ANNOTATION), int(Kind.INSTANT)).astype(np.int8)
    b = Block(NVTX, start, dur, kind, name, ctx.lanes.cpu(gt), rowid, open_ended=open_ended)
    keep &= ctx.check_times(NVTX, start, dur)
    return b.take(keep), domains


def read_osrt(ctx: Context) -> Block | None:
    """``OSRT_API`` → host work (``Kind.OTHER``); the start/finish markers are left out."""
    cols = set(ctx.db.columns(OSRT))
    got = _thread_columns(ctx, OSRT, [_name_and_class(cols)], "OS runtime calls")
    if got is None:
        return None
    (start, dur, gtid, name_class), rowid = got
    classes = ctx.enums.event_classes()
    name, _, _ = ctx.names.of_string_ids(name_class >> 8)
    cls = name_class & 255
    marker = np.isin(cls, [k for k, v in classes.items() if v in ("OSRT start", "OSRT finish")])
    ctx.ignore(f"{OSRT} start/finish markers", int(marker.sum()))
    keep = ~marker & ctx.check_times(OSRT, start, dur)
    b = Block(OSRT, start, dur, np.full(start.shape[0], int(Kind.OTHER), np.int8), name, ctx.lanes.cpu(gtid), rowid)
    return b.take(keep)


def read_overhead(ctx: Context) -> Block | None:
    """``PROFILER_OVERHEAD`` → ``Kind.OTHER`` named ``profiler overhead: <what>``."""
    cols = set(ctx.db.columns(OVERHEAD))
    got = _thread_columns(ctx, OVERHEAD, ["nameId" if "nameId" in cols else "-1"], "profiler overhead ranges")
    if got is None:
        return None
    (start, dur, gtid, name_id), rowid = got
    name, _, _ = ctx.names.of_string_ids(name_id, transform=lambda s: f"profiler overhead: {s}")
    keep = ctx.check_times(OVERHEAD, start, dur)
    b = Block(OVERHEAD, start, dur, np.full(start.shape[0], int(Kind.OTHER), np.int8), name, ctx.lanes.cpu(gtid), rowid)
    return b.take(keep)
