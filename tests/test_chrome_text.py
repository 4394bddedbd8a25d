"""Byte-level helpers: exact µs→ns text parsing, key positions, the element scanner,
lazy args and line numbers. References: ``decimal.Decimal`` and the stdlib ``json``."""

from __future__ import annotations

import decimal
import json
import random

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gapscope import parsers
from gapscope.parsers.chrome.text import exact_ns_near, key_positions
from gapscope.parsers.json.boundaries import scan_elements


def _ref_ns(text: str) -> int:
    d = decimal.Decimal(text) * 1000
    return int(d.to_integral_value(rounding=decimal.ROUND_HALF_EVEN))


def _approx_ns(text: str) -> int:
    v = float(text)
    fl = np.floor(v)
    return int(fl) * 1000 + int(np.rint((v - fl) * 1000))


@settings(max_examples=150, deadline=None)
@given(
    whole=st.integers(min_value=0, max_value=2**51),
    frac=st.text("0123456789", min_size=0, max_size=7),
    neg=st.booleans(),
    ws=st.sampled_from(["", " ", "  ", "\n  "]),
)
def test_exact_ns_near_matches_decimal(whole, frac, neg, ws):
    text = ("-" if neg else "") + str(whole) + (("." + frac) if frac else "")
    data = ('{"ts":%s%s, "dur": 1}' % (ws, text)).encode()
    pos = key_positions(data, b'"ts"')
    assert pos.tolist() == [5]
    ns, ok = exact_ns_near(data, pos, np.array([_approx_ns(text)]))
    assert ok.tolist() == [True]
    assert int(ns[0]) == _ref_ns(text)


def test_exact_ns_near_rejects_exponents_strings_and_wrong_positions():
    data = b'[{"ts": 1e5}, {"ts": "12"}, {"ts": 1712345678901234.125}, {"ts": 1712345678901299.125}]'
    pos = key_positions(data, b'"ts"')
    approx = np.array([100_000_000, 12_000, 1712345678901234125, 1712345678901234125])
    ns, ok = exact_ns_near(data, pos, approx)
    assert ok.tolist() == [False, False, True, False]  # the last text disagrees with its approximation
    assert int(ns[2]) == 1712345678901234125


def test_key_positions_ignores_keys_inside_strings():
    data = b'{"ts": 1, "name": "say \\"ts\\": 2", "x": {"ts" : 3}, "tsx": 4, "ts"}'
    assert [data[p : p + 3] for p in key_positions(data, b'"ts"')] == [b": 1", b" : "]
    assert key_positions(data, b'"ts"', limit=1).tolist() == key_positions(data, b'"ts"')[:1].tolist()


def _random_value(r: random.Random, depth: int = 0):
    kind = r.randrange(6 if depth < 3 else 3)
    if kind == 0:
        return r.choice([1, -2.5, 0, 1e3])
    if kind == 1:
        return "".join(r.choice('ab{}[]",\\:\n') for _ in range(r.randrange(8)))
    if kind == 2:
        return r.choice([None, True, False])
    if kind == 3:
        return [_random_value(r, depth + 1) for _ in range(r.randrange(4))]
    return {f"k{i}{'}' * i}": _random_value(r, depth + 1) for i in range(r.randrange(4))}


def test_scanner_splits_like_json_module():
    r = random.Random(7)
    for _ in range(200):
        elems = [{"ph": "X", "v": _random_value(r)} for _ in range(r.randrange(1, 8))]
        text = json.dumps(elems, indent=r.choice([None, 1])).encode()
        res = scan_elements(text, 1)
        assert res.close == len(text) - 1
        got = [json.loads(text[a:b]) for a, b in zip(res.starts.tolist(), res.ends.tolist())]
        assert got == elems
        cut = r.randrange(2, len(text) - 1)
        part = scan_elements(text[:cut], 1)
        assert [json.loads(text[a:b]) for a, b in zip(part.starts.tolist(), part.ends.tolist())] == elems[
            : part.starts.size
        ]


def test_args_and_lines_are_read_back_from_the_text(tmp_path):
    text = (
        '{"schemaVersion": 1,\n"traceEvents": [\n'
        '  {\n    "ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7,\n'
        '    "ts": 10, "dur": 5,\n    "args": {"device": 0, "stream": 7, "grid": [1, 2, 3], "note": "a\\"b"}\n  },\n'
        '  {"name": "ev", "args": {"x": 1}, "pid": 1, "tid": 1, "ts": 20, "dur": 1, "ph": "X"}\n'
        '],\n"traceName": "t", "deviceProperties": [{"id": 0, "name": "G"}]}\n'
    )
    p = tmp_path / "t.json"
    p.write_text(text)
    t = parsers.load(p)
    got = {t.name(i): (int(t.src_line[i]), t.args_of(i)) for i in range(len(t))}
    assert got == {"k": (3, {"device": 0, "stream": 7, "grid": [1, 2, 3], "note": 'a"b'}), "ev": (8, {"x": 1})}


@settings(max_examples=200, deadline=None)
@example([(" " * 64, True), ("\n", True)])
@example([(" " * 65, True)])
@example([("", True), (" " * 63, False)])
@given(
    st.lists(
        st.tuples(st.text(" \t\r\n", max_size=70), st.booleans()),
        min_size=1,
        max_size=12,
    )
)
def test_event_starts_from_the_ph_keys_match_the_element_scanner(events):
    """The fast path of ``EventText.starts_all`` (the ``{`` before each event's leading
    ``"ph"`` key, stepping back over whitespace) gives the element scanner's starts when
    every event starts with ``"ph"`` after at most 64 bytes of whitespace, else None."""
    from gapscope.parsers.chrome.lazy_args import EventText
    from gapscope.parsers.chrome.text import key_positions

    parts = []
    for ws, ph_first in events:
        body = '"ph": "X", "name": "a{b"' if ph_first else '"name": "x", "ph": "X"'
        parts.append("{" + ws + body + "}")
    text = ('{"traceEvents": [\n ' + ",\n ".join(parts) + "\n]}").encode()
    et = EventText(text, 0, len(events))
    ph = key_positions(text, b'"ph"', et.begin())
    got = et._first_key_starts(ph)
    fast = all(ph_first and len(ws) <= 64 for ws, ph_first in events)
    if not fast:
        assert got is None
    else:
        want = scan_elements(text, et.begin()).starts
        assert got is not None and got.tolist() == want.tolist()


@pytest.mark.parametrize("first_key", ['"\\u0070h"', '"ph"    ', '"ph"\n\n\n\n'])
def test_args_are_each_events_own_when_a_header_key_after_the_events_holds_a_ph(first_key, tmp_path):
    """A ``"ph"`` key the 4-byte scan does not see (escaped, or 4+ blanks before the
    colon) must not be stood in for by one of a nested object after the events
    (``"otherData": {"ph": ...}``): every event's args are its own (found by the attack
    on the lazy args: event A got B's)."""
    text = (
        '{"traceEvents": [{' + first_key + ': "X", "name": "A", "pid": 1, "tid": 1, "ts": 0, "dur": 1, '
        '"args": {"uid": 0}},\n{"ph": "X", "name": "B", "pid": 1, "tid": 1, "ts": 10, "dur": 1, '
        '"args": {"uid": 1}}], "otherData": {"ph": "hdr"}}'
    )
    path = tmp_path / "t.json"
    path.write_text(text)
    want = {e["name"]: e["args"] for e in json.loads(text)["traceEvents"]}
    t = parsers.load(path)
    assert {t.name(i): t.args_of(i) for i in range(len(t))} == want


def test_unknown_and_missing_phases_are_counted(tmp_path):
    p = tmp_path / "u.json"
    p.write_text(
        json.dumps(
            [
                {"ph": "Z", "ts": 1},
                {"name": "no ph", "ts": 2},
                {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 3, "dur": 1},
            ]
        )
    )
    t = parsers.load(p)
    assert len(t) == 1 and t.source.ignored_counts == {"ph Z": 1, "ph None": 1}


def test_lane_order_from_sort_indices_and_gpu_device_from_args(tmp_path):
    ev = [
        {"ph": "M", "name": "process_sort_index", "pid": 20, "args": {"sort_index": -1}},
        {"ph": "M", "name": "thread_sort_index", "pid": 10, "tid": 2, "args": {"sort_index": -5}},
        {"ph": "X", "name": "a", "pid": 10, "tid": 1, "ts": 0, "dur": 1},
        {"ph": "X", "name": "b", "pid": 10, "tid": 2, "ts": 0, "dur": 1},
        {"ph": "X", "name": "c", "pid": 20, "tid": 1, "ts": 0, "dur": 1},
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k1",
            "pid": 5,
            "tid": 3,
            "ts": 0,
            "dur": 1,
            "args": {"device": 1, "stream": 3},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k0",
            "pid": 9,
            "tid": 20,
            "ts": 0,
            "dur": 1,
            "args": {"device": 0, "stream": 20},
        },
    ]
    p = tmp_path / "o.json"
    p.write_text(json.dumps(ev))
    t = parsers.load(p)
    assert [(ln.pid, ln.tid, ln.device, ln.stream) for ln in t.lanes] == [
        ("20", "1", -1, -1),
        ("10", "2", -1, -1),
        ("10", "1", -1, -1),
        ("9", "20", 0, 20),
        ("5", "3", 1, 3),
    ]
    assert t.devices() == [0, 1]


@pytest.mark.parametrize("run", [1, 2, 3, 4])
def test_scan_keeps_string_state_across_a_chunk_boundary_inside_backslashes(run):
    """Found by the attack round: an escape carried over a 16 MiB chunk boundary onto a
    backslash (not a quote) lost track of the string. ``run`` backslashes end the first
    chunk, then ``\\\\\\"`` (an escaped backslash, an escaped quote) follows."""
    import json as _json

    from gapscope.parsers.json.boundaries import _CHUNK, scan_elements

    head = "[" + _json.dumps({"a": "x" * (_CHUNK - 40)}) + ", "
    pre = '{"s": "'
    need = _CHUNK + 1 - len(head) - len(pre) - run
    body = "y" * need + "\\\\" * run + '\\\\\\"z'
    text = head + pre + body + '"}, {"b": 1}]'
    assert len(_json.loads(text)) == 3
    data = text.encode()
    r = scan_elements(data, 1)
    assert r.starts.size == 3 and r.close == len(data) - 1
