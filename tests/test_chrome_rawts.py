"""Exact timestamps kept as JSON text (epoch-µs files) and the lane-first sort.

References: ``decimal.Decimal`` (µs × 1000, round half to even) for the times,
``np.lexsort`` for the order; hand-computed values for the loaded trace.
"""

from __future__ import annotations

import decimal
import json
import re

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gapscope import parsers
from gapscope.parsers import Kind
from gapscope.parsers.chrome import decode as chrome_mod
from gapscope.parsers.chrome.times import INVALID, MISSING, OK, raw_to_ns
from gapscope.parsers.ordering import sort_order


def _raws(tokens):
    return msgspec.json.decode(("[" + ",".join(tokens) + "]").encode(), type=list[msgspec.Raw])


def test_raw_to_ns_by_hand():
    toks = [
        "1712345678901234.125",
        "1712345678901234.1235",
        "1712345678901234.1245",
        "1712345678901234.12450001",
        "-2.0005",
        "5000000.000",
        "7",
        "0.0015",
        "9199999999999999.9995",
        "9200000000000000",
        "1.5e3",
        '"12.5"',
        "null",
        '"x"',
    ]
    ns, status = raw_to_ns(_raws(toks))
    assert ns.tolist()[:11] == [
        1712345678901234125,
        1712345678901234124,
        1712345678901234124,
        1712345678901234125,
        -2000,
        5000000000,
        7000,
        2,
        9200000000000000000,
        0,
        1500000,
    ]
    assert ns[11] == 12500
    assert status.tolist() == [OK] * 9 + [INVALID, OK, OK, MISSING, INVALID]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.booleans(), st.integers(0, 10**16), st.text("0123456789", max_size=9)), min_size=1, max_size=40
    )
)
def test_raw_to_ns_matches_decimal(items):
    toks = [("-" if neg else "") + str(i) + ("." + f if f else "") for neg, i, f in items]
    ns, status = raw_to_ns(_raws(toks))
    for t, n, s in zip(toks, ns.tolist(), status.tolist()):
        d = decimal.Decimal(t)
        if abs(d) >= decimal.Decimal(9.2e15):
            assert s == INVALID
        else:
            assert (n, s) == (int((d * 1000).to_integral_value(rounding=decimal.ROUND_HALF_EVEN)), OK), t


BASE = 1712345678901234  # epoch µs: a float64 holds it only to 0.25 µs


def _ts(us_after_base: int, frac: str) -> str:
    return f"TS:{BASE + us_after_base}.{frac}"


def _epoch_file(tmp_path):
    ev = [
        {"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": _ts(0, "125"), "dur": 10.5},
        {"ph": "X", "cat": "cpu_op", "name": "child", "pid": 1, "tid": 1, "ts": _ts(1, "0005"), "dur": 2},
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k",
            "pid": 0,
            "tid": 7,
            "ts": _ts(20, "999"),
            "dur": 1,
            "args": {"device": 0, "stream": 7},
        },
        {"ph": "X", "cat": "cpu_op", "name": "no_ts", "pid": 1, "tid": 1, "dur": 1},
        {"ph": "i", "name": "mark", "pid": 1, "tid": 1, "ts": _ts(5, "375"), "s": "t"},
        {"ph": "B", "name": "range", "pid": 1, "tid": 2, "ts": _ts(3, "001")},
        {"ph": "E", "pid": 1, "tid": 2, "ts": _ts(4, "002")},
    ]
    text = re.sub(r'"TS:([0-9.]+)"', r"\1", json.dumps({"traceEvents": ev}))  # numbers, not strings
    p = tmp_path / "epoch.json"
    p.write_text(text)
    return p


def _rows(t):
    return sorted((t.name(i), int(t.start_ns[i]), int(t.dur_ns[i]), Kind(int(t.kind[i]))) for i in range(len(t)))


def test_epoch_file_keeps_nanoseconds(tmp_path):
    p = _epoch_file(tmp_path)
    assert b'"ts": 1712345678901234.125' in p.read_bytes()
    t = parsers.load(p)
    b = BASE * 1000
    assert _rows(t) == [
        ("child", b + 1000, 2000, Kind.CPU_OP),  # +1.0005 µs: 0.5 ns rounds half to even → 0
        ("k", b + 20999, 1000, Kind.KERNEL),
        ("mark", b + 5375, 0, Kind.INSTANT),
        ("op", b + 125, 10500, Kind.CPU_OP),
        ("range", b + 3001, 1001, Kind.OTHER),
    ]
    assert any(w.field == "ts" and "no_ts" in w.message for w in t.warnings)


def test_begin_end_times_are_read_exactly_as_x_times_are(tmp_path):
    """In a file whose ``ts`` are kept as text, ``B``/``E`` (and every other phase)
    are read as exactly as ``X``: µs × 1000, half to even. ``ts`` 1124609224125.6475
    (catapult/fuchsia_trace's form, below 2**43 µs) is 1124609224125647.5 ns: 648 by
    the text; its nearest float64 gave 647 before the phases' times were converted
    with ``raw_to_ns``."""
    text = (
        '[{"ph": "X", "name": "x", "pid": 1, "tid": 1, "ts": 1124609224125.6475, "dur": 1},\n'
        '{"ph": "B", "name": "b", "pid": 1, "tid": 2, "ts": 1124609224125.6475},\n'
        '{"ph": "E", "pid": 1, "tid": 2, "ts": 1124609224128.0015}]'
    )
    p = tmp_path / "t.json"
    p.write_text(text)
    t = parsers.load(p)
    got = {t.name(i): (int(t.start_ns[i]), int(t.dur_ns[i])) for i in range(len(t))}
    assert got == {"x": (1124609224125648, 1000), "b": (1124609224125648, 2354)}  # E at ...128002


def test_text_timestamps_equal_float_path(tmp_path, monkeypatch):
    """The ``msgspec.Raw`` path and the float64 + text re-read path give one trace."""
    p = _epoch_file(tmp_path)
    a = parsers.load(p)
    monkeypatch.setattr(chrome_mod, "EPOCH_SAMPLE_BYTES", 0)  # no sample: float path
    b = parsers.load(p)
    assert _rows(a) == _rows(b)
    assert [str(w) for w in a.warnings] == [str(w) for w in b.warnings]
    assert a.extent_ns == b.extent_ns


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 6), st.integers(0, 3)), max_size=40), st.booleans())
def test_sort_order_equals_lexsort(rows, presort):
    if presort:
        rows = sorted(rows, key=lambda r: (r[0], r[1]))
    lane = np.array([r[0] for r in rows], dtype=np.int32)
    start = np.array([r[1] for r in rows], dtype=np.int64)
    dur = np.array([r[2] for r in rows], dtype=np.int64)
    o = sort_order(lane, start, dur, 4)
    got = np.arange(len(rows)) if o is None else o
    assert got.tolist() == np.lexsort((-dur, start, lane)).tolist()


@pytest.mark.parametrize("sample", [0, 1 << 18])
def test_raw_path_choice_does_not_change_small_files(tmp_path, monkeypatch, sample):
    monkeypatch.setattr(chrome_mod, "EPOCH_SAMPLE_BYTES", sample)
    p = tmp_path / "s.json"
    p.write_text(json.dumps([{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1.5, "dur": 2.25}]))
    t = parsers.load(p)
    assert (int(t.start_ns[0]), int(t.dur_ns[0])) == (1500, 2250)
