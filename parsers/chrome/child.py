"""Run work in a forked child and take its value back: the loader's one fork.

``fork_child`` forks a child that runs ``work()`` and sends its result
(``chrome.wire``) through a shared map or its pipe; ``run_in_child`` /
``run_in_children`` wrap it for any picklable value. Used for reads of a map of a file
(``json.mapped.MappedText``) that a file cut short meanwhile would turn into a SIGBUS,
which then kills only the child (``lazy_args``, the device preview), and by
``parallel.fork``'s decoders.

Why not ``concurrent.futures.ProcessPoolExecutor``: a worker of a pool that dies of
SIGBUS breaks the whole pool, and its result comes back pickled through a pipe
(copied twice), where a value here comes back in a shared map its arrays can view
without a copy (``copy=False``); the child also inherits the parent's map of the
file at the fork, which a pool's long-lived workers would not.
"""

from __future__ import annotations

import faulthandler
import gc
import mmap
import os
import signal
import time
import warnings

from gapscope.parsers.chrome import wire
from gapscope.parsers.chrome.schema import ObjectHeader

__all__ = [
    "Pending",
    "fork_child",
    "reap",
    "run_in_child",
    "run_in_children",
    "NO_CHILD",
    "MIN_WAIT_S",
    "WAIT_S_PER_BYTE",
]

#: A child may take at least this long before it is killed (a busy machine).
MIN_WAIT_S = 10.0
#: Children reading a file get ``MIN_WAIT_S`` plus this many seconds per byte of the
#: file (10 MB/s, several times slower than a busy machine decodes) before they are killed.
WAIT_S_PER_BYTE = 1.0 / (10 << 20)


class Pending:
    """A forked child (``fork_child``): its pid, the read end of its pipe, its shared
    map. For the decoders of ``parallel.fork``: ``plan``: (root, raw_ts, begin, brace,
    comma, end) the child works to: known at once for ``fork.start``; for
    ``fork.start_file`` the child plans on the file and reports its plan with its
    result, checked against this process's own; ``stamp``: the file's
    (``json.mapped.file_stamp``)."""

    def __init__(
        self, pid: int, fd: int, shared: mmap.mmap, plan: tuple | None, stamp: tuple | None, t0: float
    ) -> None:
        self.pid, self.fd, self.shared, self.plan, self.stamp, self.t0 = pid, fd, shared, plan, stamp, t0
        self.header: ObjectHeader | None = None  # the object form's header, with ``plan``
        self.done = False

    def close(self) -> None:
        """Kill the child if it still runs, reap it, free the pipe and shared memory
        (idempotent; a Ctrl-C meanwhile is held back until it is done)."""
        if self.done:
            return
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            try:
                os.close(self.fd)
            except OSError:
                pass
            reap(self.pid)
            try:
                self.shared.close()
            except BufferError:  # a view of it is still alive: the map goes with it
                pass
            self.done = True
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)

    def __del__(self) -> None:  # an interrupt between fork and use drops the object
        if not getattr(self, "done", True):
            self.close()


def fork_child(work, shared_bytes: int, plan: tuple | None, stamp: tuple | None) -> Pending | None:
    """Fork a child that runs ``work()`` (-> payload bytes) and sends its result; None
    when the pipe, the shared memory or the fork cannot be had. SIGINT is blocked
    across the fork, so the child cannot be interrupted before it has its own default
    handler; the child never returns into the caller (``os._exit``)."""
    try:
        shared = mmap.mmap(-1, shared_bytes)
    except (OSError, ValueError, OverflowError):
        return None
    try:
        r, w = os.pipe()
    except OSError:
        shared.close()
        return None
    t0 = time.perf_counter()
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    pid = -1
    try:
        with warnings.catch_warnings():  # Python 3.12+ warns about fork with threads
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
            if pid == 0:
                _child(work, r, w, shared, mask)  # never returns
    except OSError:
        pid = -1
    except BaseException:
        if pid > 0:
            Pending(pid, r, shared, plan, stamp, t0).close()
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        raise
    os.close(w)
    if pid < 0:
        os.close(r)
        shared.close()
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        return None
    pending = Pending(pid, r, shared, plan, stamp, t0)
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a Ctrl-C held back arrives here
    except BaseException:
        pending.close()
        raise
    return pending


def _child(work, r: int, w: int, shared: mmap.mmap, mask) -> None:
    status = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        faulthandler.disable()  # a SIGBUS (file cut short under the map) is the parent's to handle
        _die_with_parent()
        gc.disable()  # the decoded structs hold no cycles; a collection pass over them is wasted
        os.close(r)
        wire.send(w, shared, work())
        status = 0
    finally:
        os._exit(status)


def _die_with_parent() -> None:
    """Linux ``PR_SET_PDEATHSIG``: the child is killed when its parent dies."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass


#: ``run_in_child`` could not fork: the caller may do the work itself.
NO_CHILD = object()


def run_in_child(work, result_bytes: int, timeout_s: float, copy: bool = True, give_up=None):
    """``work()`` (-> a picklable value) run in a forked child, for reads of a map of a
    file (``MappedText``) that a file cut short meanwhile would turn into a SIGBUS: it
    kills only the child. Returns the value, None when the child failed (died, was
    late, sent a damaged message), or ``NO_CHILD`` when no child could be forked
    (``result_bytes``: room for the answer in the shared map; larger answers come
    through the pipe). ``copy=False``: the value's out-of-band buffers
    (``pickle.PickleBuffer``) are not copied: they view the child's shared map, which
    lives as long as they do. ``give_up()``: asked while waiting; true kills the
    child and gives None."""
    got = run_in_children([work], result_bytes, timeout_s, copy, give_up)
    return got[0] if isinstance(got, list) else got


def run_in_children(works, result_bytes: int, timeout_s: float, copy: bool = True, give_up=None, stop=None):
    """Each of ``works`` (callables -> a picklable value) run at once, one forked child
    each, as ``run_in_child`` runs one: the list of their values in order, None when
    one failed or was late (``timeout_s`` for all together; the others are killed), or
    ``NO_CHILD`` when not one child could be forked (a fork failing after the first
    gives None). ``stop(value)``: asked of each value as it comes, whichever child
    ends first; true gives None at once (the others are killed). ``result_bytes``,
    ``copy``, ``give_up``: as ``run_in_child``'s, per child."""
    pending: list[Pending] = []
    values: dict[int, object] = {}

    def take(j: int, payload) -> bool:  # unpacked as it comes; true: give up on them all
        try:
            values[j] = wire.unpack_object(payload, copy)
        except Exception:  # noqa: BLE001  (a damaged message: as a failed child)
            return True
        finally:
            if isinstance(payload, memoryview) and copy:
                payload.release()
        return stop is not None and bool(stop(values[j]))

    try:
        for work in works:
            child = fork_child(lambda work=work: wire.pack(work()), result_bytes + (1 << 20), None, None)
            if child is None:
                return None if pending else NO_CHILD
            pending.append(child)
        got = wire.receive_all([(c.fd, c.shared) for c in pending], time.monotonic() + timeout_s, give_up, take)
        return None if got is None else [values[j] for j in range(len(pending))]
    finally:
        for child in pending:
            child.close()  # a map still viewed stays mapped until its views go


def reap(pid: int) -> None:
    """Wait for the child; kill it first when it is still running."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    except (ChildProcessError, ProcessLookupError):
        pass
