"""The hottest frames of a gap from CPU samples (``Trace.cpu_samples``: Nsight
Systems' ``--sample``), a fact of the card ("Cards as facts and rules" in the design):
which functions the launching thread was running while the GPU sat idle, and the
sentence and evidence that name them.

Definitions. A sample is *in* an occurrence when it was taken in ``[start_ns, end_ns)``
of one of its gaps, on the thread the gap's causes are read from
(``Gaps.thread_of``). A sample's *frame* is the frame nearest its leaf whose symbol
the export resolved (the leaf itself when resolved; an unresolved leaf inside a library
is told by the first named function above it, the code that called into it); a sample
with no resolved frame is told by its leaf's address; its *caller* is the next resolved
frame above that one (a frame's caller is the most common among its samples). A frame's
*share* is its samples
over the occurrence's samples. Samples are taken while a thread runs on a CPU, so an
occurrence at least ``OFF_CPU_INTERVALS`` of the thread's sampling intervals long
(the median time between its consecutive samples) with no sample is time off the CPU
(blocked, sleeping, waiting in the kernel); a shorter one may fall between two samples
and is not told.
"""

from __future__ import annotations

import weakref

import numpy as np

from gapscope.analysis.diagnose import Diagnosis
from gapscope.analysis.types import GapSamples, SampledFrame
from gapscope.parsers.model import CpuSamples
from gapscope.units import fmt_dur

__all__ = [
    "HOT_FRAMES",
    "SAMPLED_FRAME_MIN_SHARE",
    "SAMPLED_FRAME_MIN_SAMPLES",
    "OFF_CPU_INTERVALS",
    "sampling_interval_ns",
    "gap_samples",
    "samples_sentence",
    "dominant_frame",
    "frame_text",
]

#: Frames a card names, hottest first.
HOT_FRAMES = 3
#: A frame leads the advice when it holds at least this share of the gap's samples...
SAMPLED_FRAME_MIN_SHARE = 0.4
#: ... and at least this many samples (fewer say little about where the time went).
SAMPLED_FRAME_MIN_SAMPLES = 3
#: An occurrence with no sample is told as time off the CPU when it is at least this
#: many of the thread's sampling intervals long.
OFF_CPU_INTERVALS = 3

_INTERVALS: weakref.WeakKeyDictionary[CpuSamples, dict[int, int]] = weakref.WeakKeyDictionary()


def sampling_interval_ns(cs: CpuSamples, lane: int) -> int:
    """Median ns between consecutive samples of ``lane`` (-1 with fewer than two).
    Cached per samples table and lane."""
    per = _INTERVALS.setdefault(cs, {})
    got = per.get(lane)
    if got is None:
        sl = slice(int(cs.lane_offsets[lane]), int(cs.lane_offsets[lane + 1]))
        d = np.diff(cs.start_ns[sl])
        got = per[lane] = int(np.median(d)) if d.size else -1
    return got


_NONE = np.iinfo(np.int64).max


def _frames_of(cs: CpuSamples, sel: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(name id, module id, caller name id) of the frame of each sample ``sel`` (int64
    indices): the first resolved frame from the leaf, else the leaf; its caller is the
    next resolved frame above it in the kept chain. -1 where there is none."""
    off = cs.frame_offsets
    lo, hi = off[sel], off[sel + 1]
    has = hi > lo
    name = np.full(sel.shape[0], -1, dtype=np.int64)
    module = np.full(sel.shape[0], -1, dtype=np.int64)
    caller = np.full(sel.shape[0], -1, dtype=np.int64)
    if not has.any():
        return name, module, caller
    counts = (hi - lo)[has]
    starts = lo[has]
    seg = np.cumsum(counts) - counts
    # every kept frame of the samples with frames, with its rank in its chain
    idx = np.repeat(starts, counts) + (np.arange(int(counts.sum())) - np.repeat(seg, counts))
    depth = idx - np.repeat(starts, counts)
    resolved = cs.frame_resolved[idx]
    first = np.minimum.reduceat(np.where(resolved, depth, _NONE), seg)
    pick = starts + np.where(first == _NONE, 0, first)
    name[has] = cs.frame_name[pick]
    module[has] = cs.frame_module[pick]
    above = np.minimum.reduceat(np.where(resolved & (depth > np.repeat(first, counts)), depth, _NONE), seg)
    found = above != _NONE
    up = np.full(starts.shape[0], -1, dtype=np.int64)
    up[found] = cs.frame_name[starts[found] + above[found]]
    caller[has] = up
    return name, module, caller


def _mode(values: np.ndarray) -> int:
    """The most common value of ``values`` that is not -1 (ties: the first seen), or -1."""
    v = values[values >= 0]
    if not v.size:
        return -1
    uniq, first, counts = np.unique(v, return_index=True, return_counts=True)
    return int(uniq[np.lexsort((first, -counts))[0]])


def gap_samples(diag: Diagnosis, rows: np.ndarray) -> GapSamples | None:
    """The ``GapSamples`` of the occurrence ``rows`` (gap indices, int64): the samples
    of its launching thread inside it and their ``HOT_FRAMES`` hottest frames (ties:
    the frame seen first). None when the trace has no CPU samples or the occurrence no
    launching thread."""
    cs = diag.trace.cpu_samples
    if cs is None or not len(cs) or not len(rows):
        return None
    g = diag.gaps
    lane = g.thread_of(int(rows[0]))
    if lane < 0:
        return None
    parts = [cs.in_window(lane, int(g.start_ns[r]), int(g.end_ns[r])) for r in rows.tolist()]
    sel = np.unique(np.concatenate([np.arange(p.start, p.stop, dtype=np.int64) for p in parts]))
    n = int(sel.shape[0])
    interval = sampling_interval_ns(cs, lane)
    if n == 0:
        return GapSamples(lane, 0, (), interval)
    name, module, caller = _frames_of(cs, sel)
    key = name * (len(cs.names) + 1) + (module + 1)
    uniq, first_seen, inv, counts = np.unique(key, return_index=True, return_inverse=True, return_counts=True)
    order = np.lexsort((first_seen, -counts))[:HOT_FRAMES]
    frames = []
    for k in order.tolist():
        j = int(first_seen[k])
        nm = cs.names[int(name[j])] if name[j] >= 0 else "(no callchain)"
        mod = cs.names[int(module[j])] if module[j] >= 0 else ""
        up = _mode(caller[inv.reshape(-1) == k])
        frames.append(SampledFrame(nm, mod, int(counts[k]), float(counts[k]) / n, cs.names[up] if up >= 0 else ""))
    return GapSamples(lane, n, tuple(frames), interval)


def dominant_frame(s: GapSamples | None) -> SampledFrame | None:
    """The hottest frame when it holds ``SAMPLED_FRAME_MIN_SHARE`` of at least
    ``SAMPLED_FRAME_MIN_SAMPLES`` samples, else None."""
    if s is None or not s.frames:
        return None
    top = s.frames[0]
    return top if top.samples >= SAMPLED_FRAME_MIN_SAMPLES and top.share >= SAMPLED_FRAME_MIN_SHARE else None


def _module_text(module: str) -> str:
    """The module's file name (``/usr/lib64/libcuda.so.1`` → ``libcuda.so.1``)."""
    return module.rsplit("/", 1)[-1] if module else ""


def frame_text(f: SampledFrame, quote) -> str:
    """ "`name` (in `libx.so`, 12 samples, 60%, called from `f`)": the frame, its
    names rendered with ``quote``."""
    mod = _module_text(f.module)
    where = f"in {quote(mod)}, " if mod else ""
    called = f", called from {quote(f.caller)}" if f.caller else ""
    return f"{quote(f.name)} ({where}{f.samples:,} sample{'' if f.samples == 1 else 's'}, {f.share:.0%}{called})"


def _off_cpu_note(s: GapSamples, occurrence_ns: int) -> str:
    """ "; about 22 would fall in it at the thread's 0.136 ms between samples, so it
    was off the CPU for most of the gap" when the samples are under a third of what
    the sampling interval gives for the occurrence's length; else ""."""
    if s.interval_ns <= 0:
        return ""
    expected = occurrence_ns / s.interval_ns
    if expected < OFF_CPU_INTERVALS or s.samples * 3 > expected:
        return ""
    return (
        f"; about {expected:,.0f} would fall in it at the {fmt_dur(s.interval_ns)} between the thread's samples, "
        "so it was off the CPU (blocked, sleeping or waiting in the kernel) for most of the gap"
    )


def samples_sentence(diag: Diagnosis, s: GapSamples | None, quote, occurrence_ns: int) -> str:
    """The sentence the card's "why" adds for ``s`` ("" when None): the hottest
    frames with their samples and shares, or, with no sample in an occurrence of
    ``occurrence_ns`` at least ``OFF_CPU_INTERVALS`` sampling intervals long, that the
    thread was off the CPU. ``quote`` renders an untrusted name (``why.quote_name``)."""
    if s is None:
        return ""
    thread = diag.trace.lanes[s.lane].thread_name or diag.trace.lanes[s.lane].tid
    if s.samples == 0:
        if s.interval_ns <= 0 or occurrence_ns < OFF_CPU_INTERVALS * s.interval_ns:
            return ""  # short enough to fall between two samples: no sign either way
        return (
            f"No CPU sample of thread {quote(thread)} falls inside this gap, although it was sampled every "
            f"{fmt_dur(s.interval_ns)} or so while it ran: it was off the CPU (blocked, sleeping or waiting in "
            f"the kernel) rather than computing."
        )
    note = _off_cpu_note(s, occurrence_ns)
    if s.samples == 1:
        f = s.frames[0]
        mod = _module_text(f.module)
        bits = [f"in {quote(mod)}"] if mod else []
        bits += [f"called from {quote(f.caller)}"] if f.caller else []
        return (
            f"The one CPU sample of thread {quote(thread)} inside this gap fell in {quote(f.name)}"
            + (f" ({', '.join(bits)})" if bits else "")
            + f"{note}."
        )
    parts = ", ".join(frame_text(f, quote) for f in s.frames)
    are = "frame is" if len(s.frames) == 1 else "frames are"
    return (
        f"Of the {s.samples:,} CPU samples of thread {quote(thread)} inside this gap, the hottest {are} {parts}{note}."
    )
