"""Cards: a gap's card describes that gap (its own class mix and evidence), a group's
card states one per-step figure (the median) and class shares of the group's total
idle, and a secondary class is never one that would read "0%"."""

from __future__ import annotations

import re

import numpy as np
import pytest

from gapscope.analysis import Cause, diagnose
from gapscope.analysis.card import card_for_gap, card_for_group
from gapscope.analysis.classify import SECONDARY_MIN_SHARE
from gapscope.analysis.evidence_kinds import graph_captures
from gapscope.parsers import load
from gapscope.parsers.builder import TraceBuilder
from gapscope.parsers.model import Kind
from gapscope.units import fmt_dur
from tests.conftest import CORPUS, SAMPLES, require

US = 1_000


def _main_and_stream(b: TraceBuilder) -> tuple[int, int]:
    """The two lanes of the hand-made traces here: thread `main` of `python3` and GPU 0's
    stream 7."""
    cpu = b.lane("1", "1", process_name="python3", thread_name="main")
    return cpu, b.lane("0", "7", is_gpu=True, device=0, stream=7)


def _pct(part: int, whole: int) -> str:
    return f"{part / whole:.0%}"


def _assert_card_is_the_gaps(d, i: int) -> None:
    g = d.gaps
    c = card_for_gap(d, i)
    assert c.cause == Cause(int(g.cause[i]))
    if g.secondary[i] < 0:
        assert c.secondary is None and c.secondary_share == 0.0
    else:
        assert c.secondary == Cause(int(g.secondary[i]))
        assert c.secondary_share == pytest.approx(float(g.secondary_share[i]))
    assert c.why.startswith("For ") and " per step " not in c.why.split(".")[0]


@pytest.mark.parametrize("name", sorted(p.name for p in SAMPLES.glob("*.txt")))
def test_every_card_of_the_samples_is_its_gaps(name):
    d = diagnose(load(SAMPLES / name))
    for i in range(len(d.gaps)):
        _assert_card_is_the_gaps(d, i)


def _rank0():
    return diagnose(load(require(CORPUS / "hta" / "rank0.json.gz")))


def test_sync_smell_says_cliff_only_when_the_wait_drained_the_queue():
    """decode_step: ``tensor.item()`` (0.090-0.250 ms) begins inside gap #0 (0-0.258 ms,
    nothing queued before it): a blocking wait in the gap, not a cliff. sync_cliff:
    ``.item()`` begins while ``attn`` still runs, so the queue drains under it."""
    d = diagnose(load(SAMPLES / "decode_step.txt"))
    g = d.gaps
    assert (int(g.start_ns[0]), int(g.end_ns[0])) == (0, 258 * US) and g.cause[0] == Cause.SYNC
    c = card_for_gap(d, 0)
    assert c.smell == "blocking wait in the gap" and "cliff" not in c.why
    assert "0.160 ms blocked in `tensor.item()`" in c.why
    d2 = diagnose(load(SAMPLES / "sync_cliff.txt"))
    sync = [i for i in range(len(d2.gaps)) if d2.gaps.cause[i] == Cause.SYNC]
    assert sync
    c2 = card_for_gap(d2, sync[0])
    assert c2.smell == "sync cliff" and "sync cliff" in c2.why


def test_rank0_gap1_card_is_copy_with_group_context():
    """Gap 1 of hta/rank0 (9 µs at +13.396 ms) is all copy: a 43.7 MiB pinned HtoD
    memcpy with no kernel beside it; its group (5 gaps, 28 µs) is mostly something
    else, which the card states as context, not as the gap's class."""
    d = _rank0()
    g = d.gaps
    assert g.dur_ns[1] == 9 * US and g.start_ns[1] - d.trace.extent_ns[0] == 13_396 * US
    assert g.class_ns[1].tolist() == [0, 9 * US, 0, 0, 0, 0]
    c = card_for_gap(d, 1)
    assert c.cause == Cause.COPY and c.secondary is None and c.smell == "copy on the path"
    # the next op (correlation id 815108) was launched before the trace began: every
    # runtime call the trace recorded has a higher id (the first launch is 825188)
    assert c.why.startswith("For 9.0 µs the GPU had no kernel to run, although the next op ")
    assert (
        "was already queued: it was launched before the trace began (its correlation id 815108 precedes every "
        "runtime call the trace recorded). 9.0 µs copying (the GPU ran the copy `Memcpy HtoD (Pinned -> Device)`, "
        "43.7 MiB)" in c.why
    )
    assert "Trust:" not in c.why and "What the CPU did meanwhile is not the cause." in c.why
    grp = d.groups[int(g.group[1])]
    assert (grp.steps_with_gap, grp.steps_total, grp.median_ns, grp.total_ns) == (5, 5, 5 * US, 28 * US)
    tot = g.class_ns[grp.gap_indices].sum(axis=0)
    order = np.argsort(-tot, kind="stable")
    mix = f"{Cause(int(order[0])).label} ({_pct(tot[order[0]], 28 * US)}), then {Cause(int(order[1])).label} ({_pct(tot[order[1]], 28 * US)})"
    assert (
        f"This position recurs in 5 of 5 steps (5.0 µs median per step); across the group the idle is {mix}." in c.why
    )
    assert "Memcpy HtoD (Pinned -> Device)" in c.first_experiment and "43.7 MiB" in c.first_experiment


def test_time_under_a_gpu_copy_is_not_called_untraced():
    """hta/rank0 gap #2055 (1.669 ms): the thread was in ``cudaMemcpyAsync`` and
    ``cudaStreamSynchronize``, both under the 43.7 MiB HtoD copy; that time is the
    copy's, and none of it is "(untraced time on this thread)" (it listed 1.601 ms)."""
    d = _rank0()
    ev = d.evidence(2055)
    assert not [e for e in ev if e.event < 0]
    assert sum(e.overlap_ns for e in ev) <= int(d.gaps.dur_ns[2055]) + 20 * US


def test_a_copy_that_ends_while_a_kernel_runs_is_no_evidence():
    """hta/rank0 gap #90 (30 µs): its 14 µs of copy are the DtoD copy that ran inside
    it; the 2.5 MiB HtoD copy that overlaps the whole gap ends 10 µs after the next
    kernel started, so the classes leave it out, and so must the evidence and the card."""
    d = _rank0()
    g = d.gaps
    assert int(g.class_ns[90][int(Cause.COPY)]) == 14 * US
    ev = [e for e in d.evidence(90) if e.cause == Cause.COPY]
    assert [(e.name, e.overlap_ns) for e in ev] == [("Memcpy DtoD (Device -> Device)", 14 * US)]
    assert "Memcpy HtoD" not in card_for_gap(d, 90).why


def test_rank0_cards_agree_with_gaps_and_no_zero_secondary():
    d = _rank0()
    g = d.gaps
    has = g.secondary >= 0
    assert (g.secondary_share[has] >= SECONDARY_MIN_SHARE).all() and (g.secondary_share[~has] == 0).all()
    # a second class under SECONDARY_MIN_SHARE of its gap (e.g. 5 µs of copy in a 70 ms
    # dependency stall) is no secondary class
    dur = np.maximum(g.dur_ns, 1)[:, None]
    tiny = ((g.class_ns > 0) & (g.class_ns / dur < SECONDARY_MIN_SHARE)).any(axis=1) & (
        np.count_nonzero(g.class_ns, axis=1) == 2
    )
    assert tiny.any() and (g.secondary[tiny] == -1).all()
    rows = set(d.order_by_size()[:40].tolist()) | {1, 200} | set(d.groups[0].gap_indices.tolist())
    for i in sorted(rows):
        _assert_card_is_the_gaps(d, int(i))


def _per_step_figures(text: str) -> set[str]:
    return set(re.findall(r"(\d+\.\d+ (?:ms|µs)) per step", text))


@pytest.mark.parametrize("rel", ["hta/step_based_trace_2543932.json.gz", "hta/rank0.json.gz"])
def test_group_cards_one_per_step_figure_and_consistent_shares(rel):
    d = diagnose(load(require(CORPUS / rel)))
    g = d.gaps
    for grp in d.groups[:30]:
        c = card_for_group(d, grp.id)
        tot = g.class_ns[grp.gap_indices].sum(axis=0)
        total = int(tot.sum())
        assert total == grp.total_ns
        assert c.cause == grp.cause == Cause(int(np.argmax(tot)))
        if c.secondary is not None:
            assert c.secondary_share == pytest.approx(tot[int(c.secondary)] / total)
            assert tot[int(c.cause)] / total + c.secondary_share <= 1.0 + 1e-9
            assert c.secondary_share >= SECONDARY_MIN_SHARE
        assert _per_step_figures(c.why) == {fmt_dur(grp.median_ns)}, c.why
        assert f"recurs in {grp.steps_with_gap} of {grp.steps_total} steps" in c.why
        assert f"({_pct(tot[int(c.cause)], total)})" in c.why


def test_step_based_group_card_wording():
    """The group that read "For 0.206 ms per step ... (recurs in 4 of 5 steps, 0.195 ms
    median)": one figure, the median, named as such."""
    d = diagnose(load(require(CORPUS / "hta" / "step_based_trace_2543932.json.gz")))
    grp = next(gr for gr in d.groups if (gr.steps_with_gap, gr.steps_total) == (4, 5))
    assert (grp.median_ns, grp.total_ns) == (194_500, 826_000)  # mean 0.2065 ms per occurrence
    c = card_for_group(d, grp.id)
    assert c.why.startswith("For 0.195 ms per step (median; it recurs in 4 of 5 steps) the GPU had no kernel to run")
    assert "0.206" not in c.why


def _host_gap_with_sync(sync_ns: int):
    """One 400 µs gap [60, 460) µs: host op over it, a sync call of ``sync_ns`` inside,
    the next launch call 0.4 µs before the gap ends."""
    b = TraceBuilder()
    cpu, gpu = _main_and_stream(b)
    b.event(cpu, "cudaLaunchKernel", 0, 5 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k1", 10 * US, 50 * US, Kind.KERNEL, correlation=1)
    b.event(cpu, "tokenize", 60 * US, 399_600, Kind.CPU_OP)
    b.event(cpu, "cudaStreamSynchronize", 100 * US, sync_ns, Kind.SYNC_CALL)
    b.event(cpu, "cudaLaunchKernel", 459_600, 400, Kind.LAUNCH, correlation=2)
    b.event(gpu, "k2", 460 * US, 40 * US, Kind.KERNEL, correlation=2)
    return diagnose(b.build())


def test_secondary_below_half_a_percent_is_none():
    d = _host_gap_with_sync(1 * US)  # 1 of 400 µs = 0.25%: would print "then sync (0%)"
    g = d.gaps
    assert g.class_ns[0].tolist() == [1 * US, 0, 400, 398_600, 0, 0]
    assert Cause(g.cause[0]) == Cause.HOST and g.secondary[0] == -1 and g.secondary_share[0] == 0.0
    assert card_for_gap(d, 0).secondary is None
    d = _host_gap_with_sync(4 * US)  # 1%: a real secondary class
    assert d.gaps.class_ns[0].tolist() == [4 * US, 0, 400, 395_600, 0, 0]
    assert Cause(d.gaps.secondary[0]) == Cause.SYNC and d.gaps.secondary_share[0] == pytest.approx(0.01)
    assert card_for_gap(d, 0).secondary == Cause.SYNC and card_for_gap(d, 0).secondary_share == pytest.approx(0.01)


def test_why_does_not_add_nested_calls_to_their_caller():
    """A 100 µs gap while T runs `dataloader next` [0, 100) µs, inside which `aten::cat`
    runs [10, 40) and `aten::div` [50, 70): the sentence says 100 µs in the outer op
    (of which 30 and 20 µs in the inner ones), not 150 µs in all three; a thread label
    that already says "thread" is not prefixed again."""
    b = TraceBuilder()
    cpu = b.lane("1", "1", process_name="python3", thread_name="thread 1 (python)")
    gpu = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    b.event(cpu, "cudaLaunchKernel", -20 * US, 2 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k1", -10 * US, 10 * US, Kind.KERNEL, correlation=1)
    b.event(cpu, "dataloader next", 0, 100 * US, Kind.CPU_OP)
    b.event(cpu, "aten::cat", 10 * US, 30 * US, Kind.CPU_OP)
    b.event(cpu, "aten::div", 50 * US, 20 * US, Kind.CPU_OP)
    b.event(cpu, "cudaLaunchKernel", 100 * US, 2 * US, Kind.LAUNCH, correlation=2)
    b.event(gpu, "k2", 110 * US, 10 * US, Kind.KERNEL, correlation=2)
    d = diagnose(b.build())
    i = int(np.argmax(d.gaps.dur_ns))
    assert d.gaps.dur_ns[i] == 110 * US
    why = card_for_gap(d, i).why
    assert (
        "`thread 1 (python)` spent 0.100 ms on host work (0.100 ms in `dataloader next` (of which 30.0 µs in "
        "`aten::cat`, 20.0 µs in `aten::div`))"
    ) in why
    assert "thread `thread" not in why


def _host_gap_card(events, next_kernel: str = "k2"):
    """The card of the 110 µs host gap [0, 110) µs between k1 and ``next_kernel``, while
    the launching thread `main` runs ``events`` ((name, start µs, dur µs, kind))."""
    b = TraceBuilder()
    cpu, gpu = _main_and_stream(b)
    b.event(cpu, "cudaLaunchKernel", -20 * US, 2 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k1", -10 * US, 10 * US, Kind.KERNEL, correlation=1)
    for name, s_us, d_us, kind in events:
        b.event(cpu, name, s_us * US, d_us * US, kind)
    b.event(cpu, "cudaLaunchKernel", 100 * US, 2 * US, Kind.LAUNCH, correlation=2)
    b.event(gpu, next_kernel, 110 * US, 10 * US, Kind.KERNEL, correlation=2)
    d = diagnose(b.build())
    i = int(np.argmax(d.gaps.dur_ns))
    assert d.gaps.dur_ns[i] == 110 * US
    return card_for_gap(d, i)


def test_of_which_names_only_the_calls_directly_inside():
    """`## all2all ##` [0, 100) µs holds `record_param_comms` [10, 70), which holds
    `nccl:all_to_all` [20, 60): inside the outer range only the 60 µs of the direct
    call are named (the 40 µs nested in it are part of those 60), so the inner items
    never add to more than their parent (hta sampled_rank-0 #610 said 0.174 + 0.151 ms
    inside 0.272 ms)."""
    why = _host_gap_card(
        [
            ("## all2all ##", 0, 100, Kind.ANNOTATION),
            ("record_param_comms", 10, 60, Kind.CPU_OP),
            ("nccl:all_to_all", 20, 40, Kind.CPU_OP),
        ]
    ).why
    assert "(0.100 ms in `## all2all ##` (of which 60.0 µs in `record_param_comms`))" in why
    assert "40.0 µs" not in why


def test_host_time_in_a_collective_call_is_not_called_launch_bound():
    """The same gap: 60 of its 100 µs of host work are in the communication call
    `record_param_comms`, so the advice is about the collective's host cost, not the
    per-kernel launch tax (torch.compile, fusing ops)."""
    c = _host_gap_card(
        [("## all2all ##", 0, 104, Kind.ANNOTATION), ("record_param_comms", 10, 60, Kind.CPU_OP)],
        next_kernel="ncclDevKernel_AllToAll",
    )
    assert c.cause == Cause.HOST
    assert c.first_experiment.startswith(
        "Most of this host time is inside the communication call `record_param_comms` (60.0 µs)"
    )
    assert "torch.compile" not in c.first_experiment and "async_op=True" in c.first_experiment
    # its own time, with nothing finer recorded in it, is still the communication call's
    # (df_index_resolver #10860: 2.033 ms of 2.266 ms in `record_param_comms`)
    assert "Find out what the CPU does inside" not in c.first_experiment


def test_of_which_leaves_out_a_call_of_the_outer_ones_name_and_what_does_not_fit():
    """`aten::div` [0, 100) holding `aten::div` [10, 50) named nothing inside (control
    #2393 read "`aten::div` (of which 18.0 µs in `aten::div`)"); inner items never add
    to more than the outer item's time."""
    why = _host_gap_card([("aten::div", 0, 100, Kind.CPU_OP), ("aten::div", 10, 40, Kind.CPU_OP)]).why
    assert "0.100 ms in `aten::div`" in why and "of which" not in why
    # `outer` [0, 100) holds `a` [10, 60), in which the thread is in a copy call
    # [20, 55) that no GPU copy accounts for, and `b` [62, 92): the copy call is host work
    # (copy is GPU copy time only), so `outer`'s host time is 100 µs, and the calls inside
    # it are named with their own host time, which fits (dlrm worker2 #100 read 15 + 4 µs
    # inside 16 µs: the copy call was counted in both)
    why = _host_gap_card(
        [
            ("outer", 0, 100, Kind.CPU_OP),
            ("a", 10, 50, Kind.CPU_OP),
            ("cudaMemcpyAsync", 20, 35, Kind.MEMCPY_CALL),
            ("b", 62, 30, Kind.CPU_OP),
        ]
    ).why
    # (`a`'s time holds the 35 µs of the copy call in it: host work, not copy)
    assert "(0.100 ms in `outer` (of which 50.0 µs in `a`, 30.0 µs in `b`))" in why and "copying" not in why


def test_a_python_function_named_all_reduce_is_not_a_communication_call():
    """vLLM's `symm_mem.py(127): all_reduce` is the framework's Python, holding
    `aten::copy_` and `aten::empty_like`: no process-group advice (async_op=True), as
    for `c10d::allreduce_` (b200 #6)."""
    c = _host_gap_card(
        [
            ("symm_mem.py(127): all_reduce", 0, 104, Kind.PYTHON),
            ("aten::copy_", 5, 50, Kind.CPU_OP),
            ("aten::empty_like", 60, 35, Kind.CPU_OP),
        ]
    )
    assert c.cause == Cause.HOST and "communication call" not in c.first_experiment


def _host_bound(launch_us: int):
    """T launches k1 at 0, then for ``launch_us`` µs sits in one cudaLaunchKernel for k2
    (inside `forward`, which encloses both launches); k1 [5, 15) µs, k2 after."""
    b = TraceBuilder()
    cpu, gpu = _main_and_stream(b)
    b.event(cpu, "nn.Module: Net_0", 0, (30 + launch_us) * US, Kind.CPU_OP)
    b.event(cpu, "cudaLaunchKernel", 1 * US, 2 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k1", 5 * US, 10 * US, Kind.KERNEL, correlation=1)
    b.event(cpu, "cudaLaunchKernel", 20 * US, launch_us * US, Kind.LAUNCH, correlation=2)
    b.event(gpu, "k2", (22 + launch_us) * US, 10 * US, Kind.KERNEL, correlation=2)
    return diagnose(b.build())


def test_one_long_launch_call_is_first_use_cost_not_dispatch_tax():
    """The gap [15, 2022) µs is mostly one 2 ms launch call: the card says first-use cost
    and warns off CUDA graphs (a newcomer saw CUDA-graph advice for a 6.5 ms
    hipLaunchKernel)."""
    d = _host_bound(2000)
    i = int(np.argmax(d.gaps.dur_ns))
    c = card_for_gap(d, i)
    assert c.cause == Cause.LAUNCH and c.smell == "slow launch call (one-time cost)"
    assert "`cudaLaunchKernel` took 2.000 ms" in c.first_experiment and "first-use cost" in c.first_experiment
    assert c.forbidden_step.startswith("Do not capture CUDA graphs")
    short = _host_bound(10)  # a 10 µs call: the ordinary launch advice
    c = card_for_gap(short, int(np.argmax(short.gaps.dur_ns)))
    assert c.smell == "launch-bound gap" and "CUDA graph" in c.first_experiment


def test_a_launch_call_that_returns_long_after_its_kernel_ran_holds_the_thread():
    """hta/inference_rank_1's first ``cudaLaunchKernel`` (71.157 ms, 1,414 µs) started
    its 4 µs kernel after 12 µs and returned 1.398 ms after it ended; the 1.450 ms gap
    after that kernel read "1.434 ms with no recorded events", as if the thread had been
    free. Hand-made: the call [0, 1414) µs, its kernel [12, 16), the next launch
    [1450, 1464) and its kernel [1466, 1476). The gap [16, 1466) holds 1,398 µs of the
    call (first-use cost: 1,410 µs outside its kernel, 100x the 14 µs of the other),
    36 µs of untraced time and the 16 µs launch path of the next op."""
    b = TraceBuilder()
    cpu, gpu = _main_and_stream(b)
    b.event(cpu, "cudaLaunchKernel", 0, 1414 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k1", 12 * US, 4 * US, Kind.KERNEL, correlation=1)
    for j in range(2, 7):  # more launches, so the median is a real one (14 µs)
        t = 1450 + (j - 2) * 40
        b.event(cpu, "cudaLaunchKernel", t * US, 14 * US, Kind.LAUNCH, correlation=j)
        b.event(gpu, f"k{j}", (t + 16) * US, 10 * US, Kind.KERNEL, correlation=j)
    d = diagnose(b.build())
    i = int(np.flatnonzero(d.gaps.start_ns == 16 * US)[0])
    assert d.gaps.end_ns[i] == 1466 * US
    cn = d.gaps.class_ns[i]
    assert cn[Cause.LAUNCH] == (1398 + 16) * US and cn[Cause.HOST] == 36 * US
    assert bool(d.gaps.one_time[i])
    c = card_for_gap(d, i)
    assert c.smell == "slow launch call (one-time cost)", c.smell
    assert "1.398 ms of it in one launch call `cudaLaunchKernel`" in c.why, c.why
    assert "36.0 µs on host work (36.0 µs with no recorded events" in c.why, c.why
    # a call that returns while its kernel runs stops at the kernel's start, as before
    b = TraceBuilder()
    cpu, gpu = _main_and_stream(b)
    b.event(cpu, "cudaLaunchKernel", 0, 30 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k1", 5 * US, 100 * US, Kind.KERNEL, correlation=1)
    from gapscope.analysis.evidence_kinds import evidence_end

    assert evidence_end(b.build()).tolist() == [5 * US, 105 * US]


def test_a_slow_call_of_a_runtime_whose_every_launch_is_slow_is_no_first_use():
    """MTIA's ``runFunction`` takes 0.3 ms per launch, and a dozen of 1.3-2 ms come back
    all through mtia_rank_0 (an auditor found the 333rd launch of an op called a
    first-use cost): a 2 ms call among launch calls of 0.3 ms is the launch path, not
    one-time; at CUDA's few µs per launch the same call is first use."""
    for typical_us, one_time in ((300, False), (5, True)):
        b = TraceBuilder()
        cpu, gpu = _main_and_stream(b)
        t = 0
        for j in range(12):
            dur = 2000 if j == 8 else typical_us
            b.event(
                cpu, "runFunction - job_prep_and_submit_for_execution", t * US, dur * US, Kind.LAUNCH, correlation=j
            )
            b.event(gpu, f"k{j}", (t + dur + 2) * US, 10 * US, Kind.KERNEL, correlation=j)
            t += dur + 20
        d = diagnose(b.build())
        i = int(np.argmax(d.gaps.dur_ns))
        assert d.gaps.dur_ns[i] == 2010 * US  # k7 ends 8 µs before the slow call, k8 starts 2 µs after it
        c = card_for_gap(d, i)
        assert bool(d.gaps.one_time[i]) is one_time, typical_us
        assert ("first-use cost" in c.why) is one_time, c.why
        if not one_time:
            assert c.cause == Cause.LAUNCH and c.smell != "slow launch call (one-time cost)"


def test_slow_launches_of_one_api_beside_fast_ones_of_another_are_first_use():
    """nvfuser/report1: 9 ``cudaLaunchKernel`` calls, 5 of them 2-8 ms (each a kernel's
    first use), beside 9 ``cuLaunchKernel[Ex]`` of 18-93 µs: the slow ones are judged
    against all the trace's launch calls, not against their own API's."""
    from gapscope.analysis.classify import SLOW_LAUNCH_NS
    from gapscope.analysis.evidence_kinds import slow_launch_calls

    b = TraceBuilder()
    cpu = b.lane("1", "1", process_name="python3", thread_name="main")
    durs = [("cudaLaunchKernel", d) for d in (2000, 3000, 8000, 2100, 4000, 20, 30, 25, 40)]
    durs += [("cuLaunchKernel", d) for d in (18, 20, 25, 30, 37, 19)] + [("cuLaunchKernelEx", d) for d in (59, 60, 93)]
    t = 0
    for name, d in durs:
        b.event(cpu, name, t * US, d * US, Kind.LAUNCH)
        t += d + 10
    m = slow_launch_calls(b.build(), SLOW_LAUNCH_NS)
    assert m.tolist() == [True] * 5 + [False] * 13


@pytest.mark.parametrize(("n_inner", "module_us", "launch_us"), [(1, 200, 1), (5, 200, 1), (1, 800, 1)])
def test_host_culprit_that_launches_work_gets_per_kernel_cost_advice(n_inner, module_us, launch_us):
    """The host culprit `nn.Module: Net_0` encloses launch calls: the model's own code,
    which cannot leave the critical path; a culprit that launches nothing still can.
    Under 0.5 ms of it per launch inside, its time is the per-kernel cost; one launch in
    0.8 ms (mtia_inference's `predictor_executor::run`: 5 ms of input preparation, then
    one launch) is its own work, and per-kernel advice (torch.compile, fewer ops) wrong."""
    b = TraceBuilder()
    cpu, gpu = _main_and_stream(b)
    b.event(cpu, "cudaLaunchKernel", 0, 2 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k1", 5 * US, 10 * US, Kind.KERNEL, correlation=1)
    b.event(cpu, "nn.Module: Net_0", 10 * US, module_us * US, Kind.CPU_OP)
    for j in range(n_inner):  # the last one launches k2, the first kernel after the gap
        at = module_us + 5 - 3 * (n_inner - 1 - j) - (launch_us - 1)
        b.event(cpu, "cudaLaunchKernel", at * US, launch_us * US, Kind.LAUNCH, correlation=2 + j)
        b.event(gpu, f"k{2 + j}", (module_us + 12 + 12 * j) * US, 10 * US, Kind.KERNEL, correlation=2 + j)
    d = diagnose(b.build())
    c = card_for_gap(d, int(np.argmax(d.gaps.dur_ns)))
    assert c.cause == Cause.HOST
    assert c.first_experiment.startswith("`nn.Module: Net_0` issues GPU work itself")
    assert "off the critical path" not in c.first_experiment
    if module_us == 800 and launch_us == 1:
        assert (
            "but it holds only one launch call in all its 0.800 ms, 0.799 ms of which is CPU work" in c.first_experiment
        )
        assert "torch.compile" not in c.first_experiment
    else:
        assert "Cut the CPU cost per kernel" in c.first_experiment


@pytest.mark.parametrize(
    "rel",
    [
        "tracelens/sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz",
        "param/resnet_kineto.json.gz",
        "tracelens/mi210/gpu_only_trace.json.gz",
        # two steps of two modes (9.2 and 0.05 ms of idle): no step within 1.5x of the
        # median, so the nearest ones split it (the split read "-")
        "hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
        "hta/benchmark_result_2869224_1695835535_trace.json.gz",
        # one step holding a 32.7 ms warm-up graph capture: its share is one-time idle
        "tracelens/sglang_decode/bs_32_rank0.json.gz",
    ],
)
def test_idle_per_step_by_cause_adds_up_to_the_idle_per_step(rel):
    """The budget's classes split the median step's idle as that step splits its own
    (they read 493 ms of dependency in a 29 ms sglang step, and 176 ms of host in a 160
    ms resnet_kineto step: gaps outside the steps, and a mean over steps against the
    median step), and no what-if removes more than that idle."""
    d = diagnose(load(require(CORPUS / rel)))
    b = d.budget
    rest = b.idle_ns - b.one_time_idle_ns  # the warm-up's share is in no class
    assert abs(sum(b.class_idle_ns.values()) - rest) <= len(Cause) + 1  # rounding per class
    assert all(v <= rest + 1 for v in b.class_idle_ns.values())
    every = d.what_if(causes=list(Cause))
    assert abs(every.removed_ns - rest) <= 1
    assert every.projected_step_ns == max(b.wall_ns - every.removed_ns, b.gpu_busy_ns)
    if b.one_time_idle_ns == 0:
        assert every.projected_step_ns == b.gpu_busy_ns


def test_a_step_that_is_a_graph_capture_keeps_it_out_of_the_classes_and_the_what_ifs():
    """sglang_decode/bs_32's one profiled step (33.717 ms, 11 us of kernels) holds gap
    [0.730, 1.702) ms (0.972 ms from the trace start) and the warm-up graph capture's
    gap [1.714, 34.448) ms (32.734 ms). The short gap lies inside
    `torch/cuda/graphs.py(240): __enter__` [0.856, 1.712) ms (hipDeviceSynchronize,
    two hipFree of empty_cache, capture_begin; hipStreamBeginCapture at 1.705 ms): it is
    the capture's entry, part of the same warm-up (it read "host island" with advice to
    use torch.compile). Both are one-time: the step's idle is all one-time, in no class
    (its 59.1 us of hipDeviceSynchronize once read 2.048 ms of sync per step, and
    removing host 11.4x the steps/s)."""
    d = diagnose(load(require(CORPUS / "tracelens/sglang_decode/bs_32_rank0.json.gz")))
    b = d.budget
    g = d.gaps
    assert g.one_time[g.device == b.device].all() and int((g.device == b.device).sum()) == 2
    assert b.one_time_idle_ns == b.idle_ns and sum(b.class_idle_ns.values()) == 0
    w = d.what_if(causes=[Cause.HOST, Cause.SYNC, Cause.LAUNCH])
    assert w.removed_ns == 0 and w.speedup == 1.0
    first = int(np.argmin(g.start_ns))
    c = card_for_gap(d, first)
    assert c.smell == "graph capture (one-time cost)"
    assert "For 0.847 ms of it the thread was entering `torch.cuda.graph`" in c.why
    assert "capturing a HIP graph" not in c.why  # the gap ends before hipStreamBeginCapture
    assert c.first_experiment.startswith("This is the entry into a HIP graph capture")
    assert "torch.compile" not in c.first_experiment


def test_a_step_boundary_pair_of_a_queued_and_a_starved_gap_tells_one_story():
    """dlrm worker1's largest group is the step-boundary pair of a 1.038 ms queued gap
    at the start of the step and a 0.114 ms host gap after its last kernel: its card
    said the thread "spent 0.114 ms on host work" and that the next op "was already
    queued, so neither held it back". It tells the queued part, the group's class, and
    the mix after."""
    path = require(CORPUS / "param" / "dlrm_kineto" / "worker1_step_12.1694128201556.pt.trace.json")
    d = diagnose(load(path))
    c = card_for_group(d, 0)
    assert c.cause == Cause.DEPENDENCY
    assert "on host work" not in c.why and "already queued" in c.why
    assert "In the 1.038 ms of the step-boundary stretch at the start of the step" in c.why
    assert c.why.endswith("Across the group's 1.152 ms of idle: dependency (90%), then host (10%).")


def test_the_budget_splits_idle_as_the_typical_steps_do():
    """param/resnet_kineto: in the median step (159.561 ms) 21.9 of its 23.1 ms without
    a kernel run under a copy; 14 slow steps each hold a 120-670 ms host gap. A split
    pooled over all the steps read "host 21.214 ms"; the typical steps' is mostly copy
    (an auditor's raw count for the median step: copy about 21.9 ms, host about 0.75
    ms). mi300: one 2.16 ms dependency gap in step 0 made the split dependency-heavy;
    the two typical steps idle mostly under copies."""
    d = diagnose(load(require(CORPUS / "param" / "resnet_kineto.json.gz")))
    b = d.budget
    assert b.wall_ns == 159_561_000 and b.idle_ns == 23_698_000
    assert b.class_idle_ns["copy"] > 20_000_000 and b.class_idle_ns["host"] < 1_000_000
    assert (b.typical_steps, b.steps) == (12, 29)  # an auditor's count from the raw step idles
    # the steps left out are said, with their idle (a 0.7 ms stub step; host stalls to 693 ms)
    assert b.other_steps_idle_ns is not None and b.other_steps_idle_ns[1] == 693_214_000
    from gapscope.report.fmt import budget_rows

    rows = dict(
        budget_rows(
            {"steps": 29, "wall_ns": b.wall_ns, "typical_steps": 12, "other_steps_idle_ns": [2_000, 693_214_000]}
        )
    )
    assert rows["Split over steps"] == (
        "12 of 29 (idle within 1.5x of the median step's; the other 17 idle 0.002 ms to 693.214 ms, left out)"
    )
    d_mi300 = diagnose(load(require(CORPUS / "tracelens" / "mi300" / "resnet_act_checkpoint.json.gz")))
    b = d_mi300.budget
    # the GPU runs 30 ms behind the CPU here (the first op launched in step 1 starts 30.08 ms
    # after the step), so the steps are the GPU's: 18.98 ms each beside CPU ranges of 15.95 ms
    assert b.source == "ProfilerStep" and d_mi300.steps.on_gpu
    assert (b.wall_ns, b.gpu_busy_ns, b.idle_ns) == (18_980_745, 18_310_276, 670_469)
    # two typical steps: the third idles 0.396 ms, outside 1.5x of the median step's
    assert b.class_idle_ns["copy"] > 5 * b.class_idle_ns["dependency"] and b.typical_steps == 2


def test_copies_whose_name_says_no_direction_are_told_it():
    """MTIA names every DMA transfer `dma_request` (its direction is in its args): the
    card says how many ran each way (an auditor could not tell a device-to-host-to-device
    round trip from a prefetch); Kineto's `Memcpy HtoD` names say it themselves."""
    from gapscope.parsers.model import CopyKind

    h2d, d2h, nodir = CopyKind.H2D, CopyKind.D2H, CopyKind.UNKNOWN
    cases = (
        ("dma_request", [h2d, d2h, h2d, d2h, h2d], "(3 host-to-device, 2 device-to-host)"),
        ("Memcpy HtoD (Pinned -> Device)", [h2d] * 5, None),
        # every copy counted: one of no known direction is said (it read "(all host-to-device)")
        ("dma_request", [h2d, nodir, h2d, h2d, h2d], "(4 host-to-device, 1 of unknown direction)"),
        ("dma_request", [h2d] * 5, "(all host-to-device)"),
        ("dma_request", [nodir] * 5, ""),
    )
    for name, kinds, say in cases:
        b = TraceBuilder()
        cpu, gpu = _main_and_stream(b)
        b.event(cpu, "cudaLaunchKernel", 0, 2 * US, Kind.LAUNCH, correlation=1)
        b.event(gpu, "k1", 5 * US, 10 * US, Kind.KERNEL, correlation=1)
        for j, ck in enumerate(kinds):
            b.event(gpu, name, (20 + 40 * j) * US, 30 * US, Kind.MEMCPY, bytes=1 << 20, copy_kind=ck)
        b.event(cpu, "cudaLaunchKernel", 198 * US, 2 * US, Kind.LAUNCH, correlation=2)
        b.event(gpu, "k2", 210 * US, 10 * US, Kind.KERNEL, correlation=2)
        c = card_for_gap(diagnose(b.build()), 0)
        assert f"copying (running 5 copies `{name}`" in c.why
        if say is None:
            assert "host-to-device" not in c.why
        else:
            assert f"running 5 copies `{name}`{' ' + say if say else ''}, 30.0 µs median each, 5.0 MiB" in c.why


@pytest.mark.parametrize("synchronous", [True, False])
def test_host_advice_says_when_launches_wait_for_their_kernel(synchronous):
    """MTIA's runFunction returns only after its kernel has run (1,374 of 2,103 launches
    of kernels of 50 µs or more in hta/mtia_rank_0): no host work can overlap a kernel,
    so "launch the next GPU work first so the two overlap" cannot work as captured, and
    the card says so; ordinary asynchronous launches get no such note."""
    b = TraceBuilder()
    cpu, gpu = _main_and_stream(b)
    t = 0
    for j in range(12):
        if j == 6:  # host work between two launches: the gap the card is about
            b.event(cpu, "prepare_batch", t * US, 500 * US, Kind.CPU_OP)
            t += 510
        call_us = 110 if synchronous else 5
        b.event(
            cpu, "runFunction - job_prep_and_submit_for_execution", t * US, call_us * US, Kind.LAUNCH, correlation=j
        )
        b.event(gpu, f"k{j}", (t + 3) * US, 100 * US, Kind.KERNEL, correlation=j)
        t += max(call_us, 103) + 5
    d = diagnose(b.build())
    i = int(np.argmax(d.gaps.dur_ns))
    c = card_for_gap(d, i)
    assert c.cause == Cause.HOST and "prepare_batch" in c.first_experiment
    note = "As captured, the launch calls return only after their kernel has run (12 of the 12 launches"
    assert (note in c.first_experiment) is synchronous
    # an MTIA trace (its launches are runFunction calls): no CUDA remedies named
    assert "cuBLAS" not in c.forbidden_step and "math-library settings" in c.forbidden_step
    assert "CUDA graph" not in c.first_experiment


def test_copies_are_described_even_when_the_evidence_list_keeps_none():
    """nccl_data #1186: 144 short DtoD copies under many larger host items; the gap's
    evidence list (20 items) kept none of them, and the card said only "0.397 ms
    copying". The copy time names the GPU's copies whatever the list kept."""
    from gapscope.parsers.model import CopyKind

    b = TraceBuilder()
    cpu, gpu = _main_and_stream(b)
    b.event(cpu, "cudaLaunchKernel", 0, 2 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k1", 5 * US, 10 * US, Kind.KERNEL, correlation=1)
    for j in range(30):  # 30 host ops of 50 µs, each its own name: more than the list holds
        b.event(cpu, f"op{j}", (20 + 50 * j) * US, 50 * US, Kind.CPU_OP)
    d2d = "Memcpy DtoD (Device -> Device)"
    for j in range(6):
        b.event(gpu, d2d, (30 + 200 * j) * US, 2 * US, Kind.MEMCPY, bytes=4096, copy_kind=CopyKind.D2D)
    b.event(cpu, "cudaLaunchKernel", 1525 * US, 2 * US, Kind.LAUNCH, correlation=2)
    b.event(gpu, "k2", 1530 * US, 10 * US, Kind.KERNEL, correlation=2)
    d = diagnose(b.build())
    i = int(np.argmax(d.gaps.dur_ns))
    assert not any(e.cause == Cause.COPY for e in d.evidence(i))  # the list is full of host items
    assert f"the GPU spent 12.0 µs copying (running 6 copies `{d2d}`, 2.0 µs median each, 24.0 KiB in all" in (
        card_for_gap(d, i).why
    )


@pytest.mark.parametrize(
    ("sync_at_us", "words"),
    [(31, "while a small device-to-host copy ran"), (60, "with the small device-to-host copy before it")],
)
def test_the_small_copy_of_a_sync_is_said_under_or_before_the_wait(sync_at_us, words):
    """The `.item()` signature: a small device-to-host copy, then a blocking wait. The
    card said the copy "ran meanwhile" even when it ran before the wait, inside the copy
    call (control #1081: the copy at 0-2 µs, the wait at 14-17 µs)."""
    from gapscope.parsers.model import CopyKind

    b = TraceBuilder()
    cpu, gpu = _main_and_stream(b)
    b.event(cpu, "cudaLaunchKernel", 0, 2 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k1", 5 * US, 25 * US, Kind.KERNEL, correlation=1)
    b.event(cpu, "cudaMemcpyAsync", 10 * US, 5 * US, Kind.MEMCPY_CALL, correlation=2)
    b.event(
        gpu,
        "Memcpy DtoH (Device -> Pageable)",
        32 * US,
        2 * US,
        Kind.MEMCPY,
        bytes=4,
        copy_kind=CopyKind.D2H,
        correlation=2,
    )
    b.event(cpu, "cudaStreamSynchronize", sync_at_us * US, 10 * US, Kind.SYNC_CALL)
    b.event(cpu, "cudaLaunchKernel", 100 * US, 2 * US, Kind.LAUNCH, correlation=3)
    b.event(gpu, "k2", 105 * US, 10 * US, Kind.KERNEL, correlation=3)
    d = diagnose(b.build())
    why = card_for_gap(d, int(np.argmax(d.gaps.dur_ns))).why
    assert "`cudaStreamSynchronize`" in why and words in why, why
    assert ") (" not in why


def test_the_sync_cliff_and_its_small_copy_share_one_pair_of_brackets():
    """extrap/con_kernel #3 read "8.9 µs blocked in `cudaEventSynchronize` (a small
    device-to-host copy ran meanwhile) (the sync cliff)"; the raw events: the 40 kB
    D2H copy at 628.456 ms ran under the 8.9 µs wait."""
    d = diagnose(load(require(CORPUS / "extrap" / "con_kernel.sqlite")))
    why = card_for_gap(d, 3).why
    assert "8.9 µs blocked in `cudaEventSynchronize` (while a small device-to-host copy ran; the sync cliff)." in why, (
        why
    )
    # the copy was the GPU's: the thread sat in one cudaEventSynchronize from 381 ms on and
    # made no copy call in the gap, so it did not "spend 2.682 ms copying"
    assert why.startswith(
        "For 2.691 ms the GPU had no kernel to run: the GPU spent 2.682 ms copying (running the copy "
        "`Memcpy DtoH (Device -> Pinned)`, 38.1 MiB); `thread 33680` spent 8.9 µs blocked"
    ), why


@pytest.mark.parametrize("autograd_work", [True, False])
def test_a_thread_waiting_in_a_bare_range_is_pointed_at_the_work_of_another(autograd_work):
    """nccl_data #1186: the main thread sat 14.6 ms in `## backward ##` with nothing
    finer recorded, and the card said to instrument it, while the autograd thread of
    the same process ran 144 `reducer::copy_bucket_to_grad` (7.75 ms) meanwhile. A step
    range on the other thread is no such work."""
    b = TraceBuilder()
    main = b.lane("1", "1", process_name="python3", thread_name="main")
    auto = b.lane("1", "2", process_name="python3", thread_name="pt_autograd_0")
    gpu = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    b.event(main, "cudaLaunchKernel", 0, 2 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k1", 5 * US, 10 * US, Kind.KERNEL, correlation=1)
    b.event(main, "## backward ##", 20 * US, 3000 * US, Kind.ANNOTATION)
    if autograd_work:
        for j in range(20):
            b.event(auto, "reducer::copy_bucket_to_grad", (30 + 140 * j) * US, 120 * US, Kind.CPU_OP)
    else:
        b.event(auto, "ProfilerStep#3", 10 * US, 3100 * US, Kind.CPU_OP)
    b.event(main, "cudaLaunchKernel", 3025 * US, 2 * US, Kind.LAUNCH, correlation=2)
    b.event(gpu, "k2", 3030 * US, 10 * US, Kind.KERNEL, correlation=2)
    d = diagnose(b.build())
    c = card_for_gap(d, int(np.argmax(d.gaps.dur_ns)))
    said = "while thread `pt_autograd_0` of the same process recorded 2.400 ms of work (2.400 ms in `reducer::copy_bucket_to_grad`)"
    assert (said in c.first_experiment) is autograd_work, c.first_experiment
    assert ("PyTorch runs the backward pass on its autograd threads" in c.first_experiment) is autograd_work


@pytest.mark.parametrize(
    ("iterator", "words"),
    [
        ("_SingleProcessDataLoaderIter", "load in parallel (DataLoader num_workers > 0"),
        ("_MultiProcessingDataLoaderIter", "more loading workers (a larger num_workers"),
    ],
)
def test_dataloader_advice_follows_the_iterator(iterator, words):
    """param/resnet_kineto: 465 ms in `_MultiProcessingDataLoaderIter.__next__` was
    advised "num_workers > 0", which it already has: its workers do not keep up."""
    b = TraceBuilder()
    cpu, gpu = _main_and_stream(b)
    b.event(cpu, "cudaLaunchKernel", 0, 2 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k1", 5 * US, 10 * US, Kind.KERNEL, correlation=1)
    b.event(cpu, f"enumerate(DataLoader)#{iterator}.__next__", 20 * US, 900 * US, Kind.ANNOTATION)
    b.event(cpu, "cudaLaunchKernel", 925 * US, 2 * US, Kind.LAUNCH, correlation=2)
    b.event(gpu, "k2", 930 * US, 10 * US, Kind.KERNEL, correlation=2)
    d = diagnose(b.build())
    assert words in card_for_gap(d, int(np.argmax(d.gaps.dur_ns))).first_experiment


def test_the_host_items_of_a_sentence_add_up_to_its_host_part():
    """hta/nccl_data group 1: "19.444 ms on host work (14.632 ms in `## backward ##`,
    4.734 ms in `Optimizer.step#SGD.step` ...)" left 78 µs unsaid (a newcomer added the
    items up); the rest is said as other work once it is 0.1 % of the part."""
    import re

    d = diagnose(load(require(CORPUS / "hta" / "nccl_data.json.gz")))
    why = card_for_group(d, 1).why
    m = re.search(r"spent ([\d.]+) ms on host work \((.*?)\), [\d.]+ µs in the launch path", why)
    assert m is not None, why
    assert "in other work" in m.group(2)
    parts = re.sub(r" \(of which [^)]*\)", "", m.group(2))  # inner calls are in their op's time
    total = sum(float(v) * (1 if u == "ms" else 1e-3) for v, u in re.findall(r"([\d.]+) (ms|µs) in ", parts))
    assert abs(total - float(m.group(1))) < 0.002, (total, why)


ROCM_TRACES = (
    "tracelens/mi300/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "tracelens/mi210/gpu_only_trace.json.gz",
    "tracelens/sglang_decode/sglang_Qwen3-8B_decode.json.gz",
    "hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
)


@pytest.mark.parametrize("rel", ROCM_TRACES)
def test_rocm_cards_name_rocm_remedies_not_cudas(rel):
    """On an AMD GPU (launches are hip* calls) no card names cuBLAS, a CUDA graph or
    CUDA_MODULE_LOADING: rocBLAS/hipBLASLt and HIP graphs instead (the user test found
    "Do not reach for cuBLAS" on an MI300X card)."""
    from gapscope.parsers import load

    trace = load(require(CORPUS / rel))
    d = diagnose(trace)
    assert len(d.gaps) > 0
    texts = [
        " ".join((c.why, c.first_experiment, c.forbidden_step, c.proof))
        for c in (card_for_gap(d, i) for i in range(len(d.gaps)))
    ]
    for t in texts:
        assert "cuBLAS" not in t and "CUDA graph" not in t and "CUDA_MODULE_LOADING" not in t and "CUDA module" not in t
    assert any("rocBLAS/hipBLASLt" in t or "HIP graph" in t for t in texts)


def test_a_gap_no_op_follows_is_not_said_to_have_an_unlinked_next_op(tmp_path):
    """GPU 1 runs two copies and no kernel inside the one profiler step: its whole
    window is one gap that ends at the window's end, not at an op. Its card must not
    speak of "the next op" (its launch path, its missing launch link): there is none.
    The launches thread 1 made meanwhile are GPU 0's."""
    import json

    ev = [{"ph": "M", "name": "process_name", "pid": p, "tid": 0, "args": {"name": f"GPU {p}"}} for p in (0, 1)]

    def cpu(name, ts, dur, cat="cuda_runtime", **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": 100, "tid": 1, "ts": ts, "dur": dur, "args": args}

    def gpu(cat, name, dev, ts, dur, corr, **args):
        a = {"correlation": corr, "device": dev, "stream": 7, **args}
        return {"ph": "X", "cat": cat, "name": name, "pid": dev, "tid": 7, "ts": ts, "dur": dur, "args": a}

    ev.append(cpu("ProfilerStep#1", 0, 1000, cat="user_annotation"))
    for i in range(5):
        ev += [cpu("cudaLaunchKernel", 10 + 100 * i, 5, correlation=i), gpu("kernel", "k", 0, 20 + 100 * i, 50, i)]
    for corr, ts in ((100, 100), (101, 600)):
        ev += [
            cpu("cudaMemcpyAsync", ts, 5, correlation=corr),
            gpu("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 1, ts + 10, 30, corr, bytes=1 << 20),
        ]
    ev.append(cpu("aten::to", 200, 400, cat="cpu_op"))
    path = tmp_path / "copies_only.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    d = diagnose(load(str(path)))
    (i,) = np.flatnonzero(np.asarray(d.gaps.device) == 1)
    assert (int(d.gaps.start_ns[i]), int(d.gaps.end_ns[i])) == (0, 1_000_000)  # the step, all of it
    assert int(d.gaps.next_op[i]) == -1
    c = card_for_gap(d, int(i))
    assert "no GPU op follows the gap before the analysis window ends" in c.why
    # GPU 0's five 5 µs launches, less the one at 110 µs, inside the GPU's copy from 110 µs (copy first)
    assert "20.0 µs in launch calls (none of them ends this gap)" in c.why
    assert "next op" not in c.why and "launch call linked" not in c.why
    assert c.first_experiment.startswith("No GPU op follows this gap before the analysis window ends, and this GPU ran")


def _capture_gap(graph_launch_before: bool, capture_us: int = 400):
    """k1 [0, 10) µs, then thread `main` captures a CUDA graph: cudaStreamBeginCapture
    [20, 22) µs, 30 launch calls of 2 µs every 10 µs from 30 µs (no kernel runs),
    cudaStreamEndCapture ending at 20 + ``capture_us`` µs, cudaGraphInstantiate of 100 µs
    after it, then a cudaGraphLaunch whose kernel k2 starts 20 µs later. With
    ``graph_launch_before``, a cudaGraphLaunch at -100 µs (k0 [-90, -80) µs) ran first."""
    b = TraceBuilder()
    cpu, gpu = _main_and_stream(b)
    corr = 1
    if graph_launch_before:
        b.event(cpu, "cudaGraphLaunch", -100 * US, 5 * US, Kind.LAUNCH, correlation=99)
        b.event(gpu, "k0", -90 * US, 10 * US, Kind.KERNEL, correlation=99)
    b.event(cpu, "cudaLaunchKernel", -10 * US, 2 * US, Kind.LAUNCH, correlation=corr)
    b.event(gpu, "k1", 0, 10 * US, Kind.KERNEL, correlation=corr)
    b.event(cpu, "cudaStreamBeginCapture", 20 * US, 2 * US, Kind.RUNTIME)
    for k in range(30):
        b.event(cpu, "cudaLaunchKernel", (30 + 10 * k) * US, 2 * US, Kind.LAUNCH)
    end_us = 20 + capture_us
    b.event(cpu, "cudaStreamEndCapture", (end_us - 5) * US, 5 * US, Kind.RUNTIME)
    b.event(cpu, "cudaGraphInstantiate", (end_us + 1) * US, 100 * US, Kind.RUNTIME)
    b.event(cpu, "cudaGraphLaunch", (end_us + 110) * US, 5 * US, Kind.LAUNCH, correlation=2)
    b.event(gpu, "k2", (end_us + 130) * US, 10 * US, Kind.KERNEL, correlation=2)
    d = diagnose(b.build())
    i = int(np.argmax(d.gaps.dur_ns))
    assert d.gaps.start_ns[i] == 10 * US and d.gaps.end_ns[i] == (end_us + 130) * US
    return d, i


def test_a_warm_up_graph_capture_is_a_one_time_cost_with_its_own_advice():
    """The gap [10, 550) µs: 400 µs of it inside the capture [20, 420) µs, whose 30
    launches run nothing. A one-time cost, told as a capture: no advice to capture
    graphs or to cut the CPU cost per kernel (bs_32_rank0's 32.7 ms HIP graph capture
    was advised to use graphs)."""
    d, i = _capture_gap(graph_launch_before=False)
    assert bool(d.gaps.one_time[i]) and d.gaps.group[i] == -1
    c = card_for_gap(d, i)
    assert c.smell == "graph capture (one-time cost)"
    assert (
        "For 0.400 ms of it the thread was capturing a CUDA graph (from `cudaStreamBeginCapture` to "
        "`cudaStreamEndCapture`): its 30 launch calls there added kernels to the graph and ran none of them" in c.why
    )
    assert "re-capture" not in c.why
    assert c.first_experiment.startswith("This is a CUDA graph capture, a one-time cost of warm-up")
    assert "torch.compile" not in c.first_experiment
    assert c.forbidden_step.startswith("Do not cut the CPU cost per kernel or capture the step in a CUDA graph")
    assert "`cudaGraphLaunch` per step, and this idle (0.540 ms) gone" in c.proof


def test_captured_launch_calls_are_host_work_not_the_launch_path():
    """The capture gap [10, 550) µs ends with the graph's kernel k2 at 550 µs: its
    launch path is the cudaGraphLaunch [530, 535) µs and the 15 µs until k2 starts
    (20 µs). The capture's 30 launch calls of 2 µs record nodes and launch nothing: host
    work (they read as 80 µs "in the launch path of the next op")."""
    d, i = _capture_gap(graph_launch_before=False)
    assert int(d.gaps.class_ns[i, int(Cause.LAUNCH)]) == 20 * US
    assert int(d.gaps.class_ns[i, int(Cause.HOST)]) == 520 * US
    assert "20.0 µs in the launch path of the next op" in card_for_gap(d, i).why


def _capture_pieces(b, cpu, gpu, *, enter_us=None, captures=((20, 400, 30),)):
    """k1 [0, 10) µs, then on ``cpu`` each capture (begin µs, length µs, launch calls):
    cudaStreamBeginCapture [begin, begin + 2), launch calls of 2 µs every 10 µs from
    begin + 10, cudaStreamEndCapture ending at begin + length; with ``enter_us``, a
    Python frame `torch/cuda/graphs.py(240): __enter__` from ``enter_us`` to 1 µs after
    the first begin call; k2 at 1000 µs after a cudaLaunchKernel at 990 µs."""
    b.event(cpu, "cudaLaunchKernel", -10 * US, 2 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k1", 0, 10 * US, Kind.KERNEL, correlation=1)
    if enter_us is not None:
        first = captures[0][0]
        b.event(cpu, "torch/cuda/graphs.py(240): __enter__", enter_us * US, (first + 1 - enter_us) * US, Kind.PYTHON)
        b.event(cpu, "cudaDeviceSynchronize", (enter_us + 1) * US, 5 * US, Kind.SYNC_CALL)
    for begin, length, n in captures:
        b.event(cpu, "cudaStreamBeginCapture", begin * US, 2 * US, Kind.RUNTIME)
        for k in range(n):
            b.event(cpu, "cudaLaunchKernel", (begin + 10 + 10 * k) * US, 2 * US, Kind.LAUNCH)
        b.event(cpu, "cudaStreamEndCapture", (begin + length - 5) * US, 5 * US, Kind.RUNTIME)
    b.event(cpu, "cudaLaunchKernel", 990 * US, 5 * US, Kind.LAUNCH, correlation=2)
    b.event(gpu, "k2", 1000 * US, 10 * US, Kind.KERNEL, correlation=2)
    d = diagnose(b.build())
    i = int(np.argmax(d.gaps.dur_ns))
    assert (d.gaps.start_ns[i], d.gaps.end_ns[i]) == (10 * US, 1000 * US)
    return d, i


def test_the_entry_into_torch_cuda_graph_is_part_of_the_capture():
    """`torch.cuda.graph.__enter__` [100, 601) µs synchronizes (and empties the cache)
    before cudaStreamBeginCapture at 600 µs; the capture runs to 900 µs. The gap
    [10, 1000) µs: 500 µs entering, 300 µs capturing, together 0.8 of it: one-time
    (bs_32's 0.972 ms entry read "host island")."""
    b = TraceBuilder()
    cpu, gpu = _main_and_stream(b)
    d, i = _capture_pieces(b, cpu, gpu, enter_us=100, captures=((600, 300, 5),))
    (cap,) = graph_captures(d.trace)
    assert (cap.enter_ns, cap.start_ns, cap.end_ns, cap.launches) == (100 * US, 600 * US, 900 * US, 5)
    assert bool(d.gaps.one_time[i])
    c = card_for_gap(d, i)
    assert c.smell == "graph capture (one-time cost)"
    assert "For 0.300 ms of it the thread was capturing a CUDA graph" in c.why
    assert "its 5 launch calls there added kernels" in c.why
    assert (
        "For 0.500 ms more the thread was entering `torch.cuda.graph`, which synchronizes the device, empties the "
        "caching allocator and then calls `cudaStreamBeginCapture`: part of the same warm-up." in c.why
    )


def test_two_captures_in_one_gap_are_told_together():
    """Captures [20, 420) µs (30 launch calls) and [450, 850) µs (12) in the gap
    [10, 1000) µs: 800 µs capturing two graphs, 42 launch calls."""
    b = TraceBuilder()
    cpu, gpu = _main_and_stream(b)
    d, i = _capture_pieces(b, cpu, gpu, captures=((20, 400, 30), (450, 400, 12)))
    c = card_for_gap(d, i)
    assert (
        "For 0.800 ms of it the thread was capturing 2 CUDA graphs (the first from `cudaStreamBeginCapture` to "
        "`cudaStreamEndCapture`): their 42 launch calls there added kernels to the graphs" in c.why
    )


def test_a_capture_without_launch_calls_says_so():
    """A capture [20, 820) µs with no launch call in it: the card does not speak of
    "its launch calls"."""
    b = TraceBuilder()
    cpu, gpu = _main_and_stream(b)
    d, i = _capture_pieces(b, cpu, gpu, captures=((20, 800, 0),))
    c = card_for_gap(d, i)
    assert "capturing a CUDA graph (from `cudaStreamBeginCapture` to `cudaStreamEndCapture`): it recorded no " in c.why
    assert "launch calls there" not in c.why


def test_a_window_that_starts_inside_a_capture_sees_it():
    """The thread's first events are 20 launch calls of a capture whose begin call lies
    before the window (k1 [0, 10) µs was launched before it): cudaStreamEndCapture ends
    at 700 µs. The capture runs from the lane's first event (20 µs) to 700 µs and
    covers the gap [10, 1000) µs for 680 µs."""
    b = TraceBuilder()
    cpu, gpu = _main_and_stream(b)
    b.event(gpu, "k1", 0, 10 * US, Kind.KERNEL)
    for k in range(20):
        b.event(cpu, "cudaLaunchKernel", (20 + 10 * k) * US, 2 * US, Kind.LAUNCH)
    b.event(cpu, "cudaStreamEndCapture", 695 * US, 5 * US, Kind.RUNTIME)
    b.event(cpu, "cudaLaunchKernel", 990 * US, 5 * US, Kind.LAUNCH, correlation=2)
    b.event(gpu, "k2", 1000 * US, 10 * US, Kind.KERNEL, correlation=2)
    d = diagnose(b.build())
    (cap,) = graph_captures(d.trace)
    assert (cap.begin_event, cap.start_ns, cap.end_ns, cap.launches) == (-1, 20 * US, 700 * US, 20)
    i = int(np.argmax(d.gaps.dur_ns))
    c = card_for_gap(d, i)
    assert (
        "For 0.680 ms of it the thread was capturing a CUDA graph (from the start of the window (it starts inside "
        "the capture) to `cudaStreamEndCapture`)" in c.why
    )


def test_a_capture_after_a_graph_was_launched_is_a_re_capture_not_warm_up():
    """The same capture after a cudaGraphLaunch at -100 µs: graphs were replayed before,
    so this capture is no warm-up (its gap stays in the budget) and the card says
    re-capture."""
    d, i = _capture_gap(graph_launch_before=True)
    assert not bool(d.gaps.one_time[i])
    c = card_for_gap(d, i)
    assert c.smell == "graph re-capture"
    assert "This capture began after a CUDA graph had already been launched: a re-capture." in c.why
    assert c.first_experiment.startswith("The CUDA graph is captured again after graphs were already launched")


def test_a_gap_mostly_outside_a_capture_is_not_told_as_one():
    """A capture of 100 µs ([20, 120) µs) in a gap [10, 250) µs covers under half of it:
    neither the smell nor the advice speaks of a capture."""
    d, i = _capture_gap(graph_launch_before=False, capture_us=100)
    c = card_for_gap(d, i)
    assert "capture" not in c.smell and "capturing" not in c.why
    assert not c.first_experiment.startswith("This is a CUDA graph capture")


def test_bs_32_capture_card_names_the_instantiation_not_fragments():
    """tracelens bs_32_rank0 gap at 1.714 ms (32.734 ms, to the window's end): the thread
    captures a HIP graph from hipStreamBeginCapture (1705.3 µs) to hipStreamEndCapture
    (32308.9 + 5.3 µs), then spends 1562.855 µs in hipGraphInstantiateWithFlags (raw
    events). The instantiation is a leaf call: the
    `capture_32_DECODE` range around it carries a deeper depth only because the trace's
    nesting is not proper, so it is no container of it."""
    path = require(CORPUS / "tracelens/sglang_decode/bs_32_rank0.json.gz")
    d = diagnose(load(path))
    i = int(np.argmax(d.gaps.dur_ns))
    assert d.gaps.dur_ns[i] == 32_733_500
    c = card_for_gap(d, i)
    assert c.smell == "graph capture (one-time cost)"
    assert "host work (1.563 ms in `hipGraphInstantiateWithFlags`, " in c.why
    # `prepare_attn` runs 36 times in the gap; the evidence list keeps only some calls
    assert (
        "of the 36 calls of `/sgl-workspace/sglang/python/sglang/srt/layers/communicator.py(499): prepare_attn`"
        in c.why
    )
    assert (
        "capturing a HIP graph (from `hipStreamBeginCapture` to `hipStreamEndCapture`): its 544 launch calls" in c.why
    )
    assert c.evidence[0].name == "hipGraphInstantiateWithFlags" and c.evidence[0].overlap_ns == 1_562_855


def test_a_name_whose_calls_the_evidence_list_cut_is_not_summed():
    """In the host gap [0, 110) µs: `f` runs 5 calls of 6 µs and 40 of 0.3 µs, and 15
    distinct ops of 3 µs each. The evidence list keeps the 20 largest: the 5 long `f`
    calls and the 15 ops. Summing `f` over those (30 µs) would hide its 12 µs in the
    short calls: the sentence says whose calls the 30 µs are (before, it said "30.0 µs
    in `f`"); the untraced 13 µs are 1 µs before the first call, 2.9 µs between the
    calls and 9.1 µs after the last."""
    b = TraceBuilder()
    cpu, gpu = _main_and_stream(b)
    b.event(cpu, "cudaLaunchKernel", -20 * US, 2 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k1", -10 * US, 10 * US, Kind.KERNEL, correlation=1)
    t = 1_000
    for _ in range(5):
        b.event(cpu, "f", t, 6_000, Kind.CPU_OP)
        t += 6_200
    for k in range(15):
        b.event(cpu, f"op{k}", t, 3_000, Kind.CPU_OP)
        t += 3_100
    for _ in range(40):
        b.event(cpu, "f", t, 300, Kind.CPU_OP)
        t += 310
    assert t < 100 * US
    b.event(cpu, "cudaLaunchKernel", 100 * US, 2 * US, Kind.LAUNCH, correlation=2)
    b.event(gpu, "k2", 110 * US, 10 * US, Kind.KERNEL, correlation=2)
    d = diagnose(b.build())
    i = int(np.argmax(d.gaps.dur_ns))
    assert d.gaps.dur_ns[i] == 110 * US
    ev = d.evidence(i)
    assert len(ev) == 20 and sum(e.name == "f" for e in ev) == 5  # of its 45 calls
    c = card_for_gap(d, i)
    assert "(30.0 µs in 5 of the 45 calls of `f`, 13.0 µs with no recorded events" in c.why, c.why


def test_a_second_begin_inside_an_open_capture_is_part_of_it():
    """Two cudaStreamBeginCapture calls (two streams, [20, 22) and [40, 42) µs) before
    one cudaStreamEndCapture ending at 420 µs are one capture [20, 420) µs: its time in
    the gap [10, 550) µs is 400 µs, not 780 µs (the audit's 4.528 ms in a 3.130 ms gap)."""
    from gapscope.analysis.evidence_kinds import graph_captures

    b = TraceBuilder()
    cpu, gpu = _main_and_stream(b)
    b.event(cpu, "cudaLaunchKernel", -10 * US, 2 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k1", 0, 10 * US, Kind.KERNEL, correlation=1)
    b.event(cpu, "cudaStreamBeginCapture", 20 * US, 2 * US, Kind.RUNTIME)
    b.event(cpu, "cudaStreamBeginCapture", 40 * US, 2 * US, Kind.RUNTIME)
    for k in range(30):
        b.event(cpu, "cudaLaunchKernel", (50 + 10 * k) * US, 2 * US, Kind.LAUNCH)
    b.event(cpu, "cudaStreamEndCapture", 415 * US, 5 * US, Kind.RUNTIME)
    b.event(cpu, "cudaGraphLaunch", 530 * US, 5 * US, Kind.LAUNCH, correlation=2)
    b.event(gpu, "k2", 550 * US, 10 * US, Kind.KERNEL, correlation=2)
    d = diagnose(b.build())
    caps = graph_captures(d.trace)
    assert [(c.start_ns, c.end_ns, c.launches) for c in caps] == [(20 * US, 420 * US, 30)]
    i = int(np.argmax(d.gaps.dur_ns))
    assert "For 0.400 ms of it the thread was capturing a CUDA graph" in card_for_gap(d, i).why


def test_the_advice_descends_to_the_frame_that_holds_the_time():
    """xdit_sd_3.5 rank 0, the 16.783 ms gap at 138.320 ms: 15.290 ms of it lies in the
    annotation `## Call CompiledFxGraph … ##` (depth 30), and 14.700 ms of that in the
    Python frame of the inductor wrapper's `call` (depth 29, inside it in time), whose own
    code holds almost all of it: 1,241 `assert_size_stride` calls of ~0.3 µs each, every
    5-18 µs (raw events). The advice names that frame and says the Python tracer is on
    already (it read "almost none of it in a finer recorded event" of the annotation,
    whose `call` frame covers 96 %, and advised with_stack=True)."""
    d = diagnose(load(require(CORPUS / "tracelens/xdit_sd_3.5/profile_trace_rank_0.json.gz")))
    t, g = d.trace, d.gaps
    t0 = int(t.start_ns.min())
    i = int(np.argmax(np.where(np.abs(g.start_ns - t0 - 138_320_000) < 5_000, g.dur_ns, -1)))
    assert abs(int(g.dur_ns[i]) - 16_782_700) < 1_000
    call = int(
        np.flatnonzero(
            [n.endswith("cov463qhi2m2kw6ldmzzijfv5t3cjjklfci3qly3nsw6upcskct3.py(2533): call") for n in t.names]
        )[0]
    )
    ev = int(np.flatnonzero(t.name_id == call)[0])
    lo, hi = max(int(t.start_ns[ev]), int(g.start_ns[i])), int(g.end_ns[i])
    # independent reference: what the events inside the frame cover within the gap
    lane = t.lane == t.lane[ev]
    inside = lane & (t.start_ns >= lo) & (t.start_ns < hi) & (np.arange(len(t)) != ev)
    assert int(np.minimum(t.start_ns[inside] + t.dur_ns[inside], hi).sum() - t.start_ns[inside].sum()) < 0.1 * (hi - lo)
    c = card_for_gap(d, i)
    name = t.names[call]
    assert c.first_experiment.startswith(
        f"Find out what the CPU does inside `{name}` (14.700 ms of the gap, almost none of it in a finer recorded event)"
    )
    assert "the Python tracer is on already" in c.first_experiment and "with_stack=True" not in c.first_experiment


def test_fragmented_host_time_is_told_by_the_frame_holding_it():
    """xdit_sd_3.5 rank 0, gap #0 (14.969 ms at 0.623 ms): the evidence lists the finest
    Python frames, so the card read "0.441 ms in `_get_signature_keys`, 0.161 ms in
    `forward`, 14.294 ms in other work". The raw events: `pipeline_utils.py(1135):
    _execution_device` runs 1.181-14.297 ms, all inside the gap, and 12.53 ms of it is
    in 5 calls of `_get_top_level_group_offload_hook` (each walking `named_modules`).
    The sentence and the advice name that frame and those calls, with the figures of an
    independent reference (the events' own spans, clipped to the gap)."""
    d = diagnose(load(require(CORPUS / "tracelens/xdit_sd_3.5/profile_trace_rank_0.json.gz")))
    t, g = d.trace, d.gaps
    t0 = int(t.start_ns.min())
    i = int(np.argmax(np.where(np.abs(g.start_ns - t0 - 622_500) < 1_000, g.dur_ns, -1)))
    assert abs(int(g.dur_ns[i]) - 14_968_600) < 1_000
    a, b = int(g.start_ns[i]), int(g.end_ns[i])
    frame = next(n for n in t.names if n.endswith("pipeline_utils.py(1135): _execution_device"))
    hook = next(n for n in t.names if n.endswith("group_offloading.py(916): _get_top_level_group_offload_hook"))
    lane = t.lane == int(g.thread_lane[i])
    s, e = t.start_ns, t.start_ns + t.dur_ns

    def in_gap(name: str) -> tuple[int, int]:
        m = lane & (t.name_id == t.names.index(name)) & (s < b) & (e > a)
        return int(m.sum()), int((np.minimum(e[m], b) - np.maximum(s[m], a)).sum())

    n_frame, frame_ns = in_gap(frame)
    n_hook, hook_ns = in_gap(hook)
    assert (n_frame, n_hook) == (1, 5) and abs(frame_ns - 13_116_000) < 1_000 and abs(hook_ns - 12_530_000) < 1_000
    c = card_for_gap(d, i)
    want = f"{fmt_dur(frame_ns)} in `{frame}`, {fmt_dur(hook_ns)} of it in 5 calls of `{hook}`"
    assert want in c.why, c.why
    host = int(g.class_ns[i][Cause.HOST])
    assert f"; {fmt_dur(host - frame_ns)} in other work)" in c.why
    assert c.first_experiment.startswith(f"`{frame}` holds {fmt_dur(frame_ns)} of the gap, {fmt_dur(hook_ns)} of it")
    assert "_get_signature_keys" not in c.why


def test_a_frame_around_the_whole_gap_is_not_its_work():
    """Hand-made: `step` spans the whole gap [10, 1010) µs and holds 50 distinct 18 µs
    calls `f0..f49`: no frame of the gap's own holds half its time, so the sentence lists
    the calls as before (it does not say "in `step`"). With `batch` [20, 1000) around
    them, the sentence names `batch`."""
    for with_batch in (False, True):
        b = TraceBuilder()
        cpu, gpu = _main_and_stream(b)
        b.event(cpu, "cudaLaunchKernel", 0, 5 * US, Kind.LAUNCH, correlation=1)
        b.event(gpu, "k1", 5 * US, 5 * US, Kind.KERNEL, correlation=1)
        b.event(cpu, "step", 6 * US, 1010 * US, Kind.CPU_OP)
        if with_batch:
            b.event(cpu, "batch", 20 * US, 980 * US, Kind.CPU_OP)
        for j in range(50):
            b.event(cpu, f"f{j}", (22 + 19 * j) * US, 18 * US, Kind.CPU_OP)
        b.event(cpu, "cudaLaunchKernel", 1002 * US, 5 * US, Kind.LAUNCH, correlation=2)
        b.event(gpu, "k2", 1010 * US, 5 * US, Kind.KERNEL, correlation=2)
        d = diagnose(b.build())
        i = int(np.argmax(d.gaps.dur_ns))
        assert (d.gaps.start_ns[i], d.gaps.end_ns[i]) == (10 * US, 1010 * US)
        why = card_for_gap(d, i).why
        assert ("0.980 ms in `batch`" in why) is with_batch, why
        assert "in `step`" not in why


def test_launch_time_of_an_earlier_call_is_not_the_next_ops_launch_path():
    """mtia_rank_0 #440: the previous `runFunction` returned 0.488 ms into the gap (its
    kernel had ended), and the next op's own launch path is 0.299 ms; the card read
    "0.787 ms in the launch path of the next op". Hand-made: call 1 [0, 600) µs runs its
    kernel [10, 200); call 2 [650, 700) µs, its kernel at 705 µs. The gap [200, 705)
    holds 400 µs of call 1, 50 µs untraced (host) and the 55 µs path of call 2."""
    b = TraceBuilder()
    cpu, gpu = _main_and_stream(b)
    b.event(cpu, "runFunction", 0, 600 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k1", 10 * US, 190 * US, Kind.KERNEL, correlation=1)
    b.event(cpu, "runFunction", 650 * US, 50 * US, Kind.LAUNCH, correlation=2)
    b.event(gpu, "k2", 705 * US, 10 * US, Kind.KERNEL, correlation=2)
    d = diagnose(b.build())
    i = int(np.flatnonzero(d.gaps.start_ns == 200 * US)[0])
    cn = d.gaps.class_ns[i]
    assert d.gaps.end_ns[i] == 705 * US and (cn[Cause.LAUNCH], cn[Cause.HOST]) == (455 * US, 50 * US)
    assert (
        "0.455 ms in launch calls (55.0 µs of it the launch path of the next op, 0.400 ms in earlier ones)"
        in card_for_gap(d, i).why
    ), card_for_gap(d, i).why


@pytest.mark.parametrize(
    ("second", "words"),
    [
        ("h2d_pageable", "with pageable host memory"),  # one each way
        ("d2h_pageable", "to pageable host memory"),
        ("d2h_pinned", "the largest with pageable host memory"),
    ],
)
def test_pageable_copies_are_told_by_their_direction(second, words):
    """hta/rank0 #733 read "2 copies ... from pageable host memory" for a D2H to
    pageable memory and an H2D from it; b200 #3 the same for a pageable and a pinned
    copy. A gap [10, 110) µs with a 40 µs D2H to pageable memory and a 30 µs second
    copy."""
    from gapscope.parsers.model import CopyKind

    b = TraceBuilder()
    cpu, gpu = _main_and_stream(b)
    b.event(cpu, "cudaLaunchKernel", 0, 2 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k1", 5 * US, 5 * US, Kind.KERNEL, correlation=1)
    b.event(
        gpu,
        "Memcpy DtoH (Device -> Pageable)",
        20 * US,
        40 * US,
        Kind.MEMCPY,
        bytes=1 << 20,
        copy_kind=CopyKind.D2H,
        pageable=True,
    )
    kind = CopyKind.H2D if second.startswith("h2d") else CopyKind.D2H
    b.event(
        gpu, "copy", 65 * US, 30 * US, Kind.MEMCPY, bytes=1 << 20, copy_kind=kind, pageable=second.endswith("pageable")
    )
    b.event(cpu, "cudaLaunchKernel", 100 * US, 5 * US, Kind.LAUNCH, correlation=2)
    b.event(gpu, "k2", 110 * US, 5 * US, Kind.KERNEL, correlation=2)
    d = diagnose(b.build())
    why = card_for_gap(d, 0).why
    # no copy call on the thread: the GPU's copying, not the thread's (extrap/con_kernel #3)
    assert f"the GPU spent 70.0 µs copying (running 2 copies, 40.0 µs and 30.0 µs, 2.0 MiB in all, {words})" in why, why


@pytest.mark.parametrize("starts_before_gap", [True, False])
def test_a_pinned_async_copy_that_outran_the_kernels_is_not_told_to_pin(starts_before_gap):
    """extrap/con_kernel #3: a 40 MB `cudaMemcpyAsync` to pinned memory ran under a kernel
    of another stream and 2.68 ms past it; the card advised pinned memory and
    non_blocking=True, which the program already used. k1 [0, 100) µs on stream 7; a
    4 MiB D2H copy to pinned memory on stream 8 from 50 µs (or from 150 µs, inside the
    gap) to 250 µs; k2 at 300 µs."""
    from gapscope.parsers.model import CopyKind

    b = TraceBuilder()
    cpu, s7 = _main_and_stream(b)
    s8 = b.lane("0", "8", is_gpu=True, device=0, stream=8)
    b.event(cpu, "cudaLaunchKernel", 0, 2 * US, Kind.LAUNCH, correlation=1)
    b.event(s7, "k1", 0, 100 * US, Kind.KERNEL, correlation=1)
    at = 50 if starts_before_gap else 150
    b.event(cpu, "cudaMemcpyAsync", 3 * US, 2 * US, Kind.MEMCPY_CALL, correlation=2)
    b.event(
        s8,
        "Memcpy DtoH (Device -> Pinned)",
        at * US,
        (250 - at) * US,
        Kind.MEMCPY,
        correlation=2,
        bytes=4 << 20,
        copy_kind=CopyKind.D2H,
    )
    b.event(cpu, "cudaLaunchKernel", 6 * US, 2 * US, Kind.LAUNCH, correlation=3)
    b.event(s7, "k2", 300 * US, 10 * US, Kind.KERNEL, correlation=3)
    d = diagnose(b.build())
    c = card_for_gap(d, 0)
    assert c.cause == Cause.COPY
    if starts_before_gap:
        assert c.first_experiment.startswith(
            "`Memcpy DtoH (Device -> Pinned)` (4.0 MiB) is already pinned and asynchronous, and it ran under kernels "
            "until the GPU ran out of them: its last 0.150 ms are this gap."
        ), c.first_experiment
    else:
        assert "already pinned" not in c.first_experiment


def test_a_copy_still_running_on_another_stream_when_the_next_op_starts_is_not_its_copy():
    """hta/test.json.gz #1859 (an audit of the raw events): the 53 MiB pinned H2D on
    stream 16 ran on 2.95 ms past the next op's start, so it held nothing back; 110 DtoD
    copies on the next op's own stream ran back to back through the gap. The card named
    the H2D ("already pinned and asynchronous"); it names the DtoD copies."""
    d = diagnose(load(require(CORPUS / "hta" / "test.json.gz")))
    c = card_for_gap(d, 1859)
    assert "3.327 ms copying (the GPU ran 110 copies `Memcpy DtoD (Device -> Device)`" in c.why, c.why
    assert c.first_experiment.startswith("Batch the 84 short device-to-device copies"), c.first_experiment
    assert "HtoD" not in c.first_experiment
