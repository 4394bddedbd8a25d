"""Hostile traces against the answer cap of ``gapscope mcp``: names are cut at 160
characters, but a character can take 4 bytes and an escaped one 6, and a trace can
have many lanes, devices and warnings. Every tool must still answer within
``MAX_ANSWER_BYTES`` (a shorter page or list), never fail with the cap's error.
No server process: the answers are built from ``load_trace`` directly."""

from __future__ import annotations

import json
import os

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


def _rank_trace(rank: int, steps: int, name: str = "k", bad: int = 0) -> dict:
    """One rank of a 2-rank job: ``steps`` ProfilerSteps, each a kernel (``name``, one
    ns longer per rank) and an all-reduce; ``bad`` events with a bad timestamp."""
    ev: list[dict] = []
    for s in range(steps):
        t = 100 + 100 * s
        ev.append(
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1, "tid": 1, "ts": t, "dur": 100}
        )
        ev.append(
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 60, "dur": 5}
            | {"args": {"correlation": 10 + s}}
        )
        ev.append(
            {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": t + 70, "dur": 20 + rank}
            | {"args": {"correlation": 10 + s, "device": 0, "stream": 7}}
        )
        ev.append(
            {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce", "pid": 0, "tid": 8, "ts": t + 70, "dur": 20}
            | {"args": {"device": 0, "stream": 8}}
        )
    for k in range(bad):
        ev.append({"ph": "X", "cat": "kernel", "name": f"{name}{k}", "pid": 0, "tid": 7, "ts": "bad" + name, "dur": 1})
    return {"schemaVersion": 1, "distributedInfo": {"rank": rank, "world_size": 2}, "traceEvents": ev}


def test_rank_set_of_long_captures_fits_with_its_per_step_lists_cut(tmp_path):
    from gapscope.analysis.types import Params
    from gapscope.ranks.cmd import collect

    paths = []
    for r in range(2):
        p = tmp_path / f"rank{r}.json"
        p.write_text(json.dumps(_rank_trace(r, 1_500, name=EMOJI * 200, bad=30)))
        paths.append(str(p))
    doc = collect(paths, Params(), jobs=1)
    assert len(doc["steps"]) == 1_500 and len(doc["ranks"][0]["wall_by_step_ns"]) == 1_500
    ans = answers.ranks_answer(doc, 20, 0)
    assert answer_bytes(ans) <= MAX_ANSWER_BYTES
    assert ans["ranks_page"]["returned"] == 2 and ans["steps_total"] == 1_500 and len(ans["steps"]) == 20
    for row, full in zip(ans["ranks"], doc["ranks"], strict=True):
        # the per-step lists stay aligned with the steps kept
        assert row["wall_by_step_ns"] == full["wall_by_step_ns"][:20]
        assert row["idle_by_step_by_class_ns"]["host"] == full["idle_by_step_by_class_ns"]["host"][:20]
        assert row["warnings_total"] == len(full["warnings"]) > len(row["warnings"]) >= 1


def test_diff_of_traces_with_many_long_warnings_fits(tmp_path):
    from gapscope.diff.document import build_diff_document

    sides = []
    for r in range(2):
        p = tmp_path / f"side{r}.json"
        p.write_text(json.dumps(_rank_trace(r, 30, name=EMOJI * 200, bad=30)))
        sides.append(load_trace(str(p)))
    (b, a) = sides
    doc = build_diff_document(b.trace, b.diag, a.trace, a.diag, paths=(b.path, a.path))
    assert len(doc["before"]["warnings"]) >= 10
    ans = answers.diff_answer(doc, 100, 0)
    assert answer_bytes(ans) <= MAX_ANSWER_BYTES
    assert ans["before"]["warning_count"] == len(doc["before"]["warnings"]) > len(ans["before"]["warnings"]) >= 1
    assert ans["groups_page"]["total"] == len(doc["groups"])


def test_calls_on_many_files_load_at_most_two_at_a_time(tmp_path):
    """Calls on distinct files, all at once (an agent that fans out, or retries after
    the time limit while the first load goes on): the loads in progress are bounded,
    so memory is bounded by the store plus two loads, not by the number of calls."""
    import threading
    import time

    import anyio

    from gapscope.mcp.roots import Roots
    from gapscope.mcp.service import Service
    from gapscope.mcp.store import Loaded

    files = []
    for k in range(6):
        (tmp_path / f"t{k}.json").write_text("{}")
        files.append(f"t{k}.json")
    lock = threading.Lock()
    now, most = [0], [0]

    def load(p: str) -> Loaded:
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        time.sleep(0.05)  # a load that takes a while, so calls overlap
        with lock:
            now[0] -= 1
        return Loaded(p, 0, 0, None, None, {}, 1)

    svc = Service(Roots([str(tmp_path)]), time_limit_s=30, load_fn=load)

    async def fan_out() -> None:
        async with anyio.create_task_group() as tg:
            for f in files:
                tg.start_soon(anyio.to_thread.run_sync, svc._loaded, f)

    anyio.run(fan_out)
    assert len(svc.store) == 4  # the default count bound
    assert most[0] == 2


def test_rank_set_of_a_folder_with_too_many_files_is_refused_before_loading(tmp_path, monkeypatch):
    """A folder counts its files against the same 4,096 a list of files gets; a folder
    of 5,000 would otherwise be loaded file after file long past the time limit."""
    import anyio

    from gapscope.mcp.roots import Roots
    from gapscope.mcp.service import Service, ToolFailure

    big = tmp_path / "ranks"
    big.mkdir()
    for k in range(4_097):
        (big / f"rank{k}.json").write_text("{}")
    loads = []
    monkeypatch.setattr("gapscope.ranks.cmd.collect", lambda files, *a, **kw: loads.append(files))
    svc = Service(Roots([str(tmp_path)]), time_limit_s=30)
    with pytest.raises(ToolFailure, match=r"4,097 trace files: at most 4,096"):
        anyio.run(svc.rank_set, "ranks", 20, 0)
    assert loads == []


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("gap_card", {"gap": True}),
        ("events_around", {"gap": True}),
        ("what_if", {"remove": [True]}),
        ("full_name", {"event": True}),
    ],
)
def test_a_boolean_is_not_taken_for_a_gap_or_event_number(tool, args):
    """JSON ``true`` for a gap, an event or a thing to remove was read as 1 (gap 1's
    card, gap 1 removed): it is refused as the wrong type."""
    pytest.importorskip("mcp")
    import anyio

    from gapscope.mcp.roots import Roots
    from gapscope.mcp.server import build_server
    from gapscope.mcp.service import Service

    from .conftest import SAMPLES

    server = build_server(Service(Roots([str(SAMPLES)])))

    async def call():
        try:
            return await server.call_tool(tool, {"path": "decode_10_steps.txt", **args})
        except Exception as exc:  # the SDK's validation error
            return exc

    res = anyio.run(call)
    if isinstance(res, Exception):
        assert "validation error" in str(res)
    else:
        assert res.is_error and "gap 1 " not in res.content[0].text


def test_full_name_escapes_a_hostile_file_name_in_its_handle(tmp_path):
    # every answer's handle is made safe; full_name's was the file's path verbatim
    src = _hostile(tmp_path, lanes=1, name="x")
    odd = tmp_path / "evil\x1b[2J\u202e.json"
    os.rename(src, odd)
    loaded = load_trace(str(odd))
    ans = answers.name_answer(loaded, 0, 0)
    assert ans["handle"] == str(tmp_path / "evil\\e[2J\\u202e.json")


def test_rank_sets_at_once_take_the_same_two_load_slots(tmp_path, monkeypatch):
    """A rank set loads its files outside the store, one after another: calls at once
    share the store's two load slots with the traces' loads."""
    import threading
    import time

    import anyio

    from gapscope.mcp.roots import Roots
    from gapscope.mcp.service import Service

    for k in range(5):
        (tmp_path / f"set{k}").mkdir()
        (tmp_path / f"set{k}" / "rank0.json").write_text("{}")
    lock = threading.Lock()
    now, most = [0], [0]

    def collect(files, *a, **kw):
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        time.sleep(0.05)  # a set that takes a while, so calls overlap
        with lock:
            now[0] -= 1
        return {"ranks": [], "verdict": None}

    monkeypatch.setattr("gapscope.ranks.cmd.collect", collect)
    svc = Service(Roots([str(tmp_path)]), time_limit_s=30)

    async def fan_out() -> None:
        async with anyio.create_task_group() as tg:
            for k in range(5):
                tg.start_soon(svc.rank_set, f"set{k}", 20, 0)

    anyio.run(fan_out)
    assert most[0] == 2
