"""Findings need a steady state, and tokens/s needs the tokens a step makes (the audit
of issue 47: defects 4 and 5).

Every expected figure is computed here by hand from the events the test builds, or
from the corpus trace's raw columns; the code under test computes none of them.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from gapscope.analysis import diagnose
from gapscope.analysis.findings import findings
from gapscope.parsers import load
from gapscope.parsers.builder import TraceBuilder
from gapscope.parsers.model import Kind
from gapscope.report import cmd as report_cmd
from gapscope.report.document import build_document, finding_dict
from gapscope.report.findings_text import fixed_text, verdict_section
from gapscope.tui.findings_view import rate_text

from .conftest import CORPUS, require

US = 1_000
S = 1_000_000_000
ROOT = Path(__file__).resolve().parent.parent
GPU = ROOT / "sample_traces" / "gpu"


def _report(path: Path) -> str:
    out = io.StringIO()
    assert report_cmd.run([str(path), "--width", "120"], stdout=out) == 0
    return out.getvalue()


def _one_step_trace(step_start_us: int = 300):
    """Kernel k0 [0, 10) µs before the only step; the step [step_start_us, 1100) µs
    holds kernels [500, 600) and [1000, 1100) µs and `tokenize` [620, 990) µs (each
    kernel launched 6 µs before it by a 5 µs call). Gaps: [10, 500) µs, which starts
    before the step (at 300 µs: 290 of its 490 µs before the step, a one-off at the
    trace's start; at 100 µs: 400 of 490 µs inside, the step's), and [600, 1000) µs
    inside it."""
    b = TraceBuilder()
    t = b.lane("1", "1", process_name="python3", thread_name="main")
    g0 = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    b.event(t, "ProfilerStep#1", step_start_us * US, (1100 - step_start_us) * US, Kind.ANNOTATION)
    for corr, (k0, dur) in enumerate(((0, 10), (500, 100), (1000, 100)), start=1):
        b.event(t, "cudaLaunchKernel", (k0 - 6) * US, 5 * US, Kind.LAUNCH, correlation=corr)
        b.event(g0, f"k{k0}", k0 * US, dur * US, Kind.KERNEL, correlation=corr)
    b.event(t, "tokenize", 620 * US, 370 * US, Kind.CPU_OP)
    return b.build()


def test_one_step_gets_no_verdict_no_projection_and_its_one_off_kept_apart():
    d = diagnose(_one_step_trace())
    f = findings(d)
    assert f.verdict_kind == "no steady state" and f.verdict_share == 0.0
    assert "holds 1 complete step" in f.verdict and "Capture several warmed-up steps" in f.verdict
    assert "ProfilerStep#N" in f.verdict and "record_function" in f.verdict
    assert "step would take" not in f.verdict and "x)" not in f.verdict
    # the gap [10, 500) µs starts before the step [300, 1100) µs, 290 of its 490 µs
    # before it: kept apart, labelled, in no finding
    g = d.gaps
    lead = int(np.flatnonzero(g.start_ns == 10 * US)[0])
    assert g.dur_ns[lead] == 490 * US
    (one_off,) = [x for x in f.apart if "one-off at the trace's start" in x.title]
    assert one_off.positions.tolist() == [lead] and one_off.total_ns == 490 * US
    assert not one_off.steady and one_off.per_step_ns == 0
    assert all(lead not in x.positions for x in f.ranked)
    # the findings are listed, never projected
    (tok,) = [x for x in f.ranked if x.name == "tokenize"]
    assert tok.positions.size == 1 and tok.total_ns == 370 * US
    for x in f.ranked:
        assert not x.projected and x.steps_per_s is None and x.tokens_per_s is None
        assert x.projected_step_ns == 0 and x.speedup == 1.0
        assert x.assumptions[0].startswith("No projection: the trace holds 1 complete step(s)")
        j = finding_dict(x, 0)
        assert (j["projected_step_ns"], j["steps_per_s"], j["tokens_per_s"], j["speedup"]) == (None,) * 4
        assert fixed_text(j) == "not projected"


def test_a_gap_mostly_inside_the_only_step_is_the_steps():
    """The same gap [10, 500) µs with the step at [100, 1100) µs: 400 of its 490 µs
    (82%) lie inside the step, so the step owns it (``Steps.owner_of``, the rule of
    ``edge_gaps``): no one-off; it is in a finding, listed and not projected."""
    d = diagnose(_one_step_trace(100))
    f = findings(d)
    g = d.gaps
    lead = int(np.flatnonzero(g.start_ns == 10 * US)[0])
    assert g.dur_ns[lead] == 490 * US
    assert d.steps.owner_of(g.start_ns[[lead]], g.end_ns[[lead]]).tolist() == [0]
    assert not any("one-off" in x.title for x in f.apart)
    # by hand: k500's launch call [494, 499) µs exposes 500 - 494 = 6 µs of the gap,
    # nothing traced covers the other 490 - 6 = 484 µs
    held = {x.title: int(x.remove_ns[lead]) for x in f.ranked if lead in x.positions}
    assert held == {
        "host work with no named range (untraced)": 484 * US,
        "launch overhead exposed in 2 gaps": 6 * US,
    }
    assert all(not x.projected and x.speedup == 1.0 for x in f.ranked)
    assert f.verdict_kind == "no steady state"
    # at exactly half inside (a gap [0, 200) µs with a step from 100 µs) it stays out
    assert d.steps.owner_of(np.array([0, 50]) * US, np.array([200, 200]) * US).tolist() == [-1, 0]


def test_a_window_without_steps_gets_no_verdict():
    """No step marker: kernels [0, 100), [300, 400), [700, 800) µs; `tokenize` fills
    [405, 690) µs. The 800 µs window is one stretch: nothing is projected."""
    b = TraceBuilder()
    t = b.lane("1", "1", process_name="python3", thread_name="main")
    g0 = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    for corr, k0 in enumerate((0, 300, 700), start=1):
        b.event(t, "cudaLaunchKernel", max(k0 - 6, 0) * US, 5 * US, Kind.LAUNCH, correlation=corr)
        b.event(g0, f"k{k0}", k0 * US, 100 * US, Kind.KERNEL, correlation=corr)
    b.event(t, "tokenize", 405 * US, 285 * US, Kind.CPU_OP)
    f = findings(diagnose(b.build()))
    assert f.steady_state  # three kernels: enough GPU work for a window
    assert f.verdict_kind == "no steady state"
    assert "marks no steps (its 0.800 ms window is one stretch)" in f.verdict
    assert f.ranked and all(not x.projected and x.steps_per_s is None for x in f.ranked)


def test_two_steps_are_a_steady_state():
    """Two ProfilerSteps of 1000 µs (``_decode_steps``'s shape): each idles [100, 600)
    µs, `sample` 460 µs of it, and [700, 1000) µs: a verdict with a projection, 460
    µs a step recovered, 540 µs a step left."""
    f = findings(diagnose(_decode_steps("ProfilerStep#{}", 2)))
    assert f.verdict_kind != "no steady state" and "step would take" in f.verdict
    assert not any("one-off" in x.title for x in f.apart)
    (smp,) = [x for x in f.ranked if x.name == "sample"]
    assert smp.projected and smp.per_step_ns == 460 * US and smp.projected_step_ns == 540 * US


def test_a_step_over_a_second_prints_its_rate_in_significant_digits():
    """3 steps of 20 s: a 12 s kernel at each step's start (launched 6 µs before), the
    rest idle, `tokenize` 6.664 s of it; a last kernel at 60 s closes the last step's
    gap. Removing `tokenize`: 20 - 6.664 = 13.336 s a step, 1 / 13.336 s = 0.07499
    steps/s, printed "0.075 steps/s" (it was "0 steps/s"), 20 / 13.336 = 1.50x."""
    b = TraceBuilder()
    t = b.lane("1", "1", process_name="python3", thread_name="main")
    g0 = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    for s in range(4):
        base = S + s * 20 * S
        b.event(t, "cudaLaunchKernel", base - 6 * US, 5 * US, Kind.LAUNCH, correlation=s + 1)
        b.event(g0, "gemm", base, 12 * S if s < 3 else 1 * S, Kind.KERNEL, correlation=s + 1)
        if s < 3:
            b.event(t, "ProfilerStep#%d" % s, base, 20 * S, Kind.ANNOTATION)
            b.event(t, "tokenize", base + 12 * S + 100 * US, 6_664_000 * US, Kind.CPU_OP)
    d = diagnose(b.build())
    f = findings(d)
    (tok,) = [x for x in f.ranked if x.name == "tokenize"]
    assert tok.per_step_ns == 6_664_000 * US and tok.projected_step_ns == 13_336_000 * US
    assert f.top is tok
    assert "(0.075 steps/s, 1.50x)" in f.verdict
    assert rate_text(tok) == "0.075 steps/s"  # the viewer's findings panel
    report = _report_of(d)
    assert "13.336 s, 0.075 steps/s" in report and " 0 steps/s" not in report


def _report_of(diag) -> str:
    out = io.StringIO()
    verdict_section(build_document(diag.trace, diag), Console(file=out, width=160, color_system=None))
    return out.getvalue()


def _decode_steps(name: str, n: int):
    """``n`` annotation steps named ``name`` (``{}``: the step's number) of 1000 µs from 1000 µs; in each, kernels
    [0, 100) and [600, 700) µs (launched 6 µs before), `sample` [120, 580) µs; a
    kernel at the end closes the last step."""
    b = TraceBuilder()
    t = b.lane("1", "1", process_name="python3", thread_name="main")
    g0 = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    corr = 0
    for s in range(n + 1):
        base = (1 + s) * 1000 * US
        for k0 in (0, 600) if s < n else (0,):
            corr += 1
            b.event(t, "cudaLaunchKernel", base + (k0 - 6) * US, 5 * US, Kind.LAUNCH, correlation=corr)
            b.event(g0, f"k{k0}", base + k0 * US, 100 * US, Kind.KERNEL, correlation=corr)
        if s < n:
            b.event(t, name.format(s), base, 1000 * US, Kind.ANNOTATION)
            b.event(t, "sample", base + 120 * US, 460 * US, Kind.CPU_OP)
    return b.build()


def test_a_batch_in_the_step_name_makes_that_many_tokens_a_step():
    """`step[DECODE bs=32]` of 1000 µs: 1000 steps/s, 32 x 1000 = 32,000 tokens/s.
    Without `sample` (460 µs) a step is 540 µs: 32 / 540 µs = 59,259 tokens/s."""
    d = diagnose(_decode_steps("step[DECODE bs=32]", 3))
    b = d.budget
    assert (b.decode, b.tokens_per_step, b.wall_ns) == (True, 32, 1000 * US)
    assert b.steps_per_s == pytest.approx(1000.0) and b.tokens_per_s == pytest.approx(32_000.0)
    (smp,) = [x for x in findings(d).ranked if x.name == "sample"]
    assert smp.projected_step_ns == 540 * US
    assert smp.steps_per_s == pytest.approx(1e9 / (540 * US))
    assert smp.tokens_per_s == pytest.approx(32 * 1e9 / (540 * US)) and round(smp.tokens_per_s) == 59_259
    assert any("32 tokens per step (the batch the step's name gives)" in a for a in smp.assumptions)
    assert rate_text(smp) == "59,259 tokens/s"
    w = d.what_if(names=("sample",))
    assert w.tokens_per_s == pytest.approx(32 * 1e9 / (540 * US))


def test_a_decode_step_without_a_batch_is_one_token():
    d = diagnose(_decode_steps("decode_step", 3))
    b = d.budget
    assert (b.decode, b.tokens_per_step) == (True, 1) and b.tokens_per_s == pytest.approx(1000.0)
    assert any("One token per step (decode at batch 1)" in a for a in d.what_if(names=("sample",)).assumptions)


def test_a_decode_range_inside_profiler_steps_is_a_decode_step():
    """ProfilerStep#N steps of 1000 µs; the middle ones each hold one `decode_step`
    range (the first, a prefill, and the last hold none): a batch-1 decode, tokens/s =
    steps/s. A training loop's ProfilerStep (no such range) and a range that falls
    twice in a step are not, nor a model's `decoder` module or a `tokenize` range once
    a step."""

    def build(per_step: list[int], name: str = "decode_step"):
        b = TraceBuilder()
        t = b.lane("1", "1", process_name="python3", thread_name="main")
        g0 = b.lane("0", "7", is_gpu=True, device=0, stream=7)
        for s, n in enumerate([*per_step, 0]):
            base = (1 + s) * 1000 * US
            b.event(t, "cudaLaunchKernel", base - 6 * US, 5 * US, Kind.LAUNCH, correlation=s + 1)
            b.event(g0, "k", base, 100 * US, Kind.KERNEL, correlation=s + 1)
            if s < len(per_step):
                b.event(t, "ProfilerStep#%d" % s, base, 1000 * US, Kind.ANNOTATION)
                for k in range(n):
                    b.event(t, name, base + (200 + 300 * k) * US, 200 * US, Kind.ANNOTATION)
        return diagnose(b.build()).budget

    got = build([0, 1, 1, 1, 0])
    assert (got.decode, got.tokens_per_step) == (True, 1) and got.tokens_per_s == pytest.approx(1000.0)
    assert build([0, 0, 0, 0, 0]).decode is False
    assert build([1, 2, 1, 1, 1]).decode is False
    assert build([1, 1, 1, 1, 1], "nn.Module: TransformerDecoder").decode is False
    assert build([1, 1, 1, 1, 1], "tokenize").decode is False
    assert build([1, 1, 1, 1, 1], "Decode bs=4").tokens_per_step == 4


def test_h200_decode_a_batch_1_decode_reads_tokens_per_s():
    """sample_traces/gpu/README.md: `decode` is a batch-1 decoder, one `decode_step` per
    token; its 34 ProfilerSteps are the prompt, 32 tokens and the detokenize step."""
    path = require(GPU / "h200_decode.pt.trace.json.gz")
    t = load(path)
    names = np.array(t.names, dtype=object)[t.name_id]
    cpu = ~np.array([ln.is_gpu for ln in t.lanes], dtype=bool)[t.lane]  # not the GPU-side copies
    starts = t.start_ns[(names == "decode_step") & cpu]
    steps = np.flatnonzero(np.array([bool(re.fullmatch(r"ProfilerStep#\d+", s)) for s in names]) & cpu)
    s0, s1 = t.start_ns[steps], t.start_ns[steps] + t.dur_ns[steps]
    per_step = np.array([int(((starts >= a) & (starts < z)).sum()) for a, z in zip(s0, s1)])
    assert len(set(names[steps])) == 34 and starts.size == 32 and per_step.max() == 1
    d = diagnose(t)
    b = d.budget
    assert (b.decode, b.tokens_per_step) == (True, 1)
    assert b.tokens_per_s == pytest.approx(b.steps_per_s) == pytest.approx(1e9 / b.wall_ns)
    text = _report(path)
    assert "tokens/s" in text.split("\n\n")[0] and "steps/s" not in text.split("\n\n")[0]


@pytest.mark.parametrize(
    ("name", "tokens"),
    [("decode_eager", 1), ("decode_graph", 1), ("sync_cliff", None), ("copy_on_path", None)],
)
def test_the_other_h200_captures_decode_as_their_loops_say(name, tokens):
    """decode-eager and decode-graph run one `decode_step` per token at batch 1
    (``capture/scenarios.py``); decode-graph's steps are the GPU's windows, its
    `decode_step` ranges the CPU's. sync-cliff and copy-on-path are no decode loops."""
    b = diagnose(load(require(GPU / f"h200_{name}.pt.trace.json.gz"))).budget
    assert b.tokens_per_step == tokens and b.decode is (tokens is not None)


def test_sglang_decode_one_step_of_batch_32():
    """tracelens sglang Qwen3 decode: one `step[DECODE bs=32]` [203.785, 465451.839)
    µs from the first event; its largest idle is a stream wait (the raw
    `hipStreamWaitEvent` at 101.953 µs) from the stream-2 kernel's end at 84.835 µs
    to the stream-3 kernel at 463380.240 µs: 463295.405 µs, 118.950 µs of it before
    the step and 463176.455 µs (99.97%) inside it, so the step owns it (from the raw
    columns: the busy union of the device's GPU ops)."""
    path = require(CORPUS / "tracelens" / "sglang_decode" / "sglang_Qwen3-8B_decode.json.gz")
    t = load(path)
    d = diagnose(t)
    b = d.budget
    assert (b.steps, b.decode, b.tokens_per_step) == (1, True, 32)
    assert b.tokens_per_s == pytest.approx(32 * 1e9 / b.wall_ns)
    f = findings(d)
    assert f.verdict_kind == "no steady state" and "holds 1 complete step" in f.verdict
    # the raw idle stretch that starts before the step: the busy union of device 9's
    # kernels and copies
    gpu = [k for k, ln in enumerate(t.lanes) if ln.is_gpu and ln.device == b.device]
    m = np.isin(t.lane, gpu) & (t.dur_ns >= 0)
    m &= np.isin(t.kind, [int(Kind.KERNEL), int(Kind.MEMCPY), int(Kind.MEMSET)])
    o = np.argsort(t.start_ns[m], kind="stable")
    s = t.start_ns[m][o].astype(np.int64)
    e = s + t.dur_ns[m][o].astype(np.int64)
    run_end = np.maximum.accumulate(e)
    holes = np.flatnonzero(s[1:] > run_end[:-1])
    step0 = int(d.steps.start_ns[0])
    before = [(int(run_end[k]), int(s[k + 1])) for k in holes if run_end[k] < step0 < s[k + 1]]
    assert len(before) == 1
    wait_ns = before[0][1] - before[0][0]
    assert wait_ns == 463_295_405  # 463 ms of a 473 ms capture
    inside_ns = before[0][1] - step0
    assert (step0 - before[0][0], inside_ns) == (118_950, 463_176_455)
    # most of it inside the step: the step's, no one-off; listed first, not projected
    assert not any(x.title.startswith("one-off at the trace's start") for x in f.apart)
    lead = int(np.flatnonzero(d.gaps.start_ns == before[0][0])[0])
    assert d.gaps.dur_ns[lead] == wait_ns
    top = f.ranked[0]
    assert lead in top.positions and "another stream" in top.title and not top.projected
    # what it recovers lies in the step's window: at most the part inside it
    assert inside_ns * 0.99 < top.per_step_ns <= inside_ns and top.total_ns <= wait_ns
    assert top.title in f.verdict and "listed, not projected" in f.verdict
    text = _report(path)
    assert "219.96x" not in text and "not projected" in text or not f.ranked


def test_mtia_one_step_is_not_judged_and_never_reads_0_steps_per_s():
    path = require(CORPUS / "hta" / "mtia_rank_0.json.gz")
    text = _report(path)
    head = text.split("\n\n")[0]
    assert head.startswith("Verdict: No steady state to judge: the trace holds 1 complete step")
    assert " 0 steps/s" not in text and "not projected" in head


@pytest.mark.parametrize("rel", ["hta/inference_rank_1.json.gz", "tracelens/b200/eager_trace.json.gz"])
def test_windows_without_steps_are_not_judged(rel):
    d = diagnose(load(require(CORPUS / rel)))
    f = findings(d)
    assert d.steps is None and f.verdict_kind == "no steady state"
    assert "marks no steps" in f.verdict
    assert all(not x.projected for x in f.ranked)
