"""Untrusted names in the viewer (issue 14, "Names"): printable Unicode drawn as itself
at its real cell width (CJK, emoji, combining accents), control and format characters
as visible escapes, search on the real text, markup never interpreted, ``NO_COLOR``
without colour. Expected values written by hand."""

from __future__ import annotations

import asyncio
import json

from rich.cells import cell_len
from rich.style import Style
from textual.filter import Monochrome, NoColor

from gapscope.parsers import load
from gapscope.tui.cells import Cells, crop, pad
from gapscope.tui.factory import make_app
from gapscope.tui.lanes_model import sanitize
from gapscope.tui.navigation import NameSearch

from .test_tui_app import wait_ready

KERNELS = [
    "café_kernel",
    "中文模型_gemm",
    "🚀launch_kernel",
    "cafe\u0301_decomposed",
    "\u202eevil_bidi",
    "ctl\x1b[31mred",
    "zw\u200bspace",
    "[bold]T[/]",
]


def _write_trace(path) -> str:
    ev = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "训练进程 🚀"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 11, "args": {"name": "naïve\u202ethread"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 12, "args": {"name": "工作线程\x07"}},
    ]
    t = 0
    for i in range(24):
        n = KERNELS[i % len(KERNELS)]
        tid = 11 + i % 2
        ev.append({"ph": "X", "cat": "cpu_op", "name": "op " + n, "pid": 1, "tid": tid, "ts": t, "dur": 80})
        ev.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": tid,
                "ts": t + 10,
                "dur": 5,
                "args": {"correlation": i + 1},
            }
        )
        ev.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": n,
                "pid": 0,
                "tid": 7,
                "ts": t + 20,
                "dur": 60 + 20 * (i % 3),
                "args": {"device": 0, "stream": 7, "correlation": i + 1},
            }
        )
        t += 150 + 40 * (i % 4)
    p = path / "names.json"
    p.write_text(json.dumps({"traceName": "[bold]T[/] 名前", "traceEvents": ev}, ensure_ascii=False))
    return str(p)


def test_sanitize_keeps_printable_text_and_escapes_the_rest():
    assert sanitize("中文模型") == "中文模型" and cell_len("中文模型") == 8
    assert sanitize("🚀x") == "🚀x"
    assert sanitize("cafe\u0301") == "café"  # composed
    assert sanitize("e\u0301\u0302") == "é\u0302"  # a second accent stays a combining mark
    assert sanitize("\u0301a") == "◌\u0301a"  # a mark needs a base
    assert sanitize("a\x1bb\x7f\x85") == "a\\x1bb\\x7f\\x85"
    assert sanitize("x\u202ey\u200bz\u2028") == "x⟨U+202E⟩y⟨U+200B⟩z⟨U+2028⟩"


def test_crop_and_pad_count_cells_and_never_split_a_wide_character():
    assert crop("中文模型", 5) == "中文…"  # 4 + 1 cells
    assert crop("中文模型", 8) == "中文模型"
    assert crop("abcdef", 4) == "abc…"
    assert pad("中文模型", 6) == "中文… " and cell_len(pad("中文模型", 6)) == 6
    assert pad("café", 6) == "café  "


def test_cells_write_wide_and_combining_characters_cell_by_cell():
    c = Cells(10, Style())
    c.text(1, "中a" + "e\u0301", None)
    assert "".join(s.text for s in c.segments(-1, Style())) == " 中ae\u0301     "
    c = Cells(4, Style())
    c.text(2, "中文", None)  # the second does not fit: a space, not half a character
    text = "".join(s.text for s in c.segments(-1, Style()))
    assert text == "  中" and cell_len(text) == 4
    c = Cells(4, Style())
    c.text(0, "中文", None)
    c.chars[1] = ord("…")  # a later write over a wide character's second cell
    text = "".join(s.text for s in c.segments(-1, Style()))
    assert text == " …文" and cell_len(text) == 4


def test_search_matches_composed_and_decomposed_cafe(tmp_path):
    trace = load(_write_trace(tmp_path))
    # café_kernel and cafe\u0301_decomposed: 3 kernels and 3 ops each
    assert len(NameSearch(trace, "café")) == 12
    assert len(NameSearch(trace, "CAFE\u0301")) == 12
    assert len(NameSearch(trace, "中文")) == 6


def test_viewer_at_80x24_draws_names_as_text_with_aligned_columns(tmp_path):
    path = _write_trace(tmp_path)

    async def run():
        app = make_app(path)
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await wait_ready(pilot)
            header = str(screen.query_one("#header").render())
            lanes = screen.lanes
            lines = [lanes.render_line(y) for y in range(lanes.size.height)]
            texts = [s.text for s in lines]
            assert all(s.cell_length == 80 for s in lines)
            assert all(cell_len(t) == 80 for t in texts)
            labels = [t[:16] for t in texts if t.strip()]
            # search then zoom in on a CJK kernel: its name is drawn as itself
            await pilot.press("slash")
            await pilot.press(*"中文")
            await pilot.press("enter")
            for _ in range(5):
                await pilot.press("plus")
            await pilot.pause()
            zoomed = [lanes.render_line(y).text for y in range(lanes.size.height)]
            await pilot.press("slash")
            await pilot.press(*"café")
            await pilot.press("enter")
            await pilot.pause()
            status = str(screen.query_one("#detail").render())
            return header, texts, labels, zoomed, status

    header, texts, labels, zoomed, status = asyncio.run(run())
    assert header.startswith("gapscope [bold]T[/] 名前 │")
    assert " 训练进程 🚀" in "\n".join(labels)
    assert any(t.startswith(" naïve⟨U+202E⟩… ") for t in texts)
    assert any(t.startswith(" 工作线程\\x07     ") for t in texts)
    assert all("\x1b" not in t and "\u202e" not in t and "\x07" not in t for t in texts + zoomed)
    assert any("中文模型_gemm" in t for t in zoomed)
    assert all(cell_len(t) == 80 for t in zoomed)
    assert "match 3/12 for 'café'" in status and "café_decomposed" in status  # the next match after the cursor


def test_no_color_swaps_monochrome_for_no_colour(monkeypatch, tmp_path):
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(_write_trace(tmp_path))
    kinds = [type(f) for f in app._filters]
    assert NoColor in kinds and Monochrome not in kinds


def test_header_names_the_opened_file_when_the_trace_name_is_kinetos_temp_path(tmp_path):
    """issue 18 item 10: Kineto records the file it wrote (a temporary one for a .gz
    export) as traceName; the header shows the file the user opened."""
    from gapscope.tui.header import trace_header

    p = tmp_path / "vm_1_20261201T000000Z_train.pt.trace.json"
    ev = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k",
            "pid": 0,
            "tid": 7,
            "ts": 0,
            "dur": 5,
            "args": {"device": 0, "stream": 7},
        }
    ]
    p.write_text(json.dumps({"traceName": "/tmp/tmpa5ej828u.json", "traceEvents": ev}))
    assert trace_header(load(str(p)), None, 120).plain.startswith(
        "gapscope vm_1_20261201T000000Z_train.pt.trace.json │"
    )


def test_no_color_reaches_the_exercise_app_too(monkeypatch, tmp_path):
    from gapscope.exercise import ProgressStore, Workbook, bundled_paths, load_exercise
    from gapscope.tui.exercise.app import make_exercise_app

    monkeypatch.setenv("NO_COLOR", "1")
    ex = load_exercise(next(p for p in bundled_paths() if "decode-step" in str(p)))
    app = make_exercise_app(ex, store=ProgressStore(tmp_path, "t"), workbook=Workbook(ex))
    kinds = [type(f) for f in app._filters]
    assert NoColor in kinds and Monochrome not in kinds


def test_viewer_at_200x50_keeps_wide_names_aligned(tmp_path):
    async def run():
        app = make_app(_write_trace(tmp_path))
        async with app.run_test(size=(200, 50)) as pilot:
            screen = await wait_ready(pilot)
            lanes = screen.lanes
            return [lanes.render_line(y).text for y in range(lanes.size.height)], lanes.size.width

    texts, width = asyncio.run(run())
    assert all(cell_len(t) == width for t in texts)
    assert any(" 训练进程 🚀 (1)" in t for t in texts)


def test_nested_evidence_is_marked_as_inside_its_parent():
    """A parent and its children listed side by side read as if their times added up (a
    newcomer summed 14 ms of evidence in a 10.2 ms gap): an item inside an item listed
    before it (same lane, within its time, deeper) is marked, one level per parent."""
    from gapscope.analysis.types import Cause, Evidence
    from gapscope.parsers.builder import TraceBuilder
    from gapscope.parsers.model import Kind
    from gapscope.tui.panel import evidence_levels

    b = TraceBuilder()
    t1 = b.lane("1", "1", process_name="p", thread_name="main")
    t2 = b.lane("1", "2", process_name="p", thread_name="side")
    b.event(t1, "outer", 0, 100, Kind.CPU_OP)
    b.event(t1, "inner", 10, 50, Kind.CPU_OP)
    b.event(t1, "innermost", 20, 10, Kind.CPU_OP)
    b.event(t1, "after", 100, 20, Kind.CPU_OP)
    b.event(t2, "other thread", 10, 50, Kind.CPU_OP)
    tr = b.build()
    ev = {tr.name(i): i for i in range(len(tr))}

    def item(name: str) -> Evidence:
        i = ev[name]
        return Evidence(i, name, int(tr.lane[i]), Cause.HOST, int(tr.dur_ns[i]))

    listed = [item(n) for n in ("outer", "other thread", "inner", "after", "innermost")]
    listed.append(Evidence(-1, "(untraced time on this thread)", int(tr.lane[ev["outer"]]), Cause.HOST, 5))
    assert evidence_levels(tr, listed) == [0, 0, 1, 0, 2, 0]
    # a child listed before its parent is not marked: the mark points up the list
    assert evidence_levels(tr, [item("inner"), item("outer")]) == [0, 0]
