"""Queued idle (the next op's launch call returned before the gap, L <= 0): the GPU was
blocked, not starved, so the class is dependency, never a CPU-side class; what it waited
on is named when the trace records it (a stream wait), else the card says nothing is
recorded and where to look."""

from __future__ import annotations

import numpy as np
import pytest

from gapscope.analysis import Cause, diagnose
from gapscope.analysis.card import card_for_gap
from gapscope.analysis.types import WaitKind
from gapscope.parsers import load
from gapscope.parsers.builder import TraceBuilder
from gapscope.parsers.model import Kind
from tests.conftest import CORPUS, require

US = 1_000


def _lanes_and_k1(b: TraceBuilder) -> tuple[int, int, int, int]:
    """Threads `main` and `side` of `python3`, streams 7 and 8 of GPU 0, and k1 on
    stream 7 [10, 60) µs launched by `main` at 0."""
    cpu = b.lane("1", "1", process_name="python3", thread_name="main")
    other = b.lane("1", "2", process_name="python3", thread_name="side")
    s7 = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    s8 = b.lane("0", "8", is_gpu=True, device=0, stream=8)
    b.event(cpu, "cudaLaunchKernel", 0, 5 * US, Kind.LAUNCH, correlation=1)
    b.event(s7, "k1", 10 * US, 50 * US, Kind.KERNEL, correlation=1)
    return cpu, other, s7, s8


def _queued(wait_at_us=None, wait_lane="T", marker=False, launch_in_gap=False):
    """k1 on stream 7 [10, 60) µs launched at 0; k2 on stream 8 launched at 20 µs,
    starts at 90 µs: a 30 µs gap [60, 90) with the work queued 40 µs before it. No CPU
    event inside the gap. Optional stream wait at ``wait_at_us`` on the launching thread
    (``"T"``), on another thread (``"other"``), or as a Kineto record on stream 8."""
    b = TraceBuilder()
    cpu, other, s7, s8 = _lanes_and_k1(b)
    if wait_at_us is not None:
        if marker:
            b.event(s8, "Stream Wait Event", wait_at_us * US, 2 * US, Kind.SYNC_MARKER, correlation=9)
        else:
            b.event(
                cpu if wait_lane == "T" else other,
                "cudaStreamWaitEvent",
                wait_at_us * US,
                2 * US,
                Kind.SYNC_CALL,
                correlation=9,
            )
    b.event(cpu, "cudaLaunchKernel", 20 * US, 5 * US, Kind.LAUNCH, correlation=2)
    b.event(s8, "k2", 90 * US, 10 * US, Kind.KERNEL, correlation=2)
    if launch_in_gap:  # T launches later work during the gap: [70, 80) µs
        b.event(cpu, "cudaLaunchKernel", 70 * US, 10 * US, Kind.LAUNCH, correlation=3)
        b.event(s8, "k3", 100 * US, 10 * US, Kind.KERNEL, correlation=3)
    return diagnose(b.build())


def test_queued_behind_stream_wait_is_dependency():
    d = _queued(wait_at_us=15)
    g = d.gaps
    # launch call [20, 25) µs: queued 35 µs before the gap [60, 90)
    assert len(g) == 1 and (g.start_ns[0], g.end_ns[0], g.lateness_ns[0]) == (60 * US, 90 * US, -35 * US)
    assert bool(g.queued[0]) and g.class_ns[0].tolist() == [0, 0, 0, 0, 0, 30 * US]
    assert g.wait_kind[0] == WaitKind.STREAM_WAIT
    w = int(g.wait_event[0])
    assert d.trace.name(w) == "cudaStreamWaitEvent" and d.trace.start_ns[w] == 15 * US
    ev = d.evidence(0)
    assert [(e.name, e.cause, e.overlap_ns) for e in ev] == [("cudaStreamWaitEvent", Cause.DEPENDENCY, 30 * US)]
    c = card_for_gap(d, 0)
    assert c.cause == Cause.DEPENDENCY and c.smell == "cross-stream wait"
    assert "behind the stream wait `cudaStreamWaitEvent` (enqueued by thread `main`)" in c.why
    assert "had returned 35.0 µs before the GPU went idle" in c.why
    assert "spent" not in c.why and "What the CPU did meanwhile is not the cause." in c.why
    assert "already queued" in c.forbidden_step


def test_kineto_stream_wait_record_on_the_next_stream_is_dependency():
    d = _queued(wait_at_us=15, marker=True)
    g = d.gaps
    assert g.class_ns[0].tolist() == [0, 0, 0, 0, 0, 30 * US]
    assert d.trace.name(int(g.wait_event[0])) == "Stream Wait Event" and g.wait_kind[0] == WaitKind.STREAM_WAIT


def _mtia_wait(wait_us: tuple[int, int]):
    """``_queued``'s gap [60, 90) µs with MTIA's own record of stream 8 waiting,
    ``event_wait`` over ``wait_us`` (the device times the wait: it lasts as long as it)."""
    b = TraceBuilder()
    cpu = b.lane("1", "1", process_name="python3", thread_name="main")
    s7 = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    s8 = b.lane("0", "8", is_gpu=True, device=0, stream=8)
    launch = "runFunction - job_prep_and_submit_for_execution"
    b.event(cpu, launch, 0, 5 * US, Kind.LAUNCH, correlation=1)
    b.event(s7, "k1", 10 * US, 50 * US, Kind.KERNEL, correlation=1)
    b.event(s8, "event_wait", wait_us[0] * US, (wait_us[1] - wait_us[0]) * US, Kind.SYNC_MARKER)
    b.event(cpu, launch, 20 * US, 5 * US, Kind.LAUNCH, correlation=2)
    b.event(s8, "k2", 90 * US, 10 * US, Kind.KERNEL, correlation=2)
    return diagnose(b.build())


@pytest.mark.parametrize(
    ("wait_us", "kind", "words"),
    [
        ((30, 50), WaitKind.NOTHING_RECORDED, "it waited on something the trace does not record"),
        ((30, 75), WaitKind.STREAM_WAIT, "behind the stream wait `event_wait` until 15.0 µs into the gap"),
        ((30, 90), WaitKind.STREAM_WAIT, "It sat 30.0 µs behind the stream wait `event_wait`"),
        ((70, 200), WaitKind.STREAM_WAIT, "behind the stream wait `event_wait` from 10.0 µs to 30.0 µs into the gap"),
        ((70, 70), WaitKind.NOTHING_RECORDED, "it waited on something the trace does not record"),
    ],
    ids=["ended-before", "ended-inside", "lasted-through", "began-inside", "zero-length"],
)
def test_a_stream_wait_the_device_timed_explains_the_gap_only_while_it_lasts(wait_us, kind, words):
    """MTIA records the stream's own wait: one that ended before the gap held nothing
    back (mtia_inference: 8 cards blamed waits that had ended 1.3-7.4 ms before their
    32 µs gaps); one that ended or began inside the gap explains only its own part (an
    attacker saw a wait that began 20 µs into a gap credited from its start), and one of
    no length nothing."""
    d = _mtia_wait(wait_us)
    g = d.gaps
    assert len(g) == 1 and (g.start_ns[0], g.end_ns[0]) == (60 * US, 90 * US) and bool(g.queued[0])
    assert g.wait_kind[0] == kind
    assert g.class_ns[0].tolist() == [0, 0, 0, 0, 0, 30 * US]
    assert words in card_for_gap(d, 0).why


@pytest.mark.parametrize("kw", [{}, {"wait_at_us": 15, "wait_lane": "other"}, {"wait_at_us": 30}])
def test_queued_without_evidence_is_dependency_and_says_so(kw):
    """No wait, a wait on another thread (maybe another stream), or one enqueued after
    the next op's launch: none is recorded as what the queued op waited on."""
    d = _queued(**kw)
    g = d.gaps
    assert g.class_ns[0].tolist() == [0, 0, 0, 0, 0, 30 * US] and g.wait_event[0] == -1
    assert g.wait_kind[0] == WaitKind.NOTHING_RECORDED
    c = card_for_gap(d, 0)
    assert c.cause == Cause.DEPENDENCY
    assert "it waited on something the trace does not record" in c.why
    assert "uninstrumented" not in c.why  # the quiet CPU is no explanation of queued work
    assert "cuda_sync" in c.first_experiment and "already queued" in c.forbidden_step
    assert "Capture again with CPU activity" not in c.first_experiment


def test_launching_later_work_does_not_explain_queued_idle():
    """The next op was queued before the gap; T launching a later kernel during the gap
    is no launch overhead: the gap stays dependency, launch 0."""
    g = _queued(launch_in_gap=True).gaps
    assert g.lateness_ns[0] == -35 * US
    assert g.class_ns[0].tolist() == [0, 0, 0, 0, 0, 30 * US]
    g = _queued(wait_at_us=15, launch_in_gap=True).gaps
    assert g.class_ns[0].tolist() == [0, 0, 0, 0, 0, 30 * US] and g.wait_kind[0] == WaitKind.STREAM_WAIT


def test_rank0_waits_and_graph_stall():
    """The ~70 ms stall of every step of hta/rank0 (issue: "one stall, three classes"):
    the graph's node was queued by ``cudaGraphLaunch`` on another thread about 65 ms
    before the GPU went idle, so the stall is one dependency (graph ordering), never
    sync, copy or host; a blocking sync on the main thread is no cause."""
    d = diagnose(load(require(CORPUS / "hta" / "rank0.json.gz")))
    t, g = d.trace, d.gaps
    w = np.flatnonzero((g.wait_event >= 0) & g.queued)
    assert w.size > 0
    for i in w:
        k = int(g.wait_event[i])
        launch, prev_launch = int(g.launch[i]), int(d._launches[g.prev_op[i]])
        assert t.name(k) == "cudaStreamWaitEvent" and t.lane[k] == t.lane[launch]
        assert t.start_ns[prev_launch] <= t.start_ns[k] <= t.start_ns[launch]
        assert (
            bool(g.queued[i]) and g.class_ns[i, int(Cause.DEPENDENCY)] + g.class_ns[i, int(Cause.COPY)] == g.dur_ns[i]
        )
    i = 2261
    assert g.dur_ns[i] == 70_533 * US and g.lateness_ns[i] == -66_198 * US and g.wait_event[i] == -1
    assert Cause(g.cause[i]) == Cause.DEPENDENCY and g.wait_kind[i] == WaitKind.GRAPH
    assert t.name(int(g.launch[i])) == "cudaGraphLaunch"
    c = card_for_gap(d, i)
    assert c.smell == "graph ordering"
    # an audit of the raw events: no GPU lane ran anything from the gap's start until the
    # graph's first recorded node, a memset 64.3 ms in, and its next node came 6.2 ms later
    assert (
        "on the CUDA graph launched by `cudaGraphLaunch`: its first recorded node `Memset (Device)` did not start "
        "until 64.325 ms into the gap" in c.why
    ), c.why
    assert "already queued" in c.why
    assert "before its first recorded node `Memset (Device)`" in c.first_experiment
    for bad in ("cudaDeviceSynchronize", "spent", "blocked in"):
        assert bad not in c.why
    # a 5 µs copy in a 70 ms queued stall is no fix: the memset is named only as the graph's first node
    assert not c.first_experiment.startswith(("Batch", "Fuse", "Make", "Keep"))
    # every stall of that size whose launch is linked is one dependency, never CPU-side
    big = np.flatnonzero((g.dur_ns > 60_000_000) & (g.launch >= 0))
    assert big.size >= 4 and (g.cause[big] == Cause.DEPENDENCY).all()


def test_rank0_queued_idle_is_never_cpu_side():
    """No queued gap holds sync, launch, host or unclassified time."""
    d = diagnose(load(require(CORPUS / "hta" / "rank0.json.gz")))
    g = d.gaps
    q = g.queued
    cpu = [int(Cause.SYNC), int(Cause.LAUNCH), int(Cause.HOST), int(Cause.UNCLASSIFIED)]
    assert q.any() and (g.class_ns[q][:, cpu] == 0).all()


def test_rank0_every_stall_of_the_step_is_one_dependency():
    """hta/rank0's ~70 ms stall, all six of them: gap #200's next op is a graph node whose
    launch call the trace lacks (its earlier nodes ran first), so it is dependency like
    its siblings, not the 'copy' of the fallback thread's blocked cudaMemcpyAsync."""
    d = diagnose(load(require(CORPUS / "hta" / "rank0.json.gz")))
    g = d.gaps
    big = np.flatnonzero(g.dur_ns > 60_000_000)
    assert big.size == 6 and 200 in big.tolist()  # 5 steps and the stretch before the first
    assert (g.cause[big] == Cause.DEPENDENCY).all() and (g.wait_kind[big] == WaitKind.GRAPH).all()
    grp = d.groups[int(g.group[200])]
    assert grp.cause == Cause.DEPENDENCY
    assert "ncclKernel" not in card_for_gap(d, 200).why  # no name read through a missing launch (-1)


@pytest.mark.parametrize("other", [None, "record", "device1"])
def test_a_stream_wait_with_no_producer_in_the_trace_is_said_unexplained(other):
    """sglang_prefilldecode #0: the op sat 493 ms behind ``hipStreamWaitEvent`` while
    no stream ran anything (the awaited stream's one op had ended at 0.082 ms); the
    card said "waiting for an event recorded on another stream" and advised recording
    it earlier. Hand-made: k1 [10, 60) µs on stream 7, the wait at 15 µs, k2 launched
    at 20 µs and run at 2,060 µs on stream 8: 2 ms queued with nothing recorded. With a
    ``cudaEventRecord`` at 2,000 µs on another thread, or a kernel on device 1 in the
    wait, the trace may hold the producer: no such claim."""
    b = TraceBuilder()
    cpu, side, _s7, s8 = _lanes_and_k1(b)
    b.event(cpu, "cudaStreamWaitEvent", 15 * US, 2 * US, Kind.SYNC_CALL, correlation=9)
    b.event(cpu, "cudaLaunchKernel", 20 * US, 5 * US, Kind.LAUNCH, correlation=2)
    b.event(s8, "k2", 2060 * US, 10 * US, Kind.KERNEL, correlation=2)
    if other == "record":
        b.event(side, "cudaEventRecord", 2000 * US, 2 * US, Kind.RUNTIME, correlation=10)
    elif other == "device1":
        d1 = b.lane("1", "7", is_gpu=True, device=1, stream=7)
        b.event(side, "cudaLaunchKernel", 30 * US, 5 * US, Kind.LAUNCH, correlation=11)
        b.event(d1, "k_peer", 100 * US, 1900 * US, Kind.KERNEL, correlation=11)
    d = diagnose(b.build())
    i = int(np.flatnonzero((d.gaps.start_ns == 60 * US) & (d.gaps.device == 0))[0])
    assert d.gaps.end_ns[i] == 2060 * US and d.gaps.wait_kind[i] == WaitKind.STREAM_WAIT
    c = card_for_gap(d, i)
    said = "yet no other stream in the trace ran anything while it waited" in c.why
    assert said is (other is None), c.why
    assert c.first_experiment.startswith("The trace shows no work on any other stream") is (other is None)
    if other is None:
        assert "(the last op elsewhere ended 2.000 ms before the wait was over)" in c.why, c.why
        assert "Record the event earlier" not in c.first_experiment


def _graph_launch(call: str = "hipGraphLaunch"):
    """k0 on stream 7 [10, 20) µs launched by `main` at 0; then `call` [25, 200) µs on
    `main` (correlation 5) whose nodes run on stream 7: n1 [40, 50), n2 [50, 60) and,
    after a 40 µs gap inside the still running call, n3 [100, 110) µs. The gap [20, 40)
    before the graph's first node is the launch's own; [60, 100) lies between two of its
    nodes."""
    b = TraceBuilder()
    cpu = b.lane("1", "1", process_name="python3", thread_name="main")
    s7 = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    launch = "hipLaunchKernel" if call.startswith("hip") else "cudaLaunchKernel"
    b.event(cpu, launch, 0, 5 * US, Kind.LAUNCH, correlation=1)
    b.event(s7, "k0", 10 * US, 10 * US, Kind.KERNEL, correlation=1)
    b.event(cpu, call, 25 * US, 175 * US, Kind.LAUNCH, correlation=5)
    for name, at_us in (("n1", 40), ("n2", 50), ("n3", 100)):
        b.event(s7, name, at_us * US, 10 * US, Kind.KERNEL, correlation=5)
    return diagnose(b.build())


def test_gap_between_nodes_of_a_running_graph_launch_is_graph_ordering():
    """sglang Qwen3 decode #6: a gap between two nodes of one running ``hipGraphLaunch``
    was read as late launching by the call's end (which came after the gap) and advised
    "capture the step in a HIP graph". A later node is issued by the graph, so the gap
    is dependency (graph ordering), and on ROCm the card names the runtime's
    submission of the nodes inside the call, which the trace cannot tell apart."""
    d = _graph_launch()
    g = d.gaps
    assert [(int(a) // US, int(b) // US) for a, b in zip(g.start_ns, g.end_ns)] == [(20, 40), (60, 100)]
    # the first node's gap: the call [25, 200) had not returned, nothing of the graph ran yet
    assert g.wait_kind[0] == -1 and g.class_ns[0, int(Cause.DEPENDENCY)] == 0
    assert g.lateness_ns[1] == 40 * US  # the call [25, 200) µs ran past the whole gap
    assert g.wait_kind[1] == WaitKind.GRAPH and g.class_ns[1].tolist() == [0, 0, 0, 0, 0, 40 * US]
    c = card_for_gap(d, 1)
    assert c.cause == Cause.DEPENDENCY and c.smell == "graph ordering"
    assert (
        "the next op `n3` is a node of the HIP graph that `hipGraphLaunch` on thread `main` launched at 25.0 µs"
        in c.why
    )
    assert "the thread was inside `hipGraphLaunch` until 0.200 ms, past the gap's start" in c.why
    assert "already queued" not in c.why and "had returned" not in c.why and "spent" not in c.why
    assert "The CPU code around the launch call is not the cause." in c.why
    assert "debug_dump" in c.first_experiment and "(3 recorded nodes in this launch)" in c.first_experiment
    assert "capture the step" not in c.first_experiment
    assert "do not reach for graph capture: the step already runs as a HIP graph" in c.forbidden_step


def test_gap_between_nodes_of_a_running_cuda_graph_launch_names_no_rocm_submission():
    d = _graph_launch("cudaGraphLaunch")
    g = d.gaps
    assert g.wait_kind[1] == WaitKind.GRAPH and g.class_ns[1].tolist() == [0, 0, 0, 0, 0, 40 * US]
    c = card_for_gap(d, 1)
    assert "node of the CUDA graph that `cudaGraphLaunch`" in c.why
    assert "submitting" not in c.why and "submitting" not in c.first_experiment
    assert "cudaGraphDebugDotPrint" in c.first_experiment


def test_a_graph_first_node_just_after_eager_work_is_the_graph_starting():
    """vllm_decode_full graph_execution #1: an eager kernel, then 10.1 µs, then the first
    node of the queued `hipGraphLaunch`'s graph. The card advised dumping the graph to
    see what lay "between the next op and the node before it", of a CUDA graph; there is
    no node before it: this is the GPU starting a queued HIP graph."""
    d = diagnose(load(require(CORPUS / "tracelens" / "vllm_decode_full" / "graph_execution.json.gz")))
    g, t = d.gaps, d.trace
    i = 1
    assert g.dur_ns[i] == 10_081 and g.wait_kind[i] == WaitKind.GRAPH and t.name(int(g.launch[i])) == "hipGraphLaunch"
    prev, nxt = int(g.prev_op[i]), int(g.next_op[i])
    assert t.correlation[prev] != t.correlation[nxt]  # the op before it is eager work
    c = card_for_gap(d, i)
    assert "It is the first node of the HIP graph launched by `hipGraphLaunch`: 10.1 µs is the GPU starting" in c.why
    assert c.first_experiment.startswith("Nothing to find inside the graph: the next op is its first node")
    assert "CUDA graph" not in c.why + c.first_experiment


def test_a_correlation_reused_by_a_later_graph_launch_is_not_its_node():
    """An attack: two `cudaGraphLaunch` calls with one correlation id (at 290 µs, nodes
    at 320 and 330 µs; at 400 µs, node n2 at 450 µs). The gap [335, 450) was told as
    graph ordering "inside the graph", though n2's launch came 65 µs into it; and a
    node stamped before its launch call is no node of it either."""
    b = TraceBuilder()
    cpu = b.lane("1", "1", process_name="python3", thread_name="main")
    s7 = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    b.event(cpu, "cudaLaunchKernel", 0, 5 * US, Kind.LAUNCH, correlation=1)
    b.event(s7, "k0", 5 * US, 5 * US, Kind.KERNEL, correlation=1)
    b.event(cpu, "cudaGraphLaunch", 290 * US, 10 * US, Kind.LAUNCH, correlation=5)
    b.event(s7, "n0", 320 * US, 5 * US, Kind.KERNEL, correlation=5)
    b.event(s7, "n1", 330 * US, 5 * US, Kind.KERNEL, correlation=5)
    b.event(cpu, "cudaGraphLaunch", 400 * US, 30 * US, Kind.LAUNCH, correlation=5)
    b.event(s7, "n2", 450 * US, 5 * US, Kind.KERNEL, correlation=5)
    d = diagnose(b.build())
    g = d.gaps
    i = int(np.flatnonzero(g.start_ns == 335 * US)[0])
    assert g.end_ns[i] == 450 * US
    assert g.wait_kind[i] != WaitKind.GRAPH and g.class_ns[i, int(Cause.DEPENDENCY)] == 0
    assert "inside the graph" not in card_for_gap(d, i).why
