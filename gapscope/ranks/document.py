"""The rank-set document: per-rank table, collectives, stragglers and the verdict.

Built from the per-rank summaries alone (``gapscope.ranks.summary``), as plain
JSON-ready data with stable keys (``docs/ranks-json.md``); the text and Markdown
renderers read nothing else. All times int64 ns.

Per rank: step time (median step wall), GPU busy (the single-file report's kernel
union), idle by cause class, the **collective wait** (``gapscope.ranks.collectives``:
time its collective kernels spent waiting for a later peer) and the exposed part of
it, **useful busy** = busy − exposed wait (the wait is idle in disguise, never useful
work), and the **cost** it imposed on the others by arriving last. Rows are sorted by
cost, then step time; damaged ranks last.

**Straggler** (the verdict): the rank with the largest cost, when it is at least
``STRAGGLER_FACTOR`` times the next rank's and the others waited for it at least
``MIN_WAIT_SHARE`` of their traced step time (sum of step walls) on average; its
lateness is explained from its own diagnosis: the largest idle gap (with its card;
not a dependency gap, where the rank was itself blocked GPU-side) between its previous
collective and the one it was last at, or, with no such gap, its GPU work before the
collective against the others' (more work: imbalance).

**Damaged ranks** (``damage_marks``): a rank whose file was cut off, that has no GPU
work, or whose rank is outside the world (negative, or at or past the world size) is
marked in its row (``marks``, also beside its rank number in every table) and left out
of the cross-rank analysis: its collectives are not matched, it is never the
straggler, and the verdict names it. Its own figures stay (a cut-off rank's up to the
cut); without GPU work they are null, never zeros that read as measured. A rank whose
loader skipped events or replaced values is marked but kept.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from gapscope.analysis.types import Cause
from gapscope.ranks.collectives import Matched, RankWaits, match_collectives
from gapscope.ranks.discover import Assigned
from gapscope.ranks.summary import RankFailure, RankSummary
from gapscope.report.fmt import fmt_share
from gapscope.units import fmt_dur

__all__ = ["build_ranks_document", "damage_marks", "SCHEMA", "STRAGGLER_FACTOR", "MIN_WAIT_SHARE", "TOP_COLLECTIVES"]

SCHEMA = "gapscope.ranks/1"
#: The straggler's cost must be at least this many times the next rank's.
STRAGGLER_FACTOR = 2.0
#: ... and the others' average wait for it at least this share of their step time.
MIN_WAIT_SHARE = 0.02
#: Collectives listed in the document, by cost.
TOP_COLLECTIVES = 20
_STEP_NUM = re.compile(r"#(\d+)$")


def _step_order(labels: set[str]) -> list[str]:
    def key(s: str):
        m = _STEP_NUM.search(s)
        return (0, int(m.group(1)), s) if m else (1, 0, s)

    return sorted((s for s in labels if s), key=key) + ([""] if "" in labels else [])


def build_ranks_document(
    results: list, assigned: list[Assigned], warnings: list[str], *, version: str, inputs: list[str]
) -> dict:
    """The document for ``results`` (``RankSummary`` or ``RankFailure`` per file, in
    ``assigned`` order) with the discovery ``warnings``."""
    by_path = {a.path: a for a in assigned}
    ranks: dict[int, RankSummary] = {}
    failed, left_out = [], []
    for r in results:
        a = by_path[r.path]
        if isinstance(r, RankFailure):
            failed.append(dict(path=r.path, rank=a.rank, rank_source=a.source, error=r.error))
        elif a.duplicate_of is not None:
            left_out.append(dict(path=r.path, rank=a.rank, duplicate_of=a.duplicate_of))
        else:
            ranks[a.rank] = r
    sizes = sorted({s.world_size for s in ranks.values() if s.world_size is not None})
    world = sizes[0] if len(sizes) == 1 else None
    marks = {r: damage_marks(r, s, world) for r, s in ranks.items()}
    judged = {r: s for r, s in ranks.items() if not marks[r][1]}
    damaged = [dict(rank=r, path=ranks[r].path, marks=m) for r, (m, out) in sorted(marks.items()) if out]
    matched, waits = match_collectives(judged)
    steps = _step_order({lbl for s in ranks.values() for lbl in s.step_labels} | {m.step_label for m in matched})
    rows = [_rank_row(r, ranks[r], by_path[ranks[r].path], waits.get(r), steps, marks[r][0]) for r in ranks]
    rows.sort(
        key=lambda row: (
            not row["in_cross_rank"],
            -(row["cost_imposed_ns"] or 0),
            -(row["step_wall_ns"] or 0),
            row["rank"],
        )
    )
    stragglers = _stragglers(judged, waits, matched, steps)
    doc = dict(
        schema=SCHEMA,
        gapscope_version=version,
        inputs=list(inputs),
        world_size=world,
        ranks_total=len(results),
        ranks_analysed=len(ranks),
        ranks_judged=len(judged),
        warnings=list(warnings),
        failed=failed,
        left_out=left_out,
        damaged=damaged,
        steps=steps,
        ranks=rows,
        collectives=_collectives_section(matched, waits, len(judged)),
        stragglers=stragglers,
        verdict=_verdict(judged, waits, matched, stragglers, failed, damaged),
    )
    return doc


def damage_marks(r: int, s: RankSummary, world_size: int | None) -> tuple[list[str], bool]:
    """(marks, left out of the cross-rank analysis) of rank ``r`` with summary ``s``
    in a set whose world size is ``world_size`` (None when the files disagree or give
    none: the rank's own ``world_size`` is used then). Marks, in words: ``cut off at
    line N`` (the file was truncated), ``no GPU work``, ``rank outside the world of
    W`` (negative, or at or past W), ``N repair(s) on load`` (kept in the analysis)."""
    marks: list[str] = []
    out = False
    if s.damage.truncated:
        at = f" at line {s.damage.truncated_line}" if s.damage.truncated_line is not None else ""
        marks.append(f"cut off{at}")
        out = True
    if s.device < 0 or s.busy_ns <= 0:
        marks.append("no GPU work")
        out = True
    ws = world_size if world_size is not None else s.world_size
    if r < 0 or (ws is not None and r >= ws):
        marks.append(f"rank outside the world of {ws}" if ws is not None else "negative rank")
        out = True
    if s.damage.repaired:
        marks.append(f"{s.damage.repaired} repair(s) on load")
    return marks, out


def _rank_row(r: int, s: RankSummary, a: Assigned, w: RankWaits | None, steps: list[str], marks: list[str]) -> dict:
    """One row of ``ranks``; ``w`` None: the rank is left out of the cross-rank
    analysis (its collective figures are null)."""
    at = {lbl: k for k, lbl in enumerate(s.step_labels)}
    gpu = s.device >= 0 and s.busy_ns > 0

    def per_step(values) -> list:
        return [int(values[at[lbl]]) if lbl in at and gpu else None for lbl in steps]

    def measured(v: int) -> int | None:
        return int(v) if gpu else None

    return dict(
        rank=r,
        rank_source=a.source,
        path=s.path,
        marks=list(marks),
        in_cross_rank=w is not None,
        warnings=list(s.warnings),
        device=s.device,
        events=s.events,
        load_s=round(s.load_s, 3),
        steps=len(s.step_labels),
        step_source=s.step_source,
        step_wall_ns=measured(s.step_wall_ns),
        window_ns=measured(s.window_ns),
        busy_ns=measured(s.busy_ns),
        idle_ns=measured(s.idle_ns),
        idle_by_class_ns={c.label: measured(s.class_idle_ns.get(c.label, 0)) for c in Cause},
        collectives=len(s.collectives),
        unmatched_collectives=w.unmatched if w is not None else None,
        collective_wait_ns=w.wait_ns if w is not None else None,
        exposed_wait_ns=w.exposed_ns if w is not None else None,
        useful_busy_ns=s.busy_ns - w.exposed_ns if w is not None and gpu else None,
        cost_imposed_ns=w.cost_ns if w is not None else None,
        last_count=w.last_count if w is not None else None,
        cost_by_step_ns=[int(w.cost_by_step.get(lbl, 0)) for lbl in steps] if w is not None else [],
        wait_by_step_ns=[int(w.wait_by_step.get(lbl, 0)) for lbl in steps] if w is not None else [],
        wall_by_step_ns=per_step(s.step_end_ns - s.step_start_ns),
        busy_by_step_ns=per_step(s.step_busy_ns),
        idle_by_step_ns=per_step(s.step_class_ns.sum(axis=1)) if s.step_labels else [None] * len(steps),
        idle_by_step_by_class_ns={c.label: per_step(s.step_class_ns[:, int(c)]) for c in Cause},
    )


def _collectives_section(matched: list[Matched], waits: dict, n_ranks: int) -> dict:
    top = sorted(matched, key=lambda m: (-m.cost_ns, int(m.start_ns.min())))[:TOP_COLLECTIVES]
    return dict(
        matched=len(matched),
        complete=sum(1 for m in matched if m.complete),
        by_seq=sum(1 for m in matched if m.by == "seq"),
        unmatched=int(sum(w.unmatched for w in waits.values())),
        total_cost_ns=int(sum(m.cost_ns for m in matched)),
        largest=[_matched_json(m) for m in top if m.cost_ns > 0],
    )


def _matched_json(m: Matched) -> dict:
    t0 = int(m.start_ns.min())
    return dict(
        family=m.family,
        name=m.name,
        step=m.step_label,
        matched_by=m.by,
        ranks=[int(r) for r in m.ranks],
        complete=m.complete,
        nelems=m.nelems,
        last_rank=m.last,
        cost_ns=m.cost_ns,
        min_dur_ns=int(m.dur_ns.min()),
        wait_ns={str(int(r)): int(v) for r, v in zip(m.ranks, m.wait_ns)},
        exposed_wait_ns={str(int(r)): int(v) for r, v in zip(m.ranks, m.exposed_ns)},
        arrival_ns={str(int(r)): int(v) - t0 for r, v in zip(m.ranks, m.start_ns)},
        launch_ns={str(int(r)): (int(v) - t0 if v >= 0 else None) for r, v in zip(m.ranks, m.launch_ns)},
    )


def _stragglers(ranks: dict, waits: dict, matched: list[Matched], steps: list[str], top: int = 5) -> list[dict]:
    order = sorted((r for r in waits if waits[r].cost_ns > 0), key=lambda r: (-waits[r].cost_ns, r))[:top]
    total = sum(w.cost_ns for w in waits.values())
    out = []
    for r in order:
        w = waits[r]
        per_step: list[dict[str, Any]] = [
            dict(step=lbl, cost_ns=int(w.cost_by_step[lbl])) for lbl in steps if w.cost_by_step.get(lbl, 0) > 0
        ]
        per_step.sort(key=lambda d: -d["cost_ns"])
        worst = max((m for m in matched if m.last == r), key=lambda m: m.cost_ns)
        out.append(
            dict(
                rank=r,
                cost_ns=w.cost_ns,
                share=w.cost_ns / total if total else 0.0,
                last_count=w.last_count,
                steps=per_step,
                worst=_matched_json(worst),
                cause=_lateness_cause(r, ranks[r], worst),
            )
        )
    return out


def _lateness_cause(r: int, s: RankSummary, m: Matched) -> dict:
    """Why rank ``r`` arrived last at ``m``, from its own summary."""
    j = int(np.flatnonzero(m.ranks == r)[0])
    start = int(m.start_ns[j])
    # The stretch since the rank's previous collective: what it did before arriving.
    ends = s.collectives.end_ns
    before_ends = ends[ends <= start]
    since = int(before_ends.max()) if before_ends.size else None
    # A dependency gap is the rank itself blocked GPU-side (often on an earlier collective):
    # not a cause of its own lateness.
    before = [
        g
        for g in s.gaps
        if g.end_ns <= start and (since is None or g.end_ns > since) and g.cause != Cause.DEPENDENCY.label
    ]
    others = np.delete(m.busy_before_ns, j)
    extra_busy = int(m.busy_before_ns[j] - np.median(others)) if others.size else 0
    wait_each = m.cost_ns // max(len(m.ranks) - 1, 1)
    if before:
        g = max(before, key=lambda g: (g.end_ns - g.start_ns, g.start_ns))
        dur = g.end_ns - g.start_ns
        return dict(
            kind="gap",
            cause=g.cause,
            smell=g.smell,
            gap_ns=dur,
            gap_start_ns=g.start_ns,
            why=g.why,
            first_experiment=g.first_experiment,
            short=f"its GPU sat idle {fmt_dur(dur)} before the {m.family} ({g.cause}: {g.smell})",
            line=f"its GPU sat idle {fmt_dur(dur)} before the {m.family} ({g.cause}, {g.smell}): {g.why}",
        )
    if extra_busy > wait_each // 2:
        return dict(
            kind="more work",
            cause=None,
            extra_busy_ns=extra_busy,
            short=f"its GPU ran {fmt_dur(extra_busy)} more work before the {m.family} than the median rank",
            line=(
                f"no idle gap before the {m.family}: its GPU ran {fmt_dur(extra_busy)} more work before it "
                "than the median rank (load imbalance, or slower kernels on this rank)"
            ),
        )
    return dict(
        kind="unknown",
        cause=None,
        extra_busy_ns=extra_busy,
        short=f"no idle gap or extra GPU work of its own before the {m.family}: its launch came late",
        line=(
            f"no idle gap of its own before the {m.family} and no more GPU work than the others: "
            "look at its CPU side (the launch of the collective came late)"
        ),
    )


def _verdict(
    ranks: dict, waits: dict, matched: list[Matched], stragglers: list[dict], failed: list, damaged: list
) -> dict:
    n = len(ranks)
    fail = f" ({len(failed)} rank(s) failed to load and are not in it)" if failed else ""
    if damaged:
        shown = "; ".join(f"rank {d['rank']}: {', '.join(d['marks'])}" for d in damaged[:6])
        more = f"; and {len(damaged) - 6} more" if len(damaged) > 6 else ""
        fail += f" ({len(damaged)} damaged rank(s) left out of it: {shown}{more})"
    if n < 2:
        return dict(straggler=None, line=f"{n} rank(s) analysed: no cross-rank figures{fail}")
    if not matched:
        return dict(straggler=None, line=f"no collective matched across the {n} ranks: per-rank figures only{fail}")
    if not stragglers:
        return dict(straggler=None, line=f"no rank waited for another at the {len(matched)} matched collectives{fail}")
    top = stragglers[0]
    second = stragglers[1]["cost_ns"] if len(stragglers) > 1 else 0
    r = top["rank"]
    others = [q for q in ranks if q != r]
    step_wall = float(np.median([ranks[q].traced_ns for q in others]))
    per_rank = top["cost_ns"] / len(others)
    steps = [d["step"] or "outside steps" for d in top["steps"]]
    where = f" in {', '.join(steps[:6])}{' …' if len(steps) > 6 else ''}" if steps else ""
    if top["cost_ns"] >= STRAGGLER_FACTOR * second and per_rank >= MIN_WAIT_SHARE * step_wall:
        line = (
            f"rank {r} is the straggler: the other {len(others)} ranks waited {fmt_dur(top['cost_ns'])} for it "
            f"at {top['last_count']} collective(s) ({fmt_dur(int(per_rank))} each, "
            f"{fmt_share(per_rank, step_wall)} of their traced steps){where}; it was late because "
            f"{top['cause']['short']}{fail}"
        )
        return dict(straggler=r, cost_ns=top["cost_ns"], wait_per_rank_ns=int(per_rank), line=line)
    runner = f", rank {stragglers[1]['rank']} {fmt_dur(second)}" if len(stragglers) > 1 else ""
    line = (
        f"no single straggler: the collective waits are spread or small (rank {r} cost the others "
        f"{fmt_dur(top['cost_ns'])}{runner}; {fmt_share(per_rank, step_wall)} of a rank's traced steps){fail}"
    )
    return dict(straggler=None, cost_ns=top["cost_ns"], wait_per_rank_ns=int(per_rank), line=line)
