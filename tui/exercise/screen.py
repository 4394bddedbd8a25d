"""The exercise screen: prompt and protocol path beside the swimlanes, the current task
with its input, feedback that points at the timeline, hints, and the debrief.

Composes the viewer's ``Swimlanes`` (one per trace of the exercise, shown by CSS class)
and its ``GapNavigator``; the judging is headless (``gapscope.exercise.Session``).
Keys follow the viewer's: n/N next/previous gap, s largest-first/time order, +/- zoom,
h/l pan, ,/. cursor, j/k lanes, 0 fit; Enter confirms a picked gap; 1-9 select an
option and Enter submits it (as the how-to line says: a digit alone never answers);
u unlocks a hint; ? (or F1) shows the key help. Each task says in one line how
to answer it, built from the live bindings (the title of the option list or input, or
``#ex-how`` above a pick on the timeline), and the task's input gets the focus by itself.
"""

from __future__ import annotations

import dataclasses

from rich.markdown import Markdown as RichMarkdown
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Input, Markdown, OptionList, Static
from textual.widgets.option_list import Option

from gapscope.analysis.causes import CAUSE_LABELS
from gapscope.exercise import AnswerError, Session
from gapscope.exercise.model import CardField, Task
from gapscope.tui.bindings import trace_bindings
from gapscope.tui.exercise.help import ExerciseHelpScreen, how_to_answer
from gapscope.tui.exercise.lanes import ExerciseLanes
from gapscope.tui.exercise.nav import TimelinePosition, next_gap, order_note, other_order
from gapscope.tui.exercise.text import CAUSE_HELP, hints_text, path_text, task_header, verdict_text
from gapscope.tui.footer import KeyFooter
from gapscope.tui.navigation import TIME, GapNavigator
from gapscope.tui.swimlanes import Swimlanes
from gapscope.units import fmt_offset

__all__ = ["ExerciseScreen"]


class ExerciseScreen(Screen):
    """One guided exercise for one learner (``session``)."""

    BINDINGS = [
        *trace_bindings({"gap.next", "gap.prev", "gap.order"}),
        Binding("enter", "confirm_pick", "pick gap", id="exercise.pick"),
        *(
            Binding(str(k), f"choose({k - 1})", "select option", show=False, id=f"exercise.choose{k}")
            for k in range(1, 10)
        ),
        Binding("u,f2", "hint", "hint", id="exercise.hint"),
        Binding("question_mark,f1", "help", "help", id="app.help"),
        # the viewer's keys; the footer keeps its short "zoom" label
        *(
            dataclasses.replace(b, description="zoom") if b.id == "view.zoom_in" else b
            for b in trace_bindings(
                {
                    "view.zoom_in",
                    "view.zoom_out",
                    "view.pan_left",
                    "view.pan_right",
                    "view.cursor_left",
                    "view.cursor_right",
                    "view.down",
                    "view.up",
                    "view.fit",
                }
            )
        ),
        Binding("escape,q", "app.quit", "quit", id="app.quit"),
    ]

    AUTO_FOCUS = ""  # the task's input is focused by _setup_input, never the first widget

    DEFAULT_CSS = """
    ExerciseScreen { layout: vertical; }
    ExerciseScreen #ex-title { height: 1; background: $primary 30%; text-style: bold; padding: 0 1; }
    ExerciseScreen #ex-main { height: 1fr; }
    ExerciseScreen #ex-left { width: 38%; min-width: 28; max-width: 60; border-right: vkey $primary 50%; }
    ExerciseScreen #ex-prompt { margin: 0 1; }
    ExerciseScreen #ex-path { padding: 0 1; height: auto; border-bottom: hkey $primary 50%; }
    ExerciseScreen #ex-right { width: 1fr; }
    ExerciseScreen Swimlanes { height: 8; border-bottom: hkey $primary 50%; }
    ExerciseScreen Swimlanes.-hidden { display: none; }
    ExerciseScreen #ex-status { height: 1; color: $text-muted; padding: 0 1; }
    ExerciseScreen #ex-task-box { height: 1fr; padding: 0 1; }
    ExerciseScreen #ex-task-head { height: auto; }
    ExerciseScreen #ex-task { height: auto; margin: 0; }
    ExerciseScreen #ex-field { height: auto; color: $accent; }
    ExerciseScreen #ex-how { height: auto; color: $text-accent; text-style: bold; }
    ExerciseScreen #ex-prompt-label { padding: 0 1; text-style: bold underline; }
    ExerciseScreen #ex-options { height: auto; max-height: 12; }
    ExerciseScreen #ex-number, ExerciseScreen #ex-notes { height: 3; }
    ExerciseScreen .-off { display: none; }
    ExerciseScreen #ex-feedback, ExerciseScreen #ex-hints { height: auto; margin-top: 1; }
    ExerciseScreen #ex-debrief { height: auto; padding: 0 1; }
    ExerciseScreen #ex-final { padding: 0 1; }
    ExerciseScreen.-finished #ex-task-box { display: none; }
    ExerciseScreen #ex-debrief-box { display: none; height: 1fr; }
    ExerciseScreen.-finished #ex-debrief-box { display: block; }
    """

    def __init__(self, session: Session) -> None:
        super().__init__()
        self.session = session
        self.mode = ""
        self.opt_values: list = []
        self.card_answers: dict = {}
        self.card_queue: list = []
        self.order_mode = TIME
        self._navs: dict[str, GapNavigator] = {}
        self._feedback_fresh = False

    # ------------------------------------------------------------- layout
    def compose(self) -> ComposeResult:
        ex = self.session.exercise
        yield Static(Text(ex.title), id="ex-title", markup=False)
        with Horizontal(id="ex-main"):
            with VerticalScroll(id="ex-left"):
                yield Static(path_text(self.session), id="ex-path", markup=False)
                yield Static("Prompt", id="ex-prompt-label", markup=False)
                yield Markdown(ex.prompt, id="ex-prompt")
            with Vertical(id="ex-right"):
                for k, ref in enumerate(ex.traces):
                    f = self.session.workbook.facts(ref.id)
                    yield ExerciseLanes(f.trace, f.diag, id=f"lanes-{k}", classes="-hidden")
                yield Static(Text(""), id="ex-status", markup=False)
                task_box = VerticalScroll(id="ex-task-box")
                task_box.can_focus = False  # Tab goes timeline -> note -> answer, not through a bare scroll area
                with task_box:
                    yield Static(Text(""), id="ex-task-head", markup=False)
                    yield Static("", id="ex-task")
                    yield Static(Text(""), id="ex-field", markup=False)
                    yield Static(Text(""), id="ex-how", markup=False)
                    notes = Input(placeholder="your note (kept, not judged)", id="ex-notes", classes="-off")
                    notes.border_title = "Note (optional, not judged): shift+Tab"
                    yield notes
                    # their border titles say how to answer (set per task in _set_mode)
                    yield OptionList(id="ex-options", classes="-off")
                    yield Input(placeholder="a number with its unit, e.g. 0.312 ms", id="ex-number", classes="-off")
                    yield Static(Text(""), id="ex-feedback", markup=False)
                    yield Static(Text(""), id="ex-hints", markup=False)
                with VerticalScroll(id="ex-debrief-box"):
                    yield Static(Text(""), id="ex-final", markup=False)
                    yield Markdown(ex.debrief or "Well done.", id="ex-debrief")
        yield KeyFooter()

    def on_mount(self) -> None:
        self._setup_task()

    # ------------------------------------------------------------- helpers
    def lanes_for(self, trace_id: str) -> ExerciseLanes:
        k = [t.id for t in self.session.exercise.traces].index(trace_id)
        return self.query_one(f"#lanes-{k}", ExerciseLanes)

    @property
    def lanes(self) -> ExerciseLanes:
        task = self.session.task or self.session.exercise.tasks[-1]
        return self.lanes_for(task.trace)

    def _show(self, widget_id: str, on: bool) -> None:
        self.query_one(f"#{widget_id}").set_class(not on, "-off")

    def _navigator(self) -> GapNavigator:
        """The gap navigator of the current task's trace (the last task's once
        finished), built on first use."""
        task = self.session.task or self.session.exercise.tasks[-1]
        nav = self._navs.get(task.trace)
        if nav is None:
            d = self.session.workbook.facts(task.trace).diag
            nav = self._navs[task.trace] = GapNavigator(d.gaps, d.order_by_size())
        return nav

    def _position(self) -> TimelinePosition:
        """Where the learner is on the current lanes (``gapscope.tui.exercise.nav``)."""
        lanes = self.lanes
        device = self.session.facts().device
        return TimelinePosition(lanes.selected_gap, lanes.cursor_ns, lanes.gap_at(lanes.cursor_ns, device))

    def _feedback(self, text: Text) -> None:
        """Show ``text`` below the answer and bring it into view: on a small screen the
        task box would otherwise keep the feedback below the fold and nothing visible
        would change after a wrong answer (issue 18 item 9)."""
        self.query_one("#ex-feedback", Static).update(text)
        self._feedback_fresh = True
        self.call_after_refresh(self._fit_task_box)

    # ------------------------------------------------------------- task setup
    def _setup_task(self) -> None:
        s = self.session
        self.query_one("#ex-path", Static).update(path_text(s))
        task = s.task
        if task is None:  # finished
            self._finish()
            return
        self._reveal()
        for ref in s.exercise.traces:
            self.lanes_for(ref.id).set_class(ref.id != task.trace, "-hidden")
        self._fit_lanes(self.lanes)
        self.query_one("#ex-task-head", Static).update(task_header(s))
        self.query_one("#ex-task", Static).update(RichMarkdown(task.prompt.strip()))
        self._refresh_hints()
        self.card_answers = {}
        self.card_queue = [f.name for f in task.fields]
        self.query_one("#ex-field", Static).update(Text(""))
        self._show("ex-field", task.kind == "card")
        self._show("ex-notes", task.kind == "choice" and task.notes)
        self.query_one("#ex-notes", Input).value = s.record().get("notes") or ""
        self._setup_input()
        self.query_one("#ex-status", Static).update(self._status_text())

    def _setup_input(self) -> None:
        task = self.session.task
        if task is None:
            return
        kind, field = task.kind, None
        if kind == "card":
            field = next(f for f in task.fields if f.name == self.card_queue[0])
        if kind == "pick_gap":
            self._set_mode("pick")
            self.query_one("#ex-status", Static).update(self._status_text())
            self._focus_input()
            return
        if kind == "number" or (field is not None and not field.options and field.name != "cause"):
            self._set_mode("number")
            inp = self.query_one("#ex-number", Input)
            inp.value = ""
            unit = task.key.unit if task.key is not None else ""
            inp.placeholder = f"{field.prompt} (free text)" if field else f"a number in {unit}"
            self._focus_input()
            if field is not None:
                self.query_one("#ex-field", Static).update(self._card_status(task, field))
            return
        if kind == "cause" or (field is not None and field.name == "cause"):
            labels = list(CAUSE_LABELS)
            self.opt_values = labels
            prompts = [CAUSE_HELP[c] for c in labels]
        else:
            opts = field.options if field is not None else task.options
            self.opt_values = list(range(len(opts)))
            prompts = [o.text for o in opts]
        if field is not None:
            self.query_one("#ex-field", Static).update(self._card_status(task, field))
        ol = self.query_one("#ex-options", OptionList)
        ol.clear_options()
        ol.add_options([Option(Text(f"{k + 1}. {p}")) for k, p in enumerate(prompts)])
        ol.highlighted = 0
        self._set_mode("options")
        self._focus_input()

    def _card_status(self, task: Task, field: CardField) -> Text:
        """``Card field k/n: prompt`` of ``field`` of the card ``task``, with the fields
        answered so far."""
        k = [f.name for f in task.fields].index(field.name) + 1
        t = Text(f"Card field {k}/{len(task.fields)}: {field.prompt}", style="bold")
        if self.card_answers:
            t.append("  (answered: " + ", ".join(self.card_answers) + ")", style="dim")
        return t

    def _fit_lanes(self, lanes: ExerciseLanes) -> None:
        """Give the lanes the rows they need (ruler + rows), at most 40 % of the screen."""
        lanes.styles.height = max(6, min(len(lanes.rows) + 2, max(6, int(self.size.height * 0.4))))

    def _set_mode(self, mode: str) -> None:
        self.mode = mode
        self._show("ex-options", mode == "options")
        self._show("ex-number", mode == "number")
        how = self.how_to_answer()
        # one line saying how to answer: the title of the input that takes the answer (it
        # stays in view with the input on a small screen), or a line above a timeline pick
        self.query_one("#ex-how", Static).update(Text(how if mode == "pick" else ""))
        self._show("ex-how", mode == "pick")
        widget = {"options": "#ex-options", "number": "#ex-number"}.get(mode)
        if widget:
            self.query_one(widget).border_title = how
        self.refresh_bindings()

    def how_to_answer(self) -> str:
        """One line: how to answer the current task (keys from the live bindings)."""
        task = self.session.task
        free_text = task is not None and task.kind == "card" and self.mode == "number"
        n_options = len(self.opt_values) if self.mode == "options" else 0
        key = task.key if task is not None and task.kind == "number" else None
        unit = key.unit if key is not None else ""
        return how_to_answer(self, self.mode, n_options=n_options, unit=unit, free_text=free_text)

    def _input_widget(self):
        """The widget that takes the current task's answer (None when finished)."""
        if self.session.finished:
            return None
        return {
            "pick": self.lanes,
            "options": self.query_one("#ex-options", OptionList),
            "number": self.query_one("#ex-number", Input),
        }.get(self.mode)

    def _focus_input(self) -> None:
        """Focus the task's input once the layout has shown it (no Tab needed)."""

        def focus() -> None:
            w = self._input_widget()
            if w is not None:
                w.focus(scroll_visible=False)
            self._fit_task_box()

        self.call_after_refresh(focus)

    def _fit_task_box(self) -> None:
        """Keep the question, its how-to line and the option list in view together: the
        list gets the rows left below the question (at least 4, leaving 3 for the first
        lines of feedback) and scrolls inside itself; the task box starts at the top,
        or, right after an answer, scrolls as far as the feedback needs to be seen."""
        box = self.query_one("#ex-task-box", VerticalScroll)
        ol = self.query_one("#ex-options", OptionList)
        if self.mode == "options" and box.size.height:
            above = sum(w.outer_size.height for w in box.children[: box.children.index(ol)] if w.display)
            ol.styles.max_height = max(4, min(12, box.size.height - above - 3))
        if self._feedback_fresh:
            self._feedback_fresh = False
            fb = self.query_one("#ex-feedback", Static)
            self.call_after_refresh(lambda: box.scroll_to_widget(fb, animate=False, top=False))
        else:
            box.scroll_home(animate=False)

    def on_resize(self) -> None:
        if self.is_mounted and self.mode:
            self.call_after_refresh(self._fit_task_box)

    def on_screen_resume(self) -> None:
        # back from the help: the answer input, not whatever was focused first
        if self.is_mounted and self.mode:
            self._focus_input()

    def _refresh_hints(self) -> None:
        task = self.session.task
        total = len(task.hints) if task else 0
        self.query_one("#ex-hints", Static).update(hints_text(self.session.hints_shown(), total))

    def _reveal(self) -> None:
        """Show the cause classes of a trace's gaps once every cause/card task on it
        is done (or the exercise is finished)."""
        s = self.session
        for ref in s.exercise.traces:
            pending = [
                t
                for t in s.exercise.tasks
                if t.trace == ref.id and t.kind in ("cause", "card") and not s.record(t)["done"]
            ]
            self.lanes_for(ref.id).set_reveal(s.finished or not pending)

    def _finish(self) -> None:
        self.add_class("-finished")
        self._reveal()
        for k, ref in enumerate(self.session.exercise.traces):
            lanes = self.lanes_for(ref.id)
            lanes.set_class(k != 0, "-hidden")
            lanes.styles.height = "1fr"
        n = len(self.session.exercise.tasks)
        t = Text(f"Exercise complete: {n}/{n} tasks.", style="bold green")
        self.query_one("#ex-final", Static).update(t)
        self.query_one("#ex-status", Static).update(Text("Debrief", style="bold"))

    def _status_text(self) -> Text:
        lanes = self.lanes
        f = self.session.facts()
        g = self._position().current
        # the gap first: on a narrow screen the line is cut at the cursor, not the gap
        t = Text(f.gap_name(g)[:1].upper() + f.gap_name(g)[1:] if g is not None else "Not in a gap")
        t.append(f" · cursor {fmt_offset(lanes.cursor_ns - f.origin_ns)}", style="dim")
        return t

    # ------------------------------------------------------------- answering
    def _answer(self, value) -> None:
        task = self.session.task
        if task is None:
            return
        if task.kind == "card":
            self.card_answers[self.card_queue.pop(0)] = value
            if self.card_queue:
                self._setup_input()
                return
            value = dict(self.card_answers)
        notes = self.query_one("#ex-notes", Input).value if task.kind == "choice" and task.notes else ""
        try:
            verdict = self.session.submit(value, notes=notes)
        except AnswerError as exc:
            self._feedback(verdict_text(None, error=str(exc)))
            if task.kind == "card":
                self.card_queue = [f.name for f in task.fields if f.name not in self.card_answers] or [
                    task.fields[-1].name
                ]
            self._setup_input()
            return
        self._feedback(verdict_text(verdict))
        if self.session.store.error:
            self.notify(self.session.store.error, severity="warning", timeout=6)
        if verdict.correct:
            self._setup_task()
        elif task.kind == "card":
            self.card_queue = [k for k, ok in verdict.fields.items() if not ok]
            for k in self.card_queue:
                self.card_answers.pop(k, None)
            self._setup_input()
        elif task.kind == "number":
            self.query_one("#ex-number", Input).value = ""

    @on(OptionList.OptionSelected, "#ex-options")
    def _option(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if self.mode == "options" and 0 <= event.option_index < len(self.opt_values):
            self._answer(self.opt_values[event.option_index])

    @on(Input.Submitted, "#ex-number")
    def _number(self, event: Input.Submitted) -> None:
        event.stop()
        if self.mode == "number":
            self._answer(event.value)

    @on(Input.Submitted, "#ex-notes")
    def _notes(self, event: Input.Submitted) -> None:
        event.stop()
        self.query_one("#ex-options", OptionList).focus()

    @on(Swimlanes.Changed)
    def _lanes_changed(self, event: Swimlanes.Changed) -> None:
        if self.session.task is not None:
            self.query_one("#ex-status", Static).update(self._status_text())

    # ------------------------------------------------------------- actions
    # the viewer's timeline keys (``trace_bindings`` ids gap.*, view.*), on the
    # current task's lanes
    def action_jump_gap(self, direction: int) -> None:
        """Next/previous gap from where the learner is (``nav.next_gap``)."""
        g = next_gap(self._navigator(), self._position(), direction, self.order_mode)
        if g is not None:
            self.lanes.select_gap(g)

    def action_toggle_order(self) -> None:
        self.order_mode = other_order(self.order_mode)
        self.notify(order_note(self.order_mode), timeout=2)

    def action_zoom(self, factor: float) -> None:
        self.lanes.zoom(factor)

    def action_pan(self, fraction: float) -> None:
        self.lanes.pan(fraction)

    def action_cursor(self, cells: int) -> None:
        self.lanes.move_cursor_cells(cells)

    def action_row(self, delta: int) -> None:
        self.lanes.select_row(delta)

    def action_fit(self) -> None:
        self.lanes.fit_all()

    def action_confirm_pick(self) -> None:
        if self.mode != "pick" or self.session.task is None:
            return
        self._answer(self._position().current)

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        # footer and help show Enter-picks only while picking, 1-9 only with options
        if action == "confirm_pick":
            return self.mode == "pick" and not self.session.finished
        if action == "choose":
            return self.mode == "options" and not self.session.finished and parameters[0] < len(self.opt_values)
        return True

    def action_choose(self, index: int) -> None:
        """Digit keys: select option ``index`` (0-based) of the list shown and focus the
        list, so Enter submits it. A digit never answers by itself: the how-to line says
        "↑/↓ or 1–N, Enter", and an answer that arrived on the digit let the learner's
        Enter fall through to the next task (a pick, counted as a wrong attempt)."""
        if self.mode != "options" or not 0 <= index < len(self.opt_values):
            return
        ol = self.query_one("#ex-options", OptionList)
        ol.highlighted = index
        ol.focus(scroll_visible=False)

    def action_help(self) -> None:
        self.app.push_screen(ExerciseHelpScreen(self))

    def action_hint(self) -> None:
        h = self.session.hint()
        if h is None and self.session.task is not None and not self.session.task.hints:
            self._feedback(Text("No hints for this task.", style="dim"))
        self._refresh_hints()
