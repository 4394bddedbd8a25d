"""Damaged Chrome-trace JSON: truncation anywhere, unterminated arrays, non-finite
tokens, absurd times, duplicates and overlaps (bug families B01, B02, B04, B14, B16).

Expected values are computed from the hand-written inputs, independently of the loader.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from gapscope import parsers
from gapscope.parsers import Kind, TraceFormatError


def _lines_file(events, head='{\n"schemaVersion": 1,\n"traceEvents": [\n', tail="\n]}\n"):
    body = ",\n".join(json.dumps(e) for e in events)
    return head + body + tail


EVENTS = [
    {"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "py"}},
    {
        "ph": "X",
        "cat": "cpu_op",
        "name": "op {a} [b]",
        "pid": 1,
        "tid": 1,
        "ts": 100,
        "dur": 50,
        "args": {"note": 'has "quotes" and } ] brackets \\ slash', "External id": 1},
    },
    {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": "cudaLaunchKernel",
        "pid": 1,
        "tid": 1,
        "ts": 110,
        "dur": 5,
        "args": {"correlation": 1},
    },
    {
        "ph": "X",
        "cat": "kernel",
        "name": "k1",
        "pid": 0,
        "tid": 7,
        "ts": 120,
        "dur": 30,
        "args": {"device": 0, "stream": 7, "correlation": 1, "grid": [1, 2, 3]},
    },
    {
        "ph": "X",
        "cat": "kernel",
        "name": "k2",
        "pid": 0,
        "tid": 7,
        "ts": 160,
        "dur": 10,
        "args": {"device": 0, "stream": 7, "correlation": 2},
    },
]


def test_truncated_anywhere_recovers_complete_events(tmp_path):
    text = _lines_file(EVENTS)
    first_x = text.index('{"ph": "X"')
    # end offset (exclusive) of each event's closing brace, and its line
    ends, lines = [], []
    pos = text.index("[") + 1
    for e in EVENTS:
        s = json.dumps(e)
        at = text.index(s, pos)
        ends.append(at + len(s))
        lines.append(text.count("\n", 0, at) + 1)
        pos = at + len(s)
    close = text.rindex("]")
    p = tmp_path / "cut.json"
    for cut in range(first_x, len(text) - 1, 3):
        p.write_text(text[:cut])
        complete = sum(1 for x in ends if x <= cut)
        try:
            t = parsers.load(p)
        except TraceFormatError as exc:  # only before the first complete X event is allowed
            assert complete <= 1, (cut, str(exc))
            continue
        n_x = complete - 1  # minus the metadata event
        assert len(t) == n_x, cut
        assert len(t.warnings) == 1, (cut, t.warnings)
        w = t.warnings[0]
        assert "truncated" in w.message
        if complete < len(EVENTS) and any(x > cut and x - len(json.dumps(EVENTS[i])) < cut for i, x in enumerate(ends)):
            cut_event = next(i for i, x in enumerate(ends) if x > cut)
            assert w.line == lines[cut_event], (cut, w)
            assert f"{n_x} events recovered" in w.message
        elif cut > close:
            assert "not closed" in w.message


def test_unterminated_array_with_trailing_comma_is_legal(tmp_path):
    text = "[\n" + "".join(json.dumps(e) + ",\n" for e in EVENTS)
    p = tmp_path / "a.json"
    p.write_text(text)
    t = parsers.load(p)
    assert len(t) == 4 and t.warnings == ()
    assert sorted(t.name(i) for i in range(len(t))) == ["cudaLaunchKernel", "k1", "k2", "op {a} [b]"]
    i = [k for k in range(len(t)) if t.name(k) == "op {a} [b]"][0]
    assert t.args_of(i)["note"] == 'has "quotes" and } ] brackets \\ slash'


def test_non_finite_tokens_skip_event_with_line_and_field(tmp_path):
    text = (
        '{"traceEvents": [\n'
        '{"ph": "X", "cat": "cpu_op", "name": "ok", "pid": 1, "tid": 1, "ts": 1, "dur": 2, "args": {"flops": NaN, "x": -Infinity}},\n'
        '{"ph": "X", "cat": "kernel", "name": "NaN_kernel", "pid": 0, "tid": 7, "ts": 5, "dur": NaN},\n'
        '{"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, "ts": Infinity, "dur": 1},\n'
        '{"ph": "X", "cat": "cpu_op", "name": "c", "pid": 1, "tid": 1, "ts": 9, "dur": -Infinity},\n'
        '{"ph": "C", "name": "util", "pid": 0, "ts": 3, "args": {"u": NaN}},\n'
        '{"ph": "C", "name": "util", "pid": 0, "ts": 4, "args": {"u": 0.5}}\n'
        "]}"
    )
    p = tmp_path / "nan.json"
    p.write_text(text)
    t = parsers.load(p)
    got = sorted((t.name(i), int(t.start_ns[i]), int(t.dur_ns[i])) for i in range(len(t)))
    assert got == [("ok", 1000, 2000), ("util", 4000, 0)]
    assert [(w.line, w.field) for w in t.warnings] == [(3, "dur"), (4, "ts"), (5, "dur"), (6, "args.u")]
    assert "NaN" in t.warnings[0].message and "NaN_kernel" in t.warnings[0].message
    assert "Infinity" in t.warnings[1].message and "-Infinity" in t.warnings[2].message
    i = [k for k in range(len(t)) if t.name(k) == "ok"][0]
    args = t.args_of(i)
    assert math.isnan(args["flops"]) and args["x"] == -math.inf
    assert t.extent_ns == (1000, 4000)


@pytest.mark.parametrize(
    "text_ts,ns",
    [
        ("1712345678901234.125", 1712345678901234125),
        ("1712345678901234", 1712345678901234000),
        ("1615207264504900.001", 1615207264504900001),
        ("3605057436108.407", 3605057436108407),
        ("88437691101.729", 88437691101729),
        ("0.0105", 10),  # 10.5 ns: half to even
        ("12.3456", 12346),
    ],
)
def test_timestamps_keep_nanoseconds(tmp_path, text_ts, ns):
    text = (
        '{"traceEvents": [\n{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": %s, "dur": 1.001},\n'
        '{"ph": "i", "name": "b", "pid": 1, "tid": 1, "ts": %s}\n]}' % (text_ts, text_ts)
    )
    p = tmp_path / "ts.json"
    p.write_text(text)
    t = parsers.load(p)
    assert sorted(int(x) for x in t.start_ns) == [ns, ns]
    assert int(t.dur_ns[t.kind == int(Kind.OTHER)][0]) == 1001


def test_epoch_fractions_in_bulk_are_exact(tmp_path):
    base = 1712345678901234
    evs = [
        {"ph": "X", "name": f"e{i}", "pid": 1, "tid": i % 3, "ts": "%d.%03d" % (base + i, (i * 37) % 1000), "dur": 1}
        for i in range(500)
    ]
    text = (
        "[" + ",\n".join(json.dumps(e).replace('"ts": "', '"ts": ').replace('", "dur"', ', "dur"') for e in evs) + "]"
    )
    p = tmp_path / "bulk.json"
    p.write_text(text)
    t = parsers.load(p)
    got = {t.name(i): int(t.start_ns[i]) for i in range(len(t))}
    assert got == {f"e{i}": (base + i) * 1000 + (i * 37) % 1000 for i in range(500)}


def test_absurd_times_are_flagged_and_kept_out_of_extent(tmp_path):
    B = 1615207264504900
    evs = [
        {"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": B, "dur": 100},
        {
            "ph": "X",
            "cat": "kernel",
            "name": "good",
            "pid": 0,
            "tid": 7,
            "ts": B + 30,
            "dur": 50,
            "args": {"device": 0, "stream": 7, "correlation": 1},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "untimed",
            "pid": 0,
            "tid": 7,
            "ts": 0,
            "dur": 0,
            "args": {"device": 0, "stream": 7, "correlation": 2},
        },
        {"ph": "X", "cat": "cpu_op", "name": "neg", "pid": 1, "tid": 1, "ts": B + 5, "dur": -3},
        {"ph": "X", "cat": "cpu_op", "name": "forever", "pid": 1, "tid": 1, "ts": B + 6, "dur": 3e12},
    ]
    p = tmp_path / "abs.json"
    p.write_text(_lines_file(evs))
    t = parsers.load(p)
    assert sorted(t.name(i) for i in range(len(t))) == ["good", "op"]
    assert t.extent_ns == (B * 1000, (B + 100) * 1000)
    msgs = {w.line: w.message for w in t.warnings}
    assert "no timing (ts=0, dur=0)" in msgs[6] and "6" in msgs[6]
    assert "negative duration" in msgs[7]
    assert "longer than 1e12" in msgs[8]
    assert t.source.extra["untimed_gpu_ops"] == [{"line": 6, "name": "untimed", "correlation": 2}]


def test_duplicates_counted_once_and_overlaps_kept(tmp_path):
    k = lambda name, ts, dur, c: {
        "ph": "X",
        "cat": "kernel",
        "name": name,
        "pid": 0,
        "tid": 7,
        "ts": ts,
        "dur": dur,
        "args": {"device": 0, "stream": 7, "correlation": c},
    }
    evs = [
        k("a", 0, 100, 1),
        k("b", 90, 60, 2),
        k("w", 150, 50, 3),
        k("w", 150, 50, 3),
        k("g", 260, 40, 4),
        {"ph": "X", "cat": "cpu_op", "name": "same", "pid": 1, "tid": 1, "ts": 0, "dur": 0},
        {"ph": "X", "cat": "cpu_op", "name": "same", "pid": 1, "tid": 1, "ts": 0, "dur": 0},
    ]
    p = tmp_path / "dup.json"
    p.write_text(_lines_file(evs))
    t = parsers.load(p)
    gpu = t.lane_slice(t.gpu_lanes()[0])
    assert [(t.name(i), int(t.start_ns[i]) // 1000) for i in range(gpu.start, gpu.stop)] == [
        ("a", 0),
        ("b", 90),
        ("w", 150),
        ("g", 260),
    ]
    assert len(t) == 6  # CPU records are never merged
    msgs = [(w.line, w.message) for w in t.warnings]
    assert (7, "duplicate event 'w' on lines 6/7: counted once") in msgs
    assert (5, "stream 7: 'a' (line 4) overlaps 'b' (line 5) by 10.0 µs; both kept") in msgs
    assert len(msgs) == 2


def test_garbage_element_in_the_middle_is_skipped(tmp_path):
    text = (
        '[{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1},\n'
        '{"ph": "X", "name": "bad", "pid": 1, "tid": 1, "ts": {"oops": 1}, "dur": 1},\n'
        '{"ph": "X" "name": "broken"},\n'
        '{"ph": "X", "name": "c", "pid": 1, "tid": 1, "ts": 5, "dur": 1}]'
    )
    p = tmp_path / "g.json"
    p.write_text(text)
    t = parsers.load(p)
    assert [t.name(i) for i in range(len(t))] == ["a", "c"]
    assert [w.line for w in t.warnings] == [2, 3]


def test_binary_and_empty_files_are_refused(tmp_path):
    p = tmp_path / "b.bin"
    p.write_bytes(b"\x00\x01\x02garbage")
    with pytest.raises(TraceFormatError):
        parsers.load(p)
    p = tmp_path / "e.json"
    p.write_bytes(b"   \n")
    with pytest.raises(TraceFormatError):
        parsers.load(p)
    p = tmp_path / "x.json"
    p.write_bytes(b"{\x00\x01")
    with pytest.raises(TraceFormatError) as ei:
        parsers.load(p)
    assert ei.value.line == 1


def test_numbers_beyond_float_range_are_non_finite(tmp_path):
    p = tmp_path / "big.json"
    p.write_text(
        '{"traceEvents": [\n'
        '{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2},\n'
        '{"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 1e999, "dur": 2},\n'
        '{"ph": "X", "name": "c", "pid": 1, "tid": 1, "ts": 5, "dur": -1e999}\n]}'
    )
    t = parsers.load(p)
    assert [t.name(i) for i in range(len(t))] == ["a"]
    assert [(w.line, w.field, "non-finite" in w.message) for w in t.warnings] == [(3, "ts", True), (4, "dur", True)]


def test_large_truncated_file_is_linear(tmp_path):
    """A 20k-event file cut in the middle of an event loads every complete event."""
    evs = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": f"k{i}",
            "pid": 0,
            "tid": 7,
            "ts": 3605057436108.407 + 10 * i,
            "dur": 5.5,
            "args": {"device": 0, "stream": 7, "correlation": i, "note": 'x}]"y'},
        }
        for i in range(20000)
    ]
    text = _lines_file(evs)
    cut = text.index('"name": "k15000"') + 5
    p = tmp_path / "big_cut.json"
    p.write_text(text[:cut])
    t = parsers.load(p)
    assert len(t) == 15000
    assert int(t.start_ns[-1]) == 3605057436108407 + 10_000 * 14999
    assert [w.line for w in t.warnings] == [text.count("\n", 0, cut) + 1]


def test_args_of_the_last_event_with_many_braces_after_the_array(tmp_path):
    """Found by the second attack round: header keys after the events array with 15 or
    more closing braces hid the last event's args."""
    import json as _json

    from gapscope.parsers import load as _load

    ev = [
        {"ph": "X", "name": f"k{i}", "pid": 1, "tid": 1, "ts": i, "dur": 1, "args": {"correlation": i}}
        for i in range(5)
    ]
    doc = {"traceEvents": ev, "deviceProperties": [{"id": j, "nested": {"x": {}}} for j in range(17)]}
    p = tmp_path / "t.json"
    p.write_text(_json.dumps(doc))
    tr = _load(p)
    last = int(np.flatnonzero(tr.name_id == tr.names.index("k4"))[0])
    assert tr.args_of(last) == {"correlation": 4}


def test_a_timestamp_beyond_int64_ns_is_skipped_quietly(tmp_path):
    import warnings as _warnings

    from gapscope.parsers import load as _load

    p = tmp_path / "t.json"
    p.write_text(
        '{"traceEvents":[{"ph":"X","name":"a","pid":1,"tid":1,"ts":1e308,"dur":1},'
        '{"ph":"X","name":"b","pid":1,"tid":1,"ts":5,"dur":1}]}'
    )
    with _warnings.catch_warnings():
        _warnings.simplefilter("error", RuntimeWarning)
        tr = _load(p)
    assert len(tr) == 1 and [w.message for w in tr.warnings] == ["event 'a' has invalid ts (1e+308); skipped"]
