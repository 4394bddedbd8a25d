"""Trace file names and the atomic, never-overwriting write (no torch import).

A trace is first written under a hidden temporary name in the target folder, then
published under its final name with ``os.link`` (which fails instead of replacing an
existing file), so a reader never sees a half-written trace and an existing file is
never overwritten. When the chosen folder cannot be written (missing permission, a
full disk, a file where a folder should be), the trace goes to a fallback folder
under the system temporary directory and the caller is told where.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "SUFFIX",
    "trace_basename",
    "fallback_dir",
    "check_writable",
    "WriteOutcome",
    "write_atomic",
]

SUFFIX = ".pt.trace.json.gz"
"""Suffix of every trace file: the name torch.profiler's TensorBoard handler uses, gzip."""

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _safe(part: str, max_len: int = 64) -> str:
    """Return ``part`` with every run of characters outside ``[A-Za-z0-9._-]`` as ``-``."""
    s = _UNSAFE.sub("-", part).strip("-.")
    return s[:max_len] or "x"


def trace_basename(
    label: str | None = None, *, host: str | None = None, pid: int | None = None, when_s: float | None = None
) -> str:
    """Return a trace file name ``HOST_PID_YYYYmmddTHHMMSSZ[_LABEL].pt.trace.json.gz``.

    ``host`` defaults to ``socket.gethostname()``, ``pid`` to ``os.getpid()`` and
    ``when_s`` (seconds since the epoch) to now; the time is written in UTC. Every part
    is reduced to ``[A-Za-z0-9._-]`` so the name is safe in any shell and file system.
    The name carries host, pid and time so traces from many ranks and runs can share
    one folder (the convention of ``torch.profiler.tensorboard_trace_handler``, which
    uses ``HOST_PID.<ns>.pt.trace.json``).
    """
    host = _safe(host if host is not None else socket.gethostname())
    pid = os.getpid() if pid is None else int(pid)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if when_s is None else when_s))
    name = f"{host}_{pid}_{stamp}"
    if label:
        name += "_" + _safe(label)
    return name + SUFFIX


def fallback_dir() -> str:
    """Return the folder used when the chosen one cannot be written.

    ``<system temp dir>/gapscope-traces-<uid or user>``; created on demand by
    ``write_atomic``.
    """
    try:
        who = str(os.getuid())
    except AttributeError:  # pragma: no cover - Windows
        who = _safe(os.environ.get("USERNAME", "user"))
    return os.path.join(tempfile.gettempdir(), f"gapscope-traces-{who}")


def check_writable(folder: str) -> str | None:
    """Return ``None`` when ``folder`` exists or can be created and accepts a new file,
    else a short reason (``"Permission denied"``, ``"not a directory"``).

    Creates ``folder`` (and parents) when missing; writes and removes one empty probe
    file. Never touches existing files.
    """
    try:
        os.makedirs(folder, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".gapscope-probe-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except FileExistsError:
        return "not a directory"
    except OSError as exc:
        if exc.errno == errno.ENOTDIR:
            return "not a directory"
        return exc.strerror or str(exc)
    return None


@dataclass(frozen=True)
class WriteOutcome:
    """Where a trace went.

    ``path``: the final file. ``fell_back``: True when the chosen folder failed and
    the trace was written to ``fallback_dir()``; ``reason`` then says why.
    ``renamed``: True when the first-choice name existed and a numbered name was used.
    """

    path: str
    fell_back: bool = False
    reason: str = ""
    renamed: bool = False


def _publish_no_replace(tmp: str, final_dir: str, basename: str) -> tuple[str, bool]:
    """Give ``tmp`` its final name in ``final_dir`` without replacing any file.

    Tries ``basename``, then ``stem-1``, ``stem-2``... (stem = name without the
    suffix). Uses ``os.link`` + ``os.unlink`` (atomic, fails on an existing name);
    where hard links are not supported, falls back to an exclusive create check plus
    ``os.replace`` (still never replaces a file that existed before the check).
    Returns (final path, renamed).
    """
    stem = basename[: -len(SUFFIX)] if basename.endswith(SUFFIX) else basename
    ext = SUFFIX if basename.endswith(SUFFIX) else ""
    for i in range(10_000):
        name = basename if i == 0 else f"{stem}-{i}{ext}"
        final = os.path.join(final_dir, name)
        try:
            os.link(tmp, final)
        except FileExistsError:
            continue
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS):
                raise
            try:  # no hard links here: reserve the name exclusively, then move over the reservation
                fd = os.open(final, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                continue
            os.close(fd)
            os.replace(tmp, final)
            return final, i > 0
        os.unlink(tmp)
        return final, i > 0
    raise FileExistsError(errno.EEXIST, "no free trace name", os.path.join(final_dir, basename))


def _write_in(folder: str, basename: str, writer: Callable[[str], None]) -> tuple[str, bool]:
    """Write with ``writer(tmp_path)`` into ``folder`` under a temporary name, then publish."""
    os.makedirs(folder, exist_ok=True)
    stem = basename[: -len(SUFFIX)] if basename.endswith(SUFFIX) else basename
    while True:  # exclusive create, mode 0o666 & ~umask like any new file (mkstemp would give 0600)
        tmp = os.path.join(folder, f".{stem}.{secrets.token_hex(4)}.partial.json.gz")
        try:
            fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        break
    try:
        writer(tmp)
        if os.path.getsize(tmp) == 0:
            raise OSError(errno.EIO, "the profiler wrote an empty file", tmp)
        return _publish_no_replace(tmp, folder, basename)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_atomic(folder: str, basename: str, writer: Callable[[str], None]) -> WriteOutcome:
    """Write a trace with ``writer(path)`` and publish it atomically under a free name.

    ``writer`` receives a temporary path ending in ``.json.gz`` in ``folder`` and must
    write the whole file there (e.g. ``prof.export_chrome_trace``). On success the
    file is linked to ``folder/basename`` (or ``stem-N`` when that exists) and the
    temporary name removed. When writing into ``folder`` fails with ``OSError``
    (permission, no space, not a directory), the write is retried once in
    ``fallback_dir()``. Raises the second ``OSError`` when the fallback fails too;
    never leaves a partial file under a final name.
    """
    try:
        path, renamed = _write_in(folder, basename, writer)
        return WriteOutcome(path=path, renamed=renamed)
    except OSError as exc:
        reason = f"{exc.strerror or exc} ({folder})"
    fb = fallback_dir()
    path, renamed = _write_in(fb, basename, writer)
    return WriteOutcome(path=path, fell_back=True, reason=reason, renamed=renamed)
