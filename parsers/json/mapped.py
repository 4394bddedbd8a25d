"""A read-only map of a trace file that the JSON readers can use as their text.

``MappedText`` behaves as the ``bytes`` a reader is given (slices, ``find``, regular
expressions, the buffer protocol, and ``count``, which ``mmap`` lacks), while its
pages stay the file's (page cache), not the process's private memory. A file cut
short under a map kills the process that reads a page past the new end (SIGBUS), so
a reader of a map kept after a load checks ``unchanged()`` first.
"""

from __future__ import annotations

import mmap
import os

import numpy as np

__all__ = ["MappedText", "file_stamp"]


def file_stamp(st: os.stat_result) -> tuple:
    """(device, inode, size, mtime ns, ctime ns) of a stat result: what says a file
    is still the one read."""
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


class MappedText(mmap.mmap):
    """A read-only map of a file, usable where the loader reads JSON text: slices,
    ``find``/``rfind``, regular expressions, the buffer protocol, plus ``count`` (which
    ``mmap`` lacks), counted with numpy. Its pages are the file's (page cache), not
    this process's private memory. ``unchanged()`` checks that the mapped file is as it
    was when first asked (a file cut short under a map would kill this process with
    SIGBUS on the next read of a page past its end)."""

    def __init__(self, fileno: int, length: int, *args, **kwargs) -> None:
        self._fd = os.dup(fileno)  # the map's own: fstat of the very file mapped
        self._stamp = file_stamp(os.fstat(self._fd))

    def unchanged(self) -> bool:
        """Whether the mapped file is as it was when mapped (``os.fstat``: device,
        inode, size, mtime, ctime). A path replaced by another file leaves the mapped
        one intact: still unchanged, still safe to read."""
        try:
            return self._fd >= 0 and file_stamp(os.fstat(self._fd)) == self._stamp
        except OSError:
            return False

    def close(self) -> None:
        super().close()
        self._release_fd()

    def _release_fd(self) -> None:
        if getattr(self, "_fd", -1) >= 0:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = -1

    def __del__(self) -> None:
        self._release_fd()

    def count(self, sub: bytes, start: int = 0, end: int | None = None) -> int:
        stop = len(self) if end is None else min(end, len(self))
        if start >= stop:
            return 0
        if len(sub) == 1:
            a = np.frombuffer(self, dtype=np.uint8, count=stop - start, offset=start)
            return int(np.count_nonzero(a == sub[0]))
        return bytes(self[start:stop]).count(sub)
