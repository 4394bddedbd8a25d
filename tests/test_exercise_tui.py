"""Pilot tests of the exercise screen: each bundled exercise played end to end with
correct answers (all accepted, debrief shown) and with typical wrong answers."""

from __future__ import annotations

import asyncio

import pytest
from textual.widgets import Input, OptionList, Static

from gapscope.exercise import ProgressStore, Workbook, bundled_paths, load_exercise
from gapscope.exercise.load import CAUSE_LABELS
from gapscope.tui.exercise.app import make_exercise_app
from gapscope.tui.exercise.lanes import ExerciseLanes
from gapscope.tui.exercise.nav import TimelinePosition, next_gap, order_note, other_order
from gapscope.tui.navigation import SIZE, TIME, GapNavigator
from tests.test_tui_viewmodel import NAV_GAPS

EX = {p.stem: p for p in bundled_paths()}


# ------------------------------------------------ gap navigation, no App
# NAV_GAPS: gap 0 [100, 150) and gap 1 [500, 900) on device 0, gap 2 [200, 260) on
# device 1; time order 0, 2, 1; largest first 1, 2, 0.
NAV = GapNavigator(NAV_GAPS)


def test_position_current_is_the_selected_gap_else_the_cursors():
    assert TimelinePosition(2, 120, 0).current == 2
    assert TimelinePosition(None, 120, 0).current == 0
    assert TimelinePosition(None, 300, None).current is None


def test_next_gap_in_time_order_steps_past_the_gap_under_the_cursor():
    # the cursor is in gap 0 (nothing selected): n moves past it, N before it
    assert next_gap(NAV, TimelinePosition(None, 120, 0), 1, TIME) == 2
    assert next_gap(NAV, TimelinePosition(None, 120, 0), -1, TIME) is None
    # between gaps: the first starting at or after the cursor, the last before it
    assert next_gap(NAV, TimelinePosition(None, 300, None), 1, TIME) == 1
    assert next_gap(NAV, TimelinePosition(None, 300, None), -1, TIME) == 2
    # a selected gap wins over the cursor's
    assert next_gap(NAV, TimelinePosition(2, 120, 0), 1, TIME) == 1


def test_next_gap_largest_first_ignores_the_cursor_gap():
    assert next_gap(NAV, TimelinePosition(None, 120, 0), 1, SIZE) == 1
    assert next_gap(NAV, TimelinePosition(None, 120, 0), -1, SIZE) == 0
    assert next_gap(NAV, TimelinePosition(1, 120, 0), 1, SIZE) == 2
    assert next_gap(NAV, TimelinePosition(0, 120, 0), 1, SIZE) is None


def test_order_toggle_and_note():
    assert other_order(TIME) == SIZE and other_order(SIZE) == TIME
    assert order_note(SIZE) == "gap order: largest first"
    assert order_note(TIME) == "gap order: time"


def _app(name, tmp_path):
    ex = load_exercise(EX[name])
    return make_exercise_app(ex, store=ProgressStore(tmp_path, "pilot"), workbook=Workbook(ex))


def _feedback(screen) -> str:
    return str(screen.query_one("#ex-feedback", Static).render())


async def _choose(pilot, index: int) -> None:
    ol = pilot.app.screen.query_one("#ex-options", OptionList)
    assert ol.has_focus  # focused by the task itself, no Tab
    if index < 9 and index % 2 == 0:  # the digit key selects, Enter submits
        await pilot.press(str(index + 1), "enter")
        return
    await pilot.press("down")  # one real arrow press, then jump (each press costs a repaint)
    ol.highlighted = index
    await pilot.press("enter")


def _how(screen) -> str:
    """The one line saying how to answer: above a pick, else the input's title."""
    w = {"options": "#ex-options", "number": "#ex-number"}.get(screen.mode)
    return str(screen.query_one(w).border_title) if w else str(screen.query_one("#ex-how", Static).render())


async def _type(pilot, text: str) -> None:
    inp = pilot.app.screen.query_one("#ex-number", Input)
    assert inp.has_focus
    inp.value = text[:-1]
    inp.cursor_position = len(inp.value)
    await pilot.press("space" if text[-1] == " " else text[-1], "enter")


async def _pick(pilot, gap: int) -> None:
    screen = pilot.app.screen
    lanes = screen.lanes
    assert lanes.has_focus
    device = screen.session.facts().device
    for _ in range(len(lanes.gaps) + 1):
        if lanes.selected_gap == gap:
            break
        if lanes.selected_gap is None and lanes.gap_at(lanes.cursor_ns, device) == gap:
            break  # the cursor is in it (the status line names it): Enter picks it
        await pilot.press("n")
    assert lanes.selected_gap == gap or (lanes.selected_gap is None and lanes.gap_at(lanes.cursor_ns, device) == gap)
    await pilot.press("enter")


def _correct(options) -> int:
    return next(i for i, o in enumerate(options) if o.correct and not o.violates)


async def _answer_correctly(pilot) -> None:
    s = pilot.app.session
    t = s.task
    if t.kind == "choice":
        await _choose(pilot, _correct(t.options))
    elif t.kind == "cause":
        await _choose(pilot, CAUSE_LABELS.index(t.cause))
    elif t.kind == "number":
        await _type(pilot, f"{t.key.value:g} {t.key.unit}")
    elif t.kind == "pick_gap":
        await _pick(pilot, s.facts().resolve(t.gap))
    elif t.kind == "card":
        for fld in t.fields:
            if fld.name == "cause":
                await _choose(pilot, CAUSE_LABELS.index(t.cause))
            elif fld.options:
                await _choose(pilot, _correct(fld.options))
            else:
                await _type(pilot, fld.example)


@pytest.mark.parametrize("name", sorted(EX))
def test_play_through_with_correct_answers(name, tmp_path):
    async def run():
        app = _app(name, tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            screen = app.screen
            s = app.session
            n = len(s.exercise.tasks)
            for k in range(n):
                assert s.index == k
                before = s.task
                how = _how(screen)
                if before.kind == "pick_gap":
                    assert how == "Pick: move with n/N, confirm with Enter"
                elif before.kind == "number":
                    assert how == f"Type a number with its unit ({before.key.unit}), Enter"
                elif before.kind in ("choice", "cause"):
                    m = 6 if before.kind == "cause" else len(before.options)
                    assert how == f"Choose: ↑/↓ or 1–{m}, Enter"
                await _answer_correctly(pilot)
                assert s.record(before)["done"], (before.id, _feedback(screen))
                assert s.record(before)["attempts"] == 1
                assert _feedback(screen).startswith("✓ Correct."), _feedback(screen)
            assert s.finished
            assert screen.has_class("-finished")
            assert screen.query_one("#ex-debrief-box").display
            assert not screen.query_one("#ex-task-box").display
            assert str(screen.query_one("#ex-final", Static).render()) == f"Exercise complete: {n}/{n} tasks."
            md = screen.query_one("#ex-debrief")
            assert "Debrief" in md.source
            assert all(lanes.reveal_causes for lanes in screen.query(ExerciseLanes))
        assert ProgressStore(tmp_path, "pilot").summary(s.exercise.id, n) == (n, n, True)

    asyncio.run(run())


def test_decode_step_wrong_answers_get_evidence(tmp_path):
    async def run():
        app = _app("decode-step", tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            screen, s = app.screen, app.session
            await _choose(pilot, 0)  # look: correct
            # pick the wrong gap (the first in time: 0.000-0.258 ms), then the hint
            lanes = screen.lanes
            assert not lanes.reveal_causes  # the gap row does not give the class away
            await pilot.press("enter")  # the gap the status line names (the cursor is in it)
            await pilot.pause()
            fb = _feedback(screen)
            assert fb.startswith("✗ Not yet. You picked gap 1 of 3, 0.000-0.258 ms (0.258 ms): number 2 of 3 by size")
            assert "wider stretch of white space" in fb
            await pilot.press("u")
            await pilot.pause()
            assert "Hint 1/2: Idle time at the edges" in str(screen.query_one("#ex-hints", Static).render())
            await _pick(pilot, s.facts().resolve(s.task.gap))
            # the interval only: nothing that answers the next task (its class, its evidence)
            assert _feedback(screen) == "✓ Correct. That is the largest gap: gap 3 of 3, 0.590-1.050 ms (0.460 ms)."
            assert (
                str(screen.query_one("#ex-status", Static).render())
                == "Gap 3 of 3, 0.590-1.050 ms (0.460 ms) · cursor 0.590 ms"
            )
            await _choose(pilot, CAUSE_LABELS.index("sync"))  # cause: wrong
            assert "sync does not fit what the CPU did during 0.590-1.050 ms" in _feedback(screen)
            await _choose(pilot, CAUSE_LABELS.index("host"))
            assert lanes.reveal_causes  # classified: the gap row now shows classes
            assert s.task.id == "pattern"
            await _choose(pilot, 1)  # the one-off largest gap: wrong
            assert "happens in one step of ten" in _feedback(screen)
            await _choose(pilot, 0)
            await _choose(pilot, 1)  # problem kind: correct
            assert s.task.id == "first-change"
            await _choose(pilot, 0)  # "Rewrite the attention kernel"
            fb = _feedback(screen)
            assert fb.startswith(
                "✗ Not yet. Look at the GPU lane: most of the step is white space where no kernel runs."
            )
            assert s.task.id == "first-change"
            notes = screen.query_one("#ex-notes", Input)
            assert notes.display and notes.border_title == "Note (optional, not judged): shift+Tab"
            await pilot.press("shift+tab")  # the note, then Enter goes back to the options
            assert notes.has_focus
            notes.value = "try logging every 32 tokens"
            await pilot.press("enter")
            await _choose(pilot, 2)
            first_change = next(t for t in s.exercise.tasks if t.id == "first-change")
            assert s.record(first_change)["notes"] == "try logging every 32 tokens"
            await _choose(pilot, 0)  # proof
            await _type(pilot, "0.322 ms")  # the seed's figure: rejected with the computation
            fb = _feedback(screen)
            assert "0.322 ms is too high: the timeline gives 0.312 ms" in fb
            assert "busy = (0.410-0.258) + (0.590-0.430) = 0.312 ms" in fb
            await _type(pilot, "fast")
            assert _feedback(screen).startswith("? 'fast' is not a number")
            assert s.record()["attempts"] == 1

    asyncio.run(run())


def test_card_reasks_only_wrong_fields(tmp_path):
    async def run():
        app = _app("four-smells", tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            screen, s = app.screen, app.session
            assert s.task.id == "card-picket"
            assert str(screen.query_one("#ex-field", Static).render()) == "Card field 1/5: Smell"
            await _choose(pilot, 1)  # smell: host island (wrong, judged with the whole card)
            assert (
                str(screen.query_one("#ex-field", Static).render()) == "Card field 2/5: Cause class  (answered: smell)"
            )
            await _choose(pilot, CAUSE_LABELS.index("launch"))
            await _type(pilot, "kernels are slow")  # why: no launch keyword
            await _choose(pilot, 1)  # experiment: faster kernel (wrong)
            await _choose(pilot, 0)  # forbidden: right
            fb = _feedback(screen)
            assert fb.startswith("✗ Not yet. 3 of 5 fields need work.")
            assert "the time is in the" in fb and "of gaps between them" in fb
            assert screen.card_queue == ["smell", "why", "experiment"]
            await _choose(pilot, 0)
            await _type(pilot, "every 3 µs kernel waits for its launch")
            await _choose(pilot, 0)
            assert _feedback(screen).startswith("✓ Correct.")
            assert s.task.id == "card-island"

    asyncio.run(run())


def test_help_keys_and_focus(tmp_path):
    """? opens help built from the live bindings; digits choose; the input is focused
    without Tab; Escape comes back to the answer."""

    async def run():
        app = _app("decode-step", tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            screen, s = app.screen, app.session
            ol = screen.query_one("#ex-options", OptionList)
            assert screen.focused is ol  # task 1 is a choice: the list has the focus
            assert _how(screen) == "Choose: ↑/↓ or 1–2, Enter"
            assert ol.border_title == "Choose: ↑/↓ or 1–2, Enter"  # the list says how to answer it
            await pilot.press("question_mark")
            await pilot.pause()
            from gapscope.tui.exercise.help import ExerciseHelpScreen

            assert isinstance(app.screen, ExerciseHelpScreen)
            text = str(app.screen.query_one("#exercise-help-text", Static).render())
            assert "This task:  Choose: ↑/↓ or 1–2, Enter" in text
            assert "1–2  select option" in text  # live: only the digits this task takes
            assert "n ]  next gap" in text and "u f2  hint" in text and "? f1  help" in text
            assert "pick gap" not in text  # Enter picks only in a pick-gap task
            progress = f"Progress is saved after every answer and hint in {tmp_path / 'progress-pilot.json'}; "
            assert progress + "start over with: gapscope exercise --reset decode-step" in text.replace("\n", " ")
            await pilot.press("escape")
            await pilot.pause()
            assert app.screen is screen and screen.focused is ol
            await pilot.press("3")  # no third option: nothing happens
            assert s.index == 0 and s.record()["attempts"] == 0
            await pilot.press("1")  # the digit selects; Enter answers
            await pilot.pause()
            assert s.index == 0 and ol.highlighted == 0
            await pilot.press("enter")
            await pilot.pause()
            assert s.index == 1 and _feedback(screen).startswith("✓ Correct.")
            assert screen.focused is screen.lanes  # a pick: the timeline, without Tab
            assert _how(screen) == "Pick: move with n/N, confirm with Enter"
            await pilot.press("1")  # digits do nothing while picking
            assert s.index == 1
            await pilot.press("f1")
            await pilot.pause()
            text = str(app.screen.query_one("#exercise-help-text", Static).render())
            assert "Enter  pick gap" in text and "choose option" not in text
            await pilot.press("question_mark")
            await pilot.pause()
            assert app.screen is screen and screen.focused is screen.lanes

    asyncio.run(run())


def test_digit_selects_and_enter_submits_without_a_stray_attempt(tmp_path):
    """The prompt says "Choose: ↑/↓ or 1–2, Enter": a digit selects, Enter submits that
    option, and the Enter is not carried over to the next task (a pick) as a wrong
    pick. decode-step task 1 ('look'): option 1 correct, option 2 wrong."""

    async def run():
        app = _app("decode-step", tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            screen, s = app.screen, app.session
            ol = screen.query_one("#ex-options", OptionList)
            look = s.task
            await pilot.press("2")  # selects the wrong option, answers nothing yet
            await pilot.pause()
            assert s.index == 0 and ol.highlighted == 1 and s.record(look)["attempts"] == 0
            assert _feedback(screen) == ""
            await pilot.press("enter")  # submits option 2: one wrong attempt
            await pilot.pause()
            assert s.index == 0 and s.record(look)["attempts"] == 1
            assert _feedback(screen).startswith("✗ Not yet.")
            await pilot.press("1", "enter")  # the newcomer's keys: answers task 1 only
            await pilot.pause()
            assert s.index == 1 and s.record(look)["done"] and s.record(look)["attempts"] == 2
            assert s.task.id == "largest-gap" and s.record()["attempts"] == 0
            assert _feedback(screen).startswith("✓ Correct.")
            assert screen.focused is screen.lanes

    asyncio.run(run())


def test_first_n_leaves_the_gap_the_status_line_names(tmp_path):
    """On the pick task the cursor starts in gap 1 (0.000-0.258 ms) and the status line
    says so; the first ``n`` goes to gap 2 (0.410-0.430 ms), the second to gap 3
    (0.590-1.050 ms), the largest, which Enter picks at the first attempt."""

    async def run():
        app = _app("decode-step", tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            screen, s = app.screen, app.session
            await pilot.press("1", "enter")
            await pilot.pause()
            assert s.task.id == "largest-gap"
            status = lambda: str(screen.query_one("#ex-status", Static).render())
            assert status().startswith("Gap 1 of 3, 0.000-0.258 ms (0.258 ms)")
            await pilot.press("N")  # nothing before gap 1
            assert screen.lanes.selected_gap is None and status().startswith("Gap 1 of 3,")
            await pilot.press("n")
            await pilot.pause()
            assert status().startswith("Gap 2 of 3, 0.410-0.430 ms (20.0 µs)")
            await pilot.press("n")
            await pilot.pause()
            assert status().startswith("Gap 3 of 3, 0.590-1.050 ms (0.460 ms)")
            assert screen.lanes.selected_gap == s.facts().resolve(s.task.gap)
            await pilot.press("enter")
            await pilot.pause()
            assert _feedback(screen).startswith("✓ Correct.")
            assert s.record(next(t for t in s.exercise.tasks if t.id == "largest-gap"))["attempts"] == 1

    asyncio.run(run())


def _wrong_answer_value(s):
    """A wrong answer to the current task (a value the screen accepts)."""
    t = s.task
    if t.kind == "choice":
        return "choose", next(i for i, o in enumerate(t.options) if not o.correct)
    if t.kind == "cause":
        return "choose", next(i for i, c in enumerate(CAUSE_LABELS) if c != t.cause)
    if t.kind == "number":
        return "type", f"{t.key.value * 3 + 1:g} {t.key.unit}"
    return None, None


def test_wrong_answer_feedback_is_in_view_at_80x24(tmp_path):
    """issue 18 item 9: at 80x24, after each wrong answer the feedback's first line is
    inside the task box's visible area (not below the fold)."""

    async def run():
        app = _app("decode-step", tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            screen, s = app.screen, app.session
            seen = []
            while not s.finished:
                how, value = _wrong_answer_value(s)
                if how is not None:
                    tid = s.task.id
                    if how == "choose":
                        await _choose(pilot, value)
                    else:
                        await _type(pilot, value)
                    for _ in range(3):
                        await pilot.pause()
                    box = screen.query_one("#ex-task-box")
                    fb = screen.query_one("#ex-feedback", Static)
                    top = fb.region.y
                    seen.append((tid, box.region.y <= top < box.region.bottom, _feedback(screen)[:1]))
                await _answer_correctly(pilot)
                await pilot.pause()
            return seen

    seen = asyncio.run(run())
    assert len(seen) >= 8
    assert all(visible and mark in "✗?" for _, visible, mark in seen), seen
