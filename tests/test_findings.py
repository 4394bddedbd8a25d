"""Findings and the verdict (issue 47; "Findings: what the tool says first" in the design).

Every expected figure is computed here from the raw events (the trace's columns or the
sample's text), not by the code under test: kernel unions, the named ranges' spans,
the edges of each capture.
"""

from __future__ import annotations

import collections
import io
import re
from pathlib import Path

import numpy as np
import pytest

from gapscope.analysis import diagnose
from gapscope.analysis.findings import GPU_BOUND_IDLE_SHARE, UNRECORDED_TITLE, findings
from gapscope.analysis.types import Trust
from gapscope.parsers import load
from gapscope.parsers.builder import TraceBuilder
from gapscope.parsers.model import Kind
from gapscope.report import cmd as report_cmd

from .conftest import CORPUS, require

US = 1_000
ROOT = Path(__file__).resolve().parent.parent
GPU = ROOT / "sample_traces" / "gpu"
#: The smell each H200 capture was recorded to show (``sample_traces/gpu/README.md``).
SMELL = {
    "h200_decode": "launch",
    "h200_decode_eager": "launch",
    "h200_picket_fence": "launch",
    "h200_host_island": "host",
    "h200_copy_on_path": "copy",
    "h200_sync_cliff": "sync",
}
CAPTURES = [*SMELL, "h200_decode_graph"]


def _diag(name: str):
    return diagnose(load(require(GPU / f"{name}.pt.trace.json.gz")))


def _kernel_union(trace, dev: int) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) ns of the union of the kernels of device ``dev``, from the raw
    columns (a plain sweep, not ``analysis.busy``)."""
    gpu_lanes = [k for k, ln in enumerate(trace.lanes) if ln.is_gpu and ln.device == dev]
    m = (trace.kind == int(Kind.KERNEL)) & np.isin(trace.lane, gpu_lanes) & (trace.dur_ns >= 0)
    s = trace.start_ns[m].astype(np.int64)
    e = s + trace.dur_ns[m].astype(np.int64)
    o = np.argsort(s, kind="stable")
    us, ue = [], []
    for a, b in zip(s[o].tolist(), e[o].tolist()):
        if us and a <= ue[-1]:
            ue[-1] = max(ue[-1], b)
        else:
            us.append(a)
            ue.append(b)
    return np.array(us, np.int64), np.array(ue, np.int64)


@pytest.mark.parametrize("name", list(SMELL))
def test_first_finding_is_the_captures_smell(name):
    d = _diag(name)
    f = findings(d)
    assert f.steady_state and f.top is not None
    assert f.top.kind == SMELL[name], [(x.kind, x.title, x.per_step_ns) for x in f.ranked[:4]]
    assert f.verdict_kind == SMELL[name] and f.verdict.startswith(SMELL[name].capitalize() + "-bound")
    # ranked by recoverable time per step, each no more than the step's idle: the median
    # ProfilerStep window's wall minus its kernel union, from the raw events
    per = [x.per_step_ns for x in f.ranked]
    assert per == sorted(per, reverse=True)
    t = d.trace
    ann = np.flatnonzero(np.array([bool(re.fullmatch(r"ProfilerStep#\d+", s)) for s in t.names])[t.name_id])
    s0 = np.sort(t.start_ns[ann].astype(np.int64))
    s1 = s0 + np.sort(t.dur_ns[ann].astype(np.int64))[np.argsort(np.argsort(t.start_ns[ann]))]
    us, ue = _kernel_union(t, d.budget.device)
    idle = [
        (b - a) - int(np.clip(np.minimum(ue, b) - np.maximum(us, a), 0, None).sum())
        for a, b in zip(s0.tolist(), s1.tolist())
    ]
    assert f.top.per_step_ns <= max(idle)
    assert 0 < f.top.step_share < 1


def test_decode_graph_verdict_says_the_gpu_is_mostly_busy():
    d = _diag("h200_decode_graph")
    f = findings(d)
    assert f.verdict_kind == "gpu-bound" and f.verdict.startswith("GPU-bound: the kernels are the story")
    # independently: the kernels cover most of the steady part of the capture (the
    # replays after the first tenth of the kernels, the warm-up and capture, to the last)
    us, ue = _kernel_union(d.trace, d.budget.device)
    a, b = int(us[us.size // 10]), int(ue[-1])
    busy = int((np.minimum(ue, b) - np.maximum(us, a)).clip(0).sum())
    assert busy / (b - a) > 1 - GPU_BOUND_IDLE_SHARE
    busy_pct = int(re.search(r"busy (\d+)% of each", f.verdict).group(1))
    assert abs(busy_pct - 100 * busy / (b - a)) < 5


@pytest.mark.parametrize("name", CAPTURES)
def test_no_edge_gap_is_first_or_in_a_per_step_figure(name):
    """Edges from the raw events: idle before the device's first kernel starts or after
    its last kernel ends (the profiler's start and stop, the loop's tail)."""
    d = _diag(name)
    f = findings(d)
    us, ue = _kernel_union(d.trace, d.budget.device)
    g = d.gaps
    on = g.device == d.budget.device
    edge = on & ((g.end_ns <= us[0]) | (g.start_ns >= ue[-1]))
    assert edge.sum() == 2  # each capture: one at the start, one at the tail
    assert np.array_equal(edge & on, f.edge & on)
    for x in f.ranked:
        assert not edge[x.positions].any(), x.title
        assert x.remove_ns is not None and int(x.remove_ns[edge].sum()) == 0
    assert f.top is not None and not edge[int(f.top.positions[0])]
    # the budget's per-step figures hold none of it: removing the edges removes nothing
    assert d.what_if(gaps=np.flatnonzero(edge)).removed_ns == 0
    assert {int(i) for x in f.apart if x.kind == "edge" for i in x.positions} == set(np.flatnonzero(edge).tolist())
    # and no recurring group joins them into a "per step" stretch
    assert (g.group[edge] == -1).all()


def _sample_spans(path: Path) -> tuple[int, dict[str, int]]:
    """(step ns, ns per CPU point event: from its time to the next CPU line) read from
    the decode-step sample's text, as the exercise's reader would."""
    rows = []
    for line in path.read_text().splitlines():
        m = re.match(r"([\d.]+) ms\s+(CPU|GPU)\s+(.*)", line)
        if m:
            rows.append((round(float(m.group(1)) * 1_000_000), m.group(2), m.group(3)))
    cpu = [r for r in rows if r[1] == "CPU"]
    spans = {name: cpu[k + 1][0] - t for k, (t, _, name) in enumerate(cpu[:-1])}
    step = cpu[-1][0] - cpu[0][0]
    return step, spans


def test_decode_step_seed_findings_hold_the_item_sync_and_the_logging_island():
    path = ROOT / "sample_traces" / "decode_step.txt"  # `gapscope` with no argument
    step_ns, spans = _sample_spans(path)
    assert step_ns == 1_050_000
    d = diagnose(load(path))
    f = findings(d)
    by_name = {x.name: x for x in f.ranked}
    sync, log = by_name["tensor.item()"], by_name["logging callback"]
    assert (sync.kind, log.kind) == ("sync", "host")
    assert "sync cliff" in sync.title and "host island" in log.title
    assert sync.per_step_ns == spans["tensor.item()"] == 160_000
    assert log.per_step_ns == spans["logging callback"] == 290_000
    both = d.what_if(remove_ns=sync.remove_ns + log.remove_ns)
    want_step = step_ns - spans["tensor.item()"] - spans["logging callback"]
    assert both.projected_step_ns == want_step == 600_000
    assert round(both.tokens_per_s) == round(1e9 / want_step) == 1667 and both.decode
    # the same reading as `report --what-if 'tensor.item(),logging callback'`
    assert d.what_if(names=("tensor.item()", "logging callback")).projected_step_ns == want_step
    # each finding's own projection: the step without it
    assert log.projected_step_ns == step_ns - spans["logging callback"]
    assert f.verdict_kind == "host" and "0.290 ms of every 1.050 ms step" in f.verdict


def test_recurrence_by_meaning_one_finding_wherever_it_falls():
    """4 steps of 1000 µs from 1000 µs; in each, kernels [0, 100), [400, 500) and
    [800, 1000) µs (launched 6 µs before by a 5 µs call): gaps A [100, 400) and B
    [500, 800), no edges. `tokenize` (270 µs) falls in gap A in even steps and in gap B
    in odd ones: one finding, recurring in 4 of 4 steps, 270 µs per step (each step's
    idle is 600 µs and every step is alike), the step 1000 → 730 µs if removed."""
    b = TraceBuilder()
    t = b.lane("1", "1", process_name="python3", thread_name="main")
    g0 = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    corr = 0
    for s in range(4):
        base = (1 + s) * 1000 * US
        b.event(t, "ProfilerStep#%d" % s, base, 1000 * US, Kind.ANNOTATION)
        for k0, dur in ((0, 100), (400, 100), (800, 200)):
            corr += 1
            b.event(t, "cudaLaunchKernel", base + (k0 - 6) * US, 5 * US, Kind.LAUNCH, correlation=corr)
            b.event(g0, f"k{k0}", base + k0 * US, dur * US, Kind.KERNEL, correlation=corr)
        at = 110 if s % 2 == 0 else 510
        b.event(t, "tokenize", base + at * US, 270 * US, Kind.CPU_OP)
    d = diagnose(b.build())
    f = findings(d)
    (tok,) = [x for x in f.ranked if x.name == "tokenize"]
    g = d.gaps
    prev = {d.trace.names[int(d.trace.name_id[int(g.prev_op[i])])] for i in tok.positions}
    assert prev == {"k0", "k400"}  # two positions in the step
    assert (tok.steps_with, tok.steps_total, tok.positions.size) == (4, 4, 4)
    assert tok.per_step_ns == 270 * US and tok.total_ns == 4 * 270 * US
    assert tok.projected_step_ns == 730 * US and tok.speedup == pytest.approx(1000 / 730)
    assert tok.title == "host island at `tokenize`"
    # the rest of each step's idle is untraced: 300 - 270 - 6 µs (the launch path from
    # the launch call's start) in the gap holding tokenize, 300 - 6 in the other
    (rest,) = [x for x in f.ranked if x.kind == "host" and not x.name]
    assert rest.per_step_ns == (300 - 270 - 6 + 300 - 6) * US and f.top is rest
    assert tok.step_share == pytest.approx(0.27)


def test_no_steady_state_step_gets_no_verdict():
    """One 20 ns kernel (kineto/before_fix_trace.json's shape) is no step."""
    b = TraceBuilder()
    t = b.lane("1", "1", process_name="python3", thread_name="main")
    g0 = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    b.event(t, "cudaLaunchKernel", 0, 5 * US, Kind.LAUNCH, correlation=1)
    b.event(g0, "k", 10 * US, 20, Kind.KERNEL, correlation=1)
    f = findings(diagnose(b.build()))
    assert not f.steady_state and f.verdict_kind == "no steady state" and not f.ranked


def test_gpu_bound_when_idle_is_small():
    """Two steps of 100 µs, each a 95 µs kernel: 5% idle."""
    b = TraceBuilder()
    t = b.lane("1", "1", process_name="python3", thread_name="main")
    g0 = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    for s in range(3):
        base = (1 + s) * 100 * US
        b.event(t, "ProfilerStep#%d" % s, base, 100 * US, Kind.ANNOTATION)
        b.event(t, "cudaLaunchKernel", base - 3 * US, 2 * US, Kind.LAUNCH, correlation=s + 1)
        b.event(g0, "gemm", base, 95 * US, Kind.KERNEL, correlation=s + 1)
    f = findings(diagnose(b.build()))
    assert f.verdict_kind == "gpu-bound" and "busy 95% of each 0.100 ms step" in f.verdict


def test_report_first_five_lines_carry_the_verdict():
    path = require(CORPUS / "hta" / "rank0.json.gz")
    out = io.StringIO()
    assert report_cmd.run([str(path), "--width", "100"], stdout=out) == 0
    head = " ".join(out.getvalue().splitlines()[:5])
    # its graphs' nodes are mostly unrecorded (AUDIT defect 1): the verdict says so first
    assert head.startswith("Verdict: Not measurable: graph nodes appear unrecorded")
    # the figure quoted is the budget's step: the median ProfilerStep window, from the
    # raw annotations
    t = load(path)
    ann = np.flatnonzero(np.array([bool(re.fullmatch(r"ProfilerStep#\d+", s)) for s in t.names])[t.name_id])
    wall_ms = float(np.median(t.dur_ns[ann])) / 1e6
    assert f"of every {wall_ms:.3f} ms step" in head


def test_the_backward_pass_is_one_named_range_whatever_its_node():
    """The autograd engine names a range per node (``evaluate_function: MulBackward0``,
    ``…: BinaryCrossEntropyBackward0``): the backward-start stall that falls on a
    different node in each step of hta/control is one finding."""
    from gapscope.analysis.findings import meaning

    a = meaning("autograd::engine::evaluate_function: MulBackward0")
    b = meaning("autograd::engine::evaluate_function: BinaryCrossEntropyBackward0")
    assert a == b == "autograd backward (evaluate_function)"
    assert meaning("log_token") == "log_token"


def test_exposed_communication_is_a_finding():
    """3 steps of 1000 µs from 1000 µs: a compute kernel [0, 500) and an NCCL
    all-reduce [400, 900) µs on another stream: 400 µs of the all-reduce run with no
    compute beside it (500 → 900), in every step: 400 µs per step, the step 1000 →
    600 µs if it overlapped."""
    b = TraceBuilder()
    t = b.lane("1", "1", process_name="python3", thread_name="main")
    s7 = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    s9 = b.lane("0", "9", is_gpu=True, device=0, stream=9)
    corr = 0
    for s in range(3):
        base = (1 + s) * 1000 * US
        b.event(t, "ProfilerStep#%d" % s, base, 1000 * US, Kind.ANNOTATION)
        for lane, name, k0, dur in ((s7, "gemm", 0, 500), (s9, "ncclDevKernel_AllReduce_Sum_f32", 400, 500)):
            corr += 1
            b.event(t, "cudaLaunchKernel", base + (k0 - 6) * US, 5 * US, Kind.LAUNCH, correlation=corr)
            b.event(lane, name, base + k0 * US, dur * US, Kind.KERNEL, correlation=corr)
    d = diagnose(b.build())
    (comm,) = [x for x in findings(d).ranked if x.kind == "communication"]
    assert comm.per_step_ns == (900 - 500) * US and comm.steps_with == 3
    assert comm.projected_step_ns == 1000 * US - 400 * US and comm.positions.size == 0


def test_a_step_of_several_dataloader_iterations_groups_its_repeated_stall():
    """3 ProfilerSteps of 3000 µs, each holding 3 loader iterations of 1000 µs: a
    `enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__` range of 194 µs, then
    kernels [200, 1000) µs (each launched 6 µs before by a 5 µs call): a 200 µs stall.
    It recurs 3 times a step at 3 positions: one finding, in 3 of 3 steps; the first
    stall, before any kernel, is the capture's edge, so 8 gaps. Every step idles 600
    µs, split as its steady gaps split theirs: 600 x 194 / 200 = 582 µs per step."""
    b = TraceBuilder()
    t = b.lane("1", "1", process_name="python3", thread_name="main")
    g0 = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    name = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    corr = 0
    for s in range(3):
        base = (1 + 3 * s) * 1000 * US
        b.event(t, "ProfilerStep#%d" % s, base, 3000 * US, Kind.ANNOTATION)
        for it in range(3):
            at = base + it * 1000 * US
            b.event(t, name, at, 194 * US, Kind.ANNOTATION)
            for k0, dur in ((200, 300), (500, 500)):
                corr += 1
                b.event(t, "cudaLaunchKernel", at + (k0 - 6) * US, 5 * US, Kind.LAUNCH, correlation=corr)
                b.event(g0, f"k{k0}", at + k0 * US, dur * US, Kind.KERNEL, correlation=corr)
    d = diagnose(b.build())
    f = findings(d)
    (dl,) = [x for x in f.ranked if x.name == name]
    # 3 steps: the first stall of step 0 is the leading edge; the other 8 stalls recur
    assert dl.positions.size == 8 and (dl.steps_with, dl.steps_total) == (3, 3)
    # each stall: 194 µs in the loader's range (the rest, 6 µs, is the launch path)
    assert dl.total_ns == 8 * 194 * US
    assert dl.per_step_ns == 3 * 194 * US and f.top is dl


def _graph_trace(node_us: tuple[tuple[str, int, int], ...], unlaunched_step: int = -1):
    """3 ProfilerSteps of 1000 µs from 1000 µs; in each: an eager kernel `k0` [0, 100)
    and `kend` [990, 1000) µs (each launched 6 µs before by a 5 µs call), and a
    `cudaGraphLaunch` at 95 µs (5 µs) whose recorded nodes are ``node_us`` ((kind,
    start, duration) µs from the step's start); step ``unlaunched_step``'s launch call
    is left out of the trace (its nodes keep their correlation id)."""
    b = TraceBuilder()
    t = b.lane("1", "1", process_name="python3", thread_name="main")
    g0 = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    corr = 0
    for s in range(3):
        base = (1 + s) * 1000 * US
        b.event(t, "ProfilerStep#%d" % s, base, 1000 * US, Kind.ANNOTATION)
        for k0, dur in ((0, 100), (990, 10)):
            corr += 1
            b.event(t, "cudaLaunchKernel", base + (k0 - 6) * US, 5 * US, Kind.LAUNCH, correlation=corr)
            b.event(g0, "k0" if k0 == 0 else "kend", base + k0 * US, dur * US, Kind.KERNEL, correlation=corr)
        corr += 1
        if s != unlaunched_step:
            b.event(t, "cudaGraphLaunch", base + 95 * US, 5 * US, Kind.LAUNCH, correlation=corr)
        for kind, at, dur in node_us:
            k = Kind.MEMSET if kind == "memset" else Kind.KERNEL
            b.event(g0, f"graph {kind}", base + at * US, dur * US, k, correlation=corr)
    return diagnose(b.build())


def test_a_sparse_graph_is_not_measurable_and_projects_nothing():
    """AUDIT defect 1 (hta/rank0). The graph records a memset at 200 and 500 µs (2 µs)
    and a kernel [800, 900) µs: its nodes cover 104 of its 700 µs span (15% < 50%), so
    its nodes appear unrecorded. A gap is idle of kernels (memsets do not end one), so
    each step idles [100, 800) (600 of its 700 µs inside the graph's span) and
    [900, 990) (next op an eager kernel, outside the span): the first is not
    measurable, 700 of each step's 790 µs idle (1000 - 100 - 100 - 10); the second is.
    No projection; the verdict says so and leads with recapturing the graph's nodes."""
    d = _graph_trace((("memset", 200, 2), ("memset", 500, 2), ("kernel", 800, 100)))
    g = d.gaps
    unrec = (g.trust & int(Trust.GRAPH_UNRECORDED)) != 0
    rel = [((int(a) - 1000 * US) % (1000 * US)) // US for a in g.start_ns]
    assert sorted({r for r, u in zip(rel, unrec) if u}) == [100]
    assert sorted({r for r, u in zip(rel, unrec) if not u}) == [900]
    assert (g.end_ns[unrec] - g.start_ns[unrec] == 700 * US).all()
    f = findings(d)
    top = f.top
    assert top is not None and top.kind == "unmeasurable" and not top.measurable
    assert top.title == UNRECORDED_TITLE and top.positions.size == 3 and top.steps_with == 3
    assert top.per_step_ns == 700 * US and top.step_share == pytest.approx(0.7)
    assert (top.projected_step_ns, top.steps_per_s, top.speedup) == (0, None, 1.0)
    assert "--cuda-graph-trace=node" in top.fix
    assert f.verdict.startswith("Not measurable: graph nodes appear unrecorded")
    assert "no projection" in f.verdict and f.verdict_kind == "unmeasurable"
    # its gaps are in no other finding (the [900, 990) launch gaps are)
    for x in f.ranked[1:]:
        assert not unrec[x.positions].any()
    # the report's JSON carries no projection for it
    from gapscope.report.document import finding_dict

    j = finding_dict(top, 0)
    assert j["projected_step_ns"] is None and j["speedup"] is None and j["steps_per_s"] is None


@pytest.mark.parametrize("unlaunched_step", [-1, 0])
def test_a_sparse_graph_without_its_launch_call_is_judged_the_same(unlaunched_step):
    """REAUDIT defect 4 (hta/rank0 gap #200: corr 819599's 20 recorded nodes, no
    cudaGraphLaunch). Nodes: kernels [800, 820) and [880, 900) µs: 40 of their 100 µs
    span (40% < 50%), sparse. Each step idles [100, 800) (waiting at the graph's first
    recorded node), [820, 880) (inside its span) and [900, 990) (next op the eager
    `kend`). With step 0's launch call missing, its two nodes share a correlation id no
    call carries: the same graph, judged by the same rule, so step 0's [100, 800) and
    [820, 880) are not measurable as in the other steps; [900, 990) stays measured."""
    d = _graph_trace((("kernel", 800, 20), ("kernel", 880, 20)), unlaunched_step)
    g = d.gaps
    unrec = (g.trust & int(Trust.GRAPH_UNRECORDED)) != 0
    at = [(((int(a) - 1000 * US) // (1000 * US)), ((int(a) - 1000 * US) % (1000 * US)) // US) for a in g.start_ns]
    assert sorted(a for a, u in zip(at, unrec) if u) == [(s, r) for s in range(3) for r in (100, 820)]
    assert sorted(a for a, u in zip(at, unrec) if not u) == [(s, 900) for s in range(3)]
    top = findings(d).top
    assert top is not None and top.kind == "unmeasurable" and top.steps_with == 3
    assert top.per_step_ns == (700 + 60) * US


def test_two_ops_sharing_a_callless_id_but_dense_stay_measurable():
    """Step 0's launch call missing, its nodes [800, 850) and [850, 900) µs back to
    back (100 of 100 µs): not sparse, so step 0's [100, 800) stays measured (the other
    steps' graphs are dense too)."""
    d = _graph_trace((("kernel", 800, 50), ("kernel", 850, 50)), 0)
    assert not ((d.gaps.trust & int(Trust.GRAPH_UNRECORDED)) != 0).any()


def test_a_densely_recorded_graph_stays_measurable():
    """The same graph with its nodes recorded back to back, 5 µs apart ([100, 300),
    [305, 600), [605, 900): 790 of 800 µs, 99%): its 5 µs gaps are measured idle, no
    ``GRAPH_UNRECORDED`` bit, no "unmeasurable" finding."""
    d = _graph_trace((("kernel", 100, 200), ("kernel", 305, 295), ("kernel", 605, 295)))
    g = d.gaps
    assert len(g) and not ((g.trust & int(Trust.GRAPH_UNRECORDED)) != 0).any()
    assert all(x.kind != "unmeasurable" for x in findings(d).ranked)


def test_a_stall_between_two_steps_belongs_to_the_next_step():
    """AUDIT defect 7 (hta/control's `## load_batch ##` stall begins 22 µs before each
    ProfilerStep). 3 ProfilerSteps of 1000 µs, 20 µs apart (from 1000, 2020, 3040 µs);
    in each a kernel [100, 1000) µs (launched 6 µs before by a 5 µs call) and `## load_batch
    ##` from 15 µs before the step to 90 µs into it. Gaps: [1000, 1100) before the
    capture's first kernel (the leading edge: the profiler starts with step 0, so its
    head cannot be told from the profiler's start), then [2000, 2120) and [3020, 3140),
    each starting in the 20 µs between two steps: the next step's, not edges. The
    data-loading finding: 2 positions in steps 1 and 2 of 3, each gap's host time (120
    µs less the 6 µs launch path from the call's start: 114 µs, load_batch and the
    untraced time around it); per step: each typical step idles 100 µs (its head), and
    the steady gaps put 100 of their 120 µs inside steps, so removing 114 µs of a gap
    removes 114 x 100 / 120 = 95 µs of a step's 100 µs."""
    b = TraceBuilder()
    t = b.lane("1", "1", process_name="python3", thread_name="main")
    g0 = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    for s in range(3):
        base = (1000 + 1020 * s) * US
        b.event(t, "ProfilerStep#%d" % s, base, 1000 * US, Kind.ANNOTATION)
        b.event(t, "## load_batch ##", base - 15 * US, 105 * US, Kind.ANNOTATION)
        b.event(t, "cudaLaunchKernel", base + 94 * US, 5 * US, Kind.LAUNCH, correlation=s + 1)
        b.event(g0, "step_kernel", base + 100 * US, 900 * US, Kind.KERNEL, correlation=s + 1)
    d = diagnose(b.build())
    g = d.gaps
    assert [int(x) // US for x in g.start_ns] == [1000, 2000, 3020]
    assert [int(x) // US for x in g.end_ns] == [1100, 2120, 3140]
    assert d.steps.owner_of(g.start_ns, g.end_ns).tolist() == [0, 1, 2]
    assert d.steps.index_of(g.start_ns).tolist() == [0, -1, -1]  # outside every step's range
    f = findings(d)
    assert f.edge.tolist() == [True, False, False]
    assert [x.positions.tolist() for x in f.apart] == [[0]]
    # one recurring group of the two steady stalls, in 2 of 3 steps
    grp = {int(x) for x in g.group[1:]}
    assert len(grp) == 1 and -1 not in grp and int(g.group[0]) == -1
    assert d.groups[grp.pop()].steps_with_gap == 2
    (lb,) = [x for x in f.ranked if x.name == "## load_batch ##"]
    assert lb.positions.tolist() == [1, 2] or lb.positions.tolist() == [2, 1]
    assert (lb.steps_with, lb.steps_total) == (2, 3)
    assert lb.title == "data loading (`## load_batch ##`) on the critical path"
    assert lb.total_ns == 2 * 114 * US
    assert lb.per_step_ns == 95 * US and f.top is lb


def _raw_events(path: Path) -> list[dict]:
    import gzip
    import json

    with gzip.open(path, "rt") as fh:
        return json.load(fh)["traceEvents"]


#: Chrome categories of the GPU records of a CUDA graph's nodes.
_GRAPH_RECORD_CATS = ("kernel", "gpu_memset", "gpu_memcpy")


def _callless_graphs(ev: list[dict]) -> tuple[set, collections.Counter]:
    """From the raw events: the correlation ids that two or more GPU records share and
    no CPU event carries (a graph whose ``cudaGraphLaunch`` is not in the trace), and the
    number of GPU records per correlation id."""
    cpu_corr = {
        e["args"]["correlation"]
        for e in ev
        if e.get("cat") not in _GRAPH_RECORD_CATS and "correlation" in e.get("args", {})
    }
    records = collections.Counter(
        e["args"]["correlation"]
        for e in ev
        if e.get("cat") in _GRAPH_RECORD_CATS and "correlation" in e.get("args", {})
    )
    return {c for c, k in records.items() if k >= 2 and c not in cpu_corr}, records


def _sparse_graph_spans(ev: list[dict], graph_corr: set) -> list[tuple[float, float]]:
    """(first start, last end) raw µs of each graph (by correlation id) whose GPU
    records cover under half of that span (durations summed)."""
    spans: dict[int, list[float]] = {}
    for e in ev:
        c = e.get("args", {}).get("correlation")
        if e.get("cat") in _GRAPH_RECORD_CATS and c in graph_corr:
            s = spans.setdefault(c, [float("inf"), float("-inf"), 0.0])
            s[0], s[1], s[2] = min(s[0], e["ts"]), max(s[1], e["ts"] + e["dur"]), s[2] + e["dur"]
    return [(a, z) for a, z, busy in spans.values() if busy < 0.5 * (z - a)]


def _gaps_off_sparse_graphs(g, positions: list[int], sparse: list[tuple[float, float]], t0_us: float) -> list[int]:
    """The gaps of ``positions`` that neither lie mostly inside a sparse graph's span nor
    end at (within 1 µs of) one: raw µs from the loader's ns with its origin ``t0_us``."""
    off = []
    for i in positions:
        a, z = g.start_ns[i] / 1e3 - t0_us, g.end_ns[i] / 1e3 - t0_us  # raw µs
        inside = sum(max(0.0, min(z, hi) - max(a, lo)) for lo, hi in sparse)
        at_head = any(lo - 1.0 <= z <= hi + 1.0 for lo, hi in sparse)  # waits at one of its records
        if not (2 * inside > z - a or at_head):
            off.append(i)
    return off


def test_rank0_sparse_graphs_are_not_measurable():
    """hta/rank0 (AUDIT defect 1): from the raw JSON, the graph launches whose GPU
    records (kernels, memsets, memcpys sharing the launch's correlation) cover under
    half their span; every gap of the "unmeasurable" finding lies mostly inside such a
    span or ends at a record of such a graph (waiting on its unrecorded nodes, queued). It leads, with no
    projection, and the graph-internal ordering finding no longer claims the ~70 ms
    queued stalls. A graph whose cudaGraphLaunch is not in the trace (REAUDIT defect
    4: corr 819599, 20 records, gap #200) is two or more GPU records sharing a
    correlation id that no CPU event carries."""
    path = require(CORPUS / "hta" / "rank0.json.gz")
    ev = _raw_events(path)
    graph_corr = {
        e["args"]["correlation"]
        for e in ev
        if e.get("name") == "cudaGraphLaunch" and "correlation" in e.get("args", {})
    }
    callless, records = _callless_graphs(ev)
    assert 819599 in callless and records[819599] == 20
    sparse = _sparse_graph_spans(ev, graph_corr | callless)
    assert len(sparse) >= 5  # at least one a step
    d = diagnose(load(path))
    f = findings(d)
    top = f.top
    assert top is not None and top.kind == "unmeasurable" and top.steps_with == top.steps_total == 5
    assert top.step_share > 0.4 and (top.projected_step_ns, top.steps_per_s) == (0, None)
    assert f.verdict.startswith("Not measurable: graph nodes appear unrecorded")
    t0_us = d.trace.start_ns.min() / 1e3 - min(e["ts"] for e in ev if "ts" in e)  # the loader's origin
    assert _gaps_off_sparse_graphs(d.gaps, top.positions.tolist(), sparse, t0_us) == []
    ordering = [x for x in f.ranked if x.title.startswith("queued wait inside a CUDA graph")]
    assert not ordering or ordering[0].per_step_ns < top.per_step_ns / 2


def test_control_step_start_stall_between_steps_is_steady():
    """hta/control (AUDIT defect 7): from the raw ProfilerStep annotations, every gap
    starting in the space between two steps is the next step's (steady), not an edge;
    the `## load_batch ##` + H2D copy stall (~1.7 ms, at each step's start) is then in
    5 of the 6 steps: the first step's is the capture's leading edge (the profiler
    starts recording with that step)."""
    path = require(CORPUS / "hta" / "control.json.gz")
    ev = _raw_events(path)
    st = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in ev
        if e.get("ph") == "X" and re.fullmatch(r"ProfilerStep#\d+", e.get("name", ""))
    )
    assert len(st) == 6
    d = diagnose(load(path))
    g = d.gaps
    f = findings(d)
    t0_us = d.trace.start_ns.min() / 1e3 - min(e["ts"] for e in ev if "ts" in e)
    a_us = g.start_ns / 1e3 - t0_us
    between = np.zeros(len(g), dtype=bool)
    for (_, end0), (start1, _) in zip(st, st[1:]):
        between |= (a_us >= end0) & (a_us < start1)
    assert between.sum() >= 3 and not f.edge[between].any()
    assert all("outside the steps" not in x.title for x in f.apart)
    # the 1.6-1.8 ms stalls holding `## load_batch ##`: one per step, the first an edge
    big = np.flatnonzero((g.device == d.budget.device) & (g.dur_ns > 1_500_000) & (g.dur_ns < 1_800_000))
    loads = [int(i) for i in big if any(e.name == "## load_batch ##" for e in d.evidence(int(i)))]
    owner = d.steps.owner_of(g.start_ns[loads], g.end_ns[loads])
    assert sorted(owner.tolist()) == [0, 1, 2, 3, 4, 5]
    assert f.edge[loads].tolist() == [k == 0 for k in owner.tolist()]
    # one steady finding of the five later ones, with their H2D copies
    (lb,) = [x for x in f.ranked if x.name == "## load_batch ##"]
    assert lb.title.startswith("data loading (`## load_batch ##`) and its input copies")
    assert sorted(lb.positions.tolist()) == sorted(i for i, k in zip(loads, owner.tolist()) if k > 0)
    assert (lb.steps_with, lb.steps_total) == (5, 6)


def test_a_diagnosis_with_findings_copies_and_pickles_and_a_failed_findings_frees_its_lock(monkeypatch):
    """The lock that computes a diagnosis's findings once is kept in its ``derived``:
    a deep copy or a pickled one gets its own (a bare ``threading.Lock`` raised
    ``TypeError: cannot pickle '_thread.lock' object``), with the same findings; and
    findings that raise leave it free, so the next call computes them."""
    import copy
    import pickle

    import gapscope.analysis.findings as findings_module

    d = diagnose(load(str(ROOT / "sample_traces" / "decode_10_steps.txt")))
    real = findings_module._findings
    monkeypatch.setattr(findings_module, "_findings", lambda diag: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        findings(d)
    monkeypatch.setattr(findings_module, "_findings", real)
    f = findings(d)  # would wait for good on a lock left held
    assert f.ranked
    for copied in (copy.deepcopy(d), pickle.loads(pickle.dumps(d))):
        assert copied.derived["findings_lock"] is not d.derived["findings_lock"]
        assert [x.title for x in findings(copied).ranked] == [x.title for x in f.ranked]


def test_a_one_step_traces_one_offs_are_edges_where_their_cards_are_drawn(monkeypatch):
    """The findings keep a one-step trace's one-off gaps apart as kind "edge" ("one-off
    after the trace's only step": sglang_Qwen3-8B_decode's gaps); ``edge_place`` names
    every gap of every such item, in the item's own words, so that the viewer's and
    MCP's cards say it (it had said nothing for these: found by an attack)."""
    from gapscope.analysis.findings import edge_place

    path = require(require(CORPUS) / "tracelens/sglang_decode/sglang_Qwen3-8B_decode.json.gz")
    diag = diagnose(load(str(path)))
    items = [f for f in findings(diag).apart if f.kind == "edge"]
    assert items
    for f in items:
        for r in f.positions.tolist():
            place = edge_place(diag, int(r))
            assert place is not None and (f.title.startswith(place) or place in f.title), (r, place, f.title)
    others = set(range(len(diag.gaps))) - {int(r) for f in items for r in f.positions.tolist()}
    assert all(edge_place(diag, r) is None for r in others)
