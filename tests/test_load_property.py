"""Property tests of ``gapscope.parsers.load`` (hypothesis).

- Arbitrary bytes (raw, JSON-like fragments, gzip-wrapped) never raise anything but
  ``TraceFormatError``, and whatever loads satisfies the ``Trace`` invariants.
- Real corpus files cut at random offsets load every complete event before the cut
  (compared with a loader run on the independently repaired prefix) or raise
  ``TraceFormatError``; cut gzip streams never raise anything else.
- Random valid Chrome/Kineto traces built from strategies load with the numbers
  computed here: event and kernel counts, lanes, extent, correlation links, exact
  start/dur, and GPU busy per device — the vectorised union (``gapscope.analysis.busy``)
  equals the slow pure-Python union of ``tests/reference.py``.

``max_examples`` is kept small so the file runs in well under a minute on 2 cores.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from gapscope.parsers import Kind, TraceFormatError, load
from gapscope.parsers.builder import TraceBuilder
from gapscope.sample_traces import names as sample_names
from gapscope.sample_traces import path as sample_path
from tests.conftest import BUGS, CORPUS, require
from tests.reference import union_ns
from tests.test_bugs import _rows, complete_prefix

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _check_invariants(tr) -> None:
    n = len(tr)
    for name in ("start_ns", "dur_ns", "lane", "name_id", "kind", "correlation", "depth", "src_line"):
        assert getattr(tr, name).shape == (n,), name
    assert tr.start_ns.dtype == np.int64 and tr.dur_ns.dtype == np.int64
    assert (tr.dur_ns >= 0).all()
    assert tr.lane_offsets.shape == (len(tr.lanes) + 1,)
    assert tr.lane_offsets[0] == 0 and tr.lane_offsets[-1] == n
    assert (np.diff(tr.lane) >= 0).all(), "sorted by lane"
    for k in range(len(tr.lanes)):
        sl = tr.lane_slice(k)
        assert (np.diff(tr.start_ns[sl]) >= 0).all(), "sorted by start within a lane"
        assert (tr.lane[sl] == k).all()
    if n:
        assert 0 <= int(tr.name_id.min()) and int(tr.name_id.max()) < len(tr.names)
        assert tr.extent_ns[0] <= tr.extent_ns[1]
    assert tr.flow_src.shape == tr.flow_dst.shape
    if tr.flow_src.size:
        assert 0 <= tr.flow_src.min() and tr.flow_src.max() < n and tr.flow_dst.max() < n
    _check_read_only(tr)


def _check_read_only(tr) -> None:
    """Every array of the trace is read-only: the Trace is immutable in fact."""
    arrays = {
        f.name: getattr(tr, f.name) for f in dataclasses.fields(tr) if isinstance(getattr(tr, f.name), np.ndarray)
    }
    assert len(arrays) == 16
    for name, a in arrays.items():
        assert not a.flags.writeable, name
        if a.size:
            with pytest.raises(ValueError, match="read-only"):
                a[:1] = a[:1]


@pytest.mark.parametrize("name", sample_names())
def test_ascii_samples_are_read_only(name):
    _check_read_only(load(sample_path(name)))


def test_chrome_and_built_traces_are_read_only(tmp_path):
    p = tmp_path / "t.json"
    p.write_text(
        json.dumps(
            {
                "traceEvents": [
                    {
                        "ph": "X",
                        "cat": "cuda_runtime",
                        "name": "cudaLaunchKernel",
                        "pid": 1,
                        "tid": 1,
                        "ts": 0,
                        "dur": 2,
                        "args": {"correlation": 5},
                    },
                    {
                        "ph": "X",
                        "cat": "kernel",
                        "name": "k",
                        "pid": 0,
                        "tid": 7,
                        "ts": 3,
                        "dur": 4,
                        "args": {"device": 0, "stream": 7, "correlation": 5},
                    },
                    {
                        "ph": "X",
                        "cat": "cuda_sync",
                        "name": "Stream Sync",
                        "pid": 0,
                        "tid": 7,
                        "ts": 4,
                        "dur": 9,
                        "args": {"device": 0, "stream": 7},
                    },
                ]
            }
        )
    )
    tr = load(p)
    assert len(tr) == 3 and tr.flow_src.size == 1
    _check_read_only(tr)
    b = TraceBuilder()
    cpu = b.lane("1", "1")
    b.event(cpu, "step", 0, 10, Kind.ANNOTATION)
    _check_read_only(b.build())


def _load_or_error(path: Path):
    """Load; return the Trace or None on TraceFormatError; fail on anything else."""
    try:
        tr = load(path)
    except TraceFormatError as exc:
        text = str(exc)
        assert "\n" not in text and str(path) in text, text
        return None
    except Exception as exc:
        pytest.fail(f"{type(exc).__name__} escaped load(): {exc!r}")
    _check_invariants(tr)
    return tr


# ------------------------------------------------------------------ arbitrary bytes
_FRAGMENTS = [
    b"{",
    b"}",
    b"[",
    b"]",
    b":",
    b",",
    b" ",
    b"\n",
    b'"',
    b"\\",
    b'"traceEvents"',
    b'"ph"',
    b'"X"',
    b'"B"',
    b'"E"',
    b'"M"',
    b'"C"',
    b'"i"',
    b'"s"',
    b'"f"',
    b'"ts"',
    b'"dur"',
    b'"pid"',
    b'"tid"',
    b'"name"',
    b'"args"',
    b'"cat"',
    b'"kernel"',
    b'"id"',
    b"0",
    b"1",
    b"-7",
    b"1.5",
    b"1e999",
    b"1712345678901234.125",
    b"NaN",
    b"Infinity",
    b"-Infinity",
    b"true",
    b"null",
    b"\x00",
    b"\xff\xfe",
    b"\xef\xbb\xbf",
    b'"\\ud800"',
    b'"displayTimeUnit"',
    b'"ns"',
    b'{"ph": "X", "ts": 1, "dur": 2, "pid": 1, "tid": 1, "name": "a"}',
]
json_like = st.lists(st.sampled_from(_FRAGMENTS), max_size=50).map(b"".join)
any_bytes = st.one_of(st.binary(max_size=600), json_like, json_like.map(lambda b: b'{"traceEvents": [' + b))


@settings(max_examples=120, **SETTINGS)
@given(data=any_bytes, compress=st.booleans())
@example(data=b"[", compress=False)  # found by this test: an IndexError past the text's end
@example(data=b" [\n ", compress=True)
def test_arbitrary_bytes_only_trace_format_error(data, compress, tmp_path):
    if compress:
        data = gzip.compress(data, mtime=0)
    p = tmp_path / "blob.bin"
    p.write_bytes(data)
    _load_or_error(p)
    assert p.read_bytes() == data, "input files are never written"


# ------------------------------------------------------------------ truncations
def _small_sources() -> list[tuple[str, str]]:
    out = []
    for rel in (
        "kineto/after_fix_trace.json",
        "kineto/gpu_metrics_input.json",
        "catapult/simple_trace.json",
        "catapult/async_begin_end.json",
        "perfetto/flow_events_json_v2.json",
        "hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
        "hta/inference_rank_1.json.gz",
        "tracelens/torch_compile_triton/trace.json.gz",
    ):
        p = CORPUS / rel
        if p.exists():
            b = p.read_bytes()
            out.append((rel, (gzip.decompress(b) if b[:2] == b"\x1f\x8b" else b).decode("utf-8")))
    for name in ("B07_legacy_autograd_array.json", "B09_display_time_unit_ns.json", "B20_cuda_sync_on_gpu_lane.json"):
        p = BUGS / name
        if p.exists():
            out.append((name, p.read_text(encoding="utf-8")))
    return out


SOURCES = _small_sources()


def _need_sources() -> None:
    """Skip locally, fail under CI (``require``) when the shared data is missing."""
    if not SOURCES:
        require(CORPUS)
        require(BUGS)
        pytest.fail("no truncation sources found in the shared corpus")


@settings(max_examples=60, **SETTINGS)
@given(pick=st.integers(min_value=0), frac=st.floats(min_value=0.0, max_value=1.0))
def test_truncated_real_files_keep_complete_events(pick, frac, tmp_path):
    _need_sources()
    rel, text = SOURCES[pick % len(SOURCES)]
    cut = int(frac * len(text))
    assume(0 < cut < len(text))
    p = tmp_path / "cut.json"
    p.write_text(text[:cut], encoding="utf-8")
    tr = _load_or_error(p)
    info = complete_prefix(text, cut)
    if tr is None:
        assert info is None or info[1] == 0, f"{rel} cut {cut}: {info and info[1]} complete events lost"
        return
    if info is None:
        assert len(tr) == 0
        return
    rep = tmp_path / "repaired.json"
    rep.write_text(info[0], encoding="utf-8")
    ref = load(rep)
    assert _rows(tr) == _rows(ref), f"{rel} cut {cut}"


@settings(max_examples=40, **SETTINGS)
@given(pick=st.integers(min_value=0), frac=st.floats(min_value=0.0, max_value=1.0))
def test_truncated_gzip_streams_only_trace_format_error(pick, frac, tmp_path):
    _need_sources()
    rel, text = SOURCES[pick % len(SOURCES)]
    blob = gzip.compress(text.encode("utf-8"), mtime=0)
    cut = int(frac * len(blob))
    p = tmp_path / "cut.json.gz"
    p.write_bytes(blob[:cut])
    tr = _load_or_error(p)
    if tr is not None:
        full = load(_write(tmp_path, "full.json", text))
        assert len(tr) <= len(full)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


# ------------------------------------------------------------------ random valid traces
CPU_CATS = [
    ("cpu_op", "aten::mm"),
    ("user_annotation", "ProfilerStep#1"),
    ("python_function", "train.py(12): step"),
    ("cuda_runtime", "cudaLaunchKernel"),
    ("cuda_runtime", "cudaStreamSynchronize"),
]
GPU_CATS = ["kernel", "kernel", "kernel", "gpu_memcpy", "gpu_memset", "cuda_sync"]
EPOCH_US = 1_712_345_678_000_000


def _us_text(ns: int) -> str:
    q, r = divmod(ns, 1000)
    return str(q) if r == 0 else f"{q}.{r:03d}"


@st.composite
def random_trace(draw):
    """(JSON text, expected) of a valid Kineto-like trace."""
    epoch = draw(st.booleans())
    base_ns = EPOCH_US * 1000 if epoch else 0
    n_cpu = draw(st.integers(0, 12))
    n_gpu = draw(st.integers(0, 12))
    n_inst = draw(st.integers(0, 3))
    n_ctr = draw(st.integers(0, 3))
    assume(n_cpu + n_gpu + n_inst + n_ctr > 0)
    t = st.integers(0, 2_000_000)  # ns offsets
    d = st.integers(0, 300_000)
    as_text = draw(st.booleans())  # ids as strings

    def ident(v):
        return f'"{v}"' if as_text and draw(st.booleans()) else str(v)

    events, exp_rows, lanes, counters = [], [], set(), set()
    kernels_by_dev: dict = {}
    corr_cpu, corr_gpu = {}, {}
    for j in range(n_cpu):
        pid, tid = draw(st.sampled_from([11, 12])), draw(st.sampled_from([11, 12, 99]))
        cat, name = draw(st.sampled_from(CPU_CATS))
        name = f"{name} #{j}"
        s, du = base_ns + draw(t), draw(d)
        corr = ""
        if cat == "cuda_runtime":
            c = 1000 + draw(st.integers(0, n_gpu + 1))
            if c not in corr_cpu:
                corr_cpu[c] = name
                corr = f', "args": {{"correlation": {ident(c)}}}'
        events.append(
            f'{{"ph": "X", "cat": "{cat}", "name": "{name}", "pid": {ident(pid)}, "tid": {ident(tid)}, '
            f'"ts": {_us_text(s)}, "dur": {_us_text(du)}{corr}}}'
        )
        exp_rows.append((name, s, du))
        lanes.add((str(pid), str(tid)))
    for j in range(n_gpu):
        dev, stream = draw(st.sampled_from([0, 1])), draw(st.sampled_from([7, 13]))
        cat = draw(st.sampled_from(GPU_CATS))
        name = f"{cat}_{j}"
        s, du = base_ns + draw(t), draw(d)
        c = 1000 + j
        args = f'"device": {dev}, "stream": {stream}' + (f', "correlation": {c}' if cat != "cuda_sync" else "")
        if cat != "cuda_sync":
            corr_gpu[c] = name
        if cat == "gpu_memcpy":
            args += ', "bytes": 4096'
        events.append(
            f'{{"ph": "X", "cat": "{cat}", "name": "{name}", "pid": {ident(dev)}, "tid": {ident(stream)}, '
            f'"ts": {_us_text(s)}, "dur": {_us_text(du)}, "args": {{{args}}}}}'
        )
        exp_rows.append((name, s, du))
        lanes.add((str(dev), str(stream)))
        if cat == "kernel":
            kernels_by_dev.setdefault(dev, []).append((s, s + du))
    for j in range(n_inst):
        pid, tid = 11, 11
        s = base_ns + draw(t)
        events.append(
            f'{{"ph": "i", "s": "t", "name": "mark #{j}", "pid": {ident(pid)}, "tid": {ident(tid)}, "ts": {_us_text(s)}}}'
        )
        exp_rows.append((f"mark #{j}", s, 0))
        lanes.add(("11", "11"))
    for j in range(n_ctr):
        s = base_ns + draw(t)
        v = draw(st.integers(0, 100))
        events.append(f'{{"ph": "C", "name": "mem", "pid": 11, "ts": {_us_text(s)}, "args": {{"bytes": {v}}}}}')
        exp_rows.append(("mem", s, 0))
        counters.add(("11", "mem"))
    meta = []
    if draw(st.booleans()):
        meta.append('{"ph": "M", "name": "process_name", "pid": 11, "tid": 0, "args": {"name": "python3"}}')
        meta.append('{"ph": "M", "name": "thread_name", "pid": 11, "tid": 11, "args": {"name": "main [1]"}}')
    order = draw(st.permutations(list(range(len(events)))))
    body = meta + [events[i] for i in order]
    sep = draw(st.sampled_from([", ", ",\n", ",\n  "]))
    form = draw(st.sampled_from(["object", "array", "array-open"]))
    dtu = draw(st.sampled_from(["", ', "displayTimeUnit": "ns"', ', "displayTimeUnit": "ms"']))
    if form == "object":
        text = '{"schemaVersion": 1, "traceEvents": [\n' + sep.join(body) + "\n]" + dtu + "}\n"
    elif form == "array":
        text = "[" + sep.join(body) + "]"
    else:
        text = "[\n" + "".join(e + ",\n" for e in body)  # legal: no closing bracket
    links = {(corr_cpu[c], corr_gpu[c]) for c in corr_cpu if c in corr_gpu}
    starts = [s for _, s, _ in exp_rows]
    ends = [s + du for _, s, du in exp_rows]
    expected = dict(
        rows=sorted(exp_rows),
        lanes=lanes,
        counters=counters,
        links=links,
        extent=(min(starts), max(ends)),
        kernels=kernels_by_dev,
    )
    return text, expected


@settings(max_examples=80, **SETTINGS)
@given(case=random_trace(), gz=st.booleans())
def test_random_valid_traces_give_the_right_numbers(case, gz, tmp_path):
    text, exp = case
    p = tmp_path / ("t.json.gz" if gz else "t.json")
    p.write_bytes(gzip.compress(text.encode(), mtime=0) if gz else text.encode())
    tr = _load_or_error(p)
    assert tr is not None, "a valid trace must load"
    got = sorted((tr.name(i), int(tr.start_ns[i]), int(tr.dur_ns[i])) for i in range(len(tr)))
    # same-stream overlaps may be clipped for drawing: compare starts always, durs off-GPU
    assert [(n, s) for n, s, _ in got] == [(n, s) for n, s, _ in exp["rows"]]
    gpu_names = {tr.name(i) for i in range(len(tr)) if tr.lanes[int(tr.lane[i])].is_gpu}
    assert [r for r in got if r[0] not in gpu_names] == [r for r in exp["rows"] if r[0] not in gpu_names]
    assert tuple(tr.extent_ns) == exp["extent"]
    thread_lanes = {(ln.pid, ln.tid) for ln in tr.lanes if not ln.tid.startswith("counter ")}
    assert thread_lanes == exp["lanes"]
    assert len(tr.lanes) == len(exp["lanes"]) + len(exp["counters"])
    links = {(tr.name(s), tr.name(d)) for s, d in zip(tr.flow_src.tolist(), tr.flow_dst.tolist())}
    assert links == exp["links"]
    n_k = sum(len(v) for v in exp["kernels"].values())
    assert int((tr.kind == int(Kind.KERNEL)).sum()) == n_k
    assert int((tr.kind == int(Kind.SYNC_MARKER)).sum()) == sum(
        1 for n, _, _ in exp["rows"] if n.startswith("cuda_sync")
    )
    for dev, iv in exp["kernels"].items():
        want = union_ns(iv)
        lanes = [ln.index for ln in tr.lanes if ln.is_gpu and ln.device == dev]
        m = (tr.kind == int(Kind.KERNEL)) & np.isin(tr.lane, lanes)
        mine = union_ns(list(zip(tr.start_ns[m].tolist(), (tr.start_ns[m] + tr.dur_ns[m]).tolist())))
        assert mine == want, f"device {dev}"
        try:
            from gapscope.analysis.busy import device_union
        except ImportError:
            continue
        u0, u1 = device_union(tr, dev)
        assert int((u1 - u0).sum()) == want, "vectorised union == slow reference"


@settings(max_examples=150, **SETTINGS)
@given(st.lists(st.tuples(st.integers(-(10**15), 10**15), st.integers(0, 10**9)), max_size=60))
def test_vectorised_union_equals_slow_reference(iv):
    busy = pytest.importorskip("gapscope.analysis.busy")
    s = np.array([a for a, _ in iv], dtype=np.int64)
    e = np.array([a + b for a, b in iv], dtype=np.int64)
    u0, u1 = busy.union_intervals(s, e)
    assert int((u1 - u0).sum()) == union_ns([(a, a + b) for a, b in iv if b > 0])
    assert (u0[1:] > u1[:-1]).all(), "disjoint and sorted"


@settings(max_examples=6, **SETTINGS)
@given(n=st.integers(24, 3000), seed=st.integers(0, 2**16), gz=st.booleans())
def test_generated_kineto_traces_match_generator_stats(n, seed, gz, tmp_path):
    """bench/gen_kineto.py traces load with the counts, busy and extent it wrote."""
    from bench.gen_kineto import generate

    p = tmp_path / ("g.json.gz" if gz else "g.json")
    stats = generate(p, n, seed=seed, gzip=gz)
    assert stats.n_events == n
    tr = _load_or_error(p)
    assert tr is not None
    assert int((tr.kind == int(Kind.KERNEL)).sum()) == stats.n_kernels
    assert int((tr.kind == int(Kind.MEMCPY)).sum()) == stats.n_memcpy
    assert int((tr.kind == int(Kind.LAUNCH)).sum()) == stats.n_launches
    assert len(tr) == stats.by_ph.get("X", 0) + stats.by_ph.get("i", 0)
    assert len(tr.lanes) == stats.lanes
    assert tuple(tr.extent_ns) == stats.extent_ns
    assert tr.source.base_time_ns == stats.base_time_ns
    k = tr.kind == int(Kind.KERNEL)
    assert union_ns(list(zip(tr.start_ns[k].tolist(), (tr.start_ns[k] + tr.dur_ns[k]).tolist()))) == stats.gpu_busy_ns
    assert not tr.warnings, [str(w) for w in tr.warnings]
