"""``x`` marks the selected gap's CPU-side evidence and the status line shows the step
projected without it, as ``gapscope report --what-if`` does."""

from __future__ import annotations

import asyncio

from gapscope import sample_traces
from gapscope.analysis import diagnose
from gapscope.parsers import load
from gapscope.tui.factory import make_app
from gapscope.tui.what_if import next_mark, projection_text
from tests.test_tui_app import wait_ready


def test_marks_follow_the_evidence_and_the_projection_is_the_reports():
    trace = load(sample_traces.path("decode_step.txt"))
    d = diagnose(trace)
    assert next_mark(d, 0, ()) == "tensor.item()"
    assert next_mark(d, 2, ()) == "logging callback"
    text = projection_text(d, ("tensor.item()", "logging callback"))
    assert text.startswith("what-if: 0.600 ms/step (1.75x), 1,667 tok/s without `tensor.item()`")


def test_x_in_the_viewer():
    trace = load(sample_traces.path("decode_step.txt"))
    d = diagnose(trace)

    async def run():
        app = make_app(trace, diagnosis=d)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await wait_ready(pilot)
            await pilot.press("g", "number_sign", "0", "enter", "x")
            await pilot.pause()
            first = screen.message
            await pilot.press("g", "number_sign", "2", "enter", "x")
            await pilot.pause()
            second = screen.message
            await pilot.press("X")
            await pilot.pause()
            return first, second, screen.what_if_marks

    first, second, marks = asyncio.run(run())
    assert first == "what-if: 0.890 ms/step (1.18x), 1,124 tok/s without `tensor.item()`"
    assert second.startswith("what-if: 0.600 ms/step (1.75x)") and second.endswith("`logging callback`")
    assert marks == ()
