"""View model and navigation of the viewer: exact values computed by hand, and the
vectorised bucketing against a slow per-cell reference on random lanes."""

from __future__ import annotations

import numpy as np
import pytest

from gapscope.analysis.types import Cause, Gaps
from gapscope.parsers.builder import TraceBuilder
from gapscope.parsers.model import Kind
from gapscope.tui.cells import sized as _sized
from gapscope.tui.lanes_model import build_rows, sanitize
from gapscope.tui.navigation import SIZE, TIME, FlowIndex, GapNavigator, NameSearch
from gapscope.tui.ruler import nice_step_ns, parse_time_ns, ruler_ticks
from gapscope.tui.viewmodel import GlyphClass, LaneIndex, Viewport


# ----------------------------------------------------------------- viewport
def test_zoom_in_keeps_anchor_and_halves_span():
    vp = Viewport(1000, 100.0, 100)
    z = vp.zoom(2, 3000)
    assert z == Viewport(2000, 50.0, 100)
    assert z.span_ns == vp.span_ns / 2
    assert z.cell_of(3000) == vp.cell_of(3000) == 20


def test_zoom_out_doubles_span():
    z = Viewport(1000, 100.0, 100).zoom(0.5, 3000)
    assert z == Viewport(-1000, 200.0, 100)
    assert z.span_ns == 20_000


def test_zoom_clamps_at_one_ns_per_cell():
    z = Viewport(0, 4.0, 10).zoom(16, 20)
    assert z.ns_per_cell == 1.0
    assert z.start_ns == 20 - 5  # anchor keeps cell 5


def test_pan_moves_by_fraction_of_span():
    vp = Viewport(1000, 100.0, 100)
    assert vp.pan(0.25) == Viewport(3500, 100.0, 100)
    assert vp.pan(-1.0) == Viewport(-9000, 100.0, 100)


def test_fit_and_edges():
    assert Viewport.fit(0, 1_000_000, 100) == Viewport(0, 10_000.0, 100)
    assert Viewport.fit(0, 1_000_000, 100, margin=0.05) == Viewport(-50_000, 11_000.0, 100)
    assert Viewport(0, 2.5, 4).edges().tolist() == [0, 2, 5, 8, 10]  # round half to even
    assert Viewport(0, 10.0, 2).edges(2).tolist() == [0, 5, 10, 15, 20]


def test_centred_on_and_contains():
    vp = Viewport(0, 10.0, 100).centred_on(5_000)
    assert vp.start_ns == 4_500 and vp.contains(5_000) and not vp.contains(5_500)


# ------------------------------------------------------------------- ruler
def test_nice_step_series():
    assert nice_step_ns(1000.0, 12) == 20_000
    assert nice_step_ns(1.0, 12) == 20
    assert nice_step_ns(40_000.0, 12) == 500_000
    assert nice_step_ns(100_000_000.0, 12) == 2_000_000_000


def test_ruler_ticks_exact():
    step, ticks = ruler_ticks(Viewport(0, 1000.0, 100), origin_ns=0)
    assert step == 20_000
    assert ticks == [(0, "0µs"), (20, "20µs"), (40, "40µs"), (60, "60µs"), (80, "80µs")]
    # offsets from the trace origin, first tick rounded up
    step, ticks = ruler_ticks(Viewport(1_005_000, 1000.0, 50), origin_ns=1_000_000)
    assert ticks == [(15, "20µs"), (35, "40µs")]


def test_ruler_units_ms_and_s():
    _, ticks = ruler_ticks(Viewport(0, 50_000.0, 40), origin_ns=0)
    assert [lab for _, lab in ticks] == ["0ms", "1ms"]
    _, ticks = ruler_ticks(Viewport(0, 100_000_000.0, 60), origin_ns=0)
    assert [lab for _, lab in ticks] == ["0s", "2s", "4s"]
    # 36 µs at +13.4 ms of a long trace: labels in ms, decimals to resolve the 5 µs step
    step, ticks = ruler_ticks(Viewport(13_400_000, 562.5, 64), origin_ns=0, min_cells=8)
    assert step == 5_000
    assert ticks == [
        (0, "13.400ms"),
        (9, "13.405ms"),
        (18, "13.410ms"),
        (27, "13.415ms"),
        (36, "13.420ms"),
        (44, "13.425ms"),
        (53, "13.430ms"),
        (62, "13.435ms"),
    ]


def test_parse_time():
    assert parse_time_ns("1.5ms") == 1_500_000
    assert parse_time_ns("250us") == 250_000
    assert parse_time_ns("250 µs") == 250_000
    assert parse_time_ns("3") == 3_000_000
    assert parse_time_ns("2s") == 2_000_000_000
    assert parse_time_ns("120ns") == 120
    with pytest.raises(ValueError):
        parse_time_ns("soon")
    with pytest.raises(ValueError):
        parse_time_ns("nan")


# --------------------------------------------------------------- bucketing
def _gpu_trace(spans):
    b = TraceBuilder()
    g = b.lane("0", "7", process_name="GPU 0", thread_name="stream 7", is_gpu=True, device=0, stream=7)
    for k, (s, e) in enumerate(spans):
        b.event(g, f"k{k}", s, e - s, Kind.KERNEL)
    return b.build()


def test_bucketing_coverage_halves_count_and_glyphs():
    t = _gpu_trace([(0, 100), (150, 400), (420, 430), (440, 450)])
    s = LaneIndex(t, 0).summarise(Viewport(0, 100.0, 5))
    assert s.coverage.tolist() == [1.0, 0.5, 1.0, 1.0, 0.2]
    assert s.left.tolist() == [1.0, 0.0, 1.0, 1.0, 0.4]
    assert s.right.tolist() == [1.0, 1.0, 1.0, 1.0, 0.0]
    assert s.count.tolist() == [1, 1, 1, 1, 2]
    assert s.cls.tolist() == [GlyphClass.KERNEL] * 5
    glyphs = [_sized(s.coverage[c], s.left[c], s.right[c], s.count[c]) for c in range(5)]
    assert glyphs == ["█", "▐", "█", "█", "▂"]


def _annotated(is_gpu: bool):
    """One lane: an annotation over [0, 1000) holding two kernels, [100, 120) and
    [300, 340), on a device lane or a CPU thread."""
    b = TraceBuilder()
    if is_gpu:
        g = b.lane("0", "7", process_name="GPU 0", thread_name="stream 7", is_gpu=True, device=0, stream=7)
        b.event(g, "decode_step", 0, 1000, Kind.GPU_ANNOTATION)
    else:
        g = b.lane("1", "1", thread_name="main")
        b.event(g, "decode_step", 0, 1000, Kind.ANNOTATION)
    b.event(g, "k0", 100, 20, Kind.KERNEL)
    b.event(g, "k1", 300, 40, Kind.KERNEL)
    return b.build()


def test_a_device_lanes_annotation_does_not_hide_its_kernels():
    """On a device lane a GPU annotation (a record_function range) holds the kernels
    it spans: a cell with GPU work shows the work and the work's own coverage (its
    density), by hand here: 20 of the first 200 ns, 40 of the second 200; a cell with
    none shows the annotation. The H200 decode capture's stream read as one line at
    full zoom, hiding its picket fence. A CPU thread keeps the old rule (the range,
    which its ops fill less than half of)."""
    vp = Viewport(0, 200.0, 5)
    s = LaneIndex(_annotated(True), 0).summarise(vp)
    assert s.cls.tolist() == [GlyphClass.KERNEL, GlyphClass.KERNEL] + [GlyphClass.ANNOTATION] * 3
    assert s.coverage.tolist() == [0.1, 0.2, 1.0, 1.0, 1.0]
    # the kernels lie in the cells' right halves: [100, 120) and [300, 340)
    assert s.left.tolist() == [0.0, 0.0, 1.0, 1.0, 1.0] and s.right.tolist() == [0.2, 0.4, 1.0, 1.0, 1.0]
    cpu = LaneIndex(_annotated(False), 0).summarise(vp)
    assert cpu.cls.tolist() == [GlyphClass.ANNOTATION] * 5
    assert cpu.coverage.tolist() == [1.0] * 5


def test_bucketing_nested_cpu_prefers_specific_class():
    b = TraceBuilder()
    c = b.lane("1", "1", thread_name="main")
    b.event(c, "ProfilerStep#1", 0, 1000, Kind.ANNOTATION)
    b.event(c, "aten::item", 100, 800, Kind.CPU_OP)
    b.event(c, "cudaStreamSynchronize", 200, 500, Kind.SYNC_CALL)
    t = b.build()
    li = LaneIndex(t, 0)
    s = li.summarise(Viewport(0, 250.0, 4))
    assert s.cls.tolist() == [GlyphClass.CPU_OP, GlyphClass.SYNC, GlyphClass.SYNC, GlyphClass.CPU_OP]
    assert s.coverage.tolist() == [1.0, 1.0, 1.0, 1.0]
    assert s.count.tolist() == [3, 3, 3, 2]
    assert [li.at(x) for x in (300, 800, 950, 1000, -5)] == [2, 1, 0, -1, -1]
    assert li.wide_events(Viewport(0, 100.0, 10), 6).tolist() == [0, 1]


def _reference_coverage(starts, ends, edges):
    out = []
    for a, b in zip(edges[:-1], edges[1:]):
        covered = np.zeros(int(b - a), dtype=bool)
        for s, e in zip(starts, ends):
            lo, hi = max(s, a), min(e, b)
            if hi > lo:
                covered[lo - a : hi - a] = True
        out.append(covered.sum() / max(b - a, 1))
    return np.array(out)


@pytest.mark.parametrize("seed", range(8))
def test_bucketing_matches_slow_reference(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    starts = np.sort(rng.integers(0, 2000, n))
    durs = rng.integers(0, 300, n)
    t = _gpu_trace(list(zip(starts.tolist(), (starts + durs).tolist())))
    vp = Viewport(int(rng.integers(-200, 500)), float(rng.integers(5, 80)), int(rng.integers(5, 40)))
    s = LaneIndex(t, 0).summarise(vp)
    e = vp.edges()
    ref = _reference_coverage(starts, starts + durs, e)
    np.testing.assert_allclose(s.coverage, ref, atol=1e-12)
    ref_count = [int(np.sum((starts < b) & (starts + durs > a))) for a, b in zip(e[:-1], e[1:])]
    assert s.count.tolist() == ref_count


# ----------------------------------------------------------------- rows, names
def test_rows_group_gpu_first_and_collapse():
    b = TraceBuilder()
    c = b.lane("1", "1", process_name="python3 [worker 0]", thread_name="[main]")
    s7 = b.lane("0", "7", process_name="GPU 0", thread_name="stream 7", is_gpu=True, device=0, stream=7)
    s3 = b.lane("0", "3", process_name="GPU 0", thread_name="stream 3", is_gpu=True, device=0, stream=3)
    for k, lane in enumerate((c, s7, s3)):  # lanes without events are not shown
        b.event(lane, f"e{k}", 1_000 * k, 500, Kind.CPU_OP if lane == c else Kind.KERNEL)
    t = b.build()
    rows = build_rows(t, set(), {0})
    assert [(r.kind, r.label) for r in rows] == [
        ("group", "▾ GPU 0"),
        ("idle", "idle gaps"),
        ("lane", "stream 3"),
        ("lane", "stream 7"),
        ("group", "▾ python3 [worker 0] (1)"),
        ("lane", "[main]"),
    ]
    rows = build_rows(t, {("gpu", 0, "0")}, {0})
    assert [(r.kind, r.label) for r in rows][:3] == [
        ("group", "▸ GPU 0"),
        ("idle", "idle gaps"),
        ("group", "▾ python3 [worker 0] (1)"),
    ]


def test_sanitize_keeps_markup_drops_escapes():
    assert sanitize("[bold red]x[/bold red] \\[e]") == "[bold red]x[/bold red] \\[e]"
    assert sanitize("a\x1b[31mb\x07c\u202e") == "a\\x1b[31mb\\x07c⟨U+202E⟩"
    assert sanitize("核x") == "核x"
    assert sanitize("abcdef", 3) == "ab…"


# ---------------------------------------------------------------- navigation
def _gaps(starts, ends, devices, causes):
    n = len(starts)
    z = lambda v, dt: np.full(n, v, dtype=dt)
    return Gaps(
        device=np.array(devices, np.int32),
        start_ns=np.array(starts, np.int64),
        end_ns=np.array(ends, np.int64),
        prev_op=z(-1, np.int64),
        next_op=z(-1, np.int64),
        launch=z(-1, np.int64),
        launch_lane=z(-1, np.int32),
        lateness_ns=z(0, np.int64),
        exposed_copy_ns=z(0, np.int64),
        cause=np.array(causes, np.int8),
        secondary=z(-1, np.int8),
        cause_share=z(1.0, float),
        secondary_share=z(0.0, float),
        group=z(-1, np.int32),
        episode=z(-1, np.int32),
    )


NAV_GAPS = _gaps([100, 500, 200], [150, 900, 260], [0, 0, 1], [Cause.HOST, Cause.SYNC, Cause.HOST])


def test_gap_navigation_time_order():
    nav = GapNavigator(NAV_GAPS)
    assert nav.step(None, 1, TIME, from_ns=0) == 0
    assert nav.step(0, 1, TIME) == 2
    assert nav.step(2, 1, TIME) == 1
    assert nav.step(1, 1, TIME) is None
    assert nav.step(1, -1, TIME) == 2
    assert nav.step(None, -1, TIME, from_ns=300) == 2
    assert nav.step(None, 1, TIME, from_ns=300) == 1


def test_gap_navigation_size_order_and_class():
    nav = GapNavigator(NAV_GAPS)
    assert nav.step(None, 1, SIZE) == 1
    assert nav.step(1, 1, SIZE) == 2
    assert nav.step(2, 1, SIZE) == 0
    assert nav.step(0, 1, SIZE) is None
    assert nav.step(None, 1, TIME, Cause.HOST, from_ns=0) == 0
    assert nav.step(0, 1, TIME, Cause.HOST) == 2
    assert nav.step(2, 1, TIME, Cause.HOST) is None
    assert nav.step(None, 1, TIME, Cause.SYNC, from_ns=0) == 1
    assert nav.step(None, 1, TIME, Cause.COPY, from_ns=0) is None
    assert nav.step(1, 1, SIZE, Cause.HOST) == 2
    # explicit size order from the diagnosis wins
    assert GapNavigator(NAV_GAPS, np.array([0, 2, 1])).step(None, 1, SIZE) == 0


def test_search_and_flow():
    b = TraceBuilder()
    c = b.lane("1", "1", thread_name="main")
    g = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    b.event(c, "bar Foo", 50, 10, Kind.CPU_OP)
    b.event(c, "cudaLaunchKernel", 100, 5, Kind.LAUNCH, correlation=11)
    b.event(c, "[rank0]:forward", 10, 5, Kind.ANNOTATION)
    b.event(g, "foo_kernel", 120, 30, Kind.KERNEL, correlation=11)
    t = b.build()
    s = NameSearch(t, "FOO")
    assert [t.name(i) for i in s.matches] == ["bar Foo", "foo_kernel"]
    first = s.step(None, 1, from_ns=0)
    assert t.name(first) == "bar Foo"
    assert t.name(s.step(first, 1)) == "foo_kernel"
    assert s.step(s.step(first, 1), 1) == first  # wraps
    assert len(NameSearch(t, "[rank0]")) == 1
    f = FlowIndex(t)
    launch = next(i for i in range(len(t)) if t.name(i) == "cudaLaunchKernel")
    kernel = next(i for i in range(len(t)) if t.name(i) == "foo_kernel")
    assert f.partner(kernel) == launch and f.partner(launch) == kernel
    assert f.partner(first) is None


def test_pure_modules_do_not_import_textual_or_rich():
    import subprocess
    import sys

    code = (
        "import sys, gapscope.tui.viewmodel, gapscope.tui.navigation, gapscope.tui.lanes_model; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('textual', 'rich')]; "
        "print(','.join(bad)); sys.exit(1 if bad else 0)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=str(__import__("pathlib").Path(__file__).parent.parent),
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_wide_events_found_deep_inside_a_long_parent():
    # a 1 s step with 10,000 nested 50 µs ops: zoomed into the end, both the step and
    # the visible ops are found (the step is far back in start order).
    b = TraceBuilder()
    c = b.lane("1", "1", thread_name="main")
    b.event(c, "ProfilerStep#1", 0, 1_000_000_000, Kind.ANNOTATION)
    for k in range(10_000):
        b.event(c, f"op{k}", k * 100_000, 50_000, Kind.CPU_OP)
    t = b.build()
    li = LaneIndex(t, 0)
    vp = Viewport(999_800_000, 2_000.0, 100)  # 200 µs at the end: op9998 and op9999
    got = [t.name(li.offset + j) for j in li.wide_events(vp, 6)]
    assert got == ["ProfilerStep#1", "op9998", "op9999"]
    # levels built ahead (the background warm-up) give the same answers
    warm = LaneIndex(t, 0)
    warm.warm_levels()
    assert sorted(warm._levels) == list(range(24))
    for npc in (2_000.0, 50_000.0, 2e6):
        v = Viewport(999_800_000 - int(50 * npc), npc, 100)
        assert warm.wide_events(v, 6).tolist() == li.wide_events(v, 6).tolist()
    assert [t.name(warm.offset + j) for j in warm.wide_events(vp, 6)] == got


def test_fit_is_exact_on_epoch_timestamps():
    t0 = 1_672_876_799_194_019_123
    vp = Viewport.fit(t0, t0 + 1_000_000, 100)
    assert vp.start_ns == t0 and vp.ns_per_cell == 10_000.0
    assert vp.zoom(2, t0 + 500_000) == Viewport(t0 + 250_000, 5_000.0, 100)
