"""The card of a gap or recurring group ("The card" in the design).

Fields: smell, cause class (+ secondary and its share), why the GPU is empty (one
sentence with the evidence and numbers), first experiment, forbidden next step, proof
of improvement. The per-class advice follows the design's defaults (launch → CUDA
graphs / ``torch.compile`` / batching; host → take the work off the critical path;
copy → keep tensors on the device, pinned + ``non_blocking``; sync → no ``.item()`` /
``print`` in the loop, CUDA events for timing), worded here and specialised by the
evidence: the ``.item()`` call site, the host range, the copy and its bytes. A card
never recommends working on the kernels next to the gap: it names CPU-side evidence
only.
"""

from __future__ import annotations

import re

import numpy as np

from parsers.model import CopyKind, Kind

from .classify import rank_classes
from .evidence import enclosing_step_range
from .steps import RECUR_FACTOR
from .waits import WAIT_NAME_RE
from .types import Card, Cause, Evidence

__all__ = ["card_for_gap", "card_for_group", "SMELLS"]

SMELLS = {
    Cause.LAUNCH: "launch-bound gap",
    Cause.HOST: "host island",
    Cause.COPY: "copy on the path",
    Cause.SYNC: "sync cliff",
    Cause.UNCLASSIFIED: "unexplained white space",
}


def _ms(ns: float) -> str:
    ns = float(ns)
    if abs(ns) >= 100_000:
        return f"{ns / 1e6:.3f} ms"
    return f"{ns / 1e3:.1f} µs"


def _bytes(n: int) -> str:
    if n < 0:
        return "unknown size"
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k:
            return f"{n / k:.1f} {unit}"
    return f"{n} B"


def _quote(name: str) -> str:
    return "`" + name.replace("`", "'") + "`"


def _call_site(diag, ev: int) -> str | None:
    """Innermost Python frame enclosing event ``ev`` on its lane (the call site), or None."""
    trace = diag.trace
    if ev < 0 or diag._index is None:
        return None
    s, e = int(trace.start_ns[ev]), int(trace.start_ns[ev] + trace.dur_ns[ev])
    idx = diag._index.overlapping(trace, int(trace.lane[ev]), s, s + 1)
    m = (trace.kind[idx] == int(Kind.PYTHON)) & (trace.start_ns[idx] + trace.dur_ns[idx] >= e) & (idx != ev)
    if not m.any():
        return None
    cand = idx[m]
    return trace.name(int(cand[np.argmax(trace.depth[cand])]))


def _aggregate(evidence: list[Evidence]) -> dict[tuple[Cause, str], int]:
    agg: dict[tuple[Cause, str], int] = {}
    for ev in evidence:
        if ev.event >= 0:
            key = (ev.cause, ev.name)
            agg[key] = agg.get(key, 0) + ev.overlap_ns
    return agg


def _why(diag, rows: np.ndarray, class_ns: np.ndarray, evidence: list[Evidence], head: str, lead: str = "") -> str:
    """One sentence: ``head`` (who/how long), then the evidence of ``rows`` (one
    occurrence), introduced by ``lead`` (e.g. "in the median step, "), then the launch
    lateness and, for idle no evidence explains, what is known. ``class_ns``: the ns
    per class the card reports (its primary class's evidence is named first)."""
    trace = diag.trace
    g = diag.gaps
    parts = []
    gpu_parts = []
    primary = _rank(class_ns)[0]
    # the stated class's evidence first, so the sentence supports the card's class
    agg = sorted(_aggregate(evidence).items(), key=lambda kv: (kv[0][0] != primary, -kv[1]))
    verbs = {Cause.SYNC: "blocked in", Cause.COPY: "copying in", Cause.LAUNCH: "launching in", Cause.HOST: "busy in"}
    waits = {e.name for e in evidence if e.event >= 0 and e.cause == Cause.SYNC and WAIT_NAME_RE.search(e.name)
             and g.wait_event is not None and e.event in set(g.wait_event[rows].tolist())}
    on_gpu = {e.name for e in evidence if e.event >= 0 and trace.lanes[e.lane].is_gpu}
    for (cause, name), ns in agg:
        if name in waits:
            if len(gpu_parts) < 2:
                ev = next(e for e in evidence if e.name == name and e.cause == cause)
                ln = trace.lanes[ev.lane]
                by = "" if ln.is_gpu else f" (enqueued by thread {_quote(ln.thread_name or ln.tid)})"
                gpu_parts.append(f"the next op was queued behind the stream wait {_quote(name)}{by} and waited "
                                 f"{_ms(ns)} for the event it names")
        elif name in on_gpu:
            if len(gpu_parts) < 2:
                ev = next(e for e in evidence if e.name == name and e.cause == cause)
                if cause == Cause.COPY:
                    extra = f" ({_bytes(ev.bytes)}{', pageable host memory' if ev.pageable else ''})" if ev.bytes >= 0 else ""
                    gpu_parts.append(f"the copy {_quote(name)}{extra} ran for {_ms(ns)} with no kernel beside it")
                else:
                    gpu_parts.append(f"a host wait {_quote(name)} is recorded on the device for {_ms(ns)}")
        elif len(parts) < 3:
            parts.append(f"{_ms(ns)} {verbs.get(cause, 'in')} {_quote(name)}")
    evidence = [e for e in evidence if e.name not in waits]  # the wait is no thread activity
    rep_dur = int(g.dur_ns[rows].sum())
    # uninstrumented time as the evidence lists measured it (nested events not added twice)
    quiet = sum(e.overlap_ns for e in evidence if e.event < 0)
    has_cpu = any((not ln.is_gpu) and trace.lane_offsets[ln.index + 1] > trace.lane_offsets[ln.index] for ln in trace.lanes)
    # of the occurrence described (``rows``), not of a whole group
    unexplained = int(g.class_ns[rows, int(Cause.UNCLASSIFIED)].sum()) if g.class_ns is not None else rep_dur
    queued = _queued(diag, rows)
    if quiet > 0 and quiet >= rep_dur // 20 and has_cpu and not (queued and unexplained):
        parts.append(_quiet_txt(diag, rows, quiet))
    lanes = {e.lane for e in evidence if e.event >= 0 and not trace.lanes[e.lane].is_gpu}
    who = "the launching thread"
    if len(lanes) == 1:
        ln = trace.lanes[next(iter(lanes))]
        who = f"thread {_quote(ln.thread_name or ln.tid)}"
    if not parts and not gpu_parts:
        body = "; no CPU event covers it" + (" (the trace has no CPU activity)" if not has_cpu else "") + (" and no launch is linked to the next kernel" if (g.launch[rows] < 0).all() else "")
    else:
        body = ""
        if gpu_parts:
            body += ": " + lead + "; ".join(gpu_parts)
        if parts:
            body += ("; meanwhile " if gpu_parts else ": " + lead) + f"{who} spent " + ", ".join(parts)
    late = g.lateness_ns[rows]
    has = g.launch[rows] >= 0
    tail = ""
    edge = g.edge[rows] if g.edge is not None else np.zeros(rows.size, np.int8)
    if has.any():
        L = int(np.median(late[has]))
        if (edge == 2).any() and (edge == 1).any():  # step-boundary stretch: idle starts at the trailing gap
            L += int(g.dur_ns[rows][edge == 2].sum())
        if L > 0:
            tail = f"; the next launch call started {_ms(L)} after the GPU went idle"
        elif L == 0:
            tail = "; the next launch call started just as the GPU went idle"
        else:
            tail = f"; the next kernel was already queued {_ms(-L)} before the GPU went idle"
    if queued and unexplained:
        ln = int(g.launch[rows][has][0])
        if _GRAPH_RE.search(trace.name(ln)):
            tail += f" (by {_quote(trace.name(ln))}: it is a node of a CUDA graph)"
        tail += (" and" if unexplained == rep_dur else f"; for {_ms(unexplained)} of it") + (
            " nothing recorded on the CPU explains the wait: look at other streams of this device and at other"
            " ranks (collectives, cross-stream event waits)")
    elif unexplained and unexplained == rep_dur:
        tail += " (no evidence: unclassified)"
    return head + body + tail + "."


_GRAPH_RE = re.compile(r"GraphLaunch", re.IGNORECASE)


def _step_range(diag, rows: np.ndarray) -> str | None:
    """Name of the step range (``ProfilerStep#8``, ``decode_step``) enclosing the
    uninstrumented time of ``rows`` on its thread, or None."""
    g = diag.gaps
    for r in rows.tolist():
        lane = int(g.thread_lane[r]) if g.thread_lane is not None else int(g.launch_lane[r])
        ev = enclosing_step_range(diag.trace, diag._exclude, lane, int(g.start_ns[r]), int(g.end_ns[r]))
        if ev >= 0:
            return diag.trace.name(ev)
    return None


def _quiet_txt(diag, rows: np.ndarray, quiet_ns: int) -> str:
    """"0.200 ms inside `decode_step` with no finer event recorded (...)": the
    enclosing step range is named as where the time went, never as the work."""
    step = _step_range(diag, rows)
    if step is not None:
        return f"{_ms(quiet_ns)} inside {_quote(step)} with no finer event recorded (uninstrumented Python or untraced work)"
    return f"{_ms(quiet_ns)} with no recorded events (uninstrumented Python or untraced work)"


def _queued(diag, rows: np.ndarray) -> bool:
    """True when the next op of every gap in ``rows`` that has a linked launch was
    queued before the gap (L <= 0), and at least one has one (no step-boundary pair)."""
    g = diag.gaps
    has = g.launch[rows] >= 0
    edge = g.edge[rows] if g.edge is not None else np.zeros(rows.size, np.int8)
    if not has.any() or ((edge == 2).any() and (edge == 1).any()):
        return False
    return bool((g.lateness_ns[rows][has] <= 0).all())


def _advice(diag, cause: Cause, evidence: list[Evidence], rows: np.ndarray, dur_txt: str) -> tuple[str, str, str]:
    trace = diag.trace
    p = diag.params
    top = [e for e in evidence if e.cause == cause and e.event >= 0]
    name = _quote(top[0].name) if top else None
    if cause == Cause.SYNC:
        site = _call_site(diag, top[0].event) if top else None
        where = f"{name}" + (f" (called from {_quote(site)})" if site else "") if name else "the host read"
        return (f"Remove the host read {where} from the loop: keep the value on the GPU (mask or torch.where instead "
                f"of a Python branch on it), or collect the values and read them once after the loop; time with CUDA "
                f"events instead of synchronizing.",
                "Do not speed up the kernels around the gap: the GPU is idle because the CPU waits for it, and a "
                "faster kernel only makes that wait start sooner.",
                f"On a new capture of the same steps, the idle at this position ({dur_txt}) and the number of "
                f"synchronizing calls per step (cudaStreamSynchronize, aten::item) should drop to about zero.")
    if cause == Cause.COPY:
        cp = [e for e in evidence if e.cause == Cause.COPY]
        big = max(cp, key=lambda e: (e.bytes, e.overlap_ns)) if cp else None
        what = _quote(big.name) if big else "the copy"
        bits = []
        if big is not None and big.bytes >= 0:
            bits.append(_bytes(big.bytes))
        if big is not None and big.pageable:
            bits.append("from pageable host memory")
        detail = f" ({', '.join(bits)})" if bits else ""
        return (f"Keep the data on the device so {what}{detail} is not needed (drop the .cpu()/numpy round trip); "
                f"where a copy must stay, use pinned host memory and non_blocking=True so it overlaps compute.",
                "Do not optimise the kernels: the GPU waits for data to move, not for compute.",
                f"Exposed copy time per step (memcpy outside kernels) and the idle at this position ({dur_txt}) "
                f"on a new capture; the copy should vanish or run under a kernel.")
    if cause == Cause.LAUNCH:
        eps = {int(e) for e in diag.gaps.episode[rows] if e >= 0}
        fence = ""
        if eps:
            ep = diag.episodes[min(eps)]
            launch_txt = f", launch calls of median {_ms(ep.median_launch_ns)}" if ep.median_launch_ns >= 0 else ""
            fence = (f" ({ep.kernel_count} short kernels of median {_ms(ep.median_kernel_ns)}{launch_txt}, "
                     f"{_ms(ep.idle_ns)} idle between them)")
        return (f"Issue the work with fewer launches{fence}: capture the step in a CUDA graph (torch.compile with "
                f"mode='reduce-overhead', or torch.cuda.graphs), fuse the small ops, or batch more requests per step.",
                "Do not write a faster kernel: the kernels already finish before the next launch arrives.",
                f"GPU busy share and launch calls per step before and after; gaps in this stretch should fall "
                f"below {_ms(p.min_gap_ns)} and the idle at this position ({dur_txt}) shrink.")
    if cause == Cause.HOST:
        quiet = [e for e in evidence if e.cause == cause and e.event < 0]
        quiet_ns = sum(e.overlap_ns for e in quiet)
        if quiet and (not top or quiet_ns > top[0].overlap_ns):
            # most of the host time has no event of its own: say where it is, not what to move
            first = (f"Find out what the CPU does for the {_quiet_txt(diag, rows, quiet_ns)}: capture with "
                     f"with_stack=True or wrap the suspects in torch.profiler.record_function ranges, then take "
                     f"that work off the critical path (after the step, every N steps, or another thread) and "
                     f"launch the next GPU work before it.")
        else:
            what = name or "the CPU work between launches"
            first = (f"Take {what} off the critical path: run it after the step, every N steps, or in another "
                     f"thread/process, and launch the next GPU work before doing it so the two overlap.")
        return (first,
                "Do not reach for cuBLAS settings or a faster kernel: the GPU has nothing queued while the CPU "
                "is busy, so faster kernels only widen this gap's share of the step.",
                f"Idle at this position ({dur_txt}) and step time{' and tokens/s' if _decode(diag) else ''} on a new "
                f"capture with the same ranges named.")
    if _queued(diag, rows) and any(not ln.is_gpu for ln in trace.lanes):
        return ("Find what the queued kernel waited for: capture with a recent torch.profiler (its 'cuda_sync' "
                "records name the stream an event wait is on) and capture every rank in the same window; check "
                "cross-stream waits (wait_stream, wait_event), collectives on other streams and ranks, and waits "
                "captured inside CUDA graphs.",
                "Do not optimise the kernels around the gap or the CPU code before it: the next kernel was already "
                "queued, so neither the CPU nor the kernels next to the gap held it back.",
                f"The same gap ({dur_txt}) on the new capture, with the wait it sits behind named.")
    return ("Capture again with CPU activity recorded (torch.profiler activities CPU and CUDA, with_stack=True) "
            "so the launching thread and its calls are visible.",
            "Do not pick a kernel to optimise from the GPU lanes alone.",
            f"The same gap ({dur_txt}) classified on the new capture.")


def _rank(class_ns: np.ndarray) -> tuple[Cause, float, Cause | None, float]:
    """(primary, its share, secondary or None, its share) of one class_ns row; shares
    of the row's total, the same rule as the gaps' columns (``classify.rank_classes``)."""
    cn = np.asarray(class_ns, dtype=np.int64).reshape(1, -1)
    p, ps, s, ss = rank_classes(cn, cn.sum(axis=1))
    return Cause(int(p[0])), float(ps[0]), (Cause(int(s[0])) if s[0] >= 0 else None), float(ss[0])


def _mix(class_ns: np.ndarray) -> str:
    """"host (77%), then sync (22%)" for a class_ns row."""
    p, ps, s, ss = _rank(class_ns)
    return f"{p.label} ({ps:.0%})" + (f", then {s.label} ({ss:.0%})" if s is not None else "")


def _card(diag, rows: np.ndarray, class_ns: np.ndarray, head: str, dur_txt: str, *, lead: str = "",
          context: str = "") -> Card:
    """Card from the evidence of ``rows`` (one occurrence: a gap, or a step-boundary
    pair) and the per-class ns ``class_ns`` whose primary and secondary class (shares of
    its total) the card states. ``head`` opens the "why" sentence, ``context`` follows
    it; ``dur_txt`` is the figure quoted in the proof."""
    g = diag.gaps
    primary, _share, secondary, sec_share = _rank(class_ns)
    evidence: list[Evidence] = []
    for r in rows[:8]:
        evidence.extend(diag.evidence(int(r)))
    evidence.sort(key=lambda e: -e.overlap_ns)
    smell = SMELLS[primary]
    if primary == Cause.LAUNCH and (g.episode[rows] >= 0).any():
        smell = "picket fence"
    why = _why(diag, rows, class_ns, evidence, head, lead)
    if context:
        why += " " + context
    if getattr(diag, "invalid_gpu_ops", 0):
        why += (f" {diag.invalid_gpu_ops} GPU op(s) of this trace have no usable timing and are left out,"
                " so idle time may be overstated.")
    first, forbidden, proof = _advice(diag, primary, evidence, rows, dur_txt)
    return Card(smell, primary, secondary, sec_share, why, first, forbidden, proof, tuple(evidence[:12]))


def _class_ns(diag, rows) -> np.ndarray:
    cn = diag.gaps.class_ns
    if cn is None:
        out = np.zeros(len(Cause), np.int64)
        out[int(Cause.UNCLASSIFIED)] = int(diag.gaps.dur_ns[rows].sum())
        return out
    return cn[rows].sum(axis=0)


def _occurrences(diag, rows: np.ndarray) -> list[np.ndarray]:
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


def card_for_group(diag, group_id: int) -> Card:
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
    primary = _rank(cls)[0]
    # the evidence shown must support the stated class: among the occurrences whose
    # own primary class is the group's (all, when none is), the one nearest the median
    own = np.array([_rank(_class_ns(diag, o))[0] == primary for o in occ], dtype=bool)
    cand = np.flatnonzero(own) if own.any() else np.arange(len(occ))
    rep_k = int(cand[np.lexsort((-occ_ns[cand], np.abs(occ_ns[cand] - grp.median_ns)))[0]])
    rep = occ[rep_k]
    total = int(cls.sum())
    recurs = _steps_txt(grp)
    per = f"{_ms(grp.median_ns)} per step" + (f" (median; it {recurs})" if recurs else "")
    head = f"For {per} the GPU had no kernel to run"
    lead = ""
    if len(occ) > 1:
        at_median = _ms(occ_ns[rep_k]) == _ms(grp.median_ns)
        lead = ("in the median occurrence, " if at_median
                else f"in a typical occurrence ({_ms(occ_ns[rep_k])}, mostly {primary.label}), ")
    context = f"Across the group's {_ms(total)} of idle: {_mix(cls)}." if len(occ) > 1 or len(rep) > 1 else ""
    return _card(diag, rep, cls, head, f"{_ms(grp.median_ns)} per step", lead=lead, context=context)


def _group_context(diag, i: int) -> str:
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
        per = "per token" if _decode(diag) else "per step"
        stretch = _ms(g.dur_ns[i] + g.dur_ns[partner])
        if edge[i] == 1:
            pair = f"this {_ms(g.dur_ns[i])} at the start of the step and the {_ms(g.dur_ns[partner])} after its last kernel"
        else:
            pair = f"this {_ms(g.dur_ns[i])} after the step's last kernel and the {_ms(g.dur_ns[partner])} at its start"
        bits.append(f"The step repeats: {pair} form one {stretch} idle stretch {per}")
        if recurs:
            bits.append(f"the stretch {recurs} ({_ms(grp.median_ns)} median per step)")
    elif not _near(int(g.dur_ns[i]), grp.median_ns):
        bits.append(f"This occurrence is {_ms(g.dur_ns[i])}; the gaps grouped with it ({recurs or 'recurring'}) "
                    f"have a median of {_ms(grp.median_ns)} per step")
    else:
        bits.append(f"This position {recurs or 'recurs'} ({_ms(grp.median_ns)} median per step)")
    bits.append(f"across the group the idle is {_mix(cls)}")
    return "; ".join(bits) + "."


def _decode(diag) -> bool:
    """True when a step makes one token (``analysis.budget.is_decode``)."""
    b = getattr(diag, "budget", None)
    return bool(getattr(b, "decode", False))


def _near(a_ns: int, b_ns: int) -> bool:
    """True when two durations are within ``RECUR_FACTOR`` of each other."""
    lo, hi = sorted((max(int(a_ns), 1), max(int(b_ns), 1)))
    return hi <= RECUR_FACTOR * lo


def _one_off_context(diag, i: int) -> str:
    """For a gap left out of every group although its position recurs with gaps of a
    very different size: "This occurrence is 63.042 ms; at this position the median is
    2.0 µs (3 of 6 steps): a one-off." Else ""."""
    for grp in diag.groups:
        if grp.one_offs.size and (grp.one_offs == i).any():
            return (f"This occurrence is {_ms(diag.gaps.dur_ns[i])}; at this position the median is "
                    f"{_ms(grp.median_ns)} ({grp.steps_with_gap} of {grp.steps_total} steps): a one-off.")
    return ""


def card_for_gap(diag, i: int) -> Card:
    """Card of gap ``i`` itself: its own class mix (``gaps.class_ns[i]``, so cause and
    secondary equal ``gaps.cause[i]`` / ``gaps.secondary[i]``) and its own evidence;
    when it recurs, a sentence on the group (recurrence, median per step, the group's
    class mix) follows. The group's own card is ``card_for_group``."""
    i = int(i)
    rows = np.array([i], dtype=np.int64)
    dur = int(diag.gaps.dur_ns[i])
    return _card(diag, rows, _class_ns(diag, rows), f"For {_ms(dur)} the GPU had no kernel to run",
                 _ms(dur), context=_group_context(diag, i))
