"""``gapscope report TRACE``: the headless report (text, ``--markdown`` or ``--json``).

Loads the trace with ``gapscope.parsers.load``, diagnoses it with ``gapscope.analysis.diagnose`` and
prints format, span, lanes, per-device GPU busy and "fully idle", idle time per cause
class, the largest gaps, recurring groups with their cards, picket-fence episodes, the
per-step budget and the loader's warnings. Never imports Textual; never writes the input.

Exit status: 0 ok; 2 bad input (``TraceFormatError``: unreadable, not a trace) or bad
usage, printed as one line ``gapscope: error: <path>:<line>:<col>: message (hint)``.
Unexpected exceptions propagate from ``main`` (so tests see them); the ``gapscope``
entry point (``gapscope.cli``) turns them into one line and exit status 1.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import sys
from collections.abc import Callable
from typing import IO, Any

from gapscope.parsers.errors import TraceFormatError
from gapscope.report import args as report_args
from gapscope.report.args import UsageError, build_parser, params_from_args
from gapscope.report.fmt import safe_name

__all__ = ["main", "run", "error_line", "write_json", "write_rich", "silence_stdout"]

PROG = "gapscope report"


def error_line(message: str) -> str:
    """The one-line error printed on stderr: ``gapscope: error: <message>``, with any
    control character of the (possibly untrusted) message made visible."""
    return f"gapscope: error: {safe_name(message)}"


def main(argv: list[str] | None = None) -> int:
    """Run ``gapscope report`` with ``argv`` (without the ``report`` word); return the
    exit status. Bad input and bad usage print one line on stderr and return 2."""
    return guarded_run(run, argv)


def guarded_run(run_fn: Callable[[list[str]], int], argv: list[str] | None) -> int:
    """``run_fn(argv)`` (default ``sys.argv[1:]``) as a headless command runs it: bad
    input or usage (``TraceFormatError``, ``UsageError``) prints one line on stderr and
    returns 2; a closed output pipe returns 0 quietly. Shared by report, diff and ranks."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return run_fn(argv)
    except (TraceFormatError, UsageError) as exc:
        print(error_line(str(exc)), file=sys.stderr)
        return 2
    except BrokenPipeError:
        silence_stdout()
        return 0


def run(argv: list[str], stdout: IO[str] | None = None) -> int:
    """Parse ``argv``, load, diagnose and print the report on ``stdout`` (default
    ``sys.stdout``). Raises ``TraceFormatError`` / ``UsageError`` for bad input or
    usage; anything else is a bug and propagates."""
    parser = build_parser(PROG)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help prints and exits 0
        return int(exc.code or 0)
    if args.top < 0:
        raise UsageError(f"--top must be >= 0, got {args.top}")
    if args.width is not None and args.width < 20:
        raise UsageError(f"--width must be >= 20, got {args.width}")
    params = params_from_args(args)

    from gapscope import __version__, parsers
    from gapscope.report.document import build_document, diagnose_or_none

    trace = parsers.load(args.trace)
    diag = diagnose_or_none(trace, params)
    names = tuple(n.strip() for arg in args.what_if for n in arg.split(",") if n.strip())
    doc = build_document(trace, diag, top_n=args.top, version=__version__, full=args.json, what_if_names=names)
    out = sys.stdout if stdout is None else stdout
    if args.json:
        write_json(doc, out, indent=2 if (stdout is None and report_args.stdout_is_tty()) else None)
    elif args.markdown:
        from gapscope.report.markdown import render_markdown

        out.write(render_markdown(doc, top=args.top))
    else:
        from gapscope.report.text import render_text

        write_rich(
            lambda console: render_text(doc, console, top=args.top),
            out,
            width=args.width,
            tty=stdout is None and report_args.stdout_is_tty(),
        )
    out.flush()
    return 0


def write_rich(render: Callable[[Any], None], out: IO[str], *, width: int | None, tty: bool) -> None:
    """Call ``render(console)`` with a Rich console writing to ``out``: in colour on a
    terminal without ``NO_COLOR``; otherwise plain, with the cell padding Rich leaves at
    line ends dropped. ``width`` None: the terminal's, else ``$COLUMNS``, else 100."""
    from gapscope.report.text import make_console

    color = tty and not os.environ.get("NO_COLOR")
    if width is None:
        width = shutil.get_terminal_size((100, 24)).columns if tty else (_env_columns() or 100)
    if color:
        render(make_console(out, width=width, color=True))
    else:
        buf = io.StringIO()
        render(make_console(buf, width=width, color=False))
        out.write("\n".join(line.rstrip() for line in buf.getvalue().split("\n")))


def _env_columns() -> int | None:
    """``$COLUMNS`` when it is a width of 20 or more, at most ``MAX_WIDTH``."""
    from gapscope.report.args import MAX_WIDTH

    try:
        n = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        return None
    return min(n, MAX_WIDTH) if n >= 20 else None


_TERMINAL_UNSAFE = re.compile("[\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def write_json(doc: dict, out: IO[str], indent: int | None = None) -> None:
    """Write ``doc`` as UTF-8 JSON and a newline: compact (one line) for pipes and
    files, indented by ``indent`` on a terminal. Names stay verbatim; a lone surrogate
    (from a ``\\ud800`` escape in the input) is written as its JSON escape."""
    seps = (",", ":") if indent is None else (",", ": ")
    text = json.dumps(doc, indent=indent, separators=seps, ensure_ascii=False, allow_nan=False) + "\n"
    # json escapes C0 controls but not DEL and C1 (U+007F-U+009F: U+009B is an 8-bit
    # CSI that terminals obey), bidi overrides, nor U+2028/U+2029 (line breaks to
    # JavaScript and to some terminals and editors); such characters only occur inside strings,
    # so their \uXXXX escapes keep the document valid and the value verbatim.
    text = _TERMINAL_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    buf = getattr(out, "buffer", None)
    if buf is not None:
        out.flush()
        buf.write(text.encode("utf-8", errors="backslashreplace"))
        buf.flush()
    else:
        out.write(text.encode("utf-8", errors="backslashreplace").decode("utf-8"))


def silence_stdout() -> None:
    """After a broken pipe (``gapscope report x | head``): stop Python's flush at exit
    from raising again (recipe from the Python ``signal`` documentation)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
