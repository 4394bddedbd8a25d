"""The diff's view of the findings (issue 47): which findings died, shrank, grew,
appeared or stayed between BEFORE and AFTER, and the gate that refuses a verdict when
either trace holds no steady-state step.

Findings are matched by (kind, named range or read): ``host island at `log_token``` in
both traces is one finding, wherever it falls in the step. Per-step figures are each
side's ``Finding.per_step_ns`` (``analysis.findings``: the what-if of the finding on its
own trace's budget).
"""

from __future__ import annotations

from typing import Any

from gapscope.analysis.findings import findings
from gapscope.units import fmt_dur

__all__ = ["compare_findings", "steady_state_gate", "FINDING_CHANGE_SHARE", "FINDING_STATUSES"]

#: A finding whose cost per step moved by less than this share of the larger of its two
#: figures is unchanged (the per-step figures are medians of a handful of steps).
FINDING_CHANGE_SHARE = 0.2
#: Statuses in the order they are listed.
FINDING_STATUSES = ("died", "shrank", "grew", "appeared", "unchanged")


def _key(f) -> tuple[str, str]:
    return (f.kind, f.name)


def _row(status: str, b, a) -> dict[str, Any]:
    before_ns = int(b.per_step_ns) if b is not None else 0
    after_ns = int(a.per_step_ns) if a is not None else 0
    f = a if a is not None else b
    return dict(
        status=status,
        kind=f.kind,
        cause=f.cause.label,
        name=f.name,
        title=f.title,
        before_per_step_ns=before_ns if b is not None else None,
        after_per_step_ns=after_ns if a is not None else None,
        change_ns=after_ns - before_ns,
        before_rank=None,
        after_rank=None,
    )


def compare_findings(before_diag, after_diag) -> dict[str, Any]:
    """The two traces' verdicts and their findings matched: ``before_verdict`` /
    ``after_verdict`` (sentences), ``rows`` (one per finding of either side: ``status``
    of ``FINDING_STATUSES``, per-step ns on each side, ``change_ns``), largest change
    first, and ``sentence``: what died and what is left on top."""
    fb, fa = findings(before_diag), findings(after_diag)
    before = {_key(f): (k, f) for k, f in enumerate(fb.ranked)}
    after = {_key(f): (k, f) for k, f in enumerate(fa.ranked)}
    rows = []
    for key in list(before) + [k for k in after if k not in before]:
        kb, b = before.get(key, (None, None))
        ka, a = after.get(key, (None, None))
        if a is None:
            status = "died"
        elif b is None:
            status = "appeared"
        else:
            d = a.per_step_ns - b.per_step_ns
            big = max(a.per_step_ns, b.per_step_ns, 1)
            status = "unchanged" if abs(d) < FINDING_CHANGE_SHARE * big else ("shrank" if d < 0 else "grew")
        row = _row(status, b, a)
        row["before_rank"], row["after_rank"] = kb, ka
        rows.append(row)
    rows.sort(key=lambda r: (-abs(r["change_ns"]), FINDING_STATUSES.index(r["status"]), r["title"]))
    died = [r for r in rows if r["status"] == "died"]
    parts = []
    if died:
        parts.append(
            "findings that died: "
            + ", ".join(f"{r['title']} ({fmt_dur(r['before_per_step_ns'])}/step)" for r in died[:3])
        )
    if fa.verdict_kind == "gpu-bound":
        parts.append("AFTER is GPU-bound: the kernels are the story")
    elif fa.top is not None:
        parts.append(f"on top now: {fa.top.title} ({fmt_dur(fa.top.per_step_ns)}/step)")
    return dict(
        before_verdict=fb.verdict,
        after_verdict=fa.verdict,
        before_steady_state=fb.steady_state,
        after_steady_state=fa.steady_state,
        rows=rows,
        sentence="; ".join(parts),
    )


def steady_state_gate(comparability: dict, before_diag, after_diag) -> dict:
    """``comparability`` refused (``comparable`` false, ``reason`` said) when either
    trace holds no steady-state step (``analysis.findings.has_steady_state``: one 20 ns
    kernel is no step): no verdict, rather than "no change beyond noise" over it.
    Returns the same dict, changed in place."""
    missing = [
        side
        for side, diag in (("BEFORE", before_diag), ("AFTER", after_diag))
        if diag.budget is not None and not findings(diag).steady_state
    ]
    if missing and comparability.get("comparable"):
        comparability["comparable"] = False
        comparability["reason"] = (
            " and ".join(missing)
            + (" holds" if len(missing) == 1 else " hold")
            + " no steady-state step (too little GPU work to make a step); capture several steps"
        )
    return comparability
