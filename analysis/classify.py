"""Cause class of each idle gap, from what the CPU (and the copy engine) did during it.

Definition ("Definitions" → cause classes in ``docs/ARCHITECTURE.md``): evidence is
measured over the gap on the launching thread *T* of the next op (sync: on any thread of
the process); the class whose evidence covers the largest share of the gap wins, ties
sync > copy > launch > host; the second largest is the secondary class.

How each ns of a gap is attributed (a partition, so per-class totals sum exactly to the
idle time). Where several kinds of evidence overlap, the first that applies wins:

1. a GPU memcpy/memset of the device running inside the gap (exposed copy) → copy,
   unless it is a small (``<= small_copy_max_bytes``) device-to-host copy, the
   ``.item()`` / ``print(tensor)`` signature → sync;
2. a sync call or op on any CPU thread of T's process, or a Kineto ``cuda_sync`` record
   on the device → sync;
3. a copy call or op on T → copy;
4. a launch call on T → launch (when the work was already queued, L <= 0, outside
   launch-bound gaps and trailing edges, it explains nothing: treated like rule 5's
   queued CPU work); and, when the next op's launch call starts inside the gap
   (L > 0), everything from its start to the gap end that is not sync or copy →
   launch (the launch path: call, driver, queue);
5. other CPU events on T → host when L > 0, at a step's trailing edge, or when no
   launch is linked; when the work was already queued (L <= 0) they explain nothing
   and their ns are treated like rule 6's uninstrumented time;
6. no event on T ("uninstrumented") → host when L > 0 or when the gap is the idle at a
   step's trailing edge (the next step follows); → sync when the work was queued
   (L <= 0) behind a stream wait (``gapscope.analysis.waits``: a ``cudaStreamWaitEvent`` enqueued
   between the previous op's launch and the next op's); else unclassified (no linked
   launch, no CPU data, or the work was queued and nothing explains the wait).

Launch-bound gaps: a gap of a picket-fence episode, or a single short gap
(``<= launch_gap_max_ns``) with L > 0 where T shows only launch calls, the ops that
issue them and uninstrumented time (no other CPU work), is launch: the host and
uninstrumented ns of rules 5-6 go to launch (the per-kernel dispatch tax between
back-to-back launches). Example: the decode-step exercise's 20 µs gap before attention
(launch matmul … launch attention, nothing else on the CPU) is launch.

When the next op has no linked launch, T falls back to the thread that launched the
previous kernel. Vectorised: one loop over distinct (T, device) pairs, coverage by
prefix sums and ``searchsorted``; no loop over gaps.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from gapscope.parsers.model import CopyKind, Kind, Trace

from gapscope.analysis.busy import coverage, device_event_mask, union_intervals
from gapscope.analysis.evidence_kinds import event_cause
from gapscope.analysis.gaps import EDGE_TRAILING
from gapscope.analysis.types import Cause, Gaps, Params
from gapscope.analysis.waits import stream_wait_events

__all__ = ["classify", "evidence_for_gap", "effective_thread", "launching_ops", "EvidenceIndex", "evidence_end", "NO_EVENTS",
           "SECONDARY_MIN_SHARE", "rank_classes"]

_E = np.zeros(0, dtype=np.int64)


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
        kids = by_depth[bounds[d]:bounds[d + 1]]
        cand = by_depth[bounds[d - 1]:bounds[d]]
        if kids.size == 0 or cand.size == 0:
            continue
        pos = np.searchsorted(cand, kids, side="right") - 1
        ok = pos >= 0
        p = cand[np.maximum(pos, 0)]
        ok &= trace.lane[p] == trace.lane[kids]
        parent[kids[ok]] = p[ok]
    for d in range(maxd, 0, -1):
        kids = by_depth[bounds[d]:bounds[d + 1]]
        kids = kids[flag[kids] & (parent[kids] >= 0)]
        flag[parent[kids]] = True
    return flag & (cause == int(Cause.HOST))


def evidence_end(trace: Trace) -> np.ndarray:
    """int64 end (ns) of each event as evidence: its end, except that a launch call
    linked to a GPU op stops being launch evidence once that op has started (a launch
    call cannot delay work that already runs; ASCII timelines draw a launch as a span up
    to the next CPU line)."""
    end = trace.start_ns + trace.dur_ns
    if trace.flow_src.size:
        src, dst = trace.flow_src, trace.flow_dst
        is_launch = trace.kind[src] == int(Kind.LAUNCH)
        # an op "starting" before its launch call has no usable timing (B14): no clip
        is_launch &= trace.start_ns[dst] >= trace.start_ns[src]
        src, dst = src[is_launch], dst[is_launch]
        np.minimum.at(end, src, trace.start_ns[dst])
    return end


@dataclasses.dataclass
class _Sources:
    """Evidence intervals, built once per diagnosis."""

    end: np.ndarray

    def lane_union(self, trace: Trace, lanes, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        parts_s, parts_e = [], []
        for k in lanes:
            sl = trace.lane_slice(k)
            m = mask[sl]
            parts_s.append(trace.start_ns[sl][m])
            parts_e.append(self.end[sl][m])
        if not parts_s:
            return _E, _E
        return union_intervals(np.concatenate(parts_s), np.concatenate(parts_e))


def _u(*pairs) -> tuple[np.ndarray, np.ndarray]:
    s = [p[0] for p in pairs if p[0].size]
    e = [p[1] for p in pairs if p[0].size]
    if not s:
        return _E, _E
    return union_intervals(np.concatenate(s), np.concatenate(e))


def _device_copy_unions(trace: Trace, device: int, valid: np.ndarray, params: Params):
    m = device_event_mask(trace, device, (Kind.MEMCPY, Kind.MEMSET), valid)
    small = m & (trace.copy_kind == int(CopyKind.D2H)) & (trace.bytes >= 0) & (trace.bytes <= params.small_copy_max_bytes)
    big = m & ~small
    mark = device_event_mask(trace, device, (Kind.SYNC_MARKER,), valid)
    s, d = trace.start_ns, trace.dur_ns
    return (union_intervals(s[big], s[big] + d[big]),
            union_intervals(np.concatenate((s[small], s[mark])), np.concatenate((s[small] + d[small], s[mark] + d[mark]))))


def classify(trace: Trace, gaps: Gaps, params: Params, *, valid: np.ndarray, launches: np.ndarray,
             episode_of: np.ndarray | None = None, exclude: np.ndarray | None = None) -> Gaps:
    """Return ``gaps`` with ``cause``, ``secondary``, ``cause_share``,
    ``secondary_share`` and ``class_ns`` (int64 (n, 5), rows sum to the gap duration)
    filled, per the rules of the module docstring. ``exclude``: bool mask of events
    that are no evidence (the step annotations)."""
    n = len(gaps)
    class_ns = np.zeros((n, len(Cause)), dtype=np.int64)
    if n == 0:
        return dataclasses.replace(gaps, class_ns=class_ns)
    cause = event_cause(trace, valid, exclude)
    launching = launching_ops(trace, cause)
    is_host = cause == int(Cause.HOST)
    host_launching = is_host & launching
    host_other = is_host & ~launching
    lane_pid = [ln.pid for ln in trace.lanes]
    cpu_by_pid: dict[str, list[int]] = {}
    for ln in trace.lanes:
        if not ln.is_gpu:
            cpu_by_pid.setdefault(ln.pid, []).append(ln.index)
    src = _Sources(evidence_end(trace))

    T = effective_thread(trace, gaps, launches)
    wait = stream_wait_events(trace, gaps, launches, valid)
    gs, ge = gaps.start_ns, gaps.end_ns
    dur = ge - gs
    has_launch = gaps.launch >= 0
    late = has_launch & (gaps.lateness_ns > 0)
    t0 = np.where(late, np.clip(gs + gaps.lateness_ns, gs, ge), ge)  # head [gs, t0), tail [t0, ge)
    trailing = gaps.edge == EDGE_TRAILING if gaps.edge is not None else np.zeros(n, bool)
    in_episode = episode_of >= 0 if episode_of is not None else np.zeros(n, bool)

    sync_m = cause == int(Cause.SYNC)
    copy_m = cause == int(Cause.COPY)
    launch_m = cause == int(Cause.LAUNCH)
    unions_by_pid: dict[str, tuple] = {}
    pair_code = (T.astype(np.int64) + 1) * (1 << 20) + gaps.device.astype(np.int64)
    codes, pair_inv = np.unique(pair_code, return_inverse=True)
    pair_order = np.argsort(pair_inv, kind="stable")
    pair_bounds = np.searchsorted(pair_inv[pair_order], np.arange(codes.size + 1))
    dev_cache: dict[int, tuple] = {}
    for pi, code in enumerate(codes.tolist()):
        t_lane, dev = code // (1 << 20) - 1, code % (1 << 20)
        rows = pair_order[pair_bounds[pi]:pair_bounds[pi + 1]]
        if dev not in dev_cache:
            dev_cache[dev] = _device_copy_unions(trace, dev, valid, params)
        big, small_sync = dev_cache[dev]
        if t_lane >= 0:
            pid = lane_pid[t_lane]
            if pid not in unions_by_pid:
                unions_by_pid[pid] = src.lane_union(trace, cpu_by_pid.get(pid, []), sync_m)
            sync_p = unions_by_pid[pid]
            copy_t = src.lane_union(trace, [t_lane], copy_m)
            launch_t = src.lane_union(trace, [t_lane], launch_m)
            hl_t = src.lane_union(trace, [t_lane], host_launching)
            ho_t = src.lane_union(trace, [t_lane], host_other)
        else:
            sync_p = copy_t = launch_t = hl_t = ho_t = (_E, _E)
        layers = [big]
        layers.append(_u(layers[-1], sync_p, small_sync))
        layers.append(_u(layers[-1], copy_t))
        layers.append(_u(layers[-1], launch_t))
        layers.append(_u(layers[-1], hl_t))
        layers.append(_u(layers[-1], ho_t))
        a, m, b = gs[rows], t0[rows], ge[rows]
        head = [coverage(u[0], u[1], a, m) for u in layers]
        tail = [coverage(u[0], u[1], m, b) for u in layers[:3]]
        copy_ns = head[0] + (head[2] - head[1]) + tail[0] + (tail[2] - tail[1])
        sync_ns = (head[1] - head[0]) + (tail[1] - tail[0])
        launch_ns = (head[3] - head[2]) + ((b - m) - tail[2])
        hl_ns = head[4] - head[3]
        ho_ns = head[5] - head[4]
        rest = (m - a) - head[5]
        if t_lane < 0:
            rest = rest + hl_ns + ho_ns
            hl_ns = ho_ns = np.zeros_like(rest)
        short = dur[rows] <= params.launch_gap_max_ns
        bound = in_episode[rows] | (short & late[rows] & (ho_ns == 0) & (t_lane >= 0))
        host_rest = (late[rows] | trailing[rows]) & (t_lane >= 0)
        # Launch calls and host work on T explain idle only when the CPU asked late
        # (L > 0), at a step's trailing edge, when no launch is linked (L unknown), or
        # in a launch-bound gap. When the next op was already queued, CPU work on T
        # (launching later ops included) did not keep the GPU empty: that time is
        # unexplained (or sync behind a recorded stream wait).
        host_ok = late[rows] | trailing[rows] | ~has_launch[rows]
        queued_launch = np.where(bound | host_ok, 0, head[3] - head[2])
        launch_ns = launch_ns - queued_launch
        launch_ns = launch_ns + np.where(bound, hl_ns + rest + np.where(in_episode[rows], ho_ns, 0), 0)
        queued_host = np.where(bound | host_ok, 0, hl_ns + ho_ns) + queued_launch
        host_ns = np.where(bound, np.where(in_episode[rows], 0, ho_ns),
                           np.where(host_ok, hl_ns + ho_ns, 0) + np.where(host_rest, rest, 0))
        waited = (wait[rows] >= 0) & ~(bound | host_rest)
        uncl_ns = np.where(bound | host_rest | waited, 0, rest) + np.where(waited, 0, queued_host)
        class_ns[rows, int(Cause.SYNC)] = sync_ns + np.where(waited, rest + queued_host, 0)
        class_ns[rows, int(Cause.COPY)] = copy_ns
        class_ns[rows, int(Cause.LAUNCH)] = launch_ns
        class_ns[rows, int(Cause.HOST)] = host_ns
        class_ns[rows, int(Cause.UNCLASSIFIED)] = uncl_ns
    primary, share, secondary, sec_share = rank_classes(class_ns, dur)
    return dataclasses.replace(gaps, cause=primary, cause_share=share, secondary=secondary,
                               secondary_share=sec_share, class_ns=class_ns, thread_lane=T, wait_event=wait)


#: A second class below this share of the gap is no secondary class (it would read
#: "then launch (0%)"); its ns stay in ``class_ns``.
SECONDARY_MIN_SHARE = 0.005


def rank_classes(class_ns: np.ndarray, dur: np.ndarray):
    """Primary (largest; ``argmax`` takes the first maximum, which is the tie order
    sync > copy > launch > host > unclassified) and secondary class per row: the
    second largest, when it holds at least ``SECONDARY_MIN_SHARE`` of the gap (else
    -1 with share 0)."""
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


# the evidence lists moved to ``gapscope.analysis.evidence``; kept importable from here
from gapscope.analysis.evidence import NO_EVENTS, EvidenceIndex, evidence_for_gap  # noqa: E402
