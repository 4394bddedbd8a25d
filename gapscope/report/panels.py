"""Report sections built from panels and grids: recurring groups with their cards, the
cards of the largest gaps outside groups, and the per-step budget with what-ifs.
"""

from __future__ import annotations

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from gapscope.analysis.findings import edge_note
from gapscope.report.document import lone_gaps
from gapscope.report.fmt import GROUP_CARDS, budget_rows, more_groups_line, rate_key, what_if_label
from gapscope.report.rich_text import cause_text, heading, name_text, safe_text
from gapscope.units import column_unit, fmt_bytes, fmt_dur, fmt_in, fmt_offset, fmt_rate

__all__ = ["GROUP_CARDS", "card_panel", "groups_section", "lone_cards_section", "budget_section"]

#: Evidence items shown on a card before "… and N more" (the JSON has all).
EVIDENCE_SHOWN = 6


def card_panel(title: Text, card: dict, recurs: str | None = None, edge: str | None = None) -> Panel:
    """A ``Panel`` with the card's fields (design, "The card") and its first evidence
    items; ``card`` is a card dict of the report document, ``recurs`` an optional
    first line ("recurs in 9 of 10 steps, …"), ``edge`` where an edge gap lies
    (``top_gaps[].edge``), said first."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    cause = cause_text(card.get("cause"))
    if card.get("secondary"):
        cause.append("  (secondary: ")
        cause.append_text(cause_text(card["secondary"], card.get("secondary_share")))
        cause.append(")")
    if recurs:
        grid.add_row("Recurs", Text(recurs))
    if edge:  # an edge gap (``top_gaps[].edge``): its advice is about a steady state it is not part of
        grid.add_row("Edge gap", safe_text(edge_note(edge)))
    grid.add_row("Smell", safe_text(card.get("smell")))
    grid.add_row("Cause class", cause)
    grid.add_row("Why the GPU is empty", safe_text(card.get("why")))
    grid.add_row("First experiment", safe_text(card.get("first_experiment")))
    grid.add_row("Forbidden next step", safe_text(card.get("forbidden_step")))
    grid.add_row("Proof of improvement", safe_text(card.get("proof")))
    ev = card.get("evidence") or []
    if ev:
        lines = Text()
        for k, e in enumerate(ev[:EVIDENCE_SHOWN]):
            if k:
                lines.append("\n")
            lines.append_text(safe_text(e.get("name"), 60))
            lines.append(f"  {e.get('cause')}  {fmt_dur(e.get('overlap_ns', 0))}")
            if e.get("bytes", -1) >= 0:
                lines.append(f"  {fmt_bytes(e['bytes'])}" + (" pageable" if e.get("pageable") else ""))
        if len(ev) > EVIDENCE_SHOWN:
            lines.append(f"\n… and {len(ev) - EVIDENCE_SHOWN} more")
        grid.add_row("Evidence", lines)
    sampled = card.get("cpu_samples")
    if sampled:
        grid.add_row("CPU samples", _samples_text(sampled))
    return Panel(grid, title=title, title_align="left", expand=True)


def _samples_text(sampled: dict) -> Text:
    """The card's ``cpu_samples``: one line per hottest frame (name, module, samples,
    share), or that the thread had none in the gap."""
    n = int(sampled.get("samples") or 0)
    if not n:
        every = int(sampled.get("interval_ns") or -1)
        return Text(
            "none of the launching thread inside the gap"
            + (f" (its samples are {fmt_dur(every)} apart)" if every > 0 else "")
        )
    lines = Text()
    for k, f in enumerate(sampled.get("frames") or []):
        if k:
            lines.append("\n")
        lines.append_text(safe_text(f.get("name"), 60))
        module = str(f.get("module") or "").rsplit("/", 1)[-1]
        if module:
            lines.append("  ")
            lines.append_text(safe_text(module, 40))
        lines.append(f"  {f.get('samples', 0):,} of {n:,} ({100 * float(f.get('share') or 0):.0f}%)")
    return lines


#: Recurring groups (largest total first) printed with their card; the rest in a table.


def _recurs(grp: dict) -> str:
    return (
        f"recurs in {grp.get('steps_with_gap')} of {grp.get('steps_total')} steps, "
        f"{fmt_dur(grp.get('median_ns', 0))} median, {fmt_dur(grp.get('total_ns', 0))} total"
    )


def groups_section(doc: dict, console: Console, top: int = 10) -> None:
    """Recurring groups, largest total first: the first ``top`` of them (the
    ``GROUP_CARDS`` largest with their card, the next in a table), then one line with
    how many more there are and how much idle they hold (all are in ``--json``)."""
    groups = doc["groups"]
    if not groups:
        return
    n = len(groups)
    top = max(0, int(top))
    heading(
        console, f"Recurring gaps ({n:,} group{'s' if n != 1 else ''} by position in the step, largest total first)"
    )
    for grp in groups[: min(GROUP_CARDS, top)]:
        title = Text(f"G{grp.get('id')} ")
        title.append_text(name_text(grp.get("label"), max(20, console.width - 12)))
        if grp.get("card"):
            console.print(card_panel(title, grp["card"], recurs=_recurs(grp)))
        else:
            console.print(Text.assemble(title, ": ", _recurs(grp)))
    table = groups[GROUP_CARDS:top]
    if table:
        k = len(table)
        console.print(
            Text(f"The next {k:,} groups (cards in --json):" if k > 1 else "The next group (card in --json):")
        )
        tbl = Table(box=None, pad_edge=False, show_edge=False)
        for name in ("group", "position", "steps", "median", "total", "cause"):
            tbl.add_column(
                name,
                justify="right" if name in ("steps", "median", "total") else "left",
                overflow="ellipsis",
                ratio=1 if name == "position" else None,
            )
        for grp in table:
            tbl.add_row(
                f"G{grp.get('id')}",
                name_text(grp.get("label"), max(20, console.width - 50)),
                f"{grp.get('steps_with_gap')}/{grp.get('steps_total')}",
                fmt_dur(grp.get("median_ns", 0)),
                fmt_dur(grp.get("total_ns", 0)),
                cause_text(grp.get("cause")),
            )
        console.print(tbl)
    rest = groups[top:]
    if rest:
        console.print(Text(more_groups_line(rest, doc.get("idle_in_gaps_ns"), shown=top), style="dim"))


def lone_cards_section(doc: dict, console: Console) -> None:
    """Cards of the largest gaps outside recurring groups (``report_json.lone_gaps``)."""
    lone = lone_gaps(doc)
    if not lone:
        return
    heading(console, "Cards of the largest gaps outside recurring groups")
    for rank, g in lone:
        title = Text(f"#{rank}: {fmt_dur(g['dur_ns'])} at {fmt_offset(g['start_rel_ns'])}")
        if g.get("episode", -1) >= 0:
            title.append(f" (picket-fence episode E{g['episode']})")
        console.print(card_panel(title, g["card"], edge=g.get("edge")))


def budget_section(doc: dict, console: Console) -> None:
    """Steps, the per-step budget and the what-if table with the stated assumptions
    (design, "Budget and what-if"); printed only when steps are known."""
    steps, budget = doc.get("steps"), doc.get("budget")
    if steps is None or budget is None:
        return  # a budget per step needs steps (the JSON has the window budget too)
    heading(console, "Steps and budget")
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    line = Text(f"{steps['count']} ({steps.get('source')}")
    if steps.get("name"):
        line.append(": ")
        line.append_text(name_text(steps["name"], 60))
    line.append(")")
    if steps.get("on_gpu"):
        line.append(
            "; as the GPU ran them: the GPU ran behind the CPU, so each step runs from its first GPU op to the next step's"
        )
    grid.add_row("Steps", line)
    for k, v in budget_rows(budget):
        grid.add_row(k, safe_text(v))
    console.print(grid)
    whatifs = doc.get("what_if") or []
    if not whatifs:
        return
    u = column_unit(int(budget.get("wall_ns") or 0))
    heading(console, "What if these gaps were removed (per step)")
    tbl = Table(box=None, pad_edge=False, show_edge=False)
    rk, rname = rate_key(budget)
    for name in ("removed", "idle removed", "step", rname, "speed-up"):
        tbl.add_column(name, justify="left" if name == "removed" else "right")
    for w in whatifs:
        tps, sp = w.get(rk), w.get("speedup")
        tbl.add_row(
            what_if_label(w),
            fmt_in(w.get("removed_ns", 0), u),
            fmt_in(w.get("projected_step_ns", 0), u),
            fmt_rate(tps),
            "-" if sp is None else f"{sp:.2f}x",
        )
    console.print(tbl)
    for w in whatifs:
        for n in w.get("unmatched") or []:
            line = Text("no event name matches ", style="yellow")
            line.append_text(name_text(n, 60))
            line.append(": nothing was removed for it", style="yellow")
            console.print(line)
    last = whatifs[-1]
    notes = Table.grid(padding=(0, 1))
    notes.add_column(no_wrap=True)
    notes.add_column()
    for a in last.get("assumptions") or []:
        notes.add_row("-", safe_text(a))
    console.print(Text(f"Assumptions (as stated for {what_if_label(last)}):", style="dim"))
    console.print(notes)
