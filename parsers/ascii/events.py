"""Event-list ASCII timelines: ``0.000 ms  CPU decode_step begin`` lines → ``Trace``.

Grammar and rules (``docs/ascii-timelines.md``, "Event list"):

- ``<time> [unit] <lane> <text>``; unit one of ns, us, µs, ms, s, carried from the
  previous line when omitted, ``ms`` before the first unit of the file.
- ``X begin`` / ``X end`` make a span on that lane; GPU spans are kernels or copies
  (``gapscope.parsers.ascii.names.gpu_kind``), CPU spans annotations or calls (``cpu_kind``).
- Other CPU lines are points lasting until the next line on the same lane (the last
  one until the last time in the file); other GPU lines are instants.
- ``launch X`` links (by ``correlation``) to the first later GPU span whose name words
  are all in X (or whose name contains all of X's words); when none matches, to the
  first later GPU span not linked yet (a warning says so): ``gapscope.parsers.ascii.links``.

``load_events`` reads the common line for the whole text at once and builds the events
as numpy columns (issue 15: about 2 µs per line instead of 20); ``parse_line`` reads
every other line, and gives every message.
"""

from __future__ import annotations

import gc
import re
import typing
from fractions import Fraction

import numpy as np

from gapscope.parsers.ascii.common import (
    LANE_RE,
    MAX_LANE_DIGITS,
    MAX_TIME_NS,
    NUMBER,
    NUMERIC_TOKEN,
    UNIT_NS,
    clip,
    cpu_lane,
    gpu_lane,
    is_malformed,
    lane_label,
    new_builder,
    split_number,
    to_ns,
)
from gapscope.parsers.ascii.links import Calls, LinkRows, link_columns
from gapscope.parsers.ascii.names import copy_direction, cpu_kind, gpu_kind, launch_target
from gapscope.parsers.errors import TraceFormatError
from gapscope.parsers.model import CopyKind, Kind, Trace

__all__ = ["load_events", "DEFAULT_UNIT", "parse_line", "parse_fast", "EventLine"]

DEFAULT_UNIT = "ms"

_TOKEN = re.compile(r"\s*(\S+)")
#: The common line in one match: a plain decimal (no exponent, at most 15 + 9 digits), an
#: optional unit, a lane, the text. Anything else goes through ``parse_line``, which has
#: the same rules and the messages; this only skips its token-by-token work.
_FAST = re.compile(
    r"[ \t]*(\d{1,15}(?:\.\d{0,9})?|\.\d{1,9})[ \t]*(ns|us|µs|μs|ms|s)?[ \t]+"
    r"((?i:cpu|gpu))(\d{0,4}):?[ \t]+(\S.*?)\s*$"
)
_BEGIN_END = re.compile(r"^(?:(.*?)\s+)?(begin|end)$", re.I)


class EventLine(typing.NamedTuple):
    """One parsed line: 1-based ``line``; ``*_col`` 1-based columns; ``time_ns`` int."""

    line: int
    time_ns: int
    time_col: int
    unit: str
    lane: str  # canonical label: CPU, CPU1, GPU, GPU1
    lane_col: int
    text: str
    text_col: int


def parse_line(raw: str, lineno: int, unit: str, path: str) -> EventLine:
    """Parse one event-list line; ``unit`` is the unit carried from earlier lines.

    Raises ``TraceFormatError`` (line, column) for a missing time, an unknown unit, a
    missing lane or missing text.
    """
    first = len(raw) - len(raw.lstrip())
    m = NUMERIC_TOKEN.match(raw, first)
    if m is None:
        raise TraceFormatError(
            path,
            "expected a time at the start of the line",
            line=lineno,
            column=first + 1,
            hint="event-list lines read '<time> [unit] <CPU|GPU> <text>'",
        )
    num, rest = split_number(m.group(0))
    time_col, pos = first + 1, first + len(num)
    if is_malformed(rest):
        raise _malformed(path, raw[first:].split(None, 1)[0], lineno, time_col)
    unit_tok = None
    if pos < len(raw) and not raw[pos].isspace():  # unit glued to the number: 0.5ms
        glued = _TOKEN.match(raw, pos)
        assert glued is not None  # raw[pos] is not blank: \S+ matches there
        unit_tok, unit_col, pos = glued.group(1), glued.start(1) + 1, glued.end()
        if unit_tok not in UNIT_NS:
            raise _unit_error(path, unit_tok, lineno, unit_col)
    t = _TOKEN.match(raw, pos)
    if t is None:
        raise TraceFormatError(path, "expected a lane (CPU or GPU) after the time", line=lineno, column=len(raw) + 1)
    tok, tok_col, pos = t.group(1), t.start(1) + 1, t.end()
    if unit_tok is None and tok in UNIT_NS:
        unit_tok = tok
        t = _TOKEN.match(raw, pos)
        if t is None:
            raise TraceFormatError(
                path, "expected a lane (CPU or GPU) after the unit", line=lineno, column=len(raw) + 1
            )
        tok, tok_col, pos = t.group(1), t.start(1) + 1, t.end()
    lm = LANE_RE.match(tok.rstrip(":"))
    if lm is None:
        nxt = _TOKEN.match(raw, pos)
        if unit_tok is None and nxt is not None and LANE_RE.match(nxt.group(1).rstrip(":")):
            raise _unit_error(path, tok, lineno, tok_col)
        raise TraceFormatError(
            path,
            f"expected a lane (CPU or GPU), found {clip(tok)!r}",
            line=lineno,
            column=tok_col,
            hint="event-list lines read '<time> [unit] <CPU|GPU> <text>'",
        )
    if len(lm.group(2)) > MAX_LANE_DIGITS:
        raise _lane_number_error(path, tok, lineno, tok_col)
    rest = raw[pos:]
    text = rest.strip()
    if not text:
        raise TraceFormatError(path, "missing event text after the lane", line=lineno, column=len(raw) + 1)
    text_col = pos + (len(rest) - len(rest.lstrip())) + 1
    unit = unit_tok or unit
    time_ns = to_ns(num, unit)
    if time_ns is None:
        raise TraceFormatError(
            path,
            f"time {clip(num)} {unit} is out of range",
            line=lineno,
            column=time_col,
            hint="times must be below 2^62 ns (about 146 years)",
        )
    return EventLine(lineno, time_ns, time_col, unit, lane_label(lm.group(1), lm.group(2)), tok_col, text, text_col)


def parse_fast(raw: str, lineno: int, unit: str, labels: dict) -> EventLine | None:
    """``parse_line``'s result for the common line (plain decimal, optional unit, lane,
    text, blanks and tabs between) in one regex match; None for any other line (blank,
    comment, exponent, long number, error...), which ``parse_line`` then reads.
    ``labels``: a cache of lane labels, shared across calls."""
    m = _FAST.match(raw)
    if m is None:
        return None
    num, u, kind, number, text = m.groups()
    u = u or unit
    if "." in num:
        ns = to_ns(num, u)
    else:
        ns = int(num) * UNIT_NS[u]
    if ns is None or ns > MAX_TIME_NS:
        return None
    label = labels.get((kind, number))
    if label is None:
        label = labels[kind, number] = lane_label(kind, number)
    return EventLine(lineno, ns, m.start(1) + 1, u, label, m.start(3) + 1, text, m.start(5) + 1)


#: ``_FAST`` with any number ``NUMBER`` allows (exponents, any count of digits): what
#: ``load_events`` tries on the lines its whole-text reading leaves, before ``parse_line``.
_NUMBER_LINE = re.compile(
    r"[ \t]*(" + NUMBER + r")[ \t]*(ns|us|µs|μs|ms|s)?[ \t]+((?i:cpu|gpu))(\d{0,4}):?[ \t]+(\S(?:.*\S)?)\s*$"
)


def _parse_number_line(raw: str, lineno: int, unit: str, labels: dict) -> EventLine | None:
    """``parse_fast`` for every number of the grammar: ``parse_line``'s result for a line
    ``<number> [unit] <lane> <text>`` with blanks and tabs between, None for any other
    (and for a time out of range, which ``parse_line`` then reports). After the number
    only a blank or a unit can follow, so the number matched is the whole of
    ``NUMERIC_TOKEN``'s number, as ``parse_line`` reads it."""
    m = _NUMBER_LINE.match(raw)
    if m is None:
        return None
    num, u, kind, number, text = m.groups()
    u = u or unit
    ns = to_ns(num, u)
    if ns is None:
        return None
    label = labels.get((kind, number))
    if label is None:
        label = labels[kind, number] = lane_label(kind, number)
    return EventLine(lineno, ns, m.start(1) + 1, u, label, m.start(3) + 1, text, m.start(5) + 1)


def _malformed(path: str, tok: str, lineno: int, col: int) -> TraceFormatError:
    return TraceFormatError(
        path, f"malformed number {clip(tok)!r}", line=lineno, column=col, hint="numbers read 12, 0.5, .5 or 1e-3"
    )


def _lane_number_error(path: str, tok: str, lineno: int, col: int) -> TraceFormatError:
    return TraceFormatError(
        path,
        f"lane number too large in {clip(tok)!r}",
        line=lineno,
        column=col,
        hint=f"lanes read CPU, GPU, CPU1, GPU2 … with at most {MAX_LANE_DIGITS} digits",
    )


def _unit_error(path: str, tok: str, lineno: int, col: int) -> TraceFormatError:
    return TraceFormatError(
        path, f"unknown unit {clip(tok)!r}", line=lineno, column=col, hint="units: ns, us, µs, ms, s"
    )


#: Unit codes of the columns below: 0 = no unit written, then the units of ``UNIT_NS``.
_UNITS = ("", "ns", "us", "µs", "μs", "ms", "s")
_UNIT_CODE = {u: k for k, u in enumerate(_UNITS)}
_DEFAULT_CODE = _UNIT_CODE[DEFAULT_UNIT]
_NS_OF_CODE = np.array([1] + [UNIT_NS[u] for u in _UNITS[1:]], dtype=np.int64)
_POW10 = 10 ** np.arange(19, dtype=np.int64)
_E9, _E18 = np.int64(10**9), np.int64(10**18)

#: ``_FAST`` for a whole text at once, and for numbers of up to 18 + 18 digits (``_FAST``
#: takes 15 + 9; ``parse_line`` any): ``_LINES.split(text)`` (``re.M``, lines joined by
#: "\n") gives, for every line in turn, its integer digits, fraction digits and rest (unit,
#: lane and text, with the blanks before the unit and after the text), then what is left
#: of the line. The rest is "" unless the line is ``<number> [unit] <lane> <text>`` with
#: blanks and tabs between: every alternative ends with one that matches the empty
#: string, so the groups always take part and nothing backtracks into the number; the
#: lookbehinds stand for "a digit, or a digit and a dot" (``5.``, ``.5``); ``[nuµμm]?s``
#: is the set of units. The number takes ASCII digits only (numpy reads the columns);
#: other digits (``٣``) and exponents go through the per-line reading.
_LINES = re.compile(
    r"^[ \t]*([0-9]{0,18})\.?((?<=\.)[0-9]{0,18}|)"
    r"((?:(?<=[0-9])|(?<=[0-9]\.))[ \t]*(?:[nuµμm]?s)?[ \t]+(?i:cpu|gpu)\d{0,4}:?[ \t]+\S[^\n]*|)\n?",
    re.M,
)
#: Unit, lane (kind, number) and text (then blanks, which ``_FAST`` leaves out) of a rest
#: of ``_LINES``.
_REST = re.compile(r"[ \t]*([nuµμm]?s)?[ \t]+((?i:cpu|gpu))(\d{0,4}):?[ \t]+(.*)")

#: What a text says (``_edge``): a point, ``X begin``, ``X end``, or an edge without a name.
_POINT, _BEGIN, _END, _NO_NAME = 0, 1, 2, 3


class _Lines(typing.NamedTuple):
    """The event lines of a file as columns, in line order (one element per event line).

    ``at``: 0-based line index (int64); ``ns``: time (int64 ns); ``unit``: code in
    ``_UNITS`` of the unit that applies (written or carried); ``label``/``text``: indices
    into ``labels`` (canonical lane labels, ``CPU1``) and ``texts`` (distinct texts);
    ``by_lane``: the events sorted by lane, in file order within one (stable argsort of
    ``label``). ``lines``, ``slow`` (line index → ``EventLine`` of lines read one by one) and
    ``event_line`` give back a line's columns for messages.
    """

    at: np.ndarray
    ns: np.ndarray
    unit: np.ndarray
    label: np.ndarray
    text: np.ndarray
    labels: list[str]
    texts: list[str]
    by_lane: np.ndarray
    lines: list[str]
    slow: dict[int, EventLine]

    def event_line(self, k: int) -> EventLine:
        """The ``EventLine`` of event ``k`` (columns included)."""
        i = int(self.at[k])
        ev = self.slow.get(i)
        if ev is None:
            ev = _parse_number_line(self.lines[i], i + 1, _UNITS[int(self.unit[k])], {})
            assert ev is not None, i  # ``slow`` has every line _parse_number_line does not read
        return ev


def load_events(lines: list[str], path: str = "") -> Trace:
    """Build a ``Trace`` (``source.format == "ascii-events"``) from event-list lines.

    ``lines``: the file's lines without line ends. Times are exact decimals rounded to
    the nearest ns. Raises ``TraceFormatError`` with line and column for: a line that
    is not ``<time> [unit] <lane> <text>``, an unknown unit, ``X end`` after ``X`` was
    already closed on that lane, ``begin``/``end`` without a name, a time earlier than
    the previous line's on the same lane (the first such problem in the file, as a
    reading line by line meets them). Ranges still open at the end of the file are
    closed at the file's last time, with a warning.

    How: the common line (``<number> [unit] <lane> <text>``, blanks and tabs between, a
    plain decimal) is read for the whole file at once: one regex over the text
    (``_LINES``), the numbers converted exactly as columns, each distinct lane-and-text
    parsed once, ranges paired and points ended with numpy, launch calls linked by
    ``gapscope.parsers.ascii.links``, the events added to the builder in one batch. Every
    other line is read one by one (``_parse_number_line``, then ``parse_line`` with its
    messages) with the unit carried to it. Results, warnings and errors are those of a
    reading line by line (``tests/reference_ascii_events.py``).
    """
    was = gc.isenabled()
    gc.disable()  # a few large lists of small objects: collections would only rescan them
    try:
        ev = _read(lines, path)
        b = new_builder(lines, path, "ascii-events")
        n = int(ev.at.shape[0])
        b.source.display_time_unit = _UNITS[int(ev.unit[0])] if n else DEFAULT_UNIT
        b.source.extra["default_unit"] = DEFAULT_UNIT
        if not n:
            return b.build()
        return _build(b, ev, path)
    finally:
        if was:
            gc.enable()


def _read(lines: list[str], path: str) -> _Lines:
    """Parse every line (the first part of ``load_events``): the event lines as columns.

    Raises ``TraceFormatError`` for the first line, in file order, that is not an event
    line, holds a time out of range, or goes back in time on its lane.
    """
    n = len(lines)
    cut = _LINES.split("\n".join(lines)) if n else [""]
    if len(cut) != 4 * n + 1:  # a line holding a line break: read every line one by one
        cut = [""] * (4 * n + 1)
    whole_s, frac_s, rest_s = cut[1::4], cut[2::4], cut[3::4]
    del cut
    labels: dict[str, int] = {}
    texts: dict[str, int] = {}
    # unit, lane and text of each distinct rest, then per line through its rest's first line
    first: dict[str, int] = {}
    first_at = np.fromiter(map(first.setdefault, rest_s, range(n)), dtype=np.int64, count=n)
    first.pop("", None)  # the lines left to the per-line reading
    unit_at = np.zeros(n, dtype=np.int8)
    label_at = np.full(n, -1, dtype=np.int16)  # at most 2 x 11111 labels (4 digits): int16
    text_at = np.zeros(n, dtype=np.int32)
    if first:
        at = np.fromiter(first.values(), dtype=np.int64, count=len(first))
        parts = [_REST.fullmatch(rest).groups() for rest in first]  # type: ignore[union-attr]  # _LINES' rest
        unit_at[at] = [_UNIT_CODE[u or ""] for u, _, _, _ in parts]
        label_at[at] = [labels.setdefault(lane_label(kind, num), len(labels)) for _, kind, num, _ in parts]
        text_at[at] = [texts.setdefault(t.rstrip(), len(texts)) for _, _, _, t in parts]
    explicit = unit_at[first_at]
    label = label_at[first_at]
    text = text_at[first_at]
    fast = label >= 0
    del first_at, unit_at, label_at, text_at, first

    # every other line, one by one in file order, with the unit carried to it
    slow: dict[int, EventLine] = {}
    err: TraceFormatError | None = None
    stop = n  # lines from here on are never reached (err is raised there)
    others = np.flatnonzero(~fast).tolist()
    if others:
        last_fast = np.where(explicit != 0, np.arange(n), -1)
        np.maximum.accumulate(last_fast, out=last_fast)
        last_fast_at, codes = last_fast.tolist(), explicit.tolist()
        cache: dict[tuple[str, str], str] = {}
        slow_at, slow_unit = -1, DEFAULT_UNIT
        for i in others:
            j = last_fast_at[i]
            unit = _UNITS[codes[j]] if j > slow_at else slow_unit
            raw = lines[i]
            ev = _parse_number_line(raw, i + 1, unit, cache)
            if ev is None:
                s = raw.strip()
                if not s or s.startswith("#"):
                    continue
                try:
                    ev = parse_line(raw, i + 1, unit, path)
                except TraceFormatError as exc:
                    err, stop = exc, i
                    break
            slow[i] = ev
            slow_at, slow_unit = i, ev.unit
        at_slow = np.fromiter(slow, dtype=np.int64, count=len(slow))
        explicit[at_slow] = [_UNIT_CODE[e.unit] for e in slow.values()]
        label[at_slow] = [labels.setdefault(e.lane, len(labels)) for e in slow.values()]
        text[at_slow] = [texts.setdefault(e.text, len(texts)) for e in slow.values()]

    # the unit of each line: its own, else the last one written above it, else the default
    last = np.where(explicit != 0, np.arange(n), -1)
    np.maximum.accumulate(last, out=last)
    unit_code = np.where(last >= 0, explicit[last], _DEFAULT_CODE).astype(np.int8)
    del last, explicit

    # times of the fast lines, exactly: whole * unit + fraction (18 digits, in two halves
    # of 9) * unit / 1e18, rounded to the nearest ns, ties to even (as ``to_ns``)
    fi = np.flatnonzero(fast[:stop])
    whole = np.fromstring("0" + " 0".join(whole_s), dtype=np.int64, sep=" ")[fi]
    frac = np.fromstring("0" + " 0".join(frac_s), dtype=np.int64, sep=" ")[fi]
    digits = np.fromiter(map(len, frac_s), dtype=np.int64, count=n)[fi]
    del whole_s, frac_s, rest_s
    ns, bad = _exact_ns(whole, frac, digits, _NS_OF_CODE[unit_code[fi]])
    if bad.any():  # out of range: parse_line says so, at the number
        i = int(fi[np.argmax(bad)])
        try:
            parse_line(lines[i], i + 1, _UNITS[int(unit_code[i])], path)
        except TraceFormatError as exc:
            err, stop = exc, i
        else:  # never: parse_line and _exact_ns share to_ns's rule
            raise AssertionError(f"line {i + 1}: out of range here, not for parse_line")
        keep = fi < stop
        fi, ns = fi[keep], ns[keep]
    slow_lines = sorted(i for i in slow if i < stop)
    at = np.concatenate((fi, np.array(slow_lines, dtype=np.int64)))
    times = np.concatenate((ns, np.array([slow[i].time_ns for i in slow_lines], dtype=np.int64)))
    if slow_lines:
        o = np.argsort(at, kind="stable")
        at, times = at[o], times[o]
    lab = label[at]
    by_lane = np.argsort(lab, kind="stable")  # int16: a radix sort
    ev_lines = _Lines(at, times, unit_code[at], lab, text[at], list(labels), list(texts), by_lane, lines, slow)
    _check_order(ev_lines, path)
    if err is not None:
        raise err
    return ev_lines


def _exact_ns(
    whole: np.ndarray, frac: np.ndarray, digits: np.ndarray, per: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(ns, out of range) of the numbers ``whole.frac`` in units of ``per`` ns, as
    ``to_ns`` gives them: exact, rounded to the nearest ns, ties to even.

    int64 arrays of one length: ``whole`` (at most 18 digits), ``frac`` the fraction
    digits as an integer (at most 18 digits), ``digits`` how many there are (``.05``: 5,
    2), ``per`` ns per unit (1 to 1e9). ``ns`` is meaningful where not out of range
    (above ``MAX_TIME_NS``).
    """
    big = whole > MAX_TIME_NS // per  # whole * per would pass MAX_TIME_NS (or int64)
    whole = np.where(big, 0, whole)
    hi, lo = np.divmod(frac * _POW10[18 - digits], _E9)  # the 18 fraction digits: hi * 1e9 + lo
    q1, r1 = np.divmod(hi * per, _E9)  # every product < 1e18: no overflow
    q2, r = np.divmod(r1 * _E9 + lo * per, _E18)  # < 2e18
    ns = whole * per + q1 + q2  # whole * per <= 2^62, q1 < 1e9, q2 <= 1
    ns += (r > _E18 // 2) | ((r == _E18 // 2) & (ns % 2 == 1))
    return ns, big | (ns > MAX_TIME_NS)


def _check_order(ev: _Lines, path: str) -> None:
    """Raise ``TraceFormatError`` at the first event (in file order) whose time is below
    that of the event before it on its lane."""
    o = ev.by_lane
    t = ev.ns[o]
    back = (ev.label[o][1:] == ev.label[o][:-1]) & (t[1:] < t[:-1])
    if not back.any():
        return
    p = np.flatnonzero(back)
    later = o[p + 1]
    k = int(np.argmin(later))
    cur, prev = int(later[k]), int(o[p[k]])
    e, pe = ev.event_line(cur), ev.event_line(prev)
    raise TraceFormatError(
        path,
        f"time goes backwards on lane {clip(e.lane)}: {_fmt(e.time_ns, e.unit)} after "
        f"{_fmt(pe.time_ns, pe.unit)} on line {pe.line}",
        line=e.line,
        column=e.time_col,
        hint="lines of one lane must be in time order",
    )


def _fmt(ns: int, unit: str) -> str:
    v = Fraction(ns, UNIT_NS[unit])
    return f"{float(v):g} {unit}"


def _edge(text: str) -> tuple[str | None, str]:
    """(action, name) of an event text: (None, text) for a point, else the range edge's
    lower-cased last word (``begin``, ``end``, or another case form ``_BEGIN_END`` takes)
    and the name before it ("" when there is none)."""
    head, blank, last = text.rpartition(" ")
    action = last.lower() if blank else ""
    if action == "begin" or action == "end":  # the common 'X begin' / 'X end', as _BEGIN_END reads it
        return action, head.strip()
    m = _BEGIN_END.match(text) if text[-1] in "nNdD" else None
    if m is None:
        return None, text
    return m.group(2).lower(), (m.group(1) or "").strip()


class _Rows(typing.NamedTuple):
    """Events made from the lines, one element per event, in the order a reading line by
    line completes them: ``ev`` the event line that names each (a point's own line, a
    range's ``begin``, an orphan ``end``), ``start``/``end`` int64 ns, ``span`` (a range)."""

    ev: np.ndarray
    start: np.ndarray
    end: np.ndarray
    span: np.ndarray


def _build(b, ev: _Lines, path: str) -> Trace:
    """The events of the lines (points, ranges, links) into builder ``b``, then ``b.build()``.
    Raises ``TraceFormatError`` for the first edge, in file order, without a name or that
    ends a range already closed."""
    n = int(ev.at.shape[0])
    first_ns, last_ns = int(ev.ns.min()), int(ev.ns.max())
    names: dict[str, int] = {}
    text_act = np.zeros(len(ev.texts), dtype=np.int8)
    text_name = np.zeros(len(ev.texts), dtype=np.int64)
    actions: list[str] = []
    for k, t in enumerate(ev.texts):
        action, name = _edge(t)
        text_act[k] = _POINT if action is None else _NO_NAME if not name else _BEGIN if action == "begin" else _END
        text_name[k] = names.setdefault(name, len(names))
        actions.append(action or "")
    act = text_act[ev.text]
    name_of = text_name[ev.text]
    lab = ev.label
    gpu = np.array([s[0] == "G" for s in ev.labels], dtype=bool)[lab]

    # ranges: each 'end' closes the latest open 'begin' of its (lane, name); the edges of
    # one (lane, name) in file order, with the depth of open ranges after each
    edges = np.flatnonzero((act == _BEGIN) | (act == _END))
    key = lab[edges].astype(np.int64) * max(len(names), 1) + name_of[edges]
    o = np.argsort(key, kind="stable")
    e_ev, key = edges[o], key[o]
    is_begin = act[e_ev] == _BEGIN
    new = np.ones(e_ev.shape[0], dtype=bool)
    new[1:] = key[1:] != key[:-1]
    orphan = new & ~is_begin  # the first edge of its (lane, name) is an 'end': began before the file
    step = np.where(is_begin, 1, -1)
    step[orphan] = 0
    group = np.cumsum(new) - 1
    depth = np.cumsum(step)
    depth -= (depth - step)[new][group]
    closed_twice = ~is_begin & ~orphan & (depth < 0)
    no_name = np.flatnonzero(act == _NO_NAME)
    bad = int(no_name[0]) if no_name.size else n
    if closed_twice.any():
        bad = min(bad, int(e_ev[closed_twice].min()))
    if bad < n:
        _edge_error(ev, bad, actions, path)

    # an 'end' pairs with the 'begin' before it among the edges of its (lane, name) at its
    # level (depth after a begin, before an end): there they alternate begin, end, begin...
    level = np.where(is_begin, depth, depth + 1)
    sel = np.flatnonzero(~orphan)
    o2 = sel[np.lexsort((level[sel], group[sel]))]
    closes = np.flatnonzero(~is_begin[o2])
    pair_begin, pair_end = e_ev[o2[closes - 1]], e_ev[o2[closes]]
    still_open = is_begin[o2]
    still_open[closes - 1] = False
    open_pos = o2[still_open]
    left_open = e_ev[open_pos]
    first_begin = np.where(is_begin, e_ev, n)  # per (lane, name): its first 'begin' (open_spans order)
    starts = np.flatnonzero(new)
    key_first = np.minimum.reduceat(first_begin, starts)[group[open_pos]] if starts.size else first_begin[:0]
    orphans = np.sort(e_ev[orphan])

    # points: on a CPU lane until the next line of that lane (or the last time), on a GPU lane instants
    points = np.flatnonzero(act == _POINT)
    ol = ev.by_lane
    same = lab[ol][1:] == lab[ol][:-1]
    nxt = np.full(n, -1, dtype=np.int64)
    nxt[ol[:-1][same]] = ol[1:][same]
    cpu_pts, gpu_pts = points[~gpu[points]], points[gpu[points]]
    cpu_next = nxt[cpu_pts]
    cpu_end = np.where(cpu_next >= 0, ev.ns[np.maximum(cpu_next, 0)], last_ns)

    # the order a reading line by line emits them in: at the line that completes them (a
    # CPU point before that line's own event), then the points still pending, then the
    # ranges never closed (by their (lane, name)'s first begin, then their own line)
    m_orph, m_open = orphans.shape[0], left_open.shape[0]
    pos = np.concatenate((np.where(cpu_next >= 0, cpu_next, n), gpu_pts, pair_end, orphans, np.full(m_open, n)))
    sub = np.concatenate((np.zeros(cpu_pts.shape[0], np.int64), np.ones(pos.shape[0] - cpu_pts.shape[0], np.int64)))
    extra = np.concatenate(
        (
            cpu_pts,
            np.zeros(gpu_pts.shape[0] + pair_end.shape[0] + m_orph, np.int64),
            key_first.astype(np.int64) * (n + 1) + left_open,
        )
    )
    emit = np.lexsort((extra, sub, pos))
    rows = _Rows(
        ev=np.concatenate((cpu_pts, gpu_pts, pair_begin, orphans, left_open))[emit],
        start=np.concatenate(
            (ev.ns[cpu_pts], ev.ns[gpu_pts], ev.ns[pair_begin], np.full(m_orph, first_ns), ev.ns[left_open])
        )[emit],
        end=np.concatenate((cpu_end, ev.ns[gpu_pts], ev.ns[pair_end], ev.ns[orphans], np.full(m_open, last_ns)))[emit],
        span=np.concatenate(
            (np.zeros(cpu_pts.shape[0] + gpu_pts.shape[0], bool), np.ones(pair_end.shape[0] + m_orph + m_open, bool))
        )[emit],
    )

    name_list = list(names)
    for k in orphans.tolist():
        e = ev.event_line(k)
        b.warn(
            e.line,
            "text",
            f"'{clip(name_list[name_of[k]])} end' on {clip(e.lane)} has no 'begin': taken to start at the "
            f"first time of the file ({_fmt(first_ns, e.unit)})",
        )
    for k in left_open[np.lexsort((left_open, key_first))].tolist():
        e = ev.event_line(k)
        b.warn(
            e.line,
            "text",
            f"'{clip(name_list[name_of[k]])} begin' on {clip(e.lane)} is never closed: closed at the last "
            f"time of the file ({_fmt(last_ns, e.unit)})",
        )
    return _finish(b, ev, rows, name_list, name_of[rows.ev], gpu[rows.ev])


def _edge_error(ev: _Lines, k: int, actions: list[str], path: str) -> typing.NoReturn:
    """Raise the ``TraceFormatError`` of event ``k``: an edge without a name, or an 'end'
    whose (lane, name) has no open 'begin' left."""
    e = ev.event_line(k)
    action, name = _edge(e.text)
    if not name:
        raise TraceFormatError(
            path, f"{action!r} needs a name before it ('X {action}')", line=e.line, column=e.text_col
        )
    raise TraceFormatError(
        path,
        f"'{clip(name)} end' without '{clip(name)} begin' on lane {clip(e.lane)}",
        line=e.line,
        column=e.text_col,
        hint=f"'{clip(name)}' was already closed; each 'end' needs its own 'begin'",
    )


def _finish(b, ev: _Lines, rows: _Rows, names: list[str], name: np.ndarray, gpu: np.ndarray) -> Trace:
    """Kinds, lanes and links of ``rows`` (``name``: index into ``names``, ``gpu``: on a
    GPU lane, one per row), added to ``b`` in the order (start, -dur, annotations
    first); returns ``b.build()``."""
    r = int(rows.ev.shape[0])
    kind = np.zeros(r, dtype=np.int8)
    ck = np.zeros(r, dtype=np.int8)
    kind[gpu & ~rows.span] = Kind.INSTANT
    for mask, of in (
        (gpu & rows.span, gpu_kind),
        (~gpu & rows.span, lambda s: _cpu_kind(s, True)),
        (~gpu & ~rows.span, lambda s: _cpu_kind(s, False)),
    ):
        if mask.any():
            used, inv = np.unique(name[mask], return_inverse=True)
            kc = np.array([of(names[k]) for k in used.tolist()], dtype=np.int8).reshape(-1, 2)
            kind[mask] = kc[inv.ravel(), 0]
            ck[mask] = kc[inv.ravel(), 1]

    # lanes, made in the order their labels first appear among the lines
    lab, ol = ev.label, ev.by_lane
    firsts = ol[np.flatnonzero(np.r_[True, lab[ol][1:] != lab[ol][:-1]])] if lab.size else ol
    lane_of = np.zeros(len(ev.labels), dtype=np.int32)
    for k in np.sort(firsts).tolist():
        label = ev.labels[int(lab[k])]
        m = LANE_RE.match(label)
        # every label is lane_label's canonical CPU<digits>/GPU<digits>, made from a lane token
        # that matched LANE_RE (parse_line) or the same pattern inside _FAST (parse_fast, _LINES)
        assert m is not None, label
        lane_of[int(lab[k])] = (gpu_lane if m.group(1) == "GPU" else cpu_lane)(b, m.group(2))

    dur = rows.end - rows.start
    line = ev.at[rows.ev] + 1
    work = np.flatnonzero(gpu & ((kind == Kind.KERNEL) | (kind == Kind.MEMCPY) | (kind == Kind.MEMSET)))
    calls = np.flatnonzero(~gpu & ((kind == Kind.LAUNCH) | (kind == Kind.MEMCPY_CALL)))
    corr = link_columns(
        b,
        LinkRows(kind, ck, dur, line, name),
        rows.start[work],
        work,
        Calls(rows.start[calls], calls, kind[calls], ck[calls], name[calls]),
        names,
    )
    # annotations first among events with equal (start, dur): ranges enclose calls
    order = np.lexsort((kind != Kind.ANNOTATION, -dur, rows.start))
    kind_o, name_o = kind[order], name[order]
    args: dict[int, dict] = {}
    launch = np.flatnonzero(kind_o == Kind.LAUNCH)
    if launch.size:
        used, inv = np.unique(name_o[launch], return_inverse=True)
        target = [launch_target(names[k]) for k in used.tolist()]
        arg = [{"target": t} if t else None for t in target]  # one dict per target: args_of copies it
        for p, u in zip(launch.tolist(), inv.ravel().tolist()):
            if arg[u] is not None:
                args[p] = arg[u]  # type: ignore[assignment]
    b.add_events(
        lane_of[lab[rows.ev]][order],
        names,
        name_o,
        rows.start[order],
        dur[order],
        kind_o,
        correlation=corr[order],
        copy_kind=ck[order],
        line=line[order],
        args=args,
    )
    return b.build()


def _cpu_kind(name: str, span: bool) -> tuple[Kind, CopyKind]:
    kind = cpu_kind(name, span=span)
    return kind, copy_direction(name) if kind == Kind.MEMCPY_CALL else CopyKind.NONE
