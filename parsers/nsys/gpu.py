"""GPU activity of an Nsight Systems export: kernels, copies, memsets and the
synchronization records (``CUPTI_ACTIVITY_KIND_*``), one ``Block`` per table.

- Kernels: named by ``demangledName`` (the full name, as Kineto names them; the short
  and mangled names stay in the row, see ``args_of``), else ``shortName``.
- Copies: ``bytes``, direction from ``copyKind``, pageable when the source or the
  destination memory kind is pageable; named as Kineto names them,
  ``Memcpy HtoD (Pageable -> Device)``. Memsets: ``Memset (Device)``.
- Synchronization records: ``Kind.SYNC_MARKER`` (a wait, never GPU work) named as
  Kineto's ``cuda_sync`` records (``Stream Sync``, ``Context Sync``, ``Event Sync``,
  ``Stream Wait Event``) after the API call that made them (by correlation id), and
  after ``syncType`` only when that call is not in the export: the real exports of
  2021, 2022 and 2025 number ``syncType`` three different ways (a 2022
  ``cudaEventSynchronize`` is 2, a 2025 ``cudaStreamSynchronize`` is 2 too, while the
  2025 file's own ``ENUM_CUPTI_SYNC_TYPE`` says 2 is a stream wait). Their ``deviceId``
  is not trusted either (see ``_sync_devices``).

Every read is one aggregate query per block of rows (``sql.Database.int_columns``).
"""

from __future__ import annotations

import numpy as np

from gapscope.parsers.model import CopyKind, Kind
from gapscope.parsers.nsys.blocks import Block, Context
from gapscope.parsers.nsys.lanes import DEVICE_SHIFT, MAX_DEVICE, PID_SHIFT
from gapscope.parsers.nsys.schema import INVALID_ID, KERNEL, MEMCPY, MEMSET, SYNC, sync_name_of_call

__all__ = ["read_kernels", "read_memcpy", "read_memset", "read_sync"]


def _common(ctx: Context, table: str, extra: list[str], what: str, resolve=None) -> tuple | None:
    """(start, dur, lane, pid, correlation, extra columns, rowid) of a GPU activity
    table, or None when it is missing or lacks its times; warns about missing columns.
    ``resolve(packed keys, extra columns)``: rewrites the packed lane keys first."""
    cols = set(ctx.db.columns(table))
    if not cols:
        return None
    missing = [c for c in ("start", "end", "deviceId", "streamId") if c not in cols]
    if missing:
        ctx.warn(table, f"{table} has no {', '.join(missing)} column: its {what} are not read")
        return None
    corr = "correlationId" if "correlationId" in cols else "-1"
    if corr == "-1":
        ctx.warn(
            f"{table}.correlationId",
            f"{table} has no correlationId column: its {what} are not linked to the API calls that launched them",
        )
    gpid = "globalPid" if "globalPid" in cols else "NULL"
    pid_expr = f"(({gpid} >> 24) & 4194303)"
    exprs = ["start", "end - start", f"streamId & {INVALID_ID}", corr] + extra
    d0, p0 = ctx.first_value(table, "deviceId"), ctx.first_value(table, pid_expr)
    aggs = [ctx.same_check("deviceId", d0), ctx.same_check(pid_expr, p0)]
    values, rowid, (d_differ, p_differ) = ctx.db.int_columns(table, exprs, aggregates=aggs)
    start, dur, stream, correlation = values[:4]
    correlation[correlation == 0] = -1  # CUPTI numbers calls from 1: 0 is "none"
    device = ctx.one_or_column(table, "deviceId", d0, d_differ)
    if int(np.max(device, initial=0)) > MAX_DEVICE:
        ctx.warn(
            f"{table}.deviceId",
            f"{table}: device ids above {MAX_DEVICE} (up to {int(np.max(device))}) are read as device {MAX_DEVICE}",
        )
    device = np.clip(device, 0, MAX_DEVICE)
    pid = ctx.one_or_column(table, pid_expr, p0, p_differ)
    key = (
        (np.asarray(device, np.int64) << DEVICE_SHIFT)
        | (np.asarray(pid, np.int64) << PID_SHIFT)
        | (stream & INVALID_ID)
    )
    if resolve is not None:
        key = resolve(key, values[4:])
    lane, pid = ctx.lanes.gpu(key)
    return start, dur, lane, pid, correlation, values[4:], rowid


def _block(ctx: Context, table: str, got: tuple, kind: Kind, name: np.ndarray, **extra) -> Block:
    start, dur, lane, pid, correlation, _, rowid = got
    b = Block(
        table, start, dur, np.full(start.shape[0], int(kind), np.int8), name, lane, rowid, correlation, pid, **extra
    )
    keep = ctx.check_times(table, start, dur)
    return b if keep.all() else b.take(keep)


def read_kernels(ctx: Context) -> Block | None:
    """``CUPTI_ACTIVITY_KIND_KERNEL`` → ``Kind.KERNEL``."""
    cols = set(ctx.db.columns(KERNEL))
    names: list[str] = [c for c in ("demangledName", "shortName", "mangledName") if c in cols]
    got = _common(ctx, KERNEL, [f"coalesce({', '.join(names)})" if len(names) > 1 else (names or ["-1"])[0]], "kernels")
    if got is None:
        return None
    if not names:
        ctx.warn(f"{KERNEL}.demangledName", f"{KERNEL} has no name column: kernels are unnamed")
    name_ids, _, _ = ctx.names.of_string_ids(got[5][0])
    return _block(ctx, KERNEL, got, Kind.KERNEL, name_ids)


def read_memcpy(ctx: Context) -> Block | None:
    """``CUPTI_ACTIVITY_KIND_MEMCPY`` → ``Kind.MEMCPY`` with bytes, direction, pageable."""
    cols = set(ctx.db.columns(MEMCPY))
    extra = [c if c in cols else "-1" for c in ("bytes", "copyKind", "srcKind", "dstKind")]
    got = _common(ctx, MEMCPY, extra, "copies")
    if got is None:
        return None
    nbytes, copy_kind, src, dst = got[5]
    labels, direction, which = ctx.enums.memcpy(copy_kind)
    mem = ctx.enums.mem_kinds()
    # one name per distinct (direction, source kind, destination kind)
    combo = (which.astype(np.int64) << 32) | ((src & 0xFFFF) << 16) | (dst & 0xFFFF)
    uniq, inv = np.unique(combo, return_inverse=True)
    name_lut, pageable_lut = [], []
    for c in uniq.tolist():
        s, d = mem.get((c >> 16) & 0xFFFF, "Unknown"), mem.get(c & 0xFFFF, "Unknown")
        name_lut.append(ctx.names.intern(f"Memcpy {labels[c >> 32]} ({s} -> {d})"))
        pageable_lut.append("Pageable" in (s, d))
    name = np.array(name_lut, dtype=np.int32)[inv]
    pageable = np.array(pageable_lut, dtype=bool)[inv]
    direction = np.where(direction == int(CopyKind.NONE), int(CopyKind.UNKNOWN), direction).astype(np.int8)
    return _block(ctx, MEMCPY, got, Kind.MEMCPY, name, bytes=nbytes, copy_kind=direction, pageable=pageable)


def read_memset(ctx: Context) -> Block | None:
    """``CUPTI_ACTIVITY_KIND_MEMSET`` → ``Kind.MEMSET`` with bytes."""
    cols = set(ctx.db.columns(MEMSET))
    got = _common(ctx, MEMSET, [c if c in cols else "-1" for c in ("bytes", "memKind")], "memsets")
    if got is None:
        return None
    nbytes, mem_kind = got[5]
    mem = ctx.enums.mem_kinds()
    uniq, inv = np.unique(mem_kind, return_inverse=True)
    lut = np.array([ctx.names.intern(f"Memset ({mem.get(int(m), 'Unknown')})") for m in uniq.tolist()], dtype=np.int32)
    return _block(ctx, MEMSET, got, Kind.MEMSET, lut[inv], bytes=nbytes)


def _sync_devices(ctx: Context):
    """``resolve`` for synchronization records, whose ``deviceId`` cannot be trusted
    (it reads 0 for syncs on other GPUs): the device of the record's stream in the same
    process (from the GPU ops read before), else of its context (``TARGET_INFO_CUDA_
    CONTEXT_INFO`` / ``TARGET_INFO_CUDA_NULL_STREAM``), else the one device the process
    used, else ``deviceId`` as written."""
    by_stream: dict[tuple[int, int], set] = {}
    by_pid: dict[int, set] = {}
    for key in ctx.lanes.keys:
        if key[0] == "gpu" and key[3] >= 0:
            by_stream.setdefault((key[2], key[3]), set()).add(key[1])
            by_pid.setdefault(key[2], set()).add(key[1])
    by_context: dict[tuple[int, int], int] = {}
    for table in ("TARGET_INFO_CUDA_CONTEXT_INFO", "TARGET_INFO_CUDA_NULL_STREAM"):
        if {"processId", "deviceId", "contextId"} <= set(ctx.db.columns(table)):
            for pid, dev, context in ctx.db.rows(f'SELECT processId, deviceId, contextId FROM "{table}"', what=table):
                if isinstance(pid, int) and isinstance(dev, int) and isinstance(context, int):
                    by_context.setdefault((pid, context), dev)

    def resolve(key: np.ndarray, extra: list[np.ndarray]) -> np.ndarray:
        context = extra[1]
        combo_key = np.stack([key, context], axis=1)
        uniq, inv = np.unique(combo_key, axis=0, return_inverse=True)
        out = np.empty(uniq.shape[0], dtype=np.int64)
        for j, (k, c) in enumerate(uniq.tolist()):
            dev, pid, stream = k >> DEVICE_SHIFT, (k >> PID_SHIFT) & 0x3FFFFF, k & INVALID_ID
            devs = by_stream.get((pid, stream), set()) if stream != INVALID_ID else set()
            if len(devs) == 1:
                dev = next(iter(devs))
            elif (pid, c) in by_context:
                dev = by_context[(pid, c)]
            elif len(by_pid.get(pid, ())) == 1:
                dev = next(iter(by_pid[pid]))
            out[j] = (min(max(dev, 0), MAX_DEVICE) << DEVICE_SHIFT) | (k & ((1 << DEVICE_SHIFT) - 1))
        return out[inv.reshape(-1)]

    return resolve


def read_sync(ctx: Context, call_of) -> Block | None:
    """``CUPTI_ACTIVITY_KIND_SYNCHRONIZATION`` → ``Kind.SYNC_MARKER`` on the stream's
    lane (or the device's ``sync (no stream)`` lane; device: ``_sync_devices``).
    ``call_of(correlation, pid)``: int32 name id of the API call with that correlation
    id in that process (-1 none), from the runtime table."""
    cols = set(ctx.db.columns(SYNC))
    extra = ["syncType" if "syncType" in cols else "-1", "contextId" if "contextId" in cols else "-1"]
    got = _common(ctx, SYNC, extra, "synchronization records", resolve=_sync_devices(ctx))
    if got is None:
        return None
    _, _, _, pid, correlation, (sync_type, _), _ = got
    by_type = ctx.enums.sync_names()
    call = call_of(correlation, pid).astype(np.int64)
    combo = ((call + 1) << 16) | ((sync_type + 1) & 0xFFFF)  # one name per distinct (call, syncType)
    uniq, inv = np.unique(combo, return_inverse=True)
    lut, by_type_only = [], 0
    for c in uniq.tolist():
        call_id, t = (c >> 16) - 1, (c & 0xFFFF) - 1
        named = sync_name_of_call(ctx.names.names[call_id]) if call_id >= 0 else None
        if named is None:
            by_type_only += int((combo == c).sum())
            named = by_type.get(t, "Unknown Sync")
        lut.append(ctx.names.intern(named))
    if by_type_only:
        ctx.warn(
            f"{SYNC}.syncType",
            f"{by_type_only} synchronization record(s) without a known sync call of their "
            "own: named after syncType, whose numbering differs between Nsight versions",
        )
    return _block(ctx, SYNC, got, Kind.SYNC_MARKER, np.array(lut, dtype=np.int32)[inv])
