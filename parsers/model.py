"""The columnar, immutable event model every loader produces (``Trace``).

Follows the event model of ``docs/architecture.md`` ("The event model"): all times are
int64 nanoseconds, events are a struct of numpy arrays sorted by (lane, start_ns,
-dur_ns), names are interned to int32 ids, lanes carry their names from Chrome Trace
Event Format metadata (``process_name``, ``thread_name``, ``*_sort_index``).

``link_by_correlation`` and ``repeated_correlations`` live here, beside the kind sets
that say which events are runtime calls and which are GPU ops: they pair the two by
CUDA/CUPTI ``correlation`` id. The sort order and nesting depth come from
``gapscope.parsers.ordering`` (a leaf).

Nothing here imports a UI library.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Collection, Sequence
from typing import Any

import numpy as np

from gapscope.parsers.beside import Beside
from gapscope.parsers.ordering import nesting_depth, sort_order

__all__ = [
    "same_device_ops",
    "Kind",
    "Lane",
    "SortedArgs",
    "SourceInfo",
    "Trace",
    "TraceWarning",
    "CpuSamples",
    "CopyKind",
    "GPU_WORK_KINDS",
    "GPU_KINDS",
    "CPU_CALL_KINDS",
    "link_by_correlation",
    "repeated_correlations",
]


class Kind(enum.IntEnum):
    """What an event is, as analysis can trust it (int8 in ``Trace.kind``).

    Mapping from Kineto ``cat`` values (and their 2020 capitalised forms) is done by
    the loaders; see ``gapscope.parsers.kinds``.
    """

    KERNEL = 0  # GPU kernel (Kineto cat "kernel", legacy "Kernel", MTIA "mtia_ccp_events")
    MEMCPY = 1  # GPU copy ("gpu_memcpy", legacy "Memcpy")
    MEMSET = 2  # GPU memset ("gpu_memset", legacy "Memset")
    LAUNCH = 3  # CPU runtime call that launches a kernel (cudaLaunchKernel, hipLaunchKernel, ...)
    SYNC_CALL = 4  # CPU call that waits on the device (cudaStreamSynchronize, aten::item, ...)
    MEMCPY_CALL = 5  # CPU runtime call that enqueues a copy (cudaMemcpyAsync, ...)
    RUNTIME = 6  # any other CUDA/HIP/MTIA runtime or driver call
    CPU_OP = 7  # ATen / framework operator ("cpu_op", legacy "Operator")
    PYTHON = 8  # Python function ("python_function")
    ANNOTATION = 9  # CPU user annotation / range ("user_annotation", ProfilerStep#N, NVTX)
    GPU_ANNOTATION = 10  # GPU-side annotation ("gpu_user_annotation")
    SYNC_MARKER = 11  # Kineto "cuda_sync" record: a wait, never GPU work
    INSTANT = 12  # instant event ("i"/"I", "n")
    COUNTER = 13  # counter sample ("C"); value in ``Trace.value``
    OTHER = 14  # anything else with a duration (generic Chrome slices)


#: Kinds that make a device busy (for the "fully idle" figure).
GPU_WORK_KINDS = frozenset({Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET})
#: Kinds drawn on GPU lanes.
GPU_KINDS = frozenset({Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.GPU_ANNOTATION})
#: CPU runtime calls (launch, sync, copy, other).
CPU_CALL_KINDS = frozenset({Kind.LAUNCH, Kind.SYNC_CALL, Kind.MEMCPY_CALL, Kind.RUNTIME})


class CopyKind(enum.IntEnum):
    """Copy direction of a memcpy (int8 in ``Trace.copy_kind``); CUPTI memcpy kinds."""

    NONE = 0
    H2D = 1
    D2H = 2
    D2D = 3
    H2H = 4
    P2P = 5
    UNKNOWN = 6


def same_device_ops(a: Trace, b: Trace) -> bool:
    """Whether traces ``a`` and ``b`` have the same device lanes (by pid and tid, with
    their device and stream) holding ops of the same starts and lengths (int64 ns) in
    the same order. Cost: one comparison of each device lane's two columns."""

    def lanes(t: Trace) -> dict[tuple[str, str], Lane]:
        return {(ln.pid, ln.tid): ln for ln in t.lanes if ln.is_gpu}

    la, lb = lanes(a), lanes(b)
    if la.keys() != lb.keys():
        return False
    for key, x in la.items():
        y = lb[key]
        if (x.device, x.stream) != (y.device, y.stream):
            return False
        xs = slice(int(a.lane_offsets[x.index]), int(a.lane_offsets[x.index + 1]))
        ys = slice(int(b.lane_offsets[y.index]), int(b.lane_offsets[y.index + 1]))
        if not (np.array_equal(a.start_ns[xs], b.start_ns[ys]) and np.array_equal(a.dur_ns[xs], b.dur_ns[ys])):
            return False
    return True


def link_by_correlation(
    kind: np.ndarray, correlation: np.ndarray, start_ns: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Pair CPU runtime calls with GPU ops sharing a ``correlation`` id (CUDA/CUPTI).

    ``kind``: int8 ``Kind`` per event; ``correlation``: int64 (-1 = none); calls are
    ``CPU_CALL_KINDS``, GPU ops ``GPU_KINDS``. Returns (src, dst) int64 index arrays
    (indices into the given arrays). A correlation id names one runtime call (CUPTI),
    which may launch several GPU ops (a CUDA graph): each GPU op gets the call with
    its id. When several calls share
    an id (a broken or merged trace) and ``start_ns`` (int64 ns) is given, a GPU op
    gets the latest of them that starts at or before it (else the earliest one, for
    clock skew), so a reused id never links every op to the first call; without
    ``start_ns`` it gets the first call in array order. Calls or ops without a partner
    are left out. See ``repeated_correlations`` for the count to warn about.
    """
    cpu = np.isin(kind, np.array([int(k) for k in CPU_CALL_KINDS], dtype=np.int8)) & (correlation >= 0)
    gpu = np.isin(kind, np.array([int(k) for k in GPU_KINDS], dtype=np.int8)) & (correlation >= 0)
    ci = np.flatnonzero(cpu)
    gi = np.flatnonzero(gpu)
    if ci.size == 0 or gi.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    c_corr = correlation[ci]
    o = np.argsort(c_corr, kind="stable")
    c_sorted = c_corr[o]
    g_corr = correlation[gi]
    pos = np.searchsorted(c_sorted, g_corr, side="left")
    pos_c = np.minimum(pos, c_sorted.size - 1)
    hit = c_sorted[pos_c] == g_corr
    if start_ns is not None and c_sorted.size > 1 and bool((c_sorted[1:] == c_sorted[:-1]).any()):
        # rank all start times together, then search on (correlation rank, start rank)
        c_start, g_start = start_ns[ci], start_ns[gi]
        _, inv = np.unique(np.concatenate((c_start, g_start)), return_inverse=True)
        width = np.int64(inv.max() + 2)
        _, cinv = np.unique(np.concatenate((c_corr, g_corr)), return_inverse=True)
        c_key = cinv[: ci.size].astype(np.int64) * width + inv[: ci.size]
        g_key = cinv[ci.size :].astype(np.int64) * width + inv[ci.size :]
        o = np.argsort(c_key, kind="stable")
        ck = c_key[o]
        before = np.searchsorted(ck, g_key, side="right") - 1
        c_corr_o = c_corr[o]
        ok_before = (before >= 0) & (c_corr_o[np.maximum(before, 0)] == g_corr)
        first = np.minimum(np.searchsorted(c_corr_o, g_corr, side="left"), ck.size - 1)
        pos_c = np.where(ok_before, before, first)
        hit = c_corr_o[pos_c] == g_corr
    return ci[o[pos_c[hit]]].astype(np.int64), gi[hit].astype(np.int64)


def repeated_correlations(kind: np.ndarray, correlation: np.ndarray) -> tuple[int, int, int]:
    """(ids shared by more than one CPU runtime call and carried by a GPU op, calls
    carrying them, one such id or -1), from int8 ``kind`` and int64 ``correlation``
    per event: a correlation id should name one call (CUPTI); ids that no GPU op
    carries link nothing and are not counted."""
    cpu = np.isin(kind, np.array([int(k) for k in CPU_CALL_KINDS], dtype=np.int8)) & (correlation >= 0)
    c = np.sort(correlation[cpu])
    if c.size < 2:
        return 0, 0, -1
    dup = c[1:] == c[:-1]
    if not dup.any():
        return 0, 0, -1
    ids, counts = np.unique(c, return_counts=True)
    gpu = np.isin(kind, np.array([int(k) for k in GPU_KINDS], dtype=np.int8))
    many = (counts > 1) & np.isin(ids, correlation[gpu])
    if not many.any():
        return 0, 0, -1
    return int(many.sum()), int(counts[many].sum()), int(ids[many][0])


@dataclasses.dataclass(frozen=True, slots=True)
class TraceWarning:
    """One thing skipped or repaired while loading.

    ``line`` is the 1-based line in the input file (None when not known); ``field`` the
    event field concerned (``"ts"``, ``"dur"``, ...) or None.
    """

    line: int | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line is not None else ""
        return f"{where}{self.message}"


@dataclasses.dataclass(frozen=True, slots=True)
class Lane:
    """One timeline row: a CPU thread or a GPU stream (a Perfetto track).

    ``pid``/``tid`` are the trace's own ids as strings (``7`` and ``"7"`` are one id).
    ``device`` is the GPU index for GPU lanes (-1 otherwise), ``stream`` the stream
    number (-1 when not a stream). ``sort_key`` gives the stable display order.
    """

    index: int
    pid: str
    tid: str
    process_name: str
    thread_name: str
    is_gpu: bool
    device: int = -1
    stream: int = -1
    sort_key: tuple = ()

    @property
    def label(self) -> str:
        """Short display label: ``stream 7`` for GPU streams, else the thread name."""
        if self.is_gpu and self.stream >= 0:
            return f"stream {self.stream}"
        return self.thread_name or self.tid


@dataclasses.dataclass(slots=True)
class SourceInfo:
    """Where a trace came from and what its header said.

    ``format`` is one of ``"kineto"``, ``"chrome"``, ``"ascii-events"``,
    ``"ascii-art"``, ``"legacy-autograd"``. ``origin_ns`` is the absolute time that
    ``Trace.start_ns`` values are measured from (0 when they are already absolute);
    ``base_time_ns`` is Kineto's ``baseTimeNanoseconds`` when present.
    """

    path: str = ""
    format: str = "chrome"
    schema_version: int | None = None
    base_time_ns: int | None = None
    display_time_unit: str | None = None
    device_properties: list[dict] = dataclasses.field(default_factory=list)
    rank: int | None = None
    world_size: int | None = None
    trace_name: str | None = None
    ignored_counts: dict[str, int] = dataclasses.field(default_factory=dict)
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


class SortedArgs:
    """An args loader in sorted order: ``self(i)`` is ``inner(order[i])``, where
    ``order`` (int64) maps each sorted index to its input index (``Trace.from_columns``).
    Kept as an object, not a closure, so the cache (``gapscope.parsers.cache``) can see
    what it reads."""

    __slots__ = ("order", "inner")

    def __init__(self, order: np.ndarray, inner: Callable[[int], dict]) -> None:
        self.order = order
        self.inner = inner

    def __call__(self, i: int) -> dict:
        return self.inner(int(self.order[i]))


_INT64 = np.int64


@dataclasses.dataclass(frozen=True, eq=False)
class CpuSamples:
    """CPU samples of a trace (Nsight Systems ``--sample``: ``COMPOSITE_EVENTS`` and
    their callchains in ``SAMPLING_CALLCHAINS``), columnar and read-only like ``Trace``.

    Per sample (length ``n``), sorted by (lane, start_ns):

    - ``start_ns`` int64: when the sample was taken, ns on the trace's clock.
    - ``lane`` int32: the CPU lane (``Trace.lanes`` index) of the sampled thread.
    - ``stack_depth`` int32: frames the export recorded for the sample's callchain
      (0 = no callchain; ``max_frames + 1`` = deeper than ``max_frames``, cut there).
    - ``frame_offsets`` int64 (``n + 1``): the frames kept for sample ``i`` are
      ``[frame_offsets[i], frame_offsets[i+1])``, leaf first (the export's
      ``stackDepth`` 0 is the frame the sample's instruction pointer was in; at most
      ``max_frames`` per sample).

    Per kept frame (length ``frame_offsets[-1]``):

    - ``frame_name`` int32: index into ``names``: the function (symbol), verbatim
      and untrusted; an unresolved frame is its address as the export wrote it.
    - ``frame_module`` int32: index into ``names``: the binary or library it is in.
    - ``frame_resolved`` bool: the export resolved its symbol (``unresolved`` not set
      and the name is not a bare address).

    ``lane_offsets`` int64 (``len(Trace.lanes) + 1``): samples of lane ``k`` are
    ``[lane_offsets[k], lane_offsets[k+1])``. ``max_frames``: the cut applied per sample.
    """

    start_ns: np.ndarray
    lane: np.ndarray
    stack_depth: np.ndarray
    frame_offsets: np.ndarray
    frame_name: np.ndarray
    frame_module: np.ndarray
    frame_resolved: np.ndarray
    lane_offsets: np.ndarray
    names: tuple[str, ...]
    max_frames: int

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            a = getattr(self, f.name)
            if isinstance(a, np.ndarray):
                a.setflags(write=False)

    def __len__(self) -> int:
        return int(self.start_ns.shape[0])

    def in_window(self, lane: int, start_ns: int, end_ns: int) -> slice:
        """Slice of the samples of ``lane`` taken in ``[start_ns, end_ns)`` (ns)."""
        if not 0 <= lane < self.lane_offsets.shape[0] - 1:
            return slice(0, 0)
        lo, hi = int(self.lane_offsets[lane]), int(self.lane_offsets[lane + 1])
        st = self.start_ns[lo:hi]
        a = lo + int(np.searchsorted(st, start_ns, side="left"))
        b = lo + int(np.searchsorted(st, end_ns, side="left"))
        return slice(a, b)

    @classmethod
    def from_columns(
        cls,
        *,
        start_ns: np.ndarray,
        lane: np.ndarray,
        stack_depth: np.ndarray,
        frame_offsets: np.ndarray,
        frame_name: np.ndarray,
        frame_module: np.ndarray,
        frame_resolved: np.ndarray,
        names: Sequence[str],
        n_lanes: int,
        max_frames: int,
    ) -> CpuSamples:
        """Build from unsorted per-sample columns (frames in sample order, as
        ``frame_offsets`` gives them): sorts the samples by (lane, start_ns), moves
        their frames with them and computes ``lane_offsets``. ``lane`` must lie in
        ``[0, n_lanes)``. Raises ``ValueError`` when column lengths differ."""
        start = np.asarray(start_ns, dtype=_INT64)
        n = start.shape[0]
        lane_a = np.asarray(lane, dtype=np.int32)
        depth = np.asarray(stack_depth, dtype=np.int32)
        off = np.asarray(frame_offsets, dtype=_INT64)
        if lane_a.shape[0] != n or depth.shape[0] != n or off.shape[0] != n + 1:
            raise ValueError("CpuSamples columns differ in length")
        m = int(off[-1]) if n else 0
        fname = np.asarray(frame_name, dtype=np.int32)
        fmod = np.asarray(frame_module, dtype=np.int32)
        fres = np.asarray(frame_resolved, dtype=bool)
        if fname.shape[0] != m or fmod.shape[0] != m or fres.shape[0] != m:
            raise ValueError("CpuSamples frame columns differ in length")
        order = np.lexsort((start, lane_a))
        counts = np.diff(off)[order]
        new_off = np.zeros(n + 1, dtype=_INT64)
        np.cumsum(counts, out=new_off[1:])
        # each new frame position's source: its sample's old first frame + its rank
        gather = np.repeat(off[:-1][order] - new_off[:-1], counts)
        gather += np.arange(m, dtype=_INT64)
        lane_s = lane_a[order]
        return cls(
            start_ns=start[order],
            lane=lane_s,
            stack_depth=depth[order],
            frame_offsets=new_off,
            frame_name=fname[gather],
            frame_module=fmod[gather],
            frame_resolved=fres[gather],
            lane_offsets=np.searchsorted(lane_s, np.arange(n_lanes + 1), side="left").astype(_INT64),
            names=tuple(names),
            max_frames=int(max_frames),
        )


@dataclasses.dataclass(frozen=True, eq=False)
class Trace:
    """A loaded trace: struct of numpy arrays, one element per event.

    Arrays (all length ``n``), sorted by (lane, start_ns, -dur_ns):

    - ``start_ns`` int64: absolute start in ns (Chrome ``ts`` µs × 1000, exact).
    - ``dur_ns`` int64: duration in ns (0 for instants and counters).
    - ``lane`` int32: index into ``lanes``.
    - ``name_id`` int32: index into ``names``.
    - ``kind`` int8: ``Kind``.
    - ``correlation`` int64: CUDA correlation id linking a launch call and its GPU op
      (-1 = none).
    - ``depth`` int16: nesting depth on its lane (0 = outermost); overlapping but not
      nested events get the depth of the number of events still open.
    - ``bytes`` int64: bytes moved by a copy/memset (-1 = unknown / not a copy).
    - ``copy_kind`` int8: ``CopyKind``.
    - ``pageable`` bool: the host side of a copy is pageable memory.
    - ``value`` float64: counter value (nan for non-counters).
    - ``src_line`` int32: 1-based line in the source file (0 = unknown).
    - ``external_id`` int64: Kineto ``External id`` (-1 = none).

    ``lane_offsets`` (int64, ``len(lanes) + 1``): events of lane ``k`` are
    ``[lane_offsets[k], lane_offsets[k+1])``, so a lane is a zero-copy slice.

    ``flow_src``/``flow_dst`` (int64): event indices of linked pairs (launch call →
    GPU op), from ``correlation``, ``ac2g`` or legacy flow events.

    ``extent_ns``: (first, last) time over valid events (flagged absurd values are
    excluded). ``warnings``: everything skipped or repaired.

    ``args_of(i)`` returns the event's ``args`` dict (decoded lazily, may be empty).

    ``cpu_samples``: the sampled callchains of CPU threads (``CpuSamples``), or None.

    Immutable in fact, not only frozen: every array is read-only from construction on
    (writing into one raises ``ValueError``), so what one reader sees no other can
    change; derive a new array to change anything.
    """

    start_ns: np.ndarray
    dur_ns: np.ndarray
    lane: np.ndarray
    name_id: np.ndarray
    kind: np.ndarray
    correlation: np.ndarray
    depth: np.ndarray
    bytes: np.ndarray
    copy_kind: np.ndarray
    pageable: np.ndarray
    value: np.ndarray
    src_line: np.ndarray
    external_id: np.ndarray
    lane_offsets: np.ndarray
    flow_src: np.ndarray
    flow_dst: np.ndarray
    names: tuple[str, ...]
    lanes: tuple[Lane, ...]
    source: SourceInfo
    warnings: tuple[TraceWarning, ...]
    extent_ns: tuple[int, int]
    _args_loader: Callable[[int], dict] | None = dataclasses.field(default=None, repr=False)
    #: CPU samples with their callchains (``CpuSamples``), or None when the trace has
    #: none (only Nsight exports profiled with ``--sample`` carry them).
    cpu_samples: CpuSamples | None = None

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            a = getattr(self, f.name)
            if isinstance(a, np.ndarray):
                a.setflags(write=False)

    # ----------------------------------------------------------------- basics
    def __len__(self) -> int:
        return int(self.start_ns.shape[0])

    @property
    def end_ns(self) -> np.ndarray:
        """int64 array of event ends (start + dur), ns."""
        return self.start_ns + self.dur_ns

    def name(self, i: int) -> str:
        """The (verbatim, untrusted) name of event ``i``."""
        return self.names[int(self.name_id[i])]

    def lane_slice(self, k: int) -> slice:
        """Slice of event indices on lane ``k``."""
        return slice(int(self.lane_offsets[k]), int(self.lane_offsets[k + 1]))

    def args_of(self, i: int) -> dict:
        """The ``args`` of event ``i`` (a new dict; empty when none were kept)."""
        if self._args_loader is None:
            return {}
        try:
            return dict(self._args_loader(int(i)) or {})
        except Exception:  # noqa: BLE001 - args are display-only; never fail a view on them
            return {}

    def gpu_lanes(self, device: int | None = None) -> list[int]:
        """Indices of GPU lanes, optionally only those of ``device``."""
        return [ln.index for ln in self.lanes if ln.is_gpu and (device is None or ln.device == device)]

    def devices(self) -> list[int]:
        """Sorted GPU device indices that have at least one lane."""
        return sorted({ln.device for ln in self.lanes if ln.is_gpu})

    def name_ids_matching(self, predicate: Callable[[str], bool]) -> np.ndarray:
        """int32 array of name ids whose name satisfies ``predicate``."""
        return np.array([k for k, s in enumerate(self.names) if predicate(s)], dtype=np.int32)

    def mask_kind(self, *kinds: Kind) -> np.ndarray:
        """Boolean mask of events whose kind is one of ``kinds``."""
        return np.isin(self.kind, np.array([int(k) for k in kinds], dtype=np.int8))

    # ---------------------------------------------------------- construction
    @classmethod
    def from_columns(
        cls,
        *,
        start_ns: np.ndarray,
        dur_ns: np.ndarray,
        lane: np.ndarray,
        name_id: np.ndarray,
        kind: np.ndarray,
        names: Sequence[str],
        lanes: Sequence[Lane],
        source: SourceInfo,
        warnings: Sequence[TraceWarning] = (),
        correlation: np.ndarray | None = None,
        bytes_: np.ndarray | None = None,
        copy_kind: np.ndarray | None = None,
        pageable: np.ndarray | None = None,
        value: np.ndarray | None = None,
        src_line: np.ndarray | None = None,
        external_id: np.ndarray | None = None,
        flows: tuple[np.ndarray, np.ndarray] | None = None,
        args_loader: Callable[[int], dict] | None = None,
        extent_mask: np.ndarray | None = None,
        apart_kinds: Collection[Kind] = (),
        cpu_samples: CpuSamples | None = None,
    ) -> Trace:
        """Build a ``Trace`` from unsorted columns (one element per event).

        Sorts once by (lane, start_ns, -dur_ns), computes ``lane_offsets`` and nesting
        ``depth``, remaps ``flows`` (given as *input* indices) and ``args_loader`` (called
        with the *input* index) to the sorted order, and links launch calls to GPU ops
        by ``correlation`` when ``flows`` is None.

        ``extent_mask`` (bool, input order) marks events allowed to set ``extent_ns``;
        default: all. Events of ``apart_kinds`` stay at depth 0 and out of the nesting
        of the other events of their lane (``ordering.nesting_depth``'s ``apart``).
        The columns given become the trace's arrays where no conversion or reordering
        is needed, and are made read-only with them. ``cpu_samples`` is kept as given
        (its lanes are final lane indices). Raises ``ValueError`` when column lengths
        differ.
        """
        n = int(np.asarray(start_ns).shape[0])

        def col(a, dtype, fill):
            if a is None:
                return np.full(n, fill, dtype=dtype)
            a = np.asarray(a, dtype=dtype)
            if a.shape[0] != n:
                raise ValueError(f"column length {a.shape[0]} != {n}")
            return a

        start = col(start_ns, _INT64, 0)
        dur = col(dur_ns, _INT64, 0)
        lane_a = col(lane, np.int32, 0)
        nlanes = len(lanes)
        order = sort_order(lane_a, start, dur, nlanes)

        def take(a):
            return a if order is None else a[order]

        start = take(start)
        dur = take(dur)
        lane_a = take(lane_a)
        lane_offsets = np.searchsorted(lane_a, np.arange(nlanes + 1), side="left").astype(np.int64)
        kind_a = take(col(kind, np.int8, int(Kind.OTHER)))
        corr = take(col(correlation, _INT64, -1))
        apart = np.isin(kind_a, np.array([int(k) for k in apart_kinds], dtype=np.int8)) if apart_kinds else None
        # numpy sorts and searches that let go of the interpreter, beside the rest (at
        # 5M events 0.35 s of the build, taken off it on two cores)
        depth = Beside(nesting_depth, start, dur, lane_offsets, apart, name="gapscope-depth")

        end = start + dur
        if extent_mask is None:
            extent = (int(start.min()), int(end.max())) if n else (0, 0)
        else:
            emask = take(np.asarray(extent_mask, dtype=bool))
            if n and emask.any():
                extent = (int(start[emask].min()), int(end[emask].max()))
            else:
                extent = (0, 0)
        del end

        if flows is not None:
            fsrc = np.asarray(flows[0], dtype=np.int64)
            fdst = np.asarray(flows[1], dtype=np.int64)
            if order is not None:
                inv = np.empty(n, dtype=np.int64)
                inv[order] = np.arange(n, dtype=np.int64)
                fsrc, fdst = inv[fsrc], inv[fdst]
        else:
            fsrc, fdst = link_by_correlation(kind_a, corr, start)

        loader: Callable[[int], dict] | None = args_loader
        if args_loader is not None and order is not None:
            loader = SortedArgs(order, args_loader)

        taken = {  # reordered while the depth is computed
            "name_id": take(col(name_id, np.int32, 0)),
            "bytes": take(col(bytes_, _INT64, -1)),
            "copy_kind": take(col(copy_kind, np.int8, 0)),
            "pageable": take(col(pageable, bool, False)),
            "value": take(col(value, np.float64, np.nan)),
            "src_line": take(col(src_line, np.int32, 0)),
            "external_id": take(col(external_id, _INT64, -1)),
        }
        return cls(
            start_ns=start,
            dur_ns=dur,
            lane=lane_a,
            kind=kind_a,
            correlation=corr,
            depth=depth(),
            **taken,
            lane_offsets=lane_offsets,
            flow_src=fsrc,
            flow_dst=fdst,
            names=tuple(names),
            lanes=tuple(lanes),
            source=source,
            warnings=tuple(warnings),
            extent_ns=extent,
            _args_loader=loader,
            cpu_samples=cpu_samples,
        )
