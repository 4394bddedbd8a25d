"""The swimlanes' strip cache (``gapscope.tui.swimlanes``): strips kept across view
changes are the strips the pure painter draws for the state shown."""

from __future__ import annotations

import asyncio

from gapscope import sample_traces
from gapscope.analysis import diagnose
from gapscope.parsers import load
from gapscope.tui import lanes_draw
from gapscope.tui.factory import make_app

from .test_tui_app import wait_ready


def test_strips_kept_across_moves_are_the_ones_drawn_afresh():
    """The swimlanes' strip cache is keyed by the view, not by a counter bumped on
    every move: after zooming in and out, panning back and forth, moving the cursor and
    the selected row and jumping gaps, every line the widget returns equals the line
    the pure painter draws for the widget's state now (``lanes_draw.render_line``)."""
    trace = load(sample_traces.path())
    diag = diagnose(trace)

    async def run():
        app = make_app(trace, diagnosis=diag)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await wait_ready(pilot)
            lanes = screen.lanes
            mismatches, checks, hits = [], 0, 0
            for key in ("plus", "minus", "l", "h", "right", "n", "plus", "minus", "j", "k", "n", "N", "l", "h"):
                await pilot.press(key)
                await pilot.pause()
                view = lanes.lane_view()
                for y in range(lanes.size.height):
                    cached = len(lanes._cache)
                    got = lanes.render_line(y)
                    hits += len(lanes._cache) == cached
                    want = lanes_draw.render_line(view, y)
                    checks += 1
                    if list(got) != list(want):
                        mismatches.append((key, y))
            return mismatches, checks, hits

    mismatches, checks, hits = asyncio.run(run())
    assert mismatches == []
    assert checks > 100 and hits > 0  # some lines did come from the cache
