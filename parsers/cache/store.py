"""Looking traces up in the cache, writing them after a fresh load, evicting old ones.

``TraceCache.open(path)`` gives the cache's view of one input file (None when the
cache is off or the path is not a regular, readable file); ``get`` returns the cached
``Trace`` or None; ``put_later`` writes one after a fresh load, in a background thread.

Writes: only a trace of at least ``settings.min_bytes()`` of text, only when the file
still has the key it had before the load (not changed while loading), and only when
its header reads back to the same names, lanes, source, warnings and args (a value
msgpack would change, such as a tuple inside ``SourceInfo.extra`` or a lone
surrogate in a name, means no entry rather than a different trace). The entry is
written to a temporary file in the cache directory, then renamed over the entry's
name (``os.replace``, atomic): a reader sees a whole entry or none. Any failure (disk
full, read-only or missing directory, a permission) leaves no temporary file and no
entry, and the load it follows is not affected: failures are logged at debug level on
the ``gapscope.cache`` logger, never raised.

The writer is a non-daemon thread, so a command that exits right after its load (a
report, a diff) still finishes the entry before the interpreter exits: about 0.1 s
for 1M events, while the analysis runs. A fresh load first waits for writes still in
progress (so at most one entry is written at a time, and the loader's fork never
runs beside this thread); ``wait_for_writes`` lets tests and benchmarks wait too.
``defer_writes(event, path)``: the write of that file's entry begun after it waits for
``event`` before writing (a viewer's diagnosis, which the causes on its screen wait
for, goes first); a fresh load does not wait for a write still deferred.

Size: before writing, the least recently used entries (by mtime, which a hit sets to
now) are removed until the new entry fits in ``settings.max_bytes()``, and in half of
the disk space free plus what the cache holds; an entry larger than that is not
written. Temporary files older than ``STALE_TMP_S`` (from a killed process) go too.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, NamedTuple

from gapscope.parsers.cache import layout, settings
from gapscope.parsers.cache.args import ReadText, args_loader, stored_args
from gapscope.parsers.cache.key import FileKey, key_of
from gapscope.parsers.json.scan import Text
from gapscope.parsers.model import Trace

__all__ = [
    "TraceCache",
    "Hit",
    "build_id",
    "source_fingerprint",
    "wait_for_writes",
    "defer_writes",
    "write_whole",
    "STALE_TMP_S",
    "DEFER_MAX_S",
]

log = logging.getLogger("gapscope.cache")

#: A temporary file this old is left over from a process that died while writing.
STALE_TMP_S = 3600.0
_TMP_SUFFIX = ".tmp"

_writers: list[threading.Thread] = []
_writers_lock = threading.Lock()
#: The longest a write waits for what ``defer_writes`` named before it writes anyway.
DEFER_MAX_S = 30.0
_deferred: list[tuple[str, threading.Event]] = []  # ``defer_writes``'s (path, event), until set
_deferring: set[threading.Thread] = set()  # writers waiting for their deferral
_DEFER_POLL_S = 0.05


def source_fingerprint(root: Path) -> str:
    """Hex BLAKE2b-64 over the relative path, size and mtime of every ``.py`` file
    under ``root`` (walked in sorted order): it changes when any source file does."""
    h = hashlib.blake2b(digest_size=8)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith(".py"):
                st = os.stat(os.path.join(dirpath, name))
                rel = os.path.relpath(os.path.join(dirpath, name), root)
                h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


@functools.cache
def build_id() -> str:
    """gapscope's version and a fingerprint (``source_fingerprint``) of every source
    file of ``gapscope.parsers``: an entry written by other parser code is never used."""
    import gapscope

    return f"{gapscope.__version__}+{source_fingerprint(Path(__file__).resolve().parent.parent)}"


class Hit(NamedTuple):
    """A trace found in the cache, and the bytes of text it was decoded from (None for
    an Nsight export), which ``load`` checks against its size limit."""

    trace: Trace
    text_bytes: int | None


class TraceCache:
    """The cache entry of one input file, ``path`` with key ``key``, in ``directory``."""

    def __init__(self, path: str, key: FileKey, directory: Path) -> None:
        self.path = path
        self.key = key
        self.directory = directory
        self.entry = directory / key.entry_name()

    @classmethod
    def open(cls, path: str) -> TraceCache | None:
        """The cache for ``path``; None when the cache is off (``GAPSCOPE_NO_CACHE``)
        or ``path`` is not a regular file that can be read."""
        if not settings.enabled():
            return None
        key = key_of(path)
        if key is None:
            return None
        try:
            directory = settings.traces_dir()
        except Exception as exc:  # noqa: BLE001 - no cache directory (no home): no cache, never a failed load
            log.debug("no cache directory: %s", exc)
            return None
        return cls(path, key, directory)

    def get(self, read_text: ReadText) -> Hit | None:
        """The cached trace (None when there is none, or it cannot be used: unreadable,
        corrupt, another build, another version of the file). ``read_text``: how its
        lazy args read the original file (``detect.args_text``). A hit marks the entry
        used now (its mtime), for eviction."""
        try:
            header, arrays = layout.read_entry(self.entry, self.key, build_id())
            loader = args_loader(header.args, arrays, self.path, self.key, read_text)
            trace = layout.trace_of(header, arrays, loader, self.path)
        except FileNotFoundError:
            return None
        except Exception as exc:  # noqa: BLE001 - an entry that cannot serve is a miss: never a traceback, never a wrong trace
            log.debug("cache entry %s not used: %s: %s", self.entry, type(exc).__name__, exc)
            return None
        try:
            os.utime(self.entry)
        except OSError:
            pass
        return Hit(trace, header.text_bytes)

    def put_later(self, trace: Trace, text: Text | None) -> threading.Thread | None:
        """Write ``trace`` (freshly loaded from ``text``, gzip undone; None for an Nsight
        export) in a background thread, when it is large enough to be worth it. Returns
        the thread, or None when nothing is written."""
        size = len(text) if text is not None else self.key.size
        if size < settings.min_bytes():
            return None
        t = threading.Thread(target=self._put_quietly, args=(trace, text), name="gapscope-cache-write", daemon=False)
        with _writers_lock:
            _writers.append(t)
        try:
            t.start()
        except RuntimeError as exc:  # at interpreter shutdown (a load from an atexit hook): no entry
            with _writers_lock:
                _writers.remove(t)
            log.debug("cache entry %s not written: %s", self.entry, exc)
            return None
        return t

    def _put_quietly(self, trace: Trace, text: Text | None) -> None:
        try:
            _wait_for_deferral(self.path)
            self.put(trace, text)
        except Exception as exc:  # noqa: BLE001 - a cache write that fails leaves no entry; the load already succeeded
            log.debug("cache entry %s not written: %s: %s", self.entry, type(exc).__name__, exc)
        finally:
            with _writers_lock:
                if threading.current_thread() in _writers:
                    _writers.remove(threading.current_thread())

    def put(self, trace: Trace, text: Text | None) -> bool:
        """Write the entry now. Returns whether it was written (False: the trace cannot
        be stored, the file changed while loading, or it does not fit). Raises
        ``OSError`` for a failed write (no temporary file is left)."""
        if key_of(self.path) != self.key:
            return False
        got = stored_args(trace._args_loader, self.path, text)
        if got is None:
            log.debug("trace %s not cached: its args cannot be read back from the file", self.path)
            return False
        stored, args_arrays = got
        header, arrays = layout.make_header(
            trace,
            build=build_id(),
            key=self.key,
            path=self.path,
            text_bytes=len(text) if text is not None else None,
            args=stored,
            args_arrays=args_arrays,
        )
        try:
            blob = layout.encode_header(header)
        except (TypeError, ValueError, OverflowError, UnicodeError) as exc:
            log.debug("trace %s not cached: its header cannot be encoded: %s", self.path, exc)
            return False
        if not _reads_back(blob, header, trace, self.path):
            log.debug("trace %s not cached: its header would not read back the same", self.path)
            return False
        total = layout.entry_bytes(blob, header)
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)  # entries hold the traces' names
        if not make_room(self.directory, total, keep=self.entry):
            return False
        write_whole(self.entry, lambda fh: layout.write_entry(fh, blob, header, arrays))
        return True


def write_whole(entry: Path, write: Callable[[BinaryIO], object]) -> None:
    """Write the cache entry ``entry`` whole or not at all: ``write(fh)`` fills a new
    temporary file beside it, readable by its owner only and named for this process
    and thread (``.<stem>.<pid>.<thread>.tmp``: ``make_room`` removes one left
    stale), which is then renamed over ``entry``; on any failure it is removed and the
    failure raised. Used by the trace cache and the diagnosis cache
    (``analysis.diagnosis_cache``)."""
    tmp = entry.parent / f".{entry.stem}.{os.getpid()}.{threading.get_ident()}{_TMP_SUFFIX}"
    try:
        with open(tmp, "xb", opener=_private) as fh:
            write(fh)
        os.replace(tmp, entry)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise


def _private(path: str, flags: int) -> int:
    """Open a new entry readable by its owner only (the input may have been private)."""
    return os.open(path, flags, 0o600)


def _reads_back(blob: bytes, header: layout.Header, trace: Trace, path: str) -> bool:
    """Whether ``blob`` (``header`` encoded) decodes to ``trace``'s names, lanes,
    source, warnings and extent, and to the same stored args."""
    back = layout.decode_header(blob)
    return (
        layout.names_of(back) == trace.names
        and layout.lanes_of(back) == trace.lanes
        and layout.source_of(back, path) == trace.source
        and layout.warnings_of(back) == trace.warnings
        and back.extent_ns == tuple(trace.extent_ns)
        and back.args == header.args
        and back.cpu_samples == header.cpu_samples
    )


def make_room(directory: Path, need: int, keep: Path | None = None) -> bool:
    """Remove the least recently used entries of ``directory`` until ``need`` more
    bytes fit in the budget: ``settings.max_bytes()``, and half of the free disk
    space plus what the entries hold. ``keep``: the entry about to be replaced (its
    bytes are counted as freed). Stale temporary files are removed. Returns whether
    ``need`` fits."""
    entries: list[tuple[int, int, Path]] = []
    now = time.time()
    with os.scandir(directory) as it:
        for e in it:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if e.name.endswith(_TMP_SUFFIX):
                if now - st.st_mtime > STALE_TMP_S:
                    _unlink(Path(e.path))
                continue
            # traces and the diagnoses kept beside them (``gapscope.analysis.diagnosis_cache``)
            if e.name.endswith((".trace", ".diag")) and e.is_file(follow_symlinks=False):
                if keep is not None and e.name == keep.name:
                    continue
                entries.append((st.st_mtime_ns, st.st_size, Path(e.path)))
    used = sum(size for _, size, _ in entries)
    budget = min(settings.max_bytes(), (used + shutil.disk_usage(directory).free) // 2)
    if need > budget:
        log.debug("cache entry of %d bytes does not fit in %d", need, budget)
        return False
    entries.sort()
    for _, size, p in entries:
        if used + need <= budget:
            break
        if _unlink(p):
            used -= size
    return used + need <= budget


def _unlink(p: Path) -> bool:
    try:
        p.unlink()
        return True
    except FileNotFoundError:
        return True  # another process evicted it
    except OSError:
        return False


def defer_writes(until: threading.Event, path: str | os.PathLike) -> None:
    """Have the cache writes of ``path``'s entry begun from now on wait, before they
    write, until ``until`` is set: ``DEFER_MAX_S`` at most, and not once the main
    thread has ended (a command that exits writes its entry then, as without this).
    Other files' writes do not wait, and a fresh load does not wait for a deferred
    write (``wait_for_writes(deferred=False)``).

    Why: a viewer draws the causes once its diagnosis is in, and the diagnosis ran
    beside the trace's write. At 5M events the write takes 1.1 s of a core and held
    the diagnosis back by 0.36 s (1.40 s against 1.04 s alone, in one process); the
    entry is only wanted at the next open."""
    with _writers_lock:
        _deferred.append((os.fspath(path), until))


def _wait_for_deferral(path: str) -> None:
    """In a writer of ``path``'s entry: wait for ``defer_writes``'s events for it (see
    there), as one of ``_deferring`` meanwhile."""
    deadline = time.monotonic() + DEFER_MAX_S
    me = threading.current_thread()
    with _writers_lock:
        _deferred[:] = [(p, e) for p, e in _deferred if not e.is_set()]
        events = [e for p, e in _deferred if p == path]
        if events:
            _deferring.add(me)
    if not events:
        return
    main = threading.main_thread()
    try:
        for event in events:
            while not event.wait(_DEFER_POLL_S):
                if time.monotonic() >= deadline or not main.is_alive():
                    return
    finally:
        with _writers_lock:
            _deferring.discard(me)


def wait_for_writes(timeout: float | None = None, deferred: bool = True) -> None:
    """Wait until the cache writes in progress are done (``timeout`` seconds each at
    most); ``deferred=False``: not those still waiting for their deferral
    (``defer_writes``: a load of another file need not wait for a viewer's diagnosis;
    such a write may then run beside that load)."""
    with _writers_lock:
        pending = [t for t in _writers if deferred or t not in _deferring]
    for t in pending:
        if t is not threading.current_thread():
            t.join(timeout)
