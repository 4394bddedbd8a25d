"""The one table of causes (``gapscope.analysis.causes``) feeds every surface: each class
is drawn in one colour in the report, the viewer's gap cells and card, and the rank
table has one column per class."""

from __future__ import annotations

from gapscope.analysis.causes import CAUSE_LABELS, CAUSES
from gapscope.analysis.types import Cause
from gapscope.ranks.table import _CLASS_PRIORITY
from gapscope.report.rich_text import CAUSE_STYLE
from gapscope.tui.lanes_draw import COMPONENT_CLASSES
from gapscope.tui.panel import _CAUSE_STYLE
from gapscope.tui.swimlanes import Swimlanes


def test_every_class_has_one_row_in_cause_order():
    assert list(CAUSES) == list(Cause)
    assert CAUSE_LABELS == ("sync", "copy", "launch", "host", "unclassified", "dependency")


def test_each_class_is_one_colour_in_the_report_and_the_viewer():
    for c, info in CAUSES.items():
        assert CAUSE_STYLE[c.label] == info.colour  # the report (dependency included)
        assert _CAUSE_STYLE[c] == f"bold {info.colour}"  # the viewer's card
        assert f"lanes--gap-{c.label}" in COMPONENT_CLASSES
        assert f".lanes--gap-{c.label} {{ color: {info.colour};" in Swimlanes.DEFAULT_CSS
    assert CAUSE_STYLE["host"] == "#70d070"  # green in both, no longer red in the report


def test_the_rank_table_has_a_column_per_class():
    assert set(_CLASS_PRIORITY) == set(Cause)


def test_the_viewers_class_keys_come_from_the_table():
    from gapscope.tui.bindings import trace_bindings

    by_id = {b.id: b for b in trace_bindings()}
    for c, info in CAUSES.items():
        if info.key:
            assert by_id[f"gap.{c.label}"].key == info.key
            assert by_id[f"gap.{c.label}"].action == f"jump_class({int(c)})"
    assert [CAUSES[c].key for c in Cause] == ["1", "2", "3", "4", "", "5"]
