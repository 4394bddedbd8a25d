"""``gapscope DIR`` / ``gapscope FILE FILE…``: the rank-set overview and a rank picker.

Prints the overview of ``gapscope report DIR`` (one row per rank, sorted by the cost it
imposed on the others, with the per-step heat row of that cost, and the straggler
verdict). On a terminal it then asks which rank to open (the straggler, else the
costliest rank, by default; ``q`` quits), opens that rank's trace in the existing viewer
(``gapscope.tui.factory.make_app``), and comes back to the overview when the viewer
closes. Not on a terminal it prints the overview and exits. Exit status: 0, or 2 for
bad input or usage (one line on stderr).
"""

from __future__ import annotations

import sys

from gapscope.ranks.cmd import collect, parse, stderr_tty, width_for
from gapscope.report import args as report_args
from gapscope.report.args import UsageError, params_from_args
from gapscope.report.cmd import error_line

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """``gapscope DIR``: the overview; on a terminal, a rank picker that opens the
    chosen rank in the viewer and comes back here when it closes."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parse(argv, "gapscope")
        if args is None:
            return 0
        doc = collect(args.paths, params_from_args(args), jobs=args.jobs, progress=stderr_tty(),
                      dask_scheduler=args.dask_scheduler)
    except UsageError as exc:
        print(error_line(str(exc)), file=sys.stderr)
        return 2
    from gapscope.ranks.text import render_text

    interactive = report_args.stdout_is_tty() and sys.stdin.isatty()
    paths = {row["rank"]: row["path"] for row in doc["ranks"]}
    default = doc["verdict"].get("straggler")
    if default is None and doc["ranks"]:
        default = doc["ranks"][0]["rank"]
    while True:
        sys.stdout.write(render_text(doc, width=width_for(args, interactive), top=args.top))
        if not interactive:
            return 0
        try:
            answer = input(f"open rank in the viewer [{default}], q to quit: ").strip()
        except EOFError:
            return 0
        if answer.lower() in ("q", "quit", "exit"):
            return 0
        try:
            rank = int(answer) if answer else default
        except ValueError:
            print(f"gapscope: not a rank: {answer!r}")
            continue
        if rank not in paths:
            print(f"gapscope: no rank {rank} in this set (ranks: {', '.join(map(str, sorted(paths)))})")
            continue
        from gapscope.tui.factory import make_app

        app = make_app(paths[rank])
        app.run()
        if app.error:
            print(error_line(app.error), file=sys.stderr)
