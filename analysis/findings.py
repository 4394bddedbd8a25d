"""Findings: the answer every surface shows first ("Findings: what the tool says first"
in ``docs/architecture.md``; the terms in ``docs/definitions.md``).

A gap is evidence; a *finding* is a pattern across the steady-state steps, with what a
fix would recover. ``findings(diag)`` reads the ``Diagnosis`` (nothing is measured twice)
and returns:

- ``ranked``: the steady-state findings, largest recoverable time per step first. Kinds
  (``Finding.kind``): a launch-bound stretch over many positions (picket fence), a host
  island at a named range, a sync cliff at a named range or read, copies on the path, a
  queued wait on a collective / graph / stream (``dependency``), host or sync time with
  no named range, unclassified idle. Recurrence is by meaning: the same class at the
  same named range is one finding wherever it falls in the step (``positions``).
- ``apart``: edge gaps (``steps.edge_gaps``: profiler start and stop, the loop's tail)
  and one-time (warm-up) costs, shown and labelled, never ranked with steady state and
  in no per-step figure.
- ``verdict``: one sentence: the top finding's class, share of the step, cost per step,
  first fix and its projected step; or "GPU-bound: the kernels are the story" when the
  steady-state step idles less than ``GPU_BOUND_IDLE_SHARE``.

Cost per step, projected step and steps/s (tokens/s for a decode step) come from
``budget.what_if`` with the finding's own ns per gap (``remove_ns``): the same machinery
and the same printed assumptions as ``report --what-if`` and the viewer's ``x``. A host
finding removes the named range's time inside the gaps (``logging callback``: 0.290 ms
of the decode-step exercise's 0.460 ms gap; the rest is untraced and stays); a sync
finding removes the sync class time of the gaps it names (the wait and the host work
after it until the next launch, the cliff); launch, copy, dependency and unclassified
findings remove their class time.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import typing

import numpy as np

from gapscope.analysis.budget import steady_gaps, typical_steps, what_if
from gapscope.analysis.busy import coverage, device_event_mask, union_intervals, valid_timing_mask

# the card API (issue 43 moves it; this is the one place that imports it)
from gapscope.analysis.card import card_for_gap, card_for_group
from gapscope.analysis.card.program import program_kind
from gapscope.analysis.classify import GRAPH_SPARSE_BUSY_SHARE
from gapscope.analysis.diagnose import Diagnosis
from gapscope.analysis.evidence_kinds import COLLECTIVE_RE, ids_matching
from gapscope.analysis.framework_work import launches_inside
from gapscope.analysis.names import short_kernel_name
from gapscope.analysis.steps import PROFILER_STEP_RE, edge_gaps, is_drawn
from gapscope.analysis.types import Card, Cause, Trust, WaitKind
from gapscope.parsers.model import Kind
from gapscope.units import fmt_dur, fmt_rate

__all__ = [
    "Finding",
    "Findings",
    "findings",
    "meaning",
    "has_steady_state",
    "GPU_BOUND_IDLE_SHARE",
    "FINDING_MIN_SHARE",
    "NAMED_PER_CLASS",
    "EVIDENCE_GAPS",
    "VERDICT_MIN_SHARE",
    "MIN_STEADY_STEPS",
    "complete_steps",
    "projectable",
    "UNRECORDED_TITLE",
    "UNRECORDED_FIX",
]

#: Below this idle share of the steady-state step the GPU is mostly busy: the verdict
#: is "GPU-bound: the kernels are the story" (the seeds' dense GPU lane).
GPU_BOUND_IDLE_SHARE = 0.2
#: A top finding recovering less than this share of the step makes no verdict of its
#: class ("in no steady pattern"): 1% of a step is no bottleneck.
VERDICT_MIN_SHARE = 0.05
#: A finding recovering less than this share of the step is not listed (its gaps stay
#: in the gap list and the groups).
FINDING_MIN_SHARE = 0.005
#: Named ranges kept as their own finding per class (host, sync); the rest of the
#: class's time is one "no named range" finding.
NAMED_PER_CLASS = 5
#: Gaps whose evidence names the host and sync findings, per class: the largest by
#: that class's ns (their evidence lists cost up to a few ms each on a busy thread:
#: hta/mtia_rank_0's 3,454 gaps took 13 s). The class time of the other gaps counts as
#: "no named range".
EVIDENCE_GAPS = 256
#: Characters of a name in a finding's title (the full name: ``Finding.name``).
TITLE_NAME_CHARS = 40

#: Titles of the queued waits by ``WaitKind`` value.
_WAIT_TITLES = {
    int(WaitKind.COLLECTIVE): "queued wait on a collective",
    int(WaitKind.GRAPH): "queued wait inside a CUDA graph (graph-internal ordering)",
    int(WaitKind.STREAM_WAIT): "queued wait on another stream (cudaStreamWaitEvent)",
}
#: Evidence names that are no range: synthetic items of the evidence list.
_SYNTHETIC = "("

#: A named range whose largest call encloses this many launch calls or more is a loop
#: body or pass (``decode_step``, ``## backward ##``, ``DistributedDataParallel.forward``),
#: not an island: its host time is "host work inside" it, and its fix is its card's.
CONTAINER_MIN_LAUNCHES = 8
#: The backward pass and its engine's ranges (``## backward ##``, the per-node
#: ``autograd backward (evaluate_function)``): a pass, never an island to move.
_BACKWARD_RE = re.compile(r"backward", re.IGNORECASE)
#: Allocator ops: their time is allocation, never an island to move (the card's
#: allocator advice is the fix).
_ALLOC_OP_RE = re.compile(
    r"^aten::(empty|empty_strided|empty_like|new_empty|new_empty_strided|resize_)$"
    r"|^(cuda|hip)(Malloc|Free|HostAlloc|MallocHost)|^cuMem(Alloc|Free)|CachingAllocator|empty_cache",
    re.IGNORECASE,
)
#: A range whose time in a gap, less the named findings' time there, is at least this
#: share of the gap's remaining host time encloses that time: it joins the range's
#: finding.
ENCLOSING_MIN_SHARE = 0.9
#: A gap with no enclosing named range and at least this many recorded host ops on its
#: evidence list, most of its host time in them, is per-op dispatch overhead.
PER_OP_MIN_OPS = 8
#: Titles of the host work with no named range: dispersed per-op dispatch, and the rest.
PER_OP_TITLE = "per-op host overhead (many short ops dispatched, no dominant range)"
UNTRACED_TITLE = "host work with no named range (untraced)"
#: Event kinds whose time on the launching thread is host work of a range or op.
_HOST_KINDS = (Kind.CPU_OP, Kind.PYTHON, Kind.ANNOTATION)
_PER_OP_FIX = "fewer, larger ops per step: a bigger batch, torch.compile, CUDA graphs"
#: Device allocation runtime calls: only these make an allocator op "device memory allocation".
_DEVICE_MALLOC_RE = re.compile(r"^(cuda|hip)Malloc|^cuMemAlloc", re.IGNORECASE)
_PER_KERNEL_FIX = "cut the CPU cost per kernel: torch.compile or a CUDA graph, fewer and larger ops"
#: A runtime copy call (its time outside the GPU's copy is host work: staging, driver).
_COPY_CALL_RE = re.compile(r"^(cuda|hip|cu)Memcpy", re.IGNORECASE)
_COPY_CALL_FIX = "copy from pinned host memory with non_blocking=True (the call then returns at once), or keep the data on the device"
_ALLOC_FIX = "fewer temporaries: preallocate and reuse buffers (out=, in-place ops) or torch.compile"
_UNTRACED_FIX = (
    "find the untraced host work (with_stack=True or record_function ranges), then move it off the critical path"
)

#: The first fix per class, in a few words, where no card gives one (the card holds
#: the full experiment).
_FIX = {
    Cause.LAUNCH: "capture the step in a CUDA graph or torch.compile it (or batch)",
    Cause.COPY: "keep tensors on the device (pinned memory and non_blocking where a copy stays)",
    Cause.UNCLASSIFIED: "capture with CPU activity (with_stack) so the idle can be classified",
}


@dataclasses.dataclass(frozen=True, eq=False)
class Finding:
    """One finding (a pattern across steps).

    ``kind``: ``"launch"``, ``"host"``, ``"sync"``, ``"copy"``, ``"dependency"``,
    ``"unclassified"``, ``"communication"`` (exposed collectives: busy time, so no
    ``positions`` and no ``remove_ns``), ``"unmeasurable"`` (idle inside CUDA graph
    executions whose nodes appear unrecorded, ``Trust.GRAPH_UNRECORDED``: no
    projection, ``measurable`` False) (``ranked``) or ``"edge"`` / ``"one-time"`` (``apart``);
    ``cause``: its ``Cause``; ``title``: short readable title (names shortened by
    ``names.short_kernel_name``); ``name``: the named range or read verbatim (``""``
    when none); ``per_step_ns``: recoverable idle per steady-state step (int ns; 0 in
    ``apart``); ``step_share``: ``per_step_ns`` / the step's wall time; ``total_ns``:
    its ns summed over all its positions; ``steps_with``/``steps_total``: steps holding
    one of its positions; ``positions``: int64 gap indices, largest share first;
    ``card``: the card of a typical member that fits the finding (``_card_of``: of
    its class, no one-time cost, no one-off), through that gap's group when the group is
    of its class, ``card_gap`` the gap, ``card_note`` why there is none; ``fix``: the first fix in a few words (a host finding's: its card's ``Card.fix``, see ``_fix``); ``projected_step_ns``,
    ``steps_per_s`` (None where the projected step has no length), ``speedup``, ``decode``
    (a decode step), ``tokens_per_s`` (``budget.tokens_per_step`` x steps/s; None unless
    ``decode``) and ``assumptions``: the what-if if it were fixed (``budget.what_if``);
    ``projected``: False when the trace has too few steps to project (``projectable``):
    then ``projected_step_ns`` is 0, ``steps_per_s`` and ``tokens_per_s`` None,
    ``speedup`` 1.0 and ``assumptions`` says why."""

    kind: str
    cause: Cause
    title: str
    name: str
    per_step_ns: int
    step_share: float
    total_ns: int
    steps_with: int
    steps_total: int
    positions: np.ndarray
    card: Card | None
    fix: str
    projected_step_ns: int = 0
    steps_per_s: float | None = 0.0
    speedup: float = 1.0
    decode: bool = False
    assumptions: tuple[str, ...] = ()
    #: int64 ns per gap this finding removes (length = number of gaps)
    remove_ns: np.ndarray | None = dataclasses.field(default=None, repr=False)
    tokens_per_s: float | None = None
    projected: bool = True
    #: False when its idle may not be idle (``kind`` ``"unmeasurable"``): no projection
    #: (``projected_step_ns`` 0, ``steps_per_s`` None, ``speedup`` 1)
    measurable: bool = True
    #: the member gap whose card (or whose group's card) ``card`` is, -1 when none; ``card_note``: why
    #: ``card`` is None where no member's card fits the finding (``_card_of``), else ""
    card_gap: int = -1
    card_note: str = ""

    @property
    def steady(self) -> bool:
        return self.kind not in ("edge", "one-time")


@dataclasses.dataclass(frozen=True, eq=False)
class Findings:
    """Result of ``findings``. ``verdict``: one sentence; ``verdict_kind``: the top
    finding's kind, ``"gpu-bound"``, ``"no steady state"`` or ``"no gpu work"``;
    ``verdict_share``: its share of the step (the idle share for ``gpu-bound``);
    ``ranked``/``apart``: see the module docstring; ``edge``: bool per gap
    (``steps.edge_gaps``); ``steady_state``: False when the trace holds no steady-state
    step (no GPU work, or a window of fewer than ``MIN_WINDOW_KERNELS`` kernels)."""

    verdict: str
    verdict_kind: str
    verdict_share: float
    ranked: tuple[Finding, ...]
    apart: tuple[Finding, ...]
    edge: np.ndarray
    steady_state: bool

    @property
    def top(self) -> Finding | None:
        return self.ranked[0] if self.ranked else None


#: A trace without steps whose busiest device ran fewer kernels than this has no
#: steady-state step to judge (one 20 ns kernel is no step).
MIN_WINDOW_KERNELS = 3


def has_steady_state(diag) -> bool:
    """True when ``diag`` holds a steady-state step: a budget over found steps, or a
    window (no steps known) of at least ``MIN_WINDOW_KERNELS`` kernels."""
    b = diag.budget
    if b is None or b.wall_ns <= 0:
        return False
    if b.source != "window":
        return True
    dev = [d for d in diag.devices if d.device == b.device]
    return bool(dev) and dev[0].kernel_count >= MIN_WINDOW_KERNELS


#: Steps a trace needs for a steady state to judge: one step (or a window with no steps)
#: may be anything (sglang_decode's one ``step[DECODE bs=32]`` holds a 463 ms wait that
#: starts before it), so no verdict and no projection comes from it.
MIN_STEADY_STEPS = 2


def complete_steps(diag) -> int:
    """Complete steps of ``diag``: its steps (``steps.find_steps``: each has a start and
    an end), 0 when none were found (the budget is over the device's window)."""
    b = diag.budget
    if b is None or b.source == "window" or diag.steps is None:
        return 0
    return len(diag.steps)


def projectable(diag) -> bool:
    """True when a what-if of ``diag``'s findings is a steady-state projection: at least
    ``MIN_STEADY_STEPS`` complete steps, or an ASCII timeline (its author drew one step
    as the one that repeats: the decode-step exercise)."""
    if complete_steps(diag) >= MIN_STEADY_STEPS:
        return True
    return str(diag.trace.source.format).startswith("ascii") and complete_steps(diag) >= 1


def _no_projection(diag) -> tuple[str, ...]:
    n = complete_steps(diag)
    return (
        (f"No projection: the trace holds {n} complete step(s)" if n else "No projection: the trace marks no steps")
        + f", fewer than the {MIN_STEADY_STEPS} a steady state needs; the figure per step is over "
        + (
            f"that step ({fmt_dur(diag.budget.wall_ns)})."
            if n
            else f"the whole window ({fmt_dur(diag.budget.wall_ns)})."
        ),
    )


def _self_ns(diag, items) -> list[int]:
    """Each evidence item's own ns: its overlap less the overlap of the items nested in
    it (an op's time holds the ops inside it: ``decode_step``'s overlap holds
    ``log_token``'s). Nesting: on the same lane, within the item's interval; a child is
    subtracted from its innermost parent only."""
    t = diag.trace
    own = [int(e.overlap_ns) for e in items]
    real = [k for k, e in enumerate(items) if e.event >= 0]
    span = {
        k: (int(t.start_ns[items[k].event]), int(t.start_ns[items[k].event]) + int(t.dur_ns[items[k].event]))
        for k in real
    }
    for c in real:
        c0, c1 = span[c]
        parent, width = -1, None
        for p in real:
            if p == c or items[p].lane != items[c].lane:
                continue
            p0, p1 = span[p]
            if p0 <= c0 and c1 <= p1 and (p1 - p0, p) > (c1 - c0, c) and (width is None or p1 - p0 < width):
                parent, width = p, p1 - p0
        if parent >= 0:
            own[parent] = max(0, own[parent] - int(items[c].overlap_ns))
    return own


#: Names that mean one thing whatever their tail: the autograd engine's per-node
#: ranges (``autograd::engine::evaluate_function: MulBackward0``) are one backward pass;
#: the numbered instances of one module class (``nn.Module: TransformerBlock_0`` …
#: ``_35``, b200's 36 layers) are one module. (pattern, replacement: ``re.sub``).
_MEANING = (
    (re.compile(r"^autograd::engine::evaluate_function: .*$", re.DOTALL), "autograd backward (evaluate_function)"),
    (re.compile(r"^(nn\.Module: .*?)_\d+$", re.DOTALL), r"\1_* (every numbered instance)"),
)


def meaning(name: str) -> str:
    """The key a named range is recognised by across steps (``_MEANING``: the backward
    pass's per-node ranges are one, a module class's numbered instances are one), else
    the name itself."""
    for pattern, key in _MEANING:
        if pattern.match(name):
            return pattern.sub(key, name, count=1)
    return name


def _name_vectors(diag, rows: np.ndarray, cause: Cause) -> dict[str, np.ndarray]:
    """name -> int64 ns per gap of evidence of class ``cause`` with that name (real
    events only, their own time: ``_self_ns``; names by ``meaning``), over the gaps
    ``rows``."""
    n = len(diag.gaps)
    out: dict[str, np.ndarray] = {}
    for i in rows.tolist():
        items = diag.evidence(i)
        for e, own in zip(items, _self_ns(diag, items)):
            if e.cause != cause or e.event < 0 or e.name.startswith(_SYNTHETIC) or own <= 0:
                continue
            key = meaning(e.name)
            v = out.get(key)
            if v is None:
                v = out[key] = np.zeros(n, dtype=np.int64)
            v[i] += own
    return out


def _top_named(diag, i: int, cause: Cause, kinds: tuple[Kind, ...] | None = None) -> str:
    """The name of gap ``i``'s largest evidence of class ``cause`` (real events;
    ``kinds``: only events of these kinds), summed by name; ``""`` when none."""
    by: dict[str, int] = {}
    kind = diag.trace.kind
    for e in diag.evidence(i):
        if e.cause != cause or e.event < 0 or e.name.startswith(_SYNTHETIC):
            continue
        if kinds is not None and Kind(int(kind[e.event])) not in kinds:
            continue
        key = meaning(e.name)
        by[key] = by.get(key, 0) + int(e.overlap_ns)
    return max(by, key=lambda k: (by[k], k)) if by else ""


def _largest(v: np.ndarray) -> np.ndarray:
    """int64 indices of the ``EVIDENCE_GAPS`` largest positive entries of ``v``."""
    rows = np.flatnonzero(v > 0)
    if rows.size > EVIDENCE_GAPS:
        rows = rows[np.argsort(-v[rows], kind="stable")[:EVIDENCE_GAPS]]
    return np.sort(rows)


def _is_step_range(diag, name: str) -> bool:
    """``name`` is the range the steps come from (``ProfilerStep#N``, the steps'
    annotation)."""
    st = diag.steps
    return bool(PROFILER_STEP_RE.match(name)) or (st is not None and st.source == "annotation" and st.name == name)


def _is_container(diag, name: str) -> bool:
    """``name`` (a ``meaning`` key) is a step range, the backward pass, or a range whose
    longest call encloses ``CONTAINER_MIN_LAUNCHES`` launch calls or more, or a user
    range (``Kind.ANNOTATION``) enclosing any (a loop body or pass, a piece of the
    model's step): never an island to move."""
    if _is_step_range(diag, name) or _BACKWARD_RE.search(name):
        return True
    t = diag.trace
    longest, n = _launches_in_longest(diag, name)
    # a user range issuing GPU work is a piece of the model's step (``decode_step``)
    return n >= CONTAINER_MIN_LAUNCHES or (n > 0 and int(t.kind[longest]) == int(Kind.ANNOTATION))


def _launches_in_longest(diag, name: str) -> tuple[int, int]:
    """(the longest call of the range ``name`` (a ``meaning`` key: any of the names it
    stands for), the launch calls it encloses); (-1, 0) when the trace has no such
    range."""
    t = diag.trace
    ev = np.flatnonzero(np.isin(t.name_id, t.name_ids_matching(lambda s: meaning(s) == name)))
    if ev.size == 0:
        return -1, 0
    longest = int(ev[np.argmax(t.dur_ns[ev])])
    return longest, launches_inside(t, longest)


def _mallocs_inside(diag, name: str) -> bool:
    """A device allocation runtime call (``_DEVICE_MALLOC_RE``) starts inside a call of
    the range ``name`` on the same lane: its time is device allocation, not host time in
    the caching allocator (PyTorch's ``aten::empty`` and friends reuse cached blocks)."""
    t = diag.trace
    mal = np.flatnonzero(np.isin(t.name_id, t.name_ids_matching(lambda s: bool(_DEVICE_MALLOC_RE.search(s)))))
    if mal.size == 0:
        return False
    ev = np.flatnonzero(np.isin(t.name_id, t.name_ids_matching(lambda s: s == name)))
    for m in mal.tolist():
        ms, ml = int(t.start_ns[m]), int(t.lane[m])
        s0 = t.start_ns[ev].astype(np.int64)
        if ((t.lane[ev] == ml) & (s0 <= ms) & (s0 + t.dur_ns[ev].astype(np.int64) > ms)).any():
            return True
    return False


def _host_title(diag, name: str) -> str:
    """Title of the host finding at the named range ``name``: an island, host work
    inside a loop body or pass (``_is_container``), or allocation (``_ALLOC_OP_RE``)."""
    short = f"`{short_kernel_name(name, TITLE_NAME_CHARS)}`"
    if _ALLOC_OP_RE.search(name):
        if _DEVICE_MALLOC_RE.search(name) or _mallocs_inside(diag, name):
            return f"device memory allocation in {short}"
        return f"tensor allocation (caching allocator) in {short}"
    if _is_container(diag, name):
        return f"host work inside {short} (no finer range)"
    if _COPY_CALL_RE.match(name):  # copy is GPU copy time only: the call's own is host work
        return f"host time in the copy call {short}"
    return f"host island at {short}"


#: With no steps, a range this share of the budget's window or longer spans about the
#: whole trace (b200's ``execute_context_1(…)_generation_0``, 99.5%): it names nothing.
WHOLE_TRACE_SHARE = 0.9


def _body_ns(diag) -> int | None:
    """A range this long or longer is the loop body, a pass or the whole trace, never
    the name of host work inside it: half the median step, or with no steps
    ``WHOLE_TRACE_SHARE`` of the budget's window (the next enclosing range below it
    names the work); None without either."""
    st, b = diag.steps, diag.budget
    if st is not None and len(st):
        return int(np.median(st.wall_ns)) // 2
    return int(WHOLE_TRACE_SHARE * b.wall_ns) if b is not None and b.wall_ns > 0 else None


def _split_rest(
    diag, rest: np.ndarray, keep: list[str], host: np.ndarray
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Split the host time ``rest`` (int64 ns per gap) left by the named findings
    ``keep``: (enclosing range name -> ns per gap, per-op overhead ns per gap, untraced
    ns per gap). Read on the gap's launching thread (``EvidenceIndex.overlapping``, every
    gap): a gap whose remaining host time lies inside one op or range (``_HOST_KINDS``;
    by ``meaning``; ``ENCLOSING_MIN_SHARE``; ``host``: the gap's host ns) joins it: a kept one first, else the outermost
    one shorter than ``_body_ns`` (not the step range, the loop body or a range spanning
    the whole trace);
    one with ``PER_OP_MIN_OPS`` ops or more overlapping it, their time at least half
    its host time, is per-op overhead; the rest is untraced."""
    t, g = diag.trace, diag.gaps
    index = diag.evidence_index()
    body_ns = _body_ns(diag)
    ops = np.isin(t.kind, [int(k) for k in _HOST_KINDS])
    inside: dict[str, np.ndarray] = {}
    untraced = rest.copy()
    per_op = np.zeros_like(rest)
    for i in np.flatnonzero(rest > 0).tolist():
        lane = g.thread_of(i)
        if lane < 0:
            continue
        a, b = int(g.start_ns[i]), int(g.end_ns[i])
        idx = index.overlapping(t, lane, a, b)
        idx = idx[ops[idx]]
        if idx.size == 0:
            continue
        s0 = t.start_ns[idx].astype(np.int64)
        dur = t.dur_ns[idx].astype(np.int64)
        over = np.maximum(np.minimum(s0 + dur, b) - np.maximum(s0, a), 0)
        # it encloses the rest: its time in the gap, less the named findings' time
        # (``host - rest``), holds the rest
        cover = idx[over - (int(host[i]) - int(rest[i])) >= ENCLOSING_MIN_SHARE * int(rest[i])]
        names = [(t.name(int(e)), int(t.dur_ns[e])) for e in cover.tolist()]
        kept = [n for n, _ in names if meaning(n) in keep]
        outer = [(d, n) for n, d in names if not _is_step_range(diag, n) and (body_ns is None or d < body_ns)]
        if kept or outer:
            key = meaning(kept[0] if kept else max(outer)[1])
            inside.setdefault(key, np.zeros_like(rest))[i] += rest[i]
        elif idx.size >= PER_OP_MIN_OPS and 2 * int(over[t.kind[idx] == int(Kind.CPU_OP)].sum()) >= int(host[i]):
            per_op[i] = rest[i]
        else:
            continue
        untraced[i] = 0
    return inside, per_op, untraced


def _candidates(diag, steady: np.ndarray) -> list[tuple[str, Cause, str, str, np.ndarray]]:
    """(kind, cause, title, name, ns per gap) of every candidate finding."""
    g = diag.gaps
    cn = g.class_ns
    out: list[tuple[str, Cause, str, str, np.ndarray]] = []
    if cn is None:
        return out
    cls = {c: np.where(steady, cn[:, int(c)], 0).astype(np.int64) for c in Cause}
    # launch: one finding, wherever it falls in the step
    v = cls[Cause.LAUNCH]
    if v.any():
        pos = int((v > 0).sum())
        fence = int(((g.episode >= 0) & (v > 0)).sum())
        title = (
            f"picket fence: {pos:,} short gaps between short kernels"
            if fence * 2 >= pos
            else f"launch overhead exposed in {pos:,} {'gap' if pos == 1 else 'gaps'}"
        )
        out.append(("launch", Cause.LAUNCH, title, "", v))
    # host: a finding per named range (its own time in the gaps), the rest as one
    v = cls[Cause.HOST]
    if v.any():
        named = _name_vectors(diag, _largest(v), Cause.HOST)
        keep = sorted(named, key=lambda k: (-int(named[k].sum()), k))[:NAMED_PER_CLASS]
        rest = v.copy()
        vecs: dict[str, np.ndarray] = {}
        for k in keep:
            vecs[k] = np.minimum(named[k], v)
            rest -= vecs[k]
        rest = np.maximum(rest, 0)
        inside, per_op, untraced = _split_rest(diag, rest, keep, cls[Cause.HOST])
        for k in keep:
            out.append(("host", Cause.HOST, _host_title(diag, k), k, vecs[k] + inside.pop(k, 0)))
        for k, vec in inside.items():
            out.append(("host", Cause.HOST, f"host work inside `{short_kernel_name(k, TITLE_NAME_CHARS)}`", k, vec))
        if per_op.any():
            out.append(("host", Cause.HOST, PER_OP_TITLE, "", per_op))
        if untraced.any():
            out.append(("host", Cause.HOST, UNTRACED_TITLE if keep or inside else "host work on the CPU", "", untraced))
    # sync: gaps keyed by the named range holding their wait; the cliff's class time
    v = cls[Cause.SYNC]
    if v.any():
        keys: dict[str, list[int]] = {}
        for i in _largest(v).tolist():
            keys.setdefault(_top_named(diag, i, Cause.SYNC), []).append(i)
        order = sorted((k for k in keys if k), key=lambda k: (-int(v[keys[k]].sum()), k))
        rest = v.copy()
        for k in order[:NAMED_PER_CLASS]:
            vec = np.zeros_like(v)
            vec[keys[k]] = v[keys[k]]
            rest -= vec
            read = _top_named(diag, keys[k][0], Cause.SYNC, (Kind.SYNC_CALL, Kind.CPU_OP))
            title = f"sync cliff at `{short_kernel_name(k, TITLE_NAME_CHARS)}`"
            if read and read != k:
                title += f" (`{short_kernel_name(read, TITLE_NAME_CHARS)}`)"
            out.append(("sync", Cause.SYNC, title, k, vec))
        if rest.any():
            out.append(("sync", Cause.SYNC, "blocking waits with no named range", "", rest))
    v = cls[Cause.COPY]
    if v.any():
        out.append(("copy", Cause.COPY, f"copies on the path in {int((v > 0).sum())} gaps", "", v))
    v = cls[Cause.DEPENDENCY]
    if v.any():
        wk = g.wait_kind if g.wait_kind is not None else np.full(len(g), -1, np.int8)
        for k in sorted(set(wk[v > 0].tolist()) - {int(WaitKind.DISPATCH)}):  # dispatch: not actionable
            vec = np.where(wk == k, v, 0)
            what = WaitKind(k).label if k >= 0 else "something GPU-side"
            title = _WAIT_TITLES.get(k, f"queued wait on {what}")
            out.append(("dependency", Cause.DEPENDENCY, title, what, vec))
    v = cls[Cause.UNCLASSIFIED]
    if v.any():
        out.append(("unclassified", Cause.UNCLASSIFIED, "unclassified idle (no linked launch or CPU data)", "", v))
    return out


#: Title and first fix of the finding of idle inside graphs whose nodes appear unrecorded.
UNRECORDED_TITLE = "graph nodes appear unrecorded: idle inside the graph's execution is not measurable"
UNRECORDED_FIX = (
    "re-capture with the graph's nodes recorded (Nsight Systems `nsys profile --cuda-graph-trace=node`); "
    "torch.profiler records a graph's nodes only on some CUDA/Kineto versions: profile a step without CUDA "
    "graphs, or read this idle as unknown"
)


def _unrecorded(diag, rows: np.ndarray) -> Finding:
    """The ``"unmeasurable"`` finding of the steady gaps ``rows`` (bool per gap) marked
    ``Trust.GRAPH_UNRECORDED``: their idle, all classes, per step as the budget splits
    it (``what_if``), with no projection: the graph's unrecorded nodes may have run
    there (hta/rank0: graph launches with 1-2 kernels and 18 memsets 0.6-1.1 ms apart,
    every step)."""
    g = diag.gaps
    vec = np.where(rows, g.dur_ns, 0).astype(np.int64)
    f = _finding(diag, "unmeasurable", Cause.DEPENDENCY, UNRECORDED_TITLE, "", vec)
    return dataclasses.replace(
        f,
        fix=UNRECORDED_FIX,
        projected_step_ns=0,
        steps_per_s=None,
        speedup=1.0,
        assumptions=(
            f"{rows.sum():,} gaps lie inside CUDA graph executions whose recorded nodes cover under "
            f"{GRAPH_SPARSE_BUSY_SHARE:.0%} of the graph's span (or graphs with no recorded node): the "
            "graph's other nodes likely ran there unrecorded, so this idle is not measurable and has no projection.",
        ),
        measurable=False,
    )


#: Ranges that load the next batch (``## load_batch ##``, ``enumerate(DataLoader)#…``).
LOADING_RE = re.compile(r"load_batch|wait_for_batch|next_batch|get_batch|DataLoader|collate", re.IGNORECASE)


def _loading(diag, steady: np.ndarray) -> tuple[Finding, np.ndarray] | None:
    """The data-loading finding: the steady gaps ``steady`` (bool per gap) whose host
    evidence holds a batch-loading range (``LOADING_RE``), as one finding wherever they
    fall in the step (hta/control: ``## load_batch ##`` and the batch's H2D copy at
    each step's start, ~1.7 ms, at two positions of the step), with their host and copy
    time (the load and its input copy). Returns (finding, bool per gap of its gaps), or
    None when no such gap recurs in two steps or more (with steps known)."""
    g = diag.gaps
    cn = g.class_ns
    if cn is None:
        return None
    by: dict[str, set[int]] = {}
    ns: dict[str, int] = {}
    for i in _largest(np.where(steady, cn[:, int(Cause.HOST)], 0)).tolist():
        for e in diag.evidence(i):
            if e.cause == Cause.HOST and e.event >= 0 and LOADING_RE.search(e.name):
                by.setdefault(meaning(e.name), set()).add(i)
                ns[meaning(e.name)] = ns.get(meaning(e.name), 0) + int(e.overlap_ns)
    if not by:
        return None
    mask = np.zeros(len(g), dtype=bool)
    mask[sorted(set().union(*by.values()))] = True
    if diag.steps is not None and len(diag.steps) >= 2 and _steps_of(diag, np.flatnonzero(mask))[0] < 2:
        return None
    name = max(by, key=lambda k: (len(by[k]), ns[k], k))  # the most gaps, then the longest
    vec = np.where(mask, cn[:, int(Cause.HOST)] + cn[:, int(Cause.COPY)], 0).astype(np.int64)
    copies = " and its input copies" if (cn[mask, int(Cause.COPY)] > 0).any() else ""
    title = f"data loading (`{short_kernel_name(name, TITLE_NAME_CHARS)}`){copies} on the critical path"
    f = _finding(diag, "host", Cause.HOST, title, name, vec)
    fix = (
        "prefetch the next batch (DataLoader num_workers > 0, pin_memory=True) and copy it with "
        "non_blocking=True on a side stream before the step needs it"
    )
    return dataclasses.replace(f, fix=fix), mask


def _exposed_comm(diag) -> Finding | None:
    """Exposed communication on the budget device: time inside the steady steps when
    only collective kernels (``evidence_kinds.COLLECTIVE_RE``: NCCL, RCCL, c10d,
    all-reduce …) run, no compute kernel beside them. It is busy time, not idle, so no
    gap holds it: per step = the median over the typical steps (``budget
    .typical_steps``) of the collective union less its overlap with the compute union;
    fixed (fully overlapped with compute), the step is that much shorter. None when
    the device runs no collective, or none is exposed."""
    b = diag.budget
    trace = diag.trace
    if b is None or diag.steps is None or len(diag.steps) == 0:
        return None
    km = device_event_mask(trace, b.device, (Kind.KERNEL,), valid_timing_mask(trace))
    coll = km & np.isin(trace.name_id, ids_matching(trace, COLLECTIVE_RE))
    if not coll.any():
        return None
    comp = km & ~coll
    start = trace.start_ns.astype(np.int64)
    end = start + trace.dur_ns.astype(np.int64)
    cs, ce = union_intervals(start[coll], end[coll])
    ps, pe = union_intervals(start[comp], end[comp])
    s0, s1 = diag.steps.start_ns, diag.steps.end_ns
    # exposed collective time per step: the collective union inside the step, less
    # the part of it covered by compute (each exposed interval clipped to the step)
    xs, xe = [], []
    for a, z in zip(cs.tolist(), ce.tolist()):
        covered_s, covered_e = ps[(ps < z) & (pe > a)], pe[(ps < z) & (pe > a)]
        cur = a
        for u, v in zip(np.maximum(covered_s, a).tolist(), np.minimum(covered_e, z).tolist()):
            if u > cur:
                xs.append(cur)
                xe.append(u)
            cur = max(cur, v)
        if cur < z:
            xs.append(cur)
            xe.append(z)
    if not xs:
        return None
    ex_s, ex_e = np.array(xs, np.int64), np.array(xe, np.int64)
    per = coverage(ex_s, ex_e, s0, s1)
    idle = (s1 - s0) - coverage(*union_intervals(start[km], end[km]), s0, s1)
    typical = typical_steps(idle)
    per_step = int(np.median(per[typical])) if typical.any() else 0
    if per_step <= 0:
        return None
    projected = max(b.wall_ns - per_step, 1)
    k = np.flatnonzero(per > 0)
    return Finding(
        "communication",
        Cause.DEPENDENCY,
        f"exposed communication: only collectives run in {fmt_dur(per_step)} of each step",
        "",
        per_step,
        per_step / b.wall_ns if b.wall_ns > 0 else 0.0,
        int(per.sum()),
        int(k.size),
        len(diag.steps),
        np.zeros(0, np.int64),
        None,
        "overlap the collectives with compute (bucketing, async all-reduce, a separate stream) or shrink them",
        projected,
        1e9 / projected,
        b.wall_ns / projected,
        b.decode,
        (
            "Exposed communication is busy time (collective kernels with no compute kernel beside them), "
            "in no idle gap: the projection assumes it fully overlaps with compute.",
            f"Median over the {int(typical.sum())} typical steps of the exposed collective time per step.",
        ),
        tokens_per_s=1e9 / projected * (b.tokens_per_step or 1) if b.decode else None,
    )


def _dominant_range_ns(diag, i: int, skip: str) -> int:
    """The most host time of gap ``i`` inside one recorded range or op on its evidence
    list (``Evidence.overlap_ns``), leaving out ``skip`` (a ``meaning`` key), the step
    range and ranges of ``_body_ns`` or longer (the loop body, a pass, the whole trace)."""
    t = diag.trace
    body_ns = _body_ns(diag)
    best = 0
    for e in diag.evidence(i):
        if e.cause != Cause.HOST or e.event < 0 or meaning(e.name) == skip or _is_step_range(diag, e.name):
            continue
        if body_ns is not None and int(t.dur_ns[e.event]) >= body_ns:
            continue
        best = max(best, int(e.overlap_ns))
    return best


def _representative(
    diag, positions: np.ndarray, cause: Cause, title: str, name: str, vec: np.ndarray
) -> tuple[int, bool]:
    """(the gap whose card tells the finding, whether its host time is mostly the
    finding's subject). Untraced host work: the position with the most untraced host
    time (evidence with no event) among those where it is at least half the gap's host
    time. Per-op overhead: the position with the most host time in recorded events among
    those where that time and the finding's are at least half the gap's host time and
    no single range (``_dominant_range_ns``) holds half of it, one with no copy or sync
    evidence when there is one. A named host finding: its
    largest position where its time is at least half the gap's host time, for host work
    inside a range (``_is_container``) also with no finer range holding half of it.
    When none qualifies, the finding's largest position, not its subject's (False).
    Other classes: the largest position whose primary class is the finding's (else its
    largest), always its subject."""
    g = diag.gaps
    if cause == Cause.HOST and g.class_ns is not None:
        rows = positions[:EVIDENCE_GAPS]
        host = g.class_ns[rows, int(Cause.HOST)]
        if title in (UNTRACED_TITLE, PER_OP_TITLE):
            quiet = np.array(
                [
                    sum(int(e.overlap_ns) for e in diag.evidence(i) if e.cause == Cause.HOST and e.event < 0)
                    for i in rows
                ],
                dtype=np.int64,
            )
            if title == PER_OP_TITLE:  # the most recorded op time: the card tells the ops
                ok = (2 * (host - quiet) >= host) & (2 * vec[rows] >= host) & (host > 0)
                ok &= np.array([2 * _dominant_range_ns(diag, int(i), "") < h for i, h in zip(rows, host)], dtype=bool)
                # one with no copy, copy call or blocking wait on its list, when there is
                # one: its card tells the ops
                kind = diag.trace.kind
                plain = ok & np.array(
                    [
                        all(
                            e.cause not in (Cause.COPY, Cause.SYNC)
                            and (e.event < 0 or kind[e.event] != int(Kind.MEMCPY_CALL))
                            for e in diag.evidence(int(i))
                        )
                        for i in rows
                    ],
                    dtype=bool,
                )
                ok = plain if plain.any() else ok
                if ok.any():
                    return int(rows[ok][int(np.argmax((host - quiet)[ok]))]), True
            else:
                mostly = (2 * quiet >= host) & (quiet > 0)  # the card then leads with the untraced time
                if mostly.any():
                    return int(rows[mostly][int(np.argmax(quiet[mostly]))]), True
            return int(positions[0]), False
        inner = title.startswith("host work inside")
        for i, h in zip(rows.tolist(), host.tolist()):
            if 2 * int(vec[i]) >= h > 0 and not (inner and 2 * _dominant_range_ns(diag, i, name) >= h):
                return int(i), True
        return int(positions[0]), False
    own = positions[g.cause[positions] == int(cause)]
    return int(own[0] if own.size else positions[0]), True


#: Smells of a card that tells a cost that does not recur, or one slow call: such a
#: card never stands for a finding (a pattern across steps).
_UNFIT_SMELL_RE = re.compile(r"one-time|slow launch call")
#: Members whose card is tried for a finding, typical first, before it shows none.
CARD_TRIES = 8
NO_FIT_NOTE = (
    "No example card: no member gap's card tells this finding's class as a recurring cost "
    "(their cards tell another class, a one-time cost or a one-off)."
)


def _unfit_gaps(diag) -> np.ndarray:
    """Bool per gap that never stands for a finding: one-time (``Gaps.one_time``) or a
    recurring position's one-off (``GapGroup.one_offs``)."""
    g = diag.gaps
    out = g.one_time.copy() if g.one_time is not None else np.zeros(len(g), bool)
    for grp in diag.groups:
        out[grp.one_offs] = True
    return out


def _typical(diag, positions: np.ndarray, cause: Cause) -> np.ndarray:
    """The members of primary class ``cause`` among ``positions``, nearest their
    idle-weighted median length first (ties: the longer), at most ``CARD_TRIES``. The
    idle-weighted median is the length of the member at which the members' idle, summed
    shortest first, reaches half their total (``_idle_weighted_median_ns``): the gap the
    finding's idle typically sits in, not the typical count (the fourth audit: mi300
    resnet's copy finding showed a 5.3 µs memset, ~9% of its idle, though DtoD copies
    held the rest)."""
    g = diag.gaps
    own = positions[g.cause[positions] == int(cause)]
    if own.size == 0:
        return own
    dur = g.dur_ns[own].astype(np.int64)
    med = _idle_weighted_median_ns(dur)
    return own[np.lexsort((-dur, np.abs(dur - med)))][:CARD_TRIES]


def _idle_weighted_median_ns(dur_ns: np.ndarray) -> int:
    """The idle-weighted median of gap lengths ``dur_ns`` (int64 ns, non-empty): sorted
    ascending, the first length at which the cumulative sum reaches half the total (the
    weighted median with each gap weighted by its own idle)."""
    ordered = np.sort(dur_ns)
    cum = np.cumsum(ordered)
    return int(ordered[int(np.searchsorted(cum * 2, int(cum[-1]), side="left"))])


def _card_at(diag, i: int, cause: Cause) -> Card:
    """Gap ``i``'s card, through its recurring group when the group's class is ``cause``."""
    grp = int(diag.gaps.group[i])
    if grp >= 0 and diag.groups[grp].cause == cause:
        return card_for_group(diag, grp)
    return card_for_gap(diag, i)


def _card_of(
    diag, positions: np.ndarray, cause: Cause, title: str, name: str, vec: np.ndarray
) -> tuple[Card | None, int, str]:
    """(the card of the finding, the gap it is of (-1), a note when it has none). The
    card fits the finding: its class is ``cause`` and it tells no one-time cost or single
    slow call (``_UNFIT_SMELL_RE``), of a member neither one-time nor a one-off
    (``_unfit_gaps``). Host: the representative (``_representative``) of the fitting
    members; none when no member's host time is mostly the finding's subject (its card
    would tell other work). Other classes, and a host representative whose card does not
    fit: a typical member (``_typical``). When no member fits: None and
    ``NO_FIT_NOTE``, never a card that contradicts the finding (the third audit of
    issue 43: b200's launch finding showed a one-time module load that forbids CUDA
    graphs)."""
    if positions.size == 0:
        return None, -1, ""
    fit = positions[~_unfit_gaps(diag)[positions]]
    tries: list[int] = []
    if cause == Cause.HOST and fit.size:
        i, subject = _representative(diag, fit, cause, title, name, vec)
        if not subject:
            return None, -1, ""
        tries.append(i)
    tries += [int(i) for i in _typical(diag, fit, cause).tolist() if int(i) not in tries]
    for i in tries:
        card = _card_at(diag, i, cause)
        if card.cause == cause and not _UNFIT_SMELL_RE.search(card.smell):
            return card, i, ""
    return None, -1, NO_FIT_NOTE


def _fix(diag, kind: str, cause: Cause, name: str, title: str, card: Card | None) -> str:
    """The finding's first fix in a few words: for host work its card's whenever it has
    one (``Card.fix``, the card's first experiment shortened), so the verdict never
    contradicts the card it shows (per-op overhead, whose card no rule tells as such, is
    always fewer, larger ops); with no card (``_card_of``: no gap mostly its subject),
    allocation is fewer temporaries (``_ALLOC_FIX``), a named island is taken off the
    critical path unless it launches GPU work (then its CPU cost per kernel is cut), host work inside a range or untraced is found first."""
    short = short_kernel_name(name, TITLE_NAME_CHARS)
    if kind == "host":
        if title == PER_OP_TITLE:  # its card (if any) is of a per-op gap: no rule names that
            return _PER_OP_FIX
        if card is not None and card.fix:
            return card.fix
        if title == UNTRACED_TITLE:
            return _UNTRACED_FIX
        if _ALLOC_OP_RE.search(name):
            return _ALLOC_FIX
        if _COPY_CALL_RE.match(name):
            return _COPY_CALL_FIX
        if bool(name) and not _is_container(diag, name):
            if _launches_in_longest(diag, name)[1] > 0:  # it issues GPU work: not movable as a unit
                return _PER_KERNEL_FIX
            return f"take `{short}` off the critical path (after the step or in another thread)"
        if name:
            return f"find what the CPU does inside `{short}` (with_stack=True), then cut it or move it off the critical path"
        return _UNTRACED_FIX
    if card is not None and card.smell in _CARD_FIX_SMELLS:
        return card.fix
    if kind == "sync":
        return _sync_fix(diag, short)
    if kind == "dependency":
        return f"find what the queued op waits for ({name}) and overlap or reorder it"
    if cause == Cause.COPY:
        return _copy_fix(diag)
    return _FIX.get(cause, "classify it first")


#: The copy fix of a program not made with torch, in its runtime's words, per platform.
_NATIVE_COPY_FIX = {
    "cuda": (
        "issue the copies with cudaMemcpyAsync from page-locked memory (cudaHostAlloc/cudaHostRegister) "
        "on a non-default stream, overlapping kernels"
    ),
    "rocm": (
        "issue the copies with hipMemcpyAsync from page-locked memory (hipHostMalloc/hipHostRegister) "
        "on a non-default stream, overlapping kernels"
    ),
}


def _copy_fix(diag) -> str:
    """The copy finding's fix in the program's words (the fourth audit: a C program was
    told "keep tensors on the device (pinned memory and non_blocking)"): torch's for a
    PyTorch capture (``ProgramKind.profiler_is_torch``), JAX's for JAX, else the
    runtime's calls (``_NATIVE_COPY_FIX``, CUDA's where the platform has none)."""
    kind = program_kind(diag.trace)
    if kind.profiler_is_torch:
        return _FIX[Cause.COPY]
    if kind.framework == "jax":
        return "keep arrays on the device (jax.device_put once, outside the step; no host round trips)"
    return _NATIVE_COPY_FIX.get(kind.platform, _NATIVE_COPY_FIX["cuda"])


#: A sync call that waits without reading a value: its fix says "blocking call".
_WAIT_CALL_RE = re.compile(r"synchroni[sz]e|wait|barrier", re.IGNORECASE)


#: Cards whose rule names the cause better than the finding's class: the finding takes
#: their fix (allocator calls holding a sync gap; a synchronize before each launch goes
#: before any graph), so the finding does not contradict its card (audit 3).
_CARD_FIX_SMELLS = frozenset({"allocation churn", "launch after a synchronize"})


def _sync_fix(diag, short: str) -> str:
    """A sync finding's fix in the program's words: "from the loop" only where the
    trace marks steps, ``.item()``/``print`` only in a PyTorch program (audit 3), a
    "blocking call" rather than a read where the call only waits (``_WAIT_CALL_RE``:
    a synchronize, the fourth audit)."""
    stepped = diag.steps is not None and len(diag.steps) > 0
    where = " from the loop" if stepped else ""
    if short:
        after = "after it" if stepped else "at the end"
        if _WAIT_CALL_RE.search(short):  # a synchronize reads nothing (the fourth audit)
            return f"remove the blocking call in `{short}`{where} (wait {after} instead; CUDA events for timing)"
        return f"remove the blocking read in `{short}`{where} (read values {after}; CUDA events for timing)"
    what = ".item()/print/implicit syncs" if program_kind(diag.trace).profiler_is_torch else "the blocking syncs"
    return f"remove {what}{where}" if stepped else f"remove {what} where nothing needs the device finished"


def _steps_of(diag, rows: np.ndarray) -> tuple[int, int]:
    st = diag.steps
    if st is None or len(st) == 0:
        return (1 if rows.size else 0), 1
    k = st.owner_of(diag.gaps.start_ns[rows], diag.gaps.end_ns[rows])
    return int(np.unique(k[k >= 0]).size), len(st)


def _finding(diag, kind: str, cause: Cause, title: str, name: str, vec: np.ndarray) -> Finding:
    b = diag.budget
    rows = np.flatnonzero(vec > 0)
    rows = rows[np.lexsort((rows, -vec[rows]))]
    w = what_if(diag, remove_ns=vec)
    with_, total = _steps_of(diag, rows)
    card, card_gap, note = _card_of(diag, rows, cause, title, name, vec)
    projected = projectable(diag)
    return Finding(
        kind,
        cause,
        title,
        name,
        int(w.removed_ns),
        w.removed_ns / b.wall_ns if b.wall_ns > 0 else 0.0,
        int(vec.sum()),
        with_,
        total,
        rows.astype(np.int64),
        card,
        _fix(diag, kind, cause, name, title, card),
        int(w.projected_step_ns) if projected else 0,
        None if not projected or w.steps_per_s is None else float(w.steps_per_s),
        float(w.speedup) if projected else 1.0,
        bool(w.decode),
        tuple(w.assumptions) if projected else _no_projection(diag),
        vec,
        tokens_per_s=None if not projected or w.tokens_per_s is None or not w.decode else float(w.tokens_per_s),
        projected=projected,
        card_gap=card_gap,
        card_note=note,
    )


def _edge_where(diag, side: int) -> str:
    """Where an edge gap of ``side`` (``Gaps.edge``: 1 leading, 2 trailing, 0 neither)
    lies, in the words of the findings' edge items."""
    stepped = diag.steps is not None and len(diag.steps) > 0
    if side == 1:
        return "before the first kernel " + ("(profiler start)" if stepped else "(the program's start)")
    if side == 2:
        return "after the last kernel " + ("(profiler stop, the loop's tail)" if stepped else "(the program's end)")
    return "outside the steps"


def edge_place(diag: Diagnosis, i: int) -> str | None:
    """Where gap ``i`` of ``diag`` lies when the findings list it apart as an edge
    (their items of kind ``"edge"``: ``steps.edge_gaps``, and a one-step trace's
    one-offs), in those items' words ("before the first kernel (profiler start)",
    "one-off after the trace's only step"); None for any other gap. Its card's advice
    is about a steady state the gap is not part of (``edge_note``). The masks are
    computed once per diagnosis (``diag.derived["edge_places"]``)."""
    got = diag.derived.get("edge_places")
    if got is None:
        g = diag.gaps
        steady = _steady_for_findings(diag)
        one_off = _one_off_rows(diag, steady) if steady is not None else np.zeros(len(g), bool)
        got = diag.derived["edge_places"] = (edge_gaps(g, diag.steps, drawn=is_drawn(diag.trace)), one_off)
    edge, one_off = typing.cast(tuple[np.ndarray, np.ndarray], got)
    if not 0 <= i < edge.size:
        return None
    if edge[i]:
        side = diag.gaps.edge
        return _edge_where(diag, int(side[i]) if side is not None else 0)
    if one_off[i]:
        st = diag.steps
        return _ONE_OFF_BEFORE if st is not None and diag.gaps.start_ns[i] < st.start_ns[0] else _ONE_OFF_AFTER
    return None


def edge_note(where: str) -> str:
    """What a card of an edge gap says first, ``where`` being ``edge_place``'s: its
    advice is about a steady state the gap is not part of (the viewer's card, the
    report's, MCP's ``gap_card``)."""
    return f"idle {where}, outside the steady state: listed apart, in no per-step figure"


def _apart(diag, edge: np.ndarray) -> list[Finding]:
    """Edge gaps, one finding per kind of edge (before the first kernel, after the last
    one, outside the steps: largest first), and the one-time costs as one finding."""
    g = diag.gaps
    out: list[Finding] = []
    dur = g.dur_ns
    side = g.edge if g.edge is not None else np.zeros(len(g), np.int8)
    kinds = [(edge & (side == k), _edge_where(diag, k)) for k in (1, 2, 0)]
    for mask, where in kinds:
        if not mask.any():
            continue
        rows = np.flatnonzero(mask)
        rows = rows[np.argsort(-dur[rows], kind="stable")].astype(np.int64)
        vec = np.where(mask, dur, 0).astype(np.int64)
        what = f"{fmt_dur(int(vec.sum()))} idle" + (f" in {rows.size} gaps" if rows.size > 1 else "")
        out.append(
            Finding(
                "edge",
                Cause(int(g.cause[rows[0]])),
                f"edge: {what} {where}",
                "",
                0,
                0.0,
                int(vec.sum()),
                *_steps_of(diag, rows),
                rows,
                card_for_gap(diag, int(rows[0])),
                "capture a steady-state window: start the profiler after warm-up, stop it inside the loop",
                remove_ns=vec,
            )
        )
    out.sort(key=lambda f: -f.total_ns)
    once = g.one_time if g.one_time is not None else np.zeros(len(g), bool)
    once = once & ~edge
    if once.any():
        rows = np.flatnonzero(once)
        rows = rows[np.argsort(-dur[rows], kind="stable")].astype(np.int64)
        vec = np.where(once, dur, 0).astype(np.int64)
        out.append(
            Finding(
                "one-time",
                Cause(int(g.cause[rows[0]])),
                f"one-time costs (warm-up): {rows.size} gaps, {fmt_dur(int(vec.sum()))} in all",
                "",
                0,
                0.0,
                int(vec.sum()),
                *_steps_of(diag, rows),
                rows,
                card_for_gap(diag, int(rows[0])),
                "warm up before profiling (these costs do not recur)",
                remove_ns=vec,
            )
        )
    return out


_ONE_OFF_BEFORE = "one-off at the trace's start, before its only step"
_ONE_OFF_AFTER = "one-off after the trace's only step"


def _one_off_rows(diag, steady: np.ndarray) -> np.ndarray:
    """Bool per gap: the steady gaps ``steady`` of a one-step trace that its one step
    does not own (``_one_off``'s rows)."""
    g, st = diag.gaps, diag.steps
    if st is None or len(st) == 0 or projectable(diag) or not len(g):
        return np.zeros(len(g), bool)
    return steady & (st.owner_of(g.start_ns, g.end_ns) < 0)


def _steady_for_findings(diag) -> np.ndarray | None:
    """The steady gaps ``findings`` judges (those of the budget's device), or None when
    it judges none (no budget, no steady state, no gaps)."""
    g, b = diag.gaps, diag.budget
    if b is None or not has_steady_state(diag) or not len(g):
        return None
    return steady_gaps(diag) & (g.device == b.device)


def _one_off(diag, steady: np.ndarray) -> tuple[np.ndarray, list[Finding]]:
    """Gaps of ``steady`` outside the only step of a one-step trace that cannot be
    projected (``projectable``): the one-off at the trace's start and after its end,
    as ``Steps.owner_of`` (the rule of ``steps.edge_gaps``) decides: a gap starting
    before the step is the step's when most of its time lies inside it
    (sglang_decode's 463 ms wait, 99.97% inside its one ``step[DECODE bs=32]``). With
    two or more steps ``steps.edge_gaps`` keeps these apart already. Returns (bool per
    gap, the entries kept apart: kind ``"edge"``, before the step first)."""
    g = diag.gaps
    st = diag.steps
    mask = _one_off_rows(diag, steady)
    if st is None or not mask.any():
        return mask, []
    out: list[Finding] = []
    for part, where in (
        (mask & (g.start_ns < st.start_ns[0]), _ONE_OFF_BEFORE),
        (mask & (g.start_ns >= st.start_ns[0]), _ONE_OFF_AFTER),
    ):
        if not part.any():
            continue
        rows = np.flatnonzero(part)
        rows = rows[np.argsort(-g.dur_ns[rows], kind="stable")].astype(np.int64)
        vec = np.where(part, g.dur_ns, 0).astype(np.int64)
        what = f"{fmt_dur(int(vec.sum()))} idle" + (f" in {rows.size} gaps" if rows.size > 1 else "")
        out.append(
            Finding(
                "edge",
                Cause(int(g.cause[rows[0]])),
                f"{where}: {what}",
                "",
                0,
                0.0,
                int(vec.sum()),
                0,
                len(st),
                rows,
                card_for_gap(diag, int(rows[0])),
                "capture several warmed-up steps: this wait may not recur",
                remove_ns=vec,
                projected=False,
            )
        )
    return mask, out


def _no_steady_verdict(diag, ranked: list[Finding]) -> str:
    b = diag.budget
    n = complete_steps(diag)
    held = (
        f"the trace holds {n} complete step ({fmt_dur(b.wall_ns)}"
        + (f", `{short_kernel_name(diag.steps.name, TITLE_NAME_CHARS)}`)" if diag.steps is not None else ")")
        if n
        else f"the trace marks no steps (its {fmt_dur(b.wall_ns)} window is one stretch)"
    )
    top = (
        f" The largest idle in it, {ranked[0].title}, is {fmt_dur(ranked[0].per_step_ns)} "
        f"({100 * ranked[0].step_share:.1f}%): listed, not projected."
        if ranked
        else ""
    )
    return (
        f"No steady state to judge: {held}, fewer than the {MIN_STEADY_STEPS} a recurring pattern needs, "
        f"so no finding makes a verdict and none is projected.{top} Capture several warmed-up steps, each marked: "
        + _mark_steps(diag)
    )


def _mark_steps(diag) -> str:
    """How to mark each step in a new capture, in the program's words (audit 3: a C
    program was told torch.profiler and prof.step()): ``ProfilerStep#N`` ranges for
    PyTorch, else a range whose name holds "step" (``steps.STEP_NAME_RE``)."""
    kind = program_kind(diag.trace)
    if kind.profiler_is_torch:
        return (
            "torch.profiler with schedule(wait=1, warmup=1, active=3) and prof.step() each iteration "
            "(ProfilerStep#N ranges), or a record_function range around each step."
        )
    if kind.platform == "rocm":
        return 'a ROCTX range named "step" around each iteration (roctxRangePush("step") / roctxRangePop()).'
    if kind.python:
        return 'an NVTX range named "step" around each iteration (nvtx.annotate("step")), captured with NVTX on.'
    return (
        'an NVTX range named "step" around each iteration (nvtxRangePushA("step") / nvtxRangePop()), '
        "captured with nsys profile --trace=cuda,nvtx."
    )


def _verdict(diag, ranked: list[Finding], steady_state: bool) -> tuple[str, str, float]:
    b = diag.budget
    if b is None:
        return "No GPU work in the trace: nothing to judge.", "no gpu work", 0.0
    if not steady_state:
        return (
            "No steady-state step: the trace holds too little GPU work to judge a step "
            f"({fmt_dur(b.wall_ns)} window); capture several steps.",
            "no steady state",
            0.0,
        )
    if not projectable(diag):
        return _no_steady_verdict(diag, ranked), "no steady state", 0.0
    if b.idle_share < GPU_BOUND_IDLE_SHARE:
        comm = [f for f in ranked if f.kind == "communication"]
        extra = (
            f" Of its busy time, {fmt_dur(comm[0].per_step_ns)} a step ({100 * comm[0].step_share:.0f}%) is exposed "
            "communication: overlap the collectives with compute."
            if comm
            else ""
        )
        return (
            f"GPU-bound: the kernels are the story. The GPU is busy {100 * (1 - b.idle_share):.0f}% of each "
            f"{fmt_dur(b.wall_ns)} step (idle {100 * b.idle_share:.0f}%): look at the kernels, not the gaps.{extra}",
            "gpu-bound",
            b.idle_share,
        )
    if not ranked or ranked[0].step_share < VERDICT_MIN_SHARE:
        return (
            f"The GPU idles {100 * b.idle_share:.0f}% of each {fmt_dur(b.wall_ns)} step, in no steady pattern"
            + (
                f": the largest, {ranked[0].title}, recovers only {fmt_dur(ranked[0].per_step_ns)} a step "
                f"({100 * ranked[0].step_share:.1f}%); look at the edges, one-time costs and the largest gaps."
                if ranked
                else "; look at the edges, one-time costs and the largest gaps."
            ),
            "none",
            b.idle_share,
        )
    f = ranked[0]
    if not f.measurable:
        return (
            f"Not measurable: {f.title} ({fmt_dur(f.per_step_ns)} of every {fmt_dur(b.wall_ns)} step, "
            f"{100 * f.step_share:.1f}%); first: {f.fix}; no projection until it is recorded.",
            f.kind,
            f.step_share,
        )
    rate_txt = (
        "no rate: nothing left of the step"
        if f.steps_per_s is None
        else f"{fmt_rate(f.tokens_per_s)} tokens/s"
        if f.tokens_per_s is not None
        else f"{fmt_rate(f.steps_per_s)} steps/s"
    )
    return (
        f"{f.kind.capitalize()}-bound: {f.title} costs {fmt_dur(f.per_step_ns)} of every {fmt_dur(b.wall_ns)} step "
        f"({100 * f.step_share:.1f}%); first fix: {f.fix}; fixed, a step would take {fmt_dur(f.projected_step_ns)} "
        f"({rate_txt}, {f.speedup:.2f}x).",
        f.kind,
        f.step_share,
    )


#: Python function events a second (``Kind.PYTHON``: torch.profiler's with_stack=True
#: records every Python call) from which a host verdict carries a caveat: at about 1 µs
#: of the tracer's own cost per recorded call, 50,000 a second is 5% of the time.
PYTHON_TRACING_MIN_RATE = 50_000


def _tracing_caveat(diag, ranked: list[Finding], kind: str) -> str:
    """A sentence for a host verdict (or a no-steady-state one whose largest finding
    is host work) when the trace records ``PYTHON_TRACING_MIN_RATE`` Python function
    events a second or more over the steps (first start to last end; no steps: the
    budget's window): the profiler's Python tracing inflates host time (b200: 15,230
    in 84 ms). Else ""."""
    top = ranked[0].kind if ranked else ""
    if not (kind == "host" or (kind == "no steady state" and top == "host")) or diag.budget is None:
        return ""
    t, st, b = diag.trace, diag.steps, diag.budget
    if st is not None and len(st):
        lo, hi = int(st.start_ns[0]), int(st.end_ns[-1])
    else:
        dev = [d for d in diag.devices if d.device == b.device]
        lo, hi = (dev[0].window_start_ns, dev[0].window_end_ns) if dev else (0, 0)
    py = t.kind == int(Kind.PYTHON)
    n = int((py & (t.start_ns >= lo) & (t.start_ns < hi)).sum())
    if hi <= lo or n * 1e9 < PYTHON_TRACING_MIN_RATE * (hi - lo):
        return ""
    return (
        f" Caveat: the trace holds {n:,} Python function events (Python tracing, with_stack=True) in its "
        f"{fmt_dur(hi - lo)} ({fmt_rate(n * 1e9 / (hi - lo))} a second): the profiler's tracing of every Python call "
        "inflates host time; re-profile without with_stack to confirm the host share."
    )


def findings(diag: Diagnosis) -> Findings:
    """The findings and verdict of ``diag``; see the module docstring.

    Reads evidence lists only of steady-state gaps of the budget device holding host or
    sync time. Computed on first use and kept in ``diag.derived["findings"]``; threads
    that ask at once compute them once (the viewer's worker and the diagnosis cache's
    writer: ``diagnosis_cache.diagnose_cached(findings_first=False)``). Never raises on
    a valid ``Diagnosis``."""
    kept = diag.derived.get("findings")
    if isinstance(kept, Findings):
        return kept
    with _lock_of(diag):
        kept = diag.derived.get("findings")
        if isinstance(kept, Findings):
            return kept
        result = _findings(diag)
        diag.derived["findings"] = result
    return result


_LOCKS_GUARD = threading.Lock()


class _FindingsLock:
    """The lock of one diagnosis's findings (``_lock_of``). Kept in ``diag.derived``,
    so it is copied with the diagnosis: a copy or an unpickled one gets a lock of its
    own (a bare ``threading.Lock`` there made ``copy.deepcopy`` and ``pickle`` of a
    diagnosis with findings raise ``TypeError``)."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def __enter__(self) -> bool:
        return self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()

    def __reduce__(self) -> tuple:
        return (_FindingsLock, ())


def _lock_of(diag: Diagnosis) -> _FindingsLock:
    """The lock that makes ``findings(diag)`` run once (kept in ``diag.derived``)."""
    with _LOCKS_GUARD:
        lock = diag.derived.get("findings_lock")
        if not isinstance(lock, _FindingsLock):
            lock = diag.derived["findings_lock"] = _FindingsLock()
        return lock


def _findings(diag: Diagnosis) -> Findings:
    g = diag.gaps
    edge = edge_gaps(g, diag.steps, drawn=is_drawn(diag.trace))
    steady_state = has_steady_state(diag)
    ranked: list[Finding] = []
    once: list[Finding] = []
    steady = _steady_for_findings(diag)
    if steady is not None:
        one_off, once = _one_off(diag, steady)
        steady &= ~one_off
        unrec = steady & ((g.trust & int(Trust.GRAPH_UNRECORDED)) != 0) if g.trust is not None else steady & False
        if unrec.any():  # not measurable: kept out of every other finding, no projection
            steady &= ~unrec
            f = _unrecorded(diag, unrec)
            if f.per_step_ns > 0 and f.step_share >= FINDING_MIN_SHARE:
                ranked.append(f)
        loading = _loading(diag, steady)
        if loading is not None:  # one finding wherever in the step; in no other
            steady &= ~loading[1]
            if loading[0].per_step_ns > 0 and loading[0].step_share >= FINDING_MIN_SHARE:
                ranked.append(loading[0])
        for kind, cause, title, name, vec in _candidates(diag, steady):
            f = _finding(diag, kind, cause, title, name, vec)
            if f.per_step_ns > 0 and f.step_share >= FINDING_MIN_SHARE:
                ranked.append(f)
        comm = _exposed_comm(diag)
        if comm is not None and not projectable(diag):
            comm = dataclasses.replace(
                comm,
                projected_step_ns=0,
                steps_per_s=None,
                speedup=1.0,
                tokens_per_s=None,
                projected=False,
                assumptions=_no_projection(diag),
            )
        if comm is not None and comm.step_share >= FINDING_MIN_SHARE:
            ranked.append(comm)
        ranked.sort(key=lambda f: (-f.per_step_ns, f.title))
    verdict, kind, share = _verdict(diag, ranked, steady_state)
    verdict += _tracing_caveat(diag, ranked, kind)
    return Findings(verdict, kind, share, tuple(ranked), tuple(once + _apart(diag, edge)), edge, steady_state)
