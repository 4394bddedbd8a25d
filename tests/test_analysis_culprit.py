"""The card's named culprit and host evidence come from the most specific events
covering the time: step ranges (``ProfilerStep#N`` whatever its kind, the step
annotation) are structure, and an enclosing range that merely contains deeper events
is not named when the deeper events cover its time."""

from __future__ import annotations

import pytest

from gapscope.analysis import Cause, diagnose
from gapscope.analysis.card import card_for_gap, card_for_group
from gapscope.analysis.jsonout import diagnosis_to_json
from gapscope.parsers import load
from gapscope.parsers.builder import TraceBuilder
from gapscope.parsers.model import Kind
from tests.conftest import CORPUS, SAMPLES, require

US = 1_000


def _trace():
    """T: ``ProfilerStep#1`` recorded as a cpu_op (older Kineto) over [10, 995) µs.
    Gap A [60, 460): ``## data ##`` [70, 450) holds ``enumerate(DataLoader)#__next__``
    [80, 440) (94.7% of it), which holds ``aten::stack`` [100, 200); next launch at 455
    (L = 395 µs). Gap B [500, 900): nothing but the step range; launch at 895.
    Gap C [950, 990): k4 has no launch call linked."""
    b = TraceBuilder()
    cpu = b.lane("1", "1", process_name="python3", thread_name="main")
    gpu = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    b.event(cpu, "ProfilerStep#1", 10 * US, 985 * US, Kind.CPU_OP)  # the step: [10, 995) µs
    b.event(cpu, "cudaLaunchKernel", 0, 5 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k1", 10 * US, 50 * US, Kind.KERNEL, correlation=1)
    b.event(cpu, "## data ##", 70 * US, 380 * US, Kind.ANNOTATION)
    b.event(cpu, "enumerate(DataLoader)#__next__", 80 * US, 360 * US, Kind.CPU_OP)
    b.event(cpu, "aten::stack", 100 * US, 100 * US, Kind.CPU_OP)
    b.event(cpu, "cudaLaunchKernel", 455 * US, 400, Kind.LAUNCH, correlation=2)
    b.event(gpu, "k2", 460 * US, 40 * US, Kind.KERNEL, correlation=2)
    b.event(cpu, "cudaLaunchKernel", 895 * US, 400, Kind.LAUNCH, correlation=3)
    b.event(gpu, "k3", 900 * US, 50 * US, Kind.KERNEL, correlation=3)
    b.event(gpu, "k4", 990 * US, 5 * US, Kind.KERNEL)
    return diagnose(b.build())


def test_deepest_range_with_time_of_its_own_is_the_culprit():
    d = _trace()
    g = d.gaps
    assert d.steps.source == "ProfilerStep" and len(d.steps) == 1  # a cpu_op step is a step
    assert [(int(s), int(e)) for s, e in zip(g.start_ns, g.end_ns)] == [
        (60 * US, 460 * US),
        (500 * US, 900 * US),
        (950 * US, 990 * US),
    ]
    ev = d.evidence(0)
    names = [e.name for e in ev]
    assert "ProfilerStep#1" not in names and "## data ##" not in names  # step; 94.7% covered deeper
    assert (ev[0].name, ev[0].overlap_ns, ev[0].cause) == ("enumerate(DataLoader)#__next__", 360 * US, Cause.HOST)
    assert ("aten::stack", 100 * US) in [(e.name, e.overlap_ns) for e in ev]
    # the partition is unchanged: [60, 455) host (L > 0), the launch path [455, 460) launch
    assert g.class_ns[0].tolist() == [0, 0, 5 * US, 395 * US, 0, 0]
    c = card_for_gap(d, 0)
    assert c.first_experiment.startswith("The step waits for the next batch in `enumerate(DataLoader)#__next__`")
    assert "num_workers" in c.first_experiment and "pin_memory" in c.first_experiment
    assert "ProfilerStep" not in c.first_experiment
    assert c.why.count("ProfilerStep") == c.why.count(
        "inside `ProfilerStep#1` with no finer event"
    )  # named as where, never as the work


def test_time_under_the_step_range_alone_is_uninstrumented():
    d = _trace()
    g = d.gaps
    assert g.class_ns[1].tolist() == [0, 0, 5 * US, 395 * US, 0, 0]  # L = 395 µs > 0: host
    c = card_for_gap(d, 1)
    # uninstrumented: the gap less the 0.4 µs launch call (its path to the GPU included)
    assert (
        "0.395 ms inside `ProfilerStep#1` with no finer event recorded (uninstrumented Python or untraced work)"
        in c.why
    )
    assert c.first_experiment.startswith(
        "Find out what the CPU does for the 0.395 ms inside `ProfilerStep#1` with no finer event recorded"
    )
    assert "Take `ProfilerStep#1`" not in c.first_experiment
    assert [(e.name, e.overlap_ns) for e in d.evidence(1)][0] == ("(untraced time on this thread)", 395_000)


def test_step_range_counts_like_no_events_in_the_partition():
    """Gap C has no linked launch: CPU events on T would be host (rule 5), but the step
    range is no event, so its time is unclassified (rule 6)."""
    d = _trace()
    assert d.gaps.class_ns[2].tolist() == [0, 0, 0, 0, 40 * US, 0]
    tot = d.class_totals_ns()
    assert sum(tot.values()) == d.total_idle_ns() == 840 * US


def test_resnet50_cards_name_the_dataloader_not_the_step():
    """resnet50 (ProfilerStep#N recorded as cpu_op): the three largest gaps are the
    single-process DataLoader at the start of each step (59.3 ms in the largest)."""
    d = diagnose(load(require(CORPUS / "kineto" / "resnet50_num_workers_0" / "worker0.pt.trace.json.gz")))
    assert d.steps.source == "ProfilerStep" and len(d.steps) == 6  # ProfilerStep#5..#10, cpu_op
    top = d.order_by_size()[:3]
    assert d.gaps.dur_ns[top[0]] == 63_042_000
    for i in top.tolist():
        c = card_for_gap(d, i)
        host = [e for e in c.evidence if e.cause == Cause.HOST]
        assert host[0].name == "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
        assert not any(e.name.startswith("ProfilerStep#") for e in d.evidence(i))
        assert c.first_experiment.startswith(
            "The step waits for the next batch in `enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__`"
        )
        assert "ProfilerStep" not in c.first_experiment
    assert d.evidence(int(top[0]))[0].overlap_ns == 59_329_000
    assert sum(d.class_totals_ns().values()) == d.total_idle_ns()


def _six_steps(big_ns: int):
    """Six ``train_step`` annotations of 10 ms; in each, kernel A [0, 1) ms, then B after
    a 20 µs gap, except step 5 where the gap A → B is ``big_ns``."""
    b = TraceBuilder()
    cpu = b.lane("1", "1", process_name="python3", thread_name="main")
    gpu = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    for k in range(6):
        t0 = k * 10_000 * US
        gap = big_ns if k == 5 else 20 * US
        b.event(cpu, "train_step", t0, 10_000 * US, Kind.ANNOTATION)
        b.event(gpu, "A", t0, 1000 * US, Kind.KERNEL)
        b.event(gpu, "B", t0 + 1000 * US + gap, 1000 * US, Kind.KERNEL)
    return diagnose(b.build())


def test_a_far_larger_occurrence_is_a_one_off_not_the_recurring_gap():
    d = _six_steps(5000 * US)
    g = d.gaps
    big = int(next(i for i in range(len(g)) if g.dur_ns[i] == 5000 * US))
    assert g.group[big] == -1
    grp = next(gr for gr in d.groups if gr.label == "A → B")
    assert (grp.steps_with_gap, grp.steps_total, grp.median_ns, grp.total_ns) == (5, 6, 20 * US, 100 * US)
    assert grp.one_offs.tolist() == [big]
    why = card_for_gap(d, big).why
    assert why.endswith(
        "This occurrence is 5.000 ms; at this position the median is 20.0 µs (5 of 6 steps): a one-off."
    )
    assert "recurs" not in why
    small = int(grp.gap_indices[0])
    assert "This position recurs in 5 of 6 steps (20.0 µs median per step)" in card_for_gap(d, small).why


def test_occurrences_within_the_factor_stay_one_group():
    d = _six_steps(60 * US)  # 3x the others: the same gap, a slower step
    grp = next(gr for gr in d.groups if gr.label == "A → B")
    assert (grp.steps_with_gap, grp.median_ns, grp.total_ns, grp.one_offs.size) == (6, 20 * US, 160 * US, 0)


def test_resnet50_dataloader_stall_recurs_at_its_own_size():
    """The DataLoader stall of each step sits at varying ordinals of the same kernel
    pair; grouped by size it recurs with a ms-sized median, not '2.0 µs median'."""
    d = diagnose(load(require(CORPUS / "kineto" / "resnet50_num_workers_0" / "worker0.pt.trace.json.gz")))
    i = int(d.order_by_size()[0])
    grp = d.groups[int(d.gaps.group[i])]
    # each stall starts about 43 µs before its step ends and runs into the next step,
    # so it is the next step's (steps 1-5; step 0's is the profiler-start edge): the
    # raw stalls are 53.243, 53.340, 54.482, 55.109 and 63.042 ms, median 54.482 ms
    assert (grp.steps_with_gap, grp.steps_total, grp.median_ns) == (5, 6, 54_482_000)
    assert "This position recurs in 5 of 6 steps (54.482 ms median per step)" in card_for_gap(d, i).why
    assert "2.0 µs" not in card_for_gap(d, i).why + card_for_group(d, grp.id).why


def test_training_steps_get_steps_per_s_not_tokens():
    """ProfilerStep#N of a training loop: steps/s, no token wording anywhere."""
    d = diagnose(load(SAMPLES / "dataloader_stall.txt"))
    b = d.budget
    assert d.steps.source == "ProfilerStep" and not b.decode
    assert b.steps_per_s == pytest.approx(1e9 / b.wall_ns)
    w = d.what_if(causes=(Cause.HOST,))
    assert not w.decode and w.steps_per_s == pytest.approx(1e9 / w.projected_step_ns)
    text = " ".join(w.assumptions)
    assert "Steps/s = 1 / step time (a step is not a token here: no tokens/s)" in text
    assert "token" not in text.replace("not a token here: no tokens/s", "")
    j = diagnosis_to_json(d)
    assert j["budget"]["tokens_per_s"] is None and j["budget"]["decode"] is False
    assert j["budget"]["steps_per_s"] == pytest.approx(b.steps_per_s, abs=1e-3)
    for i in range(len(d.gaps)):
        c = card_for_gap(d, i)
        assert "token" not in (c.why + c.proof).lower()


@pytest.mark.parametrize(
    "name,decode",
    [
        ("decode_step.txt", True),
        ("decode_graph.txt", True),
        ("decode_10_steps.txt", True),
        ("dataloader_stall.txt", False),
        ("sync_cliff.txt", False),
    ],
)
def test_decode_steps_only_get_tokens(name, decode):
    d = diagnose(load(SAMPLES / name))
    assert d.budget.decode is decode
    host = [i for i in range(len(d.gaps)) if d.gaps.cause[i] == int(Cause.HOST)]
    for i in host:
        assert ("step time and tokens/s on a new capture" in card_for_gap(d, i).proof) is decode
