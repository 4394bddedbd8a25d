"""Picket-fence expansion for lane-art ASCII timelines (``gapscope.parsers.ascii.art``).

Grammar: ``docs/ascii-timelines.md`` ("Lane art"). A fence ``k k k`` on a GPU row
expands from the numbers in its annotation (kernel length, gap range, repeat count),
or from the drawing where the annotation gives none, into kernels, one launch call per
kernel and Python work between on the CPU lane. Times are int64 ns. Also holds the
lane-art error and number checks ``gapscope.parsers.ascii.art`` shares. Re-exported from
``gapscope.parsers.ascii.art``.
"""

from __future__ import annotations

import decimal
import re
from typing import TYPE_CHECKING

from gapscope.parsers.ascii.common import NUMBER, clip, quantities, to_ns
from gapscope.parsers.errors import TraceFormatError
from gapscope.parsers.model import Kind

if TYPE_CHECKING:
    from gapscope.parsers.ascii.art import Item

__all__ = ["expand_fence", "MAX_FENCE_KERNELS"]

#: Most kernels one picket fence may expand into.
MAX_FENCE_KERNELS = 100_000

_UNIT = r"(ns|us|µs|μs|ms|s)"
_NUM = r"(?<![\w.])(" + NUMBER + r")"  # the shared number rules (gapscope.parsers.ascii.common.quantities)
_GAP_RANGE = re.compile(r"gaps?\s+(?:of\s+)?" + _NUM + r"\s*" + _UNIT + r"?\s*(?:[–—-]|to)\s*" + _NUM + r"\s*" + _UNIT)
_GAP_ONE = re.compile(r"gaps?\s+(?:of\s+)?" + _NUM + r"\s*" + _UNIT + r"(?!\s*(?:[–—-]|to)\s*\d)")
_KERNEL_LEN = re.compile(_NUM + r"\s*" + _UNIT + r"\s+kernels?|kernels?\s+of\s+" + _NUM + r"\s*" + _UNIT)
_COUNT = re.compile(_NUM + r"\s*(?:times|×)|(?<!\w)[x×]\s*(" + NUMBER + r")(?![\w.])")


def _err(path, msg, line, col0, hint=None):
    return TraceFormatError(path, msg, line=line, column=col0 + 1, hint=hint)


def _check_quantities(text: str, line: int, col0: int, what: str, path: str) -> None:
    """Raise ``TraceFormatError`` at the number's column for a malformed number before a
    unit (``1.2.3 ms``, ``1e ms``) or one above ``MAX_TIME_NS`` (``1e30 ms``) in ``text``,
    which starts at 0-based column ``col0`` of ``line``."""
    for q in quantities(text):
        if q.problem == "malformed":
            raise _err(path, f"malformed number {clip(q.num)!r} before {q.unit!r}", line, col0 + q.start,
                       "numbers read 12, 0.5, .5 or 1e-3")
        if q.problem == "range":
            raise _err(path, f"{what} {clip(q.num)} {q.unit} is out of range", line, col0 + q.start,
                       "times must be below 2^62 ns (about 146 years)")


def expand_fence(it: Item, notes: list[tuple[int, int, str, int]], scale_ns: int, path: str) -> int:
    """Fill ``it.events`` with the fence's kernels, launch calls and Python work.

    Times are relative to the fence's first launch call; returns the fence duration
    (ns, up to the end of its last kernel). Numbers come from the annotation ``notes``
    of the GPU row: kernel length (``3 µs kernels``), gaps (``gaps of 8–20 µs``) and
    the count (``repeating 128 times`` = 128 kernels); missing ones come from the
    drawing (one column per ``k``, gaps from the columns between them). Gap ``i``
    steps through 7 evenly spaced values from the low to the high end:
    ``lo + (hi − lo) · (i mod 7) // 6``. Each launch call lasts ⌊2/3⌋ of the gap before
    its kernel (the first: of the first gap); Python work fills the CPU between.
    """
    for line, _, t, tcol in notes:
        _check_quantities(t, line, tcol, "picket fence number", path)
    text = " ".join(t for _, _, t, _ in notes)
    where = notes[0] if notes else (it.line, it.col0, "", it.col0)

    def ns(num, unit):
        v = to_ns(num, unit)
        if v is None:
            raise _err(path, f"picket fence number {num[:24]} {unit} is out of range", where[0], where[1])
        return v

    drawn_gaps = [(b - a - 1) * scale_ns for a, b in zip(it.ks, it.ks[1:])]
    kernel_ns = scale_ns
    if (m := _KERNEL_LEN.search(text)) is not None:
        kernel_ns = ns(m.group(1), m.group(2)) if m.group(1) else ns(m.group(3), m.group(4))
    gap_lo = gap_hi = None
    if (m := _GAP_RANGE.search(text)) is not None:
        gap_lo, gap_hi = ns(m.group(1), m.group(2) or m.group(4)), ns(m.group(3), m.group(4))
    elif (m := _GAP_ONE.search(text)) is not None:
        gap_lo = gap_hi = ns(m.group(1), m.group(2))
    count = len(it.ks)
    asked = None
    if (m := _COUNT.search(text)) is not None:
        asked = m.group(1) or m.group(2)
        d = decimal.Decimal(asked)
        count = 0 if d != d.to_integral_value() else MAX_FENCE_KERNELS + 1 if d > MAX_FENCE_KERNELS else int(d)
    if count > MAX_FENCE_KERNELS:
        raise _err(path, f"picket fence of {clip(asked or str(count))} kernels: at most {MAX_FENCE_KERNELS}",
                   where[0], where[1],
                   "sketch fewer repeats; a capture of a real run is the better input")
    if count < 1 or kernel_ns < 1 or (gap_lo is not None and gap_lo > gap_hi):
        raise _err(path, f"picket fence annotation gives no usable numbers: {clip(text)!r}", where[0], where[1],
                   "e.g. 'gaps of 8–20 µs between 3 µs kernels, repeating 128 times'")
    if gap_lo is None:
        gaps = [drawn_gaps[i % len(drawn_gaps)] if drawn_gaps else scale_ns for i in range(count - 1)]
    else:
        gaps = [gap_lo + (gap_hi - gap_lo) * (i % 7) // 6 for i in range(count - 1)]
    first_launch = 2 * (gaps[0] if gaps else kernel_ns) // 3
    t, cpu_t, events = first_launch, 0, []
    for i in range(count):
        launch_ns = 2 * (gaps[i - 1] if i else gaps[0] if gaps else kernel_ns) // 3
        if t - launch_ns > cpu_t:
            events.append(("CPU", "python loop", cpu_t, t - launch_ns - cpu_t, Kind.PYTHON, False))
        events.append(("CPU", "launch k", t - launch_ns, launch_ns, Kind.LAUNCH, True))
        events.append(("GPU", it.name, t, kernel_ns, Kind.KERNEL, True))
        cpu_t = t
        t += kernel_ns + (gaps[i] if i < count - 1 else 0)
    it.events = events
    return t
