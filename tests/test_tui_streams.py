"""Many GPU streams at small sizes (issue 18 item 4): with 13 streams in
``kineto/resnet50_autograd_api_num_workers_0`` the CPU lanes were off screen at 80x24.
Streams fold when the rows do not fit (first those with nothing in view), the gap row
and the selected gap's launch lane stay visible, a collapsed GPU group keeps its gap
row; at 200x50 everything fits and nothing folds."""

from __future__ import annotations

import asyncio

from gapscope.tui.factory import make_app

from .test_tui_app import wait_ready


def _path(corpus):
    return corpus / "kineto" / "resnet50_autograd_api_num_workers_0" / "worker0.pt.trace.json.gz"


def _visible(lanes, i):
    return lanes.top_row <= i < lanes.top_row + lanes.visible_rows


def test_selected_gap_shows_its_gap_row_and_launch_lane_at_80x24(corpus):
    async def run(size):
        app = make_app(_path(corpus))
        async with app.run_test(size=size) as pilot:
            screen = await wait_ready(pilot)
            lanes = screen.lanes
            n_streams = sum(1 for ln in lanes.trace.lanes if ln.is_gpu and ln.index in lanes._shown_lanes)
            out = []
            for keys in (("s", "n"), ("n",), ("n",)):
                await pilot.press(*keys)
                await pilot.pause()
                g = lanes.selected_gap
                idle = next(i for i, r in enumerate(lanes.rows) if r.kind == "idle")
                launch = next(
                    i for i, r in enumerate(lanes.rows) if r.kind == "lane" and r.lane == int(lanes.gaps.launch_lane[g])
                )
                out.append((_visible(lanes, idle), _visible(lanes, launch), lanes.rows[0].label, len(lanes.rows)))
            return n_streams, lanes.visible_rows, out

    n_streams, visible, small = asyncio.run(run((80, 24)))
    assert n_streams == 13
    for idle_shown, launch_shown, label, n_rows in small:
        assert idle_shown and launch_shown
        assert n_rows <= visible
        assert "folded" in label  # '▾ GPU 0 +5 folded python'
    _, _, big = asyncio.run(run((200, 50)))
    for idle_shown, launch_shown, label, _ in big:
        assert idle_shown and launch_shown and "folded" not in label


def test_collapsed_gpu_group_keeps_its_gap_row(corpus):
    async def run():
        app = make_app(_path(corpus))
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await wait_ready(pilot)
            lanes = screen.lanes
            lanes.selected_row = 0
            await pilot.press("enter")
            await pilot.pause()
            return [(r.kind, r.label) for r in lanes.rows[:3]]

    rows = asyncio.run(run())
    assert rows[0][0] == "group" and rows[0][1].startswith("▸ GPU 0")
    assert rows[1] == ("idle", "idle gaps")
    assert rows[2][0] == "group"


def test_gap_row_stays_under_the_ruler_when_j_scrolls_past_it(corpus):
    async def run():
        app = make_app(_path(corpus))
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await wait_ready(pilot)
            lanes = screen.lanes
            seen = []
            for _ in range(16):
                await pilot.press("j")
                await pilot.pause()
                lines = [lanes.render_line(y).text for y in range(lanes.size.height)]
                sel = lanes.rows[lanes.selected_row].label
                seen.append(
                    (
                        lanes.top_row,
                        any(ln.startswith("idle gaps") for ln in lines[1:3]),
                        any(ln[1:].startswith(sel[:10]) or ln.startswith(sel[:10]) for ln in lines[1:]),
                    )
                )
            return seen

    seen = asyncio.run(run())
    assert any(top > 1 for top, _, _ in seen)  # scrolled past the gap row
    assert all(pinned for _, pinned, _ in seen)
    assert all(selected_shown for _, _, selected_shown in seen)
