"""The causes are drawn before the findings (issue 45, "Speed of the viewer"): the
diagnosis worker posts ``Diagnosed`` as soon as the diagnosis is in, computes the
findings, then posts ``FindingsReady``; meanwhile the header and the panel say the
findings are being computed and nothing on the UI thread computes them."""

from __future__ import annotations

import asyncio
import threading

from gapscope import sample_traces
from gapscope.analysis.findings import findings
from gapscope.tui import workers
from gapscope.tui.factory import make_app
from gapscope.tui.findings_view import verdict_badge
from gapscope.tui.messages import Diagnosed, FindingsReady
from gapscope.tui.panel import FINDINGS_PENDING, GapPanel
from gapscope.tui.screen import FINDINGS_KEY_MESSAGE, TraceScreen


def _record_posts(app) -> list[str]:
    """The names of the ``Diagnosed`` and ``FindingsReady`` messages posted to ``app``,
    in order (filled as they are posted)."""
    posted: list[str] = []
    post = app.post_message

    def recording(message):
        if isinstance(message, (Diagnosed, FindingsReady)):
            posted.append(type(message).__name__)
        return post(message)

    app.post_message = recording
    return posted


def test_causes_drawn_while_the_findings_are_computed(monkeypatch):
    release, entered = threading.Event(), threading.Event()
    real = workers.findings_of
    calls: list[str] = []

    def blocked(diagnosis):
        calls.append(threading.current_thread().name)
        entered.set()
        assert release.wait(30), "the test never released the findings"
        return real(diagnosis)

    monkeypatch.setattr(workers, "findings_of", blocked)
    app = make_app(sample_traces.path())
    posted = _record_posts(app)

    async def run():
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(1000):
                screen = app.screen
                if entered.is_set() and isinstance(screen, TraceScreen) and not screen.diagnosing:
                    break
                await pilot.pause(0.02)
            await pilot.pause()
            screen = app.screen
            d = screen.diagnosis
            during = {
                "posted": list(posted),
                "lanes_have_causes": screen.lanes.diagnosis is d and screen.lanes.gaps is d.gaps,
                "gaps": len(d.gaps),
                "pending": screen.findings_pending,
                "kept": "findings" in d.derived,
                "header": screen.header_text(120).plain,
                "panel": screen.query_one(GapPanel).plain,
            }
            await pilot.press("f")
            during["f_says"] = screen.message
            release.set()
            for _ in range(1000):
                if not screen.findings_pending:
                    break
                await pilot.pause(0.02)
            await app.workers.wait_for_complete()
            await pilot.pause()
            after = {
                "posted": list(posted),
                "header": screen.header_text(120).plain,
                "panel": screen.query_one(GapPanel).plain,
                "badge": verdict_badge(findings(d)),
            }
            await pilot.press("f")
            after["f_says"] = screen.message
            return during, after

    during, after = asyncio.run(run())
    assert calls == ["gapscope-findings"]  # once, in the worker's thread, not the UI's
    # the causes are drawn, the findings not yet computed (the stub holds them)
    assert during["posted"] == ["Diagnosed"]
    assert during["lanes_have_causes"] and during["gaps"] > 0
    assert during["pending"] and not during["kept"]
    assert "│ findings… │" in during["header"]
    assert during["panel"].startswith(FINDINGS_PENDING)
    assert during["f_says"] == FINDINGS_KEY_MESSAGE
    # then the first screen tells the story: the verdict in the header, the overview
    assert after["posted"] == ["Diagnosed", "FindingsReady"]
    assert after["badge"] and f"│ {after['badge']} │" in after["header"]
    assert "findings…" not in after["header"]
    assert after["panel"].startswith("Verdict\n")
    assert FINDINGS_PENDING not in after["panel"]
    assert after["f_says"].startswith("findings: j/k choose")


def test_a_diagnosis_read_beside_the_load_is_taken_first(monkeypatch):
    """``ViewOptions.ready_diagnosis`` (a cached trace: the diagnosis cache's entry,
    ``gapscope.tui.factory.default_ready_diagnosis``), asked first by the worker, off the UI thread: its
    causes and verdict are drawn; nothing is diagnosed and no early gaps are found."""
    from gapscope.analysis import diagnose
    from gapscope.parsers import load
    from gapscope.tui.session import Phase, ViewOptions

    path = sample_traces.path()
    trace = load(str(path))
    d = diagnose(trace)
    findings(d)  # as the cache's entry holds them
    asked: list[str] = []

    def ready(t):
        asked.append(
            "ready off the UI thread" if threading.current_thread() is not threading.main_thread() else "ready"
        )
        return d if t is trace else None

    options = ViewOptions(
        loader=lambda p: trace,
        ready_diagnosis=ready,
        diagnose=lambda t: asked.append("diagnose"),
        early_gaps=lambda t: asked.append("early_gaps"),
    )
    app = make_app(path, options)
    posted = _record_posts(app)

    async def run():
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(1000):
                if app.phase is Phase.DIAGNOSED and "FindingsReady" in posted:
                    break
                await pilot.pause(0.02)
            await app.workers.wait_for_complete()
            await pilot.pause()
            screen = app.screen
            return {
                "diagnosis": screen.diagnosis is d and screen.lanes.diagnosis is d and screen.lanes.gaps is d.gaps,
                "pending": screen.findings_pending,
                "header": screen.header_text(120).plain,
                "panel": screen.query_one(GapPanel).plain,
            }

    got = asyncio.run(run())
    assert got["diagnosis"]
    assert asked == ["ready off the UI thread"]  # the worker's; no early gaps, no diagnosis
    assert posted == ["Diagnosed", "FindingsReady"]
    assert not got["pending"] and got["panel"].startswith("Verdict\n")
    assert f"│ {verdict_badge(findings(d))} │" in got["header"]
