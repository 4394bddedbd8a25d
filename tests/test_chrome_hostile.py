"""Hostile Chrome-trace JSON (tester's attack, families): nesting deeper than the
decoders allow, integers beyond float range, odd pids, shared correlation ids,
corruption mid-file, outlier timestamps, conflicting metadata.

Every input is written by hand in ``tmp_path``; expected values are computed by hand.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import parsers
from parsers import Kind, TraceFormatError


def _write(tmp_path, text, name="t.json"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def _kernel(ts, name="k", pid=0, tid=7, dur=10, **args):
    a = {"device": 0, "stream": 7}
    a.update(args)
    return {"ph": "X", "cat": "kernel", "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": a}


def _lines(events):
    return '{"traceEvents": [\n' + ",\n".join(e if isinstance(e, str) else json.dumps(e) for e in events) + "\n]}\n"


# ------------------------------------------------------------------ nesting depth

@pytest.mark.parametrize("deep", [
    "[" * 50_000 + "]" * 50_000,                      # args: arrays
    '{"a":' * 20_000 + "1" + "}" * 20_000,            # args: objects (skipped unknown key)
])
def test_deep_args_skip_the_event_with_a_warning(tmp_path, deep):
    bad = '{"ph":"X","cat":"kernel","name":"deep","pid":0,"tid":7,"ts":50,"dur":5,"args":' + deep + "}"
    p = _write(tmp_path, _lines([_kernel(10, "k1"), bad, _kernel(100, "k2")]))
    tr = parsers.load(p)
    assert [tr.names[i] for i in tr.name_id] == ["k1", "k2"]
    w = [x for x in tr.warnings if "nesting too deep" in x.message]
    assert len(w) == 1 and w[0].line == 3


def test_deep_only_event_is_a_format_error_naming_the_depth(tmp_path):
    bad = '{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":1,"args":' + '{"a":' * 30_000 + "1" + "}" * 30_000 + "}"
    p = _write(tmp_path, "[" + bad + "]")
    with pytest.raises(TraceFormatError) as ei:
        parsers.load(p)
    assert ei.value.line == 1 and ei.value.column == 2
    assert "nesting too deep" in str(ei.value) and "\n" not in str(ei.value)


def test_deep_event_among_many_keeps_all_others(tmp_path):
    # the bisection path: one deep element among 100 good ones, whole-list decode fails
    evs = [_kernel(10 * i, f"k{i}") for i in range(100)]
    bad = '{"ph":"X","cat":"kernel","name":"deep","pid":0,"tid":7,"ts":5,"dur":1,"args":' + "[" * 40_000 + "]" * 40_000 + "}"
    p = _write(tmp_path, _lines(evs[:37] + [bad] + evs[37:]))
    tr = parsers.load(p)
    assert len(tr) == 100
    assert sorted(tr.names[i] for i in tr.name_id) == sorted(f"k{i}" for i in range(100))
    assert [w.line for w in tr.warnings if "nesting too deep" in w.message] == [39]


def test_deep_header_value_is_ignored(tmp_path):
    text = '{"traceName": ' + "[" * 50_000 + "]" * 50_000 + ', "traceEvents": [' + json.dumps(_kernel(10)) + "]}"
    tr = parsers.load(_write(tmp_path, text))
    assert len(tr.start_ns) == 1 and tr.source.trace_name is None


# ------------------------------------------------------------------ huge integers

@pytest.mark.parametrize("field", ["ts", "dur"])
def test_integer_beyond_float_range_in_time_skips_event(tmp_path, field):
    big = "9" * 400
    ev = json.dumps(_kernel(20, "k2")).replace(f'"{field}": {20 if field == "ts" else 10}', f'"{field}": {big}')
    assert big in ev
    p = _write(tmp_path, _lines([_kernel(10, "k1"), ev, _kernel(30, "k3")]))
    tr = parsers.load(p)
    assert [tr.names[i] for i in tr.name_id] == ["k1", "k3"]
    w = [x for x in tr.warnings if x.field == field]
    assert len(w) == 1 and w[0].line == 3 and "(400 digits)" in w[0].message and big not in w[0].message


def test_integer_beyond_float_range_in_metadata_and_counter(tmp_path):
    big = "9" * 400
    evs = [
        '{"ph":"M","name":"process_sort_index","pid":0,"tid":0,"args":{"sort_index":' + big + "}}",
        '{"ph":"C","name":"mem","pid":1,"tid":0,"ts":15,"args":{"a":3,"z":' + big + "}}",
        _kernel(10), _kernel(30),
    ]
    tr = parsers.load(_write(tmp_path, _lines(evs)))
    counters = np.flatnonzero(tr.kind == int(Kind.COUNTER))
    assert counters.size == 1 and tr.value[counters[0]] == 3.0
    w = [x for x in tr.warnings if x.field == "args.z"]
    assert len(w) == 1 and w[0].line == 3 and "out-of-range" in w[0].message
