"""Run a user's Python script in this process under the profiler.

Step-marking rule: a script marks the end of each step (iteration) by calling
``gapscope.capture.step()`` (a no-op when the script runs without gapscope). The runner
starts recording at once in *window* mode (the whole run, up to ``seconds``); at the
script's first ``gapscope.capture.step()`` it drops the window recording (it only held set-up)
and switches to *step* mode: a ``Schedule`` counted from that call, so the trace
holds ``active`` steady-state steps after ``wait`` + ``warmup`` steps. A script that
never calls ``gapscope.capture.step()`` gets the time window: recording from start (or after
``delay`` seconds) for ``seconds`` seconds, ended by a ``SIGALRM`` timer on the main
thread, or at the end of the script if that comes first.

The script runs as ``__main__`` through ``runpy`` with ``sys.argv`` and ``sys.path[0]``
set as Python would; its exit status is returned (``SystemExit`` code, 1 after an
uncaught exception with its traceback printed, 130 after Ctrl-C). Whatever ends the
script, the recording so far is written.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any

from gapscope.capture.profile import Profiler, Schedule, _pop, _push
from gapscope.capture.signals import Stopped, stop_on_signals
from gapscope.capture.terminal import name_main_thread

__all__ = ["ScriptRunner", "parse_command", "CommandError"]


class CommandError(ValueError):
    """The command after ``--`` is not something the runner can run in-process."""


def _is_python(token: str) -> bool:
    base = os.path.basename(token)
    if base.endswith(".exe"):
        base = base[:-4]
    return (
        base == "python"
        or (base.startswith("python") and base[6:].replace(".", "").isdigit())
        or os.path.realpath(token) == os.path.realpath(sys.executable)
    )


def parse_command(cmd: list[str]) -> tuple[str, str, list[str]]:
    """Split ``python [-u|-O|-X opt ...] script.py args...`` or ``python -m mod args...``.

    Returns ``(mode, target, argv)`` with mode ``"path"`` or ``"module"`` and ``argv``
    the script's ``sys.argv``. A bare ``script.py args`` is accepted too. Raises
    ``CommandError`` for anything else (the runner executes Python in-process).
    """
    if not cmd:
        raise CommandError("no command: use  gapscope capture [options] -- python script.py args...")
    rest = list(cmd)
    if _is_python(rest[0]):
        rest = rest[1:]
        while rest and rest[0].startswith("-") and rest[0] not in ("-m", "-c", "-"):
            flag = rest.pop(0)
            if flag in ("-X", "-W") and rest:
                rest.pop(0)
        if not rest:
            raise CommandError("no script after python: use  -- python script.py args...")
        if rest[0] == "-m":
            if len(rest) < 2:
                raise CommandError("-m needs a module name")
            return "module", rest[1], [rest[1], *rest[2:]]
        if rest[0] in ("-c", "-"):
            raise CommandError("python -c and stdin scripts are not supported: put the code in a file")
        return "path", rest[0], rest
    if rest[0].endswith(".py"):
        return "path", rest[0], rest
    raise CommandError(
        f"{rest[0]!r} is not a Python command: capture runs Python in-process, "
        "use  -- python script.py args...  (for other programs use torch.profiler in them)"
    )


class ScriptRunner:
    """Profile one run of a Python script; see the module docstring for the rules.

    ``ScriptRunner(out_dir, *, schedule=Schedule(wait=1, warmup=1, active=5),
    seconds=5.0, delay=0.0, label=None, cuda=None, record_shapes=False,
    with_stack=False, log=None)``. ``seconds <= 0`` records the whole run in window
    mode. After ``run(cmd)``: ``traces`` (paths), ``mode`` (``"window"`` or
    ``"steps"``), ``steps`` (``gapscope.capture.step()`` calls seen), ``messages``.
    """

    def __init__(
        self,
        out_dir: str = ".",
        *,
        schedule: Schedule | None = None,
        seconds: float = 5.0,
        delay: float = 0.0,
        label: str | None = None,
        cuda: bool | None = None,
        record_shapes: bool = False,
        with_stack: bool = False,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.out_dir = out_dir
        self.schedule = schedule or Schedule(wait=1, warmup=1, active=5)
        self.seconds = float(seconds)
        self.delay = float(delay)
        self.label = label
        self.cuda = cuda
        self.record_shapes = record_shapes
        self.with_stack = with_stack
        self.traces: list[str] = []
        self.errors: list[str] = []  # why a trace could not be written (Profiler.error)
        self.messages: list[str] = []
        self.mode = "window"
        self.steps = 0
        self._current: Profiler | None = None
        self._setup: Profiler | None = None
        self._busy = False
        self._alarm_installed = False
        self._old_alarm: Any = None
        self._log = log
        self._said: set[str] = set()

    def _say_once(self, msg: str) -> None:
        """Pass a profiler message on, once: both profilers of a run say the same notes."""
        if msg in self._said:
            return
        self._said.add(msg)
        (self._log or _stderr)(msg)

    # -- profiler switching ------------------------------------------------------------
    def _new(self, schedule: Schedule | None) -> Profiler:
        p = Profiler(
            self.out_dir,
            schedule=schedule,
            label=self.label,
            cuda=self.cuda,
            record_shapes=self.record_shapes,
            with_stack=self.with_stack,
            log=self._say_once,
        )
        p.step_offset = self.steps
        return p

    def _collect(self, p: Profiler) -> None:
        self.traces.extend(t for t in p.traces if t not in self.traces)
        if p.error and p.error not in self.errors:
            self.errors.append(p.error)
        self.messages.extend(p.messages)

    def _start_window(self) -> None:
        if self._current is not None or self.mode != "window":
            return
        p = self._new(None)
        p.start()
        _pop(p)  # gapscope.capture.step() must reach the runner, not the window profiler
        self._current = p
        if self.seconds > 0:
            self._arm(self.seconds, self._end_window)

    def _end_window(self) -> None:
        p, self._current = self._current, None
        if p is not None:
            try:
                p.stop()
            finally:
                self._collect(p)
            if self.seconds > 0:
                p.say(f"time window of {self.seconds:g} s ended; the rest of the script runs unprofiled")

    def step(self) -> None:
        """``gapscope.capture.step()`` from the script: switch to step mode on the first call."""
        self.steps += 1
        self._busy = True
        try:
            if self.mode == "window":
                self.mode = "steps"
                self._disarm()
                if self._current is not None:
                    # the set-up recording: held, written only if the steps yield no trace
                    self._current.stop(discard=True)
                    self._setup, self._current = self._current, None
                p = self._new(self.schedule)
                p.start()
                _pop(p)
                self._current = p
                return
            if self._current is not None:
                self._current.step()
                if self._current.traces and self._setup is not None:
                    self._setup.drop_held()
                    self._setup = None
        finally:
            self._busy = False

    # -- SIGALRM timer -----------------------------------------------------------------
    def _arm(self, after_s: float, action: Callable[[], None]) -> None:
        if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
            return  # no timer: the window ends with the script

        def on_alarm(signum: int, frame: Any) -> None:
            if self._busy:  # inside our own code: try again shortly
                signal.setitimer(signal.ITIMER_REAL, 0.01)
                return
            self._busy = True
            try:
                action()
            finally:
                self._busy = False

        if not self._alarm_installed:
            self._old_alarm = signal.signal(signal.SIGALRM, on_alarm)
            self._alarm_installed = True
        else:
            signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, after_s)

    def _disarm(self) -> None:
        if self._alarm_installed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._old_alarm)
            self._alarm_installed = False

    # -- running ---------------------------------------------------------------------------
    def run(self, cmd: list[str]) -> int:
        """Run ``cmd`` (see ``parse_command``) under the profiler; return its exit status.

        Raises ``CommandError`` for a command that cannot run in-process and
        ``TorchMissing`` without torch; everything the script raises is turned into
        its exit status (the traceback printed to stderr, as Python does).
        """
        mode, target, argv = parse_command(cmd)
        if mode == "path" and not os.path.isfile(target):
            raise CommandError(f"script not found: {target}")
        if self.label is None:
            self.label = os.path.splitext(os.path.basename(target))[0] if mode == "path" else target
        saved_argv = sys.argv[:]
        sys.argv = argv
        # the script's lane reads 'thread N (train.py)', not the process's '(gapscope)'
        old_name = name_main_thread(os.path.basename(target) if mode == "path" else target)
        # as python does: the script's folder (or, for -m, the current folder) first on sys.path
        added = os.path.dirname(os.path.abspath(target)) if mode == "path" else os.getcwd()
        sys.path.insert(0, added)
        status = 0
        exc: BaseException | None = None
        _push(self)
        restore = stop_on_signals()
        try:
            if self.delay > 0:
                self._arm(self.delay, self._start_window)
            else:
                self._start_window()
            if mode == "module":
                runpy.run_module(target, run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(target, run_name="__main__")
        except SystemExit as e:
            status = _exit_code(e.code)
        except KeyboardInterrupt as e:
            exc, status = e, 130
        except Stopped as e:  # SIGTERM / SIGHUP: write the trace, then the shell's status
            exc, status = e, 128 + e.signum
            (self._log or _stderr)(f"stopped by {signal.Signals(e.signum).name}: writing the trace")
        except BaseException as e:  # noqa: BLE001 - the script's own error: report it as Python would
            exc, status = e, 1
            _print_script_traceback(e)
        finally:
            self._disarm()
            _pop(self)
            try:
                self._finish(exc)
            finally:
                restore()
            sys.argv = saved_argv
            if old_name is not None:
                name_main_thread(old_name)
            try:
                sys.path.remove(added)
            except ValueError:
                pass
        return status

    def _finish(self, exc: BaseException | None) -> None:
        p, self._current = self._current, None
        if p is not None:
            try:
                p.stop(exc)
            finally:
                self._collect(p)
        setup, self._setup = self._setup, None
        if setup is not None:
            if self.traces:
                setup.drop_held()
            else:
                path = setup.write_held()
                if path:
                    self.traces.append(path)
                    self._say_once(
                        "the step schedule recorded nothing, so the set-up recording (start of the "
                        f"script to its first gapscope.capture.step()) was written instead: {path}"
                    )
        if not self.traces and self.mode == "window" and self.delay > 0 and p is None:
            msg = f"no trace written: the script ended before the {self.delay:g} s delay"
            self.messages.append(msg)
            (self._log or _stderr)(msg)


def _print_script_traceback(exc: BaseException) -> None:
    """Print ``exc``'s traceback as Python would for the script: without the runner's
    and runpy's frames."""
    tb = exc.__traceback__
    here = os.path.abspath(__file__)
    while tb is not None and (
        os.path.abspath(tb.tb_frame.f_code.co_filename) == here or "runpy" in tb.tb_frame.f_code.co_filename
    ):
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb, file=sys.stderr)


def _stderr(msg: str) -> None:
    print("gapscope capture: " + msg, file=sys.stderr, flush=True)


def _exit_code(code: Any) -> int:
    """Exit status for ``SystemExit(code)``, as the interpreter computes it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF if code >= 0 else (code % 256)
    print(code, file=sys.stderr)
    return 1
