"""Kineto ``ac2g`` (and older ``async_cpu_to_gpu``/``async_gpu``) flow events as the
second source of launch call → GPU op links, after ``args.correlation``.

Hand-written traces; expected pairs worked out by hand from the Trace Event Format
flow v1 binding rules (``s`` → enclosing slice of its thread, ``f`` with ``bp: "e"`` →
enclosing slice, other ``f`` → next slice starting at or after ``ts``).
"""

from __future__ import annotations

import json

import pytest

from gapscope import parsers
from gapscope.parsers.chrome.flows import kineto_flow_links  # noqa: F401  (public entry point)

CPU, GPU = 100, 0


def _write(tmp_path, events, name="t.json"):
    p = tmp_path / name
    p.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return p


def _x(cat, name, pid, tid, ts, dur, **args):
    e = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    if args:
        e["args"] = args
    return e


def _flow(ph, fid, pid, tid, ts, cat="ac2g", bp=None):
    e = {"ph": ph, "id": fid, "pid": pid, "tid": tid, "ts": ts, "cat": cat, "name": cat}
    if bp is not None:
        e["bp"] = bp
    return e


def _pairs(t):
    return sorted((t.name(a), t.name(b)) for a, b in zip(t.flow_src.tolist(), t.flow_dst.tolist()))


def test_gpu_op_without_correlation_linked_only_through_ac2g(tmp_path):
    ev = [
        _x("cpu_op", "aten::mm", CPU, CPU, 10, 20),
        _x("cuda_runtime", "cudaLaunchKernel", CPU, CPU, 12, 4, correlation=77),
        _x("cuda_runtime", "cudaLaunchKernel", CPU, CPU, 20, 3, correlation=78),
        # gemm's args were stripped: no correlation
        _x("kernel", "gemm", GPU, 7, 30, 10, device=0, stream=7),
        _x("kernel", "relu", GPU, 7, 45, 5, device=0, stream=7, correlation=78),
        _flow("s", 77, CPU, CPU, 12),
        _flow("f", 77, GPU, 7, 30, bp="e"),
        _flow("s", 78, CPU, CPU, 20),
        _flow("f", 78, GPU, 7, 45, bp="e"),
    ]
    t = parsers.load(_write(tmp_path, ev))
    launch = [i for i in range(len(t)) if t.name(i) == "cudaLaunchKernel"]
    gemm = next(i for i in range(len(t)) if t.name(i) == "gemm")
    relu = next(i for i in range(len(t)) if t.name(i) == "relu")
    links = dict(zip(t.flow_dst.tolist(), t.flow_src.tolist()))
    # gemm ← the launch at 12 µs (only the flow says so); relu ← the launch at 20 µs (correlation)
    assert links[gemm] == next(i for i in launch if t.start_ns[i] == 12_000)
    assert links[relu] == next(i for i in launch if t.start_ns[i] == 20_000)
    assert len(t.flow_dst) == 2  # the ac2g pair of relu is not counted twice
    assert t.source.extra["flow_linked_gpu_ops"] == 1
    assert t.source.extra["kineto_flow_events"] == 4
    assert int(t.correlation[gemm]) == -1  # correlation column is never invented


def test_correlation_stays_first_source(tmp_path):
    # a wrong ac2g flow (id 5 points the kernel at the second call) never overrides correlation
    ev = [
        _x("cuda_runtime", "cudaLaunchKernel", CPU, CPU, 10, 2, correlation=5),
        _x("cuda_runtime", "cudaMemsetAsync", CPU, CPU, 20, 2, correlation=6),
        _x("kernel", "k", GPU, 7, 30, 4, device=0, stream=7, correlation=5),
        _flow("s", 5, CPU, CPU, 20),
        _flow("f", 5, GPU, 7, 30, bp="e"),
    ]
    t = parsers.load(_write(tmp_path, ev))
    assert _pairs(t) == [("cudaLaunchKernel", "k")]
    assert "flow_linked_gpu_ops" not in t.source.extra


@pytest.mark.parametrize("cat", ["async_cpu_to_gpu", "async_gpu"])
def test_older_flow_categories_and_string_ids(tmp_path, cat):
    # 2021 traces: other category names; ids as strings on one side and numbers on the other
    ev = [
        _x("Runtime", "cudaLaunchKernel", CPU, "thread 1", 100, 5),
        _x("Runtime", "cudaMemcpyAsync", CPU, "thread 1", 110, 5),
        _x("Kernel", "k1", GPU, "stream 7", 120, 10),
        _x("Memcpy", "Memcpy HtoD (Pageable -> Device)", GPU, "stream 7", 140, 3),
        _flow("s", "11", CPU, "thread 1", 100, cat=cat),
        _flow("f", 11, GPU, "stream 7", 120, cat=cat, bp="e"),
        _flow("s", 12, CPU, "thread 1", 112, cat=cat),  # inside the copy call: binds to it
        _flow("f", 12, GPU, "stream 7", 139, cat=cat),  # no bp: next slice, the copy at 140
    ]
    t = parsers.load(_write(tmp_path, ev))
    assert _pairs(t) == [("cudaLaunchKernel", "k1"), ("cudaMemcpyAsync", "Memcpy HtoD (Pageable -> Device)")]
    assert t.source.extra["flow_linked_gpu_ops"] == 2


def test_unbindable_or_mismatched_flows_link_nothing(tmp_path):
    ev = [
        _x("cuda_runtime", "cudaLaunchKernel", CPU, CPU, 10, 2),
        _x("cpu_op", "aten::add", CPU, CPU, 50, 10),
        _x("kernel", "k", GPU, 7, 30, 4, device=0, stream=7),
        _x("kernel", "k2", GPU, 7, 40, 4, device=0, stream=7),
        _flow("s", 1, CPU, CPU, 5),  # before any slice: unbound
        _flow("f", 1, GPU, 7, 30, bp="e"),
        _flow("s", 2, CPU, CPU, 55),  # binds to a cpu_op, not a runtime call
        _flow("f", 2, GPU, 7, 40, bp="e"),
        _flow("s", 3, CPU, CPU, 10),  # the f of id 3 lies in a gap of the stream
        _flow("f", 3, GPU, 7, 36, bp="e"),
        _flow("f", 4, GPU, 7, 30, cat="ac2g", bp="e"),  # f without s
    ]
    t = parsers.load(_write(tmp_path, ev))
    assert _pairs(t) == []
    assert "flow_linked_gpu_ops" not in t.source.extra


def test_epoch_microsecond_flows_bind_within_a_microsecond(tmp_path):
    # float64 cannot hold these ts exactly (0.25 µs steps): flows bind with 1 µs slack
    base = 1712345678901234
    ev = [
        _x("cuda_runtime", "cudaLaunchKernel", CPU, CPU, f"{base}.125", 3, correlation=-1),
        _x("kernel", "k", GPU, 7, f"{base + 20}.375", 5, device=0, stream=7),
        _flow("s", 9, CPU, CPU, f"{base}.125"),
        _flow("f", 9, GPU, 7, f"{base + 20}.375", bp="e"),
    ]
    text = json.dumps({"traceEvents": ev})
    for v in (f"{base}.125", f"{base + 20}.375"):
        text = text.replace(f'"{v}"', v)  # numbers, not strings
    p = tmp_path / "epoch.json"
    p.write_text(text)
    t = parsers.load(p)
    assert _pairs(t) == [("cudaLaunchKernel", "k")]
    k = next(i for i in range(len(t)) if t.name(i) == "k")
    assert int(t.start_ns[k]) == (base + 20) * 1000 + 375
