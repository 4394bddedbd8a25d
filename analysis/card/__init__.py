"""The card of a gap or recurring group ("The card" and "Cards as facts and rules" in
the design): ``card_for_gap(diag, i)`` and ``card_for_group(diag, group_id)``, each a
``Card``.

Fields: smell, cause class (+ secondary and its share), why the GPU is empty (one
sentence with the evidence and numbers), first experiment, forbidden next step, proof
of improvement. Built in two stages: the facts of the occurrence
(``gapscope.analysis.card.facts``: class, evidence, captures, hot frame, one-time,
slow launch and recurrence of its kernel, module loading, enclosing ranges, program
kind from ``gapscope.analysis.card.program``), then the advice, the first matching
rule of an ordered table (``gapscope.analysis.card.rules``); the why-sentence is
assembled per cause (``gapscope.analysis.card.why``), its parts adding up to the gap,
with the copy lead from ``gapscope.analysis.card.copies``. A card never recommends
working on the kernels next to the gap: it names CPU-side evidence only.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from gapscope.analysis.card.facts import ALLOC_CALL_RE, card_facts, gap_capture
from gapscope.analysis.card.rules import advice, capture_sentence, matching_rule
from gapscope.analysis.card.samples import samples_sentence
from gapscope.analysis.card.why import (
    BLOCKING_WAIT_SMELL,
    DEPENDENCY_SMELLS,
    SMELLS,
    class_mix,
    hot_frame,
    in_sync_cliff,
    is_decode_trace,
    quote_name,
    rank_row,
    slow_launch,
    step_waits_sentence,
    trust_note,
    why_sentence,
)
from gapscope.analysis.classify import is_sampled
from gapscope.analysis.diagnose import Diagnosis
from gapscope.analysis.evidence_kinds import GRAPH_LAUNCH_RE
from gapscope.analysis.steps import RECUR_FACTOR
from gapscope.analysis.types import Card, Cause, Evidence, WaitKind
from gapscope.units import fmt_dur

__all__ = ["card_for_gap", "card_for_group", "SMELLS"]


def _card(
    diag: Diagnosis,
    rows: np.ndarray,
    class_ns: np.ndarray,
    head: str,
    dur_txt: str,
    *,
    lead: str = "",
    context: str = "",
) -> Card:
    """Card from the evidence of ``rows`` (one occurrence: a gap, or a step-boundary
    pair) and the per-class ns ``class_ns`` whose primary and secondary class (shares of
    its total) the card states. ``head`` opens the "why" sentence, ``context`` follows
    it; ``dur_txt`` is the figure quoted in the proof."""
    g = diag.gaps
    primary, _share, secondary, sec_share = rank_row(class_ns)
    evidence: list[Evidence] = []
    for r in rows[:8]:
        evidence.extend(diag.evidence(int(r)))
    evidence.sort(key=lambda e: -e.overlap_ns)
    smell = SMELLS[primary]
    if primary == Cause.SYNC and not in_sync_cliff(g, rows):
        smell = BLOCKING_WAIT_SMELL  # the wait began in the gap: it drained no queue
    elif primary == Cause.LAUNCH and (g.episode[rows] >= 0).any():
        smell = "picket fence"
    elif primary == Cause.LAUNCH and slow_launch(diag, evidence, rows):
        smell = "slow launch call"
    elif primary == Cause.LAUNCH and any(
        e.cause == Cause.LAUNCH and e.event >= 0 and GRAPH_LAUNCH_RE.search(e.name) for e in evidence
    ):
        smell = "graph launch (the fixed cost per step)"
    elif primary == Cause.DEPENDENCY and g.wait_kind is not None and g.wait_kind[rows[0]] >= 0:
        smell = DEPENDENCY_SMELLS[WaitKind(int(g.wait_kind[rows[0]]))]
    capture = gap_capture(diag, rows) if primary in (Cause.HOST, Cause.LAUNCH) else None
    if capture is not None:
        smell = "graph capture (one-time cost)" if capture.capture.warm_up else "graph re-capture"
    elif g.one_time is not None and bool(g.one_time[rows].all()):
        smell = "slow launch call (one-time cost)" if smell == "slow launch call" else "one-time cost (warm-up)"
    # the sentence tells of the occurrence ``rows``: its own ns, not a group's total
    class_ns = _class_ns(diag, rows)
    # where fragmented host time lies (a capture's own sentence tells that gap)
    hot = hot_frame(diag, rows, evidence, int(class_ns[int(Cause.HOST)])) if capture is None else None
    why = why_sentence(diag, rows, class_ns, evidence, head, lead, hot=hot)
    if capture is not None:
        why += " " + capture_sentence(diag, capture)
    if context:
        why += " " + context
    note = trust_note(diag, rows, said_unlinked="has no launch call linked" in why)
    if note:
        why += " " + note
    if getattr(diag, "invalid_gpu_ops", 0):
        why += (
            f" {diag.invalid_gpu_ops} GPU op(s) of this trace have no usable timing and are left out,"
            " so idle time may be overstated."
        )
    facts = card_facts(diag, rows, primary, evidence, dur_txt, capture, hot)
    evidence = _allocs_as_host(evidence)
    smell, why = _rule_smell(matching_rule(facts).name, facts.lazy_loading_ns, smell, why)
    sampled = samples_sentence(diag, facts.samples, quote_name, facts.occurrence_ns)
    if sampled:
        why += " " + sampled
    waits = step_waits_sentence(diag.trace, facts.step_waits, facts.waits_in_step)
    if waits:
        why += " " + waits
    first, forbidden, proof, fix = advice(facts)
    return Card(
        smell, primary, secondary, sec_share, why, first, forbidden, proof, tuple(evidence[:12]), fix, facts.samples
    )


def _rule_smell(rule: str, lazy_loading_ns: int, smell: str, why: str) -> tuple[str, str]:
    """The smell and why-sentence of a card whose advice follows ``rule``: the rules
    that name the occurrence better than its class does (allocation churn, module
    loading, the latter with its loading time, ns) replace the smell."""
    if rule == "allocation churn":
        return rule, why
    if rule == "synchronize before each launch":
        return "launch after a synchronize", why
    if rule == "device op recorded too short":
        return "device op still running (recorded too short)", why
    if rule == "initial upload":
        return "initial upload (trace edge)", why
    if rule == "required final read" and smell == SMELLS[Cause.COPY]:
        return "final read (trace edge)", why
    if rule == "module loading":
        return "module loading (one-time cost)", why + (
            f" Within that work, {fmt_dur(lazy_loading_ns)} of lazy module loading (the driver loading GPU "
            f"code at a function's first call) was recorded."
        )
    return smell, why


def _allocs_as_host(evidence: list[Evidence]) -> list[Evidence]:
    """``evidence`` with each allocator call (``ALLOC_CALL_RE``) of class sync made
    host: allocation work, never a wait on the device (audit 3: ``cudaHostAlloc`` in a
    sync cliff's host work was listed as sync)."""
    return [
        dataclasses.replace(e, cause=Cause.HOST)
        if e.cause == Cause.SYNC and e.event >= 0 and ALLOC_CALL_RE.match(e.name)
        else e
        for e in evidence
    ]


def _class_ns(diag: Diagnosis, rows) -> np.ndarray:
    cn = diag.gaps.class_ns
    if cn is None:
        out = np.zeros(len(Cause), np.int64)
        out[int(Cause.UNCLASSIFIED)] = int(diag.gaps.dur_ns[rows].sum())
        return out
    return cn[rows].sum(axis=0)


def _occurrences(diag: Diagnosis, rows: np.ndarray) -> list[np.ndarray]:
    """The occurrences of a group's gaps: each gap alone, except the step-boundary pair
    (trailing idle of the last step + leading idle of the first), which is one."""
    edge = diag.gaps.edge
    if edge is None:
        return [np.array([r], dtype=np.int64) for r in rows]
    pair = [int(r) for r in rows if edge[r] != 0]
    out = [np.array([r], dtype=np.int64) for r in rows if edge[r] == 0]
    if len(pair) == 2 and edge[pair[0]] != edge[pair[1]]:
        out.append(np.array(sorted(pair), dtype=np.int64))
    else:
        out.extend(np.array([r], dtype=np.int64) for r in pair)
    return out


def _steps_txt(grp) -> str:
    if grp.steps_total <= 1:
        return ""
    return f"recurs in {grp.steps_with_gap} of {grp.steps_total} steps"


def card_for_group(diag: Diagnosis, group_id: int) -> Card:
    """Card of recurring group ``group_id``.

    One definition of "per step": the group's median occurrence (``GapGroup.median_ns``,
    the step-boundary pair counted as one occurrence). The evidence is that of the
    occurrence closest to the median (ties: the larger). Primary and secondary class and
    their shares are of the group's total idle (all its gaps), so they sum to at most
    100% and the primary is ``GapGroup.cause``."""
    grp = diag.groups[group_id]
    rows = np.asarray(grp.gap_indices, dtype=np.int64)
    dur = diag.gaps.dur_ns
    occ = _occurrences(diag, rows)
    occ_ns = np.array([int(dur[o].sum()) for o in occ], dtype=np.int64)
    cls = _class_ns(diag, rows)
    primary = rank_row(cls)[0]
    # the evidence shown must support the stated class: among the occurrences whose
    # own primary class is the group's (all, when none is), the one nearest the median
    own = np.array([rank_row(_class_ns(diag, o))[0] == primary for o in occ], dtype=bool)
    cand = np.flatnonzero(own) if own.any() else np.arange(len(occ))
    rep_k = int(cand[np.lexsort((-occ_ns[cand], np.abs(occ_ns[cand] - grp.median_ns)))[0]])
    rep = occ[rep_k]
    part = ""
    g = diag.gaps
    if rep.size == 2 and g.queued is not None and bool(g.queued[rep[0]]) != bool(g.queued[rep[1]]):
        # a step-boundary pair of a queued and a starved gap is two stories (the op was
        # queued at one end, the CPU busy at the other): the sentence tells one, the part
        # of the group's class (the longer when neither is), and the group's mix follows
        mine = [int(r) for r in rep if rank_row(_class_ns(diag, np.array([r])))[0] == primary]
        r = mine[0] if len(mine) == 1 else int(rep[np.argmax(g.dur_ns[rep])])
        where = "at the start of the step" if g.edge is not None and g.edge[r] == 1 else "after the step's last kernel"
        part = f"in the {fmt_dur(int(g.dur_ns[r]))} of the step-boundary stretch {where}, "
        rep = np.array([r], dtype=np.int64)
    total = int(cls.sum())
    recurs = _steps_txt(grp)
    per = f"{fmt_dur(grp.median_ns)} per step" + (f" (median; it {recurs})" if recurs else "")
    head = f"For {per} {_no_kernel(diag)}"
    lead = ""
    if len(occ) > 1:
        at_median = fmt_dur(occ_ns[rep_k]) == fmt_dur(grp.median_ns)
        lead = (
            "in the median occurrence, "
            if at_median
            else f"in a typical occurrence ({fmt_dur(occ_ns[rep_k])}, mostly {primary.label}), "
        )
    lead = part or lead
    context = (
        f"Across the group's {fmt_dur(total)} of idle: {class_mix(cls)}."
        if len(occ) > 1 or len(rep) > 1 or part
        else ""
    )
    return _card(diag, rep, cls, head, f"{fmt_dur(grp.median_ns)} per step", lead=lead, context=context)


def _group_context(diag: Diagnosis, i: int) -> str:
    """The recurrence of gap ``i`` as a sentence, or "" outside any group: how often
    its position recurs, the median per step, the step-boundary partner, and the class
    mix across the group."""
    g = diag.gaps
    gid = int(g.group[i])
    if gid < 0 or gid >= len(diag.groups):
        return _one_off_context(diag, i)
    grp = diag.groups[gid]
    rows = np.asarray(grp.gap_indices, dtype=np.int64)
    cls = _class_ns(diag, rows)
    edge = g.edge
    partner = None
    if edge is not None and edge[i] != 0:
        other = [int(r) for r in rows if edge[r] != 0 and edge[r] != edge[i]]
        partner = other[0] if other else None
    recurs = _steps_txt(grp)
    bits = []
    if partner is not None:
        # steady state: the step repeats, so its trailing idle runs into its leading idle
        # (in the file, the leading gap comes first: no "step before" is implied)
        per = "per token" if is_decode_trace(diag) else "per step"
        stretch = fmt_dur(g.dur_ns[i] + g.dur_ns[partner])
        if edge is not None and edge[i] == 1:
            pair = f"this {fmt_dur(g.dur_ns[i])} at the start of the step and the {fmt_dur(g.dur_ns[partner])} after its last kernel"
        else:
            pair = f"this {fmt_dur(g.dur_ns[i])} after the step's last kernel and the {fmt_dur(g.dur_ns[partner])} at its start"
        bits.append(f"In steady state the step repeats: {pair} form one {stretch} idle stretch {per}")
        if recurs:
            bits.append(f"the stretch {recurs} ({fmt_dur(grp.median_ns)} median per step)")
    elif not _near(int(g.dur_ns[i]), grp.median_ns):
        bits.append(
            f"This occurrence is {fmt_dur(g.dur_ns[i])}; the gaps grouped with it ({recurs or 'recurring'}) "
            f"have a median of {fmt_dur(grp.median_ns)} per step"
        )
    else:
        bits.append(f"This position {recurs or 'recurs'} ({fmt_dur(grp.median_ns)} median per step)")
    bits.append(f"across the group the idle is {class_mix(cls)}")
    return "; ".join(bits) + "."


def _near(a_ns: int, b_ns: int) -> bool:
    """True when two durations are within ``RECUR_FACTOR`` of each other."""
    lo, hi = sorted((max(int(a_ns), 1), max(int(b_ns), 1)))
    return hi <= RECUR_FACTOR * lo


def _one_off_context(diag: Diagnosis, i: int) -> str:
    """For a gap left out of every group although its position recurs with gaps of a
    very different size: "This occurrence is 63.042 ms; at this position the median is
    2.0 µs (3 of 6 steps): a one-off." Else ""."""
    for grp in diag.groups:
        if grp.one_offs.size and (grp.one_offs == i).any():
            return (
                f"This occurrence is {fmt_dur(diag.gaps.dur_ns[i])}; at this position the median is "
                f"{fmt_dur(grp.median_ns)} ({grp.steps_with_gap} of {grp.steps_total} steps): a one-off."
            )
    return ""


def _no_kernel(diag: Diagnosis) -> str:
    """How the card's first sentence says the GPU was idle: a sampled trace
    (``classify.is_sampled``) only shows that it records no kernel there."""
    return "the trace records no kernel on the GPU" if is_sampled(diag.trace) else "the GPU had no kernel to run"


def card_for_gap(diag: Diagnosis, i: int) -> Card:
    """Card of gap ``i`` itself: its own class mix (``gaps.class_ns[i]``, so cause and
    secondary equal ``gaps.cause[i]`` / ``gaps.secondary[i]``) and its own evidence;
    when it recurs, a sentence on the group (recurrence, median per step, the group's
    class mix) follows. The group's own card is ``card_for_group``."""
    i = int(i)
    rows = np.array([i], dtype=np.int64)
    dur = int(diag.gaps.dur_ns[i])
    return _card(
        diag,
        rows,
        _class_ns(diag, rows),
        f"For {fmt_dur(dur)} {_no_kernel(diag)}",
        fmt_dur(dur),
        context=_group_context(diag, i),
    )
