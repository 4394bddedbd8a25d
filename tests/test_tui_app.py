"""Pilot tests of the viewer: the app built by ``gapscope.tui.factory.make_app`` is driven with
keys and its state compared with the diagnosis and the trace (no sleeps: we wait on
workers and on processed messages)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from gapscope.analysis.card import card_for_gap
from gapscope.analysis.types import Cause
from gapscope.parsers import load
from gapscope.parsers.builder import TraceBuilder
from gapscope.parsers.model import Kind
from gapscope.tui.factory import make_app
from gapscope.tui.screen import PAN_PAGE, PAN_STEP, ZOOM_STEP, Handover, TraceScreen
from gapscope.tui.session import Session, ViewOptions


async def wait_ready(pilot) -> TraceScreen:
    """Process messages until the trace screen is up with its diagnosis and its
    findings (``FindingsReady`` after ``Diagnosed``; the load and diagnosis workers
    have finished)."""
    app = pilot.app
    for _ in range(200):
        try:
            await app.workers.wait_for_complete()
        except Exception:  # a cancelled or failed worker: the checks below say which
            pass
        await pilot.pause()
        if isinstance(app.screen, TraceScreen) and not app.screen.diagnosing and not app.screen.findings_pending:
            await pilot.pause()
            return app.screen
        if app.error or app.cancelled:
            break
    raise AssertionError(f"trace screen never shown (error={app.error!r})")


def _diagnose(trace):
    from gapscope.analysis import diagnose

    return diagnose(trace)


def _time_order(gaps):
    return np.lexsort((np.asarray(gaps.device), np.asarray(gaps.start_ns)))


# ------------------------------------------------------------ gaps vs diagnosis
def test_next_gap_walks_diagnosis_gaps(corpus):
    path = corpus / "hta" / "step_based_trace_2543932.json.gz"
    diag = _diagnose(load(path))
    g = diag.gaps
    assert len(g) >= 3
    order = _time_order(g)
    size_order = [int(k) for k in diag.order_by_size()]
    # s keeps the selected gap (order[1], after n n n N); n goes to the gap after it, largest first
    largest = size_order[size_order.index(int(order[1])) + 1]

    async def run():
        app = make_app(path)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await wait_ready(pilot)
            lanes = screen.lanes
            sg = lanes.gaps
            seen = []
            for _ in range(3):
                await pilot.press("n")
                k = lanes.selected_gap
                seen.append((int(sg.start_ns[k]), int(sg.end_ns[k] - sg.start_ns[k]), int(sg.cause[k])))
            await pilot.press("N")
            back = lanes.selected_gap
            await pilot.press("s", "n")
            big = lanes.selected_gap
            detail = str(screen.query_one("#detail").render())
            return (
                seen,
                (int(sg.start_ns[back]),),
                (int(sg.start_ns[big]), int(sg.end_ns[big] - sg.start_ns[big]), int(sg.cause[big])),
                detail,
            )

    seen, back, big, detail = asyncio.run(run())
    expect = [(int(g.start_ns[k]), int(g.end_ns[k] - g.start_ns[k]), int(g.cause[k])) for k in order[:3]]
    assert seen == expect
    assert back == (int(g.start_ns[order[1]]),)
    assert big == (int(g.start_ns[largest]), int(g.end_ns[largest] - g.start_ns[largest]), int(g.cause[largest]))
    assert Cause(big[2]).label in detail


def test_next_gap_of_class_on_decode_sample():
    from gapscope import sample_traces

    diag = _diagnose(load(sample_traces.path()))
    g = diag.gaps

    async def run():
        app = make_app(sample_traces.path())
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await wait_ready(pilot)
            out = {}
            for key, cause in (("4", Cause.HOST), ("1", Cause.SYNC), ("3", Cause.LAUNCH)):
                await pilot.press("0")  # fit all ("f" shows the findings since issue 47)
                screen.lanes.selected_gap = None
                screen.lanes.cursor_ns = screen.trace.extent_ns[0]
                await pilot.press(key)
                out[cause] = screen.lanes.selected_gap
            return out

    got = asyncio.run(run())
    for cause, k in got.items():
        expect = [i for i in _time_order(g) if int(g.cause[i]) == int(cause)]
        assert k == (int(expect[0]) if expect else None)


# ------------------------------------------------------------ zoom and pan
def small_trace():
    b = TraceBuilder(path="small.json")
    c = b.lane("1", "1", process_name="python3", thread_name="main")
    gl = b.lane("0", "7", process_name="GPU 0", thread_name="stream 7", is_gpu=True, device=0, stream=7)
    for k in range(10):
        t = k * 100_000
        b.event(c, "cudaLaunchKernel", t, 5_000, Kind.LAUNCH, correlation=k + 1)
        b.event(gl, f"gemm_{k}", t + 20_000, 50_000, Kind.KERNEL, correlation=k + 1)
    b.event(c, "[rank0]:forward", 0, 950_000, Kind.ANNOTATION)
    return b.build()


def test_zoom_and_pan_change_window_by_stated_factors():
    trace = small_trace()

    async def run():
        app = make_app(trace)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await wait_ready(pilot)
            lanes = screen.lanes
            out = [lanes.viewport]
            for key in ("plus", "i", "minus", "l", "h", "L", "H"):
                await pilot.press(key)
                out.append(lanes.viewport)
            cursor_cells = lanes.viewport.cell_of(lanes.cursor_ns)
            return out, lanes.cursor_ns, cursor_cells

    vps, cursor, _ = asyncio.run(run())
    v0, zin, zin2, zout, pr, pl, prr, pll = vps
    assert zin.span_ns == pytest.approx(v0.span_ns / ZOOM_STEP)
    assert zin2.span_ns == pytest.approx(v0.span_ns / ZOOM_STEP**2)
    assert zout.span_ns == pytest.approx(zin.span_ns)
    span = zout.span_ns
    assert pr.start_ns - zout.start_ns == round(PAN_STEP * span)
    assert pl.start_ns == zout.start_ns
    assert prr.start_ns - pl.start_ns == round(PAN_PAGE * span)
    assert pll.start_ns == pl.start_ns


def test_zoom_keeps_the_cursor_cell():
    trace = small_trace()

    async def run():
        app = make_app(trace)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await wait_ready(pilot)
            lanes = screen.lanes
            lanes.go_to(trace.extent_ns[0] + 300_000)
            before = lanes.viewport.cell_of(lanes.cursor_ns)
            await pilot.press("plus")
            return before, lanes.viewport.cell_of(lanes.cursor_ns), lanes.cursor_ns

    before, after, cursor = asyncio.run(run())
    assert before == after and cursor == 300_000


# ------------------------------------------------------------ search and flows
async def _search(pilot, text):
    await pilot.press("slash")
    for ch in text:
        await pilot.press(
            ch
            if ch.isalnum()
            else {"[": "left_square_bracket", "]": "right_square_bracket", ":": "colon", "_": "underscore"}.get(ch, ch)
        )
    await pilot.press("enter")


def test_search_and_launch_kernel_jump_on_builder_trace():
    trace = small_trace()

    async def run():
        app = make_app(trace)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await wait_ready(pilot)
            lanes = screen.lanes
            await _search(pilot, "gemm_3")
            found = lanes.selected_event
            await pilot.press("percent_sign")
            launch = lanes.selected_event
            await pilot.press("J")
            back = lanes.selected_event
            return found, launch, back

    found, launch, back = asyncio.run(run())
    assert trace.name(found) == "gemm_3"
    assert trace.name(launch) == "cudaLaunchKernel" and int(trace.correlation[launch]) == 4
    assert int(trace.start_ns[launch]) == 300_000
    assert back == found


def test_search_finds_markup_name_verbatim(bugs):
    path = bugs / "B23_markup_in_names.json"

    async def run():
        app = make_app(path)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await wait_ready(pilot)
            await _search(pilot, "[rank0]")
            ev = screen.lanes.selected_event
            return screen.trace.name(ev), len(screen.search), str(screen.query_one("#detail").render())

    name, n, detail = asyncio.run(run())
    assert name == "[rank0]:forward" and n == 1
    assert "[rank0]:forward" in detail


def test_launch_kernel_jump_on_corpus_trace(corpus):
    path = corpus / "hta" / "step_based_trace_2543932.json.gz"
    trace = load(path)
    kernels = np.flatnonzero((trace.kind == int(Kind.KERNEL)) & np.isin(np.arange(len(trace)), trace.flow_dst))
    k = int(kernels[len(kernels) // 2])
    launch = int(trace.flow_src[np.flatnonzero(trace.flow_dst == k)[0]])
    assert int(trace.correlation[launch]) == int(trace.correlation[k])

    async def run():
        app = make_app(path)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await wait_ready(pilot)
            screen.lanes.select_event(k)
            await pilot.press("J")
            first = screen.lanes.selected_event
            await pilot.press("J")
            return first, screen.lanes.selected_event

    first, second = asyncio.run(run())
    assert first == launch
    assert second == k


# ------------------------------------------------------------ layout and help
def test_panel_toggle_and_help_from_bindings():
    trace = small_trace()

    async def run():
        app = make_app(trace)
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await wait_ready(pilot)
            panel = screen.query_one("#panel")
            modes = [(screen.panel_mode, bool(panel.display), panel.compact, panel.size.height)]
            lane_rows = len(screen.lanes.rows)
            for _ in range(3):
                await pilot.press("p")
                await pilot.pause()
                modes.append((screen.panel_mode, bool(panel.display), panel.compact, panel.size.height))
                if screen.panel_mode == "hidden":  # the rows it left may stay blank: said why
                    assert screen.message == "card hidden (p shows it)"
            await pilot.press("question_mark")
            await pilot.pause()
            from gapscope.tui.help import HelpScreen, help_text

            help_shown = isinstance(app.screen, HelpScreen)
            text = str(help_text(screen))
            await pilot.press("escape")
            return modes, help_shown, text, isinstance(app.screen, TraceScreen), lane_rows

    modes, help_shown, text, back, lane_rows = asyncio.run(run())
    # narrow: compact card → expanded (the 21-row main area less 7 lane rows and the
    # border) → hidden → compact. The compact card takes the rows the lanes leave empty
    # (ruler + lane rows + one spare), at least 6 and at most the main area less 7 rows.
    assert [m[:3] for m in modes] == [
        ("compact", True, True),
        ("expanded", True, False),
        ("hidden", False, False),
        ("compact", True, True),
    ]
    compact_outer = max(6, min(21 - 7, 21 - (lane_rows + 2)))
    assert modes[0][3] == compact_outer - 1 and modes[3][3] == compact_outer - 1
    assert modes[1][3] == 21 - 7 - 1
    assert help_shown and back
    assert "next gap" in text and "kernel↔launch" in text and "zoom in" in text


def test_q_quits():
    async def run():
        app = make_app(small_trace())
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_ready(pilot)
            await pilot.press("q")
            await pilot.pause()
            return app

    app = asyncio.run(run())
    assert app.return_code == 0 and not app.is_running


def test_zoom_to_step_on_decode_sample():
    from gapscope import sample_traces

    diag = _diagnose(load(sample_traces.path()))
    assert diag.steps is not None

    async def run():
        app = make_app(sample_traces.path())
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await wait_ready(pilot)
            await pilot.press("Z")
            return screen.lanes.viewport

    vp = asyncio.run(run())
    s, e = int(diag.steps.start_ns[0]), int(diag.steps.end_ns[0])
    assert vp.start_ns <= s and vp.end_ns >= e
    assert vp.span_ns == pytest.approx((e - s) * 1.04, rel=1e-6)


def test_click_selects_gap_and_wheel_zooms():
    from gapscope import sample_traces

    diag = _diagnose(load(sample_traces.path()))
    big = int(diag.order_by_size()[0])

    async def run():
        app = make_app(sample_traces.path())
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await wait_ready(pilot)
            lanes = screen.lanes
            row = next(i for i, r in enumerate(lanes.rows) if r.kind == "idle")
            mid = (int(diag.gaps.start_ns[big]) + int(diag.gaps.end_ns[big])) // 2
            x = lanes.label_width + lanes.viewport.cell_of(mid)
            await pilot.click("#lanes", offset=(x, row + 1 - lanes.top_row))
            await pilot.pause()
            picked = lanes.selected_gap
            span0 = lanes.viewport.span_ns
            from textual.events import MouseScrollUp

            lanes.post_message(MouseScrollUp(lanes, x, 2, 0, 0, 0, False, False, False))
            await pilot.pause()
            return picked, span0, lanes.viewport.span_ns

    picked, span0, span1 = asyncio.run(run())
    assert picked == big
    assert span1 == pytest.approx(span0 / 1.25)


def test_collapse_and_expand_group():
    trace = small_trace()

    async def run():
        app = make_app(trace)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await wait_ready(pilot)
            lanes = screen.lanes
            before = [(r.kind, r.label) for r in lanes.rows]
            lanes.selected_row = 0  # the GPU 0 group header
            await pilot.press("enter")
            collapsed = [(r.kind, r.label) for r in lanes.rows]
            await pilot.press("enter")
            return before, collapsed, [(r.kind, r.label) for r in lanes.rows]

    before, collapsed, after = asyncio.run(run())
    assert before == [
        ("group", "▾ GPU 0"),
        ("idle", "idle gaps"),
        ("lane", "stream 7"),
        ("group", "▾ python3 (1)"),
        ("lane", "main"),
    ]
    # issue 18 item 4: a collapsed GPU group keeps its gap row
    assert collapsed == [("group", "▸ GPU 0"), ("idle", "idle gaps"), ("group", "▾ python3 (1)"), ("lane", "main")]
    assert after == before


def test_go_to_time_and_match_stepping():
    trace = small_trace()

    async def run():
        app = make_app(trace)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await wait_ready(pilot)
            lanes = screen.lanes
            await pilot.press("g", "0", "full_stop", "5", "m", "s", "enter")
            cursor = lanes.cursor_ns
            await _search(pilot, "gemm_")
            first = lanes.selected_event
            await pilot.press("m")
            second = lanes.selected_event
            await pilot.press("M")
            back = lanes.selected_event
            return cursor, first, second, back, screen.message

    cursor, first, second, back, message = asyncio.run(run())
    assert cursor == trace.extent_ns[0] + 500_000
    # the search starts at the cursor (500 µs): gemm_5 starts at 520 µs
    assert trace.name(first) == "gemm_5" and trace.name(second) == "gemm_6" and back == first
    assert message == "match 6/10 for 'gemm_'"


def test_keymap_remaps_a_binding_by_id():
    from gapscope import sample_traces

    diag = _diagnose(load(sample_traces.path()))
    first = int(_time_order(diag.gaps)[0])

    async def run():
        app = make_app(sample_traces.path(), ViewOptions(keymap={"gap.next": "x"}))
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await wait_ready(pilot)
            await pilot.press("n")
            after_n = screen.lanes.selected_gap
            await pilot.press("x")
            return after_n, screen.lanes.selected_gap

    after_n, after_x = asyncio.run(run())
    assert after_n is None and after_x == first


def test_panel_shows_card_of_largest_gap():
    from gapscope import sample_traces

    diag = _diagnose(load(sample_traces.path()))
    big = int(diag.order_by_size()[0])
    card = card_for_gap(diag, big)

    async def run():
        app = make_app(sample_traces.path())
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await wait_ready(pilot)
            await pilot.press("s", "n")
            await pilot.pause()
            return screen.query_one("#panel").plain

    text = asyncio.run(run())
    assert f"Smell: {card.smell}" in text
    assert f"Why: {card.why}" in text
    assert f"First experiment: {card.first_experiment}" in text
    assert f"Forbidden: {card.forbidden_step}" in text
    for ev in card.evidence:
        assert ev.name in text
    assert "[x] 3. Rank the white space" in text


def test_hidden_causes_draw_neutral_idle_gaps():
    from gapscope import sample_traces

    async def run():
        app = make_app(sample_traces.path())
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await wait_ready(pilot)
            lanes = screen.lanes
            row = next(i for i, r in enumerate(lanes.rows) if r.kind == "idle")
            shown = lanes.render_line(row + 1 - lanes.top_row).text
            lanes.set_show_causes(False)
            hidden = lanes.render_line(row + 1 - lanes.top_row).text
            return shown, hidden

    shown, hidden = asyncio.run(run())
    # the host gap (460 µs, 28 cells) has room for "host 0.460 ms" and a cell of margin
    # each side; the sync gap (258 µs, 14 cells) one short of it, so its letter
    assert "░host 0.460 ms░" in shown and "░S░" in shown
    assert "░idle 0.460 ms░" in hidden and "░S░" not in hidden and "░U░" not in hidden
    assert "host" not in hidden and "sync" not in hidden


def test_gaps_are_drawn_and_walked_before_their_causes(monkeypatch):
    """While the diagnosis runs, the trace screen draws the gaps between each GPU's
    first and last kernel (``interior_gaps``), without causes: ``n`` walks them, a
    class key says the causes are coming, and the gap selected meanwhile stays
    selected when the causes come. small_trace's kernels run 50 µs every 100 µs
    from 20 µs: 9 gaps of 50 µs from 70 µs, and no steps, so no gap at an edge."""
    import threading

    import gapscope.tui.factory as factory
    from gapscope.tui.panel import GapPanel
    from gapscope.tui.screen import EARLY_KEY_MESSAGE, EARLY_MESSAGE

    release = threading.Event()
    real = factory.default_diagnose
    monkeypatch.setattr(factory, "default_diagnose", lambda t, p=None: (release.wait(30), real(t, p))[1])
    app = make_app(small_trace())

    async def run():
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(500):
                if isinstance(app.screen, TraceScreen) and app.screen.early is not None:
                    break
                await pilot.pause(0.02)
            screen = app.screen
            assert screen.diagnosing and screen.diagnosis is None and len(screen.early) == 9
            assert screen.message == EARLY_MESSAGE
            assert "│ 9 gaps, causes… │" in screen.header_text(120).plain
            await pilot.press("n", "n")
            lanes = screen.lanes
            assert lanes.selected_gap == 1 and screen.selected_gap_key() == (0, 170_000)
            assert "gap GPU 0 50.0 µs idle (its cause follows)" in screen.detail_text().plain
            card = screen.query_one(GapPanel).plain
            assert card.startswith("Gap on GPU 0\n50.0 µs at 0.170 ms\nCause: being found…\n")
            assert "Previous kernel: gemm_1\nNext op: gemm_2\n" in card
            await pilot.press("1")
            assert screen.message == EARLY_KEY_MESSAGE
            release.set()
            for _ in range(500):
                if screen.diagnosis is not None:
                    break
                await pilot.pause(0.02)
            await pilot.pause()
            assert screen.early is None and lanes.gaps is screen.diagnosis.gaps and len(lanes.gaps) == 9
            assert screen.selected_gap_key() == (0, 170_000)
            assert screen.query_one(GapPanel).plain.startswith(f"Gap #{lanes.selected_gap}  GPU 0\n")

    asyncio.run(run())


def test_an_injected_diagnosis_gets_no_early_gaps():
    """The early gaps are the default diagnosis's: with another diagnosis (a test's,
    a plugin's) none are drawn before it."""
    from gapscope.analysis import diagnose

    app = make_app(small_trace(), ViewOptions(diagnose=lambda t: diagnose(t)))
    assert app.options.early_gaps is None
    assert make_app(small_trace()).options.early_gaps is not None


def test_early_card_names_every_kernel_around_the_gap():
    """Two streams' kernels end together at a gap's start, and two start together at
    its end: the early card names them all (``Gaps.prev_op``/``next_op`` name one, a
    tie), and says they end or start together; names are rendered literally."""
    from gapscope.analysis.gaps import interior_gaps
    from gapscope.tui.panel import early_card_text

    b = TraceBuilder(path="ties.json")
    s7 = b.lane("0", "7", process_name="GPU 0", thread_name="stream 7", is_gpu=True, device=0, stream=7)
    s8 = b.lane("0", "8", process_name="GPU 0", thread_name="stream 8", is_gpu=True, device=0, stream=8)
    b.event(s7, "a\x1b[31m", 0, 10_000, Kind.KERNEL)
    b.event(s8, "b", 5_000, 5_000, Kind.KERNEL)
    b.event(s7, "c", 30_000, 5_000, Kind.KERNEL)
    b.event(s8, "d", 30_000, 8_000, Kind.KERNEL)
    t = b.build()
    g = interior_gaps(t)
    assert list(zip(g.start_ns.tolist(), g.end_ns.tolist())) == [(10_000, 30_000)]
    card = early_card_text(t, g, 0, preview=False).plain
    assert card == (
        "Gap on GPU 0\n20.0 µs at 10.0 µs\nCause: being found…\n"
        "Previous kernels: a\\x1b[31m, b (2 end together)\nNext ops: c, d (2 start together)\n"
    )


def test_the_key_bar_is_drawn_from_a_screens_first_frame(monkeypatch):
    """Textual's footer waits for the screen's bindings signal, sent after the first
    refresh (the swap from a device preview drew an empty key row for 25-230 ms);
    ours composes the screen's keys at once: with the signal never coming, Textual's
    shows no key and ours shows them."""
    from textual.app import App
    from textual.widgets import Footer
    from textual.widgets._footer import FooterKey

    from gapscope.tui.footer import KeyFooter

    monkeypatch.setattr(Footer, "bindings_changed", lambda self, screen: None)

    class One(App):
        BINDINGS = [("n", "next", "next gap"), ("q", "quit", "quit")]

        def __init__(self, footer) -> None:
            super().__init__()
            self.footer = footer

        def compose(self):
            yield self.footer

    async def keys(footer) -> list[str]:
        app = One(footer)
        async with app.run_test(size=(80, 10)) as pilot:
            await pilot.pause()
            return [k.key for k in app.query(FooterKey)]

    assert asyncio.run(keys(Footer())) == []
    assert asyncio.run(keys(KeyFooter()))[:2] == ["n", "q"]
    assert asyncio.run(keys(KeyFooter(at_once=False))) == []  # as Textual's: after the signal


def test_a_first_trace_screen_draws_its_keys_a_frame_after_its_lanes(monkeypatch):
    """The keys, a widget each, cost a first frame 50-100 ms at 200x50: a trace's first
    screen composes them when Textual's bindings signal comes (after the first
    refresh), a screen replacing a preview at once (the preview showed them: no empty
    key row in between). Either way the keys are there once the screen settles."""
    from textual.widgets import Footer
    from textual.widgets._footer import FooterKey

    from gapscope import sample_traces

    trace = load(sample_traces.path())

    async def keys_at(replaces_preview: bool, signal: bool) -> int:
        if not signal:
            monkeypatch.setattr(Footer, "bindings_changed", lambda self, screen: None)
        app = make_app(trace)
        async with app.run_test(size=(120, 30)) as pilot:
            await pilot.pause()
            app.push_screen(TraceScreen(Session.of(trace), Handover() if replaces_preview else None))
            await pilot.pause()
            await pilot.pause()
            return len(app.screen.query(FooterKey))

    assert asyncio.run(keys_at(True, signal=False)) > 5
    assert asyncio.run(keys_at(False, signal=False)) == 0
    monkeypatch.undo()
    assert asyncio.run(keys_at(False, signal=True)) > 5
