"""Budget per step and what-if projections ("Budget and what-if" in the design).

Per step (median over steps, on the busiest device): wall time, GPU busy (kernel union),
idle share, steps/s, and tokens/s for a decode step (``tokens_per_step``). With no steps known, the device's
analysis window is one step. The what-if removes chosen gaps, cause classes or named
CPU segments from the idle time and prints its assumptions.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from gapscope.analysis.busy import coverage, device_union, union_intervals, valid_timing_mask
from gapscope.analysis.evidence_kinds import evidence_end
from gapscope.analysis.steps import edge_gaps, is_drawn
from gapscope.analysis.types import Cause
from gapscope.parsers.model import Kind
from gapscope.units import fmt_dur

__all__ = ["Budget", "WhatIf", "compute_budget", "what_if", "is_decode", "tokens_per_step", "match_names"]

#: A step that makes tokens: its annotation (or an ASCII sample's title) says so.
_DECODE_RE = re.compile(r"decode|token", re.IGNORECASE)
#: A CPU range inside each step that makes it a decode step: ``decode`` as a word part
#: (``decode_step``, ``Decode``), not ``decoder`` (a model's module, once per training
#: step) nor ``tokenize`` (a data loader's work)
_INNER_DECODE_RE = re.compile(r"(?<![a-z])decode(?![a-z])", re.IGNORECASE)
#: The batch a decode range names (``step[DECODE bs=32]``, ``decode batch_size=8``):
#: that many tokens per step.
_BATCH_RE = re.compile(r"\b(?:bs|batch(?:_size)?)\s*[=:]\s*(\d{1,7})\b", re.IGNORECASE)


def _inner_decode_name(trace, steps) -> str | None:
    """The name of a CPU annotation matching ``_INNER_DECODE_RE`` that the median step holds
    exactly once and no step holds twice (``decode_step`` inside each
    ``ProfilerStep#N`` of a batch-1 decode loop: its first and last steps, prefill
    and detokenize, hold none); None when there is none. Counted in the steps' CPU
    annotations (``Steps.events``), which hold the CPU ranges also where the steps are
    the GPU's windows (``Steps.on_gpu``: the H200 ``decode-graph`` capture)."""
    if steps is None or len(steps) == 0 or len(trace) == 0:
        return None
    s0, s1 = steps.start_ns, steps.end_ns
    if steps.events.size == len(steps):
        s0 = trace.start_ns[steps.events].astype(np.int64)
        s1 = s0 + trace.dur_ns[steps.events].astype(np.int64)
        if not bool((s0[1:] >= s0[:-1]).all()):
            return None
    ids = trace.name_ids_matching(lambda s: bool(_INNER_DECODE_RE.search(s)))
    if len(ids) == 0:
        return None
    cpu = np.array([not ln.is_gpu for ln in trace.lanes], dtype=bool)
    rows = np.flatnonzero(trace.mask_kind(Kind.ANNOTATION) & cpu[trace.lane] & np.isin(trace.name_id, ids))
    for nid in np.unique(trace.name_id[rows]).tolist():
        t = trace.start_ns[rows[trace.name_id[rows] == nid]].astype(np.int64)
        k = np.searchsorted(s0, t, side="right") - 1
        k = k[(k >= 0) & (t < s1[np.maximum(k, 0)])]
        per_step = np.bincount(k, minlength=len(steps))
        if per_step.max(initial=0) == 1 and np.median(per_step) == 1:
            return trace.names[int(nid)]
    return None


def tokens_per_step(trace, steps) -> int | None:
    """Tokens a step makes, None when a step is not a decode step.

    A decode step: the step annotation's name contains ``decode`` or ``token``
    (``decode_step``, ``step[DECODE bs=32]``); or each step holds one CPU annotation so
    named (``decode_step`` inside ``ProfilerStep#N``: the H200 ``decode`` capture); or
    the trace is an ASCII timeline whose title says so (the decode exercise samples).
    Tokens per step: the batch the name gives (``bs=32``, ``batch_size=8``: 32, 8
    tokens), else 1 (a decode at batch 1: the assumption is printed with every
    tokens/s). ``ProfilerStep#N`` of a training loop, period steps and Kineto windows
    are not decode steps."""
    name = None
    if steps is not None and steps.source == "annotation" and _DECODE_RE.search(steps.name or ""):
        name = steps.name
    elif str(trace.source.format).startswith("ascii") and _DECODE_RE.search(trace.source.trace_name or ""):
        name = trace.source.trace_name
    elif steps is not None and steps.source == "ProfilerStep":
        name = _inner_decode_name(trace, steps)
    if name is None:
        return None
    m = _BATCH_RE.search(name)
    return max(int(m.group(1)), 1) if m else 1


def is_decode(trace, steps) -> bool:
    """True when a step makes tokens (``tokens_per_step`` is not None)."""
    return tokens_per_step(trace, steps) is not None


@dataclasses.dataclass(frozen=True)
class Budget:
    """Per-step budget of ``device``. ``steps``: number of steps (1 when the window is
    used); ``source``: ``Steps.source`` or ``"window"``; ``wall_ns``/``gpu_busy_ns``/
    ``idle_ns``: medians per step (int ns); ``idle_share`` = idle / wall;
    ``steps_per_s`` = 1e9 / wall_ns, None when the step has no length (every event at
    one time: no rate can be measured); ``tokens_per_s`` = ``tokens_per_step`` x that
    rate, a token rate only when ``decode`` (``tokens_per_step``: the step is a decode
    step; the batch its name gives, else 1) — show it as tokens/s only then (else it is
    the step rate); ``class_idle_ns``: idle per cause class per step: ``idle_ns``
    split as the typical steps split theirs by class (``step_class_ns``)."""

    device: int
    steps: int
    source: str
    wall_ns: int
    gpu_busy_ns: int
    idle_ns: int
    idle_share: float
    tokens_per_s: float | None
    class_idle_ns: dict
    steps_per_s: float | None = None
    decode: bool = False
    #: tokens a step makes (``tokens_per_step``); None when not a decode step
    tokens_per_step: int | None = None
    #: how many of the ``steps`` are typical (``typical_steps``): the split is theirs
    typical_steps: int = 0
    #: (least, most) idle ns of the other steps, left out of the split; None when all
    #: steps are typical
    other_steps_idle_ns: tuple[int, int] | None = None
    #: idle per step of the one-time (warm-up) gaps inside the steps, when every typical
    #: step holds some (else those steps are left out: ``warm_up_steps``): ``idle_ns``
    #: split as the typical steps split theirs, this share is in no ``class_idle_ns``
    #: and no what-if (a step that holds a graph capture keeps its wall time, but no
    #: class and no fix removes the capture from the steps after it); the classes and
    #: this add up to ``idle_ns``
    one_time_idle_ns: int = 0
    #: typical steps left out of the split because they hold warm-up (a one-time gap)
    warm_up_steps: int = 0
    #: each selected gap's class ns inside the typical steps (``step_class_ns``; rows:
    #: the budget device's gaps, warm-up left out, in gap order), kept for the what-ifs
    _typical_class_ns: np.ndarray | None = dataclasses.field(default=None, repr=False, compare=False)
    #: ns of the one-time gaps inside the typical steps, the denominator's other part
    _typical_one_time_ns: float = dataclasses.field(default=0.0, repr=False, compare=False)
    #: bool per gap: the gaps whose class ns split the idle (``steady_gaps`` of the
    #: budget device; edge gaps too only when the typical steps hold nothing else)
    _split_gaps: np.ndarray | None = dataclasses.field(default=None, repr=False, compare=False)


@dataclasses.dataclass(frozen=True)
class WhatIf:
    """Projection of a what-if. ``removed_ns``: idle removed per step; ``projected_step_ns``
    = wall - removed (never below GPU busy); ``steps_per_s`` = 1e9 / projected;
    ``tokens_per_s`` = ``tokens_per_step`` x that (tokens/s only when ``decode``, as in
    ``Budget``; both None when the projected step has no length);
    ``assumptions``: the printed assumptions, in words with numbers."""

    wall_ns: int
    removed_ns: int
    projected_step_ns: int
    tokens_per_s: float | None
    speedup: float
    assumptions: list[str]
    steps_per_s: float | None = None
    decode: bool = False
    tokens_per_step: int | None = None


def compute_budget(diag) -> Budget | None:
    """Budget of the busiest device of ``diag`` (a ``Diagnosis``); None without GPU ops."""
    if not diag.devices:
        return None
    dev = max(diag.devices, key=lambda d: (d.busy_ns, -d.device))
    trace = diag.trace
    ks, ke = device_union(trace, dev.device, valid=valid_timing_mask(trace))
    s0, s1, source = _step_bounds(diag, dev)
    wall = s1 - s0
    busy = coverage(ks, ke, s0, s1)
    nsteps = int(wall.size)
    wall_med = int(np.median(wall))
    busy_med = int(np.median(busy))
    g = diag.gaps
    sel = steady_gaps(diag) & (g.device == dev.device)
    once = (g.device == dev.device) & g.one_time if g.one_time is not None else np.zeros(len(g), bool)
    idle = wall_med - busy_med
    idle_k = wall - busy
    typical = typical_steps(idle_k)  # whose gaps split the idle by cause
    # a step that holds warm-up (a one-time gap) is no steady-state step: the steps
    # without one split the idle; when every typical step holds some, its share is
    # split off as one-time idle (sglang_decode/bs_32's one step holds a 32.7 ms graph
    # capture beside a 0.97 ms gap: split over that gap's classes alone, its 59 us of
    # sync read 2 ms per step and removing host 11x the steps/s)
    ot_ns = 0.0
    warm_up = np.zeros(nsteps, dtype=bool)
    if once.any():
        ou, oe = union_intervals(g.start_ns[once], g.end_ns[once])
        warm_up = typical & (coverage(ou, oe, s0, s1) > 0)
        if warm_up[typical].all():  # no typical step without warm-up
            warm_up[:] = False
            us, ue = union_intervals(s0[typical], s1[typical])
            ot_ns = float(coverage(us, ue, g.start_ns[once], g.end_ns[once]).sum())
        typical &= ~warm_up
    cls = np.zeros(len(Cause), np.float64)
    inside = None
    if g.class_ns is not None and sel.any():
        inside = step_class_ns(g, sel, s0, s1, typical)
        cls = inside.sum(axis=0)
    if g.class_ns is not None and cls.sum() <= 0:
        # the typical steps idle only at the capture's edges (two steps, one profiler
        # start and one stop): those gaps split the idle, rather than nothing
        with_edges = (g.device == dev.device) & ~once
        if (with_edges & ~sel).any():
            sel = with_edges
            inside = step_class_ns(g, sel, s0, s1, typical)
            cls = inside.sum(axis=0)
    # the median step's idle split as the typical steps split theirs: the classes add
    # up to it (a mean over steps read 176 ms of host idle in a 160 ms step of
    # param/resnet_kineto, whose 29 steps include one of 4.4 s; a split pooled over all
    # the steps still read host there, where a typical step idles under copies)
    in_ns = float(cls.sum()) + ot_ns
    class_idle = {c.label: (int(round(idle * cls[int(c)] / in_ns)) if in_ns > 0 else 0) for c in Cause}
    one_time_idle = int(round(idle * ot_ns / in_ns)) if in_ns > 0 else 0
    rate = 1e9 / wall_med if wall_med > 0 else None  # no length: no rate (never 0 steps/s)
    tps = tokens_per_step(trace, diag.steps)
    return Budget(
        dev.device,
        nsteps,
        source,
        wall_med,
        busy_med,
        idle,
        idle / wall_med if wall_med > 0 else 0.0,
        rate * tps if rate is not None and tps is not None else rate,
        class_idle,
        steps_per_s=rate,
        decode=tps is not None,
        tokens_per_step=tps,
        typical_steps=int(typical.sum()),
        warm_up_steps=int(warm_up.sum()),
        _split_gaps=sel,
        other_steps_idle_ns=(int(idle_k[~typical].min()), int(idle_k[~typical].max())) if (~typical).any() else None,
        one_time_idle_ns=one_time_idle,
        _typical_class_ns=inside,
        _typical_one_time_ns=ot_ns,
    )


def steady_gaps(diag) -> np.ndarray:
    """bool per gap of ``diag``: steady-state idle, the gaps a per-step figure is made
    of: neither a one-time (warm-up) cost (``Gaps.one_time``) nor an edge gap
    (``steps.edge_gaps``)."""
    g = diag.gaps
    keep = ~edge_gaps(g, diag.steps, drawn=is_drawn(diag.trace))
    if g.one_time is not None:
        keep &= ~g.one_time
    return keep


def _step_bounds(diag, dev) -> tuple[np.ndarray, np.ndarray, str]:
    """(starts ns, ends ns, source) of the steps the budget is over: the steps, or the
    device's window when none are known."""
    if diag.steps is not None and len(diag.steps):
        return diag.steps.start_ns, diag.steps.end_ns, diag.steps.source
    return np.array([dev.window_start_ns]), np.array([dev.window_end_ns]), "window"


#: A step whose idle is within this factor of the median step's is a typical one: its
#: gaps split the idle per step by cause (a step with a one-off stall, or a slow mode of
#: a bimodal loop, is not).
TYPICAL_IDLE_FACTOR = 1.5


def typical_steps(idle_ns: np.ndarray) -> np.ndarray:
    """bool per step: its idle (wall - GPU busy, ns) is within ``TYPICAL_IDLE_FACTOR``
    of the median step's (all steps when the median idle is 0; the steps nearest it
    when none is within: an even count of steps of two modes)."""
    med = float(np.median(idle_ns))
    if med <= 0:
        return np.ones(idle_ns.size, dtype=bool)
    keep = (idle_ns <= TYPICAL_IDLE_FACTOR * med) & (idle_ns * TYPICAL_IDLE_FACTOR >= med)
    if not keep.any():  # the median falls between two modes (two steps of 9.2 and 0.05 ms)
        off = np.abs(idle_ns - med)
        keep = off == off.min()
    return keep


def _inside(a: np.ndarray, b: np.ndarray, us: np.ndarray, ue: np.ndarray) -> np.ndarray:
    """float64 share of each ``[a, b)`` covered by the union ``us``/``ue`` (0 for an
    empty interval)."""
    return np.where(b > a, coverage(us, ue, a, np.maximum(a, b)) / np.maximum(b - a, 1), 0.0)


def class_ns_inside(g, sel: np.ndarray, us: np.ndarray, ue: np.ndarray) -> np.ndarray:
    """float64 (selected gaps x ``Cause``) ns of each class of the gaps ``sel`` inside
    the union of intervals ``us``/``ue`` (ns), placed where the classification put them
    (``classify``: the sync cliff ``[sync_from, launch_from)``, the exposed launch path
    ``[launch_from, queued_until)``, the op's time in the queue ``[queued_until, end)``;
    the rest of a starved gap, and all of a queued one, spread evenly over its part)."""
    cn = g.class_ns[sel].astype(np.float64)
    a, b = g.start_ns[sel], g.end_ns[sel]
    if g.sync_from_ns is None or g.launch_from_ns is None:
        return cn * _inside(a, b, us, ue)[:, None]
    q = g.queued[sel] if g.queued is not None else np.zeros(a.size, dtype=bool)
    sf = np.clip(g.sync_from_ns[sel], a, b)
    lf = np.clip(g.launch_from_ns[sel], sf, b)
    qu = np.clip(g.queued_until_ns[sel], lf, b) if g.queued_until_ns is not None else b
    placed = np.zeros_like(cn)
    parts = ((int(Cause.SYNC), sf, lf), (int(Cause.LAUNCH), lf, qu), (int(Cause.DEPENDENCY), qu, b))
    for c, lo, hi in parts:
        placed[:, c] = np.minimum(cn[:, c], (hi - lo).astype(np.float64))
    head = np.maximum(cn - placed, 0.0)  # what the head [start, sync_from) holds
    out = head * _inside(a, sf, us, ue)[:, None]
    for c, lo, hi in parts:
        out[:, c] += placed[:, c] * _inside(lo, hi, us, ue)
    return np.where(q[:, None], cn * _inside(a, b, us, ue)[:, None], out)


def step_class_ns(g, sel: np.ndarray, s0: np.ndarray, s1: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """float64 (selected gaps x ``Cause``): the gaps' class ns inside the steps ``keep``
    (the typical ones, ``typical_steps``). Pooled over those steps, a gap across a step
    edge counts whole (the decode loop's logging before the edge and its ``.item()``
    wait after it), while a step with a one-off stall, or the slow mode of a bimodal
    loop, does not shape the split (param/resnet_kineto's typical step idles under
    copies; 14 of its 29 steps hold 120-670 ms host gaps)."""
    us, ue = union_intervals(s0[keep], s1[keep])
    return class_ns_inside(g, sel, us, ue)


def match_names(trace, names: tuple[str, ...]) -> np.ndarray:
    """Name ids equal to one of ``names``, else (for a name with no exact match)
    containing it, case-insensitively."""
    ids = []
    for want in names:
        exact = [k for k, s in enumerate(trace.names) if s == want]
        if not exact:
            w = want.lower()
            exact = [k for k, s in enumerate(trace.names) if w in s.lower()]
        ids.extend(exact)
    return np.array(sorted(set(ids)), dtype=np.int32)


def _removed_per_gap(diag, sel: np.ndarray, gaps, causes, names, remove_ns) -> tuple[np.ndarray, np.ndarray, int]:
    """What ``what_if`` removes of each gap: int64 ns per gap (capped at the gap), the
    bool mask of gaps removed whole, and the named segments' ns inside the gaps ``sel``."""
    trace = diag.trace
    g = diag.gaps
    n = len(g)
    removed = np.zeros(n, dtype=np.int64)
    if remove_ns is not None:
        removed += np.asarray(remove_ns, dtype=np.int64)
    whole = np.zeros(n, dtype=bool)
    if len(gaps):
        whole[np.asarray(gaps, dtype=np.int64)] = True
    if causes and g.class_ns is not None:
        removed += g.class_ns[:, [int(Cause(c)) for c in causes]].sum(axis=1)
    named_ns = 0
    name_ids = match_names(trace, tuple(names)) if names else np.zeros(0, np.int32)
    if name_ids.size and n:
        cpu = np.array([not ln.is_gpu for ln in trace.lanes], dtype=bool)
        m = np.isin(trace.name_id, name_ids) & cpu[trace.lane]
        us, ue = union_intervals(trace.start_ns[m], evidence_end(trace)[m])
        per_gap = coverage(us, ue, g.start_ns, g.end_ns)
        removed += per_gap
        named_ns = int(per_gap[sel].sum())
    dur = g.dur_ns
    return np.where(whole, dur, np.minimum(removed, dur)), whole, named_ns


def _removed_per_step(diag, sel: np.ndarray, removed: np.ndarray, whole: np.ndarray, causes) -> int:
    """ns per step removed, as the budget splits idle: the share of the typical steps'
    idle removed, of the median step's idle (so removing every class removes exactly
    that idle, less the one-time share, ``Budget.one_time_idle_ns``); the chosen classes
    where they lie, a whole gap or named time by its share."""
    b = diag.budget
    g = diag.gaps
    inside = b._typical_class_ns
    if not sel.any() or inside is None or inside.shape[0] != int(sel.sum()):
        return 0
    per_gap = inside.sum(axis=1)
    in_ns = float(per_gap.sum()) + b._typical_one_time_ns
    if in_ns <= 0:
        return 0
    cols = [int(Cause(c)) for c in causes]
    cls_in = inside[:, cols].sum(axis=1) if causes else 0.0
    share = per_gap / np.maximum(g.dur_ns[sel], 1)
    rest = removed[sel] - (g.class_ns[sel][:, cols].sum(axis=1) if causes else 0)
    got = np.minimum(cls_in + np.maximum(rest, 0) * share, per_gap)
    got = np.where(whole[sel], per_gap, got)
    return int(round(b.idle_ns * float(got.sum()) / in_ns))


def _assumptions(b: Budget, causes, names, removed_step: int, named_ns: int, projected: int) -> list[str]:
    """The what-if's stated assumptions, in the order every surface prints them."""
    launch_left = 0 if Cause.LAUNCH in tuple(Cause(c) for c in causes) else b.class_idle_ns.get("launch", 0)
    if b.decode and (b.tokens_per_step or 1) == 1:
        rate = f"One token per step (decode at batch 1): tokens/s = 1 / step time; measured over {b.steps} step(s) ({b.source})."
    elif b.decode:
        rate = (
            f"{b.tokens_per_step} tokens per step (the batch the step's name gives): tokens/s = "
            f"{b.tokens_per_step} / step time; measured over {b.steps} step(s) ({b.source})."
        )
    else:
        rate = f"Steps/s = 1 / step time (a step is not a token here: no tokens/s); measured over {b.steps} step(s) ({b.source})."
    out = [
        f"GPU work stays {fmt_dur(b.gpu_busy_ns)} per step: kernels are not changed; only idle time is removed.",
        f"Removed idle is not replaced by other waiting: the next launch moves earlier by the removed time ({fmt_dur(removed_step)} per step).",
        f"Launch overhead that is not removed stays ({fmt_dur(launch_left)} per step of launch-class idle).",
        "CPU work that is not removed stays on the critical path (e.g. "
        + ("sampling the next token)." if b.decode else "preparing the next batch)."),
        "CPU time removed while the GPU was busy does not shorten the step; only its overlap with idle gaps counts"
        + (f" ({fmt_dur(named_ns // max(b.steps, 1))} per step for the named segments)." if names else "."),
        rate,
    ]
    if projected == b.gpu_busy_ns and b.wall_ns - removed_step < b.gpu_busy_ns:
        out.append("The projection is capped at GPU busy time (the GPU cannot finish before its work).")
    return out


def what_if(diag, *, gaps=(), causes=(), names=(), remove_ns=None) -> WhatIf:
    """Project the step time when the chosen idle is removed.

    ``gaps``: gap indices removed whole; ``causes``: ``Cause`` values whose ns are
    removed from every gap; ``names``: CPU event names (verbatim, else substring) whose
    time inside gaps is removed; ``remove_ns``: int64 ns per gap removed (a finding's
    own share of each gap, ``findings``). Removal per gap is capped at the gap; named
    segments, classes and ``remove_ns`` are assumed disjoint. Edge gaps and one-time
    costs (``steady_gaps``) are in no step's figure, so in no what-if. Per step = the share of the typical steps' idle
    removed (``step_class_ns``: the chosen classes where they lie in them, whole gaps
    and named time by their share in them) of ``Budget.idle_ns``, as
    ``Budget.class_idle_ns`` splits it. The step never drops below GPU busy. Raises ``ValueError`` without a
    budget (no GPU ops).
    """
    b = diag.budget
    if b is None:
        raise ValueError("no GPU ops: nothing to project")
    g = diag.gaps
    # one-time costs and edge gaps are not in the budget, so not in a what-if
    sel = b._split_gaps if b._split_gaps is not None else steady_gaps(diag) & (g.device == b.device)
    removed, whole, named_ns = _removed_per_gap(diag, sel, gaps, causes, names, remove_ns)
    removed_step = _removed_per_step(diag, sel, removed, whole, causes)
    projected = max(b.wall_ns - removed_step, b.gpu_busy_ns)
    rate = 1e9 / projected if projected > 0 else None
    return WhatIf(
        b.wall_ns,
        removed_step,
        projected,
        rate * (b.tokens_per_step or 1) if rate is not None and b.decode else rate,
        b.wall_ns / projected if projected > 0 else 1.0,
        _assumptions(b, causes, names, removed_step, named_ns, projected),
        steps_per_s=rate,
        decode=b.decode,
        tokens_per_step=b.tokens_per_step,
    )
