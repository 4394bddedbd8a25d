"""Per-rank compact summary: what the rank-set analysis keeps of one rank's trace.

``summarize(path, params)`` loads one trace (``gapscope.parsers.load``), diagnoses it
(``gapscope.analysis.diagnose``) and keeps only what the cross-rank analysis needs: the
rank's header (``distributedInfo`` rank and world size), per-step GPU busy and idle by
cause class, the collective kernels with their launch, start, end, step, sequence and
size, the compute kernels overlapping them (to tell a collective's wait from useful
work), and the largest idle gaps with their cards. The trace and the diagnosis are
dropped before it returns, so a coordinator holding one summary per rank never holds
any rank's events. Summaries pickle (they travel back from a process pool).

Everything is measured on one device of the rank: the budget's (the busiest). Times
are absolute int64 ns (the trace's own clock; ranks on different hosts may disagree,
which is why waits are measured from kernel durations, see ``gapscope.ranks.match``).
"""

from __future__ import annotations

import dataclasses
import re
import time

import numpy as np

from gapscope.analysis.card import card_for_gap
from gapscope.analysis.types import Cause, Params
from gapscope.report.damage import Damage, damage_of, warning_rows

__all__ = [
    "RankSummary",
    "RankFailure",
    "Collective",
    "CollectiveTable",
    "GapNote",
    "summarize",
    "summarize_or_fail",
    "COLLECTIVE_RE",
    "collective_family",
    "TOP_GAPS",
]

#: A collective-communication kernel (NCCL, RCCL, and the ``ncclDevKernel`` form of NCCL >= 2.19).
COLLECTIVE_RE = re.compile(r"^(?:nccl|rccl)|nccl(?:Dev)?Kernel", re.IGNORECASE)
_FAMILY_RE = re.compile(r"(?:nccl|rccl)(?:Dev)?Kernel_([A-Za-z]+)", re.IGNORECASE)
#: How many of the largest gaps of a rank keep their card.
TOP_GAPS = 24
_N_CAUSES = len(Cause)
_SEQ_KEYS = ("Seq", "seq", "Sequence number", "sequence_number")
_SIZE_KEYS = ("In msg nelems", "In msg size", "Out msg nelems")


def collective_family(name: str) -> str:
    """The collective a kernel name stands for: ``ncclKernel_AllReduce_RING_LL_Sum_float(...)``
    → ``AllReduce``, ``ncclDevKernel_SendRecv(...)`` → ``SendRecv``; otherwise the name
    up to its parameter list."""
    m = _FAMILY_RE.search(name)
    if m:
        return m.group(1)
    return name.split("(", 1)[0].strip()


@dataclasses.dataclass(frozen=True)
class Collective:
    """One collective kernel of a rank. ``family``: see ``collective_family``;
    ``name``: from the kernel's ``Collective name`` arg when present, else ``family``;
    ``step``: index into the rank's steps (-1 outside every step; found from the
    launch call's start, since steps are CPU ranges); ``ordinal``: the how-manieth
    collective of this family in that step (0-based); ``seq``: NCCL sequence number
    from the args (-1 none); ``group``: process-group name ("" none); ``nelems``:
    message elements from the args (-1 unknown); ``launch_start_ns`` /
    ``launch_end_ns``: the launch call (-1 none); ``start_ns`` / ``end_ns``: the kernel;
    ``busy_before_ns``: the rank's GPU busy from its step start to this kernel's start."""

    family: str
    name: str
    step: int
    ordinal: int
    seq: int
    group: str
    nelems: int
    launch_start_ns: int
    launch_end_ns: int
    start_ns: int
    end_ns: int
    busy_before_ns: int


@dataclasses.dataclass(frozen=True, eq=False)
class CollectiveTable:
    """A rank's collectives as struct of arrays (the fields of ``Collective``, one
    element per collective kernel, in kernel start order): int arrays ``step``,
    ``ordinal``, ``seq``, ``nelems``, ``launch_start_ns``, ``launch_end_ns``,
    ``start_ns``, ``end_ns``, ``busy_before_ns`` (int64; ``step``/``ordinal`` int32) and
    tuples of strings ``family``, ``name``, ``group`` (each distinct string held once).
    About 100 bytes per collective, so a coordinator of many ranks holds arrays, not
    an object per collective. ``table[j]`` is the ``Collective`` view of one."""

    family: tuple
    name: tuple
    group: tuple
    step: np.ndarray
    ordinal: np.ndarray
    seq: np.ndarray
    nelems: np.ndarray
    launch_start_ns: np.ndarray
    launch_end_ns: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    busy_before_ns: np.ndarray

    def __len__(self) -> int:
        return int(self.start_ns.shape[0])

    def __getitem__(self, j: int) -> Collective:
        j = int(j)
        return Collective(
            self.family[j],
            self.name[j],
            int(self.step[j]),
            int(self.ordinal[j]),
            int(self.seq[j]),
            self.group[j],
            int(self.nelems[j]),
            int(self.launch_start_ns[j]),
            int(self.launch_end_ns[j]),
            int(self.start_ns[j]),
            int(self.end_ns[j]),
            int(self.busy_before_ns[j]),
        )

    def __iter__(self):
        return (self[j] for j in range(len(self)))

    @classmethod
    def from_rows(cls, rows: list[Collective]) -> CollectiveTable:
        pool: dict[str, str] = {}

        def strs(attr: str) -> tuple:
            return tuple(pool.setdefault(getattr(c, attr), getattr(c, attr)) for c in rows)

        def ints(attr: str, dtype=np.int64) -> np.ndarray:
            return np.array([getattr(c, attr) for c in rows], dtype=dtype)

        return cls(
            strs("family"),
            strs("name"),
            strs("group"),
            ints("step", np.int32),
            ints("ordinal", np.int32),
            ints("seq"),
            ints("nelems"),
            ints("launch_start_ns"),
            ints("launch_end_ns"),
            ints("start_ns"),
            ints("end_ns"),
            ints("busy_before_ns"),
        )


@dataclasses.dataclass(frozen=True)
class GapNote:
    """One of the rank's largest idle gaps with its card (``gapscope.analysis.card.card_for_gap``)."""

    start_ns: int
    end_ns: int
    step: int
    cause: str
    smell: str
    why: str
    first_experiment: str


@dataclasses.dataclass(frozen=True, eq=False)
class RankSummary:
    """What is kept of one rank (see the module docstring).

    ``rank_meta``/``world_size``: from ``distributedInfo`` (None when absent); ``device``:
    the device measured (-1: no GPU work); ``window_ns``/``busy_ns``/``idle_ns``: the
    device's analysis window, kernel union (the single-file report's figure) and the
    gaps' total; ``class_idle_ns``: idle per ``Cause`` label over the whole trace;
    ``step_labels``: step annotation names (``ProfilerStep#12``; ``step k`` for steps
    found by period); ``step_start_ns``/``step_end_ns``/``step_busy_ns`` int64 (n_steps,);
    ``step_class_ns`` int64 (n_steps, len(Cause)): idle of the gaps starting in the step;
    ``collectives``: a ``CollectiveTable``;
    ``comp_start_ns``/``comp_end_ns``: the union of non-collective kernels, clipped to
    the collectives' windows (enough to measure how much of a wait overlapped compute);
    ``load_s``: seconds to load and diagnose; ``events``: the trace's event count;
    ``warnings``: the loader's warnings as ``{line, field, message}`` rows and
    ``damage`` what they say (``gapscope.report.damage``: cut off, repaired).
    """

    path: str
    rank_meta: int | None
    world_size: int | None
    trace_name: str | None
    device: int
    window_ns: int
    busy_ns: int
    idle_ns: int
    class_idle_ns: dict
    step_source: str
    step_labels: tuple
    step_start_ns: np.ndarray
    step_end_ns: np.ndarray
    step_busy_ns: np.ndarray
    step_class_ns: np.ndarray
    collectives: CollectiveTable
    comp_start_ns: np.ndarray
    comp_end_ns: np.ndarray
    gaps: tuple
    load_s: float
    events: int
    warnings: tuple = ()
    damage: Damage = Damage(False, None, 0)

    @property
    def step_wall_ns(self) -> int:
        """Median step wall time (ns); the window when no steps are known."""
        if self.step_start_ns.size == 0:
            return self.window_ns
        return int(np.median(self.step_end_ns - self.step_start_ns))

    @property
    def traced_ns(self) -> int:
        """The traced steps' total wall time (ns); the window when no steps are known."""
        if self.step_start_ns.size == 0:
            return self.window_ns
        return int((self.step_end_ns - self.step_start_ns).sum())

    @property
    def step_busy_median_ns(self) -> int:
        if self.step_busy_ns.size == 0:
            return self.busy_ns
        return int(np.median(self.step_busy_ns))


@dataclasses.dataclass(frozen=True)
class RankFailure:
    """A rank that could not be summarised: its file and the error, on one line."""

    path: str
    error: str


def summarize_or_fail(path: str, params: Params | None = None) -> RankSummary | RankFailure:
    """``summarize`` that turns any exception into a ``RankFailure`` (the pool and Dask
    workers call this, so one bad file never stops the rest)."""
    try:
        return summarize(path, params)
    except Exception as exc:  # noqa: BLE001 - reported per rank, never swallowed
        msg = " ".join(str(exc).split()) or type(exc).__name__
        return RankFailure(str(path), f"{type(exc).__name__}: {msg}"[:300])


def summarize(path: str, params: Params | None = None) -> RankSummary:
    """Load and diagnose ``path`` and return its ``RankSummary``.

    Raises what ``gapscope.parsers.load`` raises (``TraceFormatError`` for a file that
    is not a trace, ``OSError`` for one that cannot be read)."""
    from gapscope import parsers
    from gapscope.analysis import diagnose
    from gapscope.analysis.busy import coverage, union_intervals
    from gapscope.parsers.model import Kind

    t0 = time.perf_counter()
    trace = parsers.load(str(path))
    diag = diagnose(trace, params or Params())
    src = trace.source

    device = _summary_device(diag)
    dev = next((d for d in diag.devices if d.device == device), None)

    # Kernels of the device, collectives among them.
    lane_dev = np.array([ln.device if ln.is_gpu else -1 for ln in trace.lanes], dtype=np.int64)
    is_kernel = trace.kind == int(Kind.KERNEL)
    if lane_dev.size and len(trace):
        on_dev = (lane_dev[trace.lane] == device) & is_kernel & (trace.dur_ns >= 0)
    else:
        on_dev = np.zeros(len(trace), dtype=bool)
    coll_name_ids = np.array([i for i, n in enumerate(trace.names) if COLLECTIVE_RE.search(n)], dtype=np.int64)
    is_coll = on_dev & np.isin(trace.name_id, coll_name_ids)
    k_all = np.flatnonzero(on_dev)
    u_s, u_e = union_intervals(trace.start_ns[k_all], trace.end_ns[k_all])
    k_comp = np.flatnonzero(on_dev & ~is_coll)
    c_s, c_e = union_intervals(trace.start_ns[k_comp], trace.end_ns[k_comp])

    # Steps.
    steps = diag.steps
    s0, s1, labels, step_source = _step_bounds(trace, steps)
    step_busy = coverage(u_s, u_e, s0, s1) if s0.size else np.zeros(0, dtype=np.int64)

    def step_of(t: np.ndarray) -> np.ndarray:
        if s0.size == 0 or steps is None:
            return np.full(np.shape(t), -1, dtype=np.int64)
        return steps.index_of(np.asarray(t, dtype=np.int64))

    # Idle by class, whole trace and per step (a gap counts in the step it starts in).
    g = diag.gaps
    gsel = np.flatnonzero(g.device == device) if len(g) else np.zeros(0, dtype=np.int64)
    class_ns = g.class_ns if g.class_ns is not None else np.zeros((len(g), _N_CAUSES), dtype=np.int64)
    class_idle = {c.label: int(class_ns[gsel, int(c)].sum()) for c in Cause}
    step_class = np.zeros((s0.size, _N_CAUSES), dtype=np.int64)
    if s0.size and gsel.size:
        gk = step_of(g.start_ns[gsel])
        inside = gk >= 0
        np.add.at(step_class, gk[inside], class_ns[gsel[inside]])

    # Collectives: launch call by flow (launch -> GPU op), args for sequence and size.
    ci = np.flatnonzero(is_coll)
    ci = ci[np.argsort(trace.start_ns[ci], kind="stable")]
    starts = trace.start_ns[ci]
    ends = trace.end_ns[ci]
    launch_start, launch_end = _launch_bounds(trace, ci)
    where = np.where(launch_start >= 0, launch_start, starts)
    csteps = step_of(where)
    step_first = s0[np.maximum(csteps, 0)] if s0.size else np.zeros(ci.size, dtype=np.int64)
    first = np.where(csteps >= 0, step_first, u_s[0] if u_s.size else 0)
    busy_before = coverage(u_s, u_e, np.minimum(first, starts), starts)
    colls = _collective_rows(trace, ci, csteps, launch_start, launch_end, starts, ends, busy_before)
    # Compute kernels inside the collectives' windows only (bounded by the kernel count).
    if ci.size and c_s.size:
        w_s, w_e = union_intervals(starts, ends)
        keep = _overlapping(c_s, c_e, w_s, w_e)
        comp_s, comp_e = c_s[keep], c_e[keep]
    else:
        comp_s = comp_e = np.zeros(0, dtype=np.int64)

    # The largest gaps of the device with their cards.
    notes = _gap_notes(diag, gsel, step_of)

    return RankSummary(
        path=str(path),
        rank_meta=src.rank,
        world_size=src.world_size,
        trace_name=src.trace_name,
        device=device,
        window_ns=int(dev.window_ns) if dev else 0,
        busy_ns=int(dev.busy_ns) if dev else 0,
        idle_ns=int(g.dur_ns[gsel].sum()) if gsel.size else 0,
        class_idle_ns=class_idle,
        step_source=step_source,
        step_labels=labels,
        step_start_ns=s0.copy(),
        step_end_ns=s1.copy(),
        step_busy_ns=np.asarray(step_busy, dtype=np.int64),
        step_class_ns=step_class,
        collectives=CollectiveTable.from_rows(colls),
        comp_start_ns=np.asarray(comp_s, dtype=np.int64).copy(),
        comp_end_ns=np.asarray(comp_e, dtype=np.int64).copy(),
        gaps=tuple(notes),
        load_s=time.perf_counter() - t0,
        events=len(trace),
        warnings=tuple(warning_rows(trace.warnings)),
        damage=damage_of(trace.warnings),
    )


def _summary_device(diag) -> int:
    """The device a rank is measured on: the budget's, else the busiest; -1 with no device."""
    if diag.budget is not None:
        return int(diag.budget.device)
    if diag.devices:
        return max(diag.devices, key=lambda d: d.busy_ns).device
    return -1


def _step_bounds(trace, steps) -> tuple[np.ndarray, np.ndarray, tuple[str, ...], str]:
    """(start_ns, end_ns, labels, source) of the diagnosis' steps; empty arrays and source
    ``"window"`` without steps. Labels: the step events' names, else ``step K``."""
    if steps is not None and len(steps):
        s0 = np.asarray(steps.start_ns, dtype=np.int64)
        s1 = np.asarray(steps.end_ns, dtype=np.int64)
        if steps.events.size == len(steps):
            labels = tuple(trace.name(int(e)) for e in steps.events)
        else:
            labels = tuple(f"step {k}" for k in range(len(steps)))
        return s0, s1, labels, steps.source
    s0 = s1 = np.zeros(0, dtype=np.int64)
    return s0, s1, (), "window"


def _launch_bounds(trace, ci: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int64 (start_ns, end_ns) of the launch call of each GPU op ``ci``, found by flow
    (launch -> GPU op, the first flow into it); -1 where none."""
    launch_of: dict[int, int] = {}
    if ci.size and trace.flow_dst.size:
        m = np.isin(trace.flow_dst, ci)
        for src_i, dst_i in zip(trace.flow_src[m].tolist(), trace.flow_dst[m].tolist()):
            launch_of.setdefault(int(dst_i), int(src_i))
    launch_start = np.array(
        [trace.start_ns[launch_of[i]] if i in launch_of else -1 for i in ci.tolist()], dtype=np.int64
    )
    launch_end = np.array([trace.end_ns[launch_of[i]] if i in launch_of else -1 for i in ci.tolist()], dtype=np.int64)
    return launch_start, launch_end


def _collective_rows(
    trace,
    ci: np.ndarray,
    csteps: np.ndarray,
    launch_start: np.ndarray,
    launch_end: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    busy_before: np.ndarray,
) -> list[Collective]:
    """One ``Collective`` per collective kernel ``ci`` (in start order), its ordinal
    counted per (step, family), sequence and size read from its args."""
    colls = []
    ordinals: dict = {}
    for j, i in enumerate(ci.tolist()):
        args = trace.args_of(i)
        fam = collective_family(trace.name(i))
        key = (int(csteps[j]), fam)
        k = ordinals.get(key, 0)
        ordinals[key] = k + 1
        colls.append(
            Collective(
                family=fam,
                name=str(args.get("Collective name") or fam),
                step=int(csteps[j]),
                ordinal=k,
                seq=_int_arg(args, _SEQ_KEYS),
                group=str(args.get("Process Group Name", "")),
                nelems=_int_arg(args, _SIZE_KEYS),
                launch_start_ns=int(launch_start[j]),
                launch_end_ns=int(launch_end[j]),
                start_ns=int(starts[j]),
                end_ns=int(ends[j]),
                busy_before_ns=int(busy_before[j]),
            )
        )
    return colls


def _overlapping(c_s: np.ndarray, c_e: np.ndarray, w_s: np.ndarray, w_e: np.ndarray) -> np.ndarray:
    """Sorted int64 indices of the disjoint sorted intervals [c_s, c_e) that overlap any
    of the disjoint sorted windows [w_s, w_e) (bounded by the interval count)."""
    lo = np.searchsorted(c_e, w_s, side="right")
    hi = np.searchsorted(c_s, w_e, side="left")
    return np.unique(
        np.concatenate([np.arange(a, b) for a, b in zip(lo.tolist(), hi.tolist())] or [np.zeros(0, np.int64)]).astype(
            np.int64
        )
    )


def _gap_notes(diag, gsel: np.ndarray, step_of) -> list[GapNote]:
    """The ``TOP_GAPS`` largest of the gaps ``gsel`` (ties: earliest first) with their cards."""
    g = diag.gaps
    notes = []
    if gsel.size:
        order = gsel[np.lexsort((g.start_ns[gsel], -g.dur_ns[gsel]))][:TOP_GAPS]
        gk = step_of(g.start_ns[order])
        for j, i in enumerate(order.tolist()):
            card = card_for_gap(diag, i)
            notes.append(
                GapNote(
                    int(g.start_ns[i]),
                    int(g.end_ns[i]),
                    int(gk[j]),
                    Cause(int(g.cause[i])).label,
                    card.smell,
                    card.why,
                    card.first_experiment,
                )
            )
    return notes


def _int_arg(args: dict, keys: tuple) -> int:
    for k in keys:
        v = args.get(k)
        if isinstance(v, bool):
            continue
        if isinstance(v, int):
            return v
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, str) and v.strip().lstrip("-").isdigit():
            return int(v)
    return -1
