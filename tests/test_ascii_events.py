"""Event-list ASCII timelines: the seed exercises' figures, errors, round trip."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gapscope import parsers
from gapscope.parsers import Kind, TraceFormatError
from gapscope.parsers.ascii import load_ascii
from gapscope.sample_traces import path as sample_path

MS = 1_000_000
US = 1_000


def events(trace):
    """[(lane label, name, start_ns, end_ns, kind)] in trace order."""
    out = []
    for i in range(len(trace)):
        ln = trace.lanes[int(trace.lane[i])]
        label = "GPU" if ln.is_gpu else "CPU"
        out.append(
            (
                label,
                trace.name(i),
                int(trace.start_ns[i]),
                int(trace.start_ns[i] + trace.dur_ns[i]),
                Kind(int(trace.kind[i])),
            )
        )
    return out


def find(trace, name):
    hits = [e for e in events(trace) if e[1] == name]
    assert len(hits) == 1, hits
    return hits[0]


def gpu_busy_intervals(trace):
    """Union of kernel intervals on GPU lanes (independent of ``analysis``)."""
    iv = sorted((s, e) for lab, _, s, e, k in events(trace) if lab == "GPU" and k == Kind.KERNEL)
    merged = []
    for s, e in iv:
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return [tuple(m) for m in merged]


def idle_intervals(busy, lo, hi):
    out, t = [], lo
    for s, e in busy:
        if s > t:
            out.append((t, min(s, hi)))
        t = max(t, e)
    if t < hi:
        out.append((t, hi))
    return out


def write(tmp_path, text, name="t.txt"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


# ------------------------------------------------------------------ decode step
def test_decode_step_figures():
    t = parsers.load(sample_path("decode_step.txt"))
    assert t.source.format == "ascii-events"
    step = find(t, "decode_step")
    assert step[2:] == (0, 1_050_000, Kind.ANNOTATION)
    assert find(t, "matmul")[2:] == (258_000, 410_000, Kind.KERNEL)
    assert find(t, "attention")[2:] == (430_000, 590_000, Kind.KERNEL)
    busy = gpu_busy_intervals(t)
    busy_ns = sum(e - s for s, e in busy)
    assert busy_ns == 312_000
    idle = idle_intervals(busy, step[2], step[3])
    assert idle == [(0, 258_000), (410_000, 430_000), (590_000, 1_050_000)]
    idle_ns = sum(e - s for s, e in idle)
    assert idle_ns == 738_000
    assert round(100 * idle_ns / (step[3] - step[2]), 1) == 70.3


def test_decode_step_calls_and_flow():
    t = parsers.load(sample_path("decode_step.txt"))
    item = find(t, "tensor.item()")
    assert item == ("CPU", "tensor.item()", 90_000, 250_000, Kind.SYNC_CALL)
    assert find(t, "sample previous token")[2:4] == (30_000, 90_000)
    assert find(t, "logging callback")[2:] == (760_000, 1_050_000, Kind.PYTHON)
    assert find(t, "launch matmul")[4] == Kind.LAUNCH
    pairs = {(t.name(int(s)), t.name(int(d))) for s, d in zip(t.flow_src, t.flow_dst)}
    assert pairs == {("launch matmul", "matmul"), ("launch attention", "attention")}
    gpu = t.lanes[int(t.lane[[t.name(i) for i in range(len(t))].index("matmul")])]
    assert gpu.is_gpu and gpu.device == 0 and gpu.stream == 0
    assert t.warnings == ()


def test_decode_graph_figures():
    t = parsers.load(sample_path("decode_graph.txt"))
    g = find(t, "graph")
    assert g[2:] == (12_000, 340_000, Kind.KERNEL)
    step = find(t, "step")
    assert step[2:] == (0, 348_000, Kind.ANNOTATION)
    busy = gpu_busy_intervals(t)
    assert sum(e - s for s, e in busy) == 328_000
    idle = idle_intervals(busy, step[2], step[3])
    assert sum(e - s for s, e in idle) == 20_000
    # "launch fused decode graph" contains the GPU span's name "graph": linked.
    pairs = [(t.name(int(s)), t.name(int(d))) for s, d in zip(t.flow_src, t.flow_dst)]
    assert pairs == [("launch fused decode graph", "graph")]
    assert t.warnings == ()  # issue 18 item 11: a bundled sample loads clean (the step has its begin)


# ------------------------------------------------------------------ grammar
def test_units_carry_and_glue(tmp_path):
    t = parsers.load(write(tmp_path, "1.5us CPU a begin\n2 CPU a end\n3 ns GPU k begin\n4 GPU k end\n1 s CPU z\n"))
    assert find(t, "a")[2:4] == (1_500, 2_000)
    assert find(t, "k")[2:4] == (3, 4)
    assert find(t, "z")[2:4] == (1_000_000_000, 1_000_000_000)  # last CPU point: zero length


def test_micro_sign_and_copies(tmp_path):
    t = parsers.load(
        write(tmp_path, "0 µs GPU H2D begin\n5 μs GPU H2D end\n6 us GPU memcpy DtoH begin\n9 us GPU memcpy DtoH end\n")
    )
    h2d = [i for i in range(len(t)) if t.name(i) == "H2D"][0]
    assert Kind(t.kind[h2d]) == Kind.MEMCPY and parsers.CopyKind(t.copy_kind[h2d]) == parsers.CopyKind.H2D
    d2h = [i for i in range(len(t)) if t.name(i) == "memcpy DtoH"][0]
    assert parsers.CopyKind(t.copy_kind[d2h]) == parsers.CopyKind.D2H


def test_launch_falls_back_to_next_span_with_warning(tmp_path):
    t = parsers.load(write(tmp_path, "0 us CPU cudaLaunchKernel\n2 us GPU gemm begin\n5 us GPU gemm end\n"))
    assert [(t.name(int(s)), t.name(int(d))) for s, d in zip(t.flow_src, t.flow_dst)] == [("cudaLaunchKernel", "gemm")]
    assert len(t.warnings) == 1 and "linked by order" in t.warnings[0].message


def test_unclosed_begin_warns_and_closes_at_last_time(tmp_path):
    t = parsers.load(write(tmp_path, "0 ms CPU step begin\n1 ms GPU k begin\n2 ms GPU k end\n"))
    assert find(t, "step")[2:4] == (0, 2 * MS)
    assert [w.line for w in t.warnings] == [1]


def test_title_and_description(tmp_path):
    t = parsers.load(write(tmp_path, "# My title\n#  more words\n\n0 ms CPU a\n# not header\n1 ms CPU b\n"))
    assert t.source.trace_name == "My title"
    assert t.source.extra["description"] == "more words"


@pytest.mark.parametrize(
    "text,line,col,needle",
    [
        ("0.0 xs CPU a begin\n", 1, 5, "unknown unit 'xs'"),
        ("0.0xs CPU a begin\n", 1, 4, "unknown unit 'xs'"),
        ("0 ms CPU a begin\n1 ms CPU a end\n2 ms CPU a end\n", 3, 10, "'a end' without 'a begin'"),
        ("1 ms CPU a\n0.5 ms CPU b\n", 2, 1, "time goes backwards on lane CPU"),
        ("0 ms FPGA x\n", 1, 6, "expected a lane"),
        ("0 ms CPU\n", 1, 9, "missing event text"),
        ("0 ms CPU a begin\nhello\n", 2, 1, "expected a time"),
        ("  hello world\n", 1, 3, "not a timeline"),
        ("0 ms CPU end\n", 1, 10, "needs a name"),
        ("# only a comment\n\n", 2, 1, "no timeline"),
        ("0 ms CPU a\n 99999999999999 s CPU b\n", 2, 2, "out of range"),
        ("1" + "0" * 5000 + " ms CPU a\n", 1, 1, "out of range"),
    ],
)
def test_errors_have_line_and_column(tmp_path, text, line, col, needle):
    with pytest.raises(TraceFormatError) as ei:
        parsers.load(write(tmp_path, text))
    err = ei.value
    assert (err.line, err.column) == (line, col), str(err)
    assert needle in err.message
    assert str(err).startswith(f"{tmp_path / 't.txt'}:{line}:{col}: ")


def test_backwards_across_lanes_is_fine():
    t = load_ascii("1 ms CPU a\n0.5 ms GPU k begin\n0.7 ms GPU k end\n2 ms CPU b\n")
    assert find(t, "a")[2:4] == (MS, 2 * MS)


# ------------------------------------------------------------------ round trip
_NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8).filter(
    lambda s: s not in ("begin", "end") and not s.startswith("launch")
)  # launch calls warn when unlinked


def _render(ns: int, unit: str) -> str:
    v = Fraction(ns, {"ns": 1, "us": US, "ms": MS}[unit])
    if v.denominator == 1:
        return str(v.numerator)
    digits = {"ns": 0, "us": 3, "ms": 6}[unit]
    s = f"{v.numerator // v.denominator}.{(v.numerator % v.denominator) * 10**digits // v.denominator:0{digits}d}"
    return s.rstrip("0").rstrip(".")


@st.composite
def event_lists(draw):
    spans = []
    for lane in ("CPU", "GPU"):
        t = draw(st.integers(0, 5_000))
        for _ in range(draw(st.integers(0, 6))):
            t += draw(st.integers(0, 3_000_000))
            dur = draw(st.integers(0, 2_000_000))
            spans.append((lane, draw(_NAMES), t, t + dur))
            t += dur
    lines = []
    for k, (lane, name, s, e) in enumerate(spans):
        lines.append((s, k, 0, lane, f"{name} begin"))
        lines.append((e, k, 1, lane, f"{name} end"))
    lines.sort(key=lambda x: (x[3], x[0], x[1], x[2]))  # per-lane order first
    lines.sort(key=lambda x: x[0])  # stable: keeps per-lane order at equal times
    units = draw(st.lists(st.sampled_from(["ns", "us", "ms", ""]), min_size=len(lines), max_size=len(lines)))
    out, cur = [], "ms"
    for (ns, _, _, lane, text), u in zip(lines, units):
        unit = u or cur
        out.append(f"{_render(ns, unit)}{' ' + u if u else ''}  {lane} {text}")
        cur = unit
    return spans, "\n".join(out) + "\n"


@settings(max_examples=60, deadline=None)
@given(event_lists())
def test_round_trip_random_event_lists(data):
    spans, text = data
    if not spans:
        return
    t = load_ascii(text, "rand.txt")
    got = sorted((lab, name, s, e) for lab, name, s, e, _ in events(t))
    assert got == sorted(spans)
    assert t.warnings == ()
    assert np.all(np.diff(t.lane) >= 0)


# ------------------------------------------------------------------ our own samples
def test_ten_decode_steps():
    t = parsers.load(sample_path("decode_10_steps.txt"))
    ev = events(t)
    steps = [e for e in ev if e[1] == "decode_step"]
    assert len(steps) == 10 and {e[4] for e in steps} == {Kind.ANNOTATION}
    assert all(a[3] == b[2] for a, b in zip(steps, steps[1:]))  # back to back
    kernels = [e for e in ev if e[4] == Kind.KERNEL]
    assert [e[1] for e in kernels] == ["matmul", "attention"] * 10
    assert {e[3] - e[2] for e in kernels if e[1] == "matmul"} == {152 * US}
    items = [e for e in ev if e[1] == "tensor.item()"]
    assert [e[3] - e[2] for e in items] == [(150 + (k * 7 % 5) * 4) * US for k in range(10)]
    assert {e[4] for e in items} == {Kind.SYNC_CALL}
    js = find(t, "json response chunk")
    assert js[3] - js[2] == 400 * US and steps[6][2] < js[2] < steps[6][3]
    pairs = [(t.name(int(s)), t.name(int(d))) for s, d in zip(t.flow_src, t.flow_dst)]
    assert len(pairs) == 20 and all(a == "launch " + b for a, b in pairs)
    assert t.warnings == ()


def test_dataloader_stall():
    t = parsers.load(sample_path("dataloader_stall.txt"))
    ev = events(t)
    assert [e[1] for e in ev if e[4] == Kind.ANNOTATION and e[1].startswith("ProfilerStep")] == [
        f"ProfilerStep#{k}" for k in range(1, 5)
    ]
    loads = [e[3] - e[2] for e in ev if e[1] == "dataloader next"]
    assert loads == [300 * US, 300 * US, 6 * MS, 300 * US]
    h2d = [i for i in range(len(t)) if t.name(i) == "H2D"]
    assert len(h2d) == 4 and {parsers.CopyKind(int(t.copy_kind[i])) for i in h2d} == {parsers.CopyKind.H2D}
    pairs = {(t.name(int(s)), t.name(int(d))) for s, d in zip(t.flow_src, t.flow_dst)}
    assert ("batch.cuda()", "H2D") in pairs and ("launch forward", "forward") in pairs
    assert len(t.flow_src) == 16


@st.composite
def cpu_points_and_spans(draw):
    """CPU lane of spans and points; a point ends at the next CPU line (or the last time)."""
    elems, t = [], draw(st.integers(0, 1_000))
    for _ in range(draw(st.integers(1, 6))):
        t += draw(st.integers(0, 500_000))
        if draw(st.booleans()):
            elems.append(("point", draw(_NAMES), t))
        else:
            dur = draw(st.integers(0, 500_000))
            elems.append(("span", draw(_NAMES), t, t + dur))
            t += dur
    gpu_end = draw(st.integers(0, 4_000_000))
    lines = []
    for e in elems:
        if e[0] == "point":
            lines.append((e[2], f"CPU {e[1]} tick"))
        else:
            lines += [(e[2], f"CPU {e[1]} begin"), (e[3], f"CPU {e[1]} end")]
    lines += [(0, "GPU k begin"), (gpu_end, "GPU k end")]
    last = max(ln[0] for ln in lines)
    expected = [("GPU", "k", 0, gpu_end)]
    cpu_times = [ln[0] for ln in lines if ln[1].startswith("CPU")]
    k = 0
    for e in elems:
        if e[0] == "point":
            nxt = cpu_times[k + 1] if k + 1 < len(cpu_times) else last
            expected.append(("CPU", f"{e[1]} tick", e[2], nxt))
            k += 1
        else:
            expected.append(("CPU", e[1], e[2], e[3]))
            k += 2
    lines.sort(key=lambda ln: ln[0])  # stable: CPU lines keep their order
    return expected, "".join(f"{ns} ns {text}\n" for ns, text in lines)


@settings(max_examples=60, deadline=None)
@given(cpu_points_and_spans())
def test_round_trip_points_last_until_next_line(data):
    expected, text = data
    t = load_ascii(text, "points.txt")
    assert sorted((lab, n, s, e) for lab, n, s, e, _ in events(t)) == sorted(expected)
