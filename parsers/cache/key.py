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

__all__ = ["EDGE_BYTES", "FileKey", "key_of"]

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


def key_of(path: str) -> FileKey | None:
    """The key of the regular file at ``path`` now, or None when it is not a regular
    file or cannot be read (a FIFO is never opened: it could block)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb", buffering=0) as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                return None
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
