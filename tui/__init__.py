"""The gapscope terminal viewer (Textual).

Pure modules (no Textual, unit-tested): ``viewmodel`` (viewport, per-cell bucketing),
``ruler`` (ruler ticks, time text), ``navigation`` (gap order, search,
launch↔kernel), ``lanes_model`` (rows, gaps by device, name sanitising),
``exercise.nav`` (next/previous gap on the exercise screen). Drawing:
``lanes_draw`` (the swimlanes as a pure function of a ``LaneView``), ``cells``
(glyphs, cell rows). Widgets: ``swimlanes.Swimlanes``, ``panel.GapPanel``. Screens:
``loading.LoadScreen``, ``screen.TraceScreen``, ``help.HelpScreen``,
``loader_warnings.WarningsScreen``; the exercise mode's in ``exercise/``, the
rank-set overview in ``ranks/``. The commands that open the viewer: ``cmd``
(``gapscope TRACE``), ``exercise.cmd``, ``ranks.cmd``. State:
``session`` (``Session``, what is loaded and diagnosed; ``Phase``; ``ViewOptions``),
written by ``app.GapscopeApp`` from the messages (``messages``) its thread workers
(``workers``: the load, the diagnosis) post. Build the app with
``gapscope.tui.factory.make_app``.
"""
