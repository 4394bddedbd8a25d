"""A read-only map of a trace file that the JSON readers can use as their text.

``MappedText`` behaves as the ``bytes`` a reader is given (slices, ``find``, regular
expressions, the buffer protocol, and ``count``, which ``mmap`` lacks), while its
pages stay the file's (page cache), not the process's private memory. A file cut
short under a map kills the process that reads a page past the new end (SIGBUS), so
a reader of a map kept after a load checks ``unchanged()`` first, and this process
reads the map only through ``os.pread`` (slices, ``count``), which a cut file answers
with fewer bytes instead of a signal; whole-text scans through the buffer protocol
(numpy, regular expressions) run in a forked child
(``gapscope.parsers.chrome.child.run_in_child``), where a SIGBUS kills only it.
"""

from __future__ import annotations

import mmap
import os

__all__ = ["MappedText", "file_stamp"]

#: Bytes ``MappedText.count`` reads at a time.
_COUNT_CHUNK = 16 << 20


def file_stamp(st: os.stat_result) -> tuple:
    """(device, inode, size, mtime ns, ctime ns) of a stat result: what says a file
    is still the one read."""
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


class MappedText(mmap.mmap):
    """A read-only map of a file, usable where the loader reads JSON text: slices and
    ``count`` (which ``mmap`` lacks) read with ``os.pread``; ``find``/``rfind``, regular
    expressions and the buffer protocol go through the map. Its pages are the file's
    (page cache), not this process's private memory. ``unchanged()`` checks that the
    mapped file is as it was when mapped (a file cut short under a map kills the
    process that reads a page past its new end: SIGBUS)."""

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

    def __getitem__(self, key):
        """A slice (or one byte) read with ``os.pread``, never through the map: a file
        cut short since gives fewer bytes (an event that no longer decodes), not SIGBUS."""
        n = len(self)
        if isinstance(key, slice):
            start, stop, step = key.indices(n)
            if step != 1:
                return self._pread(0, n)[key]
            return self._pread(start, stop) if stop > start else b""
        i = key + n if key < 0 else key
        if not 0 <= i < n:
            raise IndexError("mmap index out of range")
        got = self._pread(i, i + 1)
        if not got:
            raise IndexError(f"byte {i} is past the end of the file (cut short since it was mapped)")
        return got[0]

    def all_bytes(self) -> bytes:
        """The whole mapped file as it is now, read with ``os.pread`` (fewer bytes when
        it was cut short since it was mapped)."""
        return self._pread(0, len(self))

    def _pread(self, start: int, stop: int) -> bytes:
        """Bytes ``start:stop`` of the mapped file as it is now (fewer when it was cut
        short; empty when its descriptor is closed)."""
        if self._fd < 0:
            return b""
        try:
            return os.pread(self._fd, stop - start, start)
        except OSError:
            return b""

    def count(self, sub: bytes, start: int = 0, end: int | None = None) -> int:
        """Occurrences of ``sub`` in ``[start, end)``, read with ``os.pread`` in
        ``_COUNT_CHUNK`` pieces (a cut file counts what is left)."""
        stop = len(self) if end is None else min(end, len(self))
        if start >= stop:
            return 0
        if len(sub) != 1:
            return self[start:stop].count(sub)
        return sum(self._pread(a, min(stop, a + _COUNT_CHUNK)).count(sub) for a in range(start, stop, _COUNT_CHUNK))
