"""The viewer's timeline actions on the exercise screen (next/previous gap, gap order,
zoom, pan, cursor, lanes, fit), acting on the current task's swimlanes. A mixin of
``ExerciseScreen``, which provides ``lanes`` (the current ``ExerciseLanes``), ``session``,
``order_mode`` and ``_navs`` (trace id -> ``GapNavigator``)."""

from __future__ import annotations

from gapscope.tui.navigation import SIZE, TIME, GapNavigator

__all__ = ["TimelineActions"]


class TimelineActions:
    """Actions bound by ``trace_bindings`` ids gap.*, view.* on the exercise screen."""

    def nav(self) -> GapNavigator:
        task = self.session.task or self.session.exercise.tasks[-1]
        nav = self._navs.get(task.trace)
        if nav is None:
            d = self.session.workbook.facts(task.trace).diag
            nav = self._navs[task.trace] = GapNavigator(d.gaps, d.order_by_size())
        return nav

    def action_jump_gap(self, direction: int) -> None:
        """Next/previous gap from the current one: the selected gap, else (time order)
        the gap the cursor is in, the one the status line names ("Gap 1 of 3") and Enter
        would pick, so the first ``n`` moves past it instead of selecting it in place."""
        lanes = self.lanes
        current = lanes.selected_gap
        if current is None and self.order_mode == TIME:
            current = lanes.gap_at(lanes.cursor_ns, self.session.facts().device)
        g = self.nav().step(current, direction, self.order_mode, from_ns=lanes.cursor_ns)
        if g is not None:
            lanes.select_gap(g)

    def action_toggle_order(self) -> None:
        self.order_mode = SIZE if self.order_mode == TIME else TIME
        self.notify(f"gap order: {'largest first' if self.order_mode == SIZE else 'time'}", timeout=2)

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
