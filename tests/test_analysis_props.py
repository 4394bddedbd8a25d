"""Property tests: random traces whose true cause is known by construction, and the
vectorised interval code against slow pure-Python references."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gapscope.analysis import Cause, diagnose
from gapscope.analysis.busy import complement, coverage, union_intervals
from gapscope.analysis.card import card_for_gap
from gapscope.analysis.gaps import find_gaps
from gapscope.analysis.jsonout import diagnosis_to_json
from gapscope.parsers.builder import TraceBuilder
from gapscope.parsers.model import CopyKind, Kind

from .reference import slow_union

US = 1_000


def _slow_cover(union, a, b):
    return sum(max(0, min(e, b) - max(s, a)) for s, e in union)


intervals = st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 3_000)), min_size=0, max_size=60)


@settings(max_examples=200, deadline=None)
@given(intervals, st.lists(st.tuples(st.integers(-100, 11_000), st.integers(0, 5_000)), max_size=10))
def test_union_and_coverage_match_reference(iv, queries):
    s = np.array([a for a, _ in iv], dtype=np.int64)
    e = np.array([a + d for a, d in iv], dtype=np.int64)
    us, ue = union_intervals(s, e)
    ref = slow_union([(a, a + d) for a, d in iv])
    assert list(zip(us.tolist(), ue.tolist())) == [tuple(x) for x in ref]
    if queries:
        qa = np.array([a for a, _ in queries], dtype=np.int64)
        qb = qa + np.array([d for _, d in queries], dtype=np.int64)
        assert coverage(us, ue, qa, qb).tolist() == [_slow_cover(ref, a, b) for a, b in zip(qa, qb)]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 50_000), st.integers(1, 8_000)), min_size=1, max_size=40),
    st.integers(1, 3_000),
)
def test_find_gaps_matches_reference(kernels, min_gap):
    """Gaps = complement of the union over streams, inside [first, last] op, >= min_gap."""
    b = TraceBuilder()
    lanes = [b.lane("0", str(k), is_gpu=True, device=0, stream=k) for k in range(4)]
    for stream, s, d in kernels:
        b.event(lanes[stream], "k", s, d, Kind.KERNEL)
    t = b.build()
    g = find_gaps(t, 0, min_gap)
    ref = slow_union([(s, s + d) for _, s, d in kernels])
    lo = min(s for _, s, _ in kernels)
    hi = max(s + d for _, s, d in kernels)
    ref_gaps = [(ref[i][1], ref[i + 1][0]) for i in range(len(ref) - 1) if ref[i + 1][0] - ref[i][1] >= min_gap]
    assert list(zip(g.start_ns.tolist(), g.end_ns.tolist())) == ref_gaps
    assert all(lo <= a < b <= hi for a, b in ref_gaps)
    cs, ce = complement(
        *union_intervals(np.array([s for _, s, _ in kernels]), np.array([s + d for _, s, d in kernels])), lo, hi
    )
    assert int((ce - cs).sum()) == (hi - lo) - sum(e - s for s, e in ref)


#: What is planted in a gap, and the class it must get ("Cause classes" in
#: docs/definitions.md: copy is GPU copy time only; the thread's time in a copy call is a
#: wait when the call blocked until its copy ended, else host work).
PLANTS = {
    "sync": Cause.SYNC,
    "copy": Cause.COPY,
    "copy call": Cause.HOST,
    "blocking copy": Cause.SYNC,
    "host": Cause.HOST,
    "launch": Cause.LAUNCH,
}
PLANTED = st.sampled_from(list(PLANTS))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(PLANTED, st.integers(60, 400), st.integers(40, 200), st.integers(0, 5)), min_size=1, max_size=8),
    st.booleans(),
)
def test_planted_causes_are_found(plan, noise):
    """Each planted gap has one cause by construction:

    - sync: the launching thread blocks in ``cudaStreamSynchronize`` (or ``aten::item``)
      from before the gap to 10 µs before its end;
    - copy: a pinned ``cudaMemcpyAsync`` call of 4 µs, its GPU copy running from 1 µs
      after the call began to 10 µs before the gap's end (copy is the GPU's copy time);
    - copy call: a ``cudaMemcpyAsync`` call to 10 µs before the gap's end with a 20 µs
      pageable GPU copy inside it, the call returning after its copy did not (no link):
      the thread's time in the call outside the copy is host work;
    - blocking copy: a ``cudaMemcpyAsync`` call from before the gap to 10 µs before its
      end, linked to its 20 µs pageable device-to-host copy, which ended before the
      call returned: the call blocked on the device and drained the queue (sync cliff);
    - host: ``aten::_foreach_add_`` or a Python ``tokenize`` with no launch;
    - launch: a picket fence of 10 kernels of 3 µs, 20 µs apart, launched back to back
      with a little Python between launches.
    Then the next kernel's launch call (L > 0). Noise: another process doing host work
    and a sync the whole time (not the launching process: must change nothing).
    """
    b = TraceBuilder()
    cpu = b.lane("1", "1", process_name="python", thread_name="main")
    other = b.lane("2", "2", process_name="other", thread_name="worker")
    gpu = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    corr = iter(range(1, 10_000))
    t = 0
    expected = []  # (gap start, gap end, cause)

    def kernel(start, dur, name="k"):
        c = next(corr)
        b.event(cpu, "cudaLaunchKernel", start - 8 * US, 5 * US, Kind.LAUNCH, correlation=c)
        b.event(gpu, name, start, dur, Kind.KERNEL, correlation=c)

    t = 20 * US
    kernel(t, 50 * US)
    t += 50 * US
    for i, (plant, gap_us, kd_us, a_us) in enumerate(plan):
        cause = PLANTS[plant]
        if plant == "launch":
            for j in range(10):
                # the first gap follows a long kernel: not part of the fence, not checked
                expected.append((t, t + 20 * US, Cause.LAUNCH if j else None))
                # Python between back-to-back launches: the per-kernel dispatch tax
                b.event(cpu, "python loop", t, 10 * US, Kind.PYTHON)
                t += 20 * US
                kernel(t, 3 * US, "small")
                t += 3 * US
            # a long gap after the fence so the fence ends: plant host work there
            plant, cause, gap_us = "host", Cause.HOST, max(gap_us, 60)
        gs, ge = t, t + gap_us * US
        end = ge - 10 * US
        if plant == "sync":
            name = "cudaStreamSynchronize" if i % 2 == 0 else "aten::item"
            b.event(cpu, name, gs - 20 * US, end - (gs - 20 * US), Kind.SYNC_CALL if i % 2 == 0 else Kind.CPU_OP)
        elif plant == "copy":
            c = next(corr)
            b.event(cpu, "cudaMemcpyAsync", gs + a_us * US, 4 * US, Kind.MEMCPY_CALL, correlation=c)
            b.event(
                gpu,
                "Memcpy HtoD (Pinned -> Device)",
                gs + (a_us + 1) * US,
                end - gs - (a_us + 1) * US,
                Kind.MEMCPY,
                correlation=c,
                bytes=64 << 20,
                copy_kind=CopyKind.H2D,
            )
        elif plant == "blocking copy":
            c = next(corr)
            b.event(cpu, "cudaMemcpyAsync", gs - 20 * US, end - (gs - 20 * US), Kind.MEMCPY_CALL, correlation=c)
            b.event(
                gpu,
                "Memcpy DtoH (Device -> Pageable)",
                gs + (a_us + 1) * US,
                20 * US,
                Kind.MEMCPY,
                correlation=c,
                bytes=1 << 20,
                copy_kind=CopyKind.D2H,
                pageable=True,
            )
        elif plant == "copy call":
            b.event(cpu, "cudaMemcpyAsync", gs + a_us * US, end - gs - a_us * US, Kind.MEMCPY_CALL)
            b.event(
                gpu,
                "Memcpy HtoD (Pageable -> Device)",
                gs + (a_us + 1) * US,
                20 * US,
                Kind.MEMCPY,
                bytes=1 << 20,
                copy_kind=CopyKind.H2D,
                pageable=True,
            )
        else:
            name = "aten::_foreach_add_" if i % 2 == 0 else "tokenize"
            b.event(cpu, name, gs + a_us * US, end - gs - a_us * US, Kind.CPU_OP if i % 2 == 0 else Kind.PYTHON)
        expected.append((gs, ge, cause))
        t = ge
        kernel(t, kd_us * US)
        t += kd_us * US
    if noise:
        b.event(other, "dataloader", 0, t, Kind.PYTHON)
        b.event(other, "cudaStreamSynchronize", 0, t, Kind.SYNC_CALL)
    d = diagnose(b.build())
    g = d.gaps
    got = {(int(s), int(e)): Cause(int(c)) for s, e, c in zip(g.start_ns, g.end_ns, g.cause)}
    assert len(got) == len(expected)
    for gs, ge, cause in expected:
        if cause is None:
            continue
        assert got[(gs, ge)] == cause, (gs, ge, cause, g.class_ns)
    assert (g.class_ns.sum(axis=1) == g.dur_ns).all()
    assert sum(d.class_totals_ns().values()) == d.total_idle_ns() == d.devices[0].idle_ns


KINDS = st.sampled_from(
    [
        Kind.KERNEL,
        Kind.MEMCPY,
        Kind.MEMSET,
        Kind.LAUNCH,
        Kind.SYNC_CALL,
        Kind.MEMCPY_CALL,
        Kind.RUNTIME,
        Kind.CPU_OP,
        Kind.PYTHON,
        Kind.ANNOTATION,
        Kind.SYNC_MARKER,
        Kind.INSTANT,
    ]
)
NAMES = st.sampled_from(
    [
        "aten::item",
        "aten::to",
        "cudaLaunchKernel",
        "ProfilerStep#1",
        "decode_step",
        "k",
        "x`y",
        "[bold]m[/]",
        "tokenize",
        "cudaStreamSynchronize",
        "Memcpy DtoH (Device -> Pageable)",
    ]
)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 3),
            KINDS,
            NAMES,
            st.integers(0, 2_000),
            st.integers(0, 400),
            st.integers(-1, 6),
            st.integers(-1, 1 << 17),
        ),
        max_size=40,
    )
)
def test_diagnose_invariants_on_random_traces(events):
    """Any valid trace: no exception; per-gap class ns sum to the gap; totals to idle;
    cards, what-if and JSON for every gap."""
    import json

    b = TraceBuilder()
    lanes = [
        b.lane("1", "1"),
        b.lane("1", "2"),
        b.lane("0", "7", is_gpu=True, device=0, stream=7),
        b.lane("0", "8", is_gpu=True, device=1, stream=8),
    ]
    for lane, kind, name, start, dur, corr, nbytes in events:
        on_gpu = kind in (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.SYNC_MARKER)
        ln = lanes[2 + lane % 2] if on_gpu else lanes[lane % 2]
        b.event(
            ln,
            name,
            start * US,
            dur * US,
            kind,
            correlation=corr,
            bytes=nbytes,
            copy_kind=CopyKind.D2H if kind == Kind.MEMCPY else CopyKind.NONE,
            pageable=bool(nbytes % 2),
        )
    d = diagnose(b.build())
    g = d.gaps
    assert (g.class_ns.sum(axis=1) == g.dur_ns).all() and (g.class_ns >= 0).all()
    assert sum(d.class_totals_ns().values()) == d.total_idle_ns()
    for dev in d.devices:
        assert d.total_idle_ns(dev.device) <= dev.idle_ns
    for i in range(len(g)):
        c = card_for_gap(d, i)
        assert c.why and c.first_experiment
    if d.budget is not None:
        w = d.what_if(causes=(Cause.HOST, Cause.SYNC))
        assert d.budget.gpu_busy_ns <= w.projected_step_ns <= d.budget.wall_ns
    json.dumps(diagnosis_to_json(d))
