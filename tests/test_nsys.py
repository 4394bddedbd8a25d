"""Nsight Systems SQLite exports made by ``bench/gen_nsys.py`` (the real export schema
of 2021, 2022 and 2025): what the reader makes of them, schema differences, damaged
and foreign SQLite files, and the same run read from Nsight and from Kineto JSON
giving the same diagnosis."""

from __future__ import annotations

import gzip
import os
import sqlite3
import subprocess
import sys

import numpy as np
import pytest

from bench.gen_nsys import HOST_PID, LOADER_TID, MAIN_TID, generate
from gapscope.analysis import diagnose
from gapscope.analysis.jsonout import diagnosis_to_json
from gapscope.parsers import CopyKind, Kind, TraceFormatError, load
from gapscope.parsers.detect import sniff

from .conftest import ROOT


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """{name: (path, stats)} of small generated exports, made once for the module."""
    d = tmp_path_factory.mktemp("nsys")
    out = {}
    for name, kw in {
        "2025": dict(schema="2025"),
        "2022": dict(schema="2022"),
        "2021": dict(schema="2021"),
        "two_gpus": dict(devices=2),
        "no_nvtx": dict(omit=["NVTX_EVENTS"]),
        "no_memcpy": dict(omit=["CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"]),
        "no_sync": dict(omit=["CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"]),
        "no_runtime": dict(omit=["CUPTI_ACTIVITY_KIND_RUNTIME"]),
        "no_strings": dict(omit=["StringIds"]),
    }.items():
        path = d / f"{name}.sqlite"
        out[name] = (path, generate(path, 1500, seed=3, launches_per_step=100, **kw))
    return out


def _copy(src, dst):
    dst.write_bytes(src.read_bytes())
    return dst


def _edit(path, *sql: str) -> None:
    con = sqlite3.connect(path)
    for s in sql:
        con.execute(s)
    con.commit()
    con.close()


# ------------------------------------------------------------------ what is read
def test_generated_export_reads_as_written(made):
    path, stats = made["2025"]
    t = load(path)
    assert (t.kind == Kind.KERNEL).sum() == stats.n_kernels == 1500
    calls = t.mask_kind(Kind.LAUNCH, Kind.SYNC_CALL, Kind.MEMCPY_CALL, Kind.RUNTIME)
    assert calls.sum() == stats.n_runtime
    assert {s.device: s.busy_ns for s in diagnose(t).devices} == stats.busy_ns
    assert t.extent_ns == stats.extent_ns
    assert not t.warnings
    # lanes: the two threads (named), streams 7 and 20, the device-wide sync lane
    cpu = {(ln.pid, ln.tid): ln.thread_name for ln in t.lanes if not ln.is_gpu}
    assert cpu == {(str(HOST_PID), str(MAIN_TID)): "python3", (str(HOST_PID), str(LOADER_TID)): "pt_data_loader"}
    assert [ln.label for ln in t.lanes if ln.is_gpu] == ["stream 7", "stream 20", "sync (no stream)"]
    assert [ln.index for ln in t.lanes] == list(range(len(t.lanes)))
    assert t.lanes[0].process_name == "python3"


def test_runtime_calls_are_sorted_by_name_and_linked(made):
    t = load(made["2025"][0])
    kinds = {t.name(i): Kind(int(t.kind[i])) for i in np.flatnonzero(t.lane == 0)}
    assert kinds["cudaLaunchKernel"] == Kind.LAUNCH and kinds["cuLaunchKernel"] == Kind.LAUNCH
    assert kinds["cudaStreamSynchronize"] == Kind.SYNC_CALL and kinds["cudaDeviceSynchronize"] == Kind.SYNC_CALL
    assert kinds["cudaMemcpyAsync"] == Kind.MEMCPY_CALL
    assert kinds["cudaMemsetAsync"] == Kind.RUNTIME
    assert not any(n.endswith("_v3020") or n.endswith("_v7000") for n in t.names)
    gpu = t.mask_kind(Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)
    assert np.isin(np.flatnonzero(gpu), t.flow_dst).all()  # every GPU op has its call
    assert (t.correlation[t.flow_src] == t.correlation[t.flow_dst]).all()


def test_copies_memsets_and_syncs(made):
    t = load(made["2025"][0])
    m = t.kind == Kind.MEMCPY
    names = {t.name(i) for i in np.flatnonzero(m)}
    assert names == {"Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pageable)"}
    assert t.pageable[m].all()
    assert set(t.copy_kind[m].tolist()) == {int(CopyKind.H2D), int(CopyKind.D2H)}
    assert set(t.bytes[m].tolist()) == {4, 256 * 1024}
    ms = t.kind == Kind.MEMSET
    assert {t.name(i) for i in np.flatnonzero(ms)} == {"Memset (Device)"} and (t.bytes[ms] == 1 << 20).all()
    s = np.flatnonzero(t.kind == Kind.SYNC_MARKER)
    by_lane = {(t.lanes[t.lane[i]].label, t.name(i)) for i in s}
    assert by_lane == {("stream 7", "Stream Sync"), ("sync (no stream)", "Context Sync")}


def test_nvtx_ranges_are_annotations_and_give_the_steps(made):
    t = load(made["2025"][0])
    ann = t.kind == Kind.ANNOTATION
    assert {t.name(i) for i in np.flatnonzero(ann)} == {"train_step", "forward", "backward", "load_batch"}
    d = diagnose(t)
    assert d.steps is not None and d.steps.source == "annotation" and d.steps.name == "train_step"
    assert len(d.steps) == int((ann & (t.name_id == t.names.index("train_step"))).sum())


def test_osrt_calls_are_host_work_on_their_thread(made):
    t = load(made["2025"][0])
    osrt = np.flatnonzero((t.kind == Kind.OTHER) & (t.name_id == t.names.index("read")))
    assert osrt.size and {t.lanes[t.lane[i]].thread_name for i in osrt} == {"python3", "pt_data_loader"}


def test_two_gpus_keep_their_streams_and_syncs_apart(made):
    """Sync records of device 1 say deviceId 0 (as real multi-GPU exports do): they are
    placed by their stream's context."""
    path, stats = made["two_gpus"]
    t = load(path)
    assert t.devices() == [0, 1]
    assert {s.device: s.busy_ns for s in diagnose(t).devices} == stats.busy_ns
    marks = np.flatnonzero(t.kind == Kind.SYNC_MARKER)
    assert {t.lanes[t.lane[i]].device for i in marks} == {0, 1}
    assert [p["id"] for p in t.source.device_properties] == [0, 1]


@pytest.mark.parametrize("schema", ["2021", "2022"])
def test_older_schemas_read_the_same_run(made, schema):
    new, old = load(made["2025"][0]), load(made[schema][0])
    for kind in (Kind.KERNEL, Kind.MEMCPY, Kind.LAUNCH, Kind.SYNC_MARKER, Kind.ANNOTATION, Kind.OTHER):
        a, b = new.kind == kind, old.kind == kind
        assert new.start_ns[a].tolist() == old.start_ns[b].tolist(), kind
        assert [new.name(i) for i in np.flatnonzero(a)] == [old.name(i) for i in np.flatnonzero(b)], kind
    assert len(new.flow_src) == len(old.flow_src)
    assert old.source.device_properties[0]["name"] == "NVIDIA H100 80GB HBM3"
    assert not old.warnings


# ------------------------------------------------------------------ tables missing
def test_export_without_nvtx(made):
    t = load(made["no_nvtx"][0])
    assert not (t.kind == Kind.ANNOTATION).any()
    assert not t.warnings
    d = diagnose(t)
    assert d.steps is None or d.steps.source == "period"
    assert len(d.gaps) > 0


def test_export_without_copies(made):
    t = load(made["no_memcpy"][0])
    assert not t.mask_kind(Kind.MEMCPY, Kind.MEMSET).any()
    assert (t.kind == Kind.MEMCPY_CALL).any()  # the calls are still there, linked to nothing
    assert len(diagnose(t).gaps) > 0


def test_export_without_sync_records(made):
    t = load(made["no_sync"][0])
    assert not (t.kind == Kind.SYNC_MARKER).any()
    assert not any(ln.stream == -1 for ln in t.lanes if ln.is_gpu)
    assert len(diagnose(t).gaps) > 0


def test_export_without_runtime_calls_says_so(made):
    t = load(made["no_runtime"][0])
    assert (t.kind == Kind.KERNEL).sum() == 1500 and len(t.flow_src) == 0
    assert any("no CUDA API calls" in str(w) for w in t.warnings)
    assert len(diagnose(t).gaps) > 0


def test_export_without_string_table_names_by_id(made):
    t = load(made["no_strings"][0])
    assert any("no StringIds" in str(w) for w in t.warnings)
    assert all(t.name(i).startswith("(string ") for i in np.flatnonzero(t.kind == Kind.KERNEL))


def test_missing_correlation_column_is_a_warning(made, tmp_path):
    p = _copy(made["2025"][0], tmp_path / "x.sqlite")
    _edit(p, "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN correlationId")
    t = load(p)
    assert (t.kind == Kind.KERNEL).sum() == 1500
    assert not (t.kind[t.flow_dst] == Kind.KERNEL).any()
    assert any("CUPTI_ACTIVITY_KIND_KERNEL has no correlationId column" in str(w) for w in t.warnings)


def test_newer_schema_version_is_a_warning(made, tmp_path):
    p = _copy(made["2025"][0], tmp_path / "x.sqlite")
    _edit(p, "UPDATE META_DATA_EXPORT SET value = '4.0.0' WHERE name = 'EXPORT_SCHEMA_VERSION'")
    t = load(p)
    assert (t.kind == Kind.KERNEL).sum() == 1500
    assert any("export schema 4.0.0" in str(w) for w in t.warnings)


# ------------------------------------------------------------------ odd rows
def test_values_that_are_not_integers_are_read_row_by_row(made, tmp_path):
    p = _copy(made["2025"][0], tmp_path / "x.sqlite")
    ref = load(made["2025"][0])
    _edit(
        p,
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = start + 0.0 WHERE rowid = 5",  # a REAL now
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET correlationId = NULL WHERE rowid = 7",
    )
    t = load(p)
    k, kr = t.kind == Kind.KERNEL, ref.kind == Kind.KERNEL
    assert t.start_ns[k].tolist() == ref.start_ns[kr].tolist()
    assert (t.kind[t.flow_dst] == Kind.KERNEL).sum() == 1499


def test_correlation_id_zero_links_nothing(made, tmp_path):
    """CUPTI numbers calls from 1; rows with id 0 (calls made outside any launch) are
    not linked to each other."""
    p = _copy(made["2025"][0], tmp_path / "x.sqlite")
    _edit(
        p,
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET correlationId = 0 WHERE rowid IN (1, 2)",
        "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET correlationId = 0 WHERE rowid IN (5, 6)",
    )
    t = load(p)
    assert (t.kind[t.flow_dst] == Kind.KERNEL).sum() == 1500 - 4
    assert not any("shared by" in str(w) for w in t.warnings)


def test_untimed_and_backwards_rows_are_skipped_with_a_warning(made, tmp_path):
    p = _copy(made["2025"][0], tmp_path / "x.sqlite")
    _edit(
        p,
        'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 0, "end" = 0 WHERE rowid = 3',
        'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start - 5 WHERE rowid = 4',
    )
    t = load(p)
    assert (t.kind == Kind.KERNEL).sum() == 1498
    text = " ".join(str(w) for w in t.warnings)
    assert "start = end = 0" in text and "ending before they start" in text


def test_backtrace_rows_repeating_calls_are_left_out(made, tmp_path):
    p = _copy(made["2025"][0], tmp_path / "x.sqlite")
    _edit(
        p,
        'INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME SELECT start - 50, "end" + 50, 67, globalTid, correlationId, '
        "nameId, 0, 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME",
    )
    ref, t = load(made["2025"][0]), load(p)
    assert len(t) == len(ref) and len(t.flow_src) == len(ref.flow_src)
    assert any("event class 67 (CUDA backtrace)" in str(w) for w in t.warnings)


def test_open_nvtx_range_is_drawn_to_the_end(made, tmp_path):
    p = _copy(made["2025"][0], tmp_path / "x.sqlite")
    _edit(
        p,
        "UPDATE NVTX_EVENTS SET \"end\" = NULL WHERE rowid = (SELECT max(rowid) FROM NVTX_EVENTS WHERE text = 'train_step')",
    )
    t = load(p)
    i = np.flatnonzero(t.name_id == t.names.index("train_step"))[-1]
    assert t.start_ns[i] + t.dur_ns[i] == t.extent_ns[1]
    assert any("never ended" in str(w) for w in t.warnings)


def test_registered_nvtx_strings_and_marks(made, tmp_path):
    p = _copy(made["2025"][0], tmp_path / "x.sqlite")
    _edit(
        p,
        "INSERT INTO StringIds VALUES (90001, 'registered_step')",
        f'INSERT INTO NVTX_EVENTS (start, "end", eventType, textId, globalTid, domainId) '
        f"VALUES (2000000100, 2000000900, 59, 90001, {(1 << 48) | (HOST_PID << 24) | MAIN_TID}, 0)",
        f"INSERT INTO NVTX_EVENTS (start, eventType, text, globalTid) "
        f"VALUES (2000000200, 34, 'checkpoint', {(1 << 48) | (HOST_PID << 24) | MAIN_TID})",
    )
    t = load(p)
    assert t.kind[t.names.index("registered_step") == t.name_id].tolist() == [int(Kind.ANNOTATION)]
    assert t.kind[t.names.index("checkpoint") == t.name_id].tolist() == [int(Kind.INSTANT)]


def test_correlation_ids_are_per_process(made, tmp_path):
    """A second process reusing the same correlation ids is linked within itself only."""
    p = _copy(made["2025"][0], tmp_path / "x.sqlite")
    other = 4242
    shift = (other - HOST_PID) << 24
    _edit(
        p,
        f'INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME SELECT start + 7, "end" + 7, eventClass, globalTid + {shift}, '
        "correlationId, nameId, returnValue, callchainId FROM CUPTI_ACTIVITY_KIND_RUNTIME",
        f'INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT start + 11, "end" + 11, 1, contextId, greenContextId, '
        f"streamId, correlationId, globalPid + {shift}, demangledName, shortName, mangledName, launchType, cacheConfig, "
        "registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ, staticSharedMemory, dynamicSharedMemory, "
        "localMemoryPerThread, localMemoryTotal, gridId, sharedMemoryExecuted, graphNodeId, sharedMemoryLimitConfig "
        "FROM CUPTI_ACTIVITY_KIND_KERNEL",
    )
    t = load(p)
    k = t.kind[t.flow_dst] == Kind.KERNEL
    src, dst = t.flow_src[k], t.flow_dst[k]
    assert dst.size == 3000
    assert all(
        t.lanes[t.lane[s]].pid == str(HOST_PID if t.lanes[t.lane[d]].device == 0 else other)
        for s, d in zip(src.tolist(), dst.tolist())
    )


# ------------------------------------------------------------------ bad files
def _one_line_error(path) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "gapscope", "report", str(path)], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    return proc.stderr


def _unchanged(path):
    before = (path.read_bytes(), path.stat().st_mtime_ns, sorted(os.listdir(path.parent)))
    return lambda: (path.read_bytes(), path.stat().st_mtime_ns, sorted(os.listdir(path.parent))) == before


def test_truncated_export_is_one_line(made, tmp_path):
    data = made["2025"][0].read_bytes()
    for cut in (100, len(data) // 3, len(data) - 4096):
        p = tmp_path / f"cut{cut}.sqlite"
        p.write_bytes(data[:cut])
        same = _unchanged(p)
        line = _one_line_error(p)
        assert line.startswith(f"gapscope: error: {p}: ") and ("SQLite" in line or "Nsight" in line), line
        assert same()


def test_corrupt_export_is_one_line(made, tmp_path):
    data = bytearray(made["2025"][0].read_bytes())
    rng = np.random.default_rng(0)
    pos = rng.integers(4096, len(data), 2000)
    data[pos[0] : pos[0] + 1] = b"\xff"
    for p_ in pos.tolist():
        data[p_] = rng.integers(0, 256)
    p = tmp_path / "corrupt.sqlite"
    p.write_bytes(bytes(data))
    try:
        load(p)  # a damaged page may be one nothing reads: loading is fine then
    except TraceFormatError as exc:
        assert "\n" not in str(exc) and str(p) in str(exc)


def test_sqlite_that_is_not_an_export(tmp_path):
    p = tmp_path / "app.db"
    _edit(p, "CREATE TABLE users (id INTEGER, name TEXT)", "INSERT INTO users VALUES (1, 'x')")
    with pytest.raises(TraceFormatError, match="not an Nsight Systems export .*1 table.*users") as e:
        load(p)
    assert "nsys export --type sqlite" in str(e.value)
    with pytest.raises(TraceFormatError, match="not an Nsight Systems export"):
        sniff(p)
    empty = tmp_path / "empty.db"
    _edit(empty, "PRAGMA user_version = 1")
    line = _one_line_error(empty)
    assert "not an Nsight Systems export" in line and "0 table(s)" in line


def test_zero_kernel_export_gives_a_clear_empty_report(made, tmp_path):
    p = _copy(made["2025"][0], tmp_path / "x.sqlite")
    _edit(p, "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
    t = load(p)
    assert not (t.kind == Kind.KERNEL).any()
    assert any("no GPU kernels in this export" in str(w) for w in t.warnings)
    proc = subprocess.run(
        [sys.executable, "-m", "gapscope", "report", str(p)], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "no GPU kernels in this export" in proc.stdout


def test_export_without_cuda_trace(made, tmp_path):
    p = _copy(made["2025"][0], tmp_path / "x.sqlite")
    _edit(
        p,
        *[
            f"DROP TABLE {t}"
            for t in (
                "CUPTI_ACTIVITY_KIND_KERNEL",
                "CUPTI_ACTIVITY_KIND_MEMCPY",
                "CUPTI_ACTIVITY_KIND_MEMSET",
                "CUPTI_ACTIVITY_KIND_RUNTIME",
                "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
            )
        ],
    )
    t = load(p)
    assert not any(ln.is_gpu for ln in t.lanes) and (t.kind == Kind.ANNOTATION).any()
    assert any("no CUDA trace in this export" in str(w) for w in t.warnings)
    _edit(p, "DROP TABLE NVTX_EVENTS", "DROP TABLE OSRT_API")
    with pytest.raises(TraceFormatError, match="no CUDA, NVTX or OS runtime events"):
        load(p)


def test_gzipped_export_is_refused(made, tmp_path):
    p = tmp_path / "x.sqlite.gz"
    p.write_bytes(gzip.compress(made["2025"][0].read_bytes()))
    with pytest.raises(TraceFormatError, match="gzip-compressed SQLite file.*gunzip it first"):
        load(p)


def test_export_is_only_read(made, tmp_path):
    """No journal, -wal or -shm file appears, and the file keeps its bytes and mtime,
    even in a read-only folder."""
    d = tmp_path / "ro"
    d.mkdir()
    p = _copy(made["2025"][0], d / "x.sqlite")
    p.chmod(0o444)
    d.chmod(0o555)
    try:
        same = _unchanged(p)
        t = load(p)
        assert t.args_of(int(np.flatnonzero(t.kind == Kind.KERNEL)[0]))["table"] == "CUPTI_ACTIVITY_KIND_KERNEL"
        assert sniff(p) == "nsys"
        assert same()
    finally:
        d.chmod(0o755)


def test_args_of_reads_the_row_back(made):
    t = load(made["2025"][0])
    i = int(np.flatnonzero(t.kind == Kind.KERNEL)[0])
    args = t.args_of(i)
    assert args["demangledName"] == t.name(i) and args["start"] == int(t.start_ns[i])
    assert isinstance(args["shortName"], str) and args["correlationId"] == int(t.correlation[i])


# ------------------------------------------------------------------ Nsight vs Kineto
def _comparable(diag) -> dict:
    """The diagnosis document without what depends on event order or file format:
    event indices become (lane label, name, start)."""
    doc = diagnosis_to_json(diag, top=20)
    t = diag.trace
    doc.pop("source"), doc.pop("warnings")

    def ev(i):
        if i is None or i < 0:
            return None
        return (t.lanes[int(t.lane[i])].label, t.name(int(i)), int(t.start_ns[i]))

    g = doc["gaps"]
    for key in ("prev_op", "next_op", "launch"):
        g[key] = [ev(i) for i in g[key]]
    g["launch_lane"] = [t.lanes[k].label if k >= 0 else None for k in g["launch_lane"]]
    for gap in doc["top_gaps"]:
        gap["evidence"] = sorted((e["name"], e["cause"], e["overlap_ns"], e["bytes"]) for e in gap["evidence"])
        gap["card"]["evidence"] = sorted((e["name"], e["cause"], e["overlap_ns"]) for e in gap["card"]["evidence"])
    for gr in doc["groups"]:
        if gr["card"]:
            gr["card"]["evidence"] = sorted((e["name"], e["cause"], e["overlap_ns"]) for e in gr["card"]["evidence"])
    return doc


@pytest.mark.parametrize("seed, devices", [(5, 1), (6, 2)])
def test_nsight_and_kineto_of_one_run_diagnose_alike(tmp_path, seed, devices):
    sq, js = tmp_path / "run.sqlite", tmp_path / "run.json"
    generate(sq, 3000, seed=seed, kineto=js, devices=devices, launches_per_step=120, device_syncs=False)
    a, b = diagnose(load(sq)), diagnose(load(js))
    assert len(a.gaps) > 10
    assert {int(c) for c in a.gaps.cause} >= {0, 1, 3}  # sync, copy and host gaps are in the run
    assert _comparable(a) == _comparable(b)


def test_context_syncs_are_on_the_device_in_nsight_only(tmp_path):
    """Kineto writes a ``Context Sync`` record on tid -1 of the device, which the Chrome
    reader draws as a CPU lane; the Nsight reader keeps it on the device's
    ``sync (no stream)`` lane. The gaps and their classes agree all the same; only
    the cards of gaps with such a sync name it."""
    sq, js = tmp_path / "run.sqlite", tmp_path / "run.json"
    generate(sq, 3000, seed=5, kineto=js, launches_per_step=120)
    a, b = diagnose(load(sq)), diagnose(load(js))
    for key in ("start_ns", "end_ns", "cause", "secondary", "lateness_ns", "class_ns"):
        assert np.array_equal(getattr(a.gaps, key), getattr(b.gaps, key)), key
    ta, tb = a.trace, b.trace
    assert {ta.lanes[ta.lane[i]].is_gpu for i in np.flatnonzero(ta.name_id == ta.names.index("Context Sync"))} == {True}
    assert {tb.lanes[tb.lane[i]].is_gpu for i in np.flatnonzero(tb.name_id == tb.names.index("Context Sync"))} == {
        False
    }
