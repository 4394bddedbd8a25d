"""The viewer's state and messages (issue 45): one ``Session`` written by the app from
its workers' messages, the app's ``phase`` (loading → preview → diagnosing →
diagnosed, or loading → failed) deciding what is shown, no screen polling on a timer;
and the thresholds of ``gapscope report`` on the viewer's command line reaching its
diagnosis (``gapscope.tui.session``, ``gapscope.tui.messages``, ``gapscope.tui.cmd``)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter

from gapscope.analysis import diagnose
from gapscope.tui.factory import make_app
from gapscope.tui.loading import LoadScreen
from gapscope.tui.screen import TraceScreen
from gapscope.tui.session import Phase, ViewOptions
from tests.test_tui_app import small_trace, wait_ready


async def _until(pilot, cond, seconds: float = 20.0) -> None:
    for _ in range(int(seconds / 0.02)):
        if cond():
            return
        await pilot.pause(0.02)
    assert cond()


def test_phases_follow_the_workers_messages_and_no_screen_polls():
    """A gated load hands a preview over, then the whole trace; a gated diagnosis
    then gives its result: the phase goes loading → preview → diagnosing →
    diagnosed, each message is posted once, and no screen has a timer."""
    trace, preview = small_trace(), small_trace()
    handed: list = []
    load_started, load_release = threading.Event(), threading.Event()
    diag_started, diag_release = threading.Event(), threading.Event()

    def loader(path):
        load_started.set()
        load_release.wait(30)
        return trace

    def gated_diagnose(t):
        diag_started.set()
        diag_release.wait(30)
        return diagnose(t)

    app = make_app("gated.json", ViewOptions(loader=loader, diagnose=gated_diagnose, preview=handed.append))
    posted: list[str] = []
    post = app.post_message
    app.post_message = lambda m: (posted.append(type(m).__name__), post(m))[1]  # type: ignore[method-assign]
    seen: list[Phase] = []

    async def run():
        async with app.run_test(size=(120, 40)) as pilot:
            app.watch(app, "phase", lambda phase: seen.append(phase), init=False)
            await asyncio.to_thread(load_started.wait, 10)
            await pilot.pause()
            assert app.phase is Phase.LOADING and isinstance(app.screen, LoadScreen)
            screens = [app.screen]
            handed[0](preview)  # the load's device preview
            await _until(pilot, lambda: app.phase is Phase.PREVIEW and isinstance(app.screen, TraceScreen))
            shown = app.screen
            await pilot.pause()
            assert shown.previewing and shown.trace is preview and app.session.preview is preview
            screens.append(shown)
            load_release.set()
            await _until(pilot, lambda: app.phase is Phase.DIAGNOSING and app.screen is app.trace_screen)
            await asyncio.to_thread(diag_started.wait, 10)
            whole = app.screen
            assert whole.trace is trace and whole.diagnosing and app.session.diagnosis is None
            assert app.session.preview is None  # let go of with its screen
            screens.append(whole)
            diag_release.set()
            await wait_ready(pilot)
            assert app.phase is Phase.DIAGNOSED and whole.diagnosis is app.session.diagnosis
            # small_trace's kernels run 50 µs every 100 µs: 9 gaps of 50 µs
            assert len(whole.diagnosis.gaps) == 9 and whole.message.startswith("9 idle gaps found")
            return screens

    screens = asyncio.run(run())
    assert seen == [Phase.PREVIEW, Phase.DIAGNOSING, Phase.DIAGNOSED]
    # what the screens show comes by message: none of them asks on a timer
    assert [len(s._timers) for s in screens] == [0, 0, 0]
    counts = Counter(posted)
    assert (counts["PreviewLoaded"], counts["TraceLoaded"], counts["Diagnosed"], counts["LoadFailed"]) == (1, 1, 1, 0)


def test_a_bad_file_fails_the_load_with_its_error_and_no_traceback(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [ {"ph": "X", ')
    app = make_app(bad)

    async def run():
        async with app.run_test(size=(80, 24)) as pilot:
            # (the load may fail before a watcher set here would see the change)
            await _until(pilot, lambda: app.phase is Phase.FAILED)
            await pilot.pause()

    asyncio.run(run())  # an exception in the app would be raised here
    assert app.phase is Phase.FAILED and app.return_code == 2
    assert app.trace_screen is None and app.preview_screen is None
    error = app.session.error
    assert error == app.error and str(bad) in error
    assert "\n" not in error and "Traceback" not in error


def _gap_trace(tmp_path) -> str:
    """One GPU stream: kernels k0 [0, 10) µs, k1 [15, 25) µs and k2 [125, 135) µs, so
    gaps of 5 µs (at 10 µs) and 100 µs (at 25 µs)."""
    kernel = {"ph": "X", "cat": "kernel", "pid": 0, "tid": 7, "dur": 10, "args": {"device": 0, "stream": 7}}
    events = [{"ph": "X", "cat": "cpu_op", "name": "step", "pid": 1, "tid": 1, "ts": 0, "dur": 140}]
    events += [{**kernel, "name": f"k{i}", "ts": ts} for i, ts in enumerate((0, 15, 125))]
    path = tmp_path / "gaps.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return str(path)


def test_the_viewers_gap_threshold_options_reach_its_diagnosis(tmp_path, monkeypatch, capsys):
    """``gapscope TRACE --min-gap-us 10`` (the option of ``gapscope report``): the
    5 µs gap is absent from the viewer's diagnosis, and from the gaps drawn before
    it; with the default (2 µs) or ``--min-gap-us 1`` it is there."""
    from gapscope.tui import cmd as view_cmd
    from gapscope.tui import factory

    path = _gap_trace(tmp_path)
    built: list = []
    real = factory.make_app

    class Closed:  # the app the command runs: built for real, run below
        error = None
        cancelled = False
        return_code = 0

        def run(self):
            return 0

    def capture(p, options=None, diagnosis=None):
        built.append(real(p, options, diagnosis))
        return Closed()

    monkeypatch.setattr(factory, "make_app", capture)
    for extra in (["--min-gap-us", "10"], [], ["--min-gap-us", "1"]):
        assert view_cmd.main([path, *extra]) == 0

    async def gaps_of(app):
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await wait_ready(pilot)
            t0 = int(screen.trace.extent_ns[0])
            g = screen.diagnosis.gaps
            early = app.options.early_gaps(screen.trace)  # as the preview's (tui.factory.default_early_gaps)
            return (
                screen.diagnosis.params.min_gap_ns,
                [(int(s) - t0, int(e) - t0) for s, e in zip(g.start_ns, g.end_ns)],
                len(early),
            )

    got = [asyncio.run(gaps_of(app)) for app in built]
    assert got[0] == (10_000, [(25_000, 125_000)], 1)
    assert got[1] == (2_000, [(10_000, 15_000), (25_000, 125_000)], 2)
    assert got[2] == (1_000, [(10_000, 15_000), (25_000, 125_000)], 2)
    # a bad threshold: one line in the house form, before the UI starts
    capsys.readouterr()
    assert view_cmd.main([path, "--min-gap-us", "-1"]) == 2
    assert capsys.readouterr().err == "gapscope: error: --min-gap-us must be a finite number >= 0, got -1.0\n"
    assert "--min-gap-us X" in view_cmd._parser().format_help()


def test_a_rank_opened_from_the_overview_gets_its_thresholds(monkeypatch):
    """``gapscope DIR --min-gap-us 10``: the rank picked in the overview opens in the
    viewer with the thresholds the overview was found with, not the defaults."""
    from gapscope.analysis.types import Params
    from gapscope.tui import factory
    from gapscope.tui.ranks.cmd import pick_and_view

    got: list = []

    class Closed:
        error = None

        def run(self):
            return 0

    def capture(p, options=None, diagnosis=None):
        got.append((p, options.params))
        return Closed()

    monkeypatch.setattr(factory, "make_app", capture)
    picks = iter([3, None])  # rank 3, then quit the overview
    doc = {"ranks": [{"rank": 3, "path": "r3.json"}]}
    params = Params(min_gap_ns=10_000)
    assert pick_and_view(doc, overview=lambda d, r: next(picks), params=params) == 0
    assert got == [("r3.json", params)]


def test_a_loader_that_exits_fails_the_load_in_one_line():
    """A loader that raises ``SystemExit`` (a library calling ``sys.exit`` in the load's
    thread) fails the load with one line; it was not caught, the worker died without a
    message, and the loading screen stayed up for good."""

    def loader(path):
        raise SystemExit(3)

    app = make_app("exits.json", ViewOptions(loader=loader))

    async def run():
        async with app.run_test(size=(80, 24)) as pilot:
            await _until(pilot, lambda: app.phase is not Phase.LOADING, seconds=5)
            await pilot.pause()

    asyncio.run(run())
    assert app.phase is Phase.FAILED and app.return_code == 2
    assert app.error == "exits.json: cannot load (SystemExit: 3)"


def test_a_diagnosis_that_exits_leaves_the_trace_with_its_error():
    """A diagnosis that raises ``SystemExit`` ends as a failed diagnosis (the trace shown,
    the error said), not a worker dead without a message and 'diagnosing' for good."""

    def exits(trace):
        raise SystemExit(4)

    app = make_app("ok.json", ViewOptions(loader=lambda p: small_trace(), diagnose=exits))

    async def run():
        async with app.run_test(size=(80, 24)) as pilot:
            await _until(pilot, lambda: app.phase is Phase.DIAGNOSED, seconds=5)
            await pilot.pause()

    asyncio.run(run())
    assert app.session.error == "diagnosis failed: SystemExit: 4"
    assert app.session.diagnosis is None and app.session.trace is not None
