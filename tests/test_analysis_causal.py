"""Planted causes for every rule of the causal model (docs/definitions.md, "Starved or
blocked, first" and "Cause classes"): each trace is built so the true cause is known,
and the expected ns are computed by hand in the comments."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gapscope.analysis import Cause, diagnose
from gapscope.analysis.card import card_for_gap
from gapscope.analysis.types import WaitKind
from gapscope.parsers.builder import TraceBuilder
from gapscope.parsers.model import CopyKind, Kind

US = 1_000
CPU_SIDE = [int(Cause.SYNC), int(Cause.LAUNCH), int(Cause.HOST)]


def _lanes(b: TraceBuilder, devices: int = 1):
    t = b.lane("1", "1", process_name="python3", thread_name="main")
    side = b.lane("1", "2", process_name="python3", thread_name="side")
    gpus = [b.lane(str(d), "7", is_gpu=True, device=d, stream=7) for d in range(devices)]
    return t, side, gpus


def _k2_queued_after_k1():
    """(builder, thread lane, GPU lane) with k1 [10, 50) µs launched at 0 and k2's
    launch call [20, 25) already returned: k2 (added by the caller, correlation 2) is
    queued when the GPU goes idle at 50 µs."""
    b = TraceBuilder()
    t, _side, (g0,) = _lanes(b)
    b.event(t, "cudaLaunchKernel", 0, 5 * US, Kind.LAUNCH, correlation=1)
    b.event(g0, "k1", 10 * US, 40 * US, Kind.KERNEL, correlation=1)
    b.event(t, "cudaLaunchKernel", 20 * US, 5 * US, Kind.LAUNCH, correlation=2)
    return b, t, g0


def test_sync_that_drains_the_queue_then_host_work_is_one_sync_cliff():
    """k1 [10, 100) launched at 0; T blocks in cudaStreamSynchronize [20, 101) (began
    while k1 ran, returned as it ended), then 199 µs of `postprocess` [101, 300), then
    launches k2 [300, 305) → k2 at 310. Gap [100, 310): the sync cliff [100, 300) = 200
    µs sync (the host work after the wait is its cost), the launch path [300, 310) =
    10 µs launch."""
    b = TraceBuilder()
    t, _side, (g0,) = _lanes(b)
    b.event(t, "cudaLaunchKernel", 0, 5 * US, Kind.LAUNCH, correlation=1)
    b.event(g0, "k1", 10 * US, 90 * US, Kind.KERNEL, correlation=1)
    b.event(t, "cudaStreamSynchronize", 20 * US, 81 * US, Kind.SYNC_CALL)
    b.event(t, "postprocess", 101 * US, 199 * US, Kind.CPU_OP)
    b.event(t, "cudaLaunchKernel", 300 * US, 5 * US, Kind.LAUNCH, correlation=2)
    b.event(g0, "k2", 310 * US, 50 * US, Kind.KERNEL, correlation=2)
    d = diagnose(b.build())
    g = d.gaps
    assert len(g) == 1 and (g.start_ns[0], g.end_ns[0]) == (100 * US, 310 * US)
    assert not g.queued[0] and g.lateness_ns[0] == 205 * US
    assert g.class_ns[0].tolist() == [200 * US, 0, 10 * US, 0, 0, 0]
    c = card_for_gap(d, 0)
    assert c.cause == Cause.SYNC and c.smell == "sync cliff"
    assert "the sync cliff (81.0 µs blocked in `cudaStreamSynchronize`" not in c.why  # only 1 µs is in the gap
    assert "in the sync cliff (1.0 µs blocked in `cudaStreamSynchronize`, then 0.199 ms of host work after it" in c.why
    assert "already queued" not in c.why


def test_queued_op_waiting_on_an_event_from_another_device_is_dependency():
    """Device 0: k1 [10, 50) launched at 0. T enqueues cudaStreamWaitEvent at 15 (an event
    of device 1, whose kernel runs [0, 200)), then launches k2 [20, 25) → k2 on device 0 at
    200. Gap [50, 200) on device 0: queued 25 µs before the gap; all 150 µs dependency
    behind the stream wait, although T is busy with host work throughout."""
    b = TraceBuilder()
    t, _side, (g0, g1) = _lanes(b, devices=2)
    b.event(t, "cudaLaunchKernel", 0, 5 * US, Kind.LAUNCH, correlation=1)
    b.event(g0, "k1", 10 * US, 40 * US, Kind.KERNEL, correlation=1)
    b.event(g1, "peer_kernel", 0, 200 * US, Kind.KERNEL)
    b.event(t, "cudaStreamWaitEvent", 15 * US, 2 * US, Kind.SYNC_CALL)
    b.event(t, "cudaLaunchKernel", 20 * US, 5 * US, Kind.LAUNCH, correlation=2)
    b.event(t, "tokenize", 30 * US, 300 * US, Kind.CPU_OP)
    b.event(g0, "k2", 200 * US, 10 * US, Kind.KERNEL, correlation=2)
    d = diagnose(b.build())
    g = d.gaps
    i = int(np.flatnonzero(g.device == 0)[0])
    assert (g.start_ns[i], g.end_ns[i], g.lateness_ns[i]) == (50 * US, 200 * US, -25 * US)
    assert g.queued[i] and g.wait_kind[i] == WaitKind.STREAM_WAIT
    assert g.class_ns[i].tolist() == [0, 0, 0, 0, 0, 150 * US]
    c = card_for_gap(d, i)
    assert "tokenize" not in c.why and "tokenize" not in c.first_experiment


def test_blocking_sync_on_a_thread_that_does_not_launch_is_not_the_cause():
    """T launches; thread `side` sits in cudaDeviceSynchronize over the whole gap while T
    runs 150 µs of `collate` and launches late. Gap [60, 215): host 150 (collate), launch
    5 (the call [210, 215)); no sync: the wait is on another thread."""
    b = TraceBuilder()
    t, side, (g0,) = _lanes(b)
    b.event(t, "cudaLaunchKernel", 0, 5 * US, Kind.LAUNCH, correlation=1)
    b.event(g0, "k1", 10 * US, 50 * US, Kind.KERNEL, correlation=1)
    b.event(side, "cudaDeviceSynchronize", 20 * US, 300 * US, Kind.SYNC_CALL)
    b.event(t, "collate", 60 * US, 150 * US, Kind.CPU_OP)
    b.event(t, "cudaLaunchKernel", 210 * US, 5 * US, Kind.LAUNCH, correlation=2)
    b.event(g0, "k2", 215 * US, 10 * US, Kind.KERNEL, correlation=2)
    g = diagnose(b.build()).gaps
    assert (g.start_ns[0], g.end_ns[0]) == (60 * US, 215 * US)
    assert g.class_ns[0].tolist() == [0, 0, 5 * US, 150 * US, 0, 0]


def test_poll_loop_of_non_blocking_queries_is_host_work():
    """T polls cudaEventQuery 10 × 10 µs over [60, 160), then launches [160, 165) → k2 at
    165. The queries return at once: 100 µs host, 5 µs launch, no sync."""
    b = TraceBuilder()
    t, _side, (g0,) = _lanes(b)
    b.event(t, "cudaLaunchKernel", 0, 5 * US, Kind.LAUNCH, correlation=1)
    b.event(g0, "k1", 10 * US, 50 * US, Kind.KERNEL, correlation=1)
    for k in range(10):
        b.event(t, "cudaEventQuery", (60 + 10 * k) * US, 10 * US, Kind.SYNC_CALL)
    b.event(t, "cudaLaunchKernel", 160 * US, 5 * US, Kind.LAUNCH, correlation=2)
    b.event(g0, "k2", 165 * US, 10 * US, Kind.KERNEL, correlation=2)
    d = diagnose(b.build())
    g = d.gaps
    assert g.class_ns[0].tolist() == [0, 0, 5 * US, 100 * US, 0, 0]
    assert "blocked" not in card_for_gap(d, 0).why


def test_queued_dtod_copies_are_copy_and_the_rest_dependency():
    """k2 queued (launch [20, 25)) before the gap [50, 150); the GPU copies DtoD [60, 90)
    and memsets [100, 104): copy 34 µs, dependency 66 µs; the advice is to fuse or remove
    the copies, not a .cpu() round trip."""
    b, t, g0 = _k2_queued_after_k1()
    b.event(g0, "Memcpy DtoD (Device -> Device)", 60 * US, 30 * US, Kind.MEMCPY, bytes=1 << 20, copy_kind=CopyKind.D2D)
    b.event(g0, "Memset (Device)", 100 * US, 4 * US, Kind.MEMSET, bytes=4096)
    b.event(g0, "k2", 150 * US, 10 * US, Kind.KERNEL, correlation=2)
    d = diagnose(b.build())
    g = d.gaps
    assert g.queued[0] and g.class_ns[0].tolist() == [0, 34 * US, 0, 0, 0, 66 * US]
    assert Cause(g.cause[0]) == Cause.DEPENDENCY and Cause(g.secondary[0]) == Cause.COPY


def test_many_small_queued_copies_are_counted_and_batched():
    """k2 queued before the gap [50, 100) µs; the GPU runs eight 5 µs DtoD copies of
    1 KiB back to back [55, 95): copy 40 µs, dependency 10 µs. The sentence counts all
    eight (not "the copy"), with their median and bytes, and the advice is to batch
    them (their time is the cost per copy); mi300 resnet #6 ran 57 such copies and the
    card named one."""
    b, t, g0 = _k2_queued_after_k1()
    for k in range(8):
        b.event(g0, "Memcpy DtoD", (55 + 5 * k) * US, 5 * US, Kind.MEMCPY, bytes=1024, copy_kind=CopyKind.D2D)
    b.event(g0, "k2", 100 * US, 10 * US, Kind.KERNEL, correlation=2)
    d = diagnose(b.build())
    g = d.gaps
    assert g.class_ns[0].tolist() == [0, 40 * US, 0, 0, 0, 10 * US]
    assert len(d.gpu_copies(0)) == 8
    c = card_for_gap(d, 0)
    assert c.cause == Cause.COPY
    assert "40.0 µs copying (the GPU ran 8 copies `Memcpy DtoD`, 5.0 µs median each, 8.0 KiB in all)" in c.why
    assert c.first_experiment.startswith(
        "Batch the 8 short device-to-device copies `Memcpy DtoD` (5.0 µs median each, 40.0 µs in all): each "
        "this short, their time is the cost per copy, not bandwidth."
    )


def test_one_large_copy_among_short_ones_is_named_and_not_batched():
    """The same gap with one 30 µs DtoD copy of 8 MiB [55, 85) and three 4 µs ones of
    1 KiB [85, 97): copy 42 µs, dependency 8 µs. The copies differ in length, so no
    median is quoted: the largest (30 µs, 8 MiB) and the three short ones (12 µs in
    all); it holds most of the copy time, so the advice is about it, not batching
    (hta test.json.gz #328: 88 copies, the largest 0.608 ms of 1.592 ms)."""
    b, t, g0 = _k2_queued_after_k1()
    b.event(g0, "Memcpy DtoD", 55 * US, 30 * US, Kind.MEMCPY, bytes=8 << 20, copy_kind=CopyKind.D2D)
    for k in range(3):
        b.event(g0, "Memcpy DtoD", (85 + 4 * k) * US, 4 * US, Kind.MEMCPY, bytes=1024, copy_kind=CopyKind.D2D)
    b.event(g0, "k2", 100 * US, 10 * US, Kind.KERNEL, correlation=2)
    d = diagnose(b.build())
    assert d.gaps.class_ns[0].tolist() == [0, 42 * US, 0, 0, 0, 8 * US]
    c = card_for_gap(d, 0)
    assert (
        "42.0 µs copying (the GPU ran 4 copies `Memcpy DtoD`, 8.0 MiB in all; the largest 30.0 µs, 8.0 MiB; "
        "3 took 20.0 µs or less each, 12.0 µs in all)"
    ) in c.why
    assert c.first_experiment.startswith("Fuse or remove the device-to-device copy `Memcpy DtoD` (8.0 MiB)")


def test_short_copies_of_two_kinds_are_batched_by_kind():
    """Four 4 µs DtoD copies and four 8 µs HtoD copies [55, 103) µs in a queued gap
    [50, 105): the batching advice names both kinds with their counts and time, and a
    remedy for each (vllm piecewise #0 said "10 short host-to-device copies" where 6
    were device-to-device)."""
    b, t, g0 = _k2_queued_after_k1()
    at = 55
    for k in range(4):
        b.event(g0, "Memcpy DtoD", at * US, 4 * US, Kind.MEMCPY, bytes=64, copy_kind=CopyKind.D2D)
        b.event(g0, "Memcpy HtoD", (at + 4) * US, 8 * US, Kind.MEMCPY, bytes=64, copy_kind=CopyKind.H2D)
        at += 12
    b.event(g0, "k2", 105 * US, 10 * US, Kind.KERNEL, correlation=2)
    d = diagnose(b.build())
    assert d.gaps.class_ns[0].tolist() == [0, 48 * US, 0, 0, 0, 7 * US]
    first = card_for_gap(d, 0).first_experiment
    assert first.startswith(
        "Batch the 8 short copies (4 host-to-device copies, 32.0 µs; 4 device-to-device copies, 16.0 µs): each "
        "this short, their time is the cost per copy, not bandwidth. For the host-to-device copies, use one "
        "pinned flat buffer"
    )
    assert "For the device-to-device copies, use one copy of a flat buffer" in first


def test_two_copies_of_different_lengths_are_each_named_with_the_threads_copy_call():
    """A starved gap [10, 300) µs: T sits in cudaMemcpyAsync [20, 260), whose GPU copies
    run [60, 250) (190 µs, 8 MiB, pageable) and [252, 253) (1 µs, 256 B). A median of
    two would read 95.5 µs each: both are named (resnet50 worker0 #0). Copy is GPU copy
    time only: the 49 µs the thread spent in the call outside the GPU's copies are host
    work (the call returned after its copy, so it blocked, but it began after the GPU
    went idle: it drained no queue)."""
    b = TraceBuilder()
    t, _side, (g0,) = _lanes(b)
    b.event(t, "cudaLaunchKernel", 0, 2 * US, Kind.LAUNCH, correlation=1)
    b.event(g0, "k1", 3 * US, 7 * US, Kind.KERNEL, correlation=1)
    b.event(t, "cudaMemcpyAsync", 20 * US, 240 * US, Kind.MEMCPY_CALL, correlation=2)
    b.event(
        g0,
        "Memcpy HtoD",
        60 * US,
        190 * US,
        Kind.MEMCPY,
        bytes=8 << 20,
        copy_kind=CopyKind.H2D,
        pageable=True,
        correlation=2,
    )
    b.event(g0, "Memcpy HtoD", 252 * US, 1 * US, Kind.MEMCPY, bytes=256, copy_kind=CopyKind.H2D, pageable=True)
    b.event(t, "cudaLaunchKernel", 290 * US, 5 * US, Kind.LAUNCH, correlation=3)
    b.event(g0, "k2", 300 * US, 10 * US, Kind.KERNEL, correlation=3)
    d = diagnose(b.build())
    i = int(np.argmax(d.gaps.dur_ns))
    cn = d.gaps.class_ns[i].tolist()
    assert (int(d.gaps.start_ns[i]), int(d.gaps.end_ns[i])) == (10 * US, 300 * US)
    assert cn[int(Cause.COPY)] == 191 * US
    # [10, 20) untraced, [20, 60) and [250, 252) and [253, 260) in the call, [260, 290) untraced
    assert cn[int(Cause.HOST)] == (10 + 40 + 2 + 7 + 30) * US and cn[int(Cause.SYNC)] == 0
    why = card_for_gap(d, i).why
    assert (
        "0.191 ms copying (running 2 copies `Memcpy HtoD`, 0.190 ms and 1.0 µs, 8.0 MiB in all, from pageable "
        "host memory)"
    ) in why, why
    assert "49.0 µs in `cudaMemcpyAsync`" in why, why


def test_one_tiny_dtod_copy_is_said_to_cost_its_fixed_time():
    """A single 4 B DtoD copy [60, 64) µs in a queued gap: one copy named as such, and the
    advice says its time is the cost of one copy, not bandwidth (hta sampled #551)."""
    b, t, g0 = _k2_queued_after_k1()
    b.event(g0, "Memcpy DtoD", 50 * US, 4 * US, Kind.MEMCPY, bytes=4, copy_kind=CopyKind.D2D)
    b.event(g0, "k2", 56 * US, 10 * US, Kind.KERNEL, correlation=2)
    d = diagnose(b.build())
    c = card_for_gap(d, 0)
    assert c.cause == Cause.COPY
    assert "4.0 µs copying (the GPU ran the copy `Memcpy DtoD`, 4 B)" in c.why
    assert "at 4 B its time is the cost of one copy, not bandwidth" in c.first_experiment


def test_a_memset_is_said_to_write_a_constant_and_equal_copies_are_counted_in_the_advice():
    """A queued gap [50, 56) µs holding one 4 µs memset: the advice speaks of a constant
    being written, not of data moved; three equal 8 µs DtoD copies of 1 MiB in [50, 76)
    are one advice about the three (hta test #2189 had three copies of 0.649 ms)."""
    b, t, g0 = _k2_queued_after_k1()
    b.event(g0, "Memset (Device)", 51 * US, 4 * US, Kind.MEMSET, bytes=1 << 20)
    b.event(g0, "k2", 56 * US, 10 * US, Kind.KERNEL, correlation=2)
    first = card_for_gap(diagnose(b.build()), 0).first_experiment
    assert first.startswith("Fuse or remove the memset `Memset (Device)` (1.0 MiB): it is the GPU writing a constant")
    b, t, g0 = _k2_queued_after_k1()
    for k in range(3):
        b.event(g0, "Memcpy DtoD", (51 + 8 * k) * US, 8 * US, Kind.MEMCPY, bytes=1 << 20, copy_kind=CopyKind.D2D)
    b.event(g0, "k2", 76 * US, 10 * US, Kind.KERNEL, correlation=2)
    c = card_for_gap(diagnose(b.build()), 0)
    assert "(the GPU ran 3 copies `Memcpy DtoD`, 8.0 µs each, 3.0 MiB in all)" in c.why
    assert c.first_experiment.startswith(
        "Fuse or remove the 3 device-to-device copies `Memcpy DtoD` (1.0 MiB each): they are the GPU moving data"
    )


def test_copies_on_several_streams_at_once_are_not_added_up():
    """Eight 15 µs HtoD copies run at once on eight streams [52, 67) µs in a queued gap
    [50, 70): their time in all is 15 µs, not 8 x 15 = 120 µs (an attacker's trace read
    "0.120 ms in all" in a 20 µs gap)."""
    b = TraceBuilder()
    t, _side, (g0,) = _lanes(b)
    streams = [b.lane("0", str(10 + k), is_gpu=True, device=0, stream=10 + k) for k in range(8)]
    b.event(t, "cudaLaunchKernel", 0, 5 * US, Kind.LAUNCH, correlation=1)
    b.event(g0, "k1", 10 * US, 40 * US, Kind.KERNEL, correlation=1)
    b.event(t, "cudaLaunchKernel", 20 * US, 5 * US, Kind.LAUNCH, correlation=2)
    for ln in streams:
        b.event(ln, "Memcpy HtoD", 52 * US, 15 * US, Kind.MEMCPY, bytes=512, copy_kind=CopyKind.H2D)
    b.event(g0, "k2", 70 * US, 10 * US, Kind.KERNEL, correlation=2)
    d = diagnose(b.build())
    assert d.gaps.class_ns[0].tolist() == [0, 15 * US, 0, 0, 0, 5 * US]
    c = card_for_gap(d, 0)
    assert "15.0 µs copying (the GPU ran 8 copies `Memcpy HtoD`, 15.0 µs median each, 4.0 KiB in all)" in c.why
    assert "(15.0 µs median each, 15.0 µs in all)" in c.first_experiment


def test_host_advice_claims_no_empty_queue_when_the_next_op_has_no_launch():
    """A host gap whose next kernel has no linked launch call: the trust note says its
    queueing is unknown, so the forbidden step does not say "the GPU has nothing
    queued" (mtia_rank_0 said both on 873 cards)."""
    b = TraceBuilder()
    t, _side, (g0,) = _lanes(b)
    b.event(t, "cudaLaunchKernel", 0, 5 * US, Kind.LAUNCH, correlation=1)
    b.event(g0, "k1", 10 * US, 10 * US, Kind.KERNEL, correlation=1)
    b.event(t, "tokenize", 25 * US, 200 * US, Kind.CPU_OP)
    b.event(g0, "k2", 230 * US, 10 * US, Kind.KERNEL)
    d = diagnose(b.build())
    i = int(np.argmax(d.gaps.dur_ns))
    c = card_for_gap(d, i)
    assert c.cause == Cause.HOST and "unknown" in c.why
    assert "nothing queued" not in c.forbidden_step
    assert c.forbidden_step.startswith("Do not reach for cuBLAS settings or a faster kernel: no kernel ran")


def test_warm_up_gap_is_one_time_and_left_out_of_groups_budget_and_what_if():
    """Three steps `step` [0, 1000), [1000, 2000), [2000, 3000) µs; each has k [10, 100)
    and k [800, 900) with host work between; step 0 also has cudaMalloc [100, 700): its
    gap [100, 800) is a one-time cost, the gaps of steps 1 and 2 recur."""
    b = TraceBuilder()
    t, _side, (g0,) = _lanes(b)
    corr = 0
    for s in range(3):
        base = s * 1000 * US
        b.event(t, "step", base, 1000 * US, Kind.ANNOTATION)
        for k0 in (10, 800):
            corr += 1
            b.event(t, "cudaLaunchKernel", base + (k0 - 6) * US, 5 * US, Kind.LAUNCH, correlation=corr)
            b.event(g0, f"k{k0}", base + k0 * US, 90 * US, Kind.KERNEL, correlation=corr)
        b.event(
            t, "cudaMalloc" if s == 0 else "prepare", base + 100 * US, 600 * US, Kind.RUNTIME if s == 0 else Kind.CPU_OP
        )
    d = diagnose(b.build())
    g = d.gaps
    first = int(np.flatnonzero(g.start_ns == 100 * US)[0])
    assert g.one_time[first] and g.group[first] == -1
    others = np.flatnonzero((g.start_ns % (1000 * US) == 100 * US) & (g.start_ns > 1000 * US))
    assert others.size == 2 and not g.one_time[others].any() and (g.group[others] >= 0).all()
    assert card_for_gap(d, first).smell == "one-time cost (warm-up)"
    assert "warm up before profiling" in card_for_gap(d, first).first_experiment
    # budget: the median step's idle (1000 - 180 µs of kernels = 820 µs) split as the
    # typical steps (all three idle 820 µs) split theirs, step 0 left out: it holds the
    # warm-up. Inside [1000, 3000) µs: gap [890, 1010) its launch path [1004, 1010)
    # (6 launch) and 4 of the 114 µs head (host); [1100, 1800) 694 host + 6 launch;
    # [1890, 2010) 114 + 6; [2100, 2800) 694 + 6; [2890, 3000) 110 host is the capture's
    # trailing edge (issue 47: in no per-step figure):
    # host 4 + 694 + 114 + 694 = 1506 µs, launch 24 µs, of 1530 µs
    b_ = d.budget
    assert b_.idle_ns == 820 * US
    assert (b_.typical_steps, b_.warm_up_steps, b_.one_time_idle_ns) == (2, 1, 0)
    assert b_.class_idle_ns["host"] == 807_137  # 820 µs * 1506 / 1530
    assert b_.class_idle_ns["launch"] == 12_863  # 820 µs * 24 / 1530
    assert sum(b_.class_idle_ns.values()) == b_.idle_ns
    w = d.what_if(gaps=[first])
    assert w.removed_ns == 0  # a one-time gap is not in the budget, so removing it changes nothing


def test_when_every_typical_step_holds_warm_up_its_share_is_one_time_idle():
    """Steps [0, 1000), [1000, 2000) µs idle 820 µs each around cudaMalloc [100, 700)
    (one-time); step [2000, 3000) holds kernels [2010, 2100) and [2120, 2990): it idles
    40 µs, no typical step. Both typical steps hold warm-up, so none is left out: the
    one-time gaps' share is one-time idle, and the classes with it add up to the
    median step's idle (with the third step out of the split, the classes and the
    one-time share read 0)."""
    b = TraceBuilder()
    t, _side, (g0,) = _lanes(b)
    corr = 0
    for s in range(3):
        base = s * 1000 * US
        b.event(t, "step", base, 1000 * US, Kind.ANNOTATION)
        kernels = ((10, 90), (800, 90)) if s < 2 else ((10, 90), (120, 870))
        for k0, dur in kernels:
            corr += 1
            b.event(t, "cudaLaunchKernel", base + (k0 - 6) * US, 5 * US, Kind.LAUNCH, correlation=corr)
            b.event(g0, f"k{k0}", base + k0 * US, dur * US, Kind.KERNEL, correlation=corr)
        if s < 2:
            b.event(t, "cudaMalloc", base + 100 * US, 600 * US, Kind.RUNTIME)
    d = diagnose(b.build())
    b_ = d.budget
    assert b_.idle_ns == 820 * US  # the median of 820, 820 and 40 µs
    assert (b_.typical_steps, b_.warm_up_steps) == (2, 0)
    assert b_.one_time_idle_ns > 0
    assert abs(sum(b_.class_idle_ns.values()) + b_.one_time_idle_ns - b_.idle_ns) <= len(Cause)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 400),
            st.integers(1, 60),
            st.integers(-30, 80),
            st.sampled_from(["aten::add", "cudaStreamSynchronize", "cudaEventQuery", "cudaMemcpyAsync", "tokenize"]),
        ),
        min_size=2,
        max_size=12,
    )
)
def test_queued_gaps_never_blame_the_cpu(plan):
    """Random kernel chains whose launch calls end before or after the previous kernel:
    whatever the CPU does, a queued gap holds only copy and dependency ns, a starved one
    dependency only for the op's time in the queue after its late call returned, and
    every row sums to its gap."""
    b = TraceBuilder()
    t, _side, (g0,) = _lanes(b)
    now = 0
    names = {
        "cudaStreamSynchronize": Kind.SYNC_CALL,
        "cudaEventQuery": Kind.SYNC_CALL,
        "cudaMemcpyAsync": Kind.MEMCPY_CALL,
    }
    for k, (gap, dur, launch_shift, cpu) in enumerate(plan):
        start = now + gap * US
        call_end = start - launch_shift * US  # > start when the call came late
        call_start = max(call_end - 5 * US, 0)
        b.event(t, "cudaLaunchKernel", call_start, max(call_end - call_start, 1), Kind.LAUNCH, correlation=k + 1)
        b.event(t, cpu, max(start - 20 * US, 0), 15 * US, names.get(cpu, Kind.CPU_OP))
        b.event(g0, f"k{k}", max(start, call_start), dur * US, Kind.KERNEL, correlation=k + 1)
        now = max(start, call_start) + dur * US
    d = diagnose(b.build())
    g = d.gaps
    assert (g.class_ns.sum(axis=1) == g.dur_ns).all()
    q = g.queued
    assert (g.class_ns[q][:, CPU_SIDE] == 0).all() and (g.class_ns[q][:, int(Cause.UNCLASSIFIED)] == 0).all()
    # a late gap holds dependency only for the op's time in the queue past the launch
    # path's latency (``queued_until_ns`` to the gap end)
    assert (g.class_ns[~q][:, int(Cause.DEPENDENCY)] <= (g.end_ns - g.queued_until_ns)[~q]).all()
    tail = g.end_ns - (g.start_ns + g.lateness_ns)
    assert ((g.queued_until_ns < g.end_ns) == (~q & (g.launch >= 0) & (tail > d.params.queue_latency_max_ns))).all()
    assert (q == ((g.launch >= 0) & (g.lateness_ns <= 0))).all()


# ------------------------------------------------- the examples, from the corpus
from gapscope import sample_traces
from gapscope.parsers import load
from gapscope.units import fmt_dur
from tests.conftest import CORPUS, require


def _diag(rel: str):
    return diagnose(load(require(CORPUS / rel)))


def test_rank0_poll_and_enqueued_wait_are_no_sync():
    """hta/rank0 gap #4854 (5.75 ms) read "sync (100%)" from 6 µs of cudaEventQuery (a
    poll) and 3 µs of cudaStreamWaitEvent (an enqueue): the op was queued, so it is one
    dependency behind the stream wait."""
    d = _diag("hta/rank0.json.gz")
    g = d.gaps
    i = 4854
    assert g.dur_ns[i] == 5_750_000 and g.queued[i]
    assert g.class_ns[i].tolist() == [0, 0, 0, 0, 0, 5_750_000] and g.wait_kind[i] == WaitKind.STREAM_WAIT
    c = card_for_gap(d, i)
    assert c.smell == "cross-stream wait" and "blocked in" not in c.why and "cudaEventQuery" not in c.why


def test_mi300_unlinked_collective_is_named_and_the_advice_fits_a_trace_with_cpu_events():
    d = _diag("tracelens/mi300/resnet_act_checkpoint.json.gz")
    g = d.gaps
    i = int(d.order_by_size()[0])
    c = card_for_gap(d, i)
    assert d.trace.name(int(g.next_op[i])).startswith("ncclDevKernel_Generic") and g.launch[i] < 0
    # its correlation id (4079) is below every runtime call the trace recorded (the
    # first hipLaunchKernel has 5179): launched before the trace began, so queued
    assert "`ncclDevKernel_Generic" in c.why and "launched before the trace began (its correlation id 4079" in c.why
    assert g.cause[i] == Cause.DEPENDENCY and "What the CPU did meanwhile is not the cause." in c.why
    assert "Capture again with CPU activity" not in c.first_experiment and "collective" in c.first_experiment
    # the collective is itself the queued op: its 8.531 ms kernel is where it waits for its
    # peers (it cannot end before the last one arrives); the 2.161 ms before it starts is not
    assert int(g.dur_ns[i]) == 2_160_549 and int(d.trace.dur_ns[int(g.next_op[i])]) == 8_530_789
    assert "The queued op is itself a collective" in c.why
    assert "its wait for its peers is inside its own 8.531 ms run, not in this gap" in c.why
    assert "waited on the collective" not in c.why


def test_a_gap_after_a_collective_has_ended_is_not_its_wait():
    """hta sampled_rank-0: the NCCL SendRecv kernel on stream 203 ends as the device goes
    idle for 1.593 ms; the next kernel, on stream 7, was launched 100 ms before. The
    collective had finished, so the card must not say the op waited on it."""
    d = _diag("hta/sampled_rank-0.json.gz")
    g, t = d.gaps, d.trace
    rows = np.flatnonzero((g.wait_kind == WaitKind.COLLECTIVE) & (g.dur_ns == 1_593_000))
    assert rows.size == 1
    i = int(rows[0])
    prev = int(g.prev_op[i])
    assert t.name(prev).startswith("ncclKernel_SendRecv") and t.start_ns[prev] + t.dur_ns[prev] == g.start_ns[i]
    assert t.lanes[int(t.lane[prev])].stream == 203 and t.lanes[int(t.lane[int(g.next_op[i])])].stream == 7
    c = card_for_gap(d, i)
    assert "before it had ended when the gap began" in c.why and "waited on the collective" not in c.why
    # the file records launches and copies, no stream-wait call: the card says what that leaves
    assert c.why.count("not linked to it here (the trace records no stream-wait calls)") == 1
    assert "is mostly on other work" in c.why and "the trace records no kernel on the GPU" in c.why
    assert c.smell == "queued next to a collective"


def test_a_slow_first_call_that_comes_back_is_no_first_use():
    """An ATen op called 40 times, 50 µs each, but 2 ms at its first call: first use
    (autotuning). When the same 2 ms call comes back at the first call of each of four
    steps (hta/df_index_resolver's `aten::clone`) or all through the run (mtia_rank_0's
    round trips in `aten::_copy_from`), it is the step's own cost, not warm-up."""
    from gapscope.analysis.classify import SLOW_LAUNCH_NS
    from gapscope.analysis.evidence_kinds import one_time_mask

    for slow_at, one_time in (((0,), True), ((0, 10, 20, 30), False), ((0, 35), False)):
        b = TraceBuilder()
        cpu = b.lane("1", "1", process_name="python3", thread_name="main")
        t = 0
        for j in range(40):
            dur = 2000 if j in slow_at else 50
            b.event(cpu, "aten::clone", t * US, dur * US, Kind.CPU_OP)
            t += dur + 10
        tr = b.build()
        m = one_time_mask(tr, SLOW_LAUNCH_NS)
        assert m.tolist() == [one_time] + [False] * 39, slow_at


def test_resnet50_first_use_costs_are_one_time():
    """The 1.56 s first cudaLaunchKernel and the 1.44 s first cudnn convolution (stream
    and event creation inside it) are warm-up, not steady-state launch or host work."""
    d = _diag("kineto/resnet50_autograd_api_num_workers_0/worker0.pt.trace.json.gz")
    g = d.gaps
    for i in d.order_by_size()[:3].tolist():
        if g.dur_ns[i] > 1_000_000_000:
            assert g.one_time[i] and g.group[i] == -1, i
            c = card_for_gap(d, i)
            assert "one-time" in c.smell and "nothing recorded on the CPU explains" not in c.why


def test_decode_graph_launch_is_launch_with_graph_advice():
    """sample decode_graph: the 12 µs launch of the fused decode graph before the GPU
    starts is launch (what remains at batch 1), and the advice is not "capture a graph"."""
    d = diagnose(load(sample_traces.path("decode_graph.txt")))
    g = d.gaps
    i = int(np.flatnonzero(g.dur_ns == 12_000)[0])
    assert g.class_ns[i].tolist() == [0, 0, 12_000, 0, 0, 0]
    c = card_for_gap(d, i)
    assert "already runs as a CUDA graph" in c.first_experiment and "look at other ranks" not in c.why.lower()


def test_nccl_data_host_gaps_are_host_and_dtod_copies_are_not_a_cpu_round_trip():
    """hta/nccl_data: the ~31 ms gaps after the broadcast are host work
    (unflatten_dense_tensors); the tiny DtoD copies in them are copy, and no copy card
    there advises dropping a .cpu()/numpy round trip."""
    d = _diag("hta/nccl_data.json.gz")
    g = d.gaps
    big = np.flatnonzero(g.dur_ns > 30_000_000)
    assert big.size >= 3 and (g.cause[big] == Cause.HOST).all()
    assert (g.class_ns[big, int(Cause.COPY)] < 0.1 * g.dur_ns[big]).all()
    for i in np.flatnonzero(g.cause == Cause.COPY)[:20].tolist():
        ev = [e for e in d.evidence(i) if e.cause == Cause.COPY]
        if ev and all("DtoD" in e.name or "Memset" in e.name for e in ev):
            assert ".cpu()" not in card_for_gap(d, i).first_experiment


def test_b200_first_gemm_calls_are_one_time():
    d = _diag("tracelens/b200/eager_trace.json.gz")
    g = d.gaps
    top = d.order_by_size()[:2]
    assert g.one_time[top].all()
    assert all("aten::addmm" in card_for_gap(d, int(i)).why for i in top)


def test_why_sentence_parts_add_up_to_the_gap():
    """hta/control.json.gz and the MTIA inference trace: every card's why-sentence names
    class figures that sum to the gap (the parts come from class_ns), here checked on the
    largest gaps: the class ns of a card's sentence are the gap's own."""
    for rel in ("hta/control.json.gz", "hta/mtia_inference_rank_0.json.gz"):
        d = _diag(rel)
        g = d.gaps
        for i in d.order_by_size()[:5].tolist():
            assert int(g.class_ns[i].sum()) == int(g.dur_ns[i])
            why = card_for_gap(d, i).why
            assert "already queued" not in why or " spent " not in why.split("This position")[0], (rel, i)
            host = int(g.class_ns[i, int(Cause.HOST)])
            if not g.queued[i] and host >= 50:  # the host part is quoted with the gap's own host ns
                assert f"{fmt_dur(host)} on host work" in why, (rel, i, why)


def _queued_by_id_trace(first_call_ns: int):
    """GPU 0 runs k0 (0-100 µs), idles, then k1 (200-300 µs) and k2 (400-500 µs); neither
    k1 nor k2 has a recorded launch call. The CPU thread is in a host op over both gaps,
    and its runtime calls are ``cudaGetDevice`` (id 20) at 20 µs, ``cudaStreamQuery``
    (id 57) at ``first_call_ns``, then ``cudaLaunchKernel`` (id 60) of a kernel k3 at
    700 µs. k1 has id 10 (below every recorded call: launched before the trace began);
    k2 has id 55, so its launch came after the first call and before the query."""
    from gapscope.parsers.builder import TraceBuilder
    from gapscope.parsers.model import Kind

    b = TraceBuilder(path="ids.json")
    cpu = b.lane("1", "1", process_name="python3", thread_name="main")
    gpu = b.lane("0", "7", process_name="GPU 0", thread_name="stream 7", is_gpu=True, device=0, stream=7)
    b.event(cpu, "aten::something", 0, 690_000, Kind.CPU_OP)
    b.event(cpu, "cudaGetDevice", 20_000, 1_000, Kind.RUNTIME, correlation=20)
    b.event(cpu, "cudaStreamQuery", first_call_ns, 2_000, Kind.SYNC_CALL, correlation=57)
    b.event(cpu, "cudaLaunchKernel", 650_000, 5_000, Kind.LAUNCH, correlation=60)
    b.event(gpu, "k0", 0, 100_000, Kind.KERNEL, correlation=5)
    b.event(gpu, "k1", 200_000, 100_000, Kind.KERNEL, correlation=10)
    b.event(gpu, "k2", 400_000, 100_000, Kind.KERNEL, correlation=55)
    b.event(gpu, "k3", 700_000, 100_000, Kind.KERNEL, correlation=60)
    return b.build()


def test_an_unlinked_op_whose_id_precedes_a_call_made_before_the_gap_was_queued():
    """CUPTI numbers API calls in the order they are made: an op whose correlation id is
    below every recorded runtime call's was launched before the trace began, and one
    whose id is below that of a call made before the gap was launched before the gap.
    Either way it was queued, and the gap is not the CPU's (rule: queued gaps are
    dependency); an op whose id only precedes calls made after the gap proves nothing."""
    early = diagnose(_queued_by_id_trace(first_call_ns=150_000))  # the query before both gaps
    late = diagnose(_queued_by_id_trace(first_call_ns=550_000))  # the query after both gaps
    for d in (early, late):
        g = d.gaps
        starts = [int(x) for x in g.start_ns]
        assert starts[:2] == [100_000, 300_000], starts
    ge, gl = early.gaps, late.gaps
    # k1 (id 10 < 20): launched before the trace began, in both traces
    for d in (early, late):
        assert d.gaps.cause[0] == Cause.DEPENDENCY and bool(d.gaps.queued[0])
        c = card_for_gap(d, 0)
        assert "launched before the trace began (its correlation id 10 precedes every runtime call" in c.why
        assert "Trust:" not in c.why and "What the CPU did meanwhile is not the cause." in c.why
    # k2 (id 55 < 57): launched before the query, which ran at 150 µs, before the gap at 300 µs: queued
    assert ge.cause[1] == Cause.DEPENDENCY and bool(ge.queued[1])
    assert "precedes that of a runtime call made before the GPU went idle" in card_for_gap(early, 1).why
    # ... but with the query at 550 µs, after the gap, nothing says when k2 was launched
    assert not bool(gl.queued[1]) and gl.cause[1] != Cause.DEPENDENCY


def test_a_wait_with_no_gpu_op_before_the_gap_drained_nothing():
    """param/resnet_kineto gap #0 (3155 µs to 4.376 s): the device ran nothing before it,
    so its only wait (``cudaStreamSynchronize``, 3155-3161 µs) is sync for its own time
    (rule 4), not a cliff that makes 3.6 s of host work sync; the card names what the
    thread did: the DataLoader (1.939 s), ``cudaFree`` and the 726 ms first launch."""
    d = _diag("param/resnet_kineto.json.gz")
    g = d.gaps
    assert int(g.prev_op[0]) < 0 and g.cause[0] == Cause.HOST
    assert int(g.class_ns[0][int(Cause.SYNC)]) < 100_000
    c = card_for_gap(d, 0)
    assert c.smell != "sync cliff" and "cliff" not in c.why
    assert "1.939 s in `enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__`" in c.why
    assert "726.271 ms of it in one launch call `cudaLaunchKernel`" in c.why


def test_a_cliff_whose_wait_is_not_in_the_evidence_names_the_wait_and_the_host_work():
    """extrap/profile16 gap #5 (540.747 to 835.804 ms): ``cudaStreamSynchronize``
    (538.080-547.224 ms) began before the GPU went idle, so the 238.520 ms after it until
    the next launch are the sync cliff; the card names that wait, not the host range
    with the most time (``main->test_copies->init_data``), as "the blocking wait"."""
    d = _diag("extrap/profile16.sqlite")
    g = d.gaps
    assert g.cause[5] == Cause.SYNC and int(g.class_ns[5][int(Cause.SYNC)]) == 238_520_132
    c = card_for_gap(d, 5)
    assert (
        "238.520 ms in the sync cliff (after `cudaStreamSynchronize`, blocking from before the GPU went idle" in c.why
    )
    assert "136.841 ms in `main->test_copies->init_data`" in c.why and "waiting for the device" not in c.why
    # the gap holds 7 blocking waits of 3 names and ranges, each named with its overlap
    # with the idle (audit 3: the 139.013 ms cudaEventSynchronize began after the next
    # launch and overlaps the gap by 0.360 ms; the cliff's wait by 6.477 ms of 9.144);
    # allocator calls hold most of the gap, so the card leads with them
    # (tests/test_card_alloc_edges.py checks those against the raw rows)
    assert (
        "7 times: `cudaStreamSynchronize` in `main->test_max_par->wait` (6.477 ms), `cudaStreamSynchronize` in "
        "`main->test_copies->wait` 5 times (49.934 ms in all), `cudaEventSynchronize` in `main->process->phase3` "
        "(0.360 ms)."
    ) in c.why
    assert c.first_experiment.startswith("Allocate the pinned and device buffers once and reuse them")
    assert "init_data" not in c.first_experiment


def test_a_small_copy_under_the_wait_is_the_waits_time_not_the_host_works():
    """hta/sampled_rank-0 gap #31 (858714 to 858821 µs): ``aten::item`` blocks 858714-
    858737 µs (23 µs, a 2 µs device-to-host copy under it at 858722-858724), then 77 µs
    of host work until the next launch; the card said 21 µs and 79 µs."""
    d = _diag("hta/sampled_rank-0.json.gz")
    c = card_for_gap(d, 31)
    assert "0.100 ms in the sync cliff (23.0 µs blocked in `aten::item`" in c.why
    assert "then 77.0 µs of host work after it until the next launch" in c.why


def test_collective_wait_kinds_follow_the_events():
    """Audit of the cards next to collectives (against the raw events):

    - xdit #2400: the next op is an elementwise ``aten::mul`` kernel named after
      broadcasting (``type_specialized_broadcast_kernel_launcher``), not a collective:
      3.3 µs with no recorded wait, a dispatch bubble;
    - hta rank0 #737: the next op is a node of a CUDA graph launched 168 ms earlier,
      while the collective before it was launched about 160 ms after that graph: the
      graph's order held it, not the collective;
    - hta rank0 #1262: 6 µs after an NCCL kernel ended, the time an event takes to hand
      the collective's end to a waiting stream."""
    x = _diag("tracelens/xdit_sd_3.5/profile_trace_rank_0.json.gz")
    assert "broadcast" in x.trace.name(int(x.gaps.next_op[2400]))
    # 3.3 µs between kernels queued ahead, no recorded wait: a dispatch bubble (issue 43)
    assert x.gaps.wait_kind[2400] == WaitKind.DISPATCH and int(x.gaps.dur_ns[2400]) == 3_326
    d = _diag("hta/rank0.json.gz")
    g, t = d.gaps, d.trace
    prev, nxt = int(g.prev_op[737]), int(g.next_op[737])
    assert t.name(prev).startswith("ncclKernel") and t.correlation[prev] > t.correlation[nxt]
    assert t.name(int(g.launch[737])) == "cudaGraphLaunch"
    assert g.wait_kind[737] == WaitKind.GRAPH and card_for_gap(d, 737).smell == "graph ordering"
    assert g.wait_kind[1262] == WaitKind.COLLECTIVE and int(g.dur_ns[1262]) == 6_000
    why = card_for_gap(d, 1262).why
    assert "about the time a collective's end takes to reach a stream that waits for it" in why
    assert "is mostly on other work" not in why


def test_a_sampled_trace_says_so_on_every_card():
    """hta sampled_rank-0 keeps 2,402 of the 170,156 External ids its CPU ops span: its
    idle stretches may hold kernels it dropped (an audit found the all-to-all that
    rank 1's file holds across the 58.9 ms of gap #787 missing from rank 0's)."""
    from gapscope.analysis.classify import is_sampled, operator_sample
    from gapscope.analysis.types import Trust

    d = _diag("hta/sampled_rank-0.json.gz")
    assert operator_sample(d.trace) == (2_402, 170_156) and is_sampled(d.trace)
    assert ((d.gaps.trust & int(Trust.SAMPLED)) != 0).all()
    assert (
        "the trace keeps 2,402 of the 170,156 operators its ids span (1.4%: a sampled trace)"
        in card_for_gap(d, 787).why
    )
    full = _diag("hta/rank0.json.gz")
    assert not is_sampled(full.trace) and "sampled" not in card_for_gap(full, int(full.order_by_size()[0])).why


def test_after_a_collective_on_its_own_stream_is_stream_order():
    """b200 #7: the all-reduce, a 4.9 MiB DtoD copy and rms_norm all run on stream 7: the
    4.4 µs of queued idle is the spacing of one stream's ops, not a hand-off through an
    event. mi300 #5: neither launch is in the trace, so no stream-wait search ran."""
    d = _diag("tracelens/b200/eager_trace.json.gz")
    g, t = d.gaps, d.trace
    assert t.lane[int(g.prev_op[7])] == t.lane[int(g.next_op[7])]
    why = card_for_gap(d, 7).why
    assert "runs on the same stream as `void (anonymous namespace)::multimem_all_reduce_kernel" in why
    assert "(the spacing of two ops of one stream)" in why and "through an event" not in why
    m = _diag("tracelens/mi300/resnet_act_checkpoint.json.gz")
    assert "(its launch, or the one before it, is not in the trace, so no stream wait between them was searched)" in (
        card_for_gap(m, 5).why
    )


def test_an_early_op_slow_only_by_its_kernel_inside_a_waiting_launch_is_no_first_use():
    """Where launch calls wait for their kernel (MTIA), an op's time holds its kernels'
    runs: mtia_rank_0's 10th `aten::cat` (13.9 ms) is a 13.0 ms kernel inside its launch
    call and 0.4 ms of CPU, and was warm-up. The same 5 ms first call spent on the CPU
    (an asynchronous launch) still is."""
    from gapscope.analysis.classify import SLOW_LAUNCH_NS
    from gapscope.analysis.evidence_kinds import one_time_mask

    for waits in (True, False):
        b = TraceBuilder()
        cpu = b.lane("1", "1", process_name="python3", thread_name="main")
        gpu = b.lane("0", "7", is_gpu=True, device=0, stream=7)
        t = 0
        for j in range(40):
            kernel_us = 5000 if j == 0 else 100
            if waits:  # the call returns after its kernel: the op holds the kernel's run
                op_us, call_us, cpu_us = kernel_us + 20, kernel_us + 10, 5
            else:  # the first op's 5 ms are CPU work; the call returns at once
                op_us, call_us, cpu_us = (5020 if j == 0 else 120), 5, (5000 if j == 0 else 100)
            b.event(cpu, "aten::cat", t * US, op_us * US, Kind.CPU_OP)
            b.event(
                cpu,
                "runFunction - job_prep_and_submit_for_execution",
                (t + cpu_us) * US,
                call_us * US,
                Kind.LAUNCH,
                correlation=j,
            )
            b.event(gpu, f"k{j}", (t + cpu_us + 3) * US, kernel_us * US, Kind.KERNEL, correlation=j)
            t += op_us + kernel_us + 10
        tr = b.build()
        cat = [i for i in range(len(tr)) if tr.name(i) == "aten::cat"]
        first = min(cat, key=lambda i: int(tr.start_ns[i]))
        assert bool(one_time_mask(tr, SLOW_LAUNCH_NS)[first]) is (not waits), waits


def test_an_op_recorded_before_its_launch_call_gets_no_queue_time_and_a_trust_note():
    """k1 [10, 50) µs launched at 0; T runs `postprocess` [50, 300), then k2's launch call
    [300, 305), but k2 is recorded at [200, 250): it "starts" 100 µs before its call
    began, so the two clocks disagree (B14: the call's times say nothing of when k2 was
    queued). The card gave "the next op reached the queue 0.255 ms after the GPU went
    idle" for the 150 µs gap; it now gives no queue time, says why in its trust note,
    does not claim in its forbidden step that nothing was queued, and the report counts
    the gap under ``trust.clocks``. With k2 recorded after its
    call (310 µs) neither appears and the queue time does."""
    from gapscope.analysis.types import Trust
    from gapscope.report.document import build_document

    def diag(k2_ns: int):
        b = TraceBuilder()
        t, _side, (g0,) = _lanes(b)
        b.event(t, "cudaLaunchKernel", 0, 5 * US, Kind.LAUNCH, correlation=1)
        b.event(g0, "k1", 10 * US, 40 * US, Kind.KERNEL, correlation=1)
        b.event(t, "postprocess", 50 * US, 250 * US, Kind.CPU_OP)
        b.event(t, "cudaLaunchKernel", 300 * US, 5 * US, Kind.LAUNCH, correlation=2)
        b.event(g0, "k2", k2_ns, 50 * US, Kind.KERNEL, correlation=2)
        trace = b.build()
        return trace, diagnose(trace)

    trace, d = diag(200 * US)
    g = d.gaps
    assert len(g) == 1 and (g.start_ns[0], g.end_ns[0]) == (50 * US, 200 * US)
    assert int(g.trust[0]) & int(Trust.CLOCKS)
    why = card_for_gap(d, 0).why
    assert "reached the queue" not in why
    assert "the next op is recorded as starting 0.100 ms before its launch call began" in why
    forbidden = card_for_gap(d, 0).forbidden_step
    assert "the GPU has nothing queued" not in forbidden and "no kernel ran in this idle" in forbidden
    assert build_document(trace, d)["trust"]["clocks"] == {"count": 1, "idle_ns": 150 * US}

    trace, d = diag(310 * US)
    assert not int(d.gaps.trust[0]) & int(Trust.CLOCKS)
    why = card_for_gap(d, 0).why
    assert "the next op reached the queue 0.255 ms after the GPU went idle" in why and "clocks" not in why
    assert "the GPU has nothing queued while the CPU is busy" in card_for_gap(d, 0).forbidden_step
    assert build_document(trace, d)["trust"]["clocks"] == {"count": 0, "idle_ns": 0}
