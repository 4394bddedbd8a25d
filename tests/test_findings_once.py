"""The findings' one-time test agrees with the card's (the third audit of issue 43,
defect 6): a gap whose card tells module loading (the first and only call of an op,
with the driver loading GPU code inside it: b200's 1.68 ms first ``aten::mm``) is a
one-time cost, kept apart from the recurring findings, not a finding of its own.

Planted trace: 4 steps of 1000 µs from 1000 µs on one thread; kernels [0, 100),
[300, 400), [600, 700), [900, 1000) µs of each step, each launched by a 5 µs call 6 µs
before it, so gap A [100, 300) of each step holds 194 µs of host time. In step 1 only,
``aten::mm`` [102, 292) µs holds gap A, with 10 µs of ``Lazy Function Loading`` inside
it (on a lane of its own, as Kineto records it)."""

from __future__ import annotations

import numpy as np

from gapscope.analysis import diagnose
from gapscope.analysis.card import card_for_gap
from gapscope.analysis.evidence_kinds import lazy_loading_in
from gapscope.analysis.findings import findings
from gapscope.parsers import load
from gapscope.parsers.builder import TraceBuilder
from gapscope.parsers.model import Kind

from .conftest import CORPUS, require

US = 1_000


def _diag():
    b = TraceBuilder()
    t = b.lane("1", "1", process_name="python3", thread_name="main")
    drv = b.lane("1", "2", process_name="python3", thread_name="driver")
    g0 = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    corr = 0
    for s in range(4):
        base = (1 + s) * 1000 * US
        b.event(t, f"ProfilerStep#{s}", base, 1000 * US, Kind.ANNOTATION)
        for k0 in (0, 300, 600, 900):
            corr += 1
            b.event(t, "cudaLaunchKernel", base + (k0 - 6) * US, 5 * US, Kind.LAUNCH, correlation=corr)
            b.event(g0, f"k{k0}", base + k0 * US, 100 * US, Kind.KERNEL, correlation=corr)
        if s == 1:
            b.event(t, "aten::mm", base + 102 * US, 190 * US, Kind.CPU_OP)
            b.event(drv, "Lazy Function Loading", base + 150 * US, 10 * US, Kind.RUNTIME)
    return diagnose(b.build())


def test_a_first_call_loading_gpu_code_is_one_time_not_a_finding():
    d = _diag()
    g = d.gaps
    (mm,) = np.flatnonzero((g.start_ns == 2100 * US) & (g.end_ns == 2300 * US))
    assert card_for_gap(d, int(mm)).smell == "module loading (one-time cost)"
    assert bool(g.one_time[mm])
    found = findings(d)
    assert not [f for f in found.ranked if f.name == "aten::mm"]
    assert all(int(mm) not in f.positions.tolist() for f in found.ranked)
    (once,) = [f for f in found.apart if f.kind == "one-time"]
    assert once.positions.tolist() == [int(mm)] and once.total_ns == 200 * US


def _whole_trace_range_diag():
    """No steps: kernels [1000 k, 1000 k + 100) µs for k in 0..8, each launched by a 5 µs
    call 6 µs before it, so gap k [1000 k + 100, 1000 (k + 1)) µs holds 894 µs of host
    time. ``serve`` (a user range) spans the whole trace; ``op_k`` covers gap k's host
    time for k < 5, and 700 µs of it for k = 5, 6, 7, which ``block`` (3,050 µs, under
    half the 8,100 µs window) encloses."""
    b = TraceBuilder()
    t = b.lane("1", "1", process_name="python3", thread_name="main")
    g0 = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    b.event(t, "serve", 0, 8200 * US, Kind.ANNOTATION)
    b.event(t, "block", 5000 * US, 3050 * US, Kind.PYTHON)
    for k in range(9):
        b.event(t, "cudaLaunchKernel", (1000 * k - 6) * US, 5 * US, Kind.LAUNCH, correlation=k + 1)
        b.event(g0, f"k{k}", 1000 * k * US, 100 * US, Kind.KERNEL, correlation=k + 1)
        if k < 8:
            b.event(t, f"op_{k}", (1000 * k + 100) * US, (894 if k < 5 else 700) * US, Kind.CPU_OP)
    return diagnose(b.build())


def test_a_range_spanning_the_whole_trace_names_no_finding():
    """The host time of gaps 5-7 lies inside ``block`` and ``serve``: the finding names
    ``block``, the next enclosing range below the one spanning the whole trace."""
    d = _whole_trace_range_diag()
    found = findings(d)
    assert not [f for f in found.ranked if f.name == "serve"]
    (inside,) = [f for f in found.ranked if f.name == "block"]
    assert inside.title == "host work inside `block`"
    g = d.gaps
    assert sorted(((g.start_ns[inside.positions] // US) - 100) // 1000) == [5, 6, 7]
    assert inside.total_ns == 3 * 894 * US


def test_numbered_instances_of_a_module_are_one_meaning():
    """b200's 36 layers (``nn.Module: TransformerBlock_0`` … ``_35``) are one module,
    not 36 findings; the backward pass's per-node ranges stay one."""
    from gapscope.analysis.findings import meaning

    assert meaning("nn.Module: TransformerBlock_0") == meaning("nn.Module: TransformerBlock_35")
    assert meaning("nn.Module: TransformerBlock_7") == "nn.Module: TransformerBlock_* (every numbered instance)"
    assert meaning("nn.Module: Linear") == "nn.Module: Linear"
    assert meaning("autograd::engine::evaluate_function: MulBackward0") == "autograd backward (evaluate_function)"


def test_an_early_slow_call_of_an_op_whose_first_call_loaded_gpu_code_is_warm_up():
    """b200's 4th ``aten::addmm`` (229 µs; the median call ~60 µs, the first three
    loaded GPU code) is the warm-up of a shape's second call, not the CPU cost per
    kernel. Planted: ``aten::addmm`` 40 times, 1 ms apart; the first 1,500 µs with 20 µs
    of lazy loading inside, the second 250 µs, the rest 60 µs (later half at most 60):
    the second is over 3 times the median and twice the later half, so warm-up; a
    third call of 150 µs (2.5 times the median) is not."""
    from gapscope.analysis.classify import SLOW_LAUNCH_NS
    from gapscope.analysis.evidence_kinds import one_time_mask

    b = TraceBuilder()
    t = b.lane("1", "1", process_name="python3", thread_name="main")
    drv = b.lane("1", "2", process_name="python3", thread_name="driver")
    for k in range(40):
        dur = {0: 1500, 1: 250, 2: 150}.get(k, 60)
        b.event(t, "aten::addmm", (1 + k) * 1000 * US, dur * US, Kind.CPU_OP)
    b.event(drv, "Lazy Function Loading", 1100 * US, 20 * US, Kind.RUNTIME)
    trace = b.build()
    m = one_time_mask(trace, SLOW_LAUNCH_NS)
    calls = [i for i in range(len(trace)) if trace.name(i) == "aten::addmm"]
    calls.sort(key=lambda i: int(trace.start_ns[i]))
    assert [bool(m[i]) for i in calls[:4]] == [True, True, False, False]
    assert not any(bool(m[i]) for i in calls[3:])


def test_a_module_of_numbered_instances_issuing_gpu_work_is_a_container():
    """The key of b200's 36 layers stands for ranges that launch kernels: a piece of the
    model's step (``_is_container``), never an island to move."""
    from gapscope.analysis.findings import _is_container, meaning

    b = TraceBuilder()
    t = b.lane("1", "1", process_name="python3", thread_name="main")
    g0 = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    for k in range(3):
        base = (1 + k) * 1000 * US
        b.event(t, f"nn.Module: Block_{k}", base, 500 * US, Kind.ANNOTATION)
        b.event(t, "cudaLaunchKernel", base + 10 * US, 5 * US, Kind.LAUNCH, correlation=k + 1)
        b.event(g0, "k", base + 20 * US, 100 * US, Kind.KERNEL, correlation=k + 1)
    d = diagnose(b.build())
    assert _is_container(d, meaning("nn.Module: Block_1"))


def _enclosing_range_diag():
    """One thread: ``forward`` [0, 80,000) µs encloses everything. Kernels [100 k, 100 k +
    50) µs for k = 1..9 (gaps of 50 µs), each launched by a 5 µs call 10 µs before it
    (a call holding no gap), and a 200 µs "Lazy Function Loading" at 40,000 µs on a lane
    of its own, far from every gap: only ``forward`` holds a gap, and it is 1,600 times
    longer than one."""
    b = TraceBuilder()
    t = b.lane("1", "1", process_name="python3", thread_name="main")
    drv = b.lane("1", "2", process_name="python3", thread_name="driver")
    g0 = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    b.event(t, "forward", 0, 80_000 * US, Kind.CPU_OP)
    for k in range(1, 10):
        b.event(t, "cudaLaunchKernel", (100 * k - 10) * US, 5 * US, Kind.LAUNCH, correlation=k)
        b.event(g0, f"k{k}", 100 * k * US, 50 * US, Kind.KERNEL, correlation=k)
    b.event(drv, "Lazy Function Loading", 40_000 * US, 200 * US, Kind.RUNTIME)
    return diagnose(b.build())


def test_loading_far_from_a_gap_inside_a_long_enclosing_range_is_not_one_time():
    """The fourth audit (b200 #422, #548, #656): loading inside a broad range that
    encloses an ordinary gap is not that gap's cost: none of the 50 µs gaps is module
    loading, and no card credits loading to it."""
    d = _enclosing_range_diag()
    g = d.gaps
    inner = np.flatnonzero(g.dur_ns == 50 * US)
    assert inner.size == 8
    assert not g.one_time[inner].any()
    for i in inner.tolist():
        assert lazy_loading_in(d.trace, g.thread_of(i), g.start_ns[i : i + 1], g.end_ns[i : i + 1]) == (0, False)
        assert "module loading" not in card_for_gap(d, i).smell


def test_b200_per_layer_gaps_are_not_module_loading():
    """The fourth audit: b200 gaps #422, #548, #656 are ordinary per-layer gaps whose
    card said "module loading (one-time)" with 0.210 ms of loading (the loading inside
    the 79 ms model-forward range enclosing them); #658 (84 µs) quoted 0.113 ms of
    loading, one load having ended before the gap. Loading credited to a gap is never
    more than the gap."""
    d = diagnose(load(require(CORPUS / "tracelens/b200/eager_trace.json.gz")))
    g = d.gaps
    # the audited gaps (their lengths pin the indices)
    assert [int(g.dur_ns[i]) for i in (422, 548, 656, 658)] == [171_391, 120_639, 94_783, 84_128]
    for i in (422, 548, 656):
        assert not bool(g.one_time[i]), i
        assert "module loading" not in card_for_gap(d, i).smell, i
    for i in (422, 548, 656, 657, 658, 659):
        ns, _ = lazy_loading_in(d.trace, g.thread_of(i), g.start_ns[i : i + 1], g.end_ns[i : i + 1])
        assert ns <= int(g.dur_ns[i]), i
    # #658: only the load inside the gap (~45 µs), not the one that ended 16 µs before it
    ns, _ = lazy_loading_in(d.trace, g.thread_of(658), g.start_ns[658:659], g.end_ns[658:659])
    assert 40 * US <= ns <= 50 * US
