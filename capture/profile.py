"""Profile a block or a function with torch.profiler and keep every trace it records.

``Profiler`` is a context manager around ``torch.profiler.profile`` with the settings
gap analysis needs: CPU activity always, CUDA activity when ``torch.cuda`` is
available, ``ProfilerStep#N`` ranges (``record_function``) at every ``step()``, and
either the whole block or a wait / warm-up / active schedule
(``torch.profiler.schedule``) so the trace holds steady-state steps only. Each
recorded cycle is exported with ``export_chrome_trace`` to a gzip Kineto trace named
``HOST_PID_TIME[_LABEL].pt.trace.json.gz`` (see ``gapscope.capture.naming``).

Nothing is lost:

- the trace is exported from the profiler's exit path, so it is written when the
  block returns, raises, or is interrupted with Ctrl-C (``KeyboardInterrupt``);
  it then holds the steps recorded up to that point;
- it is written under a temporary name and published with a no-replace link, so a
  half-written file never carries the final name and an existing file is never
  overwritten (a numbered name is used instead);
- a Ctrl-C (or a stop signal, ``gapscope.capture.signals``) arriving while the file is
  being written is held back until the file is complete, then delivered;
- when the folder cannot be written, the trace goes to ``naming.fallback_dir()``
  and the message says so.

torch is imported inside functions only, so ``import capture`` works without it.
"""

from __future__ import annotations

import errno
import functools
import glob
import json
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from gapscope.capture.naming import WriteOutcome, fallback_dir, trace_basename, write_atomic
from gapscope.capture.signals import Stopped, signals_deferred, stop_signal_of
from gapscope.capture.terminal import without_usdt_lines

__all__ = ["Schedule", "Profiler", "profiled", "step", "active_profiler", "TorchMissing", "require_torch"]

_PREFIX = "gapscope capture: "


class TorchMissing(ImportError):
    """torch is not installed; the message says how to install the ``capture`` extra."""


def require_torch() -> Any:
    """Import and return ``torch``; raise ``TorchMissing`` with an install hint when absent."""
    try:
        import torch
    except ImportError as exc:
        raise TorchMissing(
            "gapscope capture needs PyTorch: install it with  pip install -e '.[capture]'  in the gapscope checkout"
            f"  (import torch failed: {exc})"
        ) from None
    return torch


@dataclass(frozen=True)
class Schedule:
    """A torch.profiler step schedule, counted in ``step()`` calls.

    Steps ``[0, wait)`` are not profiled, ``[wait, wait + warmup)`` warm the profiler
    up (Kineto is prepared but records nothing, so its start-up cost stays out of the
    trace), the next ``active`` steps are recorded and exported as one trace; the
    cycle repeats ``repeat`` times (0 = until the block ends). Same meaning as
    ``torch.profiler.schedule(wait=, warmup=, active=, repeat=)``.
    """

    wait: int = 1
    warmup: int = 1
    active: int = 3
    repeat: int = 1

    def __post_init__(self) -> None:
        if self.wait < 0 or self.warmup < 0 or self.active < 1 or self.repeat < 0:
            raise ValueError(f"bad schedule {self}: need wait >= 0, warmup >= 0, active >= 1, repeat >= 0")

    @property
    def first_recorded_step(self) -> int:
        """Index of the first recorded step (0-based, in ``step()`` calls)."""
        return self.wait + self.warmup


_ACTIVE: list[Any] = []  # objects with .step(); the innermost receives gapscope.capture.step()
_ACTIVE_LOCK = threading.Lock()


def active_profiler() -> Any | None:
    """Return the innermost running ``Profiler`` (or script runner), or ``None``."""
    with _ACTIVE_LOCK:
        return _ACTIVE[-1] if _ACTIVE else None


def step() -> None:
    """Mark the end of one step of the innermost running profiler; no-op when none runs.

    Call it once per iteration of the loop you want profiled (a training step, a
    decoded token). Safe to leave in code that runs without gapscope.
    """
    p = active_profiler()
    if p is not None:
        p.step()


def _push(obj: Any) -> None:
    with _ACTIVE_LOCK:
        _ACTIVE.append(obj)


def _pop(obj: Any) -> None:
    with _ACTIVE_LOCK:
        for i in range(len(_ACTIVE) - 1, -1, -1):
            if _ACTIVE[i] is obj:
                del _ACTIVE[i]
                break


def _default_log(msg: str) -> None:
    print(_PREFIX + msg, file=sys.stderr, flush=True)


class Profiler:
    """Context manager that records a Kineto trace of its block; ``step()`` per iteration.

    ``Profiler(out_dir=".", *, schedule=None, label=None, cuda=None,
    record_shapes=False, with_stack=False, profile_memory=False, log=None)``

    - ``schedule=None`` records the whole block (each ``step()`` still opens a
      ``ProfilerStep#N`` range); a ``Schedule`` records only its active steps.
    - ``cuda=None`` adds ``ProfilerActivity.CUDA`` when ``torch.cuda.is_available()``;
      ``True`` asks for it (CPU only, with a note, when unavailable); ``False`` never.
    - ``label`` is appended to the file name (``HOST_PID_TIME_LABEL.pt.trace.json.gz``).
    - ``log(msg)`` receives every message (default: stderr, prefixed ``gapscope capture:``).

    After the block: ``traces`` (paths written, in order), ``outcomes``
    (``naming.WriteOutcome`` each), ``messages`` (what was said), ``steps`` (number of
    ``step()`` calls), ``cuda`` (whether CUDA activity was recorded), ``error``
    (the last export error text, or ``""``), ``stopped_by`` (the signal that ended the
    block: SIGINT for Ctrl-C, a ``signals.STOP_SIGNALS`` number for ``Stopped``; else
    None). Exceptions from the block propagate
    unchanged after the trace is written. Raises ``TorchMissing`` at ``start()`` when
    torch is not installed.
    """

    def __init__(
        self,
        out_dir: str = ".",
        *,
        schedule: Schedule | None = None,
        label: str | None = None,
        cuda: bool | None = None,
        record_shapes: bool = False,
        with_stack: bool = False,
        profile_memory: bool = False,
        log: Callable[[str], None] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self.out_dir = os.path.abspath(os.fspath(out_dir))  # the profiled code may chdir
        self.schedule = schedule
        self.label = label
        self.want_cuda = cuda
        self.record_shapes = record_shapes
        self.with_stack = with_stack
        self.profile_memory = profile_memory
        self.metadata = dict(metadata or {})
        self._log = log or _default_log
        self.traces: list[str] = []
        self.outcomes: list[WriteOutcome] = []
        self.messages: list[str] = []
        self.steps = 0
        self.step_offset = 0  # added to step counts in messages (the runner counts the script's calls)
        self.cuda = False
        self.error = ""
        self.stopped_by: int | None = None
        self._cycle = 0
        self._prof: Any = None
        self._running = False
        self._discard = False
        self._held: Any = None
        self.step_wall_ms: list[float] = []  # the recorded steps of the current cycle
        self._step_t0 = 0.0

    # -- messages -------------------------------------------------------------------
    def say(self, msg: str) -> None:
        """Record ``msg`` in ``messages`` and pass it to the log callable."""
        self.messages.append(msg)
        self._log(msg)

    # -- lifecycle ------------------------------------------------------------------
    def _activities(self, torch: Any) -> list[Any]:
        from torch.profiler import ProfilerActivity

        acts = [ProfilerActivity.CPU]
        available = bool(torch.cuda.is_available())
        if self.want_cuda is None:
            self.cuda = available
        elif self.want_cuda and not available:
            self.cuda = False
            self.say("CUDA was asked for but torch.cuda is not available: recording CPU activity only")
        else:
            self.cuda = bool(self.want_cuda)
        if self.cuda:
            acts.append(ProfilerActivity.CUDA)
        return acts

    def _schedule_fn(self) -> Callable[[int], Any]:
        from torch.profiler import ProfilerAction, schedule

        s = self.schedule
        if s is None:
            # Whole block: record from start to exit; a callable (not None) makes torch
            # emit ProfilerStep#N ranges at every step().
            return lambda step_index: ProfilerAction.RECORD
        if s.warmup == 0:
            return _no_warmup_schedule(s)
        return schedule(wait=s.wait, warmup=s.warmup, active=s.active, repeat=s.repeat)

    def start(self) -> Profiler:
        """Start recording (or waiting, per the schedule). Raises ``TorchMissing``."""
        torch = require_torch()
        from torch.profiler import profile

        acts = self._activities(torch)
        self._prof = profile(
            activities=acts,
            schedule=self._schedule_fn(),
            on_trace_ready=self._on_trace_ready,
            record_shapes=self.record_shapes,
            with_stack=self.with_stack,
            profile_memory=self.profile_memory,
        )
        meta = {
            "label": self.label or "",
            "cuda": self.cuda,
            "schedule": asdict(self.schedule) if self.schedule else "whole block",
            **self.metadata,
        }
        try:
            self._prof.preset_metadata_json("gapscope_capture", json.dumps(meta, default=str))
        except AttributeError:  # an older torch without preset metadata: the trace is still complete
            pass
        if not self.cuda:
            why = "CUDA activity not requested" if self.want_cuda is False else "no CUDA device"
            self.say(f"recording CPU activity only ({why}): the trace has no GPU lanes")
        with without_usdt_lines():  # torch's "USDT: … profiler_start" is not the user's business
            self._prof.__enter__()
        self._running = True
        self._step_t0 = time.perf_counter()
        _push(self)
        return self

    def step(self) -> None:
        """End the current step: close ``ProfilerStep#N``, advance the schedule.

        When the step completes an active cycle, that cycle's trace is written now.
        """
        if not self._running:
            return
        self.steps += 1
        action = self._action()
        if action in ("RECORD", "RECORD_AND_SAVE"):
            self.step_wall_ms.append((time.perf_counter() - self._step_t0) * 1e3)
        if action == "RECORD_AND_SAVE":
            self._add_step_times()
            with (
                signals_deferred(),
                without_usdt_lines(),
            ):  # this step ends a cycle: torch stops, processes and exports it
                self._prof.step()
        elif action == "RECORD":
            self._prof.step()
        else:
            with without_usdt_lines():  # leaving the wait or warm-up: torch may start the profiler here
                self._prof.step()
        self._step_t0 = time.perf_counter()

    def _action(self) -> str:
        """The schedule's action for the step now recording (``ProfilerAction`` name),
        or "" when torch does not say."""
        return getattr(getattr(self._prof, "current_action", None), "name", "")

    def _add_step_times(self) -> None:
        """Write the recorded steps' wall times into the trace being recorded, as the
        top-level key ``gapscope_steps``: ``{"wall_ms": [float, ...], "clock": str}``, one
        entry per recorded step, each measured with ``time.perf_counter`` in this process
        from the return of one ``step()`` call to the next call (the first recorded step
        from the previous step's return). Kineto keeps metadata added while recording."""
        if not self.step_wall_ms:
            return
        doc = {"wall_ms": [round(ms, 4) for ms in self.step_wall_ms], "clock": "time.perf_counter between step() calls"}
        self.step_wall_ms = []
        try:
            self._prof.add_metadata_json("gapscope_steps", json.dumps(doc))
        except (AttributeError, RuntimeError):  # an older torch, or not recording: the trace is still complete
            pass

    def stop(self, exc: BaseException | None = None, *, discard: bool = False) -> None:
        """Stop recording and write what the current cycle recorded (idempotent).

        ``exc`` is the exception leaving the block, if any; it only shapes the message.
        ``discard=True`` keeps the cycle in memory instead of writing it: ``write_held()``
        writes it later, ``drop_held()`` frees it (the script runner holds the set-up
        recording until the step schedule has written a trace).
        """
        if not self._running:
            return
        self._running = False
        self._discard = discard
        self.stopped_by = stop_signal_of(exc)
        _pop(self)
        n_before = len(self.traces)
        if self._action() in ("RECORD", "RECORD_AND_SAVE"):  # the block ended inside a cycle: its steps so far
            self._add_step_times()
        with signals_deferred():  # a Ctrl-C now is delivered after the file and its message
            try:
                with without_usdt_lines():
                    self._prof.__exit__(None, None, None)
            except Exception as err:  # noqa: BLE001 - the profiler's own failure must not mask the block's
                self.error = f"torch.profiler failed while stopping: {type(err).__name__}: {err}"
                self.say(self.error)
            if not discard:
                self._explain_exit(exc, wrote=len(self.traces) > n_before)

    def _explain_exit(self, exc: BaseException | None, *, wrote: bool) -> None:
        n = self.steps + self.step_offset
        how = ""
        if isinstance(exc, KeyboardInterrupt):
            how = "interrupted (Ctrl-C)"
        elif isinstance(exc, Stopped):
            how = f"was stopped by {signal.Signals(exc.signum).name}"
        elif exc is not None:
            how = f"raised {type(exc).__name__}"
        if how and wrote:
            self.say(
                f"the profiled code {how} after {n} step(s); "
                f"the trace keeps what was recorded until then: {self.traces[-1]}"
            )
        elif not self.traces:
            s = self.schedule
            why = f"the block ended after {n} step(s)"
            if how:
                why = f"the profiled code {how} after {n} step(s)"
            if s is not None and self.steps < s.first_recorded_step:
                self.say(
                    f"no trace written: {why}, before the schedule recorded anything "
                    f"(wait={s.wait}, warmup={s.warmup}: recording starts after step() call "
                    f"{s.first_recorded_step + self.step_offset}); call step() once per iteration or use schedule=None"
                )
            elif self.error:
                self.say(f"no trace written: {why}; {self.error}")
            else:
                self.say(f"no trace written: {why}")

    def __enter__(self) -> Profiler:
        return self.start()

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.stop(exc)  # no return value: an exception raised in the block propagates

    # -- export ---------------------------------------------------------------------
    def write_held(self) -> str | None:
        """Write the cycle kept by ``stop(discard=True)``; return its path or ``None``."""
        prof, self._held = self._held, None
        if prof is None:
            return None
        self._discard = False
        n = len(self.traces)
        self._on_trace_ready(prof)
        return self.traces[-1] if len(self.traces) > n else None

    def drop_held(self) -> None:
        """Free the cycle kept by ``stop(discard=True)`` without writing it."""
        self._held = None

    def _on_trace_ready(self, prof: Any) -> None:
        """torch ``on_trace_ready`` hook: export this cycle atomically; never raises."""
        if self._discard:
            self._held = prof
            return
        self._cycle += 1
        label = self.label or ""
        if self.schedule is not None and self.schedule.repeat != 1:
            label = f"{label}_c{self._cycle}" if label else f"c{self._cycle}"
        basename = trace_basename(label or None)
        staged = None
        try:
            with signals_deferred():
                staged = _export_once(prof, self.out_dir)
                outcome = write_atomic(self.out_dir, basename, lambda path: _gzip_copy(staged, path))
        except Exception as err:  # noqa: BLE001 - torch's export fails in its own ways; said, not raised
            if staged:
                need = f"; it needs about {_gz_estimate(staged):,} bytes free"
            elif isinstance(err, ExportFailed) and err.written:
                need = f"; it needs more than the {err.written:,} bytes written before the export failed"
            else:
                need = ""
            why = err.strerror if isinstance(err, OSError) and err.strerror else f"{type(err).__name__}: {err}"
            where = f" in {self.out_dir} or {fallback_dir()}" if isinstance(err, OSError) else ""
            self.error = f"could not write the trace{where} ({why}){need}"
            self.say(self.error)
            return
        finally:
            if staged:
                try:
                    os.unlink(staged)
                except OSError:
                    pass
        self.outcomes.append(outcome)
        self.traces.append(outcome.path)
        if outcome.fell_back:
            self.say(f"could not write to {self.out_dir}: {outcome.reason}; wrote the trace to {outcome.path} instead")
        elif outcome.renamed:
            self.say(f"a trace of that name existed; wrote {outcome.path} (the existing file is untouched)")


def _no_warmup_schedule(s: Schedule) -> Callable[[int], Any]:
    """``torch.profiler.schedule`` without its "no warmup" warning (same actions)."""
    from torch.profiler import ProfilerAction

    period = s.wait + s.active

    def fn(step_index: int) -> Any:
        if s.repeat > 0 and step_index >= period * s.repeat:
            return ProfilerAction.NONE
        k = step_index % period
        if k < s.wait:
            return ProfilerAction.NONE
        return ProfilerAction.RECORD_AND_SAVE if k == period - 1 else ProfilerAction.RECORD

    return fn


def profiled(fn: Callable | None = None, /, **options: Any) -> Callable:
    """Decorator: profile each call of the function with ``Profiler(**options)``.

    ``@profiled`` or ``@profiled(out_dir="traces", schedule=Schedule(...))``. The label
    defaults to the function's name. The function's return value and exceptions pass
    through unchanged; each call writes its own trace (``schedule=None``: the whole
    call; with a schedule, ``gapscope.capture.step()`` inside the function advances it). When a
    gapscope profiler is already recording, the call runs plain inside it.
    """

    def decorate(func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if active_profiler() is not None:
                return func(*args, **kwargs)
            opts = dict(options)
            opts.setdefault("label", func.__name__)
            with Profiler(**opts) as p:
                wrapper.last_profiler = p  # type: ignore[attr-defined]
                return func(*args, **kwargs)

        wrapper.last_profiler = None  # type: ignore[attr-defined]
        return wrapper

    if fn is not None:
        return decorate(fn)
    return decorate


class ExportFailed(OSError):
    """The profiler's one export of a cycle could not be written whole; ``written``:
    the bytes it had written when it stopped (a lower bound of what the trace needs)."""

    def __init__(self, err: OSError, written: int) -> None:
        super().__init__(err.errno, err.strerror or str(err))
        self.written = written


def _export_once(prof: Any, out_dir: str) -> str:
    """Export ``prof`` (torch can export a cycle only once: "Trace is already saved")
    as plain JSON into a staging file, tried in ``out_dir``, then ``fallback_dir()``;
    returns its path. The gzip copies to the final folders (``write_atomic``, which
    may retry) read that file. Raises ``ExportFailed`` when the export cannot be
    written whole (a full disk can make the profiler write a cut file silently),
    having removed the staging file and what the profiler wrote beside it (Kineto
    writes ``NAME.tmp`` and renames it), or ``OSError`` when no staging file can be
    made."""
    last: OSError | None = None
    folders = [out_dir, fallback_dir()]
    if free_bytes(out_dir) < LOW_SPACE_BYTES:  # the one export must land where it fits
        folders.sort(key=free_bytes, reverse=True)
    for folder in folders:
        try:
            os.makedirs(folder, exist_ok=True)
            fd, path = tempfile.mkstemp(prefix=".gapscope-export-", suffix=".json", dir=folder)
            os.close(fd)
        except OSError as exc:
            last = exc
            continue
        try:
            prof.export_chrome_trace(path)
            _check_whole(path)
            _remove_staged(path, keep=path)
            return path
        except BaseException as exc:
            written = _remove_staged(path)
            if isinstance(exc, OSError):
                raise ExportFailed(exc, written) from None  # the profiler's one export is spent: nothing to retry
            raise
    raise last if last is not None else OSError(errno.EIO, "no folder to write the trace in")


def _remove_staged(path: str, keep: str | None = None) -> int:
    """Remove the staging file ``path`` and every file the profiler made from its name
    (``path`` + a suffix: Kineto's ``.tmp``), except ``keep``; returns the most bytes
    any of them held."""
    written = 0
    for name in glob.glob(glob.escape(path) + "*"):
        if name == keep:
            continue
        try:
            written = max(written, os.path.getsize(name))
            os.unlink(name)
        except OSError:
            pass
    return written


#: Below this much free space in the output folder ``gapscope capture`` warns at start,
#: and the export is staged in the folder with the most space.
LOW_SPACE_BYTES = 256 << 20


def free_bytes(folder: str) -> int:
    """Bytes free to this user in ``folder`` (or its nearest existing parent); 0 when
    unknown."""
    path = os.path.abspath(folder)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    try:
        st = os.statvfs(path)
    except (OSError, AttributeError):
        return 0
    return st.f_bavail * st.f_frsize


def _check_whole(path: str) -> None:
    """``OSError`` unless the exported JSON at ``path`` ends as a document does."""
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        fh.seek(max(0, size - 64))
        tail = fh.read().rstrip()
    if not tail.endswith((b"}", b"]")):
        raise OSError(errno.ENOSPC, "the profiler wrote a cut file (disk full?)")


def _gzip_copy(src: str, dst: str) -> None:
    """gzip ``src`` into ``dst`` (``OSError`` on any write failure, e.g. ENOSPC, EROFS)."""
    import gzip
    import shutil

    with open(src, "rb") as fin, open(dst, "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6) as fout:
            shutil.copyfileobj(fin, fout, 1 << 20)
        raw.flush()
        os.fsync(raw.fileno())


def _gz_estimate(path: str | None) -> int:
    """Rough gzip size of the staged JSON (Kineto JSON compresses ~10x), for messages."""
    try:
        return max(1, os.path.getsize(path) // 8) if path else 0
    except OSError:
        return 0
