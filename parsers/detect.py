"""``load(path)``: read bytes, undo gzip (every member), pick a loader by content."""

from __future__ import annotations

import os
import zlib

from .errors import TraceFormatError
from .model import Trace

__all__ = ["load", "read_bytes"]

_GZIP_MAGIC = b"\x1f\x8b"


def read_bytes(path: str | os.PathLike) -> bytes:
    """Return the file's bytes, decompressed when gzip (all members, RFC 1952).

    Raises ``TraceFormatError`` when the file cannot be read or the gzip data is
    corrupt. The file is opened read-only and never written.
    """
    p = os.fspath(path)
    try:
        with open(p, "rb") as fh:
            data = fh.read()
    except IsADirectoryError:
        raise TraceFormatError(p, "is a directory, not a trace file", hint="pass a .json, .json.gz or .txt file") from None
    except OSError as exc:
        raise TraceFormatError(p, f"cannot read: {exc.strerror or exc}") from None
    if data[:2] == _GZIP_MAGIC:
        data = _gunzip_all(p, data)
    return data


def _gunzip_all(path: str, data: bytes) -> bytes:
    """Decompress every gzip member; a cut-off last member yields what was readable."""
    out = []
    rest = data
    while rest:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out.append(d.decompress(rest))
            out.append(d.flush())
        except zlib.error as exc:
            if not out:
                raise TraceFormatError(path, f"corrupt gzip data ({exc})", hint="is the file complete?") from None
            break
        rest = d.unused_data
        if not d.eof:  # truncated member: keep what we have, the JSON loader warns
            break
        # skip zero padding between members
        rest = rest.lstrip(b"\x00")
    return b"".join(out)


def load(path: str | os.PathLike) -> Trace:
    """Load a trace file of any supported format, detected from its content.

    Formats: Chrome Trace Event Format JSON (object or array form, including Kineto /
    torch.profiler output of every vintage and the legacy autograd export), gzip of
    those, and ASCII timelines (event list or lane art; see ``docs/ascii-timelines.md``).

    Returns a ``Trace``. Raises ``TraceFormatError`` (with path, line, column and a
    hint) for anything that is not a trace; never any other exception for bad input.
    """
    p = os.fspath(path)
    data = read_bytes(p)
    head = data[:4096].lstrip(b"\xef\xbb\xbf \t\r\n")
    if not head:
        raise TraceFormatError(p, "file is empty", line=1, column=1, hint="expected Chrome trace JSON or an ASCII timeline")
    if head[:1] in (b"{", b"["):
        from .chrome import load_chrome

        return load_chrome(data, p)
    if b"\x00" in data[:4096]:
        raise TraceFormatError(p, "binary file, not a trace", line=1, column=1,
                               hint="expected Chrome trace JSON (.json/.json.gz) or an ASCII timeline; Nsight .nsys-rep/.sqlite is not supported yet")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise TraceFormatError(p, "not UTF-8 text and not JSON", line=line, column=col,
                               hint="expected Chrome trace JSON or an ASCII timeline") from None
    from .ascii import load_ascii

    return load_ascii(text, p)
