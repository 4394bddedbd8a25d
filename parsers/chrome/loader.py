"""Chrome Trace Event Format / Kineto (torch.profiler) JSON → ``Trace``.

Fast path: one typed ``msgspec`` decode of the timeline fields and the few ``args``
fields a timeline needs (GC off), then numpy columns; non-``X`` phases go through
``gapscope.parsers.chrome.phases``. Damaged files go through ``gapscope.parsers.chrome.recover``.
Times: ``ts``/``dur`` are µs whatever ``displayTimeUnit`` says, converted to int64 ns
exactly (``gapscope.parsers.chrome.times``, ``gapscope.parsers.chrome.text``): when the first
``EPOCH_SAMPLE_BYTES`` of the text hold a ``ts`` beyond 2**43 µs with a fraction (epoch
µs), ``ts`` of timed events is decoded as text (``msgspec.Raw``) and parsed exactly with
numpy (``chrome_times.raw_to_ns``); otherwise as float64, with the rare values a float64
cannot hold re-read from the text. Kinds from
``gapscope.parsers.kinds``, lanes from ``gapscope.parsers.lanes``, column builders in
``gapscope.parsers.chrome.columns``, checks in ``gapscope.parsers.chrome.checks``; full ``args`` and
warning lines are read back from the text (``gapscope.parsers.chrome.lazy_args``).

What ends up where: ``SourceInfo.ignored_counts`` counts phases a timeline cannot use
(``"ph P"``, ``"ph O"``, ...), Kineto forward/backward flows (``"flow fwdbwd"``) and
``systemTraceEvents``; ``SourceInfo.extra`` holds ``untimed_gpu_ops`` (GPU ops
dropped for absurd times: line, name, correlation), ``kineto_flow_events`` (``ac2g``
and older flow events, which repeat ``args.correlation``), ``flow_linked_gpu_ops``
(GPU ops linked only through those flows) and ``process_labels``.
Launch → GPU op flows come from ``correlation`` first, then from ``ac2g``/
``async_cpu_to_gpu``/``async_gpu`` flow events for GPU ops it left unlinked
(``gapscope.parsers.chrome.flows``); generic ``s``/``t``/``f`` and v2 ``bind_id`` flows are
bound to slices (``chrome_checks.bind_flows``).
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec
import numpy as np
import numpy.ma

from gapscope.parsers.chrome import checks as checks
from gapscope.parsers.chrome.args import ArgColumns
from gapscope.parsers.chrome.columns import GET, build_trace_lanes, events_at, exact_ts_from_text, label
from gapscope.parsers.chrome.flows import has_unlinked_work, kineto_flow_links, unique_pairs
from gapscope.parsers.chrome.header import Unreadable, read_header
from gapscope.parsers.chrome.lazy_args import EventArgs, EventText
from gapscope.parsers.chrome.parallel.joined import SerialFallback
from gapscope.parsers.chrome.phases import Rows, collect_metadata, collect_rows
from gapscope.parsers.chrome.scan import PH_FLOW, PH_M, PH_OTHER, PH_X, EventColumns, scan_events
from gapscope.parsers.chrome.schema import (
    EVENT_CLASS,
    ObjectHeader,
    ObjectTrace,
    ObjectTraceRawTs,
)
from gapscope.parsers.chrome.times import INVALID, MISSING, NEED_EXACT, OK
from gapscope.parsers.kinds import KINETO_CATS, KINETO_FLOW_CATS
from gapscope.parsers.lanes import Metadata
from gapscope.parsers.model import (
    Kind,
    SourceInfo,
    Trace,
    TraceWarning,
    link_by_correlation,
    repeated_correlations,
)

__all__ = ["build", "Input", "header_of"]

_WS = b" \t\r\n"
_HEADER_KEYS = (
    "schemaVersion",
    "deviceProperties",
    "computeProperties",
    "distributedInfo",
    "baseTimeNanoseconds",
    "displayTimeUnit",
    "traceName",
    "systemTraceEvents",
)
_get = GET
#: Files up to this size get ``src_line`` for every event (costs one key scan).
SRC_LINE_LIMIT_BYTES = 8 << 20
#: Largest |ts| in µs that fits int64 nanoseconds.
_TS_MAX_US = float(np.iinfo(np.int64).max // 1000)


@dataclasses.dataclass
class Input:
    """The decoded input: events (``chrome_schema`` structs, or ``JoinedEvents`` when
    decoded in parts), where they lie in the text, the header keys, recovery warnings."""

    path: str
    events: Sequence
    text: EventText
    header: dict = dataclasses.field(default_factory=dict)
    warnings: list[TraceWarning] = dataclasses.field(default_factory=list)
    x_class: type = EVENT_CLASS["X"]  # ``XEventRawTs`` when ts was kept as text
    scanned: EventColumns | None = None  # the events' columns when decoded in parts (``chrome_parallel``)
    #: a document of some of a file's events (``device_preview``): its lines are not
    #: the file's, so neither source lines nor warnings are given
    excerpt: bool = False


def header_of(obj: ObjectTrace | ObjectTraceRawTs | ObjectHeader) -> dict[str, Any]:
    """The header keys (``_HEADER_KEYS``) of a decoded object-form document, decoded;
    keys that are null or absent are left out, values that do not decode are
    ``chrome_header.Unreadable``."""
    header: dict[str, Any] = {}
    for key in _HEADER_KEYS:
        raw = getattr(obj, key)
        if bytes(raw) != b"null":
            try:
                header[key] = msgspec.json.decode(raw)
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
                # 1e999, an integer beyond 64 bits: ``read_header`` names it in a warning
                why = str(exc) or type(exc).__name__
                header[key] = Unreadable(memoryview(raw)[:48].tobytes().decode("utf-8", "replace"), why)
    return header


#: Non-``X`` phases ``chrome_phases.collect_rows`` turns into rows; others are only counted.
_HANDLED = frozenset(("B", "E", "i", "I", "R", "C", "b", "e", "n", "S", "T", "F"))

#: ``warn(event index or None, field or None, message)``: a warning whose line is not
#: known yet; ``{line:K}`` in the message stands for the line of event K.
Warn = Callable[[int | None, str | None, str], None]


def build(inp: Input, check_ids: bool = False) -> Trace:
    """The ``Trace`` of the decoded input ``inp``.

    In order: the events by phase, the ``X`` times a float64 could not hold, the rows
    of the other phases, the flow events by kind; one checked set of columns of them
    all; the lanes (and the GPU checks, which need them); the launch → GPU op links;
    the ``SourceInfo`` and the warnings with their lines; the sorted ``Trace``.

    With ``check_ids`` the events whose pid or tid is a non-finite number are skipped
    (with a warning); the first pass finds them cheaply on the lane keys and starts
    again with it set. Raises ``SerialFallback`` when input decoded in parts
    (``inp.scanned``) needs the whole event list: the caller decodes it again in one
    piece.
    """
    events, text = inp.events, inp.text
    warns: list[tuple[int | None, str | None, str]] = []

    def warn(k: int | None, field: str | None, msg: str) -> None:
        warns.append((k, field, msg))

    if not len(events) and not inp.warnings:  # a valid document with nothing in it: say so
        warn(None, "traceEvents", "the trace holds no events (its events array is empty): nothing to show")
    in_parts = inp.scanned is not None
    if inp.scanned is not None and not check_ids:
        ec = inp.scanned
    else:
        ec = scan_events(events, inp.x_class, checks.bad_id_events(events, warn, text.repaired) if check_ids else [])
    phases = _split_phases(ec, events)
    meta = Metadata()
    collect_metadata(events, phases.metadata, meta, warn)
    if not check_ids and checks.has_bad_ids(ec.lanes, phases.other_events, phases.other, text.repaired):
        if in_parts:
            raise SerialFallback("non-finite ids")
        return build(inp, check_ids=True)

    exact_ts = _exact_times(ec, phases, events, text, in_parts, warn)
    rows = _phase_rows(phases.other_events, phases.other, exact_ts, text, warn)
    flow_events = _flow_events(phases, ec)
    lanes_raw, legacy, has_v2, cat_list = ec.lanes, ec.legacy, ec.has_v2, list(ec.cats)
    cols, names, untimed = _combine(ec, phases.x, rows, events, warn)
    del ec, rows  # the per-phase columns: only ``cols`` from here on

    lanes, remap = build_trace_lanes(cols, lanes_raw, meta, legacy, warn)
    lane_final = remap[cols.lane] if cols.lane.size else cols.lane.astype(np.int32)
    cols = checks.gpu_checks(cols, lane_final, lanes, names, warn)
    lane_final = remap[cols.lane] if cols.lane.size else cols.lane.astype(np.int32)

    flows, n_flow_linked = _flows(
        events, flow_events, phases.x, cols, lane_final, lanes_raw, remap, has_v2, in_parts, warn
    )
    source = _source_info(inp, cat_list, legacy, phases.ignored, meta, warn)
    _note_build(source, flow_events.n_kineto, n_flow_linked, untimed, text)
    if inp.excerpt:
        warnings, src_line = [], None
    else:
        warnings = sorted(
            list(inp.warnings) + _resolve_warnings(text, warns), key=lambda w: (w.line is None, w.line or 0)
        )
        src_line = _src_lines(text, cols.src)
    inp.events = []
    del events  # free the decoded structs before from_columns sorts copies of the columns
    return Trace.from_columns(
        start_ns=cols.start,
        dur_ns=cols.dur,
        lane=lane_final,
        name_id=cols.name,
        kind=cols.kind,
        names=names,
        lanes=lanes,
        source=source,
        warnings=warnings,
        correlation=cols.args.correlation,
        bytes_=cols.args.bytes,
        copy_kind=cols.args.copy_kind,
        pageable=cols.args.pageable,
        value=cols.value,
        src_line=src_line,
        external_id=cols.args.external_id,
        flows=flows,
        args_loader=EventArgs(text, cols.src),
        apart_kinds=(Kind.SYNC_MARKER,),  # cuda_sync on a stream overlaps the kernels running there (B20)
    )


@dataclasses.dataclass
class _Phases:
    """Event indices by phase: ``x`` (int64, ``X`` events), ``other`` (ph → indices of
    the ``_HANDLED`` phases), ``flow`` (int64, ``s``/``t``/``f``), ``metadata``
    (``M``); ``ignored``: ``SourceInfo.ignored_counts`` (``"ph P"`` → count, ...);
    ``other_events``: event index → decoded event, for every index in ``other`` (the
    later passes look each one up several times; a dict answers faster than an event
    list decoded in parts)."""

    x: np.ndarray
    other: dict[str, list[int]]
    other_events: dict[int, Any]
    flow: np.ndarray
    metadata: list[int]
    ignored: dict[str, int]


def _split_phases(ec: EventColumns, events: Sequence) -> _Phases:
    """The events of ``ec`` by phase; phases a timeline cannot use (not ``_HANDLED``:
    ``P``, ``O``, ...) are only counted."""
    code = ec.code
    ks = np.flatnonzero(code == PH_OTHER).tolist()
    picked = events_at(events, ks)
    other: dict[str, list[int]] = {}
    for k, e in zip(ks, picked):
        ph = e.ph
        other.setdefault(ph if isinstance(ph, str) else repr(ph), []).append(k)
    ignored: dict[str, int] = {}
    for ph in list(other):
        if ph not in _HANDLED:
            ignored[f"ph {ph}"] = len(other.pop(ph))
    return _Phases(
        x=np.flatnonzero(code == PH_X),
        other=other,
        other_events=dict(zip(ks, picked)),
        flow=np.flatnonzero(code == PH_FLOW),
        metadata=np.flatnonzero(code == PH_M).tolist(),
        ignored=ignored,
    )


def _exact_times(
    ec: EventColumns, phases: _Phases, events: Sequence, text: EventText, in_parts: bool, warn: Warn
) -> dict[int, int]:
    """The ``X`` times a float64 could not hold, fixed in place in ``ec``.

    A ``ts`` of 2**43 µs or more with a fraction (``NEED_EXACT``, epoch µs) is read
    again exactly from ``text`` (``INVALID`` where it cannot be); a ``dur`` that large
    is made absurd for ``checks.validate`` to flag; a missing ``dur`` becomes 0, with a
    warning. Returns {event index: exact ``ts`` in ns} of the other phases' events
    with such a ``ts``. Raises ``SerialFallback`` when a ``ts`` must be read again and
    the input was decoded in parts (``in_parts``).
    """
    xi = phases.x
    start, st_status, dur, du_status = ec.start_ns, ec.start_status, ec.dur_ns, ec.dur_status
    exact_ts: dict[int, int] = {}
    need = np.flatnonzero(st_status == NEED_EXACT)
    other_need = [
        k
        for ks in phases.other.values()
        for k in ks  # beyond int64 ns: flagged later, not read
        if isinstance(ts := phases.other_events[k].ts, float) and 2.0**43 <= abs(ts) < _TS_MAX_US
    ]
    if need.size or other_need:
        if in_parts:
            raise SerialFallback("timestamps beyond float64 precision")
        ks = np.concatenate((xi[need], np.array(other_need, dtype=np.int64)))
        other = np.array([float(phases.other_events[k].ts) for k in other_need], dtype=np.float64)
        fl = np.floor(other)
        approx = np.concatenate(
            (start[need], fl.astype(np.int64) * 1000 + np.rint((other - fl) * 1000).astype(np.int64))
        )
        ns, ok = exact_ts_from_text(events, text, ks, approx)
        start[need] = ns[: need.size]
        st_status[need] = np.where(ok[: need.size], OK, INVALID)
        for k, v, good in zip(other_need, ns[need.size :].tolist(), ok[need.size :].tolist()):
            if good:
                exact_ts[k] = v
    big_dur = du_status == NEED_EXACT  # > 2**43 µs: absurd, flagged by the checks
    if big_dur.any():
        dur[big_dur] = np.iinfo(np.int64).max // 4
        du_status[big_dur] = OK
    no_dur = du_status == MISSING  # X without dur (catapult has them)
    if no_dur.any():
        dur[no_dur] = 0
        du_status[no_dur] = OK
        warn(
            int(xi[np.flatnonzero(no_dur)[0]]),
            "dur",
            f"{int(no_dur.sum())} 'X' event(s) without dur; drawn with zero length",
        )
    return exact_ts


def _phase_rows(
    events: Mapping[int, Any], other: dict[str, list[int]], exact_ts: dict[int, int], text: EventText, warn: Warn
) -> Rows:
    """The rows of the other phases' events (``other``: ph → event indices,
    ``events``: index → event; ``chrome_phases.collect_rows``); an event with an unusable time is skipped with a
    warning."""
    rows = Rows()
    bad_other: list[tuple[int, str, str]] = []
    collect_rows(events, other, rows, warn, exact_ts, bad_other, text.args)
    for k, field, why in bad_other:
        warn(k, field, f"event {label(events[k].name)!r} has {why} {field}; skipped")
    return rows


class _FlowEvents(typing.NamedTuple):
    """Flow events (``s``/``t``/``f``) by what links them: ``generic`` (event indices,
    bound to slices by ``checks.bind_flows``), ``kineto`` (int64 event indices; all
    flow events when some are Kineto's) and ``n_kineto``, the count of Kineto's
    (``KINETO_FLOW_CATS``, which repeat ``args.correlation``)."""

    generic: list[int]
    kineto: np.ndarray
    n_kineto: int


def _flow_events(phases: _Phases, ec: EventColumns) -> _FlowEvents:
    """The flow events by category; Kineto's ``fwdbwd`` flows are only counted
    (``phases.ignored["flow fwdbwd"]``)."""
    cats = ec.cats
    cat_list = list(cats)
    ids, counts = np.unique(ec.cat_f, return_counts=True)
    n_kineto = 0
    generic: set[object] = set()  # category values: strings, or any JSON scalar
    for cat, count in zip((cat_list[c] for c in ids.tolist()), counts.tolist()):
        if cat in KINETO_FLOW_CATS:
            n_kineto += count  # same ids as args.correlation: linked by correlation
        elif cat == "fwdbwd":
            phases.ignored["flow fwdbwd"] = count
        else:
            generic.add(cat)
    fi = phases.flow
    gen = fi[np.isin(ec.cat_f, [cats[c] for c in generic])].tolist() if generic else []
    return _FlowEvents(gen, fi if n_kineto else fi[:0], n_kineto)


_ARG_FIELDS = dataclasses.fields(ArgColumns)


def _moved_out(holder, field: str) -> np.ndarray:
    """``holder``'s column ``field``, replaced there by an empty one (so that the
    caller's reference is the only one: ``_appended`` may then grow it in place)."""
    a = getattr(holder, field)
    object.__setattr__(holder, field, np.zeros(0, a.dtype))
    return a


def _appended(a: np.ndarray, tail: np.ndarray) -> np.ndarray:
    """``np.concatenate((a, tail))``, made by growing ``a`` in place where it owns its
    memory and nothing else holds it (``ndarray.resize``, a ``realloc``: no copy of
    ``a`` and no fresh pages for it), else by copying; ``a`` is not to be used after.
    Why: a trace's rows are few (none to a few hundred), and copying every ``X``
    column to append them took 0.3-0.5 s of faulting fresh pages in at 5M events."""
    n = a.size
    if tail.size == 0:
        return a
    try:
        a.resize(n + tail.size, refcheck=True)
    except (ValueError, SystemError):  # a view, or held elsewhere
        return np.concatenate((a, tail))
    a[n:] = tail
    return a


def _combine(
    ec: EventColumns, xi: np.ndarray, rows: Rows, events: Sequence, warn: Warn
) -> tuple[checks.Columns, list[str], list[tuple[int, str, int]]]:
    """One ``checks.Columns`` of the ``X`` events then the rows, in input order,
    checked by ``checks.validate`` (rows with unusable or absurd times dropped, open
    slices closed); the names by id; the GPU ops dropped for absurd times (event
    index, name, correlation). The rows' lane keys and names join ``ec.lanes`` and
    ``ec.names``; ``ec``'s ``X`` columns (times, ids, kinds, args) move into the result
    and are left empty in ``ec``."""
    nx, nr = int(xi.size), len(rows)
    lanes_raw, names = ec.lanes, ec.names
    row_lane = np.fromiter(map(lanes_raw.__getitem__, rows.lane_key), dtype=np.int32, count=nr)
    row_name = np.fromiter(map(names.__getitem__, rows.name), dtype=np.int32, count=nr)
    argc, ec.args = ec.args, ArgColumns.empty(0)

    def moved(field: str) -> np.ndarray:
        # left empty in ``ec``: each column is freed (or grown in place) as soon as it
        # is combined, not with ``ec`` after all of them (the load's peak of memory is here)
        return _moved_out(ec, field)

    extra = nx + nr - argc.correlation.size
    if extra > 0:  # the rows' args: absent
        empty = ArgColumns.empty(extra)
        argc = ArgColumns(*(_appended(_moved_out(argc, f.name), getattr(empty, f.name)) for f in _ARG_FIELDS))
    elif extra < 0:
        argc = ArgColumns.concat(argc, extra)
    cols = checks.Columns(
        start=_appended(moved("start_ns"), np.array(rows.start, dtype=np.int64)),
        dur=_appended(moved("dur_ns"), np.array(rows.dur, dtype=np.int64)),
        lane=_appended(moved("lane_x"), row_lane),
        name=_appended(moved("name_x"), row_name),
        kind=_appended(moved("kind_x"), np.array(rows.kind, dtype=np.int8)),
        src=np.concatenate((xi.astype(np.int64), np.array(rows.src, dtype=np.int64))),
        status_ts=_appended(moved("start_status"), np.zeros(nr, np.int8)),
        status_dur=_appended(moved("dur_status"), np.zeros(nr, np.int8)),
        value=np.concatenate((np.full(nx, np.nan), np.array(rows.value, dtype=np.float64))),
        args=argc,
    )
    del argc
    names_list = [label(x) for x in names]
    cols, untimed = checks.validate(cols, names_list, np.array(rows.open_ended, dtype=np.int64) + nx, events, warn)
    return cols, names_list, untimed


def _flows(
    events: Sequence,
    flow_events: _FlowEvents,
    xi: np.ndarray,
    cols: checks.Columns,
    lane_final: np.ndarray,
    lanes_raw: dict,
    remap: np.ndarray,
    has_v2: bool,
    in_parts: bool,
    warn: Warn,
) -> tuple[tuple[np.ndarray, np.ndarray], int]:
    """Launch → GPU op links as (src, dst) int64 row indices of ``cols``, and how many
    GPU ops only Kineto's flow events linked (``lane_final``: int32 display lane per
    row; ``remap``: raw lane id → display lane).

    In this order: by ``correlation`` (warning about ids shared by several calls),
    generic flow events and v2 ``bind_id`` flows bound to slices, then Kineto's flow
    events (``ac2g`` & co) for GPU ops still unlinked. Raises ``SerialFallback`` for v2
    flows on input decoded in parts.
    """
    fs, fd = link_by_correlation(cols.kind, cols.args.correlation, cols.start)
    n_rep, n_calls, rep_id = repeated_correlations(cols.kind, cols.args.correlation)
    if n_rep:
        warn(
            None,
            "correlation",
            f"{n_rep} correlation id(s) shared by {n_calls} runtime calls (e.g. {rep_id}); "
            "each GPU op linked to the latest such call starting before it",
        )
    gs, gd = checks.bind_flows(events, flow_events.generic, cols, lane_final, lanes_raw, remap, warn)
    if has_v2 and in_parts:
        raise SerialFallback("v2 flows")
    vs, vd = checks.v2_flows(events, xi, cols) if has_v2 else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    ks, kd = np.zeros(0, np.int64), np.zeros(0, np.int64)
    if flow_events.kineto.size:  # ac2g & co: only for GPU ops that correlation left unlinked
        linked = np.concatenate((fd, gd, vd))
        if has_unlinked_work(cols.kind, linked):
            ki = flow_events.kineto.tolist()
            kineto = {k: e for k, e in zip(ki, events_at(events, ki)) if e.cat in KINETO_FLOW_CATS}
            ks, kd = kineto_flow_links(
                kineto, list(kineto), cols.kind, cols.start, cols.dur, lane_final, lanes_raw, remap, linked
            )
    return unique_pairs(np.concatenate((fs, gs, vs, ks)), np.concatenate((fd, gd, vd, kd))), int(kd.size)


def _note_build(
    source: SourceInfo, n_kineto_flows: int, n_flow_linked: int, untimed: list[tuple[int, str, int]], text: EventText
) -> None:
    """What the build counted, into ``source.extra`` (see the module docstring):
    ``kineto_flow_events``, ``flow_linked_gpu_ops``, ``untimed_gpu_ops`` (``untimed``:
    (event index, name, correlation) of GPU ops dropped for absurd times)."""
    if n_kineto_flows:
        source.extra["kineto_flow_events"] = n_kineto_flows
    if n_flow_linked:
        source.extra["flow_linked_gpu_ops"] = n_flow_linked
    if untimed:
        ul = text.lines_of([u[0] for u in untimed])
        source.extra["untimed_gpu_ops"] = [
            {"line": ln, "name": nm, "correlation": c} for (k, nm, c), ln in zip(untimed, ul)
        ]


def _src_lines(text: EventText, src: np.ndarray) -> np.ndarray | None:
    """int64 1-based line where each event ``src`` starts (one key scan of the text);
    None for texts above ``SRC_LINE_LIMIT_BYTES`` or when the events cannot be located."""
    if len(text.data) > SRC_LINE_LIMIT_BYTES or not src.size:
        return None
    offs = text.offsets(src)
    return None if offs is None else text.lines.lines(offs)


_LINE_TOKEN = re.compile(r"\{line:(\d+)\}")


def _resolve_warnings(text: EventText, warns: list[tuple[int | None, str | None, str]]) -> list[TraceWarning]:
    """Turn (event index, field, message) into ``TraceWarning``s with 1-based lines;
    ``{line:K}`` in a message becomes the line of event K."""
    found = {w[0] for w in warns if w[0] is not None}
    for w in warns:
        found.update(int(x) for x in _LINE_TOKEN.findall(w[2]))
    ks = sorted(found)
    lines = dict(zip(ks, text.lines_of(ks))) if ks else {}
    out = []
    for k, field, msg in warns:
        ln = lines.get(k) if k is not None else None
        msg = _LINE_TOKEN.sub(lambda m: str(lines.get(int(m.group(1)), "?")), msg)
        out.append(TraceWarning(ln, field, msg))
    return out


def _source_info(inp: Input, cat_list: list, legacy: bool, ignored: dict, meta: Metadata, warn) -> SourceInfo:
    """The ``SourceInfo`` of ``inp``: its header's fields, each read through
    ``chrome_header.read_header`` (a refused value is a warning naming the field, on
    every decode path), the format, what was only counted (``ignored``) and the
    process labels and renamed threads of the metadata events (``meta``)."""
    h = inp.header
    info = SourceInfo(path=inp.path)
    kineto = any(
        k in h for k in ("schemaVersion", "deviceProperties", "baseTimeNanoseconds", "distributedInfo")
    ) or any(isinstance(c, str) and c in KINETO_CATS for c in cat_list)
    info.format = "legacy-autograd" if legacy else ("kineto" if kineto else "chrome")
    got = read_header(h, lambda field, msg: warn(None, field, msg))
    info.schema_version = got.schema_version
    info.base_time_ns = got.base_time_ns
    info.display_time_unit = got.display_time_unit
    if got.display_time_unit is not None and got.display_time_unit not in ("ms", "ns"):
        warn(
            None,
            "displayTimeUnit",
            f'displayTimeUnit {got.display_time_unit[:40]!r} is neither "ms" nor "ns"; ignored '
            "(ts and dur are microseconds in any case)",
        )
    info.device_properties = got.device_properties
    info.rank, info.world_size = got.rank, got.world_size
    info.trace_name = got.trace_name
    if "systemTraceEvents" in h:
        ignored["systemTraceEvents"] = 1
    info.ignored_counts = ignored
    if meta.process_labels:
        info.extra["process_labels"] = dict(meta.process_labels)
    if meta.renamed_threads:
        info.extra["renamed_threads"] = meta.renamed_threads
    return info
