"""Lane-art ASCII timelines: ``GPU: [==== prefill 42 ms ====]`` rows → ``Trace``.

Grammar, layout rules and error messages: ``docs/ascii-timelines.md`` ("Lane art").
In short:

- A lane row is ``GPU:``/``CPU:`` (or ``GPU1:``, ``CPU1:``) then items: bracketed spans
  ``[== name 4 ms ==]``, picket fences ``k k k``, and phrases (text runs separated by two
  or more spaces). Other non-comment lines annotate the lane row above (``^`` optional).
- Scale: the median of (label duration / drawn width) over labelled spans, in ns per
  column; ``DEFAULT_SCALE_NS`` when no span carries a duration. Labels are the truth, the
  drawing gives order and overlap: a label more than 50% longer than its drawn width at
  that scale (or 50% shorter while the span is drawn wider than its text needs) is laid
  out by its label all the same, with one warning naming the span; only labels that
  cannot all hold at once are an error.
- Time: span edges of all rows are knots; knots of different rows within
  ``SNAP_COLUMNS`` merge. Labelled spans fix the time of the columns they cover; other
  columns take the scale. The leftmost knot is time 0.
- A fence expands from the numbers in its annotation (kernel length, gap range, repeat
  count); the CPU lane under it gets a launch call per kernel and Python work between.
- CPU phrases: sync and launch calls and host work sit at their column and last until
  the next item of the row; copy calls sit under the next GPU copy of their direction;
  other phrases are prose (a warning says so).
"""

from __future__ import annotations

import dataclasses
import re
import statistics
from fractions import Fraction

from gapscope.parsers.ascii.common import (
    MAX_LANE_DIGITS,
    MAX_TIME_NS,
    STANDALONE_NUMBER,
    UNIT_NS,
    check_quantities,
    clip,
    cpu_lane,
    error_at,
    gpu_lane,
    lane_label,
    new_builder,
    to_ns,
)
from gapscope.parsers.ascii.fence import FenceEvent, check_expansion, expand_fence, plan_fence
from gapscope.parsers.ascii.links import link_calls
from gapscope.parsers.ascii.names import copy_direction, cpu_kind, gpu_kind, is_host_word
from gapscope.parsers.errors import TraceFormatError
from gapscope.parsers.model import CopyKind, Kind, Trace
from gapscope.units import fmt_dur

__all__ = ["load_art", "DEFAULT_SCALE_NS", "SNAP_COLUMNS", "MAX_SCALE_ERROR", "LABEL_PAD_COLUMNS"]

#: Time per column when no span carries a duration (e.g. the sync-cliff sketch).
DEFAULT_SCALE_NS = 10_000
#: Span edges of different rows this close (in columns) are the same instant.
SNAP_COLUMNS = 2
#: A label may differ from its drawn width × scale by this fraction without a warning.
MAX_SCALE_ERROR = 0.5
#: Columns of decoration (fill, spaces, brackets) a span may need beyond its label text.
LABEL_PAD_COLUMNS = 12

_ROW = re.compile(r"^(\s*)(CPU|GPU)(\d*)\s*:", re.I)
_FILL = " =-~#*_"
_LABEL_DUR = re.compile(r"^(.*?)\s*" + STANDALONE_NUMBER + r"\s*([A-Za-zµμ]{1,4})$")
_NEXT_K = re.compile(r"\s{1,3}[kK](?=\s|$)")  # the next post of a picket fence
_HAS_DURATION = re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s*(?:ns|us|µs|μs|ms|s|sec|secs|min|h)(?![\w])")
_PHRASE = re.compile(r"(?:[^\s\[\]]+| (?=[^\s\[\]]))+")  # text runs with single blanks between


@dataclasses.dataclass
class Item:
    """One drawn thing: 0-based columns [col0, col1); ``dur_ns`` from its label."""

    row: int
    line: int
    col0: int
    col1: int
    kind: str  # "span" | "fence" | "phrase"
    name: str
    dur_ns: int | None = None
    label_len: int = 0  # characters of the label text inside the brackets
    ks: list[int] = dataclasses.field(default_factory=list)
    events: list[FenceEvent] = dataclasses.field(default_factory=list)  # a fence's, from ``expand_fence``


@dataclasses.dataclass
class Row:
    label: str
    number: str
    is_gpu: bool
    line: int
    items: list[Item] = dataclasses.field(default_factory=list)
    notes: list[tuple[int, int, str, int]] = dataclasses.field(default_factory=list)  # (line, col, text, text col)


def _scan(raw: str, pos: int, row_i: int, line: int, is_gpu: bool, path: str) -> list[Item]:
    """Items of one lane row from column ``pos`` on."""
    items, n = [], len(raw)
    while pos < n:
        c = raw[pos]
        if c.isspace():
            pos += 1
        elif c == "[":
            end = raw.find("]", pos + 1)
            if end < 0:
                raise error_at(path, "'[' without a closing ']'", line, pos, "a span reads [== name 4 ms ==]")
            items.append(_span(raw, pos, end, row_i, line, is_gpu, path))
            pos = end + 1
        elif c == "]":
            raise error_at(path, "']' without an opening '['", line, pos)
        elif c in "kK" and (pos + 1 == n or raw[pos + 1].isspace()):
            ks = [pos]
            while (nxt := _NEXT_K.match(raw, ks[-1] + 1)) is not None:
                ks.append(nxt.end() - 1)
            items.append(Item(row_i, line, ks[0], ks[-1] + 1, "fence", "k", ks=ks))
            pos = ks[-1] + 1
        else:
            phrase = _PHRASE.match(raw, pos)
            assert phrase is not None  # raw[pos] is none of blank, [, ]: the pattern matches it
            text = phrase.group(0)
            # On a GPU row a phrase is a kernel as wide as its text, unless it states a
            # duration: that is prose (a duration outside [ ] cannot be honoured).
            kind = "span" if is_gpu and not _HAS_DURATION.search(text) else "phrase"
            items.append(Item(row_i, line, pos, pos + len(text), kind, text))
            pos += len(text)
    return items


def _span(raw, start, end, row_i, line, is_gpu, path) -> Item:
    inner = raw[start + 1 : end]
    label = inner.strip(_FILL)
    name, dur = label, None
    label_col = start + 1 + inner.index(label) if label else start
    check_quantities(label, line, label_col, "duration", path)
    m = _LABEL_DUR.match(label)
    if m is not None:
        if m.group(3) in UNIT_NS:
            name, dur = m.group(1).strip(_FILL), to_ns(m.group(2), m.group(3))
            if dur is None:  # check_quantities has caught it; kept as a guard
                raise error_at(
                    path, f"duration {clip(m.group(2))} {m.group(3)} is out of range", line, label_col + m.start(2)
                )
        elif len(m.group(3)) <= 4 and m.group(3).lower() in (
            "min",
            "sec",
            "secs",
            "msec",
            "usec",
            "nsec",
            "h",
            "m",
            "mins",
        ):
            raise error_at(
                path,
                f"unknown unit {m.group(3)!r} in span label",
                line,
                label_col + m.start(3),
                "units: ns, us, µs, ms, s",
            )
    name = name or ("kernel" if is_gpu else "busy")
    return Item(row_i, line, start, end + 1, "span", name, dur, label_len=len(label))


def _read_rows(lines: list[str], path: str) -> list[Row]:
    rows: list[Row] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(lines):
        raw = raw.expandtabs(8)  # drawn columns: a tab reaches the next multiple of 8
        s = raw.strip()
        if not s or s.startswith("#"):
            continue
        m = _ROW.match(raw)
        if m is None:
            col = len(raw) - len(raw.lstrip())
            if not rows:
                raise error_at(path, "annotation before any lane row", i + 1, col, "start with a 'GPU:' or 'CPU:' row")
            text = s[1:].strip() if s.startswith("^") else s
            rows[-1].notes.append((i + 1, col, text, raw.find(text, col) if text else col))
            continue
        if len(m.group(3)) > MAX_LANE_DIGITS:
            raise error_at(
                path,
                f"lane number too large in {clip(m.group(2) + m.group(3))!r}",
                i + 1,
                m.start(2),
                f"lanes read CPU, GPU, CPU1, GPU2 … with at most {MAX_LANE_DIGITS} digits",
            )
        label = lane_label(m.group(2), m.group(3))
        if label in seen:
            raise error_at(
                path,
                f"second {clip(label)}: row (first on line {seen[label]})",
                i + 1,
                m.start(2),
                "one row per lane; name more lanes GPU1:, CPU1:",
            )
        seen[label] = i + 1
        row = Row(label, m.group(3), label.startswith("GPU"), i + 1)
        row.items = _scan(raw, m.end(), len(rows), i + 1, row.is_gpu, path)
        rows.append(row)
    return rows


def _fit_scale(items: list[Item]) -> tuple[int, list[tuple[Item, int, int]]]:
    """(ns per column, the spans drawn off scale). The scale is the median of duration /
    width over labelled spans drawn wider than their text needs (text +
    ``LABEL_PAD_COLUMNS``), or over all labelled spans when every one is that narrow.
    Off scale, as (span, its width × scale in ns, width): a label more than 50% longer
    than width × scale, or more than 50% shorter when the span is wider than its text
    needs (a narrow span may be short: its text sets its width). Such a span is not an
    error: sketches in chats and slides are drawn without a ruler, so its label holds
    (``_layout``) and the caller warns."""
    labelled = [(it, it.dur_ns) for it in items if it.kind == "span" and it.dur_ns is not None]
    if not labelled:
        return DEFAULT_SCALE_NS, []
    bound = {id(it) for it, _ in labelled if it.col1 - it.col0 <= it.label_len + LABEL_PAD_COLUMNS}
    free = [(it, dur) for it, dur in labelled if id(it) not in bound] or labelled
    scale = statistics.median(Fraction(dur, it.col1 - it.col0) for it, dur in free)
    off = []
    for it, dur in labelled:
        width = it.col1 - it.col0
        expected = width * scale
        if dur > (1 + MAX_SCALE_ERROR) * expected or (dur < (1 - MAX_SCALE_ERROR) * expected and id(it) not in bound):
            off.append((it, round(expected), width))
    return max(1, round(scale)), off


def _off_scale_warning(b, off: list[tuple[Item, int, int]], scale: int) -> None:
    """One warning for the spans drawn off scale, naming the first (line of the first)."""
    it, expected, width = off[0]
    assert it.dur_ns is not None  # only labelled spans are checked against the scale
    more = f"; {len(off) - 1} more span{'s' if len(off) > 2 else ''} off scale too" if len(off) > 1 else ""
    b.warn(
        it.line,
        "scale",
        f"column {it.col0 + 1}: span {clip(it.name)!r} is labelled {fmt_dur(it.dur_ns)} but drawn {width} columns wide "
        f"({fmt_dur(expected)} at the fitted scale of {fmt_dur(scale)} per column); laid out by its label{more}",
    )


def _sort_items(
    b, items: list[Item], rows: list[Row], fences: list[Item], gpu_copies: list[Item]
) -> tuple[list[Item], list[Item], list[Item]]:
    """Sort drawn items into (placed, described, prose).

    placed: laid out as events (a CPU copy call matched to a GPU copy in ``gpu_copies``,
    which it consumes, becomes kind ``copy-call``); described: text beside a fence, kept as
    a note; prose: text naming no event. Text on a GPU row is warned about and dropped.
    """
    placed, described, prose = [], [], []
    for it in items:
        if it.kind != "phrase":
            placed.append(it)
            continue
        if rows[it.row].is_gpu:  # text stating a duration outside [ ]: never a kernel drawn to its width
            b.warn(
                it.line,
                "text",
                f"column {it.col0 + 1}: {clip(it.name)!r} is text with a duration outside "
                "[ ] on a GPU row; read as a comment, not a kernel (a span reads [name 4 ms])",
            )
            continue
        kind = cpu_kind(it.name)
        near_fence = any(f.col0 - SNAP_COLUMNS <= it.col0 <= f.col1 + SNAP_COLUMNS for f in fences)
        ck = copy_direction(it.name)
        match = next(
            (
                g
                for g in gpu_copies
                if ck in (CopyKind.NONE, CopyKind.UNKNOWN) or gpu_kind(g.name)[1] in (ck, CopyKind.UNKNOWN)
            ),
            None,
        )
        if kind == Kind.MEMCPY_CALL and match is not None:
            gpu_copies.remove(match)
            it.kind = "copy-call"  # sits under its GPU copy, not at its column
            placed.append(it)
        elif kind == Kind.MEMCPY_CALL:
            placed.append(it)
        elif kind in (Kind.SYNC_CALL,) or (kind == Kind.LAUNCH and not near_fence):
            placed.append(it)
        elif near_fence:
            described.append(it)
        elif is_host_word(it.name):
            placed.append(it)
        else:
            prose.append(it)
    return placed, described, prose


def load_art(lines: list[str], path: str = "", max_bytes: tuple[int, bool] | None = None) -> Trace:
    """Build a ``Trace`` (``source.format == "ascii-art"``) from lane-art lines.

    ``max_bytes``: the trace-size limit and whether the user set it
    (``detect.trace_limit``); the fences' expansion counts against it
    (``fence.check_expansion``); None: only the event cap ``MAX_EXPANDED_EVENTS``.

    Raises ``TraceFormatError`` with line and column for: unbalanced brackets, an
    unknown unit in a label, labels contradicting each other (they cannot all hold), an annotation before any lane row, a repeated
    lane row, a fence annotation without usable numbers, rows with nothing drawn, fences
    that would expand past the event cap or the size limit (checked before expanding).
    """
    rows = _read_rows(lines, path)
    items = [it for r in rows for it in r.items]
    if not items:
        raise error_at(path, "lane art with nothing drawn (no spans, fences or events)", rows[0].line if rows else 1, 0)
    b = new_builder(lines, path, "ascii-art")
    scale, off_scale = _fit_scale(items)
    b.source.extra["scale_ns_per_column"] = scale
    if off_scale:
        _off_scale_warning(b, off_scale, scale)
    notes = [f"{r.label}: {t}" for r in rows for _, _, t, _ in r.notes]
    fences = [it for it in items if it.kind == "fence"]
    gpu_copies = sorted(
        (it for it in items if rows[it.row].is_gpu and it.kind == "span" and gpu_kind(it.name)[0] == Kind.MEMCPY),
        key=lambda i: (i.col0, i.row),
    )
    plans = [plan_fence(it.ks, it.line, it.col0, rows[it.row].notes, scale, path) for it in fences]
    check_expansion(plans, path, max_bytes)
    for it, plan in zip(fences, plans):
        it.events, it.dur_ns = expand_fence(plan, it.name)
    placed, described, prose = _sort_items(b, items, rows, fences, gpu_copies)
    for it in described:
        notes.append(f"{rows[it.row].label}: {it.name}")
    for it in prose:
        b.warn(it.line, "text", f"column {it.col0 + 1}: {clip(it.name)!r} names no event; read as a comment")
    if notes:
        b.source.extra["notes"] = notes
    at = _layout([it for it in placed if it.kind != "copy-call"], rows, scale, path)
    return _emit(b, rows, placed, at, scale, path)


def _layout(items: list[Item], rows: list[Row], scale: int, path: str) -> dict[int, int]:
    """Column → ns for every knot column (span edges, phrase starts); see module doc."""
    knots: dict[int, set[int]] = {}
    for it in items:
        knots.setdefault(it.col0, set()).add(it.row)
        if it.kind in ("span", "fence"):
            knots.setdefault(it.col1, set()).add(it.row)
    clusters: list[list[int]] = []
    for c in sorted(knots):
        cl = clusters[-1] if clusters else None
        if cl and c - cl[0] <= SNAP_COLUMNS and not (knots[c] & set().union(*(knots[x] for x in cl))):
            cl.append(c)
        else:
            clusters.append([c])
    reps = [min(cl, key=lambda x: (min(knots[x]), x)) for cl in clusters]
    cidx = {c: k for k, cl in enumerate(clusters) for c in cl}
    fixed: list[int | None] = [None] * max(len(reps) - 1, 0)
    labelled = sorted(((i, i.dur_ns) for i in items if i.dur_ns is not None), key=lambda p: (p[0].row, p[0].col0))
    for it, dur in labelled:
        idx = range(cidx[it.col0], cidx[it.col1])
        done = sum(f for f in (fixed[i] for i in idx) if f is not None)
        free = [i for i in idx if fixed[i] is None]
        rest = dur - done
        if rest < 0 or (not free and rest != 0):
            raise error_at(
                path,
                f"span {clip(it.name)!r} is labelled {fmt_dur(dur)} but the labelled spans it lines up "
                f"with already take {fmt_dur(done)}",
                it.line,
                it.col0,
                "labels of spans drawn over the same columns must agree",
            )
        width = sum(reps[i + 1] - reps[i] for i in free)
        acc = 0
        for i in free:
            prev = rest * acc // width if width else 0
            acc += reps[i + 1] - reps[i]
            fixed[i] = rest * acc // width - prev
    t, at = 0, {}
    for k, cl in enumerate(clusters):
        for c in cl:
            at[c] = t
        if k < len(fixed):
            f = fixed[k]
            t += f if f is not None else (reps[k + 1] - reps[k]) * scale
    return at


def _add_event(out: list[dict], lane, name, start, dur, kind, ck=CopyKind.NONE, line=0, pageable=False) -> int:
    """Append one pending event to ``out``; its index there."""
    out.append(dict(lane=lane, name=name, start=start, dur=dur, kind=kind, ck=ck, line=line, pageable=pageable))
    return len(out) - 1


def _emit_columns(
    rows: list[Row], lanes: dict, fence_cpu, placed: list[Item], at: dict[int, int], scale: int, out: list[dict]
) -> list[tuple[int, int]]:
    """Append the events laid out at their columns (fences, spans, CPU phrases) to ``out``.

    Returns the (launch, kernel) index pairs of the fences, which are correlated as drawn.
    """
    fence_pairs: list[tuple[int, int]] = []
    column_items = sorted((it for it in placed if it.kind != "copy-call"), key=lambda i: (i.row, i.col0))
    for n, it in enumerate(column_items):
        r = rows[it.row]
        start = at[it.col0]
        if it.kind == "fence":
            pending = {}
            for lane, name, rel, dur, kind, _paired in it.events:
                k = _add_event(
                    out, lanes[it.row] if lane == "GPU" else fence_cpu, name, start + rel, dur, kind, line=it.line
                )
                if kind == Kind.LAUNCH:
                    pending["launch"] = k
                elif kind == Kind.KERNEL:
                    fence_pairs.append((pending.pop("launch"), k))
        elif it.kind == "span":
            end = at[it.col1]
            if r.is_gpu:
                kind, ck = gpu_kind(it.name)
            else:
                kind = cpu_kind(it.name, span=True)
                ck = copy_direction(it.name) if kind == Kind.MEMCPY_CALL else CopyKind.NONE
            _add_event(out, lanes[it.row], it.name, start, end - start, kind, ck, it.line)
        else:  # CPU phrase: until the next item of its row
            nxt = column_items[n + 1] if n + 1 < len(column_items) else None
            end = at[nxt.col0] if nxt is not None and nxt.row == it.row else start + len(it.name) * scale
            kind = cpu_kind(it.name)
            _add_event(out, lanes[it.row], it.name, start, max(end - start, 0), kind, line=it.line)
    return fence_pairs


def _emit_copy_calls(lanes: dict, placed: list[Item], out: list[dict]) -> None:
    """Append each CPU copy call sorted out by ``_sort_items`` under the GPU copy it matches.

    The call takes the copy's start and duration; a pageable call (``.cpu()``, numpy,
    ``tensor(``) marks its GPU copy pageable too.
    """
    gpu_copies = sorted((k for k, e in enumerate(out) if e["kind"] == Kind.MEMCPY), key=lambda k: out[k]["start"])
    for it in sorted((i for i in placed if i.kind == "copy-call"), key=lambda i: (i.line, i.col0)):
        ck = copy_direction(it.name)
        pageable = re.search(r"\.cpu\(\)|numpy|np\.array|tensor\(", it.name) is not None
        match = next(
            (
                k
                for k in gpu_copies
                if ck in (CopyKind.NONE, CopyKind.UNKNOWN) or out[k]["ck"] in (ck, CopyKind.UNKNOWN)
            ),
            None,
        )
        if match is None:  # load_art only sends copies that have a GPU copy to sit under
            continue
        gpu_copies.remove(match)
        g = out[match]
        g["pageable"] = g["pageable"] or pageable
        _add_event(out, lanes[it.row], it.name, g["start"], g["dur"], Kind.MEMCPY_CALL, ck, it.line, pageable)


def _correlate(b, out: list[dict], fence_pairs: list[tuple[int, int]]) -> dict[int, int]:
    """Index in ``out`` → correlation id: calls linked to GPU work by ``link_calls``, then each fence pair its own id."""
    in_fence = {k for pair in fence_pairs for k in pair}
    gpu_spans = [
        (e["start"], e["name"], k, e["line"])
        for k, e in enumerate(out)
        if e["kind"] in (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET) and k not in in_fence
    ]
    calls = [
        (e["start"], e["name"], k, e["kind"], e["ck"])
        for k, e in enumerate(out)
        if e["kind"] in (Kind.LAUNCH, Kind.MEMCPY_CALL) and k not in in_fence
    ]
    corr = link_calls(b, out, gpu_spans, calls)
    next_id = max(corr.values(), default=0) + 1
    for s, d in fence_pairs:
        corr[s] = corr[d] = next_id
        next_id += 1
    return corr


def _check_time_range(out: list[dict], path: str) -> None:
    """Raise ``TraceFormatError`` (line of the first offender) if an event ends past ``MAX_TIME_NS``."""
    for e in out:
        if e["start"] + e["dur"] > MAX_TIME_NS:
            raise TraceFormatError(
                path,
                "the drawing spans more than 2^62 ns (about 146 years)",
                line=e["line"],
                column=1,
                hint="check the durations in the labels and notes",
            )


def _emit(b, rows: list[Row], placed: list[Item], at: dict[int, int], scale: int, path: str) -> Trace:
    lanes = {k: (gpu_lane if r.is_gpu else cpu_lane)(b, r.number) for k, r in enumerate(rows)}
    cpu_rows = [k for k, r in enumerate(rows) if not r.is_gpu]
    fence_cpu = lanes[cpu_rows[0]] if cpu_rows else cpu_lane(b, "")
    out: list[dict] = []
    fence_pairs = _emit_columns(rows, lanes, fence_cpu, placed, at, scale, out)
    _emit_copy_calls(lanes, placed, out)
    corr = _correlate(b, out, fence_pairs)
    _check_time_range(out, path)
    order = sorted(range(len(out)), key=lambda k: (out[k]["start"], -out[k]["dur"], out[k]["kind"] != Kind.ANNOTATION))
    for k in order:
        e = out[k]
        b.event(
            e["lane"],
            e["name"],
            e["start"],
            e["dur"],
            e["kind"],
            correlation=corr.get(k, -1),
            copy_kind=e["ck"],
            pageable=e["pageable"],
            line=e["line"],
        )
    return b.build()
