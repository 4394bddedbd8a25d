"""What framework machinery a gap's host time or copies belong to, read off the trace
for the card's advice (``gapscope.analysis.card.rules``): DDP's buffer sync and its
bucket-to-grad copies, Triton's Python launcher, graph launches and replays on a thread,
autograd backward nodes, and tensor copy ops that move data between host and device.
Each finder returns the facts the advice words (counts, ns, event indices), or None
when the pattern is not there; only ``tensor_text`` gives words (a tensor's shape, from
its args).
"""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np

from gapscope.analysis.busy import union_intervals
from gapscope.analysis.diagnose import Diagnosis
from gapscope.analysis.evidence_kinds import GRAPH_LAUNCH_RE, exactly, ids_matching
from gapscope.analysis.types import Cause
from gapscope.parsers.model import CopyKind, Kind

#: Triton's Python launch path: ``JITFunction.run`` and the ``kernel[grid]`` lambda that
#: calls it (``triton/runtime/jit.py``), as the Python tracer names their frames.
TRITON_LAUNCHER_RE = re.compile(r"triton/runtime/jit\.py\(\d+\): (?:run|<lambda>)\Z")


def graph_launches_on(trace, lane: int) -> tuple[int, int]:
    """(how many graph launch calls ``lane`` makes (``GRAPH_LAUNCH_RE``, kind launch),
    the first of them or -1): a thread that replays CUDA/HIP graphs."""
    sl = trace.lane_slice(lane)
    ids = ids_matching(trace, GRAPH_LAUNCH_RE)
    hits = np.flatnonzero((trace.kind[sl] == int(Kind.LAUNCH)) & np.isin(trace.name_id[sl], ids))
    return int(hits.size), int(sl.start + hits[0]) if hits.size else -1


def graph_first_node(trace, op: int, since_ns: int | None = None) -> int:
    """The first GPU op (kernel, copy, memset; by start) that shares GPU op ``op``'s
    ``correlation`` and starts at ``since_ns`` (its launch call's start) or later: the
    first recorded node of the graph launch ``op`` belongs to (``op`` itself when no
    node of that launch ran before it); -1 when ``op`` has no correlation."""
    if op < 0 or int(trace.correlation[op]) < 0:
        return -1
    gpu = trace.mask_kind(Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET) & (trace.correlation == int(trace.correlation[op]))
    if since_ns is not None:  # nodes of this launch only (an id another launch reused is not)
        gpu &= trace.start_ns >= since_ns
    idx = np.flatnonzero(gpu)
    return int(idx[np.argmin(trace.start_ns[idx])]) if idx.size else op


def graph_node_count(trace, correlation: int) -> int:
    """How many GPU ops (kernels, copies, memsets) carry ``correlation``: the recorded
    nodes of the graph launch with that id."""
    gpu = trace.mask_kind(Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)
    return int(np.count_nonzero(gpu & (trace.correlation == correlation))) if correlation >= 0 else 0


#: DDP's forward, and the broadcast it makes of the module's buffers before it
#: (``broadcast_buffers=True``, the default; torch ``DistributedDataParallel._sync_buffers``).
DDP_FORWARD_RE = re.compile(r"DistributedDataParallel\.forward")


BROADCAST_RE = re.compile(r"\A(?:c10d::broadcast_|nccl:broadcast)\Z")


#: The calls of DDP's buffer sync beside its broadcasts (torch's
#: ``_broadcast_coalesced``: per bucket, flatten, broadcast, unflatten, copy back).
DDP_SYNC_RE = re.compile(
    r"\A(?:aten::flatten_dense_tensors|aten::unflatten_dense_tensors|aten::copy_|c10d::broadcast_|nccl:broadcast|"
    r"record_param_comms)\Z"
)


class DdpBufferSync(NamedTuple):
    """DDP's buffer sync at a gap: the ``DistributedDataParallel.forward`` around it
    (``forward``), the broadcast calls inside that forward (``broadcasts``), the
    ``aten::copy_`` calls beside them that copy the values back into the buffers
    (``copies``), the ns of the gap those sync calls cover (``sync_ns``), the process
    group's size (``record_param_comms``'s ``Group size``; 0 when not recorded), and
    whether the forward records the flatten and unflatten of the buckets."""

    forward: int
    broadcasts: int
    copies: int
    sync_ns: int
    group_size: int
    flatten: bool
    unflatten: bool


def _gap_thread(diag: Diagnosis, r: int) -> tuple[int, slice, int, int, np.ndarray, np.ndarray] | None:
    """(the lane gap ``r``'s causes are read on (``Gaps.thread_of``), its events' slice,
    the gap's start and end ns, int64 start and end ns of those events), or None when
    the gap has no such thread."""
    trace, g = diag.trace, diag.gaps
    lane = g.thread_of(r)
    if lane < 0:
        return None
    sl = trace.lane_slice(lane)
    st = trace.start_ns[sl]
    return lane, sl, int(g.start_ns[r]), int(g.end_ns[r]), st, st + trace.dur_ns[sl]


def ddp_buffer_sync(diag: Diagnosis, r: int) -> DdpBufferSync | None:
    """``DdpBufferSync`` when the calls of DDP's buffer sync (``DDP_SYNC_RE``, beside
    a broadcast inside a ``DistributedDataParallel.forward`` on gap ``r``'s thread)
    cover at least half of the gap's host time; else None. hta/rank-0 #2: a broadcast,
    then 159 ``aten::copy_`` calls back into the buffers; nccl_data #4: 22.6 ms of
    ``aten::unflatten_dense_tensors`` after the broadcasts of two buckets."""
    trace, g = diag.trace, diag.gaps
    got = _gap_thread(diag, r)
    if got is None:
        return None
    _lane, sl, gs, ge, st, en = got
    names, depth = trace.name_id[sl], trace.depth[sl]
    fwd_ids = ids_matching(trace, DDP_FORWARD_RE)
    fwds = np.flatnonzero(np.isin(names, fwd_ids) & (st < ge) & (en > gs))
    if fwds.size == 0:
        return None
    f = int(fwds[np.argmin(depth[fwds])])
    inside = (st >= st[f]) & (en <= en[f]) & (depth > depth[f])
    bc = np.flatnonzero(inside & np.isin(names, ids_matching(trace, BROADCAST_RE)))
    if bc.size == 0:
        return None
    level = depth[bc].min()  # `nccl:broadcast` runs inside `c10d::broadcast_`: the outer ones
    bc = bc[depth[bc] == level]
    sync = np.flatnonzero(
        inside & (depth == level) & np.isin(names, ids_matching(trace, DDP_SYNC_RE)) & (st < ge) & (en > gs)
    )
    sync_ns = int((np.minimum(en[sync], ge) - np.maximum(st[sync], gs)).sum())
    host_ns = int(g.class_ns[r, int(Cause.HOST)]) if g.class_ns is not None else ge - gs
    if sync_ns * 2 < host_ns:
        return None
    copy_ids = ids_matching(trace, exactly("aten::copy_"))
    copies = int(np.isin(names[sync], copy_ids).sum())
    group = 0
    comms = np.flatnonzero(inside & np.isin(names, ids_matching(trace, exactly("record_param_comms"))))
    for c in comms.tolist():
        size = trace.args_of(int(sl.start + c)).get("Group size")
        if isinstance(size, int) and not isinstance(size, bool) and size > 0:
            group = size
            break

    def records(name: str) -> bool:
        return bool((inside & np.isin(names, ids_matching(trace, exactly(name)))).any())

    return DdpBufferSync(
        int(sl.start + f),
        int(bc.size),
        copies,
        min(sync_ns, ge - gs),
        group,
        records("aten::flatten_dense_tensors"),
        records("aten::unflatten_dense_tensors"),
    )


#: An autograd backward node (``CatBackward0``), as the profiler names it, or the
#: engine's frame around one; group 1: the forward op's name in CamelCase.
AUTOGRAD_NODE_RE = re.compile(r"(?:autograd::engine::evaluate_function: )?([A-Z][A-Za-z0-9]*?)Backward\d+")


def triton_launcher_around(trace, ev: int) -> int:
    """The outermost frame of Triton's Python launcher (``TRITON_LAUNCHER_RE``) that is
    event ``ev`` or encloses it on its lane, or -1."""
    if ev < 0:
        return -1
    sl = trace.lane_slice(int(trace.lane[ev]))
    ids = ids_matching(trace, TRITON_LAUNCHER_RE)
    if ids.size == 0:
        return -1
    st = trace.start_ns[sl]
    en = st + trace.dur_ns[sl]
    s, e = int(trace.start_ns[ev]), int(trace.start_ns[ev] + trace.dur_ns[ev])
    hits = np.flatnonzero(
        np.isin(trace.name_id[sl], ids) & (st <= s) & (en >= e) & (trace.depth[sl] <= trace.depth[ev])
    )
    if hits.size == 0:
        return -1
    return int(sl.start + hits[np.argmin(trace.depth[sl][hits])])


def event_span(trace, ev: int) -> tuple[slice, int, int]:
    """(event ``ev``'s lane slice, [a, b) of the lane's events that start inside it)."""
    sl = trace.lane_slice(int(trace.lane[ev]))
    starts = trace.start_ns[sl]
    s, e = int(trace.start_ns[ev]), int(trace.start_ns[ev] + trace.dur_ns[ev])
    return sl, int(np.searchsorted(starts, s, side="left")), int(np.searchsorted(starts, e, side="left"))


def launch_calls_inside(trace, ev: int) -> np.ndarray:
    """int64 indices of the launch calls event ``ev`` encloses on its lane (none: it
    issues no GPU work; a launch call itself encloses none)."""
    if ev < 0 or trace.kind[ev] == int(Kind.LAUNCH):
        return np.zeros(0, dtype=np.int64)
    sl, a, b = event_span(trace, ev)
    return sl.start + a + np.flatnonzero(trace.kind[sl][a:b] == int(Kind.LAUNCH))


def launches_inside(trace, ev: int) -> int:
    """How many launch calls event ``ev`` encloses on its lane (``launch_calls_inside``)."""
    return int(launch_calls_inside(trace, ev).size)


def graph_launch_inside(trace, ev: int) -> int:
    """The first graph launch call (``GRAPH_LAUNCH_RE``) that event ``ev`` encloses on
    its lane, or -1: ``ev`` is a graph replay (torch's ``CUDAGraph.replay``, a serving
    framework's ``replay``)."""
    calls = launch_calls_inside(trace, ev)
    hits = calls[np.isin(trace.name_id[calls], ids_matching(trace, GRAPH_LAUNCH_RE))]
    return int(hits[0]) if hits.size else -1


#: torch's tensor copy ops: host time inside them is the host side of a copy.
TENSOR_COPY_RE = re.compile(r"\Aaten::(?:_copy_from|copy_|_to_copy|to|clone|contiguous)\Z")


#: Ops around a copy that only ask for it (their own names tell nothing more).
COPY_WRAPPER_RE = re.compile(r"\Aaten::(?:_copy_from|copy_|_to_copy|to)\Z")


class HostCopies(NamedTuple):
    """The GPU copies between host and device that ran inside the calls of one tensor
    copy op on a gap's thread, within the gap: counts and bytes per direction
    (``CopyKind.D2H``, ``CopyKind.H2D``), the largest call, and the op that asked for
    the copy (the nearest operator enclosing that call not named like a copy wrapper;
    -1 when none: a step range or Python frame says nothing of the copy)."""

    d2h: int
    d2h_bytes: int
    h2d: int
    h2d_bytes: int
    call: int
    asked_by: int


def host_copies(diag: Diagnosis, r: int, name: str) -> HostCopies | None:
    """``HostCopies`` of the calls named ``name`` on gap ``r``'s thread, or None when no
    host-device copy of the gap's device ran inside them (mtia_rank_0 #440: a backward ``aten::clone`` of a
    permuted 16 MiB tensor went to the host and back inside ``aten::_copy_from``)."""
    trace, g = diag.trace, diag.gaps
    got = _gap_thread(diag, r)
    if got is None:
        return None
    lane, sl, gs, ge, st, en = got
    ids = ids_matching(trace, exactly(name))
    calls = np.flatnonzero(np.isin(trace.name_id[sl], ids) & (st < ge) & (en > gs))
    if calls.size == 0:
        return None
    # the device's copies that start in the gap, lane by lane (each sorted by start)
    found = []
    for ln in trace.gpu_lanes(int(g.device[r])):
        lsl = trace.lane_slice(ln)
        ls = trace.start_ns[lsl]
        a, b = np.searchsorted(ls, gs, side="left"), np.searchsorted(ls, ge, side="left")
        found.append(lsl.start + a + np.flatnonzero(trace.kind[lsl][a:b] == int(Kind.MEMCPY)))
    copy = np.concatenate(found) if found else np.zeros(0, dtype=np.int64)
    # and inside one of the calls (their union: calls of the name may nest)
    us, ue = union_intervals(st[calls], en[calls])
    j = np.searchsorted(us, trace.start_ns[copy], side="right") - 1
    copy = copy[(j >= 0) & (trace.start_ns[copy] < ue[np.maximum(j, 0)])]
    launches = getattr(diag, "_launches", None)
    if launches is not None and copy.size:  # a copy another thread issued is not this op's
        call = launches[copy]
        copy = copy[(call < 0) | (trace.lane[np.maximum(call, 0)] == lane)]
    kind = trace.copy_kind[copy]
    nbytes = np.maximum(trace.bytes[copy], 0)
    d2h, h2d = kind == int(CopyKind.D2H), kind == int(CopyKind.H2D)
    if not (d2h.any() or h2d.any()):
        return None
    big = int(calls[np.argmax((en - st)[calls])])
    depth = trace.depth[sl]
    around = np.flatnonzero((st <= st[big]) & (en >= en[big]) & (depth < depth[big]))
    kinds = trace.kind[sl]
    named = [
        int(a)
        for a in around[np.argsort(-depth[around], kind="stable")]
        if kinds[a] == int(Kind.CPU_OP) and not COPY_WRAPPER_RE.search(trace.name(int(sl.start + a)))
    ]
    return HostCopies(
        int(d2h.sum()),
        int(nbytes[d2h].sum()),
        int(h2d.sum()),
        int(nbytes[h2d].sum()),
        sl.start + big,
        sl.start + named[0] if named else -1,
    )


#: A tensor's type as Kineto's ``Input type`` gives it (``float``, ``c10::Half``, ``long
#: int``), and the words there that name no dtype.
DTYPE_RE = re.compile(r"[A-Za-z][A-Za-z0-9_:]{0,29}(?: [A-Za-z][A-Za-z0-9_]{0,14})?")


NOT_A_DTYPE = frozenset({"Scalar", "ScalarList", "TensorList", "GenericList", "None", "Tensor", "tensor"})


#: A shape is named when it has at most this many dimensions of at most this size.
SHAPE_MAX_DIMS = 8


SHAPE_MAX_SIZE = 1 << 40


def tensor_text(trace, ev: int) -> str:
    """`` a [1024, 128, 32] float tensor`` from the first input of event ``ev``'s
    ``Input Dims`` / ``Input type`` args (Kineto's record_shapes), or "" when they do not
    read as a shape (non-negative integers, at most ``SHAPE_MAX_DIMS`` of them, none
    above ``SHAPE_MAX_SIZE``); the type is named only when it reads as one."""
    args = trace.args_of(ev)
    dims, types = args.get("Input Dims"), args.get("Input type")
    if not isinstance(dims, list) or not dims or not isinstance(dims[0], list):
        return ""
    shape = dims[0]
    if not 0 < len(shape) <= SHAPE_MAX_DIMS:
        return ""
    if not all(type(x) is int and 0 <= x <= SHAPE_MAX_SIZE for x in shape):
        return ""
    first = types[0] if isinstance(types, list) and types else None
    plain = isinstance(first, str) and first not in NOT_A_DTYPE and DTYPE_RE.fullmatch(first)
    kind = f" {first}" if plain else ""
    return f" a [{', '.join(str(x) for x in shape)}]{kind} tensor"


#: DDP's reducer copying a reduced bucket back into the parameters' gradients.
BUCKET_TO_GRAD_RE = re.compile(r"reducer::copy_bucket_to_grad\Z")


def bucket_copies(diag: Diagnosis, rows, min_copies: int) -> tuple[int, int] | None:
    """(how many of the GPU copies of the gaps ``rows`` were launched inside DDP's
    ``reducer::copy_bucket_to_grad``, one such frame), when they are at least half of
    the copies and at least ``min_copies``; else None (hta/rank-0 #84: 161 DtoD copies
    of the buckets into the gradients, advised "batch them")."""
    trace = diag.trace
    launches = getattr(diag, "_launches", None)
    ids = ids_matching(trace, BUCKET_TO_GRAD_RE)
    if launches is None or ids.size == 0:
        return None
    copies = [e.event for r in rows for e in diag.gpu_copies(int(r)) if e.cause is Cause.COPY and e.event >= 0]
    if len(copies) < min_copies:
        return None
    calls = launches[np.array(copies, dtype=np.int64)]
    calls = calls[calls >= 0]
    frames = np.flatnonzero(np.isin(trace.name_id, ids))  # by lane, then start: the trace's order
    inside, frame = 0, -1
    for lane in np.unique(trace.lane[calls]).tolist():
        fl = frames[trace.lane[frames] == lane]
        if fl.size == 0:
            continue
        cs = trace.start_ns[calls[trace.lane[calls] == lane]]
        k = np.searchsorted(trace.start_ns[fl], cs, side="right") - 1
        hit = (k >= 0) & (trace.start_ns[fl][np.maximum(k, 0)] + trace.dur_ns[fl][np.maximum(k, 0)] >= cs)
        if hit.any():
            inside += int(hit.sum())
            frame = int(fl[k[hit][0]])
    return (inside, frame) if frame >= 0 and 2 * inside >= len(copies) else None
