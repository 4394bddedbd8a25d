"""``load(path)``: read bytes, undo gzip (every member), pick a loader by content."""

from __future__ import annotations

import codecs
import os
import stat
import types
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from gapscope.parsers.cache.settings import unlinked_temporary_file
from gapscope.parsers.errors import TraceFormatError
from gapscope.parsers.json.scan import Text, text_start
from gapscope.parsers.model import Trace
from gapscope.settings import SettingsError, read_settings

if TYPE_CHECKING:
    from gapscope.parsers.chrome.parallel.fork import FileParts

_inflate: types.ModuleType
try:  # ISA-L's inflate: about 3x zlib's speed on traces (``INFLATE_OUT_BYTES``); optional
    from isal import isal_zlib as _inflate
except ImportError:  # pragma: no cover - depends on the install
    _inflate = zlib
#: Errors of either inflater.
_INFLATE_ERRORS: tuple[type[Exception], ...] = (zlib.error, getattr(_inflate, "error", zlib.error))

__all__ = [
    "check_size",
    "default_limit",
    "load",
    "load_progress",
    "args_text",
    "read_bytes",
    "sniff",
    "trace_limit",
]

#: Bytes ``sniff`` reads (after gzip) to judge a file without loading it.
SNIFF_BYTES = 1 << 16

_GZIP_MAGIC = b"\x1f\x8b"


#: ``GAPSCOPE_MAX_TRACE_BYTES``: most bytes of trace text (after gzip) ``load`` reads, a
#: number with an optional K/M/G/T suffix (powers of 1024). Unset: ``default_limit()``.
LIMIT_ENV = "GAPSCOPE_MAX_TRACE_BYTES"
#: Share of available memory the text may take by default: loading holds the text
#: plus its decoded events, about 3x the text at peak.
MEMORY_SHARE = 3
#: Default limit when available memory cannot be read (no /proc/meminfo).
FALLBACK_LIMIT = 4 << 30
#: Floor of the default limit, so a busy machine still loads ordinary traces.
MIN_DEFAULT_LIMIT = 256 << 20
#: A gzip file whose output passes ``RATIO_CHECK_BYTES`` at more than
#: ``MAX_INFLATE_RATIO`` times the compressed bytes consumed is refused there (a "gzip
#: bomb": a few MB of zeros or spaces inflates ~1000x; real trace JSON 10-50x). Off
#: when ``GAPSCOPE_MAX_TRACE_BYTES`` is set: the user has stated the size they accept.
MAX_INFLATE_RATIO = 200
RATIO_CHECK_BYTES = 128 << 20
#: Bytes read per step; every step is checked against the limit.
CHUNK_BYTES = 16 << 20
_IN_CHUNK_BYTES = 1 << 20
#: Most bytes one inflate call produces (each step checked against the limit). ISA-L
#: inflates 2-3x faster into 1 MiB pieces than into 16 MiB ones (a 148 MB text: 0.13-0.16
#: s against 0.30-0.43 s; zlib 0.42-0.49 s): a large output buffer costs fresh pages
#: on every call.
INFLATE_OUT_BYTES = 1 << 20

_LIMIT_HINT = f"set {LIMIT_ENV} (e.g. 32G) to raise the limit"


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


def _available_memory_bytes() -> int | None:
    """``MemAvailable`` from /proc/meminfo, or None where it cannot be read."""
    try:
        with open("/proc/meminfo", "rb") as fh:
            for line in fh.read(1 << 16).splitlines():
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def default_limit() -> int:
    """The limit used when ``GAPSCOPE_MAX_TRACE_BYTES`` is unset: available memory /
    ``MEMORY_SHARE`` (at least ``MIN_DEFAULT_LIMIT``), or ``FALLBACK_LIMIT``."""
    avail = _available_memory_bytes()
    if avail is None:
        return FALLBACK_LIMIT
    return max(MIN_DEFAULT_LIMIT, avail // MEMORY_SHARE)


def trace_limit() -> tuple[int, bool]:
    """(most bytes of trace text ``load`` accepts, whether the user set it). Raises
    ``gapscope.settings.SettingsError`` (a ``ValueError``) when ``GAPSCOPE_MAX_TRACE_BYTES``
    (or another ``GAPSCOPE_*`` variable) holds a bad value."""
    value = read_settings().max_trace_bytes
    if value is None:
        return default_limit(), False
    return value, True


def _limit_for(p: str) -> tuple[int, bool]:
    try:
        return trace_limit()
    except ValueError as exc:
        raise TraceFormatError(p, str(exc)) from None


def _too_big(p: str, what: str, limit: int, user_set: bool) -> TraceFormatError:
    where = f"the limit set by {LIMIT_ENV}" if user_set else "the limit (a third of available memory)"
    return TraceFormatError(p, f"{what}, more than {where} of {limit:,} bytes; refusing to load it", hint=_LIMIT_HINT)


def check_size(path: str | os.PathLike) -> None:
    """Refuse, from its size alone, a plain file larger than the limit (before any
    read or fork). Raises ``TraceFormatError``; missing or special files pass here
    (``read_bytes`` names those)."""
    p = os.fspath(path)
    try:
        st = os.stat(p)
    except OSError:
        return
    if not stat.S_ISREG(st.st_mode):
        return
    limit, user_set = _limit_for(p)
    if st.st_size > limit:
        raise _too_big(p, f"file is {st.st_size:,} bytes", limit, user_set)


def _check_start(p: str) -> None:
    """Refuse a plain file over the limit, or whose first ``CHUNK_BYTES`` hold a NUL
    byte (a sparse or zero-filled file), before anything maps or reads all of it."""
    check_size(p)
    with _open_regular(p) as fh:
        try:
            first = fh.read(CHUNK_BYTES)
        except OSError as exc:
            raise TraceFormatError(p, f"cannot read: {exc.strerror or exc}") from None
    if first[:2] != _GZIP_MAGIC:
        _refuse_nul(p, first, 0, len(first))


def read_bytes(
    path: str | os.PathLike, mutable_min_bytes: int | None = None, binary: bool = False
) -> bytes | bytearray:
    """Return the file's bytes, decompressed when gzip (all members, RFC 1952).

    A plain file of at least ``mutable_min_bytes`` comes back as a ``bytearray`` (read
    in place, no extra copy), which a loader may frame in place (``chrome_parallel``).
    ``binary``: the content is binary (a Perfetto protobuf trace): NUL bytes are data.

    The size limit (``trace_limit``) is checked while reading, every ``CHUNK_BYTES``:
    memory never holds much more than the limit, whatever the file or its gzip data
    claims. A NUL byte (never in JSON or an ASCII timeline; a sparse or zero-filled
    file) stops the read at once.

    Raises ``TraceFormatError`` when the path is not a regular file, cannot be read,
    holds NUL bytes, is larger than the limit, the gzip data is corrupt or cut inside
    its header, or it decompresses to more than the limit (or, with the default
    limit, more than ``MAX_INFLATE_RATIO`` times its size). The file is opened
    read-only and never written.
    """
    p = os.fspath(path)
    limit, user_set = _limit_for(p)
    with _open_regular(p) as fh:
        try:
            data = _read(p, fh, mutable_min_bytes, limit, user_set, binary)
        except OSError as exc:
            raise TraceFormatError(p, f"cannot read: {exc.strerror or exc}") from None
    if data[:2] == _GZIP_MAGIC:
        data = _gunzip_all(p, data, limit, user_set, binary=binary)
    return data


def _refuse_nul(p: str, buf, start: int, end: int) -> None:
    """Refuse ``buf`` when ``buf[start:end]`` holds a NUL byte (never in JSON text or
    an ASCII timeline: a sparse, zero-filled or binary file). In the first 4 KiB the
    content checks of ``sniff`` name the file's kind (binary, compressed Nsight...)."""
    at = buf.find(b"\x00", start, end)
    if at < 0:
        return
    if at < 4096:
        head = bytes(buf[:4096])
        if head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] not in (b"{", b"["):
            _check_head(p, head, False)
    line = buf.count(b"\n", 0, at) + 1
    column = at - (buf.rfind(b"\n", 0, at) + 1) + 1
    raise TraceFormatError(
        p,
        f"binary data (a NUL byte at byte {at:,}), not a trace",
        line=line,
        column=column,
        hint="a sparse or zero-filled file, or a cut-off write?",
    )


def _read(
    p: str, fh, mutable_min_bytes: int | None, limit: int, user_set: bool, binary: bool = False
) -> bytes | bytearray:
    """All of ``fh``: bytes, or a ``bytearray`` when the file has at least
    ``mutable_min_bytes`` (a file that shrinks or grows while read is read to its end,
    up to ``limit``). Plain (not gzip) content is checked for NUL bytes as it comes,
    unless ``binary``."""
    size = os.fstat(fh.fileno()).st_size
    if size > limit:
        raise _too_big(p, f"file is {size:,} bytes", limit, user_set)
    first = fh.read(CHUNK_BYTES)  # checked before a buffer of the file's size is zero-filled
    unchecked = binary or first[:2] == _GZIP_MAGIC  # NULs in gzip are looked for once inflated
    if not unchecked:
        _refuse_nul(p, first, 0, len(first))
    if mutable_min_bytes is not None and size >= mutable_min_bytes and len(first) == CHUNK_BYTES:
        buf = bytearray(size)
        buf[: len(first)] = first
        got = len(first)
    else:
        buf = bytearray(first)
        got = len(buf)
    del first
    with memoryview(buf) as view:
        while got < len(buf):
            n = fh.readinto(view[got : min(len(buf), got + CHUNK_BYTES)])
            if not n:
                break
            if not unchecked:
                _refuse_nul(p, buf, got, got + n)
            got += n
    if got < len(buf):
        del buf[got:]
    while True:  # the rest: all of a small file, or what a large one grew by
        chunk = fh.read(CHUNK_BYTES)
        if not chunk:
            break
        buf += chunk
        if not unchecked:
            _refuse_nul(p, buf, len(buf) - len(chunk), len(buf))
        if len(buf) > limit:
            raise _too_big(p, f"file grew past {len(buf):,} bytes while read", limit, user_set)
    if mutable_min_bytes is None or len(buf) < mutable_min_bytes:
        return bytes(buf)
    return buf


class _Damaged(Exception):
    """A gzip member cut off or corrupt while inflating to a sink: read it in memory."""


def _gunzip_all(
    path: str,
    data: bytes | bytearray,
    limit: int,
    user_set: bool,
    inflate: types.ModuleType | None = None,
    sink=None,
    binary: bool = False,
) -> bytearray:
    """Decompress every gzip member; a cut-off last member yields what was readable.
    Inflated by ISA-L (``isal``) when it is installed, else (or given ``inflate``) by
    zlib; a file whose last member is cut off or corrupt is inflated again by zlib,
    which reads more of a cut-off member (and names the damage in its own words).
    Grown in one ``bytearray`` (no second copy at the end), or, given ``sink``, each
    piece handed to ``sink(piece, consumed)`` as it comes, with the compressed bytes
    read so far (an empty ``bytearray`` is returned; damage then raises ``_Damaged``).
    ``binary``: NUL bytes are data (a Perfetto protobuf trace), not refused.

    Output is produced ``INFLATE_OUT_BYTES`` at a time and checked at each step, so a bomb
    is refused with at most about ``RATIO_CHECK_BYTES`` (or ``limit``) inflated.
    Raises ``TraceFormatError`` for corrupt data, a cut inside the first header (nothing
    readable), output beyond ``limit`` bytes, or (default limit only) output past
    ``RATIO_CHECK_BYTES`` at more than ``MAX_INFLATE_RATIO`` x the compressed bytes read.
    """
    out = bytearray()

    def emit(chunk: bytes, consumed: int) -> None:
        # a NUL byte is never in a trace's text: refused as for a plain file (an inflated
        # one loaded with an "event skipped" warning), with its line from memory
        if sink is None:
            out.extend(chunk)
            if not binary and b"\x00" in chunk:
                _refuse_nul(path, out, len(out) - len(chunk), len(out))
            return
        if b"\x00" in chunk:
            raise _Damaged("a NUL byte in the inflated text")  # read in memory, which says where
        sink(chunk, consumed)

    total = 0
    view = memoryview(data)
    at = 0  # offset in ``data`` of the member being read
    while at < len(view):
        d = (inflate or _inflate).decompressobj(16 + zlib.MAX_WBITS)
        pos = at  # next compressed byte to feed
        feed: bytes | memoryview = b""
        member_out = 0
        try:
            while True:
                if not feed:
                    if pos >= len(view):
                        chunk = d.flush()  # input ended inside this member
                        total += len(chunk)
                        member_out += len(chunk)
                        emit(chunk, pos)
                        break
                    feed = view[pos : pos + _IN_CHUNK_BYTES]
                    pos += len(feed)
                chunk = d.decompress(feed, INFLATE_OUT_BYTES)
                feed = d.unconsumed_tail
                total += len(chunk)
                member_out += len(chunk)
                emit(chunk, pos - len(feed))
                read_in = pos - len(feed) - len(d.unused_data)
                if total > limit:
                    raise _too_big(
                        path,
                        f"gzip data expands past {total:,} bytes (from {read_in:,} of {len(data):,} compressed bytes)",
                        limit,
                        user_set,
                    )
                if not user_set and total > RATIO_CHECK_BYTES and total > MAX_INFLATE_RATIO * max(read_in, 1):
                    raise TraceFormatError(
                        path,
                        f"gzip data expands {total // max(read_in, 1):,}x ({total:,} bytes from the first "
                        f"{read_in:,} compressed bytes), more than the limit of {MAX_INFLATE_RATIO}x; refusing to "
                        "load it (a gzip bomb?)",
                        hint=f"a real trace inflates 10-50x; set {LIMIT_ENV} to a size to load it anyway",
                    )
                if d.eof:
                    break
        except _INFLATE_ERRORS as exc:
            if sink is not None:
                raise _Damaged(str(exc)) from None
            if (inflate or _inflate) is not zlib:  # damaged: zlib's reading (and message) of it
                return _gunzip_all(path, data, limit, user_set, zlib, binary=binary)
            if "check" in str(exc):
                # the whole member inflated but its trailer's CRC-32 or size does not match
                # it: refused at every size, as gunzip does (a large file lost its last
                # piece of text and loaded with a warning of a cut-off event)
                raise TraceFormatError(
                    path,
                    f"corrupt gzip data ({exc}): the text does not match the checksum or size in its gzip trailer",
                    hint="`gzip -t FILE` tests it; the file may be damaged",
                ) from None
            if not total:
                raise TraceFormatError(path, f"corrupt gzip data ({exc})", hint="is the file complete?") from None
            break
        if not d.eof and sink is not None:
            raise _Damaged("cut off")
        if not d.eof and (inflate or _inflate) is not zlib:
            # as much of the cut member as zlib reads
            return _gunzip_all(path, data, limit, user_set, zlib, binary=binary)
        if not d.eof:  # truncated member: keep what we have, the JSON loader warns
            if total == 0:
                raise TraceFormatError(path, "gzip data cut off before any content", hint="is the file complete?")
            break
        at = pos - len(d.unused_data)
        while at < len(view):  # skip zero padding between members
            piece = bytes(view[at : at + _IN_CHUNK_BYTES])
            kept = piece.lstrip(b"\x00")
            at += len(piece) - len(kept)
            if kept:
                break
    return out


def inflate_to_file(path: str, limit: int, user_set: bool, on_write=None) -> int | None:
    """Inflate the gzip file ``path`` into an unlinked temporary file of gapscope's cache
    directory (``gapscope.parsers.cache.settings.cache_root``, sub-folder ``inflated``), for the loader to map instead of holding the text in
    memory; returns the open descriptor (read/write, offset at its end), or None
    (no room, no such directory, damaged gzip: read it in memory instead). The file
    is unlinked before anything is written: nothing is left behind, whatever
    happens. ``on_write(fd, written, consumed, compressed)``: called after each piece
    is written, with the bytes of text written so far, the compressed bytes read to
    make them and the gzip file's size (``chrome.decode.Inflating`` starts decoders on it). Raises
    ``TraceFormatError`` for what ``read_bytes`` refuses (too large, a gzip bomb)."""
    fd = unlinked_temporary_file()
    if fd is None:
        return None
    try:
        with _open_regular(path) as fh:
            # read in steps as ``read_bytes`` does: ``fh.read(limit + 1)`` asked for the
            # whole limit (8 GB) at once, a MemoryError under ``ulimit -v``
            data = _read(path, fh, None, limit, user_set)

        written = 0

        def write(chunk: bytes, consumed: int) -> None:
            nonlocal written
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view) :]
            written += len(chunk)
            if on_write is not None:
                on_write(fd, written, consumed, len(data))

        _gunzip_all(path, data, limit, user_set, sink=write)
        return fd
    except (OSError, _Damaged):
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise


def sniff(path: str | os.PathLike) -> str:
    """Check cheaply, without loading, that ``path`` looks like a trace ``load`` accepts.

    Reads at most ``SNIFF_BYTES`` (64 KiB) of content (gunzipped when gzip) and applies
    the same checks and messages as ``load``: exists, is a file, readable, gzip
    intact at its start, not empty, JSON object/array, not binary, UTF-8, and for text
    the first timeline line of an ASCII timeline. Returns ``"chrome"``, ``"ascii"``,
    ``"perfetto"`` for a Perfetto protobuf trace (``gapscope.parsers.perfetto``),
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
    from gapscope.parsers.perfetto.loader import looks_like_perfetto

    if looks_like_perfetto(data):
        return "perfetto"
    return _check_head(p, data, complete)


def _check_head(p: str, data: bytes, complete: bool) -> str:
    """``load``'s content checks on ``data`` (the whole content when ``complete``,
    else its head): ``"chrome"`` or ``"ascii"``, or ``TraceFormatError``."""
    lead = text_start(data)  # blank lines before the content are not content
    head = data[lead : lead + 4096]
    if not head:
        if not complete:  # only blanks as far as we can see: judged by what follows
            return "ascii"
        raise TraceFormatError(
            p, "file is empty", line=1, column=1, hint="expected Chrome trace JSON or an ASCII timeline"
        )
    if head[:1] in (b"{", b"["):
        from gapscope.parsers.nsys.json_export import refuse_json_export

        refuse_json_export(p, data, len(data) - len(data.lstrip(b"\xef\xbb\xbf \t\r\n")))
        return "chrome"
    if b"\x00" in head:
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


def load_progress() -> float | None:
    """How far the loads running now (in any thread) have got: the share (0 to 1) of
    their text decoded so far, while a big file is decoded in parts
    (``gapscope.parsers.chrome.parallel.fork.progress``); None otherwise (a small file,
    the cache, gzip being inflated, the trace being assembled after its parts)."""
    from gapscope.parsers.chrome.parallel import fork as chrome_parallel

    return chrome_parallel.progress()


def load(
    path: str | os.PathLike,
    while_decoding: Callable[[FileParts, str], None] | None = None,
) -> Trace:
    """Load a trace file of any supported format, detected from its content.

    Formats: Chrome Trace Event Format JSON (object or array form, including Kineto /
    torch.profiler output of every vintage and the legacy autograd export), gzip of
    those, Perfetto TrackEvent protobuf traces (``.pftrace``, gzip or not; the
    ``perfetto`` extra; ``gapscope.parsers.perfetto``; not cached), ASCII timelines
    (event list or lane art; see ``docs/ascii-timelines.md``),
    and Nsight Systems SQLite exports, or reports exported to SQLite with ``nsys`` when
    it is installed (``gapscope.parsers.nsys``).

    A file loaded before comes from the trace cache (``gapscope.parsers.cache``), equal
    to a fresh load, when it has not changed; a large file loaded fresh is written
    there in the background. ``GAPSCOPE_NO_CACHE=1`` turns the cache off.

    ``while_decoding(parts, path)``: called from this thread while the forked children
    of a large Chrome file decode it (``chrome.decode.decode``): a viewer's
    device preview (``gapscope.parsers.preview``).

    Returns a ``Trace``. Raises ``TraceFormatError`` (with path, line, column and a
    hint) for anything that is not a trace; never any other exception for bad input.
    """
    p = os.fspath(path)
    try:  # every GAPSCOPE_* variable, once: a bad value is this load's error
        read_settings()
    except SettingsError as exc:
        raise TraceFormatError(p, str(exc)) from None
    from gapscope.parsers.cache.store import TraceCache, wait_for_writes

    cache = TraceCache.open(p)
    if cache is not None:
        hit = cache.get(args_text)
        if hit is not None and (hit.text_bytes is None or hit.text_bytes <= _limit_for(p)[0]):
            return hit.trace
        wait_for_writes(deferred=False)  # one write at a time, and none beside the loader's fork
    trace, text = _load_fresh(p, while_decoding)
    if cache is not None and trace.source.format != "perfetto":  # its args are read from no file text
        cache.put_later(trace, text)
    return trace


def _load_fresh(p: str, while_decoding: Callable[[FileParts, str], None] | None = None) -> tuple[Trace, Text | None]:
    """``load`` without the cache: the trace, and the text it was decoded from (gzip
    undone; None for an Nsight file, which SQLite reads). ``while_decoding``: as
    ``load``'s."""
    from gapscope.parsers.nsys import files as nsys_files

    with _open_regular(p) as fh:  # an Nsight file is opened by SQLite, never read whole
        try:
            head = fh.read(nsys_files.HEAD_BYTES)
        except OSError as exc:
            raise TraceFormatError(p, f"cannot read: {exc.strerror or exc}") from None
    nsight = nsys_files.kind_of(p, head)
    if nsight is not None:
        return nsys_files.load(p, nsight), None
    if _is_perfetto(p, head):
        from gapscope.parsers.perfetto.loader import load_perfetto

        # a bytearray: read in place, not copied into bytes at the end (0.05 CPU-s at 81 MB)
        return load_perfetto(lambda: read_bytes(p, mutable_min_bytes=0, binary=True), p), None
    from gapscope.parsers.chrome.parallel import fork as chrome_parallel

    _check_start(p)  # before the children below map the file
    if chrome_parallel.enabled(1 << 62):
        from gapscope.parsers.chrome.decode import decode

        limit, user_set = _limit_for(p)
        # decoded in parts by children; None: read it
        got = decode(p, p, limit, while_decoding)
        if got is not None:
            return got
        if _is_large_gzip(p, chrome_parallel.MIN_BYTES):
            from gapscope.parsers.chrome.decode import Inflating

            inflating = Inflating(p, _gzip_size_field(p))  # may fork decoders while it inflates
            try:
                fd = inflate_to_file(p, limit, user_set, on_write=inflating)  # mapped, not held in memory
            except BaseException:
                inflating.close()
                raise
            if fd is None:
                inflating.close()
            else:
                try:
                    got = decode(fd, p, limit, while_decoding, inflating)
                    if got is not None:
                        return got
                    inflated = _inflated_text(fd)  # not split after all: the text inflated, not again
                finally:
                    inflating.close()
                    os.close(fd)
                return _load(p, inflated), inflated
    data = read_bytes(p, mutable_min_bytes=chrome_parallel.MIN_BYTES)
    return _load(p, data), data


def _is_perfetto(p: str, head: bytes) -> bool:
    """Whether the file whose first bytes are ``head`` holds a Perfetto protobuf trace
    (gzip or not), by content (``perfetto.loader.looks_like_perfetto``)."""
    from gapscope.parsers.perfetto.loader import looks_like_perfetto

    if head[:2] == _GZIP_MAGIC:
        with _open_regular(p) as fh:
            try:
                raw = fh.read(SNIFF_BYTES)
            except OSError:
                return False
        try:
            head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw, SNIFF_BYTES)
        except zlib.error:
            return False
    return looks_like_perfetto(head)


def _gzip_size_field(p: str) -> int:
    """The ISIZE field of the gzip file ``p``'s last member (0 when unreadable)."""
    try:
        with open(p, "rb") as fh:
            return _size_field_of(fh)
    except OSError:
        return 0


def _size_field_of(fh) -> int:
    """The last 4 bytes of the open file ``fh``, little-endian: a gzip file's ISIZE
    (RFC 1952: its last member's size mod 2**32). Raises ``OSError`` (too short)."""
    fh.seek(-4, os.SEEK_END)
    return int.from_bytes(fh.read(4), "little")


def args_text(path: str) -> Text:
    """The text a cached Chrome trace reads its ``args`` from, as a fresh load holds it:
    a plain file of ``chrome_parallel.MIN_BYTES`` or more is mapped read-only
    (``MappedText``: its pages are the page cache's, not this process's memory, and it
    is read only while unchanged), a gzip file that inflates to that much is inflated
    into an unlinked temporary file and mapped; anything smaller is read whole
    (``read_bytes``). Raises ``TraceFormatError`` as ``read_bytes`` does."""
    import mmap

    from gapscope.parsers.chrome.parallel import fork as chrome_parallel
    from gapscope.parsers.json.mapped import MappedText

    p = os.fspath(path)
    fd = None
    try:
        if _is_large_gzip(p, chrome_parallel.MIN_BYTES):
            limit, user_set = _limit_for(p)
            fd = inflate_to_file(p, limit, user_set)
        else:
            with _open_regular(p) as fh:
                size = os.fstat(fh.fileno()).st_size
                if size >= chrome_parallel.MIN_BYTES and fh.read(2) != _GZIP_MAGIC:
                    fd = os.dup(fh.fileno())
        if fd is not None and os.fstat(fd).st_size > 0:
            return MappedText(fd, 0, access=mmap.ACCESS_READ)  # keeps its own descriptor
    except (OSError, ValueError):
        pass  # no map: read it whole
    finally:
        if fd is not None:
            os.close(fd)
    return read_bytes(p)


def _inflated_text(fd: int) -> Text:
    """The text ``inflate_to_file`` wrote to ``fd``, for a load in one piece: mapped
    read-only when it is JSON (its pages are the file's, which the kernel can drop,
    not this process's memory: ``hta/mtia_rank_0.json.gz``'s 87 MB text was read into
    memory), else read (the ASCII reader decodes a ``str``). The map cannot be cut
    under the loader: the file is unlinked, and only this process holds it."""
    import mmap

    from gapscope.parsers.json.mapped import MappedText

    head = os.pread(fd, 4096, 0)
    i = text_start(head)
    if 0 <= i < len(head) and head[i : i + 1] in (b"{", b"["):
        try:
            return MappedText(fd, 0, access=mmap.ACCESS_READ)  # keeps its own descriptor
        except (OSError, ValueError):
            pass
    return _read_fd(fd)


def _read_fd(fd: int) -> bytearray:
    """All of the open file ``fd`` (an inflated text ``inflate_to_file`` wrote)."""
    size = os.fstat(fd).st_size
    buf = bytearray(size)
    got = 0
    with memoryview(buf) as view:
        while got < size:
            n = os.preadv(fd, [view[got : got + CHUNK_BYTES]], got)
            if n <= 0:
                break
            got += n
    del buf[got:]
    return buf


def _is_large_gzip(p: str, min_bytes: int) -> bool:
    """Whether ``p`` is a gzip file that inflates to ``min_bytes`` or more, as far as
    its last member's size field (ISIZE, RFC 1952: the size mod 2**32) tells; a hint
    only (the inflated text is measured when read)."""
    try:
        with open(p, "rb") as fh:
            if fh.read(2) != _GZIP_MAGIC:
                return False
            size = os.fstat(fh.fileno()).st_size
            return size >= 18 and (_size_field_of(fh) >= min_bytes or size >= min_bytes)
    except OSError:
        return False


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


def _load(p: str, data: Text) -> Trace:
    skip = text_start(data)  # a JSON text may start with any amount of blanks
    if data[skip : skip + 1] == b"{":
        from gapscope.parsers.nsys.json_export import refuse_json_export

        refuse_json_export(p, data, skip)  # Nsight's one-record-per-line JSON
    if data[skip : skip + 1] not in (b"{", b"["):
        _refuse_json_scalar(p, data)  # JSON, but not a trace (nor a timeline)
    if (
        data[skip : skip + 1] in (b"{", b"[")
        or _check_head(p, bytes(data[: skip + 4096]), skip + 4096 >= len(data)) == "chrome"
    ):
        from gapscope.parsers.chrome.decode import decode

        return decode(data, p)[0]
    if not isinstance(data, (bytes, bytearray)):
        data = data.all_bytes()  # a map (never given for a text that is not JSON)
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

    return load_ascii(text, p, _limit_for(p))
