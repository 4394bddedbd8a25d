"""Read-only access to an SQLite file, and SQL results straight into numpy columns.

The file is opened through a URI with ``mode=ro&immutable=1``: SQLite neither writes
nor creates anything next to it (no journal, no ``-shm``/``-wal`` file, no lock), so an
export on a read-only mount opens too, and the input is only ever read.

Integer columns come back without a Python object per row: one aggregate query per
block of rows computes ``count(*)`` and ``group_concat(ifnull(expr, -1), ',')``
for every column in a single scan (SQLite's C code turns the values into one text per
column), and ``np.fromstring(text, sep=",")`` parses each text in C. ``ifnull``
gives NULLs a stated value (``group_concat`` skips NULLs, which would misalign the
columns), and the row count of each block is checked against every column's length: a
value that is not an integer (SQLite columns are dynamically typed) fails that check
and its block is read again row by row with ``CAST(... AS INTEGER)``. Blocks are
ranges of ``rowid`` (``BLOCK_ROWS`` rows), which keeps each text far below SQLite's
1 GB string limit.

Every ``sqlite3`` error becomes a ``TraceFormatError`` naming the file, and so does a
``UnicodeDecodeError`` (``DB_ERRORS``): ``sqlite3`` decodes SQLite's error message as
UTF-8, and a damaged schema puts the file's own bytes in it (``malformed database
schema (StringIds) - near "\xa0"``). Text values are decoded with errors replaced.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from gapscope.parsers.errors import TraceFormatError

__all__ = ["SQLITE_MAGIC", "BLOCK_ROWS", "DB_ERRORS", "Database", "ro_uri", "text_of"]

#: The first 16 bytes of every SQLite 3 database file.
SQLITE_MAGIC = b"SQLite format 3\x00"
#: Rows per aggregate query (a ``rowid`` range); about 12 bytes of text per value.
BLOCK_ROWS = 4_000_000
#: Most blocks of a table read by ``rowid`` span; a wider span (rowids far apart) is
#: read by walking its rowids instead (``Database._rowid_ranges``).
MAX_SPAN_BLOCKS = 4096

#: What a query of a damaged file raises: ``sqlite3.Error``, or ``UnicodeDecodeError``
#: for an error message holding bytes of the file that are not UTF-8.
DB_ERRORS = (sqlite3.Error, UnicodeDecodeError)

_REEXPORT = "export the report again: nsys export --type sqlite --output REPORT.sqlite REPORT.nsys-rep"


def ro_uri(path: str) -> str:
    """``file:`` URI that opens ``path`` read-only and immutable (percent-encoded, so
    ``?``, ``#`` and ``%`` in the name are safe)."""
    return Path(os.path.abspath(path)).as_uri() + "?mode=ro&immutable=1"


def text_of(raw: bytes) -> str:
    """``text_factory`` of every connection: names are untrusted, never fail on bad UTF-8."""
    return raw.decode("utf-8", "replace")


def _reason(exc: BaseException) -> str:
    """``exc`` as one line; a ``UnicodeDecodeError`` of SQLite's message gives the
    message itself, its bad bytes replaced."""
    if isinstance(exc, UnicodeDecodeError) and isinstance(exc.object, bytes):
        return exc.object.decode("utf-8", "replace")
    return str(exc)


class Database:
    """One read-only SQLite file.

    ``tables``: {name: None} of tables and views (columns via ``columns(name)``, cached).
    Raises ``TraceFormatError`` (path, message, hint) when the file cannot be opened or
    its schema cannot be read (``file is not a database``, a cut-off file).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self.con = sqlite3.connect(ro_uri(path), uri=True, check_same_thread=False)
            self.con.text_factory = text_of
            rows = self.con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')").fetchall()
        except DB_ERRORS as exc:
            raise self.error(exc) from None
        self.tables: dict[str, None] = dict.fromkeys(r[0] for r in rows if isinstance(r[0], str))
        self._columns: dict[str, tuple[str, ...]] = {}

    def close(self) -> None:
        self.con.close()

    def error(self, exc: BaseException, what: str = "") -> TraceFormatError:
        """The ``TraceFormatError`` for a ``sqlite3`` error (while reading ``what``)."""
        where = f" while reading {what}" if what else ""
        return TraceFormatError(
            self.path,
            f"cannot read this SQLite file{where}: {_reason(exc)[:200]}",
            hint=f"is the file complete? {_REEXPORT}",
        )

    def has(self, table: str) -> bool:
        return table in self.tables

    def columns(self, table: str) -> tuple[str, ...]:
        """Column names of ``table`` (empty when it does not exist)."""
        if table not in self.tables:
            return ()
        cols = self._columns.get(table)
        if cols is None:
            rows = self.rows(f'PRAGMA table_info("{table}")', what=table)
            cols = self._columns[table] = tuple(str(r[1]) for r in rows)
        return cols

    def rows(self, sql: str, params: Sequence = (), what: str = "") -> list[tuple]:
        """All rows of ``sql`` (a Python tuple each: for small tables only)."""
        try:
            return self.con.execute(sql, params).fetchall()
        except DB_ERRORS as exc:
            raise self.error(exc, what) from None

    def one(self, sql: str, params: Sequence = (), what: str = "") -> tuple:
        rows = self.rows(sql, params, what)
        return rows[0] if rows else ()

    def int_columns(
        self, table: str, exprs: Sequence[str], *, want_rowid: bool = True, aggregates: Sequence[str] = ()
    ) -> tuple[list[np.ndarray], np.ndarray | None, list]:
        """Integer columns of every row of ``table``, in ``rowid`` order.

        ``exprs``: SQL expressions over the table's columns; a NULL reads as -1.
        Returns (one int64 array per expression; the int64 ``rowid`` of each row, or
        None when ``want_rowid`` is false or the table has no ``rowid``; the values of
        the extra SQL ``aggregates`` such as ``max(deviceId)`` over the whole table,
        combined across blocks by their function: max, min, else sum). Raises
        ``TraceFormatError``.
        """
        try:
            lo, hi = self.con.execute(f'SELECT min(rowid), max(rowid) FROM "{table}"').fetchone()
        except DB_ERRORS:  # a view or a WITHOUT ROWID table: one block, no rowids
            lo = hi = None
        # None: the whole table in one block (no rowid ranges to split it by)
        ranges: list[tuple[int, int] | None]
        if isinstance(lo, int) and isinstance(hi, int):
            ranges = list(self._rowid_ranges(table, lo, hi, BLOCK_ROWS))
        else:
            ranges = [None] if lo is None and hi is None and not self._empty(table) else []
        parts: list[list[np.ndarray]] = [[] for _ in exprs]
        rowids: list[np.ndarray] = []
        agg_parts: list[list] = [[] for _ in aggregates]
        for rng in ranges:
            where, params = ("", ()) if rng is None else (" WHERE rowid BETWEEN ? AND ?", rng)
            count, values, aggs = self._block(table, exprs, where, params, aggregates)
            for k, v in enumerate(values):
                parts[k].append(v)
            for k, v in enumerate(aggs):
                agg_parts[k].append(v)
            if rng is not None and want_rowid:
                if count == rng[1] - rng[0] + 1:  # no holes: the rowids are the range
                    rowids.append(np.arange(rng[0], rng[1] + 1, dtype=np.int64))
                else:
                    rowids.append(self._block(table, ["rowid"], where, params)[1][0])
        arrays = [_cat(p) for p in parts]
        rowid = _cat(rowids) if want_rowid and None not in ranges else None
        return arrays, rowid, [_combine(fn, vals) for fn, vals in zip(aggregates, agg_parts)]

    def int_column_blocks(
        self, table: str, exprs: Sequence[str], *, where: str = "", block_rows: int = BLOCK_ROWS
    ) -> Iterator[list[np.ndarray]]:
        """The integer columns of ``table`` as ``int_columns`` reads them (a NULL as
        -1; only the rows ``where`` holds for; no rowids), one ``rowid`` range of at
        most ``block_rows`` rows at a time, so a caller can compact each block before
        the next is read. Raises ``TraceFormatError``."""
        try:
            lo, hi = self.con.execute(f'SELECT min(rowid), max(rowid) FROM "{table}"').fetchone()
        except DB_ERRORS:  # a view or a WITHOUT ROWID table: one block
            lo = hi = None
        cond = f" AND ({where})" if where else ""
        if not (isinstance(lo, int) and isinstance(hi, int)):
            if lo is None and hi is None and not self._empty(table):
                yield self._block(table, exprs, f" WHERE ({where})" if where else "", ())[1]
            return
        for rng in self._rowid_ranges(table, lo, hi, block_rows):
            yield self._block(table, exprs, f" WHERE rowid BETWEEN ? AND ?{cond}", rng)[1]

    def _rowid_ranges(self, table: str, lo: int, hi: int, block_rows: int) -> Iterator[tuple[int, int]]:
        """Inclusive ``rowid`` ranges covering ``lo``..``hi`` of at most ``block_rows``
        rows each: spans of ``block_rows`` rowids while there are at most
        ``MAX_SPAN_BLOCKS`` of them; else (rowids far apart: a sample id of 2**62 is
        its rowid) the rowids themselves are walked, ``block_rows`` rows a range."""
        if (hi - lo) // block_rows < MAX_SPAN_BLOCKS:
            for a in range(lo, hi + 1, block_rows):
                yield a, min(a + block_rows - 1, hi)
            return
        first: int | None = lo
        while first is not None:
            last = self.one(
                f'SELECT rowid FROM "{table}" WHERE rowid >= ? ORDER BY rowid LIMIT 1 OFFSET ?',
                (first, block_rows - 1),
                what=table,
            )
            if not last or last[0] >= hi:
                yield first, hi
                return
            yield first, last[0]
            first = self.one(f'SELECT min(rowid) FROM "{table}" WHERE rowid > ?', (last[0],), what=table)[0]

    def _empty(self, table: str) -> bool:
        return not self.rows(f'SELECT 1 FROM "{table}" LIMIT 1', what=table)

    def _block(
        self, table: str, exprs: Sequence[str], where: str, params: Sequence, aggregates: Sequence[str] = ()
    ) -> tuple[int, list[np.ndarray], list]:
        """(row count, int64 columns, aggregate values) of the rows ``where`` selects.

        Fast path: the values as SQLite writes them. A value that is not an integer (a
        REAL, a TEXT, a BLOB: SQLite columns are dynamically typed) makes its column's
        text fail to parse to ``count`` numbers; then the block is read again row by
        row with every value ``CAST`` to an integer."""
        cols = [f"ifnull({e}, -1)" for e in exprs]
        select = ", ".join(["count(*)"] + [f"group_concat({c}, ',')" for c in cols] + list(aggregates))
        got = self.one(f'SELECT {select} FROM "{table}"{where}', params, what=table)
        count = int(got[0] or 0)
        values = self._parse(got[1 : 1 + len(cols)], count)
        if values is None:
            values = self._slow(table, [f"ifnull(CAST({e} AS INTEGER), -1)" for e in exprs], where, params, count)
        return count, values, list(got[1 + len(cols) :])

    @staticmethod
    def _parse(texts: Sequence, count: int) -> list[np.ndarray] | None:
        out = []
        for s in texts:
            if count == 0:
                out.append(np.zeros(0, dtype=np.int64))
                continue
            if not isinstance(s, str):
                return None
            try:
                with warnings.catch_warnings():  # numpy warns, or newer raises, on a value it cannot read
                    warnings.simplefilter("ignore", DeprecationWarning)
                    a = np.fromstring(s, dtype=np.int64, sep=",")  # C parser; exact for int64
            except ValueError:  # a TEXT or BLOB value: read row by row with CAST
                return None
            if a.shape[0] != count:
                return None
            out.append(a)
        return out

    def _slow(self, table: str, cols: Sequence[str], where: str, params: Sequence, count: int) -> list[np.ndarray]:
        """The same columns through the row cursor (exact, slower)."""
        try:
            cur = self.con.execute(f'SELECT {", ".join(cols)} FROM "{table}"{where}', params)
            flat = np.fromiter(itertools.chain.from_iterable(cur), dtype=np.int64)
        except (*DB_ERRORS, OverflowError, ValueError, TypeError) as exc:
            raise self.error(exc, table) from None
        k = len(cols)
        if k == 0 or flat.shape[0] != k * count:
            raise self.error(ValueError("rows changed while read"), table)
        flat = flat.reshape(-1, k)
        return [np.ascontiguousarray(flat[:, j]) for j in range(k)]

    def texts(self, sql: str, what: str = "") -> list:
        """The first column of every row of ``sql`` (a Python object per row: for
        text columns such as NVTX messages)."""
        try:
            return [r[0] for r in self.con.execute(sql)]
        except DB_ERRORS as exc:
            raise self.error(exc, what) from None


def _cat(parts: list[np.ndarray]) -> np.ndarray:
    if not parts:
        return np.zeros(0, dtype=np.int64)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _combine(fn: str, values: list):
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    name = fn.split("(", 1)[0].strip().lower()
    if name == "max":
        return max(vals)
    if name == "min":
        return min(vals)
    return sum(vals)
