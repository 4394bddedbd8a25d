"""The rank-set overview screen (``gapscope DIR`` on a terminal).

A Textual app over a finished rank-set document (``gapscope.ranks.document``): the set
and the straggler verdict on top, then one row per rank sorted by the cost it imposed
on the others (step time, GPU busy, useful busy, collective wait, late cost, idle by
class, the per-step heat row of its late cost). Enter on a row ends the app with that
rank (``app.return_value``); the caller opens the rank's trace in the existing viewer
and shows the overview again when the viewer closes. ``q`` / Escape quit (None).
The cursor starts on the straggler (else the costliest rank).
"""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from gapscope.ranks.table import COLUMNS, cells
from gapscope.ranks.text import header_line
from gapscope.tui.footer import KeyFooter

__all__ = ["RanksOverview"]


class RanksOverview(App[int | None]):
    """The overview of ``doc``; returns the chosen rank, or None."""

    TITLE = "gapscope ranks"
    CSS = """
    #head { height: auto; padding: 0 1; }
    #verdict { height: auto; padding: 0 1 1 1; color: $warning; }
    DataTable { height: 1fr; }
    """
    BINDINGS = [
        Binding("enter", "open_rank", "open rank", show=True),
        Binding("q,escape", "quit_overview", "quit", show=True),
    ]

    def __init__(self, doc: dict, *, start_rank: int | None = None) -> None:
        super().__init__()
        self.doc = doc
        self.ranks = [row["rank"] for row in doc["ranks"]]
        v = doc["verdict"].get("straggler")
        self.start_rank = start_rank if start_rank in self.ranks else (v if v in self.ranks else None)

    def compose(self) -> ComposeResult:
        yield Static(header_line(self.doc) + " — Enter opens a rank in the viewer, q quits", id="head", markup=False)
        yield Static("verdict: " + self.doc["verdict"]["line"], id="verdict", markup=False)
        yield DataTable(cursor_type="row", zebra_stripes=True)
        yield KeyFooter()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        # On screen the heat row comes right after the late cost (narrow terminals
        # scroll sideways to the idle classes and the file).
        first = ("rank", "step", "busy", "useful", "wait", "cost", "heat")
        cols = [c for k in first for c in COLUMNS if c.key == k] + [c for c in COLUMNS if c.key not in first]
        for c in cols:
            table.add_column(c.title, key=c.key)
        for rank, values in zip(self.ranks, cells(self.doc, cols, max(len(self.doc["steps"]), 1))):
            table.add_row(*values, key=str(rank))
        if self.start_rank is not None:
            table.move_cursor(row=self.ranks.index(self.start_rank))
        table.focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.exit(int(event.row_key.value))

    def action_open_rank(self) -> None:
        table = self.query_one(DataTable)
        if self.ranks:
            self.exit(self.ranks[table.cursor_row])

    def action_quit_overview(self) -> None:
        self.exit(None)
