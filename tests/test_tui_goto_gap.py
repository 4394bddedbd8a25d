"""``g #N`` selects gap N: the number the card header, the status line and the report's
gap tables show, so a ticket can point at a gap."""

from __future__ import annotations

import asyncio

from gapscope import sample_traces
from gapscope.analysis import diagnose
from gapscope.parsers import load
from gapscope.report import cmd as report_cmd
from gapscope.tui.factory import make_app
from tests.test_tui_app import wait_ready


def test_g_hash_number_selects_that_gap_and_the_report_uses_the_same_number(capsys):
    path = sample_traces.path("decode_step.txt")
    trace = load(path)
    diag = diagnose(trace)

    async def run():
        app = make_app(trace, diagnosis=diag)
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await wait_ready(pilot)
            await pilot.press("g", "number_sign", "2", "enter")
            await pilot.pause()
            picked = screen.lanes.selected_gap
            await pilot.press("g", "number_sign", "9", "enter")
            await pilot.pause()
            return picked, screen.lanes.selected_gap, screen.message

    picked, after, message = asyncio.run(run())
    assert picked == 2 and int(diag.gaps.dur_ns[2]) == 460_000
    assert after == 2 and "no gap #9" in message  # a bad number keeps the selection
    assert report_cmd.run([str(path), "--width", "100"]) == 0
    table = capsys.readouterr().out.split("Largest idle gaps")[1]
    first = table.splitlines()[2].split()
    assert first[0] == "#2" and first[3:5] == ["0.460", "ms"]  # the largest gap is the viewer's #2
