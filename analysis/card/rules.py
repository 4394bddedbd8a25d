"""The advice of a card (``gapscope.analysis.card``): first experiment, forbidden next
step and proof of improvement for a gap's class, specialised by its evidence.

The defaults follow the design (launch → CUDA graphs / ``torch.compile`` / batching;
host → take the work off the critical path; copy → keep tensors on the device, pinned
+ ``non_blocking``; sync → no ``.item()`` / ``print`` in the loop, stream events for
timing; dependency → what the queued work waited for), then the evidence decides:
allocation, DataLoader, DtoD copies and memsets, pageable copies inside ``aten::to``, a
graph launch, a slow first launch, a collective (other ranks only when the trace is one
of several), warm-up, uninstrumented time (NVTX hints on Nsight traces). Advice never
contradicts the class.
"""

from __future__ import annotations

import dataclasses
import re
import weakref
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from gapscope.analysis.busy import coverage, device_event_mask, union_intervals
from gapscope.analysis.card.copies import COPY_KIND_WORDS, CopyLead, copy_lead
from gapscope.analysis.card.facts import Facts, GapCapture, enclosing_events
from gapscope.analysis.card.program import is_mtia, is_rocm, program_kind
from gapscope.analysis.card.why import (
    GRAPH_START_MAX_NS,
    cliff_wait,
    graph_word,
    hot_inner_text,
    in_running_graph_launch,
    in_sync_cliff,
    is_decode_trace,
    is_wait,
    other_streams_idle,
    quiet_text,
    quote_name,
    thread_label,
    trust_bits,
)
from gapscope.analysis.diagnose import Diagnosis
from gapscope.analysis.evidence_kinds import (
    COLLECTIVE_RE,
    GRAPH_LAUNCH_RE,
    SYNC_LAUNCH_MIN_KERNEL_NS,
    synchronous_launches,
)
from gapscope.analysis.framework_work import (
    AUTOGRAD_NODE_RE,
    TENSOR_COPY_RE,
    DdpBufferSync,
    HostCopies,
    bucket_copies,
    ddp_buffer_sync,
    event_span,
    graph_first_node,
    graph_launch_inside,
    graph_launches_on,
    graph_node_count,
    host_copies,
    launches_inside,
    tensor_text,
    triton_launcher_around,
)
from gapscope.analysis.steps import PROFILER_STEP_RE
from gapscope.analysis.types import Cause, Evidence, Trust, WaitKind
from gapscope.parsers.model import CopyKind, Kind
from gapscope.units import fmt_bytes, fmt_dur

__all__ = ["advice", "Advice", "Rule", "RULES", "matching_rule", "capture_sentence", "short_fix"]


def _innermost(diag: Diagnosis, ev: int, kind: Kind) -> str | None:
    """Name of the innermost event of ``kind`` enclosing event ``ev`` on its lane, or None."""
    trace = diag.trace
    if ev < 0 or diag._index is None:
        return None
    s, e = int(trace.start_ns[ev]), int(trace.start_ns[ev] + trace.dur_ns[ev])
    idx = diag._index.overlapping(trace, int(trace.lane[ev]), s, s + 1)  # those starting at or before s
    m = (trace.kind[idx] == int(kind)) & (trace.start_ns[idx] + trace.dur_ns[idx] >= e) & (idx != ev)
    if not m.any():
        return None
    cand = idx[m]
    return trace.name(int(cand[np.argmax(trace.depth[cand])]))


def _ddp_advice(trace, ddp: DdpBufferSync) -> str:
    """The first experiment for a gap held by DDP's buffer sync."""
    steps = ["flatten"] if ddp.flatten else []
    steps.append("one broadcast" if ddp.broadcasts == 1 else f"{ddp.broadcasts} broadcasts")
    if ddp.unflatten:
        steps.append("unflatten")
    if ddp.copies:
        steps.append(f"then {ddp.copies:,} `aten::copy_` calls back into the buffers")
    text = (
        f"{quote_name(trace.name(ddp.forward))} syncs the module's buffers before the forward ({', '.join(steps)}; "
        f"{fmt_dur(ddp.sync_ns)} of this gap), on every forward: broadcast_buffers=True, DDP's "
        f"default. If the buffers need not match across ranks at every step (BatchNorm's running statistics "
        f"usually need not, and SyncBatchNorm syncs them itself), construct DDP with broadcast_buffers=False; "
        f"then this host time and its copies should go."
    )
    if ddp.group_size == 1:
        text += " Its process group has one rank, so the broadcast syncs nothing: this process may not need DDP at all."
    return text


def _autograd_advice(trace, lead: Evidence, op: str, compile_: str) -> str:
    """The first experiment for host time in an autograd backward node: it runs when
    ``backward()`` reaches it, so it cannot be moved after the step; its CPU cost is cut
    by fewer, larger forward ops, or by compiling the backward. Names the calls most
    often made directly inside its largest call (param/dlrm worker0 #101: 26
    ``aten::narrow`` views in ``CatBackward0``)."""
    forward = re.sub(r"(?<!^)(?=[A-Z])", "_", op).lower()
    ev = lead.event
    sl, a, b = event_span(trace, ev)
    inner = np.arange(a, b)[trace.depth[sl][a:b] == trace.depth[ev] + 1]
    made = ""
    if inner.size:
        ids, counts = np.unique(trace.name_id[sl][inner], return_counts=True)
        k = int(np.argmax(counts))
        if counts[k] >= 2:
            made = f", making {int(counts[k]):,} {quote_name(trace.names[int(ids[k])])} calls"
    # called only for a node that launches nothing (``_host_advice``'s branches before it)
    return (
        f"{quote_name(lead.name)} is autograd's backward of a forward `{forward}`: it runs when backward() reaches "
        f"it, so it cannot move after the step. Here it holds {fmt_dur(lead.overlap_ns)} of the gap{made}, with "
        f"no GPU work. "
        f"Cut the backward's CPU cost: fewer, larger ops in the forward (each op records a backward node; a cat "
        f"or split of many tensors makes one view per piece in its backward), or {compile_}, which compiles the "
        f"backward too."
    )


def _triton_advice(trace, lead: Evidence, launcher: int, compile_: str) -> str:
    """The first experiment for host time in Triton's Python launch path (``launcher``,
    the outermost launcher frame around ``lead``, which makes at least one launch call):
    its per-call argument work, and on a thread that replays graphs, that the kernel
    launches eagerly outside them."""
    n_launch = launches_inside(trace, launcher)
    calls = "its one launch call" if n_launch == 1 else f"each of its {n_launch:,} launch calls"
    who = (
        f"{quote_name(lead.name)} is Triton's Python launcher"
        if lead.event == launcher
        else f"{quote_name(lead.name)} ({fmt_dur(lead.overlap_ns)}) runs inside Triton's Python launcher "
        f"{quote_name(trace.name(launcher))}"
    )
    head = (
        f"{who}: before {calls} it specializes and checks the arguments in Python, and that per-call work, "
        f"not the kernel, holds this gap."
    )
    replays, graph_call = graph_launches_on(trace, int(trace.lane[launcher]))
    compiled = "launch it through the compiled kernel its first call returns (compiled[grid](...)), which skips the per-call specialization"
    if replays:
        return (
            f"{head} This thread replays {graph_word(trace)}s ({replays:,} {quote_name(trace.name(graph_call))} "
            f"call{'' if replays == 1 else 's'}), and this kernel launches eagerly, outside them: capture it into "
            f"the graph with the rest, or {compiled}."
        )
    return f"{head} {compiled[:1].upper() + compiled[1:]}, or capture the step in a {graph_word(trace)}: {compile_}."


#: A host range that issues GPU work spending this much CPU time outside runtime calls
#: (``_own_cpu_ns``) or more per launch call inside it does its own work between launches (mtia_inference's
#: `predictor_executor::run`: 5 ms of input preparation, then one launch;
#: nccl_data's `aten::flatten_dense_tensors`: 2 ms, one launch); below it, its time is
#: the per-kernel cost of eager dispatch (tens of µs an op).
OWN_WORK_NS_PER_LAUNCH = 500_000


_CALL_KINDS = np.array([int(k) for k in (Kind.LAUNCH, Kind.MEMCPY_CALL, Kind.SYNC_CALL, Kind.RUNTIME)], dtype=np.int8)


def _inner_ns(diag: Diagnosis, ev: int, kinds: np.ndarray | None = None, within: tuple[int, int] | None = None) -> int:
    """ns of event ``ev`` covered by the events recorded inside it (on its lane, deeper
    and starting in it, or inside its span in time: xdit's `## Call CompiledFxGraph ##`
    annotation holds the 14.7 ms Python frame of its `call` at a lower depth, and read
    "almost none of it in a finer recorded event"; of ``kinds`` only, when given), in
    all of ``ev`` or, with ``within`` (ns), in its part inside that span. Without the
    evidence index: 0."""
    trace = diag.trace
    if diag._index is None:
        return 0
    s, e = int(trace.start_ns[ev]), int(trace.start_ns[ev] + trace.dur_ns[ev])
    idx = diag._index.overlapping(trace, int(trace.lane[ev]), s, e)
    st, en = trace.start_ns[idx], trace.start_ns[idx] + trace.dur_ns[idx]
    deeper = trace.depth[idx] > trace.depth[ev]
    in_span = (st >= s) & (en <= e) & ((st > s) | (en < e) | deeper)  # same span: the deeper is inside
    inner = (idx != ev) & ((deeper & (st >= s)) | in_span)
    if kinds is not None:
        inner &= np.isin(trace.kind[idx], kinds)
    idx = idx[inner]
    if idx.size == 0:
        return 0
    us, ue = union_intervals(
        trace.start_ns[idx], np.maximum(trace.start_ns[idx], np.minimum(trace.start_ns[idx] + trace.dur_ns[idx], e))
    )
    if within is not None:
        s = max(s, within[0])
        e = max(s, min(e, within[1]))
    return int(coverage(us, ue, np.array([s]), np.array([e]))[0])


def _own_cpu_ns(diag: Diagnosis, ev: int) -> int:
    """ns of event ``ev`` outside the runtime calls recorded inside it (launch, copy,
    sync and other runtime calls: dlrm's `aten::to` spends 0.88 of its 1.3 ms in a
    blocking `cudaMemcpyAsync`, control's `aten::add` 1.14 of 1.15 ms in one slow
    `cudaLaunchKernel`): the time of its own code and of the ops inside it."""
    return int(diag.trace.dur_ns[ev]) - _inner_ns(diag, ev, _CALL_KINDS)


#: What counts as another thread's work for ``_meanwhile``: operators and runtime calls
#: (not the step annotations, user ranges or Python frames that merely contain work).
_WORK_KINDS = np.array(
    [int(k) for k in (Kind.CPU_OP, Kind.RUNTIME, Kind.LAUNCH, Kind.MEMCPY_CALL, Kind.SYNC_CALL)], dtype=np.int8
)


_STEP_IDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _step_name_ids(trace) -> np.ndarray:
    """Name ids of the trace's ``ProfilerStep#N`` ranges (``steps.PROFILER_STEP_RE``),
    found once per trace (a card asks again for each gap)."""
    got = _STEP_IDS.get(trace)
    if got is None:
        got = _STEP_IDS[trace] = trace.name_ids_matching(lambda n: bool(PROFILER_STEP_RE.match(n)))
    return got


def _meanwhile(diag: Diagnosis, lead: Evidence, rows: np.ndarray) -> str:
    """ " Meanwhile `thread X` of the same process recorded ...": when another CPU thread
    of the lead's process recorded work covering at least half of the lead's time in
    the gap (nccl_data #1186: the main thread sat in `## backward ##` while the autograd
    thread ran 144 `reducer::copy_bucket_to_grad`), its two largest names at its
    shallowest recorded depth there; "" otherwise."""
    trace = diag.trace
    if diag._index is None:
        return ""
    r = int(rows[0])
    a = max(int(diag.gaps.start_ns[r]), int(trace.start_ns[lead.event]))
    b = min(int(diag.gaps.end_ns[r]), int(trace.start_ns[lead.event] + trace.dur_ns[lead.event]))
    own = trace.lanes[lead.lane]
    if b <= a:
        return ""
    best: tuple[int, int, np.ndarray] | None = None
    steps = _step_name_ids(trace)
    for ln in trace.lanes:
        if ln.is_gpu or ln.index == lead.lane or ln.pid != own.pid:
            continue
        idx = diag._index.overlapping(trace, ln.index, a, b)
        idx = idx[np.isin(trace.kind[idx], _WORK_KINDS)]  # ops and runtime calls, not ranges or frames
        if steps.size:
            idx = idx[~np.isin(trace.name_id[idx], steps)]  # old Kineto writes ProfilerStep#N as an op
        if idx.size == 0:
            continue
        s = np.clip(trace.start_ns[idx], a, b)
        e = np.clip(trace.start_ns[idx] + trace.dur_ns[idx], a, b)
        us, ue = union_intervals(s, np.maximum(s, e))
        cov = int((ue - us).sum())
        if best is None or cov > best[0]:
            best = (cov, ln.index, idx)
    if best is None or 2 * best[0] < b - a:
        return ""
    cov, lane, idx = best
    top = idx[trace.depth[idx] == trace.depth[idx].min()]
    by: dict[str, int] = {}
    for i in top.tolist():
        ns = min(int(trace.start_ns[i] + trace.dur_ns[i]), b) - max(int(trace.start_ns[i]), a)
        by[trace.name(i)] = by.get(trace.name(i), 0) + max(ns, 0)
    names = sorted(by.items(), key=lambda kv: -kv[1])[:2]
    listed = ", ".join(f"{fmt_dur(ns)} in {quote_name(n)}" for n, ns in names)
    why = (
        " (PyTorch runs the backward pass on its autograd threads)"
        if "autograd" in trace.lanes[lane].thread_name
        else ""
    )
    return f"{thread_label(trace, lane)} of the same process recorded {fmt_dur(cov)} of work ({listed}){why}"


def _mostly_own_time(diag: Diagnosis, item: Evidence, rows: np.ndarray) -> bool:
    """Whether a host item of a millisecond or more spends most of its time in the gap
    ``rows`` (the occurrence: its gap overlapping the item most) outside any finer
    event recorded inside it (uninstrumented work inside a recorded range)."""
    ev = item.event
    if ev < 0 or item.overlap_ns < 1_000_000 or diag._index is None:
        return False
    g, trace = diag.gaps, diag.trace
    s, e = int(trace.start_ns[ev]), int(trace.start_ns[ev] + trace.dur_ns[ev])
    ov = np.minimum(g.end_ns[rows], e) - np.maximum(g.start_ns[rows], s)
    r = int(rows[int(np.argmax(ov))])
    a, b = max(s, int(g.start_ns[r])), min(e, int(g.end_ns[r]))
    if b <= a:
        return False
    return _inner_ns(diag, ev, within=(a, b)) <= 0.5 * (b - a)


#: A host item nested (in time) in the lead of the advice that holds this share of the
#: lead's time in the gap names the work better: the advice descends to it.
NESTED_LEAD_MIN_SHARE = 0.8


def _nested_lead(diag: Diagnosis, lead: Evidence, evidence: list[Evidence]) -> Evidence:
    """The shortest host item of ``evidence`` on ``lead``'s lane that lies inside
    ``lead`` in time and holds at least ``NESTED_LEAD_MIN_SHARE`` of its overlap with
    the gap, else ``lead`` (xdit's `## Call CompiledFxGraph ##` holds 15.3 ms of a gap,
    14.7 of it in the Python frame of its inductor `call`, whose own code has almost no
    finer event)."""
    trace = diag.trace
    s, e = int(trace.start_ns[lead.event]), int(trace.start_ns[lead.event] + trace.dur_ns[lead.event])
    best = lead
    for it in evidence:
        ev = it.event
        if (
            it.cause != Cause.HOST
            or ev < 0
            or ev == lead.event
            or it.overlap_ns < NESTED_LEAD_MIN_SHARE * lead.overlap_ns
        ):
            continue
        a, b = int(trace.start_ns[ev]), int(trace.start_ns[ev] + trace.dur_ns[ev])
        if trace.lane[ev] == trace.lane[lead.event] and s <= a and b <= e and (b - a) < int(trace.dur_ns[best.event]):
            best = it
    return best


_ALLOC_RE = re.compile(
    r"^(cuda|hip)(Malloc|Free|HostAlloc|MallocHost)|^cuMem(Alloc|Free)|CachingAllocator|empty_cache", re.IGNORECASE
)


_DATALOADER_RE = re.compile(
    r"DataLoader|dataloader|_MultiProcessingDataLoaderIter|_SingleProcessDataLoaderIter|collate"
)


def _module_loading_hint(trace) -> str:
    """``CUDA_MODULE_LOADING``, named on CUDA devices only."""
    return "" if is_mtia(trace) or is_rocm(trace) else "; CUDA_MODULE_LOADING=EAGER loads modules at start"


def _names_awaited(trace, capture: bool = False) -> str:
    """Where the trace (or a new capture) names the stream an event wait is on."""
    if is_mtia(trace):
        return "MTIA's own `event_wait` records name the awaited stream in their `wait_on_stream` arg"
    if capture:
        return "capture with a recent torch.profiler (its cuda_sync records name the stream an event wait is on)"
    return "a recent torch.profiler names the awaited stream in its cuda_sync records"


def _multi_rank(trace) -> bool:
    ws = trace.source.world_size
    return ws is not None and ws > 1


def _sync_advice(diag: Diagnosis, evidence, name, dur_txt, rows, cliff: bool = True):
    """Advice for a sync gap; ``cliff``: its wait began before the GPU went idle and
    drained the queue (rule 3), else it began inside the gap (the GPU was already idle)."""
    top = [e for e in evidence if e.cause == Cause.SYNC and e.event >= 0 and is_wait(diag.trace, e.event)]
    if not top:
        # name the wait itself, never the host work after it (the cliff's evidence)
        name = None
        w = cliff_wait(diag, int(rows[0])) if cliff else None
        if w is not None:
            top = [Evidence(w, diag.trace.name(w), int(diag.trace.lane[w]), Cause.SYNC, 0)]
    inside = _innermost(diag, top[0].event, Kind.CPU_OP) if top else None
    if inside in ("aten::to", "aten::_to_copy", "aten::copy_"):
        return (
            f"The wait {quote_name(top[0].name)} is inside {quote_name(inside)}: a copy to or from pageable host memory "
            f"waits for the GPU. Pin the host tensor (pin_memory()) and copy with non_blocking=True, or keep "
            f"the data on the device; issue the copy before the work that needs it.",
            "Do not speed up the kernels around the gap: the copy waits for the GPU to drain, and a faster "
            "kernel only makes that wait start sooner.",
            f"On a new capture of the same steps, the idle at this position ({dur_txt}) and the blocking calls "
            f"inside {quote_name(inside)} should be gone.",
        )
    site = _innermost(diag, top[0].event, Kind.PYTHON) if top else None
    name = quote_name(top[0].name) if top else name
    where = f"{name}" + (f" (called from {quote_name(site)})" if site else "") if name else "the host read"
    forbidden = (
        "Do not speed up the kernels around the gap: the GPU is idle because the CPU waited for it to drain "
        "and only then prepared the next launch; a faster kernel only makes that wait start sooner."
        if cliff
        else f"Do not speed up the kernels around the gap: the GPU was already idle when {where} began; that "
        "wait and the host work around it hold the next launch back, so faster kernels only widen the gap's "
        "share of the step."
    )
    keep = (
        "keep the value on the GPU (mask or torch.where instead of a Python branch on it)"
        if program_kind(diag.trace).torch
        else "keep the decision on the device (a flag the next kernel reads, or a predicate inside it)"
    )
    return (
        f"Remove the blocking wait {where} from the loop: {keep}, or collect the values and read them once "
        f"after the loop; time with events recorded on the stream instead of synchronizing. Then launch the "
        f"next work before any host step that must stay.",
        forbidden,
        f"On a new capture of the same steps, the idle at this position ({dur_txt}) and the number of "
        f"blocking calls per step ({name or 'calls that wait for the device'}) should drop to about zero.",
    )


#: A host call of the process group or the communication library itself (torch's
#: ``c10d::allreduce_``, the profiler's ``record_param_comms``, ``nccl:all_to_all``),
#: not any Python function whose name mentions a collective (vLLM's
#: ``symm_mem.py(127): all_reduce`` is the framework's own code).
HOST_COMM_RE = re.compile(r"^(c10d::|record_param_comms\b|nccl:|rccl:|gloo:|mpi:)", re.IGNORECASE)

#: At most this many bytes, a copy's time is its fixed cost per copy, not bandwidth.
SMALL_COPY_BYTES = 4096

#: At least this many short copies (``SHORT_COPY_NS``) holding most of the copy time
#: are advised to be batched: their number costs, not their size.
MANY_COPIES = 4


def _batch_advice(lead, forbidden: str, proof: str) -> tuple[str, str, str]:
    """Many short copies holding most of the copy time: batch them, by kind."""
    kinds = lead.short_kinds
    how = {
        COPY_KIND_WORDS[int(CopyKind.H2D)]: "one pinned flat buffer copied with non_blocking=True, a step ahead",
        COPY_KIND_WORDS[int(CopyKind.D2H)]: "one flat buffer read back once, after the loop",
        COPY_KIND_WORDS[int(CopyKind.D2D)]: "one copy of a flat buffer, or a multi-tensor op (torch._foreach_copy_, a "
        "fused optimizer) instead of one per tensor, or none at all (an in-place op, a preallocated buffer)",
        "memsets": "one zero-fill of a flat buffer, or a preallocated one",
    }
    if len(kinds) == 1:
        (kind,) = kinds
        named = f" {quote_name(lead.big.name)}" if lead.same_name else ""
        head = (
            f"Batch the {lead.short_count} short {kind}{named} ({fmt_dur(lead.short_median_ns)} median each, "
            f"{fmt_dur(lead.short_ns)} in all)"
        )
        use = how.get(kind, "one copy of a flat buffer instead of one per tensor")
        return (
            f"{head}: each this short, their time is the cost per copy, not bandwidth. Use {use}.",
            forbidden,
            proof.replace("the copy should", "the copies should"),
        )
    ranked = sorted(kinds.items(), key=lambda kv: -kv[1][1])
    parts = "; ".join(f"{n} {_one(k) if n == 1 else k}, {fmt_dur(t)}" for k, (n, t) in ranked)
    use = " ".join(
        f"For the {_one(k) if n == 1 else k}, use {how.get(k, 'one copy of a flat buffer')}." for k, (n, _) in ranked
    )
    return (
        f"Batch the {lead.short_count} short copies ({parts}): each this short, their time is the cost per copy, "
        f"not bandwidth. {use}",
        forbidden,
        proof.replace("the copy should", "the copies should"),
    )


def _one(kind_words: str) -> str:
    """ "device-to-host copies" -> "device-to-host copy", "memsets" -> "memset"."""
    return kind_words[: -len("ies")] + "y" if kind_words.endswith("copies") else kind_words.removesuffix("s")


def _dependency_advice(diag: Diagnosis, rows, dur_txt):
    g = diag.gaps
    r = int(rows[0])
    kind = (
        WaitKind(int(g.wait_kind[r])) if g.wait_kind is not None and g.wait_kind[r] >= 0 else WaitKind.NOTHING_RECORDED
    )
    queued = g.queued is not None and bool(g.queued[r])
    forbidden = (
        "Do not optimise the CPU code before the gap or the kernels next to it: the next op was "
        + ("already queued" if queued else "in the queue for most of the gap, waiting on the GPU side")
        + ", so neither held it back."
    )
    proof = f"The same gap ({dur_txt}) on a new capture, with what it waits on named."
    if kind == WaitKind.DISPATCH:
        return (
            "Nothing to do at this gap: it is at the trace's timestamp resolution between queued ops (GPU-side "
            "dispatch). Work on the larger gaps first.",
            "Do not chase it with launch or host changes: the work was already queued.",
            "None needed; the gap will stay at the timestamp resolution.",
        )
    if kind == WaitKind.STREAM_WAIT and g.wait_event is not None:
        w = quote_name(diag.trace.name(int(g.wait_event[r])))
        if other_streams_idle(diag, r) is not None:
            return (
                f"The trace shows no work on any other stream while the op waited behind {w}, so what held the "
                f"event back is not in it: capture the whole GPU (Nsight Systems, or rocprofv3 on ROCm, with every "
                f"process that shares the device) to find the producer; then check which stream records the event "
                f"(wait_stream / wait_event) and whether the wait is needed at all.",
                forbidden,
                proof,
            )
        return (
            f"Find the event {w} waits for: the stream or device that records it and what ran there before it "
            f"({_names_awaited(diag.trace)}). Record the event "
            f"earlier, split the producing work, or drop a wait that is not needed (wait_stream / "
            f"record_stream).",
            forbidden,
            proof,
        )
    if kind == WaitKind.COLLECTIVE:
        record = (
            "Record what the queued op's stream waited on: Nsight Systems (--trace=cuda,nvtx,osrt), or rocprofv3 "
            "--hip-trace on ROCm, shows every stream wait and host callback with the stream it holds (this trace "
            "links none to this op)."
        )
        peers = "every rank" if _multi_rank(diag.trace) else "the job's other devices or ranks"
        first = (
            f"{record} If the collective's own kernel is long, capture {peers} in the same window too: a peer that "
            "arrives late lengthens the others' collective kernels, not the idle before or after them."
        )
        return (first, forbidden, proof)
    if kind == WaitKind.GRAPH:
        trace = diag.trace
        nxt = int(g.next_op[r])
        root = graph_first_node(trace, nxt, int(trace.start_ns[g.launch[r]]) if g.launch[r] >= 0 else None)
        dump = (
            f"with torch, enable_debug_mode() on the torch.cuda.CUDAGraph before the capture and debug_dump(path) "
            f"after it write a DOT file, as {'hipGraphDebugDotPrint' if is_rocm(trace) else 'cudaGraphDebugDotPrint'} "
            f"does; for a graph torch.compile captured, "
            + (
                "rocprofv3 with --kernel-trace shows its kernels in order"
                if is_rocm(trace)
                else "Nsight Systems with --cuda-graph-trace=node shows its nodes in order"
            )
        )
        if root == nxt:  # the next op is the graph's first node
            dep_ns = int(g.class_ns[r, int(Cause.DEPENDENCY)]) if g.class_ns is not None else int(g.dur_ns[r])
            if dep_ns <= GRAPH_START_MAX_NS:
                return (
                    f"Nothing to find inside the graph: the next op is its first node, and this gap is the GPU "
                    f"starting a queued {graph_word(trace)} after the work before it, a fixed cost per launch. "
                    f"Capture the work before it into the same graph, or leave it and work on the larger gaps.",
                    "Do not chase it with launch or host changes: the graph was already queued.",
                    proof,
                )
            return (
                f"Find what the graph waited on before its first node. Dump it ({dump}) and look at its root "
                f"nodes, for an event wait captured at the start; check the other streams for work that ended when "
                f"it began.",
                forbidden,
                proof,
            )
        if root >= 0 and int(trace.start_ns[root]) > int(g.start_ns[r]):  # the graph began inside the gap
            return (
                f"Find what held the queued graph back before its first recorded node "
                f"{quote_name(trace.name(root))}. Dump it ({dump}) and look at its root nodes, for an event wait "
                f"captured at the start, and at what lies between its first nodes; check the other streams for work "
                f"that ended when it began.",
                forbidden,
                proof,
            )
        first = (
            f"Dump the graph to see what lies between the next op and the node before it: {dump}; an event wait, a "
            f"host node or the join of parallel branches shows there."
        )
        if not in_running_graph_launch(diag, r):
            return (first, forbidden, proof)
        call = int(g.launch[r])
        if is_rocm(trace):
            nodes = graph_node_count(trace, int(trace.correlation[nxt])) if nxt >= 0 else 0
            first += (
                f" If nothing does, the time is the runtime submitting the nodes inside "
                f"{quote_name(trace.name(call))} ({nodes} recorded nodes in this launch): time that call alone "
                f"against the nodes' run, and try fewer, larger nodes."
            )
        forbidden = (
            f"Do not optimise the CPU code around the launch or the kernels next to the gap, and do not reach for "
            f"graph capture: the step already runs as a {graph_word(trace)}, and its launch call issued this node."
        )
        return (first, forbidden, proof)
    return (
        f"Find what the queued op waited for: {_names_awaited(diag.trace, capture=True)}; check cross-stream "
        "waits (wait_stream, wait_event), copies or kernels on other devices, and host callbacks."
        + (" Capture every rank in the same window." if _multi_rank(diag.trace) else ""),
        forbidden,
        proof,
    )


def _instrument_hint(trace) -> str:
    """How to see finer CPU work in this kind of trace."""
    if str(trace.source.format).startswith("nsys"):
        return "add NVTX ranges around the suspects (torch.cuda.nvtx.range, nvtx.annotate) or profile with nsys --sample=cpu"
    if (trace.kind == int(Kind.PYTHON)).any():  # with_stack=True is on already
        return (
            "the Python tracer is on already (its frames are recorded), so the time is the frame's own bytecode "
            "or native code it does not trace: sample it with py-spy (py-spy record --native) or wrap the suspects "
            "in torch.profiler.record_function ranges"
        )
    return "capture with with_stack=True or wrap the suspects in torch.profiler.record_function ranges"


def _host_copy_advice(trace, name: str, host_ns: int, hc: HostCopies) -> str:
    """The first experiment for host time inside a tensor copy op that moved data
    between host and device: a round trip (both directions) is kept on the device; a
    copy one way gets the tensor made where it is used, or a pinned, non-blocking host
    side."""

    def moved(n: int, nbytes: int, way: str) -> str:
        size = f" ({fmt_bytes(nbytes)})" if nbytes > 0 else ""
        return f"{n} {way} {'copy' if n == 1 else 'copies'}{size}"

    tensor = tensor_text(trace, hc.call)
    asked = f" under {quote_name(trace.name(hc.asked_by))}" if hc.asked_by >= 0 else ""
    largest = (
        f"; the largest call copies{tensor}{asked}" if tensor else f"; the largest call is{asked}" if asked else ""
    )
    spent = f"the thread spent {fmt_dur(host_ns)} in them on the CPU"
    if hc.d2h and hc.h2d:
        return (
            f"{quote_name(name)} takes the data to the host and back: inside its calls the device ran "
            f"{moved(hc.d2h, hc.d2h_bytes, 'device-to-host')} and {moved(hc.h2d, hc.h2d_bytes, 'host-to-device')}, "
            f"and {spent}. Keep the copy on the device: the largest call copies{tensor or ' a tensor'}{asked} into a new layout "
            f"by way of the host, so give that op its input already in the layout it needs (a contiguous tensor "
            f"made once on the device, a view instead of a reshape of a permuted tensor) or drop the copy; then "
            f"this gap's copies and host time should both go."
        )
    if hc.h2d:
        return (
            f"{quote_name(name)} copies to the device (inside its calls the device ran "
            f"{moved(hc.h2d, hc.h2d_bytes, 'host-to-device')}), and {spent}{largest}. "
            f"Make the tensor on the device (device= where it is created, or once before the loop when it does not "
            f"change); for data that must come from the host, copy it from pinned memory (pin_memory()) with "
            f"non_blocking=True, ahead of its use, so the thread does not stage the copy."
        )
    return (
        f"{quote_name(name)} copies to the host (inside its calls the device ran "
        f"{moved(hc.d2h, hc.d2h_bytes, 'device-to-host')}), and {spent}{largest}. "
        f"Keep the tensor on the device if the step does not need it on the host; where it does, copy into "
        f"pinned memory with non_blocking=True and read it after the step, so the thread does not wait on it."
    )


def capture_sentence(diag: Diagnosis, capture: GapCapture) -> str:
    """What the thread did in an occurrence of a gap it spent capturing a graph
    (``capture``: what ``gap_capture`` gave for it), as sentences: the time inside the
    captures (their launch calls record kernels), and the time entering
    ``torch.cuda.graph`` before the begin call (``GraphCapture.enter_ns``)."""
    trace = diag.trace
    word = graph_word(trace)
    first, n_in, launches = capture.first, capture.capturing, capture.launches
    begin = (
        quote_name(trace.name(first.begin_event))
        if first.begin_event >= 0
        else "the start of the window (it starts inside the capture)"
    )
    end = (
        quote_name(trace.name(first.end_event))
        if first.end_event >= 0
        else "the end of the window (it ends inside the capture)"
    )
    warm_up = capture.capture.warm_up
    out = []
    if capture.capturing_ns:
        calls = (
            f"{'their' if n_in > 1 else 'its'} {launches:,} launch call{'s' if launches != 1 else ''} there added "
            f"kernels to the graph{'s' if n_in > 1 else ''} and ran none of them; the GPU runs them only when the "
            "graph is launched"
            if launches
            else f"{'they' if n_in > 1 else 'it'} recorded no launch call"
        )
        what = f"a {word} (from {begin} to {end})" if n_in == 1 else f"{n_in} {word}s (the first from {begin} to {end})"
        out.append(f"For {fmt_dur(capture.capturing_ns)} of it the thread was capturing {what}: {calls}.")
    if capture.entering_ns:
        out.append(
            f"For {fmt_dur(capture.entering_ns)} {'more ' if capture.capturing_ns else 'of it '}the thread was "
            f"entering `torch.cuda.graph`, which synchronizes the device, empties the caching allocator and then "
            f"calls {begin}: part of the same {'warm-up' if warm_up else 're-capture'}."
        )
    if not warm_up:
        out.append(f"This capture began after a {word} had already been launched: a re-capture.")
    return " ".join(out)


def _capture_advice(diag: Diagnosis, capture: GapCapture, dur_txt: str) -> tuple[str, str, str]:
    """Advice for a gap the thread spent capturing a graph (or entering
    ``torch.cuda.graph`` before the capture, ``GraphCapture.enter_ns``): a warm-up
    capture is a one-time cost; a capture after graphs were launched is a re-capture
    per shape."""
    trace = diag.trace
    cap = capture.capture
    word = graph_word(trace)
    launch = "hipGraphLaunch" if word == "HIP graph" else "cudaGraphLaunch"
    what = (
        f"This is a {word} capture, a one-time cost of warm-up: kernels launched while capturing are recorded, not run."
        if capture.capturing_ns
        else f"This is the entry into a {word} capture (`torch.cuda.graph` synchronizes the device and empties the "
        "caching allocator before it begins capturing), a one-time cost of warm-up."
    )
    if cap.warm_up:
        return (
            f"{what} Profile steps after the capture (start the torch.profiler schedule's active steps after the "
            f"warm-up that captures the graphs) and check that each step then shows a `{launch}` and no capture.",
            f"Do not cut the CPU cost per kernel or capture the step in a {word} for this gap: it is the capture "
            "itself, which the replays skip.",
            f"A capture of steps after the graph capture: a `{launch}` per step, and this idle ({dur_txt}) gone.",
        )
    return (
        f"The {word} is captured again after graphs were already launched: a capture per new input shape or batch "
        "size, or a graph thrown away and recorded anew. Count the captures per step over a longer window; pad inputs "
        "to the sizes already captured (or capture each size once at start) so that steps replay instead of capturing.",
        "Do not tune kernels or the launch path for this gap: no kernel runs while the thread captures.",
        f"Captures per step on a new capture of the same steps: none after warm-up, and this idle ({dur_txt}) gone.",
    )


class Advice(NamedTuple):
    """A card's advice: the first experiment, the forbidden next step, the proof, and
    ``fix``: the first experiment in a few words (a finding's "fix"; ``short_fix`` of
    ``first`` when the rule gives none)."""

    first: str
    forbidden: str
    proof: str
    fix: str = ""


#: Characters of a ``short_fix`` (the first experiment's first sentence, cut at a clause).
SHORT_FIX_CHARS = 160


def short_fix(first: str) -> str:
    """The first experiment ``first`` in a few words: its first sentence, cut at the
    last clause boundary (``;`` or ``,``) before ``SHORT_FIX_CHARS`` characters when
    longer, without the trailing period."""
    head = re.split(r"(?<=[.!?])\s+(?=[A-Z`])", first.strip(), maxsplit=1)[0].rstrip(".")
    if len(head) <= SHORT_FIX_CHARS:
        return head
    cut = max(head.rfind("; ", 0, SHORT_FIX_CHARS), head.rfind(", ", 0, SHORT_FIX_CHARS))
    return head[:cut] if cut > 0 else head[: SHORT_FIX_CHARS - 1].rstrip() + "…"


@dataclasses.dataclass(frozen=True)
class Rule:
    """One piece of advice: when ``when(facts)`` holds (and no rule before it in the
    table did), ``advise(facts)`` gives the card's ``Advice``; ``rationale`` says in
    one line why the advice fits the evidence."""

    name: str
    when: Callable[[Facts], bool]
    advise: Callable[[Facts], Advice]
    rationale: str


@dataclasses.dataclass(frozen=True, eq=False)
class HostFacts:
    """What the host advice of an occurrence is chosen from (``host_facts``): the
    unrecorded host time ``quiet_ns``; host ns per evidence name ``by_name``; the work
    the sentence names first (``lead_name``, ``lead_ns``) read on its largest call
    ``lead`` (the hot frame when there is one); whether that call holds mostly its own
    time (``mostly_own``) and how many launches it encloses (``n_launch``); the
    communication call holding most of the host time (``coll``); the host part's ns
    (``host_ns``); how to see finer CPU work (``hint``); the compile remedy
    (``compile_``)."""

    quiet_ns: int
    by_name: dict[str, int]
    lead_name: str | None
    lead_ns: int
    lead: Evidence | None
    mostly_own: bool
    n_launch: int
    coll: Evidence | None
    host_ns: int
    hint: str
    compile_: str
    enclosing: tuple[int, ...] = ()


def host_facts(f: Facts) -> HostFacts:
    """The ``HostFacts`` of a host occurrence ``f``."""
    diag, trace, rows, evidence = f.diag, f.diag.trace, f.rows, list(f.evidence)
    quiet_ns = sum(e.overlap_ns for e in evidence if e.cause == Cause.HOST and e.event < 0)
    by_name: dict[str, int] = {}
    for e in evidence:
        if e.cause == Cause.HOST and e.event >= 0:
            by_name[e.name] = by_name.get(e.name, 0) + e.overlap_ns
    ranked = sorted(by_name.items(), key=lambda kv: -kv[1])
    lead_name, lead_ns = ranked[0] if ranked else (None, 0)
    # the advice is about the work the sentence names first (by name, all its calls),
    # read on its largest call
    lead = max(
        (e for e in evidence if e.cause == Cause.HOST and e.event >= 0 and e.name == lead_name),
        key=lambda e: e.overlap_ns,
        default=None,
    )
    if f.hot is not None:  # the evidence breaks the host time into fragments of one frame
        lead = Evidence(f.hot.event, f.hot.name, int(trace.lane[f.hot.event]), Cause.HOST, f.hot.ns)
        lead_name, lead_ns = f.hot.name, f.hot.ns
    elif lead is not None:
        lead = _nested_lead(diag, lead, evidence)
        lead_ns = lead.overlap_ns if lead.name != lead_name else lead_ns
    cn = diag.gaps.class_ns
    host_ns = int(np.median(cn[rows, int(Cause.HOST)])) if cn is not None else lead_ns + quiet_ns
    # a collective's host call (``record_param_comms``, ``nccl:all_to_all``) holding most
    # of the named host time: the largest one, as nested calls share their time
    colls = [e for e in evidence if e.cause == Cause.HOST and e.event >= 0 and HOST_COMM_RE.search(e.name)]
    coll = max(colls, key=lambda e: e.overlap_ns, default=None)
    if coll is not None and 2 * coll.overlap_ns < host_ns:
        coll = None
    return HostFacts(
        quiet_ns=quiet_ns,
        by_name=by_name,
        lead_name=lead_name,
        lead_ns=lead_ns,
        lead=lead,
        mostly_own=lead is not None and _mostly_own_time(diag, lead, rows),
        n_launch=launches_inside(trace, lead.event) if lead is not None else 0,
        coll=coll,
        host_ns=host_ns,
        hint=_instrument_hint(trace),
        compile_=(
            "torch.compile" if is_mtia(trace) else f"torch.compile (mode='reduce-overhead' adds {graph_word(trace)}s)"
        ),
        enclosing=enclosing_events(diag, rows),
    )


@dataclasses.dataclass(frozen=True)
class HostRule:
    """One first experiment for host work: when ``when(facts, host)`` holds (and no
    rule before it did), ``first(facts, host)`` is the card's first experiment."""

    name: str
    when: Callable[[Facts, HostFacts], bool]
    first: Callable[[Facts, HostFacts], str]
    rationale: str
    #: the first experiment in a few words (``Advice.fix``)
    fix: str = ""


def _quiet_first(f: Facts, h: HostFacts) -> str:
    return (
        f"Find out what the CPU does for the {quiet_text(f.diag, f.rows, h.quiet_ns)}: {h.hint}, then take that "
        f"work off the critical path (after the step, every N steps, or another thread) and launch the next GPU "
        f"work before it."
    )


def _alloc_first(f: Facts, h: HostFacts) -> str:
    what = f"({quote_name(h.lead_name or '')}, {fmt_dur(h.lead_ns)})"
    if not f.program.torch:
        return (
            f"The thread is allocating or freeing device memory {what} in every step: allocate the buffers once "
            "and reuse them (a memory pool: cudaMallocAsync from a pool with a release threshold, or your own), "
            "not per step."
        )
    return (
        f"The thread is allocating or freeing device memory {what}: let the caching allocator keep its blocks "
        "(no torch.cuda.empty_cache() in the loop, stable tensor shapes, "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; with PYTORCH_NO_CUDA_MEMORY_CACHING or "
        "PYTORCH_NO_HIP_MEMORY_CACHING set, unset it) or preallocate the buffers once."
    )


def _host_copy_when(f: Facts, h: HostFacts) -> bool:
    return (
        h.lead_name is not None
        and bool(TENSOR_COPY_RE.search(h.lead_name))
        and host_copies(f.diag, int(f.rows[0]), h.lead_name) is not None
    )


def _host_copy_first(f: Facts, h: HostFacts) -> str:
    name = h.lead_name or ""
    hc = host_copies(f.diag, int(f.rows[0]), name)
    assert hc is not None  # _host_copy_when held
    # nested calls of the name are summed once by the sentence's items; calls that
    # overlap without nesting would add up past the gap: at most the host part
    return _host_copy_advice(f.diag.trace, name, min(h.by_name.get(name, h.lead_ns), h.host_ns), hc)


def _dataloader_first(f: Facts, h: HostFacts) -> str:
    name = h.lead_name or ""
    parallel = (
        # the iterator is already multiprocess: its workers do not keep up
        "more loading workers (a larger num_workers; persistent_workers=True), cheaper per-sample work in "
        "the dataset's __getitem__ and transforms"
        if "MultiProcessing" in name
        else "load in parallel (DataLoader num_workers > 0, persistent_workers=True)"
    )
    return (
        f"The step waits for the next batch in {quote_name(name)}: {parallel}, pin_memory=True, and "
        f"prefetch (prefetch_factor) so a batch is ready when the GPU finishes."
    )


#: TorchDynamo's per-call guard check before a compiled frame runs (its record_function
#: range; not ``eval_frame.py``'s wrappers, which enclose the whole compiled call).
DYNAMO_RE = re.compile(r"TorchDynamo Cache Lookup", re.IGNORECASE)
#: The optimizer's step (``Optimizer.step#AdamW.step``, the per-tensor loops of a non-fused optimizer).
OPTIMIZER_RE = re.compile(r"^Optimizer\.step#|^optimizer\.step|_single_tensor_adamw?\b|_multi_tensor_adamw?\b")
#: The autograd engine's entry, before the first backward node runs.
#: Only before its first node (``autograd::engine::evaluate_function: XBackward0``,
#: told by its own rule) is it start-up.
AUTOGRAD_ENGINE_RE = re.compile(r"_engine_run_backward|^torch/autograd/__init__\.py\(\d+\): backward$")
AUTOGRAD_NODE_CALL_RE = re.compile(r"^autograd::engine::evaluate_function")


def _dynamo_first(f: Facts, h: HostFacts) -> str:
    name, ns = _framework_name(f, h, DYNAMO_RE)
    return (
        f"{quote_name(name)} holds {fmt_dur(ns)} of the gap: TorchDynamo checks the guards of "
        f"the compiled frame on every call. Make that check cheaper: fewer guards (fewer Python objects and "
        f"globals read by the compiled code; torch.compiler.set_stance or torch._dynamo.config settings for "
        f"guards), static shapes (torch._dynamo.mark_static on inputs whose size does not change), or compile "
        f"with mode='reduce-overhead' so a {graph_word(f.diag.trace)} replays the step."
    )


def _optimizer_first(f: Facts, h: HostFacts) -> str:
    name, ns = _framework_name(f, h, OPTIMIZER_RE)
    return (
        f"{quote_name(name)} holds {fmt_dur(ns)} of the gap: the optimizer steps each "
        f"parameter with its own small kernels. Use the fused or foreach implementation (AdamW(fused=True), or "
        f"foreach=True), or compile the step (torch.compile of the optimizer step), so a few large kernels "
        f"replace many small launches."
    )


def _autograd_engine_first(f: Facts, h: HostFacts) -> str:
    name, ns = _framework_name(f, h, AUTOGRAD_ENGINE_RE)
    return (
        f"{quote_name(name)} holds {fmt_dur(ns)} of the gap: the autograd engine starting the "
        f"backward pass (building its ready queue, handing the work to the device thread) before the first "
        f"backward kernel. Queue GPU work ahead of it (start the next forward's data copy, or overlap the "
        f"backward of one micro-batch with the forward of the next), or compile forward and backward together "
        f"({h.compile_}) so the engine runs fewer, larger nodes."
    )


def _coll_first(f: Facts, h: HostFacts) -> str:
    c = h.coll
    assert c is not None
    return (
        f"Most of this host time is inside the communication call {quote_name(c.name)} "
        f"({fmt_dur(c.overlap_ns)}): the process group's host-side work before the collective is queued, "
        f"not the per-kernel launch tax. Time that call alone (a loop of the same collective with the same "
        f"sizes) to see its fixed host cost, and give the GPU work meanwhile: issue the collective earlier "
        f"with async_op=True and wait() just before its result is used, with independent kernels queued "
        f"ahead of it."
    )


def _ddp_first(f: Facts, h: HostFacts) -> str:
    ddp = ddp_buffer_sync(f.diag, int(f.rows[0]))
    assert ddp is not None
    return _ddp_advice(f.diag.trace, ddp)


def _triton_when(f: Facts, h: HostFacts) -> bool:
    if h.lead is None:
        return False
    launcher = triton_launcher_around(f.diag.trace, h.lead.event)
    return launcher >= 0 and launches_inside(f.diag.trace, launcher) > 0


def _triton_first(f: Facts, h: HostFacts) -> str:
    assert h.lead is not None
    return _triton_advice(f.diag.trace, h.lead, triton_launcher_around(f.diag.trace, h.lead.event), h.compile_)


def _waiting_first(f: Facts, h: HostFacts) -> str:
    assert h.lead is not None
    other = _meanwhile(f.diag, h.lead, f.rows)
    return (
        f"{quote_name(h.lead.name)} holds {fmt_dur(h.lead_ns)} of the gap with almost no finer event recorded on "
        f"this thread, while {other}: the thread is likely waiting for that work. Look there first: cut that "
        f"work or overlap it with GPU work; for the waiting thread itself, {h.hint}."
    )


def _own_time_first(f: Facts, h: HostFacts) -> str:
    assert h.lead is not None
    return (
        f"Find out what the CPU does inside {quote_name(h.lead.name)} ({fmt_dur(h.lead_ns)} of the gap, "
        f"almost none of it in a finer recorded event): {h.hint}; then cut that work or move it off the "
        f"critical path."
    )


def _own_work_when(f: Facts, h: HostFacts) -> bool:
    return (
        h.lead is not None
        and h.n_launch > 0
        and _own_cpu_ns(f.diag, h.lead.event) >= OWN_WORK_NS_PER_LAUNCH * h.n_launch
    )


def _own_work_first(f: Facts, h: HostFacts) -> str:
    assert h.lead is not None
    trace, n_launch = f.diag.trace, h.n_launch
    own = _own_cpu_ns(f.diag, h.lead.event)
    dur = int(trace.dur_ns[h.lead.event])
    calls = "one launch call" if n_launch == 1 else f"{n_launch} launch calls"
    per = "" if n_launch == 1 else f", {fmt_dur(own // n_launch)} per launch"
    return (
        f"{quote_name(h.lead.name)} issues GPU work itself, but it holds only {calls} in all its {fmt_dur(dur)}, "
        f"{fmt_dur(own)} of which is CPU work outside runtime calls{per}: its own work, not the per-kernel cost "
        f"of issuing kernels. Find what it does between its launches (the events inside it, or a profile "
        f"with stacks), cut that work, or queue independent GPU work ahead of it so the GPU has something "
        f"to run meanwhile."
    )


def _issuing_first(f: Facts, h: HostFacts) -> str:
    assert h.lead is not None
    trace, lead = f.diag.trace, h.lead
    why = (
        ", and every launch here waits for its kernel (below)"
        if synchronous_launches(trace) is not None
        else ": the CPU takes longer to issue the work than the GPU to run it"
    )
    own_replay = graph_launch_inside(trace, lead.event)
    if own_replay >= 0:
        return (
            f"{quote_name(lead.name)} is the {graph_word(trace)} replay itself: it launches the graph with "
            f"{quote_name(trace.name(own_replay))}, and the host time here is the replay's own work before that "
            f"launch, a fixed cost per replay. Replay less often, with more work per graph (a larger batch, or "
            f"more steps captured in one graph), and keep other Python out of the replay path."
        )
    replays, graph_call = graph_launches_on(trace, int(trace.lane[lead.event]))
    if replays:
        return (
            f"{quote_name(lead.name)} issues GPU work itself (it encloses launch calls){why}. This thread replays "
            f"{graph_word(trace)}s ({replays:,} {quote_name(trace.name(graph_call))} call{'' if replays == 1 else 's'}), "
            f"and this work launches eagerly, outside them: capture it into the graph with the rest, or cut its CPU "
            f"cost per kernel (fewer and larger ops) and keep Python work such as logging and checks out of the step."
        )
    return (
        f"{quote_name(lead.name)} issues GPU work itself (it encloses launch calls){why}. Cut the CPU cost "
        f"per kernel: {h.compile_}, fewer and larger ops (fuse, batch more per step), and "
        f"keep Python work such as logging and checks out of the step."
    )


def _autograd_node_first(f: Facts, h: HostFacts) -> str:
    assert h.lead is not None
    node = AUTOGRAD_NODE_RE.fullmatch(h.lead.name)
    assert node is not None
    # a backward node whose time is in the calls it makes, launching none (one holding
    # its own time, or issuing kernels, is told by the rules above)
    return _autograd_advice(f.diag.trace, h.lead, node.group(1), h.compile_)


def _hot_first(f: Facts, h: HostFacts) -> str:
    hot = f.hot
    assert hot is not None
    calls = "" if hot.calls == 1 else f" ({hot.calls:,} calls)"
    return (
        f"{quote_name(hot.name)}{calls} holds {fmt_dur(hot.ns)} of the gap{hot_inner_text(hot)}"
        f"{', and launches no GPU work' if hot.calls == 1 else ''}: "
        f"cut it (compute its result once and reuse it, not on every call) or take it off the critical path "
        f"(after the step, or in another thread), and launch the next GPU work before it so the two overlap."
    )


def _generic_first(f: Facts, h: HostFacts) -> str:
    what = quote_name(h.lead_name) if h.lead_name else "the CPU work between launches"
    return (
        f"Take {what} off the critical path: run it after the step, every N steps, or in another "
        f"thread/process, and launch the next GPU work before doing it so the two overlap."
    )


def _named(pattern: re.Pattern[str]) -> Callable[[Facts, HostFacts], bool]:
    """``when``: the lead work's name matches ``pattern``."""
    return lambda f, h: h.lead_name is not None and bool(pattern.search(h.lead_name))


def _framework(pattern: re.Pattern[str]) -> Callable[[Facts, HostFacts], bool]:
    """``when``: the lead work, or a range enclosing most of the occurrence, matches
    ``pattern`` (the ops a framework range runs are named first by the evidence)."""
    return lambda f, h: (
        bool(pattern.search(h.lead_name or "")) or any(bool(pattern.search(f.diag.trace.name(e))) for e in h.enclosing)
    )


def _framework_name(f: Facts, h: HostFacts, pattern: re.Pattern[str]) -> tuple[str, int]:
    """The name matching ``pattern`` (the lead's, else the enclosing range's) and the
    host ns it is told with."""
    if h.lead_name is not None and pattern.search(h.lead_name):
        return h.lead_name, h.lead_ns
    names = [f.diag.trace.name(e) for e in h.enclosing]
    return next(n for n in names if pattern.search(n)), h.host_ns


def _autograd_start_when(f: Facts, h: HostFacts) -> bool:
    """The occurrence lies inside the autograd engine's entry (``AUTOGRAD_ENGINE_RE``)
    before its first node ran on the thread (``AUTOGRAD_NODE_CALL_RE``)."""
    trace = f.diag.trace
    entry = [e for e in h.enclosing if AUTOGRAD_ENGINE_RE.search(trace.name(e))]
    if not entry:
        return False
    lane = int(trace.lane[entry[0]])
    sl = trace.lane_slice(lane)
    st = trace.start_ns[sl]
    lo, hi = int(trace.start_ns[entry[0]]), int(f.diag.gaps.end_ns[f.rows].max())
    ids = trace.name_ids_matching(lambda s: bool(AUTOGRAD_NODE_CALL_RE.search(s)))
    inside = (st >= lo) & (st < hi) & np.isin(trace.name_id[sl], ids)
    return not bool(inside.any())


#: The host table, first match wins (the generic rule last).
HOST_RULES: tuple[HostRule, ...] = (
    HostRule(
        "unrecorded host time",
        lambda f, h: h.quiet_ns > h.lead_ns,
        _quiet_first,
        "most host time has no event: first find out what it is",
        "find the untraced host work (with_stack=True or record_function ranges), then move it off the critical path",
    ),
    HostRule(
        "allocator",
        _named(_ALLOC_RE),
        _alloc_first,
        "allocator calls in a recurring gap are a steady-state cost: keep the blocks cached",
        "keep the caching allocator's blocks (no empty_cache in the loop, stable shapes) or preallocate the buffers once",
    ),
    HostRule(
        "host tensor copy",
        _host_copy_when,
        _host_copy_first,
        "a tensor copy op that moved data to or from the host: keep it on the device",
        "make the tensor on the device (pinned memory and non_blocking where a copy must stay)",
    ),
    HostRule(
        "DataLoader",
        _named(_DATALOADER_RE),
        _dataloader_first,
        "the main process waits for a batch: load in parallel and prefetch",
        "load batches in parallel and prefetch (num_workers, pin_memory, prefetch_factor)",
    ),
    HostRule(
        "TorchDynamo guards",
        _framework(DYNAMO_RE),
        _dynamo_first,
        "Dynamo's guard check runs on every call: fewer guards, static shapes or a replayed graph, not another thread",
        "make Dynamo's guard check cheaper (fewer guards, static shapes) or replay a graph (mode='reduce-overhead')",
    ),
    HostRule(
        "optimizer step",
        _framework(OPTIMIZER_RE),
        _optimizer_first,
        "a per-parameter optimizer launches many small kernels: the fused or foreach optimizer",
        "use the fused or foreach optimizer (fused=True, foreach=True) or compile the optimizer step",
    ),
    HostRule(
        "autograd engine start-up",
        _autograd_start_when,
        _autograd_engine_first,
        "the engine's start before the first backward kernel: queue work ahead or compile forward and backward",
        "queue GPU work ahead of the backward's start, or compile forward and backward together",
    ),
    HostRule(
        "communication call",
        lambda f, h: h.coll is not None,
        _coll_first,
        "the process group's host work before a collective: issue it earlier, asynchronously",
        "issue the collective earlier with async_op=True and wait() just before its result is used",
    ),
    HostRule(
        "DDP buffer sync",
        lambda f, h: ddp_buffer_sync(f.diag, int(f.rows[0])) is not None,
        _ddp_first,
        "DDP broadcasts buffers every step: broadcast_buffers=False where they do not change",
        "DDP(broadcast_buffers=False) where the buffers need not match across ranks every step",
    ),
    HostRule(
        "Triton launcher",
        _triton_when,
        _triton_first,
        "the Triton launcher's Python cost per kernel",
        "cut the Triton launcher's Python cost per kernel (fewer, larger kernels; a replayed graph)",
    ),
    HostRule(
        "waiting for another thread",
        lambda f, h: h.lead is not None and h.mostly_own and bool(_meanwhile(f.diag, h.lead, f.rows)),
        _waiting_first,
        "a call holding its own time while another thread works is likely waiting for it",
        "cut or overlap the work on the other thread this one waits for",
    ),
    HostRule(
        "own time",
        lambda f, h: h.lead is not None and h.mostly_own,
        _own_time_first,
        "a call with no finer event: find what it does before moving it",
        "find what the CPU does inside the range (with_stack=True), then cut it or move it off the critical path",
    ),
    HostRule(
        "own work between launches",
        _own_work_when,
        _own_work_first,
        "the call issues few kernels but works much between them: its own work is the cost",
        "cut the range's own CPU work between its launches, or queue independent GPU work ahead of it",
    ),
    HostRule(
        "issuing GPU work",
        lambda f, h: h.lead is not None and h.n_launch > 0,
        _issuing_first,
        "the call issues the kernels itself: cut the CPU cost per kernel",
        "cut the CPU cost per kernel: torch.compile or a CUDA graph, fewer and larger ops",
    ),
    HostRule(
        "autograd node",
        lambda f, h: h.lead is not None and AUTOGRAD_NODE_RE.fullmatch(h.lead.name) is not None,
        _autograd_node_first,
        "a backward node's time in the calls it makes: the backward's own cost",
        "cut the backward's own host cost: compile forward and backward together (torch.compile)",
    ),
    HostRule(
        "hot frame",
        lambda f, h: f.hot is not None,
        _hot_first,
        "one frame holds the fragmented host time: cut or move it",
        "cut the hot frame (compute its result once) or move it off the critical path",
    ),
    HostRule(
        "host work",
        lambda f, h: True,
        _generic_first,
        "host work the GPU waited for: take it off the path",
        "take it off the critical path (after the step, or another thread) and launch the next GPU work first",
    ),
)


def _host_advice(f: Facts) -> Advice:
    """Advice for a host occurrence: the first experiment of the first ``HOST_RULES``
    rule that holds, the forbidden step (no library settings or faster kernel: the GPU
    had nothing queued), and the note on synchronous launches where the trace has them."""
    diag, trace = f.diag, f.diag.trace
    h = host_facts(f)
    rule = next(r for r in HOST_RULES if r.when(f, h))
    first = rule.first(f, h)
    libs = (
        "math-library settings"
        if is_mtia(trace)
        else "rocBLAS/hipBLASLt settings"
        if is_rocm(trace)
        else "cuBLAS settings"
    )
    # the trust note says whether the next op was queued is unknown (no linked launch, or
    # clocks that disagree on it): do not claim it
    unsure = bool(trust_bits(diag, f.rows) & (Trust.UNLINKED | Trust.CLOCKS))
    forbidden = (
        f"Do not reach for {libs} or a faster kernel: no kernel ran in this idle, so a faster one "
        "cannot shorten it; it only widens this gap's share of the step."
        if unsure
        else f"Do not reach for {libs} or a faster kernel: the GPU has nothing queued while the CPU "
        "is busy, so faster kernels only widen this gap's share of the step."
    )
    sync = synchronous_launches(trace)
    if sync is not None:
        first += (
            f" As captured, the launch calls return only after their kernel has run ({sync[0]:,} of the {sync[1]:,} "
            f"launches of kernels of {fmt_dur(SYNC_LAUNCH_MIN_KERNEL_NS)} or more), so no host work overlaps a "
            f"kernel: any overlap needs asynchronous launches first (CUDA_LAUNCH_BLOCKING unset, or the runtime's "
            f"own asynchronous mode); until then only less host work, or fewer launches, shortens this idle."
        )
    return Advice(
        first,
        forbidden,
        f"Idle at this position ({f.dur_txt}) and step time{' and tokens/s' if is_decode_trace(diag) else ''} on a new "
        f"capture with the same ranges named.",
        rule.fix,
    )


@dataclasses.dataclass(frozen=True, eq=False)
class CopyFacts:
    """What the copy advice of an occurrence is chosen from (``copy_facts``): the copy
    lead (``card.copies.copy_lead``) and its largest copy ``big``, quoted as ``what`` with
    ``detail`` (bytes, pageable side); its copy kind ``ck`` (``CopyKind`` int, -1 when
    not a GPU copy); whether it is a memset; whether it moves data to or from the host;
    ``n``: how many copies the advice is about; ``pinned``: Kineto names it pinned."""

    lead: CopyLead | None
    big: Evidence | None
    what: str
    detail: str
    ck: int
    is_memset: bool
    host_side: bool
    n: int
    pinned: bool


def copy_facts(f: Facts) -> CopyFacts:
    """The ``CopyFacts`` of a copy occurrence ``f``."""
    diag, trace = f.diag, f.diag.trace
    lead = copy_lead(diag, f.rows, list(f.evidence))
    big = lead.big if lead is not None else None
    bits = []
    if big is not None and big.bytes >= 0:
        bits.append(fmt_bytes(big.bytes))
    if big is not None and big.pageable:
        to_host = big.event >= 0 and int(trace.copy_kind[big.event]) == int(CopyKind.D2H)
        bits.append(f"{'to' if to_host else 'from'} pageable host memory")
    on_gpu = big is not None and big.event >= 0 and trace.lanes[big.lane].is_gpu
    n = 1  # how many copies the advice is about: all of one name and length, or those like the largest
    if lead is not None:
        n = lead.count if lead.same_name and lead.uniform else lead.like_big
    return CopyFacts(
        lead=lead,
        big=big,
        what=quote_name(big.name) if big else "the copy",
        detail=f" ({', '.join(bits)})" if bits else "",
        ck=int(trace.copy_kind[big.event]) if on_gpu and big is not None else -1,
        is_memset=big is not None and big.event >= 0 and trace.kind[big.event] == int(Kind.MEMSET),
        host_side=big is not None
        and big.event >= 0
        and int(trace.copy_kind[big.event]) in (int(CopyKind.H2D), int(CopyKind.D2H)),
        n=n,
        pinned=big is not None and "pinned" in big.name.lower(),  # Kineto: "Memcpy HtoD (Pinned -> Device)"
    )


@dataclasses.dataclass(frozen=True)
class CopyRule:
    """One first experiment for a copy: when ``when(facts, copy)`` holds (and no rule
    before it did), ``first(facts, copy)`` is the card's first experiment."""

    name: str
    when: Callable[[Facts, CopyFacts], bool]
    first: Callable[[Facts, CopyFacts], str]
    rationale: str


#: A library whose calls issue their own memsets and copies (workspace zero-fills).
LIBRARY_RE = re.compile(r"^(cudnn|miopen|cublas|hipblas|rocblas|cublasLt|hipblaslt)", re.IGNORECASE)


def library_issuer(trace, ev: int) -> str | None:
    """The library call (``LIBRARY_RE``) that issued GPU op ``ev``: its runtime call
    (by flow) or a CPU event enclosing that call on its thread; else None."""
    src = trace.flow_src[trace.flow_dst == ev]
    for s in src.tolist():
        if LIBRARY_RE.search(trace.name(s)):
            return trace.name(s)
        sl = trace.lane_slice(int(trace.lane[s]))
        st, en = trace.start_ns[sl], trace.start_ns[sl] + trace.dur_ns[sl]
        t = int(trace.start_ns[s])
        for k in np.flatnonzero((st <= t) & (en > t)).tolist():
            name = trace.name(int(sl.start + k))
            if LIBRARY_RE.search(name):
                return name
    return None


def _call_wait_first(f: Facts, c: CopyFacts) -> str:
    assert c.lead is not None and c.lead.call is not None
    return (
        f"The thread waited inside the copy call {quote_name(c.lead.call.name)} longer than the GPU copied "
        f"({fmt_dur(c.lead.outside_ns)} of the copy time outside the GPU's copies): a synchronous or pageable "
        f"copy. " + _host_copy_fix(f)
    )


def _host_copy_fix(f: Facts) -> str:
    """How to make a host copy call return at once, in the program's vocabulary."""
    if f.program.platform == "mtia":
        return "Keep the data on the device, or move it in fewer, larger transfers issued ahead of their use."
    if not f.program.torch:
        return (
            "Copy from page-locked host memory (cudaHostAlloc / cudaHostRegister) with cudaMemcpyAsync so the "
            "call returns at once, or keep the data on the device."
        )
    return "Use pinned host memory and non_blocking=True so the call returns at once, or keep the data on the device."


def _bucket_first(f: Facts, c: CopyFacts) -> str:
    bucket = bucket_copies(f.diag, f.rows, MANY_COPIES)
    assert bucket is not None
    n_copies, frame = bucket
    return (
        f"These are DDP's copies of the reduced gradient buckets back into each parameter's .grad ({n_copies:,} "
        f"copies issued inside {quote_name(f.diag.trace.name(frame))}): construct DDP with "
        f"gradient_as_bucket_view=True, so the gradients are views of the buckets and the copies go."
    )


def _library_memset_first(f: Facts, c: CopyFacts) -> str:
    assert c.big is not None
    lib = library_issuer(f.diag.trace, c.big.event)
    return (
        f"The memset {c.what}{c.detail} is issued by the library call {quote_name(lib or '')} itself (its "
        f"workspace or output zero-fill), not by your code: try another algorithm for that op (for cuDNN, "
        f"torch.backends.cudnn.benchmark=True picks the fastest; for MIOpen, MIOPEN_FIND_MODE), or a layout or "
        f"shape the library handles without it."
    )


def _fuse_first(f: Facts, c: CopyFacts) -> str:
    lead, big, n = c.lead, c.big, c.n
    noun = (
        ("memsets" if c.is_memset else "device-to-device copies")
        if n > 1
        else ("memset" if c.is_memset else "device-to-device copy")
    )
    largest = " largest" if lead is not None and 1 < n < lead.count else ""
    which = f"{n}{largest} {noun} {c.what}" if n > 1 else f"{noun} {c.what}"
    size = c.detail
    if n > 1 and big is not None and big.bytes >= 0 and lead is not None:
        same = lead.same_bytes if n == lead.count else lead.like_big_range[1] == lead.like_big_range[2] >= 0
        size = f" ({fmt_bytes(big.bytes)} each)" if same else f" (up to {fmt_bytes(big.bytes)})"
    small = ""
    if big is not None and 0 <= big.bytes <= SMALL_COPY_BYTES:
        small = (
            f"; at {fmt_bytes(big.bytes)} "
            + ("their time is the cost per copy" if n > 1 else "its time is the cost of one copy")
            + ", not bandwidth"
        )
    if c.is_memset:
        why = "the GPU writing a constant (a zero-fill" + (
            " such as torch.zeros or .zero_()" if f.program.torch else ""
        )
        why += " between kernels)"
    else:
        why = (
            "the GPU moving data it already has ("
            + ("a .contiguous(), clone, dtype cast" if f.program.torch else "a copy or layout change")
            + " between kernels)"
        )
    return (
        f"Fuse or remove the {which}{size}: {'they are' if n > 1 else 'it is'} {why}{small}; an in-place op, a "
        f"fused kernel or a preallocated buffer avoids {'them' if n > 1 else 'it'}."
    )


def _pinned_late_first(f: Facts, c: CopyFacts) -> str:
    assert c.big is not None
    # already pinned and asynchronous, under kernels until the GPU ran out of them
    # (extrap/con_kernel #3: a 40 MB cudaMemcpyAsync overlapped `test4` on another
    # stream and ran 2.68 ms past it, and the card advised pinned memory)
    return (
        f"{c.what}{c.detail} is already pinned and asynchronous, and it ran under kernels until the GPU ran out "
        f"of them: its last {fmt_dur(c.big.overlap_ns)} are this gap. Copy in chunks, each as soon as its part of "
        f"the data is ready, start the copy earlier, or copy less (keep on the device what does not need to "
        f"move)."
    )


def _h2d_first(f: Facts, c: CopyFacts) -> str:
    if f.program.platform == "mtia":
        how = "move it in fewer, larger transfers issued ahead of their use (the DMA engine copies while kernels run)"
    elif not f.program.torch:
        how = (
            "issue it with cudaMemcpyAsync on a stream of its own a step ahead, so kernels run while it copies"
            if c.pinned
            else "page-locked host memory (cudaHostAlloc) and cudaMemcpyAsync on a stream of its own, a step ahead"
        )
    elif c.pinned:
        how = "issue it with non_blocking=True a step ahead (prefetch) on a side stream, so kernels run while it copies"
    else:
        how = "pinned host memory (pin_memory=True) and non_blocking=True, issued a step ahead (prefetch)"
    return f"Make {c.what}{c.detail} overlap compute: {how}, or keep the data on the device."


def _call_first(f: Facts, c: CopyFacts) -> str:
    return (
        f"The thread waited inside the copy call {c.what}{c.detail}: a synchronous or pageable copy. "
        + _host_copy_fix(f)
    )


def _p2p_first(f: Facts, c: CopyFacts) -> str:
    return (
        f"Overlap the peer-to-peer copy {c.what}{c.detail} with compute: issue it on a stream of its own ahead of "
        f"its use (non_blocking=True), or keep the data on the device that uses it."
    )


def _h2h_first(f: Facts, c: CopyFacts) -> str:
    return (
        f"{c.what}{c.detail} copies host to host, ordered on the GPU's stream by the runtime: copy on the host "
        f"without the runtime (or not at all), so the stream does not wait for it."
    )


def _keep_first(f: Facts, c: CopyFacts) -> str:
    if f.program.platform == "mtia":
        return (
            f"Keep the data on the device so {c.what}{c.detail} is not needed, or move it in fewer, larger transfers."
        )
    if not f.program.torch:
        return (
            f"Keep the data on the device so {c.what}{c.detail} is not needed; where a copy must stay, copy from "
            f"page-locked host memory with cudaMemcpyAsync so it overlaps compute."
        )
    return (
        f"Keep the data on the device so {c.what}{c.detail} is not needed (drop the .cpu()/numpy round trip); "
        f"where a copy must stay, use pinned host memory and non_blocking=True so it overlaps compute."
    )


#: The copy table, first match wins (the generic rule last).
COPY_RULES: tuple[CopyRule, ...] = (
    CopyRule(
        "waited in the copy call",
        lambda f, c: (
            c.lead is not None and c.lead.call is not None and c.lead.outside_ns > c.lead.total_ns and c.host_side
        ),
        _call_wait_first,
        "the thread's copy call outlasted the GPU's copies: a synchronous or pageable copy",
    ),
    CopyRule(
        "DDP gradient buckets",
        lambda f, c: bucket_copies(f.diag, f.rows, MANY_COPIES) is not None,
        _bucket_first,
        "DDP copies buckets back into .grad: gradient_as_bucket_view removes them",
    ),
    CopyRule(
        "many short copies",
        lambda f, c: c.lead is not None and c.lead.short_count >= MANY_COPIES and c.lead.mostly_short,
        lambda f, c: "",  # _copy_advice takes _batch_advice whole
        "short copies cost per copy, not bandwidth: batch them",
    ),
    CopyRule(
        "library memset",
        lambda f, c: c.is_memset and c.big is not None and library_issuer(f.diag.trace, c.big.event) is not None,
        _library_memset_first,
        "a memset issued by cuDNN/MIOpen/cuBLAS is the library's: not the user's zero-fill",
    ),
    CopyRule(
        "memset or device-to-device copy",
        lambda f, c: c.is_memset or c.ck == int(CopyKind.D2D),
        _fuse_first,
        "the GPU writing a constant or moving data it has: fuse or remove it",
    ),
    CopyRule(
        "already pinned, ran late",
        lambda f, c: (
            c.big is not None
            and c.ck in (int(CopyKind.H2D), int(CopyKind.D2H))
            and c.pinned
            and int(f.diag.trace.start_ns[c.big.event]) < int(f.diag.gaps.start_ns[int(f.rows[0])])
        ),
        _pinned_late_first,
        "a pinned asynchronous copy that outran the kernels: start it earlier or copy less",
    ),
    CopyRule("host to device", lambda f, c: c.ck == int(CopyKind.H2D), _h2d_first, "overlap the upload with compute"),
    CopyRule(
        "copy call on the thread",
        lambda f, c: c.big is not None and not f.diag.trace.lanes[c.big.lane].is_gpu,
        _call_first,
        "the thread waited in a copy call: make it asynchronous",
    ),
    CopyRule("peer to peer", lambda f, c: c.ck == int(CopyKind.P2P), _p2p_first, "overlap the peer copy"),
    CopyRule("host to host", lambda f, c: c.ck == int(CopyKind.H2H), _h2h_first, "a host copy ordered on the stream"),
    CopyRule("copy", lambda f, c: True, _keep_first, "keep the data on the device"),
)


def _copy_advice(f: Facts) -> Advice:
    """Advice for a copy occurrence: the first ``COPY_RULES`` rule that holds (many
    short copies: ``_batch_advice``), with the copy's forbidden step and proof."""
    c = copy_facts(f)
    proof = (
        f"Exposed copy time per step (memcpy outside kernels) and the idle at this position ({f.dur_txt}) "
        f"on a new capture; the copy should vanish or run under a kernel."
    )
    forbidden = "Do not optimise the kernels: the GPU waits for data to move, not for compute."
    rule = next(r for r in COPY_RULES if r.when(f, c))
    if rule.name == "many short copies":
        assert c.lead is not None
        return Advice(*_batch_advice(c.lead, forbidden, proof))
    return Advice(rule.first(f, c), forbidden, proof)


def _one_time_advice(f: Facts) -> Advice:
    return Advice(
        "This is a one-time cost (warm-up: allocator growth, module or lazy loading, handle creation, a "
        "first-use launch): warm up before profiling (run a few steps first"
        + _module_loading_hint(f.diag.trace)
        + ") and capture a steady-state window.",
        "Do not optimise the steady-state loop for it: it happens once and is not in later steps.",
        f"A capture of warmed-up steps: this idle ({f.dur_txt}) should be gone.",
        "warm up before profiling (run a few steps first), then capture a steady-state window",
    )


def _module_loading_advice(f: Facts) -> Advice:
    trace = f.diag.trace
    eager = "" if f.program.platform != "cuda" else " (CUDA_MODULE_LOADING=EAGER loads every module at start)"
    return Advice(
        f"The work holding this gap loaded GPU code at a function's first call ({fmt_dur(f.lazy_loading_ns)} of "
        f"lazy module loading recorded in it; the rest of such a first call is its own set-up: library "
        f"heuristics, handles, JIT compilation): a one-time cost. Warm up before profiling: run a few steps first{eager}, then capture a "
        f"steady-state window.",
        f"Do not profile the host code around it or capture {graph_word(trace)}s for it: the driver was loading a "
        "module, which happens once per function.",
        f"A capture of warmed-up steps: this idle ({f.dur_txt}) should be gone.",
        "warm up before profiling (run a few steps first), then capture a steady-state window",
    )


def _slow_first_launch_advice(f: Facts) -> Advice:
    trace = f.diag.trace
    top = f.top
    return Advice(
        f"Find why the launch call {quote_name(top[0].name)} took {fmt_dur(top[0].overlap_ns)}: a single call that "
        f"long is first-use cost ({'' if is_mtia(trace) or is_rocm(trace) else 'CUDA '}module loading, JIT "
        f"compilation, autotuning, memory allocation), not the per-kernel tax. Warm up before profiling (run a few "
        f"steps first" + _module_loading_hint(trace) + ") and compare a steady-state step.",
        f"Do not capture {graph_word(trace)}s or fuse ops for this gap: one slow call, not many small launches, "
        "left the GPU idle.",
        f"The same position on a capture of warmed-up steps: the idle ({f.dur_txt}) should be gone.",
    )


def _slow_seen_launch_advice(f: Facts) -> Advice:
    top = f.top
    return Advice(
        f"The launch call {quote_name(top[0].name)} took {fmt_dur(top[0].overlap_ns)}, although the kernel it "
        f"launches had already run {f.slow_runs_before:,} time(s) in this trace: no module to load or code to "
        f"compile, so the call was held up (host contention: other threads or processes on the same cores, the "
        f"driver's lock, a page fault). Look at what else ran on the host then (other ranks' processes, "
        f"data-loading workers, CPU affinity), and pin the launching thread to its own cores.",
        "Do not warm up or set CUDA_MODULE_LOADING for it: the kernel was not new.",
        f"The same position on a new capture with the host quieter: the idle ({f.dur_txt}) should shrink.",
    )


def _graph_launch_advice(f: Facts) -> Advice:
    trace = f.diag.trace
    return Advice(
        f"The step already runs as a {graph_word(trace)}: what is left is the graph launch {quote_name(f.top[0].name)} "
        f"itself and the host time around it, a fixed cost per step. Amortise it over more work per launch: a "
        f"larger batch, several decode steps per graph, or speculative decoding; keep host work out of the window "
        f"between steps.",
        f"Do not capture the step in a {graph_word(trace)} again or tune kernels: the launch of one graph per step "
        "is what remains, not many small launches or slow kernels.",
        f"Idle at this position ({f.dur_txt}) against the work per launch: it should stay about constant "
        f"while the batch grows.",
    )


def _launch_bound_advice(f: Facts) -> Advice:
    diag, trace = f.diag, f.diag.trace
    eps = {int(e) for e in diag.gaps.episode[f.rows] if e >= 0}
    fence = ""
    if eps:
        ep = diag.episodes[min(eps)]
        launch_txt = f", launch calls of median {fmt_dur(ep.median_launch_ns)}" if ep.median_launch_ns >= 0 else ""
        fence = (
            f" ({ep.kernel_count} short kernels of median {fmt_dur(ep.median_kernel_ns)}{launch_txt}, "
            f"{fmt_dur(ep.idle_ns)} idle between them)"
        )
    if not f.program.torch:
        graph = f"capture the step in a {graph_word(trace)} (stream capture), fuse the small kernels"
    elif is_mtia(trace):
        graph = "fuse the small ops (torch.compile)"
    else:
        graph = (
            f"capture the step in a {graph_word(trace)} (torch.compile with mode='reduce-overhead', or "
            f"torch.cuda.graphs), fuse the small ops"
        )
    return Advice(
        f"Issue the work with fewer launches{fence}: {graph}, or batch more requests per step.",
        "Do not write a faster kernel: the kernels already finish before the next launch arrives.",
        f"GPU busy share and launch calls per step before and after; gaps in this stretch should fall "
        f"below {fmt_dur(diag.params.min_gap_ns)} and the idle at this position ({f.dur_txt}) shrink.",
    )


def _has_cpu(trace) -> bool:
    return any(
        (not ln.is_gpu) and trace.lane_offsets[ln.index + 1] > trace.lane_offsets[ln.index] for ln in trace.lanes
    )


def _next_ops(f: Facts) -> list[int]:
    return [int(n) for n in f.diag.gaps.next_op[f.rows] if n >= 0]


def _collective_advice(f: Facts) -> Advice:
    trace = f.diag.trace
    nxt = quote_name(trace.name(_next_ops(f)[0]))
    first = (
        f"The next op {nxt} is a collective with no linked launch: find when this rank's main thread issued it and "
        f"what it did before (capture every rank in the same window to compare); a late issue leaves this GPU "
        f"idle, while a late peer lengthens the collective's kernel instead."
        if _multi_rank(trace)
        else f"The next op {nxt} is a collective with no linked launch: find what the process did before issuing it "
        f"(the thread in the collective's Python range); a late peer would lengthen the collective's kernel, not "
        f"this idle."
    )
    return Advice(
        first,
        "Do not optimise the kernels next to the gap: none runs in it; what delayed the collective's issue or "
        "start made it.",
        f"The same gap ({f.dur_txt}) on a capture of every rank.",
    )


def _no_next_op_advice(f: Facts) -> Advice:
    trace, g = f.diag.trace, f.diag.gaps
    kernels = bool(device_event_mask(trace, int(g.device[f.rows[0]]), (Kind.KERNEL,)).any())
    return Advice(
        "No GPU op follows this gap before the analysis window ends"
        + ("" if kernels else ", and this GPU ran no kernel in the trace (only copies or other ops)")
        + ": capture a window that runs on past it (the next step's first op on this GPU), so that the gap "
        "ends at an op whose launch can be read.",
        "Do not pick a kernel to optimise from the GPU lanes alone.",
        f"The same gap ({f.dur_txt}) classified on the new capture.",
    )


def _unlinked_advice(f: Facts) -> Advice:
    return Advice(
        "The next op has no launch call linked to it, so the trace cannot say whether it was queued or "
        "launched late: capture with a torch.profiler that records the runtime calls and their correlation "
        "(activities CPU and CUDA), then read the launching thread at this gap.",
        "Do not pick a kernel to optimise from the GPU lanes alone.",
        f"The same gap ({f.dur_txt}) classified on the new capture.",
    )


def _no_cpu_advice(f: Facts) -> Advice:
    return Advice(
        "Capture again with CPU activity and its launch links recorded (torch.profiler activities CPU and CUDA, "
        "with_stack=True) so the launching thread and its calls are visible.",
        "Do not pick a kernel to optimise from the GPU lanes alone.",
        f"The same gap ({f.dur_txt}) classified on the new capture.",
    )


def _is_graph_launch(f: Facts) -> bool:
    top = f.top
    return bool(top) and bool(GRAPH_LAUNCH_RE.search(top[0].name))


#: The advice table, first match wins. A new piece of advice is one ``Rule`` here
#: (before the rule it specialises), with its own test.
RULES: tuple[Rule, ...] = (
    Rule(
        "graph capture",
        lambda f: f.capture is not None and f.cause in (Cause.HOST, Cause.LAUNCH),
        lambda f: (
            Advice(*_capture_advice(f.diag, f.capture, f.dur_txt)) if f.capture is not None else _no_cpu_advice(f)
        ),
        "the thread spent the gap capturing a graph: its cost is the capture's, told apart from replay",
    ),
    Rule(
        "module loading",
        lambda f: f.module_loading and f.cause in (Cause.HOST, Cause.LAUNCH),
        _module_loading_advice,
        "the call holding the gap loaded GPU code (lazy function loading): a first call's one-time cost, not host work",
    ),
    Rule(
        "one-time cost",
        lambda f: f.one_time and not f.slow_launch,
        _one_time_advice,
        "warm-up evidence covers the gap (classify._one_time): it happens once, so warm up before profiling",
    ),
    Rule(
        "dependency",
        lambda f: f.cause == Cause.DEPENDENCY,
        lambda f: Advice(*_dependency_advice(f.diag, f.rows, f.dur_txt)),
        "the op was queued: what it waited for on the GPU side is the cause, not the CPU",
    ),
    Rule(
        "sync",
        lambda f: f.cause == Cause.SYNC,
        lambda f: Advice(
            *_sync_advice(
                f.diag,
                list(f.evidence),
                quote_name(f.top[0].name) if f.top else None,
                f.dur_txt,
                f.rows,
                cliff=in_sync_cliff(f.diag.gaps, f.rows),
            )
        ),
        "the launching thread blocked on the device: the read that blocked is the cause",
    ),
    Rule(
        "copy",
        lambda f: f.cause == Cause.COPY,
        _copy_advice,
        "a copy on the critical path: keep the data on the device or overlap the copy",
    ),
    Rule(
        "slow launch of a kernel seen before",
        lambda f: f.cause == Cause.LAUNCH and f.slow_launch and f.slow_runs_before > 0,
        _slow_seen_launch_advice,
        "the kernel had run before, so a slow launch is contention on the host, not first use",
    ),
    Rule(
        "slow first launch",
        lambda f: f.cause == Cause.LAUNCH and f.slow_launch,
        _slow_first_launch_advice,
        "one launch call of a kernel's first run holds the gap: module loading, JIT or autotuning, once",
    ),
    Rule(
        "graph launch",
        lambda f: f.cause == Cause.LAUNCH and _is_graph_launch(f),
        _graph_launch_advice,
        "the step already replays a graph: its launch is a fixed cost per step, amortised by more work per launch",
    ),
    Rule(
        "launch-bound",
        lambda f: f.cause == Cause.LAUNCH,
        _launch_bound_advice,
        "the kernels finish before the next launch arrives: fewer launches, not faster kernels",
    ),
    Rule(
        "host",
        lambda f: f.cause == Cause.HOST,
        _host_advice,
        "the GPU had nothing queued while the launching thread worked: that work is the cause",
    ),
    Rule(
        "collective with no launch",
        lambda f: (
            _has_cpu(f.diag.trace)
            and bool(_next_ops(f))
            and bool(COLLECTIVE_RE.search(f.diag.trace.name(_next_ops(f)[0])))
        ),
        _collective_advice,
        "NCCL/RCCL launch without a linked runtime call: when the rank issued it is the question",
    ),
    Rule(
        "no next op",
        lambda f: _has_cpu(f.diag.trace) and not _next_ops(f),
        _no_next_op_advice,
        "the gap runs to the window's end: no launch to read, so capture past it",
    ),
    Rule(
        "no linked launch",
        lambda f: _has_cpu(f.diag.trace),
        _unlinked_advice,
        "without correlation the trace cannot tell queued from late: capture the links",
    ),
    Rule("no CPU data", lambda f: True, _no_cpu_advice, "without CPU events nothing can be said of the launch"),
)


def advice(facts: Facts) -> Advice:
    """The ``Advice`` of the first rule of ``RULES`` whose ``when`` holds for ``facts``
    (design: "The card", "Cards as facts and rules"); the last rule always holds."""
    got = next(r.advise(facts) for r in RULES if r.when(facts))
    return got if got.fix else got._replace(fix=short_fix(got.first))


def matching_rule(facts: Facts) -> Rule:
    """The rule ``advice`` follows for ``facts`` (for tests and audits)."""
    return next(r for r in RULES if r.when(facts))
