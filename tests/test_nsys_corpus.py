"""The four real Nsight Systems exports of the shared corpus (``extrap/*.sqlite``,
``nvfuser/report1.sqlite``, 2021-2025 schemas), read in place: they load, GPU busy per
device equals an independent SQL union of kernel intervals, every kernel whose
correlation id has a runtime row is linked to that call, times are the export's
integers, lanes are the export's streams and threads, and the report runs on them."""

from __future__ import annotations

import io
import json
import sqlite3

import numpy as np
import pytest

from gapscope.analysis import diagnose
from gapscope.parsers import Kind, load
from gapscope.parsers.nsys.sql import ro_uri
from tests.conftest import CORPUS, require

EXPORTS = ["extrap/con_kernel.sqlite", "extrap/ex-gpu.s10.sqlite", "extrap/profile16.sqlite", "nvfuser/report1.sqlite"]


def _path(rel: str):
    return require(CORPUS / rel)


def _sql(path, query: str) -> list[tuple]:
    con = sqlite3.connect(ro_uri(str(path)), uri=True)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


#: Union length of [start, end) per device, in SQL only (window functions): an interval
#: opens a new group when it starts after every earlier interval has ended.
_BUSY_SQL = """
WITH k AS (SELECT deviceId AS d, start AS s, "end" AS e FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE "end" > start),
o AS (SELECT d, s, e, max(e) OVER (PARTITION BY d ORDER BY s, e ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS pe
      FROM k),
g AS (SELECT d, s, e, sum(CASE WHEN pe IS NULL OR s > pe THEN 1 ELSE 0 END)
                      OVER (PARTITION BY d ORDER BY s, e ROWS UNBOUNDED PRECEDING) AS grp FROM o)
SELECT d, sum(ge - gs) FROM (SELECT d, grp, min(s) AS gs, max(e) AS ge FROM g GROUP BY d, grp) GROUP BY d
"""


@pytest.mark.parametrize("rel", EXPORTS)
def test_export_loads_with_its_devices_and_names(rel):
    t = load(_path(rel))
    assert t.source.format == "nsys-sqlite"
    assert (t.kind == Kind.KERNEL).sum() == _sql(_path(rel), "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0]
    props = t.source.device_properties
    assert props and all(p.get("name") for p in props)
    assert {p["id"] for p in props} == set(t.devices())
    # no lane without events, every CPU lane named after its process
    assert all(t.lane_offsets[ln.index + 1] > t.lane_offsets[ln.index] for ln in t.lanes)
    assert all(ln.process_name for ln in t.lanes if not ln.is_gpu)


@pytest.mark.parametrize("rel", EXPORTS)
def test_gpu_busy_equals_sql_union_of_kernels(rel):
    t = load(_path(rel))
    expected = {d: busy for d, busy in _sql(_path(rel), _BUSY_SQL)}
    got = {s.device: s.busy_ns for s in diagnose(t).devices}
    assert got == expected


@pytest.mark.parametrize("rel", EXPORTS)
def test_every_kernel_with_a_runtime_row_is_linked_to_its_launch(rel):
    path = _path(rel)
    expected = _sql(
        path,
        """SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k WHERE EXISTS (
        SELECT 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME r WHERE r.correlationId = k.correlationId
        AND (r.globalTid >> 24) = (k.globalPid >> 24) AND r.eventClass IN (0, 1))""",
    )[0][0]
    t = load(path)
    dst_kernel = t.kind[t.flow_dst] == Kind.KERNEL
    src, dst = t.flow_src[dst_kernel], t.flow_dst[dst_kernel]
    assert dst.size == expected > 0
    assert np.unique(dst).size == dst.size
    assert (t.correlation[src] == t.correlation[dst]).all()
    assert (t.kind[src] == Kind.LAUNCH).all(), sorted({t.name(i) for i in src if t.kind[i] != Kind.LAUNCH})
    assert {t.name(i) for i in src} <= {"cudaLaunchKernel", "cuLaunchKernel", "cuLaunchKernelEx", "cudaLaunchKernelExC"}


@pytest.mark.parametrize("rel", EXPORTS)
def test_times_are_the_exports_integers(rel):
    path = _path(rel)
    t = load(path)
    for table, kind in (("CUPTI_ACTIVITY_KIND_KERNEL", Kind.KERNEL), ("CUPTI_ACTIVITY_KIND_MEMCPY", Kind.MEMCPY)):
        try:
            rows = _sql(path, f'SELECT start, "end" - start FROM {table}')
        except sqlite3.OperationalError:  # no such table in this export
            rows = []
        m = t.kind == kind
        got = sorted(zip(t.start_ns[m].tolist(), t.dur_ns[m].tolist()))
        assert got == sorted(rows)


@pytest.mark.parametrize("rel", EXPORTS)
def test_gpu_lanes_are_the_exports_streams(rel):
    path = _path(rel)
    t = load(path)
    streams = set()
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        try:
            streams |= set(_sql(path, f"SELECT DISTINCT deviceId, streamId FROM {table}"))
        except sqlite3.OperationalError:
            pass
    lanes = {(ln.device, ln.stream) for ln in t.lanes if ln.is_gpu and ln.stream >= 0}
    assert lanes == streams
    assert all(ln.label == f"stream {ln.stream}" for ln in t.lanes if ln.is_gpu and ln.stream >= 0)


def test_nvfuser_export_reads_as_its_contents():
    """nvfuser/report1.sqlite (nsys 2025.1): thread names from ThreadNames, NVTX text,
    the H200, Kineto names for copies and syncs."""
    t = load(_path("nvfuser/report1.sqlite"))
    assert t.source.extra["nsys_version"] == "2025.1.1.110"
    assert t.source.extra["nsys_schema_version"] == "3.17.1"
    assert t.source.device_properties[0]["name"] == "NVIDIA H200"
    assert t.source.device_properties[0]["numSms"] == 132
    names = {ln.thread_name for ln in t.lanes}
    assert {"pytest", "pt_thread_pool"} <= names
    assert (t.kind == Kind.ANNOTATION).sum() == 13513
    assert "FusionCache::get" in t.names
    copies = {t.name(i) for i in np.flatnonzero(t.kind == Kind.MEMCPY)}
    assert copies == {"Memcpy HtoD (Pageable -> Device)", "Memcpy DtoD (Device -> Device)"}
    pageable = t.pageable[t.kind == Kind.MEMCPY]
    assert pageable.sum() == 2
    syncs = sorted(t.name(i) for i in np.flatnonzero(t.kind == Kind.SYNC_MARKER))
    assert syncs == ["Context Sync", "Stream Sync", "Stream Sync"]  # after their calls, not syncType


def test_backtrace_rows_do_not_double_the_calls():
    """ex-gpu.s10 (2021) repeats every CUDA call as a ``CUDA backtrace`` row (eventClass
    67) with the same correlation id: those are left out, with a warning."""
    t = load(_path("extrap/ex-gpu.s10.sqlite"))
    calls = t.mask_kind(Kind.LAUNCH, Kind.SYNC_CALL, Kind.MEMCPY_CALL, Kind.RUNTIME)
    assert calls.sum() == 18
    assert any("event class 67" in str(w) for w in t.warnings)
    assert (t.kind == Kind.OTHER).sum() > 1000  # OS runtime calls, as host work


@pytest.mark.parametrize("rel", EXPORTS)
def test_report_json_runs(rel):
    from gapscope.report import cmd

    out = io.StringIO()
    assert cmd.run([str(_path(rel)), "--json"], stdout=out) == 0
    doc = json.loads(out.getvalue())
    assert doc["source"]["format"] == "nsys-sqlite"
