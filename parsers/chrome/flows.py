"""Kineto launch → GPU op flow events (``ac2g``; older ``async_cpu_to_gpu``/``async_gpu``)
as a second source of launch links, after ``args.correlation``.

Kineto writes, for each launch or copy call, a flow start ``s`` on the CPU runtime call
(its pid, tid and ``ts``) and a flow end ``f`` with ``bp: "e"`` on the GPU op (its
device pid, stream tid and ``ts``), both with ``id`` = the CUPTI correlation id and the
same ``cat`` (Kineto ``output_json.cpp``). Binding follows the Trace Event Format (flow
v1): ``s`` binds to the enclosing slice of its thread, ``f`` with ``bp: "e"`` to the
enclosing slice, any other ``f`` to the next slice that starts at or after its ``ts``.

Correlation stays the first source: these flows only link GPU work ops (kernels,
copies, memsets) that ``args.correlation`` left without a launch call (GPU ops whose
args were stripped, runtime calls without a correlation). Timestamps a float64 cannot
hold exactly (epoch µs with a fraction) are matched within 1 µs.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import repeat
from operator import attrgetter, eq
from typing import Any

import numpy as np

from gapscope.parsers.chrome.columns import times
from gapscope.parsers.chrome.times import NEED_EXACT, OK
from gapscope.parsers.lanes import id_text
from gapscope.parsers.model import CPU_CALL_KINDS, GPU_KINDS, GPU_WORK_KINDS

__all__ = ["kineto_flow_links", "has_unlinked_work", "unique_pairs", "TOLERANCE_NS"]

#: Slack (ns) when a flow's ``ts`` was only approximated (float64 of epoch µs).
TOLERANCE_NS = 1000

_CPU_CALLS = np.array(sorted(int(k) for k in CPU_CALL_KINDS), dtype=np.int8)
_GPU = np.array(sorted(int(k) for k in GPU_KINDS), dtype=np.int8)
_WORK = np.array(sorted(int(k) for k in GPU_WORK_KINDS), dtype=np.int8)
_get_ph, _get_bp, _get_pid, _get_tid = attrgetter("ph"), attrgetter("bp"), attrgetter("pid"), attrgetter("tid")


def kineto_flow_links(
    events: Mapping[int, Any],
    flow_ks: list[int],
    kind: np.ndarray,
    start: np.ndarray,
    dur: np.ndarray,
    lane_final: np.ndarray,
    lanes_raw: dict,
    remap: np.ndarray,
    linked_dst: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(src rows, dst rows) of launch call → GPU op links from Kineto flow events.

    ``events[k]`` for ``k`` in ``flow_ks``: the flow events (``s``/``t``/``f``, with
    ``cat``, ``id``, ``pid``, ``tid``, ``ts``, ``bp``); ``kind``/``start``/``dur``
    (int8, int64 ns, int64 ns) and ``lane_final`` (int32) describe the rows;
    ``lanes_raw`` maps raw (pid, tid) to raw lane ids, ``remap`` raw → final lane;
    ``linked_dst``: rows already linked (by correlation). Returns int64 arrays: each
    unlinked GPU work op that an ``f`` binds to, paired with the CPU runtime call
    that the ``s`` of the same (cat, id) binds to; one call per op.
    """
    empty = np.zeros(0, np.int64)
    work = np.isin(kind, _WORK)
    unlinked = work.copy()
    unlinked[np.asarray(linked_dst, dtype=np.int64)] = False
    if not flow_ks or not unlinked.any():
        return empty, empty
    fl = [events[k] for k in flow_ks]
    m = len(fl)
    ts, status = times(fl, "ts")
    tol = np.where(status == NEED_EXACT, TOLERANCE_NS, 0)
    usable = (status == OK) | (status == NEED_EXACT)
    raw = np.fromiter(
        map(lanes_raw.get, zip(map(_get_pid, fl), map(_get_tid, fl)), repeat(-1)), dtype=np.int64, count=m
    )
    usable &= raw >= 0
    lane = np.where(raw >= 0, remap[np.maximum(raw, 0)] if remap.size else 0, -1)
    is_s = np.fromiter(map(eq, map(_get_ph, fl), repeat("s")), dtype=bool, count=m) & usable
    is_f = np.fromiter(map(eq, map(_get_ph, fl), repeat("f")), dtype=bool, count=m) & usable
    enclosing = np.fromiter(map(eq, map(_get_bp, fl), repeat("e")), dtype=bool, count=m)

    # f → GPU op (any GPU-lane slice; kept only when it is an unlinked work op)
    f_idx = np.flatnonzero(is_f)
    f_row = _bind(f_idx, ts, tol, lane, enclosing, np.flatnonzero(np.isin(kind, _GPU)), start, dur, lane_final)
    hit = f_row >= 0
    hit[hit] = unlinked[f_row[hit]]
    if not hit.any():
        return empty, empty
    want: dict[tuple[str, str], int] = {}
    for j, row in zip(f_idx[hit].tolist(), f_row[hit].tolist()):
        want.setdefault(_key(fl[j]), row)

    # s → CPU runtime call, only for the (cat, id) pairs wanted
    wanted_ids = {k[1] for k in want}
    s_idx = np.array([j for j in np.flatnonzero(is_s).tolist() if id_text(fl[j].id) in wanted_ids], dtype=np.int64)
    s_row = _bind(
        s_idx, ts, tol, lane, np.ones(m, bool), np.flatnonzero(np.isin(kind, _CPU_CALLS)), start, dur, lane_final
    )
    src, dst, seen = [], [], set()
    for j, row in zip(s_idx.tolist(), s_row.tolist()):
        if row < 0:
            continue
        d = want.get(_key(fl[j]))
        if d is None or d in seen:
            continue
        seen.add(d)
        src.append(row)
        dst.append(d)
    return np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)


def has_unlinked_work(kind: np.ndarray, linked: np.ndarray) -> bool:
    """True when some GPU work op (kernel, copy, memset; ``kind`` int8) is not among
    the flow destinations ``linked`` (int64 row indices)."""
    work = np.isin(kind, _WORK)
    n_work = int(np.count_nonzero(work))
    if n_work == 0:
        return False
    if linked.size < n_work:
        return True
    covered = np.zeros(kind.size, dtype=bool)
    covered[linked] = True
    return bool((work & ~covered).any())


def _key(e) -> tuple[str, str]:
    return (id_text(e.cat), id_text(e.id))


def _bind(
    idx: np.ndarray,
    ts: np.ndarray,
    tol: np.ndarray,
    lane: np.ndarray,
    enclosing: np.ndarray,
    rows: np.ndarray,
    start: np.ndarray,
    dur: np.ndarray,
    lane_final: np.ndarray,
) -> np.ndarray:
    """Row each flow point ``idx`` binds to among ``rows`` (-1 = none): with
    ``enclosing``, the latest-starting row of its lane with start ≤ ts ≤ end; else
    the first row of its lane starting at or after ts (± ``tol``)."""
    out = np.full(idx.size, -1, dtype=np.int64)
    if idx.size == 0 or rows.size == 0:
        return out
    o = np.lexsort((-dur[rows], start[rows], lane_final[rows]))
    r_o = rows[o]
    ln_o, st_o = lane_final[r_o], start[r_o]
    en_o = st_o + dur[r_o]
    pl, pt, ptol, penc = lane[idx], ts[idx], tol[idx], enclosing[idx]
    for ln in np.unique(pl).tolist():
        a, b = np.searchsorted(ln_o, [ln, ln + 1])
        if a == b:
            continue
        sel = np.flatnonzero(pl == ln)
        t, tl, enc = pt[sel], ptol[sel], penc[sel]
        st, en = st_o[a:b], en_o[a:b]
        j_enc = np.searchsorted(st, t + tl, side="right") - 1
        jc = np.maximum(j_enc, 0)
        ok_enc = (j_enc >= 0) & (en[jc] >= t - tl)
        j_next = np.searchsorted(st, t - tl, side="left")
        jn = np.minimum(j_next, b - a - 1)
        ok_next = j_next < b - a
        j = np.where(enc, jc, jn)
        ok = np.where(enc, ok_enc, ok_next)
        out[sel[ok]] = r_o[a + j[ok]]
    return out


def unique_pairs(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) flow pairs (int64 row indices) with repeats removed (a link found by
    correlation and by a flow event is one link), first occurrence kept, order
    otherwise unchanged. One sort of an int64 key."""
    if src.size < 2:
        return src, dst
    key = src * (int(dst.max()) + 1) + dst
    o = np.argsort(key, kind="stable")
    ko = key[o]
    dup = ko[1:] == ko[:-1]
    if not dup.any():
        return src, dst
    keep = np.ones(src.size, dtype=bool)
    keep[o[1:][dup]] = False  # stable: the first occurrence of each key comes first
    return src[keep], dst[keep]
