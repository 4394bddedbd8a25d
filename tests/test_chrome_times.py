"""``chrome.times.to_ns`` (a list of ``ts``/``dur`` values at once) against
``scalar_ns`` (one value), which states the rules: the same (ns, status) for every
value, at the int64 limits above all, where a float64 comparison would round."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from gapscope import parsers
from gapscope.parsers.chrome.times import OK, scalar_ns, to_ns

_LIMIT_US = 9_200_000_000_000_000  # ``times._MAX_US``: beyond it the ns leave int64

_edges = st.sampled_from(
    [_LIMIT_US - 1, _LIMIT_US, _LIMIT_US + 1, -(_LIMIT_US - 1), -_LIMIT_US, 2**63 - 1, -(2**63), 2**43, 2**43 - 1]
)
_values = st.one_of(
    _edges,
    st.integers(min_value=-(2**64), max_value=2**64),
    st.integers(min_value=-5, max_value=10**7),
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=-1e16, max_value=1e16),
    st.none(),
    st.sampled_from(["12.5", "NaN", "soon", " 3 "]),
    st.booleans(),
)


def _same(values: list) -> None:
    """Every status as ``scalar_ns`` gives it, and every ns where the status is OK (a
    value to read again exactly, ``NEED_EXACT``, carries an approximation in a list)."""
    ns, status = to_ns(values)
    ref = [scalar_ns(v) for v in values]
    assert status.tolist() == [st for _, st in ref]
    assert [n for n, st in zip(ns.tolist(), status.tolist()) if st == OK] == [n for n, st in ref if st == OK]


@given(st.lists(_values, max_size=12))
def test_a_list_converts_as_each_value_alone(values: list) -> None:
    _same(values)


@given(st.lists(st.one_of(_edges, st.integers(min_value=-(2**62), max_value=2**62)), min_size=1, max_size=12))
def test_a_list_of_integers_converts_as_each_value_alone(values: list) -> None:
    """The all-integer path (no float conversion at all)."""
    _same(values)


def test_an_instant_just_inside_the_int64_limit_is_kept(tmp_path) -> None:
    """9199999999999999 µs is 9.2e15 as a float64: compared that way it was refused as
    invalid, where one event alone is kept (found by an attacker)."""
    ev = [
        {"ph": "X", "name": "x", "pid": 1, "tid": 1, "ts": 9199999999999990, "dur": 1},
        {"ph": "i", "name": "m0", "pid": 1, "tid": 2, "ts": 9199999999999999, "s": "t"},
    ]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    t = parsers.load(p)
    got = {t.name(i): int(t.start_ns[i]) for i in range(len(t))}
    assert got == {"x": 9199999999999990000, "m0": 9199999999999999000}
    assert t.warnings == ()


def test_an_unclosed_slice_longer_than_int64_ns_is_skipped_with_a_warning(tmp_path) -> None:
    """A ``B`` never closed is drawn to the end of the trace; from 9e15 µs before an
    event at 9e15 µs that is 1.8e19 ns, more than an int64 holds: skipped with a
    warning, not an OverflowError (found by an attacker)."""
    text = (
        '{"traceEvents": [\n'
        '{"ph": "X", "name": "x", "pid": 1, "tid": 1, "ts": 9000000000000000, "dur": 1},\n'
        '{"ph": "B", "name": "b", "pid": 1, "tid": 2, "ts": -9000000000000000}\n'
        "]}"
    )
    p = tmp_path / "t.json"
    p.write_text(text)
    t = parsers.load(p)
    assert [t.name(i) for i in range(len(t))] == ["x"]
    assert [(w.line, w.message) for w in t.warnings] == [
        (3, "1 'B' slice(s) never closed; drawn to the end of the trace"),
        (
            3,
            "1 unclosed slice(s) would last longer than an int64 of nanoseconds holds (292 years) "
            "to the end of the trace, at lines 3; skipped",
        ),
    ]
