"""A host verdict on a trace with Python tracing on carries a caveat (the third audit
of issue 43, defect 6): the profiler records every Python call (``python_function``
events, torch.profiler's with_stack=True), which inflates host time (b200: 15,230 in
84 ms). The caveat says the count and the rate, and to re-profile without with_stack.

Planted trace: 4 steps of 1000 µs from 1000 µs on one thread; kernels [0, 100), [300,
400), [600, 700), [900, 1000) µs of each step, each launched by a 5 µs call 6 µs
before it; ``tokenize`` fills gap A [100, 300) µs of each step with ``n`` Python
function events of 1 µs inside it, 1 µs apart."""

from __future__ import annotations

import pytest

from gapscope.analysis import diagnose
from gapscope.analysis.findings import findings
from gapscope.parsers.builder import TraceBuilder
from gapscope.parsers.model import Kind

US = 1_000


def _diag(n: int):
    b = TraceBuilder()
    t = b.lane("1", "1", process_name="python3", thread_name="main")
    g0 = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    corr = 0
    for s in range(4):
        base = (1 + s) * 1000 * US
        b.event(t, f"ProfilerStep#{s}", base, 1000 * US, Kind.ANNOTATION)
        for k0 in (0, 300, 600, 900):
            corr += 1
            b.event(t, "cudaLaunchKernel", base + (k0 - 6) * US, 5 * US, Kind.LAUNCH, correlation=corr)
            b.event(g0, f"k{k0}", base + k0 * US, 100 * US, Kind.KERNEL, correlation=corr)
        b.event(t, "tokenize", base + 100 * US, 190 * US, Kind.CPU_OP)
        for k in range(n):
            b.event(t, "tokenizer.py(12): encode", base + (101 + 2 * k) * US, 1 * US, Kind.PYTHON)
    return diagnose(b.build())


def test_host_verdict_with_python_tracing_carries_the_caveat():
    """80 Python events a step: 320 in the 4.0 ms of steps, 80,000 a second."""
    f = findings(_diag(80))
    assert f.verdict_kind == "host"
    assert "320 Python function events (Python tracing, with_stack=True) in its 4.000 ms (80,000 a second)" in f.verdict
    assert "re-profile without with_stack" in f.verdict


@pytest.mark.parametrize("n", [0, 10])
def test_no_caveat_without_much_python_tracing(n):
    """None, or 10 a step (10,000 a second): no caveat."""
    f = findings(_diag(n))
    assert f.verdict_kind == "host"
    assert "Python tracing" not in f.verdict
