"""Queued idle (the next op was launched before the gap, L <= 0): sync when the next op
sat behind a stream wait the trace records, else unclassified with a card that says
what is known and where to look."""

from __future__ import annotations

import numpy as np
import pytest

from gapscope.analysis import Cause, diagnose
from gapscope.parsers import load
from gapscope.parsers.builder import TraceBuilder
from gapscope.parsers.model import Kind
from tests.conftest import CORPUS, require

US = 1_000


def _queued(wait_at_us=None, wait_lane="T", marker=False, launch_in_gap=False):
    """k1 on stream 7 [10, 60) µs launched at 0; k2 on stream 8 launched at 20 µs,
    starts at 90 µs: a 30 µs gap [60, 90) with the work queued 40 µs before it. No CPU
    event inside the gap. Optional stream wait at ``wait_at_us`` on the launching thread
    (``"T"``), on another thread (``"other"``), or as a Kineto record on stream 8."""
    b = TraceBuilder()
    cpu = b.lane("1", "1", process_name="python3", thread_name="main")
    other = b.lane("1", "2", process_name="python3", thread_name="side")
    s7 = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    s8 = b.lane("0", "8", is_gpu=True, device=0, stream=8)
    b.event(cpu, "cudaLaunchKernel", 0, 5 * US, Kind.LAUNCH, correlation=1)
    b.event(s7, "k1", 10 * US, 50 * US, Kind.KERNEL, correlation=1)
    if wait_at_us is not None:
        if marker:
            b.event(s8, "Stream Wait Event", wait_at_us * US, 2 * US, Kind.SYNC_MARKER, correlation=9)
        else:
            b.event(cpu if wait_lane == "T" else other, "cudaStreamWaitEvent", wait_at_us * US, 2 * US,
                    Kind.SYNC_CALL, correlation=9)
    b.event(cpu, "cudaLaunchKernel", 20 * US, 5 * US, Kind.LAUNCH, correlation=2)
    b.event(s8, "k2", 90 * US, 10 * US, Kind.KERNEL, correlation=2)
    if launch_in_gap:  # T launches later work during the gap: [70, 80) µs
        b.event(cpu, "cudaLaunchKernel", 70 * US, 10 * US, Kind.LAUNCH, correlation=3)
        b.event(s8, "k3", 100 * US, 10 * US, Kind.KERNEL, correlation=3)
    return diagnose(b.build())


def test_queued_behind_stream_wait_is_sync():
    d = _queued(wait_at_us=15)
    g = d.gaps
    assert len(g) == 1 and (g.start_ns[0], g.end_ns[0], g.lateness_ns[0]) == (60 * US, 90 * US, -40 * US)
    assert g.class_ns[0].tolist() == [30 * US, 0, 0, 0, 0]
    w = int(g.wait_event[0])
    assert d.trace.name(w) == "cudaStreamWaitEvent" and d.trace.start_ns[w] == 15 * US
    ev = d.evidence(0)
    assert [(e.name, e.cause, e.overlap_ns) for e in ev] == [("cudaStreamWaitEvent", Cause.SYNC, 30 * US)]
    c = d.card(0)
    assert c.cause == Cause.SYNC and c.smell == "sync cliff"
    assert "queued behind the stream wait `cudaStreamWaitEvent` (enqueued by thread `main`) and waited 30.0 µs" in c.why
    assert "already queued 40.0 µs before the GPU went idle" in c.why
    assert "nothing recorded" not in c.why


def test_kineto_stream_wait_record_on_the_next_stream_is_sync():
    d = _queued(wait_at_us=15, marker=True)
    g = d.gaps
    assert g.class_ns[0].tolist() == [30 * US, 0, 0, 0, 0]
    assert d.trace.name(int(g.wait_event[0])) == "Stream Wait Event"


@pytest.mark.parametrize("kw", [
    {},                                   # no wait at all
    {"wait_at_us": 15, "wait_lane": "other"},  # a wait from another thread: maybe another stream
    {"wait_at_us": 30},                   # enqueued after the next op's launch: not before it in the stream
])
def test_queued_without_evidence_stays_unclassified_and_says_so(kw):
    d = _queued(**kw)
    g = d.gaps
    assert g.class_ns[0].tolist() == [0, 0, 0, 0, 30 * US] and g.wait_event[0] == -1
    c = d.card(0)
    assert c.cause == Cause.UNCLASSIFIED
    assert ("the next kernel was already queued 40.0 µs before the GPU went idle and nothing recorded on the CPU "
            "explains the wait: look at other streams of this device and at other ranks") in c.why
    assert "uninstrumented" not in c.why  # the quiet CPU is no explanation of queued work
    assert "cuda_sync" in c.first_experiment and "already queued" in c.forbidden_step
    assert "Capture again with CPU activity" not in c.first_experiment


def test_launching_later_work_does_not_explain_queued_idle():
    """The next op was queued 40 µs before the gap; T launching a later kernel during
    the gap is no launch overhead (docs/definitions.md: L <= 0, the GPU waited on
    something else): unclassified, or sync behind a recorded stream wait."""
    g = _queued(launch_in_gap=True).gaps
    assert g.lateness_ns[0] == -40 * US
    assert g.class_ns[0].tolist() == [0, 0, 0, 0, 30 * US]
    g = _queued(wait_at_us=15, launch_in_gap=True).gaps
    assert g.class_ns[0].tolist() == [30 * US, 0, 0, 0, 0]


def test_rank0_waits_and_graph_gap():
    d = diagnose(load(require(CORPUS / "hta" / "rank0.json.gz")))
    t, g = d.trace, d.gaps
    w = np.flatnonzero(g.wait_event >= 0)
    assert w.size > 0
    for i in w:
        k = int(g.wait_event[i])
        launch, prev_launch = int(g.launch[i]), int(d._launches[g.prev_op[i]])
        assert t.name(k) == "cudaStreamWaitEvent" and t.lane[k] == t.lane[launch]
        assert t.start_ns[prev_launch] <= t.start_ns[k] <= t.start_ns[launch]
        assert g.lateness_ns[i] <= 0 and g.class_ns[i, int(Cause.UNCLASSIFIED)] == 0
    # the 70.5 ms gap inside CUDA-graph work: queued 66.3 ms before, no wait recorded
    i = 2261
    assert g.dur_ns[i] == 70_533 * US and g.lateness_ns[i] == -66_324 * US and g.wait_event[i] == -1
    assert Cause(g.cause[i]) == Cause.UNCLASSIFIED
    c = d.card(i)
    assert "(by `cudaGraphLaunch`: it is a node of a CUDA graph); for 70.528 ms of it nothing recorded on the CPU explains the wait" in c.why


def test_rank0_group_card_unexplained_is_of_the_occurrence_described():
    """The group card names the median occurrence's evidence: its unexplained ns are
    that occurrence's, not the group's total (which read 'for 279.347 ms of it' in a
    69.742 ms sentence)."""
    d = diagnose(load(require(CORPUS / "hta" / "rank0.json.gz")))
    g = d.gaps
    grp = d.groups[int(g.group[2261])]
    c = d.group_card(grp.id)
    occ = [int(i) for i in grp.gap_indices if g.dur_ns[i] == grp.median_ns]
    assert len(occ) == 1
    u = int(g.class_ns[occ[0], int(Cause.UNCLASSIFIED)])
    assert f"for {u / 1e6:.3f} ms of it nothing recorded on the CPU explains the wait" in c.why
    assert c.why.startswith(f"For {grp.median_ns / 1e6:.3f} ms per step (median; it recurs in 5 of 5 steps)")
