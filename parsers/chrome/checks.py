"""Validation and repair of loaded Chrome-trace rows, and flow binding.

- Unusable times (missing, non-finite, unreadable ``ts``/``dur``): the event is
  skipped with a warning naming its line and field (bug case B04).
- Absurd times, flagged and dropped from the columns (so they stay out of
  ``extent_ns`` and out of every GPU figure), one warning per reason naming the
  lines (B14): a start 1000× smaller than the trace's median start when that median
  is above 1e9 µs (``ts: 0`` among epoch or boot-clock times; "no timing" when
  ``ts == dur == 0``), a start 1000× past it, a negative duration, a duration
  above 1e12 µs (11.6 days). Dropped GPU ops are listed in
  ``SourceInfo.extra["untimed_gpu_ops"]``.
- GPU work on one lane (B16): identical records counted once (warning); overlapping
  ops kept, one warning per lane.
- Flows: ``s``/``t``/``f`` (v1; ``f`` binds to the enclosing slice with
  ``bp: "e"``, else to the next slice) and v2 ``bind_id``/``flow_in``/``flow_out``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np

from gapscope.parsers.chrome.args import ArgColumns
from gapscope.parsers.chrome.times import MISSING, NONFINITE, OK, number_text, scalar_ns
from gapscope.parsers.json.scan import SENTINEL_VALUES
from gapscope.parsers.lanes import id_text
from gapscope.parsers.model import GPU_WORK_KINDS, Kind
from gapscope.units import fmt_dur

__all__ = [
    "Columns",
    "validate",
    "gpu_checks",
    "bind_flows",
    "v2_flows",
    "bad_id_events",
    "has_bad_ids",
    "MAX_DUR_US",
    "RATIO",
]

#: Durations above this (µs) are absurd.
MAX_DUR_US = 1e12
#: Starts further than this factor from the median start are absurd (when median > 1e9 µs).
RATIO = 1000.0
#: A start more than this many median absolute deviations of all starts from their
#: median (and more than ``OUTLIER_MIN_US``) is an outlier: one epoch timestamp among
#: trace-relative ones, ``ts: -1e15``. Corpus margin: catapult/fuchsia_trace (two clock
#: origins 13 days apart, kept) is at 0.16 of the limit.
OUTLIER_MAD_FACTOR = 1e7
#: ... and never closer than this to the median (1000 s).
OUTLIER_MIN_US = 1e9
_MAX_LISTED = 10


@dataclasses.dataclass
class Columns:
    """Rows in input order (not yet sorted); ``src`` = index of the source event."""

    start: np.ndarray
    dur: np.ndarray
    lane: np.ndarray
    name: np.ndarray
    kind: np.ndarray
    src: np.ndarray
    status_ts: np.ndarray
    status_dur: np.ndarray
    value: np.ndarray
    args: ArgColumns

    def take(self, idx: np.ndarray) -> Columns:
        idx = np.asarray(idx)
        if idx.dtype == bool:
            idx = np.flatnonzero(idx)
        if idx.size == self.start.size:
            return self
        return Columns(
            self.start[idx],
            self.dur[idx],
            self.lane[idx],
            self.name[idx],
            self.kind[idx],
            self.src[idx],
            self.status_ts[idx],
            self.status_dur[idx],
            self.value[idx],
            self.args.take(idx),
        )


def _lines_list(ks) -> str:
    ks = list(ks)
    txt = ", ".join("{line:%d}" % k for k in ks[:_MAX_LISTED])  # noqa: UP031 - {line:...} is filled later
    if len(ks) > _MAX_LISTED:
        txt += f" and {len(ks) - _MAX_LISTED} more"
    return txt


def _token(v) -> str:
    if isinstance(v, str) and v in SENTINEL_VALUES:
        return {"N": "NaN", "Infini": "Infinity", "-Infini": "-Infinity"}[v]
    return number_text(v)


_INT64_MAX = int(np.iinfo(np.int64).max)


def validate(
    cols: Columns, names: list[str], open_ended: np.ndarray, events: Sequence, warn
) -> tuple[Columns, list[tuple[int, str, int]]]:
    """Drop rows with unusable or absurd times (with warnings) and close open slices
    (rows ``open_ended``: unclosed ``B``/``b`` slices end at the last end of the rest).

    Returns the kept rows and the GPU ops dropped for absurd times, as (event index,
    name, correlation), for ``SourceInfo.extra["untimed_gpu_ops"]``.
    """
    bad = (cols.status_ts != OK) | (cols.status_dur != OK)
    bad_rows = np.flatnonzero(bad)
    for j, r in enumerate(bad_rows.tolist()):
        field = "ts" if cols.status_ts[r] != OK else "dur"
        st = cols.status_ts[r] if field == "ts" else cols.status_dur[r]
        k = int(cols.src[r])
        if j >= _MAX_LISTED:
            warn(k, field, f"{bad_rows.size - _MAX_LISTED} more events with unusable ts/dur skipped")
            break
        val = getattr(events[k], field)
        if type(val) is msgspec.Raw:  # ts kept as text (``XEventRawTs``)
            try:
                val = msgspec.json.decode(val)
            except (msgspec.DecodeError, RecursionError):
                val = bytes(val).decode("utf-8", "replace")
        what = {MISSING: "no", NONFINITE: "non-finite"}.get(int(st), "invalid")
        detail = "" if st == MISSING else f" ({_token(val)})"
        warn(k, field, f"event {names[cols.name[r]]!r} has {what} {field}{detail}; skipped")
    good = ~bad
    # absurd values
    absurd_reason = np.zeros(cols.start.size, dtype=np.int8)
    if good.any():
        s_us = cols.start[good] / 1000.0
        med = float(np.median(s_us))
        if abs(med) > 1e9:
            lo = cols.start / 1000.0 < med / RATIO
            hi = cols.start / 1000.0 > med * RATIO
            absurd_reason[good & lo] = 1
            absurd_reason[good & hi] = 2
        if s_us.size >= 3:  # far from the bulk, whatever the median (B14's rule made symmetric)
            mad = float(np.median(np.abs(s_us - med)))
            thr = max(OUTLIER_MAD_FACTOR * mad, OUTLIER_MIN_US)
            dev = cols.start / 1000.0 - med
            absurd_reason[good & (absurd_reason == 0) & (dev < -thr)] = 1
            absurd_reason[good & (absurd_reason == 0) & (dev > thr)] = 2
        absurd_reason[good & (absurd_reason == 0) & (cols.dur < 0)] = 3
        absurd_reason[good & (absurd_reason == 0) & (cols.dur > MAX_DUR_US * 1000)] = 4
    if open_ended.size:
        absurd_reason[open_ended] = 0
    texts = {
        1: "start far before the rest of the trace",
        2: "start far after the rest of the trace",
        3: "negative duration",
        4: "duration longer than 1e12 µs",
    }
    untimed: list[tuple[int, str, int]] = []
    for reason in (1, 2, 3, 4):
        rows = np.flatnonzero(absurd_reason == reason)
        if rows.size == 0:
            continue
        ks = cols.src[rows].tolist()
        zero = reason == 1 and bool(np.all((cols.start[rows] == 0) & (cols.dur[rows] == 0)))
        gpu = np.isin(cols.kind[rows], [int(k) for k in GPU_WORK_KINDS])
        what = "GPU ops" if gpu.all() else "events"
        why = "have no timing (ts=0, dur=0)" if zero else f"have absurd times ({texts[reason]})"
        warn(
            ks[0],
            "ts" if reason in (1, 2) else "dur",
            f"{rows.size} {what} {why} at lines {_lines_list(ks)}; excluded from the timeline and GPU analysis",
        )
        for r in rows[gpu].tolist():
            untimed.append((int(cols.src[r]), names[cols.name[r]], int(cols.args.correlation[r])))
    keep = good & (absurd_reason == 0)
    if open_ended.size:
        ok_closed = keep.copy()
        ok_closed[open_ended] = False
        end = int((cols.start + cols.dur)[ok_closed].max()) if ok_closed.any() else int(cols.start[keep].max(initial=0))
        too_long = []
        for r in open_ended.tolist():
            if keep[r]:
                dur = max(0, end - int(cols.start[r]))
                if dur > _INT64_MAX:  # no int64 holds it: the slice begins ages before the rest ends
                    keep[r] = False
                    too_long.append(int(cols.src[r]))
                else:
                    cols.dur[r] = dur
        if too_long:
            warn(
                too_long[0],
                "ts",
                f"{len(too_long)} unclosed slice(s) would last longer than an int64 of "
                f"nanoseconds holds (292 years) to the end of the trace, at lines "
                f"{_lines_list(too_long)}; skipped",
            )
    return cols.take(keep), untimed


def gpu_checks(cols: Columns, lane_final: np.ndarray, lanes, names: list[str], warn) -> Columns:
    """Count duplicate GPU records once and warn about same-lane overlaps (kept)."""
    work = np.flatnonzero(np.isin(cols.kind, [int(k) for k in GPU_WORK_KINDS]))
    if work.size < 2:
        return cols
    work_all = work
    ln, st = lane_final[work], cols.start[work]
    o2 = np.lexsort((st, ln))
    ln_o2, st_o2 = ln[o2], st[o2]
    tie = (ln_o2[1:] == ln_o2[:-1]) & (st_o2[1:] == st_o2[:-1])
    same = np.zeros(0, dtype=bool)
    if tie.any():  # duplicates share lane and start: check only those candidates
        cand = np.zeros(work.size, dtype=bool)
        cand[o2[1:][tie]] = True
        cand[o2[:-1][tie]] = True
        work_c = work[cand]
        ln, st, du, nm, co = (
            lane_final[work_c],
            cols.start[work_c],
            cols.dur[work_c],
            cols.name[work_c],
            cols.args.correlation[work_c],
        )
        o = np.lexsort((cols.src[work_c], co, nm, du, st, ln))
        same = (
            (ln[o][1:] == ln[o][:-1])
            & (st[o][1:] == st[o][:-1])
            & (du[o][1:] == du[o][:-1])
            & (nm[o][1:] == nm[o][:-1])
            & (co[o][1:] == co[o][:-1])
        )
        work = work_c
    drop = np.zeros(cols.start.size, dtype=bool)
    if same.any():
        dup_pos = np.flatnonzero(same) + 1
        drop[work[o[dup_pos]]] = True
        firsts = work[o[dup_pos - 1]]
        for j, (a, b) in enumerate(zip(firsts.tolist(), work[o[dup_pos]].tolist())):
            if j >= _MAX_LISTED:
                warn(int(cols.src[b]), None, f"{dup_pos.size - _MAX_LISTED} more duplicate GPU records counted once")
                break
            warn(
                int(cols.src[b]),
                None,
                "duplicate event %r on lines {line:%d}/{line:%d}: counted once"  # noqa: UP031 - {line:...} is filled later
                % (names[cols.name[a]], int(cols.src[a]), int(cols.src[b])),
            )
        cols = cols.take(~drop)
        lane_final = lane_final[~drop]
        work = np.flatnonzero(np.isin(cols.kind, [int(k) for k in GPU_WORK_KINDS]))
        ln, st = lane_final[work], cols.start[work]
        o = np.lexsort((st, ln))
        ln_o, st_o = ln[o], st[o]
    else:  # nothing dropped: reuse the (lane, start) order
        work, o, ln_o, st_o = work_all, o2, ln_o2, st_o2
    en_o = st_o + cols.dur[work][o]
    # overlap with the running max end of earlier ops on the lane
    for lane in np.unique(ln_o).tolist():
        a, b = np.searchsorted(ln_o, [lane, lane + 1])
        if b - a < 2:
            continue
        run_end = np.maximum.accumulate(en_o[a:b])
        ov = np.flatnonzero(run_end[:-1] > st_o[a + 1 : b])
        if ov.size == 0:
            continue
        i = int(ov[0])
        prev = work[o[a + int(np.argmax(en_o[a : a + i + 1]))]]
        nxt = work[o[a + i + 1]]
        by_ns = int(run_end[i] - st_o[a + i + 1])
        more = f"; {ov.size} overlapping ops on this lane in total" if ov.size > 1 else ""
        warn(
            int(cols.src[nxt]),
            None,
            "%s: %r (line {line:%d}) overlaps %r (line {line:%d}) by %s; both kept%s"  # noqa: UP031 - {line:...} is filled later
            % (
                lanes[lane].label,
                names[cols.name[prev]],
                int(cols.src[prev]),
                names[cols.name[nxt]],
                int(cols.src[nxt]),
                fmt_dur(by_ns),
                more,
            ),
        )
    _warn_outlier_durations(cols, work, names, warn)
    return cols


#: A GPU op longer than this (ns) ...
OUTLIER_DUR_MIN_NS = 1_000_000_000
#: ... and more than this many times the span of all shorter GPU ops is warned about.
OUTLIER_DUR_FACTOR = 1000


def _warn_outlier_durations(cols: Columns, work: np.ndarray, names: list[str], warn) -> None:
    """Warn (kept, named with line and field) about GPU ops whose ``dur`` dwarfs the
    rest of the trace: a 13.9-hour kernel in a trace whose other kernels span 160 µs is
    a unit or a corrupt value, and would make every share in the report meaningless."""
    if work.size < 2:
        return
    dur = cols.dur[work]
    long_ = dur > OUTLIER_DUR_MIN_NS
    if not long_.any() or long_.all():
        return
    rest = work[~long_]
    span = int((cols.start[rest] + cols.dur[rest]).max() - cols.start[rest].min())
    limit = OUTLIER_DUR_FACTOR * max(span, 1000)
    bad = work[long_ & (dur > limit)]
    if bad.size == 0:
        return
    k = int(bad[np.argmax(cols.dur[bad])])
    more = f"; {bad.size} such ops" if bad.size > 1 else ""
    warn(
        int(cols.src[k]),
        "dur",
        "%r lasts %s, %sx the %s the other GPU ops span; kept, but check its dur "  # noqa: UP031 - as the module's other templates
        "(microseconds expected)%s"
        % (
            names[cols.name[k]],
            fmt_dur(int(cols.dur[k])),
            f"{int(cols.dur[k]) // max(span, 1):,}",
            fmt_dur(span),
            more,
        ),
    )


def bind_flows(
    events: Sequence,
    flow_ks: list[int],
    cols: Columns,
    lane_final: np.ndarray,
    lanes_raw: dict,
    remap: np.ndarray,
    warn,
) -> tuple[np.ndarray, np.ndarray]:
    """Bind v1 flow events (``s``/``t``/``f``) to slices; (src rows, dst rows)."""
    empty = np.zeros(0, np.int64)
    if not flow_ks:
        return empty, empty
    slice_rows = np.flatnonzero(~np.isin(cols.kind, [int(Kind.INSTANT), int(Kind.COUNTER)]))
    ln = lane_final[slice_rows]
    st = cols.start[slice_rows]
    en = st + cols.dur[slice_rows]
    o = np.lexsort((-cols.dur[slice_rows], st, ln))
    ln_o, st_o, en_o, rows_o = ln[o], st[o], en[o], slice_rows[o]
    groups: dict[tuple, list] = {}
    unbound = 0
    for k in flow_ks:
        e = events[k]
        t, status = scalar_ns(e.ts)
        raw_lane = lanes_raw.get((e.pid, e.tid))
        if status != OK or raw_lane is None:
            unbound += 1
            continue
        lane = int(remap[raw_lane])
        a, b = np.searchsorted(ln_o, [lane, lane + 1])
        row = -1
        if e.ph == "f" and e.bp != "e":
            j = a + int(np.searchsorted(st_o[a:b], t, side="left"))
            if j < b:
                row = int(rows_o[j])
        if row < 0:
            j = a + int(np.searchsorted(st_o[a:b], t, side="right")) - 1
            steps = 0
            while j >= a and steps < 64:
                if en_o[j] >= t:
                    row = int(rows_o[j])
                    break
                j -= 1
                steps += 1
        if row < 0:
            unbound += 1
            continue
        key = (id_text(e.cat), id_text(e.id))
        groups.setdefault(key, []).append((t, {"s": 0, "t": 1, "f": 2}.get(e.ph, 1), row))
    src, dst = [], []
    for pts in groups.values():
        pts.sort()
        for (_t0, p0, r0), (_t1, _p1, r1) in zip(pts, pts[1:]):
            if r0 != r1 and p0 != 2:
                src.append(r0)
                dst.append(r1)
    if unbound:
        warn(flow_ks[0], None, f"{unbound} flow event(s) not bound to any slice; ignored")
    return np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)


def v2_flows(events: Sequence, xi: np.ndarray, cols: Columns) -> tuple[np.ndarray, np.ndarray]:
    """Flow v2: ``X`` events with ``bind_id`` and ``flow_out``/``flow_in``."""
    empty = np.zeros(0, np.int64)
    ks = [int(k) for k in xi.tolist() if events[k].bind_id is not None]
    if not ks:
        return empty, empty
    rows = np.flatnonzero(np.isin(cols.src, ks) & (np.arange(cols.src.size) < cols.src.size))
    row_of = {
        int(cols.src[r]): int(r) for r in rows.tolist() if cols.kind[r] not in (int(Kind.INSTANT), int(Kind.COUNTER))
    }
    outs: dict[str, list[int]] = {}
    ins: dict[str, list[int]] = {}
    for k in ks:
        e = events[k]
        r = row_of.get(k)
        if r is None:
            continue
        key = id_text(e.bind_id)
        if e.flow_out:
            outs.setdefault(key, []).append(r)
        if e.flow_in:
            ins.setdefault(key, []).append(r)
    src, dst = [], []
    for key, rs in outs.items():
        for a in rs:
            for b in ins.get(key, ()):
                if a != b:
                    src.append(a)
                    dst.append(b)
    return np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)


def _nonfinite(v, repaired: bool) -> bool:
    """A non-finite float, or (in a repaired text) a NaN/Infinity sentinel string."""
    if type(v) is float:
        return not math.isfinite(v)
    return repaired and type(v) is str and v in SENTINEL_VALUES


def bad_id_events(events: Sequence, warn, repaired: bool = False) -> list[int]:
    """Indices of events whose pid or tid is a non-finite number (``1e400``, ``NaN``;
    ``repaired``: the text's NaN/Infinity tokens became sentinel strings): not an id;
    each is skipped with a warning (the first 20 listed)."""
    bad = []
    for field in ("pid", "tid"):
        get = attrgetter(field)
        types = set(map(type, map(get, events)))
        if float not in types and not (repaired and str in types):
            continue
        vals = list(map(get, events))
        for k, v in enumerate(vals):
            if _nonfinite(v, repaired):
                bad.append((k, field, SENTINEL_VALUES.get(v, v) if type(v) is str else v))
    bad.sort()
    for j, (k, field, v) in enumerate(bad):
        if j == 20:
            warn(k, field, f"{len(bad) - 20} more events with a non-finite {field} skipped")
            break
        warn(k, field, f"event {_label(events[k].name)!r} has non-finite {field} ({v}); skipped")
    return sorted({k for k, _, _ in bad})


def has_bad_ids(lanes_raw: dict, events: Mapping[int, Any], by_phase: dict, repaired: bool = False) -> bool:
    """Whether any (pid, tid) among the ``X`` lane keys ``lanes_raw`` or the ids of the
    other-phase events (``by_phase``: phase → event indices; ``events``: index →
    event, for those indices) is non-finite (see
    ``bad_id_events``); cost: the distinct lanes plus the non-``X`` events."""

    def bad(v) -> bool:
        return _nonfinite(v, repaired)

    if any(bad(p) or bad(t) for p, t in lanes_raw):
        return True
    picked = [events[k] for ks in by_phase.values() for k in ks]
    suspect = {float, str} if repaired else {float}  # the only types ``_nonfinite`` can flag
    for field in ("pid", "tid"):
        vals = list(map(attrgetter(field), picked))
        if not suspect.isdisjoint(map(type, vals)) and any(map(bad, vals)):
            return True
    return False


def _label(x) -> str:
    return "" if x is None else (x if isinstance(x, str) else str(x))
