"""Picket-fence expansion for lane-art ASCII timelines (``gapscope.parsers.ascii.art``).

Grammar: ``docs/ascii-timelines.md`` ("Lane art"). A fence ``k k k`` on a GPU row
expands from the numbers in its annotation (kernel length, gap range, repeat count),
or from the drawing where the annotation gives none, into kernels, one launch call per
kernel and Python work between on the CPU lane. Times are int ns.
"""

from __future__ import annotations

import decimal
import re
import typing

from gapscope.parsers.ascii.common import NUMBER, STANDALONE_NUMBER, check_quantities, clip, error_at, to_ns
from gapscope.parsers.model import Kind

__all__ = [
    "expand_fence",
    "plan_fence",
    "check_expansion",
    "FenceEvent",
    "FencePlan",
    "MAX_FENCE_KERNELS",
    "MAX_EXPANDED_EVENTS",
    "EXPANDED_EVENT_BYTES",
    "EVENTS_PER_KERNEL",
]

#: Most kernels one picket fence may expand into.
MAX_FENCE_KERNELS = 100_000
#: Most events a fence creates per kernel: the kernel, its launch call, and the Python
#: work before the launch.
EVENTS_PER_KERNEL = 3
#: Most events all the fences of one file may expand into together (one budget for the
#: file, not per fence: ten fences of 100,000 kernels asked for 2.8 GB): as many as one
#: fence at its largest creates.
MAX_EXPANDED_EVENTS = EVENTS_PER_KERNEL * MAX_FENCE_KERNELS
#: What one expanded event counts against the trace-size limit
#: (``GAPSCOPE_MAX_TRACE_BYTES``, the limit a JSON trace's text gets): about the peak
#: memory it costs while loading (a 100,000-kernel fence, 300,000 events: 280 MB).
EXPANDED_EVENT_BYTES = 1024

_UNIT = r"(ns|us|µs|μs|ms|s)"
_NUM = STANDALONE_NUMBER
_GAP_RANGE = re.compile(r"gaps?\s+(?:of\s+)?" + _NUM + r"\s*" + _UNIT + r"?\s*(?:[–—-]|to)\s*" + _NUM + r"\s*" + _UNIT)
_GAP_ONE = re.compile(r"gaps?\s+(?:of\s+)?" + _NUM + r"\s*" + _UNIT + r"(?!\s*(?:[–—-]|to)\s*\d)")
_KERNEL_LEN = re.compile(_NUM + r"\s*" + _UNIT + r"\s+kernels?|kernels?\s+of\s+" + _NUM + r"\s*" + _UNIT)
_COUNT = re.compile(_NUM + r"\s*(?:times|×)|(?<!\w)[x×]\s*(" + NUMBER + r")(?![\w.])")


class FenceEvent(typing.NamedTuple):
    """One event of an expanded fence; ``start_ns`` relative to the fence's first launch call."""

    lane: str  # "CPU" or "GPU"
    name: str
    start_ns: int
    dur_ns: int
    kind: Kind
    paired: bool  # a launch call or the kernel it launches (linked by correlation)


class FencePlan(typing.NamedTuple):
    """What a fence will expand into, read from its notes before anything is
    allocated: ``n_kernels`` kernels of ``kernel_ns``, gaps from ``gap_range`` (low, high
    ns) or else ``drawn_gaps_ns`` (the drawing's, cycled; ``scale_ns`` when none);
    ``where``: (line, column) of its first note, else of the fence, for messages."""

    n_kernels: int
    kernel_ns: int
    gap_range: tuple[int, int] | None
    drawn_gaps_ns: tuple[int, ...]
    scale_ns: int
    where: tuple[int, int]

    @property
    def max_events(self) -> int:
        """Most events the expansion creates (``EVENTS_PER_KERNEL`` per kernel)."""
        return EVENTS_PER_KERNEL * self.n_kernels


def check_expansion(plans: list[FencePlan], path: str, max_bytes: tuple[int, bool] | None = None) -> int:
    """Refuse, before any fence is expanded, a file whose fences together would create
    more than ``MAX_EXPANDED_EVENTS`` events, or more than ``max_bytes`` (the trace-size
    limit and whether the user set it, as ``detect.trace_limit``) at
    ``EXPANDED_EVENT_BYTES`` each. Returns the events the fences will create at most.
    Raises ``TraceFormatError`` at the note (or fence) of the fence that passes the
    budget, naming the cap and the total asked for."""
    total = sum(p.max_events for p in plans)
    cap = MAX_EXPANDED_EVENTS
    by_bytes = None
    if max_bytes is not None and max_bytes[0] // EXPANDED_EVENT_BYTES < cap:
        cap = max_bytes[0] // EXPANDED_EVENT_BYTES
        by_bytes = max_bytes
    if total <= cap:
        return total
    running = 0
    for p in plans:
        running += p.max_events
        if running > cap:
            break
    if by_bytes is None:
        limit = f"at most {MAX_EXPANDED_EVENTS:,} events per file"
    else:
        who = "set by GAPSCOPE_MAX_TRACE_BYTES" if by_bytes[1] else "(a third of available memory)"
        limit = (
            f"at most {cap:,} events: the trace-size limit {who} of {by_bytes[0]:,} bytes at "
            f"{EXPANDED_EVENT_BYTES:,} bytes per event"
        )
    raise error_at(
        path,
        f"picket fences expand into up to {total:,} events in all ({len(plans)} fence(s); this one, "
        f"{p.n_kernels:,} kernels, passes the cap): {limit}; refusing to expand them",
        p.where[0],
        p.where[1],
        "sketch fewer repeats; a capture of a real run is the better input",
    )


def expand_fence(plan: FencePlan, name: str) -> tuple[list[FenceEvent], int]:
    """The kernels (named ``name``), launch calls and Python work of the fence
    ``plan`` (``plan_fence``): the kernel ``i`` starts after gap ``i - 1``.

    Returns (events, duration): event times are ns relative to the fence's first launch
    call, the duration runs up to the end of its last kernel (ns). At most
    ``plan.max_events`` events."""
    count, kernel_ns, drawn_gaps = plan.n_kernels, plan.kernel_ns, plan.drawn_gaps_ns
    if plan.gap_range is None:
        gaps = [drawn_gaps[i % len(drawn_gaps)] if drawn_gaps else plan.scale_ns for i in range(count - 1)]
    else:
        gap_lo, gap_hi = plan.gap_range
        gaps = [gap_lo + (gap_hi - gap_lo) * (i % 7) // 6 for i in range(count - 1)]
    first_launch = 2 * (gaps[0] if gaps else kernel_ns) // 3
    t, cpu_t = first_launch, 0
    events: list[FenceEvent] = []
    for i in range(count):
        launch_ns = 2 * (gaps[i - 1] if i else gaps[0] if gaps else kernel_ns) // 3
        if t - launch_ns > cpu_t:
            events.append(FenceEvent("CPU", "python loop", cpu_t, t - launch_ns - cpu_t, Kind.PYTHON, False))
        events.append(FenceEvent("CPU", "launch k", t - launch_ns, launch_ns, Kind.LAUNCH, True))
        events.append(FenceEvent("GPU", name, t, kernel_ns, Kind.KERNEL, True))
        cpu_t = t
        t += kernel_ns + (gaps[i] if i < count - 1 else 0)
    return events, t


def plan_fence(
    ks: list[int], line: int, col0: int, notes: list[tuple[int, int, str, int]], scale_ns: int, path: str
) -> FencePlan:
    """The ``FencePlan`` of the fence drawn at columns ``ks`` (0-based, one per ``k``)
    of ``line``, starting at column ``col0``: nothing is expanded yet.

    ``notes``: the annotations of the GPU row, (line, column, text, text column).
    ``scale_ns``: ns per drawn column. Numbers come from ``notes``: kernel length (``3 µs kernels``), gaps
    (``gaps of 8–20 µs``) and the count (``repeating 128 times`` = 128 kernels);
    missing ones come from the drawing (one column per ``k``, gaps from the columns between them). Gap ``i``
    steps through 7 evenly spaced values from the low to the high end:
    ``lo + (hi − lo) · (i mod 7) // 6``. Each launch call lasts ⌊2/3⌋ of the gap before
    its kernel (the first: of the first gap); Python work fills the CPU between.

    Raises ``TraceFormatError`` for a malformed or out-of-range number (at its column),
    for more than ``MAX_FENCE_KERNELS`` kernels or notes without usable numbers (at the
    first note, else at the fence).
    """
    for note_line, _, note, note_col in notes:
        check_quantities(note, note_line, note_col, "picket fence number", path)
    text = " ".join(note for _, _, note, _ in notes)
    where = (notes[0][0], notes[0][1]) if notes else (line, col0)

    def ns(num: str, unit: str) -> int:
        v = to_ns(num, unit)
        if v is None:
            raise error_at(path, f"picket fence number {num[:24]} {unit} is out of range", where[0], where[1])
        return v

    drawn_gaps = [(b - a - 1) * scale_ns for a, b in zip(ks, ks[1:])]
    kernel_ns = scale_ns
    if (m := _KERNEL_LEN.search(text)) is not None:
        kernel_ns = ns(m.group(1), m.group(2)) if m.group(1) else ns(m.group(3), m.group(4))
    gap_range: tuple[int, int] | None = None  # (low, high) ns
    if (m := _GAP_RANGE.search(text)) is not None:
        gap_range = ns(m.group(1), m.group(2) or m.group(4)), ns(m.group(3), m.group(4))
    elif (m := _GAP_ONE.search(text)) is not None:
        gap = ns(m.group(1), m.group(2))
        gap_range = gap, gap
    count = len(ks)
    asked = None
    if (m := _COUNT.search(text)) is not None:
        asked = m.group(1) or m.group(2)
        d = decimal.Decimal(asked)
        count = 0 if d != d.to_integral_value() else MAX_FENCE_KERNELS + 1 if d > MAX_FENCE_KERNELS else int(d)
    if count > MAX_FENCE_KERNELS:
        raise error_at(
            path,
            f"picket fence of {clip(asked or str(count))} kernels: at most {MAX_FENCE_KERNELS}",
            where[0],
            where[1],
            "sketch fewer repeats; a capture of a real run is the better input",
        )
    if count < 1 or kernel_ns < 1 or (gap_range is not None and gap_range[0] > gap_range[1]):
        raise error_at(
            path,
            f"picket fence annotation gives no usable numbers: {clip(text)!r}",
            where[0],
            where[1],
            "e.g. 'gaps of 8–20 µs between 3 µs kernels, repeating 128 times'",
        )
    return FencePlan(count, kernel_ns, gap_range, tuple(drawn_gaps), scale_ns, where)
