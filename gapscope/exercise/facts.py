"""Figures of a trace that exercises ask about, computed from the timeline and the
diagnosis, each with the computation written out for feedback.

Definitions follow docs/definitions.md and match ``Diagnosis.budget``
(``analysis/budget.py``): the device is the busiest one; GPU busy is the union of kernel
intervals (never a sum of durations); a step is a ``Diagnosis.steps`` window, or the
device's analysis window when no steps are known; with several steps wall and busy are
medians per step and idle = wall - busy; tokens/s assumes one token per step. Times are
int64 ns, written by ``gapscope.units``. No UI imports.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from gapscope.exercise.model import GapSelector, Projection
from gapscope.parsers.model import Kind, Trace
from gapscope.units import fmt_dur, fmt_in, offset_column_unit

__all__ = ["Figure", "TraceFacts", "fill", "merge_intervals"]


def merge_intervals(start_ns: np.ndarray, end_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of [start, end) intervals (int64 arrays, any order) as sorted disjoint
    (start, end) int64 arrays; touching intervals merge."""
    if start_ns.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    o = np.argsort(start_ns, kind="stable")
    s, e = start_ns[o].astype(np.int64), end_ns[o].astype(np.int64)
    run_end = np.maximum.accumulate(e)
    new = np.ones(s.size, dtype=bool)
    new[1:] = s[1:] > run_end[:-1]
    idx = np.flatnonzero(new)
    ends = np.append(idx[1:], s.size) - 1
    return s[idx], run_end[ends]


def _clip(s: np.ndarray, e: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    cs, ce = np.maximum(s, lo), np.minimum(e, hi)
    keep = ce > cs
    return cs[keep], ce[keep]


def _measure(s: np.ndarray, e: np.ndarray) -> int:
    return int((e - s).sum()) if s.size else 0


@dataclasses.dataclass(frozen=True)
class Figure:
    """A computed quantity: ``value`` in its natural unit (ns for times, percent for
    shares, tokens/s for rates) and ``work``, the computation as one line of text."""

    value: float
    unit: str
    work: str


class TraceFacts:
    """Figures of one trace (its busiest GPU device) and its diagnosis.

    ``trace``: a ``gapscope.parsers.Trace``; ``diag``: an ``gapscope.analysis.Diagnosis`` of it. Positions in
    feedback are relative to ``origin_ns`` (the first event of the trace), all in ``time_unit``:
    the ``gapscope.units.offset_column_unit`` of the trace's span (ms for the bundled traces),
    so the positions of one exercise compare digit by digit; durations by ``fmt_dur``.
    """

    def __init__(self, trace: Trace, diag) -> None:
        self.trace = trace
        self.diag = diag
        self.origin_ns = int(trace.extent_ns[0])
        self.time_unit = offset_column_unit(int(trace.extent_ns[1]) - self.origin_ns)
        devices = list(getattr(diag, "devices", []) or [])
        if devices:
            dev = max(devices, key=lambda d: (d.busy_ns, -d.device))
            self.device = int(dev.device)
            window = (int(dev.window_start_ns), int(dev.window_end_ns))
        else:
            self.device = int((trace.devices() or [0])[0])
            window = (int(trace.extent_ns[0]), int(trace.extent_ns[1]))
        lanes = np.array(trace.gpu_lanes(self.device), dtype=np.int32)
        m = np.isin(trace.lane, lanes) & (trace.kind == int(Kind.KERNEL))
        self.kernels = np.flatnonzero(m)
        ks, ke = trace.start_ns[m], trace.end_ns[m]
        steps = getattr(diag, "steps", None)
        if steps is not None and len(steps.start_ns):
            self.windows = [(int(a), int(b)) for a, b in zip(steps.start_ns, steps.end_ns)]
        else:
            self.windows = [window]
        busy_s, busy_e, busy_step = [], [], []
        for lo, hi in self.windows:
            s, e = merge_intervals(*_clip(ks, ke, lo, hi))
            busy_s.append(s)
            busy_e.append(e)
            busy_step.append(_measure(s, e))
        self.step_busy_s, self.step_busy_e = busy_s, busy_e
        self.busy_s = np.concatenate(busy_s) if busy_s else np.zeros(0, np.int64)
        self.busy_e = np.concatenate(busy_e) if busy_e else np.zeros(0, np.int64)
        self.n_steps = len(self.windows)
        self.wall_ns = int(np.median([hi - lo for lo, hi in self.windows]))
        self.busy_ns = int(np.median(busy_step)) if busy_step else 0

    # --------------------------------------------------------------- basics
    def rel(self, ns: int) -> str:
        """Position ``ns`` (absolute) relative to ``origin_ns``, in ``time_unit`` without
        its symbol (``0.590``): the caller writes the symbol once after a range."""
        return fmt_in(ns - self.origin_ns, self.time_unit, symbol=False)

    def gap_indices(self) -> np.ndarray:
        """Gap indices of this device, largest first (ties by start)."""
        order = np.asarray(self.diag.order_by_size(), dtype=np.int64)
        return order[np.asarray(self.diag.gaps.device)[order] == self.device]

    def gap_text(self, g: int) -> str:
        gs, ge = int(self.diag.gaps.start_ns[g]), int(self.diag.gaps.end_ns[g])
        return f"{self.rel(gs)}-{self.rel(ge)} {self.time_unit.symbol} ({fmt_dur(ge - gs)})"

    def gap_number(self, g: int) -> tuple[int, int]:
        """(n, count): gap ``g`` is the n-th of this device's ``count`` gaps in time
        order, counted from 1 (what the learner sees moving with n/N). n is 0 when
        ``g`` is not a gap of this device."""
        order = self.gap_indices()
        starts = np.asarray(self.diag.gaps.start_ns, dtype=np.int64)[order]
        by_time = order[np.argsort(starts, kind="stable")]
        hit = np.flatnonzero(by_time == g)
        return (int(hit[0]) + 1 if hit.size else 0), int(by_time.size)

    def gap_name(self, g: int) -> str:
        """``gap 3 of 3, 0.590-1.050 ms (0.460 ms)``: the 1-based number in time order
        and the interval, as the exercise screen shows a gap."""
        n, count = self.gap_number(g)
        return f"gap {n} of {count}, {self.gap_text(g)}" if n else f"gap {self.gap_text(g)}"

    def resolve(self, sel: GapSelector) -> int | None:
        """Gap index named by ``sel`` in the diagnosis, or None when there is none."""
        order = self.gap_indices()
        gs = np.asarray(self.diag.gaps.start_ns, dtype=np.int64) - self.origin_ns
        ge = np.asarray(self.diag.gaps.end_ns, dtype=np.int64) - self.origin_ns
        if sel.rank is not None:
            return int(order[sel.rank - 1]) if sel.rank <= order.size else None
        tol = sel.tol_ms * 1e6
        for g in sorted(int(x) for x in order):
            if sel.contains_ms is not None:
                if gs[g] <= sel.contains_ms * 1e6 < ge[g]:
                    return g
            elif (
                sel.start_ms is not None
                and sel.end_ms is not None
                and (abs(gs[g] - sel.start_ms * 1e6) <= tol and abs(ge[g] - sel.end_ms * 1e6) <= tol)
            ):
                return g
        return None

    def gap_at(self, t_ns: int) -> int | None:
        """Index of this device's gap containing absolute time ``t_ns``, or None."""
        for g in self.gap_indices():
            if int(self.diag.gaps.start_ns[g]) <= t_ns < int(self.diag.gaps.end_ns[g]):
                return int(g)
        return None

    # --------------------------------------------------------------- figures
    def busy_work(self) -> str:
        s, e = self.step_busy_s[0], self.step_busy_e[0]
        terms = [f"({self.rel(b)}-{self.rel(a)})" for a, b in zip(s, e)]
        if len(terms) > 4:
            terms = terms[:3] + [f"... ({len(terms)} intervals)"]
        body = " + ".join(terms) if terms else "0"
        if self.n_steps == 1:
            return f"busy = {body} = {fmt_dur(self.busy_ns)}"
        return f"busy in step 1 = {body} = {fmt_dur(_measure(s, e))}; median over {self.n_steps} steps = {fmt_dur(self.busy_ns)}"

    def wall_work(self) -> str:
        lo, hi = self.windows[0]
        if self.n_steps == 1:
            return f"wall = {self.rel(hi)} - {self.rel(lo)} = {fmt_dur(hi - lo)}"
        return f"step 1 = {self.rel(hi)} - {self.rel(lo)} = {fmt_dur(hi - lo)}; median step over {self.n_steps} steps = {fmt_dur(self.wall_ns)}"

    def figure(self, quantity: str, *, gap: GapSelector | None = None, projection: Projection | None = None) -> Figure:
        """Compute ``quantity`` (a key of ``model.QUANTITIES``). Raises ``ValueError``
        when the trace cannot give it (no kernels, no such gap, a zero wall)."""
        wall, busy = self.wall_ns, self.busy_ns
        if wall <= 0:
            raise ValueError("the trace has no time extent")
        if quantity == "wall":
            return Figure(wall, "ns", self.wall_work())
        if quantity == "gpu_busy":
            return Figure(busy, "ns", self.busy_work())
        if quantity == "idle":
            return Figure(
                wall - busy,
                "ns",
                f"{self.busy_work()}; {self.wall_work()}; idle = {fmt_dur(wall)} - {fmt_dur(busy)} = {fmt_dur(wall - busy)}",
            )
        if quantity == "idle_share":
            share = 100.0 * (wall - busy) / wall
            return Figure(
                share,
                "%",
                f"{self.busy_work()}; idle share = ({fmt_dur(wall)} - {fmt_dur(busy)}) / {fmt_dur(wall)} = {share:.1f}%",
            )
        if quantity == "tokens_per_s":
            rate = 1e9 / wall
            return Figure(
                rate, "tokens/s", f"{self.wall_work()}; one token per step: 1 / {fmt_dur(wall)} = {rate:.0f} tokens/s"
            )
        if quantity == "gap":
            g = self.resolve(gap) if gap else None
            if g is None:
                raise ValueError(f"no {gap.describe() if gap else 'gap'} in the diagnosis")
            d = int(self.diag.gaps.end_ns[g] - self.diag.gaps.start_ns[g])
            return Figure(
                d,
                "ns",
                f"gap = {self.rel(int(self.diag.gaps.end_ns[g]))} - {self.rel(int(self.diag.gaps.start_ns[g]))} = {fmt_dur(d)}",
            )
        if quantity in ("projected_step", "projected_tokens_per_s"):
            step, work = self.projected_step(projection or Projection())
            if quantity == "projected_step":
                return Figure(step, "ns", work)
            rate = 1e9 / step
            return Figure(rate, "tokens/s", f"{work}; 1 / {fmt_dur(step)} = {rate:.0f} tokens/s")
        raise ValueError(f"unknown quantity {quantity!r}")

    def idle_intervals(self) -> tuple[np.ndarray, np.ndarray]:
        """Idle intervals: step windows minus the busy union (sorted int64 arrays)."""
        s_out, e_out = [], []
        for lo, hi in self.windows:
            m = (self.busy_s < hi) & (self.busy_e > lo)
            edges = [lo] + [x for a, b in zip(self.busy_s[m], self.busy_e[m]) for x in (int(a), int(b))] + [hi]
            for a, b in zip(edges[0::2], edges[1::2]):
                if b > a:
                    s_out.append(a)
                    e_out.append(b)
        return np.array(s_out, np.int64), np.array(e_out, np.int64)

    def events_named(self, pattern: str) -> np.ndarray:
        """CPU event indices whose name equals ``pattern`` (case-insensitive), else
        contains it."""
        pat = pattern.casefold()
        ids = self.trace.name_ids_matching(lambda s: s.casefold() == pat)
        if ids.size == 0:
            ids = self.trace.name_ids_matching(lambda s: pat in s.casefold())
        cpu = np.array([ln.index for ln in self.trace.lanes if not ln.is_gpu], dtype=np.int32)
        return np.flatnonzero(np.isin(self.trace.name_id, ids) & np.isin(self.trace.lane, cpu))

    def projected_step(self, pr: Projection) -> tuple[float, str]:
        """Step time with the chosen gaps and the idle time under the named CPU events
        removed (their union, each instant counted once). Returns (ns, work text).
        Raises ``ValueError`` when a gap or event named does not exist."""
        parts_s, parts_e, terms = [], [], []
        for sel in pr.remove_gaps:
            g = self.resolve(sel)
            if g is None:
                raise ValueError(f"no {sel.describe()} in the diagnosis")
            a, b = int(self.diag.gaps.start_ns[g]), int(self.diag.gaps.end_ns[g])
            parts_s.append(np.array([a]))
            parts_e.append(np.array([b]))
            terms.append(f"gap {self.gap_text(g)}")
        idle_s, idle_e = self.idle_intervals()
        for name in pr.remove_events:
            ev = self.events_named(name)
            if ev.size == 0:
                raise ValueError(f"no CPU event named {name!r} in the trace")
            es, ee = merge_intervals(self.trace.start_ns[ev], self.trace.end_ns[ev])
            got_s, got_e = [], []
            for a, b in zip(es, ee):
                cs, ce = _clip(idle_s, idle_e, int(a), int(b))
                got_s.append(cs)
                got_e.append(ce)
            cs, ce = np.concatenate(got_s), np.concatenate(got_e)
            parts_s.append(cs)
            parts_e.append(ce)
            terms.append(f"{name} idle {fmt_dur(_measure(cs, ce))}")
        if parts_s:
            us, ue = merge_intervals(np.concatenate(parts_s), np.concatenate(parts_e))
            removed = _overlap_total(us, ue, idle_s, idle_e)
        else:
            removed = 0
        wall = self.wall_ns
        step = wall - removed / self.n_steps
        if step <= 0:
            raise ValueError("the projection removes the whole step")
        body = " - ".join([fmt_dur(wall)] + terms)
        per = "" if self.n_steps == 1 else f" (removed time / {self.n_steps} steps)"
        return (
            step,
            f"projected step = {body}{per} = {fmt_dur(step)}{' (overlaps counted once)' if len(terms) > 1 else ''}",
        )


def _overlap_total(s: np.ndarray, e: np.ndarray, idle_s: np.ndarray, idle_e: np.ndarray) -> int:
    """Total length of the union (s, e) inside the idle intervals (both disjoint)."""
    total = 0
    for a, b in zip(s, e):
        cs, ce = _clip(idle_s, idle_e, int(a), int(b))
        total += _measure(cs, ce)
    return total


_PLACEHOLDER = re.compile(r"\{(wall|busy|idle|idle_share|tokens_per_s|largest_gap|gap)\}")


def fill(text: str, facts: TraceFacts, gap: int | None = None) -> str:
    """Replace ``{busy}``, ``{idle}``, ``{idle_share}``, ``{wall}``, ``{tokens_per_s}``,
    ``{largest_gap}`` and ``{gap}`` in ``text`` with figures of the trace; other braces
    stay as written."""

    def sub(m: re.Match) -> str:
        k = m.group(1)
        try:
            if k in ("largest_gap", "gap"):
                g = facts.resolve(GapSelector(rank=1)) if k == "largest_gap" or gap is None else gap
                return facts.gap_text(g) if g is not None else m.group(0)
            f = facts.figure(k if k != "busy" else "gpu_busy")
        except ValueError:
            return m.group(0)
        if f.unit == "%":
            return f"{f.value:.1f}%"
        if f.unit == "tokens/s":
            return f"{f.value:.0f} tokens/s"
        return fmt_dur(f.value)

    return _PLACEHOLDER.sub(sub, text)
