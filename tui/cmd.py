"""``gapscope [TRACE]``: open the viewer (the bundled decode-step sample without TRACE).

Bad input prints one line, ``gapscope: error: PATH[:LINE:COL]: message (hint)`` (the
form of ``gapscope report``), to stderr and exits 2. What ``gapscope.parsers.detect.sniff`` can
check cheaply is checked before the full-screen UI starts; errors found while loading
are printed in the same form after the UI closes.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported with the options (``_Parser.add_thresholds``): after the load begins
    from gapscope.analysis.types import Params

__all__ = ["main", "diff_main"]


class _Parser(argparse.ArgumentParser):
    """The viewer's parser; its epilog (the keys, and the gap thresholds' defaults)
    and its threshold options (those of ``gapscope report``:
    ``gapscope.report.args.add_threshold_options``), which import the analysis, are
    added only when the help is printed or an option is given, so that a trace's
    load starts before the analysis is imported."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.thresholds_added = False

    def add_thresholds(self) -> None:
        """Add the threshold options of ``gapscope report`` (once)."""
        if not self.thresholds_added:
            from gapscope.report.args import add_threshold_options

            add_threshold_options(self)
            self.thresholds_added = True

    def parse_args(self, args=None, namespace=None):
        argv = sys.argv[1:] if args is None else list(args)
        if any(a.startswith("-") for a in argv):
            self.add_thresholds()
        return super().parse_args(argv, namespace)

    def format_help(self) -> str:
        self.add_thresholds()
        self.epilog = _epilog()
        return super().format_help()


def _epilog() -> str:
    from gapscope.analysis.types import Params

    d = Params()
    return (
        "keys: n/N next/previous gap, s largest first or time order, 1-4 next sync/copy/launch/host gap\n"
        "      (wraps; shift: ! @ # $ previous), +/- zoom around the cursor, h/l pan (H/L a page),\n"
        "      z zoom to gap, Z zoom to step, g go to time, / search names (m/M next/previous match),\n"
        "      % or J kernel<->launch, f fit all, p card, PgDn/PgUp scroll the card, w loader warnings,\n"
        "      ? help (all keys), q quit\n"
        f"thresholds: a gap is >= {d.min_gap_ns / 1000:g} us of no kernel on a device; launch-overhead gaps are\n"
        f"      <= {d.launch_gap_max_ns / 1000:g} us inside runs of >= {d.picket_min_kernels} kernels of <= {d.short_kernel_max_ns / 1000:g} us;"
        f" a sync-signature copy is <= {d.small_copy_max_bytes // 1024} KiB"
    )


def _parser() -> _Parser:
    p = _Parser(
        prog="gapscope",
        description="Terminal viewer for GPU profiler traces: walk the idle GPU gaps and see why.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "trace",
        nargs="?",
        help="Kineto/Chrome trace JSON (.json, .json.gz), ASCII timeline (.txt) or Nsight Systems export (.sqlite, .nsys-rep); default: bundled decode-step sample",
    )
    return p


def _params(p: _Parser, args: argparse.Namespace) -> tuple[Params | None, str | None]:
    """(the thresholds given, None): ``gapscope.report.args.params_from_args``'s
    ``Params``, or None when no option was given (the diagnosis's defaults); or
    (None, why) for a bad one (``UsageError``'s line)."""
    if not p.thresholds_added:
        return None, None
    from gapscope.report.args import UsageError, params_from_args

    try:
        return params_from_args(args), None
    except UsageError as exc:
        return None, str(exc)


def main(argv: list[str] | None = None) -> int:
    """Run the viewer; returns the exit status (0 ok, 1 load cancelled, 2 bad input)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.trace is None:
        from gapscope import sample_traces

        path = str(sample_traces.path())
    else:
        path = args.trace
    from gapscope.parsers.detect import sniff
    from gapscope.parsers.errors import TraceFormatError

    params, usage = _params(parser, args)
    if usage is not None:
        from gapscope.report.cmd import error_line

        print(error_line(usage), file=sys.stderr)
        return 2
    try:
        sniff(path)  # cheap checks before the full-screen UI starts (no escape codes)
    except TraceFormatError as exc:
        from gapscope.report.cmd import error_line

        print(error_line(str(exc)), file=sys.stderr)
        return 2
    from gapscope.parsers.preview import EarlyLoad
    from gapscope.settings import read_settings

    # its forked decoders run while the viewer's modules are imported (the report's
    # and the analysis's too: imported after it); a large file's device lanes come
    # first, drawn while the rest is read
    early = EarlyLoad(path, preview=not read_settings().no_preview)
    from gapscope.report.cmd import error_line
    from gapscope.tui.factory import early_options, make_app

    app = make_app(path, early_options(early, params))
    rc = app.run()
    if app.error:
        print(error_line(app.error), file=sys.stderr)
        return 2
    if app.cancelled:
        print("gapscope: load cancelled", file=sys.stderr)
        return 1
    return int(rc or app.return_code or 0)


def diff_main(argv: list[str]) -> int:
    """``gapscope diff --view BEFORE AFTER``: load and diagnose both traces (the options of
    ``gapscope diff``) and open the diff viewer (``gapscope.tui.diff_view``). Bad input or
    usage prints one line in the house form and returns 2."""
    from gapscope.diff import cmd as diff_cmd
    from gapscope.diff import document as diff_doc
    from gapscope.parsers.errors import TraceFormatError
    from gapscope.report.args import UsageError, params_from_args
    from gapscope.report.cmd import error_line

    try:
        try:
            args = diff_cmd.build_parser().parse_args(argv)
        except SystemExit as exc:  # --help
            return int(exc.code or 0)
        before, bd, after, ad = diff_cmd.load_pair(args.before, args.after, params_from_args(args))
    except (TraceFormatError, UsageError) as exc:
        print(error_line(str(exc)), file=sys.stderr)
        return 2
    from gapscope.tui.diff_view import make_diff_app

    doc = diff_doc.build_diff_document(before, bd, after, ad, paths=(args.before, args.after))
    b_side, a_side, matches = diff_doc.diff_sides(before, bd, after, ad)
    if not doc["judgement"]["judged"]:
        matches = []  # as the document: a side without complete steps has no positions to compare
    make_diff_app(b_side, a_side, matches, verdict=doc["verdict"]["line"], labels=(args.before, args.after)).run()
    return 0
