"""Pilot tests of opening a trace in the viewer: the loading screen (its progress,
Escape, bad files), then the lanes drawn before the diagnosis ends, and the diagnosis
arriving, failing or missing (``gapscope.tui.loading``, ``TraceScreen.set_diagnosis``)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from gapscope.analysis.findings import findings
from gapscope.tui.factory import make_app
from gapscope.tui.loading import LoadScreen
from gapscope.tui.panel import GapPanel
from gapscope.tui.screen import TraceScreen
from gapscope.tui.session import ViewOptions
from tests.test_tui_app import small_trace, wait_ready


def test_escape_cancels_a_load():
    started, release = threading.Event(), threading.Event()
    trace = small_trace()

    def slow_loader(path):
        started.set()
        release.wait(10)
        return trace

    async def run():
        app = make_app("slow.json", ViewOptions(loader=slow_loader))
        async with app.run_test(size=(80, 24)) as pilot:
            await asyncio.to_thread(started.wait, 10)
            await pilot.pause()
            assert isinstance(app.screen, LoadScreen)
            worker = app.load_worker
            await pilot.press("escape")
            release.set()
            return app, worker

    app, worker = asyncio.run(run())
    assert worker.is_cancelled
    assert app.cancelled and app.return_code == 1
    assert app.trace_screen is None


def _idle_row_text(screen) -> str:
    from gapscope.tui.lanes_draw import render_row

    lanes = screen.lanes
    i = next(i for i, r in enumerate(lanes.rows) if r.kind == "idle")
    return render_row(lanes.lane_view(), i).text


def _gated_diagnose():
    """A diagnose that waits for ``release`` (set by the test), and ``started``."""
    from gapscope.analysis import diagnose

    started, release = threading.Event(), threading.Event()

    def gated(trace):
        started.set()
        release.wait(30)
        return diagnose(trace)

    return gated, started, release


def test_lanes_are_drawn_and_browsable_before_the_diagnosis_ends():
    trace = small_trace()
    gated, started, release = _gated_diagnose()

    async def run():
        app = make_app(trace, ViewOptions(diagnose=gated))
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(100):
                await pilot.pause()
                if isinstance(app.screen, TraceScreen) and started.is_set():
                    break
            screen = app.screen
            before = {
                "diagnosing": screen.diagnosing,
                "header": screen.header_text(120).plain,
                "panel": screen.query_one("#panel").plain,
                "detail": str(screen.query_one("#detail").render()),
                "rows": [r.kind for r in screen.lanes.rows],
                "idle_row": _idle_row_text(screen),
            }
            await pilot.press("plus")  # zoom works meanwhile
            zoomed = screen.lanes.viewport
            await pilot.press("n")  # a gap key says to wait, and selects nothing
            before["after_n"] = (str(screen.query_one("#detail").render()), screen.lanes.selected_gap)
            release.set()
            screen = await wait_ready(pilot)
            after = {
                "header": screen.header_text(120).plain,
                "detail": str(screen.query_one("#detail").render()),
                "viewport": screen.lanes.viewport,
                "lane_gaps": screen.lanes.gaps,
                "idle_row": _idle_row_text(screen),
            }
            await pilot.press("n")
            await pilot.pause()
            after["n"] = screen.lanes.selected_gap
            after["panel"] = screen.query_one("#panel").plain
            return before, zoomed, after

    before, zoomed, after = asyncio.run(run())
    assert before["diagnosing"] is True
    assert "finding gaps…" in before["header"] and "gaps │" not in before["header"]
    assert before["panel"].startswith("Finding the idle gaps and their causes…")
    assert "finding the idle gaps and their causes" in before["detail"]
    assert before["rows"].count("lane") == 2 and "idle" in before["rows"]
    assert "still finding the gaps" in before["after_n"][0] and before["after_n"][1] is None
    assert "finding gaps…" in before["idle_row"] and "░" not in before["idle_row"]
    # the 10 kernels of 50 µs every 100 µs leave 9 gaps of 50 µs, from 70 µs on
    assert "9 gaps" in after["header"] and "finding" not in after["header"]
    assert "9 idle gaps found" in after["detail"]
    assert after["viewport"] == zoomed  # the view the user chose stays
    assert after["lane_gaps"] is not None and len(after["lane_gaps"]) == 9
    assert "finding" not in after["idle_row"] and "░" in after["idle_row"]
    assert after["n"] is not None and int(after["lane_gaps"].start_ns[after["n"]]) == 70_000
    assert after["panel"].startswith(f"Gap #{after['n']}  GPU 0")


def test_a_failing_diagnosis_after_the_first_paint_leaves_the_lanes():
    trace = small_trace()

    def broken(trace):
        raise RuntimeError("boom")

    async def run():
        app = make_app(trace, ViewOptions(diagnose=broken))
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await wait_ready(pilot)
            detail = str(screen.query_one("#detail").render())
            await pilot.press("l")  # any key clears the status line; the failure stays said
            await pilot.press("n")
            return (
                screen.diagnosis,
                screen.header_text(120).plain,
                detail,
                str(screen.query_one("#detail").render()),
                screen.query_one("#panel").plain,
                _idle_row_text(screen),
            )

    diagnosis, header, detail, after_n, panel, idle_row = asyncio.run(run())
    assert diagnosis is None
    assert "diagnosis failed: RuntimeError: boom" in detail
    assert header == "gapscope small.json │ no diagnosis │ span 0.970 ms │ 1 GPU"
    assert "diagnosis failed: RuntimeError: boom" in after_n and "no gaps" not in after_n
    assert panel.startswith("No diagnosis.\ndiagnosis failed: RuntimeError: boom\n")
    assert idle_row.strip() == "idle gaps"  # nothing drawn, nothing pending


def test_no_diagnosis_is_not_said_to_be_a_trace_without_gaps():
    trace = small_trace()

    async def run():
        app = make_app(trace, ViewOptions(diagnose=lambda t: None))
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await wait_ready(pilot)
            detail = str(screen.query_one("#detail").render())
            await pilot.press("n")
            return screen.header_text(120).plain, detail, str(screen.query_one("#detail").render())

    header, detail, after_n = asyncio.run(run())
    assert "no diagnosis" in header
    for line in (detail, after_n):
        assert "no diagnosis: the gaps and their causes cannot be shown" in line and "no idle" not in line


def test_zoom_levels_are_built_once_when_the_diagnosis_ends_before_the_first_paint(monkeypatch):
    from gapscope.tui import swimlanes

    monkeypatch.setattr(swimlanes, "WARM_MIN_EVENTS", 1)
    runs: list[list[int]] = []
    monkeypatch.setattr(swimlanes.Swimlanes, "_warm", lambda self, lanes: runs.append(lanes))
    trace = small_trace()

    async def run():
        app = make_app(trace, ViewOptions(diagnose=lambda t: None))  # done at once
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_ready(pilot)
            for _ in range(5):
                await pilot.pause()

    asyncio.run(run())
    assert len(runs) == 1 and sorted(runs[0]) == [0, 1]


def test_quit_while_diagnosing_does_not_wait_for_it():
    """The app has quit while the diagnosis still waits for ``release`` (up to 30 s):
    quitting did not wait for it (the order of the two, not a time)."""
    trace = small_trace()
    gated, started, release = _gated_diagnose()
    returned = threading.Event()

    def diagnose(t):
        try:
            return gated(t)
        finally:
            returned.set()

    async def run():
        app = make_app(trace, ViewOptions(diagnose=diagnose))
        async with app.run_test(size=(80, 24)) as pilot:
            await asyncio.to_thread(started.wait, 10)
            await pilot.pause()
            assert isinstance(app.screen, TraceScreen) and app.screen.diagnosing
            await pilot.press("q")
        return app

    app = asyncio.run(run())
    still_waiting = not returned.is_set()
    release.set()
    assert still_waiting  # quit before the diagnosis returned
    assert app.return_code in (0, None) and not app.cancelled


def test_loading_screen_shows_the_share_decoded_then_the_assembly(monkeypatch, tmp_path):
    from textual.widgets import ProgressBar

    from gapscope.parsers import detect

    state: dict = {"share": None}
    monkeypatch.setattr(detect, "load_progress", lambda: state["share"])
    started, release = threading.Event(), threading.Event()
    trace = small_trace()
    path = tmp_path / "big.json"
    path.write_bytes(b"[" + b" " * 3000 + b"]")

    def slow_loader(p):
        started.set()
        release.wait(10)
        return trace

    async def run():
        app = make_app(path, ViewOptions(loader=slow_loader))
        async with app.run_test(size=(80, 24)) as pilot:
            await asyncio.to_thread(started.wait, 10)
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, LoadScreen)
            label = screen.query_one("#load-stage")
            bar = screen.query_one(ProgressBar)
            out = []
            # the load's worker posts each figure (``LoadProgress``): nothing here asks
            for share, said in ((None, "reading"), (0.45, "45%"), (1.0, "100%"), (None, "building")):
                state["share"] = share
                for _ in range(500):
                    await pilot.pause(0.01)
                    if said in str(label.render()):
                        break
                out.append((str(label.render()), bar.total, bar.progress))
            release.set()
            await wait_ready(pilot)
            return out

    out = asyncio.run(run())
    assert out[0][0].startswith("reading and parsing 2.9 KiB…") and out[0][1] is None  # no end known yet
    assert out[1][0].startswith("reading and parsing 2.9 KiB… 45%") and (out[1][1], out[1][2]) == (100, 45)
    assert out[2][0].startswith("reading and parsing 2.9 KiB… 100%")
    assert out[3][0].startswith("building the trace…") and out[3][2] == 100


def test_bad_file_exits_2_with_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [ {"ph": "X", ')

    async def run():
        app = make_app(bad)
        async with app.run_test(size=(80, 24)) as pilot:
            for _ in range(50):
                await pilot.pause()
                if app.error:
                    break
            return app

    app = asyncio.run(run())
    assert app.return_code == 2
    assert app.error and "\n" not in app.error and str(bad) in app.error


def test_view_cmd_prints_error_line(monkeypatch, capsys, tmp_path):
    from gapscope.parsers.preview import EarlyLoad
    from gapscope.tui import cmd as view_cmd

    class Stub:
        error = "x.json:1:2: not JSON (hint)"
        cancelled = False
        return_code = 2

        def run(self):
            return 2

    from gapscope.tui import factory

    got: dict = {}

    def make_app(p, options):
        got["loader"], got["preview"], got["params"] = options.loader, options.preview, options.params
        got["diagnose"], got["ready"] = options.diagnose, options.ready_diagnosis
        return Stub()

    monkeypatch.setattr(factory, "make_app", make_app)
    f = tmp_path / "x.json"
    f.write_text("{")
    # the head looks like JSON, so the app starts; its load error is printed after it closes
    assert view_cmd.main([str(f)]) == 2
    # the load was begun before the viewer was built: the app's loader is that load
    assert isinstance(got["loader"], EarlyLoad) and got["loader"].path == str(f)
    assert got["preview"] == got["loader"].on_preview  # and its device preview is handed to the viewer
    assert got["loader"].preview_wanted
    # the diagnosis is begun by that load's thread once it has the trace
    assert isinstance(got["diagnose"], factory.DiagnosisAhead) and got["ready"] == got["diagnose"].ready
    assert capsys.readouterr().err == "gapscope: error: x.json:1:2: not JSON (hint)\n"
    monkeypatch.setenv("GAPSCOPE_NO_PREVIEW", "1")  # causes first: no device preview
    view_cmd.main([str(f)])
    assert not got["loader"].preview_wanted
    capsys.readouterr()
    missing = tmp_path / "missing.json"
    assert view_cmd.main([str(missing)]) == 2
    assert capsys.readouterr().err == f"gapscope: error: {missing}: cannot read: No such file or directory\n"


@pytest.mark.parametrize("sort", [False, True])
def test_the_found_message_fits_the_gap_selected_and_the_order(sort):
    """When the causes come while a gap is selected (walked from the early gaps), the
    status line says what ``n`` does from there, in the order set: not "s then n to
    the largest" when ``s`` was pressed already, or when a gap is already selected."""
    from gapscope.analysis.gaps import interior_gaps

    trace = small_trace()
    gated, started, release = _gated_diagnose()

    async def run():
        app = make_app(trace, ViewOptions(diagnose=gated, early_gaps=lambda t: interior_gaps(t, 1_000)))
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(100):
                await pilot.pause()
                if isinstance(app.screen, TraceScreen) and started.is_set() and app.screen.early is not None:
                    break
            screen = app.screen
            if sort:
                await pilot.press("s")
            await pilot.press("n")
            await pilot.pause()
            assert screen.lanes.selected_gap is not None
            release.set()
            screen = await wait_ready(pilot)
            return str(screen.query_one("#detail").render())

    detail = asyncio.run(run())
    if sort:
        assert "9 idle gaps found, largest first: n goes to the next smaller" in detail
    else:
        assert "9 idle gaps found: n goes to the next in time, s orders them largest first" in detail
    assert "s then n" not in detail


def test_with_no_gap_selected_the_card_says_what_n_does_in_the_order_set():
    """With no gap selected the card tells how to reach the gaps; once ``s`` has set
    largest first it says that ``n`` goes to the largest, not "s then n" (following
    that would set time order again), and ``s`` again brings the time-order hint back."""
    trace = small_trace()

    async def run():
        app = make_app(trace)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await wait_ready(pilot)
            assert screen.lanes.selected_gap is None
            panel = screen.query_one(GapPanel)
            got = [panel.plain]
            await pilot.press("s")
            await pilot.pause()
            got.append(panel.plain)
            await pilot.press("s")
            await pilot.pause()
            got.append(panel.plain)
            await pilot.press("s", "n")
            await pilot.pause()
            return got, screen.lanes.selected_gap, int(findings(screen.diagnosis).top.positions[0])

    (before, largest, again), selected, top = asyncio.run(run())
    # the first screen shows the verdict and findings (issue 47); n largest first goes
    # to the top finding's largest gap
    assert "Press n for the next gap, or s then n for the top finding's largest." in before
    assert before.startswith("Verdict\n")
    assert (
        "Press n for the top finding's largest gap (gaps are ordered largest first; s orders them in time)." in largest
    )
    assert "s then n" not in largest
    assert again == before
    assert selected == top  # what the hint said n does
