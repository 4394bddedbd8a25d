"""Render the report document (``report_json.build_document``) for a terminal with Rich.

Every string that comes from the trace is passed through ``safe_name`` and wrapped in
``rich.text.Text``: it is never parsed as console markup, so ``[bold red]x[/bold red]``
prints as written and control characters cannot reach the terminal. Colour follows
Rich's ``Console`` (off for ``NO_COLOR`` and when not writing to a terminal).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gapscope.report.document import trust_lines
from gapscope.report.findings_text import folded_devices, verdict_section
from gapscope.report.fmt import (
    fmt_share,
    kind_counts_text,
    more_episodes_line,
    more_gaps_line,
    rank_text,
    warning_message,
)
from gapscope.report.panels import budget_section, groups_section, lone_cards_section
from gapscope.report.rich_text import CAUSE_STYLE, cause_text, heading, make_console, name_text, safe_text
from gapscope.units import column_unit, fmt_dur, fmt_in, fmt_offset, offset_column_unit

__all__ = ["render_text", "make_console", "print_warnings", "CAUSE_STYLE", "MAX_WARNINGS", "MAX_LANES"]

#: Warnings printed in full before "... and N more".
MAX_WARNINGS = 20
#: Lanes listed before "... and N more lanes" (the JSON lists all).
MAX_LANES = 60
#: Fewest columns a kernel name gets in the gaps table (longer names end with …).
NAME_COLS_MIN = 20


def render_text(doc: dict, console: Console, top: int = 10) -> None:
    """Print the whole report of ``doc`` on ``console`` (sections in a fixed order);
    ``top``: how many entries each list shows (``--top``: recurring groups, picket-fence
    episodes; the largest gaps are already limited in ``doc``), the rest counted with
    their idle. The verdict and the findings come first (``verdict_section``)."""
    verdict_section(doc, console, top)
    _header(doc, console)
    _lanes(doc, console)
    _devices(doc, console)
    if not doc.get("diagnosis_available"):
        console.print()
        console.print(Text("Gap diagnosis unavailable (gapscope.analysis.diagnose not installed)."))
    elif doc["devices"]:  # nothing to diagnose without GPU kernels
        _class_totals(doc, console)
        _top_gaps(doc, console)
        groups_section(doc, console, top)
        lone_cards_section(doc, console)
        _episodes(doc, console, top)
        budget_section(doc, console)
    _warnings(doc, console)


def _header(doc: dict, console: Console) -> None:
    src = doc["source"]
    if doc.get("verdict"):
        console.print()
    console.print(Text.assemble(("gapscope report: ", "bold"), safe_text(src["path"])))
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    fmt = src["format"]
    if src.get("schema_version") is not None:
        fmt += f" (Kineto schemaVersion {src['schema_version']})"
    grid.add_row("Format", safe_text(fmt))
    if src.get("trace_name"):
        grid.add_row("Trace name", safe_text(src["trace_name"]))
    rank = rank_text(src)
    if rank is not None:
        grid.add_row("Rank", safe_text(rank))
    for ids, label in folded_devices(src.get("device_properties") or []):
        grid.add_row(ids, Text(label))
    span = doc["span"]
    grid.add_row("Span", Text(f"{fmt_dur(span['dur_ns'])} ({span['start_ns']} → {span['end_ns']} ns)"))
    grid.add_row("Events", Text(f"{doc['event_count']:,} on {len(doc['lanes'])} lanes"))
    ignored = src.get("ignored_counts") or {}
    if ignored:
        grid.add_row("Ignored", safe_text(", ".join(f"{k}: {v}" for k, v in sorted(ignored.items()))))
    console.print(grid)


def _lanes(doc: dict, console: Console) -> None:
    heading(console, "Lanes")
    lanes = doc["lanes"][:MAX_LANES]
    rows, prev_group = [], None
    for ln in lanes:
        group = (ln["is_gpu"], ln["device"] if ln["is_gpu"] else ln["pid"])
        if ln["is_gpu"]:  # Kineto names GPU processes after the host program ("python")
            pname = ln["process_name"] or ""
            proc = Text(f"GPU {ln['device']}")
            if pname and not pname.startswith("GPU"):
                proc.append(" · ").append_text(safe_text(pname, 24))
        else:
            proc = safe_text(ln["process_name"], 32)
        if group == prev_group:
            proc = Text("")
        prev_group = group
        rows.append(
            (
                proc,
                safe_text(ln["label"] or ln["tid"] or "-", 32),
                f"{ln['event_count']:,}",
                kind_counts_text(ln["event_counts_by_kind"]),
            )
        )
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
    heading(console, "GPU busy (union of kernels over all streams of a device)")
    devs = doc["devices"]
    if not devs:
        console.print(Text("No GPU kernels in this trace."))
        return
    u = column_unit(max(d["window_ns"] for d in devs))
    tbl = Table(box=None, pad_edge=False, show_edge=False)
    for name in ("device", "window", "busy", "idle", "idle share", "fully idle", "kernels", "copies"):
        tbl.add_column(name, justify="left" if name == "device" else "right")
    for d in devs:
        tbl.add_row(
            f"GPU {d['device']}",
            fmt_in(d["window_ns"], u),
            f"{fmt_in(d['busy_ns'], u)} ({fmt_share(d['busy_ns'], d['window_ns'])})",
            fmt_in(d["idle_ns"], u),
            fmt_share(d["idle_ns"], d["window_ns"]),
            f"{fmt_in(d['fully_idle_ns'], u)} ({fmt_share(d['fully_idle_ns'], d['window_ns'])})",
            f"{d['kernel_count']:,}",
            f"{d['copy_count']:,}",
        )
    console.print(tbl)
    console.print(Text("fully idle: no kernel, memcpy or memset running (copies counted as busy)", style="dim"))


def _class_totals(doc: dict, console: Console) -> None:
    totals = doc["class_totals_ns"]
    total = sum(totals.values())
    p = doc.get("params") or {}
    heading(console, f"Idle time by cause ({doc['gap_count']:,} gaps of at least {fmt_dur(p.get('min_gap_ns', 0))})")
    u = column_unit(max(total, 1))
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
        tbl.add_row(
            cause_text(label),
            fmt_in(ns, u),
            fmt_share(ns, total),
            f"{counts.get(label, 0):,}",
            *[fmt_in(d["class_totals_ns"].get(label, 0), u) for d in per_device],
        )
    tbl.add_row(
        Text("total", style="bold"),
        fmt_in(total, u),
        fmt_share(total, total) if total else "-",
        f"{doc['gap_count']:,}",
        *[fmt_in(d["gap_idle_ns"], u) for d in per_device],
    )
    console.print(tbl)
    note = (
        "each gap's idle split over the classes by what held the GPU (queued first, then what the launching "
        "thread did; docs/definitions.md); gaps counted by primary class"
    )
    short = sum(d["idle_ns"] for d in doc["devices"]) - total
    if short > 0:
        note += f"; {fmt_in(short, u)} more idle in stretches shorter than the minimum gap"
    console.print(Text(note, style="dim"))
    for line in trust_lines(doc):
        console.print(Text("- " + line))


def _top_gaps(doc: dict, console: Console) -> None:
    gaps = doc["top_gaps"]
    if not gaps and doc.get("gap_count"):
        return  # --top 0
    heading(console, f"Largest idle gaps (top {len(gaps)})")
    if not gaps:
        console.print(Text("No idle gaps."))
        return
    us = offset_column_unit(max(abs(g["start_rel_ns"]) for g in gaps))
    ul = column_unit(max(g["dur_ns"] for g in gaps))
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
    for g in gaps:
        row = [f"#{g['index']}"]  # the gap number the viewer shows (``g #N`` goes there)
        if len(doc["devices"]) > 1:
            row.append(str(g["device"]))
        row += [fmt_in(g["start_rel_ns"], us), fmt_in(g["dur_ns"], ul)]
        cells: list[Any] = [
            name_text(g["prev_op"]["name"] if g["prev_op"] else "(window start)", name_cols),
            name_text(g["next_op"]["name"] if g["next_op"] else "(window end)", name_cols),
            cause_text(g["cause"], g["cause_share"]),
            _group_tag(g),
        ]
        tbl.add_row(*row, *cells)
    console.print(tbl)
    more = more_gaps_line(doc)
    if more:
        console.print(Text(more, style="dim"))
    console.print(Text("start: from the trace start; after/before: the GPU ops around the gap", style="dim"))


def _group_tag(g: dict) -> str:
    """``G<id>`` for a recurring group, ``E<n>`` for a picket-fence episode, else ``-``."""
    if g.get("group", -1) >= 0:
        return f"G{g['group']}"
    if g.get("episode", -1) >= 0:
        return f"E{g['episode']}"
    return "-"


def _episodes(doc: dict, console: Console, top: int = 10) -> None:
    """Picket-fence episodes, the first ``top`` (``--top``), then one line for the rest."""
    eps = doc["episodes"]
    if not eps:
        return
    heading(console, f"Picket-fence episodes ({len(eps)})")
    tbl = Table(box=None, pad_edge=False, show_edge=False)
    for name in ("", "GPU", "start", "length", "kernels", "median kernel", "median launch", "idle"):
        tbl.add_column(name, justify="right")
    top = max(0, int(top))
    for n, e in enumerate(eps[:top]):
        launch = e.get("median_launch_ns", -1)
        tbl.add_row(
            f"E{n}",
            str(e.get("device")),
            fmt_offset(e["start_rel_ns"]),
            fmt_dur(e["dur_ns"]),
            f"{e.get('kernel_count', 0):,}",
            fmt_dur(e.get("median_kernel_ns", 0)),
            "-" if launch is None or launch < 0 else fmt_dur(launch),
            fmt_dur(e.get("idle_ns", 0)),
        )
    console.print(tbl)
    if len(eps) > top:
        console.print(Text(more_episodes_line(eps[top:], shown=top), style="dim"))


def _warnings(doc: dict, console: Console) -> None:
    print_warnings(console, doc["warnings"], "Warnings")


def print_warnings(console: Console, warns: list[dict], title: str) -> None:
    """The loader's warnings (``{line, field, message}`` rows) under the heading
    ``title (N)``: the first ``MAX_WARNINGS``, each name made safe, then a count of the
    rest; ``none`` when there is none."""
    heading(console, f"{title} ({len(warns)})")
    if not warns:
        console.print(Text("none"))
        return
    for w in warns[:MAX_WARNINGS]:
        where = f"line {w['line']}: " if w.get("line") is not None else ""
        field = f"[{w['field']}] " if w.get("field") else ""
        console.print(Text.assemble(where, safe_text(field), safe_text(warning_message(w["message"]))))
    if len(warns) > MAX_WARNINGS:
        console.print(Text(f"... and {len(warns) - MAX_WARNINGS} more (all in --json)"))
