"""The swimlane painter (``gapscope.tui.lanes_draw``) without an App: lanes painted from
a hand-built ``LaneView``, with the exact text and styles worked out by hand.

The trace: GPU 0 stream 7 runs ``gemm`` [0, 700) ns, ``relu`` [1200, 1250) and ``add``
[1290, 1300); the CPU thread ``main`` runs ``forward`` [0, 1500) and a
``cudaStreamSynchronize`` [1600, 1900). Gaps of GPU 0: sync [700, 1200), launch
[1260, 1290) (narrower than a cell), host [1300, 2000). The view: 20 cells of 100 ns
from 0 right of a 10-cell label column, cursor at 250 ns (cell 2).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from rich.style import Style

from gapscope.analysis.types import Cause, Gaps
from gapscope.parsers.builder import TraceBuilder
from gapscope.parsers.model import Kind
from gapscope.tui.lanes_draw import COMPONENT_CLASSES, LaneView, render_line
from gapscope.tui.lanes_model import build_rows, gap_at, gaps_by_device
from gapscope.tui.viewmodel import LaneIndex, Viewport

# One colour per component class; the selection and cursor styles are attributes, so
# that a combined style shows both.
STYLES = {name: Style(color=f"color({k + 1})") for k, name in enumerate(sorted(COMPONENT_CLASSES))}
STYLES.update(
    {
        "lanes--cursor": Style(underline=True),
        "lanes--selected-row": Style(bold=True),
        "lanes--selected-gap": Style(italic=True),
        "lanes--selected-event": Style(strike=True),
    }
)
BASE = Style()


def _trace():
    b = TraceBuilder()
    cpu = b.lane("1", "1", process_name="python", thread_name="main")
    gpu = b.lane("0", "7", process_name="GPU 0", thread_name="stream 7", is_gpu=True, device=0, stream=7)
    b.event(cpu, "forward", 0, 1500, Kind.CPU_OP)
    b.event(cpu, "cudaStreamSynchronize", 1600, 300, Kind.SYNC_CALL)
    b.event(gpu, "gemm", 0, 700, Kind.KERNEL)
    b.event(gpu, "relu", 1200, 50, Kind.KERNEL)
    b.event(gpu, "add", 1290, 10, Kind.KERNEL)
    return b.build()


def _gaps(starts, ends, causes):
    n = len(starts)
    z = lambda v, dt: np.full(n, v, dtype=dt)
    return Gaps(
        device=z(0, np.int32),
        start_ns=np.array(starts, np.int64),
        end_ns=np.array(ends, np.int64),
        prev_op=z(-1, np.int64),
        next_op=z(-1, np.int64),
        launch=z(-1, np.int64),
        launch_lane=z(-1, np.int32),
        lateness_ns=z(0, np.int64),
        exposed_copy_ns=z(0, np.int64),
        cause=np.array(causes, np.int8),
        secondary=z(-1, np.int8),
        cause_share=z(1.0, float),
        secondary_share=z(0.0, float),
        group=z(-1, np.int32),
        episode=z(-1, np.int32),
    )


TRACE = _trace()
GAPS = _gaps([700, 1260, 1300], [1200, 1290, 2000], [Cause.SYNC, Cause.LAUNCH, Cause.HOST])
ROWS = build_rows(TRACE, set(), {0})
VIEW = LaneView(
    trace=TRACE,
    rows=ROWS,
    gaps=GAPS,
    gaps_by_device=gaps_by_device(GAPS),
    viewport=Viewport(0, 100.0, 20),
    origin_ns=0,
    cursor_ns=250,
    top_row=0,
    selected_row=0,
    selected_gap=None,
    selected_event=None,
    show_causes=True,
    width=30,
    label_width=10,
    styles=STYLES,
    base_style=BASE,
    lane_index=lambda lane: LaneIndex(TRACE, lane),
)


def _text(view: LaneView, y: int) -> str:
    strip = render_line(view, y)
    assert strip.cell_length == view.width
    return "".join(seg.text for seg in strip)


def _styles(view: LaneView, y: int) -> list[Style]:
    """The style of every cell of line ``y``."""
    return [seg.style for seg in render_line(view, y) for _ in seg.text]


def test_rows_of_the_trace():
    assert [(r.kind, r.label) for r in ROWS] == [
        ("group", "▾ GPU 0"),
        ("idle", "idle gaps"),
        ("lane", "stream 7"),
        ("group", "▾ python (1)"),
        ("lane", "main"),
    ]


def test_ruler_span_and_ticks():
    # the span (2000 ns) in the label column; 1 µs steps (the 1-2-5 step of at least
    # 10 cells of 100 ns) at cells 0 and 10; the cursor cell (2) underlined
    assert _text(VIEW, 0) == "↔2.0 µs   " + "▏0µs      ▏1µs      "
    styles = _styles(VIEW, 0)
    ruler = STYLES["lanes--ruler"]
    assert styles[:12] == [ruler] * 12
    assert styles[12] == ruler + STYLES["lanes--cursor"]
    assert styles[13:] == [ruler] * 17


def test_gap_row_letters_and_sub_cell_mark():
    # sync [700, 1200): cells 7-11, too narrow for "sync 500 ns" (13 cells with a
    # margin), so its letter at the middle cell 9; launch [1260, 1290) holds no cell
    # centre: "╎" in cell 12, where it starts; host [1300, 2000): cells 13-19, "H" at 16
    assert _text(VIEW, 2) == "idle gaps " + "       " + "░░S░░" + "╎" + "░░░H░░░"
    styles = _styles(VIEW, 2)[10:]
    assert styles[7:12] == [STYLES["lanes--gap-sync"]] * 5
    assert styles[12] == STYLES["lanes--gap-launch"]
    assert styles[13:] == [STYLES["lanes--gap-host"]] * 7
    assert styles[2] == BASE + STYLES["lanes--cursor"]


def test_gpu_lane_kernels_names_and_gap_background():
    # gemm fills cells 0-6 (7 cells >= 6: its name boxed in reversed kernel colour);
    # cells 7-11 and 13-19 show the gaps' background, blank; cell 12 holds relu (50 ns)
    # and add (10 ns): two events covering 0.6 of it, the density bar of 5 eighths
    assert _text(VIEW, 3) == " stream 7 " + "gemm   " + "     " + "▅" + "       "
    styles = _styles(VIEW, 3)[10:]
    boxed = STYLES["lanes--kernel"] + Style(reverse=True)
    assert styles[:7] == [boxed, boxed, boxed + STYLES["lanes--cursor"], boxed, boxed, boxed, boxed]
    assert styles[7:12] == [STYLES["lanes--gap-sync"]] * 5
    assert styles[12] == STYLES["lanes--kernel"]
    assert styles[13:] == [STYLES["lanes--gap-host"]] * 7


def test_cpu_lane_boxed_name_and_short_span():
    # forward: 15 cells, its name then the CPU-op glyph; the 3-cell sync call is too
    # short for a name
    assert _text(VIEW, 5) == " main     " + "forward========" + " ~~~ "
    styles = _styles(VIEW, 5)[10:]
    assert styles[16:19] == [STYLES["lanes--sync"]] * 3


def test_group_labels_cut_and_selected_row():
    assert _text(VIEW, 1) == "▾ GPU 0   " + " " * 20
    # "▾ python (1)" does not fit 9 cells: cut with "…"
    assert _text(VIEW, 4) == "▾ python… " + " " * 20
    assert _styles(VIEW, 1)[:10] == [STYLES["lanes--group"] + STYLES["lanes--selected-row"]] * 10
    assert _styles(VIEW, 4)[:10] == [STYLES["lanes--group"]] * 10
    assert _styles(VIEW, 5)[:10] == [STYLES["lanes--label"]] * 10


def test_past_the_last_row_is_blank():
    assert _text(VIEW, 6) == " " * 30
    assert set(_styles(VIEW, 6)) == {BASE}


def test_top_row_scrolls_the_rows_under_the_ruler():
    view = dataclasses.replace(VIEW, top_row=3)
    assert _text(view, 0) == _text(VIEW, 0)
    assert _text(view, 1) == _text(VIEW, 4)
    assert _text(view, 2) == _text(VIEW, 5)
    assert _text(view, 3) == " " * 30


def test_selected_gap_and_event():
    view = dataclasses.replace(VIEW, selected_gap=2, selected_event=1)  # host gap; the sync call
    gap_row = _styles(view, 2)[10:]
    assert gap_row[13:] == [STYLES["lanes--gap-host"] + STYLES["lanes--selected-gap"]] * 7
    assert gap_row[7:12] == [STYLES["lanes--gap-sync"]] * 5
    # on a lane the gap background is never drawn selected
    assert _styles(view, 3)[23:] == [STYLES["lanes--gap-host"]] * 7
    cpu = _styles(view, 5)[10:]
    assert cpu[16:19] == [STYLES["lanes--sync"] + STYLES["lanes--selected-event"]] * 3
    assert cpu[15] == cpu[19] == BASE


def test_wide_gap_label_and_hidden_causes():
    # 25 ns per cell from 600: the sync gap takes cells 4-23 (20 cells), wide enough
    # for its class and length, centred (cell 4 + (20 - 11) // 2 = 8); the launch gap
    # [1260, 1290) holds the centres of cells 26 and 27 (1262, 1287): two cells, no
    # room for its letter
    zoomed = dataclasses.replace(VIEW, viewport=Viewport(600, 25.0, 28), width=38, cursor_ns=0)
    assert _text(zoomed, 2) == "idle gaps " + "    " + "░░░░sync 500 ns░░░░░" + "  " + "░░"
    assert _styles(zoomed, 2)[36:] == [STYLES["lanes--gap-launch"]] * 2
    # causes hidden (exercises): one neutral look and the word "idle"
    hidden = dataclasses.replace(zoomed, show_causes=False)
    assert _text(hidden, 2) == "idle gaps " + "    " + "░░░░idle 500 ns░░░░░" + "  " + "░░"
    styles = _styles(hidden, 2)
    assert styles[14:34] + styles[36:] == [STYLES["lanes--gap-unclassified"]] * 22


def test_gap_at():
    by_device = gaps_by_device(GAPS)
    assert [gap_at(by_device, t, 0) for t in (699, 700, 1199, 1200, 1260, 1999, 2000)] == [None, 0, 0, None, 1, 2, None]
    assert gap_at(by_device, 800, 1) is None
    assert gaps_by_device(None) == {}
