"""Pilot tests of the ``g`` and ``/`` prompt under fast typing: keys typed ahead of it
(one read, a paste) act as if typed one by one, and the lane keys are off while it is
open (``PromptInput``, ``GapscopeApp.on_key``)."""

from __future__ import annotations

import asyncio

import pytest

from gapscope.tui.factory import make_app
from tests.test_tui_app import small_trace, wait_ready


def test_keys_typed_ahead_of_the_prompt_go_into_it():
    """``g#5`` and Enter read in one go (a fast typist, a paste): every key is queued to
    the lanes before ``g`` opens the prompt; they must land in it, not run the gap
    bindings (``#`` previous launch gap, ``5`` next dependency gap)."""
    from textual import events

    trace = small_trace()

    async def run():
        app = make_app(trace)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await wait_ready(pilot)
            for key, ch in (("g", "g"), ("number_sign", "#"), ("5", "5"), ("enter", None)):
                app.post_message(events.Key(key, ch))
            await pilot.pause()
            await pilot.pause()
            return screen.lanes.selected_gap, screen.has_class("-prompt"), app.focused

    gap, prompt_open, focused = asyncio.run(run())
    assert gap == 5 and not prompt_open
    assert focused is not None and focused.id == "lanes"


def test_footer_shows_no_lane_keys_while_the_prompt_is_open():
    from textual.widgets._footer import FooterKey

    trace = small_trace()

    async def run():
        app = make_app(trace)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await wait_ready(pilot)

            def shown():
                return [k.description for k in app.screen.query(FooterKey)]

            out = [shown()]
            await pilot.press("g")
            await pilot.pause()
            out.append(shown())
            await pilot.press("plus", "escape")  # "+" goes into the prompt, not the zoom
            await pilot.pause()
            out.append(shown())
            return out, screen.lanes.viewport

    (before, during, after), _ = asyncio.run(run())
    assert "zoom" in before and "next" in before
    assert "zoom" not in during and "next" not in during and "palette" in during
    assert after == before


@pytest.mark.parametrize(
    "burst, gap, prompt_open",
    [
        ("g#2\rg#4\r", 4, False),  # the second prompt, not the first one's leftovers
        ("g#5\rn", 6, False),  # n after Enter moves on from gap 5
        ("g1\x1bn", 0, False),  # Escape typed ahead closes the prompt; n then goes to gap 0
        ("g#3\x1b", None, False),  # nothing submitted
    ],
)
def test_bursts_of_keys_through_the_prompt_act_as_typed_one_by_one(burst, gap, prompt_open):
    from textual import events

    names = {"#": "number_sign", "\r": "enter", "\x1b": "escape"}
    trace = small_trace()

    async def run():
        app = make_app(trace)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await wait_ready(pilot)
            for ch in burst:
                key = names.get(ch, ch)
                app.post_message(events.Key(key, ch if ch.isprintable() else None))
            for _ in range(3):
                await pilot.pause()
            return screen.lanes.selected_gap, screen.has_class("-prompt"), app.focused.id, screen.message

    got_gap, got_open, focused, message = asyncio.run(run())
    assert (got_gap, got_open, focused) == (gap, prompt_open, "lanes"), message
    assert "no gap #" not in message
