"""Rank sets (``gapscope report DIR``): discovery, collectives matched across ranks, the
waits and the straggler, on planted jobs with hand-computed figures and on the
corpus rank sets in place."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from bench.gen_ranks import LAUNCH_US, TAIL_US, write_rank_set
from gapscope import cli
from gapscope.ranks.cmd import collect
from gapscope.ranks.discover import assign_ranks, expand, rank_from_name
from gapscope.ranks.markdown import render_markdown
from gapscope.ranks.text import render_text, table_lines
from tests.conftest import CORPUS, require

US = 1000


def _rows(doc: dict) -> dict[int, dict]:
    return {row["rank"]: row for row in doc["ranks"]}


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> Path:
    """4 ranks, 4 steps; rank 2's data loading is 300 µs late in steps 1 and 3."""
    d = tmp_path_factory.mktemp("planted")
    write_rank_set(d, 4, steps=4, straggler=2, late_steps=(1, 3), late_us=300)
    return d


@pytest.fixture(scope="module")
def planted_doc(planted) -> dict:
    return collect([str(planted)], jobs=1)


def test_planted_waits_add_up(planted_doc):
    rows = _rows(planted_doc)
    # Each other rank's all-reduce waits 300 µs in each of the 2 late steps.
    for r in (0, 1, 3):
        assert rows[r]["collective_wait_ns"] == 600 * US
        assert rows[r]["exposed_wait_ns"] == 600 * US  # nothing else runs on its GPU meanwhile
        assert rows[r]["cost_imposed_ns"] == 0
        assert rows[r]["wait_by_step_ns"] == [0, 300 * US, 0, 300 * US]
    assert rows[2]["collective_wait_ns"] == 0
    assert rows[2]["cost_imposed_ns"] == 3 * 600 * US == sum(rows[r]["collective_wait_ns"] for r in (0, 1, 3))
    assert rows[2]["cost_by_step_ns"] == [0, 900 * US, 0, 900 * US]
    # Busy: 4 steps of 400 µs compute + 50 µs transfer, plus the wait on the fast ranks;
    # useful busy leaves the wait out, so it is the same on every rank.
    assert rows[2]["busy_ns"] == 4 * 450 * US
    for r in (0, 1, 3):
        assert rows[r]["busy_ns"] == 4 * 450 * US + 600 * US
    assert {row["useful_busy_ns"] for row in rows.values()} == {4 * 450 * US}
    assert rows[0]["busy_by_step_ns"] == [450 * US, 750 * US, 450 * US, 750 * US]
    assert rows[2]["busy_by_step_ns"] == [450 * US] * 4
    # Steps last as long on every rank (they end with the collective); the late ones 300 µs more.
    walls = {tuple(row["wall_by_step_ns"]) for row in rows.values()}
    assert len(walls) == 1 and (lambda w: w[1] - w[0] == 300 * US == w[3] - w[2])(walls.pop())
    assert sum(rows[2]["idle_by_step_by_class_ns"]["host"]) <= rows[2]["idle_by_class_ns"]["host"]
    assert planted_doc["ranks"][0]["rank"] == 2  # sorted by cost


def test_planted_straggler_verdict(planted_doc):
    v = planted_doc["verdict"]
    assert v["straggler"] == 2
    assert v["cost_ns"] == 1800 * US and v["wait_per_rank_ns"] == 600 * US
    assert "rank 2 is the straggler" in v["line"] and "ProfilerStep#1, ProfilerStep#3" in v["line"]
    s = planted_doc["stragglers"][0]
    assert s["rank"] == 2 and s["last_count"] == 2
    assert [d["step"] for d in s["steps"]] == ["ProfilerStep#1", "ProfilerStep#3"]
    # Its lateness: the idle stretch since the previous all-reduce: the step tail, the
    # late data loading (100 + 300 µs) and the launch.
    c = s["cause"]
    assert c["kind"] == "gap" and c["cause"] == "host"
    assert c["gap_ns"] == (TAIL_US + 100 + 300 + LAUNCH_US) * US
    assert "DataLoader" in c["why"]
    co = planted_doc["collectives"]
    assert co["matched"] == 4 and co["complete"] == 4 and co["unmatched"] == 0 and co["by_seq"] == 0
    assert co["total_cost_ns"] == 1800 * US
    worst = co["largest"][0]
    assert worst["last_rank"] == 2 and worst["wait_ns"] == {"0": 300 * US, "1": 300 * US, "2": 0, "3": 300 * US}
    assert worst["arrival_ns"]["2"] == 300 * US


def test_no_straggler_when_balanced(tmp_path):
    write_rank_set(tmp_path, 3, steps=3, straggler=1, late_steps=(), late_us=0)
    doc = collect([str(tmp_path)], jobs=1)
    assert doc["verdict"]["straggler"] is None
    assert "no rank waited" in doc["verdict"]["line"]
    assert all(row["collective_wait_ns"] == 0 for row in doc["ranks"])


def test_match_by_sequence_number(tmp_path):
    write_rank_set(tmp_path, 3, steps=3, straggler=0, late_steps=(2,), late_us=200, seq=True)
    doc = collect([str(tmp_path)], jobs=1)
    assert doc["collectives"]["by_seq"] == 3 == doc["collectives"]["matched"]
    assert doc["verdict"]["straggler"] == 0 and doc["verdict"]["cost_ns"] == 2 * 200 * US


def test_rank_from_file_name_and_order(tmp_path):
    write_rank_set(
        tmp_path / "named", 3, steps=2, straggler=1, late_steps=(1,), rank_in_header=False, name="trace_rank-{r}.json"
    )
    doc = collect([str(tmp_path / "named")], jobs=1)
    assert {row["rank"]: row["rank_source"] for row in doc["ranks"]} == {0: "file name", 1: "file name", 2: "file name"}
    assert doc["verdict"]["straggler"] == 1
    assert rank_from_name("worker3.1694128201557.pt.trace.json") == 3
    assert rank_from_name("rank-12.Apr_03.pt.trace.json.gz") == 12
    assert rank_from_name("sampled_rank-1.json.gz") == 1
    assert rank_from_name("trace.json") is None
    assigned, warnings = assign_ranks([("b.json", None, None), ("a.json", None, None), ("x.json", 0, 2)])
    assert [(a.path, a.rank, a.source) for a in assigned] == [
        ("b.json", 1, "order"),
        ("a.json", 2, "order"),
        ("x.json", 0, "distributedInfo"),
    ]
    assert any("order of the command line" in w for w in warnings)
    assert any("at or past the world size 2" in w for w in warnings)


def test_duplicates_and_mixed_jobs_are_warned(tmp_path):
    a = write_rank_set(tmp_path / "a", 2, steps=2)
    b = write_rank_set(tmp_path / "b", 3, steps=2)
    doc = collect([str(a[0]), str(a[1]), str(b[0])], jobs=1)
    assert doc["ranks_analysed"] == 2
    assert doc["left_out"] == [dict(path=str(b[0]), rank=0, duplicate_of=str(a[0]))]
    assert (
        "duplicate ranks: 1 file(s) left out: worker0.pt.trace.json (rank 0, distributedInfo; worker0.pt.trace.json has it)"
        in doc["warnings"]
    )
    assert any(w.startswith("mixed jobs") for w in doc["warnings"])


def test_unreadable_rank_is_reported_and_the_rest_completes(tmp_path):
    write_rank_set(tmp_path, 3, steps=2, straggler=1, late_steps=(1,))
    (tmp_path / "worker3.pt.trace.json").write_text('{"traceEvents": [ {"ph": "X", oops')
    doc = collect([str(tmp_path)], jobs=1)
    assert doc["ranks_total"] == 4 and doc["ranks_analysed"] == 3
    assert len(doc["failed"]) == 1
    f = doc["failed"][0]
    assert f["path"].endswith("worker3.pt.trace.json") and f["rank"] == 3 and f["error"]
    assert doc["verdict"]["straggler"] == 1 and "1 rank(s) failed" in doc["verdict"]["line"]
    assert "failed ranks:" in render_text(doc)


def test_pool_gives_the_same_document(planted, planted_doc):
    doc = collect([str(planted)], jobs=2)
    strip = lambda d: json.dumps({**d, "ranks": [{**r, "load_s": 0} for r in d["ranks"]]}, sort_keys=True)
    assert strip(doc) == strip(planted_doc)


def test_expand_folder_order_and_errors(tmp_path):
    for n in ("worker10.json", "worker2.json", "notes.txt"):
        (tmp_path / n).write_text("{}")
    assert [Path(p).name for p in expand([str(tmp_path)])] == ["worker2.json", "worker10.json"]
    with pytest.raises(ValueError, match="no such file"):
        expand([str(tmp_path / "missing")])


def test_cli_dispatch(planted, capsys, tmp_path):
    assert cli.main(["report", str(planted), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "gapscope.ranks/1" and doc["verdict"]["straggler"] == 2
    files = sorted(str(p) for p in planted.iterdir())
    assert cli.main(["report", *files, "--markdown", "--jobs", "1"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("## gapscope ranks") and "**Verdict:** rank 2 is the straggler" in md
    # The viewer on a folder, not on a terminal: the overview, exit 0.
    assert cli.main([str(planted), "--jobs", "1"]) == 0
    assert "rank 2 is the straggler" in capsys.readouterr().out
    # One file stays the single-trace report.
    assert cli.main(["report", files[0]]) == 0
    assert "gapscope ranks" not in capsys.readouterr().out
    # A folder without traces is not a rank set: the single-trace error.
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli.main(["report", str(empty)]) == 2
    assert "is a directory" in capsys.readouterr().err
    # ... but given with another folder of traces, it is named in the rank-set error.
    assert cli.main(["report", str(planted), str(empty)]) == 2
    assert "no trace files in this folder" in capsys.readouterr().err


@pytest.mark.parametrize("width", [80, 200])
def test_overview_fits_the_width(planted_doc, width):
    lines = table_lines(planted_doc, width)
    assert len(lines) == 5 and all(len(line) <= width for line in lines)
    assert lines[1].split()[0] == "2"
    if width == 200:
        assert "host" in lines[0] and "steps" in lines[0]
        assert "  ·█·█  " in lines[1] and lines[1].endswith("worker2.pt.trace.json")


def test_markdown_has_every_column(planted_doc):
    md = render_markdown(planted_doc)
    assert "| rank | step | busy | useful | coll.wait | late cost | idle |" in md
    assert "### Stragglers" in md


# ------------------------------------------------------------------ corpus sets


def _single_busy(path: str) -> int:
    from gapscope import parsers
    from gapscope.analysis import diagnose

    diag = diagnose(parsers.load(path))
    return int(diag.devices[0].busy_ns) if len(diag.devices) == 1 else int(max(d.busy_ns for d in diag.devices))


def test_corpus_dlrm_eight_ranks():
    d = require(CORPUS / "param" / "dlrm_kineto")
    doc = collect([str(d)], jobs=2)
    assert doc["ranks_analysed"] == 8 and doc["world_size"] == 8 and not doc["failed"] and not doc["warnings"]
    assert {row["rank_source"] for row in doc["ranks"]} == {"distributedInfo"}
    # 5 all-to-all (SendRecv) and 3 all-reduce in ProfilerStep#10, on every rank.
    assert doc["collectives"]["matched"] == 8 == doc["collectives"]["complete"]
    for row in doc["ranks"]:
        assert row["busy_ns"] == _single_busy(row["path"])
        assert row["useful_busy_ns"] == row["busy_ns"] - row["exposed_wait_ns"]
    assert sum(r["collective_wait_ns"] for r in doc["ranks"]) == doc["collectives"]["total_cost_ns"]
    assert doc["verdict"]["straggler"] == 7
    s = doc["stragglers"][0]
    assert s["cause"]["kind"] == "gap" and s["cause"]["cause"] == "host"
    for width in (80, 200):
        assert all(len(line) <= width for line in table_lines(doc, width))


def test_corpus_hta_pair():
    a = require(CORPUS / "hta" / "sampled_rank-0.json.gz")
    b = require(CORPUS / "hta" / "sampled_rank-1.json.gz")
    doc = collect([str(a), str(b)], jobs=1)
    assert doc["ranks_analysed"] == 2 and doc["world_size"] == 128
    assert doc["steps"] == ["ProfilerStep#551", "ProfilerStep#552"]
    assert doc["collectives"]["matched"] == 10 == doc["collectives"]["complete"]
    assert any("2 of 128 ranks" in w for w in doc["warnings"])
    for row in doc["ranks"]:
        assert row["busy_ns"] == _single_busy(row["path"])
    # Each rank waited for the other about as much: no single straggler.
    assert doc["verdict"]["straggler"] is None
    out = io.StringIO()
    out.write(render_text(doc, width=80))
    assert "no single straggler" in out.getvalue()


# ------------------------------------------------------------ a worker that dies


def die_once(path: str, params):
    """Summarise ``path``, but kill the worker process the first time a rank whose
    file name holds ``die`` is seen (a marker file beside it remembers), and every
    time for ``always-die``."""
    import os

    from gapscope.ranks.summary import summarize_or_fail

    p = Path(path)
    if "always-die" in p.name:
        os._exit(1)
    marker = p.with_name(p.name + ".died")
    if "die" in p.name and not marker.exists():
        marker.write_text("")
        os._exit(1)
    return summarize_or_fail(path, params)


def test_pool_survives_a_dying_worker(tmp_path):
    from gapscope.ranks.pool import summarize_all
    from gapscope.ranks.summary import RankFailure, RankSummary

    paths = write_rank_set(tmp_path, 3, steps=2, name="w{r}.json")
    dying = paths[1].rename(tmp_path / "die-rank-1.json")
    always = tmp_path / "always-die-rank-3.json"
    always.write_bytes(paths[0].read_bytes())
    files = [str(paths[0]), str(dying), str(paths[2]), str(always)]
    res = summarize_all(files, jobs=2, fn=die_once)
    assert [type(r) for r in res] == [RankSummary, RankSummary, RankSummary, RankFailure]
    assert "died each time" in res[3].error
    assert (tmp_path / "die-rank-1.json.died").exists()


# ------------------------------------------------------------- overview screen


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
def test_overview_screen_opens_the_straggler(planted_doc, size):
    import asyncio

    from gapscope.tui.ranks.overview import RanksOverview

    async def go():
        app = RanksOverview(planted_doc)
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            from textual.widgets import DataTable

            verdict = app.query_one("#verdict")
            assert "rank 2 is the straggler" in str(verdict.render())
            table = app.query_one(DataTable)
            assert table.row_count == 4 and table.cursor_row == 0
            # Drawn on screen: the verdict and every row of the table are visible.
            assert verdict.region.height >= 1 and table.region.height >= 5
            assert table.region.bottom <= size[1]
            await pilot.press("down", "enter")
        return app.return_value

    assert asyncio.run(go()) == 0  # rows by cost: 2, then 0, 1, 3


def test_pick_and_view_comes_back_to_the_overview(planted_doc):
    from gapscope.tui.ranks.cmd import pick_and_view

    shown, viewed = [], []
    answers = iter([2, 3, None])

    def overview(doc, rank):
        shown.append(rank)
        return next(answers)

    assert pick_and_view(planted_doc, overview=overview, viewer=lambda p: viewed.append(Path(p).name)) == 0
    assert shown == [None, 2, 3]  # back on the rank just viewed
    assert viewed == ["worker2.pt.trace.json", "worker3.pt.trace.json"]


def test_a_huge_world_size_names_the_missing_ranks_without_listing_them_one_by_one():
    # a file's distributedInfo claims a world of 10**18: the missing ranks are named as
    # ranges from the ranks present, never built one by one (that took all memory)
    world = 10**18
    assigned, warnings = assign_ranks([("r0.json", 0, world), ("r5.json", 5, world), ("r7.json", 7, world)])
    assert [a.rank for a in assigned] == [0, 5, 7]
    assert (
        f"3 of {world} ranks in the set (missing 1-4, 6, 8-{world - 1}): waits are measured among the ranks present"
        in warnings
    )
    # and a world of 0 or below: every rank is past it, none is missing
    assigned, warnings = assign_ranks([("r0.json", 0, 0), ("r1.json", 1, 0)])
    assert warnings == ["rank(s) 0-1 at or past the world size 0: files from another job?"]
    assigned, warnings = assign_ranks([("r0.json", 0, -3)])
    assert warnings == ["rank(s) 0 at or past the world size -3: files from another job?"]


def test_a_rank_beyond_64_bits_in_distributed_info_is_no_rank(tmp_path):
    # distributedInfo.rank 10**30 (world size 10**30 + 2) passed the loader as a Python
    # int and ended as "internal error: OverflowError" in the collective matching
    paths = write_rank_set(tmp_path, 2, steps=2)
    doc = json.loads(paths[1].read_text())
    doc["distributedInfo"].update(rank=10**30, world_size=10**30 + 2)
    paths[1].write_text(json.dumps(doc))
    out = collect([str(p) for p in paths], jobs=1)
    # no rank in the file: taken from its name (rank-1)
    assert sorted((r["rank"], r["rank_source"]) for r in out["ranks"]) == [(0, "distributedInfo"), (1, "file name")]
    assert out["ranks_analysed"] == 2
