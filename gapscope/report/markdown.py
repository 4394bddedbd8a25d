"""Render the report document as GitHub-flavoured Markdown (``gapscope report --markdown``).

For tickets and chat. Trace names go into code spans (so ``*``, ``_`` and ``[...]`` stay
literal), with ``|`` escaped inside tables and control characters made visible by
``safe_name``. Same figures as the text report: both read ``build_document``'s dict.
"""

from __future__ import annotations

import re

from gapscope.analysis.findings import edge_note
from gapscope.report.document import lone_gaps, trust_lines
from gapscope.report.findings_text import APART_ROWS, FINDING_ROWS, fixed_text, folded_devices
from gapscope.report.fmt import (
    GROUP_CARDS,
    MD_GROUP_ROWS,
    budget_rows,
    fmt_share,
    kind_counts_text,
    more_episodes_line,
    more_gaps_line,
    more_groups_line,
    rank_text,
    rate_key,
    safe_name,
    warning_message,
    what_if_label,
)
from gapscope.units import column_unit, fmt_dur, fmt_in, fmt_offset, fmt_rate, offset_column_unit

__all__ = ["render_markdown", "md_code", "md_text", "warnings_markdown"]


def md_code(s: object, max_len: int | None = 80, in_table: bool = True) -> str:
    """An untrusted string as a Markdown code span (fence longer than any backtick run)."""
    text = safe_name("" if s is None else str(s), max_len)
    if not text:
        return ""
    run = longest = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    out = f"{fence}{pad}{text}{pad}{fence}"
    return out.replace("|", "\\|") if in_table else out


_MD_SPECIAL = set("\\`*_[]<>|~")


#: A name the analysis quoted in backticks inside a sentence (``thread `main```).
_CODE_SPAN = re.compile(r"`([^`\n]+)`")


def md_text(s: object) -> str:
    """Prose with untrusted names in it (a card's sentences) as Markdown text that
    renders character for character: control characters made visible, every character
    Markdown could read as syntax (``\\ ` * _ [ ] < > | ~``) escaped, and each name the
    sentence quotes in backticks set as a code span (``md_code``: a fence longer than
    any backtick run inside), so it shows as code rather than as escaped backticks."""
    text = safe_name("" if s is None else str(s))
    out, at = [], 0
    for m in _CODE_SPAN.finditer(text):
        out.append(_md_escape(text[at : m.start()]))
        out.append(md_code(m.group(1), None, in_table=False))
        at = m.end()
    out.append(_md_escape(text[at:]))
    return "".join(out)


def _md_escape(text: str) -> str:
    return "".join("\\" + ch if ch in _MD_SPECIAL else ch for ch in text)


def _row(cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _table(header, rows) -> list[str]:
    out = [_row(header), _row(["---"] * len(header))]
    out += [_row(r) for r in rows]
    return out


def render_markdown(doc: dict, top: int = 10) -> str:
    """The report of ``doc`` as one Markdown string (ends with a newline); ``top``
    (``--top``): how many entries each list shows (the largest gaps are already
    limited in ``doc``), the rest counted with their idle."""
    src, span = doc["source"], doc["span"]
    out = [f"# gapscope report: {md_code(src['path'], None, False)}", ""]
    out += _verdict(doc, top)
    fmt = src["format"] + (
        f" (Kineto schemaVersion {src['schema_version']})" if src.get("schema_version") is not None else ""
    )
    out.append(f"- Format: {fmt}")
    if src.get("trace_name"):
        out.append(f"- Trace name: {md_code(src['trace_name'], None, False)}")
    rank = rank_text(src)
    if rank is not None:
        out.append(f"- Rank: {md_text(rank)}")
    for ids, label in folded_devices(src.get("device_properties") or []):
        out.append(f"- {md_text(ids)}: {md_code(label, None, False)}")
    out.append(f"- Span: {fmt_dur(span['dur_ns'])}; {doc['event_count']:,} events on {len(doc['lanes'])} lanes")
    out += ["", "## Lanes", ""]
    out += _table(
        ["process / device", "lane", "events", "by kind"],
        [
            [
                _lane_process(ln),
                md_code(ln["label"] or ln["tid"], 40) or "-",
                f"{ln['event_count']:,}",
                kind_counts_text(ln["event_counts_by_kind"]),
            ]
            for ln in doc["lanes"]
        ],
    )
    out += ["", "## GPU busy (union of kernels over all streams)", ""]
    devs = doc["devices"]
    if devs:
        u = column_unit(max(d["window_ns"] for d in devs))
        out += _table(
            ["device", "window", "busy", "idle", "fully idle"],
            [
                [
                    f"GPU {d['device']}",
                    fmt_in(d["window_ns"], u),
                    f"{fmt_in(d['busy_ns'], u)} ({fmt_share(d['busy_ns'], d['window_ns'])})",
                    f"{fmt_in(d['idle_ns'], u)} ({fmt_share(d['idle_ns'], d['window_ns'])})",
                    f"{fmt_in(d['fully_idle_ns'], u)} ({fmt_share(d['fully_idle_ns'], d['window_ns'])})",
                ]
                for d in devs
            ],
        )
    else:
        out.append("No GPU kernels in this trace.")
    if doc.get("diagnosis_available") and devs:
        out += _diagnosis(doc, max(0, int(top)))
    out += warnings_markdown(doc["warnings"], "## Warnings")
    return "\n".join(out) + "\n"


def warnings_markdown(warns: list[dict], title: str, empty: str | None = None) -> list[str]:
    """Markdown lines of the loader's warnings (``{line, field, message}`` rows) under
    the heading ``title (N)`` (``title`` carries its ``#`` marks): the first 20, each in
    a code span, then a count of the rest; ``empty`` (when given) as the one line of
    an empty list."""
    out = ["", f"{title} ({len(warns)})", ""]
    if not warns and empty:
        out.append(empty)
    for w in warns[:20]:
        where = f"line {w['line']}: " if w.get("line") is not None else ""
        out.append(f"- {where}{md_code(warning_message(w['message']), 200, False)}")
    if len(warns) > 20:
        out.append(f"- ... and {len(warns) - 20} more")
    return out


def _verdict(doc: dict, top: int = FINDING_ROWS) -> list[str]:
    """The verdict and the findings table, before everything else (issue 47)."""
    v = doc.get("verdict")
    if not v:
        return []
    out = [f"**Verdict:** {md_text(v['sentence'])}", ""]
    found = doc.get("findings") or []
    if found:
        out += _table(
            ["#", "class", "per step", "share", "steps", "finding", "if fixed"],
            [
                [
                    f"F{f['rank'] + 1}",
                    f["cause"],
                    fmt_dur(f["per_step_ns"]),
                    f"{100 * f['step_share']:.1f}%",
                    f"{f['steps_with']}/{f['steps_total']}",
                    md_text(f["title"]),
                    fixed_text(f),
                ]
                for f in found[: min(FINDING_ROWS, top)]
            ],
        )
        out.append("")
    for f in (doc.get("findings_apart") or [])[:APART_ROWS]:
        out.append(f"- apart (in no per-step figure): {md_text(f['title'])}")
    if doc.get("findings_apart"):
        out.append("")
    return out


def _lane_process(ln: dict) -> str:
    """The "process / device" cell, as the text report names it: ``GPU <n>`` for a
    GPU lane (with the host program Kineto names its process after), ``-`` when the
    trace gives the lane no process name."""
    pname = ln["process_name"] or ""
    if ln["is_gpu"]:
        gpu = f"GPU {ln['device']}"
        return f"{gpu} · {md_code(pname, 24)}" if pname and not pname.startswith("GPU") else gpu
    return md_code(pname, 40) or "-"


def _launch(e: dict) -> str:
    """An episode's median launch, ``-`` when the trace has no launch for it."""
    ns = e.get("median_launch_ns")
    return "-" if ns is None or ns < 0 else fmt_dur(ns)


def _card_lines(card: dict) -> list[str]:
    cause = card.get("cause") or "-"
    if card.get("secondary"):
        cause += f" (secondary: {card['secondary']} {100 * (card.get('secondary_share') or 0):.0f}%)"
    return [
        f"- **Smell:** {md_text(card.get('smell'))}",
        f"- **Cause class:** {cause}",
        f"- **Why the GPU is empty:** {md_text(card.get('why'))}",
        f"- **First experiment:** {md_text(card.get('first_experiment'))}",
        f"- **Forbidden next step:** {md_text(card.get('forbidden_step'))}",
        f"- **Proof of improvement:** {md_text(card.get('proof'))}",
    ] + _samples_lines(card.get("cpu_samples"))


def _samples_lines(sampled: dict | None) -> list[str]:
    """The card's ``cpu_samples`` as one bullet (none without them)."""
    if not sampled:
        return []
    n = int(sampled.get("samples") or 0)
    if not n:
        every = int(sampled.get("interval_ns") or -1)
        apart = f" (its samples are {fmt_dur(every)} apart)" if every > 0 else ""
        return [f"- **CPU samples:** none of the launching thread inside the gap{apart}"]
    frames = "; ".join(
        f"{md_code(f.get('name'), 60)}"
        + (f" ({md_code(str(f.get('module') or '').rsplit('/', 1)[-1], 40)})" if f.get("module") else "")
        + f" {f.get('samples', 0):,} of {n:,} ({100 * float(f.get('share') or 0):.0f}%)"
        for f in sampled.get("frames") or []
    )
    return [f"- **CPU samples:** {frames}"]


def _diagnosis(doc: dict, top: int) -> list[str]:
    return (
        _cause_lines(doc)
        + _top_gap_lines(doc)
        + _group_lines(doc, top)
        + _lone_gap_lines(doc)
        + _episode_lines(doc, top)
        + _budget_lines(doc)
    )


def _cause_lines(doc: dict) -> list[str]:
    """Idle time by cause: one row per gap class, the total, then the trust lines."""
    out = []
    totals = doc["class_totals_ns"]
    total = sum(totals.values())
    u = column_unit(max(total, 1))
    out += ["", f"## Idle time by cause ({doc['gap_count']:,} gaps)", ""]
    out += _table(
        ["cause", "idle", "share"],
        [[k, fmt_in(v, u), fmt_share(v, total)] for k, v in totals.items()]
        + [["**total**", fmt_in(total, u), "100.0%" if total else "-"]],
    )
    trust = trust_lines(doc)
    if trust:
        out += [""] + [f"- {md_text(line)}" for line in trust]
    return out


def _top_gap_lines(doc: dict) -> list[str]:
    """The largest idle gaps, one row each, and how many were left out."""
    out = []
    gaps = doc["top_gaps"]
    out += ["", f"## Largest idle gaps (top {len(gaps)})", ""]
    if gaps:
        us = offset_column_unit(max(abs(g["start_rel_ns"]) for g in gaps))
        ul = column_unit(max(g["dur_ns"] for g in gaps))
        out += _table(
            ["#", "GPU", "start", "length", "after", "before", "cause", "group"],
            [
                [
                    k,
                    g["device"],
                    fmt_in(g["start_rel_ns"], us),
                    fmt_in(g["dur_ns"], ul),
                    md_code(g["prev_op"]["name"], 48) if g["prev_op"] else "(window start)",
                    md_code(g["next_op"]["name"], 48) if g["next_op"] else "(window end)",
                    f"{g['cause']} {100 * g['cause_share']:.0f}%",
                    "-" if g["group"] < 0 else f"G{g['group']}",
                ]
                for g in gaps
                for k in (f"#{g['index']}",)
            ],
        )
        more = more_gaps_line(doc)
        if more:
            out += ["", md_text(more)]
    else:
        out.append("No idle gaps.")
    return out


def _group_lines(doc: dict, top: int) -> list[str]:
    """The recurring groups: a card for each of the first few, a table row for the
    next ones, and one line counting the rest with their idle."""
    out = []
    groups = doc["groups"]
    for grp in groups[: min(GROUP_CARDS, top)]:
        out += [
            "",
            f"### G{grp.get('id')} {md_code(grp.get('label'), 80, False)}: recurs in {grp.get('steps_with_gap')} of "
            f"{grp.get('steps_total')} steps, {fmt_dur(grp.get('median_ns', 0))} median",
            "",
        ]
        if grp.get("card"):
            out += _card_lines(grp["card"])
    # --top limits every list (a ticket needs the few largest, not hundreds); what is
    # left out is counted with its idle.
    shown = groups[GROUP_CARDS : max(GROUP_CARDS, min(top, GROUP_CARDS + MD_GROUP_ROWS))]
    if shown:
        out += ["", f"The next {len(shown)} recurring group{'s' if len(shown) != 1 else ''} (cards in `--json`):", ""]
        out += _table(
            ["group", "recurs", "median", "total", "cause"],
            [
                [
                    f"G{grp.get('id')}",
                    f"{grp.get('steps_with_gap')} of {grp.get('steps_total')} steps",
                    fmt_dur(grp.get("median_ns", 0)),
                    fmt_dur(grp.get("total_ns", 0)),
                    grp.get("cause", ""),
                ]
                for grp in shown
            ],
        )
    rest = groups[min(GROUP_CARDS, top) + len(shown) :]
    if rest:
        out += [
            "",
            md_text(more_groups_line(rest, doc.get("idle_in_gaps_ns"), shown=min(GROUP_CARDS, top) + len(shown))),
        ]
    return out


def _lone_gap_lines(doc: dict) -> list[str]:
    """A card for each large gap that belongs to no recurring group."""
    out = []
    for k, g in lone_gaps(doc):
        out += ["", f"### Gap #{k}: {fmt_dur(g['dur_ns'])} at {fmt_offset(g['start_rel_ns'])}", ""]
        if g.get("edge"):  # its card's advice is about a steady state it is not part of
            out += [f"- **Edge gap:** {md_text(edge_note(g['edge']))}"]
        out += _card_lines(g["card"])
    return out


def _episode_lines(doc: dict, top: int) -> list[str]:
    """The picket-fence episodes, at most ``top`` rows, and a line counting the rest."""
    out: list[str] = []
    eps = doc["episodes"]
    if not eps:
        return out
    out += ["", f"## Picket-fence episodes ({len(eps)})", ""]
    out += _table(
        ["GPU", "start", "kernels", "median kernel", "median launch", "idle"],
        [
            [
                e.get("device"),
                fmt_offset(e["start_rel_ns"]),
                e.get("kernel_count"),
                fmt_dur(e.get("median_kernel_ns", 0)),
                _launch(e),
                fmt_dur(e.get("idle_ns", 0)),
            ]
            for e in eps[:top]
        ],
    )
    if len(eps) > top:
        out += ["", md_text(more_episodes_line(eps[top:], shown=top))]
    return out


def _budget_lines(doc: dict) -> list[str]:
    """The budget per step, then the what-if table (when there are steps)."""
    out: list[str] = []
    budget, steps = doc.get("budget"), doc.get("steps")
    if not (budget and steps):
        return out
    out += [
        "",
        f"## Budget per step ({steps['count']} steps from {steps.get('source')}: "
        f"{md_code(steps.get('name'), 60, False)})",
        "",
    ]
    out += [f"- {k}: {v}" for k, v in budget_rows(budget)]
    return out + _what_if_lines(budget, doc.get("what_if") or [])


def _what_if_lines(budget: dict, whatifs: list) -> list[str]:
    """What each removal of gaps would make of a step: one row per what-if, the
    names that matched nothing, and the last what-if's assumptions."""
    out: list[str] = []
    if not whatifs:
        return out
    u = column_unit(int(budget.get("wall_ns") or 0))
    out += ["", "What if these gaps were removed (per step):", ""]
    rk, rname = rate_key(budget)
    out += _table(
        ["removed", "idle removed", "step", rname],
        [
            [
                what_if_label(w),
                fmt_in(w.get("removed_ns", 0), u),
                fmt_in(w.get("projected_step_ns", 0), u),
                fmt_rate(w.get(rk)),
            ]
            for w in whatifs
        ],
    )
    out += [
        f"- no event name matches {md_code(n, 60, False)}: nothing was removed for it"
        for w in whatifs
        for n in w.get("unmatched") or []
    ]
    out += ["", "Assumptions:", ""] + [f"- {md_text(a)}" for a in whatifs[-1].get("assumptions") or []]
    return out
