"""Random valid traces through the whole report (diagnose → document → text,
Markdown, JSON): never an exception, names verbatim in JSON and terminal-safe in
text, busy equal to a slow reference union, class totals equal to gap idle."""

from __future__ import annotations

import io
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gapscope.analysis.diagnose import diagnose
from gapscope.parsers.builder import TraceBuilder
from gapscope.parsers.model import Kind
from gapscope.report.document import build_document
from gapscope.report.markdown import render_markdown
from gapscope.report.text import make_console, render_text

from .test_report_busy import slow_union

NAMES = st.sampled_from(
    [
        "gemm",
        "[bold]x[/bold]",
        "[/]",
        "a\x1b[31mred",
        "tab\there",
        "µ-kernel",
        "\\[esc]",
        "void k<1, [lambda]>(int)",
        "line\nbreak",
        "\u202eevil",
        "",
    ]
)
KINDS = st.sampled_from([Kind.KERNEL, Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET])
CPU_KINDS = st.sampled_from([Kind.LAUNCH, Kind.SYNC_CALL, Kind.MEMCPY_CALL, Kind.CPU_OP, Kind.PYTHON, Kind.ANNOTATION])

gpu_event = st.tuples(
    st.integers(0, 1),
    st.integers(0, 2),
    NAMES,
    st.integers(0, 500_000),
    st.integers(0, 80_000),
    KINDS,
    st.integers(-1, 30),
)
cpu_event = st.tuples(
    st.integers(0, 1), NAMES, st.integers(0, 500_000), st.integers(0, 80_000), CPU_KINDS, st.integers(-1, 30)
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(gpu_event, max_size=25), st.lists(cpu_event, max_size=25), st.booleans())
def test_random_traces_report(gpu, cpu, steps):
    b = TraceBuilder(format="chrome", path="random.json")
    cpu_lanes = [b.lane("1", str(t), process_name="py [w]", thread_name=f"[t{t}]") for t in range(2)]
    for dev, stream, name, start, dur, kind, corr in gpu:
        lane = b.lane(
            str(100 + dev),
            str(stream),
            process_name=f"GPU {dev}",
            thread_name=f"stream {stream}",
            is_gpu=True,
            device=dev,
            stream=stream,
        )
        b.event(lane, name, start, dur, kind, correlation=corr)
    for t, name, start, dur, kind, corr in cpu:
        b.event(cpu_lanes[t], name, start, dur, kind, correlation=corr)
    if steps:
        for k in range(3):
            b.event(cpu_lanes[0], f"ProfilerStep#{k}", k * 200_000, 200_000, Kind.ANNOTATION)
    trace = b.build()
    diag = diagnose(trace)
    doc = json.loads(json.dumps(build_document(trace, diag, top_n=5), allow_nan=False))

    for d in doc["devices"]:
        lo, hi = d["window_start_ns"], d["window_end_ns"]
        kern = [
            (max(s, lo), min(s + du, hi))
            for dv, _, _, s, du, k, _ in gpu
            if dv == d["device"] and k == Kind.KERNEL and s < hi and s + du > lo
        ]
        assert d["busy_ns"] == slow_union(kern)  # union over streams, clipped to the window
        assert sum(d["class_totals_ns"].values()) == d["gap_idle_ns"] <= d["idle_ns"]
    assert sum(doc["class_totals_ns"].values()) == doc["idle_in_gaps_ns"]
    names = {n for _, _, n, *_ in gpu}
    for g in doc["top_gaps"]:
        if g["prev_op"]:
            assert g["prev_op"]["name"] in names  # verbatim in JSON

    out = io.StringIO()
    render_text(doc, make_console(out, width=100, color=False))
    text = out.getvalue()
    assert "\x1b" not in text and "\u202e" not in text and "\t" not in text
    md = render_markdown(doc)
    assert "\x1b" not in md and "\u202e" not in md
