"""Render the diff document (``document.build_diff_document``) for a terminal with Rich.

Same rules as the report's text renderer: every string from a trace goes through
``safe_name`` inside a ``rich.text.Text`` (never markup), colour only on a terminal
without ``NO_COLOR``. The verdict comes first: it is what a user reads.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gapscope.diff.document import class_text, not_compared_text, rate_text, side_damage_text
from gapscope.report.panels import card_panel
from gapscope.report.rich_text import cause_text, heading, name_text, safe_text
from gapscope.report.text import print_warnings
from gapscope.units import column_unit, fmt_delta, fmt_dur, fmt_dur_pair, fmt_in, fmt_rate

__all__ = ["render_diff_text", "STATUS_STYLE"]

#: Colours of the statuses (the word is always printed).
STATUS_STYLE = {"died": "green", "shrank": "green", "grew": "red", "appeared": "red", "unchanged": "dim"}
VERDICT_STYLE = {
    "faster": "bold green",
    "slower": "bold red",
    "no change": "bold",
    "not comparable": "bold yellow",
    "cannot judge": "bold yellow",
}


def _ratio(r) -> str:
    return "-" if r is None else f"{r:.2f}×"


def render_diff_text(doc: dict, console: Console, top: int = 10) -> None:
    """Print the diff of ``doc`` on ``console``; ``top``: rows of the position and
    kernel-family tables (the JSON has all)."""
    _header(doc, console)
    _warnings(doc, console)
    _findings(doc, console, top)
    _comparability(doc, console)
    _per_step(doc, console)
    _positions(doc, console, top)
    _families(doc, console, top)
    _left(doc, console)


def _header(doc: dict, console: Console) -> None:
    b, a = doc["before"], doc["after"]
    title = Text("gapscope diff: ", style="bold")
    title.append_text(safe_text(b["path"])).append(" → ").append_text(safe_text(a["path"]))
    console.print(title)
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for name, side in (("Before", b), ("After", a)):
        grid.add_row(name, safe_text(_side_line(side)))
    v = doc["verdict"]
    grid.add_row("Verdict", Text(v["line"], style=VERDICT_STYLE.get(v["verdict"], "")))
    if doc["kernels"].get("sentence"):
        grid.add_row("GPU work", safe_text(doc["kernels"]["sentence"]))
    if doc.get("check"):
        grid.add_row("CI check", Text(doc["check"]["line"]))
    if doc.get("left"):
        grid.add_row("Left", safe_text(doc["left"]["line"]))
    console.print(grid)


def _findings(doc: dict, console: Console, top: int) -> None:
    """The findings of the two traces matched: what died, shrank, grew or appeared."""
    fd = doc.get("findings")
    if not fd or not fd["rows"]:
        return
    heading(console, "Findings (by cost per step; matched by kind and named range)")
    if fd.get("sentence"):
        console.print(safe_text(fd["sentence"], 600))
    tbl = Table(box=None, pad_edge=False, show_edge=False)
    for name in ("finding", "before", "after", "status"):
        tbl.add_column(name, justify="right" if name in ("before", "after") else "left", no_wrap=name != "finding")
    for r in fd["rows"][:top]:
        tbl.add_row(
            safe_text(r["title"], 120),
            "-" if r["before_per_step_ns"] is None else fmt_dur(r["before_per_step_ns"]),
            "-" if r["after_per_step_ns"] is None else fmt_dur(r["after_per_step_ns"]),
            r["status"],
        )
    console.print(tbl)


def _side_line(side: dict) -> str:
    st = side["steps"]
    if st["source"] == "window":
        steps = "no steps found (the GPU window is one step)"
    elif st["source"] == "none":
        steps = "no GPU kernels"
    else:
        steps = f"{st['steady_count']} steady of {st['count']} step(s) from {st['source']} `{st['name']}`"
    gpu = (
        f"GPU {side['device']}: {side['gpu']}"
        if side.get("gpu")
        else (f"GPU {side['device']}" if side.get("device") is not None else "")
    )
    damage = side_damage_text(side)
    return " · ".join(x for x in (side["format"], damage, steps, gpu) if x)


def _warnings(doc: dict, console: Console) -> None:
    """Each side's loader warnings, when either has any (both sides are then shown)."""
    if not (doc["before"].get("warnings") or doc["after"].get("warnings")):
        return
    for name in ("before", "after"):
        print_warnings(console, doc[name].get("warnings") or [], f"Loader warnings of {name.upper()}")


def _comparability(doc: dict, console: Console) -> None:
    comp = doc["comparability"]
    heading(console, "Comparability")
    if not comp["notes"]:
        console.print(Text("same GPU, kernel mix and step count"))
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for note in comp["notes"]:
        grid.add_row("-", safe_text(note))
    console.print(grid)
    for side_name in ("before", "after"):
        ex = doc[side_name]["steps"]["excluded"]
        if ex:
            reasons = "; ".join(f"step {e['index'] + 1}: {e['reason']}" for e in ex[:3])
            more = f" (and {len(ex) - 3} more)" if len(ex) > 3 else ""
            console.print(Text(f"warm-up left out of {side_name.upper()}: {reasons}{more}", style="dim"))
        inc = doc[side_name]["steps"].get("incomplete") or []
        if inc:
            reasons = "; ".join(f"step {e['index'] + 1}: {e['reason']}" for e in inc[:3])
            more = f" (and {len(inc) - 3} more)" if len(inc) > 3 else ""
            console.print(Text(f"incomplete, left out of {side_name.upper()}: {reasons}{more}"))


def _per_step(doc: dict, console: Console) -> None:
    ps = doc["per_step"]
    heading(
        console,
        f"Per step (median over {ps['steps_before']} and {ps['steps_after']} steady steps ± spread; "
        "ratio = after ÷ before)",
    )
    rows = [
        ("step wall time", ps["wall_ns"], True),
        ("GPU busy", ps["gpu_busy_ns"], True),
        ("GPU idle", ps["idle_ns"], True),
    ]
    u = column_unit(max(int(ps["wall_ns"]["before_ns"] or 0), int(ps["wall_ns"]["after_ns"] or 0), 1))
    tbl = Table(box=None, pad_edge=False, show_edge=False)
    tbl.add_column("")
    for name in ("before", "after", "change", "ratio"):
        tbl.add_column(name, justify="right")

    def cell(ns, spread=None):
        if ns is None:
            return "-"
        return fmt_in(ns, u) + (f" ± {fmt_in(spread, u)}" if spread else "")

    for label, r, spread in rows:
        tbl.add_row(
            label,
            cell(r["before_ns"], r.get("before_spread_ns") if spread else None),
            cell(r["after_ns"], r.get("after_spread_ns") if spread else None),
            fmt_delta(r["change_ns"]),
            _ratio(r["ratio"]),
        )
    for label, r in ps["idle_by_class_ns"].items():
        if not r["before_ns"] and not r["after_ns"]:
            continue
        tbl.add_row(
            Text("  idle: ").append_text(cause_text(label)),
            cell(r["before_ns"]),
            cell(r["after_ns"]),
            fmt_delta(r["change_ns"]),
            _ratio(r["ratio"]),
        )
    key = ps["rate_key"]
    rate = ps[key]
    label, _ = rate_text(ps)
    change = rate["change"]
    tbl.add_row(
        label,
        fmt_rate(rate["before"]),
        fmt_rate(rate["after"]),
        "-" if change is None else ("+" if change > 0 else "−" if change < 0 else "±") + fmt_rate(abs(change)),
        _ratio(rate["ratio"]),
    )
    console.print(tbl)
    console.print(
        Text(
            "idle by class: mean per step, each gap split over the steps it spans; "
            "the rest of the idle is in stretches shorter than the minimum gap",
            style="dim",
        )
    )


def _positions(doc: dict, console: Console, top: int) -> None:
    groups = doc["groups"]
    counts, change = doc["group_counts"], doc.get("group_change_ns") or {}
    summary = ", ".join(
        f"{k} {v}" + (f" ({fmt_delta(change[k])}/step)" if change.get(k) else "") for k, v in counts.items()
    )
    heading(console, f"Idle positions matched across the traces ({summary})")
    if not groups:
        console.print(Text(not_compared_text(doc) or "No recurring idle in either trace."))
        return
    shown = groups[: max(0, top)]
    rows = []
    for g in shown:
        b, a = g["before"], g["after"]
        p = a or b
        idle = (
            fmt_dur_pair(b["idle_per_step_ns"], a["idle_per_step_ns"])
            if b and a
            else f"{fmt_dur(b['idle_per_step_ns'])} → -"
            if b
            else f"- → {fmt_dur(a['idle_per_step_ns'])}"
        )
        rows.append(
            (
                g,
                "boundary" if p["boundary"] else f"{100 * p['rel_pos_share']:.0f}%",
                f"{class_text(b)} → {class_text(a)}",
                idle,
                fmt_delta(g["change_ns"]),
            )
        )
    # fixed columns at their natural width; the position label gets the rest
    fixed = [
        max([len(h)] + [len(r[k]) for r in rows])
        for k, h in ((1, "where"), (2, "class before → after"), (3, "idle/step"), (4, "change"))
    ]
    name_cols = max(16, console.width - sum(fixed) - len("appeared") - 12)
    tbl = Table(box=None, pad_edge=False, show_edge=False)
    tbl.add_column("status", no_wrap=True)
    tbl.add_column("position", no_wrap=True, overflow="ellipsis")
    tbl.add_column("where", justify="right", no_wrap=True)
    tbl.add_column("class before → after", no_wrap=True)
    tbl.add_column("idle/step", justify="right", no_wrap=True)
    tbl.add_column("change", justify="right", no_wrap=True)
    for g, where, cls, idle, change in rows:
        tbl.add_row(
            Text(g["status"], style=STATUS_STYLE.get(g["status"], "")),
            name_text(g["label"], name_cols),
            where,
            cls,
            idle,
            change,
        )
    console.print(tbl)
    if len(groups) > top:
        rest = groups[top:]
        ns = sum(abs(g["change_ns"]) for g in rest)
        console.print(
            Text(
                f"… and {len(rest):,} more positions (in --json), {fmt_dur(ns)} of change per step in all", style="dim"
            )
        )
    console.print(
        Text(
            "matched by the GPU ops around each gap (kernel names normalised) and its place in the step "
            "(where: start as a share of the step, or wrapping the step boundary)",
            style="dim",
        )
    )


def _families(doc: dict, console: Console, top: int) -> None:
    k = doc["kernels"]
    fams = k["families"]
    heading(console, "GPU busy by kernel family (per step: sum of kernel durations)")
    if not fams:
        console.print(Text(not_compared_text(doc) or "No kernels."))
        return
    u = column_unit(max(max(r["before_ns"], r["after_ns"]) for r in fams))
    name_cols = max(20, console.width - 45)
    tbl = Table(box=None, pad_edge=False, show_edge=False)
    tbl.add_column("family", overflow="ellipsis", ratio=1)
    for name in ("before", "after", "change"):
        tbl.add_column(name, justify="right")
    for r in fams[: max(0, top)]:
        tbl.add_row(
            name_text(r["family"], name_cols),
            fmt_in(r["before_ns"], u),
            fmt_in(r["after_ns"], u),
            fmt_delta(r["change_ns"]),
        )
    console.print(tbl)
    if len(fams) > top:
        console.print(Text(f"… and {len(fams) - top:,} more families (in --json)", style="dim"))
    if k.get("common_share") is not None:
        console.print(
            Text(f"{100 * k['common_share']:.0f}% of GPU busy time is in families common to both traces", style="dim")
        )


def _left(doc: dict, console: Console) -> None:
    left = doc.get("left")
    if not left:
        return
    heading(console, "What is left: the largest idle of AFTER")
    p = left["position"]
    title = Text("")
    title.append_text(name_text(p["label"], max(20, console.width - 20)))
    recurs = (
        f"{fmt_dur(p['idle_per_step_ns'])} per steady step on average ({left['status']}; in "
        f"{p['steps_with_gap']} of {p['steps_total']} steady steps, {fmt_dur(p['median_ns'])} median there); "
        "the card's own figures are the diagnosis's, over all steps"
    )
    console.print(card_panel(title, left["card"], recurs=recurs))
