"""Chrome Trace Event Format phases through ``gapscope.parsers.load`` (small hand-written inputs).

Expected values are computed by hand from the inputs (ts/dur are µs; ×1000 = ns).
"""

from __future__ import annotations

import gzip
import json
import math

import pytest

from gapscope import parsers
from gapscope.parsers import Kind, TraceFormatError
from gapscope.parsers.model import CopyKind


def _write(tmp_path, obj, name="t.json"):
    p = tmp_path / name
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return p


def _events(trace, lane_index):
    sl = trace.lane_slice(lane_index)
    return [
        (trace.name(i), int(trace.start_ns[i]), int(trace.dur_ns[i]), Kind(int(trace.kind[i])), int(trace.depth[i]))
        for i in range(sl.start, sl.stop)
    ]


KINETO = {
    "schemaVersion": 1,
    "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}],
    "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8},
    "traceEvents": [
        {"name": "process_name", "ph": "M", "pid": 100, "tid": 0, "args": {"name": "python3"}},
        {"name": "thread_name", "ph": "M", "pid": 100, "tid": 100, "args": {"name": "main"}},
        {"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::mm",
            "pid": 100,
            "tid": 100,
            "ts": 10,
            "dur": 20,
            "args": {"External id": 5},
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 100,
            "tid": 100,
            "ts": 12.5,
            "dur": 4,
            "args": {"External id": 5, "correlation": 77},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "gemm",
            "pid": 0,
            "tid": 13,
            "ts": 20,
            "dur": 30.001,
            "args": {"device": 0, "stream": 13, "correlation": 77, "External id": 5},
        },
        {
            "ph": "X",
            "cat": "gpu_memcpy",
            "name": "Memcpy DtoH (Device -> Pageable)",
            "pid": 0,
            "tid": 7,
            "ts": 60,
            "dur": 2,
            "args": {"device": 0, "stream": 7, "correlation": 78, "bytes": 4096},
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaMemcpyAsync",
            "pid": 100,
            "tid": 100,
            "ts": 58,
            "dur": 5,
            "args": {"correlation": 78},
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaStreamSynchronize",
            "pid": 100,
            "tid": 100,
            "ts": 64,
            "dur": 3,
            "args": {"correlation": 79},
        },
        {
            "ph": "X",
            "cat": "cuda_sync",
            "name": "Stream Sync",
            "pid": 0,
            "tid": 7,
            "ts": 64,
            "dur": 3,
            "args": {"device": 0, "stream": 7, "correlation": 79},
        },
        {"ph": "X", "cat": "python_function", "name": "forward", "pid": 100, "tid": 100, "ts": 9, "dur": 60},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 100, "tid": 100, "ts": 8, "dur": 62},
        {
            "ph": "X",
            "cat": "gpu_user_annotation",
            "name": "ProfilerStep#3",
            "pid": 0,
            "tid": 13,
            "ts": 20,
            "dur": 30,
            "args": {"device": 0, "stream": 13},
        },
        {"ph": "s", "id": 77, "pid": 100, "tid": 100, "ts": 12.5, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": 77, "pid": 0, "tid": 13, "ts": 20, "cat": "ac2g", "name": "ac2g", "bp": "e"},
        {"ph": "i", "cat": "cpu_instant_event", "name": "mark", "pid": 100, "tid": 100, "ts": 40, "s": "t"},
    ],
    "traceName": "x.json",
    "displayTimeUnit": "ms",
    "baseTimeNanoseconds": 1700000000000000000,
}


def test_kineto_object_form_kinds_lanes_flows(tmp_path):
    t = parsers.load(_write(tmp_path, KINETO))
    assert t.source.format == "kineto"
    assert t.source.schema_version == 1
    assert t.source.base_time_ns == 1700000000000000000
    assert t.source.display_time_unit == "ms"
    assert t.source.rank == 3 and t.source.world_size == 8
    assert t.source.device_properties[0]["name"] == "NVIDIA H100"
    assert t.source.trace_name == "x.json"
    assert t.warnings == ()
    # CPU lane first, then GPU lanes ordered by (device, stream): 7 before 13
    assert [(ln.process_name, ln.thread_name, ln.is_gpu, ln.device, ln.stream) for ln in t.lanes] == [
        ("python3", "main", False, -1, -1),
        ("GPU 0", "stream 7", True, 0, 7),
        ("GPU 0", "stream 13", True, 0, 13),
    ]
    cpu = _events(t, 0)
    assert cpu == [
        ("ProfilerStep#3", 8000, 62000, Kind.ANNOTATION, 0),
        ("forward", 9000, 60000, Kind.PYTHON, 1),
        ("aten::mm", 10000, 20000, Kind.CPU_OP, 2),
        ("cudaLaunchKernel", 12500, 4000, Kind.LAUNCH, 3),
        ("mark", 40000, 0, Kind.INSTANT, 2),
        ("cudaMemcpyAsync", 58000, 5000, Kind.MEMCPY_CALL, 2),
        ("cudaStreamSynchronize", 64000, 3000, Kind.SYNC_CALL, 2),
    ]
    assert _events(t, 1) == [
        ("Memcpy DtoH (Device -> Pageable)", 60000, 2000, Kind.MEMCPY, 0),
        ("Stream Sync", 64000, 3000, Kind.SYNC_MARKER, 0),
    ]
    assert _events(t, 2) == [
        ("gemm", 20000, 30001, Kind.KERNEL, 0),
        ("ProfilerStep#3", 20000, 30000, Kind.GPU_ANNOTATION, 1),
    ]
    # flows by correlation: launch → gemm, memcpy call → memcpy (not the sync marker)
    pairs = sorted((t.name(a), t.name(b)) for a, b in zip(t.flow_src, t.flow_dst))
    assert pairs == [("cudaLaunchKernel", "gemm"), ("cudaMemcpyAsync", "Memcpy DtoH (Device -> Pageable)")]
    i_copy = t.lane_slice(1).start
    assert (int(t.bytes[i_copy]), int(t.copy_kind[i_copy]), bool(t.pageable[i_copy])) == (
        4096,
        int(parsers.CopyKind.D2H),
        True,
    )
    i_gemm = t.lane_slice(2).start
    assert int(t.correlation[i_gemm]) == 77 and int(t.external_id[i_gemm]) == 5
    assert t.args_of(i_gemm) == {"device": 0, "stream": 13, "correlation": 77, "External id": 5}
    assert t.extent_ns == (8000, 70000)
    assert t.source.ignored_counts == {}


def test_2020_bare_array_capitalised_cats_and_string_tids(tmp_path):
    ev = [
        {
            "ph": "X",
            "cat": "Operator",
            "name": "aten::to",
            "pid": 67844,
            "tid": "4093687616",
            "ts": 1606910596297023,
            "dur": 13,
            "args": {"External id": 2},
        },
        {
            "ph": "X",
            "cat": "Runtime",
            "name": "cudaMemcpyAsync",
            "pid": 67844,
            "tid": "4093687616",
            "ts": 1606910596297025,
            "dur": 5,
            "args": {"correlation": 9, "external id": 2},
        },
        {
            "ph": "X",
            "cat": "Memcpy",
            "name": "Memcpy HtoD (Pageable -> Device)",
            "pid": 0,
            "tid": "stream 7",
            "ts": 1606910596297030,
            "dur": 3,
            "args": {"device": 0, "stream": 7, "correlation": 9, "bytes": 1024},
        },
        {
            "ph": "X",
            "cat": "Memset",
            "name": "Memset (Device)",
            "pid": 0,
            "tid": "stream 9",
            "ts": 1606910596297040,
            "dur": 1,
            "args": {"device": 0, "stream": 9, "correlation": 10, "bytes": 64},
        },
        {
            "ph": "X",
            "cat": "Kernel",
            "name": "k",
            "pid": 0,
            "tid": "stream 7",
            "ts": 1606910596297050,
            "dur": 7,
            "args": {"device": 0, "stream": 7, "correlation": 11},
        },
        {"ph": "s", "id": 9, "pid": 67844, "tid": 4093687616, "ts": 1606910596297025, "cat": "async", "name": "launch"},
    ]
    t = parsers.load(_write(tmp_path, ev))
    assert t.source.format == "kineto"
    assert [(ln.tid, ln.is_gpu, ln.stream) for ln in t.lanes] == [
        ("4093687616", False, -1),
        ("stream 7", True, 7),
        ("stream 9", True, 9),
    ]
    assert [e[3] for e in _events(t, 0)] == [Kind.CPU_OP, Kind.MEMCPY_CALL]
    assert [e[3] for e in _events(t, 1)] == [Kind.MEMCPY, Kind.KERNEL]
    assert int(t.start_ns[t.lane_slice(1).start]) == 1606910596297030000
    i = t.lane_slice(1).start
    assert (int(t.bytes[i]), int(t.copy_kind[i]), bool(t.pageable[i])) == (1024, int(parsers.CopyKind.H2D), True)
    assert int(t.external_id[t.lane_slice(0).start + 1]) == 2  # old lowercase "external id"
    assert int(t.bytes[t.lane_slice(2).start]) == 64
    assert [(t.name(a), t.name(b)) for a, b in zip(t.flow_src, t.flow_dst)] == [
        ("cudaMemcpyAsync", "Memcpy HtoD (Pageable -> Device)")
    ]


def test_ids_as_numbers_or_strings_are_one_lane(tmp_path):
    ev = [
        {"ph": "M", "name": "thread_name", "pid": "7", "tid": 3, "args": {"name": "worker"}},
        {"ph": "X", "name": "a", "pid": 7, "tid": 3, "ts": 1, "dur": 1},
        {"ph": "X", "name": "b", "pid": "7", "tid": "3", "ts": 3, "dur": 1},
        {"ph": "X", "name": "c", "pid": 7.0, "tid": 3, "ts": 5, "dur": 1},
    ]
    t = parsers.load(_write(tmp_path, ev))
    assert len(t.lanes) == 1
    assert (t.lanes[0].pid, t.lanes[0].tid, t.lanes[0].thread_name) == ("7", "3", "worker")
    assert [e[0] for e in _events(t, 0)] == ["a", "b", "c"]


def test_runtime_call_kinds_by_name(tmp_path):
    names = {
        "cudaLaunchKernel": Kind.LAUNCH,
        "cudaLaunchKernelExC": Kind.LAUNCH,
        "cuLaunchKernelEx": Kind.LAUNCH,
        "hipLaunchKernel": Kind.LAUNCH,
        "hipExtLaunchKernel": Kind.LAUNCH,
        "hipModuleLaunchKernel": Kind.LAUNCH,
        "cudaGraphLaunch": Kind.LAUNCH,
        "cudaStreamSynchronize": Kind.SYNC_CALL,
        "cudaDeviceSynchronize": Kind.SYNC_CALL,
        "cudaEventSynchronize": Kind.SYNC_CALL,
        "cudaStreamWaitEvent": Kind.SYNC_CALL,
        "cudaEventQuery": Kind.SYNC_CALL,
        "hipDeviceSynchronize": Kind.SYNC_CALL,
        "cudaMemcpyAsync": Kind.MEMCPY_CALL,
        "hipMemcpyWithStream": Kind.MEMCPY_CALL,
        "cudaEventRecord": Kind.RUNTIME,
        "cudaMalloc": Kind.RUNTIME,
        "cudaMemsetAsync": Kind.RUNTIME,
    }
    ev = [
        {
            "ph": "X",
            "cat": "cuda_driver" if n.startswith("cu") and not n.startswith("cuda") else "cuda_runtime",
            "name": n,
            "pid": 1,
            "tid": 1,
            "ts": 10 * i,
            "dur": 1,
        }
        for i, n in enumerate(names)
    ]
    ev.append(
        {
            "ph": "X",
            "cat": "mtia_runtime",
            "name": "runFunction - job_prep_and_submit_for_execution",
            "pid": 1,
            "tid": 1,
            "ts": 1000,
            "dur": 1,
        }
    )
    t = parsers.load(_write(tmp_path, ev))
    got = {t.name(i): Kind(int(t.kind[i])) for i in range(len(t))}
    assert got == {**names, "runFunction - job_prep_and_submit_for_execution": Kind.LAUNCH}


def test_begin_end_nested_unmatched_misnamed_unclosed(tmp_path):
    ev = [
        {"ph": "B", "name": "outer", "pid": 1, "tid": 1, "ts": 0},
        {"ph": "B", "name": "inner", "pid": 1, "tid": 1, "ts": 2},
        {"ph": "E", "name": "inner", "pid": 1, "tid": 1, "ts": 5},
        {"ph": "B", "name": "second", "pid": 1, "tid": 1, "ts": 6},
        {"ph": "E", "name": "wrong name", "pid": 1, "tid": 1, "ts": 8},
        {"ph": "E", "pid": 1, "tid": 1, "ts": 10},
        {"ph": "E", "name": "stray", "pid": 1, "tid": 1, "ts": 11},
        {"ph": "B", "name": "never closed", "pid": 1, "tid": 2, "ts": 12},
        {"ph": "X", "name": "last", "pid": 1, "tid": 2, "ts": 14, "dur": 6},
    ]
    t = parsers.load(_write(tmp_path, ev))
    assert _events(t, 0) == [
        ("outer", 0, 10000, Kind.OTHER, 0),
        ("inner", 2000, 3000, Kind.OTHER, 1),
        ("second", 6000, 2000, Kind.OTHER, 1),
    ]
    # unclosed B runs to the end of the trace (20 µs)
    assert _events(t, 1) == [("never closed", 12000, 8000, Kind.OTHER, 0), ("last", 14000, 6000, Kind.OTHER, 1)]
    msgs = [(w.line, w.message) for w in t.warnings]
    assert (
        1,
        "1 'E' event(s) name a different slice than the 'B' they close; paired with the innermost open slice",
    ) in msgs
    assert (1, "1 'E' event(s) without a matching 'B' skipped") in msgs
    assert (1, "1 'B' slice(s) never closed; drawn to the end of the trace") in msgs
    assert len(t.warnings) == 3


def test_instants_counters_and_ignored_phases(tmp_path):
    ev = [
        {"ph": "i", "name": "tick", "pid": 1, "tid": 1, "ts": 5, "s": "t"},
        {"ph": "I", "name": "old tick", "pid": 1, "tid": 1, "ts": 6},
        {"ph": "C", "name": "mem", "pid": 1, "ts": 1, "args": {"used": 10, "free": 90}},
        {"ph": "C", "name": "util", "pid": 1, "ts": 2, "args": {"value": 0.5}},
        {"ph": "P", "name": "sample", "pid": 1, "tid": 1, "ts": 3},
        {"ph": "O", "name": "snap", "pid": 1, "ts": 3, "id": "0x1"},
        {"ph": "O", "name": "snap", "pid": 1, "ts": 4, "id": "0x1"},
    ]
    t = parsers.load(_write(tmp_path, ev))
    assert t.source.ignored_counts == {"ph P": 1, "ph O": 2}
    rows = sorted((t.name(i), int(t.start_ns[i]), Kind(int(t.kind[i])), float(t.value[i])) for i in range(len(t)))
    assert rows[0][:3] == ("mem free", 1000, Kind.COUNTER) and rows[0][3] == 90.0
    assert rows[1][:3] == ("mem used", 1000, Kind.COUNTER) and rows[1][3] == 10.0
    assert rows[2][:3] == ("old tick", 6000, Kind.INSTANT) and math.isnan(rows[2][3])
    assert rows[3][:3] == ("tick", 5000, Kind.INSTANT)
    assert rows[4] == ("util", 2000, Kind.COUNTER, 0.5)


def test_instant_times_in_every_form(tmp_path):
    """Instants are timed in bulk; each form of ``ts`` keeps its own reading: an
    integer, a float, a numeric string, an epoch float too wide for a float64 (read
    again from the text), and the unusable ones skipped, one warning each, with the
    line of the event."""
    text = (
        '{"traceEvents": [\n'
        '{"ph": "X", "name": "x", "pid": 1, "tid": 1, "ts": 0, "dur": 1},\n'
        '{"ph": "i", "name": "int", "pid": 1, "tid": 1, "ts": 7},\n'
        '{"ph": "i", "name": "float", "pid": 1, "tid": 1, "ts": 2.25},\n'
        '{"ph": "i", "name": "str", "pid": 1, "tid": 1, "ts": "3.0625"},\n'
        '{"ph": "i", "name": "none", "pid": 1, "tid": 1, "ts": null},\n'
        '{"ph": "i", "name": "nan", "pid": 1, "tid": 1, "ts": NaN},\n'
        '{"ph": "I", "name": "word", "pid": 1, "tid": 1, "ts": "soon"}\n'
        "]}"
    )
    t = parsers.load(_write(tmp_path, text))
    got = {t.name(i): int(t.start_ns[i]) for i in range(len(t)) if Kind(int(t.kind[i])) == Kind.INSTANT}
    assert got == {"int": 7000, "float": 2250, "str": 3062}  # 3062.5 ns: half to even
    skipped = sorted((w.line, w.message) for w in t.warnings)
    assert skipped == [
        (6, "event 'none' has missing ts; skipped"),
        (7, "event 'nan' has non-finite ts; skipped"),
        (8, "event 'word' has invalid ts; skipped"),
    ]
    epoch = (
        '[{"ph": "X", "name": "x", "pid": 1, "tid": 1, "ts": 1669783687389290, "dur": 1},'
        '{"ph": "i", "name": "int", "pid": 1, "tid": 1, "ts": 1669783687389291},'
        '{"ph": "i", "name": "wide", "pid": 1, "tid": 1, "ts": 1669783687389292.123}]'
    )
    t = parsers.load(_write(tmp_path, epoch, "epoch.json"))
    got = {t.name(i): int(t.start_ns[i]) for i in range(len(t)) if Kind(int(t.kind[i])) == Kind.INSTANT}
    assert got == {"int": 1669783687389291000, "wide": 1669783687389292123}
    assert t.warnings == ()


def test_flow_v1_binding_and_v2_bind_id(tmp_path):
    ev = [
        {"ph": "X", "name": "producer", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
        {"ph": "X", "name": "child", "pid": 1, "tid": 1, "ts": 2, "dur": 3},
        {"ph": "s", "name": "f", "cat": "ipc", "id": 1, "pid": 1, "tid": 1, "ts": 3},
        {"ph": "t", "name": "f", "cat": "ipc", "id": "1", "pid": 2, "tid": 2, "ts": 21},
        {"ph": "f", "name": "f", "cat": "ipc", "id": 1, "pid": 3, "tid": 3, "ts": 30},
        {"ph": "X", "name": "middle", "pid": 2, "tid": 2, "ts": 20, "dur": 5},
        {"ph": "X", "name": "consumer", "pid": 3, "tid": 3, "ts": 31, "dur": 5},
        {"ph": "X", "name": "enclosing", "pid": 3, "tid": 3, "ts": 29, "dur": 1},
        {"ph": "X", "name": "v2 out", "pid": 4, "tid": 4, "ts": 40, "dur": 1, "bind_id": "0xa", "flow_out": True},
        {"ph": "X", "name": "v2 in", "pid": 4, "tid": 5, "ts": 45, "dur": 1, "bind_id": "0xa", "flow_in": True},
    ]
    t = parsers.load(_write(tmp_path, ev))
    pairs = sorted((t.name(a), t.name(b)) for a, b in zip(t.flow_src, t.flow_dst))
    # s binds to the deepest enclosing slice (child), f without bp="e" to the next slice
    assert pairs == [("child", "middle"), ("middle", "consumer"), ("v2 out", "v2 in")]


def test_flow_f_with_bp_e_binds_to_enclosing_slice(tmp_path):
    ev = [
        {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
        {"ph": "s", "cat": "c", "id": 5, "pid": 1, "tid": 1, "ts": 1},
        {"ph": "f", "cat": "c", "id": 5, "pid": 1, "tid": 2, "ts": 21, "bp": "e"},
        {"ph": "X", "name": "b", "pid": 1, "tid": 2, "ts": 20, "dur": 5},
        {"ph": "X", "name": "c", "pid": 1, "tid": 2, "ts": 22, "dur": 5},
    ]
    t = parsers.load(_write(tmp_path, ev))
    assert [(t.name(a), t.name(b)) for a, b in zip(t.flow_src, t.flow_dst)] == [("a", "b")]


def test_async_nestable_and_legacy(tmp_path):
    ev = [
        {"ph": "b", "cat": "net", "name": "request", "id": 1, "pid": 1, "ts": 0},
        {"ph": "b", "cat": "net", "name": "dns", "id": 1, "pid": 1, "ts": 1},
        {"ph": "n", "cat": "net", "name": "retry", "id": 1, "pid": 1, "ts": 2},
        {"ph": "e", "cat": "net", "name": "dns", "id": 1, "pid": 1, "ts": 3},
        {"ph": "e", "cat": "net", "name": "request", "id": 1, "pid": 1, "ts": 9},
        {"ph": "S", "cat": "old", "name": "load", "id": "0x2", "pid": 1, "ts": 4},
        {"ph": "T", "cat": "old", "name": "load", "id": "0x2", "pid": 1, "ts": 5, "args": {"step": "s1"}},
        {"ph": "F", "cat": "old", "name": "load", "id": "0x2", "pid": 1, "ts": 8},
    ]
    t = parsers.load(_write(tmp_path, ev))
    assert [(ln.tid) for ln in t.lanes] == ["async net", "async old"]
    assert _events(t, 0) == [
        ("request", 0, 9000, Kind.OTHER, 0),
        ("dns", 1000, 2000, Kind.OTHER, 1),
        ("retry", 2000, 0, Kind.INSTANT, 2),
    ]
    assert _events(t, 1) == [("load", 4000, 4000, Kind.OTHER, 0), ("load", 5000, 0, Kind.INSTANT, 1)]
    assert t.warnings == ()


def test_legacy_autograd_export(tmp_path):
    ev = [
        {"name": "aten::mul", "ph": "X", "ts": 10, "dur": 30, "tid": 1, "pid": "CPU functions", "args": {}},
        {"name": "aten::mul", "ph": "s", "ts": 10, "tid": 1, "pid": "CPU functions", "id": 1, "cat": "cpu_to_cuda"},
        {"name": "k", "ph": "f", "ts": 50, "tid": 0, "pid": "CUDA functions", "id": 1, "cat": "cpu_to_cuda"},
        {"name": "k", "ph": "X", "ts": 50, "dur": 40, "tid": 0, "pid": "CUDA functions", "args": {}},
    ]
    t = parsers.load(_write(tmp_path, ev))
    assert t.source.format == "legacy-autograd"
    assert [(ln.process_name, ln.tid, ln.is_gpu, ln.device) for ln in t.lanes] == [
        ("CPU functions", "1", False, -1),
        ("CUDA functions", "0", True, 0),
    ]
    assert _events(t, 0) == [("aten::mul", 10000, 30000, Kind.CPU_OP, 0)]
    assert _events(t, 1) == [("k", 50000, 40000, Kind.KERNEL, 0)]
    assert [(t.name(a), t.name(b)) for a, b in zip(t.flow_src, t.flow_dst)] == [("aten::mul", "k")]


def test_display_time_unit_never_rescales(tmp_path):
    for unit, warned in (("ns", False), ("ms", False), ("s", True)):
        obj = {
            "traceEvents": [{"ph": "X", "name": "k", "pid": 1, "tid": 1, "ts": 1000, "dur": 250}],
            "displayTimeUnit": unit,
        }
        t = parsers.load(_write(tmp_path, obj, f"{unit}.json"))
        assert (int(t.start_ns[0]), int(t.dur_ns[0])) == (1_000_000, 250_000)
        assert t.source.display_time_unit == unit
        assert (len(t.warnings) == 1) == warned


def test_multi_member_gzip(tmp_path):
    text = json.dumps(
        {"traceEvents": [{"ph": "X", "name": f"e{i}", "pid": 1, "tid": 1, "ts": i * 10, "dur": 5} for i in range(40)]}
    ).encode()
    cut1, cut2 = len(text) // 3, 2 * len(text) // 3
    p = tmp_path / "m.json.gz"
    p.write_bytes(gzip.compress(text[:cut1]) + gzip.compress(text[cut1:cut2]) + gzip.compress(text[cut2:]))
    t = parsers.load(p)
    assert len(t) == 40 and t.warnings == ()
    assert int(t.start_ns[-1]) == 390_000


def test_not_a_trace(tmp_path):
    p = _write(tmp_path, '{\n  "kernel_dispatch": [1, 2]\n}')
    with pytest.raises(TraceFormatError) as ei:
        parsers.load(p)
    assert ei.value.line == 1 and ei.value.column == 1 and "traceEvents" in str(ei.value) and ei.value.hint
    p = _write(tmp_path, "[1, 2, 3]", "nums.json")
    with pytest.raises(TraceFormatError):
        parsers.load(p)
    p = _write(tmp_path, '{"traceEvents": [', "cut.json")
    with pytest.raises(TraceFormatError):
        parsers.load(p)


def test_empty_trace_loads_empty(tmp_path):
    t = parsers.load(_write(tmp_path, {"traceEvents": []}))
    assert len(t) == 0 and t.lanes == () and t.extent_ns == (0, 0)


def _x(cat: str, name: str, pid: int, tid: int, ts: float, dur: float, **args) -> dict:
    """One ``X`` event of the hand-made traces below."""
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _mtia_trace() -> list:
    """An MTIA-shaped trace (as in hta/mtia_inference_rank_0): compute ops, DMA
    transfers and stream event records, all under ``mtia_ccp_events``."""

    def dev(name, ts, dur, **args):
        return _x("mtia_ccp_events", name, 9, 4, ts, dur, **args)

    def host(name, ts, dur, corr):
        return _x("mtia_runtime", name, 1, 1, ts, dur, correlation=corr)

    return [
        host("runFunction - job_prep_and_submit_for_execution", 0, 5, 1),
        dev("fc-dtype_Float", 10, 20, correlation=1, stream=4),
        host("enqueueCommand memcpyHtoDAsync", 25, 2, 2),
        dev("dma_request", 35, 30, direction="HOST_TO_DEVICE", size=4096, stream=4, correlation=2),
        dev("dma_request", 70, 10, direction="DEVICE_TO_HOST", size=16, stream=4),
        dev("event_record", 81, 0.2, stream=4, seq_num=1),
        dev("event_wait", 82, 5, stream=4, wait_on_stream=5),
        host("runFunction - job_prep_and_submit_for_execution", 80, 5, 3),
        dev("add-dtype_Float", 90, 20, correlation=3, stream=4),
    ]


@pytest.mark.parametrize("xscan", ["1", "0"])
def test_mtia_device_ops_by_name(tmp_path, monkeypatch, xscan):
    """MTIA writes its DMA transfers and stream event records under the category of its
    kernels: ``dma_request`` is a copy (direction from ``args.direction``, bytes from
    ``args.size``), ``event_record``/``event_wait`` are sync records, the rest kernels;
    ``enqueueCommand memcpy*`` is a copy call. The C scanner and msgspec agree."""
    monkeypatch.setenv("GAPSCOPE_XSCAN", xscan)
    t = parsers.load(_write(tmp_path, {"traceEvents": _mtia_trace()}))
    got = [(t.name(i), Kind(int(t.kind[i]))) for i in range(len(t))]
    assert sorted(got, key=lambda x: x[0]) == sorted(
        [
            ("runFunction - job_prep_and_submit_for_execution", Kind.LAUNCH),
            ("runFunction - job_prep_and_submit_for_execution", Kind.LAUNCH),
            ("enqueueCommand memcpyHtoDAsync", Kind.MEMCPY_CALL),
            ("fc-dtype_Float", Kind.KERNEL),
            ("add-dtype_Float", Kind.KERNEL),
            ("dma_request", Kind.MEMCPY),
            ("dma_request", Kind.MEMCPY),
            ("event_record", Kind.SYNC_MARKER),
            ("event_wait", Kind.SYNC_MARKER),
        ],
        key=lambda x: x[0],
    )
    dma = [i for i in range(len(t)) if t.name(i) == "dma_request"]
    assert sorted((int(t.bytes[i]), CopyKind(int(t.copy_kind[i]))) for i in dma) == [
        (16, CopyKind.D2H),
        (4096, CopyKind.H2D),
    ]


def test_an_mtia_gap_held_by_dma_is_a_gap_with_its_copies(tmp_path):
    """Between the two compute ops the device only moved data and waited on an event:
    one idle gap of 60 µs (30 to 90), held by the 30 µs host-to-device DMA (a copy
    gap), the 16-byte read back a sync signature (they counted as kernels: the gap was
    split in three, none of them said copy)."""
    from gapscope.analysis import diagnose
    from gapscope.analysis.card import card_for_gap
    from gapscope.analysis.types import Cause

    t = parsers.load(_write(tmp_path, {"traceEvents": _mtia_trace()}))
    d = diagnose(t)
    assert [(int(s), int(e)) for s, e in zip(d.gaps.start_ns, d.gaps.end_ns)] == [(30_000, 90_000)]
    card = card_for_gap(d, 0)
    assert card.cause == Cause.COPY
    # no copy call of the thread: the GPU's copying, said first as the largest part
    assert card.why.startswith(
        "For 60.0 µs the GPU had no kernel to run: the GPU spent 30.0 µs copying (running the copy `dma_request` "
        "(host-to-device), 4.0 KiB); thread `1` spent 10.0 µs on host work"
    ), card.why
    assert "10.0 µs waiting for the device" in card.why


@pytest.mark.parametrize("xscan", ["1", "0"])
def test_an_odd_direction_arg_loses_nothing_else(tmp_path, monkeypatch, xscan):
    """``args.direction`` (MTIA's copy direction) may hold anything in other traces: a
    bool, a list or an object must not fail the decode of the event's other args (it
    dropped the kernel's correlation, and its launch link, with no warning), and a
    digit that is not ASCII (``"²"``) is no direction (it was an internal error)."""
    monkeypatch.setenv("GAPSCOPE_XSCAN", xscan)

    def dma(direction, ts):
        return _x("mtia_ccp_events", "dma_request", 9, 4, ts, 1, direction=direction, size=8, correlation=5)

    ev = [
        _x("cuda_runtime", "cudaLaunchKernel", 1, 1, 0, 5, correlation=1),
        _x("kernel", "k1", 0, 7, 10, 20, correlation=1, stream=7, device=0, direction=False),
        dma(True, 40),
        dma(["HOST_TO_DEVICE"], 50),
        dma("²", 60),
        dma("HOST_TO_HOST", 70),
    ]
    t = parsers.load(_write(tmp_path, {"traceEvents": ev}))
    k1 = next(i for i in range(len(t)) if t.name(i) == "k1")
    assert int(t.correlation[k1]) == 1 and len(t.flow_src) == 1
    dma_rows = sorted((i for i in range(len(t)) if t.name(i) == "dma_request"), key=lambda i: int(t.start_ns[i]))
    assert [int(t.bytes[i]) for i in dma_rows] == [8, 8, 8, 8]
    assert [int(t.correlation[i]) for i in dma_rows] == [5, 5, 5, 5]
    assert [CopyKind(int(t.copy_kind[i])) for i in dma_rows] == [CopyKind.UNKNOWN] * 3 + [CopyKind.H2H]
