"""Exercises that reference a pair of traces (``[[pairs]]``, ``pair = ...``, option
claims ``position`` + ``status``) and ``--check`` against ``gapscope diff``."""

from __future__ import annotations

import pytest

from gapscope.exercise import (
    ExerciseError,
    Session,
    Workbook,
    bundled_paths,
    check_exercise,
    load_exercise,
    parse_exercise,
)
from gapscope.exercise.check import diff_statuses
from gapscope.exercise.progress import ProgressStore

PATH = next(p for p in bundled_paths() if p.stem == "graph-capture")


def test_bundled_pair_exercise_loads_and_checks():
    ex = load_exercise(PATH)
    (pair,) = ex.pairs
    assert (pair.id, pair.before, pair.after) == ("capture", "eager", "graph")
    assert [(t.id, t.pair, t.trace) for t in ex.tasks] == [("died", "capture", "graph"), ("left", "capture", "graph")]
    claims = [(o.position, o.status, o.correct) for o in ex.tasks[0].options]
    assert claims[0] == ("attention → matmul", "died", True)
    rep = check_exercise(PATH)
    assert rep.ok and not rep.warnings, rep.lines()


def test_workbook_diffs_the_pair():
    ex = load_exercise(PATH)
    doc = Workbook(ex).diff("capture")
    assert doc["per_step"]["wall_ns"]["before_ns"] == 1_050_000 and doc["per_step"]["wall_ns"]["after_ns"] == 348_000
    assert diff_statuses(doc, "attention → matmul") == ["died"]
    assert diff_statuses(doc, "matmul → attention") == ["died"]
    assert diff_statuses(doc, "graph → graph") == ["appeared"]
    assert diff_statuses(doc, "nothing → here") == []


def test_session_judges_a_pair_task(tmp_path):
    ex = load_exercise(PATH)
    s = Session(ex, store=ProgressStore(tmp_path, "t"))
    v = s.submit(1)
    assert not v.correct and "no attention → matmul position left" in v.message
    assert s.submit(0).correct and s.task.id == "left"
    assert s.submit(0).correct and s.finished


def _variant(tmp_path, old: str, new: str, count: int = 1):
    text = PATH.read_text(encoding="utf-8")
    assert old in text
    p = tmp_path / "variant.toml"
    p.write_text(text.replace(old, new, count), encoding="utf-8")
    return p


def test_check_rejects_a_claim_the_diff_contradicts(tmp_path):
    # the correct option says the stretch shrank: the diff says it died
    p = _variant(
        tmp_path,
        'position = "attention → matmul"\nstatus = "died"',
        'position = "attention → matmul"\nstatus = "shrank"',
    )
    rep = check_exercise(p)
    (err,) = rep.errors
    assert (
        "task 'died': option 'It died:" in err and "claims 'attention → matmul' shrank, but the diff says died" in err
    )
    # a wrong option whose claim is true
    p = _variant(
        tmp_path,
        'position = "matmul → attention"\nstatus = "unchanged"',
        'position = "matmul → attention"\nstatus = "died"',
    )
    (err,) = check_exercise(p).errors
    assert "is marked wrong, but the diff agrees that 'matmul → attention' died" in err
    # a position the diff does not have
    p = _variant(tmp_path, 'position = "graph → graph"', 'position = "graph → nothing"')
    (err,) = check_exercise(p).errors
    assert "the diff has no position 'graph → nothing'" in err


@pytest.mark.parametrize(
    "old, new, msg",
    [
        ('pair = "capture"', 'pair = "nope"', "unknown pair 'nope' (known: capture)"),
        ('after = "graph"', 'after = "gone"', "pair 'capture': after names unknown trace 'gone'"),
        (
            'status = "died"',
            'status = "vanished"',
            "status 'vanished' is not one of died, shrank, grew, appeared, unchanged",
        ),
        ('status = "died"\n', "", "an option's diff claim needs both 'position' and 'status'"),
    ],
)
def test_format_errors(tmp_path, old, new, msg):
    with pytest.raises(ExerciseError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        load_exercise(_variant(tmp_path, old, new))


def test_claim_needs_a_pair(tmp_path):
    text = PATH.read_text(encoding="utf-8").replace('pair = "capture"\n', "", 1)
    with pytest.raises(ExerciseError, match="claims a diff status, but the task names no pair"):
        parse_exercise(text, tmp_path / "x.toml")


def test_pair_task_must_be_a_choice(tmp_path):
    text = PATH.read_text(encoding="utf-8").replace(
        'kind = "choice"\npair = "capture"', 'kind = "number"\npair = "capture"', 1
    )
    with pytest.raises(ExerciseError, match="a task on a pair must be a choice task, not 'number'"):
        parse_exercise(text, tmp_path / "x.toml")
