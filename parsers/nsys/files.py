"""Which Nsight Systems file a path holds, and how ``gapscope.parsers.load`` opens it.

- an SQLite export: recognised by content (the 16-byte SQLite header), whatever its
  name; read by ``gapscope.parsers.nsys.loader``;
- a report (``.nsys-rep``/``.qdrep``): a binary file with that name; exported to SQLite
  first (``gapscope.parsers.nsys.rep``);
- a gzip-compressed SQLite file: refused (SQLite reads files, not streams);
- Nsight's JSON export: refused by ``gapscope.parsers.nsys.json_export``.
"""

from __future__ import annotations

from gapscope.parsers.errors import TraceFormatError
from gapscope.parsers.model import Trace
from gapscope.parsers.nsys.rep import is_report_name
from gapscope.parsers.nsys.sql import SQLITE_MAGIC

__all__ = ["HEAD_BYTES", "SQLITE", "REPORT", "kind_of", "load", "sniff", "refuse_compressed"]

#: Bytes of the file's head that ``kind_of`` needs.
HEAD_BYTES = 4096
SQLITE, REPORT = "sqlite", "report"


def kind_of(path: str, head: bytes) -> str | None:
    """``SQLITE``, ``REPORT`` or None (not an Nsight file) from the file's first
    ``HEAD_BYTES`` (undecompressed) and its name (reports only: they are binary)."""
    if head.startswith(SQLITE_MAGIC):
        return SQLITE
    if is_report_name(path) and head and (b"\x00" in head or head.lstrip()[:1] not in (b"{", b"[")):
        return REPORT
    return None


def load(path: str, kind: str) -> Trace:
    """Load an Nsight file of ``kind`` (see ``kind_of``). Raises ``TraceFormatError``."""
    from gapscope.parsers.nsys.loader import load_nsys

    if kind == REPORT:
        from gapscope.parsers.nsys.rep import export_report

        return load_nsys(export_report(path))
    return load_nsys(path)


def sniff(path: str, kind: str) -> str:
    """``load``'s cheap checks: the file opens as SQLite and is an Nsight export (its
    schema only is read); a report is exported (once) so the viewer opens at once.
    Returns ``"nsys"``; raises ``TraceFormatError``."""
    from gapscope.parsers.nsys.loader import check_nsight
    from gapscope.parsers.nsys.sql import Database

    if kind == REPORT:
        from gapscope.parsers.nsys.rep import export_report

        path = export_report(path)
    db = Database(path)
    try:
        check_nsight(db)
    finally:
        db.close()
    return "nsys"


def refuse_compressed(path: str, data: bytes) -> None:
    """Raise ``TraceFormatError`` when decompressed ``data`` is an SQLite file."""
    if bytes(data[:16]) == SQLITE_MAGIC:
        raise TraceFormatError(
            path,
            "a gzip-compressed SQLite file",
            line=1,
            column=1,
            hint="gunzip it first: gapscope opens Nsight Systems SQLite exports uncompressed",
        )
