"""SVG snapshots of the exercise screen at 120x40 and 80x24 (pytest-textual-snapshot).

Update with ``pytest tests/test_exercise_snapshots.py --snapshot-update`` and look at the
SVGs under ``tests/__snapshots__/test_exercise_snapshots/`` before committing them.
Progress goes to a temporary state dir, so every run starts at task 1.
"""

from __future__ import annotations

import pytest

from gapscope.exercise import ProgressStore, Workbook, bundled_paths, load_exercise
from gapscope.tui.exercise.app import make_exercise_app

EX = {p.stem: p for p in bundled_paths()}
SIZES = [(120, 40), (80, 24)]


def _app(name, tmp_path):
    ex = load_exercise(EX[name])
    return make_exercise_app(ex, store=ProgressStore(tmp_path, "snap"), workbook=Workbook(ex))


def _keys(*keys):
    async def run_before(pilot):
        await pilot.pause()
        for k in keys:
            await pilot.press(k)
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_decode_step_pick_gap(snap_compare, size, tmp_path):
    # task 1 answered; the cursor starts in gap 1, so n moves to gap 2: the pick-a-gap task
    assert snap_compare(_app("decode-step", tmp_path), terminal_size=size, run_before=_keys("enter", "n"))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_decode_step_classify(snap_compare, size, tmp_path):
    # tasks 1-2 answered (digit 1 and Enter, then the largest gap picked): the cause task, its
    # options focused with their one-line "how to answer" above them
    assert snap_compare(
        _app("decode-step", tmp_path), terminal_size=size, run_before=_keys("1", "enter", "n", "n", "n", "enter")
    )
