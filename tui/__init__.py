"""The gapscope terminal viewer (Textual).

Pure modules (no Textual, unit-tested): ``viewmodel`` (viewport, ruler, per-cell
bucketing), ``navigation`` (gap order, search, launch↔kernel), ``lanes_model`` (rows,
name sanitising). Widgets: ``swimlanes.Swimlanes``, ``panel.GapPanel``. Screens:
``loading.LoadScreen``, ``screen.TraceScreen``. Build the app with
``gapscope.tui.factory.make_app``.
"""
