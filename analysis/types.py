"""Result types of the diagnosis (shared by ``analysis``, ``gapscope report`` and ``tui``).

Definitions follow ``docs/definitions.md`` ("Cause classes", "The card", "Budget and
what-if"). All times int64 nanoseconds.
"""

from __future__ import annotations

import dataclasses
import enum

import numpy as np

__all__ = [
    "Cause",
    "WaitKind",
    "Trust",
    "Params",
    "Evidence",
    "SampledFrame",
    "GapSamples",
    "Card",
    "Gaps",
    "DeviceSummary",
]


class Cause(enum.IntEnum):
    """Cause class of an idle gap (design: "Definitions" → cause classes).

    ``SYNC``, ``LAUNCH`` and ``HOST`` are the *starved* classes (the CPU asked late);
    ``COPY`` is a copy on the critical path (either way); ``DEPENDENCY`` is the *blocked*
    class (the next op was already queued and waited on something GPU-side);
    ``UNCLASSIFIED``: no linked launch and no evidence, or no CPU data. The numeric order
    is the tie-break order of a gap's primary class (sync > copy > launch > host); a
    queued gap only ever holds copy and dependency time, so dependency's place in the
    order never decides against a CPU-side class.
    """

    SYNC = 0
    COPY = 1
    LAUNCH = 2
    HOST = 3
    UNCLASSIFIED = 4
    DEPENDENCY = 5

    @property
    def label(self) -> str:
        return self.name.lower()

    @property
    def cpu_side(self) -> bool:
        """True for the classes that blame the CPU (sync, launch, host)."""
        return self in (Cause.SYNC, Cause.LAUNCH, Cause.HOST)


class WaitKind(enum.IntEnum):
    """What a queued (blocked) gap's next op waited on, as far as the trace shows
    (``Gaps.wait_kind``; -1 for gaps that are not queued)."""

    NOTHING_RECORDED = 0
    STREAM_WAIT = 1
    COLLECTIVE = 2
    GRAPH = 3
    DISPATCH = 4

    @property
    def label(self) -> str:
        return self.name.lower().replace("_", " ")


class Trust(enum.IntFlag):
    """Why a gap's idle time may be unreliable (``Gaps.trust`` bits; 0 = none known)."""

    NONE = 0
    UNLINKED = 1
    GRAPH_UNRECORDED = 2
    SAMPLED = 4  # the trace keeps a small share of its operators (``classify.operator_sample``)
    CLOCKS = 8  # the next op is recorded as starting before its launch call began


@dataclasses.dataclass(frozen=True)
class Params:
    """Thresholds of the diagnosis; every one is shown in ``report --help`` and the UI.

    - ``min_gap_ns``: shortest idle interval reported as a gap (design: 2 µs).
    - ``launch_gap_max_ns``: a gap this short or shorter can be a picket-fence gap (30 µs).
    - ``picket_min_kernels``: kernels in a run for a picket fence (8).
    - ``short_kernel_max_ns``: a "short kernel" for picket fences (design: launch calls
      about as long as kernels; default 30 µs).
    - ``small_copy_max_bytes``: the ``.item()``/``print`` signature copy (64 KiB).
    - ``dispatch_max_ns``: a queued gap this short or shorter sits at the timestamp
      resolution of Kineto traces (1 µs steps): GPU-side dispatch, not actionable (3 µs).
    - ``dispatch_bubble_max_ns``: a queued gap this short or shorter with no recorded
      wait (no stream wait, collective or graph order) is a bubble of per-kernel
      dispatch on the device between kernels queued ahead (issue 43: 4,181 such gaps of
      3-10 µs on hta/rank0), not actionable alone (10 µs).
    - ``queue_latency_max_ns``: after a late launch call returned, up to this long until
      the op starts is the launch path's own queue latency (launch); beyond it, the op
      sat in the queue waiting on something GPU-side (dependency) (50 µs).
    - ``one_time_min_share``: a gap is a one-time cost when warm-up evidence (allocator
      growth, module loading, handle creation, a warm-up range, one launch call of 1 ms
      or more) covers at least this share of it (0.5).
    """

    min_gap_ns: int = 2_000
    launch_gap_max_ns: int = 30_000
    picket_min_kernels: int = 8
    short_kernel_max_ns: int = 30_000
    small_copy_max_bytes: int = 64 * 1024
    dispatch_max_ns: int = 3_000
    dispatch_bubble_max_ns: int = 10_000
    queue_latency_max_ns: int = 50_000
    one_time_min_share: float = 0.5


@dataclasses.dataclass(frozen=True)
class Evidence:
    """One piece of CPU-side (or copy) evidence for a gap.

    ``event``: index into the trace (or -1 for synthetic evidence such as
    "no events on the thread"); ``name`` verbatim; ``lane``: trace lane index;
    ``cause``: the class it supports; ``overlap_ns``: overlap with the gap;
    ``bytes``: for copies (-1 unknown); ``pageable``: for copies.
    """

    event: int
    name: str
    lane: int
    cause: Cause
    overlap_ns: int
    bytes: int = -1
    pageable: bool = False


@dataclasses.dataclass(frozen=True)
class SampledFrame:
    """A function the CPU samples of a gap fell in (``GapSamples.frames``): ``name``
    (verbatim, untrusted) and ``module`` (the binary or library) of the sample's
    nearest resolved frame to its leaf (the leaf itself when resolved; else the
    leaf's address), ``samples`` of them, ``share`` of the gap's samples (0..1);
    ``caller``: the function most of them were called from (the next resolved frame
    above it in the kept callchain; "" when none)."""

    name: str
    module: str
    samples: int
    share: float
    caller: str = ""


@dataclasses.dataclass(frozen=True)
class GapSamples:
    """The CPU samples (Nsight ``--sample``; ``Trace.cpu_samples``) of the launching
    thread ``lane`` taken inside an occurrence of a gap: ``samples`` of them,
    ``frames`` the hottest, most samples first; ``interval_ns``: the median time
    between the thread's consecutive samples over the trace (-1 with fewer than two),
    so an occurrence several intervals long with no sample is time off the CPU
    (blocked, sleeping, waiting in the kernel), while a shorter one may fall between two
    samples (``analysis.card.samples.gap_samples``)."""

    lane: int
    samples: int
    frames: tuple[SampledFrame, ...] = ()
    interval_ns: int = -1


@dataclasses.dataclass(frozen=True)
class Card:
    """The card of a gap or gap group (design: "The card")."""

    smell: str
    cause: Cause
    secondary: Cause | None
    secondary_share: float
    why: str
    first_experiment: str
    forbidden_step: str
    proof: str
    evidence: tuple[Evidence, ...] = ()
    #: the first experiment in a few words (a finding's fix; ``card.advice.Advice.fix``)
    fix: str = ""
    #: the launching thread's CPU samples inside the occurrence, or None when the
    #: trace has none (``GapSamples``)
    cpu_samples: GapSamples | None = None


@dataclasses.dataclass(frozen=True)
class DeviceSummary:
    """Per-device figures over the analysis window ``[window_start_ns, window_end_ns)``.

    ``busy_ns``: union of kernel intervals over all streams; ``busy_with_copies_ns``:
    union of kernels, memcpys and memsets; ``idle_ns`` = window - busy;
    ``fully_idle_ns`` = window - busy_with_copies.
    """

    device: int
    window_start_ns: int
    window_end_ns: int
    busy_ns: int
    busy_with_copies_ns: int
    kernel_count: int
    copy_count: int

    @property
    def window_ns(self) -> int:
        return self.window_end_ns - self.window_start_ns

    @property
    def idle_ns(self) -> int:
        return self.window_ns - self.busy_ns

    @property
    def fully_idle_ns(self) -> int:
        return self.window_ns - self.busy_with_copies_ns


@dataclasses.dataclass(frozen=True, eq=False)
class Gaps:
    """Idle gaps of all devices, struct of arrays sorted by (device, start_ns).

    Arrays (length = number of gaps):
    ``device`` int32; ``start_ns``/``end_ns``/``dur_ns`` int64; ``prev_op``/``next_op``
    int64 event indices (-1 at a window edge); ``launch`` int64 event index of the
    next op's launch call (-1 none); ``launch_lane`` int32 (-1); ``lateness_ns`` int64:
    L = end of the launch call (when the work reached the queue; a call still running
    when its op starts counts as ending then) - gap start, 0 when no launch; L <= 0:
    the op was queued before the gap began; ``exposed_copy_ns`` int64;
    ``cause``/``secondary`` int8 (``Cause``; secondary -1 when none);
    ``cause_share``/``secondary_share`` float64 in [0, 1]; ``group`` int32 (recurring
    group id, -1); ``episode`` int32 (picket-fence episode id, -1).

    Added by the analysis (optional, None when not computed): ``edge`` int8 (0 inside
    the GPU window, 1 leading / 2 trailing idle at a step edge with no kernel on that
    side); ``class_ns`` int64 of shape (n, 5): ns of the gap attributed to each
    ``Cause`` (columns in ``Cause`` order; each row sums to the gap's duration);
    ``thread_lane`` int32: the CPU lane *T* whose activity was measured (the launching
    thread, or its fallback; -1 with no CPU data); ``wait_event`` int64: the stream-wait
    event (``cudaStreamWaitEvent`` call or Kineto "Stream Wait Event" record) behind
    which the queued next op waited (``gapscope.analysis.waits``), -1 none.
    ``queued`` bool: the next op's launch call had returned before the gap began (the
    GPU was blocked, not starved); ``launch_from_ns`` int64: where the exposed launch
    path starts (the next launch call's start clipped to the gap; the gap end when the
    gap is queued or has no launch); ``sync_from_ns`` int64: where the sync cliff starts
    (the first blocking wait of T reaching into the gap; ``launch_from_ns`` when none);
    ``wait_kind`` int8 (``WaitKind``, -1 when not queued); ``one_time`` bool (warm-up
    cost: kept out of groups, budget and what-ifs); ``trust`` int8 (``Trust`` bits);
    ``queued_until_ns`` int64: in a late gap, where the op's time in the queue past the
    launch path's latency starts (dependency from there to the gap end); the gap end
    otherwise.
    """

    device: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    prev_op: np.ndarray
    next_op: np.ndarray
    launch: np.ndarray
    launch_lane: np.ndarray
    lateness_ns: np.ndarray
    exposed_copy_ns: np.ndarray
    cause: np.ndarray
    secondary: np.ndarray
    cause_share: np.ndarray
    secondary_share: np.ndarray
    group: np.ndarray
    episode: np.ndarray
    edge: np.ndarray | None = None
    class_ns: np.ndarray | None = None
    thread_lane: np.ndarray | None = None
    wait_event: np.ndarray | None = None
    queued: np.ndarray | None = None
    launch_from_ns: np.ndarray | None = None
    sync_from_ns: np.ndarray | None = None
    wait_kind: np.ndarray | None = None
    one_time: np.ndarray | None = None
    trust: np.ndarray | None = None
    queued_until_ns: np.ndarray | None = None

    @property
    def dur_ns(self) -> np.ndarray:
        return self.end_ns - self.start_ns

    @property
    def fully_idle_ns(self) -> np.ndarray:
        """int64 ns of each gap with neither kernels nor copies running (the "fully
        idle" variant: gap minus exposed copy time)."""
        return self.dur_ns - self.exposed_copy_ns

    def thread_of(self, i: int) -> int:
        """The CPU lane whose activity gap ``i``'s causes are read from: ``thread_lane``
        when the analysis added it, else ``launch_lane`` (-1 when neither names one)."""
        return int(self.thread_lane[i]) if self.thread_lane is not None else int(self.launch_lane[i])

    def __len__(self) -> int:
        return int(self.start_ns.shape[0])
