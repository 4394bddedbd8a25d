"""The trace screen's header line: trace name (elided), GPU busy, gap count, loader
warnings, span, GPU count and device name, figures first so that they survive an
80-column terminal."""

from __future__ import annotations

from pathlib import Path

from rich.cells import cell_len
from rich.text import Text

from gapscope.parsers.model import Trace
from gapscope.tui.cells import crop
from gapscope.tui.findings_view import findings_of, verdict_badge
from gapscope.tui.lanes_model import sanitize
from gapscope.units import fmt_dur

__all__ = ["trace_header", "elide_title", "NAME_MIN_CELLS"]

#: Fewest cells the trace name keeps in the header.
NAME_MIN_CELLS = 12


def elide_title(title: str, max_cells: int) -> str:
    """``title`` cut to ``max_cells`` cells (Rich's cell width): a parenthesised tail goes first
    (``"Decode step: one token (detective, part A)"`` → ``"Decode step: one token"``),
    then words from the end, with ``…`` marking the cut."""
    title = " ".join(title.split())
    if cell_len(title) <= max_cells:
        return title
    k = title.find(" (")
    if k >= 8:
        title = title[:k]
        if cell_len(title) <= max_cells:
            return title
    cut = crop(title, max(1, max_cells))[:-1]
    sp = cut.rfind(" ")
    if sp >= len(cut) // 2 and sp > 0:
        cut = cut[:sp]
    return cut.rstrip(" :,;-") + "…"


def _is_recorded_path(name: str) -> bool:
    """``name`` is a file path a profiler recorded as the trace name (no blank, a
    folder in it: Kineto's ``/tmp/tmpa5ej828u.json``), not a name given to the run
    (a bare file name such as Lightning's ``fit-profiler-….pt.trace.json`` stays)."""
    name = name.strip()
    return " " not in name and ("/" in name or "\\" in name)


def _display_name(src) -> str:
    """The trace's name for the header: the recorded name, or the opened file's name
    when none was recorded or the recorded one is a path."""
    name = src.trace_name or ""
    if not name.strip() or _is_recorded_path(name):
        # Kineto records the file it wrote first (a temporary file for a .gz export:
        # '/tmp/tmpa5ej828u.json'): the file the user opened names the trace better
        name = Path(src.path).name or Path(name.strip()).name or "trace"
    return name


def _busy_figure(d) -> str:
    """``GPU busy P%`` over the diagnosed devices' windows; "" without a window."""
    if d is not None and getattr(d, "devices", None):
        win = sum(x.window_ns for x in d.devices)
        busy = sum(x.busy_ns for x in d.devices)
        if win > 0:
            return f"GPU busy {100 * busy / win:.0f}%"
    return ""


def _gaps_figure(d, pending: bool, failed: bool, early_gaps: int | None) -> str:
    """``N gaps``, or while the diagnosis runs ``N gaps, causes…`` / ``finding
    gaps…``, or ``no diagnosis`` when it failed; "" when none applies."""
    if d is not None:
        return f"{len(d.gaps):,} gap" + ("" if len(d.gaps) == 1 else "s")
    if pending and early_gaps is not None:
        return f"{early_gaps:,} gap" + ("" if early_gaps == 1 else "s") + ", causes…"
    if pending:
        return "finding gaps…"
    if failed:
        return "no diagnosis"
    return ""


def _device_name(src) -> str:
    """The first recorded device's name, sanitized to 30 cells; "" when none."""
    props = src.device_properties or []
    if props and isinstance(props[0], dict) and props[0].get("name"):
        return sanitize(str(props[0]["name"]), 30)
    return ""


def trace_header(
    trace: Trace,
    diagnosis,
    width: int = 80,
    pending: bool = False,
    failed: bool = False,
    early_gaps: int | None = None,
    findings_pending: bool = False,
) -> Text:
    """``gapscope NAME │ launch 51%/step │ GPU busy P% │ N gaps │ span │ k GPUs │
    device`` (the verdict's class and share first, ``GPU-bound`` when the kernels are
    the story: ``tui.findings_view.verdict_badge``): the
    figures first so that they survive an 80-column terminal; the trace name is
    elided to what is left of ``width`` (cells), the device name comes last.
    ``pending``: the diagnosis is still running (``finding gaps…`` in place of the
    GPU busy share and the gap count); ``failed``: there is no diagnosis (``no
    diagnosis`` there: the trace screen's status line and card say why);
    ``early_gaps``: the number of gaps drawn while the diagnosis runs (``N gaps,
    causes…`` then); ``findings_pending``: the diagnosis is in and its findings are
    being computed (``findings…`` in place of the verdict's figure; nothing here
    computes them)."""
    src = trace.source
    name = _display_name(src)
    t0, t1 = trace.extent_ns
    figures = []
    d = diagnosis
    if findings_pending:
        badge = "findings…" if d is not None and len(d.gaps) else ""
    else:
        badge = verdict_badge(findings_of(d)) if d is not None else ""
    if badge:
        figures.append(badge)
    busy = _busy_figure(d)
    if busy:
        figures.append(busy)
    gaps = _gaps_figure(d, pending, failed, early_gaps)
    if gaps:
        figures.append(gaps)
    nw = len(trace.warnings)
    if nw:
        figures.append(f"⚠ {nw} warning" + ("" if nw == 1 else "s"))
    figures.append("span " + fmt_dur(t1 - t0))
    devs = trace.devices()
    figures.append(f"{len(devs)} GPU" + ("s" if len(devs) != 1 else "") if devs else "CPU only")
    device = _device_name(src)
    rest = " │ " + " │ ".join(figures)
    # too wide with the verdict's figure: the span goes first (the ruler shows it),
    # then the busy share (the verdict's share says more)
    for drop in ("span ", "GPU busy "):
        if badge and len("gapscope ") + NAME_MIN_CELLS + cell_len(rest) > width:
            figures = [f for f in figures if not f.startswith(drop)]
            rest = " │ " + " │ ".join(figures)
    budget = max(NAME_MIN_CELLS, min(60, width - len("gapscope ") - cell_len(rest)))
    t = Text("gapscope ", style="bold")
    t.append(elide_title(sanitize(name, 200), budget))
    t.append(rest)
    if device:
        t.append(" │ " + device, style="dim")
    return t
