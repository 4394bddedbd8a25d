"""The diagnosis cache (``gapscope.analysis.diagnosis_cache``): a cached diagnosis is
the fresh one, field by field and array by array; it is not used for a changed file
or another trace; a corrupt or hostile entry gives a warning and a fresh diagnosis."""

from __future__ import annotations

import dataclasses
import enum
import json
import logging
import os
import shutil
import struct
import threading
import zlib

import numpy as np
import pytest

import gapscope.analysis.diagnosis_cache as dc
import gapscope.analysis.findings as findings_module
from gapscope.analysis import diagnose
from gapscope.analysis.findings import findings
from gapscope.analysis.types import Params
from gapscope.parsers import load
from gapscope.parsers.cache import store
from tests.conftest import SAMPLES

_SKIP = {"trace", "_evidence_cache", "_copies_cache", "_index", "derived"}


def assert_same(a, b, path="diagnosis"):
    """``a`` and ``b`` equal all the way down: same types, arrays of one dtype, shape
    and values (NaN equal to NaN), dataclass fields but the lazy caches."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray), path
        assert (a.dtype, a.shape) == (b.dtype, b.shape), path
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), path
    elif dataclasses.is_dataclass(a):
        assert type(a) is type(b), path
        for f in dataclasses.fields(a):
            if f.name not in _SKIP:
                assert_same(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, dict):
        assert type(a) is type(b) and list(a) == list(b), path
        for k in a:
            assert_same(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, float) and a != a:
        assert isinstance(b, float) and b != b, path
    else:
        assert type(a) is type(b) and a == b, (path, a, b)
        if isinstance(a, enum.Enum):
            assert a.value == b.value, path


@pytest.fixture
def cache(monkeypatch, tmp_path):
    """The caches on, in ``tmp_path/cache``, for files of any size; yields the folder
    of the entries. Writes are waited for before the test ends."""
    monkeypatch.delenv("GAPSCOPE_NO_CACHE", raising=False)
    monkeypatch.setenv("GAPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GAPSCOPE_CACHE_MIN_BYTES", "0")
    monkeypatch.delenv("GAPSCOPE_CACHE_MAX_BYTES", raising=False)
    yield tmp_path / "cache" / "traces"
    dc.wait_for_writes()
    store.wait_for_writes()


@pytest.fixture
def fresh_runs(monkeypatch):
    """The traces ``diagnose_cached`` diagnosed afresh (not read from the cache)."""
    calls = []
    real = dc.diagnose

    def spy(trace, params=None):
        calls.append(trace)
        return real(trace, params)

    monkeypatch.setattr(dc, "diagnose", spy)
    return calls


def _copy(name: str, tmp_path):
    dst = tmp_path / name
    shutil.copyfile(SAMPLES / name, dst)
    return dst


def _entry(trace):
    c = dc.DiagnosisCache.open(trace, Params())
    assert c is not None
    return c.entry


def _cached_once(path):
    """Diagnose ``path`` through the cache (a fresh run that writes the entry)."""
    d = dc.diagnose_cached(load(str(path)))
    dc.wait_for_writes()
    return d


@pytest.mark.parametrize("name", ["decode_10_steps.txt", "picket_fence.txt", "dataloader_stall.txt"])
def test_cached_diagnosis_is_the_fresh_one(cache, fresh_runs, tmp_path, name):
    path = _copy(name, tmp_path)
    first = _cached_once(path)
    assert _entry(first.trace).is_file() and len(fresh_runs) == 1
    trace = load(str(path))
    got = dc.diagnose_cached(trace)
    assert len(fresh_runs) == 1  # read back, not diagnosed again
    reference = diagnose(trace)
    assert_same(reference, got)
    assert_same(findings(reference), got.derived["findings"], "findings")
    assert got.trace is trace
    # the lazy parts still work on the read-back diagnosis
    for i in range(len(got.gaps)):
        assert got.evidence(i) == reference.evidence(i)


def test_the_viewers_diagnosis_comes_back_before_its_findings(cache, tmp_path, monkeypatch):
    """``findings_first=False`` (the viewer's): a fresh diagnosis is returned before its
    findings; the writing thread computes them, once even when the caller asks for them
    meanwhile, and keeps them with the entry."""
    path = _copy("decode_10_steps.txt", tmp_path)
    real = findings_module._findings
    entered, release = threading.Event(), threading.Event()
    computed_in: list[threading.Thread] = []

    def held(diag):
        computed_in.append(threading.current_thread())
        entered.set()
        release.wait(60)  # a guard, not a timing: the test sets it below
        return real(diag)

    monkeypatch.setattr(findings_module, "_findings", held)
    d = dc.diagnose_cached(load(str(path)), findings_first=False)
    assert entered.wait(60)  # the writer is computing them...
    assert "findings" not in d.derived  # ...and the diagnosis came back without waiting for it
    release.set()
    f = findings(d)  # waits for the writer's, does not compute them again
    dc.wait_for_writes()
    assert len(computed_in) == 1 and computed_in[0] is not threading.current_thread()
    got = dc.diagnose_cached(load(str(path)))
    assert_same(f, got.derived["findings"], "findings")
    assert f.ranked  # the sample has findings: the comparison above is of something


def test_cached_diagnosis_reads_an_entry_back_and_never_diagnoses(cache, fresh_runs, tmp_path, monkeypatch):
    """``cached_diagnosis`` (the viewer's read beside the load): None while there is
    no entry, found without reading the trace's columns; the entry once written."""
    path = _copy("decode_10_steps.txt", tmp_path)
    real = dc.trace_fingerprint

    def no_columns(trace):
        raise AssertionError("the columns were read to find no entry")

    monkeypatch.setattr(dc, "trace_fingerprint", no_columns)
    assert dc.cached_diagnosis(load(str(path))) is None
    monkeypatch.setattr(dc, "trace_fingerprint", real)
    assert dc.cached_diagnosis(load(str(path))) is None and not fresh_runs
    _cached_once(path)
    trace = load(str(path))
    got = dc.cached_diagnosis(trace)
    assert got is not None and got.trace is trace and len(fresh_runs) == 1
    reference = diagnose(trace)
    assert_same(reference, got)
    assert_same(findings(reference), got.derived["findings"], "findings")
    assert dc.cached_diagnosis(trace, Params(min_gap_ns=Params().min_gap_ns * 2)) is None  # other thresholds


def test_a_corpus_trace_reads_back_the_same(cache, fresh_runs, tmp_path, corpus):
    path = tmp_path / "rank0.json.gz"
    shutil.copyfile(corpus / "hta" / "rank0.json.gz", path)
    _cached_once(path)
    trace = load(str(path))
    got = dc.diagnose_cached(trace)
    assert len(fresh_runs) == 1
    reference = diagnose(trace)
    assert len(reference.gaps) > 1000
    assert_same(reference, got)
    assert_same(findings(reference), got.derived["findings"], "findings")


def test_a_changed_source_is_diagnosed_again(cache, fresh_runs, tmp_path):
    path = _copy("decode_step.txt", tmp_path)
    _cached_once(path)
    text = path.read_text()
    path.write_text(text.replace("\n", "\n\n", 1))  # same trace, another file version
    trace = load(str(path))
    got = dc.diagnose_cached(trace)
    assert len(fresh_runs) == 2
    assert_same(diagnose(trace), got)
    dc.wait_for_writes()
    # the new version's entry serves the next open
    dc.diagnose_cached(load(str(path)))
    assert len(fresh_runs) == 2


def test_other_params_have_their_own_entry(cache, fresh_runs, tmp_path):
    path = _copy("picket_fence.txt", tmp_path)
    _cached_once(path)
    trace = load(str(path))
    p = Params(min_gap_ns=5_000)
    got = dc.diagnose_cached(trace, p)
    assert len(fresh_runs) == 2
    assert got.params == p
    assert_same(diagnose(trace, p), got)


def test_another_trace_of_the_same_file_is_not_served(cache, fresh_runs, tmp_path, caplog):
    path = _copy("decode_10_steps.txt", tmp_path)
    _cached_once(path)
    other = load(str(SAMPLES / "picket_fence.txt"))
    other = dataclasses.replace(other, source=dataclasses.replace(other.source, path=str(path)))
    with caplog.at_level(logging.WARNING, logger="gapscope.cache"):
        got = dc.diagnose_cached(other)
    assert len(fresh_runs) == 2
    assert "for another trace" in caplog.text
    assert_same(diagnose(other), got)


def _damage(entry, how: str) -> None:
    blob = bytearray(entry.read_bytes())
    if how == "data byte":
        blob[-1] ^= 0xFF
    elif how == "header byte":
        blob[30] ^= 0x01
    elif how == "truncated":
        del blob[len(blob) // 2 :]
    elif how == "empty":
        blob = bytearray()
    entry.write_bytes(bytes(blob))


@pytest.mark.parametrize("how", ["data byte", "header byte", "truncated", "empty"])
def test_a_corrupt_entry_warns_and_diagnoses_afresh(cache, fresh_runs, tmp_path, caplog, how):
    path = _copy("dataloader_stall.txt", tmp_path)
    first = _cached_once(path)
    entry = _entry(first.trace)
    _damage(entry, how)
    trace = load(str(path))
    with caplog.at_level(logging.WARNING, logger="gapscope.cache"):
        got = dc.diagnose_cached(trace)
    assert len(fresh_runs) == 2
    assert "diagnosis cache entry" in caplog.text and "diagnosing afresh" in caplog.text
    assert_same(diagnose(trace), got)
    dc.wait_for_writes()  # rewritten whole
    assert_same(got, dc.DiagnosisCache.open(trace, Params()).read(trace))


def test_a_corrupt_entry_is_read_and_warned_about_once_by_the_viewers_two_asks(cache, fresh_runs, tmp_path, caplog):
    """The viewer's worker asks ``cached_diagnosis`` (``ViewOptions.ready_diagnosis``),
    then, on None, ``diagnose_cached``: a corrupt entry is read once and warned about
    once (it was read whole and warned about twice), the trace diagnosed afresh once,
    and the entry written again is read back."""
    path = _copy("dataloader_stall.txt", tmp_path)
    entry = _entry(_cached_once(path).trace)
    _damage(entry, "data byte")
    trace = load(str(path))
    reads: list[str] = []
    real = dc.DiagnosisCache.read

    def counting(self, t):
        reads.append(self.entry.name)
        return real(self, t)

    with pytest.MonkeyPatch.context() as m, caplog.at_level(logging.WARNING, logger="gapscope.cache"):
        m.setattr(dc.DiagnosisCache, "read", counting)
        assert dc.cached_diagnosis(trace) is None
        got = dc.diagnose_cached(trace, findings_first=False)
        dc.wait_for_writes()
    assert reads == [entry.name] and len(fresh_runs) == 2
    assert caplog.text.count("diagnosing afresh") == 1 and "data CRC mismatch" in caplog.text
    again = dc.cached_diagnosis(load(str(path)))  # the entry written again: a new file, read
    assert again is not None
    assert_same(got, again)


def _rewrite_header(entry, change) -> None:
    """Rewrite the entry's JSON header with ``change(header)`` and valid CRCs (a
    hostile writer of the cache folder)."""
    raw = entry.read_bytes()
    prefix = struct.Struct("<8sIIQ")
    magic, version, _crc, n = prefix.unpack_from(raw)
    header = json.loads(raw[prefix.size : prefix.size + n])
    data = raw[-(-(prefix.size + n) // 64) * 64 :]
    change(header)
    blob = json.dumps(header).encode()
    pad = -(-(prefix.size + len(blob)) // 64) * 64 - prefix.size - len(blob)
    entry.write_bytes(prefix.pack(magic, version, zlib.crc32(blob), len(blob)) + blob + bytes(pad) + data)


def _first(tree, marker):
    """The first object of ``tree`` holding ``marker``."""
    if isinstance(tree, dict):
        if marker in tree:
            return tree
        items = tree.values()
    elif isinstance(tree, list):
        items = tree
    else:
        return None
    for x in items:
        got = _first(x, marker)
        if got is not None:
            return got
    return None


@pytest.mark.parametrize(
    "attack",
    [
        "class not listed",
        "enum not listed",
        "array index past the end",
        "gap event index past the trace",
        "unknown field",
        "object dtype",
        "deep nesting",
        "params not the asked ones",
        "a str where a finding's number is",
    ],
)
def test_a_hostile_entry_is_refused(cache, fresh_runs, tmp_path, caplog, attack):
    path = _copy("decode_10_steps.txt", tmp_path)
    first = _cached_once(path)
    entry = _entry(first.trace)

    def change(h):
        tree = h["tree"]
        if attack == "class not listed":
            _first(tree, "$c")["$c"] = "Popen"
        elif attack == "enum not listed":
            _first(tree, "$e")["$e"] = "Signals"
        elif attack == "array index past the end":
            _first(tree, "$a")["$a"] = 10**6
        elif attack == "gap event index past the trace":
            k = tree["gaps"]["f"]["next_op"]["$a"]
            h["arrays"].append(h["arrays"][k][:2] + [h["data_bytes"], 0])
            h["arrays"][-1][1] = [0]
            tree["gaps"]["f"]["next_op"]["$a"] = len(h["arrays"]) - 1  # an empty column: wrong length
        elif attack == "unknown field":
            tree["params"]["f"]["__class__"] = 1
        elif attack == "object dtype":
            h["arrays"][0][0] = "|O"
        elif attack == "params not the asked ones":  # a str where a number is: the viewer would raise
            tree["params"]["f"]["min_gap_ns"] = "x"
        elif attack == "a str where a finding's number is":  # the findings panel would raise drawing it
            _first(tree["findings"], "per_step_ns")["per_step_ns"] = "1 ms"
        elif attack == "deep nesting":
            deep = None
            for _ in range(200):
                deep = [deep]
            tree["invalid_gpu_ops"] = deep

    _rewrite_header(entry, change)
    trace = load(str(path))
    with caplog.at_level(logging.WARNING, logger="gapscope.cache"):
        got = dc.diagnose_cached(trace)
    assert len(fresh_runs) == 2, attack
    assert "diagnosing afresh" in caplog.text
    assert_same(diagnose(trace), got)


def test_an_out_of_range_event_index_is_refused(cache, tmp_path):
    path = _copy("decode_10_steps.txt", tmp_path)
    first = _cached_once(path)
    trace = load(str(path))
    c = dc.DiagnosisCache.open(trace, Params())
    bad = dataclasses.replace(first.gaps, next_op=np.full(len(first.gaps), len(trace), np.int64))
    first.gaps = bad  # Diagnosis is not frozen: write a diagnosis that points past the trace
    assert c.put(first)
    with pytest.raises(dc.BadDiagnosisEntry, match="next_op"):
        c.read(trace)


def test_a_fifo_or_link_in_place_of_the_entry_is_not_opened(cache, fresh_runs, tmp_path, caplog):
    path = _copy("sync_cliff.txt", tmp_path)
    first = _cached_once(path)
    entry = _entry(first.trace)
    entry.unlink()
    os.mkfifo(entry)  # a reader that opened it would wait for a writer for ever
    trace = load(str(path))
    with caplog.at_level(logging.WARNING, logger="gapscope.cache"):
        got = dc.diagnose_cached(trace)
    assert len(fresh_runs) == 2 and "not a regular file" in caplog.text
    assert len(got.gaps) == len(first.gaps)
    dc.wait_for_writes()  # the FIFO is replaced by an entry
    entry.unlink()
    entry.symlink_to(tmp_path / "elsewhere")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="gapscope.cache"):
        dc.diagnose_cached(load(str(path)))
    assert len(fresh_runs) == 3 and "diagnosing afresh" in caplog.text


def test_off_without_the_cache_or_a_file(monkeypatch, tmp_path, fresh_runs):
    monkeypatch.setenv("GAPSCOPE_NO_CACHE", "1")
    monkeypatch.setenv("GAPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    trace = load(str(_copy("host_island.txt", tmp_path)))
    assert dc.DiagnosisCache.open(trace, Params()) is None
    dc.diagnose_cached(trace)
    assert fresh_runs == [trace] and not (tmp_path / "cache").exists()
    monkeypatch.delenv("GAPSCOPE_NO_CACHE")
    monkeypatch.setenv("GAPSCOPE_CACHE_MIN_BYTES", str(1 << 30))  # smaller than that: not worth it
    assert dc.DiagnosisCache.open(trace, Params()) is None


def test_diagnosis_entries_are_evicted_with_the_traces(cache, tmp_path, monkeypatch):
    path = _copy("picket_fence.txt", tmp_path)
    first = _cached_once(path)
    entry = _entry(first.trace)
    size = entry.stat().st_size
    monkeypatch.setenv("GAPSCOPE_CACHE_MAX_BYTES", str(size + size // 2))
    assert store.make_room(entry.parent, size)  # a new entry of the same size: the old one goes
    assert not entry.exists()


def test_cached_diagnosis_of_a_cache_folder_that_cannot_be_looked_in_is_none(cache, tmp_path, monkeypatch):
    """A cache folder whose entry cannot even be looked at (a name longer than the file
    system takes: ENAMETOOLONG, as EACCES, which ``Path.is_file`` raises): no entry, not
    an ``OSError`` (the viewer then diagnoses it, and ``diagnose_cached`` warns)."""
    path = _copy("decode_10_steps.txt", tmp_path)
    monkeypatch.setenv("GAPSCOPE_CACHE_DIR", str(tmp_path / ("c" * 300)))
    trace = load(str(path))
    assert dc.cached_diagnosis(trace) is None
    assert len(dc.diagnose_cached(trace).gaps) == len(diagnose(trace).gaps)


_QUIT_WHILE_FINDINGS = """
import sys, threading
import gapscope.analysis.diagnosis_cache as dc
import gapscope.analysis.findings as findings_module
from gapscope.parsers import load
entered = threading.Event()
def held(diag):
    entered.set()
    threading.Event().wait()  # findings that would take forever
findings_module._findings = held
d = dc.diagnose_cached(load(sys.argv[1]), findings_first=False)
assert entered.wait(60) and "findings" not in d.derived
print("quitting", flush=True)
"""


def test_a_program_that_ends_while_the_writer_computes_findings_exits_and_keeps_the_entry(cache, tmp_path):
    """The viewer quit (its main thread ended) while the writer computes the findings
    of a fresh diagnosis (``findings_first=False``): the writer stops waiting for
    them, so the program exits (it waited for the findings to the end: seconds at 5M
    events, here never), and writes the entry without them; an open that exits as
    soon does not write it again, one that stays has its writer compute them and
    write the entry again, with them."""
    import subprocess
    import sys

    path = _copy("decode_10_steps.txt", tmp_path)

    def quit_while_findings() -> None:
        try:
            done = subprocess.run(
                [sys.executable, "-c", _QUIT_WHILE_FINDINGS, str(path)],
                capture_output=True,
                text=True,
                timeout=120,  # a guard against the hang, not a timing
            )
        except subprocess.TimeoutExpired:
            pytest.fail("the program waited for findings that never came")
        assert done.returncode == 0 and done.stdout == "quitting\n", done.stderr
        assert not [p.name for p in cache.iterdir() if p.name.endswith(".tmp")]

    quit_while_findings()
    (entry,) = cache.glob(f"*{dc.SUFFIX}")
    written = entry.stat().st_ino
    quit_while_findings()  # read back, its findings not in again: not written again (a new file)
    assert entry.stat().st_ino == written
    trace = load(str(path))
    assert "findings" not in dc.DiagnosisCache.open(trace, Params()).read(trace).derived
    got = dc.cached_diagnosis(trace)
    reference = diagnose(trace)
    assert_same(reference, got)
    assert_same(findings(reference), findings(got), "findings")
    dc.wait_for_writes()  # the entry is written again, with them
    again = dc.DiagnosisCache.open(trace, Params()).read(trace)
    assert_same(findings(reference), again.derived["findings"], "findings")
