"""Nsight Systems SQLite export (``nsys export --type sqlite``) → ``Trace``.

What is read (see ``gpu``, ``host``, ``targets`` for each table): kernels, copies and
memsets on a lane per GPU stream; CUDA runtime/driver calls, NVTX ranges, OS runtime
calls and profiler overhead on a lane per CPU thread; CPU samples and their callchains
(``samples``) as ``Trace.cpu_samples``; synchronization records as sync
markers; launch → GPU op links by ``correlationId`` (scoped to the process: CUPTI
numbers calls per process); names from ``StringIds``, ``ThreadNames``,
``PROCESSES``; device properties from ``TARGET_INFO_*``. Times are the export's
integer nanoseconds, unchanged (``SourceInfo.extra["session_start_utc_ns"]`` is the
wall-clock time of 0 when the export says).

Versions: every table and column is looked up before it is used; a missing table is
an empty one (Nsight creates tables lazily), a missing column is reported as a
``TraceWarning`` saying what could not be read. What is not timeline data is counted
in ``SourceInfo.ignored_counts`` (``table SCHED_EVENTS``: rows).

``SourceInfo``: ``format`` ``"nsys-sqlite"``; ``extra``: ``nsys_version``,
``nsys_schema_version`` (from ``META_DATA_EXPORT`` / ``EXPORT_META_DATA``, when the
export has them), ``session_start_utc_ns``, ``nvtx_domains`` (``domainId`` → name).
``args_of(i)`` reads the event's row back from the file (string ids resolved).
"""

from __future__ import annotations

import sqlite3

import numpy as np

from gapscope.parsers.errors import TraceFormatError
from gapscope.parsers.model import SourceInfo, Trace, repeated_correlations
from gapscope.parsers.nsys.blocks import Block, Context
from gapscope.parsers.nsys.gpu import read_kernels, read_memcpy, read_memset, read_sync
from gapscope.parsers.nsys.host import Calls, read_nvtx, read_osrt, read_overhead, read_runtime
from gapscope.parsers.nsys.lanes import Lanes
from gapscope.parsers.nsys.names import Names, Strings
from gapscope.parsers.nsys.samples import RawSamples, cpu_samples, read_samples
from gapscope.parsers.nsys.schema import (
    CUDA_TABLES,
    KERNEL,
    NSIGHT_MARKER_TABLES,
    RUNTIME,
    TESTED_SCHEMA_MAJOR,
    Enums,
    export_info,
)
from gapscope.parsers.nsys.sql import DB_ERRORS, Database, ro_uri, text_of
from gapscope.parsers.nsys.targets import Devices, main_thread_names, process_names, thread_names

__all__ = ["load_nsys", "check_nsight", "FORMAT", "RowArgs"]

FORMAT = "nsys-sqlite"
_EXPORT_CMD = "nsys export --type sqlite --output REPORT.sqlite REPORT.nsys-rep"
#: Tables that are metadata (read above, or of no use to a timeline): never "ignored".
_METADATA_PREFIXES = ("ENUM_", "TARGET_INFO_", "META_DATA_", "EXPORT_META_DATA", "ANALYSIS_", "sqlite_")
_METADATA = frozenset({"StringIds", "ThreadNames", "PROCESSES", "ProcessStreams", "UnwindMethodType"})
#: Columns of ``StringIds`` ids, resolved to their text by ``args_of``.
_STRING_COLUMNS = ("demangledName", "shortName", "mangledName", "nameId", "textId")


def check_nsight(db: Database) -> None:
    """Raise ``TraceFormatError`` unless ``db`` looks like an Nsight Systems export."""
    tables = list(db.tables)
    if any(t.startswith("CUPTI_ACTIVITY_KIND_") for t in tables) or any(t in db.tables for t in NSIGHT_MARKER_TABLES):
        return
    shown = ", ".join(sorted(tables)[:6]) + (", …" if len(tables) > 6 else "")
    raise TraceFormatError(
        db.path,
        "an SQLite database, but not an Nsight Systems export "
        f"(no StringIds, CUPTI_ACTIVITY_KIND_* or NVTX_EVENTS table; "
        f"it has {len(tables)} table(s){': ' + shown if tables else ''})",
        hint=f"export the Nsight Systems report with: {_EXPORT_CMD}",
    )


def load_nsys(path: str) -> Trace:
    """Load an Nsight Systems SQLite export (opened read-only; see the module docstring).

    Returns a ``Trace`` (``source.format`` ``"nsys-sqlite"``). Raises
    ``TraceFormatError`` for a file SQLite cannot read (corrupt, cut off), a database
    that is not an Nsight export, or an export with no events at all.
    """
    db = Database(path)
    try:
        check_nsight(db)
        return _read(db)
    finally:
        db.close()


def _read(db: Database) -> Trace:
    info = export_info(db)
    strings = Strings(db)
    ctx = Context(db, Enums(db), Names(strings), Lanes(), Devices(db))
    _version_warning(ctx, info)
    if not strings.present:
        ctx.warn("StringIds", "the export has no StringIds table: kernels and calls are unnamed")
    runtime = read_runtime(ctx)
    kernels = read_kernels(ctx)
    memcpy, memset = read_memcpy(ctx), read_memset(ctx)
    empty = np.zeros(0, np.int64)
    if runtime is not None:
        # read_runtime always fills both: every runtime call has a correlation id and a process
        assert runtime.correlation is not None and runtime.pid is not None
        calls = Calls(runtime.correlation, runtime.pid, runtime.name)
    else:
        calls = Calls(empty, empty, empty)
    sync = read_sync(ctx, calls)
    nvtx, domains = read_nvtx(ctx)
    blocks = [b for b in (runtime, kernels, memcpy, memset, sync, nvtx, read_osrt(ctx)) if b is not None and len(b)]
    overhead = _on_busy_lanes(ctx, read_overhead(ctx), blocks)
    if overhead is not None and len(overhead):
        blocks.append(overhead)
    _coverage_warnings(ctx, db, blocks)
    if not blocks:
        raise TraceFormatError(
            db.path,
            "an Nsight Systems export with no CUDA, NVTX or OS runtime events",
            hint="profile with nsys profile --trace=cuda,nvtx,osrt and export again",
        )
    if strings.present and ctx.names.missing:
        ctx.warn("StringIds", f"{ctx.names.missing} name id(s) not in StringIds: named '(string N)'")
    samples = read_samples(ctx)  # after every event table: it keeps the samples of traced threads
    return _trace(ctx, db, blocks, info, domains, samples)


def _on_busy_lanes(ctx: Context, overhead: Block | None, blocks: list[Block]) -> Block | None:
    """The profiler-overhead ranges on threads that have events of their own: the
    others (Nsight's work in every short-lived child process, on process-wide ids) would
    add lanes that show nothing of the application."""
    if overhead is None or not len(overhead):
        return overhead
    busy = np.zeros(len(ctx.lanes.keys), dtype=bool)
    for b in blocks:
        busy[b.lane] = True
    keep = busy[overhead.lane]
    ctx.ignore("PROFILER_OVERHEAD rows on threads with no other events", int((~keep).sum()))
    return overhead.take(keep)


def _version_warning(ctx: Context, info: dict) -> None:
    version = info.get("EXPORT_SCHEMA_VERSION", "")
    major = version.split(".", 1)[0]
    if major.isdigit() and int(major) not in TESTED_SCHEMA_MAJOR:
        ctx.warn(
            None,
            f"export schema {version} (Nsight Systems {info.get('EXPORT_PRODUCT_VERSION', '?')}) is "
            f"not one this reader was checked against ({'.x, '.join(map(str, TESTED_SCHEMA_MAJOR))}.x); "
            "tables and columns are read where they match",
        )


def _coverage_warnings(ctx: Context, db: Database, blocks: list[Block]) -> None:
    """Say what the export lacks for a diagnosis: CUDA trace, kernels, API calls."""
    tables = {b.table for b in blocks}
    if not any(db.has(t) for t in CUDA_TABLES):
        ctx.warn(
            None,
            "no CUDA trace in this export (no CUPTI_ACTIVITY_KIND_* tables: profiled without "
            "--trace=cuda?): CPU threads only",
        )
        return
    if KERNEL not in tables:
        ctx.warn(
            KERNEL,
            "no GPU kernels in this export (CUPTI_ACTIVITY_KIND_KERNEL missing or empty): "
            "there is no GPU idle time to explain",
        )
    if RUNTIME not in tables:
        ctx.warn(
            RUNTIME,
            "no CUDA API calls in this export (CUPTI_ACTIVITY_KIND_RUNTIME missing or empty): "
            "gaps cannot be traced to the calls that launched their work",
        )


def _cat(blocks: list[Block], field: str, dtype, fill) -> np.ndarray:
    parts = []
    for b in blocks:
        a = getattr(b, field)
        parts.append(np.full(len(b), fill, dtype=dtype) if a is None else np.asarray(a, dtype=dtype))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


def _trace(
    ctx: Context, db: Database, blocks: list[Block], info: dict, domains: dict, samples: RawSamples | None
) -> Trace:
    start = _cat(blocks, "start", np.int64, 0)
    dur = _cat(blocks, "dur", np.int64, 0)
    open_ended = _cat(blocks, "open_ended", bool, False)
    if open_ended.any():
        last = int((start + dur)[~open_ended].max()) if (~open_ended).any() else int(start.max())
        dur[open_ended] = np.maximum(last - start[open_ended], 0)
        ctx.warn(
            "NVTX_EVENTS.end", f"{int(open_ended.sum())} NVTX range(s) never ended; drawn to the end of the capture"
        )
    corr = _cat(blocks, "correlation", np.int64, -1)
    pid = _cat(blocks, "pid", np.int64, -1)
    has = corr >= 0
    if has.any() and np.unique(pid[has]).size > 1:  # ids are per process: keep them apart
        corr = np.where(has, (pid << 32) | (corr & 0xFFFFFFFF), -1)
    kind = _cat(blocks, "kind", np.int8, 0)
    n_rep, n_calls, rep_id = repeated_correlations(kind, corr)
    if n_rep:
        ctx.warn(
            "correlationId",
            f"{n_rep} correlation id(s) shared by {n_calls} API calls (e.g. {rep_id}); each "
            "GPU op linked to the latest such call starting before it",
        )
    lane = _cat(blocks, "lane", np.int32, 0)
    used = np.zeros(len(ctx.lanes.keys), dtype=bool)
    used[lane] = True
    threads = thread_names(db, ctx.names.strings)
    processes = main_thread_names(threads)
    processes.update(process_names(db))
    lanes, remap = ctx.lanes.build(ctx.devices, processes, threads, used)
    table_names = [b.table for b in blocks]
    sampled = cpu_samples(ctx, samples, remap, len(lanes))
    if sampled is not None:
        table_names_read = {*table_names, "COMPOSITE_EVENTS", "SAMPLING_CALLCHAINS"}
    else:
        table_names_read = set(table_names)
    code = np.concatenate([np.full(len(b), k if b.rowid is not None else -1, np.int16) for k, b in enumerate(blocks)])
    rowid = _cat(blocks, "rowid", np.int64, -1)
    source = SourceInfo(
        path=db.path,
        format=FORMAT,
        device_properties=ctx.devices.properties([ln.device for ln in lanes if ln.is_gpu]),
        ignored_counts=_ignored(ctx, db, table_names_read),
    )
    if info.get("EXPORT_PRODUCT_VERSION"):
        source.extra["nsys_version"] = info["EXPORT_PRODUCT_VERSION"]
    if info.get("EXPORT_SCHEMA_VERSION"):
        source.extra["nsys_schema_version"] = info["EXPORT_SCHEMA_VERSION"]
    t0 = _session_start(db)
    if t0 is not None:
        source.extra["session_start_utc_ns"] = t0
    if domains:
        source.extra["nvtx_domains"] = domains
    return Trace.from_columns(
        start_ns=start,
        dur_ns=dur,
        lane=remap[lane],
        name_id=_cat(blocks, "name", np.int32, 0),
        kind=kind,
        names=ctx.names.names,
        lanes=lanes,
        source=source,
        warnings=ctx.warnings,
        correlation=corr,
        bytes_=_cat(blocks, "bytes", np.int64, -1),
        copy_kind=_cat(blocks, "copy_kind", np.int8, 0),
        pageable=_cat(blocks, "pageable", bool, False),
        args_loader=RowArgs(db.path, table_names, code, rowid),
        cpu_samples=sampled,
    )


def _ignored(ctx: Context, db: Database, read: set[str]) -> dict[str, int]:
    """Rows of the export's event tables that no lane shows (``table NAME``: rows),
    plus what the readers left out. Counts are ``max(rowid)`` (cheap; exports never
    delete rows)."""
    out = dict(ctx.ignored)
    for t in db.tables:
        if t in read or t in _METADATA or t.startswith(_METADATA_PREFIXES) or t.startswith("EXTRAP"):
            continue
        try:
            n = db.con.execute(f'SELECT max(rowid) FROM "{t}"').fetchone()[0]
        except DB_ERRORS:
            continue
        if isinstance(n, int) and n > 0:
            out[f"table {t}"] = n
    return out


def _session_start(db: Database) -> int | None:
    if "utcEpochNs" not in db.columns("TARGET_INFO_SESSION_START_TIME"):
        return None
    row = db.one("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME", what="TARGET_INFO_SESSION_START_TIME")
    return row[0] if row and isinstance(row[0], int) else None


class RowArgs:
    """``args_of``: the event's row, read back from the export on demand (a new
    read-only connection per call, so any thread may ask), string ids resolved."""

    def __init__(self, path: str, tables: list[str], code: np.ndarray, rowid: np.ndarray) -> None:
        self.path, self.tables, self.code, self.rowid = path, tables, code, rowid

    def __call__(self, i: int) -> dict:
        k = int(self.code[i])
        if k < 0:
            return {}
        table = self.tables[k]
        try:
            con = sqlite3.connect(ro_uri(self.path), uri=True)
        except DB_ERRORS:
            return {}
        try:
            con.text_factory = text_of
            cur = con.execute(f'SELECT * FROM "{table}" WHERE rowid = ?', (int(self.rowid[i]),))
            row = cur.fetchone()
            if row is None:
                return {}
            args = {"table": table}
            args.update(zip((d[0] for d in cur.description), row))
            for c in _STRING_COLUMNS:
                if isinstance(args.get(c), int):
                    got = con.execute("SELECT value FROM StringIds WHERE id = ?", (args[c],)).fetchone()
                    if got is not None:
                        args[c] = got[0]
            return args
        except DB_ERRORS:  # the file changed or is damaged where this row lies: no args
            return {}
        finally:
            con.close()
