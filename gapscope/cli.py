"""The ``gapscope`` command: dispatch to the viewer or a subcommand.

``gapscope [TRACE]`` opens the viewer (a bundled sample when TRACE is omitted);
``gapscope report``, ``gapscope capture`` and ``gapscope exercise`` are subcommands.
Subcommand modules are imported lazily so ``report`` never imports Textual and
``capture`` never imports the viewer.
"""

from __future__ import annotations

import sys

SUBCOMMANDS = {
    "report": "gapscope.report_cmd",
    "capture": "capture.cli",
    "exercise": "gapscope.exercise_cmd",
    "view": "gapscope.view_cmd",
}


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit status (2 for bad input or usage)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS:
        name, rest = argv[0], argv[1:]
    else:
        name, rest = "view", argv
    import importlib

    module = importlib.import_module(SUBCOMMANDS[name])
    try:
        return int(module.main(rest) or 0)
    except KeyboardInterrupt:
        return 130
