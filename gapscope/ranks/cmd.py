"""``gapscope report DIR`` / ``gapscope report FILE FILE…``: the report on a set of
per-rank traces.

Each rank is loaded and diagnosed on its own in a process pool (``--jobs``, default
the cores), or on a Dask cluster (``--dask-scheduler``); the coordinator keeps one compact summary per rank
(``gapscope.ranks.summary``), matches the collectives across ranks, and prints the
per-rank table, the straggler verdict and the collectives that cost the most (text,
``--markdown`` or ``--json``, ``docs/ranks-json.md``). ``gapscope DIR`` is
``gapscope.tui.ranks.cmd``.

Exit status: 0 ok (ranks that failed to load are listed in the report); 2 for bad
usage, a path that does not exist, a folder without traces, or a set where no rank
could be loaded.
"""

from __future__ import annotations

import os
import sys
from typing import IO

from gapscope.ranks.discover import NoTraces, assign_ranks, expand
from gapscope.report import args as report_args
from gapscope.report.args import Parser, UsageError, add_threshold_options, add_width_option, params_from_args
from gapscope.report.cmd import guarded_run, write_json
from gapscope.settings import read_settings

__all__ = ["main", "run", "parse", "width_for", "build_parser", "collect", "stderr_tty"]

PROG = "gapscope report"


def build_parser(prog: str = PROG) -> Parser:
    """The argument parser of the rank-set report (raises ``UsageError``)."""
    p = Parser(
        prog=prog,
        description=(
            "Report on a set of per-rank traces of one distributed job (a folder, or several files): per rank "
            "step time, GPU busy, idle by cause class, time spent waiting in collectives for a later rank, and "
            "the cost each rank imposed on the others by arriving last; the straggler and why it was late."
        ),
        epilog=(
            "Ranks come from Kineto's distributedInfo, else the file name (rank-3, worker3), else the order "
            "given. Collectives match by NCCL sequence number when the trace has one, else by step, collective "
            "and ordinal. A rank's wait at a collective = its kernel's duration minus the shortest rank's "
            "(the last to arrive), so no clock agreement between hosts is needed. Definitions: docs/ranks-json.md. "
            "Exit status: 0 ok, 2 bad input or usage."
        ),
    )
    p.add_argument("paths", metavar="PATH", nargs="+", help="a folder of rank traces, or two or more trace files")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="one JSON document with stable keys (docs/ranks-json.md)")
    fmt.add_argument("--markdown", action="store_true", help="Markdown, for tickets and chat")
    p.add_argument(
        "--jobs",
        "-j",
        type=int,
        default=None,
        metavar="N",
        help="worker processes that load and diagnose ranks (default: the number of cores; 1: no pool)",
    )
    p.add_argument(
        "--dask-scheduler",
        default=read_settings().dask_scheduler,
        metavar="ADDRESS",
        help="run the per-rank work on this Dask distributed scheduler (tcp://host:8786) instead of the local "
        "pool; the workers must see the files at the same paths (default: $GAPSCOPE_DASK_SCHEDULER; "
        "needs the 'dask' extra)",
    )
    p.add_argument("--top", type=int, default=5, metavar="N", help="stragglers and collectives listed (default 5)")
    add_width_option(p)
    add_threshold_options(p)
    return p


def collect(
    paths: list[str], params=None, *, jobs: int | None = None, progress: bool = False, dask_scheduler=None
) -> dict:
    """Discover, summarise and analyse the rank set named by ``paths``; the document.
    ``dask_scheduler``: a Dask scheduler address or cluster to run the per-rank work on
    (``gapscope.ranks.dask_pool``) instead of the local pool. Raises ``UsageError`` for
    a missing path, a folder without traces, no rank loaded, or Dask asked for and not
    installed or its scheduler not reached."""
    from gapscope import __version__
    from gapscope.ranks.document import build_ranks_document
    from gapscope.ranks.pool import summarize_all

    try:
        files = expand(paths)
    except NoTraces as exc:
        raise UsageError(str(exc)) from None
    tick = _progress_printer(len(files)) if progress else None
    if dask_scheduler is not None:
        from gapscope.ranks.dask_pool import DaskMissing, SchedulerUnreachable, summarize_on_dask

        try:
            results = summarize_on_dask(files, params, scheduler=dask_scheduler, progress=tick)
        except (DaskMissing, SchedulerUnreachable) as exc:
            raise UsageError(str(exc)) from None
    else:
        results = summarize_all(files, params, jobs=jobs, progress=tick)
    if tick is not None:
        sys.stderr.write("\r\x1b[K")
    from gapscope.ranks.summary import RankFailure

    ok = [r for r in results if not isinstance(r, RankFailure)]
    if not ok:
        errors = "; ".join(f"{r.path}: {r.error}" for r in results[:3])
        raise UsageError(f"no rank could be loaded ({errors})")
    items = [
        (
            r.path,
            None if isinstance(r, RankFailure) else r.rank_meta,
            None if isinstance(r, RankFailure) else r.world_size,
        )
        for r in results
    ]
    assigned, warnings = assign_ranks(items)
    return build_ranks_document(results, assigned, warnings, version=__version__, inputs=list(paths))


def _progress_printer(total: int):
    def tick(done: int, n: int, path: str) -> None:
        sys.stderr.write(f"\r\x1b[Kgapscope: summarised {done}/{n} ranks ({os.path.basename(path)[:40]})")
        sys.stderr.flush()

    return tick


def stderr_tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (ValueError, AttributeError):
        return False


def main(argv: list[str] | None = None) -> int:
    """``gapscope report`` on a rank set; the exit status."""
    return guarded_run(run, argv)


def width_for(args, tty: bool) -> int:
    import shutil

    if args.width is not None:
        return args.width
    if tty:
        return shutil.get_terminal_size((100, 24)).columns
    try:
        n = int(os.environ.get("COLUMNS", ""))
        return n if n >= 20 else 100
    except ValueError:
        return 100


def run(argv: list[str], stdout: IO[str] | None = None) -> int:
    """Parse ``argv`` and print the rank-set report; raises ``UsageError``."""
    args = parse(argv, PROG)
    if args is None:
        return 0
    doc = collect(
        args.paths, params_from_args(args), jobs=args.jobs, progress=stderr_tty(), dask_scheduler=args.dask_scheduler
    )
    out = sys.stdout if stdout is None else stdout
    tty = stdout is None and report_args.stdout_is_tty()
    if args.json:
        write_json(doc, out, indent=2 if tty else None)
    elif args.markdown:
        from gapscope.ranks.markdown import render_markdown

        out.write(render_markdown(doc, top=args.top))
    else:
        from gapscope.ranks.text import render_text

        out.write(render_text(doc, width=width_for(args, tty), top=args.top))
    out.flush()
    return 0


def parse(argv: list[str], prog: str):
    parser = build_parser(prog)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help
        if exc.code:
            raise
        return None
    if args.top < 0:
        raise UsageError(f"--top must be >= 0, got {args.top}")
    if args.width is not None and args.width < 40:
        raise UsageError(f"--width must be >= 40, got {args.width}")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs must be >= 1, got {args.jobs}")
    return args
