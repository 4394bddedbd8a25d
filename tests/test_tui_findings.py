"""The viewer's first screen leads with the findings (issue 47): the header names the
verdict's class and share, ``s n`` goes to the top finding's largest gap (never an edge
gap), ``f`` then ``j``/Enter walk a finding's positions with ``n``/``N``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from gapscope.analysis import diagnose
from gapscope.analysis.findings import findings
from gapscope.parsers import load
from gapscope.parsers.model import Kind
from gapscope.tui.factory import make_app
from gapscope.tui.panel import GapPanel

from .test_tui_app import wait_ready

GPU = Path(__file__).resolve().parent.parent / "sample_traces" / "gpu"
CAPTURES = [
    "h200_decode",
    "h200_decode_eager",
    "h200_decode_graph",
    "h200_picket_fence",
    "h200_host_island",
    "h200_copy_on_path",
    "h200_sync_cliff",
]


def _edges(trace, diag) -> np.ndarray:
    """bool per gap: idle before the budget device's first kernel or after its last,
    from the raw events."""
    dev = diag.budget.device
    lanes = [k for k, ln in enumerate(trace.lanes) if ln.is_gpu and ln.device == dev]
    m = (trace.kind == int(Kind.KERNEL)) & np.isin(trace.lane, lanes)
    first = int(trace.start_ns[m].min())
    last = int((trace.start_ns[m] + trace.dur_ns[m]).max())
    g = diag.gaps
    return (g.device == dev) & ((g.end_ns <= first) | (g.start_ns >= last))


def test_first_screen_names_launch_and_its_share_at_80x24():
    trace = load(GPU / "h200_decode.pt.trace.json.gz")
    diag = diagnose(trace)

    async def run():
        app = make_app(trace, diagnosis=diag)
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await wait_ready(pilot)
            panel = screen.query_one(GapPanel)
            return screen.header_text(80).plain, panel.compact_plain

    header, card = asyncio.run(run())
    top = findings(diag).top
    assert top.kind == "launch"
    share = f"{100 * top.step_share:.0f}%"
    assert f"launch {share}/step" in header
    assert card.startswith("Verdict: launch-bound") and f"({share})" in card.splitlines()[0]
    assert "F1 launch" in card


@pytest.mark.parametrize("name", CAPTURES)
def test_s_n_selects_the_top_findings_largest_gap_never_an_edge(name):
    trace = load(GPU / f"{name}.pt.trace.json.gz")
    diag = diagnose(trace)
    edge = _edges(trace, diag)

    async def run():
        app = make_app(trace, diagnosis=diag)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await wait_ready(pilot)
            await pilot.press("s", "n")
            await pilot.pause()
            return screen.lanes.selected_gap

    got = asyncio.run(run())
    top = findings(diag).top
    assert got == int(top.positions[0]) and not edge[got]
    # the largest share of the finding's own time, computed from its per-gap removal
    assert top.remove_ns[got] == top.remove_ns.max()


def test_enter_on_a_finding_walks_its_positions():
    trace = load(GPU / "h200_host_island.pt.trace.json.gz")
    diag = diagnose(trace)
    f2 = findings(diag).ranked[1]

    async def run():
        app = make_app(trace, diagnosis=diag)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await wait_ready(pilot)
            await pilot.press("f", "j", "enter")
            await pilot.pause()
            got = [screen.lanes.selected_gap]
            panel = screen.query_one(GapPanel).plain
            for _ in range(f2.positions.size):
                await pilot.press("n")
                await pilot.pause()
                got.append(screen.lanes.selected_gap)
            await pilot.press("N")
            await pilot.pause()
            got.append(screen.lanes.selected_gap)
            return got, panel

    got, panel = asyncio.run(run())
    pos = [int(x) for x in f2.positions]
    assert got[: len(pos)] == pos and got[len(pos)] == pos[0]  # wraps
    assert got[-1] == pos[-1]
    assert panel.startswith(f"Finding F2 {f2.kind}: {f2.title}") and f"gap 1 of {len(pos)}" in panel
    # the finding's fix leads; its card, when a gap is mostly its own (here no gap is:
    # `json` shares each gap with the larger `tokenize`), follows
    shown = " ".join(panel.split())
    assert f2.fix[:40] in shown
    assert f2.card is None or f2.card.first_experiment[:40] in shown
