"""Which file a cache entry belongs to: ``FileKey``.

A key is the file's ``(st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns)`` and a
BLAKE2b hash of its first and last ``EDGE_BYTES`` (the whole file when it is smaller
than both). The entry's name comes from the hash of the whole key, and the key stored
in the entry is compared again when it is read.

What it catches: any change of size, inode (a file replaced by a new one, as most
writers and ``git`` do), mtime, or ctime (which ``os.utime`` cannot set back: a file
rewritten in place and its mtime restored still changes its ctime), and any change to
the head or the tail (where a trace's header, its first events and its end lie) even
where the times were kept. Accepted limit: a file rewritten in the middle, to the same
size, with both its mtime and its ctime restored (only a changed system clock or a
raw disk edit does that) would be taken for the same file.
"""

from __future__ import annotations

import hashlib
import os
import stat

import msgspec

__all__ = ["EDGE_BYTES", "FileKey", "NotRegular", "key_of", "open_regular"]

#: Bytes hashed at each end of the file.
EDGE_BYTES = 64 << 10

_GZIP_MAGIC = b"\x1f\x8b"


class FileKey(msgspec.Struct, frozen=True, array_like=True):
    """The identity of one version of a file (see the module docstring). ``digest``:
    hex BLAKE2b-128 of the head and tail; ``gzip``: the file starts with the gzip
    magic (so its text is inflated, and byte spans refer to the inflated text)."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int
    digest: str
    gzip: bool

    def entry_name(self) -> str:
        """File name of this key's cache entry (a hash of every field)."""
        text = f"{self.dev}:{self.ino}:{self.size}:{self.mtime_ns}:{self.ctime_ns}:{self.digest}"
        return hashlib.blake2b(text.encode("ascii"), digest_size=16).hexdigest() + ".trace"


class NotRegular(OSError):
    """The path names something other than a regular file (a FIFO, a device, a
    directory, a socket; a symbolic link where ``follow`` is false)."""


def open_regular(path: str | os.PathLike, follow: bool = True) -> int:
    """A read-only descriptor of the regular file at ``path`` (the caller closes it).

    Nothing else is ever opened for reading, nor waited on: the type is checked with
    ``stat`` first (a device is not opened at all), the open is non-blocking
    (``O_NONBLOCK``: a FIFO swapped in after the check does not wait for a writer) and
    the type is checked again on the open descriptor (``fstat``), which then blocks
    as usual. ``follow=False`` refuses a symbolic link (``O_NOFOLLOW``). Raises
    ``NotRegular``, or ``OSError`` when it cannot be opened."""
    st = os.stat(path, follow_symlinks=follow)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegular(f"not a regular file: {stat.filemode(st.st_mode)}")
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(f"not a regular file: {stat.filemode(st.st_mode)}")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def key_of(path: str) -> FileKey | None:
    """The key of the regular file at ``path`` now, or None when it is not a regular
    file or cannot be read (``open_regular``: a FIFO is never waited on)."""
    try:
        with open(open_regular(path), "rb", buffering=0) as fh:
            st = os.fstat(fh.fileno())
            size = st.st_size
            h = hashlib.blake2b(digest_size=16)
            head = fh.read(EDGE_BYTES)
            h.update(head)
            if size > EDGE_BYTES:
                fh.seek(max(EDGE_BYTES, size - EDGE_BYTES))
                h.update(fh.read(EDGE_BYTES))
            h.update(size.to_bytes(8, "little"))
    except OSError:
        return None
    return FileKey(
        dev=st.st_dev,
        ino=st.st_ino,
        size=size,
        mtime_ns=st.st_mtime_ns,
        ctime_ns=st.st_ctime_ns,
        digest=h.hexdigest(),
        gzip=head[:2] == _GZIP_MAGIC,
    )
