"""Diagnosis on hand-built traces: exact values computed by hand from the design's
definitions and the bug cases' expected files (B14, B16, B20)."""

from __future__ import annotations

import numpy as np
import pytest

from gapscope.analysis import Cause, Params, diagnose
from gapscope.analysis.busy import complement, coverage, union_intervals
from gapscope.analysis.card import card_for_gap, card_for_group
from gapscope.analysis.jsonout import diagnosis_to_json
from gapscope.parsers.builder import TraceBuilder
from gapscope.parsers.model import CopyKind, Kind

from .reference import slow_union

US = 1_000


def _two_lanes(b: TraceBuilder, pid="7700"):
    cpu = b.lane(pid, pid, process_name="python3", thread_name="main")
    gpu = b.lane("0", "7", process_name="GPU 0", thread_name="stream 7", is_gpu=True, device=0, stream=7)
    return cpu, gpu


# ----------------------------------------------------------------------------- B20
def b20_trace():
    """B20_cuda_sync_on_gpu_lane.json, rebuilt event for event (µs → ns)."""
    b = TraceBuilder()
    cpu, gpu = _two_lanes(b)
    b.event(cpu, "aten::mm", 0, 12 * US, Kind.CPU_OP)
    b.event(cpu, "cudaLaunchKernel", 2 * US, 5 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "gemm_kernel", 10 * US, 90 * US, Kind.KERNEL, correlation=1)
    b.event(cpu, "aten::add", 12 * US, 8 * US, Kind.CPU_OP)
    b.event(cpu, "cudaLaunchKernel", 13 * US, 5 * US, Kind.LAUNCH, correlation=2)
    b.event(gpu, "add_kernel", 100 * US, 100 * US, Kind.KERNEL, correlation=2)
    b.event(cpu, "torch.cuda.synchronize", 25 * US, 213_200, Kind.PYTHON)
    b.event(cpu, "cudaStreamSynchronize", 27 * US, 211 * US, Kind.SYNC_CALL, correlation=3)
    b.event(gpu, "Stream Sync", 27 * US, 211 * US, Kind.SYNC_MARKER, correlation=3)
    b.event(cpu, "aten::mul", 238_500, 8 * US, Kind.CPU_OP)
    b.event(cpu, "cudaLaunchKernel", 239 * US, 5 * US, Kind.LAUNCH, correlation=4)
    b.event(gpu, "mul_kernel", 246 * US, 54 * US, Kind.KERNEL, correlation=4)
    return b.build()


def test_b20_one_46us_sync_gap():
    d = diagnose(b20_trace())
    dev = d.devices[0]
    assert (dev.window_start_ns, dev.window_end_ns) == (10 * US, 300 * US)
    assert dev.busy_ns == 244 * US  # Stream Sync is a wait, never busy
    g = d.gaps
    assert len(g) == 1
    assert (g.start_ns[0], g.end_ns[0]) == (200 * US, 246 * US)
    assert Cause(g.cause[0]) == Cause.SYNC
    # starved (the launch call [239, 244] ends 44 µs after the GPU went idle): the
    # thread was blocked in torch.cuda.synchronize (a sync by name) from before the gap
    # to 238.2 and in cudaStreamSynchronize to 238, so the sync cliff runs from the gap
    # start to the next launch call (239): the 0.8 µs of aten::mul and uninstrumented
    # time after the wait are the sync's cost; the launch path [239, 246) is launch
    assert g.class_ns[0].tolist() == [39 * US, 0, 7 * US, 0, 0, 0]
    assert g.lateness_ns[0] == 44 * US
    assert Cause(g.secondary[0]) == Cause.LAUNCH
    names = [e.name for e in d.evidence(0)]
    assert names[:2] == ["torch.cuda.synchronize", "cudaStreamSynchronize"]
    assert {e.overlap_ns for e in d.evidence(0)[:2]} == {38_200, 38 * US}
    card = card_for_gap(d, 0)
    assert card.smell == "sync cliff" and card.cause == Cause.SYNC
    assert "torch.cuda.synchronize" in card.first_experiment


# ----------------------------------------------------------------------------- B16
def b16_trace():
    b = TraceBuilder()
    cpu, gpu = _two_lanes(b, "2200")
    T = 5000 * US
    b.event(cpu, "autograd::engine::evaluate_function: AttnBackward", T - 30 * US, 110 * US, Kind.CPU_OP)
    for c, ts in ((1, -20), (2, 40), (3, 70)):
        b.event(cpu, "cudaLaunchKernel", T + ts * US, 6 * US, Kind.LAUNCH, correlation=c)
    b.event(gpu, "fmha_bwd_kernel", T, 100 * US, Kind.KERNEL, correlation=1)
    b.event(gpu, "dgrad_kernel", T + 90 * US, 60 * US, Kind.KERNEL, correlation=2)
    b.event(gpu, "wgrad_kernel", T + 150 * US, 50 * US, Kind.KERNEL, correlation=3)
    b.event(gpu, "wgrad_kernel", T + 150 * US, 50 * US, Kind.KERNEL, correlation=3)
    b.event(cpu, "aten::_foreach_add_", T + 160 * US, 80 * US, Kind.CPU_OP)
    b.event(cpu, "aten::linear", T + 242 * US, 13 * US, Kind.CPU_OP)
    b.event(cpu, "cudaLaunchKernel", T + 245 * US, 6 * US, Kind.LAUNCH, correlation=4)
    b.event(gpu, "gemm_kernel", T + 260 * US, 40 * US, Kind.KERNEL, correlation=4)
    return b.build()


def test_b16_union_not_sum_and_host_gap():
    d = diagnose(b16_trace())
    assert d.devices[0].busy_ns == 240 * US
    assert d.devices[0].window_ns == 300 * US
    g = d.gaps
    assert len(g) == 1 and (g.start_ns[0], g.end_ns[0]) == (5200 * US, 5260 * US)
    assert Cause(g.cause[0]) == Cause.HOST
    # foreach 40 + gap 2 (uninstrumented, L > 0) + linear 3 = 45 host; launch from 5245 to 5260
    assert g.class_ns[0].tolist() == [0, 0, 15 * US, 45 * US, 0, 0]
    assert d.evidence(0)[0].name == "aten::_foreach_add_"
    assert "aten::_foreach_add_" in card_for_gap(d, 0).first_experiment


# ----------------------------------------------------------------------------- B14
def test_b14_untimed_kernels_excluded():
    b = TraceBuilder()
    cpu, gpu = _two_lanes(b, "29463")
    B = 1615207264504900 * US
    b.event(cpu, "aten::conv2d", B, 100 * US, Kind.CPU_OP)
    for c, ts in ((1, 10), (2, 40), (3, 60)):
        b.event(cpu, "cudaLaunchKernel", B + ts * US, 6 * US, Kind.LAUNCH, correlation=c)
    b.event(gpu, "implicit_gemm_conv", B + 30 * US, 50 * US, Kind.KERNEL, correlation=1)
    b.event(gpu, "volta_sgemm_64x64_nt", 0, 0, Kind.KERNEL, correlation=2)
    b.event(gpu, "volta_sgemm_64x64_nt", 0, 0, Kind.KERNEL, correlation=3)
    b.event(cpu, "aten::linear", B + 100 * US, 40 * US, Kind.CPU_OP)
    b.event(cpu, "cudaLaunchKernel", B + 105 * US, 6 * US, Kind.LAUNCH, correlation=4)
    b.event(gpu, "gemv_kernel", B + 120 * US, 40 * US, Kind.KERNEL, correlation=4)
    b.event(cpu, "aten::relu", B + 250 * US, 40 * US, Kind.CPU_OP)
    b.event(cpu, "cudaLaunchKernel", B + 280 * US, 6 * US, Kind.LAUNCH, correlation=5)
    b.event(gpu, "relu_kernel", B + 300 * US, 30 * US, Kind.KERNEL, correlation=5)
    t = b.build()
    d = diagnose(t)
    dev = d.devices[0]
    assert (dev.window_start_ns, dev.window_end_ns) == (B + 30 * US, B + 330 * US)
    assert dev.busy_ns == 120 * US and dev.kernel_count == 3
    assert d.invalid_gpu_ops == 2
    g = d.gaps
    assert (g.start_ns - B).tolist() == [80 * US, 160 * US]
    assert g.dur_ns.tolist() == [40 * US, 140 * US]
    assert d.class_totals_ns() and sum(d.class_totals_ns().values()) == 180 * US
    assert "2 GPU op(s) of this trace have no usable timing" in card_for_gap(d, 0).why


# ------------------------------------------------------------------- decode step
def decode_trace(steps: int = 1):
    """The decode-step exercise (seed 000), repeated ``steps`` times, 1.050 ms apart.
    CPU points last until the next CPU line, as the ASCII event-list grammar says."""
    b = TraceBuilder(format="ascii-events")
    cpu = b.lane("host", "main", process_name="CPU", thread_name="main")
    gpu = b.lane("gpu0", "stream 0", process_name="GPU 0", thread_name="stream 0", is_gpu=True, device=0, stream=0)
    for k in range(steps):
        o = k * 1_050 * US
        b.event(cpu, "decode_step", o, 1_050 * US, Kind.ANNOTATION)
        b.event(cpu, "sample previous token", o + 30 * US, 60 * US, Kind.CPU_OP)
        b.event(cpu, "tensor.item()", o + 90 * US, 160 * US, Kind.SYNC_CALL)
        b.event(cpu, "launch matmul", o + 250 * US, 172 * US, Kind.LAUNCH, correlation=2 * k + 1)
        b.event(cpu, "launch attention", o + 422 * US, 338 * US, Kind.LAUNCH, correlation=2 * k + 2)
        b.event(cpu, "logging callback", o + 760 * US, 290 * US, Kind.PYTHON)
        b.event(gpu, "matmul", o + 258 * US, 152 * US, Kind.KERNEL, correlation=2 * k + 1)
        b.event(gpu, "attention", o + 430 * US, 160 * US, Kind.KERNEL, correlation=2 * k + 2)
    return b.build()


def test_decode_step_single():
    d = diagnose(decode_trace(1))
    g = d.gaps
    assert d.steps.source == "annotation" and d.steps.name == "decode_step"
    assert list(zip(g.start_ns.tolist(), g.end_ns.tolist())) == [
        (0, 258 * US),
        (410 * US, 430 * US),
        (590 * US, 1_050 * US),
    ]
    # the 20 µs gap before attention: launch (back-to-back launches, nothing else on T)
    assert Cause(g.cause[1]) == Cause.LAUNCH and g.class_ns[1].tolist() == [0, 0, 20 * US, 0, 0, 0]
    assert g.class_ns[0].tolist() == [160 * US, 0, 8 * US, 90 * US, 0, 0]
    assert g.class_ns[2].tolist() == [0, 0, 0, 460 * US, 0, 0]
    assert sum(d.class_totals_ns().values()) == d.total_idle_ns() == 738 * US
    big = d.groups[0]
    assert big.label == "attention → matmul" and big.median_ns == 718 * US
    assert (big.steps_with_gap, big.steps_total) == (1, 1)
    # the stretch across the step boundary (the group's card): 0.718 ms per step,
    # host 0.550 ms (77%), then sync 0.160 ms (22%)
    card = card_for_group(d, big.id)
    assert card.cause == Cause.HOST and card.secondary == Cause.SYNC
    assert card.secondary_share == pytest.approx(160 / 718)
    assert "logging callback" in card.why and "tensor.item()" in card.why and "0.718 ms" in card.why
    assert "host (77%), then sync (22%)" in card.why
    for text in (card.first_experiment, card.forbidden_step, card.proof, card.why):
        assert "matmul" not in text and "attention" not in text
    # the card of gap 2 is gap 2's own (host 100%), with the stretch as context
    own = card_for_gap(d, 2)
    assert own.cause == Cause.HOST and own.secondary is None and own.secondary_share == 0.0
    assert own.why.startswith("For 0.460 ms the GPU had no kernel to run")
    assert "logging callback" in own.why and "tensor.item()" not in own.why
    assert (
        "In steady state the step repeats: this 0.460 ms after the step's last kernel and the 0.258 ms at its start "
        "form one 0.718 ms idle stretch per token"
    ) in own.why and "host (77%), then sync (22%)" in own.why
    # gap 0 (the step's leading idle): sync 160 of 258 µs, then host 90
    lead = card_for_gap(d, 0)
    assert lead.cause == Cause.SYNC and lead.secondary == Cause.HOST
    assert lead.secondary_share == pytest.approx(90 / 258)
    assert "tensor.item()" in lead.why
    # one step in the file: no "step before" (the 0.460 ms comes after gap 0 in the file)
    assert (
        "In steady state the step repeats: this 0.258 ms at the start of the step and the 0.460 ms after its last kernel "
        "form one 0.718 ms idle stretch per token"
    ) in lead.why
    assert "step before" not in lead.why and "across the step boundary" not in lead.why
    b = d.budget
    assert (b.wall_ns, b.gpu_busy_ns, b.idle_ns) == (1_050 * US, 312 * US, 738 * US)
    assert round(b.tokens_per_s) == 952 and b.decode and b.steps_per_s == b.tokens_per_s
    w = d.what_if(names=("tensor.item()", "logging callback"))
    assert w.removed_ns == 450 * US and w.projected_step_ns == 600 * US
    assert round(w.tokens_per_s) == 1667
    assert any("0.312 ms" in a for a in w.assumptions) and any("sampling" in a for a in w.assumptions)


def test_decode_steady_state_four_steps():
    d = diagnose(decode_trace(4))
    g = d.gaps
    crossing = (g.start_ns % (1_050 * US) == 590 * US) & (g.dur_ns == 718 * US)
    assert crossing.sum() == 3
    i = int(np.flatnonzero(crossing)[0])
    assert g.class_ns[i].tolist() == [160 * US, 0, 8 * US, 550 * US, 0, 0]
    assert Cause(g.cause[i]) == Cause.HOST and Cause(g.secondary[i]) == Cause.SYNC
    big = d.groups[0]
    assert big.label == "attention → matmul"
    # the first step's head and the last step's tail are edge gaps, not one more
    # occurrence joined across the capture (issue 47): the 3 crossings recur
    assert (big.steps_with_gap, big.steps_total, big.median_ns) == (3, 4, 718 * US)
    assert big.summary == "recurs in 3 of 4 steps, 0.718 ms median"
    small = [gr for gr in d.groups if gr.label == "matmul → attention"][0]
    assert (small.steps_with_gap, small.median_ns, small.cause) == (4, 20 * US, Cause.LAUNCH)
    assert round(d.budget.tokens_per_s) == 952 and d.budget.steps == 4
    assert sum(d.class_totals_ns().values()) == d.total_idle_ns() == 4 * 738 * US


def test_graph_captured_step():
    b = TraceBuilder(format="ascii-events")
    cpu = b.lane("host", "main", thread_name="main")
    gpu = b.lane("gpu0", "s0", is_gpu=True, device=0, stream=0)
    b.event(cpu, "step", 0, 348 * US, Kind.ANNOTATION)
    b.event(cpu, "launch fused decode graph", 0, 348 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "graph", 12 * US, 328 * US, Kind.KERNEL, correlation=1)
    d = diagnose(b.build())
    assert d.total_idle_ns() == 20 * US
    assert round(d.budget.tokens_per_s) == 2874
    assert d.budget.gpu_busy_ns == 328 * US


# ---------------------------------------------------------------- copy evidence
def test_pageable_copy_named_with_bytes():
    b = TraceBuilder()
    cpu, gpu = _two_lanes(b)
    b.event(cpu, "cudaLaunchKernel", 0, 5 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k1", 10 * US, 50 * US, Kind.KERNEL, correlation=1)
    b.event(cpu, "aten::to", 20 * US, 200 * US, Kind.CPU_OP)
    b.event(cpu, "cudaMemcpyAsync", 60 * US, 150 * US, Kind.MEMCPY_CALL, correlation=2)
    b.event(
        gpu,
        "Memcpy DtoH (Device -> Pageable)",
        62 * US,
        140 * US,
        Kind.MEMCPY,
        correlation=2,
        bytes=8 << 20,
        copy_kind=CopyKind.D2H,
        pageable=True,
    )
    b.event(cpu, "cudaLaunchKernel", 225 * US, 5 * US, Kind.LAUNCH, correlation=3)
    b.event(gpu, "k2", 232 * US, 50 * US, Kind.KERNEL, correlation=3)
    d = diagnose(b.build())
    g = d.gaps
    assert len(g) == 1 and (g.start_ns[0], g.end_ns[0]) == (60 * US, 232 * US)
    assert g.exposed_copy_ns[0] == 140 * US and g.fully_idle_ns[0] == 32 * US
    assert d.devices[0].busy_with_copies_ns == 240 * US
    assert Cause(g.cause[0]) == Cause.COPY
    card = card_for_gap(d, 0)
    assert "8.0 MiB" in card.first_experiment and "pageable" in card.first_experiment
    assert card.smell == "copy on the path"


def test_small_d2h_copy_is_sync_signature():
    b = TraceBuilder()
    cpu, gpu = _two_lanes(b)
    b.event(cpu, "cudaLaunchKernel", 0, 5 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k1", 10 * US, 50 * US, Kind.KERNEL, correlation=1)
    b.event(
        gpu,
        "Memcpy DtoH (Device -> Pageable)",
        60 * US,
        30 * US,
        Kind.MEMCPY,
        bytes=4,
        copy_kind=CopyKind.D2H,
        pageable=True,
    )
    b.event(cpu, "cudaLaunchKernel", 95 * US, 5 * US, Kind.LAUNCH, correlation=3)
    b.event(gpu, "k2", 100 * US, 50 * US, Kind.KERNEL, correlation=3)
    g = diagnose(b.build()).gaps
    assert g.class_ns[0].tolist() == [30 * US, 0, 5 * US, 5 * US, 0, 0]
    assert Cause(g.cause[0]) == Cause.SYNC


def test_no_cpu_data_is_unclassified_and_gpu_only_trace():
    b = TraceBuilder()
    gpu = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    b.event(gpu, "a", 0, 10 * US, Kind.KERNEL)
    b.event(gpu, "b", 50 * US, 10 * US, Kind.KERNEL)
    d = diagnose(b.build())
    assert d.gaps.class_ns.tolist() == [[0, 0, 0, 0, 40 * US, 0]]
    assert card_for_gap(d, 0).cause == Cause.UNCLASSIFIED
    assert "the trace has no CPU activity" in card_for_gap(d, 0).why


def test_empty_and_cpu_only_traces():
    b = TraceBuilder()
    cpu = b.lane("1", "1")
    b.event(cpu, "aten::add", 0, 10, Kind.CPU_OP)
    d = diagnose(b.build())
    assert d.devices == [] and len(d.gaps) == 0 and d.budget is None
    assert diagnosis_to_json(d)["gaps"]["start_ns"] == []
    d = diagnose(TraceBuilder().build())
    assert len(d.gaps) == 0 and d.class_totals_ns()[Cause.SYNC] == 0


def test_multi_stream_union_and_min_gap():
    b = TraceBuilder()
    g7 = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    g8 = b.lane("0", "8", is_gpu=True, device=0, stream=8)
    b.event(g7, "a", 0, 10 * US, Kind.KERNEL)
    b.event(g8, "b", 5 * US, 20 * US, Kind.KERNEL)  # overlaps a on another stream
    b.event(g7, "c", 26 * US, 10 * US, Kind.KERNEL)  # 1 µs gap: below min_gap
    b.event(g8, "d", 50 * US, 10 * US, Kind.KERNEL)
    d = diagnose(b.build())
    assert d.devices[0].busy_ns == 45 * US
    assert list(zip(d.gaps.start_ns.tolist(), d.gaps.end_ns.tolist())) == [(36 * US, 50 * US)]
    d = diagnose(b.build(), Params(min_gap_ns=500))
    assert d.gaps.dur_ns.tolist() == [1 * US, 14 * US]


def test_picket_fence_episode():
    b = TraceBuilder()
    cpu, gpu = _two_lanes(b)
    t = 0
    for k in range(12):
        b.event(cpu, "aten::add", t, 12 * US, Kind.CPU_OP)
        b.event(cpu, "cudaLaunchKernel", t + 4 * US, 6 * US, Kind.LAUNCH, correlation=k + 1)
        b.event(gpu, "add_kernel", t + 12 * US, 3 * US, Kind.KERNEL, correlation=k + 1)
        t += 13 * US
    d = diagnose(b.build())
    assert len(d.episodes) == 1
    ep = d.episodes[0]
    assert ep.kernel_count == 12 and ep.median_kernel_ns == 3 * US and ep.median_launch_ns == 6 * US
    assert ep.idle_ns == 11 * 10 * US
    assert (d.gaps.cause == int(Cause.LAUNCH)).all()
    assert card_for_gap(d, 0).smell == "picket fence"
    assert "CUDA graph" in card_for_gap(d, 0).first_experiment


def test_what_if_by_cause_and_gap():
    d = diagnose(decode_trace(1))
    w = d.what_if(causes=(Cause.HOST,))
    assert w.removed_ns == 550 * US and w.projected_step_ns == 500 * US
    w = d.what_if(gaps=(2,))
    assert w.removed_ns == 460 * US
    w = d.what_if(gaps=(0, 1, 2))
    assert w.projected_step_ns == 312 * US


def test_to_json_is_serialisable_and_complete():
    import json

    d = diagnose(decode_trace(2))
    j = diagnosis_to_json(d)
    json.dumps(j)
    assert j["total_idle_ns"] == sum(j["class_totals_ns"].values())
    assert j["budget"]["tokens_per_s"] == pytest.approx(952.381, abs=1e-3)
    # two steps: the one crossing between them is no recurring group (the first step's
    # head and the last one's tail are edges, issue 47); the launch gap recurs in both
    assert j["groups"][0]["card"]["cause"] == "launch"
    assert j["top_gaps"][0]["card"]["evidence"]
    # per step, 2 steps: the steady gaps are the two 20 µs launch gaps and the one
    # crossing (sync 160, launch 8, host 550 µs); the step's 738 µs of idle split as
    # their 758 µs split (the edges, the other halves of the crossing, are left out)
    assert j["what_if"]["sync"]["removed_ns"] == round(738 * US * 160 / 758)
    assert j["what_if"]["sync+host"]["projected_step_ns"] == 1_050 * US - round(738 * US * 710 / 758)


# ------------------------------------------------------------ busy union reference


def test_union_coverage_complement_small():
    s, e = union_intervals(np.array([5, 0, 20, 8]), np.array([10, 3, 25, 12]))
    assert s.tolist() == [0, 5, 20] and e.tolist() == [3, 12, 25]
    assert coverage(s, e, np.array([0, 2, 11]), np.array([30, 6, 21])).tolist() == [15, 2, 2]
    cs, ce = complement(s, e, 0, 30)
    assert list(zip(cs.tolist(), ce.tolist())) == [(3, 5), (12, 20), (25, 30)]
    assert slow_union([(5, 10), (0, 3), (20, 25), (8, 12)]) == [[0, 3], [5, 12], [20, 25]]


def test_fully_idle_variant_of_find_gaps():
    from gapscope.analysis.gaps import find_gaps

    b = TraceBuilder()
    gpu = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    b.event(gpu, "k1", 0, 10 * US, Kind.KERNEL)
    b.event(gpu, "Memcpy HtoD", 20 * US, 10 * US, Kind.MEMCPY, copy_kind=CopyKind.H2D, bytes=1024)
    b.event(gpu, "k2", 50 * US, 10 * US, Kind.KERNEL)
    t = b.build()
    g = find_gaps(t, 0)
    assert (g.start_ns.tolist(), g.end_ns.tolist(), g.exposed_copy_ns.tolist()) == ([10 * US], [50 * US], [10 * US])
    f = find_gaps(t, 0, with_copies=True)
    assert list(zip(f.start_ns.tolist(), f.end_ns.tolist())) == [(10 * US, 20 * US), (30 * US, 50 * US)]
    assert f.exposed_copy_ns.tolist() == [0, 0] and int(f.dur_ns.sum()) == int(g.fully_idle_ns.sum())


def test_host_work_after_the_launch_is_not_host_idle():
    """Design, starved or blocked first: host needs L > 0. Here the next kernel's launch
    call returned before the GPU went idle (L = 65 - 100 = -35 µs) and the thread then
    ran CPU work for the whole gap: the CPU work did not keep the GPU empty, so the gap
    is dependency (blocked, nothing recorded), never host."""
    b = TraceBuilder(format="chrome")
    cpu, gpu = _two_lanes(b)
    us = 1_000
    b.event(cpu, "cudaLaunchKernel", 0 * us, 5 * us, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k1", 10 * us, 90 * us, Kind.KERNEL, correlation=1)
    b.event(cpu, "cudaLaunchKernel", 60 * us, 5 * us, Kind.LAUNCH, correlation=2)
    b.event(cpu, "aten::cat", 70 * us, 100 * us, Kind.CPU_OP)
    b.event(gpu, "k2", 150 * us, 20 * us, Kind.KERNEL, correlation=2)
    d = diagnose(b.build())
    g = d.gaps
    assert len(g) == 1 and int(g.start_ns[0]) == 100 * us and int(g.end_ns[0]) == 150 * us
    assert int(g.lateness_ns[0]) == -35 * us
    assert Cause(int(g.cause[0])) == Cause.DEPENDENCY and bool(g.queued[0])
    assert int(g.class_ns[0][int(Cause.HOST)]) == 0
    assert d.class_totals_ns()[Cause.DEPENDENCY] == 50 * us
    assert "already queued" in card_for_gap(d, 0).why and "spent" not in card_for_gap(d, 0).why


def test_a_kernel_of_no_duration_ends_a_gap():
    """Kineto writes a sub-µs kernel as ``dur: 0``: it ran, so the GPU was not idle
    across it (resnet50_num_workers_4's `zero_grad` launched a `FillFunctor` every 39 µs,
    and a 474 µs "host island" was 12 gaps of 38 µs). It splits the gap it sits in and
    is the neighbour of both parts; it adds nothing to busy time, and a part shorter
    than the minimum gap is no gap."""
    b = TraceBuilder()
    t, g0 = _two_lanes(b)
    for j, (at, dur) in enumerate(((0, 10), (50, 0), (100, 10), (111, 0), (150, 10))):
        b.event(t, "cudaLaunchKernel", max(0, at - 5) * US, 1 * US, Kind.LAUNCH, correlation=j + 1)
        b.event(g0, f"k{j}", at * US, dur * US, Kind.KERNEL, correlation=j + 1)
    d = diagnose(b.build())
    g = d.gaps
    spans = [(int(s) // US, int(e) // US) for s, e in zip(g.start_ns, g.end_ns)]
    assert spans == [(10, 50), (50, 100), (111, 150)]  # [110, 111) is under the minimum gap
    names = [(d.trace.name(int(p)), d.trace.name(int(n))) for p, n in zip(g.prev_op, g.next_op)]
    assert names == [("k0", "k1"), ("k1", "k2"), ("k3", "k4")]


def test_interior_gaps_are_the_gaps_between_each_devices_first_and_last_kernel():
    """``interior_gaps``: by hand. GPU 0 copies from 0 to 5 µs, runs k1 10-20, a
    zero-length kernel at 30 (it ran: it cuts the gap), k2 40-50, a 1 µs pause (below
    the 2 µs minimum), k3 51-60, then copies to 70. ProfilerStep#1 spans 0-100 µs on
    the CPU. The diagnosis's gaps: 0-10 (leading, widened by the step to start at 0),
    20-30, 30-40, 60-100 (trailing); GPU 1, one kernel at 10-20, only leading and
    trailing ones; GPU 2 only copies (30-50), idle of kernels all along. The interior
    ones are 20-30 and 30-40 of GPU 0, whether or not the CPU lane and the step are in
    the trace."""
    from gapscope.analysis.gaps import interior_gaps

    def build(with_cpu: bool):
        b = TraceBuilder()
        gpu = b.lane("0", "7", process_name="GPU 0", thread_name="stream 7", is_gpu=True, device=0, stream=7)
        gpu1 = b.lane("1", "7", process_name="GPU 1", thread_name="stream 7", is_gpu=True, device=1, stream=7)
        if with_cpu:
            cpu = b.lane("7700", "7700", process_name="python3", thread_name="main")
            b.event(cpu, "ProfilerStep#1", 0, 100 * US, Kind.ANNOTATION)
        b.event(gpu, "Memcpy HtoD", 0, 5 * US, Kind.MEMCPY, copy_kind=CopyKind.H2D, bytes=64)
        b.event(gpu, "k1", 10 * US, 10 * US, Kind.KERNEL)
        b.event(gpu, "k0", 30 * US, 0, Kind.KERNEL)
        b.event(gpu, "k2", 40 * US, 10 * US, Kind.KERNEL)
        b.event(gpu, "k3", 51 * US, 9 * US, Kind.KERNEL)
        b.event(gpu, "Memcpy DtoH", 62 * US, 8 * US, Kind.MEMCPY, copy_kind=CopyKind.D2H, bytes=64)
        b.event(gpu1, "solo", 10 * US, 10 * US, Kind.KERNEL)
        # a device that only copies has no kernel to bound a gap: none there
        gpu2 = b.lane("2", "7", process_name="GPU 2", thread_name="stream 7", is_gpu=True, device=2, stream=7)
        b.event(gpu2, "Memcpy HtoD", 30 * US, 10 * US, Kind.MEMCPY, copy_kind=CopyKind.H2D, bytes=64)
        b.event(gpu2, "Memcpy DtoH", 40 * US, 10 * US, Kind.MEMCPY, copy_kind=CopyKind.D2H, bytes=64)
        return b.build()

    whole = build(True)
    d = diagnose(whole)
    assert list(
        zip(d.gaps.device.tolist(), d.gaps.start_ns.tolist(), d.gaps.end_ns.tolist(), d.gaps.edge.tolist())
    ) == [
        (0, 0, 10 * US, 1),
        (0, 20 * US, 30 * US, 0),
        (0, 30 * US, 40 * US, 0),
        (0, 60 * US, 100 * US, 2),
        (1, 0, 10 * US, 1),
        (1, 20 * US, 100 * US, 2),
        (2, 0, 100 * US, 0),  # the whole window idle of kernels: no kernel on either side
    ]
    for t in (whole, build(False)):
        g = interior_gaps(t)
        assert list(zip(g.device.tolist(), g.start_ns.tolist(), g.end_ns.tolist())) == [
            (0, 20 * US, 30 * US),
            (0, 30 * US, 40 * US),
        ]
        assert [t.names[int(t.name_id[i])] for i in g.prev_op.tolist()] == ["k1", "k0"]
        assert [t.names[int(t.name_id[i])] for i in g.next_op.tolist()] == ["k0", "k2"]
        assert g.cause.tolist() == [int(Cause.UNCLASSIFIED)] * 2
    assert len(interior_gaps(build(True), min_gap_ns=10 * US + 1)) == 0
