"""The typed key accessors of ``Task`` and the card's option lookup (fixed while making
``gapscope.exercise`` pass mypy): a missing key is a ValueError naming the task, and a
negative option index is "choose one of the options", not the last option."""

from __future__ import annotations

import pytest

from gapscope.exercise import Workbook, bundled_paths, judge, load_exercise
from gapscope.exercise.model import Task

EX = {p.stem: p for p in bundled_paths()}


def test_accessors_name_the_task_without_its_key():
    t = Task(id="t1", kind="choice", prompt="?")
    for name in ("gap_key", "number_key", "number_quantity"):
        with pytest.raises(ValueError, match="'t1'"):
            getattr(t, name)


def test_loaded_tasks_have_the_keys_of_their_kind():
    for path in EX.values():
        for t in load_exercise(path).tasks:
            if t.kind in ("pick_gap", "cause", "card"):
                assert t.gap_key is t.gap
            if t.kind == "number":
                assert (t.number_quantity, t.number_key) == (t.quantity, t.key)


@pytest.mark.parametrize("choice", [-1, "-1", None, "x", 99, 1.5])
def test_card_option_outside_the_list_is_not_an_option(choice):
    ex = load_exercise(EX["four-smells"])
    t = next(t for t in ex.tasks if t.id == "card-picket")
    good = {
        "smell": 0,
        "cause": "launch",
        "why": "Each 3 µs kernel waits for its own launch.",
        "experiment": 0,
        "forbidden": 0,
    }
    v = judge(ex, t, Workbook(ex).facts("picket"), dict(good, smell=choice))
    assert v.fields["smell"] is False
    assert "smell: choose one of the options." in v.message
