"""CPU samples of an Nsight Systems export (``nsys profile --sample=process-tree``):
``COMPOSITE_EVENTS`` (one row per sample: ``id``, ``start`` ns, ``globalTid``) and
``SAMPLING_CALLCHAINS`` (one row per frame of a sample's callchain: ``id`` of the
sample, ``symbol`` and ``module`` as ``StringIds`` ids, ``stackDepth`` from 0 at the
frame the sample's instruction pointer was in, ``unresolved`` set for a frame whose
symbol the export could not resolve). Definitions: the export schema reference of
Nsight Systems ("Composite events"; the tables are created lazily, so either may be
missing).

Memory is bounded: at most ``MAX_FRAMES`` frames per sample are kept (the leaf and its
nearest callers, cut in SQL so the rest is never read) and at most ``MAX_SAMPLES``
samples (the earliest); each cut is said in a ``TraceWarning``. Samples of threads with
no traced event have no lane to belong to and are counted in
``SourceInfo.ignored_counts``; rows that cannot be used (no time, no thread, a
callchain with a hole) are skipped with a warning.
"""

from __future__ import annotations

import re

import numpy as np

from gapscope.parsers.model import CpuSamples
from gapscope.parsers.nsys.blocks import Context
from gapscope.parsers.nsys.names import distinct

__all__ = [
    "SAMPLES",
    "CALLCHAINS",
    "MAX_FRAMES",
    "MAX_SAMPLES",
    "FRAME_BLOCK_ROWS",
    "RawSamples",
    "read_samples",
    "cpu_samples",
]

SAMPLES = "COMPOSITE_EVENTS"
CALLCHAINS = "SAMPLING_CALLCHAINS"
#: Frames kept per sample, leaf first (the rest of a deeper callchain is cut).
MAX_FRAMES = 16
#: Samples kept (the earliest). Reading takes about 60 bytes a frame at its peak (a
#: frame is 9 bytes once built): about 1 GB at this cap with ``MAX_FRAMES`` frames each
#: (measured: 0.5 GB for 500,000 samples of 16 frames).
MAX_SAMPLES = 1_000_000
#: Rows of ``SAMPLING_CALLCHAINS`` read per query (each block's text is about 30 MB).
FRAME_BLOCK_ROWS = 1_000_000
#: A frame's sample id, ``stackDepth`` and unresolved flag are read as one integer,
#: ``id * _ID_SCALE + stackDepth * 2 + unresolved`` (``MAX_FRAMES`` stays below 32).
_ID_SCALE = 64
#: Sample ids from which that integer would overflow int64: read as columns of their own.
_WIDE_ID = 1 << 57
#: A symbol that is only an address (``0x145b5c768b6a``): the export did not resolve it.
_ADDRESS_RE = re.compile(r"^0x[0-9a-fA-F]+$")


class RawSamples:
    """Samples as read, before lanes are final: per sample ``start`` int64 ns,
    ``lane`` int32 (provisional lane id), ``depth`` int32 (frames recorded),
    ``offsets`` int64 (n + 1) into the frame columns ``symbol``/``module`` (int64
    ``StringIds`` ids) and ``unresolved`` (bool)."""

    def __init__(self, start, lane, depth, offsets, symbol, module, unresolved) -> None:
        self.start, self.lane, self.depth, self.offsets = start, lane, depth, offsets
        self.symbol, self.module, self.unresolved = symbol, module, unresolved


def _columns_ok(ctx: Context) -> bool:
    ev, cc = set(ctx.db.columns(SAMPLES)), set(ctx.db.columns(CALLCHAINS))
    if not ev and not cc:
        return False
    need_ev = [c for c in ("id", "start", "globalTid") if c not in ev]
    need_cc = [c for c in ("id", "symbol", "stackDepth") if c not in cc]
    if not ev or not cc or need_ev or need_cc:
        what = (
            f"{SAMPLES if not ev else CALLCHAINS} is missing"
            if not ev or not cc
            else "missing column(s) "
            + ", ".join([f"{SAMPLES}.{c}" for c in need_ev] + [f"{CALLCHAINS}.{c}" for c in need_cc])
        )
        ctx.warn(SAMPLES, f"CPU samples not read: {what}")
        return False
    return True


def _read_events(ctx: Context) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(id, start, provisional lane) of the usable samples on threads with a lane."""
    (ids, start, gtid), _, _ = ctx.db.int_columns(SAMPLES, ["id", "start", "globalTid"], want_rowid=False)
    bad = (ids < 0) | (start < 0) | (gtid < 0)
    if bad.any():
        ctx.warn(f"{SAMPLES}.start", f"{int(bad.sum())} {SAMPLES} row(s) with no id, time or thread; skipped")
    keep = ~bad
    order = np.argsort(ids[keep], kind="stable")
    ids, start, gtid = ids[keep][order], start[keep][order], gtid[keep][order]
    dup = np.zeros(ids.shape[0], dtype=bool)
    dup[1:] = ids[1:] == ids[:-1]
    if dup.any():
        ctx.warn(f"{SAMPLES}.id", f"{int(dup.sum())} {SAMPLES} row(s) repeat an id; the first of each kept")
        ids, start, gtid = ids[~dup], start[~dup], gtid[~dup]
    lane = ctx.lanes.cpu_known(gtid)
    off = lane < 0
    ctx.ignore(f"{SAMPLES} samples of threads with no traced event", int(off.sum()))
    ids, start, lane = ids[~off], start[~off], lane[~off]
    if ids.shape[0] > MAX_SAMPLES:
        by_time = np.argsort(start, kind="stable")[:MAX_SAMPLES]
        by_time.sort()
        ctx.warn(
            SAMPLES,
            f"{ids.shape[0]:,} CPU samples on traced threads: the earliest {MAX_SAMPLES:,} are kept "
            f"(memory bound), the later {ids.shape[0] - MAX_SAMPLES:,} left out",
        )
        ids, start, lane = ids[by_time], start[by_time], lane[by_time]
    return (ids, start, lane) if ids.shape[0] else None


def _compact(a: np.ndarray) -> np.ndarray:
    """``a`` (int64 string ids) as int32 when every value fits."""
    if a.size == 0 or (int(a.min()) >= -(2**31) and int(a.max()) < 2**31):
        return a.astype(np.int32)
    return a


def _read_frames(ctx: Context, ids: np.ndarray) -> tuple[np.ndarray, ...]:
    """(sample index into ``ids`` (sorted), depth, symbol, module, unresolved) of the
    frames kept, sorted by (sample, depth), each chain cut at ``MAX_FRAMES``, and the
    bool per sample of the chains cut. Read ``FRAME_BLOCK_ROWS`` rows at a time, each
    block compacted before the next (frames of other samples dropped, ids narrowed)."""
    cols = set(ctx.db.columns(CALLCHAINS))
    module = "ifnull(module, -1)" if "module" in cols else "-1"
    unres = "(ifnull(unresolved, 0) != 0)" if "unresolved" in cols else "0"
    # two columns instead of five (SQLite's group_concat text is the cost of the read):
    # id, depth and the unresolved flag in one; the symbol's and module's string ids
    # in the other (ids are dense from 0 in an export: far below 2**31)
    # (a sample id of 2**57 or more would overflow the packed key: then three columns;
    # a string id that does not fit its 32 bits is read as unknown, not as another id)
    wide = bool(ids.shape[0]) and int(ids[-1]) >= _WIDE_ID
    depth_key = f"(stackDepth << 1) + {unres}"
    frame_keys = ["id", depth_key] if wide else [f"id * {_ID_SCALE} + {depth_key}"]
    symbol = "ifnull(symbol, -1)"
    names_key = (
        f"(CASE WHEN {symbol} BETWEEN -1 AND 2147483647 THEN {symbol} ELSE -1 END << 32)"
        f" | (CASE WHEN {module} BETWEEN -1 AND 4294967294 THEN {module} ELSE -1 END & 4294967295)"
    )
    cut = np.zeros(ids.shape[0], dtype=bool)
    parts: list[tuple[np.ndarray, ...]] = []
    orphans = 0
    last = max(ids.shape[0] - 1, 0)
    for block in ctx.db.int_column_blocks(
        CALLCHAINS,
        [*frame_keys, names_key],
        # cast as the keys read it: a depth stored as text ('3') is 3, not above every integer
        where=f"CAST(stackDepth AS INTEGER) BETWEEN 0 AND {MAX_FRAMES}",
        block_rows=FRAME_BLOCK_ROWS,
    ):
        both = block[-1]
        fid, pk = (block[0], block[1]) if wide else (block[0] // _ID_SCALE, block[0] % _ID_SCALE)
        pos = np.minimum(np.searchsorted(ids, fid), last)
        known = ids[pos] == fid
        orphans += int((~known).sum())
        depth = pk >> 1
        cut[pos[known & (depth == MAX_FRAMES)]] = True
        keep = known & (depth < MAX_FRAMES)
        symbol = both[keep] >> 32
        mod = both[keep] & 0xFFFFFFFF
        mod[mod == 0xFFFFFFFF] = -1
        parts.append(
            (pos[keep].astype(np.int32), depth[keep].astype(np.int16), _compact(symbol), _compact(mod))
            + ((pk[keep] & 1).astype(bool),)
        )
    if orphans:  # frames of samples skipped above, or of no sample at all
        ctx.ignore(f"{CALLCHAINS} frames of samples not kept", orphans)
    cols_out = [np.concatenate([p[k] for p in parts]) if parts else np.zeros(0, np.int32) for k in range(5)]
    sample, depth = cols_out[0], cols_out[1]
    key = sample.astype(np.int64) * (MAX_FRAMES + 1) + depth
    if key.size > 1 and not bool((key[1:] >= key[:-1]).all()):  # exports write (id, stackDepth) order
        order = np.argsort(key, kind="stable")
        cols_out = [c[order] for c in cols_out]
    return (*cols_out, cut)


def _chains(ctx: Context, n: int, sample: np.ndarray, depth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(bool mask of the frames kept, frames kept per sample, for ``n`` samples): a
    chain is read from its leaf up to its first hole (a missing or repeated
    ``stackDepth``). ``sample``/``depth``: per frame, sorted by (sample, depth)."""
    m = sample.shape[0]
    per = np.zeros(n, dtype=np.int64)
    if not m:
        return np.zeros(0, bool), per
    new = np.r_[True, sample[1:] != sample[:-1]]
    starts = np.flatnonzero(new)
    group = np.cumsum(new) - 1
    rank = np.arange(m, dtype=np.int64) - starts[group]
    first_bad = np.minimum.reduceat(np.where(depth == rank, MAX_FRAMES, rank), starts)
    keep = rank < first_bad[group]
    broken = int((first_bad < MAX_FRAMES).sum())
    if broken:
        ctx.warn(
            f"{CALLCHAINS}.stackDepth",
            f"{broken} sample callchain(s) with a missing or repeated stackDepth: read up to the hole",
        )
    per[sample[starts]] = np.minimum(first_bad, np.diff(np.r_[starts, m]))
    return keep, per


def read_samples(ctx: Context) -> RawSamples | None:
    """The CPU samples of the export on threads that have a lane (read after the
    event tables, so ``ctx.lanes`` knows every traced thread), or None when it has none."""
    if not _columns_ok(ctx):
        return None
    got = _read_events(ctx)
    if got is None:
        return None
    ids, start, lane = got
    sample, depth, symbol, mod, unres, cut = _read_frames(ctx, ids)
    keep, per = _chains(ctx, ids.shape[0], sample, depth)
    symbol, mod, unres = symbol[keep], mod[keep], unres[keep]
    offsets = np.zeros(ids.shape[0] + 1, dtype=np.int64)
    np.cumsum(per, out=offsets[1:])
    if cut.any():
        ctx.warn(
            CALLCHAINS,
            f"{int(cut.sum()):,} CPU sample callchain(s) deeper than {MAX_FRAMES} frames: only the "
            f"{MAX_FRAMES} nearest the leaf are kept",
        )
    stack = np.where(cut, MAX_FRAMES + 1, per).astype(np.int32)
    return RawSamples(start, lane, stack, offsets, symbol, mod, unres)


def cpu_samples(ctx: Context, raw: RawSamples | None, remap: np.ndarray, n_lanes: int) -> CpuSamples | None:
    """``CpuSamples`` of ``raw`` on the final lanes (``remap``: provisional → final
    lane, -1 for lanes without events), names resolved through ``StringIds`` and
    interned in a table of their own; None when no sample is left."""
    if raw is None:
        return None
    lane = remap[raw.lane]
    on = lane >= 0
    ctx.ignore(f"{SAMPLES} samples of threads with no traced event", int((~on).sum()))
    if not on.any():
        return None
    per = np.diff(raw.offsets)
    frame_on = np.repeat(on, per)
    offsets = np.zeros(int(on.sum()) + 1, dtype=np.int64)
    np.cumsum(per[on], out=offsets[1:])
    # one name table for both columns, over their distinct ids only
    u_sym, inv_sym = distinct(raw.symbol[frame_on])
    u_mod, inv_mod = distinct(raw.module[frame_on])
    uniq = np.union1d(u_sym, u_mod)
    texts = []
    for u in uniq.tolist():
        s = ctx.names.strings.get(u)
        texts.append(s if s is not None else ("(unknown)" if u < 0 else f"(string {u})"))
    names = tuple(texts)
    name_id = np.searchsorted(uniq, u_sym).astype(np.int32)[inv_sym]
    module_id = np.searchsorted(uniq, u_mod).astype(np.int32)[inv_mod]
    address = np.array([bool(_ADDRESS_RE.match(t)) for t in names], dtype=bool)
    resolved = ~raw.unresolved[frame_on] & ~(address[name_id] if address.size else np.zeros(name_id.shape[0], bool))
    return CpuSamples.from_columns(
        start_ns=raw.start[on],
        lane=lane[on],
        stack_depth=raw.depth[on],
        frame_offsets=offsets,
        frame_name=name_id,
        frame_module=module_id,
        frame_resolved=resolved,
        names=names,
        n_lanes=n_lanes,
        max_frames=MAX_FRAMES,
    )
