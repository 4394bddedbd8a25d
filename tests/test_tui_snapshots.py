"""SVG snapshots of the viewer at 80x24 and 120x40 (pytest-textual-snapshot).

Update with ``pytest tests/test_tui_snapshots.py --snapshot-update`` and LOOK at the
SVGs under ``tests/__snapshots__/test_tui_snapshots/`` before committing them. No clock
or timing text is drawn, so the snapshots are deterministic.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gapscope.tui.factory import make_app
from gapscope.tui.screen import TraceScreen
from tests.conftest import BUGS, CORPUS, require

SIZES = [(80, 24), (120, 40)]
GPU = Path(__file__).resolve().parent.parent / "sample_traces" / "gpu"


async def _ready(pilot):
    app = pilot.app
    for _ in range(200):
        try:
            await app.workers.wait_for_complete()
        except Exception:
            pass
        await pilot.pause()
        # the causes, then the findings (a FindingsReady after Diagnosed): both drawn
        if isinstance(app.screen, TraceScreen) and not app.screen.diagnosing and not app.screen.findings_pending:
            await pilot.pause()
            return app.screen
    raise AssertionError(f"trace screen never shown (error={app.error!r})")


def _keys(*keys):
    async def run_before(pilot):
        await _ready(pilot)
        for k in keys:
            await pilot.press(k)
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_decode_step_largest_gap(snap_compare, size):
    from gapscope import sample_traces

    # narrow terminals show the compact card under the lanes without a key
    assert snap_compare(make_app(sample_traces.path()), terminal_size=size, run_before=_keys("s", "n"))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_multistream_kineto(snap_compare, size):
    path = require(CORPUS / "hta" / "rank0.json.gz")
    assert snap_compare(make_app(path), terminal_size=size, run_before=_keys("s", "n"))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_markup_names_verbatim(snap_compare, size):
    path = require(BUGS / "B23_markup_in_names.json")
    keys = ["slash", *"loss", "enter"]
    assert snap_compare(make_app(path), terminal_size=size, run_before=_keys(*keys))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_cpu_only_trace(snap_compare, size):
    path = require(CORPUS / "hta" / "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")
    assert snap_compare(make_app(path), terminal_size=size, run_before=_keys("n"))


def test_decode_step_expanded_card_scrolled(snap_compare):
    from gapscope import sample_traces

    # 80x24: p expands the card to most of the height, PgDn shows Forbidden and Proof
    assert snap_compare(
        make_app(sample_traces.path()), terminal_size=(80, 24), run_before=_keys("s", "n", "p", "pagedown")
    )


@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_h200_decode_first_screen(snap_compare, size):
    """The first screen of a launch-bound decode capture, no key pressed: the header
    names launch and its share of the step, the panel the verdict and the findings
    (issue 47)."""
    path = require(GPU / "h200_decode.pt.trace.json.gz")
    assert snap_compare(make_app(path), terminal_size=size, run_before=_keys())
