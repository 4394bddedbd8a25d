"""``gapscope exercise``: guided exercises in the viewer.

- ``gapscope exercise``: list the bundled exercises with this learner's progress;
- ``gapscope exercise NAME``: run one (bundled id, unique id prefix, or a ``.toml`` path);
- ``gapscope exercise --check FILE...``: validate exercise files against their traces
  (exit 0 when every key agrees with the diagnosis, 1 when one does not, 2 when a file
  cannot be loaded as an exercise; warnings do not fail);
- ``gapscope exercise --reset [NAME]``: forget progress of one exercise or all.

Errors and warnings are one line each on stderr in the form of ``gapscope report``:
``gapscope: error: PATH[:LINE[:COL]]: message (hint)``; bad input (an unknown exercise,
a file that is no exercise, an unreadable trace) exits 2.

Progress lives in ``$GAPSCOPE_STATE_DIR`` or the XDG state directory
(``platformdirs.user_state_dir("gapscope")``: ``$XDG_STATE_HOME/gapscope``, by default
``~/.local/state/gapscope`` on Linux), per learner (``$GAPSCOPE_LEARNER`` or the login
name); ``--help`` prints the resolved path and how to reset it. The file format is
described in ``docs/exercises.md``.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["main"]


def progress_help() -> str:
    """The ``--help`` epilog: where this learner's progress is kept (the resolved file
    path, then the rule that gives it) and how to reset it."""
    from gapscope.exercise.progress import learner_name, state_dir

    path = state_dir() / f"progress-{learner_name()}.json"
    return (
        "progress:\n"
        f"  kept in {path}\n"
        "  (directory: $GAPSCOPE_STATE_DIR when set, else the state directory of the\n"
        "  platform: $XDG_STATE_HOME/gapscope, by default ~/.local/state/gapscope on\n"
        "  Linux; one file per learner: $GAPSCOPE_LEARNER or the login name). Saved after\n"
        "  every answer and hint; running an exercise again resumes where you left it.\n"
        "  reset: 'gapscope exercise --reset NAME' (one exercise), '--reset' (all), or\n"
        "  delete the file.\n"
        "\n"
        "exercise files (format, --check): docs/exercises.md"
    )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gapscope exercise",
        description="Guided timeline exercises: find the white space on the GPU lane, say why, prove it.",
        epilog=progress_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("name", nargs="?", help="exercise to run (bundled id, unique prefix, or path to a .toml file)")
    p.add_argument(
        "--check", nargs="+", metavar="FILE", help="validate exercise files against what the diagnosis computes"
    )
    p.add_argument("--reset", action="store_true", help="forget progress of NAME (or of every exercise)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the subcommand; returns the exit status (0 ok, 1 check failed or progress not
    saved, 2 bad usage or bad input: unknown exercise, a file that is no exercise, an
    unreadable trace)."""
    args = _parser().parse_args(argv)
    from gapscope.exercise import ExerciseError, ProgressStore, check_exercise, find
    from gapscope.report.cmd import error_line

    out = sys.stdout
    if args.check:
        status = 0
        for f in args.check:
            rep = check_exercise(f)
            status = max(status, 2 if rep.unloadable else 0 if rep.ok else 1)
            for line in rep.lines():
                print(line, file=sys.stderr if line.startswith("gapscope: ") else out)
        return status
    store = ProgressStore()
    if store.notice:
        from gapscope.report.fmt import safe_name

        print(f"gapscope: warning: {safe_name(store.notice)}", file=sys.stderr)
    if args.reset:
        if args.name:
            try:
                ex = find(args.name)
            except ExerciseError as exc:
                print(error_line(str(exc)), file=sys.stderr)
                return 2
            store.reset(ex.id)
            done = f"progress of {ex.id} reset ({store.path})"
        else:
            gone = store.reset(None)
            done = f"progress reset for {len(gone)} exercise(s) ({store.path})"
        if store.error:  # not saved: it was not reset
            print(error_line(store.error), file=sys.stderr)
            return 1
        print(done, file=out)
        return 0
    if not args.name:
        return _list(store, out)
    try:
        ex = find(args.name)
    except ExerciseError as exc:
        print(error_line(str(exc)), file=sys.stderr)
        return 2
    from gapscope.exercise import Workbook
    from gapscope.parsers.errors import TraceFormatError

    workbook = Workbook(ex)
    try:  # load and diagnose every trace before the screen opens: errors as one line
        for ref in ex.traces:
            workbook.facts(ref.id)
    except TraceFormatError as exc:  # names the trace file, line and column
        print(error_line(str(exc)), file=sys.stderr)
        return 2
    from gapscope.tui.exercise.app import make_exercise_app

    make_exercise_app(ex, store=store, workbook=workbook).run()
    return 0


def _list(store, out) -> int:
    from gapscope.exercise import ExerciseError, bundled_paths, load_exercise

    print(f"Exercises (progress of {store.learner}, {store.path}):", file=out)
    status = 0
    for p in bundled_paths():
        try:
            ex = load_exercise(p)
        except ExerciseError as exc:
            print(f"  {p.stem:<16} BROKEN: {exc}", file=out)
            status = 1
            continue
        done, total, finished = store.summary(ex.id, len(ex.tasks))
        mark = "done" if finished else f"{done}/{total}"
        print(f"  {ex.id:<16} {mark:>6}  {ex.title}", file=out)
        if ex.summary:
            print(f"  {'':<16} {'':>6}  {ex.summary}", file=out)
    print("Run one with: gapscope exercise NAME", file=out)
    return status
