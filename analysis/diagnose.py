"""``diagnose(trace, params) -> Diagnosis``: the whole headless diagnosis.

Steps (``docs/definitions.md``; the data flow in ``docs/architecture.md``): valid timing mask → steps → per-device busy union and idle
gaps (window widened to the steps) → cause class per gap with evidence → picket-fence
episodes → recurring groups by position in the step → budget. Cards, evidence lists and
what-if projections are computed on demand for the gaps asked for (cards by
``gapscope.analysis.card``, which reads a ``Diagnosis``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

import numpy as np

from gapscope.analysis import budget as _budget
from gapscope.analysis.busy import coverage, device_event_mask, device_union, valid_timing_mask
from gapscope.analysis.classify import SLOW_LAUNCH_NS, classify
from gapscope.analysis.evidence import EvidenceIndex, evidence_for_gap, gpu_copies_of_gap
from gapscope.analysis.evidence_kinds import one_time_mask
from gapscope.analysis.gaps import concat_gaps, device_window, find_gaps, launch_of
from gapscope.analysis.picket import PicketEpisode, find_episodes
from gapscope.analysis.steps import (
    GapGroup,
    Steps,
    device_side_steps,
    edge_gaps,
    find_steps,
    group_gaps,
    is_drawn,
    step_annotation_mask,
)
from gapscope.analysis.types import Cause, DeviceSummary, Evidence, Gaps, Params
from gapscope.parsers.beside import Beside
from gapscope.parsers.model import Kind, Trace

__all__ = ["diagnose", "Diagnosis"]


@dataclasses.dataclass(eq=False)
class Diagnosis:
    """Result of ``diagnose`` (the analysis API contract).

    ``devices``: one ``DeviceSummary`` per GPU device with valid GPU ops; ``gaps``: all
    devices, sorted by (device, start_ns), with cause, shares, ``class_ns``, group and
    episode filled; ``episodes``: picket-fence episodes; ``steps``: ``Steps`` or None;
    ``groups``: recurring gaps by position in the step, largest total first;
    ``budget``: per-step ``Budget`` or None when there are no GPU ops.
    """

    trace: Trace
    params: Params
    devices: list[DeviceSummary]
    gaps: Gaps
    episodes: list[PicketEpisode]
    steps: Steps | None
    groups: list[GapGroup]
    budget: _budget.Budget | None
    invalid_gpu_ops: int = 0
    _launches: np.ndarray | None = dataclasses.field(default=None, repr=False)
    _evidence_cache: dict = dataclasses.field(default_factory=dict, repr=False)
    _copies_cache: dict = dataclasses.field(default_factory=dict, repr=False)
    _exclude: np.ndarray | None = dataclasses.field(default=None, repr=False)
    _index: EvidenceIndex | None = dataclasses.field(default=None, repr=False)
    #: results other analysis modules derive from this diagnosis, computed on first use
    #: and kept here under their module's name (``analysis.findings.findings``)
    derived: dict[str, object] = dataclasses.field(default_factory=dict, repr=False)

    # ---------------------------------------------------------------- queries
    def order_by_size(self) -> np.ndarray:
        """int64 gap indices, largest gap first (ties: earlier start first)."""
        g = self.gaps
        return np.lexsort((g.start_ns, -g.dur_ns)).astype(np.int64)

    def class_totals_ns(self, device: int | None = None) -> dict[Cause, int]:
        """ns of idle per cause class (all gaps, or one device); sums exactly to the
        total ns of the gaps counted."""
        cn = self.gaps.class_ns
        if cn is None or len(self.gaps) == 0:
            return {c: 0 for c in Cause}
        rows = cn if device is None else cn[self.gaps.device == device]
        tot = rows.sum(axis=0)
        return {c: int(tot[int(c)]) for c in Cause}

    def total_idle_ns(self, device: int | None = None) -> int:
        """Sum of gap durations (ns), all devices or one."""
        d = self.gaps.dur_ns
        return int(d.sum() if device is None else d[self.gaps.device == device].sum())

    def evidence(self, i: int) -> tuple[Evidence, ...]:
        """Evidence list of gap ``i`` (names verbatim, lane, overlap ns, bytes, pageable),
        largest overlap first. Computed on demand and cached."""
        i = int(i)
        if i not in self._evidence_cache:
            self._evidence_cache[i] = evidence_for_gap(
                self.trace, self.gaps, i, self.evidence_index(), copies=self.gpu_copies(i)
            )
        return self._evidence_cache[i]

    def gpu_copies(self, i: int) -> tuple[Evidence, ...]:
        """Every GPU copy and memset item of gap ``i`` (``gpu_copies_of_gap``), in time
        order, not cut to the evidence list's limit. Computed on demand and cached."""
        i = int(i)
        if i not in self._copies_cache:
            self._copies_cache[i] = tuple(gpu_copies_of_gap(self.trace, self.gaps, i, self.evidence_index()))
        return self._copies_cache[i]

    def evidence_index(self) -> EvidenceIndex:
        """The per-event lookups evidence lists are built from (``EvidenceIndex``:
        each event's own class, evidence end, running max), built on first use."""
        if self._index is None:
            self._index = EvidenceIndex.build(self.trace, valid_timing_mask(self.trace), self._exclude)
        return self._index

    def what_if(
        self,
        *,
        gaps: Iterable[int] = (),
        causes: Iterable[Cause] = (),
        names: Iterable[str] = (),
        remove_ns: np.ndarray | None = None,
    ) -> _budget.WhatIf:
        """Projected step time and tokens/s when the chosen gaps, cause classes, named
        CPU segments or ns per gap (``remove_ns``, int64 per gap: a finding's own) are
        removed (see ``gapscope.analysis.budget.what_if``)."""
        return _budget.what_if(self, gaps=tuple(gaps), causes=tuple(causes), names=tuple(names), remove_ns=remove_ns)


def diagnose(trace: Trace, params: Params | None = None) -> Diagnosis:
    """Run the diagnosis of ``trace`` with thresholds ``params`` (default ``Params()``).

    Never raises on a valid ``Trace``: a trace without GPU ops gives no devices and no
    gaps. Cost: a few sorts and ``searchsorted`` passes over the events; no Python loop
    over events, loops only over devices, CPU lanes and (for groups) gap positions.
    The warm-up evidence (``evidence_kinds.one_time_mask``), which depends on the trace
    alone, is computed in a thread beside the rest, which ``classify`` asks it of last:
    it is numpy work that lets go of the interpreter (at 5M events 0.35 s of the
    diagnosis's 1.3-1.7 s, taken off it on two cores).
    """
    params = params or Params()
    return _diagnose(trace, params, Beside(one_time_mask, trace, SLOW_LAUNCH_NS, name="gapscope-warm-up"))


def _diagnose(trace: Trace, params: Params, warm_up: Callable[[], np.ndarray]) -> Diagnosis:
    """``diagnose``'s steps, with ``classify``'s ``warm_up``."""
    valid = valid_timing_mask(trace)
    launches = launch_of(trace)
    gpu_work = trace.mask_kind(Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)
    invalid = int((gpu_work & ~valid).sum())
    steps = device_side_steps(trace, find_steps(trace, valid), launches, valid)
    exclude = step_annotation_mask(trace, steps)
    s0 = steps.start_ns if steps is not None else None
    s1 = steps.end_ns if steps is not None else None

    devices: list[DeviceSummary] = []
    parts: list[Gaps] = []
    for dev in trace.devices():
        win = device_window(trace, dev, valid, s0, s1)
        if win is None:
            continue
        ks, ke = device_union(trace, dev, valid=valid)
        bs, be = device_union(trace, dev, with_copies=True, valid=valid)
        w0, w1 = np.array([win[0]]), np.array([win[1]])
        kcount = int(device_event_mask(trace, dev, (Kind.KERNEL,), valid).sum())
        ccount = int(device_event_mask(trace, dev, (Kind.MEMCPY, Kind.MEMSET), valid).sum())
        devices.append(
            DeviceSummary(
                dev, win[0], win[1], int(coverage(ks, ke, w0, w1)[0]), int(coverage(bs, be, w0, w1)[0]), kcount, ccount
            )
        )
        parts.append(
            find_gaps(trace, dev, params.min_gap_ns, steps_start_ns=s0, steps_end_ns=s1, valid=valid, launches=launches)
        )
    gaps = concat_gaps(parts)
    episodes, episode_of = find_episodes(trace, gaps, params, launches)
    gaps = classify(
        trace, gaps, params, valid=valid, launches=launches, episode_of=episode_of, exclude=exclude, warm_up=warm_up
    )
    # one-time costs and edge gaps (profiler start/stop, the loop's tail) are no
    # recurring position: the first step's head and the last step's tail are not one
    # stretch "per step" (``edge_gaps``)
    skip = edge_gaps(gaps, steps, drawn=is_drawn(trace))
    if gaps.one_time is not None:
        skip |= gaps.one_time
    groups, group_of = group_gaps(trace, gaps, steps, gaps.class_ns, skip=skip)
    gaps = dataclasses.replace(gaps, group=group_of, episode=episode_of)
    diag = Diagnosis(trace, params, devices, gaps, episodes, steps, groups, None, invalid, launches, _exclude=exclude)
    diag.budget = _budget.compute_budget(diag)
    return diag
