"""The events of one export table as columns (``Block``), and what every table reader
shares while an export is read (``Context``)."""

from __future__ import annotations

import dataclasses

import numpy as np

from gapscope.parsers.model import TraceWarning
from gapscope.parsers.nsys.lanes import Lanes
from gapscope.parsers.nsys.names import Names
from gapscope.parsers.nsys.schema import Enums
from gapscope.parsers.nsys.sql import Database
from gapscope.parsers.nsys.targets import Devices

__all__ = ["Block", "Context"]


@dataclasses.dataclass
class Block:
    """Events read from ``table``, one element per event, in the table's row order.

    ``start``/``dur`` int64 ns; ``kind`` int8 (``Kind``); ``name`` int32 (``Names``);
    ``lane`` int32 (``Lanes``, provisional ids); ``rowid`` int64 (for ``args_of``) or
    None; ``correlation`` int64 CUPTI correlation id (-1 none) and ``pid`` int64 (the
    process the id belongs to: ids are per process); copy columns for memcpy/memset;
    ``open_ended``: bool, ranges the export never saw end (drawn to the end of the
    capture by the loader).
    """

    table: str
    start: np.ndarray
    dur: np.ndarray
    kind: np.ndarray
    name: np.ndarray
    lane: np.ndarray
    rowid: np.ndarray | None = None
    correlation: np.ndarray | None = None
    pid: np.ndarray | None = None
    bytes: np.ndarray | None = None
    copy_kind: np.ndarray | None = None
    pageable: np.ndarray | None = None
    open_ended: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.start.shape[0])

    def take(self, keep: np.ndarray) -> Block:
        """The events where the bool mask ``keep`` is true."""

        def sub(a):
            return None if a is None else a[keep]

        return Block(
            self.table,
            self.start[keep],
            self.dur[keep],
            self.kind[keep],
            self.name[keep],
            self.lane[keep],
            sub(self.rowid),
            sub(self.correlation),
            sub(self.pid),
            sub(self.bytes),
            sub(self.copy_kind),
            sub(self.pageable),
            sub(self.open_ended),
        )


@dataclasses.dataclass
class Context:
    """Shared state of one read: the database, its enums, the names and lanes being
    built, the GPUs, warnings and counts of what was left out."""

    db: Database
    enums: Enums
    names: Names
    lanes: Lanes
    devices: Devices
    warnings: list[TraceWarning] = dataclasses.field(default_factory=list)
    ignored: dict[str, int] = dataclasses.field(default_factory=dict)

    def warn(self, field: str | None, message: str) -> None:
        self.warnings.append(TraceWarning(None, field, message))

    def ignore(self, what: str, count: int) -> None:
        if count:
            self.ignored[what] = self.ignored.get(what, 0) + int(count)

    def first_value(self, table: str, expr: str):
        """``expr`` on the table's first row (None when empty or NULL)."""
        row = self.db.one(f'SELECT {expr} FROM "{table}" LIMIT 1', what=table)
        return row[0] if row and isinstance(row[0], int) else None

    def same_check(self, expr: str, first) -> str:
        """SQL aggregate counting the rows whose ``expr`` is not ``first``: 0 when one
        value holds for the whole table (one device, one process: the common case, so
        the column need not be read)."""
        return f"sum(({expr}) IS NOT {first if first is not None else 'NULL'})"

    def one_or_column(self, table: str, expr: str, first, differing) -> np.ndarray | int:
        """``first`` when no row differs from it (``same_check``), else the int64 column
        of ``expr`` (a second pass over the table)."""
        if not differing:
            return int(first) if isinstance(first, int) else 0
        (col,), _, _ = self.db.int_columns(table, [expr], want_rowid=False)
        return col

    def global_tids(self, table: str, tid: np.ndarray, first, differing) -> np.ndarray:
        """``globalTid`` per row from its thread-id bits ``tid`` (-1: none) and the
        process and machine bits ``globalTid >> 24`` (``first`` value, rows differing)."""
        high = self.one_or_column(table, "globalTid >> 24", first, differing)
        return np.where(tid >= 0, (np.asarray(high, dtype=np.int64) << 24) | tid, -1)

    def check_times(self, table: str, start: np.ndarray, dur: np.ndarray) -> np.ndarray:
        """Bool mask of rows with usable times; warns about the others (CUPTI gives 0
        for both start and end when it could not time an activity; an end before the
        start is a broken record)."""
        untimed = (start == 0) & (dur == 0)
        backwards = dur < 0
        if untimed.any():
            self.warn(
                f"{table}.start",
                f"{int(untimed.sum())} {table} row(s) with start = end = 0 (not timed by CUPTI); skipped",
            )
        if backwards.any():
            self.warn(f"{table}.end", f"{int(backwards.sum())} {table} row(s) ending before they start; skipped")
        return ~(untimed | backwards)
