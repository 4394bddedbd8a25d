"""``to_ns`` is exact for every number of the grammar: the integer arithmetic it uses for
exponents and long numbers against ``Fraction`` (issue 15)."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from gapscope.parsers.ascii.common import MAX_TIME_NS, UNIT_NS, to_ns


def exact(num: str, unit: str) -> int | None:
    """The value of ``num`` ``unit`` in ns, rounded half to even, None above the limit."""
    q = round(Fraction(Decimal(num)) * UNIT_NS[unit])
    return q if q <= MAX_TIME_NS else None


_DIGITS = st.text(alphabet="0123456789", max_size=40)


@given(
    _DIGITS,
    st.one_of(st.none(), st.text(alphabet="0000123456789", max_size=40)),
    st.one_of(st.none(), st.integers(-45, 45)),
    st.sampled_from(["", "+"]),
    st.sampled_from(sorted(UNIT_NS)),
)
def test_to_ns_is_exact(whole, frac, exp, sign, unit):
    num = whole + ("" if frac is None else "." + frac)
    if not (whole or frac):
        num = "0" + num
    if exp is not None:
        num += f"e{sign if exp >= 0 else ''}{exp}"
    assert to_ns(num, unit) == exact(num, unit), num


def test_to_ns_edges():
    assert to_ns("4.611686018427387904e18", "ns") == 2**62
    assert to_ns("4.6116860184273879045e18", "ns") == 2**62  # a tie, to even
    assert to_ns("4.6116860184273879055e18", "ns") is None
    assert to_ns("0.5e-9", "s") == 0 and to_ns("1.5e-9", "s") == 2 and to_ns("2.5E-9", "s") == 2
    assert to_ns("1" + "0" * 30 + "e-30", "ms") == 1_000_000
    assert to_ns("0" * 900 + "1e-3", "us") == 1
    assert to_ns("1e999999999", "s") is None and to_ns("1e-999999999", "s") == 0
    assert to_ns("0e5", "s") == 0 and to_ns("0.000e-3", "s") == 0
    assert to_ns("\u0663e2", "us") == 300_000  # other digits: through Decimal, as before
