"""The trace cache (``gapscope.parsers.cache``): a cached re-open equals a fresh load.

Every test here turns the cache on for itself, in a temporary directory, with no
size threshold (the suite runs with it off: ``tests/conftest.py``). A spy on
``detect._load_fresh`` tells a hit from a fresh load, so no comparison passes because
both sides were loaded fresh. Covered: real corpus traces of each format and
hand-made ones (every array and its dtype, names, lanes, source, warnings, extent,
flows, ``args_of``); a stale entry (the file changed at the same size, with its mtime
restored); corrupt entries (truncated, garbage, another format version or build, a
flipped data byte); a full disk, a read-only or unusable cache directory; eviction;
``GAPSCOPE_NO_CACHE`` and ``--no-cache``.
"""

from __future__ import annotations

import dataclasses
import errno
import gzip
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gapscope.parsers import TraceFormatError, detect, load
from gapscope.parsers.cache import layout, settings, store
from gapscope.parsers.cache.args import StoredArgs, Unusable, args_loader
from gapscope.parsers.cache.key import EDGE_BYTES, key_of
from gapscope.settings import SettingsError
from tests.conftest import BUGS, CORPUS, ROOT, SAMPLES, require

_ARRAYS = layout.ARRAY_FIELDS


@pytest.fixture
def cache(monkeypatch, tmp_path):
    """The cache on, in ``tmp_path/cache``, for traces of any size; yields the
    directory of the entries. Every write is waited for before the test ends."""
    monkeypatch.delenv("GAPSCOPE_NO_CACHE", raising=False)
    monkeypatch.setenv("GAPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GAPSCOPE_CACHE_MIN_BYTES", "0")
    monkeypatch.delenv("GAPSCOPE_CACHE_MAX_BYTES", raising=False)
    yield tmp_path / "cache" / "traces"
    store.wait_for_writes()


@pytest.fixture
def fresh_loads(monkeypatch):
    """A list that gets the path of every fresh (not cached) load."""
    calls: list[str] = []

    def spy(p, while_decoding=None):
        calls.append(p)
        return _LOAD_FRESH(p, while_decoding)

    monkeypatch.setattr(detect, "_load_fresh", spy)
    return calls


def entries(d: Path) -> list[Path]:
    return sorted(d.glob("*.trace")) if d.exists() else []


def leftovers(d: Path) -> list[Path]:
    """Temporary files in the cache directory (there must never be any after a write)."""
    return sorted(d.glob("*.tmp")) if d.exists() else []


_LOAD_FRESH = detect._load_fresh


def fresh(path) -> object:
    """``path`` loaded as with the cache off (not seen by ``fresh_loads``)."""
    return _LOAD_FRESH(os.fspath(path))[0]


def args_indices(t) -> list[int]:
    n = len(t)
    picks = {0, 1, 2, n // 3, n // 2, n - 2, n - 1}
    if t.flow_src.size:
        picks.update(t.flow_src[:3].tolist() + t.flow_dst[-3:].tolist())
    return sorted(i for i in picks if 0 <= i < n)


def assert_same(a, b, all_args: bool = False, read_only: bool = True) -> None:
    """Every field of two traces is equal: each array's dtype, shape and values (NaN
    equal to NaN), read-only; names, lanes, source, warnings, extent; ``args_of`` of
    several events (the flows' ends among them), or of every event."""
    for f in _ARRAYS:
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype, f
        assert x.shape == y.shape, f
        assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), f
        assert not (read_only and y.flags.writeable), f
    assert a.names == b.names
    assert type(b.names) is tuple
    assert a.lanes == b.lanes
    assert a.source == b.source
    assert a.warnings == b.warnings
    assert a.extent_ns == b.extent_ns
    assert (a.cpu_samples is None) == (b.cpu_samples is None)
    if a.cpu_samples is not None:  # the CPU samples of an Nsight export, field for field
        for f in dataclasses.fields(a.cpu_samples):
            x, y = getattr(a.cpu_samples, f.name), getattr(b.cpu_samples, f.name)
            if isinstance(x, np.ndarray):
                assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), f.name
                assert not y.flags.writeable, f.name
            else:
                assert x == y, f.name
    for i in range(len(a)) if all_args else args_indices(a):
        assert a.args_of(i) == b.args_of(i), i


def load_cached(path, cache_dir: Path, fresh_loads: list) -> object:
    """Load ``path`` twice with the cache on: the first load is fresh and writes the
    entry, the second must be a hit. Returns the second."""
    n = len(fresh_loads)
    load(path)
    store.wait_for_writes()
    assert len(entries(cache_dir)) >= 1, "no entry written"
    assert leftovers(cache_dir) == []
    got = load(path)
    assert len(fresh_loads) == n + 1, "the second load was not a cache hit"
    return got


# ------------------------------------------------------------------ equality

#: One or more of each format: plain JSON, gzip (one with NCCL collectives), arrays of
#: events, Kineto with flows, HTA's ns-resolution trace; Nsight SQLite exports.
CORPUS_FILES = [
    "catapult/x_event_trace.json",
    "catapult/fuchsia_trace.json.gz",
    "hta/control.json.gz",
    "hta/nccl_data.json.gz",
    "hta/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "param/dlrm_kineto/worker3_step_12.1694128201557.pt.trace.json",
    "perfetto/flow_events_json_v2.json",
    "kineto/gpu_metrics_input.json",
    "nvfuser/report1.sqlite",
    "extrap/ex-gpu.s10.sqlite",
]


@pytest.mark.parametrize("rel", CORPUS_FILES)
def test_cached_corpus_trace_equals_fresh_load(rel, cache, fresh_loads):
    path = require(CORPUS / rel)
    want = fresh(path)
    assert_same(want, load_cached(path, cache, fresh_loads))


@pytest.mark.parametrize("name", ["decode_step.txt", "picket_fence.txt", "sync_cliff.txt", "dataloader_stall.txt"])
def test_cached_ascii_timeline_equals_fresh_load(name, cache, fresh_loads):
    path = SAMPLES / name
    assert_same(fresh(path), load_cached(path, cache, fresh_loads), all_args=True)


def test_cached_truncated_trace_keeps_its_warnings_and_spans(cache, fresh_loads):
    """A file the tolerant decoder read without repairing its bytes (truncated) is
    cached: the spans it found refer to the file's own text."""
    path = require(BUGS / "B01_truncated_midevent.json")
    want = fresh(path)
    assert want.warnings
    assert_same(want, load_cached(path, cache, fresh_loads), all_args=True)


def test_repaired_text_is_not_cached(cache, fresh_loads):
    """NaN/Infinity tokens are repaired in a copy of the text: spans into it would
    read other bytes from the file, so such a trace is loaded fresh every time."""
    path = require(BUGS / "B04_nan_infinity.json")
    load(path)
    store.wait_for_writes()
    assert entries(cache) == []
    assert leftovers(cache) == []
    assert_same(fresh(path), load(path), all_args=True)
    assert len(fresh_loads) == 2


def _event(name, ts, dur, tid=1, pid=1, **args):
    e = {"ph": "X", "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid}
    if args:
        e["args"] = args
    return e


def _handmade() -> dict:
    """Events out of time order across lanes (the sort moves every one), B/E pairs,
    instants, counters, a launch and its kernel by correlation, a flow pair, and
    distinct args per event naming the event."""
    ev = []
    for k in range(40):
        ev.append(_event(f"op{k}", 1000 - 10 * k, 5, tid=1 + k % 3, me=f"op{k}", vals=[k, k * 0.5]))
    ev.append({"ph": "B", "name": "range", "ts": 5, "pid": 1, "tid": 9, "args": {"me": "range"}})
    ev.append({"ph": "E", "ts": 50, "pid": 1, "tid": 9})
    ev.append({"ph": "i", "name": "mark", "ts": 7, "pid": 1, "tid": 1, "s": "t", "args": {"me": "mark"}})
    ev.append({"ph": "C", "name": "mem", "ts": 9, "pid": 1, "args": {"bytes": 12.5}})
    ev.append(_event("cudaLaunchKernel", 100, 4, tid=2, correlation=77, me="launch"))
    ev[-1]["cat"] = "cuda_runtime"
    ev.append(_event("gemm", 120, 30, pid=0, tid=7, device=0, stream=7, correlation=77, me="gemm"))
    ev[-1]["cat"] = "kernel"
    ev.append({"ph": "s", "id": 5, "name": "f", "cat": "flow", "ts": 20, "pid": 1, "tid": 1})
    ev.append({"ph": "f", "id": 5, "name": "f", "cat": "flow", "ts": 130, "pid": 0, "tid": 7, "bp": "e"})
    ev.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "worker é"}})
    return {"traceEvents": ev, "displayTimeUnit": "ms", "deviceProperties": [{"id": 0, "name": "GPU"}]}


@pytest.mark.parametrize("form", ["object", "array", "gzip", "pretty"])
def test_cached_handmade_trace_equals_fresh_load(form, cache, fresh_loads, tmp_path):
    doc = _handmade()
    path = tmp_path / ("t.json.gz" if form == "gzip" else "t.json")
    if form == "array":
        text = json.dumps(doc["traceEvents"]).encode()
    elif form == "pretty":
        text = json.dumps(doc, indent=2, ensure_ascii=False).encode()
    else:
        text = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(text) if form == "gzip" else text)
    want = fresh(path)
    got = load_cached(path, cache, fresh_loads)
    assert_same(want, got, all_args=True)
    for i in range(len(got)):  # the sorted order reaches each event's own args
        me = got.args_of(i).get("me")
        assert me is None or me == got.name(i) or (me, got.name(i)) == ("launch", "cudaLaunchKernel")


def test_cached_trace_decoded_in_two_parts_equals_fresh_load(cache, fresh_loads, monkeypatch, tmp_path):
    """The two-part decode (``chrome.parallel``, forked) hands the cache its text too."""
    import gapscope.parsers.chrome.parallel.fork as cp

    monkeypatch.setattr(cp, "MIN_BYTES", 0)
    monkeypatch.setattr(cp, "enabled", lambda size, held=False: True)
    path = tmp_path / "t.json"
    doc = {"traceEvents": [_event(f"op{k % 7}", 10 * k, 5, tid=1 + k % 4, k=k) for k in range(3000)]}
    path.write_text(json.dumps(doc))
    want = fresh(path)
    assert_same(want, load_cached(path, cache, fresh_loads))


def test_source_path_is_the_path_opened(cache, fresh_loads, tmp_path, monkeypatch):
    """One entry serves a file however it is named: ``source.path`` is the path given,
    as in a fresh load."""
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_handmade()))
    load_cached(path, cache, fresh_loads)
    monkeypatch.chdir(tmp_path)
    got = load("t.json")
    assert len(fresh_loads) == 1
    assert got.source.path == "t.json"
    assert_same(fresh("t.json"), got)


def test_process_that_exits_right_after_load_leaves_a_whole_entry(cache, tmp_path):
    """The writer is not a daemon: a command that ends after its load still finishes it."""
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_handmade()))
    env = dict(os.environ)
    subprocess.run(
        [sys.executable, "-c", "import sys; from gapscope.parsers import load; load(sys.argv[1])", str(path)],
        check=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    (entry,) = entries(cache)
    assert leftovers(cache) == []
    hit = store.TraceCache.open(str(path)).get(detect.read_bytes)
    assert hit is not None
    assert_same(fresh(path), hit.trace, all_args=True)


# --------------------------------------------------------------------- stale


def _write_trace(path: Path, names: list[str], pad: int = 0) -> None:
    ev = [_event(n, 10 * k, 5, me=n) for k, n in enumerate(names)]
    doc = {"traceEvents": ev, "traceName": "x" * pad}
    path.write_text(json.dumps(doc))


def test_stale_entry_same_size_mtime_restored_head_changed(cache, fresh_loads, tmp_path):
    """A file rewritten to the same size with its mtime set back: the hash of its head
    differs, so the entry is not used."""
    path = tmp_path / "t.json"
    _write_trace(path, ["alpha", "beta"])
    load_cached(path, cache, fresh_loads)
    st = path.stat()
    before = key_of(str(path))
    _write_trace(path, ["alpha", "bet4"])  # in place, same size
    assert path.stat().st_size == st.st_size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = key_of(str(path))
    assert (after.size, after.mtime_ns, after.ino) == (before.size, before.mtime_ns, before.ino)
    assert after.digest != before.digest
    got = load(path)
    assert len(fresh_loads) == 2  # loaded fresh, not from the stale entry
    assert "bet4" in got.names and "beta" not in got.names
    assert_same(fresh(path), got, all_args=True)


def test_stale_entry_middle_changed_mtime_restored(cache, fresh_loads, tmp_path):
    """A change outside the hashed head and tail, same size, mtime restored: the ctime
    (which ``os.utime`` cannot set) still tells."""
    path = tmp_path / "t.json"
    names = [f"name{k:05d}" for k in range(12000)]
    _write_trace(path, names)
    assert path.stat().st_size > 4 * EDGE_BYTES
    load_cached(path, cache, fresh_loads)
    st = path.stat()
    data = bytearray(path.read_bytes())
    mid = data.index(b"name06000")
    data[mid : mid + 9] = b"NAME06000"
    with open(path, "r+b") as fh:  # in place: same inode
        fh.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns, path.stat().st_ino) == (st.st_size, st.st_mtime_ns, st.st_ino)
    got = load(path)
    assert len(fresh_loads) == 2
    assert "NAME06000" in got.names


def test_stale_entry_is_rebuilt(cache, fresh_loads, tmp_path):
    path = tmp_path / "t.json"
    _write_trace(path, ["alpha"])
    load_cached(path, cache, fresh_loads)
    _write_trace(path, ["alpha", "beta"])
    load(path)  # fresh: writes the new entry
    store.wait_for_writes()
    got = load(path)
    assert len(fresh_loads) == 2  # the first load, and the one after the change
    assert got.names == fresh(path).names == ("alpha", "beta")


def test_args_of_a_cached_trace_whose_file_changed_are_empty_not_wrong(cache, fresh_loads, tmp_path):
    path = tmp_path / "t.json"
    _write_trace(path, ["alpha", "beta"])
    got = load_cached(path, cache, fresh_loads)
    _write_trace(path, ["gamma", "delta"])
    assert got.args_of(0) == {}
    assert got.names == ("alpha", "beta")


@pytest.mark.parametrize("gz", [False, True])
def test_args_of_a_cached_big_trace_are_read_from_a_map_not_memory(gz, cache, fresh_loads, monkeypatch, tmp_path):
    """A cached trace of a big file reads its ``args`` from a read-only map of the file
    (a ``.gz`` inflated into an unlinked temporary file, mapped), as a fresh load does:
    not from a private copy of the whole text. "Big" here is any size (``MIN_BYTES``
    0); the args are those of a fresh load."""
    import gapscope.parsers.chrome.parallel.fork as cp
    from gapscope.parsers.json.mapped import MappedText

    monkeypatch.setattr(cp, "MIN_BYTES", 0)
    path = tmp_path / ("t.json.gz" if gz else "t.json")
    doc = {"traceEvents": [_event(f"op{k % 7}", 10 * k, 5, tid=1 + k % 4, k=k) for k in range(500)]}
    text = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(text) if gz else text)
    want = fresh(path)
    got = load_cached(path, cache, fresh_loads)
    for i in args_indices(want):
        assert got.args_of(i) == want.args_of(i) and got.args_of(i)["k"] * 10_000 == int(got.start_ns[i]), i
    data = got._args_loader.text().data
    assert isinstance(data, MappedText) and data.unchanged()
    assert len(data) == len(text) and data[:20] == text[:20]
    # an inflated copy is unlinked as soon as it is made: no file of it is left behind
    assert [f for f in (tmp_path / "cache").rglob("*") if f.is_file() and "inflated" in f.parts] == []


def test_file_changed_while_loading_is_not_cached(cache, monkeypatch, tmp_path):
    path = tmp_path / "t.json"
    _write_trace(path, ["alpha", "beta"])
    real = detect._load_fresh

    def changing(p, while_decoding=None):
        got = real(p, while_decoding)
        _write_trace(path, ["alpha", "beta", "gamma"])
        return got

    monkeypatch.setattr(detect, "_load_fresh", changing)
    load(path)
    store.wait_for_writes()
    assert entries(cache) == []


# ------------------------------------------------------------------- corrupt


def _cached_entry(cache, fresh_loads, tmp_path) -> tuple[Path, Path]:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_handmade()))
    load_cached(path, cache, fresh_loads)
    (entry,) = entries(cache)
    return path, entry


def _truncate(entry: Path) -> None:
    entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2])


def _garbage(entry: Path) -> None:
    entry.write_bytes(os.urandom(entry.stat().st_size))


def _empty(entry: Path) -> None:
    entry.write_bytes(b"")


def _other_version(entry: Path) -> None:
    data = bytearray(entry.read_bytes())
    struct.pack_into("<I", data, 8, layout.FORMAT_VERSION + 1)
    entry.write_bytes(data)


def _header_byte(entry: Path) -> None:
    data = bytearray(entry.read_bytes())
    data[30] ^= 0xFF
    entry.write_bytes(data)


def _data_byte(entry: Path) -> None:
    data = bytearray(entry.read_bytes())
    data[-3] ^= 0x01
    entry.write_bytes(data)


def _grown(entry: Path) -> None:
    with open(entry, "ab") as fh:
        fh.write(b"\0" * 64)


@pytest.mark.parametrize(
    "damage", [_truncate, _garbage, _empty, _other_version, _header_byte, _data_byte, _grown], ids=lambda f: f.__name__
)
def test_corrupt_entry_is_ignored_and_rebuilt(damage, cache, fresh_loads, tmp_path):
    path, entry = _cached_entry(cache, fresh_loads, tmp_path)
    damage(entry)
    got = load(path)  # no exception, and a fresh load
    assert len(fresh_loads) == 2
    assert_same(fresh(path), got, all_args=True)
    store.wait_for_writes()  # rebuilt: the next open is a hit again
    assert_same(fresh(path), load(path), all_args=True)
    assert len(fresh_loads) == 2


def test_entry_of_another_build_is_ignored(cache, fresh_loads, tmp_path, monkeypatch):
    """Another gapscope version (or other parser code) wrote it: not used."""
    path, _ = _cached_entry(cache, fresh_loads, tmp_path)
    monkeypatch.setattr(store, "build_id", lambda: "9.9.9+0000000000000000")
    load(path)
    assert len(fresh_loads) == 2


def test_entry_of_another_file_under_this_name_is_ignored(cache, fresh_loads, tmp_path):
    """The stored key is checked, not only the name derived from it."""
    a, entry = _cached_entry(cache, fresh_loads, tmp_path)
    b = tmp_path / "b.json"
    _write_trace(b, ["other"])
    other = store.TraceCache.open(str(b))
    os.replace(entry, other.entry)  # a's entry under b's name
    got = load(b)
    assert got.names == ("other",)
    assert fresh_loads[-1] == str(b)


def test_build_id_follows_the_parser_sources(monkeypatch):
    """Editing a parser module changes the build, so old entries go unused."""
    store.build_id.cache_clear()
    first = store.build_id()
    real_stat = os.stat

    class Later:  # what os.stat says once model.py has been edited
        def __init__(self, st):
            self.st_size, self.st_mtime_ns = st.st_size, st.st_mtime_ns + 1

    def stat(p, *a, **k):
        st = real_stat(p, *a, **k)
        return Later(st) if str(p).endswith(os.path.join("parsers", "model.py")) else st

    monkeypatch.setattr(os, "stat", stat)
    store.build_id.cache_clear()
    try:
        edited = store.build_id()
    finally:
        monkeypatch.setattr(os, "stat", real_stat)
        store.build_id.cache_clear()
    assert edited != first
    assert store.build_id() == first


# --------------------------------------------------------- full disk, read-only


def _enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_full_disk_keeps_the_fresh_trace_and_no_temporary_file(cache, fresh_loads, tmp_path, monkeypatch, caplog):
    import logging

    caplog.set_level(logging.DEBUG, logger="gapscope.cache")
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_handmade()))
    real_write = layout.write_entry

    def half_then_full(fh, blob, header, arrays):
        fh.write(b"GAPSCOPE partial")  # the temporary file exists when the disk fills
        _enospc()

    monkeypatch.setattr(layout, "write_entry", half_then_full)
    got = load(path)
    store.wait_for_writes()
    assert entries(cache) == []
    assert leftovers(cache) == []
    assert os.strerror(errno.ENOSPC) in caplog.text  # the write was tried, and failed as a full disk does
    assert_same(fresh(path), got, all_args=True)
    monkeypatch.setattr(layout, "write_entry", real_write)
    load(path)  # space again: written
    store.wait_for_writes()
    assert len(entries(cache)) == 1


def test_full_disk_at_rename_leaves_no_temporary_file(cache, tmp_path, monkeypatch):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_handmade()))
    monkeypatch.setattr(store.os, "replace", _enospc)
    load(path)
    store.wait_for_writes()
    assert entries(cache) == [] and leftovers(cache) == []


def test_entry_larger_than_the_free_disk_allows_is_not_written(cache, tmp_path, monkeypatch):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_handmade()))

    class Usage:
        free = 1000

    monkeypatch.setattr(store.shutil, "disk_usage", lambda d: Usage)
    load(path)
    store.wait_for_writes()
    assert entries(cache) == [] and leftovers(cache) == []


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes into a 0o500 directory anyway")
def test_read_only_cache_directory_by_mode(cache, fresh_loads, tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_handmade()))
    cache.mkdir(parents=True)
    cache.chmod(0o500)
    try:
        got = load(path)
        store.wait_for_writes()
        assert entries(cache) == [] and leftovers(cache) == []
        assert_same(fresh(path), got)
    finally:
        cache.chmod(0o700)


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES])
def test_read_only_cache_directory(code, cache, fresh_loads, tmp_path, monkeypatch, caplog):
    """What a read-only file system (EROFS) or a directory without write permission
    (EACCES) does to the temporary file's creation; run as root too."""
    import logging

    caplog.set_level(logging.DEBUG, logger="gapscope.cache")
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_handmade()))
    real_open = open

    def refusing_open(file, mode="r", *args, **kwargs):
        if "x" in mode or "w" in mode:
            raise OSError(code, os.strerror(code), str(file))
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(store, "open", refusing_open, raising=False)
    got = load(path)
    store.wait_for_writes()
    assert entries(cache) == [] and leftovers(cache) == []
    assert os.strerror(code) in caplog.text
    assert_same(fresh(path), got, all_args=True)


def test_read_only_cache_directory_still_serves_its_entries(cache, fresh_loads, tmp_path, monkeypatch):
    """An entry written earlier is used even where the hit cannot mark it used."""
    path, _ = _cached_entry(cache, fresh_loads, tmp_path)

    def refuse(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(store.os, "utime", refuse)
    assert_same(fresh(path), load(path))
    assert len(fresh_loads) == 1


def test_cache_directory_that_cannot_exist(cache, fresh_loads, tmp_path, monkeypatch):
    """``GAPSCOPE_CACHE_DIR`` names a file: nothing is written, every load works."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("GAPSCOPE_CACHE_DIR", str(blocker))
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_handmade()))
    load(path)
    store.wait_for_writes()
    assert_same(fresh(path), load(path))
    assert len(fresh_loads) == 2


def test_no_home_for_the_cache(cache, fresh_loads, tmp_path, monkeypatch):
    def nowhere():
        raise RuntimeError("no home directory")

    monkeypatch.setattr(settings, "traces_dir", nowhere)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_handmade()))
    assert_same(fresh(path), load(path))


# ------------------------------------------------------------------ eviction


def _traces(tmp_path: Path, n: int) -> list[Path]:
    out = []
    for k in range(n):
        p = tmp_path / f"t{k}.json"
        _write_trace(p, [f"op{k}_{j}" for j in range(50)])
        out.append(p)
    return out


def _entry_of(path: Path) -> Path:
    c = store.TraceCache.open(str(path))
    assert c is not None
    return c.entry


def test_least_recently_used_entry_is_evicted(cache, fresh_loads, tmp_path, monkeypatch):
    paths = _traces(tmp_path, 4)
    for p in paths[:3]:
        load(p)
        store.wait_for_writes()
    sizes = [_entry_of(p).stat().st_size for p in paths[:3]]
    for age, p in zip((300, 100, 200), paths[:3]):  # t1 oldest, then t2, then t0
        os.utime(_entry_of(p), (1_000_000 + age, 1_000_000 + age))
    monkeypatch.setenv("GAPSCOPE_CACHE_MAX_BYTES", str(sum(sizes) + sizes[0] // 2))
    load(paths[3])
    store.wait_for_writes()
    assert not _entry_of(paths[1]).exists()  # the least recently used
    assert _entry_of(paths[0]).exists() and _entry_of(paths[2]).exists() and _entry_of(paths[3]).exists()


def test_a_hit_marks_the_entry_used(cache, fresh_loads, tmp_path, monkeypatch):
    paths = _traces(tmp_path, 3)
    for p in paths[:2]:
        load(p)
        store.wait_for_writes()
    for p in paths[:2]:
        os.utime(_entry_of(p), (1_000_000, 1_000_000))
    load(paths[0])  # a hit: t0 is now the most recently used
    assert len(fresh_loads) == 2
    size = _entry_of(paths[0]).stat().st_size
    monkeypatch.setenv("GAPSCOPE_CACHE_MAX_BYTES", str(2 * size + size // 2))
    load(paths[2])
    store.wait_for_writes()
    assert _entry_of(paths[0]).exists()
    assert not _entry_of(paths[1]).exists()


def test_entry_larger_than_the_limit_is_not_written(cache, tmp_path, monkeypatch):
    (p,) = _traces(tmp_path, 1)
    monkeypatch.setenv("GAPSCOPE_CACHE_MAX_BYTES", "1K")
    load(p)
    store.wait_for_writes()
    assert entries(cache) == [] and leftovers(cache) == []


def test_stale_temporary_files_are_removed(cache, tmp_path):
    cache.mkdir(parents=True)
    old = cache / ".abc.123.456.tmp"
    young = cache / ".def.123.457.tmp"
    old.write_bytes(b"x")
    young.write_bytes(b"x")
    os.utime(old, (1_000_000, 1_000_000))
    (p,) = _traces(tmp_path, 1)
    load(p)
    store.wait_for_writes()
    assert not old.exists() and young.exists()  # young: another process may be writing it


def test_small_traces_are_not_written_by_default(cache, tmp_path, monkeypatch):
    monkeypatch.delenv("GAPSCOPE_CACHE_MIN_BYTES")
    (p,) = _traces(tmp_path, 1)
    assert p.stat().st_size < settings.DEFAULT_MIN_BYTES
    load(p)
    store.wait_for_writes()
    assert entries(cache) == []


# ------------------------------------------------------------ on, off, limits


def test_no_cache_env_neither_reads_nor_writes(cache, fresh_loads, tmp_path, monkeypatch):
    p, q = _traces(tmp_path, 2)
    load_cached(p, cache, fresh_loads)
    monkeypatch.setenv("GAPSCOPE_NO_CACHE", "1")
    load(p)
    assert len(fresh_loads) == 2  # the entry is there, and not read
    load(q)
    store.wait_for_writes()
    assert len(entries(cache)) == 1  # nor written


@pytest.mark.parametrize("where", ["before", "after"])
def test_no_cache_flag(where, cache, tmp_path, monkeypatch, capsys):
    """``gapscope --no-cache report T`` and ``gapscope report T --no-cache``: no entry."""
    from gapscope import cli

    (p,) = _traces(tmp_path, 1)
    argv = ["--no-cache", "report", str(p)] if where == "before" else ["report", str(p), "--no-cache"]
    assert cli.main(argv) == 0
    store.wait_for_writes()
    assert entries(cache) == []
    assert os.environ.get("GAPSCOPE_NO_CACHE") == "1"  # for the processes it starts, too
    monkeypatch.delenv("GAPSCOPE_NO_CACHE")
    assert cli.main(["report", str(p)]) == 0
    store.wait_for_writes()
    assert len(entries(cache)) == 1
    capsys.readouterr()


def test_cached_trace_over_the_size_limit_is_refused_as_fresh(cache, fresh_loads, tmp_path, monkeypatch):
    """The limit on the text (``GAPSCOPE_MAX_TRACE_BYTES``) holds for a cached trace
    as it does for a fresh load of it."""
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps(_handmade()).encode()))
    load_cached(path, cache, fresh_loads)
    monkeypatch.setenv("GAPSCOPE_MAX_TRACE_BYTES", "1K")
    with pytest.raises(TraceFormatError, match="limit"):
        load(path)


def test_lone_surrogate_repaired_in_a_copy_is_not_cached(cache, fresh_loads, tmp_path):
    r"""A lone surrogate escape (``"\ud800"``) is replaced in a copy of the text: as
    for NaN, the trace is not cached, and every load is fresh and right."""
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [{"ph": "X", "name": "a\\ud800b", "ts": 1, "dur": 2, "pid": 1, "tid": 1}]}')
    want = fresh(path)
    assert want.warnings
    load(path)
    store.wait_for_writes()
    assert entries(cache) == [] and leftovers(cache) == []
    assert_same(want, load(path))
    assert len(fresh_loads) == 2


def _built(name: str = "k", **extra):
    from gapscope.parsers.builder import TraceBuilder
    from gapscope.parsers.model import Kind

    b = TraceBuilder(format="ascii-events", path="x.txt")
    lane = b.lane("0", "7", process_name="GPU 0", thread_name="stream 7", is_gpu=True, device=0, stream=7)
    b.event(lane, name, 0, 100, Kind.KERNEL)
    t = b.build()
    t.source.extra.update(extra)
    return t


@pytest.mark.parametrize(
    "trace",
    [_built("lone \udc80 surrogate"), _built(shape=(1, 2)), _built(big=1 << 70)],
    ids=["surrogate-name", "tuple-in-extra", "int-beyond-64-bits"],
)
def test_trace_msgpack_cannot_hold_exactly_is_not_written(trace, cache, tmp_path, caplog):
    """A value the header cannot hold, or would read back as something else (a tuple
    comes back a list): no entry, rather than an entry that is not the trace."""
    import logging

    caplog.set_level(logging.DEBUG, logger="gapscope.cache")
    path = tmp_path / "x.txt"
    path.write_text("x")
    c = store.TraceCache.open(str(path))
    assert c is not None
    assert c.put(trace, b"x") is False
    assert entries(cache) == [] and leftovers(cache) == []
    assert "not cached" in caplog.text


def test_nsight_export_gone_makes_the_entry_unusable(tmp_path):
    key = key_of(str(Path(__file__)))
    assert key is not None
    stored = StoredArgs("nsys", {"tables": ["T"], "export": [str(tmp_path / "gone.sqlite"), 1, 1]})
    arrays = {"args.code": np.zeros(1, np.int16), "args.rowid": np.zeros(1, np.int64)}
    with pytest.raises(Unusable):
        args_loader(stored, arrays, "x.nsys-rep", key, detect.read_bytes)


def test_unknown_args_kind_is_a_miss(tmp_path):
    key = key_of(str(Path(__file__)))
    assert key is not None
    with pytest.raises(ValueError):
        args_loader(StoredArgs("pickle"), {}, "x", key, detect.read_bytes)


def test_settings_refuse_values_that_are_not_sizes(monkeypatch):
    monkeypatch.setenv("GAPSCOPE_CACHE_MIN_BYTES", "64M")
    assert settings.min_bytes() == 64 << 20
    assert settings.max_bytes() == settings.DEFAULT_MAX_BYTES == 2 << 30
    monkeypatch.setenv("GAPSCOPE_CACHE_MAX_BYTES", "lots")
    with pytest.raises(SettingsError, match=r"^GAPSCOPE_CACHE_MAX_BYTES='lots' is not a size "):
        settings.max_bytes()
    monkeypatch.delenv("GAPSCOPE_CACHE_MAX_BYTES")
    for off, on in (("1", False), ("yes", False), ("0", True), ("", True)):
        monkeypatch.setenv("GAPSCOPE_NO_CACHE", off)
        assert settings.enabled() is on


def test_never_written_next_to_the_input(cache, tmp_path):
    inputs = tmp_path / "in"
    inputs.mkdir()
    (p,) = _traces(inputs, 1)
    load(p)
    store.wait_for_writes()
    assert os.listdir(inputs) == [p.name]
    assert len(entries(cache)) == 1


def test_entries_are_private_to_their_owner(cache, tmp_path):
    """A trace readable only by its owner must not become readable by others in the cache."""
    (p,) = _traces(tmp_path, 1)
    load(p)
    store.wait_for_writes()
    (entry,) = entries(cache)
    assert entry.stat().st_mode & 0o077 == 0
    assert cache.stat().st_mode & 0o077 == 0


def test_cached_trace_pickles_with_its_lazy_args(cache, fresh_loads, tmp_path):
    import pickle

    path = tmp_path / "t.json"
    path.write_text(json.dumps(_handmade()))
    got = load_cached(path, cache, fresh_loads)
    got.args_of(0)  # the text read: not pickled, read again after
    back = pickle.loads(pickle.dumps(got))
    assert_same(fresh(path), back, all_args=True, read_only=False)  # unpickling any Trace gives writable arrays


def test_empty_trace_is_cached(cache, fresh_loads, tmp_path):
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": []}')
    want = fresh(path)
    assert len(want) == 0
    assert_same(want, load_cached(path, cache, fresh_loads))


def test_no_thread_at_interpreter_shutdown_means_no_entry(cache, tmp_path, monkeypatch):
    """A load from an atexit hook cannot start the writer: the load still works."""
    import threading

    def refuse(self):
        raise RuntimeError("can't create new thread at interpreter shutdown")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    (p,) = _traces(tmp_path, 1)
    assert_same(fresh(p), load(p))
    assert entries(cache) == []


def test_no_cache_flag_is_taken_before_a_double_dash_only(monkeypatch, capsys):
    from gapscope import cli

    monkeypatch.delenv("GAPSCOPE_NO_CACHE")
    argv = ["capture", "--out", "d", "--", "python", "x.py", "--no-cache"]
    assert cli.take_global_options(list(argv)) == argv
    assert "GAPSCOPE_NO_CACHE" not in os.environ
    assert cli.take_global_options(["view", "--no-cache", "t.json"]) == ["view", "t.json"]
    assert os.environ["GAPSCOPE_NO_CACHE"] == "1"
    assert cli.main(["--help"]) == 0
    assert "--no-cache" in capsys.readouterr().out
