"""Chrome Trace Event Format / Kineto (torch.profiler) JSON → ``Trace``.

Fast path: one typed ``msgspec`` decode of the timeline fields (``args`` kept as raw
bytes, GC off), then numpy columns; non-``X`` phases go through
``parsers.chrome_phases``. Damaged files go through ``parsers.json_tolerant``.
Times: ``ts``/``dur`` are µs whatever ``displayTimeUnit`` says, converted to int64 ns
exactly (``parsers.chrome_times``). Kinds from ``parsers.kinds``, lanes from
``parsers.lanes``; validation and repairs in ``parsers.chrome_checks``.
"""

from __future__ import annotations

import gc
import re
from itertools import repeat
from operator import attrgetter, itemgetter

import msgspec
import numpy as np

from . import chrome_checks as checks
from .chrome_args import ArgColumns, extract_args
from .chrome_phases import Rows, collect_metadata, collect_rows, decode_args
from .chrome_schema import Event, EventTimes, ObjectTrace
from .chrome_times import MISSING, NEED_EXACT, NONFINITE, OK, decimal_ns, to_ns
from .errors import TraceFormatError
from .chrome_text import key_positions, parse_us_to_ns
from .json_tolerant import LineIndex, recover, scan_elements, find_events_array
from .kinds import CAT_KIND, KINETO_CATS, KINETO_FLOW_CATS, RUNTIME_CATS, runtime_kind
from .lanes import LaneInfo, Metadata, build_lanes, id_text
from .model import GPU_KINDS, GPU_WORK_KINDS, Kind, SourceInfo, Trace, TraceWarning, link_by_correlation

__all__ = ["load_chrome"]

_OBJ = msgspec.json.Decoder(ObjectTrace)
_LIST = msgspec.json.Decoder(list[Event])
_TIMES = msgspec.json.Decoder(EventTimes)
_WS = b" \t\r\n"
_HEADER_KEYS = ("schemaVersion", "deviceProperties", "computeProperties", "distributedInfo",
                "baseTimeNanoseconds", "displayTimeUnit", "traceName", "systemTraceEvents")
_get = {f: attrgetter(f) for f in ("ph", "ts", "dur", "name", "cat", "pid", "tid", "args")}


class _Interner(dict):
    """value → dense id, assigned on first sight."""

    def __missing__(self, key):
        v = self[key] = len(self)
        return v


class _Source:
    """The decoded input: events, header, and lazy byte offsets / lines per event."""

    def __init__(self, data: bytes, path: str, root: int) -> None:
        self.path = path
        self.data = data
        self.root = root
        self.lines = LineIndex(data)
        self.starts: np.ndarray | None = None  # exact element spans (scanner)
        self.ends: np.ndarray | None = None
        self._ph: np.ndarray | None = None  # offsets after each event's "ph" key
        self.warnings: list[TraceWarning] = []
        self.repaired = 0
        self.header: dict = {}
        self.events: list[Event] = []

    def _begin(self) -> int:
        b = find_events_array(self.data, self.root)
        return b if b >= 0 else 0

    def spans(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Exact (starts, ends) of every event (scanner; linear, ~10 ns/byte)."""
        if self.starts is None or self.ends is None:
            begin = find_events_array(self.data, self.root)
            if begin < 0:
                return None
            scan = scan_elements(self.data, begin)
            if scan.starts.size != len(self.events):
                return None
            self.starts, self.ends = scan.starts, scan.ends
        return self.starts, self.ends

    def offsets_of(self, ks) -> np.ndarray | None:
        """Byte offsets of the ``{`` of events ``ks``: from the positions of the
        ``"ph"`` keys when there is exactly one per event, else from the scanner."""
        ks = np.asarray(ks, dtype=np.int64)
        if self.starts is not None:
            return self.starts[ks]
        if self._ph is None:
            ph = key_positions(self.data, b'"ph"', self._begin())
            self._ph = ph if ph.size == len(self.events) else np.zeros(0, np.int64)
        if self._ph.size:
            rfind = self.data.rfind
            return np.array([rfind(b"{", 0, int(p)) for p in self._ph[ks].tolist()], dtype=np.int64)
        sp = self.spans()
        return None if sp is None else sp[0][ks]

    def lines_of(self, ks) -> list[int | None]:
        """1-based lines of events ``ks`` (None when unknown)."""
        ks = np.asarray(ks, dtype=np.int64)
        if ks.size == 0:
            return []
        offs = self.offsets_of(ks)
        if offs is None:
            return [None] * int(ks.size)
        return [int(x) for x in self.lines.lines(offs)]


def _decode(data: bytes, path: str) -> _Source:
    i = 3 if data[:3] == b"\xef\xbb\xbf" else 0
    while i < len(data) and data[i] in _WS:
        i += 1
    src = _Source(data, path, i)
    body = data if i == 0 else data[i:]
    try:
        if data[i:i + 1] == b"{":
            obj = _OBJ.decode(body)
            src.events = obj.traceEvents
            for key in _HEADER_KEYS:
                raw = getattr(obj, key)
                if bytes(raw) != b"null":
                    try:
                        src.header[key] = msgspec.json.decode(raw)
                    except (msgspec.DecodeError, msgspec.ValidationError):
                        pass
        else:
            src.events = _LIST.decode(body)
        return src
    except (msgspec.DecodeError, msgspec.ValidationError):
        pass
    rec = recover(data, path, i, src.lines)
    keep = [k for k, e in enumerate(rec.events) if e is not None]
    src.events = [rec.events[k] for k in keep]
    kk = np.array(keep, dtype=np.int64)
    src.starts = rec.starts[kk] if keep else np.zeros(0, np.int64)
    src.ends = rec.ends[kk] if keep else np.zeros(0, np.int64)
    src.data = rec.text
    src.header = rec.header
    src.warnings = rec.warnings
    src.repaired = rec.nonfinite_replaced
    if not src.events and rec.starts.size:
        raise TraceFormatError(path, "no usable trace events", line=src.lines.line(int(rec.starts[0])),
                               column=src.lines.column(int(rec.starts[0])),
                               hint="expected Chrome Trace Event Format events ({\"ph\": ..., \"ts\": ...})")
    return src


def load_chrome(data: bytes, path: str) -> Trace:
    """Load Chrome Trace Event Format JSON (object or array form; Kineto of every
    vintage; legacy autograd export) from ``data`` (gzip already undone).

    Returns a ``Trace`` (times int64 ns, ``ts`` × 1000 exactly; ``baseTimeNanoseconds``
    kept in ``source.base_time_ns``, not added). Damaged input is repaired with a
    ``TraceWarning`` per problem (line = 1-based line of the event). Raises
    ``TraceFormatError`` (path, line, column, hint) when the JSON holds no trace.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        src = _decode(data, path)
        return _build(src)
    finally:
        if was:
            gc.enable()


_PH_X = 0
_PHASE_CODE = {"X": _PH_X, "M": 1, "s": 2, "t": 2, "f": 2}


def _build(src: _Source) -> Trace:
    events = src.events
    n = len(events)
    path = src.path
    warns: list[tuple[int | None, str | None, str, int | None]] = []  # (k, field, msg, line)

    def warn(k, field, msg):
        warns.append((k, field, msg, None))

    if n and any(e.__class__ is not Event for e in events[:1]):
        raise TraceFormatError(path, "not a list of trace events")
    phs = list(map(_get["ph"], events))
    code = np.fromiter(map(_PHASE_CODE.get, phs, repeat(3)), dtype=np.int8, count=n)
    xi = np.flatnonzero(code == _PH_X)
    others = np.flatnonzero(code == 3)
    by_phase: dict[str, list[int]] = {}
    for k in others.tolist():
        by_phase.setdefault(phs[k] if isinstance(phs[k], str) else str(phs[k]), []).append(k)
    ignored: dict[str, int] = {}
    for ph in list(by_phase):
        if ph not in ("B", "E", "i", "I", "R", "C", "b", "e", "n", "S", "T", "F"):
            ignored[f"ph {ph}"] = len(by_phase.pop(ph))

    meta = Metadata()
    collect_metadata(events, np.flatnonzero(code == 1).tolist(), meta)

    # ---------------------------------------------------------------- X events
    xs = list(itemgetter(*xi)(events)) if xi.size > 1 else [events[int(k)] for k in xi]
    start, st_status = to_ns(list(map(_get["ts"], xs)))
    dur, du_status = to_ns(list(map(_get["dur"], xs)))
    names = _Interner()
    name_x = np.fromiter(map(names.__getitem__, map(_get["name"], xs)), dtype=np.int32, count=len(xs))
    cats = _Interner()
    cat_x = np.fromiter(map(cats.__getitem__, map(_get["cat"], xs)), dtype=np.int32, count=len(xs))
    lanes_raw = _Interner()
    lane_x = np.fromiter(map(lanes_raw.__getitem__, zip(map(_get["pid"], xs), map(_get["tid"], xs))),
                         dtype=np.int32, count=len(xs))
    cat_list = list(cats)
    cat_kind = np.array([int(CAT_KIND.get(c, Kind.OTHER)) if isinstance(c, str) else int(Kind.OTHER)
                         for c in cat_list] or [0], dtype=np.int8)
    kind_x = cat_kind[cat_x] if xs else np.zeros(0, np.int8)
    rt_cat = np.array([isinstance(c, str) and c in RUNTIME_CATS for c in cat_list] or [False])
    rt = rt_cat[cat_x] if xs else np.zeros(0, bool)
    if rt.any():
        name_list = list(names)
        uniq = np.unique(name_x[rt])
        table = np.zeros(len(name_list), dtype=np.int8)
        for u in uniq.tolist():
            table[u] = int(runtime_kind(str(name_list[u])))
        kind_x[rt] = table[name_x[rt]]
    legacy = "CPU functions" in _pid_set(lanes_raw) or "CUDA functions" in _pid_set(lanes_raw)
    if legacy:
        for key, lid in lanes_raw.items():
            if key[0] == "CUDA functions":
                kind_x[lane_x == lid] = int(Kind.KERNEL)
            elif key[0] == "CPU functions":
                m = (lane_x == lid) & (kind_x == int(Kind.OTHER))
                kind_x[m] = int(Kind.CPU_OP)
    raws = list(map(_get["args"], xs))
    argc = extract_args(raws, kind_x, name_x, list(names))

    # exact re-read of times a float64 cannot hold (epoch µs with a fraction)
    exact_ts: dict[int, int] = {}
    need = np.flatnonzero(st_status == NEED_EXACT)
    other_need = [k for ks in by_phase.values() for k in ks
                  if isinstance(events[k].ts, float) and abs(events[k].ts) >= 2.0 ** 43]
    if need.size or other_need:
        ks = np.concatenate((xi[need], np.array(other_need, dtype=np.int64)))
        ns, ok = _exact_ts(src, ks)
        start[need] = ns[: need.size]
        st_status[need] = np.where(ok[: need.size], OK, 3)
        for k, v, good in zip(other_need, ns[need.size:].tolist(), ok[need.size:].tolist()):
            if good:
                exact_ts[k] = v
    big_dur = du_status == NEED_EXACT  # > 2**43 µs: absurd anyway, flagged below
    if big_dur.any():
        dur[big_dur] = np.iinfo(np.int64).max // 4
        du_status[big_dur] = OK

    # X without dur: an instant-like slice (catapult traces have them)
    no_dur = du_status == MISSING
    if no_dur.any():
        dur[no_dur] = 0
        du_status[no_dur] = OK
        warn(int(xi[np.flatnonzero(no_dur)[0]]), "dur", f"{int(no_dur.sum())} 'X' event(s) without dur; drawn with zero length")

    # ------------------------------------------------------------ other phases
    rows = Rows()
    bad_other: list[tuple[int, str, str]] = []
    collect_rows(events, by_phase, rows, warn, exact_ts, bad_other)
    for k, field, why in bad_other:
        warns.append((k, field, f"event {_label(events[k].name)} has {why} {field}; skipped", None))

    # ------------------------------------------------------------- flows
    flow_idx = np.flatnonzero(code == 2).tolist()
    gen_flows = []
    n_kineto_flows = 0
    for k in flow_idx:
        e = events[k]
        c = e.cat if isinstance(e.cat, str) else ""
        if c in KINETO_FLOW_CATS:
            n_kineto_flows += 1
        elif c == "fwdbwd":
            ignored["flow fwdbwd"] = ignored.get("flow fwdbwd", 0) + 1
        else:
            gen_flows.append(k)

    # ------------------------------------------------------------- combine
    nx = len(xs)
    nr = len(rows)
    row_lane = np.fromiter(map(lanes_raw.__getitem__, rows.lane_key), dtype=np.int32, count=nr) if nr else np.zeros(0, np.int32)
    row_name = np.fromiter(map(names.__getitem__, rows.name), dtype=np.int32, count=nr) if nr else np.zeros(0, np.int32)
    cols = checks.Columns(
        start=np.concatenate((start, np.array(rows.start, dtype=np.int64))),
        dur=np.concatenate((dur, np.array(rows.dur, dtype=np.int64))),
        lane=np.concatenate((lane_x, row_lane)),
        name=np.concatenate((name_x, row_name)),
        kind=np.concatenate((kind_x, np.array(rows.kind, dtype=np.int8))),
        src=np.concatenate((xi.astype(np.int64), np.array(rows.src, dtype=np.int64))),
        status_ts=np.concatenate((st_status, np.zeros(nr, np.int8))),
        status_dur=np.concatenate((du_status, np.zeros(nr, np.int8))),
        value=np.concatenate((np.full(nx, np.nan), np.array(rows.value, dtype=np.float64))),
        args=ArgColumns.concat(argc, nr),
        raw_args=raws + [events[k].args for k in rows.src],
    )
    names_list = [_label(x) for x in names]
    open_ended = np.array(rows.open_ended, dtype=np.int64) + nx
    cols = checks.validate(cols, names_list, open_ended, events, warn)
    untimed = cols.untimed

    # ------------------------------------------------------------- lanes
    infos = []
    raw_keys = list(lanes_raw)
    gpu_mask = np.isin(cols.kind, np.array([int(k) for k in GPU_KINDS], dtype=np.int8))
    gpu_lanes = set(np.unique(cols.lane[gpu_mask]).tolist())
    dev_by_lane, stream_by_lane = _first_per_lane(cols.lane[gpu_mask], cols.args.device[gpu_mask], cols.args.stream[gpu_mask])
    for lid, (pid, tid) in enumerate(raw_keys):
        info = LaneInfo(pid=id_text(pid), tid=id_text(tid), is_gpu=lid in gpu_lanes,
                        device=dev_by_lane.get(lid, -1), stream=stream_by_lane.get(lid, -1))
        if legacy and info.is_gpu and pid == "CUDA functions":
            # legacy autograd export: tid is the device index, there are no streams
            info.device = int(info.tid) if info.tid.lstrip("-").isdigit() else 0
            info.stream = -2
        infos.append(info)
    lanes, remap = build_lanes(infos, meta) if infos else ([], np.zeros(0, np.int32))
    lane_final = remap[cols.lane] if cols.lane.size else cols.lane

    cols = checks.gpu_checks(cols, lane_final, lanes, names_list, warn)
    lane_final = remap[cols.lane] if cols.lane.size else cols.lane

    # flows: correlation (launch → GPU op) + bound generic flows (s/t/f, v2 bind_id)
    fs, fd = link_by_correlation(cols.kind, cols.args.correlation)
    gs, gd = checks.bind_flows(events, gen_flows, cols, lane_final, lanes_raw, remap, warn)
    vs, vd = checks.v2_flows(events, xi, cols)
    flows = (np.concatenate((fs, gs, vs)), np.concatenate((fd, gd, vd)))

    source = _source_info(src, path, cat_list, legacy, ignored, meta, warn)
    if n_kineto_flows:
        source.extra["kineto_flow_events"] = n_kineto_flows
    if untimed:
        ul = src.lines_of([u[0] for u in untimed])
        source.extra["untimed_gpu_ops"] = [
            {"line": ln, "name": nm, "correlation": c} for (k, nm, c), ln in zip(untimed, ul)]

    warnings = list(src.warnings) + _resolve_warnings(src, warns)
    warnings.sort(key=lambda w: (w.line is None, w.line or 0))
    lines = None
    if len(src.data) <= (8 << 20) and cols.src.size:
        offs = src.offsets_of(cols.src)
        if offs is not None:
            lines = src.lines.lines(offs)
    raw_args = cols.raw_args
    repaired = src.repaired

    def args_loader(i: int, _r=raw_args) -> dict:
        return decode_args(_r[i])

    del repaired
    return Trace.from_columns(
        start_ns=cols.start, dur_ns=cols.dur, lane=lane_final, name_id=cols.name, kind=cols.kind,
        names=names_list, lanes=lanes, source=source, warnings=warnings,
        correlation=cols.args.correlation, bytes_=cols.args.bytes, copy_kind=cols.args.copy_kind,
        pageable=cols.args.pageable, value=cols.value,
        src_line=lines if lines is not None else None, external_id=cols.args.external_id,
        flows=flows, args_loader=args_loader,
    )


def _pid_set(lanes_raw) -> set:
    return {k[0] for k in lanes_raw if isinstance(k[0], str)}


def _first_per_lane(lane: np.ndarray, device: np.ndarray, stream: np.ndarray) -> tuple[dict, dict]:
    dev, stm = {}, {}
    for vals, out in ((device, dev), (stream, stm)):
        ok = vals >= 0
        if ok.any():
            ln, first = np.unique(lane[ok], return_index=True)
            out.update(zip(ln.tolist(), vals[ok][first].tolist()))
    return dev, stm


def _label(x) -> str:
    if x is None:
        return ""
    return x if isinstance(x, str) else str(x)


def _exact_ts(src: _Source, ks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact ns ``ts`` of events ``ks`` read from the JSON text; (ns, ok).

    Fast path: the ``"ts"`` keys of the events array, one per event that has a ts,
    parsed by ``parse_us_to_ns`` and cross-checked against the decoded float (within
    2 µs). Otherwise each event's own text is decoded with ``Decimal`` times.
    """
    events = src.events
    ks = np.asarray(ks, dtype=np.int64)
    ns = np.zeros(ks.size, dtype=np.int64)
    ok = np.zeros(ks.size, dtype=bool)
    has = np.fromiter((e.ts is not None for e in events), dtype=bool, count=len(events))
    pos = key_positions(src.data, b'"ts"', src._begin())
    if pos.size == int(has.sum()):
        rank = np.cumsum(has) - 1
        p = pos[rank[ks]]
        ns, ok = parse_us_to_ns(src.data, p)
        approx = np.array([float(events[k].ts) if isinstance(events[k].ts, (int, float)) else np.nan
                           for k in ks.tolist()], dtype=np.float64) * 1000.0
        ok &= np.abs(ns.astype(np.float64) - approx) <= 2000.0
    if ok.all():
        return ns, ok
    sp = src.spans()
    if sp is None:
        return ns, ok
    starts, ends = sp
    data = src.data
    for j in np.flatnonzero(~ok).tolist():
        k = int(ks[j])
        try:
            t = _TIMES.decode(data[int(starts[k]):int(ends[k])])
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        v, st = decimal_ns(t.ts)
        if st == OK:
            ns[j], ok[j] = v, True
    return ns, ok


_LINE_TOKEN = re.compile(r"\{line:(\d+)\}")


def _resolve_warnings(src: _Source, warns) -> list[TraceWarning]:
    """Turn (event index, field, message) into ``TraceWarning``s with 1-based lines;
    ``{line:K}`` in a message becomes the line of event K."""
    ks = {w[0] for w in warns if w[0] is not None}
    for w in warns:
        ks.update(int(x) for x in _LINE_TOKEN.findall(w[2]))
    ks = sorted(ks)
    lines = dict(zip(ks, src.lines_of(ks))) if ks else {}
    out = []
    for k, field, msg, line in warns:
        ln = line if line is not None else lines.get(k)
        msg = _LINE_TOKEN.sub(lambda m: str(lines.get(int(m.group(1)), "?")), msg)
        out.append(TraceWarning(ln, field, msg))
    return out


def _source_info(src: _Source, path: str, cat_list: list, legacy: bool, ignored: dict, meta: Metadata, warn) -> SourceInfo:
    h = src.header
    info = SourceInfo(path=path)
    kineto = any(k in h for k in ("schemaVersion", "deviceProperties", "baseTimeNanoseconds", "distributedInfo")) or \
        any(isinstance(c, str) and c in KINETO_CATS for c in cat_list)
    info.format = "legacy-autograd" if legacy else ("kineto" if kineto else "chrome")
    sv = h.get("schemaVersion")
    try:
        info.schema_version = int(sv) if sv is not None and not isinstance(sv, bool) else None
    except (TypeError, ValueError):
        info.schema_version = None
    bt = h.get("baseTimeNanoseconds")
    try:
        info.base_time_ns = int(bt) if bt is not None and not isinstance(bt, bool) else None
    except (TypeError, ValueError):
        info.base_time_ns = None
    dtu = h.get("displayTimeUnit")
    if dtu is not None:
        info.display_time_unit = str(dtu)
        if dtu not in ("ms", "ns"):
            warn(None, "displayTimeUnit", f"displayTimeUnit {str(dtu)!r} is neither \"ms\" nor \"ns\"; ignored "
                                          "(ts and dur are microseconds in any case)")
    props = h.get("deviceProperties") or h.get("computeProperties")
    if isinstance(props, list):
        info.device_properties = [p for p in props if isinstance(p, dict)]
    di = h.get("distributedInfo")
    if isinstance(di, dict):
        r, w = di.get("rank"), di.get("world_size")
        info.rank = r if isinstance(r, int) and not isinstance(r, bool) else None
        info.world_size = w if isinstance(w, int) and not isinstance(w, bool) else None
    tn = h.get("traceName")
    info.trace_name = str(tn) if tn is not None else None
    if "systemTraceEvents" in h:
        ignored["systemTraceEvents"] = 1
    info.ignored_counts = ignored
    if meta.process_labels:
        info.extra["process_labels"] = dict(meta.process_labels)
    return info
