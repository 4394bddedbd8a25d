"""The advice of a host-class card: ``HostFacts`` (what the launching thread did,
computed once from the card's ``Facts``) and ``HOST_RULES``, the ordered table of
``HostRule`` whose first match gives the first experiment (allocation, a host copy,
DataLoader, TorchDynamo guards, the optimizer step, autograd, collectives, DDP,
Triton, waiting on another thread, own work, issuing GPU work, a hot frame, ...).
``host_advice(facts)`` applies it. Advice never contradicts the class.
"""

from __future__ import annotations

import dataclasses
import re
import weakref
from collections.abc import Callable

import numpy as np

from gapscope.analysis.busy import coverage, union_intervals
from gapscope.analysis.card.advice import Advice
from gapscope.analysis.card.copy_rules import host_copy_fix
from gapscope.analysis.card.facts import Facts, enclosing_events
from gapscope.analysis.card.program import is_mtia, is_rocm, program_kind
from gapscope.analysis.card.samples import dominant_frame, frame_text
from gapscope.analysis.card.why import (
    graph_word,
    hot_inner_text,
    is_decode_trace,
    quiet_text,
    quote_name,
    thread_label,
    trust_bits,
)
from gapscope.analysis.diagnose import Diagnosis
from gapscope.analysis.evidence_kinds import (
    SYNC_LAUNCH_MIN_KERNEL_NS,
    is_copy_call,
    synchronous_launches,
)
from gapscope.analysis.framework_work import (
    AUTOGRAD_NODE_RE,
    TENSOR_COPY_RE,
    DdpBufferSync,
    HostCopies,
    ddp_buffer_sync,
    event_span,
    graph_launch_inside,
    graph_launches_on,
    host_copies,
    launches_inside,
    tensor_text,
    triton_launcher_around,
)
from gapscope.analysis.steps import PROFILER_STEP_RE
from gapscope.analysis.types import Cause, Evidence, Trust
from gapscope.parsers.model import Kind
from gapscope.units import fmt_bytes, fmt_dur

__all__ = ["HostFacts", "HostRule", "HOST_RULES", "host_facts", "host_advice"]


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
    # called only for a node that launches nothing (``host_advice``'s branches before it)
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


#: A host call of the process group or the communication library itself (torch's
#: ``c10d::allreduce_``, the profiler's ``record_param_comms``, ``nccl:all_to_all``),
#: not any Python function whose name mentions a collective (vLLM's
#: ``symm_mem.py(127): all_reduce`` is the framework's own code).
HOST_COMM_RE = re.compile(r"^(c10d::|record_param_comms\b|nccl:|rccl:|gloo:|mpi:)", re.IGNORECASE)


#: Nsight Systems' CPU sampling switch (``nsys profile --sample``: ``process-tree``,
#: ``system-wide`` or ``none``; the Nsight Systems user guide, "CLI Profile Command
#: Switch Options").
NSYS_SAMPLE_FLAG = "nsys profile --sample=process-tree"


def _instrument_hint(trace) -> str:
    """How to see finer CPU work in this kind of trace: an Nsight export that has CPU
    samples already is never asked to sample again (its hottest frames are named)."""
    if str(trace.source.format).startswith("nsys"):
        python = program_kind(trace).python
        ranges = "torch.cuda.nvtx.range, nvtx.annotate" if python else "nvtxRangePushA / nvtxRangePop"
        if trace.cpu_samples is not None:
            return f"add NVTX ranges around the suspects ({ranges}): the CPU samples here show where the thread ran"
        return (
            f"add NVTX ranges around the suspects ({ranges}) or profile with CPU sampling "
            f"({NSYS_SAMPLE_FLAG}), whose samples name the functions the thread ran"
        )
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


def _sampled_when(f: Facts, h: HostFacts) -> bool:
    """One sampled frame dominates (``samples.dominant_frame``) where the traced events
    do not say what the thread did: unrecorded time, a call holding its own time, or
    no named work."""
    return dominant_frame(f.samples) is not None and (h.lead is None or h.quiet_ns > h.lead_ns or h.mostly_own)


def _sampled_first(f: Facts, h: HostFacts) -> str:
    s = f.samples
    top = dominant_frame(s)
    assert s is not None and top is not None
    rest = "; the others: " + ", ".join(frame_text(x, quote_name) for x in s.frames[1:]) if len(s.frames) > 1 else ""
    return (
        f"The CPU samples of the launching thread inside the gap put {top.samples:,} of {s.samples:,} in "
        f"{frame_text(top, quote_name)}{rest}: that is the work the GPU waited for. Cut it (do it once and "
        f"reuse the result, or do less of it per step) or take it off the critical path (after the step, or "
        f"in another thread), and launch the next GPU work before it so the two overlap."
    )


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
    return f"The thread is allocating or freeing device memory {what}: {CACHING_ALLOCATOR_FIX}"


#: PyTorch's remedy for allocation in the loop (``_alloc_first``; the card's
#: "allocation churn" rule reuses it).
CACHING_ALLOCATOR_FIX = (
    "let the caching allocator keep its blocks "
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


def _copy_call_when(f: Facts, h: HostFacts) -> bool:
    """The work the sentence names first is a copy call (``cudaMemcpyAsync``): the
    thread's time in it outside the GPU's copies is host work (copy is GPU copy time
    only; a copy call that blocked through the queue is a sync cliff, not this)."""
    return h.lead is not None and h.lead.event >= 0 and is_copy_call(f.diag.trace, h.lead.event)


def _copy_call_first(f: Facts, h: HostFacts) -> str:
    assert h.lead is not None  # _copy_call_when held
    gpu = sum(e.overlap_ns for r in f.rows.tolist() for e in f.diag.gpu_copies(int(r)) if e.cause == Cause.COPY)
    ran = f" (the GPU copied for {fmt_dur(gpu)} of the gap)" if gpu else ""
    return (
        f"The thread spent {fmt_dur(h.lead_ns)} inside the copy call {quote_name(h.lead_name or '')} outside the "
        f"GPU's copies{ran}: the runtime staging pageable host memory or the driver's own work, host time before "
        f"the next launch. " + host_copy_fix(f)
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


#: One of the model's own tensor operations as the profiler records it: a Python call of a
#: ``Tensor`` method (``<built-in method view of Tensor object at 0x...>``, with_stack) or
#: an ATen op. Such work is the program itself, not a task that can run elsewhere.
TENSOR_OP_RE = re.compile(r"^<built-in method \w+ of (Tensor|torch\._C\.\w+) object|^aten::")


def _tensor_op_when(f: Facts, h: HostFacts) -> bool:
    """``when``: a PyTorch program whose host time is led by one of its own tensor ops
    (``TENSOR_OP_RE``) that launches no GPU work itself (audit 4: b200's host work inside
    every ``TransformerBlock`` was told to move a ``Tensor.view`` off the critical path)."""
    return program_kind(f.diag.trace).torch and h.lead_name is not None and bool(TENSOR_OP_RE.search(h.lead_name))


def _tensor_op_first(f: Facts, h: HostFacts) -> str:
    return (
        f"{quote_name(h.lead_name or '')} holds {fmt_dur(h.lead_ns)} of the gap: it is one of the model's own tensor "
        f"operations, so it cannot run after the step or on another thread. The cost is the host's per-op work in "
        f"eager mode (Python, dispatch, launch): capture the step in a {graph_word(f.diag.trace)} "
        f"(torch.compile with mode='reduce-overhead', or a serving engine's graph mode instead of eager), or "
        f"compile it into fewer, larger ops."
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
        "sampled hot frame",
        _sampled_when,
        _sampled_first,
        "CPU samples name the function the thread ran where no traced event does: cut or move that function",
        "cut the sampled hot function or move it off the critical path, and launch the next GPU work first",
    ),
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
        "copy call",
        _copy_call_when,
        _copy_call_first,
        "the thread's time in a copy call outside its GPU copy is host work (staging, driver): pin and go async",
        "copy from pinned host memory with non_blocking=True (the call then returns at once), or keep the data on "
        "the device",
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
        "model tensor op",
        _tensor_op_when,
        _tensor_op_first,
        "the model's own tensor op: per-op eager overhead, not work that can move",
        "cut the per-op host cost: a CUDA graph or torch.compile (mode='reduce-overhead')",
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


def host_advice(f: Facts) -> Advice:
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
