"""msgspec schemas for the Chrome Trace Event Format / Kineto JSON (typed decode).

Only the timeline fields and the few ``args`` fields a timeline needs
(``KinetoArgs``) are decoded; other args keys are skipped and read again from the
text, lazily, when the detail view asks. Field types are deliberately wide
(numbers or strings) so that odd but usable files still take the fast path.
Source: Trace Event Format (Google, 2016), Kineto ``output_json.cpp``.
"""

from __future__ import annotations

import decimal
from typing import Union

import msgspec

__all__ = ["Event", "EventRawArgs", "ObjectTrace", "KinetoArgs", "NO_ARGS", "EventTimes", "EMPTY_ARGS", "Scalar"]

Scalar = Union[int, float, str, None]

#: Shared default for events without ``args``.
EMPTY_ARGS = msgspec.Raw(b"{}")


class KinetoArgs(msgspec.Struct, frozen=True, gc=False):
    """The ``args`` fields a timeline needs (Kineto names; -1/None = absent).

    ``name``/``sort_index``/``labels`` are for ``M`` metadata events. Other keys are
    skipped while decoding and read from the text only when the detail view asks.
    """

    correlation: Scalar = -1
    device: Scalar = -1
    stream: Scalar = -1
    bytes: Scalar = None
    size: Scalar = None
    external_id: Scalar = msgspec.field(default=-1, name="External id")
    external_id_old: Scalar = msgspec.field(default=-1, name="external id")
    memcpy_kind: Scalar = msgspec.field(default=None, name="memcpy kind")
    kind: Scalar = None
    src_kind: Scalar = msgspec.field(default=None, name="src kind")
    dst_kind: Scalar = msgspec.field(default=None, name="dst kind")
    name: Scalar = None
    sort_index: Scalar = None
    labels: Scalar = None



#: Shared value for events without ``args``.
NO_ARGS = KinetoArgs()


class Event(msgspec.Struct, gc=False):
    """One ``traceEvents`` entry: timeline fields only (``ts``/``dur`` in µs)."""

    ph: Union[str, None] = None
    name: Scalar = None
    cat: Scalar = None
    pid: Scalar = None
    tid: Scalar = None
    ts: Scalar = None
    dur: Scalar = None
    id: Scalar = None
    bp: Union[str, None] = None
    bind_id: Scalar = None
    flow_in: Union[bool, None] = None
    flow_out: Union[bool, None] = None
    args: KinetoArgs = NO_ARGS


class EventRawArgs(msgspec.Struct, gc=False):
    """``Event`` for the tolerant path when ``args`` is not an object."""

    ph: Union[str, None] = None
    name: Scalar = None
    cat: Scalar = None
    pid: Scalar = None
    tid: Scalar = None
    ts: Scalar = None
    dur: Scalar = None
    id: Scalar = None
    bp: Union[str, None] = None
    bind_id: Scalar = None
    flow_in: Union[bool, None] = None
    flow_out: Union[bool, None] = None
    args: msgspec.Raw = EMPTY_ARGS


class ObjectTrace(msgspec.Struct):
    """JSON object form: ``{"traceEvents": [...], ...header keys}``."""

    traceEvents: list[Event]
    schemaVersion: msgspec.Raw = msgspec.Raw(b"null")
    deviceProperties: msgspec.Raw = msgspec.Raw(b"null")
    computeProperties: msgspec.Raw = msgspec.Raw(b"null")
    distributedInfo: msgspec.Raw = msgspec.Raw(b"null")
    baseTimeNanoseconds: msgspec.Raw = msgspec.Raw(b"null")
    displayTimeUnit: msgspec.Raw = msgspec.Raw(b"null")
    traceName: msgspec.Raw = msgspec.Raw(b"null")
    systemTraceEvents: msgspec.Raw = msgspec.Raw(b"null")


class EventTimes(msgspec.Struct, gc=False):
    """Exact decimal ``ts``/``dur`` of one event (the slow, exact path)."""

    ts: Union[decimal.Decimal, None] = None
    dur: Union[decimal.Decimal, None] = None
