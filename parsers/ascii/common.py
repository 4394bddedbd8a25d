"""Helpers both ASCII timeline shapes share (``gapscope.parsers.ascii.events``, ``.art``).

Grammar and every error message: ``docs/ascii-timelines.md``. Here: the units and the
one set of number rules (``NUMBER``, ``quantities``, ``to_ns``: exact decimals to int
ns), the lane names (``LANE_RE``, ``lane_label``, ``cpu_lane``, ``gpu_lane``), the
``#`` header (title and description), and ``error_at`` / ``check_quantities`` for
``TraceFormatError`` at a 0-based column. Which shape a file has, and loading it:
``gapscope.parsers.ascii`` (``load_ascii``, ``timeline_shape``).
"""

from __future__ import annotations

import decimal
import re
import typing

from gapscope.parsers.builder import TraceBuilder
from gapscope.parsers.errors import TraceFormatError

__all__ = [
    "split_lines",
    "header_comments",
    "new_builder",
    "cpu_lane",
    "gpu_lane",
    "lane_label",
    "LANE_RE",
    "MAX_LANE_DIGITS",
    "UNIT_NS",
    "MAX_TIME_NS",
    "NUMBER",
    "STANDALONE_NUMBER",
    "NUMERIC_TOKEN",
    "to_ns",
    "split_number",
    "is_malformed",
    "Quantity",
    "quantities",
    "check_quantities",
    "error_at",
    "clip",
]

#: Units of both shapes, in ns per unit.
UNIT_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
#: Largest time accepted (ns): int64 with room for start + duration.
MAX_TIME_NS = 2**62
#: A number in either shape: ``12``, ``0.5``, ``5.``, ``.5``, with an optional exponent
#: (``1e-3``, ``2.5E6``). No sign: times and lengths are never negative.
NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_NUMBER_RE = re.compile(NUMBER)
#: ``NUMBER`` as regex group 1, not glued to a word or a dot before it (none starts
#: inside ``k1e30`` or at the ``2`` of ``1.2.3``), as ``quantities`` reads numbers: for
#: the regexes of span labels (``prefill 42 ms``) and fence annotations.
STANDALONE_NUMBER = r"(?<![\w.])(" + NUMBER + r")"
#: A token that starts like a number (not glued to a word or a dot before it): the
#: number and whatever is glued to it (``0.5ms``, ``1.2.3``, ``1e30``, ``5xs``).
NUMERIC_TOKEN = re.compile(r"(?<![\w.])(?:\d|\.\d)(?:[eE][+-]\d|[\w.])*")
#: ``NUMBER``'s integer digits, fraction digits and exponent (for ``to_ns``).
_NUMBER_PARTS = re.compile(r"([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]+))?")  # other digits: Decimal
#: Power of ten of each unit in ns (``UNIT_NS``).
_UNIT_EXP = {u: len(str(ns)) - 1 for u, ns in UNIT_NS.items()}
_UNIT_AFTER = re.compile(r"\s*(ns|us|µs|μs|ms|s)(?!\w)")
_UNITS_LONGEST_FIRST = sorted(UNIT_NS, key=len, reverse=True)


def clip(text: str, limit: int = 40) -> str:
    """``text`` cut to ``limit`` characters, ``…`` marking a cut (for quoting input in messages)."""
    return text if len(text) <= limit else text[:limit] + "…"


def split_number(token: str) -> tuple[str, str]:
    """(number, rest) of a ``NUMERIC_TOKEN`` match: ``"0.5ms"`` → ``("0.5", "ms")``,
    ``"1e30"`` → ``("1e30", "")``, ``"1.2.3"`` → ``("1.2", ".3")``. A rest that starts
    with a digit or ``.`` makes the token a malformed number; one that starts with a
    letter is a glued unit (known or not). Raises ``ValueError`` for a token that does
    not start with a number."""
    m = _NUMBER_RE.match(token)
    if m is None:
        raise ValueError(f"not a numeric token: {token!r}")
    return token[: m.end()], token[m.end() :]


def is_malformed(rest: str) -> bool:
    """Whether ``rest`` (from ``split_number``) makes its token a malformed number: it
    goes on with a digit, a dot or an exponent mark (``1.2.3``, ``1e``, ``1e+``)."""
    return bool(rest) and rest[0] in "0123456789.eE"


def to_ns(num: str, unit: str) -> int | None:
    """Exact decimal ``num`` (``NUMBER``: fraction and exponent allowed, any number of
    digits) in ``unit`` (a key of ``UNIT_NS``) → int ns, rounded to the nearest (ties
    to even); None when above ``MAX_TIME_NS``. Values below half a ns round to 0."""
    if len(num) <= 18 and "e" not in num and "E" not in num:  # fast path: exact in int arithmetic
        whole, _, frac = num.partition(".")
        den = 10 ** len(frac)
        q, r = divmod(int(whole + frac or "0") * UNIT_NS[unit], den)
        if 2 * r > den or (2 * r == den and q % 2):
            q += 1
        return q if q <= MAX_TIME_NS else None
    m = _NUMBER_PARTS.fullmatch(num)
    if m is not None and (m[1] or m[2]) and len(m[3] or "") <= 9 and len(num) <= 1000:  # exact in ints
        whole, frac, exp = m[1], m[2] or "", int(m[3] or 0)
        digits = (whole + frac).lstrip("0")
        if not digits:
            return 0
        shift = exp - len(frac) + _UNIT_EXP[unit]  # value in ns = int(digits) * 10**shift
        adjusted = len(digits) - 1 + shift  # power of ten of the leading digit, in ns
        if adjusted > 30:  # ≥ 1e31 ns: far above 2^62
            return None
        if adjusted < -30:  # < 1e-29 ns: rounds to 0
            return 0
        if shift >= 0:
            q = int(digits) * 10**shift
        else:
            den = 10**-shift
            q, r = divmod(int(digits), den)
            if 2 * r > den or (2 * r == den and q % 2):
                q += 1
        return q if q <= MAX_TIME_NS else None
    d = decimal.Decimal(num)
    if d.is_zero():
        return 0
    if d.adjusted() > 30:  # ≥ 1e31 units: far above 2^62 ns whatever the unit
        return None
    if d.adjusted() < -30:  # < 1e-29 units: below half a ns whatever the unit
        return 0
    digits = len(d.as_tuple().digits)
    ctx = decimal.Context(prec=digits + 40, rounding=decimal.ROUND_HALF_EVEN, Emax=10**6, Emin=-(10**6))
    q = int((d * UNIT_NS[unit]).quantize(decimal.Decimal(1), context=ctx))
    return q if q <= MAX_TIME_NS else None


class Quantity(typing.NamedTuple):
    """A number with a unit in free text: 0-based columns [start, end) of the whole
    quantity, ``num_col`` of the number; ``problem`` is "" or ``"malformed"`` /
    ``"range"``; ``ns`` the value (None unless ``problem`` is "")."""

    start: int
    end: int
    num: str
    unit: str
    ns: int | None
    problem: str


def quantities(text: str) -> list[Quantity]:
    """Every number followed by a unit (glued, ``0.5ms``, or after blanks, ``3 µs``) in
    ``text``, by the one set of rules both shapes share: the number is ``NUMBER``
    standing alone (``k1e30 ms`` and ``H2D 6`` hold no number before the unit other than
    ``6``); a numeric token with junk glued on before the unit (``1.2.3 ms``, ``1x ms``)
    is malformed; a value above ``MAX_TIME_NS`` is out of range."""
    out = []
    for m in NUMERIC_TOKEN.finditer(text):
        token = m.group(0)
        num, rest = split_number(token)
        bad = is_malformed(rest)
        if rest and not bad:  # a word glued on: a unit, or no quantity at all (5xs, 2nd)
            if rest not in UNIT_NS:
                continue
            unit, end = rest, m.end()
        else:
            glued = next((u for u in _UNITS_LONGEST_FIRST if bad and rest.endswith(u)), None)
            if glued is not None:  # 1.2.3ms
                unit, end, num = glued, m.end(), token[: len(token) - len(glued)]
            elif (u := _UNIT_AFTER.match(text, m.end())) is not None:
                unit, end, num = u.group(1), u.end(), token
            else:
                continue
        ns = None if bad else to_ns(num, unit)
        out.append(Quantity(m.start(), end, num, unit, ns, "malformed" if bad else "range" if ns is None else ""))
    return out


def error_at(path: str, msg: str, line: int, col0: int, hint: str | None = None) -> TraceFormatError:
    """A ``TraceFormatError`` at 1-based ``line`` and 0-based column ``col0`` (reported
    1-based, as every message of ``docs/ascii-timelines.md`` is)."""
    return TraceFormatError(path, msg, line=line, column=col0 + 1, hint=hint)


def check_quantities(text: str, line: int, col0: int, what: str, path: str) -> None:
    """Raise ``TraceFormatError`` at the number's column for a malformed number before a
    unit (``1.2.3 ms``, ``1e ms``) or one above ``MAX_TIME_NS`` (``1e30 ms``) in ``text``,
    which starts at 0-based column ``col0`` of ``line``; ``what`` names the number in
    the message (``"duration"``, ``"picket fence number"``)."""
    for q in quantities(text):
        if q.problem == "malformed":
            raise error_at(
                path,
                f"malformed number {clip(q.num)!r} before {q.unit!r}",
                line,
                col0 + q.start,
                "numbers read 12, 0.5, .5 or 1e-3",
            )
        if q.problem == "range":
            raise error_at(
                path,
                f"{what} {clip(q.num)} {q.unit} is out of range",
                line,
                col0 + q.start,
                "times must be below 2^62 ns (about 146 years)",
            )


#: Most digits of a lane number (``GPU12``): device and thread ids stay small integers.
MAX_LANE_DIGITS = 4
#: A lane name in either shape: CPU, CPU1, GPU, GPU1 (case-insensitive).
LANE_RE = re.compile(r"^(CPU|GPU)(\d*)$", re.I)


def split_lines(text: str) -> list[str]:
    """Lines of ``text`` without line ends; a leading byte-order mark is dropped."""
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.splitlines()


def header_comments(lines: list[str]) -> tuple[str | None, str | None]:
    """(title, description) from the ``#`` lines before the first timeline line.

    The first such line is the title, the following ones (joined by newlines) the
    description; ``#`` and one following space are removed. (None, None) when absent.
    """
    found: list[str] = []
    for raw in lines:
        s = raw.strip()
        if not s:
            continue
        if not s.startswith("#"):
            break
        found.append(s[1:].strip())
    found = [f for f in found if f]
    if not found:
        return None, None
    return found[0], ("\n".join(found[1:]) or None)


def new_builder(lines: list[str], path: str, fmt: str) -> TraceBuilder:
    """A ``TraceBuilder`` with ``format``, title and description filled in."""
    title, description = header_comments(lines)
    b = TraceBuilder(format=fmt, path=path, trace_name=title)
    if description:
        b.source.extra["description"] = description
    return b


def lane_label(kind: str, number: str) -> str:
    """Canonical label of a lane token: ``CPU``, ``CPU1``, ``GPU``, ``GPU1``."""
    return kind.upper() + number


def cpu_lane(b: TraceBuilder, number: str = "") -> int:
    """The CPU lane of thread ``number`` ("" = the main thread): pid ``host``."""
    tid = number or "main"
    return b.lane("host", tid, process_name="CPU", thread_name="main" if not number else f"thread {number}")


def gpu_lane(b: TraceBuilder, number: str = "") -> int:
    """The GPU lane of device ``number`` ("" = device 0), stream 0."""
    dev = int(number) if number else 0
    return b.lane(
        f"gpu{dev}", "stream 0", process_name=f"GPU {dev}", thread_name="stream 0", is_gpu=True, device=dev, stream=0
    )
