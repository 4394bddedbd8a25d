"""The ``gapscope`` command: dispatch to the viewer or a subcommand.

``gapscope [TRACE]`` opens the viewer (a bundled sample when TRACE is omitted);
``gapscope DIR``, ``gapscope FILE FILE…`` and ``gapscope report DIR|FILE FILE…`` take a
set of per-rank traces (``gapscope.ranks``);
``gapscope report``, ``gapscope diff``, ``gapscope capture``, ``gapscope exercise`` and
``gapscope mcp`` are subcommands.
Subcommand modules are imported lazily so ``report`` never imports Textual and
``capture`` never imports the viewer.

``--no-cache``, anywhere before a ``--``, is taken here for every command: it sets
``GAPSCOPE_NO_CACHE=1`` (``gapscope.parsers.cache``), so neither this process nor the
processes it starts (rank workers) read or write the trace cache.

Every ``GAPSCOPE_*`` variable is checked first (``gapscope.settings``): a value its
setting does not take is one line naming the variable, exit status 2.

Exit status: what the subcommand returns; 2 for bad input or usage (one line on
stderr); 1 for an unexpected exception, printed as one line naming its type with a
request to report it (set ``GAPSCOPE_DEBUG=1`` to get the traceback instead); 130
on Ctrl-C.
"""

from __future__ import annotations

import os
import sys
import textwrap
import threading

from gapscope.settings import SettingsError, read_settings

SUBCOMMANDS = {
    "report": "gapscope.report.cmd",
    "diff": "gapscope.diff.cmd",
    "capture": "gapscope.capture.cmd",
    "exercise": "gapscope.tui.exercise.cmd",
    "view": "gapscope.tui.cmd",
    "mcp": "gapscope.mcp.cmd",
}

#: ``report`` and the viewer on a rank set (a folder, or several files).
RANK_SET = {"report": "gapscope.ranks.cmd", "view": "gapscope.tui.ranks.cmd"}

#: One line per subcommand for ``gapscope --help``.
SUMMARIES = {
    "view": "open the terminal viewer on TRACE (the default: 'gapscope TRACE')",
    "report": "print a headless report: busy/idle, gaps with cause and card (--json, --markdown); on a folder of rank traces, the straggler",
    "diff": "compare BEFORE and AFTER traces: verdict, idle that died or remains (--fail-if-slower for CI)",
    "capture": "run a workload under torch.profiler and write a Kineto trace (needs the 'capture' extra)",
    "exercise": "work through a timeline exercise with the six-step protocol",
    "mcp": "serve the diagnosis to coding agents over the Model Context Protocol (needs the 'mcp' extra)",
}


def usage() -> str:
    """Top-level help text listing the subcommands."""
    lines = [
        "usage: gapscope [TRACE] | gapscope DIR | gapscope <command> [options]",
        "",
        "Find where the GPU sat idle in a profiler trace (torch.profiler/Kineto Chrome",
        "JSON, Chrome Trace Event Format, Perfetto .pftrace, Nsight Systems exports,",
        "ASCII timelines) and say why.",
        "",
        "commands:",
    ]
    for name in SUBCOMMANDS:  # wrapped at 80 columns, under the summary's first line
        lines += textwrap.wrap(
            SUMMARIES.get(name, ""), 80, initial_indent=f"  {name:<10}", subsequent_indent=" " * 12
        ) or [f"  {name}"]
    lines += [
        "",
        "options:",
        "  -h, --help     show this help and exit",
        "  -V, --version  print the version and exit",
        "  --no-cache     neither read nor write the cache of loaded traces (any command,",
        "                 anywhere before --; the same as GAPSCOPE_NO_CACHE=1)",
        "",
        "'gapscope <command> --help' shows the options of a command.",
    ]
    return "\n".join(lines) + "\n"


#: Set to 1 (unless the user set it) before numpy is imported, for every command but
#: ``capture``: numpy's OpenBLAS starts a thread per CPU at import, and those spin about
#: 0.1 s of CPU each waiting for work (OpenBLAS ``blas_thread_server``), but gapscope
#: makes no BLAS call. ``gapscope report`` of a small corpus trace
#: (``hta/overlaid_critical_path_trace.json.gz``) on 2 cores took 0.70 s of user CPU
#: without it and 0.58 s with it (medians of 5 alternating runs); the wall time stayed
#: the same, because the spinning ran on the other core.
OPENBLAS_THREADS_VAR = "OPENBLAS_NUM_THREADS"

#: Options of every command, taken out of the arguments before dispatch.
NO_CACHE_FLAG = "--no-cache"


def take_global_options(argv: list[str]) -> list[str]:
    """``argv`` without the options every command takes (``--no-cache``, before any
    ``--``), which take effect here: ``--no-cache`` sets ``GAPSCOPE_NO_CACHE=1``."""
    cut = argv.index("--") if "--" in argv else len(argv)
    if NO_CACHE_FLAG not in argv[:cut]:
        return argv
    os.environ["GAPSCOPE_NO_CACHE"] = "1"
    return [a for a in argv[:cut] if a != NO_CACHE_FLAG] + argv[cut:]


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit status (2 for bad input or usage)."""
    argv = take_global_options(list(sys.argv[1:] if argv is None else argv))
    try:  # every GAPSCOPE_* variable, before any command reads one
        read_settings()
    except SettingsError as exc:
        print(f"gapscope: error: {_one_line(str(exc))} (docs/settings.md lists what each takes)", file=sys.stderr)
        return 2
    if argv and argv[0] in ("-h", "--help", "help"):
        sys.stdout.write(usage())
        return 0
    if argv and argv[0] in ("-V", "--version"):
        from gapscope import __version__
        from gapscope.parsers.chrome import fastscan

        if fastscan.available():
            scanner = "C scanner (gapscope.parsers.chrome._xscan) and msgspec"
        elif not fastscan.built():
            scanner = "msgspec only: the C scanner was not built (install with a C compiler)"
        else:
            scanner = "msgspec only: GAPSCOPE_XSCAN=0"
        sys.stdout.write(f"gapscope {__version__}\nJSON traces read by: {scanner}\n")
        return 0
    if argv and argv[0] in SUBCOMMANDS:
        name, rest = argv[0], argv[1:]
    else:
        name, rest = "view", argv
    if name != "capture":  # the capture runs the user's workload, whose BLAS is its own
        os.environ.setdefault(OPENBLAS_THREADS_VAR, "1")
    if name in RANK_SET:
        from gapscope.ranks.discover import is_rank_set

        if is_rank_set(rest):
            return guarded(name, rest, RANK_SET[name])
    return guarded(name, rest)


#: The modules of the commands that run thread workers (the viewer's diagnosis, an MCP
#: tool call past its time limit), which may still be running when the user quits or
#: the client hangs up (``run``).
APP_MODULES = ("gapscope.tui.cmd", "gapscope.tui.exercise.cmd", "gapscope.mcp.cmd")

#: Whether this process ran one of ``APP_MODULES`` (set by ``guarded``).
_app_ran = False


def run() -> None:
    """The ``gapscope`` console script and ``python -m gapscope``: ``main()``'s status as
    the process's (``SystemExit``).

    After a viewer (``APP_MODULES``) whose worker threads still run (a daemon thread
    diagnosing the trace the user quit, inside numpy's C++ code), the interpreter's
    shutdown would end them with ``pthread_exit``, whose unwinding through C++ frames
    aborts the process (SIGABRT, "terminate called without an active exception": 2 of
    8 quits just after the whole trace replaced the device preview, at 1M events). The
    process then ends with ``os._exit`` instead, once every other non-daemon thread
    (the trace cache's writer) is done and the output is flushed."""
    rc = main()
    main_thread = threading.main_thread()
    others = [t for t in threading.enumerate() if t is not main_thread and t.is_alive()]
    if _app_ran and any(t.daemon for t in others):
        for t in others:
            if not t.daemon:
                t.join()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)
    raise SystemExit(rc)


def guarded(name: str, rest: list[str], module_name: str | None = None) -> int:
    """Import and run subcommand ``name`` (from ``module_name`` when given) with
    ``rest``; turn an unexpected exception
    into one line on stderr and exit status 1 (re-raised when ``GAPSCOPE_DEBUG`` is
    set, so a developer sees the traceback)."""
    import importlib

    global _app_ran
    try:
        if name == "diff" and "--view" in rest:  # the viewer of a pair: the view command opens it
            _app_ran = True
            return int(importlib.import_module(SUBCOMMANDS["view"]).diff_main(rest) or 0)
        module_name = module_name or SUBCOMMANDS[name]
        _app_ran = _app_ran or module_name in APP_MODULES
        module = importlib.import_module(module_name)
        return int(module.main(rest) or 0)
    except KeyboardInterrupt:
        return 130
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except BrokenPipeError:
        return 0
    except Exception as exc:  # the last line of defence: never a traceback for users
        if read_settings().debug:
            raise
        from gapscope.parsers.errors import TraceFormatError

        if isinstance(exc, TraceFormatError):
            print(f"gapscope: error: {_one_line(str(exc))}", file=sys.stderr)
            return 2
        if isinstance(exc, MemoryError):  # a memory limit (ulimit -v, a cgroup), not a fault of ours
            print(
                "gapscope: error: out of memory for this trace (a memory limit such as `ulimit -v` or the "
                "container's, or the machine's); give it more memory, or load a shorter capture",
                file=sys.stderr,
            )
            return 2
        print(
            f"gapscope: internal error: {type(exc).__name__}: {_one_line(str(exc))} "
            "(this is a bug in gapscope: please report it with the command line and, if you can, the trace; "
            "GAPSCOPE_DEBUG=1 shows the traceback)",
            file=sys.stderr,
        )
        return 1


def _one_line(text: str) -> str:
    """``text`` on one line, control characters made visible, at most 300 characters."""
    out = "".join(
        ch if ch.isprintable() else f"\\x{ord(ch):02x}" if ord(ch) < 256 else f"\\u{ord(ch):04x}" for ch in text
    )
    return out if len(out) <= 300 else out[:299] + "…"
