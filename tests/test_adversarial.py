"""Adversarial shapes stay O(n log n) (issue 14): identical nested CPU events, every
event of a lane overlapping every gap, huge names. Work is counted (calls of the
per-depth union, Evidence objects built, characters escaped), not wall time; the
times at full scale are in ``bench/adversarial.py``."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from gapscope.analysis import evidence
from gapscope.report import fmt
from gapscope.report.cmd import run

KERNELS = [
    {
        "ph": "X",
        "cat": "kernel",
        "name": "k",
        "pid": 0,
        "tid": 7,
        "ts": 100 + 100 * i,
        "dur": 10,
        "args": {"stream": 7, "device": 0},
    }
    for i in range(20)
]


def _trace(tmp_path, events, name="t.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": events + KERNELS}))
    return path


def _report(path, *flags):
    out = io.StringIO()
    assert run([*flags, str(path)], stdout=out) == 0
    return out.getvalue()


@pytest.fixture
def counted(monkeypatch):
    calls = {"union": 0, "evidence": 0}
    real_union, real_ev = evidence.union_intervals, evidence.Evidence

    def union(*a, **k):
        calls["union"] += 1
        return real_union(*a, **k)

    def ev(*a, **k):
        calls["evidence"] += 1
        return real_ev(*a, **k)

    monkeypatch.setattr(evidence, "union_intervals", union)
    monkeypatch.setattr(evidence, "Evidence", ev)
    return calls


@pytest.mark.parametrize("cat", ["cpu_op", "cuda_runtime"])
def test_identical_nested_events_do_bounded_work(tmp_path, counted, cat):
    n = 3000  # the per-depth loop made ~n unions per gap: 60,000 here
    name = "cudaLaunchKernel" if cat == "cuda_runtime" else "aten::add"
    path = _trace(tmp_path, [{"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": 50, "dur": 2500}] * n)
    for flags in ((), ("--markdown",), ("--json",)):
        _report(path, *flags)
    gaps = len(KERNELS) - 1
    assert counted["union"] <= 3 * 8 * gaps, counted  # a few per part of each gap, never per depth
    assert counted["evidence"] <= 3 * 25 * gaps, counted  # at most `limit` per gap, never per event


def _nested(rng, n, cap):
    """Random properly nested intervals on one lane, depth = nesting level (capped)."""
    out, stack = [], []
    t = 0
    for _ in range(n):
        t += int(rng.integers(0, 3))
        while stack and stack[-1][1] <= t:
            stack.pop()
        room = stack[-1][1] - t if stack else 50
        if room <= 0:
            continue
        dur = int(rng.integers(1, room + 1))
        d = min(len(stack), cap)
        out.append((t, t + dur, d))
        stack.append((t, t + dur))
    return np.array(out, dtype=np.int64).reshape(-1, 3)


@pytest.mark.parametrize("seed", range(30))
def test_nested_sweep_equals_union_per_depth(seed):
    rng = np.random.default_rng(seed)
    iv = _nested(rng, 60, cap=int(rng.integers(2, 40)))
    cs, ce, depth = iv[:, 0], iv[:, 1], iv[:, 2]
    got = evidence._nested_cover(cs, ce, depth)
    assert got is not None
    want = np.zeros(len(cs), dtype=np.int64)
    for d in np.unique(depth).tolist():
        deeper = depth > d
        if deeper.any():
            us, ue = evidence.union_intervals(cs[deeper], ce[deeper])
            rows = np.flatnonzero(depth == d)
            want[rows] = evidence.coverage(us, ue, cs[rows], ce[rows])
    assert got.tolist() == want.tolist()


def test_overlap_without_nesting_falls_back():
    cs, ce, d = np.array([0, 5]), np.array([10, 15]), np.array([0, 1])
    assert evidence._nested_cover(cs, ce, d) is None


def test_huge_name_escapes_only_what_is_shown(monkeypatch):
    seen = []
    real = fmt._escape_chars
    monkeypatch.setattr(fmt, "_escape_chars", lambda s: seen.append(len(s)) or real(s))
    name = "\n" * (1 << 20)
    assert len(fmt.safe_name(name, 40)) == 40
    assert len(fmt.safe_name(name)) == fmt.DISPLAY_MAX_CHARS
    assert len(fmt.short_name(name, 60)) <= 60
    assert max(seen) <= fmt.DISPLAY_MAX_CHARS + 16


def test_report_of_huge_names_is_cut(tmp_path):
    name = "\n" * 200_000
    path = _trace(
        tmp_path, [{"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": 50, "dur": 2500}], "big.json"
    )
    for flags in ((), ("--markdown",)):
        assert len(_report(path, *flags)) < 200_000
    assert json.loads(_report(path, "--json"))["schema"].startswith("gapscope.report/")
