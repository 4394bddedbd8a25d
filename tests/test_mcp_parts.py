"""The parts of ``gapscope mcp`` below the protocol: the roots check, the store of loaded
traces (least recently used out, one load shared, the time limit), the bounding of
answers, and the command line. No server process; the SDK is needed only where said."""

from __future__ import annotations

import json
import os
import threading

import anyio
import numpy as np
import pytest

from gapscope.mcp import answers
from gapscope.mcp.roots import OutsideRoots, Roots
from gapscope.mcp.service import Service, ToolFailure, load_trace
from gapscope.mcp.store import CallTimeout, Loaded, TraceStore, run_limited

from .conftest import SAMPLES

DECODE = SAMPLES / "decode_step.txt"


# ---------------------------------------------------------------- roots


def test_roots_resolve_inside_and_refuse_outside(tmp_path):
    root, out = tmp_path / "root", tmp_path / "out"
    (root / "sub").mkdir(parents=True)
    out.mkdir()
    (root / "sub" / "a.json").write_text("{}")
    (out / "b.json").write_text("{}")
    (root / "up.json").symlink_to(out / "b.json")
    (root / "in.json").symlink_to(root / "sub" / "a.json")
    r = Roots([str(root)])
    real = os.path.realpath(root / "sub" / "a.json")
    assert r.resolve("sub/a.json") == real
    assert r.resolve(str(root / "sub" / ".." / "sub" / "a.json")) == real
    assert r.resolve("in.json") == real  # a link that stays inside is fine
    assert r.resolve("sub", folder=True) == os.path.realpath(root / "sub")
    for bad in ("../out/b.json", str(out / "b.json"), "up.json", "sub/../../out/b.json", "/", ""):
        with pytest.raises(OutsideRoots):
            r.resolve(bad)
    with pytest.raises(OutsideRoots, match="not a file"):
        r.resolve("sub")
    with pytest.raises(OutsideRoots, match="no such file"):
        r.resolve("sub/missing.json")
    # a sibling folder whose name starts like the root's is not inside it
    (tmp_path / "root2").mkdir()
    (tmp_path / "root2" / "c.json").write_text("{}")
    with pytest.raises(OutsideRoots):
        r.resolve(str(tmp_path / "root2" / "c.json"))
    with pytest.raises(OutsideRoots, match="not a folder"):
        Roots([str(root / "sub" / "a.json")])


# ---------------------------------------------------------------- store


def _fake(path: str, nbytes: int = 10) -> Loaded:
    return Loaded(path, 0, 0, None, None, {}, nbytes)


def test_store_keeps_the_most_recent_within_count_and_bytes(tmp_path):
    files = []
    for k in range(4):
        f = tmp_path / f"t{k}.txt"
        f.write_text("x")
        files.append(str(f))
    loads: list[str] = []

    def load(p: str) -> Loaded:
        loads.append(p)
        st = os.stat(p)
        return Loaded(p, st.st_mtime_ns, st.st_size, None, None, {}, 100)

    s = TraceStore(load, max_count=2, max_bytes=1_000)
    s.get(files[0])
    s.get(files[1])
    s.get(files[0])  # used again: t1 is now the least recent
    s.get(files[2])
    assert s.paths() == [files[0], files[2]]
    assert loads == [files[0], files[1], files[2]]
    s.get(files[1])  # dropped before: loaded again
    assert loads[-1] == files[1] and len(s) == 2
    # by bytes: 250 each, 600 allowed: two fit, a third pushes the oldest out
    s2 = TraceStore(lambda p: Loaded(p, *_stamp(p), None, None, {}, 250), max_count=10, max_bytes=600)
    for f in files[:3]:
        s2.get(f)
    assert s2.paths() == files[1:3]
    # one larger than the bound is still kept (it is the one in use)
    s3 = TraceStore(lambda p: Loaded(p, *_stamp(p), None, None, {}, 5_000), max_count=10, max_bytes=600)
    s3.get(files[0])
    s3.get(files[1])
    assert s3.paths() == [files[1]]


def _stamp(p: str) -> tuple[int, int]:
    st = os.stat(p)
    return st.st_mtime_ns, st.st_size


def test_store_loads_a_changed_file_again(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text("one")
    n = []
    s = TraceStore(lambda p: (n.append(p), Loaded(p, *_stamp(p), None, None, {}, 1))[1])
    s.get(str(f))
    s.get(str(f))
    f.write_text("three")  # another size
    s.get(str(f))
    assert len(n) == 2


def test_store_shares_one_load_between_calls(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text("x")
    started, release = threading.Event(), threading.Event()
    calls = []

    def slow(p: str) -> Loaded:
        calls.append(p)
        started.set()
        release.wait(10)
        return Loaded(p, *_stamp(p), None, None, {}, 1)

    s = TraceStore(slow)
    got = []
    t1 = threading.Thread(target=lambda: got.append(s.get(str(f))))
    t1.start()
    started.wait(10)
    t2 = threading.Thread(target=lambda: got.append(s.get(str(f))))
    t2.start()
    release.set()
    t1.join(10)
    t2.join(10)
    assert len(calls) == 1 and len(got) == 2 and got[0] is got[1]


def test_store_passes_a_load_error_to_every_waiter(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text("x")

    def bad(p: str) -> Loaded:
        raise ValueError("nope")

    s = TraceStore(bad)
    with pytest.raises(ValueError, match="nope"):
        s.get(str(f))
    assert len(s) == 0


def test_run_limited_times_out_and_the_work_goes_on():
    release = threading.Event()
    done = []

    def work() -> int:
        release.wait(10)
        done.append(1)
        return 7

    async def main() -> None:
        with pytest.raises(CallTimeout, match="limit of a call"):
            await run_limited(work, 0.05)
        release.set()
        assert await run_limited(lambda: 5, 5) == 5
        for _ in range(100):
            if done:
                break
            await anyio.sleep(0.02)

    anyio.run(main)
    assert done == [1]  # the timed-out work ran to its end


def test_service_turns_a_slow_load_into_a_one_line_error_then_answers(tmp_path):
    trace = tmp_path / "decode.txt"
    trace.write_text(DECODE.read_text())
    gate = threading.Event()

    def slow(p: str) -> Loaded:
        gate.wait(10)
        return load_trace(p)

    svc = Service(Roots([str(tmp_path)]), time_limit_s=0.05, load_fn=slow)

    async def main() -> tuple[dict, str]:
        with pytest.raises(ToolFailure) as err:
            await svc.open_trace("decode.txt")
        assert str(err.value).startswith("gapscope: error: still working after the 0.05 s limit")
        gate.set()
        svc.time_limit_s = 60
        return await svc.open_trace("decode.txt")

    ans, text = anyio.run(main)
    assert ans["event_count"] > 0 and "events" in text


# ---------------------------------------------------------------- answers


def test_clean_escapes_and_cuts_every_string():
    got = answers.clean(
        {
            "name": "\x1b]8;;http://x\x07link\x1b]8;;\x07 \u202e" + "n" * 500,
            "why": "w" * 5_000,
            "list": ["a\nb", 3, None],
            "key\x1b[2J": 1,
        }
    )
    assert "\x1b" not in json.dumps(got, ensure_ascii=False)
    assert got["name"].startswith("\\e]8;;http://x\\x07link") and len(got["name"]) == answers.NAME_MAX_CHARS
    assert len(got["why"]) == answers.TEXT_MAX_CHARS and got["why"].endswith("…")
    assert got["list"] == ["a\\x0ab", 3, None]
    assert "key\\e[2J" in got


def test_page_stays_within_its_byte_budget():
    rows = [{"name": "x" * 1_000, "i": k} for k in range(100)]
    page = answers._page(rows, 10, 50, 20_000)
    assert page["total"] == 100 and page["offset"] == 10
    assert 0 < page["returned"] < 50 and page["next_offset"] == 10 + page["returned"]
    assert answers.answer_bytes(page["items"]) <= 20_000
    # one row larger than the budget still comes back alone (never an empty page)
    assert answers._page([{"n": "y" * 5_000}], 0, 10, 100)["returned"] == 1


@pytest.fixture(scope="module")
def decode_loaded():
    return load_trace(str(DECODE))


def test_full_name_pages_a_long_name(decode_loaded):
    import dataclasses

    t = decode_loaded.trace
    long = "k" * 9_000 + "\x1b[0m"
    names = (long,) + t.names[1:]
    fake = dataclasses.replace(decode_loaded, trace=dataclasses.replace(t, names=names))
    e = int(np.flatnonzero(t.name_id == 0)[0])
    p0 = answers.name_answer(fake, e, 0)
    assert (p0["total_chars"], p0["returned_chars"], p0["next_offset"]) == (9_004, 4_000, 4_000)
    p2 = answers.name_answer(fake, e, 8_000)
    assert p2["next_offset"] is None and p2["name"] == "k" * 1_000 + "\\e[0m"
    with pytest.raises(answers.ToolInputError, match="event must be an event index"):
        answers.name_answer(fake, len(t), 0)


def test_gap_arguments(decode_loaded):
    n = len(decode_loaded.diag.gaps)
    assert answers.parse_gap(decode_loaded, 0) == ("gap", 0)
    assert answers.parse_gap(decode_loaded, str(n - 1)) == ("gap", n - 1)
    if decode_loaded.diag.groups:
        gid = int(decode_loaded.diag.groups[0].id)
        for text in (f"group:{gid}", f"G{gid}", f"group {gid}"):
            assert answers.parse_gap(decode_loaded, text) == ("group", gid)
    for bad in (-1, "x", "1.5", True, n):
        with pytest.raises(answers.ToolInputError):
            answers.parse_gap(decode_loaded, bad)


def test_open_answer_passes_findings_through(decode_loaded):
    import dataclasses

    doc = dict(decode_loaded.doc)
    doc["verdict"] = {"line": "host: \x1b[1mbold\x1b[0m", "cause": "host"}
    doc["findings"] = [{"rank": k} for k in range(25)]
    ans = answers.open_answer(dataclasses.replace(decode_loaded, doc=doc), "h")
    assert ans["verdict"] == {"line": "host: \\e[1mbold\\e[0m", "cause": "host"}
    assert ans["findings_total"] == 25 and len(ans["findings"]) == answers.OPEN_FINDINGS
    # the real document's verdict and findings (issue 47) come through as they are
    real = answers.open_answer(decode_loaded, "h")
    assert real["verdict"]["sentence"] == decode_loaded.doc["verdict"]["sentence"]
    assert real["findings_total"] == len(decode_loaded.doc["findings"]) >= 2


def test_open_text_leads_with_the_verdict(decode_loaded):
    """The text an agent reads first gives the verdict (its class and share of the
    step, figures only) on its second line; it was never printed: the text looked for
    a ``cause`` key the verdict does not have."""
    real = answers.open_answer(decode_loaded, "h")
    v = decode_loaded.doc["verdict"]
    lines = answers.open_text(real).splitlines()
    assert lines[1] == (
        f"Verdict: {v['kind']}-bound, {100 * v['share']:.1f}% of every step; first fix: findings[0] "
        "(the sentence is in the structured content's verdict)."
    )
    assert v["kind"] in ("host", "launch", "copy", "sync")
    gpu = answers._verdict_line({"kind": "gpu-bound", "share": 0.05, "sentence": "x"})
    assert (
        gpu
        == "Verdict: GPU-bound: the kernels are the story (idle 5.0% of each step) (the sentence is in the structured content's verdict)."
    )
    assert answers._verdict_line({"line": "host", "cause": "host"}) is None
    assert answers._verdict_line({"kind": "no steady state", "share": 0.0}).startswith("Verdict: no steady state (")
    # the top finding's idle may not be idle (unrecorded CUDA graphs): no class, no fix (an attack)
    line = answers._verdict_line({"kind": "unmeasurable", "share": 0.3, "sentence": "Not measurable: …"})
    assert line == (
        "Verdict: not measurable (unmeasurable, 30.0% of every step): record it first "
        "(the sentence is in the structured content's verdict)."
    )


# ---------------------------------------------------------------- command line


def test_command_without_the_extra_says_how_to_install(monkeypatch, capsys):
    import sys

    from gapscope.mcp import cmd

    monkeypatch.setitem(sys.modules, "mcp", None)  # import mcp raises ImportError
    assert cmd.main([]) == 2
    assert capsys.readouterr().err.strip() == (
        "gapscope: error: gapscope mcp needs the 'mcp' extra: pip install 'gapscope[mcp]'"
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--root", "/no/such/folder"], "--root /no/such/folder: not a folder"),
        (["--time-limit", "0"], "--time-limit must be"),
        (["--max-memory", "lots"], "--max-memory must be a size"),
        (["--max-traces", "0"], "--max-traces must be >= 1"),
    ],
)
def test_command_bad_usage_is_one_line(argv, message, capsys):
    pytest.importorskip("mcp")
    from gapscope.mcp import cmd

    assert cmd.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_memory_estimate_is_within_2x_of_what_a_load_holds():
    import gc
    import tracemalloc

    h200 = str(SAMPLES / "gpu" / "h200_decode.pt.trace.json.gz")
    load_trace(h200)  # imports and one-time tables first
    gc.collect()
    tracemalloc.start()
    try:
        loaded = load_trace(h200)
        gc.collect()
        held, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert loaded.nbytes / 2 <= held <= loaded.nbytes * 2


def test_docs_list_every_tool_parameter_and_option():
    pytest.importorskip("mcp")
    from gapscope.mcp import cmd
    from gapscope.mcp.server import TOOL_NAMES, build_server

    from .conftest import ROOT

    doc = (ROOT / "docs" / "mcp.md").read_text()
    tools = anyio.run(build_server(Service(Roots([str(ROOT)]))).list_tools)
    assert tuple(t.name for t in tools) == TOOL_NAMES
    for t in tools:
        heading = next(line for line in doc.splitlines() if line.startswith(f"### `{t.name}("))
        for param in t.input_schema["properties"]:
            assert param in heading, (t.name, param)
    for action in cmd.build_parser()._actions:
        for flag in action.option_strings:
            if flag.startswith("--") and flag != "--help":
                assert f"`{flag}" in doc, flag


def test_gap_card_says_an_edge_gap_is_one():
    """``gap_card`` of the H200 decode capture's first gap (its profiler start) says it
    is an edge gap, in the findings' words, in its text and its structured content; a
    gap inside the steps has no such field."""
    import numpy as np

    loaded = load_trace(str(SAMPLES / "gpu" / "h200_decode.pt.trace.json.gz"))
    first = int(np.argmin(loaded.diag.gaps.start_ns))
    ans = answers.card_answer(loaded, first)
    assert ans["gap"]["edge"] == "before the first kernel (profiler start)"
    assert "; an edge gap, before the first kernel (profiler start): listed apart, in no per-step figure;" in (
        answers.card_text(ans)
    )
    inner = answers.card_answer(loaded, int(loaded.doc["top_gaps"][-1]["index"]))
    assert inner["gap"]["edge"] is None and "edge" not in answers.card_text(inner)
