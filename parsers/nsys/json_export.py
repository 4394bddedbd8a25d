"""Nsight Systems' JSON export (``nsys export --type json``), recognised and refused.

That export is newline-delimited: one JSON object per line, each a serialized
protobuf message (``{"Type":48,"TraceProcessEvent":{...}}``, ``{"Type":79,
"CudaEvent":{...}}``, ``{"type":"String","id":...,"value":...}``, ``{"data":[...]}``),
with names as string ids resolved elsewhere in the file. It is not Chrome trace JSON,
and the SQLite export of the same report holds the same events in a form gapscope
reads, so the error names the format, the line where the second record starts, and
the command that makes the SQLite export.
"""

from __future__ import annotations

import msgspec

from gapscope.parsers.errors import TraceFormatError
from gapscope.parsers.json.scan import Text

__all__ = ["refuse_json_export", "looks_like_record"]

#: Longest first line examined (an Nsight record line is short; a one-line Chrome
#: trace is not looked at beyond this).
_FIRST_LINE_MAX = 1 << 20
_TYPED = frozenset({"String", "ThreadName", "Stream", "ProcessStream", "StreamContent"})


def looks_like_record(obj: object) -> bool:
    """True for a decoded JSON object shaped like a record of Nsight's JSON export."""
    if not isinstance(obj, dict) or "traceEvents" in obj:
        return False
    if isinstance(obj.get("Type"), int) and any(k.endswith("Event") and isinstance(v, dict) for k, v in obj.items()):
        return True
    if obj.get("type") in _TYPED and ("id" in obj or "globalTid" in obj or "globalPid" in obj):
        return True
    return set(obj) == {"data"} and isinstance(obj["data"], list)


def refuse_json_export(path: str, data: Text, start: int = 0) -> None:
    """Raise ``TraceFormatError`` when ``data`` (text starting at ``start``) is Nsight's
    JSON export: a first line that is a whole JSON object shaped like its records,
    followed by another record line. Looks at the first two lines only."""
    nl = data.find(b"\n", start, start + _FIRST_LINE_MAX)
    if nl < 0:
        return
    first = bytes(data[start:nl]).strip()
    if not (first.startswith(b"{") and first.endswith(b"}")):
        return
    try:
        obj = msgspec.json.decode(first)
    except (msgspec.DecodeError, RecursionError):
        return
    if not looks_like_record(obj):
        return
    pos = nl + 1
    while pos < len(data) and data[pos : pos + 1] in (b"\r", b"\n", b" ", b"\t"):
        pos += 1
    if data[pos : pos + 1] != b"{":
        return
    line = data.count(b"\n", 0, pos) + 1
    column = pos - (data.rfind(b"\n", 0, pos) + 1) + 1
    raise TraceFormatError(
        path,
        "an Nsight Systems JSON export (one JSON record per line; the second record "
        "starts here), not a trace gapscope reads",
        line=line,
        column=column,
        hint="export the report to SQLite instead: nsys export --type sqlite --output REPORT.sqlite REPORT.nsys-rep",
    )
