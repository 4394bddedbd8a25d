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
from collections.abc import Callable

import numpy as np

from gapscope.analysis.busy import device_event_mask
from gapscope.analysis.card.advice import Advice, short_fix
from gapscope.analysis.card.copy_rules import copy_advice, host_copy_fix
from gapscope.analysis.card.facts import Facts, GapCapture
from gapscope.analysis.card.host_rules import CACHING_ALLOCATOR_FIX, host_advice
from gapscope.analysis.card.program import is_mtia, is_rocm, program_kind
from gapscope.analysis.card.why import (
    GRAPH_START_MAX_NS,
    StepWait,
    cliff_wait,
    graph_word,
    in_running_graph_launch,
    in_sync_cliff,
    is_wait,
    listed_step_waits,
    other_streams_idle,
    quote_name,
    step_wait_label,
    step_waits_list,
)
from gapscope.analysis.diagnose import Diagnosis
from gapscope.analysis.evidence_kinds import (
    COLLECTIVE_RE,
    GRAPH_LAUNCH_RE,
    blocking_copy_calls,
)
from gapscope.analysis.framework_work import (
    graph_first_node,
    graph_node_count,
)
from gapscope.analysis.steps import is_drawn
from gapscope.analysis.types import Cause, Evidence, WaitKind
from gapscope.parsers.model import CopyKind, Kind
from gapscope.units import fmt_bytes, fmt_dur

__all__ = ["advice", "Rule", "RULES", "matching_rule", "capture_sentence", "kernel_start_span"]


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


def _module_loading_hint(trace) -> str:
    """``CUDA_MODULE_LOADING``, named on CUDA devices only."""
    return "" if is_mtia(trace) or is_rocm(trace) else "; CUDA_MODULE_LOADING=EAGER loads modules at start"


def _names_awaited(trace, capture: bool = False) -> str:
    """Where the trace (or a new capture) names the stream an event wait is on."""
    if is_mtia(trace):
        return "MTIA's own `event_wait` records name the awaited stream in their `wait_on_stream` arg"
    if not program_kind(trace).profiler_is_torch:  # no torch.profiler for a native or JAX program
        api = "hip" if is_rocm(trace) else "cuda"
        return (
            f"in the program, find the {api}StreamWaitEvent on the next op's stream before its launch and the "
            f"stream whose {api}EventRecord it waits on"
        )
    if capture:
        return "capture with a recent torch.profiler (its cuda_sync records name the stream an event wait is on)"
    return "a recent torch.profiler names the awaited stream in its cuda_sync records"


def _stream_wait_calls(trace, torch_calls: str = "wait_stream, wait_event") -> str:
    """The calls that make one stream wait on another, in the program's words:
    ``torch_calls`` for PyTorch, the runtime's own (``cudaStreamWaitEvent``) else."""
    if program_kind(trace).profiler_is_torch:
        return torch_calls
    api = "hip" if is_rocm(trace) else "cuda"
    return f"{api}StreamWaitEvent, {api}EventRecord"


def loop_words(diag: Diagnosis) -> tuple[str, str]:
    """(" from the loop", "after the loop") when the trace marks steps, else
    ("", "at the end"): a program with no steps recorded shows no loop to name
    (audit 3: profile16 was told "from the loop")."""
    if diag.steps is not None and len(diag.steps):
        return " from the loop", "after the loop"
    return "", "at the end"


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
    out, after = loop_words(diag)
    return (
        f"Remove the blocking wait {where}{out}: {keep}, or collect the values and read them once "
        f"{after}; time with events recorded on the stream instead of synchronizing. Then launch the "
        f"next work before any host step that must stay.",
        forbidden,
        f"On a new capture of the same steps, the idle at this position ({dur_txt}) and the number of "
        f"blocking calls per step ({name or 'calls that wait for the device'}) should drop to about zero.",
    )


def final_read(f: Facts) -> int | None:
    """The wait of a *required* read, else None: a read is required (the program's
    result, such as a generation's last token) when the occurrence is of class sync, no
    GPU op follows any of its gaps (the device's last gap, at the trailing edge), and no
    kernel of the device starts after its wait (the cliff's, else the longest blocking
    wait in the evidence) ends. A read with no GPU work after it feeds nothing back into
    the loop: its value leaves the program (docs/definitions.md, "The card"); the reads
    inside the loop are followed by the next step's kernels. Later waits on the thread
    with nothing queued (``cudaStreamSynchronize`` inside the same ``.cpu()``, a final
    ``cudaDeviceSynchronize``) drain nothing and do not change it."""
    diag, g = f.diag, f.diag.gaps
    if f.cause == Cause.COPY:
        got = edge_copy(f)
        return got[0] if got is not None and got[1] == int(CopyKind.D2H) else None
    if f.cause != Cause.SYNC or bool((g.next_op[f.rows] >= 0).any()):
        return None
    trace = diag.trace
    w = cliff_wait(diag, int(f.rows[0])) if in_sync_cliff(g, f.rows) else None
    if w is None:
        waits = [e for e in f.evidence if e.cause == Cause.SYNC and e.event >= 0 and is_wait(trace, e.event)]
        w = max(waits, key=lambda e: e.overlap_ns).event if waits else None
    if w is None:
        return None
    w_end = int(trace.start_ns[w] + trace.dur_ns[w])
    span = kernel_start_span(f.diag, int(g.device[int(f.rows[0])]))
    return None if span is not None and span[1] >= w_end else int(w)


def kernel_start_span(diag, device: int) -> tuple[int, int] | None:
    """(first, last) start ns of ``device``'s kernels with valid timing
    (``busy.device_event_mask``), None when it ran none: a scan of the whole trace,
    done once per device and diagnosis (kept in ``diag.derived["kernel_start_span"]``);
    a copy or sync card scanned it per call (46 cards of a 5M-event trace's
    findings: 0.23 s)."""
    kept = diag.derived.setdefault("kernel_start_span", {})
    if device not in kept:
        trace = diag.trace
        start = trace.start_ns[device_event_mask(trace, device, (Kind.KERNEL,))]
        kept[device] = (int(start.min()), int(start.max())) if start.size else None
    return kept[device]


def edge_copy(f: Facts) -> tuple[int, int] | None:
    """(event, ``CopyKind`` int) of the largest GPU copy of a copy occurrence at the
    device's edges, else None: a host-to-device copy in gaps before the device's first
    kernel (the program's initial upload: no compute exists yet to overlap it), or a
    device-to-host copy in gaps after its last kernel start with no GPU op after them
    (the program's final read of its result). Audit 3, profile16 #0 and #6."""
    if f.cause != Cause.COPY or is_drawn(f.diag.trace):  # a drawn timeline is one step: no edges
        return None
    g, trace = f.diag.gaps, f.diag.trace
    copies = [
        e for e in f.evidence if e.cause == Cause.COPY and e.event >= 0 and trace.kind[e.event] == int(Kind.MEMCPY)
    ]
    if not copies:
        return None
    big = max(copies, key=lambda e: e.overlap_ns).event
    ck = int(trace.copy_kind[big])
    span = kernel_start_span(f.diag, int(g.device[int(f.rows[0])]))
    a = int(g.start_ns[f.rows].min())
    if ck == int(CopyKind.H2D) and (span is None or span[0] >= a):  # no kernel starts before a
        return big, ck
    last = not bool((g.next_op[f.rows] >= 0).any()) and (span is None or span[1] < a)  # none starts at a or after
    return (big, ck) if ck == int(CopyKind.D2H) and last else None


def _copy_named(trace, f: Facts, w: int) -> str:
    """```Memcpy DtoH (Device -> Pinned)` (61.0 MiB)``: a copy by name and size."""
    size = next((e.bytes for e in f.evidence if e.event == w and e.bytes >= 0), -1)
    return quote_name(trace.name(w)) + (f" ({fmt_bytes(size)})" if size >= 0 else "")


def _initial_upload_advice(f: Facts) -> Advice:
    got = edge_copy(f)
    assert got is not None  # the rule's when held
    name = _copy_named(f.diag.trace, f, got[0])
    return Advice(
        f"Nothing to overlap here: {name} is the program's initial upload, before the device's first kernel, so "
        f"no compute exists yet to run under it and every kernel after it needs its data. Work on the gaps between "
        f"kernels instead; only where the program uploads the same data again later, upload it once and keep it on "
        f"the device.",
        "Do not move this upload to another stream to overlap compute, nor optimise the kernels: before the first "
        "kernel there is no compute to overlap.",
        f"On a new capture, one such upload at the start ({f.dur_txt} here), and no upload of the same data "
        f"between kernels.",
        "none: the initial upload precedes all compute",
    )


def _final_read_advice(f: Facts) -> Advice:
    w = final_read(f)
    assert w is not None  # the rule's when held
    trace = f.diag.trace
    if f.cause == Cause.COPY:
        return Advice(
            f"Nothing to remove here: {_copy_named(trace, f, w)} is the program's final read, after the device's "
            f"last kernel with nothing following it: its result leaving the device, which the program needs. Work "
            f"on the gaps between kernels instead.",
            "Do not drop this copy or keep its data on the device: it is the output; without it the program has no "
            "result.",
            f"On a new capture, one such read at the end ({f.dur_txt} here), and no read of the same data between "
            f"kernels.",
            "none: the final read is the program's result",
        )
    op = _innermost(f.diag, w, Kind.CPU_OP)
    name = quote_name(op if op and op != trace.name(w) else trace.name(w))
    return Advice(
        f"Nothing to remove here: {name} is the program's final read, after the device's last kernel with "
        f"nothing following it (the generation's result), so the program needs it. It waits for the last step's "
        f"work to finish, which any read of the result must. Work on the reads inside the loop and the other gaps "
        f"instead.",
        "Do not remove this read or make it non-blocking: its value is the output; without it the program has "
        "no result.",
        f"On a new capture, one such read per run at the end ({f.dur_txt} here), and none of the per-step reads "
        f"before it.",
        "none: the final read is the program's result",
    )


#: How each kind of blocking wait leaves the loop (``_each_wait_fix``).
_SYNCHRONIZE_RE = re.compile(r"synchroni[sz]e", re.IGNORECASE)


def _each_wait_fix(f: Facts, w: StepWait) -> str:
    """How one wait of the step goes, by what it is: a blocking copy (pinned,
    asynchronous), an explicit synchronize (events for timing; none where nothing needs
    the device finished), a read of a value (keep it on the device or read once)."""
    trace = f.diag.trace
    if bool(blocking_copy_calls(trace)[w.event]):
        fix = host_copy_fix(f).removesuffix(".")
        return fix[:1].lower() + fix[1:]
    if _SYNCHRONIZE_RE.search(trace.name(w.event)):
        timing = "torch.cuda.Event(enable_timing=True)" if f.program.torch else "cudaEventRecord / cudaEventElapsedTime"
        return (
            f"drop each where nothing needs the device finished; to time, record events on the stream ({timing}) "
            f"and read them {loop_words(f.diag)[1]}"
        )
    keep = "keep the value on the GPU (torch.where, a mask)" if f.program.torch else "keep the value on the device"
    return f"{keep}, or collect the values and read them once {loop_words(f.diag)[1]}"


def _wait_fixes(f: Facts) -> str:
    """``label, label: fix; label: fix``: each wait of the step with how it goes, the
    waits of one fix together."""
    trace = f.diag.trace
    by_fix: dict[str, list[str]] = {}
    for w in listed_step_waits(f.step_waits):
        by_fix.setdefault(_each_wait_fix(f, w), []).append(step_wait_label(trace, w))
    return "; ".join(f"{', '.join(labels)}: {fix}" for fix, labels in by_fix.items())


def _step_waits_advice(f: Facts) -> Advice:
    trace = f.diag.trace
    n = sum(w.calls for w in f.step_waits)
    where = "step" if f.waits_in_step else "gap"
    named = _wait_fixes(f)
    listed = step_waits_list(trace, f.step_waits, f.waits_in_step)
    return Advice(
        f"Remove each blocking wait of the {where}, not only the first: the thread blocked on the device {n} "
        f"times ({listed}), and each one drains the queue or waits on an idle GPU. {named}. Then launch the next "
        f"work before any host step that must stay.",
        "Do not speed up the kernels around the gap: the waits, not the kernels, hold the next launch back, and "
        "a faster kernel only makes each wait start sooner.",
        f"On a new capture of the same steps, the idle at this position ({f.dur_txt}) and the blocking calls per "
        f"{where} ({n} now) should drop to about zero.",
        f"remove the {where}'s {n} blocking waits (each named){loop_words(f.diag)[0]}",
    )


def _blocking_copy_wait(f: Facts) -> int | None:
    """The sync cliff's wait of the occurrence when it is a blocking copy call
    (``blocking_copy_calls``), else None."""
    if f.cause != Cause.SYNC or not in_sync_cliff(f.diag.gaps, f.rows):
        return None
    w = cliff_wait(f.diag, int(f.rows[0]))
    return w if w is not None and bool(blocking_copy_calls(f.diag.trace)[w]) else None


def _blocking_copy_advice(f: Facts) -> Advice:
    diag = f.diag
    w = _blocking_copy_wait(f)
    assert w is not None  # the rule's when held
    op = _innermost(diag, w, Kind.CPU_OP)
    inside = f" (inside {quote_name(op)})" if op else ""
    return Advice(
        f"The copy call {quote_name(diag.trace.name(w))}{inside} returned only after its copy ended, and a copy "
        f"runs after the work queued before it: a synchronous or pageable copy, which waited for the GPU to drain "
        f"(a sync). " + host_copy_fix(f) + " Issue the copy before the work that needs it.",
        "Do not speed up the kernels around the gap: the copy call waits for the GPU to drain, and a faster "
        "kernel only makes that wait start sooner.",
        f"On a new capture of the same steps, the idle at this position ({f.dur_txt}) should shrink to the GPU's "
        f"copy time, and {quote_name(diag.trace.name(w))} return before its copy ends.",
        "copy from pinned host memory with non_blocking=True so the call does not wait for the GPU",
    )


def _allocation_churn_advice(f: Facts) -> Advice:
    """Allocator calls hold most of the occurrence (``Facts.allocation_churn``): host
    allocation work between phases, not waiting on the device (audit 3, profile16 #5)."""
    calls = ", ".join(f"{quote_name(n)}{f' {c} times' if c > 1 else ''} ({fmt_dur(ns)})" for n, c, ns in f.allocs[:4])
    share = f"{fmt_dur(f.alloc_ns)} of the {fmt_dur(f.occurrence_ns)} gap"
    if f.program.torch:
        first = (
            f"Allocate the buffers once and reuse them: {share} is the thread allocating and freeing memory "
            f"({calls}), not waiting on the device; {CACHING_ALLOCATOR_FIX}"
        )
    else:
        first = (
            f"Allocate the pinned and device buffers once and reuse them: {share} is the thread allocating and "
            f"freeing memory ({calls}), not waiting on the device. Keep one set of buffers (or a pool: "
            f"cudaMallocAsync from a pool with a release threshold) for the whole run instead of allocating and "
            f"freeing them per phase."
        )
    waits = sum(w.ns for w in f.step_waits)
    if waits:
        first += f" Then look at the blocking waits in it ({fmt_dur(waits)} of the idle, named above)."
    return Advice(
        first,
        "Do not speed up the kernels around the gap, nor hunt the syncs first: the allocator calls, not the "
        "kernels or the waits, hold the thread between the launches.",
        f"On a new capture, the allocator calls inside this gap ({fmt_dur(f.alloc_ns)} now) should be gone and the "
        f"idle at this position ({f.dur_txt}) shrink by about as much.",
        "allocate the buffers once and reuse them",
    )


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
                f"({_stream_wait_calls(diag.trace, 'wait_stream / wait_event')}) and whether the wait is needed at all.",
                forbidden,
                proof,
            )
        return (
            f"Find the event {w} waits for: the stream or device that records it and what ran there before it "
            f"({_names_awaited(diag.trace)}). Record the event "
            f"earlier, split the producing work, or drop a wait that is not needed "
            f"({_stream_wait_calls(diag.trace, 'wait_stream / record_stream')}).",
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
        f"waits ({_stream_wait_calls(diag.trace)}), copies or kernels on other devices, and host callbacks."
        + (" Capture every rank in the same window." if _multi_rank(diag.trace) else ""),
        forbidden,
        proof,
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


@dataclasses.dataclass(frozen=True)
class Rule:
    """One piece of advice: when ``when(facts)`` holds (and no rule before it in the
    table did), ``advise(facts)`` gives the card's ``Advice``; ``rationale`` says in
    one line why the advice fits the evidence."""

    name: str
    when: Callable[[Facts], bool]
    advise: Callable[[Facts], Advice]
    rationale: str


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


def sync_before_launch(f: Facts) -> int | None:
    """The explicit device or stream synchronize (``cudaDeviceSynchronize``,
    ``cudaStreamSynchronize``: a wait whose name says so) that the launching thread
    blocked in during a launch-class occurrence, largest first, else None: the queue
    was drained right before the launch, so the launch's latency is exposed whatever
    the launch costs (ex-gpu.s10: six 5 µs kernels, each followed by
    ``cudaDeviceSynchronize``; audit 3)."""
    if f.cause != Cause.LAUNCH or f.slow_launch:
        return None
    trace = f.diag.trace
    waits = [
        e
        for e in f.evidence
        if e.cause == Cause.SYNC and e.event >= 0 and is_wait(trace, e.event) and _SYNCHRONIZE_RE.search(e.name)
    ]
    return max(waits, key=lambda e: e.overlap_ns).event if waits else None


def _sync_before_launch_advice(f: Facts) -> Advice:
    w = sync_before_launch(f)
    assert w is not None  # the rule's when held
    trace = f.diag.trace
    name = quote_name(trace.name(w))
    graph = "capture the step in a CUDA graph" if not is_rocm(trace) else "capture the step in a HIP graph"
    return Advice(
        f"Drop the {name} between kernels: the thread synchronized right before this launch, so the queue was "
        f"empty and each launch's latency lies on the GPU's path. Keep one where the host needs a result (or "
        f"record events for timing), and let the launches queue ahead of the GPU; if the gaps stay, then "
        f"{graph} or fuse the small kernels.",
        "Do not write a faster kernel: the GPU waits for the next launch after each synchronize, not for compute.",
        f"On a new capture, the {name} calls between kernels should be gone, the idle at this position "
        f"({f.dur_txt}) drop and the gaps between the kernels fall below {fmt_dur(f.diag.params.min_gap_ns)}.",
        f"drop the {name} between kernels so launches queue ahead",
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
    g = f.diag.gaps
    kernels = kernel_start_span(f.diag, int(g.device[f.rows[0]])) is not None
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
#: A recorded GPU memset or copy faster than this (bytes per ns = GB/s; 20 TB/s, over
#: twice any GPU's memory bandwidth in 2026) did not take the time the trace gives it.
IMPLAUSIBLE_BYTES_PER_NS = 20_000


def implausible_device_op(f: Facts) -> tuple[int, float] | None:
    """The memset or copy of the occurrence's gaps (``Diagnosis.gpu_copies``) whose
    recorded duration is too short for its bytes (``IMPLAUSIBLE_BYTES_PER_NS``): its
    event index and its bytes per ns (the largest such one), or None. Audit 4
    (extrap/profile16): a 61 MiB memset recorded as 2 µs (32 TB/s on a GTX 1060) sat
    before each 0.44 ms "queued, waiting" gap, the time 61 MiB takes at the card's
    bandwidth; where the memset ran earlier, under a kernel, the gap was 6 µs."""
    trace = f.diag.trace
    best: tuple[int, float] | None = None
    for r in f.rows.tolist():
        for e in f.diag.gpu_copies(int(r)):
            if e.event < 0 or e.bytes <= 0:
                continue
            dur_ns = max(int(trace.dur_ns[e.event]), 1)
            rate = e.bytes / dur_ns
            if rate > IMPLAUSIBLE_BYTES_PER_NS and (best is None or rate > best[1]):
                best = (e.event, rate)
    return best


def _implausible_op_advice(f: Facts) -> Advice:
    got = implausible_device_op(f)
    assert got is not None  # the rule's ``when`` held
    ev, rate = got
    trace = f.diag.trace
    what = f"{quote_name(trace.name(ev))} of {fmt_bytes(int(trace.bytes[ev]))}"
    return Advice(
        f"The trace records {what} as taking {fmt_dur(int(trace.dur_ns[ev]))} ({rate / 1000:,.0f} TB/s, "
        f"more than any GPU's memory can do): its end is not when the GPU finished it, so this {f.dur_txt} gap is "
        f"most likely the {'memset' if int(trace.kind[ev]) == int(Kind.MEMSET) else 'copy'} still running. Test it: "
        f"drop it where the buffer is overwritten anyway, or issue it earlier (or on another stream) so it runs "
        f"under a kernel, and see whether the gap goes.",
        "Do not hunt for a cross-stream wait or a host callback first: the recorded device work before the gap "
        "cannot have finished when the trace says it did.",
        f"On a capture without the {'memset' if int(trace.kind[ev]) == int(Kind.MEMSET) else 'copy'} (or with it "
        f"moved under a kernel), the {f.dur_txt} gap is gone or down to the dispatch jitter between queued ops.",
        "drop the device op recorded too short, or run it under a kernel, and see whether the gap goes",
    )


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
        "device op recorded too short",
        lambda f: f.cause == Cause.DEPENDENCY and implausible_device_op(f) is not None,
        _implausible_op_advice,
        "a memset or copy recorded faster than any memory is still running: the gap is its time, not a wait",
    ),
    Rule(
        "dependency",
        lambda f: f.cause == Cause.DEPENDENCY,
        lambda f: Advice(*_dependency_advice(f.diag, f.rows, f.dur_txt)),
        "the op was queued: what it waited for on the GPU side is the cause, not the CPU",
    ),
    Rule(
        "allocation churn",
        lambda f: f.allocation_churn and f.cause in (Cause.SYNC, Cause.LAUNCH),
        _allocation_churn_advice,
        "allocator calls hold most of the gap: host allocation work, fixed by allocating once, not a sync to drop",
    ),
    Rule(
        "initial upload",
        lambda f: (got := edge_copy(f)) is not None and got[1] == int(CopyKind.H2D),
        _initial_upload_advice,
        "a host-to-device copy before the first kernel is the program's input: no compute exists to overlap it",
    ),
    Rule(
        "required final read",
        lambda f: final_read(f) is not None,
        _final_read_advice,
        "the last read (a wait, or a device-to-host copy), with no GPU work after it, is the program's result: needed",
    ),
    Rule(
        "blocking syncs of the step",
        lambda f: f.cause == Cause.SYNC and len(f.step_waits) >= 2,
        _step_waits_advice,
        "the step blocks on the device in more than one place: each wait is named and goes, not only the first",
    ),
    Rule(
        "blocking copy call",
        lambda f: _blocking_copy_wait(f) is not None,
        _blocking_copy_advice,
        "a copy call that returned after its copy drained the queue: a sync, fixed by a pinned asynchronous copy",
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
        copy_advice,
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
        "synchronize before each launch",
        lambda f: sync_before_launch(f) is not None,
        _sync_before_launch_advice,
        "a synchronize drained the queue before the launch: its latency is exposed, so drop the sync before graphs",
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
        host_advice,
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
