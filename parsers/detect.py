"""``load(path)``: read bytes, undo gzip (every member), pick a loader by content."""

from __future__ import annotations

import codecs
import os
import stat
import zlib

from gapscope.parsers.errors import TraceFormatError
from gapscope.parsers.json.scan import text_start
from gapscope.parsers.model import Trace

__all__ = ["load", "read_bytes", "sniff"]

#: Bytes ``sniff`` reads (after gzip) to judge a file without loading it.
SNIFF_BYTES = 1 << 16

_GZIP_MAGIC = b"\x1f\x8b"


#: Largest decompressed size accepted from a gzip file of ``n`` bytes:
#: ``max(MIN_INFLATE_LIMIT, MAX_INFLATE_RATIO * n)``. Real trace JSON inflates 10-50x;
#: a "gzip bomb" (a few MB of zeros or spaces) inflates 1000x. ``GAPSCOPE_MAX_TRACE_BYTES``
#: overrides the limit (bytes).
MAX_INFLATE_RATIO = 200
MIN_INFLATE_LIMIT = 1 << 30


def _open_regular(p: str):
    """Open ``p`` for reading after checking it is a regular file (a FIFO, a device such
    as /dev/zero, or a socket would block or never end). Raises ``TraceFormatError``."""
    try:
        st = os.stat(p)
    except OSError as exc:
        raise TraceFormatError(p, f"cannot read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise TraceFormatError(p, "is a directory, not a trace file", hint="pass a .json, .json.gz or .txt file")
    if not stat.S_ISREG(st.st_mode):
        raise TraceFormatError(
            p, "not a regular file (a pipe, device or socket)", hint="save the trace to a file first"
        )
    try:
        return open(p, "rb")
    except OSError as exc:
        raise TraceFormatError(p, f"cannot read: {exc.strerror or exc}") from None


def inflate_limit(compressed_bytes: int) -> int:
    """Most bytes a gzip file of ``compressed_bytes`` may decompress to (see
    ``MAX_INFLATE_RATIO``); ``GAPSCOPE_MAX_TRACE_BYTES`` overrides it."""
    env = os.environ.get("GAPSCOPE_MAX_TRACE_BYTES", "")
    if env.isdigit():
        return int(env)
    return max(MIN_INFLATE_LIMIT, MAX_INFLATE_RATIO * compressed_bytes)


def read_bytes(
    path: str | os.PathLike, mutable_min_bytes: int | None = None, stat_out: list | None = None
) -> bytes | bytearray:
    """Return the file's bytes, decompressed when gzip (all members, RFC 1952).

    A plain file of at least ``mutable_min_bytes`` comes back as a ``bytearray`` (read
    in place, no extra copy), which a loader may frame in place (``chrome_parallel``).
    ``stat_out``: gets ``os.fstat`` of the file read, taken after the read.

    Raises ``TraceFormatError`` when the path is not a regular file, cannot be read,
    the gzip data is corrupt or cut inside its header, or it decompresses to more than
    ``inflate_limit`` bytes. The file is opened read-only and never written.
    """
    p = os.fspath(path)
    with _open_regular(p) as fh:
        try:
            data = _read(fh, mutable_min_bytes)
            if stat_out is not None:
                stat_out.append(os.fstat(fh.fileno()))
        except OSError as exc:
            raise TraceFormatError(p, f"cannot read: {exc.strerror or exc}") from None
    if data[:2] == _GZIP_MAGIC:
        data = _gunzip_all(p, data, inflate_limit(len(data)))
    return data


def _read(fh, mutable_min_bytes: int | None) -> bytes | bytearray:
    """All of ``fh``: bytes, or a ``bytearray`` when the file has at least
    ``mutable_min_bytes`` (a file that shrinks or grows while read is read to its end)."""
    size = os.fstat(fh.fileno()).st_size
    if mutable_min_bytes is None or size < mutable_min_bytes:
        return fh.read()
    buf = bytearray(size)
    got = 0
    with memoryview(buf) as view:
        while got < size:
            n = fh.readinto(view[got:])
            if not n:
                break
            got += n
    if got < size:
        del buf[got:]
    else:
        buf += fh.read()
    return buf


def _gunzip_all(path: str, data: bytes | bytearray, limit: int) -> bytes:
    """Decompress every gzip member; a cut-off last member yields what was readable.

    Raises ``TraceFormatError`` for corrupt data, a cut inside the first header (nothing
    readable), or output beyond ``limit`` bytes.
    """
    out: list[bytes] = []
    total = 0
    rest = data
    while rest:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            chunk = d.decompress(rest, limit - total + 1)
            if not d.unconsumed_tail:
                chunk += d.flush()
        except zlib.error as exc:
            if not out:
                raise TraceFormatError(path, f"corrupt gzip data ({exc})", hint="is the file complete?") from None
            break
        total += len(chunk)
        if total > limit:
            raise TraceFormatError(
                path,
                f"gzip data expands to more than {limit:,} bytes ({len(data):,} bytes compressed); refusing to load it",
                hint="a real trace inflates 10-50x; set GAPSCOPE_MAX_TRACE_BYTES to raise the limit",
            )
        out.append(chunk)
        rest = d.unused_data
        if not d.eof:  # truncated member: keep what we have, the JSON loader warns
            if total == 0 and len(out) == 1:
                raise TraceFormatError(path, "gzip data cut off before any content", hint="is the file complete?")
            break
        # skip zero padding between members
        rest = rest.lstrip(b"\x00")
    return b"".join(out)


def sniff(path: str | os.PathLike) -> str:
    """Check cheaply, without loading, that ``path`` looks like a trace ``load`` accepts.

    Reads at most ``SNIFF_BYTES`` (64 KiB) of content (gunzipped when gzip) and applies
    the same checks and messages as ``load``: exists, is a file, readable, gzip
    intact at its start, not empty, JSON object/array, not binary, UTF-8, and for text
    the first timeline line of an ASCII timeline. Returns ``"chrome"`` or ``"ascii"``,
    or ``"nsys"`` for an Nsight Systems export (its schema is read) or report (exported
    to SQLite first, see ``gapscope.parsers.nsys.files``).
    Raises ``TraceFormatError`` (path, line, column, hint). A file that passes may
    still fail later in ``load`` (e.g. JSON broken past the head).
    """
    p = os.fspath(path)
    with _open_regular(p) as fh:
        try:
            raw = fh.read(SNIFF_BYTES)
            complete = len(raw) < SNIFF_BYTES or not fh.read(1)
        except OSError as exc:
            raise TraceFormatError(p, f"cannot read: {exc.strerror or exc}") from None
    from gapscope.parsers.nsys import files as nsys_files

    nsight = nsys_files.kind_of(p, raw[: nsys_files.HEAD_BYTES])
    if nsight is not None:
        return nsys_files.sniff(p, nsight)
    data = raw
    if raw[:2] == _GZIP_MAGIC:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            data = d.decompress(raw, SNIFF_BYTES)
        except zlib.error as exc:
            raise TraceFormatError(p, f"corrupt gzip data ({exc})", hint="is the file complete?") from None
        complete = complete and d.eof and not d.unconsumed_tail
    return _check_head(p, data, complete)


def _check_head(p: str, data: bytes, complete: bool) -> str:
    """``load``'s content checks on ``data`` (the whole content when ``complete``,
    else its head): ``"chrome"`` or ``"ascii"``, or ``TraceFormatError``."""
    head = data[:4096].lstrip(b"\xef\xbb\xbf \t\r\n")
    if not head:
        raise TraceFormatError(
            p, "file is empty", line=1, column=1, hint="expected Chrome trace JSON or an ASCII timeline"
        )
    if head[:1] in (b"{", b"["):
        from gapscope.parsers.nsys.json_export import refuse_json_export

        refuse_json_export(p, data, len(data) - len(data.lstrip(b"\xef\xbb\xbf \t\r\n")))
        return "chrome"
    if b"\x00" in data[:4096]:
        from gapscope.parsers.nsys.files import refuse_compressed

        refuse_compressed(p, data)
        raise TraceFormatError(
            p,
            "binary file, not a trace",
            line=1,
            column=1,
            hint="expected Chrome trace JSON (.json/.json.gz), an ASCII timeline or an Nsight "
            "Systems export (.sqlite, .nsys-rep)",
        )
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(data, final=complete)
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise TraceFormatError(
            p,
            "not UTF-8 text and not JSON",
            line=line,
            column=col,
            hint="expected Chrome trace JSON or an ASCII timeline",
        ) from None
    from gapscope.parsers.ascii import timeline_shape
    from gapscope.parsers.ascii.common import split_lines

    lines = split_lines(text)
    if not complete and lines:
        lines = lines[:-1]  # the last line may be cut
    timeline_shape(lines, p, complete=complete)
    return "ascii"


def load(path: str | os.PathLike) -> Trace:
    """Load a trace file of any supported format, detected from its content.

    Formats: Chrome Trace Event Format JSON (object or array form, including Kineto /
    torch.profiler output of every vintage and the legacy autograd export), gzip of
    those, ASCII timelines (event list or lane art; see ``docs/ascii-timelines.md``),
    and Nsight Systems SQLite exports, or reports exported to SQLite with ``nsys`` when
    it is installed (``gapscope.parsers.nsys``).

    Returns a ``Trace``. Raises ``TraceFormatError`` (with path, line, column and a
    hint) for anything that is not a trace; never any other exception for bad input.
    """
    p = os.fspath(path)
    from gapscope.parsers.nsys import files as nsys_files

    with _open_regular(p) as fh:  # an Nsight file is opened by SQLite, never read whole
        try:
            head = fh.read(nsys_files.HEAD_BYTES)
        except OSError as exc:
            raise TraceFormatError(p, f"cannot read: {exc.strerror or exc}") from None
    nsight = nsys_files.kind_of(p, head)
    if nsight is not None:
        return nsys_files.load(p, nsight)
    from gapscope.parsers.chrome.parallel import fork as chrome_parallel

    if not chrome_parallel.enabled(1 << 62):
        return _load(p, read_bytes(p))
    from gapscope.parsers.chrome.loader import start_parts

    pending = None
    try:
        pending = start_parts(p)  # a forked child starts on the second half while this process reads
        read_stat: list = []
        data = read_bytes(p, mutable_min_bytes=chrome_parallel.MIN_BYTES, stat_out=read_stat)
        return _load(p, data, pending, read_stat[0] if read_stat else None)
    finally:
        if pending is not None:
            pending.close()


def _refuse_json_scalar(p: str, data) -> None:
    """A file holding one JSON scalar (``null``, a string, a number) is JSON, not an
    ASCII timeline: say so. Raises ``TraceFormatError``."""
    if len(data) > 1 << 20:
        return
    body = bytes(data).strip()
    if not body or body[:1] not in b'"-0123456789tfn':
        return
    try:
        import msgspec

        value = msgspec.json.decode(body)
    except (ValueError, RecursionError):  # msgspec.DecodeError is a ValueError
        return
    kind = {type(None): "null", bool: "true/false", str: "string", int: "number", float: "number"}.get(type(value))
    if kind is not None:
        raise TraceFormatError(
            p,
            f"a JSON {kind}, not a trace",
            line=1,
            column=1,
            hint='expected Chrome Trace Event Format JSON ({"traceEvents": [...]}) or an ASCII timeline',
        )


def _load(p: str, data: bytes | bytearray, pending=None, read_stat=None) -> Trace:
    skip = text_start(data)  # a JSON text may start with any amount of blanks
    if data[skip : skip + 1] == b"{":
        from gapscope.parsers.nsys.json_export import refuse_json_export

        refuse_json_export(p, data, skip)  # Nsight's one-record-per-line JSON
    if data[skip : skip + 1] not in (b"{", b"["):
        _refuse_json_scalar(p, data)  # JSON, but not a trace (nor a timeline)
    if data[skip : skip + 1] in (b"{", b"[") or _check_head(p, bytes(data[:4096]), False) == "chrome":
        from gapscope.parsers.chrome.loader import load_chrome

        return load_chrome(data, p, pending, read_stat)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise TraceFormatError(
            p,
            "not UTF-8 text and not JSON",
            line=line,
            column=col,
            hint="expected Chrome trace JSON or an ASCII timeline",
        ) from None
    from gapscope.parsers.ascii import load_ascii

    return load_ascii(text, p)
