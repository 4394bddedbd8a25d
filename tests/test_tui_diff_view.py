"""``gapscope diff --view``: BEFORE above AFTER on one time axis aligned at the step,
the diff table beside them, ``n`` walking the matched positions."""

from __future__ import annotations

import asyncio

from gapscope import sample_traces
from gapscope.analysis import diagnose
from gapscope.diff.document import build_diff_document, diff_sides
from gapscope.parsers import load
from gapscope.tui.diff_view import DiffView, make_diff_app


def _pair():
    b, a = load(sample_traces.path("decode_step.txt")), load(sample_traces.path("decode_graph.txt"))
    bd, ad = diagnose(b), diagnose(a)
    return b, bd, a, ad


def test_windows_align_at_the_step_with_one_scale():
    b, bd, a, ad = _pair()
    bs, as_, matches = diff_sides(b, bd, a, ad)
    v = DiffView(bs, as_, tuple(matches))
    assert v.span_ns() == 1_050_000  # the longer step (decode step 1.050 ms vs graph 0.348 ms)
    died = next(k for k, m in enumerate(matches) if m.status == "died" and m.label == "matmul → attention")
    assert v.window(died, False).gap == 1 and v.window(died, True).gap is None  # the 20 µs launch gap, gone after
    vb, va = v.viewport(died, False, 80), v.viewport(died, True, 80)
    assert vb.ns_per_cell == va.ns_per_cell and vb.start_ns == 0 and va.start_ns == 0


def test_viewer_walks_positions_on_both_sides():
    b, bd, a, ad = _pair()
    bs, as_, matches = diff_sides(b, bd, a, ad)
    verdict = build_diff_document(b, bd, a, ad)["verdict"]["line"]
    app = make_diff_app(bs, as_, matches, verdict=verdict, labels=("decode_step.txt", "decode_graph.txt"))

    async def run():
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            screen = app.screen
            before, after = screen._sides()
            first = (
                screen.current,
                before.selected_gap,
                after.selected_gap,
                before.viewport.ns_per_cell == after.viewport.ns_per_cell,
            )
            await pilot.press("n")
            await pilot.pause()
            second = (screen.current, before.viewport.start_ns, after.viewport.start_ns)
            table = str(screen.query_one("#diff-table").render())
            return first, second, table, str(screen.query_one("#diff-verdict").render())

    first, second, table, shown = asyncio.run(run())
    # largest change first: the 0.718 ms host+sync stretch that died
    assert first[0] == 0 and first[1] == 0 and first[3]
    assert second[0] == 1 and second[1] == 0 and second[2] == 0
    assert "▶ died" in table and "attention → matmul" in table and "appeared" in table
    assert shown.startswith("faster: step 1.050 → 0.348 ms")


def test_view_aligns_a_steady_step_of_each_side():
    """Issue 47: the AFTER pane of h200_decode → h200_decode_graph showed the warm-up
    and prefill. Every window starts at a steady step of its side (steady: the side's
    own mask, the first step and warm-up ranges left out), and a selected gap lies in it."""
    from pathlib import Path

    import numpy as np

    from gapscope.analysis import diagnose
    from gapscope.diff.document import diff_sides
    from gapscope.parsers import load
    from gapscope.tui.diff_view import DiffView

    gpu = Path(__file__).resolve().parent.parent / "sample_traces" / "gpu"
    tb, ta = load(gpu / "h200_decode.pt.trace.json.gz"), load(gpu / "h200_decode_graph.pt.trace.json.gz")
    b, a, matches = diff_sides(tb, diagnose(tb), ta, diagnose(ta))
    view = DiffView(b, a, tuple(matches))
    for k in range(len(matches)):
        for side, after in ((b, False), (a, True)):
            w = view.window(k, after)
            starts = np.asarray(side.step_start_ns)
            s = int(np.flatnonzero(starts == w.step_start_ns)[0])
            assert side.steady[s] and s > 0, (k, after, s)
            if w.gap is not None:
                g0 = int(side.diag.gaps.start_ns[w.gap])
                assert starts[s] <= g0 < int(np.asarray(side.step_end_ns)[s])
