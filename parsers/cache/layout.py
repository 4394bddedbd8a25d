"""The cache entry's file format: a ``Trace`` as one file that opens without decoding.

Layout (little-endian)::

    0   8 bytes  magic b"GAPSCOPE"
    8   u32      FORMAT_VERSION
    12  u32      CRC-32 of the header
    16  u64      header length H
    24  H bytes  header: msgpack of ``Header``
        zero padding to a multiple of ``ALIGN`` (64): the data starts there
        the arrays, each at a multiple of ``ALIGN`` from the data start, zero padded

``Header`` holds what identifies the entry (``build``: gapscope's version and a
fingerprint of the parser sources; ``key``: the input's ``FileKey``), where each array
lies (name, dtype, shape, offset, bytes) with a CRC-32 of the whole data region, and
the trace's small parts: names (a msgpack list of strings), lanes, source info,
warnings, extent, the stored args (``gapscope.parsers.cache.args``) and, for a trace
with CPU samples, their name table and frame cut (``SamplesMeta``; the sample columns
are arrays named ``cpu_samples.<field>``). The data region
is read into one buffer (``read_entry`` says why not a map) and the arrays are
read-only ``np.frombuffer`` views of it. A trace of 1M events (65 bytes of columns per
event) opens in a few tens of milliseconds, most of it the CRC.

Reading checks, in order: magic, format version, header length within the file,
header CRC, header schema (msgspec), build, key, file size, data CRC, each array's
dtype (numeric only), bounds and alignment, and that the trace's columns (and its CPU
samples' columns and indices) have their lengths. Any failure raises ``BadEntry``.
"""

from __future__ import annotations

import dataclasses
import math
import mmap
import os
import struct
import zlib
from pathlib import Path
from typing import Any, BinaryIO

import msgspec
import numpy as np

from gapscope.parsers.cache.args import StoredArgs
from gapscope.parsers.cache.key import FileKey, NotRegular, open_regular
from gapscope.parsers.model import CpuSamples, Lane, SourceInfo, Trace, TraceWarning

__all__ = [
    "MAGIC",
    "FORMAT_VERSION",
    "ALIGN",
    "ARRAY_FIELDS",
    "ArraySpec",
    "Header",
    "SamplesMeta",
    "BadEntry",
    "make_header",
    "encode_header",
    "decode_header",
    "write_entry",
    "read_entry",
    "names_of",
    "lanes_of",
    "source_of",
    "warnings_of",
    "samples_of",
    "trace_of",
]

MAGIC = b"GAPSCOPE"
FORMAT_VERSION = 1
ALIGN = 64
_PREFIX = struct.Struct("<8sIIQ")

#: ``Trace`` fields held as arrays; the others are in the header.
ARRAY_FIELDS = tuple(f.name for f in dataclasses.fields(Trace) if f.type == "np.ndarray")
#: ``cpu_samples``: its arrays are stored as ``cpu_samples.<field>``, the rest in
#: ``Header.cpu_samples``.
_HEADER_FIELDS = frozenset({"names", "lanes", "source", "warnings", "extent_ns", "_args_loader", "cpu_samples"})
#: ``CpuSamples`` fields held as arrays (``cpu_samples.<field>`` in the entry).
SAMPLE_ARRAY_FIELDS = tuple(f.name for f in dataclasses.fields(CpuSamples) if f.type == "np.ndarray")
_SAMPLE_PREFIX = "cpu_samples."
#: Event columns: one element per event. ``lane_offsets`` and the flows are not.
_EVENT_FIELDS = tuple(f for f in ARRAY_FIELDS if f not in ("lane_offsets", "flow_src", "flow_dst"))
#: dtypes an entry may hold (never ``object``).
_DTYPES = frozenset(np.dtype(t).str for t in (np.int64, np.int32, np.int16, np.int8, np.bool_, np.float64))
_LANE_FIELDS = tuple(f.name for f in dataclasses.fields(Lane))
_SOURCE_FIELDS = tuple(f.name for f in dataclasses.fields(SourceInfo))


class BadEntry(Exception):
    """A cache entry that cannot be used (unreadable, corrupt, another build or file)."""


class ArraySpec(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    """One array: ``offset`` from the data start (a multiple of ``ALIGN``), ``nbytes``."""

    name: str
    dtype: str
    shape: list[int]
    offset: int
    nbytes: int


class SamplesMeta(msgspec.Struct, forbid_unknown_fields=True):
    """What of ``Trace.cpu_samples`` is not an array: its name table and frame cut."""

    names: list[str]
    max_frames: int


class Header(msgspec.Struct, forbid_unknown_fields=True):
    """Everything of an entry but the array bytes (see the module docstring).
    ``text_bytes``: bytes of text the trace was decoded from (gzip undone; None for an
    Nsight export); ``source_path``: ``SourceInfo.path`` when it is not the input's
    path (None: the path the trace is opened by, as a fresh load gives)."""

    build: str
    key: FileKey
    text_bytes: int | None
    events: int
    arrays: list[ArraySpec]
    data_bytes: int
    data_crc: int
    names: list[str]
    lanes: list[list[Any]]
    source: dict[str, Any]
    source_path: str | None
    warnings: list[tuple[int | None, str | None, str]]
    extent_ns: tuple[int, int]
    args: StoredArgs
    cpu_samples: SamplesMeta | None = None


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _raw(a: np.ndarray) -> memoryview:
    """The bytes of array ``a`` (C order)."""
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8).data


def make_header(
    trace: Trace,
    *,
    build: str,
    key: FileKey,
    path: str,
    text_bytes: int | None,
    args: StoredArgs,
    args_arrays: dict[str, np.ndarray],
) -> tuple[Header, list[np.ndarray]]:
    """The header of ``trace`` (loaded from ``path``) and its arrays in file order.
    Raises ``ValueError`` when ``Trace`` has a field this format does not know."""
    unknown = {f.name for f in dataclasses.fields(Trace)} - set(ARRAY_FIELDS) - _HEADER_FIELDS
    if unknown:
        raise ValueError(f"Trace fields this cache format does not hold: {sorted(unknown)}")
    named = [(f, getattr(trace, f)) for f in ARRAY_FIELDS] + sorted(args_arrays.items())
    cs = trace.cpu_samples
    if cs is not None:
        named += [(_SAMPLE_PREFIX + f, getattr(cs, f)) for f in SAMPLE_ARRAY_FIELDS]
    specs: list[ArraySpec] = []
    arrays: list[np.ndarray] = []
    at = 0
    crc = 0
    for name, a in named:
        a = np.asarray(a)
        if a.dtype.str not in _DTYPES:
            raise ValueError(f"array {name} has dtype {a.dtype}")
        at = _align(at)
        specs.append(ArraySpec(name, a.dtype.str, list(a.shape), at, a.nbytes))
        arrays.append(a)
        at += a.nbytes
    data_bytes = at
    pos = 0
    for spec, a in zip(specs, arrays):  # the CRC of the data region as written, padding included
        if spec.offset > pos:
            crc = zlib.crc32(bytes(spec.offset - pos), crc)
        crc = zlib.crc32(_raw(a), crc)
        pos = spec.offset + spec.nbytes
    source = {f: getattr(trace.source, f) for f in _SOURCE_FIELDS}
    source_path = None if trace.source.path == path else trace.source.path
    source["path"] = ""
    header = Header(
        build=build,
        key=key,
        text_bytes=text_bytes,
        events=len(trace),
        arrays=specs,
        data_bytes=data_bytes,
        data_crc=crc,
        names=list(trace.names),
        lanes=[[getattr(ln, f) for f in _LANE_FIELDS] for ln in trace.lanes],
        source=source,
        source_path=source_path,
        warnings=[(w.line, w.field, w.message) for w in trace.warnings],
        extent_ns=(int(trace.extent_ns[0]), int(trace.extent_ns[1])),
        args=args,
        cpu_samples=SamplesMeta(list(cs.names), int(cs.max_frames)) if cs is not None else None,
    )
    return header, arrays


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(Header)


def encode_header(header: Header) -> bytes:
    """The header's bytes (raises ``TypeError``/``ValueError``/``OverflowError`` for a
    value msgpack cannot hold: such a trace is not cached)."""
    return _ENCODER.encode(header)


def decode_header(blob: bytes | memoryview) -> Header:
    """Raises ``msgspec.DecodeError``/``ValidationError`` (``ValueError``s)."""
    return _DECODER.decode(blob)


def entry_bytes(blob: bytes, header: Header) -> int:
    """Size of the entry file of ``header`` encoded as ``blob``."""
    return _align(_PREFIX.size + len(blob)) + header.data_bytes


def write_entry(fh: BinaryIO, blob: bytes, header: Header, arrays: list[np.ndarray]) -> None:
    """Write the entry (``blob``: ``encode_header(header)``) to ``fh``."""
    fh.write(_PREFIX.pack(MAGIC, FORMAT_VERSION, zlib.crc32(blob), len(blob)))
    fh.write(blob)
    fh.write(bytes(_align(_PREFIX.size + len(blob)) - _PREFIX.size - len(blob)))
    pos = 0
    for spec, a in zip(header.arrays, arrays):
        if spec.offset > pos:
            fh.write(bytes(spec.offset - pos))
        fh.write(_raw(a))
        pos = spec.offset + spec.nbytes


def read_entry(path: Path, key: FileKey, build: str) -> tuple[Header, dict[str, np.ndarray]]:
    """The header and arrays (read-only) of the entry at ``path``, checked against the
    input's ``key`` and this ``build``. Only a regular file is opened, never waited on
    (``key.open_regular``: a FIFO, a device, a directory or a symbolic link in place of
    an entry is refused). The data region is read into memory, not mapped: a map of a
    file that another process truncates kills its reader with ``SIGBUS`` whenever a
    page past the new end is touched, for as long as the trace lives; a copy cannot,
    and a file cut while it is read gives a short read (``BadEntry``). Raises
    ``BadEntry``, or ``OSError`` when the file cannot be read (``FileNotFoundError``:
    no entry)."""
    try:
        fd = open_regular(path, follow=False)
    except NotRegular as exc:
        raise BadEntry(str(exc)) from None
    try:
        size = os.fstat(fd).st_size
        prefix = os.pread(fd, _PREFIX.size, 0)
        if len(prefix) < _PREFIX.size:
            raise BadEntry("shorter than its prefix")
        magic, version, header_crc, header_len = _PREFIX.unpack(prefix)
        if magic != MAGIC:
            raise BadEntry("not a gapscope cache entry")
        if version != FORMAT_VERSION:
            raise BadEntry(f"format version {version}, not {FORMAT_VERSION}")
        if _PREFIX.size + header_len > size:
            raise BadEntry("header runs past the end of the file")
        blob = os.pread(fd, header_len, _PREFIX.size)
        if len(blob) != header_len or zlib.crc32(blob) != header_crc:
            raise BadEntry("header CRC mismatch")
        try:
            header = decode_header(blob)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise BadEntry(f"header: {exc}") from None
        if header.build != build:
            raise BadEntry(f"written by {header.build}, not {build}")
        if header.key != key:
            raise BadEntry("for another version of the file")
        start = _align(_PREFIX.size + header_len)
        if start + header.data_bytes != size:
            raise BadEntry(f"{size} bytes, expected {start + header.data_bytes} (truncated?)")
        data = _private_bytes(header.data_bytes)
        if _read_into(fd, data.data, start) != header.data_bytes:
            raise BadEntry("cut short while read")
    finally:
        os.close(fd)
    if zlib.crc32(data.data) != header.data_crc:
        raise BadEntry("data CRC mismatch")
    data.flags.writeable = False
    arrays: dict[str, np.ndarray] = {}
    for spec in header.arrays:
        if spec.dtype not in _DTYPES:
            raise BadEntry(f"array {spec.name}: dtype {spec.dtype!r}")
        dtype = np.dtype(spec.dtype)
        count = math.prod(spec.shape)
        if (
            spec.offset % ALIGN
            or spec.offset < 0
            or min(spec.shape, default=0) < 0
            or count * dtype.itemsize != spec.nbytes
            or spec.offset + spec.nbytes > header.data_bytes
        ):
            raise BadEntry(f"array {spec.name}: bad extent")
        arrays[spec.name] = np.frombuffer(data, dtype=dtype, count=count, offset=spec.offset).reshape(spec.shape)
    missing = [f for f in ARRAY_FIELDS if f not in arrays]
    if missing:
        raise BadEntry(f"arrays missing: {missing}")
    n = header.events
    if any(arrays[f].shape != (n,) for f in _EVENT_FIELDS):
        raise BadEntry("event columns of unequal length")
    if arrays["lane_offsets"].shape != (len(header.lanes) + 1,) or arrays["flow_src"].shape != arrays["flow_dst"].shape:
        raise BadEntry("lane offsets or flows of the wrong length")
    if header.cpu_samples is not None:
        _check_samples(header, arrays)
    return header, arrays


def _check_samples(header: Header, arrays: dict[str, np.ndarray]) -> None:
    """Raise ``BadEntry`` unless the entry's ``cpu_samples.*`` arrays are all there,
    of consistent lengths, and index its lanes and sample names only."""
    assert header.cpu_samples is not None
    try:
        a = {f: arrays[_SAMPLE_PREFIX + f] for f in SAMPLE_ARRAY_FIELDS}
    except KeyError as exc:
        raise BadEntry(f"CPU sample array missing: {exc}") from None
    n = a["start_ns"].shape[0]
    off = a["frame_offsets"]
    m = int(off[-1]) if off.shape == (n + 1,) and n else 0
    names = len(header.cpu_samples.names)
    if (
        any(a[f].shape != (n,) for f in ("start_ns", "lane", "stack_depth"))
        or off.shape != (n + 1,)
        or any(a[f].shape != (m,) for f in ("frame_name", "frame_module", "frame_resolved"))
        or a["lane_offsets"].shape != (len(header.lanes) + 1,)
        or (n and (int(off[0]) != 0 or bool((np.diff(off) < 0).any())))
        or (m and not (0 <= int(a["frame_name"].min()) and int(a["frame_name"].max()) < names))
        or (m and not (0 <= int(a["frame_module"].min()) and int(a["frame_module"].max()) < names))
    ):
        raise BadEntry("CPU sample arrays of inconsistent lengths or indices")


def _private_bytes(n: int) -> np.ndarray:
    """``n`` bytes of this process's own memory (uint8), to read an entry into: an
    anonymous map faulted in at once (``MAP_POPULATE``) where there is one, which took
    a stable 35 ms of CPU for a 51 MB entry where ``np.empty``'s page-by-page faults
    took 25-125 ms on a busy machine (bench/cache.py's 1M-event trace, 2 cores)."""
    populate = getattr(mmap, "MAP_POPULATE", 0)
    if n <= 0 or not populate:
        return np.empty(max(n, 0), dtype=np.uint8)
    try:
        mem = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | populate)
    except (OSError, ValueError):
        return np.empty(n, dtype=np.uint8)
    return np.frombuffer(mem, dtype=np.uint8)


def _read_into(fd: int, view: memoryview, offset: int) -> int:
    """Read the file ``fd`` from ``offset`` into ``view`` until it is full or the file
    ends (``os.preadv`` reads at most about 2 GiB per call); returns the bytes read."""
    done = 0
    while done < len(view):
        n = os.preadv(fd, [view[done:]], offset + done)
        if n <= 0:
            break
        done += n
    return done


def _tuples(v: Any) -> Any:
    """msgpack arrays back to the tuples a ``Lane.sort_key`` holds."""
    return tuple(_tuples(x) for x in v) if isinstance(v, (list, tuple)) else v


def names_of(header: Header) -> tuple[str, ...]:
    return tuple(header.names)


def lanes_of(header: Header) -> tuple[Lane, ...]:
    out = []
    for values in header.lanes:
        fields = dict(zip(_LANE_FIELDS, values, strict=True))
        fields["sort_key"] = _tuples(fields["sort_key"])
        out.append(Lane(**fields))
    return tuple(out)


def source_of(header: Header, path: str) -> SourceInfo:
    """The ``SourceInfo`` of the trace opened by ``path``."""
    fields = dict(header.source)
    fields["path"] = path if header.source_path is None else header.source_path
    return SourceInfo(**fields)


def warnings_of(header: Header) -> tuple[TraceWarning, ...]:
    return tuple(TraceWarning(line, field, message) for line, field, message in header.warnings)


def samples_of(header: Header, arrays: dict[str, np.ndarray]) -> CpuSamples | None:
    """The ``CpuSamples`` of an entry (checked by ``read_entry``), or None."""
    meta = header.cpu_samples
    if meta is None:
        return None
    return CpuSamples(
        **{f: arrays[_SAMPLE_PREFIX + f] for f in SAMPLE_ARRAY_FIELDS},
        names=tuple(meta.names),
        max_frames=meta.max_frames,
    )


def trace_of(header: Header, arrays: dict[str, np.ndarray], loader, path: str) -> Trace:
    """The ``Trace`` of an entry (opened by ``path``; ``loader``: its args loader)."""
    columns: dict[str, Any] = {f: arrays[f] for f in ARRAY_FIELDS}
    return Trace(
        **columns,
        names=names_of(header),
        lanes=lanes_of(header),
        source=source_of(header, path),
        warnings=warnings_of(header),
        extent_ns=(header.extent_ns[0], header.extent_ns[1]),
        _args_loader=loader,
        cpu_samples=samples_of(header, arrays),
    )
