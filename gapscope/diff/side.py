"""One side of a diff: the steady-state steps of a diagnosed trace, its per-step
figures, GPU busy by kernel family, and the idle positions to match.

Definitions follow ``docs/definitions.md`` ("Busy and idle", "Budget and
what-if") and ``Diagnosis.budget``: the device is the budget's (the
busiest); a step is a ``Diagnosis.steps`` window, or the device's analysis window when
no steps are known; GPU busy is the union of kernel intervals over the device's
streams. **Warm-up** (a one-time cost the design keeps out of the budget): with three
steps or more the first step, and any step that overlaps a CPU range named like
``warm-up``; the other steps are the *steady* steps every figure here is taken over.
All times int64 ns.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from gapscope.analysis.busy import coverage, device_union, valid_timing_mask
from gapscope.analysis.diagnose import Diagnosis
from gapscope.analysis.types import Cause
from gapscope.diff.names import families_of, family
from gapscope.parsers.model import GPU_KINDS, Kind, Trace
from gapscope.report.damage import Damage, complete_until_ns, damage_of

__all__ = ["Side", "Position", "build_side", "WARMUP_RE", "mad"]

#: A CPU range whose steps are warm-up, not steady state.
WARMUP_RE = re.compile(r"warm[\s_-]?up", re.IGNORECASE)
#: A launch call that replays a captured CUDA/HIP graph (``cudaGraphLaunch``), or an
#: ASCII timeline's "launch fused decode graph".
GRAPH_RE = re.compile(r"graph", re.IGNORECASE)
#: Fewest steps for the first one to count as warm-up.
WARMUP_MIN_STEPS = 3
#: Fewest GPU ops (kernels, copies, memsets) the device's window needs to stand for a
#: step when no steps are known: one op's own duration is not a step of a loop.
WINDOW_MIN_OPS = 2


def mad(values: np.ndarray) -> int:
    """Median absolute deviation from the median (int ns; 0 for fewer than 2 values):
    the spread of a per-step figure, robust to the odd slow step."""
    v = np.asarray(values, dtype=np.float64)
    if v.size < 2:
        return 0
    return int(round(float(np.median(np.abs(v - np.median(v))))))


@dataclasses.dataclass(frozen=True, eq=False)
class Position:
    """Idle at one position of the step: a recurring group (``kind == "group"``,
    ``ref`` = ``GapGroup.id``) or, in a one-step trace, one gap (``"gap"``, ``ref`` =
    gap index). Figures over the steady steps: ``idle_per_step_ns`` = member idle /
    steady steps; ``steps_with`` of ``steps_total`` steady steps hold a member;
    ``median_ns``: median of its idle in those steps; ``spread_ns``: ``mad`` of its idle
    in every steady step (0 where it is absent). ``prev_name`` /
    ``next_name``: the GPU ops around it (most common over the members; ``step start``
    / ``step end`` at an edge) and their ``family``; ``boundary``: the stretch wraps
    the step boundary (idle at the end of one step and the start of the next);
    ``rel_pos``: median start within its step, as a fraction of the step (of the
    members that do not start at the step start). ``cause``,
    ``cause_share``, ``secondary``, ``secondary_share``: class mix of the member idle
    (``Gaps.class_ns``). ``leading_ns`` / ``trailing_ns``: per step, the parts at the
    step start / end; ``launch_name``: the launch call of the op that ends the leading
    part (or the gap)."""

    kind: str
    ref: int
    label: str
    prev_name: str
    next_name: str
    prev_family: str
    next_family: str
    boundary: bool
    rel_pos: float
    idle_per_step_ns: int
    median_ns: int
    spread_ns: int
    steps_with: int
    steps_total: int
    cause: Cause
    cause_share: float
    secondary: Cause | None
    secondary_share: float
    gap_indices: np.ndarray
    leading_ns: int = 0
    trailing_ns: int = 0
    launch_name: str | None = None


@dataclasses.dataclass(frozen=True, eq=False)
class Side:
    """Everything the diff needs from one diagnosed trace.

    ``device``: the budget device (-1 without GPU ops); ``steps_source``: ``Steps.source``
    or ``"window"`` (or ``"none"`` without GPU ops); ``step_start_ns`` /
    ``step_end_ns``: all steps; ``steady``: bool per step; ``excluded``: (step index,
    reason) of the warm-up steps. Per steady step (int64 arrays): ``wall_ns``,
    ``busy_ns``; ``class_ns`` of shape (steady steps, classes): gap idle per cause class
    (gaps counted in the step where they start). ``family_names`` / ``family_busy_ns``:
    kernel families and their busy time per steady step (sum of kernel durations);
    ``family_example``: one verbatim kernel name per family. ``graph_launches``: names
    of graph launch calls; ``graph_busy_ns``: per steady step, the kernel time replayed
    from a graph (launched by such a call, or itself named like a graph, as in an ASCII
    timeline); ``gpu``: the device's ``deviceProperties`` entry or None;
    ``decode``: a step makes one token (``Budget.decode``). ``damage``: what the
    loader's warnings say (``gapscope.report.damage``); ``incomplete``: (step index,
    reason) of the steps left out because they are not known to be complete (the file
    was cut off during or before them, the step has no length, or the window holds a
    single GPU op): not steady, so no figure is taken over them."""

    trace: Trace
    diag: Diagnosis
    device: int
    steps_source: str
    steps_name: str | None
    step_start_ns: np.ndarray
    step_end_ns: np.ndarray
    steady: np.ndarray
    excluded: tuple[tuple[int, str], ...]
    wall_ns: np.ndarray
    busy_ns: np.ndarray
    class_ns: np.ndarray
    family_names: tuple[str, ...]
    family_busy_ns: np.ndarray
    family_example: tuple[str, ...]
    graph_launches: tuple[str, ...]
    gpu: dict | None
    decode: bool
    positions: tuple[Position, ...]
    graph_busy_ns: int = 0
    damage: Damage = Damage(False, None, 0)
    incomplete: tuple[tuple[int, str], ...] = ()

    @property
    def has_gpu(self) -> bool:
        return self.device >= 0

    @property
    def n_steady(self) -> int:
        return int(self.wall_ns.size)

    @property
    def idle_ns(self) -> np.ndarray:
        return self.wall_ns - self.busy_ns


def _steady_mask(trace: Trace, s0: np.ndarray, s1: np.ndarray) -> tuple[np.ndarray, list[tuple[int, str]]]:
    n = int(s0.size)
    steady = np.ones(n, dtype=bool)
    excluded: list[tuple[int, str]] = []
    if n >= WARMUP_MIN_STEPS:
        steady[0] = False
        excluded.append((0, f"the first of {n} steps (one-time costs: allocation, caches, lazy loading)"))
    ids = trace.name_ids_matching(lambda s: bool(WARMUP_RE.search(s)))
    if ids.size and n:
        cpu = np.array([not ln.is_gpu for ln in trace.lanes], dtype=bool)
        m = np.isin(trace.name_id, ids) & cpu[trace.lane] & (trace.dur_ns > 0)
        ws, we = trace.start_ns[m], trace.start_ns[m] + trace.dur_ns[m]
        for k in range(n):
            if steady[k] and ((ws < s1[k]) & (we > s0[k])).any():
                steady[k] = False
                excluded.append((k, "inside a range named like warm-up"))
    if not steady.any():  # nothing left: keep every step rather than none
        return np.ones(n, dtype=bool), []
    return steady, sorted(excluded)


def _mix(class_ns: np.ndarray) -> tuple[Cause, float, Cause | None, float]:
    """Primary class (largest ns; ties in ``Cause`` order) with its share, and the
    secondary (the next largest, None when it holds nothing)."""
    tot = int(class_ns.sum())
    if tot <= 0:
        return Cause.UNCLASSIFIED, 0.0, None, 0.0
    order = np.lexsort((np.arange(class_ns.size), -class_ns))
    p = int(order[0])
    s = int(order[1]) if class_ns.size > 1 and class_ns[order[1]] > 0 else None
    return (
        Cause(p),
        float(class_ns[p]) / tot,
        (Cause(s) if s is not None else None),
        (float(class_ns[s]) / tot if s is not None else 0.0),
    )


def build_side(trace: Trace, diag) -> Side:
    """The ``Side`` of ``trace`` and its ``Diagnosis`` ``diag``. Vectorised over events
    and gaps; Python loops only over groups, steps (warm-up ranges) and kernel names."""
    n_classes = len(Cause)
    empty = np.zeros(0, np.int64)
    budget = getattr(diag, "budget", None)
    graph = _graph_launches(trace)
    if budget is None:
        return Side(
            trace,
            diag,
            -1,
            "none",
            None,
            empty,
            empty,
            np.zeros(0, bool),
            (),
            empty,
            empty,
            np.zeros((0, n_classes), np.int64),
            (),
            empty,
            (),
            graph,
            None,
            False,
            (),
            0,
            damage_of(trace.warnings),
        )
    dev = int(budget.device)
    summary = next(d for d in diag.devices if d.device == dev)
    steps = diag.steps
    if steps is not None and len(steps):
        s0, s1 = steps.start_ns.astype(np.int64), steps.end_ns.astype(np.int64)
        source, sname = steps.source, steps.name
    else:
        s0 = np.array([summary.window_start_ns], np.int64)
        s1 = np.array([summary.window_end_ns], np.int64)
        source, sname = "window", None
    steady, excluded = _steady_mask(trace, s0, s1)
    damage = damage_of(trace.warnings)
    incomplete = _incomplete(trace, dev, damage, source, s0, s1)
    cut = {k for k, _why in incomplete}
    steady[list(cut)] = False
    excluded = [(k, why) for k, why in excluded if k not in cut]
    valid = valid_timing_mask(trace)
    ks, ke = device_union(trace, dev, valid=valid)
    busy = coverage(ks, ke, s0, s1).astype(np.int64)
    wall = s1 - s0
    keep = np.flatnonzero(steady)
    remap = np.full(s0.size, -1, np.int64)
    remap[keep] = np.arange(keep.size)

    def step_of(t_ns: np.ndarray) -> np.ndarray:
        k = np.searchsorted(s0, t_ns, side="right") - 1
        kc = np.maximum(k, 0)
        inside = (k >= 0) & (t_ns <= s1[kc])  # a gap may start at its step's end
        return np.where(inside, kc, -1)

    g = diag.gaps
    cn = g.class_ns if g.class_ns is not None else _unclassified(g)
    parts = _gap_step_parts(g, dev, s0, s1, remap)
    eg, est, eov = parts[0], parts[1], parts[2]
    cls = np.zeros((keep.size, cn.shape[1]), np.float64)
    if eg.size:
        frac = eov / np.maximum(np.asarray(g.dur_ns)[eg], 1)
        np.add.at(cls, est, cn[eg] * frac[:, None])
    cls = np.round(cls).astype(np.int64)

    # kernel families: busy per steady step (sum of durations; overlaps count twice)
    lane_dev = np.array([ln.device if ln.is_gpu else -1 for ln in trace.lanes], np.int64)
    km = (trace.kind == int(Kind.KERNEL)) & valid
    if lane_dev.size:
        km &= lane_dev[trace.lane] == dev
    kidx = np.flatnonzero(km)
    kstep = step_of(trace.start_ns[kidx])
    kidx = kidx[(kstep >= 0) & (remap[np.maximum(kstep, 0)] >= 0)]
    graph_ids = trace.name_ids_matching(lambda n: bool(GRAPH_RE.search(n)))
    replayed = np.isin(trace.name_id[kidx], graph_ids)
    if trace.flow_src.size and graph_ids.size:
        by_graph = np.isin(trace.name_id[trace.flow_src], graph_ids) & (trace.kind[trace.flow_src] == int(Kind.LAUNCH))
        replayed |= np.isin(kidx, trace.flow_dst[by_graph])
    graph_busy = int(trace.dur_ns[kidx][replayed].sum() // max(keep.size, 1))
    fam, labels = families_of(trace.names, trace.name_id[kidx])
    fam_busy = np.bincount(fam, weights=trace.dur_ns[kidx], minlength=len(labels)) / max(keep.size, 1)
    example = [trace.names[int(k)] for k in _mode_per_group(fam, trace.name_id[kidx].astype(np.int64), len(labels))]

    positions = _positions(trace, diag, dev, s0, s1, parts, keep.size, cn)
    return Side(
        trace,
        diag,
        dev,
        source,
        sname,
        s0,
        s1,
        steady,
        tuple(excluded),
        wall[keep],
        busy[keep],
        cls,
        tuple(labels),
        np.round(fam_busy).astype(np.int64),
        tuple(example),
        graph,
        _gpu(trace, dev),
        bool(getattr(budget, "decode", False)),
        tuple(positions),
        graph_busy,
        damage,
        tuple(incomplete),
    )


def _incomplete(trace: Trace, dev: int, damage: Damage, source: str, s0: np.ndarray, s1: np.ndarray) -> list:
    """(step index, reason) of the steps not known to be complete: a step of no length
    (every event at one time); in a cut-off file, the GPU window (it ends where the
    file does) or a step that ends after ``complete_until_ns``; a GPU window with fewer
    than ``WINDOW_MIN_OPS`` GPU ops (one op's duration is not a step); when the loader
    drew a range never closed to the end of the trace, a step that ends there (its
    end may be invented)."""
    out: list[tuple[int, str]] = []
    last_ns = int((trace.start_ns + trace.dur_ns).max()) if damage.open_ended and len(trace) else None
    cut = f"the file was cut off{f' at line {damage.truncated_line}' if damage.truncated_line is not None else ''}"
    until = complete_until_ns(trace, dev) if damage.truncated and source != "window" else None
    n_ops = 0
    if source == "window":
        lane_dev = np.array([ln.device if ln.is_gpu else -1 for ln in trace.lanes], np.int64)
        ops = np.isin(trace.kind, np.array([int(k) for k in GPU_KINDS if k != Kind.GPU_ANNOTATION], trace.kind.dtype))
        if lane_dev.size:
            n_ops = int((ops & (lane_dev[trace.lane] == dev)).sum())
    for k in range(int(s0.size)):
        if s1[k] <= s0[k]:
            out.append((k, "no length: every event of the step is at one time"))
        elif damage.truncated and source == "window":
            out.append((k, f"{cut}: the GPU window ends where the file does, so its end is not known"))
        elif damage.truncated and (until is None or s1[k] > until):
            out.append((k, f"{cut}: the step ends after the last GPU work recorded on every stream"))
        elif last_ns is not None and s1[k] >= last_ns:
            out.append((k, "a range is never closed and the step ends where the trace does, so its end is not known"))
        elif source == "window" and n_ops < WINDOW_MIN_OPS:
            out.append((k, f"no steps found and the GPU window holds {n_ops} GPU op: one op's duration is not a step"))
    return out


def _unclassified(g) -> np.ndarray:
    out = np.zeros((len(g), len(Cause)), np.int64)
    out[:, int(Cause.UNCLASSIFIED)] = g.dur_ns
    return out


def _graph_launches(trace: Trace) -> tuple[str, ...]:
    ids = trace.name_ids_matching(lambda s: bool(GRAPH_RE.search(s)))
    if ids.size == 0:
        return ()
    m = (trace.kind == int(Kind.LAUNCH)) & np.isin(trace.name_id, ids)
    return tuple(sorted({trace.names[int(k)] for k in np.unique(trace.name_id[m])}))


def _gpu(trace: Trace, device: int) -> dict | None:
    props = [p for p in (trace.source.device_properties or []) if isinstance(p, dict)]
    for p in props:
        if p.get("id") == device:
            return p
    return props[device] if 0 <= device < len(props) else None


def _gap_step_parts(g, dev: int, s0: np.ndarray, s1: np.ndarray, remap: np.ndarray) -> tuple[np.ndarray, ...]:
    """The gaps of ``dev`` cut at the step bounds: (gap index, steady step index,
    overlap ns, step index) per part inside a steady step, int64 arrays. A gap across a step
    boundary (the end of one step and the start of the next) counts in both steps by
    its time in each; idle outside every step or in a warm-up step is left out."""
    rows = np.flatnonzero(np.asarray(g.device) == dev)
    gs = np.asarray(g.start_ns, np.int64)[rows]
    ge = np.asarray(g.end_ns, np.int64)[rows]
    k0 = np.maximum(np.searchsorted(s0, gs, side="right") - 1, 0)
    k1 = np.searchsorted(s0, ge - 1, side="right") - 1
    ok = (k1 >= k0) & (ge > gs)
    rows, gs, ge, k0, k1 = rows[ok], gs[ok], ge[ok], k0[ok], k1[ok]
    cnt = k1 - k0 + 1
    eg = np.repeat(rows, cnt)
    first = np.repeat(np.cumsum(cnt) - cnt, cnt)
    ks = np.repeat(k0, cnt) + (np.arange(eg.size) - first)
    ov = np.minimum(np.repeat(ge, cnt), s1[ks]) - np.maximum(np.repeat(gs, cnt), s0[ks])
    st = remap[ks]
    keep = (ov > 0) & (st >= 0)
    return eg[keep], st[keep], ov[keep].astype(np.int64), ks[keep]


def _mode_per_group(group: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    """For each group id in ``range(n_groups)``, its most frequent value (ties: the
    smallest), -1 for a group with no element. int64 arrays; one ``lexsort``."""
    out = np.full(n_groups, -1, np.int64)
    if group.size == 0:
        return out
    o = np.lexsort((values, group))
    gs, vs = group[o], values[o]
    new = np.ones(o.size, bool)
    new[1:] = (gs[1:] != gs[:-1]) | (vs[1:] != vs[:-1])
    starts = np.flatnonzero(new)
    counts = np.diff(np.append(starts, o.size))
    rg, rv = gs[starts], vs[starts]
    best = np.lexsort((rv, -counts, rg))  # per group: most frequent, then smallest value
    first = np.ones(best.size, bool)
    first[1:] = rg[best][1:] != rg[best][:-1]
    out[rg[best][first]] = rv[best][first]
    return out


def _median_per_group(group: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    """float64 median of ``values`` per group id (NaN for an empty group)."""
    out = np.full(n_groups, np.nan)
    if group.size == 0:
        return out
    o = np.lexsort((values, group))
    gs, vs = group[o], values[o].astype(np.float64)
    sizes = np.bincount(gs, minlength=n_groups)
    lo = np.searchsorted(gs, np.arange(n_groups), side="left")
    has = sizes > 0
    a = lo[has] + (sizes[has] - 1) // 2
    b = lo[has] + sizes[has] // 2
    out[has] = (vs[a] + vs[b]) / 2
    return out


def _positions(trace, diag, dev, s0, s1, parts, n_steady, cn) -> list[Position]:
    """Positions of ``dev``: the recurring groups and, in a one-step trace, every gap
    outside them. Every figure is vectorised over the member gaps (``bincount``,
    ``lexsort`` per position id); the loop only builds the ``Position`` objects."""
    g = diag.gaps
    n = len(g)
    eg, est, eov, eks = parts
    dev_of = np.asarray(g.device)
    units: list[tuple[str, int, str]] = []
    pos_of = np.full(n, -1, np.int64)
    for grp in diag.groups:
        rows = np.asarray(grp.gap_indices, np.int64)
        rows = rows[dev_of[rows] == dev] if rows.size else rows
        pos_of[rows] = len(units)
        units.append(("group", int(grp.id), grp.label))
    if s0.size <= 1:  # one step: every gap is a position (groups need two steps)
        for i in np.flatnonzero((dev_of == dev) & (np.asarray(g.group) < 0)).tolist():
            pos_of[i] = len(units)
            units.append(("gap", int(i), ""))
    npos = len(units)
    if npos == 0:
        return []
    ns = max(n_steady, 1)
    steady_gap = np.zeros(n, bool)
    steady_gap[eg] = True
    pos_of = np.where(steady_gap, pos_of, -1)
    ep = pos_of[eg]
    sel = ep >= 0
    per_step = np.bincount(ep[sel] * ns + est[sel], weights=eov[sel], minlength=npos * ns).reshape(npos, ns)
    gs = np.asarray(g.start_ns, np.int64)
    ge = np.asarray(g.end_ns, np.int64)
    # parts at a step's head (the gap began at or before the step start) and tail
    head = (gs[eg] <= s0[eks])[sel]
    tail = (ge[eg] >= s1[eks])[sel]
    head_ns = np.bincount(ep[sel], weights=eov[sel] * head, minlength=npos)
    tail_ns = np.bincount(ep[sel], weights=eov[sel] * tail, minlength=npos)
    present = per_step > 0
    steps_with = present.sum(axis=1)
    total = per_step.sum(axis=1)
    med_present = _median_per_group(np.nonzero(present)[0], per_step[present], npos)
    row_med = np.median(per_step, axis=1)
    spread = np.median(np.abs(per_step - row_med[:, None]), axis=1) if ns > 1 else np.zeros(npos)
    members = np.flatnonzero(pos_of >= 0)
    mp = pos_of[members]
    k_of = np.clip(np.searchsorted(s0, gs[members], side="right") - 1, 0, max(s0.size - 1, 0))
    at_start = gs[members] <= s0[k_of]
    rel = (gs[members] - s0[k_of]) / np.maximum(s1[k_of] - s0[k_of], 1)
    rel_inner = _median_per_group(mp[~at_start], rel[~at_start], npos)
    rel_all = _median_per_group(mp, rel, npos)
    rel_pos = np.where(np.isnan(rel_inner), rel_all, rel_inner)
    none = len(trace.names)  # an op at a window edge: no name
    prev = np.asarray(g.prev_op)[members]
    nxt = np.asarray(g.next_op)[members]
    prev_id = _mode_per_group(mp, np.where(prev >= 0, trace.name_id[np.maximum(prev, 0)], none).astype(np.int64), npos)
    next_id = _mode_per_group(mp, np.where(nxt >= 0, trace.name_id[np.maximum(nxt, 0)], none).astype(np.int64), npos)
    # prefer a name over "no name" when some members have one (the two halves of a boundary stretch)
    prev_named = _mode_per_group(mp[prev >= 0], trace.name_id[prev[prev >= 0]].astype(np.int64), npos)
    next_named = _mode_per_group(mp[nxt >= 0], trace.name_id[nxt[nxt >= 0]].astype(np.int64), npos)
    prev_id = np.where(prev_named >= 0, prev_named, prev_id)
    next_id = np.where(next_named >= 0, next_named, next_id)
    launch = np.asarray(g.launch)[members]
    lm = launch >= 0
    launch_head = _mode_per_group(mp[lm & at_start], trace.name_id[launch[lm & at_start]].astype(np.int64), npos)
    launch_any = _mode_per_group(mp[lm], trace.name_id[launch[lm]].astype(np.int64), npos)
    launch_id = np.where(launch_head >= 0, launch_head, launch_any)
    cls = np.zeros((npos, cn.shape[1]), np.int64)
    np.add.at(cls, mp, cn[members])
    edge = g.edge if g.edge is not None else np.zeros(n, np.int8)
    any_edge = np.bincount(mp, weights=(edge[members] != 0), minlength=npos) > 0
    boundary = any_edge | ((head_ns > 0) & (tail_ns > 0))
    gap_rows = np.split(members[np.argsort(mp, kind="stable")], np.cumsum(np.bincount(mp, minlength=npos))[:-1])
    fam: dict[int, str] = {}

    def name_and_family(k: int, edge_name: str) -> tuple[str, str]:
        if k < 0 or k >= none:
            return edge_name, edge_name
        if k not in fam:
            fam[k] = family(trace.names[k])
        return trace.names[k], fam[k]

    out = []
    for k, (kind, ref, label) in enumerate(units):
        if steps_with[k] == 0:
            continue  # only in warm-up steps
        prev_name, prev_fam = name_and_family(int(prev_id[k]), "step start")
        next_name, next_fam = name_and_family(int(next_id[k]), "step end")
        mix = _mix(cls[k])
        out.append(
            Position(
                kind=kind,
                ref=ref,
                label=label or f"{prev_name} → {next_name}",
                prev_name=prev_name,
                next_name=next_name,
                prev_family=prev_fam,
                next_family=next_fam,
                boundary=bool(boundary[k]),
                rel_pos=float(rel_pos[k]),
                idle_per_step_ns=int(total[k] // ns),
                median_ns=int(med_present[k]),
                spread_ns=int(round(float(spread[k]))),
                steps_with=int(steps_with[k]),
                steps_total=int(n_steady),
                cause=mix[0],
                cause_share=mix[1],
                secondary=mix[2],
                secondary_share=mix[3],
                gap_indices=gap_rows[k],
                leading_ns=int(head_ns[k] // ns),
                trailing_ns=int(tail_ns[k] // ns),
                launch_name=trace.names[int(launch_id[k])] if launch_id[k] >= 0 else None,
            )
        )
    return out
