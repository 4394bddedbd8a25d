"""What a card says of the copies in a gap (``gapscope.analysis.card.why`` words it,
``gapscope.analysis.card.rules`` advises on it): every GPU copy and memset of the
occurrence counted (``Diagnosis.gpu_copies``, not cut to the evidence list's limit),
their lengths, sizes and kinds, and times "in all" as the union of their intervals.
Copy is GPU copy time only: the launching thread's time in its copy calls is host work
or a wait, told by those classes (design: "Definitions" → cause classes, rule 1;
docs/definitions.md "The card")."""

from __future__ import annotations

import dataclasses

import numpy as np

from gapscope.analysis.busy import union_intervals
from gapscope.analysis.diagnose import Diagnosis
from gapscope.analysis.types import Cause, Evidence
from gapscope.parsers.model import CopyKind, Kind

__all__ = ["SHORT_COPY_NS", "COPY_KIND_WORDS", "UNKNOWN_DIRECTION", "CopyLead", "copy_lead"]


#: A GPU copy at most this long in a gap costs about its fixed cost per copy (a few µs
#: on current GPUs), not bandwidth.
SHORT_COPY_NS = 20_000


#: How ``CopyLead.directions`` counts copies whose direction the trace does not give.
UNKNOWN_DIRECTION = "of unknown direction"

#: What a GPU copy of each kind is called in a sentence (memsets by their kind).
COPY_KIND_WORDS = {
    int(CopyKind.H2D): "host-to-device copies",
    int(CopyKind.D2H): "device-to-host copies",
    int(CopyKind.D2D): "device-to-device copies",
    int(CopyKind.P2P): "peer-to-peer copies",
    int(CopyKind.H2H): "host-to-host copies",
}


@dataclasses.dataclass(frozen=True)
class CopyLead:
    """The copies a card names for its copy time. ``big``: the largest GPU copy item
    when the GPU ran one, else the largest copy call. Of the GPU copies of that class
    in the occurrence (``Diagnosis.gpu_copies``; one, ``big``, when it is a copy call on
    a CPU thread): ``count``, whether all share ``big``'s name, the median, shortest,
    largest and total ns in the gap, the bytes in all (-1 when a size is unknown),
    ``noun`` ("copies", "memsets", "copies and memsets"), how many of ``big``'s name
    are about as long as it (90 %), and those of at most ``SHORT_COPY_NS``: how many,
    their ns, their median, and {kind words (``COPY_KIND_WORDS``, "memsets"): (count,
    ns)}."""

    big: Evidence
    count: int
    same_name: bool
    median_ns: int
    min_ns: int
    max_ns: int
    total_ns: int
    bytes_total: int
    noun: str
    like_big: int
    short_count: int
    short_ns: int
    short_median_ns: int
    short_kinds: dict[str, tuple[int, int]]
    #: the ns of each copy in the gap, longest first, when there are at most three
    lengths_ns: tuple[int, ...] = ()
    #: of the ``like_big`` copies: the shortest ns, the fewest and most bytes (-1 unknown)
    like_big_range: tuple[int, int, int] = (0, -1, -1)
    #: whether every copy has one known size
    same_bytes: bool = False
    #: the copies by direction, most first: ((word, count), ...), e.g.
    #: (("device-to-host", 9), ("host-to-device", 5), ("of unknown direction", 1)),
    #: adding up to ``count``; empty when memsets are among them
    directions: tuple[tuple[str, int], ...] = ()

    @property
    def uniform(self) -> bool:
        """Whether the copies are of about one length (the largest at most 4x the
        shortest), so their median describes each."""
        return self.max_ns <= 4 * self.min_ns

    @property
    def mostly_short(self) -> bool:
        """Whether copies of at most ``SHORT_COPY_NS`` hold most of the copy time: then
        it is their number, not their size, that costs."""
        return 2 * self.short_ns >= self.total_ns


def _union_ns(starts: np.ndarray, ends: np.ndarray) -> int:
    """ns covered by the intervals (copies on several streams overlap one another)."""
    if not starts.size:
        return 0
    us, ue = union_intervals(starts, ends)
    return int((ue - us).sum())


#: Copies that held the next op back are told alone when they cover this share of the
#: copy time of all the gap's copies (``_holding``).
HOLDING_MIN_SHARE = 0.5


def _holding(diag: Diagnosis, got: list[tuple[Evidence, int]]) -> list[tuple[Evidence, int]]:
    """The (copy, gap) pairs of ``got`` without the copies that cannot have held the
    gap's next op back (on another stream and still running when it started), when
    those left cover at least ``HOLDING_MIN_SHARE`` of the copies' time in the gaps;
    else ``got``. hta/test.json.gz #1859: a 53 MiB pinned H2D on stream 16 ran on
    2.95 ms past the next op's start and was named the gap's copy, while 110 DtoD
    copies on the next op's own stream ran back to back through the gap."""
    trace, g = diag.trace, diag.gaps
    if len(got) < 2:
        return got
    ev = np.array([e.event for e, _ in got], dtype=np.int64)
    rr = np.array([r for _, r in got], dtype=np.int64)
    if (ev < 0).any():
        return got
    nxt = g.next_op[rr]
    end = trace.start_ns[ev] + trace.dur_ns[ev]
    same_stream = (nxt >= 0) & (trace.lane[ev] == trace.lane[np.maximum(nxt, 0)])
    keep = (end <= g.end_ns[rr]) | same_stream
    if keep.all() or not keep.any():
        return got
    lo = np.maximum(trace.start_ns[ev], g.start_ns[rr])
    hi = np.minimum(end, g.end_ns[rr])
    if _union_ns(lo[keep], hi[keep]) < HOLDING_MIN_SHARE * _union_ns(lo, hi):
        return got
    return [pair for pair, k in zip(got, keep.tolist()) if k]


def _windows(diag: Diagnosis, got: list[tuple[Evidence, int]], ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each copy's interval clipped to its gap (the GPU's copies ``got``), or, for a
    copy call alone, its own overlap ``ns`` from 0."""
    if not got:
        return np.zeros(1, dtype=np.int64), ns.copy()
    trace = diag.trace
    ev = np.array([e.event for e, _ in got], dtype=np.int64)
    rr = np.array([r for _, r in got], dtype=np.int64)
    lo = np.maximum(trace.start_ns[ev], diag.gaps.start_ns[rr])
    hi = np.minimum(trace.start_ns[ev] + trace.dur_ns[ev], diag.gaps.end_ns[rr])
    return lo, hi


def _memsets(trace, ev: np.ndarray) -> np.ndarray:
    """Bool per copy: a memset (none for a copy call alone, ``ev[0] < 0``)."""
    return (trace.kind[ev] == int(Kind.MEMSET)) if ev[0] >= 0 else np.zeros(ev.size, dtype=bool)


def _like_big(every: list[Evidence], big: Evidence) -> list[int]:
    """Indices of the copies like the largest: its name, at least 90% of its length."""
    like = [k for k, e in enumerate(every) if e.name == big.name and 10 * e.overlap_ns >= 9 * big.overlap_ns]
    return like or [0]


def _noun(memset: np.ndarray) -> str:
    """What the copies are: memsets, copies, or both."""
    if memset.all():
        return "memsets"
    return "copies and memsets" if memset.any() else "copies"


def _short_kinds(
    trace, ev: np.ndarray, memset: np.ndarray, short: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> dict[str, tuple[int, int]]:
    """(count, union ns) of the short copies per kind words ("memsets", "host-to-device
    copies", ...); empty without short GPU copies."""
    kinds: dict[str, tuple[int, int]] = {}
    if not short.any() or ev[0] < 0:
        return kinds
    word = np.where(memset, -1, trace.copy_kind[ev].astype(np.int64))
    for w in np.unique(word[short]).tolist():
        m = short & (word == w)
        label = "memsets" if w == -1 else COPY_KIND_WORDS.get(int(w), "copies")
        n0, t0 = kinds.get(label, (0, 0))
        kinds[label] = (n0 + int(m.sum()), t0 + _union_ns(lo[m], hi[m]))
    return kinds


def _directions(trace, ev: np.ndarray) -> list[tuple[str, int]]:
    """(direction words, count) of every copy, those of no known direction too, most first."""
    directions: list[tuple[str, int]] = []
    ks, cs = np.unique(trace.copy_kind[ev], return_counts=True)
    for k, c in zip(ks.tolist(), cs.tolist()):
        way = COPY_KIND_WORDS.get(int(k), UNKNOWN_DIRECTION).removesuffix(" copies")
        directions.append((way, int(c)))
    directions.sort(key=lambda wc: (-wc[1], wc[0] == UNKNOWN_DIRECTION))
    return directions


def copy_lead(diag: Diagnosis, rows: np.ndarray, evidence: list[Evidence]) -> CopyLead | None:
    """The ``CopyLead`` of the occurrence ``rows``, or None without copy evidence or GPU copies. Times
    "in all" are the union of the copies' intervals in the gap (copies on several
    streams at once are not added up)."""
    trace = diag.trace
    cp = [e for e in evidence if e.cause == Cause.COPY]
    # every GPU copy of the occurrence, not only those the evidence list kept (an
    # enum member looked up once, not per copy: 100k copies in a gap); the list may
    # keep none of them (nccl_data #1186: 144 short DtoD copies under 12 larger host
    # items), and they are still the copy time's own
    copy_c = Cause.COPY
    got = [(e, int(r)) for r in rows for e in diag.gpu_copies(int(r)) if e.cause is copy_c]
    if not cp and not got:
        return None
    got = _holding(diag, got)
    # the GPU's own copy whenever it ran one
    big = max((e for e, _ in got), key=lambda e: (e.overlap_ns, e.bytes), default=None)
    big = big if big is not None else max(cp, key=lambda e: (e.overlap_ns, e.bytes))
    every = [e for e, _ in got] if got else [big]
    ev = np.array([e.event for e in every], dtype=np.int64)
    ns = np.array([e.overlap_ns for e in every], dtype=np.int64)
    by = np.array([e.bytes for e in every], dtype=np.int64)
    lo, hi = _windows(diag, got, ns)
    memset = _memsets(trace, ev)
    short = ns <= SHORT_COPY_NS
    names = [e.name for e in every]
    like = _like_big(every, big)
    kinds = _short_kinds(trace, ev, memset, short, lo, hi)
    total = _union_ns(lo, hi)
    directions = _directions(trace, ev) if ev[0] >= 0 and not memset.any() else []
    return CopyLead(
        big=big,
        count=len(every),
        same_name=all(n == big.name for n in names),
        median_ns=int(np.median(ns)),
        min_ns=int(ns.min()),
        max_ns=int(ns.max()),
        total_ns=total,
        bytes_total=int(by.sum()) if (by >= 0).all() else -1,
        noun=_noun(memset),
        like_big=len(like),
        like_big_range=(int(ns[like].min()), int(by[like].min()), int(by[like].max())),
        short_count=int(short.sum()),
        short_ns=_union_ns(lo[short], hi[short]),
        short_median_ns=int(np.median(ns[short])) if short.any() else 0,
        short_kinds=kinds,
        lengths_ns=tuple(sorted(ns.tolist(), reverse=True)) if ns.size <= 3 else (),
        same_bytes=bool((by == by[0]).all()) and int(by[0]) >= 0,
        directions=tuple(directions),
    )
