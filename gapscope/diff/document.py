"""The diff of two traces as one JSON-serialisable document (``gapscope diff --json``).

``build_diff_document`` is the single source of every figure and sentence: the text and
Markdown renderers read this dict, so the three outputs cannot disagree. Keys are
stable and documented in ``docs/diff-json.md``, with the conventions of the report's
document (``docs/report-json.md``: units in the key names, verbatim trace strings,
cause-class labels, ``null`` for missing values).

Definitions (stated in ``gapscope diff --help`` too):

- Per-step figures are medians over the **steady** steps of each trace (``side``:
  warm-up excluded), with their **spread** (median absolute deviation); ``ratio`` is
  after ÷ before.
- **Noise** of the step time: ``NOISE_K`` × the larger of the two spreads, at least
  ``NOISE_FLOOR_SHARE`` of the before step (one step has no spread).
- **Verdict**: ``faster`` / ``slower`` when the median step moved by more than the
  noise, or by more than the floor while every steady step of AFTER is slower (faster)
  than every one of BEFORE (``SEPARATE_MIN_STEPS`` or more each), else ``no change``.
  ``not comparable`` (no verdict) when either trace has no GPU work, or when the traces
  share less than ``UNRELATED_SHARE`` of their GPU busy time by kernel family and no
  graph capture explains it: one trace's kernel time mostly replayed from graphs whose
  kernels are not recorded, with GPU busy per step within ``WORK_RATIO`` of the other's
  (then the verdict says so). The verdict line ends with the differences that make it
  uncertain (``comparability.caveats``) and the damage the loader reported on either
  side (``judgement.caveats``).
- ``cannot judge`` (no verdict) when a side has no complete steady-state step
  (``judge.judgement``: its file was cut off before any step is known to be complete,
  or it has no step to measure); ``judgement.reasons`` says why. Each side's loader
  warnings are in ``before.warnings`` / ``after.warnings``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gapscope.analysis.card import card_for_gap, card_for_group
from gapscope.analysis.types import Cause
from gapscope.diff.findings import compare_findings, steady_state_gate
from gapscope.diff.judge import CANNOT_JUDGE, judgement
from gapscope.diff.match import NOISE_K, POSITION_TOL, STATUSES, UNCHANGED_SHARE, Match, match_positions
from gapscope.diff.side import Position, Side, build_side
from gapscope.report.damage import warning_rows
from gapscope.report.document import jsonable
from gapscope.report.fmt import device_label
from gapscope.units import fmt_delta, fmt_dur, fmt_dur_pair, fmt_rate

__all__ = [
    "SCHEMA",
    "build_diff_document",
    "diff_sides",
    "verdict_of",
    "NOISE_FLOOR_SHARE",
    "UNRELATED_SHARE",
    "SAME_MIX_SHARE",
    "WORK_RATIO",
    "SEPARATE_MIN_STEPS",
    "THRESHOLDS",
    "separation_of",
    "side_damage_text",
    "not_compared_text",
]

#: Identifies the document layout; bumped only on an incompatible change.
SCHEMA = "gapscope.diff/1"
#: The noise is at least this share of the before step (a one-step trace has no spread).
NOISE_FLOOR_SHARE = 0.01
#: Below this share of GPU busy time in common kernel families, the traces are unrelated.
UNRELATED_SHARE = 0.2
#: Below this share, the kernel mix is stated as different.
SAME_MIX_SHARE = 0.9
#: GPU busy per step changing more than this factor with the same kernels is stated.
WORK_RATIO = 1.5
#: Steady steps each trace needs before "every AFTER step is slower than every BEFORE
#: step" counts as beyond noise (5 and 5 that separate: 2 in 252 by chance).
SEPARATE_MIN_STEPS = 5

#: Every threshold, as it appears in the document and in ``--help``.
THRESHOLDS = dict(
    noise_k=NOISE_K,
    noise_floor_share=NOISE_FLOOR_SHARE,
    unchanged_share=UNCHANGED_SHARE,
    position_tol_share=POSITION_TOL,
    same_mix_share=SAME_MIX_SHARE,
    unrelated_share=UNRELATED_SHARE,
    work_ratio=WORK_RATIO,
    separate_min_steps=SEPARATE_MIN_STEPS,
)


def diff_sides(before_trace, before_diag, after_trace, after_diag) -> tuple[Side, Side, list[Match]]:
    """The two ``Side`` objects and their matched positions."""
    b = build_side(before_trace, before_diag)
    a = build_side(after_trace, after_diag)
    return b, a, match_positions(b.positions, a.positions, int(before_diag.params.min_gap_ns))


# ------------------------------------------------------------------ formatting
def fmt_ratio(r: float) -> str:
    """A speed ratio: one decimal from 2× (``3.0×``), else two (``1.25×``)."""
    return f"{r:.1f}×" if r >= 1.995 else f"{r:.2f}×"


# ------------------------------------------------------------------ figures
def _stat(values: np.ndarray) -> dict:
    from gapscope.diff.side import mad

    v = np.asarray(values, dtype=np.int64)
    if v.size == 0:
        return dict(median=None, spread=None)
    return dict(median=int(np.median(v)), spread=mad(v))


def _row(before: np.ndarray, after: np.ndarray) -> dict:
    b, a = _stat(before), _stat(after)
    out = dict(
        before_ns=b["median"],
        after_ns=a["median"],
        before_spread_ns=b["spread"],
        after_spread_ns=a["spread"],
        change_ns=None,
        ratio=None,
    )
    if b["median"] is not None and a["median"] is not None:
        out["change_ns"] = a["median"] - b["median"]
        out["ratio"] = a["median"] / b["median"] if b["median"] else None
    return out


def _mean_row(before: np.ndarray, after: np.ndarray, nb: int, na: int) -> dict:
    b = int(round(before.sum() / nb)) if nb else None
    a = int(round(after.sum() / na)) if na else None
    return dict(
        before_ns=b,
        after_ns=a,
        change_ns=(a - b) if a is not None and b is not None else None,
        ratio=(a / b) if a is not None and b else None,
    )


def _per_step(b: Side, a: Side) -> dict:
    rows: dict[str, Any] = dict(steps_before=b.n_steady, steps_after=a.n_steady)
    rows["wall_ns"] = _row(b.wall_ns, a.wall_ns)
    rows["gpu_busy_ns"] = _row(b.busy_ns, a.busy_ns)
    idle = _row(b.idle_ns, a.idle_ns)
    # idle per step = median wall - median busy (as Diagnosis.budget); its spread: of wall - busy per step
    for side, key in ((b, "before_ns"), (a, "after_ns")):
        if side.n_steady:
            idle[key] = int(np.median(side.wall_ns)) - int(np.median(side.busy_ns))
    if idle["before_ns"] is not None and idle["after_ns"] is not None:
        idle["change_ns"] = idle["after_ns"] - idle["before_ns"]
        idle["ratio"] = idle["after_ns"] / idle["before_ns"] if idle["before_ns"] else None
    rows["idle_ns"] = idle
    cls = {}
    for c in Cause:
        k = int(c)
        cb = b.class_ns[:, k] if b.class_ns.ndim == 2 and b.class_ns.shape[1] > k else np.zeros(b.n_steady, np.int64)
        ca = a.class_ns[:, k] if a.class_ns.ndim == 2 and a.class_ns.shape[1] > k else np.zeros(a.n_steady, np.int64)
        cls[c.label] = _mean_row(cb, ca, b.n_steady, a.n_steady)
    rows["idle_by_class_ns"] = cls
    decode = b.decode and a.decode
    key = "tokens_per_s" if decode else "steps_per_s"
    wb, wa = rows["wall_ns"]["before_ns"], rows["wall_ns"]["after_ns"]
    rb = 1e9 / wb if wb else None
    ra = 1e9 / wa if wa else None
    rows["rate_key"] = key
    rows[key] = dict(
        before=rb,
        after=ra,
        change=(ra - rb) if ra is not None and rb is not None else None,
        ratio=(ra / rb) if ra is not None and rb else None,
    )
    return rows


# ------------------------------------------------------------------ kernels
def _kernels(b: Side, a: Side) -> dict:
    fams: dict[str, dict] = {}
    for side, key in ((b, "before_ns"), (a, "after_ns")):
        for name, ns, ex in zip(side.family_names, side.family_busy_ns.tolist(), side.family_example):
            row = fams.setdefault(name, dict(family=name, example_name=ex, before_ns=0, after_ns=0))
            row[key] = int(ns)
    rows = sorted(fams.values(), key=lambda r: (-max(r["before_ns"], r["after_ns"]), r["family"]))
    for r in rows:
        r["change_ns"] = r["after_ns"] - r["before_ns"]
    tb = sum(r["before_ns"] for r in rows)
    ta = sum(r["after_ns"] for r in rows)
    common = None
    if tb > 0 and ta > 0:
        common = float(sum(min(r["before_ns"] / tb, r["after_ns"] / ta) for r in rows))
    return dict(families=rows, family_busy_before_ns=tb, family_busy_after_ns=ta, common_share=common)


# ------------------------------------------------------------------ comparability
def _gpu_text(side: Side) -> str | None:
    return device_label(side.gpu) if side.gpu is not None else None


def _comparability(b: Side, a: Side, kernels: dict, per_step: dict) -> dict:
    notes: list[str] = []
    caveats: list[str] = []  # the differences the verdict line repeats
    if not b.has_gpu or not a.has_gpu:
        which = " and ".join(n for n, s in (("BEFORE", b), ("AFTER", a)) if not s.has_gpu)
        no_gpu = f"no GPU kernels in {which}: nothing to compare"
        notes.append(no_gpu)
        return dict(comparable=False, reason=no_gpu, notes=notes, caveats=caveats, common_kernel_share=None)
    _device_notes(b, a, notes, caveats)
    _run_notes(b, a, notes, caveats)
    common = kernels["common_share"]
    graph = [n for n, s in (("BEFORE", b), ("AFTER", a)) if s.graph_launches]
    reason = None
    if common is not None and common < SAME_MIX_SHARE:
        graph, reason = _kernel_mix_notes(b, a, kernels, common, per_step, graph, notes, caveats)
    if len(graph) == 1 and (common is None or common >= UNRELATED_SHARE):
        side = b if graph[0] == "BEFORE" else a
        notes.append(f"only {graph[0]} replays captured graphs (`{side.graph_launches[0]}`)")
    work = _work_change_note(b, a, common, per_step["gpu_busy_ns"])
    if work:
        notes.append(work)
    if reason:
        notes.insert(0, reason)
    return dict(comparable=reason is None, reason=reason, notes=notes, caveats=caveats, common_kernel_share=common)


def _gpu_name(side: Side) -> str | None:
    return (side.gpu or {}).get("name")


def _device_notes(b: Side, a: Side, notes: list[str], caveats: list[str]) -> None:
    """Append to ``notes`` (and ``caveats``) where the two traces ran on different
    GPUs: the model, the device the figures are for, a GPU running behind the CPU."""
    gb, ga = _gpu_text(b), _gpu_text(a)
    nb, na = _gpu_name(b), _gpu_name(a)
    if nb and na and nb != na:
        notes.append(f"different GPU: BEFORE ran on {gb}, AFTER on {ga}")
        caveats.append("different GPU")
    elif (nb is None) != (na is None):
        notes.append(f"GPU recorded in one trace only: BEFORE {gb or 'not recorded'}, AFTER {ga or 'not recorded'}")
    if b.device != a.device:
        notes.append(
            f"the figures are for GPU {b.device} in BEFORE and GPU {a.device} in AFTER (the busiest device of each)"
        )
    behind = [n for n, s in (("BEFORE", b), ("AFTER", a)) if getattr(s.diag.steps, "on_gpu", False)]
    if behind:
        notes.append(
            f"{' and '.join(behind)}: the GPU ran behind the CPU, so the steps are the windows the GPU ran them in "
            "(a step's first GPU op to the next step's), not the CPU's step ranges"
        )


def _run_notes(b: Side, a: Side, notes: list[str], caveats: list[str]) -> None:
    """Append to ``notes`` (and ``caveats``) where the two runs differ: rank or world
    size, how the steps were found, the steady step count, tokens per step."""
    sb, sa = b.trace.source, a.trace.source
    if (sb.rank, sb.world_size) != (sa.rank, sa.world_size) and (sb.rank is not None or sa.rank is not None):
        notes.append(
            f"different rank: BEFORE rank {sb.rank} of {sb.world_size}, AFTER rank {sa.rank} of {sa.world_size}"
        )
        caveats.append("different rank" if sb.world_size == sa.world_size else "different world size")
    if (b.steps_source, b.steps_name) != (a.steps_source, a.steps_name):
        notes.append(f"steps found differently: BEFORE {_steps_text(b)}, AFTER {_steps_text(a)}")
    if b.n_steady != a.n_steady:
        notes.append(
            f"different step count: {b.n_steady} steady step(s) in BEFORE, {a.n_steady} in AFTER "
            "(every figure is per step)"
        )
    if b.decode != a.decode:
        notes.append("only one trace makes one token per step: rates are compared as steps/s")


def _kernel_mix_note(kernels: dict, common: float) -> str:
    """The note for a kernel mix below ``SAME_MIX_SHARE``: the common share and up to
    three families found in one trace only, per side."""
    only_b = [r["family"] for r in kernels["families"] if r["before_ns"] and not r["after_ns"]][:3]
    only_a = [r["family"] for r in kernels["families"] if r["after_ns"] and not r["before_ns"]][:3]
    bits = []
    if only_b:
        bits.append("only in BEFORE: " + ", ".join(f"`{f}`" for f in only_b))
    if only_a:
        bits.append("only in AFTER: " + ", ".join(f"`{f}`" for f in only_a))
    return f"different kernel mix: {100 * common:.0f}% of GPU busy time is in kernel families common to both" + (
        f" ({'; '.join(bits)})" if bits else ""
    )


def _kernel_mix_notes(
    b: Side,
    a: Side,
    kernels: dict,
    common: float,
    per_step: dict,
    graph: list[str],
    notes: list[str],
    caveats: list[str],
) -> tuple[list[str], str | None]:
    """For a kernel mix below ``SAME_MIX_SHARE``: append the mix note and its caveat,
    and judge whether a captured graph of about the same GPU busy explains it.
    Returns the sides whose graphs to name (``graph``, or the replaying sides when a
    graph explains the mix) and the reason the traces are not comparable (None: they
    are)."""
    notes.append(_kernel_mix_note(kernels, common))
    busy_ratio = per_step["gpu_busy_ns"]["ratio"]
    replay = [
        n
        for n, sd in (("BEFORE", b), ("AFTER", a))
        if sd.family_busy_ns.sum() and sd.graph_busy_ns >= 0.5 * int(sd.family_busy_ns.sum())
    ]
    graph_explains = bool(replay) and busy_ratio is not None and 1 / WORK_RATIO <= busy_ratio <= WORK_RATIO
    if graph_explains and common < UNRELATED_SHARE:
        graph = replay
        side = b if graph[0] == "BEFORE" else a
        notes.append(
            f"{' and '.join(graph)} launches its GPU work as a captured graph "
            f"(`{side.graph_launches[0]}`) whose kernels are not recorded one by one: kernel "
            "families cannot be compared, only GPU busy in total (about the same: "
            f"{fmt_ratio(busy_ratio)})"
        )
        caveats.append("kernels inside a graph not recorded")
    else:
        caveats.append("different kernel mix")
    if not graph_explains and common < UNRELATED_SHARE:
        return graph, (
            f"the traces do not look like the same program: only {100 * common:.0f}% of GPU busy time is "
            "in kernel families common to both, and no graph capture of the same GPU work explains it"
        )
    return graph, None


def _work_change_note(b: Side, a: Side, common: float | None, busy: dict) -> str | None:
    """The note when GPU busy per step changed by more than ``WORK_RATIO`` with mostly
    (at least half) the same kernels, with the likely why; else None."""
    if not (
        common is not None and common >= 0.5 and busy["ratio"] and not (1 / WORK_RATIO <= busy["ratio"] <= WORK_RATIO)
    ):
        return None
    nb, na = _gpu_name(b), _gpu_name(a)
    why = (
        "the GPU differs"
        if nb and na and nb != na
        else "faster or slower kernels, or a different batch or input size (the trace does not record the batch)"
    )
    return (
        f"GPU work per step changed {fmt_ratio(max(busy['ratio'], 1 / busy['ratio']))} with mostly the same "
        f"kernels: {why}"
    )


def _steps_text(side: Side) -> str:
    if side.steps_source == "window":
        return "no steps (the GPU window is one step)"
    if side.steps_source == "none":
        return "no GPU work"
    n = int(side.steady.size)
    return f"{n} step(s) from {side.steps_source} `{side.steps_name}`"


# ------------------------------------------------------------------ verdict
def verdict_of(per_step: dict, comparability: dict, separation: str | None = None, judged: dict | None = None) -> dict:
    """The verdict (see the module docstring): ``verdict``, ``line``, ``change_ns``,
    ``change_share``, ``speedup`` (before ÷ after), ``noise_ns`` and ``noise_source``,
    ``separated`` and ``margin_ns`` (the change the verdict required: the noise, or
    the floor when the steps separate). ``separation``: ``"slower"`` / ``"faster"``
    when every steady step of AFTER is slower / faster than every one of BEFORE (at
    least ``SEPARATE_MIN_STEPS`` each), else None. ``judged``: ``judge.judgement``
    of the two sides (None: judged, no caveat)."""
    w = per_step["wall_ns"]
    b, a = w["before_ns"], w["after_ns"]
    out: dict[str, Any] = dict(
        verdict="not comparable",
        line="",
        change_ns=None,
        change_share=None,
        speedup=None,
        noise_ns=None,
        noise_source=None,
        separated=False,
        margin_ns=None,
    )
    if judged is not None and not judged["judged"]:
        out["verdict"] = CANNOT_JUDGE
        out["line"] = f"{CANNOT_JUDGE}: " + "; ".join(judged["reasons"])
        return out
    if b is None or a is None or not comparability["comparable"]:
        out["line"] = "no verdict: " + (comparability.get("reason") or "no steps to compare")
        return out
    spread = max(w["before_spread_ns"] or 0, w["after_spread_ns"] or 0)
    k_noise = int(round(NOISE_K * spread))
    floor = int(round(NOISE_FLOOR_SHARE * b))
    noise = max(k_noise, floor)
    nb, na = per_step["steps_before"], per_step["steps_after"]
    if k_noise >= floor:
        src = f"{NOISE_K:g} × the larger step spread (median absolute deviation over {nb} and {na} steady steps)"
    elif nb <= 1 and na <= 1:
        src = f"one step each, so no spread: {100 * NOISE_FLOOR_SHARE:g}% of the before step"
    else:
        src = f"{100 * NOISE_FLOOR_SHARE:g}% of the before step (the steps hardly vary)"
    d = a - b
    sep = (separation == "slower" and d > floor) or (separation == "faster" and d < -floor)
    margin = floor if sep and abs(d) <= noise else noise
    out.update(
        change_ns=d,
        change_share=d / b if b else None,
        speedup=b / a if a else None,
        noise_ns=noise,
        noise_source=src,
        separated=bool(sep),
        margin_ns=margin,
    )
    pair = fmt_dur_pair(b, a)
    why = f"noise ±{fmt_dur(noise)}"
    if sep and abs(d) <= noise:
        word = "slower" if d > 0 else "faster"
        why += f", but every one of the {na} AFTER steps is {word} than all {nb} BEFORE steps"
    if d < -margin:
        out["verdict"] = "faster"
        shorter = f"{fmt_ratio(b / a)} shorter" if a > 0 else "down to nothing"
        out["line"] = f"faster: step {pair}, {shorter} ({fmt_delta(d)}; {why})"
    elif d > margin:
        out["verdict"] = "slower"
        out["line"] = f"slower: step {pair}, {100 * d / b:.1f}% longer ({fmt_delta(d)}; {why})"
    else:
        out["verdict"] = "no change"
        out["line"] = f"no change beyond noise: step {pair} ({fmt_delta(d)}; {why})"
    caveats = list(comparability.get("caveats") or []) + list((judged or {}).get("caveats") or [])
    if caveats:
        out["line"] += " — with care: " + ", ".join(caveats)
    return out


def separation_of(b: Side, a: Side) -> str | None:
    """``"slower"`` when every steady step of ``a`` is longer than every one of ``b``,
    ``"faster"`` when every one is shorter, else None; None with fewer than
    ``SEPARATE_MIN_STEPS`` steady steps on either side (too few to tell)."""
    if b.n_steady < SEPARATE_MIN_STEPS or a.n_steady < SEPARATE_MIN_STEPS:
        return None
    if int(a.wall_ns.min()) > int(b.wall_ns.max()):
        return "slower"
    if int(a.wall_ns.max()) < int(b.wall_ns.min()):
        return "faster"
    return None


def _codes(names) -> str:
    return ", ".join(f"`{n}`" for n in names)


def _kernel_change(kernels: dict | None, up: bool) -> str:
    """What moved GPU busy: ``new kernels (`bias_add_kernel`) added GPU work`` when
    families only in AFTER hold at least half of the rise (``… were removed`` for a
    fall), else ``the kernels got slower`` / ``faster``."""
    if kernels:
        fams = kernels["families"]
        delta = abs(kernels["family_busy_after_ns"] - kernels["family_busy_before_ns"])
        if up:
            new = [r for r in fams if r["after_ns"] and not r["before_ns"]]
            if new and delta and sum(r["after_ns"] for r in new) >= delta / 2:
                return f"new kernels ({_codes(r['family'] for r in new[:3])}) added GPU work"
        else:
            gone = [r for r in fams if r["before_ns"] and not r["after_ns"]]
            if gone and delta and sum(r["before_ns"] for r in gone) >= delta / 2:
                return f"kernels were removed ({_codes(r['family'] for r in gone[:3])})"
    return "the kernels got slower" if up else "the kernels got faster"


def _work_sentence(per_step: dict, verdict: dict, kernels: dict | None = None) -> str:
    """Whether the kernels or the gaps moved the step, in one sentence (issue 13)."""
    busy, idle = per_step["gpu_busy_ns"], per_step["idle_ns"]
    bb, ba, ib, ia = busy["before_ns"], busy["after_ns"], idle["before_ns"], idle["after_ns"]
    if bb is None or ba is None:
        return ""
    busy_txt = f"GPU busy {fmt_dur_pair(bb, ba)}"
    v = verdict["verdict"]
    if v in ("not comparable", CANNOT_JUDGE):
        return busy_txt + f"; idle {fmt_dur_pair(ib, ia)}"
    tol_b = max(NOISE_K * max(busy["before_spread_ns"] or 0, busy["after_spread_ns"] or 0), NOISE_FLOOR_SHARE * bb)
    tol_i = max(verdict["noise_ns"] or 0, NOISE_FLOOR_SHARE * max(ib, 1))
    idle_from = f"from {fmt_dur_pair(ib, ia).replace(' → ', ' to ')}"
    kernels_down = ba < bb - tol_b
    kernels_up = ba > bb + tol_b
    idle_down = ia < ib - tol_i
    idle_up = ia > ib + tol_i
    if v == "faster":
        how = f"the step is {fmt_ratio(verdict['speedup'])} shorter"
        if not kernels_down and idle_down:
            return f"{busy_txt}: the kernels did not get faster; {how} because idle fell {idle_from}"
        if kernels_down and not idle_down:
            return (
                f"{busy_txt}: {_kernel_change(kernels, False)}; idle stayed ({fmt_dur_pair(ib, ia)}): {how} "
                "because of the kernels"
            )
        gain = (bb - ba) + (ib - ia)
        share = 100 * (bb - ba) / gain if gain else 0
        return (
            f"{busy_txt} and idle {fmt_dur_pair(ib, ia)}: both shrank; the kernels account for {share:.0f}% of the gain"
        )
    if v == "slower":
        how = f"the step is {100 * verdict['change_share']:.1f}% longer"
        if not kernels_up and idle_up:
            return f"{busy_txt}: the kernels did not get slower; {how} because idle grew {idle_from}"
        if kernels_up and not idle_up:
            return f"{busy_txt}: {_kernel_change(kernels, True)}; idle stayed ({fmt_dur_pair(ib, ia)}): {how}"
        return f"{busy_txt} and idle {fmt_dur_pair(ib, ia)}: both grew"
    if kernels_down and idle_up:
        return f"{busy_txt}: {_kernel_change(kernels, False)}, but idle grew {idle_from}: the step did not change"
    if kernels_up and idle_down:
        return f"{busy_txt}: {_kernel_change(kernels, True)}, but idle fell {idle_from}: the step did not change"
    return f"{busy_txt}, idle {fmt_dur_pair(ib, ia)}: no change beyond noise"


# ------------------------------------------------------------------ groups
def _pos_json(p: Position | None) -> dict | None:
    if p is None:
        return None
    return dict(
        kind=p.kind,
        ref=p.ref,
        label=p.label,
        prev_name=p.prev_name,
        next_name=p.next_name,
        prev_family=p.prev_family,
        next_family=p.next_family,
        boundary=p.boundary,
        rel_pos_share=round(p.rel_pos, 6),
        idle_per_step_ns=p.idle_per_step_ns,
        median_ns=p.median_ns,
        spread_ns=p.spread_ns,
        steps_with_gap=p.steps_with,
        steps_total=p.steps_total,
        cause=p.cause.label,
        cause_share=p.cause_share,
        secondary=p.secondary.label if p.secondary is not None else None,
        secondary_share=p.secondary_share,
        leading_ns=p.leading_ns,
        trailing_ns=p.trailing_ns,
        launch_name=p.launch_name,
        gap_indices=[int(x) for x in p.gap_indices.tolist()],
    )


def _groups(matches: list[Match]) -> list[dict]:
    rows: list[dict[str, Any]] = []
    for m in matches:
        b = m.before.idle_per_step_ns if m.before else 0
        rows.append(
            dict(
                status=m.status,
                match=m.how,
                label=m.label,
                before=_pos_json(m.before),
                after=_pos_json(m.after),
                change_ns=m.change_ns,
                ratio=(m.after.idle_per_step_ns / b) if m.after is not None and b else None,
            )
        )
    rows.sort(key=lambda r: (-abs(r["change_ns"]), STATUSES.index(r["status"]), r["label"]))
    return rows


def class_text(p: dict | None) -> str:
    """``host, sync 22%``: a position's class with its secondary (when it holds 5% or
    more); ``-`` when absent."""
    if not p:
        return "-"
    if p.get("secondary") and (p.get("secondary_share") or 0) >= 0.05:
        return f"{p['cause']}, {p['secondary']} {100 * p['secondary_share']:.0f}%"
    return str(p["cause"])


def _where(p: Position) -> str:
    return "at the step boundary" if p.boundary else f"at {100 * p.rel_pos:.0f}% of the step"


def _left(a_side: Side, matches: list[Match]) -> dict | None:
    """The largest idle position of AFTER (what is left), with its card."""
    rows = [m for m in matches if m.after is not None]
    if not rows:
        return None
    m = max(rows, key=lambda r: (r.after.idle_per_step_ns, -r.after.rel_pos))  # type: ignore[union-attr]
    p = m.after
    assert p is not None
    diag = a_side.diag
    card = card_for_group(diag, p.ref) if p.kind == "group" else card_for_gap(diag, p.ref)
    parts = []
    if p.boundary and p.leading_ns and p.trailing_ns:
        launch = f" (launched by `{p.launch_name}`)" if p.launch_name else ""
        parts.append(
            f"{fmt_dur(p.leading_ns)} from the step start until `{p.next_family}` starts{launch}, "
            f"{fmt_dur(p.trailing_ns)} from the end of `{p.prev_family}` to the step end"
        )
    status = {"appeared": "new", "unchanged": "unchanged", "shrank": "shrank", "grew": "grew"}.get(m.status, m.status)
    line = (
        f"`{p.prev_family} → {p.next_family}` {_where(p)}, {fmt_dur(p.idle_per_step_ns)} per step ({status}; "
        f"{class_text(_pos_json(p))}; smell: {card.smell})"
    )
    if parts:
        line += ": " + "; ".join(parts)
    return dict(status=m.status, position=_pos_json(p), card=jsonable(card), line=line)


def _side_json(side: Side, path: str) -> dict:
    src = side.trace.source
    return dict(
        path=path or src.path,
        format=src.format,
        trace_name=src.trace_name,
        event_count=len(side.trace),
        gpu=_gpu_text(side),
        device=side.device if side.has_gpu else None,
        rank=src.rank,
        world_size=src.world_size,
        decode=side.decode,
        steps=dict(
            source=side.steps_source,
            name=side.steps_name,
            count=int(side.steady.size),
            steady_count=side.n_steady,
            excluded=[dict(index=k, reason=r) for k, r in side.excluded],
            incomplete=[dict(index=k, reason=r) for k, r in side.incomplete],
        ),
        graph_launches=list(side.graph_launches),
        position_count=len(side.positions),
        damage=side.damage.as_json(),
        warnings=warning_rows(side.trace.warnings),
    )


def build_diff_document(
    before_trace, before_diag, after_trace, after_diag, *, version: str = "", paths: tuple[str, str] = ("", "")
) -> dict:
    """The whole diff as a dict of JSON types (see ``docs/diff-json.md``).

    ``*_trace``: loaded ``Trace``; ``*_diag``: its ``Diagnosis`` (same ``Params`` for
    both); ``paths``: the paths as given on the command line (default: the traces'
    own). Computes one card (what is left); everything else is array arithmetic over
    the two diagnoses.
    """
    b, a, matches = diff_sides(before_trace, before_diag, after_trace, after_diag)
    per_step = _per_step(b, a)
    kernels = _kernels(b, a)
    comp = steady_state_gate(_comparability(b, a, kernels, per_step), before_diag, after_diag)
    judged = judgement(b, a)
    if not judged["judged"]:
        # a side without complete steps has no positions or kernel time to compare: a
        # position would read "died", a family "−100%"
        matches = []
        kernels.update(families=[], common_share=None)
    verdict = verdict_of(per_step, comp, separation_of(b, a), judged)
    kernels["sentence"] = _work_sentence(per_step, verdict, kernels)
    groups = _groups(matches)
    counts = {s: sum(1 for g in groups if g["status"] == s) for s in STATUSES}
    change = {s: sum(g["change_ns"] for g in groups if g["status"] == s) for s in STATUSES}
    return dict(
        schema=SCHEMA,
        gapscope_version=version,
        thresholds=dict(THRESHOLDS),
        params=jsonable(before_diag.params),
        before=_side_json(b, paths[0]),
        after=_side_json(a, paths[1]),
        comparability=comp,
        judgement=judged,
        verdict=verdict,
        per_step=per_step,
        kernels=kernels,
        group_counts=counts,
        group_change_ns=change,
        groups=groups,
        left=_left(a, matches) if a.has_gpu and judged["judged"] else None,
        findings=compare_findings(before_diag, after_diag),
    )


def side_damage_text(side: dict) -> str:
    """``cut off at line 462; 2 warnings``: the damage and warning count of one side of
    the document (``""`` when the loader said nothing)."""
    d, n = side.get("damage") or {}, len(side.get("warnings") or [])
    parts = []
    if d.get("truncated"):
        parts.append("cut off" + (f" at line {d['truncated_line']}" if d.get("truncated_line") is not None else ""))
    if d.get("repaired_count"):
        parts.append(f"{d['repaired_count']} repair(s) on load")
    if n:
        parts.append(f"{n} loader warning{'s' if n != 1 else ''}")
    return "; ".join(parts)


def not_compared_text(doc: dict) -> str | None:
    """The line that stands for a table the diff does not compare (it cannot be
    judged: ``judge.CANNOT_JUDGE``), or None when it compares."""
    if doc["verdict"]["verdict"] != CANNOT_JUDGE:
        return None
    return "Not compared: the diff cannot be judged (see the verdict)."


def rate_text(per_step: dict) -> tuple[str, str]:
    """(label, ``952 → 2,874``) of the per-step rate row."""
    key = per_step["rate_key"]
    r = per_step[key]
    label = "tokens/s" if key == "tokens_per_s" else "steps/s"
    return label, f"{fmt_rate(r['before'])} → {fmt_rate(r['after'])}"
