"""Every corpus file loads, and ``gapscope.parsers.load`` agrees with an independent reference.

The reference (``tests/reference.py``, stdlib json/gzip/decimal only) computes, per
file: event counts by phase and category, lanes, extent, GPU-op counts and GPU busy
(union of kernel intervals per device, exact ns). It is itself cross-checked against
the figures stated in ``shared/traces/public/PROVENANCE.md`` (counts, streams, span,
GPU ops, busy %). ``tracelens/rocprof/908_results.json.gz`` (rocprofv3 JSON, not a
Chrome trace) must be refused with a ``TraceFormatError``. The Nsight SQLite exports
are not collected here: ``tests/test_nsys_corpus.py`` checks them.

Each file is parsed once per session (module-level caches); the reference takes
about 20 s over the whole corpus, the biggest file (hta/mtia_rank_0) about 3.5 s.
"""

from __future__ import annotations

import functools
from collections import Counter

import numpy as np
import pytest

from gapscope.parsers import Kind, TraceFormatError, load
from tests.conftest import CORPUS, require
from tests.reference import MTIA_COPY_NAMES, MTIA_EVENT_NAMES, provenance, reference, union_ns

REFUSED = {"tracelens/rocprof/908_results.json.gz"}


def _corpus_files() -> list[str]:
    if not CORPUS.exists():
        return ["<corpus missing>"]
    return sorted(
        str(p.relative_to(CORPUS))
        for p in CORPUS.rglob("*")
        if p.is_file() and p.suffix != ".sqlite" and p.name != "PROVENANCE.md"
    )


FILES = _corpus_files()
TRACES = [f for f in FILES if f not in REFUSED]


def _path(rel: str):
    require(CORPUS)
    return require(CORPUS / rel)


@functools.cache
def _ref(rel: str):
    return reference(_path(rel))


@functools.cache
def _trace(rel: str):
    return load(_path(rel))


@functools.lru_cache(maxsize=1)
def _prov() -> dict:
    return provenance(require(CORPUS / "PROVENANCE.md"))


# ------------------------------------------------------------ the reference itself
def test_every_corpus_file_is_listed_in_provenance(corpus):
    listed = {k for k in _prov() if not k.endswith(".sqlite")}
    assert set(FILES) == listed


@pytest.mark.parametrize("rel", TRACES)
def test_reference_matches_provenance(rel):
    """Our reference reproduces every figure PROVENANCE.md states for the file."""
    info = _prov().get(rel)
    assert info is not None, f"{rel} not in PROVENANCE.md"
    r = _ref(rel)
    assert r.n_events == info["events"]
    assert dict(r.by_ph) == info["ph"]
    for cat, n in info.get("cats", {}).items():
        assert r.by_cat.get(cat) == n, cat
    # newer PROVENANCE rows (the before/after pairs) state no stream or device counts
    if "gpu_streams" in info:
        assert len(r.gpu_streams) == info["gpu_streams"]
    if "gpu_devices" in info:
        assert len(r.devices) == info["gpu_devices"]
    if "gpu_ops" in info:  # every event of a GPU category: MTIA's stream event records too
        assert r.n_gpu_ops + len(r.mtia_event_records) == info["gpu_ops"]
        work = [iv for d in r.devices.values() for iv in d.work] + r.mtia_event_records
        lo, hi = min(s for s, _ in work), max(e for _, e in work)
        pct = 100 * union_ns(work) / (hi - lo) if hi > lo else 100.0
        assert round(pct) == info["busy_pct"]
    if "gpu_unmatched" in info:
        assert r.gpu_unmatched_cuda == info["gpu_unmatched"]
    if "span_us" not in info:
        return
    lo, hi = r.extent(list(r.extent_by_ph))
    assert abs((hi - lo) / 1000 - info["span_us"]) <= info["span_tol_us"] * 1.0001


# ------------------------------------------------------------------ the loader
def test_rocprof_json_is_refused_clearly(corpus):
    p = _path("tracelens/rocprof/908_results.json.gz")
    with pytest.raises(TraceFormatError) as ei:
        load(p)
    err = ei.value
    text = str(err)
    assert "\n" not in text and str(p) in text
    assert err.line is not None
    assert any(w in text.lower() for w in ("rocprof", "not a chrome", "traceevents", "not a trace")), text


@pytest.mark.parametrize("rel", TRACES)
def test_loads(rel):
    tr = _trace(rel)
    r = _ref(rel)
    assert len(tr) > 0
    # phases a timeline cannot use are ignored but counted (issue 2: "count it")
    handled = {"X", "B", "E", "i", "I", "R", "C", "b", "e", "n", "S", "T", "F", "s", "t", "f", "M"}
    for ph, n in r.by_ph.items():
        if ph not in handled:
            assert tr.source.ignored_counts.get(f"ph {ph}") == n, (ph, tr.source.ignored_counts)
    assert tr.source.format in ("kineto", "chrome", "legacy-autograd")
    for k in ("schemaVersion", "displayTimeUnit", "baseTimeNanoseconds"):
        if k in r.header:
            want = r.header[k]
            got = {
                "schemaVersion": tr.source.schema_version,
                "displayTimeUnit": tr.source.display_time_unit,
                "baseTimeNanoseconds": tr.source.base_time_ns,
            }[k]
            assert got == want, k


_KIND_CATS = {
    Kind.KERNEL: {"kernel", "Kernel", "mtia_ccp_events"},
    Kind.MEMCPY: {"gpu_memcpy", "Memcpy"},
    Kind.MEMSET: {"gpu_memset", "Memset"},
    Kind.SYNC_MARKER: {"cuda_sync"},
    Kind.CPU_OP: {"cpu_op", "Operator"},
    Kind.PYTHON: {"python_function"},
    Kind.ANNOTATION: {"user_annotation"},
    Kind.GPU_ANNOTATION: {"gpu_user_annotation"},
}
_RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "Runtime", "Driver", "mtia_runtime"}


@pytest.mark.parametrize("rel", TRACES)
def test_event_counts_by_category(rel):
    """X events per Kineto category = loader events per kind (GPU ops, runtime calls, ops)."""
    tr = _trace(rel)
    r = _ref(rel)
    got = Counter(Kind(int(k)) for k in tr.kind)
    want = {k: sum(r.by_ph_cat.get(("X", c), 0) for c in cats) for k, cats in _KIND_CATS.items()}
    # MTIA's DMA transfers are copies, its stream event records sync markers
    dma = sum(r.mtia_by_name.get(n, 0) for n in MTIA_COPY_NAMES)
    marks = sum(r.mtia_by_name.get(n, 0) for n in MTIA_EVENT_NAMES)
    want[Kind.KERNEL] -= dma + marks
    want[Kind.MEMCPY] += dma
    want[Kind.SYNC_MARKER] += marks
    have = {k: got.get(k, 0) for k in _KIND_CATS}
    assert have == want
    runtime = sum(got.get(k, 0) for k in (Kind.LAUNCH, Kind.SYNC_CALL, Kind.MEMCPY_CALL, Kind.RUNTIME))
    assert runtime == sum(r.by_ph_cat.get(("X", c), 0) for c in _RUNTIME_CATS)


def _loader_busy(tr) -> dict:
    out: dict = {}
    kern = np.flatnonzero(tr.kind == int(Kind.KERNEL))
    dev_of_lane = [ln.device if ln.is_gpu else None for ln in tr.lanes]
    by_dev: dict = {}
    for i in kern.tolist():
        d = dev_of_lane[int(tr.lane[i])]
        by_dev.setdefault(d, []).append((int(tr.start_ns[i]), int(tr.start_ns[i] + tr.dur_ns[i])))
    for d, iv in by_dev.items():
        out[d] = (len(iv), union_ns(iv))
    return out


@pytest.mark.parametrize("rel", TRACES)
def test_gpu_kernels_and_busy(rel):
    """Kernels per device and GPU busy (union over streams, exact ns) match the reference."""
    tr = _trace(rel)
    r = _ref(rel)
    want = {d: (dr.n_kernels, dr.busy_ns) for d, dr in r.devices.items() if dr.n_kernels}
    assert int((tr.kind == int(Kind.KERNEL)).sum()) == r.n_kernels
    assert _loader_busy(tr) == want
    gpu_lanes = {(ln.device, ln.tid) for ln in tr.lanes if ln.is_gpu and ln.device >= 0}
    for d, dr in r.devices.items():
        for s in dr.streams:
            assert (d, s) in gpu_lanes or any(dd == d for dd, _ in gpu_lanes), (d, s)


@pytest.mark.parametrize("rel", TRACES)
def test_launch_links_by_correlation(rel):
    """Every GPU op whose correlation matches a runtime call is linked from a call with
    that correlation; no GPU op is linked from two different calls."""
    tr = _trace(rel)
    r = _ref(rel)
    work = tr.mask_kind(Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)
    src, dst = tr.flow_src, tr.flow_dst
    to_work = work[dst]
    same = (tr.correlation[src] == tr.correlation[dst]) & (tr.correlation[dst] >= 0)
    assert len(set(dst[to_work & same].tolist())) == r.gpu_linked
    pairs = set(zip(src[to_work].tolist(), dst[to_work].tolist()))
    assert len({d for _, d in pairs}) == len(pairs), "one launch call per GPU op"


def _is_thread_lane(ln) -> bool:
    return not (ln.tid.startswith("counter ") or ln.tid.startswith("async "))


@pytest.mark.parametrize("rel", TRACES)
def test_lanes(rel):
    """Thread lanes = (pid, tid) pairs with slices/instants; plus one lane per counter
    series and async track."""
    tr = _trace(rel)
    r = _ref(rel)
    want = r.lanes(("X", "B", "E", "i", "I", "R"))
    used = {int(x) for x in np.unique(tr.lane)}
    got = {(ln.pid, ln.tid) for ln in tr.lanes if _is_thread_lane(ln) and ln.index in used}
    assert got == want, (sorted(got - want)[:5], sorted(want - got)[:5])
    assert len(tr.lanes) == len(want) + len(r.counter_series) + len(r.async_tracks)
    assert all(tr.lane_offsets[k + 1] > tr.lane_offsets[k] for k in range(len(tr.lanes))), "no empty lanes"


_EXTENT_PHASES = ("X", "B", "E", "i", "I", "R", "C", "b", "e", "n", "S", "T", "F")


@pytest.mark.parametrize("rel", TRACES)
def test_extent(rel):
    """Extent = [min ts, max ts+dur] over timeline events, exact ns (± 1 ns when the file
    has sub-ns digits)."""
    tr = _trace(rel)
    r = _ref(rel)
    lo, hi = r.extent(_EXTENT_PHASES)
    tol = 1 if r.max_decimals > 3 else 0
    assert abs(tr.extent_ns[0] - lo) <= tol and abs(tr.extent_ns[1] - hi) <= tol, (
        tuple(tr.extent_ns),
        (lo, hi),
        [str(w) for w in tr.warnings][:5],
    )
