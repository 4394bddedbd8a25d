"""Chrome Trace Event Format phases other than ``X``, as plain rows.

``B``/``E`` pairs (nested, unmatched, mis-named), instants ``i``/``I``/``R``,
counters ``C``, async ``b``/``e``/``n`` and legacy ``S``/``T``/``F``, metadata ``M``.
These are rare in Kineto files and handled per event in Python; ``X`` events take
the vectorised path in ``gapscope.parsers.chrome.loader``. Semantics follow the Trace Event Format
(Google) and catapult's trace viewer: ``E`` closes the most recent open ``B`` of its
thread whatever its name; async events pair by (pid, cat, id), and a named nestable
``e`` closes the innermost open ``b`` of the same name.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np

from gapscope.parsers.chrome.columns import events_at
from gapscope.parsers.chrome.interner import Interner
from gapscope.parsers.chrome.times import NEED_EXACT, OK, number_text, raw_scalar_ns, raw_to_ns, scalar_ns, to_ns
from gapscope.parsers.kinds import kind_of
from gapscope.parsers.lanes import Metadata, id_text
from gapscope.parsers.model import Kind

__all__ = ["Rows", "collect_metadata", "collect_rows"]


class Rows:
    """Row lists appended by the phase handlers (one row = one timeline event)."""

    def __init__(self) -> None:
        self.start: list[int] = []
        self.dur: list[int] = []
        self.lane_key: list[tuple] = []
        self.name: list[str] = []
        self.kind: list[int] = []
        self.value: list[float] = []
        self.src: list[int] = []
        self.open_ended: list[int] = []  # row positions of unclosed B / b slices

    def add(
        self, start: int, dur: int, lane_key: tuple, name: Any, kind: int, src: int, value: float = math.nan
    ) -> int:
        self.start.append(start)
        self.dur.append(dur)
        self.lane_key.append(lane_key)
        self.name.append(name)
        self.kind.append(kind)
        self.value.append(value)
        self.src.append(src)
        return len(self.start) - 1

    def extend_zero(self, start: list[int], lane_key: list[tuple], name: list, kind: int, src: list[int]) -> None:
        """``add`` each (start, lane key, name, src) as a zero-length row of ``kind``
        (no value): instants, in one call."""
        n = len(start)
        self.start += start
        self.dur += [0] * n
        self.lane_key += lane_key
        self.name += name
        self.kind += [kind] * n
        self.value += [math.nan] * n
        self.src += src

    def __len__(self) -> int:
        return len(self.start)


def collect_metadata(events: Sequence, idx: list[int], meta: Metadata, warn=None) -> None:
    """Fill ``meta`` from the ``M`` events at positions ``idx`` (``args.name``,
    ``args.sort_index``, ``args.labels``).

    When one pid (or pid, tid) is given two different ``process_name``/``thread_name``
    values, the last in file order wins (as in Perfetto's importer). Conflicting
    ``process_name``s get one warning ``warn(k, "args.name", message)`` with the count
    (when ``warn`` is given); a ``thread_name`` that changes is a thread renamed during
    the run (Kineto records ``python3`` then ``pt_autograd_0``; 8 corpus files do) and
    is only counted in ``meta.renamed_threads``."""
    conflicts: list[tuple[int, str, str, str, str]] = []  # (k, what, id, old, new)
    picked = events_at(events, idx)
    texts: dict = {}

    def idt(v) -> str:
        r = texts.get((type(v), v))
        if r is None:
            r = texts[(type(v), v)] = id_text(v)
        return r

    keep = _changing_writes(picked, idt)
    if keep is not None:
        idx = [idx[j] for j in keep]
        picked = [picked[j] for j in keep]
    for k, e in zip(idx, picked):
        a = e.args
        pid = idt(e.pid)
        tid = idt(e.tid)
        name = e.name
        if name == "process_name" and a.name is not None:
            old = meta.process_name.get(pid)
            meta.process_name[pid] = str(a.name)
            if old is not None and old != meta.process_name[pid]:
                conflicts.append((k, "process_name", f"pid {pid}", old, meta.process_name[pid]))
        elif name == "thread_name" and a.name is not None:
            old = meta.thread_name.get((pid, tid))
            meta.thread_name[(pid, tid)] = str(a.name)
            if old is not None and old != meta.thread_name[(pid, tid)]:
                meta.renamed_threads += 1
        elif name in ("process_sort_index", "thread_sort_index"):
            v = a.sort_index
            if _finite(v) is not None:
                if name == "process_sort_index":
                    meta.process_sort[pid] = int(v)
                else:
                    meta.thread_sort[(pid, tid)] = int(v)
        elif name == "process_labels" and a.labels is not None:
            meta.process_labels[pid] = str(a.labels)
    if conflicts and warn is not None:
        k, what, who, old, new = conflicts[0]
        more = f" ({len(conflicts)} conflicting names in all)" if len(conflicts) > 1 else ""
        warn(
            k,
            "args.name",
            f"{what} of {who} given twice ({old!r}, then {new!r}): the last one is used, as in Perfetto{more}",
        )


_TOP = attrgetter("name", "pid", "tid")
_ARGS = attrgetter("args")
_PROCESS_SLOTS = frozenset(("process_name", "process_sort_index", "process_labels"))
_THREAD_SLOTS = frozenset(("thread_name", "thread_sort_index"))
#: Below this many ``M`` events the plain loop is as fast.
_DEDUP_MIN = 256


def _changing_writes(picked: list, idt: Callable[[Any], str]) -> np.ndarray | None:
    """Positions in ``picked`` (``M`` events) that ``collect_metadata`` must visit, in
    order, or None (visit all). An event whose fields equal those of the previous
    event writing the same slot (``process_name`` of one pid, ``thread_name`` of one
    (pid, tid), ...; pids and tids by their text) writes the value the slot already
    holds: it changes nothing and is no conflict, so it is left out. hta's
    ``mtia_rank_0`` repeats 22 such events 310k times.

    Fields compare with Python equality, which takes ``1`` and ``1.0`` for one value.
    That is harmless for pid, tid (one text), the event name and ``sort_index`` (one
    ``int``), but not for ``args.name``/``args.labels``, whose text is kept: so None is
    returned when any distinct event holds a number there (a str is never equal to a
    number, so an event with a number would show as a distinct one)."""
    n = len(picked)
    if n < _DEDUP_MIN:
        return None
    fields = Interner()
    # The scanner decodes each distinct event text once and hands out that one object
    # for every copy of it: the fields of each object are read once (mtia_rank_0's 310k
    # events are 22 objects). Distinct objects with equal fields still meet in ``fields``.
    oid = np.fromiter(map(id, picked), dtype=np.uint64, count=n)
    _, first, inv = np.unique(oid, return_index=True, return_inverse=True)
    reps = [picked[j] for j in first.tolist()]
    try:
        rep_id = np.fromiter(
            map(fields.__getitem__, zip(map(_TOP, reps), map(_ARGS, reps))), dtype=np.int64, count=len(reps)
        )
    except TypeError:  # a field holds a JSON list or object: not comparable by hashing, visit all
        return None
    tuple_id = rep_id[inv.reshape(-1)]
    slots: dict[tuple, int] = {}
    slot_of = np.empty(len(fields), dtype=np.int64)
    for (top, args), i in fields.items():
        if not (isinstance(args.name, str | None) and isinstance(args.labels, str | None)):
            return None
        name, pid, tid = top
        if name in _PROCESS_SLOTS:
            slot_key: tuple = (name, idt(pid))
        elif name in _THREAD_SLOTS:
            slot_key = (name, idt(pid), idt(tid))
        else:
            slot_key = ("", i)  # writes no slot: each distinct such event is kept once, harmlessly
        slot_of[i] = slots.setdefault(slot_key, len(slots))
    slot = slot_of[tuple_id]
    order = np.argsort(slot, kind="stable")
    same = (slot[order][1:] == slot[order][:-1]) & (tuple_id[order][1:] == tuple_id[order][:-1])
    repeat = np.zeros(n, dtype=bool)
    repeat[order[1:][same]] = True
    return np.flatnonzero(~repeat)


def collect_rows(
    events: Mapping[int, Any],
    by_phase: dict[str, list[int]],
    rows: Rows,
    warn: Callable[[int, str | None, str], None],
    exact_ts: dict[int, int],
    bad: list[tuple[int, str, str]],
    args_of: Callable[[int], dict],
) -> None:
    """Turn non-``X`` timeline events into rows.

    ``events``: event index → decoded event, for every index in ``by_phase`` (phase →
    event indices). ``warn(k, field, message)`` reports a problem of event ``k``;
    events with unusable times are listed in ``bad`` as (k, field, reason);
    ``args_of(k)`` returns the full args of event ``k`` (for counters). ``exact_ts``
    holds exact ns times of events whose ``ts`` a float64 cannot hold (read from the
    text beforehand). The times of each phase's events are converted together
    (``chrome_times.to_ns``/``raw_to_ns``, the rules of ``scalar_ns``).
    """

    def times(ks: list[int]) -> list[int | None]:
        """The ns ``ts`` of the events ``ks`` (None where unusable: listed in ``bad``)."""
        vals = [events[k].ts for k in ks]
        if vals and all(type(v) is msgspec.Raw for v in vals):
            ns_a, st_a = raw_to_ns(vals)
        elif any(type(v) is msgspec.Raw for v in vals):  # mixed: one by one
            got = [raw_scalar_ns(bytes(v)) if type(v) is msgspec.Raw else scalar_ns(v) for v in vals]
            ns_a = np.array([g[0] for g in got], dtype=np.int64)
            st_a = np.array([g[1] for g in got], dtype=np.int8)
        else:
            ns_a, st_a = to_ns(vals)
        out: list[int | None] = ns_a.tolist()
        for j in np.flatnonzero(st_a != OK).tolist():
            st = int(st_a[j])
            why = "unreadable" if st == NEED_EXACT else {1: "missing", 2: "non-finite", 3: "invalid"}.get(st, "invalid")
            out[j] = None
            if ks[j] not in exact_ts:
                bad.append((ks[j], "ts", why))
        if exact_ts:
            for j, k in enumerate(ks):
                x = exact_ts.get(k)
                if x is not None:
                    out[j] = x
        return out

    # instants: one row each, in bulk
    for ph in ("i", "I", "R"):
        ks = by_phase.get(ph, [])
        ok = [(k, t) for k, t in zip(ks, times(ks)) if t is not None]
        evs = [events[k] for k, _ in ok]
        rows.extend_zero(
            [t for _, t in ok],
            [(e.pid, e.tid) for e in evs],
            [e.name for e in evs],
            int(Kind.INSTANT),
            [k for k, _ in ok],
        )

    # counters: one row per numeric series
    ks = by_phase.get("C", [])
    for k, t in zip(ks, times(ks)):
        e = events[k]
        if t is None:
            continue
        args = args_of(k)
        series = [(key, v) for key, v in args.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        for key, v in series:
            fv = _finite(v)
            if fv is None:
                what = "non-finite" if isinstance(v, float) else "out-of-range"
                warn(k, f"args.{key}", f"counter {e.name!s} sample has {what} {key} ({number_text(v)}); skipped")
                continue
            label = str(e.name) if len(series) == 1 else f"{e.name} {key}"
            rows.add(t, 0, (e.pid, f"counter {e.name}"), label, int(Kind.COUNTER), k, fv)

    # B/E: per-thread stack in time order (stable: file order for equal ts)
    ids: dict = {}

    def idt(v):
        r = ids.get((type(v), v))
        if r is None:
            r = ids[(type(v), v)] = id_text(v)
        return r

    be = []
    for ph in ("B", "E"):
        ks = by_phase.get(ph, [])
        for k, t in zip(ks, times(ks)):
            if t is not None:
                e = events[k]
                be.append((idt(e.pid), idt(e.tid), t, k, ph))
    be.sort(key=lambda r: (r[0], r[1], r[2], r[3]))
    stacks: dict[tuple, list] = defaultdict(list)
    unmatched_e: list[int] = []
    misnamed: list[int] = []
    for pid, tid, t, k, ph in be:
        st = stacks[(pid, tid)]
        e = events[k]
        if ph == "B":
            st.append((t, k))
            continue
        if not st:
            unmatched_e.append(k)
            continue
        t0, kb = st.pop()
        b = events[kb]
        if e.name is not None and e.name != "" and e.name != b.name:
            misnamed.append(k)
        rows.add(t0, t - t0, (b.pid, b.tid), b.name, int(kind_of(_s(b.cat), _s(b.name), "X")), kb)
    unclosed = []
    for st in stacks.values():
        for t0, kb in st:
            b = events[kb]
            r = rows.add(t0, 0, (b.pid, b.tid), b.name, int(kind_of(_s(b.cat), _s(b.name), "X")), kb)
            rows.open_ended.append(r)
            unclosed.append(kb)
    if unmatched_e:
        warn(unmatched_e[0], None, f"{len(unmatched_e)} 'E' event(s) without a matching 'B' skipped")
    if misnamed:
        warn(
            misnamed[0],
            "name",
            f"{len(misnamed)} 'E' event(s) name a different slice than the 'B' they close; "
            "paired with the innermost open slice",
        )
    if unclosed:
        unclosed.sort()
        warn(unclosed[0], None, f"{len(unclosed)} 'B' slice(s) never closed; drawn to the end of the trace")

    # async: nestable b/e/n and legacy S/T/F, paired by (pid, cat, id)
    asy = []
    for ph in ("b", "e", "n", "S", "T", "F"):
        ks = by_phase.get(ph, [])
        asy += [(t, k, ph) for k, t in zip(ks, times(ks)) if t is not None]
    asy.sort()
    open_async: dict[tuple, list] = defaultdict(list)
    unmatched_async = 0
    for t, k, ph in asy:
        e = events[k]
        lane = (e.pid, f"async {_s(e.cat) or _s(e.name)}")
        key = (id_text(e.pid), _s(e.cat), id_text(e.id))
        if ph in ("b", "S"):
            open_async[key].append((t, k))
        elif ph in ("n", "T"):
            rows.add(t, 0, lane, e.name, int(Kind.INSTANT), k)
        else:
            opened = open_async.get(key)
            j = len(opened) - 1 if opened else -1
            if opened and e.name not in (None, "") and ph == "e":
                # nestable async: an end closes the innermost open begin of its name
                while j >= 0 and events[opened[j][1]].name != e.name:
                    j -= 1
            if opened is None or j < 0:
                unmatched_async += 1
                continue
            t0, kb = opened.pop(j)
            b = events[kb]
            rows.add(t0, t - t0, lane, b.name, int(Kind.OTHER), kb)
    left = [kb for st in open_async.values() for _, kb in st]
    for st in open_async.values():
        for t0, kb in st:
            b = events[kb]
            r = rows.add(t0, 0, (b.pid, f"async {_s(b.cat) or _s(b.name)}"), b.name, int(Kind.OTHER), kb)
            rows.open_ended.append(r)
    if unmatched_async:
        warn(asy[0][1], None, f"{unmatched_async} async end event(s) without a matching begin skipped")
    if left:
        warn(min(left), None, f"{len(left)} async slice(s) never ended; drawn to the end of the trace")


def _finite(v) -> float | None:
    """``v`` as a finite float, or None (not a number, bool, non-finite, or an integer
    beyond float range such as a 400-digit literal)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def _s(v) -> str:
    return "" if v is None else (v if isinstance(v, str) else str(v))
