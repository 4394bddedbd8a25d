"""Render the report document (``report_json.build_document``) for a terminal with Rich.

Every string that comes from the trace is passed through ``safe_name`` and wrapped in
``rich.text.Text``: it is never parsed as console markup, so ``[bold red]x[/bold red]``
prints as written and control characters cannot reach the terminal. Colour follows
Rich's ``Console`` (off for ``NO_COLOR`` and when not writing to a terminal).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .report_json import lone_gaps
from .report_fmt import budget_rows, fmt_bytes, fmt_dur, fmt_share, safe_name, short_name, unit_for

__all__ = ["render_text", "make_console", "CAUSE_STYLE", "MAX_WARNINGS", "MAX_LANES"]

#: Styles of the cause classes (colour only; the label is always printed).
CAUSE_STYLE = {"sync": "magenta", "copy": "cyan", "launch": "yellow", "host": "red", "unclassified": "dim"}
#: Warnings printed in full before "... and N more".
MAX_WARNINGS = 20
#: Lanes listed before "... and N more lanes" (the JSON lists all).
MAX_LANES = 60
#: Fewest columns a kernel name gets in the gaps table (longer names end with …).
NAME_COLS_MIN = 20


def _t(s: Any, max_len: int | None = None, style: str = "") -> Text:
    """A ``Text`` of an untrusted string (made terminal-safe, never markup)."""
    return Text(safe_name("" if s is None else str(s), max_len), style=style)


def _name(s: Any, max_len: int) -> Text:
    """A ``Text`` of a kernel/op name, shortened only when it does not fit."""
    return Text(short_name("" if s is None else str(s), max_len))


def _cause(label: str | None, share: float | None = None) -> Text:
    if not label:
        return Text("-")
    t = Text(label, style=CAUSE_STYLE.get(label, ""))
    if share is not None:
        t.append(f" {100.0 * share:.0f}%")
    return t


def _heading(console: Console, title: str) -> None:
    console.print()
    console.print(Text(title, style="bold underline"))


def render_text(doc: dict, console: Console) -> None:
    """Print the whole report of ``doc`` on ``console`` (sections in a fixed order)."""
    _header(doc, console)
    _lanes(doc, console)
    _devices(doc, console)
    if not doc.get("diagnosis_available"):
        console.print()
        console.print(Text("Gap diagnosis unavailable (analysis.diagnose not installed)."))
    elif doc["devices"]:  # nothing to diagnose without GPU kernels
        _class_totals(doc, console)
        _top_gaps(doc, console)
        _groups(doc, console)
        _top_cards(doc, console)
        _episodes(doc, console)
        _budget(doc, console)
    _warnings(doc, console)


def _header(doc: dict, console: Console) -> None:
    src = doc["source"]
    console.print(Text.assemble(("gapscope report: ", "bold"), _t(src["path"])))
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    fmt = src["format"]
    if src.get("schema_version") is not None:
        fmt += f" (Kineto schemaVersion {src['schema_version']})"
    grid.add_row("Format", _t(fmt))
    if src.get("trace_name"):
        grid.add_row("Trace name", _t(src["trace_name"]))
    if src.get("rank") is not None or src.get("world_size") is not None:
        rank = "?" if src.get("rank") is None else src["rank"]
        world = "?" if src.get("world_size") is None else src["world_size"]
        grid.add_row("Rank", Text(f"{rank} of world size {world}"))
    for k, prop in enumerate(src.get("device_properties") or []):
        grid.add_row(f"Device {prop.get('id', k)}" if isinstance(prop, dict) else f"Device {k}", _t(_device_prop(prop)))
    span = doc["span"]
    grid.add_row("Span", Text(f"{fmt_dur(span['dur_ns'])} ({span['start_ns']} → {span['end_ns']} ns)"))
    grid.add_row("Events", Text(f"{doc['event_count']:,} on {len(doc['lanes'])} lanes"))
    ignored = src.get("ignored_counts") or {}
    if ignored:
        grid.add_row("Ignored", _t(", ".join(f"{k}: {v}" for k, v in sorted(ignored.items()))))
    console.print(grid)


def _device_prop(prop: Any) -> str:
    if not isinstance(prop, dict):
        return str(prop)
    parts = [str(prop.get("name", "?"))]
    mem = prop.get("totalGlobalMem")
    if isinstance(mem, (int, float)) and mem > 0:
        parts.append(fmt_bytes(int(mem)))
    if "computeMajor" in prop:
        parts.append(f"sm_{prop.get('computeMajor')}{prop.get('computeMinor', '')}")
    if "numSms" in prop:
        parts.append(f"{prop['numSms']} SMs")
    return ", ".join(parts)


def _lanes(doc: dict, console: Console) -> None:
    _heading(console, "Lanes")
    lanes = doc["lanes"][:MAX_LANES]
    rows, prev_group = [], None
    for ln in lanes:
        group = (ln["is_gpu"], ln["device"] if ln["is_gpu"] else ln["pid"])
        if ln["is_gpu"]:  # Kineto names GPU processes after the host program ("python")
            pname = ln["process_name"] or ""
            proc = Text(f"GPU {ln['device']}")
            if pname and not pname.startswith("GPU"):
                proc.append(" · ").append_text(_t(pname, 24))
        else:
            proc = _t(ln["process_name"], 32)
        if group == prev_group:
            proc = Text("")
        prev_group = group
        kinds = sorted(ln["event_counts_by_kind"].items(), key=lambda kv: -kv[1])
        rows.append((proc, _t(ln["label"] or ln["tid"] or "-", 32), f"{ln['event_count']:,}",
                     ", ".join(f"{k} {v:,}" for k, v in kinds[:4]) + (" …" if len(kinds) > 4 else "")))
    # fixed columns at their natural width; "by kind" gets the rest and ends with …
    widths = [max([len(h)] + [len(r[k]) for r in rows]) for k, h in enumerate(("process / device", "lane", "events"))]
    room = max(12, console.width - sum(widths) - 6)
    tbl = Table(box=None, pad_edge=False, show_edge=False)
    for k, name in enumerate(("process / device", "lane", "events")):
        tbl.add_column(name, no_wrap=True, min_width=widths[k], justify="right" if name == "events" else "left")
    tbl.add_column("by kind", no_wrap=True, overflow="ellipsis")
    for proc, lane, count, kinds in rows:
        tbl.add_row(proc, lane, count, Text(kinds if len(kinds) <= room else kinds[: room - 1] + "…"))
    console.print(tbl)
    if len(doc["lanes"]) > MAX_LANES:
        console.print(Text(f"... and {len(doc['lanes']) - MAX_LANES} more lanes (all in --json)"))


def _devices(doc: dict, console: Console) -> None:
    _heading(console, "GPU busy (union of kernels over all streams of a device)")
    devs = doc["devices"]
    if not devs:
        console.print(Text("No GPU kernels in this trace."))
        return
    u = unit_for(max(d["window_ns"] for d in devs))
    tbl = Table(box=None, pad_edge=False, show_edge=False)
    for name in ("device", "window", "busy", "idle", "idle share", "fully idle", "kernels", "copies"):
        tbl.add_column(name, justify="left" if name == "device" else "right")
    for d in devs:
        tbl.add_row(
            f"GPU {d['device']}", fmt_dur(d["window_ns"], u),
            f"{fmt_dur(d['busy_ns'], u)} ({fmt_share(d['busy_ns'], d['window_ns'])})",
            fmt_dur(d["idle_ns"], u), fmt_share(d["idle_ns"], d["window_ns"]),
            f"{fmt_dur(d['fully_idle_ns'], u)} ({fmt_share(d['fully_idle_ns'], d['window_ns'])})",
            f"{d['kernel_count']:,}", f"{d['copy_count']:,}",
        )
    console.print(tbl)
    console.print(Text("fully idle: no kernel, memcpy or memset running (copies counted as busy)", style="dim"))


def _class_totals(doc: dict, console: Console) -> None:
    totals = doc["class_totals_ns"]
    total = sum(totals.values())
    p = doc.get("params") or {}
    _heading(console, f"Idle time by cause ({doc['gap_count']:,} gaps of at least {fmt_dur(p.get('min_gap_ns', 0))})")
    u = unit_for(max(total, 1))
    per_device = [d for d in doc["devices"] if d.get("class_totals_ns") is not None] if len(doc["devices"]) > 1 else []
    tbl = Table(box=None, pad_edge=False, show_edge=False)
    tbl.add_column("cause")
    tbl.add_column("idle", justify="right")
    tbl.add_column("share", justify="right")
    tbl.add_column("gaps (primary)", justify="right")
    for d in per_device:
        tbl.add_column(f"GPU {d['device']}", justify="right")
    counts = doc.get("class_gap_counts") or {}
    for label, ns in totals.items():
        tbl.add_row(_cause(label), fmt_dur(ns, u), fmt_share(ns, total), f"{counts.get(label, 0):,}",
                    *[fmt_dur(d["class_totals_ns"].get(label, 0), u) for d in per_device])
    tbl.add_row(Text("total", style="bold"), fmt_dur(total, u), fmt_share(total, total) if total else "-",
                f"{doc['gap_count']:,}", *[fmt_dur(d["gap_idle_ns"], u) for d in per_device])
    console.print(tbl)
    console.print(Text("idle of each gap split over the classes by evidence coverage; gaps counted by primary class",
                       style="dim"))


def _top_gaps(doc: dict, console: Console) -> None:
    gaps = doc["top_gaps"]
    if not gaps and doc.get("gap_count"):
        return  # --top 0
    _heading(console, f"Largest idle gaps (top {len(gaps)})")
    if not gaps:
        console.print(Text("No idle gaps."))
        return
    us = unit_for(max(abs(g["start_rel_ns"]) for g in gaps))
    ul = unit_for(max(g["dur_ns"] for g in gaps))
    # names share what the figures leave of the width (about 50 columns)
    name_cols = max(NAME_COLS_MIN, (console.width - 50) // 2)
    tbl = Table(box=None, pad_edge=False, show_edge=False)
    tbl.add_column("#", justify="right")
    if len(doc["devices"]) > 1:
        tbl.add_column("GPU", justify="right")
    tbl.add_column("start", justify="right")
    tbl.add_column("length", justify="right")
    tbl.add_column("after", overflow="ellipsis", ratio=1)
    tbl.add_column("before", overflow="ellipsis", ratio=1)
    tbl.add_column("cause")
    tbl.add_column("group", justify="right")
    for rank, g in enumerate(gaps, 1):
        row = [str(rank)]
        if len(doc["devices"]) > 1:
            row.append(str(g["device"]))
        row += [fmt_dur(g["start_rel_ns"], us), fmt_dur(g["dur_ns"], ul)]
        cells: list[Any] = [
            _name(g["prev_op"]["name"] if g["prev_op"] else "(window start)", name_cols),
            _name(g["next_op"]["name"] if g["next_op"] else "(window end)", name_cols),
            _cause(g["cause"], g["cause_share"]),
            _group_tag(g),
        ]
        tbl.add_row(*row, *cells)
    console.print(tbl)
    console.print(Text("start: from the trace start; after/before: the GPU ops around the gap", style="dim"))


def _group_tag(g: dict) -> str:
    """``G<id>`` for a recurring group, ``E<n>`` for a picket-fence episode, else ``-``."""
    if g.get("group", -1) >= 0:
        return f"G{g['group']}"
    if g.get("episode", -1) >= 0:
        return f"E{g['episode']}"
    return "-"


def _card_panel(title: Text, card: dict, recurs: str | None = None) -> Panel:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    cause = _cause(card.get("cause"))
    if card.get("secondary"):
        cause.append("  (secondary: ")
        cause.append_text(_cause(card["secondary"], card.get("secondary_share")))
        cause.append(")")
    if recurs:
        grid.add_row("Recurs", Text(recurs))
    grid.add_row("Smell", _t(card.get("smell")))
    grid.add_row("Cause class", cause)
    grid.add_row("Why the GPU is empty", _t(card.get("why")))
    grid.add_row("First experiment", _t(card.get("first_experiment")))
    grid.add_row("Forbidden next step", _t(card.get("forbidden_step")))
    grid.add_row("Proof of improvement", _t(card.get("proof")))
    ev = card.get("evidence") or []
    if ev:
        lines = Text()
        for k, e in enumerate(ev[:6]):
            if k:
                lines.append("\n")
            lines.append_text(_t(e.get("name"), 60))
            lines.append(f"  {e.get('cause')}  {fmt_dur(e.get('overlap_ns', 0))}")
            if e.get("bytes", -1) >= 0:
                lines.append(f"  {fmt_bytes(e['bytes'])}" + (" pageable" if e.get("pageable") else ""))
        if len(ev) > 6:
            lines.append(f"\n… and {len(ev) - 6} more")
        grid.add_row("Evidence", lines)
    return Panel(grid, title=title, title_align="left", expand=True)


#: Recurring groups (largest total first) printed with their card; the rest in a table.
GROUP_CARDS = 3


def _recurs(grp: dict) -> str:
    return (f"recurs in {grp.get('steps_with_gap')} of {grp.get('steps_total')} steps, "
            f"{fmt_dur(grp.get('median_ns', 0))} median, {fmt_dur(grp.get('total_ns', 0))} total")


def _groups(doc: dict, console: Console) -> None:
    groups = doc["groups"]
    if not groups:
        return
    n = len(groups)
    _heading(console, f"Recurring gaps ({n} group{'s' if n != 1 else ''} by position in the step, largest total first)")
    for grp in groups[:GROUP_CARDS]:
        title = Text(f"G{grp.get('id')} ")
        title.append_text(_name(grp.get("label"), max(20, console.width - 12)))
        if grp.get("card"):
            console.print(_card_panel(title, grp["card"], recurs=_recurs(grp)))
        else:
            console.print(Text.assemble(title, ": ", _recurs(grp)))
    rest = groups[GROUP_CARDS:]
    if rest:
        console.print(Text(f"{len(rest)} more group{'s' if len(rest) != 1 else ''} (cards in --json):"))
        tbl = Table(box=None, pad_edge=False, show_edge=False)
        for name in ("group", "position", "steps", "median", "total", "cause"):
            tbl.add_column(name, justify="right" if name in ("steps", "median", "total") else "left",
                           overflow="ellipsis", ratio=1 if name == "position" else None)
        for grp in rest:
            tbl.add_row(f"G{grp.get('id')}", _name(grp.get("label"), max(20, console.width - 50)),
                        f"{grp.get('steps_with_gap')}/{grp.get('steps_total')}", fmt_dur(grp.get("median_ns", 0)),
                        fmt_dur(grp.get("total_ns", 0)), _cause(grp.get("cause")))
        console.print(tbl)


def _top_cards(doc: dict, console: Console) -> None:
    lone = lone_gaps(doc)
    if not lone:
        return
    _heading(console, "Cards of the largest gaps outside recurring groups")
    for rank, g in lone:
        title = Text(f"#{rank}: {fmt_dur(g['dur_ns'])} at {fmt_dur(g['start_rel_ns'])}")
        if g.get("episode", -1) >= 0:
            title.append(f" (picket-fence episode E{g['episode']})")
        console.print(_card_panel(title, g["card"]))


def _episodes(doc: dict, console: Console) -> None:
    eps = doc["episodes"]
    if not eps:
        return
    _heading(console, f"Picket-fence episodes ({len(eps)})")
    tbl = Table(box=None, pad_edge=False, show_edge=False)
    for name in ("", "GPU", "start", "length", "kernels", "median kernel", "median launch", "idle"):
        tbl.add_column(name, justify="right")
    for n, e in enumerate(eps):
        launch = e.get("median_launch_ns", -1)
        tbl.add_row(f"E{n}", str(e.get("device")), fmt_dur(e["start_rel_ns"]), fmt_dur(e["dur_ns"]), f"{e.get('kernel_count', 0):,}",
                    fmt_dur(e.get("median_kernel_ns", 0)), "-" if launch is None or launch < 0 else fmt_dur(launch),
                    fmt_dur(e.get("idle_ns", 0)))
    console.print(tbl)


def _budget(doc: dict, console: Console) -> None:
    steps, budget = doc.get("steps"), doc.get("budget")
    if steps is None or budget is None:
        return  # a budget per step needs steps (the JSON has the window budget too)
    _heading(console, "Steps and budget")
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    line = Text(f"{steps['count']} ({steps.get('source')}")
    if steps.get("name"):
        line.append(": ")
        line.append_text(_name(steps["name"], 60))
    line.append(")")
    grid.add_row("Steps", line)
    for k, v in budget_rows(budget):
        grid.add_row(k, _t(v))
    console.print(grid)
    whatifs = doc.get("what_if") or []
    if not whatifs:
        return
    u = unit_for(int(budget.get("wall_ns") or 0))
    _heading(console, "What if these gaps were removed (per step)")
    tbl = Table(box=None, pad_edge=False, show_edge=False)
    for name in ("removed", "idle removed", "step", "tokens/s", "speed-up"):
        tbl.add_column(name, justify="left" if name == "removed" else "right")
    for w in whatifs:
        tps, sp = w.get("tokens_per_s"), w.get("speedup")
        tbl.add_row("+".join(w.get("removed_causes", [])), fmt_dur(w.get("removed_ns", 0), u),
                    fmt_dur(w.get("projected_step_ns", 0), u), "-" if tps is None else f"{tps:,.0f}",
                    "-" if sp is None else f"{sp:.2f}x")
    console.print(tbl)
    last = whatifs[-1]
    notes = Table.grid(padding=(0, 1))
    notes.add_column(no_wrap=True)
    notes.add_column()
    for a in last.get("assumptions") or []:
        notes.add_row("-", _t(a))
    console.print(Text(f"Assumptions (as stated for {'+'.join(last.get('removed_causes', []))}):", style="dim"))
    console.print(notes)


def _warnings(doc: dict, console: Console) -> None:
    warns = doc["warnings"]
    _heading(console, f"Warnings ({len(warns)})")
    if not warns:
        console.print(Text("none"))
        return
    for w in warns[:MAX_WARNINGS]:
        where = f"line {w['line']}: " if w.get("line") is not None else ""
        field = f"[{w['field']}] " if w.get("field") else ""
        console.print(Text.assemble(where, _t(field), _t(w["message"])))
    if len(warns) > MAX_WARNINGS:
        console.print(Text(f"... and {len(warns) - MAX_WARNINGS} more (all in --json)"))


def make_console(file, *, width: int | None, color: bool) -> Console:
    """A Rich console for the report: no markup/emoji/highlighting of data, colour only
    when ``color``; ``width`` None lets Rich measure the terminal."""
    return Console(file=file, width=width, no_color=not color, color_system="auto" if color else None,
                   force_terminal=True if color else None,
                   markup=False, emoji=False, highlight=False, soft_wrap=False)

