"""One-line summary of a written trace, via ``gapscope.parsers.load`` and ``gapscope.analysis.diagnose``.

Both packages are imported lazily and every failure is caught: capture must work on
a bare GPU server where only torch is installed, so the summary is a courtesy that
degrades to a note, never an error. Durations are written by ``gapscope.units`` (a
leaf of the standard library, imported at once), as the report writes them.
"""

from __future__ import annotations

import os

from gapscope.units import fmt_dur

__all__ = ["summary_line"]


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.0f}%" if whole > 0 else "-"


def summary_line(path: str | os.PathLike) -> str:
    """Return one line describing the trace at ``path`` (never raises).

    ``"N events, L lanes; GPU 0: idle 1.230 ms of 4.560 ms (27%) in 12 gaps; by cause:
    sync 60%, host 30%, launch 10%"``, or for a CPU-only trace ``"N events, L lanes;
    no GPU activity (CPU-only capture), nothing to diagnose on the GPU"``. When the
    viewer's packages are missing or fail, the line says so instead. Percentages are of
    the idle time (cause shares) and of the analysis window (idle fraction), as defined
    in the design's "Definitions".
    """
    try:
        from gapscope import parsers
    except Exception as exc:  # noqa: BLE001 - any failure only disables the summary
        return f"no summary (gapscope's parsers are not importable: {type(exc).__name__})"
    try:
        trace = parsers.load(path)
    except Exception as exc:  # noqa: BLE001
        return f"no summary (could not load the trace: {exc})"
    try:
        n_lanes = len(trace.lanes)
    except Exception:  # noqa: BLE001
        n_lanes = -1
    head = f"{len(trace)} events, {n_lanes} lanes" if n_lanes >= 0 else f"{len(trace)} events"
    try:
        from gapscope.analysis.diagnose import diagnose
    except Exception as exc:  # noqa: BLE001
        return f"{head}; no diagnosis (analysis is not importable: {type(exc).__name__})"
    try:
        d = diagnose(trace)
        if not d.devices:
            return f"{head}; no GPU activity (CPU-only capture), nothing to diagnose on the GPU"
        parts = []
        for dev in d.devices:
            n_gaps = int((d.gaps.device == dev.device).sum())
            parts.append(
                f"GPU {dev.device}: idle {fmt_dur(dev.idle_ns)} of {fmt_dur(dev.window_ns)} "
                f"({_pct(dev.idle_ns, dev.window_ns)}) in {n_gaps} gaps"
            )
        totals = d.class_totals_ns()
        idle = sum(int(v) for v in totals.values())
        causes = sorted(((int(v), k) for k, v in totals.items() if int(v) > 0), key=lambda t: (-t[0], int(t[1])))
        by = ", ".join(f"{k.label} {_pct(v, idle)}" for v, k in causes[:3])
        return f"{head}; " + "; ".join(parts) + (f"; by cause: {by}" if by else "")
    except Exception as exc:  # noqa: BLE001
        return f"{head}; no diagnosis ({type(exc).__name__}: {exc})"
