"""The per-rank table shared by the text, Markdown and overview renderers.

Columns in the order shown; when the width is short, the columns of lowest priority
are dropped first (rank, step time, busy, wait and cost stay). The heat row shows the
cost a rank imposed in each step (``cost_by_step_ns``), one cell per step, on one
scale for the whole table: `` ▁▂▃▄▅▆▇█``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from gapscope.analysis.causes import CAUSES
from gapscope.analysis.types import Cause
from gapscope.report.fmt import safe_name
from gapscope.units import column_unit, fmt_in

__all__ = ["Column", "COLUMNS", "fit_columns", "heat_row", "cells", "HEAT"]

HEAT = " ▁▂▃▄▅▆▇█"


@dataclasses.dataclass(frozen=True)
class Column:
    """``key``: id; ``title``; ``value(row) -> str``; ``priority``: lower stays longer;
    ``right``: right-aligned (figures); ``ns(row)``: for a duration column, the row's
    value in ns (None: shown as ``-``), written in the column's one unit
    (``gapscope.units.column_unit``) by ``cells``."""

    key: str
    title: str
    value: Callable[[dict], str]
    priority: int
    right: bool = True
    ns: Callable[[dict], int | None] | None = None


def _d(key: str, title: str, priority: int) -> Column:
    return Column(key, title, lambda row: "", priority, ns=lambda row: row[key])


_CLASS_PRIORITY = {c: info.rank_priority for c, info in CAUSES.items()}


def _cls(c: Cause) -> Column:
    return Column(
        c.label,
        c.label[:6],
        lambda row: "",
        _CLASS_PRIORITY[c],
        ns=lambda row: row["idle_by_class_ns"][c.label] or None,  # 0 or null: "-"
    )


COLUMNS = [
    # a damaged rank carries its marks beside its number (``document.damage_marks``)
    Column("rank", "rank", lambda r: str(r["rank"]) + (f" ({'; '.join(r['marks'])})" if r.get("marks") else ""), 0),
    _d("step_wall_ns", "step", 1),
    _d("busy_ns", "busy", 2),
    _d("useful_busy_ns", "useful", 6),
    _d("collective_wait_ns", "coll.wait", 3),
    _d("cost_imposed_ns", "late cost", 4),
    _d("idle_ns", "idle", 5),
    # Idle by class in ``Cause`` order; at short widths host and launch (the usual
    # large ones) stay longest.
    *[_cls(c) for c in Cause],
    Column("heat", "steps", lambda r: "", 7, right=False),
    Column("file", "file", lambda r: safe_name(r["path"].rsplit("/", 1)[-1], 40), 20, right=False),
]


def heat_row(row: dict, scale_ns: int, cells_max: int) -> str:
    """The cost per step of ``row`` as heat glyphs (at most ``cells_max``, the rest
    summed into the last cell)."""
    v = list(row["cost_by_step_ns"])
    if not v or cells_max <= 0:
        return ""
    if len(v) > cells_max:
        v = v[: cells_max - 1] + [sum(v[cells_max - 1 :])]
    out = []
    for x in v:
        if x <= 0 or scale_ns <= 0:
            out.append("·")
        else:
            out.append(HEAT[max(1, min(len(HEAT) - 1, round(x / scale_ns * (len(HEAT) - 1))))])
    return "".join(out)


def cells(doc: dict, columns: list[Column], heat_cells: int) -> list[list[str]]:
    """The table body as strings, one list per row of ``doc["ranks"]``; each duration
    column in one unit, that of its largest value (``0.091 ms`` beside ``0.156 ms``)."""
    scale = max((x for row in doc["ranks"] for x in row["cost_by_step_ns"]), default=0)
    units = {}
    for c in columns:
        if c.ns is not None:
            vals = [abs(v) for row in doc["ranks"] if (v := c.ns(row)) is not None]
            units[c.key] = column_unit(max(vals, default=0))
    out = []
    for row in doc["ranks"]:
        line = []
        for c in columns:
            if c.key == "heat":
                line.append(heat_row(row, scale, heat_cells))
            elif c.ns is not None:
                v = c.ns(row)
                line.append("-" if v is None else fmt_in(v, units[c.key]))
            else:
                line.append(c.value(row))
        out.append(line)
    return out


def fit_columns(doc: dict, width: int) -> tuple[list[Column], int]:
    """The columns that fit ``width`` (two spaces between columns) and the heat cells."""
    n_steps = len(doc["steps"])
    chosen = sorted(COLUMNS, key=lambda c: c.priority)
    while True:
        keys = {c.key for c in chosen}
        cols = [c for c in COLUMNS if c.key in keys]
        body = cells(doc, [c for c in cols if c.key != "heat"], 0)
        widths = [
            max([len(c.title)] + [len(r[i]) for r in body]) for i, c in enumerate(c for c in cols if c.key != "heat")
        ]
        used = sum(widths) + 2 * (len(cols) - 1)
        heat = 0
        if "heat" in keys:
            heat = min(max(n_steps, 5), max(width - used, 0))
            if heat < min(n_steps, 5):
                heat = -1
            used += max(heat, 0)
        if (used <= width and heat != -1) or len(chosen) <= 5:
            return cols, max(heat, 0)
        chosen = chosen[:-1]
