"""``gapscope DIR`` / ``gapscope FILE FILE…``: the rank-set overview and a rank picker.

On a terminal: the overview screen (``gapscope.tui.ranks.overview``: one row per rank,
sorted by the cost it imposed on the others, with the per-step heat row of that cost,
and the straggler verdict; the cursor on the straggler); Enter opens that rank's trace
in the existing viewer (``gapscope.tui.factory.make_app``), and quitting the viewer
comes back to the overview. Not on a terminal: the text overview of ``gapscope report
DIR``, and exit. Exit status: 0, or 2 for
bad input or usage (one line on stderr).
"""

from __future__ import annotations

import functools
import sys

from gapscope.analysis.types import Params
from gapscope.ranks.cmd import collect, parse, stderr_tty, width_for
from gapscope.report import args as report_args
from gapscope.report.args import UsageError, params_from_args
from gapscope.report.cmd import error_line

__all__ = ["main", "pick_and_view"]


def main(argv: list[str] | None = None) -> int:
    """``gapscope DIR``: the overview; on a terminal, a rank picker that opens the
    chosen rank in the viewer and comes back here when it closes."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parse(argv, "gapscope")
        if args is None:
            return 0
        params = params_from_args(args)
        doc = collect(
            args.paths,
            params,
            jobs=args.jobs,
            progress=stderr_tty(),
            dask_scheduler=args.dask_scheduler,
        )
    except UsageError as exc:
        print(error_line(str(exc)), file=sys.stderr)
        return 2
    interactive = report_args.stdout_is_tty() and sys.stdin.isatty()
    if not interactive:
        from gapscope.ranks.text import render_text

        sys.stdout.write(render_text(doc, width=width_for(args, False), top=args.top))
        return 0
    return pick_and_view(doc, params=params)


def pick_and_view(doc: dict, *, overview=None, viewer=None, params: Params | None = None) -> int:
    """The overview screen, then the chosen rank in the viewer, then the overview again
    (on the rank just viewed), until the overview is quit. ``overview(doc, rank)`` and
    ``viewer(path)`` (returning an error line or None) are for tests; by default the
    Textual overview (``gapscope.tui.ranks.overview``) and ``gapscope.tui.factory.make_app``
    with the thresholds ``params`` the overview was found with (None: the defaults)."""
    paths = {row["rank"]: row["path"] for row in doc["ranks"]}
    overview = overview or _overview
    viewer = viewer or functools.partial(_viewer, params=params)
    rank = None
    while True:
        rank = overview(doc, rank)
        if rank is None or rank not in paths:
            return 0
        err = viewer(paths[rank])
        if err:
            print(error_line(err), file=sys.stderr)


def _overview(doc: dict, rank: int | None) -> int | None:
    from gapscope.tui.ranks.overview import RanksOverview

    return RanksOverview(doc, start_rank=rank).run()


def _viewer(path: str, params: Params | None = None) -> str | None:
    from gapscope.tui.factory import make_app
    from gapscope.tui.session import ViewOptions

    app = make_app(path, ViewOptions(params=params))
    app.run()
    return app.error
