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

import numpy as np

from parsers.model import CopyKind, Kind

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


def _why(diag, rows: np.ndarray, class_ns: np.ndarray, evidence: list[Evidence], per_step: str) -> str:
    trace = diag.trace
    g = diag.gaps
    dur = int(class_ns.sum())
    parts = []
    gpu_parts = []
    agg = sorted(_aggregate(evidence).items(), key=lambda kv: -kv[1])
    verbs = {Cause.SYNC: "blocked in", Cause.COPY: "copying in", Cause.LAUNCH: "launching in", Cause.HOST: "busy in"}
    on_gpu = {e.name for e in evidence if e.event >= 0 and trace.lanes[e.lane].is_gpu}
    for (cause, name), ns in agg:
        if name in on_gpu:
            if len(gpu_parts) < 2:
                ev = next(e for e in evidence if e.name == name and e.cause == cause)
                if cause == Cause.COPY:
                    extra = f" ({_bytes(ev.bytes)}{', pageable host memory' if ev.pageable else ''})" if ev.bytes >= 0 else ""
                    gpu_parts.append(f"the copy {_quote(name)}{extra} ran for {_ms(ns)} with no kernel beside it")
                else:
                    gpu_parts.append(f"a host wait {_quote(name)} is recorded on the device for {_ms(ns)}")
        elif len(parts) < 3:
            parts.append(f"{_ms(ns)} {verbs.get(cause, 'in')} {_quote(name)}")
    covered = sum(e.overlap_ns for e in evidence if e.event >= 0 and not trace.lanes[e.lane].is_gpu)
    rep_dur = int(g.dur_ns[rows].sum())
    quiet = max(rep_dur - covered, 0)
    has_cpu = any((not ln.is_gpu) and trace.lane_offsets[ln.index + 1] > trace.lane_offsets[ln.index] for ln in trace.lanes)
    if quiet > 0 and quiet >= rep_dur // 20 and has_cpu:
        parts.append(f"{_ms(quiet)} with no recorded events (uninstrumented Python or untraced work)")
    unexplained = int(class_ns[int(Cause.UNCLASSIFIED)])
    lanes = {e.lane for e in evidence if e.event >= 0 and not trace.lanes[e.lane].is_gpu}
    who = "the launching thread"
    if len(lanes) == 1:
        ln = trace.lanes[next(iter(lanes))]
        who = f"thread {_quote(ln.thread_name or ln.tid)}"
    head = f"For {_ms(dur)}{per_step} the GPU had no kernel to run"
    if not parts and not gpu_parts:
        body = "; no CPU event covers it" + (" (the trace has no CPU activity)" if not has_cpu else "") + (" and no launch is linked to the next kernel" if (g.launch[rows] < 0).all() else "")
    else:
        body = ""
        if gpu_parts:
            body += ": " + "; ".join(gpu_parts)
        if parts:
            body += ("; meanwhile " if gpu_parts else ": ") + f"{who} spent " + ", ".join(parts)
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
    if unexplained and unexplained == dur:
        tail += " (no evidence: unclassified)"
    return head + body + tail + "."


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
        what = name or "the CPU work between launches"
        return (f"Take {what} off the critical path: run it after the step, every N steps, or in another "
                f"thread/process, and launch the next GPU work before doing it so the two overlap.",
                "Do not reach for cuBLAS settings or a faster kernel: the GPU has nothing queued while the CPU "
                "is busy, so faster kernels only widen this gap's share of the step.",
                f"Idle at this position ({dur_txt}) and step time / tokens per second on a new capture with the "
                f"same ranges named.")
    return ("Capture again with CPU activity recorded (torch.profiler activities CPU and CUDA, with_stack=True) "
            "so the launching thread and its calls are visible.",
            "Do not pick a kernel to optimise from the GPU lanes alone.",
            f"The same gap ({dur_txt}) classified on the new capture.")


def _card(diag, rows: np.ndarray, per_step_ns: int | None, steps_txt: str, class_ns: np.ndarray | None = None) -> Card:
    """Card from the evidence of ``rows`` (one occurrence) and the per-class ns
    ``class_ns`` (default: the sum over ``rows``)."""
    g = diag.gaps
    if class_ns is None:
        class_ns = g.class_ns[rows].sum(axis=0) if g.class_ns is not None else np.zeros(len(Cause), np.int64)
    total = max(int(class_ns.sum()), 1)
    primary = Cause(int(np.argmax(class_ns)))
    rest = class_ns.copy()
    rest[int(primary)] = -1
    sec_i = int(np.argmax(rest))
    secondary = Cause(sec_i) if rest[sec_i] > 0 else None
    evidence: list[Evidence] = []
    for r in rows[:8]:
        evidence.extend(diag.evidence(int(r)))
    evidence.sort(key=lambda e: -e.overlap_ns)
    smell = SMELLS[primary]
    if primary == Cause.LAUNCH and (g.episode[rows] >= 0).any():
        smell = "picket fence"
    dur_txt = _ms(per_step_ns if per_step_ns is not None else total) + (" per step" if per_step_ns is not None else "")
    why = _why(diag, rows, class_ns, evidence, " per step" if per_step_ns is not None else "")
    if steps_txt:
        why = why[:-1] + f" ({steps_txt})."
    if getattr(diag, "invalid_gpu_ops", 0):
        why += (f" {diag.invalid_gpu_ops} GPU op(s) of this trace have no usable timing and are left out,"
                " so idle time may be overstated.")
    first, forbidden, proof = _advice(diag, primary, evidence, rows, dur_txt)
    return Card(smell, primary, secondary, float(rest[sec_i] / total) if secondary is not None else 0.0,
                why, first, forbidden, proof, tuple(evidence[:12]))


def card_for_group(diag, group_id: int) -> Card:
    """Card of recurring group ``group_id``, worded per step (median occurrence)."""
    grp = diag.groups[group_id]
    rows = grp.gap_indices
    # the largest occurrence: the largest gap with its step-boundary partner
    big = rows[np.argmax(diag.gaps.dur_ns[rows])]
    edge = diag.gaps.edge
    rep = [int(big)]
    if edge is not None and edge[big] != 0:
        rep = [int(r) for r in rows if edge[r] != 0][:2]
    cls = None
    if diag.gaps.class_ns is not None:
        cls = diag.gaps.class_ns[rows].sum(axis=0) // max(grp.steps_with_gap, 1)
    return _card(diag, np.array(rep, dtype=np.int64), grp.median_ns, grp.summary, cls)


def card_for_gap(diag, i: int) -> Card:
    """Card of gap ``i``: its group's card when it recurs, else its own."""
    gid = int(diag.gaps.group[i])
    if gid >= 0:
        return card_for_group(diag, gid)
    return _card(diag, np.array([i], dtype=np.int64), None, "")
