"""Slow reference for ASCII event lists: the line-by-line reading ``load_events`` had
before issue 15 (one ``parse_fast`` / ``parse_line`` call per line, a Python loop over
the events, a ``TraceBuilder.event`` call per event), kept unchanged so the vectorised
loader can be held to it on random lists (``tests/test_ascii_fastpath.py``).

``load_events_reference(lines, path)`` returns the ``Trace`` (or raises the
``TraceFormatError``) the old loader gave; only public names of ``gapscope.parsers``.
"""

from __future__ import annotations

import bisect
import re
from fractions import Fraction

from gapscope.parsers.ascii.common import LANE_RE, UNIT_NS, clip, cpu_lane, gpu_lane, new_builder
from gapscope.parsers.ascii.events import DEFAULT_UNIT, EventLine, parse_fast, parse_line
from gapscope.parsers.ascii.names import copy_direction, cpu_kind, gpu_kind, launch_target
from gapscope.parsers.errors import TraceFormatError
from gapscope.parsers.model import CopyKind, Kind, Trace

__all__ = ["load_events_reference"]

_BEGIN_END = re.compile(r"^(?:(.*?)\s+)?(begin|end)$", re.I)


def load_events_reference(lines: list[str], path: str = "") -> Trace:
    """Build a ``Trace`` (``source.format == "ascii-events"``) from event-list lines.

    ``lines``: the file's lines without line ends. Times are exact decimals rounded to
    the nearest ns. Raises ``TraceFormatError`` with line and column for: a line that
    is not ``<time> [unit] <lane> <text>``, an unknown unit, ``X end`` after ``X`` was
    already closed on that lane, ``begin``/``end`` without a name, a time earlier than
    the previous line's on the same lane. Ranges still open at the end of the file are
    closed at the file's last time, with a warning.
    """
    parsed: list[EventLine] = []
    unit = DEFAULT_UNIT
    units_seen: list[str] = []
    last_on_lane: dict[str, EventLine] = {}
    labels: dict[tuple[str, str], str] = {}
    append = parsed.append
    for i, raw in enumerate(lines):
        ev = parse_fast(raw, i + 1, unit, labels)
        if ev is None:
            s = raw.strip()
            if not s or s.startswith("#"):
                continue
            ev = parse_line(raw, i + 1, unit, path)
        if ev.unit != unit or not units_seen:
            units_seen.append(ev.unit)
            unit = ev.unit
        prev = last_on_lane.get(ev.lane)
        if prev is not None and ev.time_ns < prev.time_ns:
            raise TraceFormatError(
                path,
                f"time goes backwards on lane {clip(ev.lane)}: {_fmt(ev.time_ns, ev.unit)} after "
                f"{_fmt(prev.time_ns, prev.unit)} on line {prev.line}",
                line=ev.line,
                column=ev.time_col,
                hint="lines of one lane must be in time order",
            )
        last_on_lane[ev.lane] = ev
        append(ev)
    b = new_builder(lines, path, "ascii-events")
    b.source.display_time_unit = units_seen[0] if units_seen else DEFAULT_UNIT
    b.source.extra["default_unit"] = DEFAULT_UNIT
    if not parsed:
        return b.build()
    first_ns = min(e.time_ns for e in parsed)
    last_ns = max(e.time_ns for e in parsed)
    return _build(b, parsed, first_ns, last_ns, path)


def _fmt(ns: int, unit: str) -> str:
    v = Fraction(ns, UNIT_NS[unit])
    return f"{float(v):g} {unit}"


def _build(b, parsed: list[EventLine], first_ns: int, last_ns: int, path: str) -> Trace:
    lanes: dict[str, int] = {}
    pending: dict[str, tuple[EventLine, str]] = {}  # CPU point waiting for its end
    open_spans: dict[tuple[str, str], list[EventLine]] = {}
    seen_names: set[tuple[str, str]] = set()
    gpu_spans: list[tuple[int, str, int, int]] = []  # (start, name, row, line)
    calls: list[tuple[int, str, int, Kind, CopyKind]] = []  # (start, text, row, kind, dir)
    rows: list[dict] = []

    def lane_of(label: str) -> int:
        if label not in lanes:
            m = LANE_RE.match(label)
            # every label is lane_label's canonical CPU<digits>/GPU<digits>, made from a lane token
            # that matched LANE_RE (parse_line) or the same pattern inside _FAST (parse_fast)
            assert m is not None, label
            lanes[label] = (gpu_lane if m.group(1) == "GPU" else cpu_lane)(b, m.group(2))
        return lanes[label]

    gpu_kinds: dict[str, tuple[Kind, CopyKind]] = {}
    work_kinds = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)

    def emit(label: str, name: str, start: int, end: int, line: int, *, span: bool) -> None:
        if label[0] == "G":  # GPU lane
            if not span:
                kind, ck = Kind.INSTANT, CopyKind.NONE
            else:
                kc = gpu_kinds.get(name)
                if kc is None:
                    kc = gpu_kinds[name] = gpu_kind(name)
                kind, ck = kc
            rows.append(dict(lane=lanes[label], name=name, start=start, dur=end - start, kind=kind, ck=ck, line=line))
            if kind in work_kinds:
                gpu_spans.append((start, name, len(rows) - 1, line))
            return
        kind = cpu_kind(name, span=span)
        ck = copy_direction(name) if kind == Kind.MEMCPY_CALL else CopyKind.NONE
        rows.append(dict(lane=lanes[label], name=name, start=start, dur=end - start, kind=kind, ck=ck, line=line))
        if kind in (Kind.LAUNCH, Kind.MEMCPY_CALL):
            calls.append((start, name, len(rows) - 1, kind, ck))

    begin_end = _BEGIN_END.match
    for ev in parsed:
        line, time_ns, _, _, label, _, text, _ = ev
        if label not in lanes:
            lane_of(label)
        if pending:
            p = pending.pop(label, None)
            if p is not None:
                emit(label, p[1], p[0].time_ns, time_ns, p[0].line, span=False)
        head, blank, last = text.rpartition(" ")
        action = last.lower() if blank else ""
        if action == "begin" or action == "end":  # the common 'X begin' / 'X end', as _BEGIN_END reads it
            name = head.strip()
        else:
            m = begin_end(text) if text[-1] in "nNdD" else None
            if m is None:
                if label[0] == "C":
                    pending[label] = (ev, text)
                else:
                    emit(label, text, time_ns, time_ns, line, span=False)
                continue
            name, action = (m.group(1) or "").strip(), m.group(2).lower()
        if not name:
            raise TraceFormatError(
                path, f"{action!r} needs a name before it ('X {action}')", line=ev.line, column=ev.text_col
            )
        key = (label, name)
        if action == "begin":
            stack = open_spans.get(key)
            if stack is None:
                open_spans[key] = [ev]
                seen_names.add(key)
            else:
                stack.append(ev)
            continue
        stack = open_spans.get(key)
        if stack:
            beg = stack.pop()
            emit(label, name, beg.time_ns, ev.time_ns, beg.line, span=True)
        elif key not in seen_names:
            # The range began before the excerpt: start it at the file's first time.
            b.warn(
                ev.line,
                "text",
                f"'{clip(name)} end' on {clip(label)} has no 'begin': taken to start at the "
                f"first time of the file ({_fmt(first_ns, ev.unit)})",
            )
            emit(label, name, first_ns, ev.time_ns, ev.line, span=True)
            seen_names.add(key)
        else:
            raise TraceFormatError(
                path,
                f"'{clip(name)} end' without '{clip(name)} begin' on lane {clip(label)}",
                line=ev.line,
                column=ev.text_col,
                hint=f"'{clip(name)}' was already closed; each 'end' needs its own 'begin'",
            )
    for label, (ev, text) in pending.items():
        emit(label, text, ev.time_ns, last_ns, ev.line, span=False)
    for (label, name), stack in open_spans.items():
        for beg in stack:
            b.warn(
                beg.line,
                "text",
                f"'{clip(name)} begin' on {clip(label)} is never closed: closed at the last "
                f"time of the file ({_fmt(last_ns, beg.unit)})",
            )
            emit(label, name, beg.time_ns, last_ns, beg.line, span=True)
    corr = _link_calls(b, rows, gpu_spans, calls)
    # Annotations first among events with equal (start, dur): ranges enclose calls.
    ann = Kind.ANNOTATION
    order = sorted(range(len(rows)), key=[(r["start"], -r["dur"], r["kind"] != ann) for r in rows].__getitem__)
    event, launch = b.event, Kind.LAUNCH
    for k in order:
        r = rows[k]
        kind = r["kind"]
        target = launch_target(r["name"]) if kind == launch else ""
        event(
            r["lane"],
            r["name"],
            r["start"],
            r["dur"],
            kind,
            correlation=corr.get(k, -1),
            copy_kind=r["ck"],
            line=r["line"],
            args={"target": target} if target else None,
        )
    return b.build()


def _words(text: str) -> set[str]:
    return {w for w in re.split(r"[^0-9a-z_]+", text.lower()) if w}


class _Links:
    """Correlation ids handed out in link order: row index → id, shared by a call and the
    GPU span it is linked to; ``taken``: the span rows already linked."""

    def __init__(self) -> None:
        self.taken: set[int] = set()
        self.corr: dict[int, int] = {}
        self.next_id = 1

    def link(self, call_row: int, span_row: int) -> None:
        self.corr[call_row] = self.corr[span_row] = self.next_id
        self.taken.add(span_row)
        self.next_id += 1


def _link_launches_by_name(links: _Links, rows, kernels, launches) -> list[tuple[int, str, int]]:
    """Link each launch call, in time order, to the first later unlinked kernel whose
    name's word set contains or is contained in its target's; returns the (start_ns,
    text, row) of the launches left unlinked."""
    by_words: dict[frozenset, list] = {}
    for t, r in kernels if launches else ():  # word groups only matter to launch calls
        by_words.setdefault(frozenset(_words(rows[r]["name"])), []).append((t, r))
    groups = {w: _Pool(v, links.taken) for w, v in by_words.items() if w}
    candidates: dict[frozenset, list] = {}
    unmatched = []
    for start, text, row, _, _ in launches:
        target = frozenset(_words(launch_target(text)))
        if target not in candidates:
            candidates[target] = [p for w, p in groups.items() if target and (w <= target or target <= w)]
        hit = min(filter(None, (p.first(start) for p in candidates[target])), default=None)
        if hit is not None:
            links.link(row, hit[1])
        else:
            unmatched.append((start, text, row))
    return unmatched


def _link_launches_by_order(b, links: _Links, rows, kernels, unmatched) -> None:
    """Link each launch ``unmatched`` by name to the first later unlinked kernel, with a
    warning to builder ``b`` (another when there is none)."""
    all_kernels = _Pool(kernels, links.taken)
    for start, text, row in unmatched:
        hit = all_kernels.first(start)
        if hit is None:
            b.warn(rows[row]["line"], "text", f"{clip(text)!r}: no later GPU span to link to")
            continue
        g = rows[hit[1]]
        b.warn(
            rows[row]["line"],
            "text",
            f"{clip(text)!r} names no later GPU span: linked by order to {clip(g['name'])!r} (line {g['line']})",
        )
        links.link(row, hit[1])


def _link_copies(links: _Links, rows, spans, calls) -> None:
    """Link each copy call to the first unlinked GPU copy of its direction (or of unknown
    direction; any, when the call's is unknown) that starts inside the call."""
    copies = [(t, r) for t, r in spans if rows[r]["kind"] == Kind.MEMCPY]
    pools = {ck: _Pool([(t, r) for t, r in copies if rows[r]["ck"] == ck], links.taken) for ck in CopyKind}
    any_copy = _Pool(copies, links.taken)
    for start, _text, row, _kind, ck in sorted(c for c in calls if c[3] == Kind.MEMCPY_CALL):
        if ck in (CopyKind.NONE, CopyKind.UNKNOWN):
            options = [any_copy]
        else:
            options = [pools[ck], pools[CopyKind.UNKNOWN]]
        hit = min(filter(None, (p.first(start) for p in options)), default=None)
        if hit is not None and hit[0] <= start + rows[row]["dur"]:
            links.link(row, hit[1])


def _link_calls(b, rows, gpu_spans, calls) -> dict[int, int]:
    """Correlation ids: row index → id, shared by each linked call and GPU span.

    ``rows``: dicts with ``kind``, ``ck`` (CopyKind), ``dur``, ``line``; ``gpu_spans``:
    (start_ns, name, row, line) of GPU work; ``calls``: (start_ns, text, row, kind,
    copy direction) of launch and copy calls. Warnings go to builder ``b``.

    Launch calls in time order take the first later unlinked GPU span whose name
    matches (word sets, see module docstring); then unmatched launches take the first
    later unlinked span. Copy calls take the first unlinked GPU copy of their
    direction that starts inside the call.
    """
    links = _Links()
    spans = sorted((g[0], g[2]) for g in gpu_spans)
    kernels = [(t, r) for t, r in spans if rows[r]["kind"] == Kind.KERNEL]
    launches = sorted(c for c in calls if c[3] == Kind.LAUNCH)
    unmatched = _link_launches_by_name(links, rows, kernels, launches)
    _link_launches_by_order(b, links, rows, kernels, unmatched)
    _link_copies(links, rows, spans, calls)
    return links.corr


class _Pool:
    """(start_ns, row) pairs sorted by start; ``first(t)``: the earliest pair at or after
    ``t`` whose row is not in the shared ``taken`` set, in amortised O(log n)."""

    def __init__(self, items: list[tuple[int, int]], taken: set[int]) -> None:
        self.items = items
        self.starts = [t for t, _ in items]
        self.skip = list(range(len(items) + 1))  # union-find: next index not known taken
        self.taken = taken

    def _find(self, i: int) -> int:
        root = i
        while self.skip[root] != root:
            root = self.skip[root]
        while self.skip[i] != root:
            self.skip[i], i = root, self.skip[i]
        return root

    def first(self, t: int) -> tuple[int, int] | None:
        i = self._find(bisect.bisect_left(self.starts, t))
        while i < len(self.items) and self.items[i][1] in self.taken:
            self.skip[i] = i + 1
            i = self._find(i + 1)
        return self.items[i] if i < len(self.items) else None
