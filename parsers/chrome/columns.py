"""Column builders of the Chrome-trace loader: times, lane keys, kinds, lanes and exact
timestamps. Per-event work is one C-level pass each
(``map``/``attrgetter`` into ``np.fromiter``); see ``gapscope.parsers.chrome.loader``.
"""

from __future__ import annotations

import array
from collections.abc import Sequence
from itertools import repeat
from operator import attrgetter, is_not

import msgspec
import numpy as np

from gapscope.parsers.chrome.interner import Interner
from gapscope.parsers.chrome.lazy_args import EventText
from gapscope.parsers.chrome.schema import EventTimes
from gapscope.parsers.chrome.text import exact_ns_near, key_positions
from gapscope.parsers.chrome.times import EXACT_LIMIT_US, OK, decimal_ns, raw_to_ns, to_ns
from gapscope.parsers.kinds import CAT_KIND, DEVICE_NAME_CATS, DEVICE_NAME_KIND, RUNTIME_CATS, runtime_kind
from gapscope.parsers.lanes import MAX_DEVICE_INDEX, PSEUDO_DEVICE_BASE, LaneInfo, Metadata, build_lanes, id_text
from gapscope.parsers.model import GPU_KINDS, Kind

__all__ = [
    "GET",
    "events_at",
    "times",
    "lane_keys",
    "kinds",
    "build_trace_lanes",
    "exact_ts_from_text",
    "label",
]

GET = {f: attrgetter(f) for f in ("ph", "ts", "dur", "name", "cat", "pid", "tid", "args", "bind_id")}


def events_at(events: Sequence, ks: list[int]) -> list:
    """``[events[k] for k in ks]``, in one pass where the list can give them at once
    (``JoinedEvents.take``: events decoded in parts, where each lookup alone goes
    through numpy scalars)."""
    take = getattr(events, "take", None)
    return take(ks) if take is not None else [events[k] for k in ks]


_get = GET
_TIMES = msgspec.json.Decoder(EventTimes)


def times(xs: list, field: str) -> tuple[np.ndarray, np.ndarray]:
    """(ns, status) of ``ts`` or ``dur`` of events ``xs``: one ``fromiter`` pass when all
    values are numbers (int or float) below 2**43 µs, ``chrome_times.raw_to_ns`` when they were kept
    as JSON text, else ``chrome_times.to_ns``."""
    get = _get[field]
    if xs and type(get(xs[0])) is msgspec.Raw:  # X events decoded with ``XEventRawTs``
        return raw_to_ns(list(map(get, xs)))
    # numbers only (``array('d')`` refuses a string, which ``np.fromiter`` would parse
    # while ``to_ns`` reads it exactly: a value's ns must not depend on its neighbours)
    try:
        fa = np.frombuffer(array.array("d", map(get, xs)), dtype=np.float64)
    except (TypeError, OverflowError):  # a string or None; an int beyond float range
        fa = None
    if fa is not None and (fa.size == 0 or np.abs(fa).max() < EXACT_LIMIT_US):
        fl = np.floor(fa)
        ns = fl.astype(np.int64) * 1000 + np.rint((fa - fl) * 1000.0).astype(np.int64)
        return ns, np.zeros(len(xs), dtype=np.int8)
    return to_ns(list(map(get, xs)))


def lane_keys(xs: list) -> tuple[Interner, np.ndarray]:
    """Raw (pid, tid) → dense id (first-seen order), and the id of each event.

    One pass: each event's (pid, tid) tuple is interned (scalar hashing, any mix of
    numbers and strings; Python equality, so ``1`` and ``1.0`` are one key, and the
    first-seen spelling is kept)."""
    lanes = Interner()
    ids = np.fromiter(map(lanes.__getitem__, map(_PID_TID, xs)), dtype=np.int32, count=len(xs))
    return lanes, ids


_PID_TID = attrgetter("pid", "tid")


def kinds(cat_list: list, cat_x: np.ndarray, name_x: np.ndarray, name_list: list) -> np.ndarray:
    """int8 kinds of X events: by category (``kinds.CAT_KIND``), runtime calls and the
    device ops of ``kinds.DEVICE_NAME_CATS`` by name."""
    if cat_x.size == 0:
        return np.zeros(0, np.int8)
    cat_kind = np.array(
        [int(CAT_KIND.get(c, Kind.OTHER)) if isinstance(c, str) else int(Kind.OTHER) for c in cat_list], dtype=np.int8
    )
    kind = cat_kind[cat_x]
    rt_cat = np.array([isinstance(c, str) and c in RUNTIME_CATS for c in cat_list])
    rt = rt_cat[cat_x]
    if rt.any():
        table = np.zeros(len(name_list), dtype=np.int8)
        for u in np.unique(name_x[rt]).tolist():
            table[u] = int(runtime_kind(label(name_list[u])))
        kind[rt] = table[name_x[rt]]
    dev_cat = np.array([isinstance(c, str) and c in DEVICE_NAME_CATS for c in cat_list])
    dev = dev_cat[cat_x]
    if dev.any():  # a table by name, as for the runtime calls (a pass per name would cost names x events)
        table = np.full(len(name_list), -1, dtype=np.int8)
        for u in np.unique(name_x[dev]).tolist():
            k = DEVICE_NAME_KIND.get(name_list[u]) if isinstance(name_list[u], str) else None
            if k is not None:
                table[u] = int(k)
        by_name = np.where(dev, table[name_x], -1)
        kind = np.where(by_name >= 0, by_name, kind).astype(np.int8)
    return kind


#: Kinds recorded by a CPU thread; a lane holding these and GPU kinds is split.
_CPU_SIDE = np.array(
    [
        int(k)
        for k in (
            Kind.LAUNCH,
            Kind.SYNC_CALL,
            Kind.MEMCPY_CALL,
            Kind.RUNTIME,
            Kind.CPU_OP,
            Kind.PYTHON,
            Kind.ANNOTATION,
        )
    ],
    dtype=np.int8,
)


def build_trace_lanes(cols, lanes_raw: dict, meta: Metadata, legacy: bool, warn=None):
    """Lanes from the raw (pid, tid) pairs; GPU lanes are those with GPU kinds.

    A raw lane holding both CPU-side events (``_CPU_SIDE``) and GPU ops keeps its CPU
    events; its GPU ops move to a lane of their own, ``(pid, "<tid> (GPU ops)")``
    (``cols.lane`` and ``lanes_raw`` are updated in place), on a pseudo-device. GPU
    lanes without a device index (``gapscope.parsers.lanes``) get a pseudo-device too; each is
    reported once through ``warn(event index, "pid", message)``.
    """
    gpu_mask = np.isin(cols.kind, np.array([int(k) for k in GPU_KINDS], dtype=np.int8))
    split_lanes: set[int] = set()
    if gpu_mask.any() and not legacy:
        cpu_lanes = np.unique(cols.lane[np.isin(cols.kind, _CPU_SIDE)])
        mixed = np.intersect1d(cpu_lanes, np.unique(cols.lane[gpu_mask]))
        if mixed.size:
            keys = list(lanes_raw)
            for lid in mixed.tolist():
                pid, tid = keys[lid]
                new = lanes_raw[(pid, f"{id_text(tid)} (GPU ops)")]
                sel = gpu_mask & (cols.lane == lid)
                cols.lane[sel] = new
                split_lanes.add(new)
                if warn is not None:
                    first = int(cols.src[np.flatnonzero(sel)[0]])
                    warn(
                        first,
                        "pid",
                        f"{int(sel.sum())} GPU op(s) on CPU thread (pid {label(pid)!s}, tid "
                        f"{label(tid)!s}) drawn on a lane of their own, not as part of the thread "
                        "(device from args.device, else a pseudo-device)",
                    )
    gpu_lanes = set(np.unique(cols.lane[gpu_mask]).tolist())
    dev_by_lane = _first_per_lane(cols.lane[gpu_mask], cols.args.device[gpu_mask], MAX_DEVICE_INDEX)
    stream_by_lane = _first_per_lane(cols.lane[gpu_mask], cols.args.stream[gpu_mask])
    infos = []
    for lid, (pid, tid) in enumerate(lanes_raw):
        info = LaneInfo(
            pid=id_text(pid),
            tid=id_text(tid),
            is_gpu=lid in gpu_lanes,
            device=dev_by_lane.get(lid, -1),
            stream=stream_by_lane.get(lid, -1),
            split=lid in split_lanes,
        )
        if legacy and info.is_gpu and pid == "CUDA functions":
            # legacy autograd export: tid is the device index, there are no streams
            info.device = int(info.tid) if info.tid.lstrip("-").isdigit() else 0
            info.stream = -2
        infos.append(info)
    if not infos:
        return [], np.zeros(0, np.int32)
    lanes, remap = build_lanes(infos, meta)
    if warn is not None:
        _warn_pseudo(cols, gpu_mask, lanes, remap, warn, {int(remap[i]) for i in split_lanes})
    return lanes, remap


def _warn_pseudo(cols, gpu_mask: np.ndarray, lanes: list, remap: np.ndarray, warn, split: set) -> None:
    """One warning per pseudo-device, at its first GPU op (split lanes were reported)."""
    pseudo = {ln.index: ln for ln in lanes if ln.is_gpu and ln.device >= PSEUDO_DEVICE_BASE and ln.index not in split}
    if not pseudo:
        return
    rows = np.flatnonzero(gpu_mask)
    final = remap[cols.lane[rows]]
    seen = set()
    for li in sorted(pseudo, key=lambda i: (pseudo[i].device, i)):
        ln = pseudo[li]
        if ln.device in seen:
            continue
        seen.add(ln.device)
        on = np.isin(final, [i for i, x in pseudo.items() if x.device == ln.device])
        first = int(cols.src[rows[np.flatnonzero(on)[0]]]) if on.any() else None
        pid = repr(ln.pid) if ln.pid else "(none)"
        warn(
            first,
            "pid",
            f"GPU ops on pid {pid} without a device index (args.device, or a pid 0.."
            f"{MAX_DEVICE_INDEX}): {int(on.sum())} op(s) counted as pseudo-device {ln.device}, "
            "apart from the real devices",
        )


def _first_per_lane(lane: np.ndarray, vals: np.ndarray, max_value: int | None = None) -> dict:
    ok = vals >= 0
    if max_value is not None:
        ok &= vals <= max_value
    if not ok.any():
        return {}
    ln, first = np.unique(lane[ok], return_index=True)
    return dict(zip(ln.tolist(), vals[ok][first].tolist()))


def label(x) -> str:
    if x is None:
        return ""
    return x if isinstance(x, str) else str(x)


def exact_ts_from_text(
    events: Sequence, text: EventText, ks: np.ndarray, approx_ns: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Exact ns ``ts`` of events ``ks`` read from the JSON text; (ns, ok).

    Fast path: the ``"ts"`` keys of the events array, one per event that has a ts,
    read by ``exact_ns_near`` with ``approx_ns`` (the decoded float split as
    ``floor(v)*1000 + rint(frac(v)*1000)``). Otherwise each event's own text is decoded with
    ``Decimal`` times.
    """
    ks = np.asarray(ks, dtype=np.int64)
    ns = np.zeros(ks.size, dtype=np.int64)
    ok = np.zeros(ks.size, dtype=bool)
    has = np.fromiter(map(is_not, map(_get["ts"], events), repeat(None)), dtype=bool, count=len(events))
    pos = key_positions(text.data, b'"ts"', text.begin())
    if pos.size == int(has.sum()):
        rank = np.cumsum(has) - 1
        ns, ok = exact_ns_near(text.data, pos[rank[ks]], approx_ns)
    if ok.all():
        return ns, ok
    for j in np.flatnonzero(~ok).tolist():
        t = text.decode_event(int(ks[j]), _TIMES)
        if t is None:
            continue
        v, st = decimal_ns(t.ts)
        if st == OK:
            ns[j], ok[j] = v, True
    return ns, ok
