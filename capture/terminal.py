"""What a capture leaves on the user's terminal and in the trace's thread names.

- ``name_main_thread(name)``: the OS name of the calling thread (Linux ``prctl
  PR_SET_NAME``, at most 15 bytes). Kineto labels a CPU lane with the OS thread name,
  which for ``gapscope capture -- python train.py`` is the process's, ``gapscope``:
  the lane of the user's script would read ``thread 123 (gapscope)``.
- ``without_usdt_lines()``: torch's Kineto prints ``USDT: … profiler_start`` /
  ``profiler_stop`` lines to file descriptor 2 when the profiler starts and stops; for
  the duration of the block, fd 2 goes to a temporary file and every other line is
  written back afterwards, in order.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import sys
import tempfile
import threading
from collections.abc import Iterator

__all__ = ["name_main_thread", "without_usdt_lines"]

_PR_SET_NAME = 15


def name_main_thread(name: str) -> str | None:
    """Give the calling thread the OS name ``name`` (cut to 15 bytes of UTF-8); returns
    the name it had, for restoring, or None when nothing changed (not Linux, no libc,
    empty ``name``)."""
    if not sys.platform.startswith("linux") or not name:
        return None
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/comm", "rb") as f:
            old = f.read().rstrip(b"\n").decode("utf-8", "replace")
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        raw = name.encode("utf-8", "replace")[:15]
        return old if libc.prctl(_PR_SET_NAME, ctypes.c_char_p(raw), 0, 0, 0) == 0 else None
    except (OSError, AttributeError):
        return None


@contextlib.contextmanager
def without_usdt_lines() -> Iterator[None]:
    """Run the block with file descriptor 2 captured; afterwards write back every line
    that does not start with ``USDT:``. Without a real fd 2 (tests, embedded
    interpreters) the block runs as is."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, AttributeError, ValueError):
        yield
        return
    tmp = tempfile.TemporaryFile()
    try:
        os.dup2(tmp.fileno(), 2)
        yield
    finally:
        with contextlib.suppress(OSError, AttributeError, ValueError):
            sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        tmp.seek(0)
        data = tmp.read()
        tmp.close()
        keep = b"".join(ln for ln in data.splitlines(keepends=True) if not ln.startswith(b"USDT:"))
        if keep:
            with contextlib.suppress(OSError):
                os.write(2, keep)
