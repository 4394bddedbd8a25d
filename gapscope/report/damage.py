"""What the loader's warnings say about a trace's completeness: cut off, events skipped
or repaired, or intact.

Shared by every command that judges a trace rather than only showing it (``gapscope
diff`` refuses a verdict it cannot support, ``gapscope ranks`` leaves a damaged rank out
of the straggler verdict). The loader states damage only as ``TraceWarning`` messages;
this module reads them in one place:

- **truncated**: a message starting ``file truncated`` (``parsers.chrome.recover``: the
  file ends inside an event, the events array or the root object). What followed the
  cut is lost, so the trace's last stretch is incomplete.
- **repaired**: a message that skipped or replaced something (``skipped``,
  ``replaced``, ``malformed``, ``after the end of the JSON document``): the trace may
  miss events anywhere.
- **open-ended**: a range the file never closes, which the loader drew to the end of
  the trace (``never closed`` / ``never ended``: an ASCII ``begin`` without its
  ``end``, Chrome ``B`` or async slices, NVTX ranges): what a text timeline cut off
  looks like, and a step drawn so has an invented end.

Every other warning (a header field ignored, a flow not bound) is shown but does not
make the trace damaged.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from gapscope.parsers.model import GPU_KINDS, Trace, TraceWarning

__all__ = ["Damage", "damage_of", "warning_rows", "complete_until_ns"]

_TRUNCATED = re.compile(r"^file truncated\b")
_REPAIRED = re.compile(r"skipped|replaced|malformed|after the end of the JSON document", re.IGNORECASE)
_OPEN_ENDED = re.compile(r"never closed|never ended", re.IGNORECASE)


@dataclasses.dataclass(frozen=True)
class Damage:
    """The damage the loader reported for one trace.

    ``truncated_line``: the 1-based line where the file was cut off (None when it was
    not, or the line is unknown); ``truncated``: the file was cut off; ``repaired``:
    number of warnings that skipped or replaced events or values; ``open_ended``:
    number of warnings of ranges never closed, drawn to the end of the trace."""

    truncated: bool
    truncated_line: int | None
    repaired: int
    open_ended: int = 0

    @property
    def damaged(self) -> bool:
        return self.truncated or self.repaired > 0 or self.open_ended > 0

    def words(self) -> str:
        """``cut off at line 462``, ``3 repairs on load (events skipped or values
        replaced)``, both joined by ``; ``, or ``""`` for an intact trace."""
        parts = []
        if self.truncated:
            parts.append("cut off" + (f" at line {self.truncated_line}" if self.truncated_line is not None else ""))
        if self.repaired:
            parts.append(
                f"{self.repaired} repair{'s' if self.repaired != 1 else ''} on load (events skipped or values replaced)"
            )
        if self.open_ended:
            parts.append(
                f"{self.open_ended} range{'s' if self.open_ended != 1 else ''} never closed (drawn to the end of the file)"
            )
        return "; ".join(parts)

    def as_json(self) -> dict:
        return dict(
            truncated=self.truncated,
            truncated_line=self.truncated_line,
            repaired_count=self.repaired,
            open_ended_count=self.open_ended,
        )


def damage_of(warnings: tuple[TraceWarning, ...] | list[TraceWarning]) -> Damage:
    """The ``Damage`` that a trace's loader ``warnings`` report (see the module
    docstring for which messages count)."""
    truncated = [w for w in warnings if _TRUNCATED.match(w.message)]
    rest = [w for w in warnings if not _TRUNCATED.match(w.message)]
    repaired = sum(1 for w in rest if _REPAIRED.search(w.message))
    open_ended = sum(1 for w in rest if not _REPAIRED.search(w.message) and _OPEN_ENDED.search(w.message))
    line = next((w.line for w in truncated if w.line is not None), None)
    return Damage(bool(truncated), line, int(repaired), int(open_ended))


def warning_rows(warnings: tuple[TraceWarning, ...] | list[TraceWarning]) -> list[dict]:
    """The loader's warnings as JSON rows ``{line, field, message}`` (the report's
    ``warnings`` key; ``line``/``field`` None when unknown)."""
    return [dict(line=w.line, field=w.field, message=w.message) for w in warnings]


def complete_until_ns(trace: Trace, device: int) -> int | None:
    """For a cut-off trace, the time (ns, the trace's clock) up to which device
    ``device``'s GPU work is taken as complete: the earliest, over the device's GPU
    streams, of the last recorded end of a GPU op. A stream's events after the cut are
    lost, so work past that time may be missing on some stream. None when the device
    has no GPU op (nothing is known to be complete)."""
    gpu_kind = np.isin(trace.kind, np.array([int(k) for k in GPU_KINDS], dtype=trace.kind.dtype))
    lanes = [ln.index for ln in trace.lanes if ln.is_gpu and ln.device == device]
    ends = []
    for k in lanes:
        a, z = int(trace.lane_offsets[k]), int(trace.lane_offsets[k + 1])
        m = gpu_kind[a:z]
        if m.any():
            ends.append(int((trace.start_ns[a:z][m] + trace.dur_ns[a:z][m]).max()))
    return min(ends) if ends else None
