"""The card memo of the viewer (``gapscope.tui.cards``): the same cards as
``card_for_gap``, built once per gap, ahead of the key by ``prefetch_cards``."""

from __future__ import annotations

import types

import numpy as np
import pytest

from gapscope.analysis import diagnose
from gapscope.analysis.card import card_for_gap
from gapscope.analysis.findings import edge_place, findings
from gapscope.parsers import load
from gapscope.tui.cards import DERIVED_KEY, card_of, prefetch_cards
from gapscope.tui.panel import card_text, compact_card_text
from tests.conftest import SAMPLES


@pytest.fixture(scope="module")
def diag():
    d = diagnose(load(SAMPLES / "dataloader_stall.txt"))
    assert len(d.gaps) >= 2
    return d


def test_card_of_is_card_for_gap_built_once(diag):
    d = diagnose(diag.trace)  # a fresh diagnosis: nothing remembered yet
    for i in range(len(d.gaps)):
        got = card_of(d, i)
        assert got == card_for_gap(diag, i)
        assert card_of(d, i) is got  # the second ask is the memo's
    assert sorted(d.derived[DERIVED_KEY]) == list(range(len(d.gaps)))


def test_prefetch_builds_what_is_missing_and_stops_when_cancelled(diag):
    d = diagnose(diag.trace)
    n = len(d.gaps)
    assert prefetch_cards(d, [n - 1, -1], lambda: False) == 1  # -1: no gap, skipped
    assert prefetch_cards(d, [n - 1], lambda: False) == 0  # already built
    assert card_of(d, n - 1) == card_for_gap(diag, n - 1)
    assert prefetch_cards(d, range(n), lambda: True) == 0
    assert sorted(d.derived[DERIVED_KEY]) == [n - 1]


def test_prefetch_skips_a_card_that_fails(diag, monkeypatch):
    import gapscope.tui.cards as cards

    def boom(d, i):
        if i == 0:
            raise ValueError("broken evidence")
        return card_for_gap(d, i)

    monkeypatch.setattr(cards, "card_for_gap", boom)
    d = diagnose(diag.trace)
    assert prefetch_cards(d, [0, 1]) == 1
    assert sorted(d.derived[DERIVED_KEY]) == [1]
    with pytest.raises(ValueError):
        card_of(d, 0)  # the panel says "card unavailable" for it


def test_a_stand_in_diagnosis_without_derived_builds_every_time(diag, monkeypatch):
    import gapscope.tui.cards as cards

    calls = []
    monkeypatch.setattr(cards, "card_for_gap", lambda d, i: calls.append(i) or ("card", i))
    fake = types.SimpleNamespace(gaps=diag.gaps)
    assert card_of(fake, 1) == ("card", 1) and card_of(fake, 1) == ("card", 1)
    assert calls == [1, 1]
    assert prefetch_cards(fake, [0, 1]) == 0


def test_an_edge_gaps_card_says_it_is_one():
    """The first gap in time of the bundled H200 decode capture is its profiler start
    (listed apart by the findings); its card said only "host island" and advised
    torch.compile, with nothing to say it is outside the steady state (a newcomer's
    first ``n``). ``edge_place`` says where it lies, in the findings' words, and the
    viewer's cards lead with it; a gap inside the steps has none."""
    trace = load(str(SAMPLES / "gpu" / "h200_decode.pt.trace.json.gz"))
    diag = diagnose(trace)
    first = int(np.argmin(diag.gaps.start_ns))
    assert edge_place(diag, first) == "before the first kernel (profiler start)"
    apart = [f for f in findings(diag).apart if f.kind == "edge"]
    assert any(first in f.positions.tolist() for f in apart)
    inner = [i for i in range(len(diag.gaps)) if edge_place(diag, i) is None]
    assert inner and not any(first == i for i in inner)
    assert edge_place(diag, len(diag.gaps)) is None  # past the last gap
    full = card_text(diag, first).plain
    assert "Edge gap: idle before the first kernel (profiler start), outside the steady state" in full
    assert "Edge gap" not in card_text(diag, inner[0]).plain
    assert compact_card_text(diag, first)[1].plain.startswith("Edge gap, before the first kernel (profiler start)")


def test_the_reports_card_of_an_edge_gap_says_it_is_one():
    """``gapscope report`` (terminal, Markdown, JSON ``top_gaps[].edge``) gives the same
    edge note as the viewer for the H200 decode capture's profiler start, the card of a
    gap outside recurring groups; the other top gaps have none."""
    import io

    from rich.console import Console

    from gapscope.report.document import build_document
    from gapscope.report.markdown import render_markdown
    from gapscope.report.text import render_text

    trace = load(str(SAMPLES / "gpu" / "h200_decode.pt.trace.json.gz"))
    diag = diagnose(trace)
    doc = build_document(trace, diag)
    first = int(np.argmin(diag.gaps.start_ns))
    edges = {g["index"]: g["edge"] for g in doc["top_gaps"] if g["edge"] is not None}
    assert edges.get(first) == "before the first kernel (profiler start)"
    assert all(edge_place(diag, g["index"]) == g["edge"] for g in doc["top_gaps"])
    note = "idle before the first kernel (profiler start), outside the steady state: listed apart"
    assert note in render_markdown(doc)
    out = io.StringIO()
    render_text(doc, Console(file=out, width=200, color_system=None))
    assert "Edge gap" in out.getvalue() and note in " ".join(out.getvalue().split())
