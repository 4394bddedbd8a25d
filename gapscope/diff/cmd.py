"""``gapscope diff BEFORE AFTER``: compare two traces (text, ``--markdown`` or ``--json``).

Loads and diagnoses both traces with the same thresholds, builds the diff document
(``gapscope.diff.document``) and prints it: the verdict, what the comparison can and
cannot claim, per-step figures, the idle positions matched across the traces (died,
shrank, grew, appeared, unchanged), GPU busy by kernel family, and the largest idle
left with its card. Never imports Textual; never writes the inputs.

Exit status: 0 ok; 1 with ``--fail-if-slower PCT`` when AFTER's step is slower than
BEFORE's by more than PCT percent beyond the noise, or when the diff cannot be judged
(a side has no complete steady-state step: a gate never passes on damaged input); 2 for bad input or usage, printed
as one line ``gapscope: error: PATH:LINE:COL: message (hint)``.
"""

from __future__ import annotations

import sys
from typing import IO

from gapscope.diff import document as diff_doc
from gapscope.diff.judge import CANNOT_JUDGE
from gapscope.report import args as report_args
from gapscope.report.args import Parser, UsageError, add_threshold_options, add_width_option, params_from_args
from gapscope.report.cmd import guarded_run, write_json, write_rich
from gapscope.units import fmt_delta

__all__ = ["main", "run", "build_parser", "check_slower", "load_pair"]

PROG = "gapscope diff"


def build_parser() -> Parser:
    """The ``gapscope diff`` argument parser (raises ``UsageError`` on bad usage)."""
    t = diff_doc.THRESHOLDS
    p = Parser(
        prog=PROG,
        description=(
            "Compare two traces of the same program, BEFORE and AFTER a change: the verdict (faster, "
            "slower, no change beyond noise), per-step figures, which idle positions died, shrank, grew, "
            "appeared or stayed, whether the kernels or the gaps moved, and the largest idle left with its card."
        ),
        epilog=(
            "Definitions: figures are medians over the steady steps of each trace (warm-up left out: the "
            "first of 3 or more steps, and steps inside a range named like warm-up), with their spread (median "
            f"absolute deviation). Noise = {t['noise_k']:g} x the larger step spread, at least "
            f"{100 * t['noise_floor_share']:g}% of the BEFORE step; a change beyond that floor also counts when "
            f"every AFTER step is slower (faster) than every BEFORE step, with {t['separate_min_steps']} or more steady "
            "steps each. Positions match by the GPU ops around the gap "
            "(kernel names without template arguments, parameter lists, addresses and numbers), whether it wraps "
            f"the step boundary, and its place in the step (within {100 * t['position_tol_share']:g}% of the step "
            "when only one neighbour matches); a matched position is unchanged when its idle per step moved by at most "
            f"{100 * t['unchanged_share']:g}% or by less than the minimum gap. The kernel mix is stated as different "
            f"below {100 * t['same_mix_share']:g}% of GPU busy time in common kernel families; below "
            f"{100 * t['unrelated_share']:g}% (and no graph capture explaining it) the traces are unrelated and "
            "get no verdict. A side with no complete steady-state step (its file cut off before any step "
            "is known to be complete, or no step to measure) gets no verdict either: 'cannot judge', with the "
            "reason; each side's loader warnings are shown. Exit status: 0 ok, 1 slower or cannot judge (with "
            "--fail-if-slower), 2 bad input or usage."
        ),
    )
    p.add_argument("before", metavar="BEFORE", help="the trace before the change (any format gapscope reads)")
    p.add_argument("after", metavar="AFTER", help="the trace after the change")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument(
        "--view",
        action="store_true",
        help="open the viewer: BEFORE above AFTER on one time axis aligned at the step, the diff "
        "table beside them; n/N walk the matched idle positions",
    )
    fmt.add_argument("--json", action="store_true", help="one JSON document with stable keys (docs/diff-json.md)")
    fmt.add_argument("--markdown", action="store_true", help="Markdown, for tickets and pull requests")
    p.add_argument(
        "--fail-if-slower",
        type=float,
        default=None,
        metavar="PCT",
        help="exit 1 when AFTER's step is slower than BEFORE's by more than PCT percent beyond the noise, "
        "or when the diff cannot be judged (a damaged or incomplete side; 0 otherwise; for CI)",
    )
    p.add_argument(
        "--top",
        type=int,
        default=10,
        metavar="N",
        help="rows of the position and kernel-family tables (default 10; --json has all)",
    )
    add_width_option(p)
    add_threshold_options(p)
    return p


def load_pair(before_path: str, after_path: str, params):
    """(before trace, its diagnosis, after trace, its diagnosis) with the same
    thresholds. Raises ``TraceFormatError`` for unreadable input."""
    from gapscope import parsers
    from gapscope.analysis import diagnose

    before = parsers.load(before_path)
    after = parsers.load(after_path)
    return before, diagnose(before, params), after, diagnose(after, params)


def check_slower(doc: dict, pct: float) -> dict:
    """The ``--fail-if-slower`` check of a diff document: ``failed`` when the step grew
    by more than ``pct`` % of BEFORE's step plus the verdict's margin (the noise, or
    its floor when every AFTER step is slower than every BEFORE step); a diff that
    cannot be judged (``judge.CANNOT_JUDGE``) fails with the reason; a diff of
    unrelated traces never fails (it says why). Returns ``pct``, ``limit_ns``,
    ``failed``, ``line``."""
    v = doc["verdict"]
    before = doc["per_step"]["wall_ns"]["before_ns"]
    if v["verdict"] == CANNOT_JUDGE:
        return dict(pct=pct, limit_ns=None, failed=True, line=f"FAILED: {v['line']}")
    if v["verdict"] == "not comparable" or before is None:
        return dict(pct=pct, limit_ns=None, failed=False, line=f"not checked ({v['line']})")
    limit = int(round(v["margin_ns"] + pct / 100.0 * before))
    failed = v["change_ns"] > limit
    grew = f"{100 * v['change_share']:+.1f}%"
    line = (
        f"{'FAILED' if failed else 'passed'}: step {grew} ({fmt_delta(v['change_ns'])}); the limit is {pct:g}% + "
        f"{'noise floor' if v['margin_ns'] != v['noise_ns'] else 'noise'} = {fmt_delta(limit)}"
    )
    return dict(pct=pct, limit_ns=limit, failed=bool(failed), line=line)


def main(argv: list[str] | None = None) -> int:
    """Run ``gapscope diff`` with ``argv`` (without the ``diff`` word); return the exit
    status. Bad input and bad usage print one line on stderr and return 2."""
    return guarded_run(run, argv)


def run(argv: list[str], stdout: IO[str] | None = None) -> int:
    """Parse ``argv``, load and diagnose both traces, print the diff on ``stdout``
    (default ``sys.stdout``) and return the exit status. Raises ``TraceFormatError`` /
    ``UsageError`` for bad input or usage."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    if args.top < 0:
        raise UsageError(f"--top must be >= 0, got {args.top}")
    if args.width is not None and args.width < 20:
        raise UsageError(f"--width must be >= 20, got {args.width}")
    pct = args.fail_if_slower
    if pct is not None and not (pct >= 0 and pct != float("inf")):
        raise UsageError(f"--fail-if-slower must be a finite percentage >= 0, got {pct!r}")
    params = params_from_args(args)

    from gapscope import __version__

    before, bd, after, ad = load_pair(args.before, args.after, params)
    doc = diff_doc.build_diff_document(before, bd, after, ad, version=__version__, paths=(args.before, args.after))
    if args.view:
        # the headless command never imports the viewer: ``gapscope diff --view`` is routed
        # to ``gapscope.tui.cmd.diff_main`` by the command line
        raise UsageError("--view opens the viewer: run it as 'gapscope diff --view BEFORE AFTER'")
    status = 0
    if pct is not None:
        doc["check"] = check_slower(doc, pct)
        status = 1 if doc["check"]["failed"] else 0
    out = sys.stdout if stdout is None else stdout
    tty = stdout is None and report_args.stdout_is_tty()
    if args.json:
        write_json(doc, out, indent=2 if tty else None)
    elif args.markdown:
        from gapscope.diff.markdown import render_diff_markdown

        out.write(render_diff_markdown(doc, top=args.top))
    else:
        from gapscope.diff.text import render_diff_text

        write_rich(lambda console: render_diff_text(doc, console, top=args.top), out, width=args.width, tty=tty)
    out.flush()
    if pct is not None and doc["verdict"]["verdict"] == "not comparable":
        print(f"gapscope: warning: --fail-if-slower not checked: {doc['verdict']['line']}", file=sys.stderr)
    if pct is not None and doc["verdict"]["verdict"] == CANNOT_JUDGE:
        print(f"gapscope: --fail-if-slower failed: {doc['verdict']['line']}", file=sys.stderr)
    return status
