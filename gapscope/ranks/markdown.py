"""Markdown rendering of the rank-set document (``gapscope report DIR --markdown``):
the same sections as the text report, the per-rank table with every column."""

from __future__ import annotations

from gapscope.ranks.table import COLUMNS, cells
from gapscope.ranks.text import MAX_RANK_WARNINGS, header_line
from gapscope.report.fmt import fmt_share, safe_name, warning_message
from gapscope.units import fmt_dur

__all__ = ["render_markdown"]


def _md(s: str) -> str:
    return safe_name(s).replace("|", "\\|")


def render_markdown(doc: dict, top: int = 5) -> str:
    """The report as Markdown."""
    out = ["## gapscope ranks", "", header_line(doc), "", f"**Verdict:** {_md(doc['verdict']['line'])}", ""]
    body = cells(doc, COLUMNS, max(len(doc["steps"]), 1))
    out.append("| " + " | ".join(c.title for c in COLUMNS) + " |")
    out.append("|" + "|".join("---:" if c.right else "---" for c in COLUMNS) + "|")
    for r in body:
        out.append("| " + " | ".join(_md(v) if v.strip() else " " for v in r) + " |")
    if doc["stragglers"]:
        out += ["", "### Stragglers", ""]
        for s in doc["stragglers"][:top]:
            steps = ", ".join(f"{d['step'] or 'outside steps'} {fmt_dur(d['cost_ns'])}" for d in s["steps"][:4])
            out.append(
                f"- **rank {s['rank']}**: {fmt_dur(s['cost_ns'])} ({fmt_share(s['share'], 1)} of all waits), "
                f"last at {s['last_count']} collective(s); {steps}. Late because {_md(s['cause']['line'])}"
            )
    largest = doc["collectives"]["largest"][:top]
    if largest:
        out += [
            "",
            "### Collectives that cost the most",
            "",
            "| collective | step | waiting for | cost |",
            "|---|---|---:|---:|",
        ]
        for m in largest:
            out.append(
                f"| {_md(m['family'])} | {_md(m['step'] or 'outside steps')} | rank {m['last_rank']} | {fmt_dur(m['cost_ns'])} |"
            )
    if doc["failed"]:
        out += ["", "### Failed ranks", ""]
        out += [f"- rank {f['rank']} (`{_md(f['path'])}`): {_md(f['error'])}" for f in doc["failed"]]
    if doc.get("damaged"):
        out += ["", "### Damaged ranks (left out of the cross-rank figures and the verdict)", ""]
        out += [f"- rank {d['rank']} (`{_md(d['path'])}`): {_md('; '.join(d['marks']))}" for d in doc["damaged"]]
    warned = sorted((row for row in doc["ranks"] if row.get("warnings")), key=lambda r: r["rank"])
    if warned:
        out += ["", "### Loader warnings by rank", ""]
        for row in warned:
            for w in row["warnings"][:MAX_RANK_WARNINGS]:
                where = f"line {w['line']}: " if w.get("line") is not None else ""
                out.append(f"- rank {row['rank']}: {where}{_md(warning_message(w['message']))}")
            if len(row["warnings"]) > MAX_RANK_WARNINGS:
                out.append(f"- rank {row['rank']}: … and {len(row['warnings']) - MAX_RANK_WARNINGS} more (in --json)")
    if doc["warnings"]:
        out += ["", "### Warnings", ""]
        out += [f"- {_md(w)}" for w in doc["warnings"]]
    return "\n".join(out) + "\n"
