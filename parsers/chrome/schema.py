"""msgspec schemas for the Chrome Trace Event Format / Kineto JSON (typed decode).

Only the timeline fields and the few ``args`` fields a timeline needs
(``KinetoArgs``) are decoded; other args keys are skipped and read again from the
text, lazily, when the detail view asks. Field types are deliberately wide
(numbers or strings) so that odd but usable files still take the fast path.
Source: Trace Event Format (Google, 2016), Kineto ``output_json.cpp``.
"""

from __future__ import annotations

import decimal
import types
from typing import Any, ClassVar, Union

import msgspec

__all__ = [
    "Event",
    "XEvent",
    "AnyEvent",
    "EVENT_CLASS",
    "PHASES",
    "as_phase_event",
    "EventRawArgs",
    "ObjectTrace",
    "KinetoArgs",
    "NO_ARGS",
    "EventTimes",
    "EMPTY_ARGS",
    "Scalar",
    "XEventRawTs",
    "AnyEventRawTs",
    "EVENT_CLASS_RAW_TS",
    "ObjectTraceRawTs",
    "RAW_NULL",
    "KinetoXArgs",
    "NO_X_ARGS",
    "ObjectHeader",
    "EVENT_LIST",
    "EVENT_LIST_RAW_TS",
]

Scalar = int | float | str | None

#: Shared default for events without ``args``.
EMPTY_ARGS = msgspec.Raw(b"{}")
#: Default of raw ``ts`` fields (absent = null).
RAW_NULL = msgspec.Raw(b"null")


class KinetoXArgs(msgspec.Struct, frozen=True, gc=False):
    """The ``args`` fields of ``X`` events a timeline needs (Kineto names; -1/None =
    absent). Other keys are skipped while decoding and read from the text only when
    the detail view asks; few fields make the decode of the bulk of a file faster."""

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
    #: MTIA dma_request: "HOST_TO_DEVICE", "DEVICE_TO_HOST". Any value: a key other
    #: traces may use for anything must not fail the decode of the event's other args
    direction: Any = None


#: Shared value for ``X`` events without ``args``.
NO_X_ARGS = KinetoXArgs()


class KinetoArgs(KinetoXArgs, frozen=True, gc=False):
    """``KinetoXArgs`` plus the fields of ``M`` metadata events (``name``,
    ``sort_index``, ``labels``), for every other phase."""

    name: Scalar = None
    sort_index: Scalar = None
    labels: Scalar = None


#: Shared value for events without ``args``.
NO_ARGS = KinetoArgs()


class Event(msgspec.Struct, gc=False):
    """One ``traceEvents`` entry of any phase (the generic form, used when the
    tagged union below does not know its ``ph``); ``ts``/``dur`` in µs."""

    ph: str | None = None
    name: Scalar = None
    cat: Scalar = None
    pid: Scalar = None
    tid: Scalar = None
    ts: Scalar = None
    dur: Scalar = None
    id: Scalar = None
    bp: str | None = None
    bind_id: Scalar = None
    flow_in: bool | None = None
    flow_out: bool | None = None
    args: KinetoArgs = NO_ARGS


class XEvent(msgspec.Struct, gc=False, tag_field="ph", tag="X"):
    """Complete event (``ph: "X"``), the bulk of every Kineto file (no ``id``/``bp``:
    a timeline does not use them on slices)."""

    ph: ClassVar[str] = "X"
    name: Scalar = None
    cat: Scalar = None
    pid: Scalar = None
    tid: Scalar = None
    ts: Scalar = None
    dur: Scalar = None
    bind_id: Scalar = None
    flow_in: bool | None = None
    flow_out: bool | None = None
    args: KinetoXArgs = NO_X_ARGS


class _FlowEvent(msgspec.Struct, gc=False, tag_field="ph"):
    """Flow event (``s``/``t``/``f``): no name or args decoded."""

    cat: Scalar = None
    pid: Scalar = None
    tid: Scalar = None
    ts: Scalar = None
    id: Scalar = None
    bp: str | None = None


class _PhaseEvent(msgspec.Struct, gc=False, tag_field="ph"):
    """Any other phase (``M``, ``B``, ``E``, ``i``, ``C``, async, ...)."""

    name: Scalar = None
    cat: Scalar = None
    pid: Scalar = None
    tid: Scalar = None
    ts: Scalar = None
    dur: Scalar = None
    id: Scalar = None
    bp: str | None = None
    args: KinetoArgs = NO_ARGS


#: Phases of the Trace Event Format (plus ``I``, ``R`` and ``=`` seen in the wild).
PHASES = (
    "X",
    "B",
    "E",
    "i",
    "I",
    "C",
    "M",
    "s",
    "t",
    "f",
    "b",
    "e",
    "n",
    "S",
    "T",
    "F",
    "p",
    "P",
    "O",
    "N",
    "D",
    "R",
    "c",
    "(",
    ")",
    "V",
    "v",
    "=",
)


def _make(ph: str):
    base = _FlowEvent if ph in ("s", "t", "f") else _PhaseEvent
    name = {"(": "Open", ")": "Close", "=": "Eq"}.get(ph, ph)
    return msgspec.defstruct(
        f"Event_{name}",
        [],
        bases=(base,),
        tag=ph,
        gc=False,
        namespace={"ph": ph, "__annotations__": {"ph": ClassVar[str]}},
    )


#: Event class of each phase (tagged union on ``ph``).
EVENT_CLASS: dict[str, type[msgspec.Struct]] = {"X": XEvent, **{ph: _make(ph) for ph in PHASES if ph != "X"}}
AnyEvent = Union[tuple(EVENT_CLASS.values())]  # type: ignore[valid-type]  # noqa: UP007 - a Union of a run-time tuple
#: ``list[AnyEvent]``, the type a decoder of an event array is given. Built as a value:
#: ``AnyEvent`` is a Union made at run time, which mypy cannot read as a type, so
#: ``list[AnyEvent]`` written in an expression fails the check (the same object).
EVENT_LIST = types.GenericAlias(list, (AnyEvent,))


def as_phase_event(e: Event):
    """A generic ``Event`` as the class of its phase (itself when ``ph`` is unknown)."""
    cls = EVENT_CLASS.get(e.ph) if isinstance(e.ph, str) else None
    if cls is None:
        return e
    fields = cls.__struct_fields__
    return cls(**{f: getattr(e, f) for f in fields if hasattr(e, f)})


class EventRawArgs(msgspec.Struct, gc=False):
    """``Event`` for the tolerant path when ``args`` is not an object."""

    ph: str | None = None
    name: Scalar = None
    cat: Scalar = None
    pid: Scalar = None
    tid: Scalar = None
    ts: Scalar = None
    dur: Scalar = None
    id: Scalar = None
    bp: str | None = None
    bind_id: Scalar = None
    flow_in: bool | None = None
    flow_out: bool | None = None
    args: msgspec.Raw = EMPTY_ARGS


class ObjectTrace(msgspec.Struct):
    """JSON object form: ``{"traceEvents": [...], ...header keys}``."""

    traceEvents: list[AnyEvent]  # type: ignore[valid-type]
    schemaVersion: msgspec.Raw = msgspec.Raw(b"null")
    deviceProperties: msgspec.Raw = msgspec.Raw(b"null")
    computeProperties: msgspec.Raw = msgspec.Raw(b"null")
    distributedInfo: msgspec.Raw = msgspec.Raw(b"null")
    baseTimeNanoseconds: msgspec.Raw = msgspec.Raw(b"null")
    displayTimeUnit: msgspec.Raw = msgspec.Raw(b"null")
    traceName: msgspec.Raw = msgspec.Raw(b"null")
    systemTraceEvents: msgspec.Raw = msgspec.Raw(b"null")


class ObjectHeader(msgspec.Struct):
    """The object form with ``traceEvents`` kept as its JSON text: for the header keys
    of a document whose events are decoded separately (``chrome_parallel``)."""

    traceEvents: msgspec.Raw
    schemaVersion: msgspec.Raw = msgspec.Raw(b"null")
    deviceProperties: msgspec.Raw = msgspec.Raw(b"null")
    computeProperties: msgspec.Raw = msgspec.Raw(b"null")
    distributedInfo: msgspec.Raw = msgspec.Raw(b"null")
    baseTimeNanoseconds: msgspec.Raw = msgspec.Raw(b"null")
    displayTimeUnit: msgspec.Raw = msgspec.Raw(b"null")
    traceName: msgspec.Raw = msgspec.Raw(b"null")
    systemTraceEvents: msgspec.Raw = msgspec.Raw(b"null")


class XEventRawTs(msgspec.Struct, gc=False, tag_field="ph", tag="X"):
    """``XEvent`` with ``ts`` kept as its JSON text (``msgspec.Raw``; ``null`` when
    absent), for files whose timestamps a float64 cannot hold (epoch µs with a
    fraction): ``chrome_times.raw_to_ns`` reads them exactly, vectorised."""

    ph: ClassVar[str] = "X"
    name: Scalar = None
    cat: Scalar = None
    pid: Scalar = None
    tid: Scalar = None
    ts: msgspec.Raw = RAW_NULL
    dur: Scalar = None
    bind_id: Scalar = None
    flow_in: bool | None = None
    flow_out: bool | None = None
    args: KinetoXArgs = NO_X_ARGS


class _PhaseEventRawTs(msgspec.Struct, gc=False, tag_field="ph"):
    """``_PhaseEvent`` with ``ts`` kept as its JSON text (see ``XEventRawTs``)."""

    name: Scalar = None
    cat: Scalar = None
    pid: Scalar = None
    tid: Scalar = None
    ts: msgspec.Raw = RAW_NULL
    dur: Scalar = None
    id: Scalar = None
    bp: str | None = None
    args: KinetoArgs = NO_ARGS


def _make_raw(ph: str):
    name = {"(": "Open", ")": "Close", "=": "Eq"}.get(ph, ph)
    return msgspec.defstruct(
        f"EventRawTs_{name}",
        [],
        bases=(_PhaseEventRawTs,),
        tag=ph,
        gc=False,
        namespace={"ph": ph, "__annotations__": {"ph": ClassVar[str]}},
    )


#: Event class of each phase when timestamps are kept as text: ``X`` and the other
#: timed phases keep ``ts`` raw; flow events (bound with a tolerance) keep floats.
EVENT_CLASS_RAW_TS: dict[str, type[msgspec.Struct]] = {
    "X": XEventRawTs,
    **{ph: (EVENT_CLASS[ph] if ph in ("s", "t", "f") else _make_raw(ph)) for ph in PHASES if ph != "X"},
}
AnyEventRawTs = Union[tuple(EVENT_CLASS_RAW_TS.values())]  # type: ignore[valid-type]  # noqa: UP007 - a Union of a run-time tuple
#: ``list[AnyEventRawTs]`` as a value (see ``EVENT_LIST``).
EVENT_LIST_RAW_TS = types.GenericAlias(list, (AnyEventRawTs,))


class ObjectTraceRawTs(msgspec.Struct):
    """``ObjectTrace`` whose ``X`` events keep ``ts`` as text (``XEventRawTs``)."""

    traceEvents: list[AnyEventRawTs]  # type: ignore[valid-type]
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

    ts: decimal.Decimal | None = None
    dur: decimal.Decimal | None = None
