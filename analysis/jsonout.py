"""``diagnosis_to_json(diag)``: everything as JSON-serialisable data with stable keys.

Times stay int nanoseconds (keys end in ``_ns``); names are verbatim strings (render
them literally). Per-gap arrays are columns (one list per field) so a 100k-gap trace
stays compact; cards and evidence are given for the ``top`` largest gaps, every
recurring group and every picket-fence episode.
"""

from __future__ import annotations

import dataclasses

from gapscope.analysis.card import card_for_gap, card_for_group
from gapscope.analysis.diagnose import Diagnosis
from gapscope.analysis.types import Cause

__all__ = ["diagnosis_to_json", "card_to_json"]

SCHEMA = "gapscope.diagnosis/1"


def card_to_json(card) -> dict:
    """A ``Card`` as a dict (cause labels as strings); ``cpu_samples`` only when the
    trace has CPU samples (``Card.cpu_samples``)."""
    out = {
        "smell": card.smell,
        "cause": card.cause.label,
        "secondary": card.secondary.label if card.secondary is not None else None,
        "secondary_share": round(float(card.secondary_share), 6),
        "why": card.why,
        "first_experiment": card.first_experiment,
        "forbidden_step": card.forbidden_step,
        "proof": card.proof,
        "evidence": [_evidence(e) for e in card.evidence],
    }
    s = getattr(card, "cpu_samples", None)
    if s is not None:
        out["cpu_samples"] = {
            "lane": s.lane,
            "samples": s.samples,
            "interval_ns": s.interval_ns,
            "frames": [
                {
                    "name": f.name,
                    "module": f.module,
                    "samples": f.samples,
                    "share": round(float(f.share), 6),
                    "caller": f.caller,
                }
                for f in s.frames
            ],
        }
    return out


def _evidence(e) -> dict:
    return {
        "event": e.event,
        "name": e.name,
        "lane": e.lane,
        "cause": e.cause.label,
        "overlap_ns": e.overlap_ns,
        "bytes": e.bytes,
        "pageable": e.pageable,
    }


def diagnosis_to_json(diag: Diagnosis, *, top: int = 50) -> dict:
    """See the module docstring; ``top``: gaps (and groups) with a card and evidence."""
    g = diag.gaps
    trace = diag.trace
    cause_names = [c.label for c in Cause]
    order = diag.order_by_size()
    top_rows = [int(i) for i in order[:top]]
    gaps = {
        "device": g.device.tolist(),
        "start_ns": g.start_ns.tolist(),
        "end_ns": g.end_ns.tolist(),
        "dur_ns": g.dur_ns.tolist(),
        "prev_op": g.prev_op.tolist(),
        "next_op": g.next_op.tolist(),
        "launch": g.launch.tolist(),
        "launch_lane": g.launch_lane.tolist(),
        "lateness_ns": g.lateness_ns.tolist(),
        "exposed_copy_ns": g.exposed_copy_ns.tolist(),
        "fully_idle_ns": g.fully_idle_ns.tolist(),
        "cause": [cause_names[int(c)] for c in g.cause],
        "cause_share": [round(float(x), 6) for x in g.cause_share],
        "secondary": [cause_names[int(c)] if c >= 0 else None for c in g.secondary],
        "secondary_share": [round(float(x), 6) for x in g.secondary_share],
        "group": g.group.tolist(),
        "episode": g.episode.tolist(),
        "edge": g.edge.tolist() if g.edge is not None else [0] * len(g),
        "class_ns": {c.label: (g.class_ns[:, int(c)].tolist() if g.class_ns is not None else []) for c in Cause},
    }
    top_gaps = []
    for i in top_rows:
        prev, nxt = int(g.prev_op[i]), int(g.next_op[i])
        top_gaps.append(
            {
                "gap": i,
                "start_ns": int(g.start_ns[i]),
                "end_ns": int(g.end_ns[i]),
                "dur_ns": int(g.dur_ns[i]),
                "prev_kernel": trace.name(prev) if prev >= 0 else None,
                "next_op": trace.name(nxt) if nxt >= 0 else None,
                "launch": trace.name(int(g.launch[i])) if g.launch[i] >= 0 else None,
                "card": card_to_json(card_for_gap(diag, i)),
                "evidence": [_evidence(e) for e in diag.evidence(i)],
            }
        )
    b = diag.budget
    steps = diag.steps
    return {
        "schema": SCHEMA,
        "source": {"path": trace.source.path, "format": trace.source.format},
        "params": dataclasses.asdict(diag.params),
        "devices": [
            {
                "device": d.device,
                "window_start_ns": d.window_start_ns,
                "window_end_ns": d.window_end_ns,
                "window_ns": d.window_ns,
                "busy_ns": d.busy_ns,
                "busy_with_copies_ns": d.busy_with_copies_ns,
                "idle_ns": d.idle_ns,
                "fully_idle_ns": d.fully_idle_ns,
                "kernel_count": d.kernel_count,
                "copy_count": d.copy_count,
            }
            for d in diag.devices
        ],
        "invalid_gpu_ops": diag.invalid_gpu_ops,
        "total_idle_ns": diag.total_idle_ns(),
        "class_totals_ns": {c.label: v for c, v in diag.class_totals_ns().items()},
        "gaps": gaps,
        "top_gaps": top_gaps,
        "episodes": [
            {
                "id": k,
                "device": e.device,
                "start_ns": e.start_ns,
                "end_ns": e.end_ns,
                "gap_indices": e.gap_indices.tolist(),
                "kernel_count": e.kernel_count,
                "median_kernel_ns": e.median_kernel_ns,
                "median_launch_ns": e.median_launch_ns,
                "idle_ns": e.idle_ns,
            }
            for k, e in enumerate(diag.episodes)
        ],
        "steps": None
        if steps is None
        else {
            "source": steps.source,
            "name": steps.name,
            "start_ns": steps.start_ns.tolist(),
            "end_ns": steps.end_ns.tolist(),
        },
        "groups": [
            {
                "id": gr.id,
                "label": gr.label,
                "full_label": gr.full_label,
                "gap_indices": gr.gap_indices.tolist(),
                "steps_with_gap": gr.steps_with_gap,
                "steps_total": gr.steps_total,
                "median_ns": gr.median_ns,
                "total_ns": gr.total_ns,
                "cause": gr.cause.label,
                "summary": gr.summary,
                "card": card_to_json(card_for_group(diag, gr.id)) if gr.id < top else None,
            }
            for gr in diag.groups
        ],
        "budget": None
        if b is None
        else {
            "device": b.device,
            "steps": b.steps,
            "source": b.source,
            "wall_ns": b.wall_ns,
            "gpu_busy_ns": b.gpu_busy_ns,
            "idle_ns": b.idle_ns,
            "idle_share": round(b.idle_share, 6),
            "steps_per_s": _round(b.steps_per_s),
            "decode": b.decode,
            "tokens_per_s": _round(b.tokens_per_s) if b.decode else None,
            "class_idle_ns": b.class_idle_ns,
            "one_time_idle_ns": b.one_time_idle_ns,
            "typical_steps": b.typical_steps,
            "warm_up_steps": b.warm_up_steps,
            "other_steps_idle_ns": list(b.other_steps_idle_ns) if b.other_steps_idle_ns else None,
        },
        "what_if": _what_ifs(diag),
        "warnings": [str(w) for w in trace.warnings],
    }


def _round(rate: float | None) -> float | None:
    """A rate to 3 decimals; None (no rate: a step of no length) stays None."""
    return None if rate is None else round(rate, 3)


def _what_ifs(diag: Diagnosis) -> dict:
    """Projection per cause class removed (and sync + host together), with assumptions."""
    if diag.budget is None:
        return {}
    out = {}
    for label, causes in [(c.label, (c,)) for c in Cause if c not in (Cause.UNCLASSIFIED, Cause.DEPENDENCY)] + [
        ("sync+host", (Cause.SYNC, Cause.HOST))
    ]:
        w = diag.what_if(causes=causes)
        out[label] = {
            "removed_ns": w.removed_ns,
            "projected_step_ns": w.projected_step_ns,
            "steps_per_s": _round(w.steps_per_s),
            "tokens_per_s": _round(w.tokens_per_s) if w.decode else None,
            "speedup": round(w.speedup, 6),
            "assumptions": w.assumptions,
        }
    return out
