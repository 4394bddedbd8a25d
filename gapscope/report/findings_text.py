"""The verdict and the findings table: the first lines of the text report
("Findings: what the tool says first" in the design). Reads the document's
``verdict``, ``findings`` and ``findings_apart`` (``document.build_document``).
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gapscope.report.fmt import device_label
from gapscope.report.rich_text import CAUSE_STYLE, safe_text
from gapscope.units import column_unit, fmt_dur, fmt_in, fmt_rate

__all__ = ["folded_devices", "verdict_section", "FINDING_ROWS", "APART_ROWS", "rate_text", "fixed_text"]

#: Findings listed in the table (the JSON lists all).
FINDING_ROWS = 6
#: Edge and one-time entries listed under the table.
APART_ROWS = 3


def rate_text(f: dict) -> str:
    """The projected rate of a finding: tokens/s for a decode step, else steps/s
    (``units.fmt_rate``: ``0.075 steps/s``, never ``0``)."""
    if f.get("tokens_per_s") is not None:
        return f"{fmt_rate(f['tokens_per_s'])} tokens/s"
    if f.get("steps_per_s") is not None:
        return f"{fmt_rate(f['steps_per_s'])} steps/s"
    return "-"


def fixed_text(f: dict) -> str:
    """The "if fixed" cell of a finding: its projected step and rate, or why there is
    none (``projected_step_ns`` null): "not measurable" (kind ``unmeasurable``: its idle
    may not be idle) or "not projected" (too few steps, ``Finding.projected``)."""
    if f.get("projected_step_ns") is None:
        return "not measurable" if f.get("kind") == "unmeasurable" else "not projected"
    return f"{fmt_dur(f['projected_step_ns'])}, {rate_text(f)}"


def verdict_section(doc: dict, console: Console, top: int = FINDING_ROWS) -> None:
    """Print the verdict (one sentence, wrapped), then the ranked findings (class,
    cost per step, share of the step, steps it recurs in, positions, title, projected
    step if fixed) and the edge and one-time entries kept apart. Prints nothing when
    the document has no verdict (no diagnosis). ``top`` (``--top``) limits the rows
    below ``FINDING_ROWS``."""
    v = doc.get("verdict")
    if not v:
        return
    console.print(Text.assemble(("Verdict: ", "bold"), safe_text(v["sentence"], 2000)))
    found = doc.get("findings") or []
    if found:
        u = column_unit(max(f["per_step_ns"] for f in found))
        tbl = Table(box=None, pad_edge=False, show_edge=False, title_justify="left")
        for name, just in (
            ("#", "right"),
            ("class", "left"),
            ("per step", "right"),
            ("share", "right"),
            ("steps", "right"),
            ("gaps", "right"),
            ("finding", "left"),
            ("if fixed", "left"),
        ):
            tbl.add_column(name, justify=just, no_wrap=name != "finding", overflow="fold")  # type: ignore[arg-type]
        rows = min(FINDING_ROWS, top)
        for f in found[:rows]:
            tbl.add_row(
                f"F{f['rank'] + 1}",
                Text(f["cause"], style=CAUSE_STYLE.get(f["cause"], "")),
                fmt_in(f["per_step_ns"], u),
                f"{100 * f['step_share']:.1f}%",
                f"{f['steps_with']}/{f['steps_total']}",
                f"{len(f['positions']):,}",
                safe_text(f["title"], 120),
                fixed_text(f),
            )
        console.print(tbl)
        more = len(found) - rows
        if more > 0:
            console.print(Text(f"… and {more} more findings (in --json)", style="dim"))
    apart = doc.get("findings_apart") or []
    for f in apart[:APART_ROWS]:
        console.print(
            Text.assemble(("apart  ", "dim"), safe_text(f["title"], 200), (" (in no per-step figure)", "dim"))
        )
    if len(apart) > APART_ROWS:
        console.print(Text(f"apart  … and {len(apart) - APART_ROWS} more edge or one-time entries", style="dim"))


def folded_devices(props: list) -> list[tuple[str, str]]:
    """(\"Device 0\" or \"Devices 0-7\", label) per run of devices with the same label:
    eight identical lines say less than one."""
    rows: list[tuple[list, str]] = []
    for k, prop in enumerate(props):
        dev = prop.get("id", k) if isinstance(prop, dict) else k
        label = device_label(prop)
        if rows and rows[-1][1] == label:
            rows[-1][0].append(dev)
        else:
            rows.append(([dev], label))
    out = []
    for ids, label in rows:
        if len(ids) == 1:
            out.append((f"Device {ids[0]}", label))
        else:
            out.append((f"Devices {ids[0]}-{ids[-1]}" if len(ids) > 2 else f"Devices {ids[0]}, {ids[1]}", label))
    return out
