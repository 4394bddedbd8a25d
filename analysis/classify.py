"""Cause class of each idle gap: first starved or blocked, then what kept the GPU idle.

Definition ("Starved or blocked, first" and "Cause classes" in
``docs/definitions.md``). For each gap [a, b) with next op N, its launch call C and the
thread T that made C (``effective_thread``), the launch lateness ``L`` is measured from
the moment N's work reached the queue (``gaps.launch_queued_at``).

**Blocked (queued, L <= 0).** The launch call had returned before the gap began: the GPU
had N queued and waited on something GPU-side. Nothing the CPU did meanwhile can be the
cause. GPU copies (memcpy/memset) running in the gap → copy; the rest → dependency, with
what the trace shows N waited on (``Gaps.wait_kind``): a stream wait enqueued before it
(``gapscope.analysis.waits``), a collective, the ordering inside a CUDA graph, GPU-side
dispatch at the trace's timestamp resolution (``Params.dispatch_max_ns``), or nothing
recorded.

**Starved (L > 0, or no next op at a step's trailing edge, or no linked launch).** The
gap is partitioned in time, so per-class totals sum exactly to the gap:

1. GPU copies of the device in the gap → copy (a small ``<= small_copy_max_bytes``
   device-to-host copy, the ``.item()`` signature, and Kineto ``cuda_sync`` records →
   sync). Copy is GPU copy time only: the thread's time in a copy call outside the
   GPU's copies is classed by what it was, below (a wait, or host work);
2. [launch_from, b): from the start of N's launch call to the gap end → launch (the
   exposed launch path: call, driver, queue);
3. [sync_from = a, launch_from): T was in a *blocking* wait (``evidence_kinds``) that
   began before the GPU went idle and ended at or after it: the wait drained the queue,
   and the host work after it until the next launch is the sync's cost (the sync
   cliff) → sync. A blocking copy call (``evidence_kinds.blocking_copy_calls``: it
   returned only after its GPU copy ended, so it waited for the queue before it) is
   such a wait. A wait on another thread is not T's;
4. [a, sync_from) (the whole head when there is no cliff): what T did: blocking waits
   that began inside the gap → sync for their own length (the device was already idle,
   so they drained nothing: what follows them is not their cost); launch calls →
   launch; copy calls (outside the GPU's copies: staging, the driver) are host work; everything else (operators, Python, annotations, allocator calls, uninstrumented time inside a
   recorded range) → host. In a launch-bound gap (a picket-fence gap, or a short
   ``<= launch_gap_max_ns`` gap whose T shows only launch calls, the ops issuing them
   and uninstrumented time) the host and uninstrumented time is launch as well: T
   issued the work as fast as it could. Uninstrumented time with no linked launch
   (and not at a trailing edge), or with no CPU data, is unclassified.

Vectorised: one loop over distinct (T, device) pairs, coverage by prefix sums and
``searchsorted``; no loop over gaps.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable

import numpy as np

from gapscope.analysis.busy import coverage, device_event_mask, device_union, union_intervals
from gapscope.analysis.evidence_kinds import (
    COLLECTIVE_RE,
    GRAPH_LAUNCH_RE,
    NO_CLASS,
    blocking_copy_calls,
    capture_windows,
    event_cause,
    evidence_end,
    graph_captures,
    ids_matching,
    module_loading_gaps,
    one_time_mask,
)
from gapscope.analysis.gaps import EDGE_TRAILING
from gapscope.analysis.types import Cause, Gaps, Params, Trust, WaitKind
from gapscope.analysis.waits import stream_wait_events
from gapscope.parsers.model import CopyKind, Kind, Trace

__all__ = [
    "classify",
    "effective_thread",
    "launching_ops",
    "launched_before",
    "launched_before_window",
    "SECONDARY_MIN_SHARE",
    "rank_classes",
    "SLOW_LAUNCH_NS",
]

_E = np.zeros(0, dtype=np.int64)

#: A single launch call at least this long (ns) is first-use cost, not dispatch overhead.
SLOW_LAUNCH_NS = 1_000_000


def effective_thread(trace: Trace, gaps: Gaps, launches: np.ndarray) -> np.ndarray:
    """int32 CPU lane whose activity explains each gap: the next op's launching lane,
    else the previous kernel's launching lane, else the device's main launching lane
    (most launch calls to it), else the CPU lane with the most events (traces without
    launch links, e.g. sketches), else -1 (no CPU data)."""
    t = gaps.launch_lane.astype(np.int64).copy()
    miss = (t < 0) & (gaps.prev_op >= 0)
    if miss.any():
        pl = launches[gaps.prev_op[miss]]
        t[miss] = np.where(pl >= 0, trace.lane[np.maximum(pl, 0)], -1)
    miss = t < 0
    if miss.any():
        cpu = np.array([not ln.is_gpu for ln in trace.lanes], dtype=bool)
        counts = np.diff(trace.lane_offsets)
        busiest = int(np.argmax(np.where(cpu, counts, -1))) if cpu.any() and counts[cpu].max() > 0 else -1
        lane_dev = np.array([ln.device if ln.is_gpu else -1 for ln in trace.lanes], dtype=np.int64)
        for dev in np.unique(gaps.device[miss]):
            rows = miss & (gaps.device == dev)
            dst_ok = (launches >= 0) & (lane_dev[trace.lane] == dev) if lane_dev.size else np.zeros(len(trace), bool)
            src = launches[dst_ok]
            if src.size:
                lanes, c = np.unique(trace.lane[src], return_counts=True)
                t[rows] = int(lanes[np.argmax(c)])
            else:
                t[rows] = busiest
    return t.astype(np.int32)


def launching_ops(trace: Trace, cause: np.ndarray) -> np.ndarray:
    """Bool mask of host-class events that enclose a launch call (the op, Python frame
    or annotation that issued it), from nesting ``depth``: loop over depth levels."""
    n = len(trace)
    flag = cause == int(Cause.LAUNCH)
    if n == 0 or not flag.any():
        return np.zeros(n, dtype=bool)
    depth = trace.depth.astype(np.int64)
    by_depth = np.argsort(depth, kind="stable")  # indices grouped by depth, ascending index
    maxd = int(depth[by_depth[-1]])
    bounds = np.searchsorted(depth[by_depth], np.arange(maxd + 2))
    parent = np.full(n, -1, dtype=np.int64)
    for d in range(1, maxd + 1):
        kids = by_depth[bounds[d] : bounds[d + 1]]
        cand = by_depth[bounds[d - 1] : bounds[d]]
        if kids.size == 0 or cand.size == 0:
            continue
        pos = np.searchsorted(cand, kids, side="right") - 1
        ok = pos >= 0
        p = cand[np.maximum(pos, 0)]
        ok &= trace.lane[p] == trace.lane[kids]
        parent[kids[ok]] = p[ok]
    for d in range(maxd, 0, -1):
        kids = by_depth[bounds[d] : bounds[d + 1]]
        kids = kids[flag[kids] & (parent[kids] >= 0)]
        flag[parent[kids]] = True
    return flag & (cause == int(Cause.HOST))


def _lane_union(trace: Trace, end: np.ndarray, lane: int, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of the ``mask`` events of one lane, as [start, evidence end) intervals."""
    sl = trace.lane_slice(lane)
    m = mask[sl]
    return union_intervals(trace.start_ns[sl][m], end[sl][m])


def _u(*pairs) -> tuple[np.ndarray, np.ndarray]:
    s = [p[0] for p in pairs if p[0].size]
    e = [p[1] for p in pairs if p[0].size]
    if not s:
        return _E, _E
    return union_intervals(np.concatenate(s), np.concatenate(e))


def _device_copy_unions(trace: Trace, device: int, valid: np.ndarray, params: Params):
    """(all GPU copies, big copies, small D2H copies) of ``device`` as interval unions.
    A copy that ends while a kernel runs is left out: the kernel started before the copy
    finished, so the copy did not hold it back (it is no copy on the critical path)."""
    m = device_event_mask(trace, device, (Kind.MEMCPY, Kind.MEMSET), valid)
    ks, ke = device_union(trace, device, valid=valid)
    if m.any() and ks.size:
        ends = trace.start_ns[m] + trace.dur_ns[m]
        k = np.searchsorted(ks, ends, side="left") - 1  # the kernel interval starting before the end
        inside = (k >= 0) & (ends > ks[np.maximum(k, 0)]) & (ends <= ke[np.maximum(k, 0)])
        idx = np.flatnonzero(m)
        m = m.copy()
        m[idx[inside]] = False
    small = (
        m & (trace.copy_kind == int(CopyKind.D2H)) & (trace.bytes >= 0) & (trace.bytes <= params.small_copy_max_bytes)
    )
    big = m & ~small
    s, d = trace.start_ns, trace.dur_ns
    return (
        union_intervals(s[m], s[m] + d[m]),
        union_intervals(s[big], s[big] + d[big]),
        union_intervals(s[small], s[small] + d[small]),
    )


def _cliff_start(us: np.ndarray, ue: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per row: ``a`` when an interval of the sorted union (``us``, ``ue``) of blocking
    waits began at or before ``a`` and ended at or after it (a wait that drained the
    queue: the sync cliff starts with the gap), else ``b`` (no cliff)."""
    if us.size == 0:
        return b.copy()
    k = np.searchsorted(ue, a, side="left")
    kc = np.minimum(k, us.size - 1)
    ok = (k < us.size) & (us[kc] <= a) & (a < b)
    return np.where(ok, a, b)


def _cover(u: tuple[np.ndarray, np.ndarray], a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return coverage(u[0], u[1], a, np.maximum(a, b))


def classify(
    trace: Trace,
    gaps: Gaps,
    params: Params,
    *,
    valid: np.ndarray,
    launches: np.ndarray,
    episode_of: np.ndarray | None = None,
    exclude: np.ndarray | None = None,
    warm_up: Callable[[], np.ndarray] | None = None,
) -> Gaps:
    """Return ``gaps`` with ``cause``, ``secondary``, ``cause_share``,
    ``secondary_share``, ``class_ns`` (int64 (n, len(Cause)), rows sum to the gap
    duration), ``thread_lane``, ``wait_event``, ``queued``, ``launch_from_ns``,
    ``sync_from_ns``, ``wait_kind``, ``one_time`` and ``trust`` filled, per the rules of
    the module docstring. ``exclude``: bool mask of events that are no evidence (the
    step annotations). ``warm_up()``: ``one_time_mask(trace, SLOW_LAUNCH_NS)`` (bool per
    event), asked for once, last (``diagnose`` computes it in a thread meanwhile);
    None: computed here."""
    n = len(gaps)
    class_ns = np.zeros((n, len(Cause)), dtype=np.int64)
    if n == 0:
        z = np.zeros(0, np.int64)
        return dataclasses.replace(
            gaps,
            class_ns=class_ns,
            thread_lane=np.zeros(0, np.int32),
            wait_event=z,
            queued=np.zeros(0, bool),
            launch_from_ns=z,
            sync_from_ns=z,
            wait_kind=np.zeros(0, np.int8),
            one_time=np.zeros(0, bool),
            trust=np.zeros(0, np.int8),
            queued_until_ns=z,
        )
    cause = event_cause(trace, valid, exclude)
    launching = launching_ops(trace, cause)
    is_host = cause == int(Cause.HOST)
    host_launching = is_host & launching
    host_other = is_host & ~launching
    sync_m = cause == int(Cause.SYNC)
    # a copy call that waited for its copy drained the queue like a sync call (rule 3)
    copy_wait_m = blocking_copy_calls(trace) & (cause != NO_CLASS)
    launch_m = cause == int(Cause.LAUNCH)
    end = evidence_end(trace)
    cpu_lane = np.array([not ln.is_gpu for ln in trace.lanes], dtype=bool)
    on_cpu = cpu_lane[trace.lane] if cpu_lane.size else np.zeros(len(trace), bool)

    T = effective_thread(trace, gaps, launches)
    gs, ge = gaps.start_ns, gaps.end_ns
    dur = ge - gs
    has_launch = gaps.launch >= 0
    graph_node = _graph_node_queued(trace, gaps, valid)
    # an op launched before the trace began was queued all along: whatever the CPU did
    # in the trace, it did not hold that op back
    pre_launched = ~has_launch & launched_before(trace, gaps.next_op, gs)
    queued = (has_launch & (gaps.lateness_ns <= 0)) | graph_node | pre_launched
    wait = stream_wait_events(trace, gaps, launches, valid)
    trailing = gaps.edge == EDGE_TRAILING if gaps.edge is not None else np.zeros(n, bool)
    in_episode = episode_of >= 0 if episode_of is not None else np.zeros(n, bool)
    li = np.maximum(gaps.launch, 0)
    launch_from = np.where(has_launch & ~queued, np.clip(trace.start_ns[li], gs, ge), ge)
    sync_from = launch_from.copy()
    # a late op that then sat in the queue past the launch path's own latency waited on
    # something GPU-side for the rest: [queued_until, b) is dependency
    reached = np.clip(gs + gaps.lateness_ns, launch_from, ge)
    queued_until = np.where(has_launch & ~queued & (ge - reached > params.queue_latency_max_ns), reached, ge)

    pair_code = (T.astype(np.int64) + 1) * (1 << 20) + gaps.device.astype(np.int64)
    codes, pair_inv = np.unique(pair_code, return_inverse=True)
    pair_order = np.argsort(pair_inv, kind="stable")
    pair_bounds = np.searchsorted(pair_inv[pair_order], np.arange(codes.size + 1))
    dev_cache: dict[int, tuple] = {}
    marks_cache: dict[int, tuple] = {}
    for pi, code in enumerate(codes.tolist()):
        t_lane, dev = code // (1 << 20) - 1, code % (1 << 20)
        rows = pair_order[pair_bounds[pi] : pair_bounds[pi + 1]]
        if dev not in dev_cache:
            dev_cache[dev] = _device_copy_unions(trace, dev, valid, params)
            mk = device_event_mask(trace, dev, (Kind.SYNC_MARKER,), valid) & sync_m
            marks_cache[dev] = union_intervals(trace.start_ns[mk], trace.start_ns[mk] + trace.dur_ns[mk])
        all_copy, big, small = dev_cache[dev]
        a, b = gs[rows], ge[rows]
        q = queued[rows]
        # --- blocked: copies, then dependency
        qcopy = _cover(all_copy, a, b)
        # --- starved: a time partition of [a, b)
        lf = launch_from[rows]
        if t_lane >= 0:
            block_t = _u(_lane_union(trace, end, t_lane, sync_m & on_cpu), marks_cache[dev])
            cliff_t = _u(block_t, _lane_union(trace, end, t_lane, copy_wait_m))
            launch_t = _lane_union(trace, end, t_lane, launch_m)
            hl_t = _lane_union(trace, end, t_lane, host_launching)
            ho_t = _lane_union(trace, end, t_lane, host_other)
        else:
            block_t, launch_t, hl_t, ho_t = marks_cache[dev], (_E, _E), (_E, _E), (_E, _E)
            cliff_t = block_t
        sf = _cliff_start(cliff_t[0], cliff_t[1], a, lf)
        # no GPU op before the gap on its device: the trace shows nothing queued that a
        # wait could have drained, so no cliff (rule 4: a wait is sync for its own length)
        sf = np.where(gaps.prev_op[rows] >= 0, sf, lf)
        sync_from[rows] = np.where(q, lf, sf)
        gpu_big = [_cover(big, a, sf), _cover(big, sf, lf), _cover(big, lf, b)]
        gpu_any = _u(big, small)
        gpu_all = [_cover(gpu_any, a, sf), _cover(gpu_any, sf, lf), _cover(gpu_any, lf, b)]
        # head [a, sf): the GPU copies, then T's activity, layered wait > launch > issuing ops > other host
        layers = [gpu_any]
        for u in (block_t, launch_t, hl_t, ho_t):
            layers.append(_u(layers[-1], u))
        head = [_cover(u, a, sf) for u in layers]
        head_sync = (gpu_all[0] - gpu_big[0]) + (head[1] - head[0])
        head_copy = gpu_big[0]  # copy is GPU copy time only (a copy call is host work, or a wait)
        head_launch = head[2] - head[1]
        hl_ns = head[3] - head[2]
        ho_ns = head[4] - head[3]
        rest = (sf - a) - head[4]
        short = dur[rows] <= params.launch_gap_max_ns
        late = has_launch[rows] & ~q
        bound = in_episode[rows] | (short & late & (ho_ns == 0) & (t_lane >= 0))
        explained = (late | trailing[rows]) & (t_lane >= 0)
        launch_ns = head_launch + np.where(bound, hl_ns + ho_ns + rest, 0)
        host_ns = np.where(bound, 0, hl_ns + ho_ns + np.where(explained, rest, 0))
        uncl_ns = np.where(bound | explained, 0, rest)
        if t_lane < 0:
            uncl_ns = uncl_ns + host_ns
            host_ns = np.zeros_like(host_ns)
        # middle [sf, lf): the sync cliff (GPU copies in it stay copy)
        mid = lf - sf
        sync_ns = head_sync + (mid - gpu_big[1])
        copy_ns = head_copy + gpu_big[1]
        # tail [lf, qu): the exposed launch path; [qu, b): the op queued, waiting GPU-side
        qu = queued_until[rows]
        tail_copy = _cover(big, lf, qu)
        late_q_copy = _cover(all_copy, qu, b)
        launch_ns = launch_ns + (qu - lf) - tail_copy
        copy_ns = copy_ns + tail_copy + late_q_copy
        late_dep = (b - qu) - late_q_copy
        class_ns[rows, int(Cause.SYNC)] = np.where(q, 0, sync_ns)
        class_ns[rows, int(Cause.COPY)] = np.where(q, qcopy, copy_ns)
        class_ns[rows, int(Cause.LAUNCH)] = np.where(q, 0, launch_ns)
        class_ns[rows, int(Cause.HOST)] = np.where(q, 0, host_ns)
        class_ns[rows, int(Cause.UNCLASSIFIED)] = np.where(q, 0, uncl_ns)
        class_ns[rows, int(Cause.DEPENDENCY)] = np.where(q, (b - a) - qcopy, late_dep)
    primary, share, secondary, sec_share = rank_classes(class_ns, dur)
    blocked = class_ns[:, int(Cause.DEPENDENCY)] > 0
    wait_kind = _wait_kinds(trace, gaps, blocked, wait, params, graph_node)
    m = warm_up() if warm_up is not None else one_time_mask(trace, SLOW_LAUNCH_NS)
    one_time = _one_time(trace, gaps, T, params, end, m) & np.isin(primary, [int(Cause.HOST), int(Cause.LAUNCH)])
    trust = _trust(trace, gaps, launches)
    trust[pre_launched] &= ~int(Trust.UNLINKED)  # unlinked, but known to be queued
    return dataclasses.replace(
        gaps,
        cause=primary,
        cause_share=share,
        secondary=secondary,
        secondary_share=sec_share,
        class_ns=class_ns,
        thread_lane=T,
        wait_event=wait,
        queued=queued,
        launch_from_ns=launch_from.astype(np.int64),
        sync_from_ns=sync_from.astype(np.int64),
        wait_kind=wait_kind,
        one_time=one_time,
        trust=trust,
        queued_until_ns=queued_until.astype(np.int64),
    )


def _name_flags(trace: Trace, pattern) -> np.ndarray:
    """Bool per name id: whether the name matches ``pattern``."""
    return np.array([bool(pattern.search(s)) for s in trace.names], dtype=bool)


#: trace -> (ids of its CPU runtime calls, sorted; earliest start among the calls from
#: each of those ids on), for ``launched_before`` (classify and every card ask again)
_CALL_IDS: weakref.WeakKeyDictionary[Trace, tuple[np.ndarray, np.ndarray]] = weakref.WeakKeyDictionary()


def _runtime_call_ids(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    got = _CALL_IDS.get(trace)
    if got is None:
        cpu_lane = np.array([not ln.is_gpu for ln in trace.lanes], dtype=bool)
        calls = np.flatnonzero(cpu_lane[trace.lane] & (trace.correlation >= 0)) if cpu_lane.size else _E
        o = np.argsort(trace.correlation[calls], kind="stable")
        first_after = np.minimum.accumulate(trace.start_ns[calls][o][::-1])[::-1] if calls.size else _E
        got = _CALL_IDS[trace] = (trace.correlation[calls][o], first_after)
    return got


def launched_before(trace: Trace, ops: np.ndarray, t_ns: np.ndarray) -> np.ndarray:
    """Bool per GPU op of ``ops`` (event indices; -1 = none): the op was launched (and
    so queued) before ``t_ns``, as its ``correlation`` id proves without its launch
    call: CUPTI and roctracer number API calls in the order they are made, so the op's
    launch came before every recorded CPU runtime call with a higher id; True when that
    id is below every such call's (launched before the trace began: Kineto keeps GPU
    activity that started in its window, whenever it was launched), or when one such
    call began at or before ``t_ns``. False without ids."""
    ops = np.asarray(ops, dtype=np.int64)
    t_ns = np.broadcast_to(np.asarray(t_ns, dtype=np.int64), ops.shape)
    out = np.zeros(ops.size, dtype=bool)
    c_sorted, first_after = _runtime_call_ids(trace)
    if c_sorted.size == 0 or ops.size == 0:
        return out
    ok = ops >= 0
    c = trace.correlation[np.maximum(ops, 0)]
    k = np.searchsorted(c_sorted, c, side="right")
    before_all = k == 0
    bound = first_after[np.minimum(k, c_sorted.size - 1)]
    out[:] = ok & (c >= 0) & (before_all | ((k < c_sorted.size) & (bound <= t_ns)))
    return out


def launched_before_window(trace: Trace, op: int) -> bool:
    """Whether GPU op ``op``'s id is below every recorded CPU runtime call's: it was
    launched before the trace began (``launched_before`` with no call early enough)."""
    return bool(launched_before(trace, np.array([op]), np.array([np.iinfo(np.int64).min]))[0])


def _graph_node_queued(trace: Trace, gaps: Gaps, valid: np.ndarray) -> np.ndarray:
    """Bool per gap: the next op shares its ``correlation`` with a GPU op that started
    before it, and has no linked launch call (a CUDA graph whose launch the trace
    lacks) or a graph launch (``GRAPH_LAUNCH_RE``): a node of a graph other than its
    first. Such a node is issued by the graph, in the graph's order, not by a CPU
    launch of its own: what held it is GPU-side (or, on ROCm, the runtime submitting the
    graph's nodes inside the launch call), and the launch call's end, which lateness
    measures, tells nothing about it (sglang Qwen3 decode: a 0.274 ms gap between two
    nodes of one 1.57 ms ``hipGraphLaunch`` was read as late launching, and advised
    capturing the step in a graph)."""
    n = len(gaps)
    out = np.zeros(n, dtype=bool)
    graph_ids = ids_matching(trace, GRAPH_LAUNCH_RE)
    by_graph = (gaps.launch >= 0) & np.isin(trace.name_id[np.maximum(gaps.launch, 0)], graph_ids)
    cand = ((gaps.launch < 0) | by_graph) & (gaps.next_op >= 0)
    if not cand.any():
        return out
    gpu = trace.mask_kind(Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET) & valid & (trace.correlation >= 0)
    gi = np.flatnonzero(gpu)
    if gi.size == 0:
        return out
    corr = trace.correlation[gi]
    o = np.lexsort((trace.start_ns[gi], corr))
    keys = np.empty(gi.size, dtype=[("c", np.int64), ("s", np.int64)])
    keys["c"], keys["s"] = corr[o], trace.start_ns[gi][o]
    rows = np.flatnonzero(cand)
    nc = trace.correlation[gaps.next_op[rows]]
    # a node of this launch: from the launch call's start on (a correlation id repeated by
    # another launch, or a node stamped before its call, is not one)
    li = gaps.launch[rows]
    since = np.where(li >= 0, trace.start_ns[np.maximum(li, 0)], np.iinfo(np.int64).min)
    q = np.empty(rows.size, dtype=keys.dtype)
    q["c"], q["s"] = nc, since
    pos = np.minimum(np.searchsorted(keys, q, side="left"), keys.size - 1)
    hit = (nc >= 0) & (keys["c"][pos] == nc) & (keys["s"][pos] >= since) & (keys["s"][pos] < gaps.end_ns[rows])
    out[rows[hit]] = True
    return out


def _wait_kinds(
    trace: Trace, gaps: Gaps, blocked: np.ndarray, wait: np.ndarray, params: Params, graph_node: np.ndarray
) -> np.ndarray:
    """int8 ``WaitKind`` per gap with dependency time (-1 for the others): dispatch (a gap
    at the timestamp resolution), stream wait, graph (the next op was launched by a graph
    launch, or is a node of a graph whose launch the trace lacks), collective (the next
    op is one, or the previous op is one launched before it), else nothing recorded.
    First that applies."""
    queued = blocked
    n = len(gaps)
    out = np.full(n, -1, dtype=np.int8)
    if not queued.any():
        return out
    coll = _name_flags(trace, COLLECTIVE_RE)
    graph = _name_flags(trace, GRAPH_LAUNCH_RE)

    def named(ev: np.ndarray, flags: np.ndarray) -> np.ndarray:
        ok = ev >= 0
        return ok & flags[trace.name_id[np.maximum(ev, 0)]] if flags.size else np.zeros(n, bool)

    # A previous collective launched after the next op (a higher correlation id) cannot be
    # what that op waited on: a stream wait on it would be enqueued after the op itself.
    prev_ok = np.ones(n, dtype=bool)
    both = (gaps.prev_op >= 0) & (gaps.next_op >= 0)
    pc = np.where(both, trace.correlation[np.maximum(gaps.prev_op, 0)], -1)
    nc = np.where(both, trace.correlation[np.maximum(gaps.next_op, 0)], -1)
    prev_ok[(pc >= 0) & (nc >= 0) & (pc > nc)] = False
    is_coll = named(gaps.next_op, coll) | (named(gaps.prev_op, coll) & prev_ok)
    is_graph = named(gaps.launch, graph) | graph_node
    kind = np.full(n, int(WaitKind.NOTHING_RECORDED), dtype=np.int8)
    kind[is_coll] = int(WaitKind.COLLECTIVE)
    kind[is_graph] = int(WaitKind.GRAPH)  # a graph node waits in its graph's order first
    kind[wait >= 0] = int(WaitKind.STREAM_WAIT)
    bubble = (kind == int(WaitKind.NOTHING_RECORDED)) & (gaps.dur_ns <= params.dispatch_bubble_max_ns)
    kind[(gaps.dur_ns <= params.dispatch_max_ns) | bubble] = int(WaitKind.DISPATCH)
    out[queued] = kind[queued]
    return out


def _one_time(trace: Trace, gaps: Gaps, T: np.ndarray, params: Params, end: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Bool per gap: warm-up evidence on T (``m``: ``evidence_kinds.one_time_mask``, and the
    warm-up graph captures, ``capture_windows``) covers at least
    ``params.one_time_min_share`` of the gap, or the gap is module loading
    (``evidence_kinds.module_loading_gaps``: the card's one-time story, so a gap whose
    card says one-time is one in the budget and the findings too). Loop over distinct T
    lanes."""
    out = module_loading_gaps(trace, T, gaps.start_ns, gaps.end_ns)
    captures = graph_captures(trace)
    if not m.any() and not captures:
        return out
    for lane in np.unique(T[T >= 0]).tolist():
        rows = np.flatnonzero(T == lane)
        us, ue = _u(_lane_union(trace, end, lane, m), capture_windows(trace, lane))
        if us.size:
            cov = coverage(us, ue, gaps.start_ns[rows], gaps.end_ns[rows])
            out[rows] |= cov >= params.one_time_min_share * gaps.dur_ns[rows]
    return out


#: A trace holding less than this share of the External ids its CPU ops span is sampled
#: (``operator_sample``): the corpus's two sampled traces keep 1.4 %, the others 13-100 %.
SAMPLED_MAX_SHARE = 0.05
#: ... when it holds at least this many such ops, spanning at least this many ids.
SAMPLED_MIN_OPS = 200
SAMPLED_MIN_SPAN = 5_000
_SAMPLE: weakref.WeakKeyDictionary[Trace, tuple[int, int]] = weakref.WeakKeyDictionary()


def operator_sample(trace: Trace) -> tuple[int, int]:
    """(distinct ``External id``s of the CPU ops and annotations, the span of ids from
    the lowest to the highest), or (0, 0) without ids. Kineto numbers every operator
    it records in one sequence, so a complete trace holds nearly every id of its span,
    and one that keeps a sample of its operators (hta's ``sampled_rank-*``: 2,402 of
    170,156) holds a small share; its idle stretches may then hold kernels it dropped."""
    got = _SAMPLE.get(trace)
    if got is None:
        got = (0, 0)
        if trace.external_id is not None:
            cpu = np.isin(trace.kind, np.array([int(Kind.CPU_OP), int(Kind.ANNOTATION)], np.int8))
            # distinct ids by a sort (numpy 2.4's hash-based np.unique took 1.9 s at 5M events)
            ids = np.sort(trace.external_id[cpu & (trace.external_id >= 0)])
            if ids.size:
                got = (int(np.count_nonzero(ids[1:] != ids[:-1])) + 1, int(ids[-1] - ids[0] + 1))
        _SAMPLE[trace] = got
    return got


def is_sampled(trace: Trace) -> bool:
    """Whether the trace keeps only a sample of its operators (``operator_sample``)."""
    present, span = operator_sample(trace)
    return present >= SAMPLED_MIN_OPS and span >= SAMPLED_MIN_SPAN and present < SAMPLED_MAX_SHARE * span


def _trust(trace: Trace, gaps: Gaps, launches: np.ndarray) -> np.ndarray:
    """int8 ``Trust`` bits per gap: UNLINKED when the next op has no linked launch call
    although the trace links others (the queued/starved question has no answer);
    GRAPH_UNRECORDED when a graph launch before the next op has no recorded GPU op
    linked to it (the graph's kernels ran unseen: the idle may not be idle), or when
    the gap lies mostly inside the execution of a *sparse* graph launch
    (``_sparse_graph_spans``); SAMPLED on
    every gap of a trace that keeps a sample of its operators (``is_sampled``); CLOCKS
    when the next op is recorded as starting before its launch call began (the CPU's
    and the GPU's timestamps disagree there, B14: the call's times say nothing of when
    the op was queued; no corpus trace has one)."""
    n = len(gaps)
    out = np.zeros(n, dtype=np.int8)
    if is_sampled(trace):
        out[:] |= int(Trust.SAMPLED)
    linked_any = bool((launches >= 0).any())
    if linked_any:
        out[(gaps.next_op >= 0) & (gaps.launch < 0)] |= int(Trust.UNLINKED)
        linked = (gaps.next_op >= 0) & (gaps.launch >= 0)
        op, call = np.maximum(gaps.next_op, 0), np.maximum(gaps.launch, 0)
        out[linked & (trace.start_ns[op] < trace.start_ns[call])] |= int(Trust.CLOCKS)
    graph_ids = ids_matching(trace, GRAPH_LAUNCH_RE)
    if graph_ids.size:
        calls = np.flatnonzero(np.isin(trace.name_id, graph_ids) & (trace.kind == int(Kind.LAUNCH)))
        if calls.size:
            has_op = np.zeros(len(trace), dtype=bool)
            has_op[launches[launches >= 0]] = True
            empty = calls[~has_op[calls]]
            if empty.size:
                # a gap that overlaps the span from an empty graph launch to 50 ms after it
                es = np.sort(trace.start_ns[empty])
                k = np.searchsorted(es, gaps.end_ns, side="left") - 1
                ok = (k >= 0) & (gaps.start_ns - es[np.maximum(k, 0)] <= 50_000_000)
                out[ok] |= int(Trust.GRAPH_UNRECORDED)
            spans, sparse, sparse_corr = _sparse_graph_spans(trace, calls, launches)
            for dev, (us, ue) in spans.items():
                on = np.flatnonzero(gaps.device == dev)
                inside = coverage(us, ue, gaps.start_ns[on], gaps.end_ns[on])
                out[on[2 * inside > gaps.end_ns[on] - gaps.start_ns[on]]] |= int(Trust.GRAPH_UNRECORDED)
            # a sparse graph launched before the gap, waiting at its first recorded node:
            # its unrecorded head nodes may have run there (hta/rank0: ~70 ms a step)
            li = np.maximum(gaps.launch, 0)
            head = (gaps.launch >= 0) & np.isin(gaps.launch, sparse) & (trace.start_ns[li] < gaps.start_ns)
            out[head] |= int(Trust.GRAPH_UNRECORDED)
            # the same for a sparse graph whose launch call the trace lacks: the gap
            # waits at one of its recorded nodes (hta/rank0 gap #200, corr 819599)
            nx = np.maximum(gaps.next_op, 0)
            orphan = (gaps.next_op >= 0) & (launches[nx] < 0) & np.isin(trace.correlation[nx], sparse_corr)
            out[orphan] |= int(Trust.GRAPH_UNRECORDED)
    return out


#: A graph launch whose recorded GPU ops cover less than this share of their span
#: (first op's start to last op's end) is *sparse*: its nodes appear unrecorded.
GRAPH_SPARSE_BUSY_SHARE = 0.5


def _sparse_graph_spans(
    trace: Trace, calls: np.ndarray, launches: np.ndarray
) -> tuple[dict[int, tuple[np.ndarray, np.ndarray]], np.ndarray, np.ndarray]:
    """({device: (starts, ends) int64 ns, the union of the execution spans of its sparse
    graph launches}, int64 event indices of the sparse graph launch calls, int64
    correlation ids of the sparse graphs without a launch call). A graph whose launch
    call the trace lacks is two or more GPU ops sharing a correlation id that links to
    no call (a graph's nodes carry its launch's id; hta/rank0's corr 819599: 20
    recorded nodes, no cudaGraphLaunch); it is judged by the same rule. A graph launch (``calls``: event indices of graph launch calls;
    ``launches``: launch call per event, -1 when none) is sparse when its recorded GPU
    ops (linked to it) cover less than ``GRAPH_SPARSE_BUSY_SHARE`` of the span from the
    first one's start to the last one's end: a graph runs its nodes back to back, so a
    graph that seems to idle most of its execution ran nodes the trace does not hold
    (hta/rank0: a launch with 1 kernel, 18 memsets 0.6-1.1 ms apart and 1 kernel, the
    same every step; some memset pairs are exactly one gemm apart). Busy is the sum of
    the ops' durations (overlapping ops on two streams read busier, never sparser)."""
    on_gpu = np.array([ln.is_gpu for ln in trace.lanes], dtype=bool)
    key = np.where(np.isin(launches, calls), launches, -1).astype(np.int64)
    orphan = np.flatnonzero(on_gpu[trace.lane] & (launches < 0) & (trace.correlation >= 0))
    _, inv, cnt = np.unique(trace.correlation[orphan], return_inverse=True, return_counts=True)
    orphan = orphan[cnt[inv] >= 2]
    key[orphan] = -2 - trace.correlation[orphan].astype(np.int64)  # apart from calls (>= 0)
    ops = np.flatnonzero((key != -1) & (trace.dur_ns >= 0))
    if ops.size == 0:
        return {}, np.zeros(0, np.int64), np.zeros(0, np.int64)
    call_of, grp = np.unique(key[ops], return_inverse=True)
    s = trace.start_ns[ops].astype(np.int64)
    e = s + trace.dur_ns[ops].astype(np.int64)
    ng = int(grp.max()) + 1
    first = np.full(ng, np.iinfo(np.int64).max, dtype=np.int64)
    last = np.full(ng, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(first, grp, s)
    np.maximum.at(last, grp, e)
    busy = np.bincount(grp, weights=(e - s).astype(np.float64), minlength=ng)
    sparse = busy < GRAPH_SPARSE_BUSY_SHARE * (last - first)
    lane_dev = np.array([ln.device if ln.is_gpu else -1 for ln in trace.lanes], dtype=np.int64)
    dev_of = np.full(ng, -1, dtype=np.int64)
    dev_of[grp] = lane_dev[trace.lane[ops]]
    out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for dev in np.unique(dev_of[sparse]).tolist():
        m = sparse & (dev_of == dev)
        out[int(dev)] = union_intervals(first[m], last[m])
    bad = call_of[sparse].astype(np.int64)
    return out, bad[bad >= 0], -2 - bad[bad < 0]


#: A second class below this share of the gap is no secondary class (it would read
#: "then launch (0%)"); its ns stay in ``class_ns``.
SECONDARY_MIN_SHARE = 0.005


def rank_classes(class_ns: np.ndarray, dur: np.ndarray):
    """Primary (largest; ``argmax`` takes the first maximum, which is the tie order
    sync > copy > launch > host > unclassified > dependency) and secondary class per
    row: the second largest, when it holds at least ``SECONDARY_MIN_SHARE`` of the gap
    (else -1 with share 0)."""
    n = class_ns.shape[0]
    primary = np.argmax(class_ns, axis=1)
    r = np.arange(n)
    d = np.maximum(dur, 1).astype(np.float64)
    share = class_ns[r, primary] / d
    rest = class_ns.copy()
    rest[r, primary] = -1
    sec = np.argmax(rest, axis=1)
    sec_ns = rest[r, sec]
    has = (sec_ns > 0) & (sec_ns / d >= SECONDARY_MIN_SHARE)
    secondary = np.where(has, sec, -1).astype(np.int8)
    sec_share = np.where(has, sec_ns / d, 0.0)
    return primary.astype(np.int8), share, secondary, sec_share
