"""Hostile traces against the answer cap of ``gapscope mcp``: names are cut at 160
characters, but a character can take 4 bytes and an escaped one 6, and a trace can
have many lanes, devices and warnings. Every tool must still answer within
``MAX_ANSWER_BYTES`` (a shorter page or list), never fail with the cap's error.
No server process: the answers are built from ``load_trace`` directly."""

from __future__ import annotations

import json

import pytest

from gapscope.mcp import answers
from gapscope.mcp.answers import MAX_ANSWER_BYTES, answer_bytes
from gapscope.mcp.service import load_trace

EMOJI = "\U0001f600"  # 4 bytes in UTF-8
BIDI = "\u202e"  # escaped to the 6 characters \u202e


def _hostile(tmp_path, lanes: int, name: str, warnings: int = 0) -> str:
    """A Kineto-shaped trace: ``lanes`` CPU threads in string-named processes (pid,
    tid, process and thread names ``name`` × 200), each busy around each of 20
    host-bound kernels, its events named ``name`` × 40 (short enough that escaping
    makes them longer); ``warnings`` events with a bad timestamp (each a loader
    warning naming them)."""
    long, short = name * 200, name * 40
    ev: list[dict] = []
    for k in range(lanes):
        pid, tid = f"{long}p{k}", f"{long}t{k}"
        ev.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": f"{long}{k}"}})
        ev.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": f"{long}{k}"}})
        for s in range(20):
            ev.append(
                {"ph": "X", "cat": "cpu_op", "name": f"{short}{k}", "pid": pid, "tid": tid, "ts": 100 * s, "dur": 60}
            )
    for s in range(20):
        t = 100 + 100 * s
        ev.append(
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 60, "dur": 5}
            | {"args": {"correlation": 10 + s}}
        )
        ev.append(
            {"ph": "X", "cat": "kernel", "name": f"{long}{s}", "pid": 0, "tid": 7, "ts": t + 70, "dur": 20}
            | {"args": {"correlation": 10 + s, "device": 0, "stream": 7}}
        )
    for k in range(warnings):
        ev.append({"ph": "X", "cat": "kernel", "name": f"{long}{k}", "pid": 0, "tid": 7, "ts": "bad" + long, "dur": 1})
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": ev}))
    return str(path)


@pytest.mark.parametrize("char", [EMOJI, BIDI])
def test_open_trace_fits_with_many_long_lanes_and_warnings(tmp_path, char):
    loaded = load_trace(_hostile(tmp_path, lanes=60, name=char, warnings=30))
    assert len(loaded.doc["lanes"]) == 62 and len(loaded.doc["warnings"]) >= 10
    ans = answers.open_answer(loaded, loaded.path)
    assert answer_bytes(ans) <= MAX_ANSWER_BYTES
    # the counts still say how many there are; the lists hold a prefix of them
    assert ans["lane_count"] == 62 and ans["warning_count"] == len(loaded.doc["warnings"])
    assert 1 <= len(ans["lanes"]) < 40
    assert [r["index"] for r in ans["lanes"]] == [r["index"] for r in loaded.doc["lanes"][: len(ans["lanes"])]]
    assert 1 <= len(ans["warnings"]) < ans["warning_count"]


@pytest.mark.parametrize("char", [EMOJI, BIDI])
def test_events_around_fits_with_many_long_lanes(tmp_path, char):
    loaded = load_trace(_hostile(tmp_path, lanes=80, name=char))
    ans = answers.events_answer(loaded, 0, 1e9, 500, 0)
    assert answer_bytes(ans) <= MAX_ANSWER_BYTES
    assert 1 <= ans["returned"] < ans["total"] == len(loaded.trace)
    assert ans["next_offset"] == ans["returned"]
    # every event's lane is described in the page's lanes
    assert {e["lane"] for e in ans["events"]} == {ln["index"] for ln in ans["lanes"]}
    # and the next page goes on where this one stopped
    nxt = answers.events_answer(loaded, 0, 1e9, 500, ans["next_offset"])
    assert answer_bytes(nxt) <= MAX_ANSWER_BYTES and nxt["offset"] == ans["returned"] and nxt["returned"] >= 1


def test_what_if_fits_with_a_hundred_long_names(tmp_path):
    loaded = load_trace(_hostile(tmp_path, lanes=2, name="x"))
    names = [EMOJI * 200 + str(k) for k in range(100)]
    ans = answers.what_if_answer(loaded, names)
    assert answer_bytes(ans) <= MAX_ANSWER_BYTES
    p = ans["projection"]
    assert p["removed_name_count"] == 100 and p["unmatched_count"] == 100
    assert 1 <= len(p["removed_names"]) < 100 and len(p["unmatched"]) == len(p["removed_names"])


def test_list_gaps_min_us_beyond_any_gap_is_an_empty_page(tmp_path):
    loaded = load_trace(_hostile(tmp_path, lanes=1, name="x"))
    ans = answers.gaps_answer(loaded, None, 1e308, 20, 0)
    assert ans["total"] == 0 and ans["gaps"] == [] and ans["gap_count"] == len(loaded.diag.gaps) > 0
