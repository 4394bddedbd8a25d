"""Viewer defects a newcomer found on the bundled sample at 80x24 and 200x50: the
cursor keys step exactly one cell and stay on the trace, negative offsets, the view
after hiding the panel, the compact card's "more" marker, status messages at 80
columns, and labels of adjacent events. Expected values computed by hand."""

from __future__ import annotations

import asyncio

from gapscope import sample_traces
from gapscope.analysis import diagnose
from gapscope.parsers import load
from gapscope.tui.factory import make_app
from gapscope.tui.viewmodel import Viewport

from .test_tui_app import wait_ready


def _sample():
    trace = load(sample_traces.path())
    return trace, diagnose(trace)


# ------------------------------------------------------------ 1. cursor steps
def test_cell_of_inverts_time_of_on_rounded_edges():
    # fit(0, 1.05 ms, 64 cells, 1 %): ns_per_cell = 1_071_000 / 64 = 16734.375,
    # start = 525_000 - 535_500 = -10_500; time_of(1) = -10_500 + 16_734 = 6_234,
    # which floor(16_734 / 16_734.375) put in cell 0.
    vp = Viewport.fit(0, 1_050_000, 64, margin=0.01)
    assert (vp.start_ns, vp.ns_per_cell) == (-10_500, 16734.375)
    assert vp.time_of(1) == 6_234 and vp.cell_of(6_234) == 1
    assert vp.cell_of(6_233) == 0
    assert vp.time_of(3) == 39_703 and vp.cell_of(39_703) == 3 and vp.cell_of(39_702) == 2
    assert all(vp.cell_of(vp.time_of(k)) == k for k in range(-200, 300))
    assert all(vp.cell_of(vp.time_of(k + 1) - 1) == k for k in range(-200, 300))


def test_cursor_steps_one_cell_and_stays_on_the_trace_at_80x24():
    trace, diag = _sample()
    t0, t1 = trace.extent_ns
    assert (t0, t1) == (0, 1_050_000)

    async def run():
        app = make_app(trace, diagnosis=diag)
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await wait_ready(pilot)
            lanes = screen.lanes
            got = [lanes.cursor_ns]
            for _ in range(3):
                await pilot.press("full_stop")
                got.append(lanes.cursor_ns)
            back = []
            for _ in range(5):  # 3 cells back to the start, then it stays there
                await pilot.press("comma")
                back.append(lanes.cursor_ns)
            # far right: the cursor reaches the end, the view follows, never past it
            seen_out = 0
            for _ in range(80):
                await pilot.press("full_stop")
                seen_out += not lanes.viewport.contains(lanes.cursor_ns)
            end = lanes.cursor_ns
            await pilot.press("full_stop")
            end2 = lanes.cursor_ns
            return got, back, seen_out, end, end2, lanes.viewport.width

    got, back, seen_out, end, end2, width = asyncio.run(run())
    assert width == 64
    assert got == [0, 6_234, 22_969, 39_703]
    assert back == [22_969, 6_234, 0, 0, 0]
    assert seen_out == 0
    assert end == end2 == 1_050_000


# ------------------------------------------------------------ 2. signed offsets
def test_offsets_print_one_sign():
    # the viewer's positions (status line, card) are gapscope.units.fmt_offset's
    from gapscope.units import fmt_offset

    assert fmt_offset(-43_000) == "-43.0 µs"
    assert fmt_offset(590_000) == "0.590 ms"
    assert fmt_offset(0) == "0 ns"
    assert fmt_offset(-1_500_000) == "-1.500 ms"


def test_pan_left_at_the_fit_view_keeps_the_cursor_at_the_start():
    # Before: h at the fit view moved the clamped view 0.04 of its span left and the
    # cursor with it, printed "@+-43.0µs".
    trace, diag = _sample()

    async def run():
        app = make_app(trace, diagnosis=diag)
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await wait_ready(pilot)
            await pilot.press("h")
            return screen.lanes.cursor_ns, screen.detail_text().plain

    cursor, detail = asyncio.run(run())
    assert cursor == 0
    assert detail.startswith("@0 ns ") and "+-" not in detail and "--" not in detail


# ------------------------------------------------------------ 3. view after `p`
def test_hiding_the_panel_keeps_the_time_window_at_200x50():
    # Fit over 132 cells (200 - 44 panel - 24 labels): 1_071_000 / 132 ns per cell.
    # After `.` (the view is now the user's) `p` widens the lanes to 176 cells: before,
    # the zoom was kept and the view ran to 1.4175 ms (1.43 ms shown) on a 1.05 ms trace.
    trace, diag = _sample()

    async def run():
        app = make_app(trace, diagnosis=diag)
        async with app.run_test(size=(200, 50)) as pilot:
            screen = await wait_ready(pilot)
            lanes = screen.lanes
            await pilot.press("full_stop")
            before = lanes.viewport
            await pilot.press("p")
            await pilot.pause()
            hidden = lanes.viewport
            await pilot.press("p")
            await pilot.pause()
            return before, hidden, lanes.viewport

    before, hidden, shown = asyncio.run(run())
    assert before == Viewport(-10_500, 1_071_000 / 132, 132)
    assert hidden == Viewport(-10_500, 1_071_000 / 176, 176)
    assert hidden.end_ns == 1_060_500
    assert shown == before


def test_resized_keeps_start_and_span():
    vp = Viewport(1_000, 100.0, 50)  # 5 µs
    assert vp.resized(100) == Viewport(1_000, 50.0, 100)
    assert vp.resized(50) is vp
    assert Viewport(0, 1.0, 10).resized(20) == Viewport(0, 1.0, 20)  # 1 ns per cell at most


# ------------------------------------------------------------ 5. status messages
def test_messages_fit_80_columns_and_go_with_the_next_key():
    trace, diag = _sample()
    assert len(trace.warnings) == 0

    async def run():
        app = make_app(trace, diagnosis=diag)
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await wait_ready(pilot)
            detail = screen.query_one("#detail")
            out = []
            await pilot.press("4", "4")  # host gap #2, then "the only host gap"
            await pilot.pause()
            out.append(detail.render().plain)
            await pilot.press("k")
            await pilot.pause()
            out.append(screen.message)
            for key in ("w", "k", "w", "enter", "w", "space"):
                await pilot.press(key)
                await pilot.pause()
                out.append(screen.message)
            out.append(detail.render().plain)
            return out

    out = asyncio.run(run())
    assert out[0] == "@0.590 ms gap #2 │ the only host gap (1 of 1, in time)"
    warn = "no loader warnings: nothing was skipped or repaired"
    assert out[1:8] == ["", warn, "", warn, "", warn, ""]
    assert "│" not in out[8] and "loader" not in out[8]


def test_a_long_message_is_cut_with_an_ellipsis():
    from rich.text import Text

    from gapscope.tui.panel import DetailLine

    async def run():
        from textual.app import App

        class One(App):
            def compose(self):
                yield DetailLine(id="d")

        app = One()
        async with app.run_test(size=(20, 3)) as pilot:
            d = app.query_one("#d", DetailLine)
            d.show(Text("0123456789abcdefghijKLMN"))
            await pilot.pause()
            return d.render().plain

    assert asyncio.run(run()) == "0123456789abcdefghi…"


# ------------------------------------------------------------ 6. adjacent names
def _named_trace():
    from gapscope.parsers.builder import TraceBuilder
    from gapscope.parsers.model import Kind

    b = TraceBuilder(path="names.json")
    c = b.lane("1", "1", process_name="python3", thread_name="main")
    b.event(c, "hipDeviceSynchronize", 0, 10_000, Kind.SYNC_CALL)  # cells 0-9
    b.event(c, "nn.Module: ultra", 10_000, 20_000, Kind.CPU_OP)  # cells 10-29
    b.event(c, "nn.Module: Parent", 40_000, 60_000, Kind.CPU_OP)  # cells 40-79
    b.event(c, "ultra_child", 50_000, 20_000, Kind.CPU_OP)  # cells 50-69, depth 1
    return b.build()


def test_adjacent_and_nested_names_keep_a_separator():
    trace = _named_trace()

    async def run():
        app = make_app(trace)
        async with app.run_test(size=(100, 12)) as pilot:
            screen = await wait_ready(pilot)
            lanes = screen.lanes
            lanes.set_viewport(Viewport(0, 1_000.0, 80))  # 1 µs per cell
            await pilot.pause()
            row = next(i for i, r in enumerate(lanes.rows) if r.kind == "lane")
            strip = lanes.render_line(row - lanes.top_row + 1)
            return lanes.viewport, lanes.label_width, strip.text

    vp, label_w, text = asyncio.run(run())
    assert vp == Viewport(0, 1_000.0, 80) and label_w == 20
    line = text[label_w:]
    assert line[0:10] == "hipDevic…~"
    assert line[10:30] == "nn.Module: ultra" + "=" * 4
    assert line[30:40] == " " * 10
    assert line[40:50] == "nn.Modul…="
    assert line[50:70] == "ultra_child" + "=" * 9
    assert line[70:80] == "=" * 10


# ------------------------------------------------------------ 4. compact card
def test_compact_card_marks_left_out_lines_at_80x24():
    # Gap #0 (sync 258 µs): the compact card has room for the summary, smell, why,
    # first experiment and forbidden step; the proof is left out, and the last line
    # ("...only makes that wait start sooner.") had no mark saying so.
    trace, diag = _sample()

    async def run():
        app = make_app(trace, diagnosis=diag)
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await wait_ready(pilot)
            await pilot.press("n")
            await pilot.pause()
            panel = screen.query_one("#panel")
            rows = [panel.render_line(y).text.rstrip() for y in range(panel.size.height)]
            return screen.lanes.selected_gap, screen.panel_mode, rows, panel.compact_plain

    gap, mode, rows, full = asyncio.run(run())
    assert gap == 0 and mode == "compact"
    shown = [r for r in rows if r]
    assert "Proof:" in full and not any("Proof:" in r for r in shown)
    assert shown[-1].endswith("…")  # the cut line says so
