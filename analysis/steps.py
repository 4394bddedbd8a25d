"""Steps of a trace and recurring gaps by position in the step.

Definition ("Definitions" in ``docs/ARCHITECTURE.md``): ``ProfilerStep#N`` annotations
when present, else a user annotation such as ``decode_step`` (a CPU annotation whose
name contains ``step``), else the period of the repeating kernel-name sequence of the
busiest device. Gaps are grouped by their position in the step: the (previous kernel
name, next op name, ordinal) key of the step where the gap starts, giving "recurs in 9
of 10 steps, 0.46 ms median".
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from parsers.model import Kind, Trace

from .busy import device_event_mask
from .types import Cause, Gaps

__all__ = ["Steps", "GapGroup", "find_steps", "group_gaps", "step_annotation_mask", "STEP_NAME_RE"]

#: Kineto's per-step annotation.
PROFILER_STEP_RE = re.compile(r"^ProfilerStep#\d+$")
#: A user annotation that marks a step (``decode_step``, ``train_step``, ``step 3``).
STEP_NAME_RE = re.compile(r"step", re.IGNORECASE)
_NOT_STEP_RE = re.compile(r"^(optimizer|profilerstep)", re.IGNORECASE)


@dataclasses.dataclass(frozen=True, eq=False)
class Steps:
    """Step bounds. ``source``: ``"ProfilerStep"``, ``"annotation"`` or ``"period"``;
    ``name``: the annotation name (or the first kernel of the period);
    ``start_ns``/``end_ns``: int64 arrays, sorted, one element per step;
    ``events``: int64 event indices of the step annotations (empty for ``period``)."""

    source: str
    name: str
    start_ns: np.ndarray
    end_ns: np.ndarray
    events: np.ndarray

    def __len__(self) -> int:
        return int(self.start_ns.shape[0])

    @property
    def wall_ns(self) -> np.ndarray:
        return self.end_ns - self.start_ns

    def index_of(self, t_ns: np.ndarray) -> np.ndarray:
        """Step index containing each time (int64; -1 before the first step, and past
        the last step's end)."""
        t = np.asarray(t_ns, dtype=np.int64)
        k = np.searchsorted(self.start_ns, t, side="right") - 1
        kc = np.maximum(k, 0)
        inside = (k >= 0) & (t < self.end_ns[kc])
        return np.where(inside, k, -1)


@dataclasses.dataclass(frozen=True, eq=False)
class GapGroup:
    """Gaps recurring at one position of the step.

    ``id``; ``label`` (e.g. ``"attention → matmul"``); ``gap_indices`` int64 (rows of
    ``Gaps``); ``steps_with_gap``/``steps_total``; ``median_ns``/``total_ns``; ``cause``:
    the class with the largest total ns over the group's gaps (ties sync > copy >
    launch > host)."""

    id: int
    label: str
    gap_indices: np.ndarray
    steps_with_gap: int
    steps_total: int
    median_ns: int
    total_ns: int
    cause: Cause

    @property
    def summary(self) -> str:
        return (f"recurs in {self.steps_with_gap} of {self.steps_total} steps, "
                f"{self.median_ns / 1e6:.3f} ms median")


def _annotation_steps(trace: Trace, valid: np.ndarray, match) -> tuple[str, np.ndarray] | None:
    ann = np.flatnonzero(trace.mask_kind(Kind.ANNOTATION) & valid & (trace.dur_ns > 0))
    if ann.size == 0:
        return None
    ids = np.unique(trace.name_id[ann])
    good = np.array([k for k in ids if match(trace.names[int(k)])], dtype=np.int32)
    if good.size == 0:
        return None
    sel = ann[np.isin(trace.name_id[ann], good)]
    return trace.names[int(trace.name_id[sel[0]])], sel


def find_steps(trace: Trace, valid: np.ndarray) -> Steps | None:
    """Find steps (see the module docstring); None when none can be found.

    Annotation steps use the lane holding most of them and its outermost occurrences;
    overlapping steps are cut at the next step's start.
    """
    for source, match in (
        ("ProfilerStep", lambda s: bool(PROFILER_STEP_RE.match(s))),
        ("annotation", lambda s: bool(STEP_NAME_RE.search(s)) and not _NOT_STEP_RE.match(s)),
    ):
        found = _annotation_steps(trace, valid, match)
        if found is None:
            continue
        name, sel = found
        if source == "annotation":  # the most frequent matching name
            ids, counts = np.unique(trace.name_id[sel], return_counts=True)
            best = ids[np.argmax(counts)]
            sel = sel[trace.name_id[sel] == best]
            name = trace.names[int(best)]
        lanes, counts = np.unique(trace.lane[sel], return_counts=True)
        sel = sel[trace.lane[sel] == lanes[np.argmax(counts)]]
        sel = sel[trace.depth[sel] == trace.depth[sel].min()]
        sel = sel[np.argsort(trace.start_ns[sel], kind="stable")]
        start = trace.start_ns[sel].astype(np.int64)
        end = (start + trace.dur_ns[sel]).astype(np.int64)
        if start.size > 1:
            end[:-1] = np.minimum(end[:-1], start[1:])
        return Steps(source, name, start, end, sel.astype(np.int64))
    return _period_steps(trace, valid)


def _period_steps(trace: Trace, valid: np.ndarray, min_match: float = 0.9) -> Steps | None:
    """Steps from the period of the kernel-name sequence of the busiest device.

    The least frequent kernel name occurring at least twice anchors the period p (the
    most common distance between its occurrences, p >= 2); the sequence must repeat
    with period p on at least ``min_match`` of the anchored span."""
    best = None
    for dev in trace.devices():
        m = device_event_mask(trace, dev, (Kind.KERNEL,), valid)
        if best is None or m.sum() > best.sum():
            best = m
    if best is None or best.sum() < 4:
        return None
    idx = np.flatnonzero(best)
    idx = idx[np.argsort(trace.start_ns[idx], kind="stable")]
    seq = trace.name_id[idx]
    ids, counts = np.unique(seq, return_counts=True)
    cand = counts >= 2
    if not cand.any():
        return None
    anchor = ids[cand][np.argmin(counts[cand])]
    pos = np.flatnonzero(seq == anchor)
    d = np.diff(pos)
    vals, vc = np.unique(d, return_counts=True)
    p = int(vals[np.argmax(vc)])
    if p < 2 or vc.max() < max(1, int(min_match * d.size)):
        return None
    a, b = int(pos[0]), int(min(pos[-1] + p, seq.size))
    if b - a <= p:
        return None
    match = seq[a:b - p] == seq[a + p:b]
    if match.mean() < min_match:
        return None
    starts_pos = np.arange(a, b, p)
    start = trace.start_ns[idx[starts_pos]].astype(np.int64)
    end = np.empty_like(start)
    end[:-1] = start[1:]
    last = idx[starts_pos[-1]:b]
    end[-1] = int((trace.start_ns[last] + trace.dur_ns[last]).max())
    return Steps("period", trace.names[int(anchor)], start, end, np.zeros(0, np.int64))


def _unique_rows(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Like ``np.unique(key, axis=0, return_inverse=True)`` for int64 rows, by one
    ``lexsort`` (much faster than the structured-view path)."""
    o = np.lexsort(key.T[::-1])
    k = key[o]
    new = np.ones(k.shape[0], dtype=bool)
    new[1:] = (k[1:] != k[:-1]).any(axis=1)
    gid_sorted = np.cumsum(new) - 1
    inv = np.empty(k.shape[0], dtype=np.int64)
    inv[o] = gid_sorted
    return k[new], inv


def step_annotation_mask(trace: Trace, steps: Steps | None) -> np.ndarray:
    """Bool mask of the step ranges themselves: structure, not evidence.

    Every ``ProfilerStep#N`` on a CPU lane, whatever its kind (older Kineto versions
    record it as a ``cpu_op``, newer ones as a ``user_annotation``) and whatever the
    steps were found from, since the profiler's own step range is never work; and,
    when the steps come from a user annotation (``decode_step``), every annotation of
    that name. Time covered only by these ranges counts as "no events" (uninstrumented)
    in the classification."""
    m = np.zeros(len(trace), dtype=bool)
    if len(trace) == 0:
        return m
    cpu = np.array([not ln.is_gpu for ln in trace.lanes], dtype=bool)
    on_cpu = cpu[trace.lane] if cpu.size else np.zeros(len(trace), bool)
    ids = trace.name_ids_matching(lambda s: bool(PROFILER_STEP_RE.match(s)))
    m |= on_cpu & np.isin(trace.name_id, ids)
    if steps is not None and steps.source == "annotation":
        ids = trace.name_ids_matching(lambda s: s == steps.name)
        m |= trace.mask_kind(Kind.ANNOTATION) & np.isin(trace.name_id, ids)
    return m


def group_gaps(trace: Trace, gaps: Gaps, steps: Steps | None, class_ns: np.ndarray | None) -> tuple[list[GapGroup], np.ndarray]:
    """Group gaps by position in the step. Returns (groups, largest total first; group
    id per gap, int32, -1 outside any group).

    An *occurrence* is one gap, except at the step boundary: when steps are known, the
    idle at the trailing edge of the last step and at the leading edge of the first
    step are one stretch in steady state (the next step follows, and the same pattern
    starts it), so they form one occurrence whose duration is their sum. Key of an
    occurrence: (device, previous kernel name, next op name, ordinal among occurrences
    with those names in its step). With two or more steps, positions seen only once
    are not groups; with one step, only the step-boundary stretch is. Vectorised with
    ``np.unique``; the loop is over groups.
    """
    n = len(gaps)
    gid = np.full(n, -1, dtype=np.int32)
    if steps is None or n == 0 or len(steps) == 0:
        return [], gid
    step = steps.index_of(gaps.start_ns)
    last_step_end = int(steps.end_ns[-1])
    step = np.where((step < 0) & (gaps.start_ns < last_step_end) & (gaps.start_ns >= steps.start_ns[0]), len(steps) - 1, step)
    prev_name = np.where(gaps.prev_op >= 0, trace.name_id[np.maximum(gaps.prev_op, 0)], -1).astype(np.int64)
    next_name = np.where(gaps.next_op >= 0, trace.name_id[np.maximum(gaps.next_op, 0)], -1).astype(np.int64)
    occ = np.arange(n, dtype=np.int64)
    edge = gaps.edge if gaps.edge is not None else np.zeros(n, np.int8)
    for dev in np.unique(gaps.device):
        rows = np.flatnonzero(gaps.device == dev)
        lead = rows[(edge[rows] == 1) & (step[rows] == 0)]
        trail = rows[(edge[rows] == 2) & (step[rows] == len(steps) - 1)]
        if lead.size and trail.size:
            lo, tr = int(lead[0]), int(trail[-1])
            occ[lo] = tr
            next_name[tr] = next_name[lo]
            prev_name[lo] = prev_name[tr]
            step[lo] = step[tr]
    inside = step >= 0
    heads = np.flatnonzero(inside & (occ == np.arange(n)))
    if heads.size == 0:
        return [], gid
    dev64 = gaps.device.astype(np.int64)
    o = np.lexsort((gaps.start_ns[heads], next_name[heads], prev_name[heads], step[heads], dev64[heads]))
    h = heads[o]
    b = np.stack([dev64[h], step[h], prev_name[h], next_name[h]], axis=1)
    same = np.zeros(h.size, dtype=bool)
    same[1:] = (b[1:] == b[:-1]).all(axis=1)
    run_start = np.flatnonzero(~same)
    run_id = np.cumsum(~same) - 1
    ordinal = np.arange(h.size) - run_start[run_id]
    key = np.stack([dev64[h], prev_name[h], next_name[h], ordinal], axis=1)
    uk, inv = _unique_rows(key)
    occ_dur = np.bincount(occ, weights=gaps.dur_ns, minlength=n).astype(np.int64)
    head_group = np.full(n, -1, dtype=np.int64)
    head_group[h] = inv
    total_steps = len(steps)
    ng = uk.shape[0]
    sizes = np.bincount(inv, minlength=ng)
    wrap_heads = np.zeros(n, dtype=bool)
    wrap_heads[occ[occ != np.arange(n)]] = True
    if total_steps >= 2:
        keep = sizes >= 2
    else:  # one step: only the step-boundary stretch is a position worth a group
        keep = np.zeros(ng, dtype=bool)
        wrap_groups = head_group[np.flatnonzero(wrap_heads)]
        keep[wrap_groups[wrap_groups >= 0]] = True
    if not keep.any():
        return [], gid
    # per-group figures, vectorised: occurrences sorted by (group, duration)
    d_occ = occ_dur[h]
    o = np.lexsort((d_occ, inv))
    g_sorted, d_sorted = inv[o], d_occ[o]
    lo = np.searchsorted(g_sorted, np.arange(ng), side="left")
    median = (d_sorted[lo + (sizes - 1) // 2] + d_sorted[lo + sizes // 2]) // 2
    total = np.bincount(inv, weights=d_occ, minlength=ng).astype(np.int64)
    gs_pairs = np.unique(inv * (total_steps + 1) + step[h])
    steps_with = np.bincount(gs_pairs // (total_steps + 1), minlength=ng)
    member_group = head_group[occ]  # group of each gap through its occurrence head
    if class_ns is not None:
        cls_tot = np.zeros((ng, class_ns.shape[1]), dtype=np.int64)
        ok = member_group >= 0
        np.add.at(cls_tot, member_group[ok], class_ns[ok])
        cause_g = np.argmax(cls_tot, axis=1)
    else:
        cause_g = np.full(ng, int(Cause.UNCLASSIFIED))
    kept = np.flatnonzero(keep)
    kept = kept[np.lexsort((kept, -total[kept]))]  # largest total first, ties by key order
    new_id = np.full(ng, -1, dtype=np.int64)
    new_id[kept] = np.arange(kept.size)
    gid = np.where(member_group >= 0, new_id[np.maximum(member_group, 0)], -1).astype(np.int32)
    m_order = np.argsort(gid, kind="stable")
    mb = np.searchsorted(gid[m_order], np.arange(kept.size + 1))
    names = trace.names
    out: list[GapGroup] = []
    for new, g in enumerate(kept.tolist()):
        pn, nn, ordn = int(uk[g, 1]), int(uk[g, 2]), int(uk[g, 3])
        left = names[pn] if pn >= 0 else "step start"
        right = names[nn] if nn >= 0 else "step end"
        label = f"{left} → {right}" + (f" (#{ordn + 1})" if ordn else "")
        rows = m_order[mb[new]:mb[new + 1]].astype(np.int64)
        out.append(GapGroup(new, label, rows, int(steps_with[g]), total_steps, int(median[g]),
                            int(total[g]), Cause(int(cause_g[g]))))
    return out, gid
