"""The answers of the ``gapscope mcp`` tools, as plain dicts (no MCP import here).

Every figure comes from the documents the command line prints: the report document
(``gapscope.report.document.build_document``, what ``gapscope report --json`` prints),
the diff document (``gapscope.diff.document``) and the rank-set document
(``gapscope.ranks``), so an answer equals ``report --json`` on the same file. This
module only picks, pages and bounds them:

- **Paged**: every list an answer can grow with the trace is a page with ``total``,
  ``offset``, ``returned`` and ``next_offset`` (null on the last page).
- **Bounded**: each answer's structured content is at most ``MAX_ANSWER_BYTES`` of
  JSON; a page ends early when the next row would pass it (``next_offset`` says where
  to go on). Every string from a trace is cut at ``NAME_MAX_CHARS`` (sentences written
  by gapscope around names at ``TEXT_MAX_CHARS``), ending with ``…``; the full name of
  an event is ``full_name(path, event)``, paged by character.
- **Untrusted names stay data**: every string is passed through
  ``gapscope.report.fmt.safe_name`` (what the text report does; the viewer's
  ``sanitize`` makes the same characters visible): terminal escape sequences become a
  visible ``\\e[…``, control and format characters (newlines, bidi overrides,
  zero-width) ``\\xNN`` / ``\\uNNNN``. The short text form of each answer
  (``*_text``) holds gapscope's own words and figures only, never a trace string.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gapscope.analysis.card import card_for_group
from gapscope.analysis.types import Cause
from gapscope.parsers.model import Kind
from gapscope.report.document import gap_entry, jsonable
from gapscope.report.fmt import safe_name
from gapscope.units import fmt_dur

__all__ = [
    "MAX_ANSWER_BYTES",
    "NAME_MAX_CHARS",
    "TEXT_MAX_CHARS",
    "PASS_THROUGH",
    "CAUSES",
    "ToolInputError",
    "clean",
    "answer_bytes",
    "shortened",
    "parse_gap",
    "open_answer",
    "open_text",
    "gaps_answer",
    "card_answer",
    "card_text",
    "events_answer",
    "name_answer",
    "what_if_answer",
    "what_if_text",
    "diff_answer",
    "diff_text",
    "ranks_answer",
    "ranks_text",
]

#: Most bytes of an answer's structured content, as compact JSON (documented in docs/mcp.md).
MAX_ANSWER_BYTES = 48_000
#: Most characters of a string from a trace (names, lane labels, warnings) in an answer.
NAME_MAX_CHARS = 160
#: Most characters of a sentence gapscope writes around names (card text, verdict lines).
TEXT_MAX_CHARS = 1_000
#: Keys whose strings are gapscope's sentences (cut at TEXT_MAX_CHARS, not NAME_MAX_CHARS).
SENTENCE_KEYS = frozenset(
    {
        "why",
        "first_experiment",
        "forbidden_step",
        "proof",
        "line",
        "sentence",
        "assumptions",
        "noise_source",
        "caveats",
        "summary",
        "message",
        "error",
        "warnings",
        "reason",
        "because",
        "verdict_line",
    }
)
#: Keys holding a file path the agent passes back (``open_trace``'s handle): not cut.
PATH_KEYS = frozenset({"handle"})
#: Longest path kept whole (Linux's PATH_MAX).
PATH_MAX_CHARS = 4_096
#: Keys of the report document passed on by ``open_trace`` when the document has them
#: (the findings, issue 47): the one place to list a new leading key.
PASS_THROUGH = ("verdict", "findings")
#: Largest page sizes a caller may ask for.
MAX_GAPS_PAGE = 100
MAX_EVENTS_PAGE = 500
MAX_ROWS_PAGE = 100
#: Rows of the leading lists in ``open_trace`` (the rest: ``list_gaps``, ``gap_card``).
OPEN_GROUPS = 5
OPEN_GAPS = 5
OPEN_WARNINGS = 20
OPEN_LANES = 40
OPEN_FINDINGS = 10
#: Characters of a name per ``full_name`` page.
NAME_PAGE_CHARS = 4_000
#: Cause-class labels, in ``Cause`` order.
CAUSES = tuple(c.name.lower() for c in Cause)

_GROUP_RE = re.compile(r"^\s*(?:group|g)\s*[:#]?\s*(\d+)\s*$", re.IGNORECASE)


class ToolInputError(ValueError):
    """An argument the tool cannot use (a gap that does not exist, an unknown class);
    ``str()`` is one line, returned to the agent as the tool error."""


# ---------------------------------------------------------------- bounding


def clean(obj: Any, key: str = "") -> Any:
    """``obj`` (JSON types) with every string made safe (``safe_name``) and cut: at
    ``TEXT_MAX_CHARS`` under a key of ``SENTENCE_KEYS``, else ``NAME_MAX_CHARS``. Dict
    keys are made safe too (a trace can name a key, e.g. ``ignored_counts``)."""
    if isinstance(obj, str):
        if key in PATH_KEYS:  # passed back as `path`: escaped (a control character cannot pass) but not cut
            return safe_name(obj, PATH_MAX_CHARS)
        return safe_name(obj, TEXT_MAX_CHARS if key in SENTENCE_KEYS else NAME_MAX_CHARS)
    if isinstance(obj, dict):
        return {
            safe_name(str(k), NAME_MAX_CHARS): clean(v, str(k) if not isinstance(v, dict) else "")
            for k, v in obj.items()
        }
    if isinstance(obj, (list, tuple)):
        return [clean(v, key) for v in obj]
    return obj


def answer_bytes(obj: Any) -> int:
    """Size of ``obj`` as compact UTF-8 JSON (how it travels), in bytes."""
    return len(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "backslashreplace"))


def _page(rows: Sequence[Any], offset: int, limit: int, budget: int, extra: Callable[[Any], int] | None = None) -> dict:
    """``rows[offset:offset+limit]`` cut further so their JSON stays within
    ``budget`` bytes (at least one row), as ``{total, offset, returned, next_offset, items}``.
    Rows are measured as given: pass them made safe (``clean``), as they will travel.
    ``extra(row)``: bytes the row adds elsewhere in the answer (a lane it is the first
    of), counted against the same budget."""
    total = len(rows)
    offset = max(0, int(offset))
    items: list[Any] = []
    used = 2
    for row in rows[offset : offset + max(0, int(limit))]:
        size = answer_bytes(row) + 1 + (extra(row) if extra is not None else 0)
        if items and used + size > budget:
            break
        items.append(row)
        used += size
    end = offset + len(items)
    return dict(total=total, offset=offset, returned=len(items), next_offset=end if end < total else None, items=items)


class _LazyRows(Sequence):
    """``n`` rows made on demand by ``make(k)``, so a page builds only its own rows."""

    def __init__(self, n: int, make: Callable[[int], dict]) -> None:
        self._n = int(n)
        self._make = make

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self._make(j) for j in range(*k.indices(self._n))]
        return self._make(k)


def _prefix_within(rows: Sequence[Any], budget: int) -> list[Any]:
    """The longest prefix of ``rows`` whose JSON list is at most ``budget`` bytes (maybe empty)."""
    out: list[Any] = []
    used = 2
    for row in rows:
        used += answer_bytes(row) + 1
        if used > budget:
            break
        out.append(row)
    return out


def _fill(out: dict, lists: Sequence[tuple[str, Sequence[Any], int]]) -> dict:
    """``out`` (made safe) with each ``(key, rows, most_bytes)`` set to the longest
    prefix of its rows that fits both its own ``most_bytes`` and what is left of
    ``MAX_ANSWER_BYTES``, in the order given: names of any length and any number of
    lanes, devices or warnings still give an answer within the cap (the counts beside
    each list say how many there are)."""
    for key, _, _ in lists:
        out[key] = []
    room = MAX_ANSWER_BYTES - answer_bytes(out) - 200
    for key, rows, most in lists:
        out[key] = _prefix_within(rows, min(most, room) + 2)
        room -= answer_bytes(out[key]) - 2
    return out


def _check_page(limit: int, offset: int, most: int) -> None:
    if not isinstance(limit, int) or limit < 1 or limit > most:
        raise ToolInputError(f"limit must be 1 to {most}, got {limit!r}")
    if not isinstance(offset, int) or offset < 0:
        raise ToolInputError(f"offset must be >= 0, got {offset!r}")


def _fits(answer: dict, what: str) -> dict:
    """``answer``, checked against ``MAX_ANSWER_BYTES`` (a page is sized to fit, so
    passing it is a bug worth a clear line, not a huge reply)."""
    n = answer_bytes(answer)
    if n > MAX_ANSWER_BYTES:
        raise ToolInputError(f"the {what} answer would be {n:,} bytes, above the {MAX_ANSWER_BYTES:,} byte cap")
    return answer


# ---------------------------------------------------------------- open_trace


def _steps_summary(steps: dict | None) -> dict | None:
    if not steps:
        return None
    dur = sorted(steps.get("dur_ns") or [])
    return dict(
        source=steps.get("source"),
        name=steps.get("name"),
        count=steps.get("count", len(dur)),
        on_gpu=steps.get("on_gpu"),
        min_dur_ns=dur[0] if dur else None,
        median_dur_ns=dur[len(dur) // 2] if dur else None,
        max_dur_ns=dur[-1] if dur else None,
    )


def _group_row(g: dict, with_card: bool) -> dict:
    idx = g.get("gap_indices") or []
    row = dict(
        group=f"group:{g['id']}",
        id=g["id"],
        label=g.get("label"),
        cause=g.get("cause"),
        steps_with_gap=g.get("steps_with_gap"),
        steps_total=g.get("steps_total"),
        median_ns=g.get("median_ns"),
        total_ns=g.get("total_ns"),
        gap_count=len(idx),
        first_gap=idx[0] if idx else None,
    )
    card = g.get("card")
    if with_card and card:
        row["card"] = {k: card.get(k) for k in ("smell", "cause", "secondary", "why", "first_experiment")}
    return row


def _top_gap_row(g: dict) -> dict:
    return {
        k: g.get(k)
        for k in ("index", "device", "start_rel_ns", "dur_ns", "cause", "cause_share", "secondary", "group", "episode")
    }


def open_answer(loaded, handle: str) -> dict:
    """``open_trace``: the trace's overview from its report document. Keys: see
    ``docs/mcp.md``; ``verdict``/``findings`` are the document's when it has them
    (``PASS_THROUGH``)."""
    doc = loaded.doc
    lanes = doc.get("lanes") or []
    out: dict[str, Any] = dict(
        handle=handle,
        schema=doc.get("schema"),
        gapscope_version=doc.get("gapscope_version"),
        format=doc["source"].get("format"),
        trace_name=doc["source"].get("trace_name"),
        rank=doc["source"].get("rank"),
        world_size=doc["source"].get("world_size"),
        event_count=doc.get("event_count"),
        span=doc.get("span"),
        lane_count=len(lanes),
        device_count=len(doc.get("devices") or []),
        diagnosis_available=doc.get("diagnosis_available"),
        params=doc.get("params"),
        gap_count=doc.get("gap_count"),
        idle_in_gaps_ns=doc.get("idle_in_gaps_ns"),
        class_totals_ns=doc.get("class_totals_ns"),
        class_gap_counts=doc.get("class_gap_counts"),
        trust=doc.get("trust"),
        steps=_steps_summary(doc.get("steps")),
        budget=doc.get("budget"),
        what_if=doc.get("what_if") or [],
        group_count=len(doc.get("groups") or []),
        largest_gaps=[_top_gap_row(g) for g in (doc.get("top_gaps") or [])[:OPEN_GAPS]],
        episode_count=len(doc.get("episodes") or []),
        warning_count=len(doc.get("warnings") or []),
    )
    for key in PASS_THROUGH:
        if key in doc:
            value = doc[key]
            if isinstance(value, list):
                out[key + "_total"] = len(value)
                value = value[:OPEN_FINDINGS]
            out[key] = value
    lane_rows = [
        {k: ln.get(k) for k in ("index", "label", "pid", "tid", "is_gpu", "device", "stream", "event_count")}
        for ln in lanes[:OPEN_LANES]
    ]
    lists = [  # each list's own most bytes; together they leave room for the rest
        ("devices", clean(doc.get("devices") or []), 8_000),
        ("largest_groups", clean([_group_row(g, True) for g in (doc.get("groups") or [])[:OPEN_GROUPS]]), 16_000),
        ("lanes", clean(lane_rows), 10_000),
        ("warnings", clean((doc.get("warnings") or [])[:OPEN_WARNINGS]), 8_000),
    ]
    return _fits(_fill(clean(out), lists), "open_trace")


def _shares(totals: dict | None) -> str:
    if not totals:
        return "no gaps"
    whole = sum(totals.values()) or 1
    parts = [f"{k} {100 * v / whole:.0f}%" for k, v in sorted(totals.items(), key=lambda kv: -kv[1]) if v]
    return ", ".join(parts) or "no idle"


def open_text(ans: dict) -> str:
    """The short text form of ``open_trace`` (figures and class labels; no trace string)."""
    devs = ans.get("devices") or []
    lines = [
        f"{ans.get('format')} trace: {ans.get('event_count'):,} events on {ans.get('lane_count')} lanes, "
        f"{len(devs)} GPU device(s); handle {ans['handle']!r} (pass it as path)."
    ]
    if ans.get("diagnosis_available"):
        lines.append(
            f"{ans.get('gap_count'):,} idle gaps, {fmt_dur(ans.get('idle_in_gaps_ns'))} in all: "
            f"{_shares(ans.get('class_totals_ns'))}."
        )
    b = ans.get("budget")
    if b:
        rate = (
            f"{b['tokens_per_s']:.0f} tokens/s" if b.get("tokens_per_s") else f"{b.get('steps_per_s', 0):.2f} steps/s"
        )
        lines.append(
            f"Step {fmt_dur(b.get('wall_ns'))} over {b.get('steps')} steps ({rate}), GPU busy "
            f"{fmt_dur(b.get('gpu_busy_ns'))}, idle {100 * (b.get('idle_share') or 0):.1f}%."
        )
    for g in ans.get("largest_groups", [])[:3]:
        lines.append(
            f"{g['group']}: {g.get('cause')}, {fmt_dur(g.get('median_ns'))} in {g.get('steps_with_gap')} of "
            f"{g.get('steps_total')} steps ({fmt_dur(g.get('total_ns'))} in all); gap_card(path, {g['group']!r})."
        )
    verdict = _verdict_line(ans.get("verdict"))
    if verdict:
        lines.insert(1, verdict)  # the answer first: right after what the trace is
    lines.append("Names, cards and every figure are in the structured content.")
    return "\n".join(lines)


def _verdict_line(v: object) -> str | None:
    """The verdict of ``open_trace`` as figures and its class label
    (``analysis.findings``' verdict ``kind`` and ``share``; its sentence names the
    trace's ops, and stays in the structured content); None without one."""
    if not isinstance(v, dict) or not isinstance(v.get("kind"), str) or not v["kind"]:
        return None
    kind, share = v["kind"], v.get("share")
    pct = f"{100 * share:.1f}%" if isinstance(share, (int, float)) and not isinstance(share, bool) else None
    if kind == "gpu-bound":
        said = "GPU-bound: the kernels are the story" + (f" (idle {pct} of each step)" if pct else "")
    elif kind == "none":
        said = "no steady pattern of idle time" + (f" (idle {pct} of each step)" if pct else "")
    elif kind in ("no gpu work", "no steady state"):
        said = kind
    elif not str(v.get("sentence", "")).startswith("Not measurable") and kind != "unmeasurable":
        said = f"{kind}-bound" + (f", {pct} of every step" if pct else "") + "; first fix: findings[0]"
    else:  # the top finding's idle may not be idle (unrecorded CUDA graphs): no class, no projection
        said = f"not measurable ({kind}" + (f", {pct} of every step" if pct else "") + "): record it first"
    return f"Verdict: {said} (the sentence is in the structured content's verdict)."


# ---------------------------------------------------------------- gaps


def _gap_columns(loaded) -> dict:
    diag_json = loaded.doc.get("diagnosis") or {}
    return diag_json.get("gaps") or {}


def gaps_answer(loaded, cause: str | None, min_us: float | None, limit: int, offset: int) -> dict:
    """``list_gaps``: gaps largest first (ties: earlier first, as ``top_gaps``), with
    the figures of the report document's ``diagnosis.gaps`` columns."""
    _check_page(limit, offset, MAX_GAPS_PAGE)
    diag = loaded.diag
    if diag is None:
        raise ToolInputError("no diagnosis for this trace (the analysis is not installed)")
    if cause is not None and cause not in CAUSES:
        raise ToolInputError(f"cause must be one of {', '.join(CAUSES)}, got {safe_name(str(cause), 40)!r}")
    if min_us is not None and not (min_us >= 0 and min_us != float("inf")):
        raise ToolInputError(f"min_us must be a finite number >= 0, got {min_us!r}")
    g = diag.gaps
    order = diag.order_by_size()
    if cause is not None:
        order = order[np.asarray(g.cause)[order] == CAUSES.index(cause)]
    if min_us is not None:
        order = order[np.asarray(g.dur_ns)[order] >= int(round(min(min_us * 1000, 2.0**62)))]
    col = _gap_columns(loaded)
    origin = int(loaded.doc["span"]["start_ns"])

    def row(k: int) -> dict:
        i = int(order[k])
        return dict(
            index=i,
            device=col["device"][i],
            start_ns=col["start_ns"][i],
            start_rel_ns=col["start_ns"][i] - origin,
            end_ns=col["end_ns"][i],
            dur_ns=col["dur_ns"][i],
            cause=col["cause"][i],
            cause_share=col["cause_share"][i],
            secondary=col["secondary"][i],
            secondary_share=col["secondary_share"][i],
            class_ns={c: col["class_ns"][c][i] for c in CAUSES if c in col["class_ns"]},
            group=col["group"][i],
            episode=col["episode"][i],
            edge=col["edge"][i],
        )

    page = _page(_LazyRows(order.size, row), offset, limit, MAX_ANSWER_BYTES - 1_000)
    out = dict(
        handle=loaded.path,
        cause=cause,
        min_us=min_us,
        order="largest first",
        gap_count=len(g),
        total=page.pop("total"),
        **page,
    )
    out["gaps"] = out.pop("items")
    return _fits(clean(out), "list_gaps")


def parse_gap(loaded, gap: int | str) -> tuple[str, int]:
    """``("gap", index)`` or ``("group", id)`` from a ``gap`` argument: a gap index (an
    int or its digits) or ``group:N``. Raises ``ToolInputError`` when there is none."""
    diag = loaded.diag
    if diag is None:
        raise ToolInputError("no diagnosis for this trace (the analysis is not installed)")
    text = str(gap).strip()
    m = _GROUP_RE.match(text)
    if m:
        gid = int(m.group(1))
        if not any(int(gr.id) == gid for gr in diag.groups):
            raise ToolInputError(f"no group {gid}: this trace has {len(diag.groups)} recurring groups (group:0 …)")
        return "group", gid
    if isinstance(gap, bool) or not re.fullmatch(r"\d+", text):
        raise ToolInputError(f"gap must be a gap index (0 …) or 'group:N', got {safe_name(text, 40)!r}")
    i = int(text)
    if i >= len(diag.gaps):
        have = f"{len(diag.gaps)} gaps (0 … {len(diag.gaps) - 1})" if len(diag.gaps) else "no idle gaps"
        raise ToolInputError(f"no gap {i}: this trace has {have}")
    return "gap", i


def card_answer(loaded, gap: int | str) -> dict:
    """``gap_card``: one gap as ``top_gaps[]`` has it (events around it, lateness, class
    split, its card), or one recurring group as ``groups[]`` has it with its card."""
    what, n = parse_gap(loaded, gap)
    diag = loaded.diag
    if what == "gap":
        entry = gap_entry(loaded.trace, diag, n, int(loaded.doc["span"]["start_ns"]))
        col = _gap_columns(loaded)
        entry["class_ns"] = {c: col["class_ns"][c][n] for c in CAUSES if c in col.get("class_ns", {})}
        out: dict[str, Any] = dict(handle=loaded.path, kind="gap", gap=entry)
    else:
        grp = next(g for g in loaded.doc["groups"] if int(g["id"]) == n)
        grp = dict(grp)
        if grp.get("card") is None:
            grp["card"] = jsonable(card_for_group(diag, n))
        idx = list(grp.get("gap_indices") or [])
        grp["gap_count"] = len(idx)
        grp["gap_indices"] = idx[:50]
        grp["group"] = f"group:{n}"
        first = int(idx[0]) if idx else -1
        if first >= 0:
            grp["prev_op_event"] = int(diag.gaps.prev_op[first])
            grp["next_op_event"] = int(diag.gaps.next_op[first])
        out = dict(handle=loaded.path, kind="group", group=grp)
    return _fits(clean(out), "gap_card")


def card_text(ans: dict) -> str:
    """The short text form of ``gap_card`` (figures and labels only)."""
    if ans["kind"] == "gap":
        g = ans["gap"]
        card = g.get("card") or {}
        return (
            f"gap {g['index']} on GPU {g['device']}: {fmt_dur(g['dur_ns'])} at +{fmt_dur(g['start_rel_ns'])}, "
            f"{g.get('cause')} {100 * (g.get('cause_share') or 0):.0f}%"
            + (f" (secondary {g['secondary']})" if g.get("secondary") else "")
            + (f", recurs as group:{g['group']}" if g.get("group", -1) >= 0 else "")
            + (f"; an edge gap, {g['edge']}: listed apart, in no per-step figure" if g.get("edge") else "")
            + f"; smell: {card.get('smell')}. The card (why, first experiment, forbidden step, proof, evidence) "
            "is in the structured content."
        )
    g = ans["group"]
    return (
        f"{g['group']}: {g.get('cause')}, median {fmt_dur(g.get('median_ns'))} in {g.get('steps_with_gap')} of "
        f"{g.get('steps_total')} steps, {fmt_dur(g.get('total_ns'))} in all over {g.get('gap_count')} gaps; "
        f"smell: {(g.get('card') or {}).get('smell')}. The card is in the structured content."
    )


# ---------------------------------------------------------------- events


def _median_gap(diag, gid: int) -> int:
    grp = next(g for g in diag.groups if int(g.id) == gid)
    idx = np.asarray(grp.gap_indices, dtype=np.int64)
    dur = np.asarray(diag.gaps.dur_ns)[idx]
    return int(idx[int(np.argmin(np.abs(dur - int(grp.median_ns))))])


def events_answer(loaded, gap: int | str, window_us: float, limit: int, offset: int) -> dict:
    """``events_around``: the raw events of every lane overlapping
    [gap start − window, gap end + window], by lane then start (a group: its occurrence
    nearest the median)."""
    _check_page(limit, offset, MAX_EVENTS_PAGE)
    if not (window_us >= 0 and window_us <= 1e9):
        raise ToolInputError(f"window_us must be 0 to 1e9, got {window_us!r}")
    what, n = parse_gap(loaded, gap)
    diag, trace = loaded.diag, loaded.trace
    i = n if what == "gap" else _median_gap(diag, n)
    g_start, g_end = int(diag.gaps.start_ns[i]), int(diag.gaps.end_ns[i])
    w = int(round(window_us * 1000))
    lo, hi = g_start - w, g_end + w
    picked = []
    for k in range(len(trace.lanes)):
        a, b = int(trace.lane_offsets[k]), int(trace.lane_offsets[k + 1])
        stop = a + int(np.searchsorted(trace.start_ns[a:b], hi, side="left"))
        if stop <= a:
            continue
        s = trace.start_ns[a:stop]
        e = s + trace.dur_ns[a:stop]
        m = (e > lo) | ((trace.dur_ns[a:stop] == 0) & (s >= lo))
        picked.append(a + np.flatnonzero(m))
    idx = np.concatenate(picked) if picked else np.zeros(0, dtype=np.int64)
    lanes = trace.lanes

    def row(k: int) -> dict:
        e = int(idx[k])
        name = trace.name(e)
        start = int(trace.start_ns[e])
        return clean(
            dict(
                event=e,
                lane=int(trace.lane[e]),
                name=name,
                name_shortened=shortened(name),
                kind=Kind(int(trace.kind[e])).name.lower(),
                start_ns=start,
                offset_ns=start - g_start,
                dur_ns=int(trace.dur_ns[e]),
                correlation=int(trace.correlation[e]),
                depth=int(trace.depth[e]),
            )
        )

    lane_rows: dict[int, dict] = {}

    def lane_bytes(r: dict) -> int:
        """Bytes of the lane entry a row brings when it is the page's first on its lane."""
        k = r["lane"]
        if k in lane_rows:
            return 0
        ln = lanes[k]
        lane_rows[k] = clean(
            dict(
                index=ln.index,
                label=ln.label,
                process_name=ln.process_name,
                thread_name=ln.thread_name,
                is_gpu=bool(ln.is_gpu),
                device=int(ln.device),
                stream=int(ln.stream),
            )
        )
        return answer_bytes(lane_rows[k]) + 1

    page = _page(_LazyRows(idx.size, row), offset, limit, MAX_ANSWER_BYTES - 2_000, extra=lane_bytes)
    shown = sorted({r["lane"] for r in page["items"]})
    out = dict(
        handle=loaded.path,
        gap=i,
        group=n if what == "group" else None,
        gap_start_ns=g_start,
        gap_end_ns=g_end,
        window_start_ns=lo,
        window_end_ns=hi,
        total=page["total"],
        offset=page["offset"],
        returned=page["returned"],
        next_offset=page["next_offset"],
        lanes=[lane_rows[k] for k in shown],
        events=page["items"],
    )
    return _fits(clean(out), "events_around")


def name_answer(loaded, event: int, offset: int) -> dict:
    """``full_name``: the whole name of event ``event``, made safe but not cut, paged by
    ``NAME_PAGE_CHARS`` characters of the name (``offset``, ``total_chars`` and
    ``next_offset`` count characters of the name as recorded; a page made safe can be
    longer, up to 6 characters for each control character)."""
    trace = loaded.trace
    if isinstance(event, bool) or not isinstance(event, int) or not 0 <= event < len(trace):
        raise ToolInputError(f"event must be an event index 0 … {len(trace) - 1}, got {event!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ToolInputError(f"offset must be >= 0, got {offset!r}")
    raw = trace.name(event)
    part = raw[offset : offset + NAME_PAGE_CHARS]
    end = offset + len(part)
    return _fits(
        dict(
            handle=clean(loaded.path, "handle"),  # the rest of the answer is made safe piece by piece
            event=event,
            # in pieces: safe_name cuts at its display limit (8,192), a piece never reaches it
            name="".join(safe_name(part[k : k + 1_000]) for k in range(0, len(part), 1_000)),
            offset=offset,
            returned_chars=len(part),
            total_chars=len(raw),
            next_offset=end if end < len(raw) else None,
        ),
        "full_name",
    )


def shortened(name: str) -> bool:
    """Whether ``name`` made safe is longer than ``NAME_MAX_CHARS`` (so an answer shows it cut)."""
    return len(name) > NAME_MAX_CHARS or len(safe_name(name)) > NAME_MAX_CHARS


# ---------------------------------------------------------------- what-if


def what_if_answer(loaded, remove: Sequence[str | int]) -> dict:
    """``what_if``: the projected step with what ``remove`` names taken out: cause
    classes (``host``), gaps (an index), groups (``group:N``, all its gaps) and CPU
    event names (anything else, as ``report --what-if``). The row has the keys of the
    report document's ``what_if[]`` rows, plus ``removed_gaps``."""
    diag = loaded.diag
    if diag is None:
        raise ToolInputError("no diagnosis for this trace (the analysis is not installed)")
    if diag.budget is None:
        raise ToolInputError("no GPU steps in this trace: nothing to project")
    if isinstance(remove, (str, int)):
        remove = [remove]
    if not remove or len(remove) > 100:
        raise ToolInputError("remove must name 1 to 100 things: classes, gap indices, 'group:N' or CPU event names")
    causes: list[Cause] = []
    gaps: list[int] = []
    names: list[str] = []
    for item in remove:
        text = str(item).strip()
        if text.lower() in CAUSES:
            causes.append(Cause[text.upper()])
        elif _GROUP_RE.match(text) or isinstance(item, int) or re.fullmatch(r"\d+", text):
            what, n = parse_gap(loaded, item)
            if what == "gap":
                gaps.append(n)
            else:
                grp = next(g for g in diag.groups if int(g.id) == n)
                gaps.extend(int(x) for x in np.asarray(grp.gap_indices).tolist())
        elif text:
            names.append(text)
    from gapscope.analysis.budget import match_names

    row = jsonable(diag.what_if(gaps=gaps, causes=causes, names=tuple(names)))
    if row.get("decode") is False:
        row["tokens_per_s"] = None
    row["removed_causes"] = [c.name.lower() for c in causes]
    row["removed_gaps"] = sorted(set(gaps))[:200]
    row["removed_gap_count"] = len(set(gaps))
    unmatched = [n for n in names if match_names(loaded.trace, (n,)).size == 0]
    # the names echoed: as many as fit (an agent may pass 100 names of any length)
    row["removed_name_count"] = len(names)
    row["removed_names"] = _prefix_within(clean(names), 12_000)
    row["unmatched_count"] = len(unmatched)
    row["unmatched"] = _prefix_within(clean(unmatched), 12_000)
    b = loaded.doc.get("budget") or {}
    out = dict(
        handle=loaded.path,
        baseline=dict(
            wall_ns=b.get("wall_ns"),
            steps_per_s=b.get("steps_per_s"),
            tokens_per_s=b.get("tokens_per_s"),
            idle_ns=b.get("idle_ns"),
            steps=b.get("steps"),
        ),
        projection=row,
    )
    return _fits(clean(out), "what_if")


def what_if_text(ans: dict) -> str:
    """The short text form of ``what_if``."""
    p, b = ans["projection"], ans["baseline"]
    return (
        f"Step {fmt_dur(b.get('wall_ns'))} → {fmt_dur(p.get('projected_step_ns'))} "
        f"({fmt_dur(p.get('removed_ns'))} of idle removed per step, {p.get('speedup', 0):.2f}x); "
        f"{len(p.get('assumptions') or [])} assumptions and the unmatched names are in the structured content."
    )


# ---------------------------------------------------------------- diff and ranks


def diff_answer(doc: dict, limit: int, offset: int) -> dict:
    """``diff_traces``: the diff document with its ``groups`` (matched idle positions)
    paged and its kernel families cut to the largest ``MAX_ROWS_PAGE``."""
    _check_page(limit, offset, MAX_ROWS_PAGE)
    body = {k: v for k, v in doc.items() if k not in ("groups",)}
    kernels = dict(body.get("kernels") or {})
    fams = kernels.get("families")
    if isinstance(fams, list):
        kernels["family_count"] = len(fams)
        kernels["families"] = fams[:20]
    body["kernels"] = kernels
    body = clean(body)
    for side in ("before", "after"):
        if isinstance(body.get(side), dict) and isinstance(body[side].get("warnings"), list):
            body[side] = _bounded_warnings(body[side], 6_000)
    room = MAX_ANSWER_BYTES - answer_bytes(body) - 500
    page = _page(clean(doc.get("groups") or []), offset, limit, max(room, 2_000))
    body["groups"] = page.pop("items")
    body["groups_page"] = page
    return _fits(body, "diff_traces")


def diff_text(ans: dict) -> str:
    """The short text form of ``diff_traces`` (the verdict's own line holds kernel names: left out)."""
    v = ans.get("verdict") or {}
    counts = ans.get("group_counts") or {}
    return (
        f"Verdict: {v.get('verdict')}; step change {fmt_dur(v.get('change_ns'))} "
        f"(noise {fmt_dur(v.get('noise_ns'))}). Idle positions: "
        + ", ".join(f"{k} {n}" for k, n in counts.items())
        + ". The verdict line, per-step figures and positions are in the structured content."
    )


def _bounded_warnings(row: dict, most_bytes: int) -> dict:
    """``row`` (made safe) with its ``warnings`` cut to what fits in ``most_bytes``,
    and ``warning_count`` beside them (a side of the diff, a rank's row)."""
    row = dict(row)
    row["warning_count"] = len(row["warnings"])
    row["warnings"] = _prefix_within(row["warnings"], most_bytes)
    return row


#: Steps of a rank set kept in ``rank_set`` (``steps`` and every row's per-step lists).
RANK_STEPS = 20


def _rank_row(row: dict) -> dict:
    """One per-rank row of ``rank_set``, bounded: its per-step lists (``*_by_step_ns``,
    ``idle_by_step_by_class_ns``) cut to the ``RANK_STEPS`` steps kept, aligned with
    the answer's ``steps``, and its warnings to 4 kB (``warnings_total``)."""
    out = dict(row)
    for key, value in row.items():
        if key.endswith("_by_step_ns") and isinstance(value, list):
            out[key] = value[:RANK_STEPS]
        elif key.endswith("_by_step_by_class_ns") and isinstance(value, dict):
            out[key] = {c: v[:RANK_STEPS] if isinstance(v, list) else v for c, v in value.items()}
    out = clean(out)
    if isinstance(out.get("warnings"), list):
        out["warnings_total"] = len(out["warnings"])
        out["warnings"] = _prefix_within(out["warnings"], 4_000)
    return out


def ranks_answer(doc: dict, limit: int, offset: int) -> dict:
    """``rank_set``: the rank-set document with its per-rank rows paged (largest cost
    first, as the document orders them), the costliest collectives cut, and the steps
    cut to the first ``RANK_STEPS`` (with every row's per-step lists: ``_rank_row``)."""
    _check_page(limit, offset, MAX_ROWS_PAGE)
    body = {k: v for k, v in doc.items() if k != "ranks"}
    for key in ("failed", "left_out", "warnings", "steps"):
        if isinstance(body.get(key), list) and len(body[key]) > RANK_STEPS:
            body[key + "_total"] = len(body[key])
            body[key] = body[key][:RANK_STEPS]
    coll = body.get("collectives")
    if isinstance(coll, dict):
        coll = dict(coll)
        for k, v in list(coll.items()):
            if isinstance(v, list) and len(v) > 10:
                coll[k] = v[:10]
                coll[k + "_total"] = len(v)
        body["collectives"] = coll
    body = clean(body)
    for key in ("failed", "left_out", "warnings"):
        if isinstance(body.get(key), list):
            kept = _prefix_within(body[key], 6_000)
            if len(kept) < len(body[key]):
                body.setdefault(key + "_total", len(doc[key]))
                body[key] = kept
    room = MAX_ANSWER_BYTES - answer_bytes(body) - 500
    rows = doc.get("ranks") or []
    page = _page(_LazyRows(len(rows), lambda k: _rank_row(rows[k])), offset, limit, max(room, 2_000))
    body["ranks"] = page.pop("items")
    body["ranks_page"] = page
    return _fits(body, "rank_set")


def ranks_text(ans: dict) -> str:
    """The short text form of ``rank_set``."""
    v = ans.get("verdict") or {}
    straggler = v.get("rank", v.get("straggler"))
    return (
        f"{ans.get('ranks_analysed')} of {ans.get('ranks_total')} ranks analysed; straggler: "
        f"{straggler if straggler is not None else 'none'}. The verdict and per-rank table are in the structured content."
    )
