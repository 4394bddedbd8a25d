"""Which events are evidence of which cause class (design: "Definitions" → cause classes).

- sync: *blocking* waits only: ``cudaStreamSynchronize``, ``cudaDeviceSynchronize``,
  ``cudaEventSynchronize`` and their driver (``cuStreamSynchronize``,
  ``cuCtxSynchronize``, ``cuEventSynchronize``) and HIP twins, ``torch.cuda.synchronize``,
  ``.item()`` in ASCII timelines, ``aten::item``, ``aten::_local_scalar_dense``,
  ``aten::is_nonzero``, and Kineto ``cuda_sync`` records (``Kind.SYNC_MARKER``, a CPU
  wait drawn on a GPU lane) other than "Stream Wait Event" and MTIA's ``event_record``
  / ``event_wait`` (a stream recording or awaiting another stream's event). Non-blocking
  calls (``cudaEventQuery``, ``cudaStreamQuery``, ``cudaStreamWaitEvent``,
  ``cudaEventRecord``) return at once: they are host work (a poll loop is host work),
  never sync evidence.
- copy: GPU memcpy/memset records overlapping the gap (handled per device by the
  classifier), nothing on the CPU. The thread's time in a copy call (``Kind.MEMCPY_CALL``,
  ``cudaMemcpy*``) is host work (the runtime staging pageable memory, the driver), and a
  *blocking* copy call (``blocking_copy_calls``: it returned only after its GPU copy
  ended) is a wait too, which can start a sync cliff. ``aten::to`` / ``aten::copy_`` are
  operators: their own CPU time is host work; the copy and wait calls inside them carry
  their own classes.
- launch: ``Kind.LAUNCH`` (``cudaLaunchKernel``, ``cuLaunchKernel[Ex]``,
  ``hipLaunchKernel``, ``cudaGraphLaunch``, ...).
- host: every other CPU event with a duration (ATen ops, Python functions, user
  annotations, other runtime calls), except the step annotations themselves.

One-time (warm-up) evidence: allocator growth (``cudaMalloc``, ``cudaFree``,
``cudaHostAlloc``, ...), module and lazy loading (``cuModuleLoad*``, "Lazy Function
Loading"), handle creation (``cublasCreate``, ``cudnnCreate``, ``ncclCommInit*``) and
stream and event creation (a first cuDNN or cuBLAS call creates its handles), ranges
named like warm-up (``ONE_TIME_RE``), and the first call of an ATen op that is far slower
than its later calls (``FIRST_CALL_FACTOR``), graph instantiation, and a stream
capture into a graph before any graph was launched (``graph_captures``).

Names are matched verbatim (case-sensitive for ATen names, case-insensitive for runtime
call names, which loaders may not have mapped to a kind).
"""

from __future__ import annotations

import functools
import re
import weakref
from typing import NamedTuple

import numpy as np

from gapscope.analysis.busy import coverage, union_intervals
from gapscope.analysis.types import Cause
from gapscope.parsers.model import Kind, Trace

__all__ = [
    "SYNC_OP_NAMES",
    "blocking_copy_calls",
    "is_copy_call",
    "event_cause",
    "NO_CLASS",
    "evidence_end",
    "BLOCKING_SYNC_RE",
    "NON_BLOCKING_RE",
    "ONE_TIME_RE",
    "one_time_mask",
    "synchronous_launches",
    "slow_launch_calls",
    "earlier_runs",
    "recurring_alloc_mask",
    "ALLOC_RE",
    "SLOW_LAUNCH_FACTOR",
    "SLOW_LAUNCH_MIN_CALLS",
    "COLLECTIVE_RE",
    "GRAPH_LAUNCH_RE",
    "GraphCapture",
    "capture_windows",
    "graph_captures",
    "LAZY_LOADING_RE",
    "lazy_loading_in",
    "module_loading_gaps",
]

SYNC_OP_NAMES = frozenset({"aten::item", "aten::_local_scalar_dense", "aten::is_nonzero"})
#: Calls and ops that block the calling thread until the device (or a stream or event
#: of it) has finished the work queued before them.
BLOCKING_SYNC_RE = re.compile(
    r"^(cuda|hip)(StreamSynchronize|DeviceSynchronize|EventSynchronize|ThreadSynchronize)"
    r"|^cu(StreamSynchronize|CtxSynchronize|EventSynchronize)|\.item\(\)|^torch\.cuda\.synchronize"
    r"|^(Stream|Event|Context|Device) Sync(hronize)?$",
    re.IGNORECASE,
)
#: Calls that return at once (queries, enqueued waits, event records): never a wait.
NON_BLOCKING_RE = re.compile(
    r"^(cuda|hip)(EventQuery|StreamQuery|StreamWaitEvent|EventRecord)|^cu(EventQuery|StreamQuery|StreamWaitEvent|EventRecord)"
    r"|^Stream Wait Event$|^event_(record|wait)$",
    re.IGNORECASE,
)
_COPY_CALL_RE = re.compile(r"^(cuda|hip|cu)Memcpy", re.IGNORECASE)
_LAUNCH_CALL_RE = re.compile(
    r"^(cuda|hip)(LaunchKernel|LaunchCooperativeKernel|GraphLaunch|ExtModuleLaunchKernel)|^cuLaunch|^cudaLaunch",
    re.IGNORECASE,
)
#: Warm-up work: allocator growth, module / lazy loading, handle creation, warm-up ranges.
ONE_TIME_RE = re.compile(
    r"^(cuda|hip)(Malloc|Free|HostAlloc|MallocHost|FreeHost|HostRegister)(?!Async)\b|^cuMem(Alloc|Free|Create|Map)"
    r"|^(cuda|hip)(StreamCreate|EventCreate)|^cuModuleLoad|^cuLibraryLoad|^cudaFuncGetAttributes$|Lazy Function Loading|^(cublas|cublasLt|cudnn|cusparse|cufft|miopen|rocblas)Create"
    r"|^ncclCommInit|^ncclCommSplit|warm[\s_-]?up",
    re.IGNORECASE,
)
#: The calls that open and close a stream capture into a CUDA / HIP graph.
CAPTURE_BEGIN_RE = re.compile(r"^(cuda|hip|cu)StreamBeginCapture", re.IGNORECASE)
CAPTURE_END_RE = re.compile(r"^(cuda|hip|cu)StreamEndCapture", re.IGNORECASE)
#: The Python frame of entering ``torch.cuda.graph`` (Kineto's python tracer names it
#: by file and line, ``torch/cuda/graphs.py(240): __enter__``): it synchronizes, empties
#: the caching allocator and begins the capture (torch/cuda/graphs.py, ``graph.__enter__``).
_GRAPH_ENTER_RE = re.compile(r"torch/cuda/graphs\.py\(\d+\): __enter__$")
#: Building an executable graph from a captured one (once per captured graph).
GRAPH_INSTANTIATE_RE = re.compile(r"^(cuda|hip|cu)Graph(Instantiate|Upload)", re.IGNORECASE)
#: Collective / peer-to-peer GPU ops (NCCL, RCCL, MSCCL, c10d, custom all-reduce kernels).
#: Not a bare "broadcast": elementwise kernels are named after broadcasting
#: (``type_specialized_broadcast_kernel_launcher``); NCCL's and c10d's broadcasts match
#: by their prefix.
COLLECTIVE_RE = re.compile(
    r"^(nccl|rccl|msccl)|ncclDevKernel|ncclKernel|c10d::|record_param_comms|all_?reduce|all_?gather|reduce_?scatter",
    re.IGNORECASE,
)
#: Launch calls that launch a whole CUDA / HIP graph (``cudaGraphLaunch``,
#: ``hipGraphLaunch``, an ASCII timeline's "launch fused decode graph").
GRAPH_LAUNCH_RE = re.compile(r"GraphLaunch|\bgraph\b", re.IGNORECASE)

#: trace -> {pattern: the ids of its names the pattern finds} (``ids_matching``)
_PATTERN_IDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def ids_matching(trace, pattern: re.Pattern[str]) -> np.ndarray:
    """int32 ids of the trace's names that ``pattern`` finds (``search``), looked up
    once per trace and pattern: a card asks again for each gap, and a trace may hold
    tens of thousands of names."""
    per = _PATTERN_IDS.get(trace)
    if per is None:
        per = _PATTERN_IDS[trace] = {}
    got = per.get(pattern)
    if got is None:
        got = per[pattern] = trace.name_ids_matching(lambda n: bool(pattern.search(n)))
    return got


@functools.lru_cache(maxsize=64)
def exactly(name: str) -> re.Pattern[str]:
    """The pattern of ``name`` itself and nothing else, for ``ids_matching``."""
    return re.compile(r"\A" + re.escape(name) + r"\Z")


class GraphCapture(NamedTuple):
    """One stream capture on a CPU lane: from the start of its ``*StreamBeginCapture``
    call (or of the lane's first event when the window starts inside the capture) to
    the end of its ``*StreamEndCapture`` (or of the lane's last event when the window
    ends first), in ns. ``launches``: the launch calls inside it (they record kernels
    into the graph and run nothing). ``warm_up``: no graph launch on any CPU lane began
    before it (a capture after a replay is a re-capture, not warm-up). ``enter_ns``:
    the start of the ``torch.cuda.graph`` entry that holds the begin call (its Python
    frame ``torch/cuda/graphs.py(N): __enter__``, which synchronizes the device, empties
    the caching allocator and then begins the capture), else ``start_ns``."""

    lane: int
    start_ns: int
    end_ns: int
    begin_event: int  # -1 when the window starts inside the capture
    end_event: int  # -1 when the window ends inside the capture
    launches: int
    warm_up: bool
    enter_ns: int


_CAPTURES: weakref.WeakKeyDictionary[Trace, tuple[GraphCapture, ...]] = weakref.WeakKeyDictionary()


def first_graph_launch_ns(trace: Trace) -> int | None:
    """Start (ns) of the trace's first graph launch call (``*GraphLaunch*``) on a CPU
    lane, or None: captures and instantiations before it are warm-up."""
    ids = trace.name_ids_matching(lambda s: "graphlaunch" in s.lower())
    if not ids.size or not len(trace):
        return None
    cpu = np.array([not ln.is_gpu for ln in trace.lanes], dtype=bool)
    starts = trace.start_ns[np.isin(trace.name_id, ids) & cpu[trace.lane]]
    return int(starts.min()) if starts.size else None


def graph_captures(trace: Trace) -> tuple[GraphCapture, ...]:
    """The stream captures of the trace, by lane then start: each begin call paired with
    the first end call on its lane that starts after it; a begin inside a capture
    already open on its lane (another stream captured at once) belongs to that one.
    Between the two, launch calls add nodes to a graph and the GPU runs none of them
    (CUDA Programming Guide, "CUDA Graphs", "Creating a Graph Using Stream Capture").
    Cached per trace."""
    got = _CAPTURES.get(trace)
    if got is not None:
        return got
    begin_ids = trace.name_ids_matching(lambda s: bool(CAPTURE_BEGIN_RE.search(s)))
    end_ids = trace.name_ids_matching(lambda s: bool(CAPTURE_END_RE.search(s)))
    out: list[GraphCapture] = []
    if (begin_ids.size or end_ids.size) and len(trace):
        first_graph_ns = first_graph_launch_ns(trace)
        enter_ids = trace.name_ids_matching(lambda s: bool(_GRAPH_ENTER_RE.search(s)))
        cpu = np.array([not ln.is_gpu for ln in trace.lanes], dtype=bool)
        launch = trace.kind == int(Kind.LAUNCH)
        on_cpu = cpu[trace.lane]
        begins = np.flatnonzero(np.isin(trace.name_id, begin_ids) & on_cpu)
        ends = np.flatnonzero(np.isin(trace.name_id, end_ids) & on_cpu)
        for lane in np.unique(np.concatenate([trace.lane[begins], trace.lane[ends]])).tolist():
            sl = trace.lane_slice(int(lane))
            st = trace.start_ns[sl]
            en = st + trace.dur_ns[sl]
            is_end = np.isin(trace.name_id[sl], end_ids)
            lane_begins = begins[trace.lane[begins] == lane]
            lane_begins = lane_begins[np.argsort(trace.start_ns[lane_begins], kind="stable")].tolist()
            e_first = np.flatnonzero(is_end)
            # an end call before the lane's first begin: the window starts inside a capture
            if e_first.size and (not lane_begins or st[e_first[0]] < trace.start_ns[lane_begins[0]]):
                lane_begins.insert(0, -1)
            for b in lane_begins:
                b_ns = int(st[0]) if b < 0 else int(trace.start_ns[b])  # a lane is sorted by start
                if out and out[-1].lane == lane and b_ns < out[-1].end_ns:
                    continue  # another stream captured inside the open capture
                after = np.flatnonzero(is_end & (st > b_ns)) if b >= 0 else e_first[:1]
                if after.size:
                    e = sl.start + int(after[0])
                    e_ns = int(trace.start_ns[e] + trace.dur_ns[e])
                else:
                    e = -1
                    e_ns = int(en.max())
                inside = launch[sl] & (st >= b_ns) & (st < e_ns)
                warm = first_graph_ns is None or first_graph_ns >= b_ns
                enter_ns = b_ns
                if b >= 0 and enter_ids.size:  # the torch.cuda.graph entry that holds it
                    holds = np.flatnonzero(np.isin(trace.name_id[sl], enter_ids) & (st <= b_ns) & (en > b_ns))
                    if holds.size:
                        enter_ns = int(st[holds].min())
                out.append(GraphCapture(int(lane), b_ns, e_ns, int(b), e, int(inside.sum()), warm, enter_ns))
    got = tuple(out)
    _CAPTURES[trace] = got
    return got


def capture_windows(trace: Trace, lane: int) -> tuple[np.ndarray, np.ndarray]:
    """The warm-up captures on ``lane`` (``graph_captures``), each from the entry of its
    ``torch.cuda.graph`` (``enter_ns``) to its end, as sorted [start, end) intervals,
    int64 ns."""
    caps = [c for c in graph_captures(trace) if c.lane == lane and c.warm_up]
    return (np.array([c.enter_ns for c in caps], np.int64), np.array([c.end_ns for c in caps], np.int64))


#: Value of ``event_cause`` for events that are no evidence at all.
NO_CLASS = -1


def _name_class(name: str) -> int:
    if NON_BLOCKING_RE.search(name):
        return int(Cause.HOST)
    if name in SYNC_OP_NAMES or BLOCKING_SYNC_RE.search(name):
        return int(Cause.SYNC)
    if _COPY_CALL_RE.match(name):
        return int(Cause.HOST)  # the thread in a copy call: host work (the GPU's copy is the copy)
    if _LAUNCH_CALL_RE.match(name):
        return int(Cause.LAUNCH)
    return NO_CLASS


def event_cause(trace: Trace, valid: np.ndarray, exclude: np.ndarray | None = None) -> np.ndarray:
    """int8 array (len n): the ``Cause`` each CPU-side event is evidence of, or
    ``NO_CLASS``. GPU work (kernels, memcpy, memset) and GPU annotations are
    ``NO_CLASS`` here (exposed copies are handled per device); ``Kind.SYNC_MARKER`` is
    SYNC wherever it is drawn, except the non-blocking "Stream Wait Event" records
    (``NO_CLASS``: they are waits the GPU performs, see ``gapscope.analysis.waits``).
    A ``Kind.SYNC_CALL`` that does not block (``NON_BLOCKING_RE``) is HOST, and so is a
    launch call inside a stream capture (``graph_captures``: it records a graph node).
    Events with no duration, invalid timing, or set in ``exclude`` (step annotations)
    are ``NO_CLASS``. Loops only over distinct names and captures."""
    n = len(trace)
    out = np.full(n, NO_CLASS, dtype=np.int8)
    if n == 0:
        return out
    kind = trace.kind
    cpu_lane = np.array([not ln.is_gpu for ln in trace.lanes], dtype=bool)
    on_cpu = cpu_lane[trace.lane] if cpu_lane.size else np.zeros(n, bool)
    host_kinds = np.isin(
        kind, np.array([Kind.CPU_OP, Kind.PYTHON, Kind.ANNOTATION, Kind.RUNTIME, Kind.OTHER], dtype=np.int8)
    )
    out[on_cpu & host_kinds] = int(Cause.HOST)
    out[on_cpu & (kind == Kind.LAUNCH)] = int(Cause.LAUNCH)
    out[on_cpu & (kind == Kind.MEMCPY_CALL)] = int(Cause.HOST)
    out[on_cpu & (kind == Kind.SYNC_CALL)] = int(Cause.SYNC)
    by_name = np.array([_name_class(s) for s in trace.names], dtype=np.int8)
    if by_name.size:
        nc = by_name[trace.name_id]
        # names override the generic CPU kinds (ATen sync ops, unmapped runtime calls)
        generic = on_cpu & (host_kinds | (kind == Kind.INSTANT)) & (nc != NO_CLASS)
        out[generic] = nc[generic]
        # a sync call that does not block is host work
        out[on_cpu & (kind == Kind.SYNC_CALL) & (nc == int(Cause.HOST))] = int(Cause.HOST)
        marker = kind == Kind.SYNC_MARKER
        out[marker] = np.where(nc[marker] == int(Cause.HOST), NO_CLASS, int(Cause.SYNC))
    else:
        out[kind == Kind.SYNC_MARKER] = int(Cause.SYNC)
    # a launch call inside a stream capture records a node and launches nothing: host
    # work, no launch path (the 30 captured calls of a capture read as 60 us "in the
    # launch path of the next op", a cudaGraphLaunch after the capture)
    for cap in graph_captures(trace):
        sl = trace.lane_slice(cap.lane)
        lo, hi = sl.start + np.searchsorted(trace.start_ns[sl], [cap.start_ns, cap.end_ns])
        part = out[lo:hi]  # a view: set in place
        part[part == int(Cause.LAUNCH)] = int(Cause.HOST)
    out[~valid | (trace.dur_ns <= 0)] = NO_CLASS
    if exclude is not None:
        out[exclude] = NO_CLASS
    return out


def evidence_end(trace: Trace) -> np.ndarray:
    """int64 end (ns) of each event as evidence: its end, except that a launch call
    linked to GPU ops that returned before the last of them ended stops at the first's
    start (a launch call cannot delay work that already runs, and its device is busy
    until the call returns; a graph launch runs many). A call that outlives its ops keeps
    its whole span: *T* sat in the runtime
    after its work had run (hta/inference_rank_1's first ``cudaLaunchKernel`` started its
    4 us kernel after 12 us and returned 1.398 ms after that kernel ended). ASCII
    timelines draw a launch as a span up to the next CPU line, so there every linked
    launch call stops at its op's start."""
    end = trace.start_ns + trace.dur_ns
    if trace.flow_src.size:
        src, dst = trace.flow_src, trace.flow_dst
        is_launch = trace.kind[src] == int(Kind.LAUNCH)
        # an op "starting" before its launch call has no usable timing (B14): no clip
        is_launch &= trace.start_ns[dst] >= trace.start_ns[src]
        src, dst = src[is_launch], dst[is_launch]
        first = end.copy()
        np.minimum.at(first, src, trace.start_ns[dst])
        if not trace.source.format.startswith("ascii"):
            # the end of the call's last op (a graph launch runs many)
            last = np.zeros_like(end)
            np.maximum.at(last, src, trace.start_ns[dst] + trace.dur_ns[dst])
            keep = np.zeros(len(end), dtype=bool)
            keep[src] = end[src] > last[src]
            first[keep] = end[keep]
        end = np.minimum(end, first)
    return end


#: A launch call this many times longer than the trace's typical launch call is an
#: outlier (first-use cost); a runtime whose every launch is slow (MTIA's
#: ``runFunction``: 0.3 ms typical, a dozen of 1.3-2 ms through a run) has no first use in
#: its typical call. Judged so from this many launch calls on (fewer: by length alone).
SLOW_LAUNCH_FACTOR = 10
SLOW_LAUNCH_MIN_CALLS = 5
_SLOW_LAUNCHES: weakref.WeakKeyDictionary[Trace, dict[int, np.ndarray]] = weakref.WeakKeyDictionary()


def slow_launch_calls(trace: Trace, min_ns: int) -> np.ndarray:
    """Bool mask of the launch calls that are first-use cost, not dispatch: at least
    ``min_ns`` long until their op started (or they returned) and ``SLOW_LAUNCH_FACTOR``
    times the lower median of all the trace's launch calls so measured (CUDA's is a few µs, so at its ``min_ns`` of 1 ms only the
    length counts; nvfuser's report1 launches 9 kernels through ``cudaLaunchKernel`` at
    2-8 ms each, first uses all, beside 9 of 18-93 µs). Cached per trace (a card asks
    again for each gap)."""
    by_min = _SLOW_LAUNCHES.setdefault(trace, {})
    got = by_min.get(min_ns)
    if got is not None:
        return got
    launch = trace.kind == int(Kind.LAUNCH)
    # a call's time outside its ops' run: until the first started, and after the last
    # ended until the call returned (sglang_Qwen3's one hipGraphLaunch, 1.57 ms, runs its
    # first of 544 nodes after 14 us and returns while they run: no first use). MTIA's runFunction returns only once its kernel has run
    # (an 8 ms call holding a 7.7 ms kernel is no slow launch); hta/inference_rank_1's
    # first cudaLaunchKernel returned 1.398 ms after its 4 us kernel ended
    until = trace.dur_ns.astype(np.int64).copy()
    if trace.flow_src.size:
        src, dst = trace.flow_src, trace.flow_dst
        ok = launch[src] & (trace.start_ns[dst] >= trace.start_ns[src])
        src, dst = src[ok], dst[ok]
        # over all the call's ops (a graph launch runs many): first start, last end
        first = trace.start_ns + trace.dur_ns
        np.minimum.at(first, src, trace.start_ns[dst])
        last = np.full(len(trace), np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(last, src, trace.start_ns[dst] + trace.dur_ns[dst])
        # the calls with an op, in index order (what ``np.unique(src)`` gives; a mask:
        # numpy 2.4's hash-based unique took 2.0 s for the 835k flows of 5M events)
        has_op = np.zeros(len(trace), dtype=bool)
        has_op[src] = True
        calls = np.flatnonzero(has_op)
        call_end = trace.start_ns[calls] + trace.dur_ns[calls]
        outside = (first[calls] - trace.start_ns[calls]) + np.maximum(call_end - last[calls], 0)
        until[calls] = np.minimum(outside, trace.dur_ns[calls])
    out = launch & (until >= min_ns)
    typical = np.sort(until[launch])
    if typical.size >= SLOW_LAUNCH_MIN_CALLS:
        out &= until >= SLOW_LAUNCH_FACTOR * typical[(typical.size - 1) // 2]
    by_min[min_ns] = out
    return out


_EARLIER_RUNS: weakref.WeakKeyDictionary[Trace, np.ndarray] = weakref.WeakKeyDictionary()


def earlier_runs(trace: Trace) -> np.ndarray:
    """int64 per event: for a launch call, how many times the kernel it launched (its
    first op by flow, by name) had run earlier in the trace; 0 for every other event
    and for calls with no linked op. A slow launch of a kernel that ran before is no
    first use (no module to load, nothing to compile): the issue-43 2xH100 FSDP export
    launched a kernel seen 84 times in 5 ms calls that cluster in time, host contention.
    Vectorised (one lexsort over the kernels); cached per trace."""
    got = _EARLIER_RUNS.get(trace)
    if got is not None:
        return got
    out = np.zeros(len(trace), dtype=np.int64)
    kern = np.flatnonzero(trace.kind == int(Kind.KERNEL))
    if kern.size and trace.flow_src.size:
        order = kern[np.lexsort((trace.start_ns[kern], trace.name_id[kern]))]
        names = trace.name_id[order]
        first = np.r_[0, np.flatnonzero(names[1:] != names[:-1]) + 1]
        rank = np.arange(order.size) - np.repeat(first, np.diff(np.r_[first, order.size]))
        runs = np.full(len(trace), np.iinfo(np.int64).max, dtype=np.int64)
        runs[order] = rank
        src, dst = trace.flow_src, trace.flow_dst
        ok = (trace.kind[src] == int(Kind.LAUNCH)) & (trace.kind[dst] == int(Kind.KERNEL))
        big = np.full(len(trace), np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(big, src[ok], runs[dst[ok]])
        out = np.where(big == np.iinfo(np.int64).max, 0, big)
    _EARLIER_RUNS[trace] = out
    return out


#: Allocator calls of one name that recur: at least this many calls ...
ALLOC_RECUR_MIN_CALLS = 4
#: ... spread over at least this share of the trace's CPU extent. A warm-up burst sits
#: at the start; with the caching allocator off (the issue-43 MI300X ResNet: 469 hipFree
#: calls over 1 ms in every step) they come back all along.
ALLOC_RECUR_MIN_SPREAD = 0.5
#: The allocator calls that are one-time only when they do not recur (``recurring_alloc_mask``).
ALLOC_RE = re.compile(r"^(cuda|hip)(Malloc|Free)(?!Async)\b|^cuMem(Alloc|Free)", re.IGNORECASE)


def recurring_alloc_mask(trace: Trace) -> np.ndarray:
    """Bool mask of the allocator calls (``ALLOC_RE``) whose name recurs: at least
    ``ALLOC_RECUR_MIN_CALLS`` calls spread over ``ALLOC_RECUR_MIN_SPREAD`` of the CPU
    events' extent. Those are a steady-state cost (caching allocator off, or a cache
    that keeps missing), not allocator growth at warm-up. One pass per allocator name."""
    out = np.zeros(len(trace), dtype=bool)
    ids = trace.name_ids_matching(lambda s: bool(ALLOC_RE.search(s)))
    if not ids.size:
        return out
    cpu = np.array([not ln.is_gpu for ln in trace.lanes], dtype=bool)[trace.lane]
    if not cpu.any():
        return out
    t0 = int(trace.start_ns[cpu].min())
    span = max(int((trace.start_ns[cpu] + trace.dur_ns[cpu]).max()) - t0, 1)
    for nid in ids.tolist():
        m = (trace.name_id == nid) & cpu
        st = trace.start_ns[m]
        if st.size >= ALLOC_RECUR_MIN_CALLS and int(st.max() - st.min()) >= ALLOC_RECUR_MIN_SPREAD * span:
            out |= m
    return out


def is_copy_call(trace: Trace, ev: int) -> bool:
    """Whether event ``ev`` is a copy call on a CPU lane (``Kind.MEMCPY_CALL``, or a
    runtime call named ``cudaMemcpy*`` / ``hipMemcpy*`` / ``cuMemcpy*``)."""
    if trace.lanes[int(trace.lane[ev])].is_gpu:
        return False
    return int(trace.kind[ev]) == int(Kind.MEMCPY_CALL) or bool(_COPY_CALL_RE.match(trace.name(ev)))


_BLOCKING_COPIES: weakref.WeakKeyDictionary[Trace, np.ndarray] = weakref.WeakKeyDictionary()


def blocking_copy_calls(trace: Trace) -> np.ndarray:
    """Bool per event: a copy call on a CPU lane (``Kind.MEMCPY_CALL``, or a runtime call
    named ``cudaMemcpy*`` / ``hipMemcpy*`` / ``cuMemcpy*``) that returned at or after the
    end of a GPU copy or memset linked to it by a flow (Kineto's ``ac2g``, Nsight's
    correlation): it waited for its copy, and a copy runs only after the work queued
    before it on its stream, so the call was a *blocking* wait on the device (a
    synchronous ``cudaMemcpy``, or ``cudaMemcpyAsync`` to or from pageable memory; CUDA
    Runtime API, "API synchronization behavior"). A copy call that returned before its
    copy ended (pinned, asynchronous), or has no linked copy, is not proved to block.
    Cached per trace."""
    got = _BLOCKING_COPIES.get(trace)
    if got is not None:
        return got
    n = len(trace)
    got = np.zeros(n, dtype=bool)
    src, dst = trace.flow_src, trace.flow_dst
    if src.size:
        cpu_lane = np.array([not ln.is_gpu for ln in trace.lanes], dtype=bool)
        ids = trace.name_ids_matching(lambda s: bool(_COPY_CALL_RE.match(s)))
        is_call = (trace.kind[src] == int(Kind.MEMCPY_CALL)) | np.isin(trace.name_id[src], ids)
        ok = (
            is_call
            & cpu_lane[trace.lane[src]]
            & np.isin(trace.kind[dst], np.array([int(Kind.MEMCPY), int(Kind.MEMSET)], dtype=np.int8))
        )
        s, d = src[ok], dst[ok]
        waited = trace.start_ns[s] + trace.dur_ns[s] >= trace.start_ns[d] + trace.dur_ns[d]
        got[s[waited]] = True
    _BLOCKING_COPIES[trace] = got
    return got


#: Launches of kernels at least this long tell whether launch calls wait for their
#: kernel (a short kernel may end before an ordinary asynchronous call returns).
SYNC_LAUNCH_MIN_KERNEL_NS = 50_000
#: ... from this many such launches on, and when at least half of them do.
SYNC_LAUNCH_MIN_PAIRS = 10
_SYNC_LAUNCHES: weakref.WeakKeyDictionary[Trace, tuple[int, int] | None] = weakref.WeakKeyDictionary()


def synchronous_launches(trace: Trace) -> tuple[int, int] | None:
    """(launches whose call returned only after their kernel ended, launches counted)
    when the trace's launch calls wait for their kernel: of the linked launches of
    kernels of ``SYNC_LAUNCH_MIN_KERNEL_NS`` or more, at least ``SYNC_LAUNCH_MIN_PAIRS``
    and half or more; else None. MTIA's ``runFunction`` does (1,366 of 2,103 in
    hta/mtia_rank_0), as CUDA does under ``CUDA_LAUNCH_BLOCKING=1``; every other corpus
    trace has 0-12 %. Then no host work overlaps a kernel. Cached per trace."""
    if trace in _SYNC_LAUNCHES:
        return _SYNC_LAUNCHES[trace]
    got = None
    src, dst = trace.flow_src, trace.flow_dst
    if src.size:
        ok = (
            (trace.kind[src] == int(Kind.LAUNCH))
            & (trace.kind[dst] == int(Kind.KERNEL))
            & (trace.dur_ns[dst] >= SYNC_LAUNCH_MIN_KERNEL_NS)
        )
        n = int(ok.sum())
        if n >= SYNC_LAUNCH_MIN_PAIRS:
            s, d = src[ok], dst[ok]
            after = int((trace.start_ns[s] + trace.dur_ns[s] >= trace.start_ns[d] + trace.dur_ns[d]).sum())
            if 2 * after >= n:
                got = (after, n)
    _SYNC_LAUNCHES[trace] = got
    return got


def one_time_mask(trace: Trace, slow_launch_ns: int) -> np.ndarray:
    """Bool mask of CPU events that are warm-up evidence: names matching
    ``ONE_TIME_RE`` but allocator calls that recur (``recurring_alloc_mask``), the
    first-use launch calls (``slow_launch_calls`` of a kernel that had not run before,
    ``earlier_runs``: module loading, JIT, autotuning), and graph instantiation before the first graph launch.
    Stream captures are spans, not events: ``capture_windows``."""
    n = len(trace)
    if n == 0:
        return np.zeros(0, dtype=bool)
    ids = trace.name_ids_matching(lambda s: bool(ONE_TIME_RE.search(s)))
    m = np.isin(trace.name_id, ids) if ids.size else np.zeros(n, dtype=bool)
    m &= ~recurring_alloc_mask(trace)
    # a slow launch of a kernel that ran before is contention, not first use
    m |= slow_launch_calls(trace, slow_launch_ns) & (earlier_runs(trace) == 0)
    inst = trace.name_ids_matching(lambda s: bool(GRAPH_INSTANTIATE_RE.search(s)))
    if inst.size:  # instantiating a graph before any was launched (after one: a re-capture)
        first_graph_ns = first_graph_launch_ns(trace)
        mi = np.isin(trace.name_id, inst)
        if first_graph_ns is not None:
            mi &= trace.start_ns < first_graph_ns
        m |= mi
    if _near_process_start(trace):
        m |= _slow_first_calls(trace, slow_launch_ns)
    cpu_lane = np.array([not ln.is_gpu for ln in trace.lanes], dtype=bool)
    return m & cpu_lane[trace.lane]


_STEP_NUMBER_RE = re.compile(r"^ProfilerStep#(\d+)$")


def _near_process_start(trace: Trace) -> bool:
    """Whether the trace may hold a process's first calls (so a slow early call can be
    first-use cost): no ``ProfilerStep#N`` ranges, or the first N is at most 3. A trace
    that starts at step 1009 holds no first use."""
    steps = [int(m.group(1)) for s in trace.names if (m := _STEP_NUMBER_RE.match(s))]
    return not steps or min(steps) <= 3


#: A first call this many times slower than the median of its op's calls is first-use
#: cost (lazy module loading, handle creation, autotuning inside it).
FIRST_CALL_FACTOR = 10


#: An early call of an op whose first call loaded GPU code, this many times slower than
#: the median of its calls, is warm-up too (b200's 4th ``aten::addmm``, 229 µs against
#: ~60 µs: the second call of a shape after three first calls that loaded modules).
WARM_CALL_FACTOR = 3


def _first_call_loaded(trace: Trace, ev: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Bool per call of ``ev`` (CPU ops sorted by name, then start; ``rank``: the call's
    place among its name's) that is true on every call of a name whose first call
    overlaps module loading (``LAZY_LOADING_RE`` on a CPU lane)."""
    out = np.zeros(ev.size, dtype=bool)
    ids = trace.name_ids_matching(lambda s: bool(LAZY_LOADING_RE.search(s)))
    if not ids.size:
        return out
    cpu = np.array([not ln.is_gpu for ln in trace.lanes], dtype=bool)
    m = np.isin(trace.name_id, ids) & cpu[trace.lane]
    st = trace.start_ns[m].astype(np.int64)
    us, ue = union_intervals(st, st + trace.dur_ns[m].astype(np.int64))
    first = np.flatnonzero(rank == 0)
    a = trace.start_ns[ev[first]].astype(np.int64)
    hit = coverage(us, ue, a, a + trace.dur_ns[ev[first]].astype(np.int64)) > 0
    # each name's calls run from its first (rank 0) to the next name's first
    out[:] = np.repeat(hit, np.diff(np.append(first, ev.size)))
    return out


def _slow_first_calls(trace: Trace, min_ns: int) -> np.ndarray:
    """Bool mask of the early calls of ATen ops (among the first 3, or the first 5%, of
    their name's calls by start; names with at least 3 calls) that last twice the
    longest of the later half of its calls and either ``min_ns`` or more and
    ``FIRST_CALL_FACTOR`` times the median of that name's calls, or, for an op whose
    first call loaded GPU code (``_first_call_loaded``), ``WARM_CALL_FACTOR`` times it:
    lazy loading and autotuning happen at a kernel configuration's first use (and a
    shape's second call warms up after it), and do not come back. Vectorised."""
    n = len(trace)
    out = np.zeros(n, dtype=bool)
    ops = np.flatnonzero(trace.kind == int(Kind.CPU_OP))
    if ops.size < 3:
        return out
    nid, dur, st = trace.name_id[ops], trace.dur_ns[ops], trace.start_ns[ops]
    o = np.lexsort((dur, nid))
    nid_s, dur_s = nid[o], dur[o]
    ids, lo, cnt = np.unique(nid_s, return_index=True, return_counts=True)
    med = (dur_s[lo + (cnt - 1) // 2] + dur_s[lo + cnt // 2]) // 2
    o2 = np.lexsort((st, nid))
    name_sorted = nid[o2]
    start_pos = np.searchsorted(name_sorted, ids)  # ids are sorted, as is name_sorted
    k = np.searchsorted(ids, name_sorted)
    rank = np.arange(o2.size) - start_pos[k]
    early = (rank < np.maximum(3, cnt[k] // 20)) & (cnt[k] >= 3)
    ev = ops[o2]
    # ... and twice as long as every call of the later half: a cost that comes back
    # (df_index's first `aten::clone` of each step; mtia_rank_0's 5 ms round trips in
    # `aten::_copy_from` all through the run) is no first use, where the first pass's
    # autotuned convolutions of resnet50 (1.4 s, then 0.4 ms at most) are
    late = rank >= cnt[k] // 2
    late_max = np.zeros(ids.size, dtype=np.int64)
    np.maximum.at(late_max, k[late], trace.dur_ns[ev[late]])
    dur = trace.dur_ns[ev].astype(np.int64)

    loaded = _first_call_loaded(trace, ev, rank)

    def slow(d: np.ndarray) -> np.ndarray:
        first = (d >= min_ns) & (d >= FIRST_CALL_FACTOR * np.maximum(med[k], 1))
        warm = loaded & (d >= WARM_CALL_FACTOR * np.maximum(med[k], 1))
        return early & (first | warm) & (d >= 2 * late_max[k])

    ok = slow(dur)
    if ok.any() and synchronous_launches(trace) is not None:
        # where launches wait for their kernel, an op's time holds its kernels' runs:
        # judged without them (mtia_rank_0's 10th `aten::cat`, 13.9 ms, is a 13.0 ms
        # kernel inside its launch call and 0.4 ms of CPU)
        for j in np.flatnonzero(ok).tolist():
            dur[j] -= _kernel_wait_ns(trace, int(ev[j]))
        ok = slow(dur)
    out[ev[ok]] = True
    return out


def _kernel_wait_ns(trace: Trace, ev: int) -> int:
    """ns of event ``ev`` spent in launch calls inside it after their op had started:
    the launch waiting for its kernel, where launches do (``synchronous_launches``)."""
    s, e = int(trace.start_ns[ev]), int(trace.start_ns[ev] + trace.dur_ns[ev])
    src, dst = trace.flow_src, trace.flow_dst
    m = (
        (trace.kind[src] == int(Kind.LAUNCH))
        & (trace.lane[src] == trace.lane[ev])
        & (trace.start_ns[src] >= s)
        & (trace.start_ns[src] < e)
    )
    if not m.any():
        return 0
    a = np.clip(np.maximum(trace.start_ns[dst[m]], trace.start_ns[src[m]]), s, e)
    b = np.clip(trace.start_ns[src[m]] + trace.dur_ns[src[m]], s, e)
    keep = b > a
    if not keep.any():
        return 0
    us, ue = union_intervals(a[keep], b[keep])
    return int((ue - us).sum())


#: Module loading at a function's first call: CUDA's lazy loading (Nsight's "Lazy
#: Function Loading" range, B200 GEMMs' first calls) and the driver's module loads.
LAZY_LOADING_RE = re.compile(r"Lazy Function Loading|^cuModuleLoad|^cuLibraryLoad|^hipModuleLoad", re.IGNORECASE)
#: A call on the launching thread holds an occurrence when it covers this share of it.
HOLDING_CALL_MIN_SHARE = 0.5
#: ... and is no longer than this many times the occurrence (the innermost call of a
#: first use, not a range enclosing a whole forward pass).
HOLDING_CALL_MAX_GAPS = 4
#: Module loading covering this share of an occurrence outside any call makes it module loading.
LAZY_LOADING_MIN_SHARE = 0.5


def _loading_union(trace: Trace, lane: int) -> tuple[np.ndarray, np.ndarray]:
    """Union of the module loading events (``LAZY_LOADING_RE``) on the CPU lanes of
    ``lane``'s process and of no process (B200: the driver's lane has pid -1)."""
    ids = trace.name_ids_matching(lambda s: bool(LAZY_LOADING_RE.search(s)))
    if not ids.size:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    pid = trace.lanes[lane].pid
    cpu = np.array([(not ln.is_gpu) and ln.pid in (pid, "-1", "") for ln in trace.lanes], dtype=bool)
    m = np.isin(trace.name_id, ids) & cpu[trace.lane]
    st = trace.start_ns[m].astype(np.int64)
    return union_intervals(st, st + trace.dur_ns[m].astype(np.int64))


def lazy_loading_in(trace: Trace, lane: int, starts_ns: np.ndarray, ends_ns: np.ndarray) -> tuple[int, bool]:
    """(ns, in_call) of module loading (``LAZY_LOADING_RE``, on any CPU lane of
    ``lane``'s process: Kineto records CUDA's "Lazy Function Loading" on a lane of its
    own) for the occurrence of gaps [``starts_ns``, ``ends_ns``) (int64 arrays) whose
    launching thread is ``lane``: inside the narrowest call (``Kind.CPU_OP`` or
    ``Kind.PYTHON``, the latest to start) of the thread that covers at least
    ``HOLDING_CALL_MIN_SHARE`` of the occurrence, when that call is no longer than
    ``HOLDING_CALL_MAX_GAPS`` times the occurrence (``in_call``: that call is a
    function's first call, which began before the GPU went idle: B200's first
    ``aten::mm`` of a shape), else inside the occurrence itself. Only loading inside the
    occurrence counts (a load that ended before the GPU went idle made no idle time),
    so never more than its length. A broad range enclosing the gap (a 79 ms model forward) is no
    holding call: loading anywhere in it is not this gap's cost (the fourth audit: b200
    #422, #548, #656 were credited 0.210 ms of loading so). (0, False) with ``lane`` < 0
    or no loading."""
    if lane < 0:
        return 0, False
    us, ue = _loading_union(trace, lane)
    if not us.size:
        return 0, False
    sl = trace.lane_slice(lane)
    st = trace.start_ns[sl].astype(np.int64)
    en = st + trace.dur_ns[sl].astype(np.int64)
    cover = np.zeros(st.size, dtype=np.int64)
    for a, b in zip(starts_ns.tolist(), ends_ns.tolist()):
        cover += np.maximum(np.minimum(en, b) - np.maximum(st, a), 0)
    total = int((ends_ns - starts_ns).sum())
    kind = trace.kind[sl]
    calls = np.flatnonzero(
        (cover >= HOLDING_CALL_MIN_SHARE * max(total, 1)) & np.isin(kind, [int(Kind.CPU_OP), int(Kind.PYTHON)])
    )
    if calls.size:
        c = int(calls[np.argsort(st[calls], kind="stable")[-1]])
        a, b = np.maximum(starts_ns, st[c]), np.minimum(ends_ns, en[c])
        got = int(coverage(us, ue, a, np.maximum(a, b)).sum())
        if got and int(en[c] - st[c]) <= HOLDING_CALL_MAX_GAPS * total:
            return got, True
    return int(coverage(us, ue, starts_ns, ends_ns).sum()), False


def module_loading_gaps(trace: Trace, lanes: np.ndarray, starts_ns: np.ndarray, ends_ns: np.ndarray) -> np.ndarray:
    """Bool per gap [``starts_ns``, ``ends_ns``) with launching thread ``lanes`` (int
    per gap, -1 none): module loading (``lazy_loading_in``) inside the call holding it,
    or covering ``LAZY_LOADING_MIN_SHARE`` of it. The card's "module loading" story
    (``card.facts.Facts.module_loading``): a first call's one-time cost. A loop over
    the gaps only when the trace records any loading."""
    out = np.zeros(starts_ns.size, dtype=bool)
    if not trace.name_ids_matching(lambda s: bool(LAZY_LOADING_RE.search(s))).size:
        return out
    for i in np.flatnonzero(lanes >= 0).tolist():
        a, b = starts_ns[i : i + 1], ends_ns[i : i + 1]
        ns, in_call = lazy_loading_in(trace, int(lanes[i]), a, b)
        out[i] = ns > 0 and (in_call or ns >= LAZY_LOADING_MIN_SHARE * int(b[0] - a[0]))
    return out
