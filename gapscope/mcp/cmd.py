"""``gapscope mcp [--root DIR ...]``: serve the diagnosis to a coding agent over stdio.

The agent's client starts this command and speaks the Model Context Protocol on its
stdin and stdout (``docs/mcp.md``); nothing else is written to stdout. Tools read
files only under the ``--root`` folders (default: the current directory).

Exit status: 0 when the client closes the connection; 2 for bad usage, a root that is
not a folder, or the ``mcp`` extra not installed (one line on stderr).
"""

from __future__ import annotations

import os
import sys

from gapscope.report.args import Parser, UsageError
from gapscope.report.cmd import guarded_run

__all__ = ["main", "run", "build_parser"]

PROG = "gapscope mcp"


def build_parser() -> Parser:
    """The ``gapscope mcp`` argument parser (raises ``UsageError`` on bad usage)."""
    from gapscope.mcp.service import DEFAULT_TIME_LIMIT_S

    p = Parser(
        prog=PROG,
        description=(
            "Serve gapscope's diagnosis as Model Context Protocol tools over stdio, for coding agents: "
            "open_trace, list_gaps, gap_card, events_around, what_if, diff_traces, rank_set, full_name. "
            "Add it to the agent's MCP configuration (docs/mcp.md); it is not meant to be run by hand."
        ),
        epilog=(
            "Safety: files only under the --root folders (paths resolved, links followed, before the check); "
            "nothing written but gapscope's own trace cache (--no-cache: nothing at all); no network. "
            "Needs the 'mcp' extra: pip install 'gapscope[mcp]'. Exit status: 0 when the client hangs up, "
            "2 bad usage."
        ),
    )
    p.add_argument(
        "--root",
        action="append",
        default=[],
        metavar="DIR",
        help="a folder whose files (and sub-folders') the tools may read; repeat for several "
        "(default: the current directory). Relative paths from the agent are taken from the first",
    )
    p.add_argument(
        "--time-limit",
        type=float,
        default=DEFAULT_TIME_LIMIT_S,
        metavar="S",
        help=f"seconds a tool call waits for its work before it answers with an error (default {DEFAULT_TIME_LIMIT_S:g}; "
        "the work goes on and its result is kept for the next call)",
    )
    p.add_argument(
        "--max-traces",
        type=int,
        default=4,
        metavar="N",
        help="loaded traces kept between calls, least recently used dropped first (default 4)",
    )
    p.add_argument(
        "--max-memory",
        default="2G",
        metavar="SIZE",
        help="estimated memory the kept traces may hold, e.g. 512M, 4G (default 2G); the trace in use always stays",
    )
    p.add_argument(
        "--text",
        choices=("short", "json"),
        default="short",
        help="the text block of each answer: 'short', a few lines of figures beside the structured content "
        "(default); 'json', those lines and then the structured content as JSON, for a client that shows "
        "the model only the text block (each answer then twice as large)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    """Run ``gapscope mcp`` with ``argv`` (without the ``mcp`` word); the exit status."""
    return guarded_run(run, argv)


def run(argv: list[str]) -> int:
    """Parse ``argv`` and serve until the client closes stdin. Raises ``UsageError``."""
    args = build_parser().parse_args(argv)
    if not args.time_limit > 0 or args.time_limit == float("inf"):
        raise UsageError(f"--time-limit must be a finite number of seconds > 0, got {args.time_limit!r}")
    if args.max_traces < 1:
        raise UsageError(f"--max-traces must be >= 1, got {args.max_traces}")
    from gapscope.settings import parse_size

    max_bytes = parse_size(args.max_memory)
    if max_bytes is None or max_bytes <= 0:
        raise UsageError(f"--max-memory must be a size such as 512M or 4G, got {args.max_memory!r}")
    try:
        import mcp  # noqa: F401 - only to say clearly when the extra is missing
    except ModuleNotFoundError:
        raise UsageError("gapscope mcp needs the 'mcp' extra: pip install 'gapscope[mcp]'") from None
    from gapscope.mcp.roots import OutsideRoots, Roots
    from gapscope.mcp.server import build_server
    from gapscope.mcp.service import Service
    from gapscope.mcp.store import TraceStore

    try:
        roots = Roots(args.root or None)
    except OutsideRoots as exc:
        raise UsageError(str(exc)) from None
    broad = [r for r in roots.folders if r == os.path.dirname(r) or r == os.path.expanduser("~")]
    if broad:  # a client started in / or the home folder, with no --root: say so once
        print(
            f"gapscope mcp: warning: the tools may read every file under {', '.join(broad)}; "
            "pass --root with the folder of your traces",
            file=sys.stderr,
        )
    from gapscope.mcp.service import load_trace

    store = TraceStore(load_trace, max_count=args.max_traces, max_bytes=max_bytes)
    server = build_server(Service(roots, store=store, time_limit_s=args.time_limit), text_json=args.text == "json")
    if sys.stdin is None or sys.stdin.closed:
        raise UsageError("gapscope mcp speaks on stdin/stdout: start it from an MCP client")
    server.run("stdio")
    return 0
