"""Per-lane counts and the vectorised GPU-busy union, against a slow reference."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gapscope.parsers.builder import TraceBuilder
from gapscope.parsers.model import Kind
from gapscope.report.busy import device_busy, lane_kind_counts, union_ns


def slow_union(intervals):
    """Pure-Python reference: merge sorted intervals one by one."""
    total, cur = 0, None
    for s, e in sorted(intervals):
        e = max(e, s)
        if cur is None or s > cur[1]:
            if cur is not None:
                total += cur[1] - cur[0]
            cur = [s, e]
        else:
            cur[1] = max(cur[1], e)
    return total + (cur[1] - cur[0] if cur else 0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-(10**12), 10**12), st.integers(0, 10**9)), max_size=40))
def test_union_matches_reference(pairs):
    s = np.array([p[0] for p in pairs], dtype=np.int64)
    e = np.array([p[0] + p[1] for p in pairs], dtype=np.int64)
    assert union_ns(s, e) == slow_union(list(zip(s.tolist(), e.tolist())))


def test_union_examples():
    def a(*xs):
        return np.array(xs, dtype=np.int64)

    assert union_ns(a(), a()) == 0
    # B16: [0,100] ∪ [90,150] ∪ [150,200] twice ∪ [260,300] = 240 µs, not 300
    assert union_ns(a(0, 90, 150, 150, 260), a(100, 150, 200, 200, 300)) == 240


def b06_like():
    """B06's four kernels on stream 7 plus a memcpy on stream 8 inside the second gap."""
    b = TraceBuilder(format="kineto", path="b06.json")
    cpu = b.lane("7000", "7000", process_name="python3", thread_name="7000")
    s7 = b.lane("0", "7", process_name="GPU 0", thread_name="stream 7", is_gpu=True, device=0, stream=7)
    s8 = b.lane("0", "8", process_name="GPU 0", thread_name="stream 8", is_gpu=True, device=0, stream=8)
    g1 = b.lane("1", "7", process_name="GPU 1", thread_name="stream 7", is_gpu=True, device=1, stream=7)
    us = 1000
    for name, s, e in [
        ("embedding_kernel", 5000, 5100),
        ("attn_fwd_kernel", 5130, 5200),
        ("mlp_fwd_kernel", 5200, 5260),
        ("loss_kernel", 5400, 5480),
    ]:
        b.event(s7, name, s * us, (e - s) * us, Kind.KERNEL)
    b.event(s8, "Memcpy HtoD", 5300 * us, 50 * us, Kind.MEMCPY)
    b.event(g1, "other", 1 * us, 9 * us, Kind.KERNEL)
    b.event(cpu, "cudaLaunchKernel", 4990 * us, 6 * us, Kind.LAUNCH)
    b.event(cpu, "aten::linear", 4980 * us, 30 * us, Kind.CPU_OP)
    return b.build()


def test_device_busy_b06():
    t = b06_like()
    d0, d1 = device_busy(t)
    assert d0 == dict(
        device=0,
        window_start_ns=5_000_000,
        window_end_ns=5_480_000,
        busy_ns=310_000,
        busy_with_copies_ns=360_000,
        kernel_count=4,
        copy_count=1,
    )
    assert d1["device"] == 1 and d1["busy_ns"] == 9_000


def test_lane_kind_counts():
    t = b06_like()
    c = lane_kind_counts(t)
    by_label = {(ln.process_name, ln.label): c[ln.index] for ln in t.lanes}
    assert by_label[("GPU 0", "stream 7")][Kind.KERNEL] == 4
    assert by_label[("GPU 0", "stream 8")][Kind.MEMCPY] == 1
    assert by_label[("python3", "7000")][Kind.LAUNCH] == 1 and by_label[("python3", "7000")][Kind.CPU_OP] == 1
    assert c.sum() == len(t)


def test_event_devices_gives_each_event_its_lane_device_once_per_trace():
    """``analysis.busy.event_devices``: the device of each event's lane (-1 on the CPU
    thread), read-only and computed once per trace; ``device_event_mask`` from it."""
    from gapscope.analysis.busy import device_event_mask, event_devices, valid_timing_mask

    t = b06_like()
    devices = event_devices(t)
    by_name = {t.names[int(n)]: int(d) for n, d in zip(t.name_id, devices)}
    assert by_name == {
        "embedding_kernel": 0,
        "attn_fwd_kernel": 0,
        "mlp_fwd_kernel": 0,
        "loss_kernel": 0,
        "Memcpy HtoD": 0,
        "other": 1,
        "cudaLaunchKernel": -1,
        "aten::linear": -1,
    }
    assert event_devices(t) is devices and not devices.flags.writeable
    kernels0 = device_event_mask(t, 0, (Kind.KERNEL,), valid_timing_mask(t))
    assert sorted(t.names[int(n)] for n in t.name_id[kernels0]) == sorted(
        ["embedding_kernel", "attn_fwd_kernel", "mlp_fwd_kernel", "loss_kernel"]
    )
    assert int(device_event_mask(t, 1, (Kind.KERNEL, Kind.MEMCPY)).sum()) == 1
