"""The diagnosis cache: a trace's diagnosis kept beside its trace cache entry, so that a
trace opened again shows its causes without diagnosing it again.

``diagnose_cached(trace, params)`` returns the ``Diagnosis`` of ``trace`` (with its
``findings`` computed, as the viewer's first screen shows them): read from the cache
when an entry for this file, these ``params``, this trace and this build of gapscope is
there, else diagnosed now and written in a background thread (``wait_for_writes``).

Keys and invalidation are the trace cache's (``gapscope.parsers.cache``): the cache is
off with ``GAPSCOPE_NO_CACHE`` and lives in ``GAPSCOPE_CACHE_DIR``; an entry is named
after the input file's ``FileKey`` (device, inode, size, mtime, ctime, a hash of its
head and tail) and the params, and holds that key again, a build id (the trace cache's
``build_id`` of the parser sources and a fingerprint of the analysis sources, so
another parser or analysis never serves an entry) and a CRC-32 fingerprint of the
trace's columns (start, duration, lane, kind, name; so a file changed between its load
and its diagnosis is never paired with another trace's diagnosis). Entries count
towards the trace cache's size budget and are evicted with its entries
(``gapscope.parsers.cache.store.make_room``). Only a file of at least
``settings.min_bytes()`` is cached (a smaller trace diagnoses in well under a second).

Layout (little-endian), as the trace cache's: 8 bytes magic ``b"GAPSDIAG"``, u32
``FORMAT_VERSION``, u32 CRC-32 of the header, u64 header length (at most
``MAX_HEADER_BYTES``), the header (JSON: keys, array specs, data CRC and the tree),
zero padding to ``ALIGN``, then numeric arrays (never ``object``), each at a multiple
of ``ALIGN``. The tree is the diagnosis's dataclasses as JSON objects
(``{"$c": class, "f": fields}``, only the classes of ``_CLASSES``), with enums
(``_ENUMS``), tuples, dicts with any keys, non-finite floats and arrays (``{"$a": k}``)
marked; nothing is unpickled and no name read from the file is imported or called but
those listed.

The cache folder is untrusted: the entry is opened only when it is a regular file
(``open_regular``, no symbolic link, never a FIFO), its sizes are checked before
anything is read into memory, both CRCs are checked, and the decoded diagnosis is
checked against the trace (its gap columns of one length, event and lane indices in
range), its params against the asked ones, and every ``int``, ``float``, ``str`` and
``bool`` field against its annotation. An entry that fails any check is logged as a
warning (``gapscope.cache`` logger), once per process while its file is unchanged, and
the trace is diagnosed afresh (and its entry rewritten).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import json
import logging
import math
import os
import struct
import threading
import types
import typing
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from gapscope.analysis.budget import Budget
from gapscope.analysis.diagnose import Diagnosis, diagnose
from gapscope.analysis.findings import Finding, Findings, findings
from gapscope.analysis.picket import PicketEpisode
from gapscope.analysis.steps import GapGroup, Steps
from gapscope.analysis.types import Card, Cause, DeviceSummary, Evidence, Gaps, Params, Trust, WaitKind
from gapscope.parsers.cache import settings
from gapscope.parsers.cache.key import FileKey, NotRegular, key_of, open_regular
from gapscope.parsers.cache.store import build_id, make_room, source_fingerprint, write_whole
from gapscope.parsers.model import Trace

__all__ = [
    "diagnose_cached",
    "cached_diagnosis",
    "has_entry",
    "DiagnosisCache",
    "BadDiagnosisEntry",
    "wait_for_writes",
    "trace_fingerprint",
    "MAGIC",
    "FORMAT_VERSION",
    "MAX_HEADER_BYTES",
    "SUFFIX",
]

log = logging.getLogger("gapscope.cache")

MAGIC = b"GAPSDIAG"
FORMAT_VERSION = 1
ALIGN = 64
#: The file name ending of a diagnosis entry (``make_room`` evicts these too).
SUFFIX = ".diag"
#: Largest header read (the tree: findings, cards, groups' labels; tens of kB at 5M events).
MAX_HEADER_BYTES = 64 << 20
_PREFIX = struct.Struct("<8sIIQ")
_DTYPES = frozenset(np.dtype(t).str for t in (np.int64, np.int32, np.int16, np.int8, np.bool_, np.float64))
#: The dataclasses an entry may hold (by name); ``Diagnosis`` itself is the tree's root.
_CLASSES: dict[str, type] = {
    c.__name__: c
    for c in (Params, DeviceSummary, Gaps, PicketEpisode, Steps, GapGroup, Budget, Findings, Finding, Card, Evidence)
}
_ENUMS: dict[str, type[enum.Enum]] = {c.__name__: c for c in (Cause, WaitKind, Trust)}
#: The ``Diagnosis`` fields the entry holds (``trace`` is the caller's; the lazy caches
#: are rebuilt on use); ``findings`` is kept in ``derived``.
_ROOT_FIELDS = (
    "params",
    "devices",
    "gaps",
    "episodes",
    "steps",
    "groups",
    "budget",
    "invalid_gpu_ops",
    "_launches",
    "_exclude",
)
_MAX_DEPTH = 64

_writers: list[threading.Thread] = []
_writers_lock = threading.Lock()
#: Entries this process found unusable (``DiagnosisCache._identity``), not read again;
#: forgotten all at once past ``MAX_REFUSED``.
_refused: set[tuple] = set()
MAX_REFUSED = 64


class BadDiagnosisEntry(Exception):
    """A diagnosis entry that cannot be used (corrupt, truncated, not for this trace)."""


class _Unstorable(Exception):
    """A value the entry format does not hold (the diagnosis is then not cached)."""


# ----------------------------------------------------------------- identity
@functools.cache
def analysis_build_id() -> str:
    """The trace cache's ``build_id`` (parsers), this format's version and a
    fingerprint (size and mtime) of every source file of ``gapscope.analysis``."""
    return f"{build_id()}+analysis{FORMAT_VERSION}.{source_fingerprint(Path(__file__).resolve().parent)}"


def params_digest(params: Params) -> str:
    """Hex BLAKE2b-64 of ``params``' fields (their names and reprs)."""
    text = repr(sorted((f.name, getattr(params, f.name)) for f in dataclasses.fields(params)))
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


def trace_fingerprint(trace: Trace) -> str:
    """CRC-32 (hex) of the trace's size, extent, names and lanes counts and of its
    ``start_ns``, ``dur_ns``, ``lane``, ``kind`` and ``name_id`` columns (about 70 ms
    for 5M events)."""
    crc = zlib.crc32(repr((len(trace), tuple(trace.extent_ns), len(trace.names), len(trace.lanes))).encode())
    for col in (trace.start_ns, trace.dur_ns, trace.lane, trace.kind, trace.name_id, trace.lane_offsets):
        crc = zlib.crc32(np.ascontiguousarray(col).reshape(-1).view(np.uint8).data, crc)
    return f"{crc:08x}"


# ----------------------------------------------------------------- the tree
class _Encoder:
    """Turns a diagnosis's values into JSON-able values and a list of arrays."""

    def __init__(self) -> None:
        self.arrays: list[np.ndarray] = []
        self._seen: dict[int, int] = {}

    def enc(self, v: Any, depth: int = 0) -> Any:
        if depth > _MAX_DEPTH:
            raise _Unstorable("nested too deep")
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, enum.Enum):
            name = type(v).__name__
            if _ENUMS.get(name) is not type(v):
                raise _Unstorable(f"enum {name}")
            return {"$e": name, "v": int(v.value)}
        if isinstance(v, np.bool_):
            return bool(v)
        if isinstance(v, (int, np.integer)):
            return int(v)
        if isinstance(v, (float, np.floating)):
            f = float(v)
            return f if math.isfinite(f) else {"$f": repr(f)}
        if isinstance(v, np.ndarray):
            if v.dtype.str not in _DTYPES:
                raise _Unstorable(f"array of {v.dtype}")
            k = self._seen.get(id(v))
            if k is None:
                k = self._seen[id(v)] = len(self.arrays)
                self.arrays.append(v)
            return {"$a": k}
        if isinstance(v, tuple):
            return {"$t": [self.enc(x, depth + 1) for x in v]}
        if isinstance(v, list):
            return [self.enc(x, depth + 1) for x in v]
        if isinstance(v, dict):
            return {"$d": [[self.enc(k, depth + 1), self.enc(x, depth + 1)] for k, x in v.items()]}
        name = type(v).__name__
        cls = _CLASSES.get(name)
        if cls is not None and cls is type(v):
            return {"$c": name, "f": {f.name: self.enc(getattr(v, f.name), depth + 1) for f in dataclasses.fields(cls)}}
        raise _Unstorable(f"value of type {name}")


class _Decoder:
    """The inverse of ``_Encoder`` over untrusted JSON: only the listed classes and
    enums, arrays by index; anything else raises ``BadDiagnosisEntry``."""

    def __init__(self, arrays: list[np.ndarray]) -> None:
        self.arrays = arrays

    def dec(self, v: Any, depth: int = 0) -> Any:
        if depth > _MAX_DEPTH:
            raise BadDiagnosisEntry("nested too deep")
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, list):
            return [self.dec(x, depth + 1) for x in v]
        if not isinstance(v, dict) or len(v) not in (1, 2):
            raise BadDiagnosisEntry(f"unexpected {type(v).__name__} in the tree")
        if "$a" in v:
            k = v["$a"]
            if type(k) is not int or not 0 <= k < len(self.arrays):
                raise BadDiagnosisEntry("array index out of range")
            return self.arrays[k]
        if "$t" in v and isinstance(v["$t"], list):
            return tuple(self.dec(x, depth + 1) for x in v["$t"])
        if "$d" in v and isinstance(v["$d"], list):
            out = {}
            for pair in v["$d"]:
                if not (isinstance(pair, list) and len(pair) == 2):
                    raise BadDiagnosisEntry("bad dict item")
                key = self.dec(pair[0], depth + 1)
                try:
                    out[key] = self.dec(pair[1], depth + 1)
                except TypeError:
                    raise BadDiagnosisEntry("unhashable dict key") from None
            return out
        if "$e" in v:
            cls = _ENUMS.get(v["$e"]) if isinstance(v["$e"], str) else None
            if cls is None or type(v.get("v")) is not int:
                raise BadDiagnosisEntry("unknown enum")
            try:
                return cls(v["v"])
            except ValueError:
                raise BadDiagnosisEntry(f"bad {cls.__name__} value") from None
        if "$f" in v:
            if v["$f"] not in ("nan", "inf", "-inf"):
                raise BadDiagnosisEntry("bad float")
            return float(v["$f"])
        if "$c" in v:
            return self._dataclass(v, depth)
        raise BadDiagnosisEntry("unknown marker")

    def _dataclass(self, v: dict, depth: int) -> Any:
        cls = _CLASSES.get(v["$c"]) if isinstance(v["$c"], str) else None
        fields = v.get("f")
        if cls is None or not isinstance(fields, dict):
            raise BadDiagnosisEntry("unknown class")
        known = {f.name for f in dataclasses.fields(cls)}
        if not set(fields) <= known:
            raise BadDiagnosisEntry(f"{cls.__name__}: unknown fields")
        values = {k: self.dec(x, depth + 1) for k, x in fields.items()}
        for k, allowed in _scalar_fields(cls).items():
            if k in values and not isinstance(values[k], allowed):
                raise BadDiagnosisEntry(f"{cls.__name__}.{k}: a {type(values[k]).__name__}")
        try:
            return cls(**values)
        except TypeError as exc:  # a required field missing
            raise BadDiagnosisEntry(f"{cls.__name__}: {exc}") from None


@functools.cache
def _scalar_fields(cls: type) -> dict[str, tuple[type, ...]]:
    """The fields of ``cls`` annotated with ``int``, ``float``, ``str`` or ``bool``
    (or one of them or None), and the types their values may have (an ``int`` where
    a ``float`` is): a hostile entry's ``str`` where a number is made the viewer raise
    when it drew it. Empty when the annotations cannot be resolved."""
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - a name only for type checkers: that class's fields unchecked
        return {}
    out: dict[str, tuple[type, ...]] = {}
    for f in dataclasses.fields(cls):
        t = hints.get(f.name)
        args = typing.get_args(t) if isinstance(t, types.UnionType) or typing.get_origin(t) is typing.Union else (t,)
        if args and all(a in (int, float, str, bool, type(None)) for a in args):
            out[f.name] = tuple(set(args) | ({int} if float in args else set()))
    return out


def _check_against(diag: Diagnosis, trace: Trace) -> None:
    """Raise ``BadDiagnosisEntry`` unless ``diag``'s parts have their types and its
    gaps' columns one length, with event and lane indices inside ``trace``."""
    _check_types(diag)
    _check_gaps(diag.gaps, len(trace), len(trace.lanes))
    found = diag.derived.get("findings")
    if found is not None and not isinstance(found, Findings):
        raise BadDiagnosisEntry("findings of the wrong type")


def _list_of(xs: object, cls: type) -> bool:
    return isinstance(xs, list) and all(isinstance(x, cls) for x in xs)


def _check_types(diag: Diagnosis) -> None:
    """``_check_against``'s part on the types of the diagnosis's parts."""
    if not isinstance(diag.params, Params) or not isinstance(diag.gaps, Gaps):
        raise BadDiagnosisEntry("params or gaps of the wrong type")
    for what, xs, cls in (
        ("devices", diag.devices, DeviceSummary),
        ("groups", diag.groups, GapGroup),
        ("episodes", diag.episodes, PicketEpisode),
    ):
        if not _list_of(xs, cls):
            raise BadDiagnosisEntry(f"{what} of the wrong type")
    if not (diag.steps is None or isinstance(diag.steps, Steps)) or not (
        diag.budget is None or isinstance(diag.budget, Budget)
    ):
        raise BadDiagnosisEntry("steps or budget of the wrong type")


def _check_gaps(g: Gaps, events: int, lanes: int) -> None:
    """``_check_against``'s part on the gaps: every column one length, event indices
    below ``events``, lane indices below ``lanes``, causes in ``Cause``."""
    n = None
    for f in dataclasses.fields(g):
        a = getattr(g, f.name)
        if a is None and f.default is None:
            continue
        if not isinstance(a, np.ndarray) or a.shape[:1] != (a.shape[0] if n is None else n,):
            raise BadDiagnosisEntry(f"gaps.{f.name}: wrong length")
        n = a.shape[0]
    for name, top, what in (
        ("prev_op", events, "index"),
        ("next_op", events, "index"),
        ("launch", events, "index"),
        ("wait_event", events, "index"),
        ("launch_lane", lanes, "lane"),
        ("thread_lane", lanes, "lane"),
    ):
        a = getattr(g, name)
        if a is not None and a.size and (int(a.min()) < -1 or int(a.max()) >= top):
            raise BadDiagnosisEntry(f"gaps.{name}: {what} out of range")
    if g.cause.size and (int(g.cause.min()) < 0 or int(g.cause.max()) >= len(Cause)):
        raise BadDiagnosisEntry("gaps.cause out of range")


# ----------------------------------------------------------------- the entry
def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _raw(a: np.ndarray) -> memoryview:
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8).data


class DiagnosisCache:
    """The diagnosis entry of the file ``path`` (key ``key``) for ``params``, in
    ``directory``; ``fingerprint``: the trace's (``trace_fingerprint``)."""

    def __init__(self, path: str, key: FileKey, directory: Path, params: Params, fingerprint: str) -> None:
        self.path = path
        self.key = key
        self.params = params
        self.fingerprint = fingerprint
        self.entry = self.entry_path(key, directory, params)

    @staticmethod
    def entry_path(key: FileKey, directory: Path, params: Params) -> Path:
        """Where the entry of the file ``key`` and ``params`` is kept in ``directory``."""
        stem = key.entry_name().rsplit(".", 1)[0]
        return directory / f"{stem}.{params_digest(params)}{SUFFIX}"

    @staticmethod
    def locate(trace: Trace) -> tuple[str, FileKey, Path] | None:
        """The file ``trace`` was loaded from (``trace.source.path``), its key and the
        cache's directory; None when the cache is off, the trace has no file, or the
        file is smaller than ``settings.min_bytes()`` or cannot be read."""
        path = trace.source.path
        if not path or not settings.enabled():
            return None
        key = key_of(path)
        if key is None or key.size < settings.min_bytes():
            return None
        try:
            directory = settings.traces_dir()
        except Exception as exc:  # noqa: BLE001 - no cache directory (no home): no cache, never a failed diagnosis
            log.debug("no cache directory: %s", exc)
            return None
        return path, key, directory

    @classmethod
    def open(cls, trace: Trace, params: Params) -> DiagnosisCache | None:
        """The entry for ``trace`` and ``params`` (``locate``), or None."""
        where = cls.locate(trace)
        if where is None:
            return None
        path, key, directory = where
        return cls(path, key, directory, params, trace_fingerprint(trace))

    def _header(self) -> dict:
        return {
            "build": analysis_build_id(),
            "key": [getattr(self.key, f) for f in self.key.__struct_fields__],
            "params": params_digest(self.params),
            "trace": self.fingerprint,
        }

    # ------------------------------------------------------------- read
    def get(self, trace: Trace) -> Diagnosis | None:
        """The cached diagnosis of ``trace`` (None when there is no entry). An entry
        that cannot be used is logged as a warning and gives None; the same file
        asked for again by this process gives None at once, without a warning
        (``_refused``: the viewer's worker asks ``cached_diagnosis``, then
        ``diagnose_cached``, which read a corrupt entry twice and warned twice)."""
        seen = self._identity()
        if seen is not None and seen in _refused:
            log.debug("diagnosis cache entry %s refused before", self.entry)
            return None
        try:
            diag = self.read(trace)
        except FileNotFoundError:
            return None
        except (BadDiagnosisEntry, OSError, ValueError, RecursionError) as exc:
            log.warning(
                "diagnosis cache entry %s not used (%s: %s); diagnosing afresh", self.entry, type(exc).__name__, exc
            )
            if seen is not None:
                with _writers_lock:
                    if len(_refused) >= MAX_REFUSED:
                        _refused.clear()
                    _refused.add(seen)
            return None
        try:
            os.utime(self.entry)  # used now: evicted last
        except OSError:
            pass
        return diag

    def get_completed(self, trace: Trace) -> Diagnosis | None:
        """``get(trace)``; an entry written without its findings (the program exited
        while they were computed: ``_findings_unless_exiting``) is written again with
        them, computed by the writer (``put_later(with_findings=True)``; once, should
        the caller ask for them meanwhile; not again when they are not in then), or
        every later open would compute them."""
        diag = self.get(trace)
        if diag is not None and not isinstance(diag.derived.get("findings"), Findings):
            self.put_later(diag, with_findings=True, only_with_findings=True)
        return diag

    def _identity(self) -> tuple | None:
        """The entry's file as it is now (name, device, inode, size, times) and the
        trace it is asked for; None when it cannot be looked at."""
        try:
            st = os.stat(self.entry, follow_symlinks=False)
        except OSError:
            return None
        return (str(self.entry), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, self.fingerprint)

    def read(self, trace: Trace) -> Diagnosis:
        """Read and check the entry (module docstring). Raises ``BadDiagnosisEntry``,
        ``OSError`` (``FileNotFoundError``: no entry) or ``ValueError`` (JSON)."""
        try:
            fd = open_regular(self.entry, follow=False)
        except NotRegular as exc:
            raise BadDiagnosisEntry(str(exc)) from None
        try:
            size = os.fstat(fd).st_size
            prefix = os.pread(fd, _PREFIX.size, 0)
            if len(prefix) < _PREFIX.size:
                raise BadDiagnosisEntry("shorter than its prefix")
            magic, version, header_crc, header_len = _PREFIX.unpack(prefix)
            if magic != MAGIC or version != FORMAT_VERSION:
                raise BadDiagnosisEntry("not a diagnosis entry of this format")
            if header_len > MAX_HEADER_BYTES or _PREFIX.size + header_len > size:
                raise BadDiagnosisEntry("header larger than the file or the limit")
            blob = os.pread(fd, header_len, _PREFIX.size)
            if len(blob) != header_len or zlib.crc32(blob) != header_crc:
                raise BadDiagnosisEntry("header CRC mismatch")
            header = json.loads(blob.decode("utf-8"))
            if not isinstance(header, dict):
                raise BadDiagnosisEntry("header is not an object")
            for k, want in self._header().items():
                if header.get(k) != want:
                    raise BadDiagnosisEntry(f"for another {k}")
            data_bytes = header.get("data_bytes")
            start = _align(_PREFIX.size + header_len)
            if type(data_bytes) is not int or start + data_bytes != size:
                raise BadDiagnosisEntry(f"{size} bytes, not the size its header gives (truncated?)")
            data = np.empty(data_bytes, dtype=np.uint8)
            view = data.data
            done = 0
            while done < data_bytes:
                got = os.preadv(fd, [view[done:]], start + done)
                if got <= 0:
                    raise BadDiagnosisEntry("cut short while read")
                done += got
        finally:
            os.close(fd)
        if zlib.crc32(data.data) != header.get("data_crc"):
            raise BadDiagnosisEntry("data CRC mismatch")
        arrays = _arrays_of(header.get("arrays"), data)
        tree = header.get("tree")
        if not isinstance(tree, dict) or set(tree) != set(_ROOT_FIELDS) | {"findings"}:
            raise BadDiagnosisEntry("tree of the wrong shape")
        dec = _Decoder(arrays)
        fields = {k: dec.dec(tree[k]) for k in _ROOT_FIELDS}
        diag = Diagnosis(trace=trace, **fields)
        found = dec.dec(tree["findings"])
        if found is not None:
            diag.derived["findings"] = found
        if not isinstance(diag.params, Params) or params_digest(diag.params) != params_digest(self.params):
            raise BadDiagnosisEntry("its params are not the ones its name and header give")
        _check_against(diag, trace)
        return diag

    # ------------------------------------------------------------- write
    def put_later(
        self, diag: Diagnosis, with_findings: bool = False, only_with_findings: bool = False
    ) -> threading.Thread | None:
        """Write ``diag`` in a background (non-daemon) thread, its findings computed
        there first when ``with_findings`` (not waited for once the program is
        exiting: ``_findings_unless_exiting``); ``only_with_findings``: write nothing
        when they are not in then (the entry there without them is as good);
        returns it, or None when it could not be started."""
        t = threading.Thread(
            target=self._put_quietly,
            args=(diag, with_findings, only_with_findings),
            name="gapscope-diagnosis-write",
            daemon=False,
        )
        with _writers_lock:
            _writers.append(t)
        try:
            t.start()
        except RuntimeError as exc:  # at interpreter shutdown: no entry
            with _writers_lock:
                _writers.remove(t)
            log.debug("diagnosis entry %s not written: %s", self.entry, exc)
            return None
        return t

    def _put_quietly(self, diag: Diagnosis, with_findings: bool = False, only_with_findings: bool = False) -> None:
        try:
            if with_findings:
                _findings_unless_exiting(diag)
            if not only_with_findings or isinstance(diag.derived.get("findings"), Findings):
                self.put(diag)
        except Exception as exc:  # noqa: BLE001 - a failed write leaves no entry; the diagnosis is shown all the same
            log.debug("diagnosis entry %s not written: %s: %s", self.entry, type(exc).__name__, exc)
        finally:
            with _writers_lock:
                if threading.current_thread() in _writers:
                    _writers.remove(threading.current_thread())

    def put(self, diag: Diagnosis) -> bool:
        """Write the entry now (atomically: a temporary file renamed over it). Returns
        whether it was written (False: the file changed since ``open``, the diagnosis
        holds a value the format does not, or it does not fit). Raises ``OSError``."""
        if key_of(self.path) != self.key:
            return False
        enc = _Encoder()
        try:
            tree = {k: enc.enc(getattr(diag, k)) for k in _ROOT_FIELDS}
            found = diag.derived.get("findings")
            tree["findings"] = enc.enc(found if isinstance(found, Findings) else None)
        except _Unstorable as exc:
            log.debug("diagnosis of %s not cached: %s", self.path, exc)
            return False
        specs: list[list] = []
        offsets: list[int] = []
        at, crc = 0, 0
        for a in enc.arrays:
            off = _align(at)
            if off > at:
                crc = zlib.crc32(bytes(off - at), crc)
            crc = zlib.crc32(_raw(a), crc)
            specs.append([a.dtype.str, list(a.shape), off, int(a.nbytes)])
            offsets.append(off)
            at = off + a.nbytes
        header = self._header() | {"arrays": specs, "data_bytes": at, "data_crc": crc, "tree": tree}
        blob = json.dumps(header, separators=(",", ":")).encode("utf-8")
        if len(blob) > MAX_HEADER_BYTES:
            return False
        pad = _align(_PREFIX.size + len(blob)) - _PREFIX.size - len(blob)
        directory = self.entry.parent
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not make_room(directory, _PREFIX.size + len(blob) + pad + at, keep=self.entry):
            return False

        def write(fh) -> None:
            fh.write(_PREFIX.pack(MAGIC, FORMAT_VERSION, zlib.crc32(blob), len(blob)))
            fh.write(blob)
            fh.write(bytes(pad))
            pos = 0
            for off, a in zip(offsets, enc.arrays):
                if off > pos:
                    fh.write(bytes(off - pos))
                fh.write(_raw(a))
                pos = off + a.nbytes

        write_whole(self.entry, write)
        return True


def _arrays_of(specs: Any, data: np.ndarray) -> list[np.ndarray]:
    """The arrays ``specs`` (``[dtype, shape, offset, nbytes]`` each) lay out in ``data``;
    raises ``BadDiagnosisEntry`` for a dtype not listed or an extent outside ``data``."""
    if not isinstance(specs, list):
        raise BadDiagnosisEntry("array specs missing")
    out = []
    for spec in specs:
        if not (isinstance(spec, list) and len(spec) == 4):
            raise BadDiagnosisEntry("bad array spec")
        dtype_str, shape, offset, nbytes = spec
        if dtype_str not in _DTYPES or not isinstance(shape, list) or not all(type(s) is int for s in shape):
            raise BadDiagnosisEntry("bad array dtype or shape")
        dtype = np.dtype(dtype_str)
        count = math.prod(shape)
        if (
            type(offset) is not int
            or type(nbytes) is not int
            or offset % ALIGN
            or offset < 0
            or min(shape, default=0) < 0
            or count * dtype.itemsize != nbytes
            or offset + nbytes > data.size
        ):
            raise BadDiagnosisEntry("bad array extent")
        out.append(np.frombuffer(data, dtype=dtype, count=count, offset=offset).reshape(shape))
    return out


def diagnose_cached(trace: Trace, params: Params | None = None, *, findings_first: bool = True) -> Diagnosis:
    """``diagnose(trace, params)`` with its ``findings`` computed (kept in
    ``Diagnosis.derived``), read from the diagnosis cache when it holds this trace's
    (module docstring), else computed now and written to it in a background thread.
    ``findings_first=False`` (the viewer, which draws the causes before the findings):
    a diagnosis computed now is returned before its findings, which the writing
    thread computes before it writes (``findings.findings`` computes them once when
    the caller asks for them meanwhile: at 5M events they take seconds, which the
    causes would wait for). Raises what ``diagnose`` raises."""
    params = params or Params()
    cache = DiagnosisCache.open(trace, params)
    if cache is not None:
        got = cache.get_completed(trace)
        if got is not None:
            return got
    diag = diagnose(trace, params)
    if cache is not None:
        if findings_first:
            _findings_quietly(diag)
        cache.put_later(diag, with_findings=not findings_first)
    return diag


def cached_diagnosis(trace: Trace, params: Params | None = None) -> Diagnosis | None:
    """The diagnosis cache's entry for ``trace`` and ``params`` read back (its findings
    in ``Diagnosis.derived``), or None: no entry (found without reading the trace's
    columns), the cache off, or an entry that cannot be used (a warning). Never
    diagnoses. The viewer's diagnosis worker asks for it first
    (``tui.factory.default_ready_diagnosis``), so that a cached trace's causes are
    drawn without its early gaps or a diagnosis; an entry without its findings is
    written again with them (``DiagnosisCache.get_completed``)."""
    params = params or Params()
    if not has_entry(trace, params):
        return None
    cache = DiagnosisCache.open(trace, params)
    return cache.get_completed(trace) if cache is not None else None


def has_entry(trace: Trace, params: Params | None = None) -> bool:
    """Whether the diagnosis cache holds a file for ``trace`` and ``params`` (one
    ``stat``, without reading the trace's columns or the entry: it may still be
    refused when read); False when the cache is off or cannot be looked at."""
    where = DiagnosisCache.locate(trace)
    if where is None:
        return False
    entry = DiagnosisCache.entry_path(where[1], where[2], params or Params())
    try:
        return entry.is_file()
    except OSError as exc:  # EACCES, ENAMETOOLONG: Path.is_file ignores ENOENT alone; diagnose_cached warns
        log.debug("diagnosis cache entry %s not looked at: %s", entry, exc)
        return False


#: How often (s) the writer looks whether the program is exiting while it waits for the
#: findings (``_findings_unless_exiting``).
EXIT_POLL_S = 0.05


def _findings_unless_exiting(diag: Diagnosis) -> None:
    """``_findings_quietly(diag)`` in a daemon thread, waited for until they are in or
    the program is exiting (its main thread has ended: the viewer quit), whichever is
    first: the writer is not a daemon (an entry is never cut short), so computing the
    findings itself would hold the exit for them (seconds at 5M events); the entry
    is then written without them, and computed by the next open's ``findings``."""
    done = threading.Event()

    def compute() -> None:
        try:
            _findings_quietly(diag)
        finally:
            done.set()

    try:
        threading.Thread(target=compute, name="gapscope-diagnosis-findings", daemon=True).start()
    except RuntimeError:  # at interpreter shutdown: the entry goes without them
        return
    while not done.wait(EXIT_POLL_S):
        if not threading.main_thread().is_alive():
            return


def _findings_quietly(diag: Diagnosis) -> None:
    """``findings(diag)``, what the first screen shows, kept with the entry; a failure
    leaves the entry without them (the viewer then says so)."""
    try:
        findings(diag)
    except Exception as exc:  # noqa: BLE001 - advisory
        log.debug("findings of %s not computed: %s: %s", diag.trace.source.path, type(exc).__name__, exc)


def wait_for_writes(timeout: float | None = None) -> None:
    """Wait until the diagnosis writes in progress are done (``timeout`` s each at most)."""
    with _writers_lock:
        pending = list(_writers)
    for t in pending:
        if t is not threading.current_thread():
            t.join(timeout)
