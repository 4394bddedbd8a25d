"""Pilot tests of the keys a newcomer tripped on: the expanded card scrolls at 80x24,
the footer keeps the core keys at 80 columns, class jumps wrap and go back, ``s`` keeps
the selection, the help lists aliases and gap letters, loader warnings are shown, and
the ruler never labels time before the trace start."""

from __future__ import annotations

import asyncio

import pytest

from gapscope import sample_traces
from gapscope.analysis import diagnose
from gapscope.analysis.findings import findings
from gapscope.analysis.types import Cause
from gapscope.parsers import load
from gapscope.tui.factory import make_app
from gapscope.tui.help import HelpScreen, help_text
from gapscope.tui.loader_warnings import WarningsScreen
from gapscope.tui.ruler import ruler_ticks

from .test_tui_app import wait_ready

# The decode-step sample's gaps (hand-checked against its timeline): #0 sync 258 µs at
# +0, #1 launch 20 µs at +410 µs, #2 host 460 µs at +590 µs; largest first: 2, 0, 1.
SAMPLE_SIZE_ORDER = [2, 0, 1]


def _sample():
    trace = load(sample_traces.path())
    return trace, diagnose(trace)


def _visible(panel) -> str:
    """The panel's rows as drawn (the last one may be the "more lines" hint)."""
    return "\n".join("".join(seg.text for seg in panel.render_line(y)) for y in range(panel.size.height))


def test_expanded_card_scrolls_to_proof_at_80x24():
    trace, diag = _sample()
    assert [int(k) for k in diag.order_by_size()] == SAMPLE_SIZE_ORDER

    async def run():
        app = make_app(trace, diagnosis=diag)
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await wait_ready(pilot)
            await pilot.press("s", "n", "p")
            await pilot.pause()
            panel = screen.query_one("#panel")
            before = (screen.panel_mode, panel.size.height, _visible(panel), screen.lanes.size.height)
            seen = []
            for key in ("pagedown", "ctrl+d"):
                await pilot.press(key)
                await pilot.pause()
                seen.append(_visible(panel))
            await pilot.press("pageup", "ctrl+u")
            await pilot.pause()
            return before, seen, _visible(panel), panel.plain, screen.lanes.selected_gap

    (mode, height, first, lanes_h), seen, back, full, gap = asyncio.run(run())
    assert gap == 2 and mode == "expanded"
    assert lanes_h == 7 and height == 24 - 3 - 7 - 1  # header, detail, footer; lanes; border
    assert "Proof:" in full and "Proof:" not in first and "Forbidden:" not in first
    assert "Proof:" in seen[0] and "Forbidden:" in seen[0]
    assert "Protocol" in seen[1]
    assert "more lines (PgDn/^d, PgUp/^u)" in first and "more lines" not in seen[1]  # the end: no hint
    assert back == first


def test_footer_keeps_core_keys_at_80_columns():
    from textual.widgets._footer import FooterKey

    async def run():
        app = make_app(sample_traces.path())
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_ready(pilot)
            keys = [(k.key_display, k.description, k.region.x, k.region.right) for k in app.screen.query(FooterKey)]
            return keys

    keys = asyncio.run(run())
    # issue 18 item 12: the palette key stays at 80 columns (the rare actions live there)
    assert [(k, d) for k, d, _, _ in keys] == [
        ("n", "next"),
        ("N", "prev"),
        ("s", "order"),
        ("+/-", "zoom"),
        ("/", "find"),
        ("p", "card"),
        ("?", "help"),
        ("q", "quit"),
        ("^p", "palette"),
    ]
    assert all(right <= 80 for *_, right in keys)


def test_class_keys_keep_largest_first_and_say_the_order(corpus):
    """issue 18 item 8: after ``s n`` (the largest gap, not a copy gap) ``2`` goes to
    the largest copy gap, not to the first copy gap smaller than the current one; the
    next ``2`` to the second largest; the status line names the order."""
    trace = load(corpus / "hta" / "rank0.json.gz")
    diag = diagnose(trace)
    g = diag.gaps
    size = [int(k) for k in diag.order_by_size()]
    copies = [k for k in size if int(g.cause[k]) == int(Cause.COPY)]
    deps = [k for k in size if int(g.cause[k]) == int(Cause.DEPENDENCY)]
    assert int(g.cause[size[0]]) != int(Cause.COPY) and len(copies) >= 2 and deps

    async def run():
        app = make_app(trace, diagnosis=diag)
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await wait_ready(pilot)
            out = []
            for key in ("s", "n", "2", "2", "5"):
                await pilot.press(key)
                await pilot.pause()
                out.append((screen.lanes.selected_gap, screen.message))
            return out

    out = asyncio.run(run())
    # s n: the largest gap of the top finding, not the largest gap (an edge: 70 ms
    # outside the steps), issue 47
    assert out[1][0] == int(findings(diag).top.positions[0]) != size[0]
    assert out[2] == (copies[0], f"copy gap 1 of {len(copies)}, largest first")
    assert out[3] == (copies[1], f"copy gap 2 of {len(copies)}, largest first")
    assert out[4] == (deps[0], f"dependency gap 1 of {len(deps)}, largest first")


def test_class_jumps_wrap_and_go_back():
    trace, diag = _sample()

    async def run():
        app = make_app(trace, diagnosis=diag)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await wait_ready(pilot)
            lanes = screen.lanes
            out = []
            lanes.select_gap(2)
            for key in ("1", "1", "exclamation_mark", "3", "number_sign", "2"):
                await pilot.press(key)
                out.append((lanes.selected_gap, screen.message))
            return out

    out = asyncio.run(run())
    assert out[0] == (0, "wrapped to the first sync gap (1 of 1, in time)")
    assert out[1] == (0, "the only sync gap (1 of 1, in time)")  # on it already: nothing to wrap
    assert out[2] == (0, "the only sync gap (1 of 1, in time)")
    assert out[3] == (1, "launch gap 1 of 1, in time")  # the launch gap after #0
    assert out[4] == (1, "the only launch gap (1 of 1, in time)")
    assert out[5] == (1, "no copy gap in this trace")


def test_s_keeps_the_selection_and_n_goes_on_in_the_new_order():
    trace, diag = _sample()

    async def run():
        app = make_app(trace, diagnosis=diag)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await wait_ready(pilot)
            lanes = screen.lanes
            out = []
            for key in ("s", "n", "s", "s", "n", "n", "s", "n"):
                await pilot.press(key)
                out.append(lanes.selected_gap)
            return out

    # s n: the largest (#2); s s keep it; n n: #0 then #1 (largest first);
    # s: time order from #1, n: #2
    assert asyncio.run(run()) == [None, 2, 2, 2, 0, 1, 1, 2]


def test_help_lists_aliases_letters_and_textual_keys_last():
    async def run():
        app = make_app(sample_traces.path())
        async with app.run_test(size=(100, 40)) as pilot:
            screen = await wait_ready(pilot)
            await pilot.press("question_mark")
            shown = isinstance(app.screen, HelpScreen)
            await pilot.press("q")
            return shown, help_text(screen).plain, app.screen is screen

    shown, text, back = asyncio.run(run())
    assert shown and back
    lines = text.splitlines()
    assert "Escape or q closes this help" in lines[0]
    zoom_in = next(ln for ln in lines if ln.endswith("zoom in"))
    zoom_out = next(ln for ln in lines if ln.endswith("zoom out"))
    assert zoom_in.split() == ["+", "i", "=", "zoom", "in"] and zoom_out.split() == ["-", "o", "zoom", "out"]
    assert "S sync  C copy  L launch  H host  U unclassified" in text
    assert text.index("Also (Textual):") > text.index("quit") and text.index("Focus Next") > text.index(
        "Also (Textual):"
    )
    assert any(ln.split()[:2] == ["!", "prev"] for ln in lines)


def test_loader_warnings_on_b01(bugs):
    path = bugs / "B01_truncated_midevent.json"

    async def run():
        app = make_app(path)
        async with app.run_test(size=(100, 30)) as pilot:
            screen = await wait_ready(pilot)
            header = screen.header_text(100).plain
            notes = [(n.title, n.message) for n in app._notifications]
            status = str(screen.query_one("#detail").render())
            await pilot.press("w")
            await pilot.pause()
            shown = isinstance(app.screen, WarningsScreen)
            text = str(app.screen.query_one("#warnings-text").render()) if shown else ""
            await pilot.press("w")
            return header, notes, status, shown, text, app.screen is screen

    header, notes, status, shown, text, back = asyncio.run(run())
    assert "│ 0 gaps │ ⚠ 1 warning │" in header
    # issue 18 item 2: no toast over the first card; the status line says it once
    assert notes == []
    assert "│ ⚠ 1 loader warning: w lists them" in status
    assert shown and back
    assert "line 15  file truncated at line 15: incomplete event skipped; 8 events recovered" in text


def test_loader_warning_shows_its_finding_after_a_long_kernel_name(corpus):
    # issue 18 item 1: rank0's first warning names a 400-character template kernel
    # before "overlaps 'Memcpy DtoH (Device -> Pageable)' ... by 2.0 µs; both kept"
    path = corpus / "hta" / "rank0.json.gz"

    async def run():
        app = make_app(path)
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_ready(pilot)
            await pilot.press("w")
            await pilot.pause()
            return str(app.screen.query_one("#warnings-text").render())

    text = asyncio.run(run())
    first = next(ln for ln in text.splitlines() if "line 659779" in ln)
    assert "'void at::native::reduce_kernel<512, 1, …ned int, long, 4>)' (line 659747)" in first
    assert first.endswith("overlaps 'Memcpy DtoH (Device -> Pageable)' (line 659779) by 2.0 µs; both kept")


def test_ruler_stays_on_the_trace_and_never_labels_negative_time():
    trace, diag = _sample()
    t0, t1 = trace.extent_ns

    async def run():
        app = make_app(trace, diagnosis=diag)
        async with app.run_test(size=(100, 30)) as pilot:
            screen = await wait_ready(pilot)
            lanes = screen.lanes
            await pilot.press("n", "z")  # gap #0 starts at the trace start
            at_gap0 = (lanes.selected_gap, lanes.viewport, ruler_ticks(lanes.viewport, lanes.origin_ns, 10)[1])
            await pilot.press("0", "plus", "plus", *["L"] * 8)  # 0: fit all
            right = lanes.viewport
            await pilot.press(*["H"] * 12)
            left = lanes.viewport
            await pilot.press("0", "minus", "minus", "minus")
            out = lanes.viewport, ruler_ticks(lanes.viewport, lanes.origin_ns, 10)[1]
            return at_gap0, right, left, out

    (gap, vp0, ticks0), right, left, (vout, ticks_out) = asyncio.run(run())
    assert gap == 0
    pad = lambda vp: round(0.05 * vp.span_ns)
    assert vp0.start_ns == t0 - pad(vp0)  # clamped: 5 % of the view before the start, no more
    assert ticks0[0][1] == "0µs" and not any(lab.startswith("-") for _, lab in ticks0)
    assert len({lab[-2:] for _, lab in ticks0}) == 1  # one unit per ruler
    assert right.end_ns == t1 + pad(right) and left.start_ns == t0 - pad(left)
    # zoomed out past the whole trace: centred on it, no negative labels
    assert abs((vout.start_ns + vout.end_ns) // 2 - (t0 + (t1 - t0) // 2)) <= 1
    assert ticks_out and not any(lab.startswith("-") for _, lab in ticks_out)


@pytest.mark.parametrize("start", [-5_000, 0])
def test_ruler_ticks_skip_offsets_before_origin(start):
    from gapscope.tui.viewmodel import Viewport

    _, ticks = ruler_ticks(Viewport(start, 1000.0, 40), origin_ns=0, min_cells=10)
    assert (
        ticks
        == [
            (-start // 1000, "0µs"),
            (10 - start // 1000, "10µs"),
            (20 - start // 1000, "20µs"),
            (30 - start // 1000, "30µs"),
        ][: len(ticks)]
    )
    assert ticks[0] == (-start // 1000, "0µs")
