"""The report as one JSON-serialisable document (``gapscope report --json``).

``build_document`` is the single source of every figure: the text and Markdown
renderers read this dict, so the three outputs cannot disagree. Keys are stable and
documented in ``docs/report-json.md``; quantities carry their unit in the key
(``start_ns``, ``dur_ns``, ``busy_ns``, ``bytes``). Trace strings are kept verbatim.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import Any, TypeVar

import numpy as np

from gapscope.analysis.budget import match_names
from gapscope.analysis.card import card_for_gap, card_for_group
from gapscope.analysis.diagnose import Diagnosis
from gapscope.analysis.findings import Finding, edge_place, findings
from gapscope.analysis.jsonout import diagnosis_to_json
from gapscope.parsers.model import Kind, Trace
from gapscope.report.busy import device_busy, lane_kind_counts
from gapscope.report.fmt import GROUP_CARDS
from gapscope.units import fmt_dur

__all__ = ["SCHEMA", "build_document", "gap_entry", "jsonable", "diagnose_or_none", "lone_gaps", "CARDS_FOR_TOP"]

#: Largest gaps outside any recurring group that also get their card printed.
CARDS_FOR_TOP = 3
#: Recurring groups (largest total first) that carry their card in the document.
GROUP_CARD_LIMIT = 50

#: Identifies the document layout; bumped only on an incompatible change.
SCHEMA = "gapscope.report/2"  # 2: ``verdict``, ``findings``, ``findings_apart`` (issue 47)


def jsonable(obj: Any) -> Any:
    """Convert diagnosis objects to JSON types: dataclasses → dicts, ``Cause`` and other
    enums → lower-case labels, numpy arrays/scalars → lists/numbers, non-finite floats
    → None, tuples/sets → lists. Dict keys that are enums become their labels."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, enum.Enum):
        return obj.name.lower()
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        f = float(obj)
        return f if math.isfinite(f) else None
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind in "iub":
            return obj.tolist()
        return [jsonable(x) for x in obj.tolist()]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj) if not f.name.startswith("_")}
    if isinstance(obj, dict):
        return {(k.name.lower() if isinstance(k, enum.Enum) else str(k)): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [jsonable(x) for x in obj]
    return str(obj)


def diagnose_or_none(trace: Trace, params) -> Any:
    """``gapscope.analysis.diagnose(trace, params=params)``, or None when the analysis package
    has no ``diagnose`` yet (then the report shows the trace overview and busy only)."""
    try:
        from gapscope.analysis.diagnose import diagnose
    except ModuleNotFoundError as exc:
        if exc.name != "gapscope.analysis.diagnose":
            raise  # a broken import inside analysis is a bug, not a missing feature
        return None
    return diagnose(trace, params=params)


def _source(trace: Trace) -> dict:
    s = trace.source
    return dict(
        path=s.path,
        format=s.format,
        schema_version=s.schema_version,
        base_time_ns=s.base_time_ns,
        display_time_unit=s.display_time_unit,
        device_properties=jsonable(s.device_properties),
        rank=s.rank,
        world_size=s.world_size,
        trace_name=s.trace_name,
        ignored_counts=jsonable(s.ignored_counts),
    )


def _lanes(trace: Trace) -> list[dict]:
    counts = lane_kind_counts(trace)
    out = []
    order = sorted(trace.lanes, key=lambda ln: (ln.sort_key, ln.index))
    for ln in order:
        row = counts[ln.index] if counts.size else np.zeros(0, dtype=np.int64)
        by_kind = {Kind(k).name.lower(): int(c) for k, c in enumerate(row) if c}
        out.append(
            dict(
                index=ln.index,
                pid=ln.pid,
                tid=ln.tid,
                process_name=ln.process_name,
                thread_name=ln.thread_name,
                label=ln.label,
                is_gpu=bool(ln.is_gpu),
                device=int(ln.device),
                stream=int(ln.stream),
                event_count=int(row.sum()) if row.size else 0,
                event_counts_by_kind=by_kind,
            )
        )
    return out


def _device_rows(trace: Trace, diag) -> list[dict]:
    rows: list[dict[str, Any]]
    if diag is not None:
        rows = [
            dict(
                device=int(d.device),
                window_start_ns=int(d.window_start_ns),
                window_end_ns=int(d.window_end_ns),
                busy_ns=int(d.busy_ns),
                busy_with_copies_ns=int(d.busy_with_copies_ns),
                kernel_count=int(d.kernel_count),
                copy_count=int(d.copy_count),
            )
            for d in diag.devices
        ]
    else:
        rows = device_busy(trace)
    for r in rows:
        r["window_ns"] = r["window_end_ns"] - r["window_start_ns"]
        r["idle_ns"] = r["window_ns"] - r["busy_ns"]
        r["fully_idle_ns"] = r["window_ns"] - r["busy_with_copies_ns"]
        r["busy_share"] = r["busy_ns"] / r["window_ns"] if r["window_ns"] else None
        r["idle_share"] = r["idle_ns"] / r["window_ns"] if r["window_ns"] else None
        if diag is not None:
            r["class_totals_ns"] = jsonable(_class_totals(diag, r["device"]))
            r["gap_idle_ns"] = int(sum(r["class_totals_ns"].values()))
    return rows


def _class_totals(diag, device=None) -> dict:
    from gapscope.analysis.types import Cause

    totals = diag.class_totals_ns(device=device)
    return {c: int(totals.get(c, 0)) for c in Cause}


def _event(trace: Trace, i: int) -> dict | None:
    i = int(i)
    if i < 0 or i >= len(trace):
        return None
    ln = trace.lanes[int(trace.lane[i])]
    return dict(
        index=i,
        name=trace.name(i),
        kind=Kind(int(trace.kind[i])).name.lower(),
        start_ns=int(trace.start_ns[i]),
        dur_ns=int(trace.dur_ns[i]),
        lane=ln.index,
        thread_name=ln.thread_name,
        process_name=ln.process_name,
    )


def _cause_label(v: int) -> str | None:
    from gapscope.analysis.types import Cause

    return None if int(v) < 0 else Cause(int(v)).name.lower()


def _gap(trace: Trace, diag, i: int, origin_ns: int) -> dict:
    g = diag.gaps
    start, end = int(g.start_ns[i]), int(g.end_ns[i])
    return dict(
        index=int(i),
        device=int(g.device[i]),
        start_ns=start,
        end_ns=end,
        dur_ns=end - start,
        start_rel_ns=start - origin_ns,
        prev_op=_event(trace, g.prev_op[i]),
        next_op=_event(trace, g.next_op[i]),
        launch=_event(trace, g.launch[i]),
        lateness_ns=int(g.lateness_ns[i]),
        exposed_copy_ns=int(g.exposed_copy_ns[i]),
        cause=_cause_label(g.cause[i]),
        cause_share=float(g.cause_share[i]),
        secondary=_cause_label(g.secondary[i]),
        secondary_share=float(g.secondary_share[i]),
        group=int(g.group[i]),
        episode=int(g.episode[i]),
        # a stand-in diagnosis (not a ``Diagnosis``) has no findings, so no edges either
        edge=edge_place(diag, int(i)) if isinstance(diag, Diagnosis) else None,
    )


def _card(card) -> dict:
    d = jsonable(card)
    if d.get("cpu_samples", 0) is None:  # only a trace with CPU samples has the key
        del d["cpu_samples"]
    return d


def gap_entry(trace: Trace, diag, i: int, origin_ns: int) -> dict:
    """Gap ``i`` of ``diag`` with its card, exactly as a ``top_gaps[]`` entry of the
    document (``origin_ns``: ``span.start_ns``), for any gap, not only the top N (the
    agent interface, ``gapscope.mcp``, asks for one gap at a time)."""
    row = _gap(trace, diag, int(i), origin_ns)
    row["card"] = _card(card_for_gap(diag, int(i)))
    return row


def build_document(
    trace: Trace, diag, *, top_n: int = 10, version: str = "", full: bool = True, what_if_names: tuple[str, ...] = ()
) -> dict:
    """The whole report as a dict of JSON types (see ``docs/report-json.md``).

    ``trace``: a loaded ``Trace``; ``diag``: its ``gapscope.analysis.Diagnosis`` or None (then
    gap, class, group, step and budget keys are null or empty); ``top_n``: how many of
    the largest gaps get an entry (with card) in ``top_gaps``; ``full``: include the
    ``diagnosis`` key (``diagnosis_to_json(Diagnosis)``; the text renderers do not need it, and
    it is left ``None`` without) and the cards of ``GROUP_CARD_LIMIT`` groups (without:
    of the ``GROUP_CARDS`` the renderers print). Times are the trace's own
    int64 ns; ``*_rel_ns`` values are relative to ``span.start_ns``. ``what_if_names``:
    CPU event names (``report --what-if``) whose time in idle gaps one more ``what_if``
    row removes (``removed_names``; names matching nothing are listed in ``unmatched``).
    """
    lo, hi = (int(x) for x in trace.extent_ns)
    doc: dict[str, Any] = dict(
        schema=SCHEMA,
        gapscope_version=version,
        source=_source(trace),
        span=dict(start_ns=lo, end_ns=hi, dur_ns=hi - lo),
        event_count=len(trace),
        lanes=_lanes(trace),
        devices=_device_rows(trace, diag),
        warnings=[dict(line=w.line, field=w.field, message=w.message) for w in trace.warnings],
        diagnosis_available=diag is not None,
    )
    if diag is None:
        doc.update(
            params=None,
            gap_count=None,
            class_gap_counts=None,
            idle_in_gaps_ns=None,
            class_totals_ns=None,
            trust=None,
            top_gaps=[],
            groups=[],
            episodes=[],
            steps=None,
            budget=None,
            what_if=[],
            diagnosis=None,
            verdict=None,
            findings=[],
            findings_apart=[],
        )
        return doc
    _findings(doc, diag)
    doc["params"] = jsonable(diag.params)
    totals = _class_totals(diag)
    doc["class_totals_ns"] = jsonable(totals)
    doc["gap_count"] = len(diag.gaps)
    counts = (
        np.bincount(np.asarray(diag.gaps.cause, dtype=np.int64), minlength=len(totals))
        if len(diag.gaps)
        else np.zeros(len(totals), dtype=np.int64)
    )
    doc["class_gap_counts"] = {c.name.lower(): int(counts[int(c)]) for c in totals}
    doc["idle_in_gaps_ns"] = int(diag.gaps.dur_ns.sum()) if len(diag.gaps) else 0
    doc["trust"] = _trust_summary(diag)
    order = diag.order_by_size()[: max(0, int(top_n))]
    top = []
    for i in order:
        row = _gap(trace, diag, int(i), lo)
        row["card"] = _card(card_for_gap(diag, int(i)))
        top.append(row)
    doc["top_gaps"] = top
    # the text and Markdown renderers print GROUP_CARDS group cards: a card costs a few
    # ms of evidence ranking, and a long trace has thousands of groups
    doc["groups"] = _groups(diag, GROUP_CARD_LIMIT if full else GROUP_CARDS)
    doc["episodes"] = [_episode(e, lo) for e in diag.episodes]
    doc["steps"] = _steps(diag.steps, lo)
    doc["budget"] = _rates(jsonable(diag.budget))
    doc["what_if"] = _what_ifs(diag, totals) if diag.steps is not None else []
    if what_if_names and diag.budget is not None:
        w = _rates(jsonable(diag.what_if(names=what_if_names)))
        w["removed_causes"] = []
        w["removed_names"] = list(what_if_names)
        w["unmatched"] = [n for n in what_if_names if match_names(trace, (n,)).size == 0]
        doc["what_if"].append(w)
    doc["diagnosis"] = jsonable(diagnosis_to_json(diag)) if full else None
    return doc


def _findings(doc: dict, diag) -> None:
    """``verdict``, ``findings`` and ``findings_apart`` of ``diag`` into ``doc`` (null
    and empty for a diagnosis that is not a ``Diagnosis``: a stand-in without steps'
    evidence has no findings)."""
    if not isinstance(diag, Diagnosis):
        doc.update(verdict=None, findings=[], findings_apart=[])
        return
    found = findings(diag)
    doc["verdict"] = dict(
        sentence=found.verdict,
        kind=found.verdict_kind,
        share=found.verdict_share,
        steady_state=found.steady_state,
    )
    doc["findings"] = [finding_dict(f, k) for k, f in enumerate(found.ranked)]
    doc["findings_apart"] = [finding_dict(f, k) for k, f in enumerate(found.apart)]


def finding_dict(f: Finding, rank: int) -> dict:
    """One finding as JSON types (``docs/report-json.md``, "Findings"): ``rank`` from 0
    in its list; ``tokens_per_s`` only for a decode step (else null);
    ``projected_step_ns``, ``steps_per_s``, ``tokens_per_s`` and ``speedup`` null where
    the finding is not projected (kept apart, or ``Finding.projected`` false: fewer
    than two steps)."""
    return dict(
        rank=rank,
        kind=f.kind,
        cause=f.cause.label,
        title=f.title,
        name=f.name,
        steady=f.steady,
        per_step_ns=int(f.per_step_ns),
        step_share=float(f.step_share),
        total_ns=int(f.total_ns),
        steps_with=int(f.steps_with),
        steps_total=int(f.steps_total),
        positions=[int(x) for x in f.positions.tolist()],
        fix=f.fix,
        card=_card(f.card) if f.card is not None else None,
        projected_step_ns=int(f.projected_step_ns) if f.steady and f.projected and f.measurable else None,
        steps_per_s=float(f.steps_per_s) if f.steady and f.projected and f.steps_per_s is not None else None,
        tokens_per_s=float(f.tokens_per_s) if f.steady and f.projected and f.tokens_per_s is not None else None,
        speedup=float(f.speedup) if f.steady and f.projected and f.measurable else None,
        assumptions=list(f.assumptions),
    )


def _groups(diag, card_limit: int = GROUP_CARD_LIMIT) -> list[dict]:
    """Every recurring group; the first ``card_limit`` (largest total first) with
    their card, the others with ``card: null`` (as ``diagnosis_to_json`` does)."""
    out = []
    for k, grp in enumerate(diag.groups):
        d = jsonable(grp)
        idx = [int(x) for x in np.asarray(grp.gap_indices).tolist()]
        d["gap_indices"] = idx
        d["card"] = _card(card_for_group(diag, int(grp.id))) if k < card_limit else None
        out.append(d)
    return out


def _episode(e, origin_ns: int) -> dict:
    """One picket-fence episode; ``median_launch_ns`` null when the analysis has no
    launch for it (its ``-1`` sentinel), as the schema says."""
    d = jsonable(e)
    if d.get("median_launch_ns") is not None and d["median_launch_ns"] < 0:
        d["median_launch_ns"] = None
    d["start_rel_ns"] = int(e.start_ns) - origin_ns
    d["dur_ns"] = int(e.end_ns) - int(e.start_ns)
    return d


def _steps(steps, origin_ns: int) -> dict | None:
    if steps is None:
        return None
    d = jsonable(steps)
    s = np.asarray(steps.start_ns, dtype=np.int64)
    e = np.asarray(steps.end_ns, dtype=np.int64)
    d["count"] = int(s.size)
    d["dur_ns"] = [int(x) for x in (e - s).tolist()]
    d["start_rel_ns"] = [int(x) for x in (s - origin_ns).tolist()]
    return d


_D = TypeVar("_D", dict, None)


def _rates(d: _D) -> _D:
    """A budget or what-if dict (or None: no budget) with ``tokens_per_s`` null unless
    the step is a decode step (``decode``: one token per step); ``steps_per_s`` is
    always there."""
    if d is not None and d.get("decode") is False:
        d["tokens_per_s"] = None
    return d


def _what_ifs(diag, totals: dict) -> list[dict]:
    """What-if projections when a whole cause class is removed (budget needed), for
    each class that holds idle in the budget's steps (one that holds only one-time idle
    would project 1.00x)."""
    if diag.budget is None:
        return []
    out = []
    from gapscope.analysis.types import Cause

    present = [c for c, ns in totals.items() if ns > 0 and c not in (Cause.UNCLASSIFIED, Cause.DEPENDENCY)]
    choices = [(c,) for c in present]
    not_launch = tuple(c for c in present if c != Cause.LAUNCH)
    if len(not_launch) >= 2:
        choices.append(not_launch)
    for causes in choices:
        w = _rates(jsonable(diag.what_if(causes=causes)))
        if not w.get("removed_ns"):
            # the class's idle is all one-time (warm-up, outside the budget): nothing to
            # project (bs_32 printed four rows of 1.00x)
            continue
        w["removed_causes"] = [c.name.lower() for c in causes]
        w["removed_names"] = []
        out.append(w)
    return out


def _trust_summary(diag) -> dict:
    """How much of the idle is queued (blocked), one-time, or unreliable (``Gaps.trust``
    bits), as counts and ns."""
    from gapscope.analysis.types import Trust, WaitKind

    g = diag.gaps
    dur = g.dur_ns

    def part(mask) -> dict:
        m = np.asarray(mask, dtype=bool) if mask is not None else np.zeros(len(g), bool)
        return dict(count=int(m.sum()), idle_ns=int(dur[m].sum()) if m.any() else 0)

    t = g.trust if g.trust is not None else np.zeros(len(g), np.int8)
    dispatch = g.wait_kind == int(WaitKind.DISPATCH) if g.wait_kind is not None else None
    return dict(
        queued=part(g.queued),
        dispatch=part(dispatch),
        one_time=part(g.one_time),
        unlinked=part((t & int(Trust.UNLINKED)) != 0),
        graph_unrecorded=part((t & int(Trust.GRAPH_UNRECORDED)) != 0),
        sampled=part((t & int(Trust.SAMPLED)) != 0),
        clocks=part((t & int(Trust.CLOCKS)) != 0),
    )


#: What each ``trust`` entry means, as the sentence after "N gaps (T)".
TRUST_TEXT = {
    "queued": "were queued: the next op's launch call had returned before the GPU went idle, so no CPU-side "
    "class is blamed for them (dependency, copy)",
    "dispatch": "are bubbles between kernels queued ahead, with no recorded wait: per-kernel dispatch on the "
    "device, not actionable alone",
    "one_time": "are one-time (warm-up) costs, kept out of the recurring groups, the budget and the what-ifs",
    "unlinked": "end at an op with no linked launch call: queued or late cannot be told there",
    "graph_unrecorded": "follow a CUDA graph launch with no recorded kernels: the graph may have run there "
    "unseen, so that idle may not be idle",
    "sampled": "are in a trace that keeps only a sample of its operators: kernels it dropped may have run there",
    "clocks": "end at an op recorded as starting before its launch call began: the CPU's and the GPU's clocks "
    "disagree there, so the CPU's work in the gap may not be what held the GPU",
}


def trust_lines(doc: dict) -> list[str]:
    """Plain sentences on the idle the summary should be read with: queued, one-time,
    unlinked, near unrecorded graphs (empty when there is nothing to say)."""
    t = doc.get("trust") or {}
    return [
        f"{t[k]['count']:,} gaps ({fmt_dur(t[k]['idle_ns'])}) {text}"
        for k, text in TRUST_TEXT.items()
        if (t.get(k) or {}).get("count")
    ]


def lone_gaps(doc: dict) -> list[tuple[int, dict]]:
    """(gap number, gap) of the top gaps that get their own card: not in a recurring
    group (the group's card covers it), one per picket-fence episode, at most
    CARDS_FOR_TOP. The number is the gap's ``index``, as the viewer numbers it."""
    out, seen_episodes = [], set()
    for g in doc["top_gaps"]:
        rank = g["index"]
        if g.get("group", -1) >= 0:
            continue
        ep = g.get("episode", -1)
        if ep >= 0:
            if ep in seen_episodes:
                continue
            seen_episodes.add(ep)
        out.append((rank, g))
        if len(out) == CARDS_FOR_TOP:
            break
    return out
