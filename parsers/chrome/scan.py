"""The per-event pass of the Chrome-trace loader: decoded events → columns.

One C-level pass per field (``map``/``attrgetter`` into ``np.fromiter``) over a list
of decoded events gives their phase codes and, for ``X`` events, times, names, lanes,
kinds and ``args`` columns (``EventColumns``). It runs on the whole event list, or on
each part of it when the text is decoded in parts (``gapscope.parsers.chrome.parallel.fork``);
``merge_all`` joins the parts into exactly what one pass over the whole list gives, up
to the order of category ids (which nothing depends on).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from itertools import repeat
from operator import itemgetter

import numpy as np

from gapscope.parsers.chrome.args import ArgColumns, extract_args, old_external_ids
from gapscope.parsers.chrome.columns import GET, kinds, lane_keys, times
from gapscope.parsers.chrome.interner import Interner
from gapscope.parsers.chrome.schema import EVENT_CLASS, EVENT_CLASS_RAW_TS, XEventRawTs
from gapscope.parsers.model import Kind

__all__ = [
    "PH_X",
    "PH_M",
    "PH_FLOW",
    "PH_OTHER",
    "PH_SKIP",
    "EventColumns",
    "scan_events",
    "x_kinds",
    "phase_codes",
    "carried_old_ids",
    "merge_all",
    "OLD_CATS",
    "LEGACY_PIDS",
]

#: Phase codes (int8) of ``EventColumns.code``.
PH_X, PH_M, PH_FLOW, PH_OTHER, PH_SKIP = 0, 1, 2, 3, 4
_PHASE_CODE = {
    EVENT_CLASS["X"]: PH_X,
    EVENT_CLASS["M"]: PH_M,
    EVENT_CLASS["s"]: PH_FLOW,
    EVENT_CLASS["t"]: PH_FLOW,
    EVENT_CLASS["f"]: PH_FLOW,
    XEventRawTs: PH_X,
    EVENT_CLASS_RAW_TS["M"]: PH_M,
}
#: Categories of 2020 Kineto files, which spell ``External id`` as ``external id``.
OLD_CATS = ("Operator", "Runtime", "Kernel", "Memcpy", "Memset")
#: pids of the legacy autograd profiler export (``export_chrome_trace`` before Kineto).
LEGACY_PIDS = frozenset(("CPU functions", "CUDA functions"))
_get = GET


@dataclasses.dataclass
class EventColumns:
    """Columns of ``n`` decoded events; ``nx`` of them are ``X`` events.

    ``code``: int8[n] phase code (``PH_*``); ``cats``/``names``/``lanes``: value →
    dense id in first-seen order (categories of every event; names and raw
    ``(pid, tid)`` keys of ``X`` events); ``cat_x``/``name_x``/``lane_x``: int32[nx]
    ids; ``start_ns``/``dur_ns``: int64[nx] with int8 status (``chrome_times``);
    ``kind_x``: int8[nx] ``Kind``; ``args``: ``ArgColumns`` of nx rows; ``cat_f``:
    int32 category id of each flow event (``s``/``t``/``f``) in event order;
    ``has_v2``: some ``X`` event has a ``bind_id``; ``legacy``: autograd export;
    ``old_ids``: 2020 categories seen (``args["external id"]`` read as well);
    ``external_id_old``: int64[nx] ``args["external id"]`` when not ``old_ids`` but asked
    for (``scan_events(keep_old_ids=True)``; empty when no event has one), else None.
    """

    n: int
    code: np.ndarray
    cats: Interner
    names: Interner
    lanes: Interner
    cat_x: np.ndarray
    name_x: np.ndarray
    lane_x: np.ndarray
    start_ns: np.ndarray
    start_status: np.ndarray
    dur_ns: np.ndarray
    dur_status: np.ndarray
    kind_x: np.ndarray
    args: ArgColumns
    cat_f: np.ndarray
    has_v2: bool
    legacy: bool
    old_ids: bool
    external_id_old: np.ndarray | None = None


def carried_old_ids(ext_old: np.ndarray) -> np.ndarray:
    """A part's ``args["external id"]`` column as ``EventColumns.external_id_old`` carries
    it for ``merge_all``: empty when no event of the part has one (nothing to carry)."""
    return ext_old if bool((ext_old >= 0).any()) else np.zeros(0, np.int64)


def phase_codes(events: Sequence) -> np.ndarray:
    """int8 ``PH_*`` code of each decoded event (by its class: the tagged union on ``ph``)."""
    return np.fromiter(map(_PHASE_CODE.get, map(type, events), repeat(PH_OTHER)), dtype=np.int8, count=len(events))


def scan_events(
    events: Sequence, x_class: type, skip: list[int] | None = None, keep_old_ids: bool = False
) -> EventColumns:
    """``EventColumns`` of ``events`` (decoded ``chrome_schema`` structs; ``X`` events
    are of ``x_class``). Events at indices ``skip`` count as ``PH_SKIP`` (unusable
    ids). Never raises on odd values: they get a status or -1 (see ``times`` and
    ``extract_args``)."""
    n = len(events)
    code = phase_codes(events)
    if skip:
        code[skip] = PH_SKIP
    xi = np.flatnonzero(code == PH_X)
    nx = int(xi.size)
    xs = [e for e in events if type(e) is x_class] if not skip else [events[k] for k in xi.tolist()]
    cats = Interner()
    cat_x = np.fromiter(map(cats.__getitem__, map(_get["cat"], xs)), dtype=np.int32, count=nx)
    fi = np.flatnonzero(code == PH_FLOW)
    flows = list(itemgetter(*fi.tolist())(events)) if fi.size > 1 else [events[int(k)] for k in fi]
    cat_f = np.fromiter(map(cats.__getitem__, map(_get["cat"], flows)), dtype=np.int32, count=len(flows))
    del flows
    for k in np.flatnonzero((code == PH_M) | (code == PH_OTHER)).tolist():
        cats[events[k].cat]
    start, st_status = times(xs, "ts")
    dur, du_status = times(xs, "dur")
    names = Interner()
    name_x = np.fromiter(map(names.__getitem__, map(_get["name"], xs)), dtype=np.int32, count=nx)
    lanes, lane_x = lane_keys(xs)
    kind_x, old_ids, legacy = x_kinds(cats, names, lanes, cat_x, name_x, lane_x)
    arg_list = list(map(_get["args"], xs))
    args = extract_args(arg_list, kind_x, name_x, list(names), old_external_id=old_ids)
    ext_old = carried_old_ids(old_external_ids(arg_list)) if keep_old_ids and not old_ids else None
    del arg_list
    has_v2 = any(map(_get["bind_id"], xs))
    return EventColumns(
        n=n,
        code=code,
        cats=cats,
        names=names,
        lanes=lanes,
        cat_x=cat_x,
        name_x=name_x,
        lane_x=lane_x,
        start_ns=start,
        start_status=st_status,
        dur_ns=dur,
        dur_status=du_status,
        kind_x=kind_x,
        args=args,
        cat_f=cat_f,
        has_v2=bool(has_v2),
        legacy=legacy,
        old_ids=old_ids,
        external_id_old=ext_old,
    )


def x_kinds(
    cats: Interner, names: Interner, lanes: Interner, cat_x: np.ndarray, name_x: np.ndarray, lane_x: np.ndarray
) -> tuple[np.ndarray, bool, bool]:
    """(int8 ``Kind`` of each ``X`` event, 2020 categories seen, legacy autograd export)
    from the interned categories (of every event), names and raw lanes of ``X`` events
    and their ids; in a legacy export, events on ``CUDA functions`` are kernels and the
    unknown ones on ``CPU functions`` are CPU ops."""
    cat_list = list(cats)
    kind_x = kinds(cat_list, cat_x, name_x, list(names))
    old_ids = any(c in OLD_CATS for c in cat_list if isinstance(c, str))
    legacy = bool(LEGACY_PIDS & {k[0] for k in lanes if isinstance(k[0], str)})
    if legacy:
        for key, lid in lanes.items():
            if key[0] == "CUDA functions":
                kind_x[lane_x == lid] = int(Kind.KERNEL)
            elif key[0] == "CPU functions":
                kind_x[(lane_x == lid) & (kind_x == int(Kind.OTHER))] = int(Kind.CPU_OP)
    return kind_x, old_ids, legacy


def merge_all(parts: Sequence[EventColumns]) -> EventColumns | None:
    """One ``EventColumns`` for ``parts`` in order, exactly what one pass over the
    whole list gives (up to the order of category ids, which nothing depends on), with
    one concatenation per column. When some part has 2020 categories, the others' old
    ``external id`` (``external_id_old``) fills their absent ids, as one pass would;
    None when that column is missing or a part is a legacy export (then scan the
    whole list instead). ``parts`` must not be empty; the first part's
    interners grow to hold every part's keys."""
    head = parts[0]
    if len(parts) == 1:
        return head
    if any(p.legacy for p in parts):
        return None
    old = any(p.old_ids for p in parts)
    ext_of = []  # each part's external ids as one pass over the whole list reads them
    for p in parts:
        ext = p.args.external_id
        if old and not p.old_ids:
            if p.external_id_old is None:
                return None
            if p.external_id_old.size:  # empty: the part holds no such key
                ext = np.where(ext >= 0, ext, p.external_id_old)
        ext_of.append(ext)

    def remap(interner: Interner, keys: Interner, ids: np.ndarray) -> np.ndarray:
        if ids.size == 0 or keys is interner:
            return ids
        table = np.fromiter(map(interner.__getitem__, keys), dtype=np.int32, count=len(keys))
        return table[ids]

    cat_x, cat_f, name_x, lane_x = [], [], [], []
    for p in parts:
        cat_x.append(remap(head.cats, p.cats, p.cat_x))
        cat_f.append(remap(head.cats, p.cats, p.cat_f))
        for c in p.cats:  # categories of M and other phases
            head.cats[c]
        name_x.append(remap(head.names, p.names, p.name_x))
        lane_x.append(remap(head.lanes, p.lanes, p.lane_x))

    def cat(field: str) -> np.ndarray:
        return np.concatenate([getattr(p, field) for p in parts])

    args = ArgColumns(
        *(
            np.concatenate(ext_of if f.name == "external_id" else [getattr(p.args, f.name) for p in parts])
            for f in dataclasses.fields(ArgColumns)
        )
    )
    return EventColumns(
        n=sum(p.n for p in parts),
        code=cat("code"),
        cats=head.cats,
        names=head.names,
        lanes=head.lanes,
        cat_x=np.concatenate(cat_x),
        name_x=np.concatenate(name_x),
        lane_x=np.concatenate(lane_x),
        start_ns=cat("start_ns"),
        start_status=cat("start_status"),
        dur_ns=cat("dur_ns"),
        dur_status=cat("dur_status"),
        kind_x=cat("kind_x"),
        args=args,
        cat_f=np.concatenate(cat_f),
        has_v2=any(p.has_v2 for p in parts),
        legacy=False,
        old_ids=old,
    )
