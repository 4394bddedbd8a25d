"""Steps of a trace and recurring gaps by position in the step.

Definition ("Steps and recurring gaps" in ``docs/definitions.md``): ``ProfilerStep#N`` annotations
when present (a ``user_annotation``, or a ``cpu_op`` in older Kineto versions), else a user annotation such as ``decode_step`` (a CPU annotation whose
name contains ``step``), else the period of the repeating kernel-name sequence of the
busiest device. Gaps are grouped by their position in the step: the (previous kernel
name, next op name, ordinal) key of the step where the gap starts, giving "recurs in 9
of 10 steps, 0.46 ms median".
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from gapscope.analysis.busy import device_event_mask
from gapscope.analysis.names import short_kernel_name
from gapscope.analysis.types import Cause, Gaps
from gapscope.parsers.model import Kind, Trace
from gapscope.units import fmt_dur

__all__ = [
    "Steps",
    "GapGroup",
    "find_steps",
    "is_drawn",
    "device_side_steps",
    "group_gaps",
    "step_annotation_mask",
    "edge_gaps",
    "STEP_NAME_RE",
]

#: Characters of each kernel name in a group's label (the full names: ``full_label``).
LABEL_NAME_CHARS = 40
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
    #: True when the windows are the steps as the GPU ran them (``device_side_steps``):
    #: the GPU ran behind the CPU, so the CPU's windows did not hold their own work.
    on_gpu: bool = False

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

    def owner_of(self, start_ns: np.ndarray, end_ns: np.ndarray) -> np.ndarray:
        """Step each interval (a gap, ns) belongs to (int64): the last step that starts
        before the interval ends, so a gap inside a step is that step's, and a gap
        between two steps (after one's end, before the next one's start) or straddling
        the next one's start is the next step's: it holds that step's start-of-step
        work (loading its batch, its input copies); -1 for an interval starting from
        the last step's end on, or before the first step's start unless most of its
        time (over half its ns) lies inside the first step: then it is the first
        step's (sglang_decode's 463.295 ms wait begins 0.119 ms before its only
        ``step[DECODE bs=32]``, 99.97% of it inside). The same rule decides the edge
        gaps of a multi-step trace (``edge_gaps``) and the one-offs of a one-step trace
        (``findings``)."""
        a = np.asarray(start_ns, dtype=np.int64)
        z = np.asarray(end_ns, dtype=np.int64)
        if len(self) == 0:
            return np.full(a.shape, -1, dtype=np.int64)
        k = np.searchsorted(self.start_ns, z, side="left") - 1
        kc = np.clip(k, 0, len(self) - 1)
        # wholly after that step's end (ending at the next one's start): the next step's
        k = np.where((k >= 0) & (a >= self.end_ns[kc]) & (kc + 1 < len(self)), kc + 1, k)
        s0 = self.start_ns[0]
        inside0 = np.clip(np.minimum(z, self.end_ns[0]) - s0, 0, None)
        before = (a < s0) & (2 * inside0 <= z - a)  # at most half of it inside step 0
        outside = before | (a >= self.end_ns[-1])
        return np.where(outside, -1, k)


@dataclasses.dataclass(frozen=True, eq=False)
class GapGroup:
    """Gaps recurring at one position of the step.

    ``id``; ``label`` (e.g. ``"attention → matmul"``: each name shortened to
    ``LABEL_NAME_CHARS`` by ``names.short_kernel_name``; ``full_label`` holds the names
    verbatim); ``gap_indices`` int64 (rows of
    ``Gaps``); ``steps_with_gap``/``steps_total``; ``median_ns``/``total_ns``; ``cause``:
    the class with the largest total ns over the group's gaps (ties sync > copy >
    launch > host); ``one_offs``: int64 occurrence-head gap indices at the same
    position whose size is far (``RECUR_FACTOR``) from every other occurrence there,
    left out of any group ("a one-off")."""

    id: int
    label: str
    gap_indices: np.ndarray
    steps_with_gap: int
    steps_total: int
    median_ns: int
    total_ns: int
    cause: Cause
    one_offs: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))
    full_label: str = ""

    @property
    def summary(self) -> str:
        return f"recurs in {self.steps_with_gap} of {self.steps_total} steps, {fmt_dur(self.median_ns)} median"


def _annotation_steps(
    trace: Trace, valid: np.ndarray, match, kinds=(Kind.ANNOTATION,)
) -> tuple[str, np.ndarray] | None:
    cpu = np.array([not ln.is_gpu for ln in trace.lanes], dtype=bool)
    on_cpu = cpu[trace.lane] if cpu.size else np.zeros(len(trace), bool)
    ann = np.flatnonzero(trace.mask_kind(*kinds) & on_cpu & valid & (trace.dur_ns > 0))
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
    for source, match, kinds in (
        # older Kineto versions record ProfilerStep#N as a cpu_op ("Operator")
        ("ProfilerStep", lambda s: bool(PROFILER_STEP_RE.match(s)), (Kind.ANNOTATION, Kind.CPU_OP, Kind.OTHER)),
        ("annotation", lambda s: bool(STEP_NAME_RE.search(s)) and not _NOT_STEP_RE.match(s), (Kind.ANNOTATION,)),
    ):
        found = _annotation_steps(trace, valid, match, kinds)
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


#: The GPU runs behind the CPU when, in more than this share of the steps that launch
#: GPU work, that work still runs after the CPU has finished the *next* step.
BEHIND_SHARE = 0.5
#: The queue that runs behind must hold work of at least this share of the steps for
#: its windows to be the steps (a loop that alternates streams has no such queue).
QUEUE_STEP_SHARE = 0.9


def device_side_steps(trace: Trace, steps: Steps | None, launches: np.ndarray, valid: np.ndarray) -> Steps | None:
    """``steps`` as the GPU ran them when the GPU ran behind the CPU, else ``steps``.

    A step's CPU window (``ProfilerStep#N``) holds the launches of its GPU work. When
    the CPU waits for the GPU at least once a step, that work runs inside the window or
    just after it, and the CPU windows are the steps. When it does not (a CUDA-graph
    replay loop, an asynchronous training loop), the CPU runs ahead and the queue grows:
    the CPU window of a 0.17 ms token can be 0.04 ms long while its kernels run steps
    later, and busy, idle and step time taken over the CPU windows describe the CPU's
    pace, not the GPU's.

    The queue is the GPU lane (one stream) that ran the most launched work inside the
    steps. When in a majority of the steps (``BEHIND_SHARE``) its work of a step still
    runs after the next CPU step ended, the steps become its windows: step ``k`` runs
    from the start of the first op on that lane launched in its CPU window to the start
    of the first op launched in step ``k + 1`` (the last one to the end of its last op);
    steps that launched nothing there are left out. They stay as they are unless the
    lane has work in ``QUEUE_STEP_SHARE`` of the steps and those starts increase step by
    step (an op that starts before its own launch, a clock artefact, is not counted);
    steps found from the kernel period are already the GPU's and stay too.

    ``launches``: ``gaps.launch_of(trace)`` (int64 per event, -1 for none); ``valid``:
    bool per event. Returns a ``Steps`` with ``on_gpu=True`` and the same ``source``
    and ``name``, or ``steps`` itself (also with fewer than three steps: too few to
    tell a queue that grows).
    """
    if steps is None or steps.source == "period" or len(steps) < 3:
        return steps
    gpu = trace.mask_kind(Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET) & valid & (launches >= 0)
    idx = np.flatnonzero(gpu)
    if idx.size == 0:
        return steps
    start = trace.start_ns[idx].astype(np.int64)
    launched = trace.start_ns[launches[idx]].astype(np.int64)
    k = steps.index_of(launched)
    keep = (k >= 0) & (start >= launched)
    idx, k, start = idx[keep], k[keep], start[keep]
    if idx.size == 0:
        return steps
    lane = trace.lane[idx].astype(np.int64)
    dur = trace.dur_ns[idx].astype(np.int64)
    queue = int(np.argmax(np.bincount(lane, weights=dur.astype(np.float64))))
    on = lane == queue
    k, start, end = k[on], start[on], start[on] + dur[on]
    n = len(steps)
    first = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    last_end = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(first, k, start)
    np.maximum.at(last_end, k, end)
    has = first != np.iinfo(np.int64).max
    judged = has[:-1]
    if int(judged.sum()) < 2 or float(has.mean()) < QUEUE_STEP_SHARE:
        return steps
    late = last_end[:-1][judged] > steps.end_ns[1:][judged]
    if float(late.mean()) <= BEHIND_SHARE:
        return steps
    ks = np.flatnonzero(has)
    s0 = first[ks]
    if not bool((s0[1:] > s0[:-1]).all()):
        return steps
    s1 = np.empty_like(s0)
    s1[:-1] = s0[1:]
    s1[-1] = max(int(last_end[ks[-1]]), int(s0[-1]) + 1)
    events = steps.events[ks] if steps.events.size == n else steps.events
    return Steps(steps.source, steps.name, s0, s1, events, on_gpu=True)


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
    match = seq[a : b - p] == seq[a + p : b]
    if match.mean() < min_match:
        return None
    starts_pos = np.arange(a, b, p)
    start = trace.start_ns[idx[starts_pos]].astype(np.int64)
    end = np.empty_like(start)
    end[:-1] = start[1:]
    last = idx[starts_pos[-1] : b]
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


def is_drawn(trace: Trace) -> bool:
    """Whether ``trace`` is a drawn timeline (an ASCII exercise: ``SourceInfo.format``
    ``ascii-*``), not a recording."""
    return str(trace.source.format).startswith("ascii")


def edge_gaps(gaps: Gaps, steps: Steps | None, drawn: bool = False) -> np.ndarray:
    """bool per gap: an *edge gap*, idle at the capture's edges rather than in a
    steady-state step ("Findings" in the design): the idle before the first kernel of
    the capture and after its last one (``Gaps.edge`` leading/trailing: the profiler's
    start and stop, the loop's tail) when there are two or more steps, and any gap that
    ``Steps.owner_of`` gives no step: starting from the last step's end on, or before
    the first step with at most half its time inside it. A gap between two
    steps, or straddling the next one's start, belongs to the next one
    (``Steps.owner_of``: hta/control's 1.7 ms ``## load_batch ##`` and input copy begin
    22-94 µs before each ProfilerStep), so it is no edge. Edge gaps are shown and labelled, but kept out of the
    recurring groups, the per-step budget and the findings' per-step figures.

    The first step's head before the capture's first kernel stays an edge
    (``Gaps.edge`` leading), although the step's range is complete: the profiler
    starts recording at that step's start, so GPU work queued before it (the previous
    step's kernels still running, CUPTI's start-up) goes unrecorded, and that idle
    cannot be told from the profiler's start (hta/control's gap #0 inside
    ProfilerStep#1009 is the same load stall as the other steps', but nothing in the
    trace can show that). Its stall counts in the steps after it.

    With one step the step's own head and tail are its steady state (the decode-step
    exercise: one complete ``decode_step``, "this pattern repeats for every token"), so
    no gap is an edge. With no steps the window is [first GPU op, last GPU op]: its
    edge gaps (``Gaps.edge``) are copies before the first kernel or after the last one,
    the program's initial upload and its final read (audit 3, extrap/profile16 #0 and
    #6), so those are edges; a window opening and closing with kernels has none. A
    drawn timeline (``drawn``: an ASCII exercise) is one step of its program, as the
    seeds draw them ("copy on the path": the H2D copy before the kernel is the step's
    own), so it has no edges without steps."""
    n = len(gaps)
    out = np.zeros(n, dtype=bool)
    if (steps is None or len(steps) == 0) and gaps.edge is not None and not drawn:
        return gaps.edge != 0
    if steps is None or len(steps) < 2 or n == 0:
        return out
    if gaps.edge is not None:
        out |= gaps.edge != 0
    out |= steps.owner_of(gaps.start_ns, gaps.end_ns) < 0
    return out


def group_gaps(
    trace: Trace, gaps: Gaps, steps: Steps | None, class_ns: np.ndarray | None, skip: np.ndarray | None = None
) -> tuple[list[GapGroup], np.ndarray]:
    """Group gaps by position in the step (``skip``: bool per gap, gaps kept out of
    every group: the one-time costs, protocol step 1). Returns (groups, largest total first; group
    id per gap, int32, -1 outside any group).

    An *occurrence* is one gap, except at the step boundary: when steps are known, the
    idle at the trailing edge of the last step and at the leading edge of the first
    step are one stretch in steady state (the next step follows, and the same pattern
    starts it), so they form one occurrence whose duration is their sum. Key of an
    occurrence: (device, previous kernel name, next op name, ordinal among occurrences
    with those names in its step). The occurrences of a position are split into size
    bands (``_bands``: sorted, cut where one is more than ``RECUR_FACTOR`` times the
    one before), so a group's median describes each of its members. With two or more
    steps, a band seen only once is no group by itself; such lone occurrences with the
    same neighbours and a similar size at *other* ordinals form a group (a stall whose
    place in the step's kernel order varies), and the rest are the ``one_offs`` of the
    largest group at their position. With one step, only the step-boundary stretch is
    a group. Vectorised with ``np.unique``/``lexsort``; the loops are over groups.
    """
    n = len(gaps)
    gid = np.full(n, -1, dtype=np.int32)
    if steps is None or n == 0 or len(steps) == 0:
        return [], gid
    step = steps.owner_of(gaps.start_ns, gaps.end_ns)  # a gap between two steps: the next step's
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
    if skip is not None:
        inside &= ~skip[occ] & ~skip
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
    uk, pos_id = _unique_rows(key)  # position of each occurrence head
    occ_dur = np.bincount(occ, weights=gaps.dur_ns, minlength=n).astype(np.int64)
    d_occ = occ_dur[h]
    total_steps = len(steps)
    # a position's occurrences of wildly different sizes are not one recurring gap:
    # split each position into size bands (RECUR_FACTOR apart)
    band = _bands(pos_id, d_occ)
    nb = int(band.max()) + 1
    band_size = np.bincount(band, minlength=nb)
    band_pos = np.zeros(nb, dtype=np.int64)
    band_pos[band] = pos_id
    inv = band.copy()  # final group per head; -1: not grouped
    label_row = band_pos.copy()  # row of ``uk`` naming each group
    with_ordinal = np.ones(nb, dtype=bool)
    wrap_heads = np.zeros(n, dtype=bool)
    wrap_heads[occ[occ != np.arange(n)]] = True
    if total_steps >= 2:
        single = band_size[band] == 1
        inv[single] = -1
        # occurrences alone at their position that match others by neighbours and size
        # at other positions (a stall whose ordinal in the step varies) recur as well
        if single.sum() >= 2:
            si = np.flatnonzero(single)
            _, pos2 = _unique_rows(key[si, :3])
            band2 = _bands(pos2, d_occ[si])
            size2 = np.bincount(band2)
            ok = size2[band2] >= 2
            if ok.any():
                b2, b2_inv = np.unique(band2[ok], return_inverse=True)
                inv[si[ok]] = nb + b2_inv
                first = np.full(b2.size, -1, dtype=np.int64)
                np.maximum.at(first, b2_inv, np.arange(ok.sum()))  # any member names it
                label_row = np.concatenate((label_row, pos_id[si[ok]][first]))
                with_ordinal = np.concatenate((with_ordinal, np.zeros(b2.size, dtype=bool)))
    else:  # one step: only the step-boundary stretch is a position worth a group
        hw = wrap_heads[h]
        keep_band = np.zeros(nb, dtype=bool)
        keep_band[band[hw]] = True
        inv[~keep_band[band]] = -1
    if (inv < 0).all():
        return [], gid
    grouped = inv >= 0
    ids_used = np.unique(inv[grouped])
    inv = np.where(grouped, np.searchsorted(ids_used, inv), -1)
    label_row, with_ordinal = label_row[ids_used], with_ordinal[ids_used]
    ng = ids_used.size
    hg, dg = inv[grouped], d_occ[grouped]
    sizes = np.bincount(hg, minlength=ng)
    # per-group figures, vectorised: occurrences sorted by (group, duration)
    o = np.lexsort((dg, hg))
    g_sorted, d_sorted = hg[o], dg[o]
    first_of = np.searchsorted(g_sorted, np.arange(ng), side="left")
    median = (d_sorted[first_of + (sizes - 1) // 2] + d_sorted[first_of + sizes // 2]) // 2
    total = np.bincount(hg, weights=dg, minlength=ng).astype(np.int64)
    gs_pairs = np.unique(hg * (total_steps + 1) + step[h][grouped])
    steps_with = np.bincount(gs_pairs // (total_steps + 1), minlength=ng)
    head_group = np.full(n, -1, dtype=np.int64)
    head_group[h] = inv
    member_group = head_group[occ]  # group of each gap through its occurrence head
    if class_ns is not None:
        cls_tot = np.zeros((ng, class_ns.shape[1]), dtype=np.int64)
        ok = member_group >= 0
        np.add.at(cls_tot, member_group[ok], class_ns[ok])
        cause_g = np.argmax(cls_tot, axis=1)
    else:
        cause_g = np.full(ng, int(Cause.UNCLASSIFIED))
    kept = np.arange(ng)
    kept = kept[np.lexsort((label_row, -total))]  # largest total first, ties by key order
    new_id = np.empty(ng, dtype=np.int64)
    new_id[kept] = np.arange(ng)
    gid = np.where(member_group >= 0, new_id[np.maximum(member_group, 0)], -1).astype(np.int32)
    m_order = np.argsort(gid, kind="stable")
    mb = np.searchsorted(gid[m_order], np.arange(ng + 1))
    # one-offs: ungrouped occurrences at a position where a group recurs (its largest)
    one_offs: dict[int, np.ndarray] = {}
    if total_steps >= 2:
        cand = np.flatnonzero(grouped & (inv < nb))  # heads of band groups (not pass 2)
        pos_group = np.full(uk.shape[0], -1, dtype=np.int64)
        if cand.size:
            o2 = np.lexsort((-sizes[inv[cand]], pos_id[cand]))  # per position, largest first
            c = cand[o2]
            first = np.ones(c.size, dtype=bool)
            first[1:] = pos_id[c[1:]] != pos_id[c[:-1]]
            pos_group[pos_id[c[first]]] = new_id[inv[c[first]]]
        lone = np.flatnonzero(~grouped)
        gp = pos_group[pos_id[lone]]
        lone, gp = lone[gp >= 0], gp[gp >= 0]
        if lone.size:
            o3 = np.argsort(gp, kind="stable")
            ug, starts = np.unique(gp[o3], return_index=True)
            for gg, part in zip(ug.tolist(), np.split(h[lone[o3]], starts[1:])):
                one_offs[gg] = np.sort(part)
    names = trace.names
    out: list[GapGroup] = []
    for new, g in enumerate(kept.tolist()):
        r = int(label_row[g])
        pn, nn, ordn = int(uk[r, 1]), int(uk[r, 2]), int(uk[r, 3])
        left = names[pn] if pn >= 0 else "step start"
        right = names[nn] if nn >= 0 else "step end"
        nth = f" (#{ordn + 1})" if ordn and with_ordinal[g] else ""
        label = f"{short_kernel_name(left, LABEL_NAME_CHARS)} → {short_kernel_name(right, LABEL_NAME_CHARS)}{nth}"
        rows = m_order[mb[new] : mb[new + 1]].astype(np.int64)
        out.append(
            GapGroup(
                new,
                label,
                rows,
                int(steps_with[g]),
                total_steps,
                int(median[g]),
                int(total[g]),
                Cause(int(cause_g[g])),
                one_offs.get(new, np.zeros(0, np.int64)).astype(np.int64),
                full_label=f"{left} → {right}{nth}",
            )
        )
    return out, gid


#: Occurrences at one position whose sizes differ by more than this factor (next to
#: each other in size order) are different things: a 63 ms stall is not "the 2 µs gap
#: that recurs in 3 of 6 steps".
RECUR_FACTOR = 4.0


def _bands(group: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """int64 band id per element (ids dense from 0): within each ``group``, durations
    sorted and cut where one exceeds ``RECUR_FACTOR`` times the one before."""
    o = np.lexsort((dur, group))
    gs, ds = group[o], dur[o].astype(np.float64)
    brk = np.ones(o.size, dtype=bool)
    brk[1:] = (gs[1:] != gs[:-1]) | (ds[1:] > RECUR_FACTOR * np.maximum(ds[:-1], 1.0))
    out = np.empty(o.size, dtype=np.int64)
    out[o] = np.cumsum(brk) - 1
    return out
