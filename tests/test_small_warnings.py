"""The smaller items of issue 14: each a clear warning or error naming line and field,
never a numpy warning on stderr, a silently wrong number or a misleading message."""

from __future__ import annotations

import json
import warnings

import pytest

from gapscope.parsers import TraceFormatError, load
from gapscope.report.fmt import device_label


def K(ts, dur, name="k"):
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur}


def _write(tmp_path, text, name="t.json"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_end_event_at_1_8e308_gives_no_numpy_warning(tmp_path):
    p = _write(
        tmp_path,
        '{"traceEvents": [{"ph": "B", "name": "a", "pid": 1, "tid": 1, "ts": 1}, '
        '{"ph": "E", "name": "a", "pid": 1, "tid": 1, "ts": 1.8e308}, ' + json.dumps(K(5, 2)) + "]}",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning would fail here
        t = load(p)
    assert any(w.field == "ts" for w in t.warnings)


def test_non_finite_device_properties_are_dropped_with_a_warning(tmp_path):
    p = _write(
        tmp_path,
        '{"deviceProperties": [{"id": 0, "name": "H100", "computeMajor": Infinity, '
        '"computeMinor": NaN, "totalGlobalMem": 1e999, "numSms": 132}], "traceEvents": [' + json.dumps(K(5, 2)) + "]}",
    )
    t = load(p)
    fields = {w.field for w in t.warnings}
    assert {
        "deviceProperties[0].computeMajor",
        "deviceProperties[0].computeMinor",
        "deviceProperties[0].totalGlobalMem",
    } <= fields
    label = device_label(t.source.device_properties[0])
    assert "Infini" not in label and "N," not in label and label.startswith("H100") and "132 SMs" in label


def test_hours_long_kernel_in_a_short_trace_is_warned_about(tmp_path):
    p = _write(tmp_path, json.dumps({"traceEvents": [K(0, 10), K(100, 50), K(160, 13.9 * 3600e6, "huge")]}))
    t = load(p)
    (w,) = [w for w in t.warnings if w.field == "dur"]
    assert "'huge' lasts 50040.000 s, 333,600,000x the 0.150 ms the other GPU ops span" in w.message and w.line == 1
    assert len(t) == 3  # kept: it may be real, the user decides


def test_ordinary_long_kernel_is_not_warned_about(tmp_path):
    p = _write(tmp_path, json.dumps({"traceEvents": [K(0, 2e6), K(3e6, 5e6), K(9e6, 1e6)]}))
    assert not [w for w in load(p).warnings if w.field == "dur"]


@pytest.mark.parametrize("body", ['{"traceEvents": []}', "[]"])
def test_no_events_is_said(tmp_path, body):
    t = load(_write(tmp_path, body))
    assert len(t) == 0
    assert [w.message for w in t.warnings] == ["the trace holds no events (its events array is empty): nothing to show"]


@pytest.mark.parametrize("doc", [{"traceEvents": [K(0, 10), K(100, 50)]}, [K(0, 10), K(100, 50)]])
def test_data_after_the_document_is_not_called_truncated(tmp_path, doc):
    t = load(_write(tmp_path, json.dumps(doc) + '\n{"more": 1}\n'))
    assert len(t) == 2
    msgs = [w.message for w in t.warnings]
    assert not any("truncated" in m for m in msgs), msgs
    (m,) = [m for m in msgs if "after the end of the JSON document" in m]
    assert "line 2, column 1" in m


def test_ascii_timeline_after_4_kib_of_blank_lines(tmp_path):
    p = _write(
        tmp_path, "\n" * 5000 + "0.000 ms  GPU  kernel matmul 1.0 ms\n1.500 ms  GPU  kernel relu 0.5 ms\n", "t.txt"
    )
    assert len(load(p)) == 2
    with pytest.raises(TraceFormatError, match="file is empty"):
        load(_write(tmp_path, "\n" * 70000, "blank.txt"))


def test_junk_with_a_duration_on_a_lane_art_row_is_not_a_kernel(tmp_path):
    art = "GPU:      [H2D 6 ms][kernel 4 ms][D2H 5 ms][kernel 4 ms]   see 13337 s here\n"
    t = load(_write(tmp_path, art, "art.txt"))
    assert sorted(t.name(i) for i in range(len(t))) == ["D2H", "H2D", "kernel", "kernel"]
    assert t.extent_ns[1] - t.extent_ns[0] == 19_000_000
    (w,) = [w for w in t.warnings if "outside [ ]" in w.message]
    assert w.line == 1 and w.field == "text" and "column 60" in w.message
