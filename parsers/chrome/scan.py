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
    "merge_ordered",
    "PartLayout",
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


def merge_all(parts: Sequence[EventColumns], marks: list | None = None) -> EventColumns | None:
    """One ``EventColumns`` for ``parts`` in order, exactly what one pass over the
    whole list gives (up to the order of category ids, which nothing depends on), with
    one concatenation per column. When some part has 2020 categories, the others' old
    ``external id`` (``external_id_old``) fills their absent ids, as one pass would;
    None when that column is missing or a part is a legacy export (then scan the
    whole list instead). ``parts`` must not be empty; the first part's
    interners grow to hold every part's keys. ``marks``: a list given one
    (categories, names, lanes) tuple per part, the sizes of the merged interners once
    that part is in (``PartLayout.keys``)."""
    head = parts[0]
    if len(parts) == 1:
        if marks is not None:
            marks.append((len(head.cats), len(head.names), len(head.lanes)))
        return head
    if any(p.legacy for p in parts):
        return None
    ext_of = _external_ids(parts)
    if ext_of is None:
        return None

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
        if marks is not None:
            marks.append((len(head.cats), len(head.names), len(head.lanes)))

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
        old_ids=any(p.old_ids for p in parts),
    )


def _external_ids(parts: Sequence[EventColumns]) -> list[np.ndarray] | None:
    """Each part's ``args.external_id`` as one pass over the whole list reads it: where
    some part has 2020 categories (``old_ids``), the others' absent ids filled from
    their ``external_id_old``; None when one of those lacks that column."""
    old = any(p.old_ids for p in parts)
    ext_of = []
    for p in parts:
        ext = p.args.external_id
        if old and not p.old_ids:
            if p.external_id_old is None:
                return None
            if p.external_id_old.size:  # empty: the part holds no such key
                ext = np.where(ext >= 0, ext, p.external_id_old)
        ext_of.append(ext)
    return ext_of


@dataclasses.dataclass(frozen=True)
class PartLayout:
    """Where each part a child decoded lies in its merged columns, for
    ``merge_ordered``: ``ids``: int64[k], the parts' places in the file's plan
    (``parallel.cut.chunk_spans``), in the order the child merged them; ``ends``:
    int64[k, 3], the counts of events, ``X`` events and flow events up to the end of
    each part; ``keys``: int64[k, 3], the sizes of the child's merged ``cats``,
    ``names`` and ``lanes`` once each part was in (``merge_all``'s ``marks``)."""

    ids: np.ndarray
    ends: np.ndarray
    keys: np.ndarray

    def fits(self, ec: EventColumns) -> bool:
        """Whether this layout can be the one of ``ec`` (rising counts that end at its
        sizes): a damaged message never slices columns wrongly."""
        k = self.ids.shape[0]
        if k == 0 or self.ends.shape != (k, 3) or self.keys.shape != (k, 3):
            return False
        sizes = ((ec.n, ec.cat_x.size, ec.cat_f.size), (len(ec.cats), len(ec.names), len(ec.lanes)))
        for counts, size in zip((self.ends, self.keys), sizes):
            if tuple(counts[-1].tolist()) != size or bool((counts < 0).any() or (np.diff(counts, axis=0) < 0).any()):
                return False
        return True


def merge_ordered(
    children: Sequence[EventColumns], layouts: Sequence[PartLayout]
) -> tuple[EventColumns, list[tuple[int, int]]] | None:
    """The parts the children decoded (each child's columns merged by ``merge_all``,
    its parts laid out by its ``PartLayout``), joined in the order of their places in
    the plan: exactly ``merge_all`` of the parts one by one in that order, names and
    lanes numbered in order of first sight over the whole list (each part's additions
    to its child's interners, ``PartLayout.keys``, taken in that order). Also each
    part's (child, place among the child's parts) in that order, for what travels
    beside the columns (flow and other blobs, ``starts``). None when the places are
    not 0 .. n-1 once each, a layout does not fit its columns, a child is a legacy
    export, or an old ``external id`` column is missing (as ``merge_all``).

    Why: children that claim their parts as they go (``parallel.fork.start_file``)
    hold parts from all over the file, not one run each."""
    if len(children) != len(layouts) or any(c.legacy for c in children):
        return None
    if not all(lay.fits(c) for c, lay in zip(children, layouts)):
        return None
    order = sorted((k, c, i) for c, lay in enumerate(layouts) for i, k in enumerate(lay.ids.tolist()))
    if [k for k, _, _ in order] != list(range(len(order))):
        return None
    ext_of = _external_ids(children)
    if ext_of is None:
        return None
    interners = (Interner(), Interner(), Interner())  # categories, names, lanes
    keys_of = [(list(c.cats), list(c.names), list(c.lanes)) for c in children]
    for _, c, i in order:
        lo = layouts[c].keys[i - 1].tolist() if i else [0, 0, 0]
        for interner, keys, a, b in zip(interners, keys_of[c], lo, layouts[c].keys[i].tolist()):
            for key in keys[a:b]:
                interner[key]

    def remap(interner: Interner, keys: list, ids: np.ndarray) -> np.ndarray:
        table = np.fromiter(map(interner.__getitem__, keys), dtype=np.int32, count=len(keys))
        same = ids.size == 0 or bool((table == np.arange(len(keys), dtype=np.int32)).all())
        return ids if same else table[ids]

    cats, names, lanes = interners
    cat_x = [remap(cats, k[0], c.cat_x) for k, c in zip(keys_of, children)]
    cat_f = [remap(cats, k[0], c.cat_f) for k, c in zip(keys_of, children)]
    name_x = [remap(names, k[1], c.name_x) for k, c in zip(keys_of, children)]
    lane_x = [remap(lanes, k[2], c.lane_x) for k, c in zip(keys_of, children)]

    def cat(columns: Sequence[np.ndarray], axis: int) -> np.ndarray:  # axis: 0 events, 1 X events, 2 flows
        pieces = []
        for _, c, i in order:
            ends = layouts[c].ends
            pieces.append(columns[c][(int(ends[i - 1, axis]) if i else 0) : int(ends[i, axis])])
        return np.concatenate(pieces)

    def x(field: str) -> np.ndarray:
        return cat([getattr(c, field) for c in children], 1)

    args = ArgColumns(
        *(
            cat(ext_of if f.name == "external_id" else [getattr(c.args, f.name) for c in children], 1)
            for f in dataclasses.fields(ArgColumns)
        )
    )
    merged = EventColumns(
        n=sum(c.n for c in children),
        code=cat([c.code for c in children], 0),
        cats=cats,
        names=names,
        lanes=lanes,
        cat_x=cat(cat_x, 1),
        name_x=cat(name_x, 1),
        lane_x=cat(lane_x, 1),
        start_ns=x("start_ns"),
        start_status=x("start_status"),
        dur_ns=x("dur_ns"),
        dur_status=x("dur_status"),
        kind_x=x("kind_x"),
        args=args,
        cat_f=cat(cat_f, 2),
        has_v2=any(c.has_v2 for c in children),
        legacy=False,
        old_ids=any(c.old_ids for c in children),
    )
    return merged, [(c, i) for _, c, i in order]
