"""Damaged input never gets a verdict it cannot support (issue 42, item 1), and a
step of no length never gets a rate (item 6).

- ``gapscope diff``: each side's loader warnings in every format; steps not known to be
  complete left out; "cannot judge" (and ``--fail-if-slower`` fails) when a side has
  no complete steady-state step; a judged damaged side says so in the verdict.
- rank sets: a rank cut off, without GPU work, or outside the world is marked in
  every table and the JSON, left out of the cross-rank figures and the straggler
  verdict, which names it.
- the families, by seeded mutation: truncation of either side (or of one rank) at
  many offsets gives no internal error and never a bare faster/slower verdict or a
  damaged straggler.

Traces come from ``bench.gen_ranks`` (Kineto files with ProfilerStep ranges and an
NCCL all-reduce per step); every expected figure is counted from what was written.
"""

from __future__ import annotations

import io
import json
import random
import re
from pathlib import Path

import pytest

from bench.gen_ranks import write_rank_set
from gapscope.diff import cmd as diff_cmd
from gapscope.parsers import TraceFormatError
from gapscope.ranks.cmd import collect
from gapscope.ranks.markdown import render_markdown
from gapscope.ranks.text import render_text
from gapscope.report.damage import damage_of
from gapscope.report.fmt import NO_RATE, budget_rows


def _diff(before, after, *flags: str) -> tuple[int, str]:
    out = io.StringIO()
    status = diff_cmd.run([str(before), str(after), *flags], stdout=out)
    return status, out.getvalue()


def _diff_doc(before, after, *flags: str) -> tuple[int, dict]:
    status, text = _diff(before, after, "--json", *flags)
    return status, json.loads(text)


@pytest.fixture(scope="module")
def one_rank(tmp_path_factory) -> Path:
    """One Kineto trace of 8 ProfilerSteps (step 0 is warm-up for the diff)."""
    return write_rank_set(tmp_path_factory.mktemp("one"), 1, steps=8)[0]


def _cut(path: Path, share: float, out: Path) -> Path:
    data = path.read_bytes()
    out.write_bytes(data[: int(len(data) * share)])
    return out


# ---------------------------------------------------------------- diff
def test_cut_off_after_is_compared_over_its_complete_steps_only(one_rank, tmp_path):
    # 70% of the file: the loader recovers 6 steps; the last one ends after the last
    # GPU work recorded on every stream, so 4 steady steps remain (step 0 is warm-up)
    cut = _cut(one_rank, 0.7, tmp_path / "cut.json")
    status, doc = _diff_doc(one_rank, cut, "--fail-if-slower", "5")
    after = doc["after"]
    assert after["damage"]["truncated"] and after["warnings"][0]["message"].startswith("file truncated at line")
    assert after["steps"]["count"] == 6 and [e["index"] for e in after["steps"]["incomplete"]] == [5]
    assert after["steps"]["steady_count"] == 4 and doc["per_step"]["steps_after"] == 4
    assert doc["judgement"]["judged"]
    assert doc["judgement"]["caveats"] == ["AFTER cut off at line 1: compared over its 4 complete step(s) only"]
    assert doc["verdict"]["line"].endswith("AFTER cut off at line 1: compared over its 4 complete step(s) only")
    assert status == 0 and doc["check"]["failed"] is False  # judged: the same steps, no change


def test_cut_before_any_complete_step_cannot_be_judged(one_rank, tmp_path, capsys):
    cut = _cut(one_rank, 0.3, tmp_path / "cut.json")
    status, doc = _diff_doc(one_rank, cut, "--fail-if-slower", "5")
    assert doc["verdict"]["verdict"] == "cannot judge" and status == 1
    assert doc["judgement"]["reasons"] == [
        "AFTER has no complete steady-state step (the file was cut off at line 1: the step ends after the last GPU "
        "work recorded on every stream)"
    ]
    assert doc["check"]["line"] == "FAILED: " + doc["verdict"]["line"]
    assert "--fail-if-slower failed: cannot judge" in capsys.readouterr().err
    # and the same the other way round: BEFORE cut off
    status, doc = _diff_doc(cut, one_rank)
    assert doc["verdict"]["verdict"] == "cannot judge" and doc["judgement"]["reasons"][0].startswith("BEFORE has no")


def test_cut_before_any_gpu_work_cannot_be_judged(one_rank, tmp_path, capsys):
    # cut just before the first GPU kernel's record: the loader keeps the CPU events
    # before it, so AFTER has no GPU work, and that is the damage, not another program
    text = one_rank.read_text()
    cut = tmp_path / "cut.json"
    cut.write_text(text[: text.index('"cat": "kernel"')])
    status, doc = _diff_doc(one_rank, cut, "--fail-if-slower", "1")
    assert doc["after"]["damage"]["truncated"] and doc["after"]["device"] is None
    assert doc["verdict"]["verdict"] == "cannot judge" and status == 1 and doc["check"]["failed"]
    assert doc["judgement"]["reasons"] == ["AFTER has no GPU work (cut off at line 1)"]
    assert "--fail-if-slower failed: cannot judge" in capsys.readouterr().err
    status, doc = _diff_doc(cut, one_rank, "--fail-if-slower", "1")
    assert doc["verdict"]["verdict"] == "cannot judge" and status == 1
    assert doc["judgement"]["reasons"] == ["BEFORE has no GPU work (cut off at line 1)"]


def test_text_timeline_cut_mid_step_leaves_that_step_out(tmp_path):
    # an event-list timeline cut inside its third step: the loader closes the open
    # 'step' range at the file's last time (a warning), so that step's end is invented
    steps = []
    for k in range(3):
        t = 1000 * k
        steps += [f"{t} us CPU step begin", f"{t + 10} us CPU launch mm", f"{t + 20} us GPU mm begin"]
        steps += [f"{t + 220} us GPU mm end", f"{t + 1000} us CPU step end"]
    before = tmp_path / "before.txt"
    before.write_text("\n".join(steps) + "\n")
    after = tmp_path / "after.txt"
    after.write_text("\n".join(steps[:14]) + "\n")  # step 2 begun, its kernel ended, never closed
    status, doc = _diff_doc(before, after, "--fail-if-slower", "1")
    a = doc["after"]
    assert a["damage"]["open_ended_count"] == 1 and "never closed" in a["warnings"][0]["message"]
    # steps 0 (warm-up) and 1 of 1000 µs; step 2 closed at 2220 µs would read 220 µs
    assert a["steps"]["count"] == 3 and [e["index"] for e in a["steps"]["incomplete"]] == [2]
    assert doc["per_step"]["steps_after"] == 1 and doc["per_step"]["wall_ns"]["after_ns"] == 1_000_000
    assert doc["verdict"]["verdict"] == "no change" and status == 0
    assert doc["judgement"]["caveats"] == ["AFTER 1 range never closed (drawn to the end of the file)"]


def test_repaired_side_is_judged_with_the_repair_named(one_rank, tmp_path):
    # a malformed element in the events array: the loader skips it with a warning
    text = one_rank.read_text()
    i = text.index('"traceEvents": [') + len('"traceEvents": [')
    bad = tmp_path / "skipped.json"
    bad.write_text(text[:i] + '{"ph": "X", "ts": oops}, ' + text[i:])
    status, doc = _diff_doc(one_rank, bad)
    assert doc["after"]["warnings"] and doc["after"]["damage"]["repaired_count"] >= 1
    assert doc["judgement"]["judged"] and doc["judgement"]["caveats"][0].startswith("AFTER ")
    assert "repair" in doc["verdict"]["line"]


def test_warnings_section_is_in_text_and_markdown(one_rank, tmp_path):
    cut = _cut(one_rank, 0.7, tmp_path / "cut.json")
    for flags in ((), ("--markdown",)):
        _status, text = _diff(one_rank, cut, *flags, *(("--width", "200") if not flags else ()))
        assert "Loader warnings of BEFORE (0)" in text and "Loader warnings of AFTER (1)" in text
        assert re.search(r"file truncated at line 1: .* events recovered", text)
        assert "incomplete, left out of AFTER: step 6" in text


def test_intact_sides_show_no_warnings_section(one_rank):
    _status, text = _diff(one_rank, one_rank, "--width", "200")
    assert "Loader warnings" not in text


# ---------------------------------------------------------------- rank sets
@pytest.fixture(scope="module")
def damaged_set(tmp_path_factory) -> Path:
    """5 ranks of world size 5, rank 1 late in steps 1 and 2; then rank 2 claims
    rank -1, rank 3 claims rank 99, rank 4 has no GPU work."""
    d = tmp_path_factory.mktemp("damaged")
    ps = write_rank_set(d, 5, steps=3, straggler=1, late_steps=(1, 2), late_us=300)
    for p, r in ((ps[2], -1), (ps[3], 99)):
        doc = json.loads(p.read_text())
        doc["distributedInfo"]["rank"] = r
        p.write_text(json.dumps(doc))
    doc = json.loads(ps[4].read_text())
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset")]
    ps[4].write_text(json.dumps(doc))
    return d


def test_damaged_ranks_are_marked_and_left_out(damaged_set):
    doc = collect([str(damaged_set)], jobs=1)
    rows = {row["rank"]: row for row in doc["ranks"]}
    assert sorted(rows) == [-1, 0, 1, 4, 99]
    assert rows[-1]["marks"] == ["rank outside the world of 5"]
    assert rows[99]["marks"] == ["rank outside the world of 5"]
    assert rows[4]["marks"] == ["no GPU work"]
    assert rows[0]["marks"] == [] and rows[1]["marks"] == []
    assert doc["ranks_analysed"] == 5 and doc["ranks_judged"] == 2
    assert [d["rank"] for d in doc["damaged"]] == [-1, 4, 99]
    # no GPU work: nothing reads as measured
    r4 = rows[4]
    assert r4["busy_ns"] is None and r4["idle_ns"] is None and r4["step_wall_ns"] is None
    assert set(r4["idle_by_class_ns"].values()) == {None}
    for r in (-1, 4, 99):
        assert rows[r]["in_cross_rank"] is False and rows[r]["cost_imposed_ns"] is None
    # damaged rows come last, by step time (rank 4 has none)
    assert [row["rank"] for row in doc["ranks"]] == [1, 0, -1, 99, 4]
    # the verdict is over ranks 0 and 1 only, and names the others
    v = doc["verdict"]
    assert v["straggler"] == 1
    assert v["line"].endswith(
        "(3 damaged rank(s) left out of it: rank -1: rank outside the world of 5; rank 4: no GPU work; "
        "rank 99: rank outside the world of 5)"
    )
    assert all(m["ranks"] == [0, 1] for m in doc["collectives"]["largest"])


def test_damaged_ranks_in_text_and_markdown(damaged_set):
    doc = collect([str(damaged_set)], jobs=1)
    text = render_text(doc, width=200)
    md = render_markdown(doc)
    for out in (text, md):
        assert "99 (rank outside the world of 5)" in out and "4 (no GPU work)" in out
        assert "-1 (rank outside the world of 5)" in out
        assert "3 damaged (left out)" in out
    assert "damaged ranks (left out of the cross-rank figures and the verdict):" in text
    assert "### Damaged ranks" in md


def test_cut_off_straggler_is_not_named(tmp_path):
    # the planted straggler's own file is cut off: it is marked, its warning shown,
    # and never named the straggler
    ps = write_rank_set(tmp_path, 4, steps=4, straggler=3, late_steps=(1, 3), late_us=300)
    _cut(ps[3], 0.6, ps[3])
    doc = collect([str(tmp_path)], jobs=1)
    rows = {row["rank"]: row for row in doc["ranks"]}
    assert rows[3]["marks"] == ["cut off at line 1"] and rows[3]["in_cross_rank"] is False
    assert rows[3]["warnings"][0]["message"].startswith("file truncated at line 1")
    assert doc["verdict"]["straggler"] is None
    assert "rank 3: cut off at line 1" in doc["verdict"]["line"]
    assert "loader warnings by rank:" in render_text(doc, width=200)


# ---------------------------------------------------------------- steps/s of a step of no length
def test_a_step_of_no_length_has_no_rate(tmp_path):
    from gapscope.report.cmd import run as report_run

    events = [
        dict(ph="X", name="aten::mm", pid=1, tid=1, ts=100, dur=0, cat="cpu_op"),
        dict(
            ph="X", name="cudaLaunchKernel", pid=1, tid=1, ts=100, dur=0, cat="cuda_runtime", args=dict(correlation=1)
        ),
        dict(
            ph="X", name="gemm", pid=0, tid=7, ts=100, dur=0, cat="kernel", args=dict(correlation=1, device=0, stream=7)
        ),
        dict(ph="X", name="gemm2", pid=0, tid=7, ts=100, dur=0, cat="kernel", args=dict(device=0, stream=7)),
    ]
    p = tmp_path / "one_time.json"
    p.write_text(json.dumps(dict(traceEvents=events)))
    out = io.StringIO()
    assert report_run(["--json", str(p)], stdout=out) == 0
    budget = json.loads(out.getvalue())["budget"]
    assert budget["wall_ns"] == 0 and budget["steps_per_s"] is None
    assert ("Steps/s", NO_RATE) in budget_rows(budget)
    assert all(v != "0.00" for _k, v in budget_rows(budget))


# ---------------------------------------------------------------- the families, by seeded mutation
def _check_diff(before: Path, after: Path) -> None:
    """No internal error; a cut-off or repaired side never gets a bare verdict."""
    try:
        status, doc = _diff_doc(before, after, "--fail-if-slower", "1")
    except TraceFormatError:
        return  # nothing usable: exit 2, one line
    assert status in (0, 1)
    v = doc["verdict"]
    damaged = [doc[s]["damage"] for s in ("before", "after")]
    if any(d["truncated"] or d["repaired_count"] for d in damaged) and v["verdict"] in (
        "faster",
        "slower",
        "no change",
    ):
        assert " — with care: " in v["line"] and ("cut off" in v["line"] or "repair" in v["line"]), v["line"]
    if v["verdict"] == "cannot judge":
        assert status == 1 and doc["check"]["failed"]
    # a side cut (or repaired) down to no GPU work is not "not comparable": that would
    # pass --fail-if-slower with the damage as its only cause
    assert not (any(d["truncated"] or d["repaired_count"] for d in damaged) and v["verdict"] == "not comparable")
    for flags in ((), ("--markdown",)):
        _diff(before, after, *flags)  # renders without an internal error


def test_diff_with_a_side_cut_anywhere(one_rank, tmp_path):
    rng = random.Random(20261207)
    size = len(one_rank.read_bytes())
    for k in range(24):
        cut = _cut(one_rank, rng.uniform(0.02, 1.0), tmp_path / f"cut{k}.json")
        if rng.random() < 0.5:
            _check_diff(one_rank, cut)
        else:
            _check_diff(cut, one_rank)
    assert size > 1000


def test_diff_with_bytes_flipped_or_dropped(one_rank, tmp_path):
    rng = random.Random(42)
    data = one_rank.read_bytes()
    for k in range(16):
        b = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(b))
            if rng.random() < 0.5:
                b[at] = rng.choice(b'{}[],:"0123456789eE.-x ')
            else:
                del b[at : at + rng.randint(1, 40)]
        p = tmp_path / f"mut{k}.json"
        p.write_bytes(bytes(b))
        _check_diff(one_rank, p)


def test_rank_set_with_one_rank_cut_anywhere(tmp_path):
    rng = random.Random(7)
    for k in range(8):
        d = tmp_path / f"set{k}"
        ps = write_rank_set(d, 3, steps=3, straggler=2, late_steps=(1, 2), late_us=300)
        victim = rng.randrange(3)
        _cut(ps[victim], rng.uniform(0.05, 0.95), ps[victim])
        doc = collect([str(d)], jobs=1)
        render_text(doc, width=120)
        render_markdown(doc)
        damaged = {f["rank"] for f in doc["failed"]} | {x["rank"] for x in doc["damaged"]}
        rows = {row["rank"]: row for row in doc["ranks"]}
        for r, row in rows.items():
            if damage_of_row(row):
                assert r in damaged and "cut off" in " ".join(row["marks"]) and not row["in_cross_rank"]
        assert doc["verdict"]["straggler"] not in damaged


def damage_of_row(row: dict) -> bool:
    """The row's file was cut off, by its loader warnings (``report.damage``)."""
    from gapscope.parsers.model import TraceWarning

    return damage_of([TraceWarning(w["line"], w["field"], w["message"]) for w in row["warnings"]]).truncated


def test_overview_screen_marks_the_damaged_ranks(damaged_set):
    import asyncio

    from textual.widgets import DataTable

    from gapscope.tui.ranks.overview import RanksOverview

    doc = collect([str(damaged_set)], jobs=1)

    async def go():
        app = RanksOverview(doc)
        async with app.run_test(size=(160, 30)) as pilot:
            await pilot.pause()
            head = str(app.query_one("#head").render())
            verdict = str(app.query_one("#verdict").render())
            table = app.query_one(DataTable)
            firsts = [str(table.get_row_at(k)[0]) for k in range(table.row_count)]
        return head, verdict, firsts

    head, verdict, firsts = asyncio.run(go())
    assert "3 damaged (left out)" in head
    assert "rank 4: no GPU work" in verdict
    # damaged rows last, by step time (rank 4 has none)
    assert firsts[2:] == ["-1 (rank outside the world of 5)", "99 (rank outside the world of 5)", "4 (no GPU work)"]


def test_rank_set_with_ranks_claimed_anywhere(tmp_path):
    # each file claims a rank drawn from -3..7 in a world of 4: every rank outside
    # [0, 4) is marked and left out, duplicates are left out by discovery, and the
    # straggler (if any) is always a rank inside the world
    rng = random.Random(11)
    for k in range(6):
        d = tmp_path / f"set{k}"
        ps = write_rank_set(d, 4, steps=3, straggler=rng.randrange(4), late_steps=(1, 2), late_us=300)
        for p in ps:
            doc = json.loads(p.read_text())
            doc["distributedInfo"]["rank"] = rng.randint(-3, 7)
            p.write_text(json.dumps(doc))
        doc = collect([str(d)], jobs=1)
        render_text(doc, width=120)
        render_markdown(doc)
        for row in doc["ranks"]:
            outside = not 0 <= row["rank"] < 4
            assert ("rank outside the world of 4" in row["marks"]) == outside
            assert row["in_cross_rank"] == (not outside)
        s = doc["verdict"]["straggler"]
        assert s is None or 0 <= s < 4
