"""``gapscope capture``: record a torch.profiler trace of a script or a built-in scenario.

Imports torch only when a capture runs (``--help`` and ``--list`` work without it),
and the viewer's packages only for the one-line summary printed afterwards.
"""

from __future__ import annotations

import argparse
import os
import sys

from gapscope.capture.naming import SUFFIX, check_writable, fallback_dir

__all__ = ["main", "build_parser"]

_EPILOG = f"""\
step marking: call gapscope.capture.step() once per iteration in your script (from gapscope import capture;
a no-op without gapscope). The first call ends set-up; then --wait steps are skipped,
--warmup steps warm the profiler up and --active steps are recorded into one trace.
A script that never calls gapscope.capture.step() is recorded for a time window: --seconds
from the start (after --delay), or until it ends.

files: OUT/HOST_PID_YYYYmmddTHHMMSSZ_LABEL{SUFFIX}; an existing file is never
overwritten (a -1, -2... name is used), a trace is written under a temporary name and
renamed when complete, and it is written even when the script raises or you press
Ctrl-C. If OUT cannot be written, traces go to {fallback_dir()} and the message says so.

output: the script's stdout/stderr are its own; gapscope's lines go to stderr,
prefixed 'gapscope capture:'. With --scenario the trace path is also printed on stdout.
exit status: the script's (130 after Ctrl-C); 2 for a usage error or missing torch.

examples:
  gapscope capture --out traces -- python train.py --epochs 1
  gapscope capture --scenario decode --out traces
  gapscope capture --list
"""


def _torch_note() -> str:
    try:
        import importlib.util

        if importlib.util.find_spec("torch") is not None:
            return ""
    except (ImportError, ValueError):
        pass
    return (
        "\nPyTorch is NOT installed here: capture needs it (torch>=2.4). Install it with\n"
        "  pip install 'gapscope[capture]'   (or, in a gapscope checkout: pip install -e '.[capture]')\n"
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for ``gapscope capture`` (options before ``--`` only)."""
    from gapscope.capture.scenarios import SCENARIOS

    p = argparse.ArgumentParser(
        prog="gapscope capture",
        usage="gapscope capture [--out DIR] [options] -- python script.py args...\n"
        "       gapscope capture --scenario NAME [--out DIR] [options]",
        description="Record a torch.profiler (Kineto) trace with the settings gap analysis needs: "
        "CPU + CUDA activity, ProfilerStep ranges, a wait/warm-up/active schedule." + _torch_note(),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", default=".", metavar="DIR", help="folder for the trace (created if missing; default: .)")
    p.add_argument(
        "--scenario",
        choices=sorted(SCENARIOS),
        metavar="NAME",
        help="run a built-in workload instead of a script: " + ", ".join(SCENARIOS),
    )
    p.add_argument("--list", action="store_true", help="list the scenarios and the smell each reproduces")
    p.add_argument("--tiny", action="store_true", help="scenario: smallest sizes and fewest steps (tests, slow CPUs)")
    p.add_argument(
        "--wait",
        type=int,
        default=1,
        metavar="N",
        help="script steps skipped after the first gapscope.capture.step() (default 1; scenarios have their own schedule)",
    )
    p.add_argument(
        "--warmup", type=int, default=1, metavar="N", help="profiler warm-up steps, not recorded (default 1)"
    )
    p.add_argument("--active", type=int, default=5, metavar="N", help="steps recorded into the trace (default 5)")
    p.add_argument(
        "--repeat", type=int, default=1, metavar="N", help="cycles, one trace each; 0 = until the end (default 1)"
    )
    p.add_argument(
        "--seconds",
        type=float,
        default=5.0,
        metavar="S",
        help="time window when the script marks no steps; 0 = the whole run (default 5)",
    )
    p.add_argument(
        "--delay", type=float, default=0.0, metavar="S", help="start the time window after S seconds (default 0)"
    )
    p.add_argument("--cpu-only", action="store_true", help="record CPU activity only, even when CUDA is available")
    p.add_argument("--record-shapes", action="store_true", help="record operator input shapes (more overhead)")
    p.add_argument("--with-stack", action="store_true", help="record Python source locations (more overhead)")
    p.add_argument("--label", metavar="TEXT", help="text added to the file name (default: script or scenario name)")
    p.add_argument("--no-summary", action="store_true", help="do not print the one-line diagnosis afterwards")
    return p


def _say(msg: str) -> None:
    try:
        print("gapscope capture: " + msg, file=sys.stderr, flush=True)
    except BrokenPipeError:  # stderr piped to a reader that is gone (a Ctrl-C reaches it too)
        _quiet_stdio()


def _report(traces: list[str], summary: bool) -> None:
    for path in traces:
        _say(f"trace: {path}")
        if summary:
            from gapscope.capture.summary import summary_line

            _say(f"summary: {summary_line(path)}")
            _say(f"full report: gapscope report {path}")


def main(argv: list[str] | None = None) -> int:
    """Run ``gapscope capture``; return the exit status (see ``--help``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" in argv:
        cut = argv.index("--")
        opts, cmd = argv[:cut], argv[cut + 1 :]
    else:
        opts, cmd = argv, []
    parser = build_parser()
    try:
        ns = parser.parse_args(opts)
    except SystemExit as e:  # --help (0) or a usage error (2)
        return int(e.code or 0)
    if ns.list:
        from gapscope.capture.scenarios import SCENARIOS

        for s in SCENARIOS.values():
            print(f"{s.name:13s} {s.smell} ({s.cause}): {s.about}")
        return 0
    if ns.scenario and cmd:
        _say("give either --scenario NAME or a command after --, not both")
        return 2
    if not ns.scenario and not cmd:
        parser.print_usage(sys.stderr)
        _say("nothing to run: give a command after -- (e.g. -- python train.py) or --scenario NAME")
        return 2
    from gapscope.capture.profile import Schedule, TorchMissing, require_torch

    try:
        require_torch()
    except TorchMissing as exc:
        _say(str(exc))
        return 2
    try:
        schedule = Schedule(wait=ns.wait, warmup=ns.warmup, active=ns.active, repeat=ns.repeat)
    except ValueError as exc:
        _say(str(exc))
        return 2
    problem = check_writable(ns.out)
    if problem:
        _say(f"cannot write to {ns.out} ({problem}): traces will go to {fallback_dir()}")
    from gapscope.capture.profile import LOW_SPACE_BYTES, free_bytes

    free = free_bytes(ns.out)
    if not problem and free < LOW_SPACE_BYTES:
        _say(
            f"only {free / 2**20:,.0f} MiB free in {ns.out}: a trace may need hundreds of MB "
            "(it is written to the folder with the most space, or fails with the reason)"
        )
    cuda = False if ns.cpu_only else None
    if ns.scenario:
        return _run_scenario(ns, cuda)
    return _run_script(ns, cmd, schedule, cuda)


def _run_scenario(ns: argparse.Namespace, cuda: bool | None) -> int:
    """Run the scenario ``ns.scenario``; its status: 0, 128 + the signal that stopped
    it (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP: the trace recorded until then
    is written and printed all the same, as in script mode), or 1 when no trace was
    written."""
    import signal

    from gapscope.capture.scenarios import SCENARIOS, run_scenario

    sc = SCENARIOS[ns.scenario]
    _say(f"scenario {sc.name}: {sc.about}")
    status = 0
    try:
        prof = run_scenario(
            sc.name, ns.out, tiny=ns.tiny, cuda=cuda, record_shapes=ns.record_shapes, with_stack=ns.with_stack, log=_say
        )
    except KeyboardInterrupt:  # before the profiler ran (set-up): nothing recorded
        _say("interrupted (Ctrl-C) before recording began: no trace written")
        return 130
    if prof.stopped_by is not None:
        status = 128 + prof.stopped_by
        if prof.stopped_by != signal.SIGINT:
            _say(f"stopped by {signal.Signals(prof.stopped_by).name}")
    try:
        for t in prof.traces:
            print(t, flush=True)
        _report(prof.traces, not ns.no_summary)
    except BrokenPipeError:  # the reader of a pipe is gone (Ctrl-C reaches it too): keep the status
        _quiet_stdio()
    if not prof.traces and status == 0:
        status = 1
    return status


def _run_script(ns: argparse.Namespace, cmd: list[str], schedule, cuda: bool | None) -> int:
    from gapscope.capture.runner import CommandError, ScriptRunner

    runner = ScriptRunner(
        ns.out,
        schedule=schedule,
        seconds=ns.seconds,
        delay=ns.delay,
        label=ns.label,
        cuda=cuda,
        record_shapes=ns.record_shapes,
        with_stack=ns.with_stack,
        log=_say,
    )
    try:
        status = runner.run(cmd)
    except CommandError as exc:
        _say(str(exc))
        return 2
    except KeyboardInterrupt:  # a second Ctrl-C, delivered once the trace was written
        status = 130
    if runner.mode == "window":
        # the trace holds one ProfilerStep#0 all the same: the window is recorded as one step
        _say(
            "the script marked no steps (gapscope.capture.step()): recorded a time window "
            "as one step (ProfilerStep#0 in the trace)"
        )
    else:
        _say(f"the script marked {runner.steps} steps")
    try:
        _report(runner.traces, not ns.no_summary)
    except BrokenPipeError:  # the reader of a pipe is gone (Ctrl-C reaches it too): keep the status
        _quiet_stdio()
    if not runner.traces and runner.errors and status == 0:
        status = 1  # the trace could not be written: the message above says why
    return status


def _quiet_stdio() -> None:
    """Point stdout and stderr at /dev/null so the interpreter's final flush to a
    closed pipe cannot change the exit status."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        for stream in (sys.stdout, sys.stderr):
            try:
                os.dup2(devnull, stream.fileno())
            except (OSError, ValueError):
                pass
    except OSError:
        pass
