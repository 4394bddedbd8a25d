"""Plain-text rendering of the rank-set document (``gapscope report DIR``).

Sections: the set (ranks, world size, steps), the verdict, the per-rank table
(``gapscope.ranks.table``), the stragglers with the cause of their lateness, the
collectives that cost the most, the failed and damaged ranks, each rank's loader
warnings, and the set's warnings. Every line fits
``width`` columns except the straggler's cause sentence, which is wrapped.
"""

from __future__ import annotations

import textwrap

from gapscope.ranks.table import cells, fit_columns
from gapscope.report.fmt import fmt_share, safe_name, warning_message
from gapscope.units import fmt_dur

__all__ = ["render_text", "table_lines", "header_line", "MAX_RANK_WARNINGS"]

#: Loader warnings shown per rank (all are in the JSON).
MAX_RANK_WARNINGS = 3


def header_line(doc: dict) -> str:
    """``8 ranks (world size 8), 1 step each (ProfilerStep#10); 8 collectives matched``."""
    n = doc["ranks_analysed"]
    ws = f" (world size {doc['world_size']})" if doc["world_size"] is not None else ""
    steps = doc["steps"]
    st = (
        (f", {len(steps)} step(s): {steps[0] or 'outside steps'}" + (f" … {steps[-1]}" if len(steps) > 1 else ""))
        if steps
        else ", no steps"
    )
    co = doc["collectives"]
    dmg = f", {len(doc['damaged'])} damaged (left out)" if doc.get("damaged") else ""
    return (
        f"{n} rank(s){ws}{dmg}{st}; {co['matched']} collective(s) matched across ranks "
        f"({co['complete']} on every rank{', ' + str(co['by_seq']) + ' by sequence number' if co['by_seq'] else ''})"
    )


def table_lines(doc: dict, width: int) -> list[str]:
    """The per-rank table as text lines of at most ``width`` columns."""
    cols, heat = fit_columns(doc, width)
    body = cells(doc, cols, heat)
    widths = [max([len(c.title)] + [len(r[i]) for r in body]) for i, c in enumerate(cols)]

    def line(values):
        parts = [v.rjust(w) if c.right else v.ljust(w) for v, w, c in zip(values, widths, cols)]
        return "  ".join(parts).rstrip()

    return [line([c.title for c in cols])] + [line(r) for r in body]


def render_text(doc: dict, width: int = 100, top: int = 5) -> str:
    """The whole report as text."""
    out = [
        textwrap.fill(f"gapscope ranks — {header_line(doc)}", width=max(width, 40), subsequent_indent="  "),
        "",
        f"verdict: {doc['verdict']['line']}",
        "",
    ]

    def wrap(s, ind="  "):
        return textwrap.fill(s, width=max(width, 40), initial_indent=ind, subsequent_indent=ind + "  ")

    out[2] = textwrap.fill(out[2], width=max(width, 40), subsequent_indent="  ")
    out += table_lines(doc, width)
    out.append("")
    out.append(
        "step = median step wall; busy = GPU kernel union (as `gapscope report FILE`); coll.wait = time its "
        "collective kernels waited for a later rank (useful = busy minus the part of it with no other kernel); "
        "late cost = the others' wait for this rank; steps = late cost per step."
    )
    out[-1] = textwrap.fill(out[-1], width=max(width, 40))
    if doc["stragglers"]:
        out += ["", "stragglers (cost imposed on the other ranks by arriving last):"]
        for s in doc["stragglers"][:top]:
            steps = ", ".join(f"{d['step'] or 'outside steps'} {fmt_dur(d['cost_ns'])}" for d in s["steps"][:4])
            out.append(
                wrap(
                    f"rank {s['rank']}: {fmt_dur(s['cost_ns'])} ({fmt_share(s['share'], 1)} of all waits), last at "
                    f"{s['last_count']} collective(s); {steps}"
                )
            )
            w = s["worst"]
            out.append(
                wrap(
                    f"worst: {w['family']} in {w['step'] or 'outside steps'}, the others waited {fmt_dur(w['cost_ns'])}; "
                    f"late because {safe_name(s['cause']['line'])}",
                    "    ",
                )
            )
    largest = doc["collectives"]["largest"][:top]
    if largest:
        out += ["", "collectives that cost the most (wait summed over the ranks):"]
        for m in largest:
            waits = sorted(((int(r), v) for r, v in m["wait_ns"].items() if v > 0), key=lambda x: -x[1])
            ws = ", ".join(f"r{r} {fmt_dur(v)}" for r, v in waits[:6]) + (" …" if len(waits) > 6 else "")
            out.append(
                wrap(
                    f"{m['family']} {m['step'] or 'outside steps'}: waiting for rank {m['last_rank']}, "
                    f"{fmt_dur(m['cost_ns'])} ({ws})"
                )
            )
    if doc["failed"]:
        out += ["", "failed ranks:"]
        out += [wrap(f"rank {f['rank']} ({safe_name(f['path'])}): {safe_name(f['error'])}") for f in doc["failed"]]
    if doc.get("damaged"):
        out += ["", "damaged ranks (left out of the cross-rank figures and the verdict):"]
        out += [wrap(f"rank {d['rank']} ({safe_name(d['path'])}): {'; '.join(d['marks'])}") for d in doc["damaged"]]
    warned = [row for row in doc["ranks"] if row.get("warnings")]
    if warned:
        out += ["", "loader warnings by rank:"]
        for row in sorted(warned, key=lambda r: r["rank"]):
            for w in row["warnings"][:MAX_RANK_WARNINGS]:
                where = f"line {w['line']}: " if w.get("line") is not None else ""
                out.append(wrap(f"rank {row['rank']}: {where}{safe_name(warning_message(w['message']))}"))
            if len(row["warnings"]) > MAX_RANK_WARNINGS:
                out.append(
                    wrap(f"rank {row['rank']}: … and {len(row['warnings']) - MAX_RANK_WARNINGS} more (in --json)")
                )
    if doc["warnings"] or doc["left_out"]:
        out += ["", "warnings:"]
        out += [wrap(safe_name(w)) for w in doc["warnings"]]
    return "\n".join(out) + "\n"
