"""Steps as the GPU ran them, when the GPU runs behind the CPU (``device_side_steps``).

Planted Kineto traces (``tests/diff_planted.py``; µs, exact): one kernel launched per
``ProfilerStep#N`` range, the kernels queued back to back on one stream. Expected
windows are computed here from the planted times.
"""

from __future__ import annotations

import numpy as np

from gapscope.analysis.diagnose import diagnose
from gapscope.parsers import load
from tests.diff_planted import kineto

T0_NS = 1_000_000_000  # the planted traces start at ts = 1e6 µs


def _diag(tmp_path, **kw):
    return diagnose(load(str(kineto(tmp_path / "t.json", [], **kw))))


def test_a_cpu_that_runs_ahead_gives_the_gpus_steps(tmp_path):
    # 6 CPU steps of 40 us, each launching (at +5 us) a 190 us kernel; the kernels run
    # back to back with 10 us between them: kernel k starts at 10 + 200 k us
    def step_of(k):
        start = 10 + 200 * k - 40 * k  # relative to the step's own start (40 k)
        return [(f"k{k}", 5, start, start + 190, None)]

    d = _diag(tmp_path, steps=6, step_us=40, step_of=step_of)
    assert d.steps.on_gpu and d.steps.source == "ProfilerStep" and len(d.steps) == 6
    starts = T0_NS + 1_000 * (10 + 200 * np.arange(6))
    assert d.steps.start_ns.tolist() == starts.tolist()
    assert d.steps.end_ns.tolist() == [*starts[1:].tolist(), int(starts[-1]) + 190_000]
    b = d.budget
    # a 200 us step of 190 us of work, not a 40 us step of 40 us of work
    assert (b.wall_ns, b.gpu_busy_ns, b.idle_ns) == (200_000, 190_000, 10_000)


def test_a_cpu_that_waits_each_step_keeps_its_steps(tmp_path):
    d = _diag(tmp_path, steps=6, step_us=300, step_of=lambda k: [(f"k{k}", 5, 10, 200, None)])
    assert not d.steps.on_gpu
    assert d.steps.start_ns.tolist() == [T0_NS + 300_000 * k for k in range(6)]
    assert (d.budget.wall_ns, d.budget.gpu_busy_ns) == (300_000, 190_000)


def test_one_slow_step_does_not_move_the_steps(tmp_path):
    # step 2's kernel runs 700 us, past the end of step 3: late in 1 of 5 steps, no majority
    d = _diag(tmp_path, steps=6, step_us=300, step_of=lambda k: [(f"k{k}", 5, 10, 710 if k == 2 else 200, None)])
    assert not d.steps.on_gpu and len(d.steps) == 6


def test_gpu_side_steps_say_so_in_the_report_and_the_diff(tmp_path):
    import io
    import json

    from gapscope.diff.cmd import run as diff_run
    from gapscope.report.cmd import run as report_run

    def ahead(k):
        start = 10 + 200 * k - 40 * k
        return [(f"k{k}", 5, start, start + 190, None)]

    behind = kineto(tmp_path / "behind.json", [], steps=6, step_us=40, step_of=ahead)
    kept = kineto(tmp_path / "kept.json", [], steps=6, step_us=300, step_of=lambda k: [(f"k{k}", 5, 10, 200, None)])
    out = io.StringIO()
    assert report_run([str(behind), "--json"], stdout=out) == 0
    assert json.loads(out.getvalue())["steps"]["on_gpu"] is True
    out = io.StringIO()
    assert report_run([str(behind), "--width", "200"], stdout=out) == 0
    assert "as the GPU ran them: the GPU ran behind the CPU" in out.getvalue()
    out = io.StringIO()
    assert diff_run([str(kept), str(behind), "--json"], stdout=out) == 0
    notes = json.loads(out.getvalue())["comparability"]["notes"]
    assert any(n.startswith("AFTER: the GPU ran behind the CPU") for n in notes)


def _two_streams(path, step_of, steps=8, step_us=40):
    """``kineto`` with ``steps`` ProfilerStep ranges of ``step_us``; ``step_of(k)`` lists
    (stream, launch µs into the step, kernel start µs from the trace start, kernel dur µs)."""

    def planted(k):
        at = k * step_us
        return [(f"k{st}", launch, ks - at, ks - at + kd, None, st) for st, launch, ks, kd in step_of(k)]

    return kineto(path, [], steps=steps, step_us=step_us, step_of=planted)


def test_the_queue_is_the_busiest_stream_not_the_first_op(tmp_path):
    # each step first puts a 2 us op on an idle side stream (it runs at once), then a
    # 190 us kernel on stream 7 that queues behind the others: the steps are stream 7's
    def step_of(k):
        return [(9, 1, k * 40 + 5, 2), (7, 5, 10 + 200 * k, 190)]

    d = diagnose(load(str(_two_streams(tmp_path / "t.json", step_of))))
    assert d.steps.on_gpu and d.budget.wall_ns == 200_000 and d.budget.gpu_busy_ns == 190_000


def test_no_single_queue_or_starts_out_of_order_keep_the_cpu_steps(tmp_path):
    # steps alternate between two streams: no stream holds work in 90 % of the steps
    def alternate(k):
        return [(7 + 2 * (k % 2), 5, 10 + 100 * k, 190)]

    d = diagnose(load(str(_two_streams(tmp_path / "a.json", alternate))))
    assert not d.steps.on_gpu and (d.steps.wall_ns == 40_000).all()

    # a kernel recorded before its own launch (a clock artefact) is not a step's start
    def early(k):
        return [(7, 5, -500 if k == 3 else 10 + 200 * k, 190)]

    d = diagnose(load(str(_two_streams(tmp_path / "e.json", early))))
    assert not (d.steps.wall_ns <= 0).any()


def test_steps_from_the_kernel_period_are_already_the_gpus(tmp_path):
    from gapscope.analysis.steps import Steps, device_side_steps

    d = _diag(tmp_path, steps=6, step_us=40, step_of=lambda k: [(f"k{k}", 5, 10 + 160 * k, 200 + 160 * k, None)])
    period = Steps("period", "k0", d.steps.start_ns, d.steps.end_ns, np.zeros(0, np.int64))
    from gapscope.analysis.gaps import launch_of

    assert device_side_steps(d.trace, period, launch_of(d.trace), np.ones(len(d.trace), bool)) is period
