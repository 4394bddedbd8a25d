"""Hostile Chrome-trace JSON (tester's attack, families): nesting deeper than the
decoders allow, integers beyond float range, odd pids, shared correlation ids,
corruption mid-file, outlier timestamps, conflicting metadata.

Every input is written by hand in ``tmp_path``; expected values are computed by hand.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from gapscope import parsers
from gapscope.parsers import Kind, TraceFormatError


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


@pytest.mark.parametrize(
    "deep",
    [
        "[" * 50_000 + "]" * 50_000,  # args: arrays
        '{"a":' * 20_000 + "1" + "}" * 20_000,  # args: objects (skipped unknown key)
    ],
)
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
    bad = (
        '{"ph":"X","cat":"kernel","name":"deep","pid":0,"tid":7,"ts":5,"dur":1,"args":'
        + "[" * 40_000
        + "]" * 40_000
        + "}"
    )
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
        _kernel(10),
        _kernel(30),
    ]
    tr = parsers.load(_write(tmp_path, _lines(evs)))
    counters = np.flatnonzero(tr.kind == int(Kind.COUNTER))
    assert counters.size == 1 and tr.value[counters[0]] == 3.0
    w = [x for x in tr.warnings if x.field == "args.z"]
    assert len(w) == 1 and w[0].line == 3 and "out-of-range" in w[0].message


# ------------------------------------------------------------------ pids and devices


def _busy_ns(tr, device):
    """Union of kernel intervals on ``device`` (slow reference)."""
    iv = sorted(
        (int(tr.start_ns[i]), int(tr.start_ns[i] + tr.dur_ns[i]))
        for i in range(len(tr))
        if tr.kind[i] == int(Kind.KERNEL) and tr.lanes[tr.lane[i]].device == device
    )
    total, end = 0, None
    for a, b in iv:
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


@pytest.mark.parametrize("pid", ['"abc"', "-1", "-9223372036854775808", "300", "null", "2.5"])
def test_kernel_on_a_pid_that_is_no_device_index_gets_a_pseudo_device(tmp_path, pid):
    other = '{"ph":"X","cat":"kernel","name":"other","pid":' + pid + ',"tid":7,"ts":150,"dur":100}'
    evs = [
        {"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 7, "ts": 100, "dur": 10},
        other,
        {"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, "ts": 300, "dur": 10},
    ]
    tr = parsers.load(_write(tmp_path, _lines(evs)))
    assert _busy_ns(tr, 0) == 20_000  # GPU 0 keeps its two 10 µs kernels only
    (ln,) = [x for x in tr.lanes if x.device != 0]
    assert ln.is_gpu and ln.device == 1000 and ln.process_name != "GPU 0"
    assert _busy_ns(tr, 1000) == 100_000
    w = [x for x in tr.warnings if "pseudo-device 1000" in x.message]
    assert len(w) == 1 and w[0].line == 3 and w[0].field == "pid"


def test_args_device_wins_over_an_odd_pid(tmp_path):
    evs = [_kernel(100, "a"), _kernel(150, "other", pid="abc", dur=100), _kernel(300, "b")]
    tr = parsers.load(_write(tmp_path, _lines(evs)))
    assert tr.devices() == [0] and _busy_ns(tr, 0) == 120_000


@pytest.mark.parametrize("pid", ["true", "{}", "[1]", "1e400", "-1e400", "NaN", "-Infinity"])
def test_non_scalar_or_non_finite_pid_is_an_invalid_event(tmp_path, pid):
    other = '{"ph":"X","cat":"kernel","name":"other","pid":' + pid + ',"tid":7,"ts":150,"dur":100}'
    evs = [{"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 7, "ts": 100, "dur": 10}, other]
    tr = parsers.load(_write(tmp_path, _lines(evs)))
    assert [tr.names[i] for i in tr.name_id] == ["a"] and len(tr.lanes) == 1
    w = [x for x in tr.warnings if x.line == 3]
    assert len(w) == 1 and "pid" in w[0].message and "skipped" in w[0].message


def test_kernels_on_a_cpu_thread_are_split_off_and_cpu_ops_stay_cpu(tmp_path):
    evs = [
        {"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "python3"}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 1, "tid": 1, "ts": 5, "dur": 1},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 1, "tid": 1, "ts": 50, "dur": 1},
        {"ph": "X", "cat": "cpu_op", "name": "c", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
    ]
    tr = parsers.load(_write(tmp_path, _lines(evs)))
    cpu = [x for x in tr.lanes if not x.is_gpu]
    gpu = [x for x in tr.lanes if x.is_gpu]
    assert len(cpu) == 1 and cpu[0].process_name == "python3" and cpu[0].device == -1
    assert len(gpu) == 1 and gpu[0].device == 1000 and "GPU 1" not in gpu[0].process_name
    c = int(np.flatnonzero(tr.kind == int(Kind.CPU_OP))[0])
    assert tr.lanes[tr.lane[c]].is_gpu is False
    assert _busy_ns(tr, 1000) == 2_000 and 1 not in tr.devices()
    assert sum("CPU thread" in w.message for w in tr.warnings) == 1


# ------------------------------------------------------------------ correlation ids


def _launch(ts, corr, dur=5):
    return {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": "cudaLaunchKernel",
        "pid": 1,
        "tid": 1,
        "ts": ts,
        "dur": dur,
        "args": {"correlation": corr},
    }


def test_shared_correlation_links_each_op_to_the_latest_launch_before_it(tmp_path):
    # launches at 0, 100, 200 and kernels at 10, 110, 210, all correlation 5
    evs = [_launch(100 * i, 5) for i in range(3)] + [_kernel(100 * i + 10, f"k{i}", correlation=5) for i in range(3)]
    tr = parsers.load(_write(tmp_path, _lines(evs)))
    pairs = sorted((int(tr.start_ns[s]), int(tr.start_ns[d])) for s, d in zip(tr.flow_src, tr.flow_dst))
    assert pairs == [(0, 10_000), (100_000, 110_000), (200_000, 210_000)]
    w = [x for x in tr.warnings if x.field == "correlation"]
    assert len(w) == 1 and "1 correlation id(s) shared by 3 runtime calls" in w[0].message


def test_shared_correlation_op_before_every_launch_gets_the_earliest(tmp_path):
    evs = [_launch(50, 9), _launch(80, 9), _kernel(40, "early", correlation=9)]
    tr = parsers.load(_write(tmp_path, _lines(evs)))
    assert [(int(tr.start_ns[s]), int(tr.start_ns[d])) for s, d in zip(tr.flow_src, tr.flow_dst)] == [(50_000, 40_000)]


def test_graph_launch_many_kernels_one_call_no_warning(tmp_path):
    evs = [_launch(0, 3)] + [_kernel(10 + 20 * i, f"g{i}", correlation=3) for i in range(4)]
    tr = parsers.load(_write(tmp_path, _lines(evs)))
    assert tr.flow_src.size == 4 and set(tr.start_ns[tr.flow_src].tolist()) == {0}
    assert not [x for x in tr.warnings if x.field == "correlation"]


def test_link_found_twice_is_stored_once(tmp_path):
    # the same launch -> kernel pair by correlation and by a v1 flow event pair
    evs = [
        _launch(0, 7),
        _kernel(10, correlation=7),
        {"ph": "s", "cat": "dep", "name": "f", "id": 1, "pid": 1, "tid": 1, "ts": 1},
        {"ph": "f", "bp": "e", "cat": "dep", "name": "f", "id": 1, "pid": 0, "tid": 7, "ts": 10},
    ]
    tr = parsers.load(_write(tmp_path, _lines(evs)))
    assert list(zip(tr.flow_src.tolist(), tr.flow_dst.tolist())) == [
        (int(np.flatnonzero(tr.kind == int(Kind.LAUNCH))[0]), int(np.flatnonzero(tr.kind == int(Kind.KERNEL))[0]))
    ]


# ------------------------------------------------------------------ corruption mid-file

_K = '{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":%d,"dur":10}'


def _starts_us(tr):
    return sorted(int(x) // 1000 for x in tr.start_ns)


def test_unterminated_string_mid_file_is_malformed_not_truncated(tmp_path):
    lines = [
        '{"traceEvents":[',
        _K % 100 + ",",
        '{"ph":"X","cat":"kernel","name":"abc, "ph","pid":0,"tid":7,"ts":200,"dur":10},',
        _K % 300 + ",",
        _K % 400 + ",",
        _K % 500,
        "]}",
    ]
    tr = parsers.load(_write(tmp_path, "\n".join(lines) + "\n"))
    assert _starts_us(tr) == [100, 300, 400, 500]
    (w,) = tr.warnings
    col = lines[2].index('ph","pid"') + 1  # 1-based column of the first unexpected byte
    assert w.line == 3 and f"malformed JSON at 3:{col}" in w.message and "truncated" not in w.message
    assert "resumed at line 4" in w.message


@pytest.mark.parametrize("stray", ["]", "}"])
def test_stray_close_mid_file_reads_on(tmp_path, stray):
    lines = ['{"traceEvents":[', _K % 100 + ",", _K % 200 + stray + ",", _K % 300, "]}"]
    tr = parsers.load(_write(tmp_path, "\n".join(lines) + "\n"))
    assert _starts_us(tr) == [100, 200, 300]
    (w,) = tr.warnings
    assert w.line == 3 and f"malformed JSON at 3:{len(_K % 200) + 1}: stray '{stray}'" in w.message


def test_second_document_events_are_read(tmp_path):
    text = '{"traceEvents":[\n' + _K % 100 + "\n]}\n" + '{"traceEvents":[\n' + _K % 200 + "\n]}\n"
    tr = parsers.load(_write(tmp_path, text))
    assert _starts_us(tr) == [100, 200]
    (w,) = tr.warnings
    assert w.line == 4 and "malformed JSON at 4:1: a second JSON document" in w.message


def _pretty(events):
    """Kineto's layout: one key per line, events at indent 2, nested objects deeper."""
    body = ",\n".join("  " + json.dumps(e, indent=2).replace("\n", "\n  ") for e in events)
    return '{\n  "schemaVersion": 1,\n  "traceEvents": [\n' + body + '\n  ],\n  "traceName": "x"\n}\n'


def test_pretty_printed_corruption_resumes_at_the_next_event(tmp_path):
    evs = [_kernel(100 * i, f"k{i}", grid=[{"x": 1}, {"y": 2}]) for i in range(1, 6)]
    text = _pretty(evs)
    bad = text.index('"k2"')
    text = text[:bad] + '"k2' + text[bad + 4 :]  # unterminated name string
    tr = parsers.load(_write(tmp_path, text))
    assert sorted(tr.names[i] for i in tr.name_id) == ["k1", "k3", "k4", "k5"]
    assert tr.source.trace_name == "x"
    (w,) = tr.warnings
    assert "malformed JSON" in w.message and w.line == text[:bad].count("\n") + 1


def test_pretty_printed_truncation_stays_a_truncation(tmp_path):
    evs = [_kernel(100 * i, f"k{i}", grid=[{"x": 1}, {"y": 2}]) for i in range(1, 6)]
    text = _pretty(evs)
    cut = text.index('"y"', text.index('"k4"'))  # inside a nested object list of k4
    tr = parsers.load(_write(tmp_path, text[:cut]))
    assert sorted(tr.names[i] for i in tr.name_id) == ["k1", "k2", "k3"]
    (w,) = tr.warnings
    assert "truncated" in w.message and "malformed" not in w.message


# ------------------------------------------------------------------ outlier timestamps


@pytest.mark.parametrize("bad_ts, where", [(1.7e15, "after"), (-1e15, "before"), (5e9, "after")])
def test_one_start_far_from_the_bulk_is_flagged_and_kept_out(tmp_path, bad_ts, where):
    evs = [_kernel(100, "a"), _kernel(bad_ts, "far"), _kernel(300, "b"), _kernel(250, "c")]
    tr = parsers.load(_write(tmp_path, _lines(evs)))
    assert sorted(tr.names[i] for i in tr.name_id) == ["a", "b", "c"]
    assert tr.extent_ns == (100_000, 310_000)
    (w,) = tr.warnings
    assert w.line == 3 and w.field == "ts" and f"start far {where} the rest" in w.message
    assert tr.source.extra["untimed_gpu_ops"][0]["name"] == "far"


def test_a_long_trace_with_spread_out_events_keeps_them_all(tmp_path):
    # 2 hours of events, one per 10 minutes, and a late one a day later: all real
    ts = [100e6 + i * 600e6 for i in range(13)] + [86400e6 + 7200e6]
    tr = parsers.load(_write(tmp_path, _lines([_kernel(t, f"k{i}") for i, t in enumerate(ts)])))
    assert len(tr) == 14 and not tr.warnings


# ------------------------------------------------------------------ conflicting metadata


def test_conflicting_process_names_warn_once_and_the_last_wins(tmp_path):
    evs = [
        {"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
        {"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "python3"}},
        {"name": "process_name", "ph": "M", "pid": "0", "tid": 0, "args": {"name": "trainer"}},
        {"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "trainer"}},
        _kernel(5),
        _kernel(50),
    ]
    tr = parsers.load(_write(tmp_path, _lines(evs)))
    assert [ln.process_name for ln in tr.lanes] == ["trainer"]
    (w,) = tr.warnings
    assert w.line == 3 and w.field == "args.name"
    assert "process_name of pid 0 given twice ('GPU 0', then 'python3')" in w.message and "2 conflicting" in w.message


def test_renamed_thread_takes_the_last_name_without_a_warning(tmp_path):
    evs = [
        {"name": "thread_name", "ph": "M", "pid": 1, "tid": 9, "args": {"name": "thread 9 (python3)"}},
        {"name": "thread_name", "ph": "M", "pid": 1, "tid": 9, "args": {"name": "thread 9 (pt_autograd_0)"}},
        {"ph": "X", "cat": "cpu_op", "name": "c", "pid": 1, "tid": 9, "ts": 0, "dur": 10},
    ]
    tr = parsers.load(_write(tmp_path, _lines(evs)))
    assert [ln.thread_name for ln in tr.lanes] == ["thread 9 (pt_autograd_0)"]
    assert not tr.warnings and tr.source.extra["renamed_threads"] == 1


# ------------------------------------------------------------------ link rule vs a slow reference

from hypothesis import given, settings
from hypothesis import strategies as st

from gapscope.parsers.model import link_by_correlation


def _slow_links(kind, corr, start):
    out = set()
    calls = [i for i in range(len(kind)) if kind[i] == int(Kind.LAUNCH) and corr[i] >= 0]
    for g in range(len(kind)):
        if kind[g] != int(Kind.KERNEL) or corr[g] < 0:
            continue
        mine = [i for i in calls if corr[i] == corr[g]]
        if not mine:
            continue
        before = [i for i in mine if start[i] <= start[g]]
        if before:
            best = max(start[i] for i in before)
            pick = [i for i in before if start[i] == best][-1]
        else:
            best = min(start[i] for i in mine)
            pick = [i for i in mine if start[i] == best][0]
        out.add((pick, g))
    return out


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([int(Kind.LAUNCH), int(Kind.KERNEL), int(Kind.CPU_OP)]),
            st.integers(-1, 4),
            st.integers(0, 20),
        ),
        max_size=40,
    )
)
def test_link_by_correlation_matches_slow_reference(rows):
    kind = np.array([r[0] for r in rows], dtype=np.int8)
    corr = np.array([r[1] for r in rows], dtype=np.int64)
    start = np.array([r[2] for r in rows], dtype=np.int64)
    src, dst = link_by_correlation(kind, corr, start)
    assert set(zip(src.tolist(), dst.tolist())) == _slow_links(kind.tolist(), corr.tolist(), start.tolist())
    assert len(set(dst.tolist())) == dst.size
