"""The header of a Chrome / Kineto trace (the top-level keys beside ``traceEvents``),
read as untrusted input.

Every header field reaches ``SourceInfo`` through ``checked``, whatever path decoded
the file (one typed decode, the C scanner, the decode in parts, the recovery of a
damaged or truncated file: ``gapscope.parsers.chrome.loader._source_info`` reads the
header dict each of them gives). A value that is huge (beyond int64 or float range,
``1e999``), not finite (``NaN``/``Infinity``, or the sentinel strings
``gapscope.parsers.json.scan.repair_nonfinite`` puts in their place), of the wrong
type, out of range, or that could not be decoded at all (``Unreadable``) becomes a
warning naming the field (``deviceProperties[0].totalGlobalMem``) and is left out;
the trace loads. Fields follow Kineto's ``ChromeTraceLogger`` (``schemaVersion``,
``deviceProperties``, ``distributedInfo``, ``baseTimeNanoseconds``, ``traceName``)
and the Trace Event Format (``displayTimeUnit``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any, Literal

from gapscope.parsers.json.scan import SENTINEL_VALUES

__all__ = ["Unreadable", "HeaderValues", "checked", "read_header", "INT64_MIN", "INT64_MAX"]

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
#: Most characters of a header string kept (``traceName``, ``displayTimeUnit``).
TEXT_MAX_CHARS = 4096
#: Deepest nesting kept inside a ``deviceProperties`` entry (Kineto's are flat).
PROPS_MAX_DEPTH = 8
#: Most warnings about one header (the rest are counted in one more).
MAX_WARNINGS = 20

#: ``warn(field, message)``.
FieldWarn = Callable[[str, str], None]


@dataclasses.dataclass(frozen=True)
class Unreadable:
    """A header value the JSON decoder refused (a number beyond float range such as
    ``1e999``, an integer of more digits than it takes): ``head`` is its first bytes,
    ``why`` the decoder's reason (``Number out of range``), for the warning."""

    head: str
    why: str = "not JSON"


#: Kind of value a field must hold (``checked``).
Kind = Literal["integer", "number", "string", "object", "array"]
#: The Python types of each kind.
_KINDS: dict[str, tuple[type, ...]] = {
    "integer": (int, float),
    "number": (int, float),
    "string": (str,),
    "object": (dict,),
    "array": (list,),
}


def _shown(v: object) -> str:
    """``v`` as the warning shows it (at most 40 characters)."""
    if isinstance(v, Unreadable):
        return v.head[:40] + ("" if len(v.head) <= 40 else "…")
    if isinstance(v, str) and v in SENTINEL_VALUES:
        return {"N": "NaN", "Infini": "Infinity", "-Infini": "-Infinity"}[v]
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    if isinstance(v, int) and not isinstance(v, bool) and not INT64_MIN <= v <= INT64_MAX:
        digits = len(str(abs(v))) if abs(v) < 10**4000 else 4000
        return f"an integer of {digits}{'+' if digits >= 4000 else ''} digits"
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, list):
        return "an array"
    text = repr(v)
    return text if len(text) <= 40 else text[:39] + "…"


def checked(
    value: object,
    field: str,
    kind: Kind,
    warn: FieldWarn,
    lo: int | float | None = None,
    hi: int | float | None = None,
) -> Any:
    """``value`` (the header field named ``field``, e.g. ``distributedInfo.rank``) when
    it is of ``kind`` (``"integer"``: an int, or a float with no fraction, in int64;
    ``"number"``: a finite int or float, ints in int64; ``"string"``, ``"object"``,
    ``"array"``) and within [``lo``, ``hi``] (numbers); else None, with one
    ``warn(field, message)`` naming the field, the value and why it is ignored. None
    (absent, or JSON ``null``) gives None without a word. Integers come back as
    ``int``, strings cut to ``TEXT_MAX_CHARS``. Never raises."""
    if value is None:
        return None
    want = _KINDS[kind]
    why: str | None = None
    if isinstance(value, Unreadable):
        why = f"cannot be decoded ({value.why[:60]})"
    elif isinstance(value, bool) or not isinstance(value, want):
        why = f"not {'an' if kind[0] in 'aeiou' else 'a'} {kind}"
    elif isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
        why = "beyond the 64-bit integer range"
    elif isinstance(value, float) and not math.isfinite(value):
        why = "not a finite number"
    elif kind == "integer" and isinstance(value, float) and not value.is_integer():
        why = "not an integer"
    elif kind == "integer" and isinstance(value, float) and not INT64_MIN <= value <= INT64_MAX:
        why = "beyond the 64-bit integer range"
    elif isinstance(value, (int, float)) and ((lo is not None and value < lo) or (hi is not None and value > hi)):
        why = f"out of range (expected {lo if lo is not None else '…'} to {hi if hi is not None else '…'})"
    if why is not None:
        warn(field, f"header field {field} is {_shown(value)}: {why}; ignored")
        return None
    if kind == "integer":
        return int(value)  # type: ignore[call-overload]
    if kind == "string":
        return str(value)[:TEXT_MAX_CHARS]
    return value


@dataclasses.dataclass
class HeaderValues:
    """What a header says, every field checked (``read_header``); None where a field is
    absent or was refused. ``device_properties``: ``deviceProperties`` (or, in older
    Kineto, ``computeProperties``) entries, each a dict with its refused values left out."""

    schema_version: int | None = None
    base_time_ns: int | None = None
    display_time_unit: str | None = None
    trace_name: str | None = None
    rank: int | None = None
    world_size: int | None = None
    device_properties: list[dict] = dataclasses.field(default_factory=list)


#: deviceProperties fields that are numbers in every Kineto version.
PROP_NUMBERS = (
    "computeMajor",
    "computeMinor",
    "totalGlobalMem",
    "numSms",
    "warpSize",
    "maxThreadsPerBlock",
    "maxThreadsPerMultiprocessor",
    "regsPerBlock",
    "regsPerMultiprocessor",
    "sharedMemPerBlock",
    "sharedMemPerMultiprocessor",
    "maxSharedMemoryPerMultiProcessor",
    "l2CacheSize",
    "id",
)
#: deviceProperties fields that are strings.
PROP_STRINGS = ("name", "gcnArchName")


def read_header(h: Mapping[str, Any], warn: FieldWarn) -> HeaderValues:
    """The checked fields of the header ``h`` (key → decoded value, ``Unreadable`` for
    one the decoder refused). Ranges: ``schemaVersion`` 0 to 2**31-1,
    ``baseTimeNanoseconds`` 0 to int64 max (epoch ns), ``distributedInfo.rank``
    and ``.world_size`` int32 (whether a rank lies inside its world is the rank
    set's to judge), ``world_size`` at least 1; either may be absent without a word. At most ``MAX_WARNINGS`` warnings, then
    one counting the rest. Never raises."""
    said: list[tuple[str, str]] = []

    def note(field: str, message: str) -> None:
        said.append((field, message))

    out = HeaderValues()
    out.schema_version = checked(h.get("schemaVersion"), "schemaVersion", "integer", note, 0, 2**31 - 1)
    out.base_time_ns = checked(h.get("baseTimeNanoseconds"), "baseTimeNanoseconds", "integer", note, 0)
    out.display_time_unit = checked(h.get("displayTimeUnit"), "displayTimeUnit", "string", note)
    out.trace_name = checked(h.get("traceName"), "traceName", "string", note)
    di = checked(h.get("distributedInfo"), "distributedInfo", "object", note)
    if di is not None:
        # a missing rank or world_size is no damage: Kineto writes distributedInfo
        # without world_size in single-process runs (hta/inference_rank_1), and the rank
        # set falls back to the file name and the ranks it holds
        out.rank = checked(di.get("rank"), "distributedInfo.rank", "integer", note, -(2**31), 2**31 - 1)
        out.world_size = checked(di.get("world_size"), "distributedInfo.world_size", "integer", note, 1, 2**31 - 1)
    key = "deviceProperties" if h.get("deviceProperties") else "computeProperties"
    props = checked(h.get(key), key, "array", note)
    for n, p in enumerate(props or []):
        entry = checked(p, f"{key}[{n}]", "object", note)
        if entry is not None:
            out.device_properties.append(_device_entry(entry, f"{key}[{n}]", note))
    for field, message in said[:MAX_WARNINGS]:
        warn(field, message)
    if len(said) > MAX_WARNINGS:
        warn(said[MAX_WARNINGS][0], f"{len(said) - MAX_WARNINGS} more header fields ignored")
    return out


def _device_entry(prop: dict, where: str, warn: FieldWarn) -> dict:
    """``prop`` (one ``deviceProperties`` entry) with the values ``checked`` refuses
    left out: ``PROP_NUMBERS`` that are not finite numbers, ``PROP_STRINGS`` that are
    not strings, and anywhere in it an integer beyond int64, a float that is not
    finite, an unreadable value or nesting deeper than ``PROPS_MAX_DEPTH`` (the
    report and the trace cache write every value)."""
    out: dict = {}
    for k, v in prop.items():
        field = f"{where}.{k}"
        if k in PROP_NUMBERS:
            got = checked(v, field, "number", warn)
        elif k in PROP_STRINGS:
            got = checked(v, field, "string", warn)
        else:
            got = _plain(v, field, warn, 1)
        if got is not None or v is None:
            out[k] = got
    return out


def _plain(v: object, field: str, warn: FieldWarn, depth: int) -> object:
    """``v`` with what JSON, msgpack and a report cannot write dropped (with a warning
    each); None when ``v`` itself is dropped."""
    if isinstance(v, dict):
        if depth > PROPS_MAX_DEPTH:
            warn(field, f"header field {field} is nested more than {PROPS_MAX_DEPTH} deep; ignored")
            return None
        kept = {}
        for k, x in v.items():
            got = _plain(x, f"{field}.{k}", warn, depth + 1)
            if got is not None or x is None:
                kept[k] = got
        return kept
    if isinstance(v, list):
        if depth > PROPS_MAX_DEPTH:
            warn(field, f"header field {field} is nested more than {PROPS_MAX_DEPTH} deep; ignored")
            return None
        return [_plain(x, f"{field}[{j}]", warn, depth + 1) for j, x in enumerate(v)]
    if isinstance(v, Unreadable) or (isinstance(v, (int, float)) and not isinstance(v, bool)):
        return checked(v, field, "number", warn)
    return v
