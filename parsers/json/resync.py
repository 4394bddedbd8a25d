"""Corruption in the middle of a Chrome-trace events array: find it, say where, and
read on after it.

``json.boundaries.scan_elements`` stops at the first structural damage: an unterminated
string or a missing brace leaves an element open to the end of the file (it looks like
a truncation), a stray ``]`` or ``}`` closes the array early, and a second JSON
document after the first leaves text after the root. Profilers write one event per
line (or one event starting per line, at a fixed indentation, in pretty-printed
Kineto files), so the scan resumes at the next line that starts an event object at
the indentation of the events before the damage (or at the events array of a
following ``{"traceEvents": [`` document). When no such line follows, the damage is
a truncation and nothing changes.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

import msgspec
import numpy as np

from gapscope.parsers.json.boundaries import (
    NEW_DOCUMENT,
    ScanResult,
    find_events_array,
    line_prefix,
    next_event_line,
    scan_elements,
)

__all__ = ["Break", "scan_resync", "error_offset"]

#: At most this many resynchronisations (each one a warning); beyond, the rest is lost.
MAX_BREAKS = 1000
_BYTE = re.compile(r"\(byte (\d+)\)")
_WS = b" \t\r"


@dataclasses.dataclass
class Break:
    """One damaged stretch: from ``at`` (start of the broken element, or the stray
    closing bracket) to ``resume`` (where reading resumed); ``what`` says which
    (``"never closed"`` for an element open until the resumption point)."""

    at: int
    resume: int
    what: str


def scan_resync(
    data: bytes | bytearray, begin: int, tail_state: Callable[[int], int]
) -> tuple[ScanResult, list[Break]]:
    """``scan_elements`` from ``begin``, resumed after mid-file damage.

    ``tail_state(close)`` tells what follows the array's ``]`` at ``close``: -1 a proper
    end of the document, an offset where a further document starts, -2 damage.
    Returns the elements of all scanned stretches (the last stretch's
    ``close``/``partial_start``) and the damaged stretches skipped. Linear in the
    data size.
    """
    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    breaks: list[Break] = []
    pos = begin
    while len(breaks) < MAX_BREAKS:
        scan = scan_elements(data, pos)
        starts.append(scan.starts)
        ends.append(scan.ends)
        last = next((int(s[-1]) for s in reversed(starts) if s.size), -1)
        nxt = -1
        if scan.partial_start >= 0:
            at = scan.partial_start
            prefix = line_prefix(data, at)
            if prefix is None and last >= 0:
                prefix = line_prefix(data, last)
            nl = data.find(b"\n", at)
            if prefix is not None:
                nxt = next_event_line(data, nl if nl >= 0 else len(data), prefix)
            what = "never closed"
        elif scan.close >= 0:
            state = tail_state(scan.close)
            if state == -1:
                break
            if state >= 0:  # a second document: read its events array
                at, what = state, "a second JSON document follows the first"
                nxt = find_events_array(data, state)
            else:
                at = scan.close
                what = f"stray {chr(data[at])!r} ends the events array early"
                prefix = line_prefix(data, last) if last >= 0 else None
                if prefix is not None:
                    nxt = next_event_line(data, at, prefix)
        if nxt < 0:
            break
        m = NEW_DOCUMENT.match(data, nxt)
        breaks.append(Break(at, nxt, what))
        pos = m.end() if m is not None else nxt
    s = np.concatenate(starts) if starts else np.zeros(0, np.int64)
    e = np.concatenate(ends) if ends else np.zeros(0, np.int64)
    return ScanResult(s, e, scan.close, scan.partial_start), breaks


def error_offset(data: bytes | bytearray, brk: Break) -> int:
    """Offset of the first JSON syntax error in the damaged stretch (its start when
    the decoder names no position)."""
    if brk.what != "never closed":  # a stray bracket or a second document: where it starts
        return brk.at
    chunk = data[brk.at : brk.resume].rstrip(b" \t\r\n,")
    try:
        msgspec.json.decode(chunk)
    except msgspec.DecodeError as exc:
        m = _BYTE.search(str(exc))
        if m:
            return brk.at + min(int(m.group(1)), len(chunk))
    except (msgspec.ValidationError, RecursionError):
        pass
    return brk.at
