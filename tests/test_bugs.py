"""The ten ``shared/bugs`` cases, every stated number an assertion, then their families.

Each case's ``.expected.md`` gives times in µs; here they are ns (× 1000). GPU busy and
idle gaps are computed from the ``Trace`` with the small local helpers below (union of
kernel intervals per device; gaps = maximal kernel-free intervals inside [first kernel
start, last kernel end]), independent of ``analysis/``.

Families (bugs/README.md: "fix the kind, not the file") are at the bottom: truncation
at many offsets, non-finite numbers in every numeric field, string vs number ids,
``displayTimeUnit`` variants, epoch-µs timestamps with fractional ns, multi-member gzip
at several split points, hostile (markup-like) names.
"""

from __future__ import annotations

import gzip
import json
import math
import re
import zlib
from pathlib import Path

import numpy as np
import pytest

from gapscope.parsers import Kind, TraceFormatError, load
from tests.conftest import BUGS, CORPUS, require

US = 1000  # ns per µs


# ------------------------------------------------------------------ helpers
def _load_bug(name: str):
    return load(require(BUGS / name))


def lane_of(tr, pid, tid):
    """The lane with these ids (text), or fail."""
    hits = [ln for ln in tr.lanes if ln.pid == str(pid) and ln.tid == str(tid)]
    assert len(hits) == 1, f"lane ({pid}, {tid}) not found once in {[(l.pid, l.tid) for l in tr.lanes]}"
    return hits[0]


def slices(tr, lane, *, kinds=None):
    """[(name, start_ns, end_ns, depth)] of duration events on ``lane``, by start."""
    out = []
    sl = tr.lane_slice(lane.index)
    for i in range(sl.start, sl.stop):
        k = Kind(int(tr.kind[i]))
        if k in (Kind.INSTANT, Kind.COUNTER):
            continue
        if kinds is not None and k not in kinds:
            continue
        s = int(tr.start_ns[i])
        out.append((tr.name(i), s, s + int(tr.dur_ns[i]), int(tr.depth[i])))
    return sorted(out, key=lambda r: (r[1], -r[2]))


def span_list(rows):
    """[(name, start_ns, end_ns)] without depth."""
    return [(n, s, e) for n, s, e, _ in rows]


def kernel_intervals(tr, device=None):
    """Sorted [(start_ns, end_ns)] of KERNEL events on GPU lanes of ``device`` (all)."""
    lanes = {ln.index for ln in tr.lanes if ln.is_gpu and (device is None or ln.device == device)}
    out = []
    for i in np.flatnonzero(tr.kind == int(Kind.KERNEL)):
        if int(tr.lane[i]) in lanes or device is None:
            out.append((int(tr.start_ns[i]), int(tr.start_ns[i] + tr.dur_ns[i])))
    return sorted(out)


def _blocks(intervals):
    blocks = []
    for s, e in sorted(intervals):
        if blocks and s <= blocks[-1][1]:
            blocks[-1][1] = max(blocks[-1][1], e)
        else:
            blocks.append([s, e])
    return blocks


def busy_ns(intervals) -> int:
    return sum(e - s for s, e in _blocks(intervals))


def gaps_ns(intervals):
    """Maximal kernel-free intervals inside [first start, last end]."""
    b = _blocks(intervals)
    return [(b[i][1], b[i + 1][0]) for i in range(len(b) - 1)]


def us(*pairs):
    return [(int(round(a * US)), int(round(b * US))) for a, b in pairs]


def warnings_text(tr):
    return [str(w) for w in tr.warnings]


def names_lines(w) -> set[int]:
    """Line numbers a warning names (its ``line`` and numbers after "line(s)")."""
    found = set()
    if w.line is not None:
        found.add(int(w.line))
    for m in re.finditer(r"lines?\s+([\d,\s/and–-]+)", w.message):
        found |= {int(x) for x in re.findall(r"\d+", m.group(1))}
    return found


# ------------------------------------------------------------------ B01
def test_b01_truncated_midevent_recovers_complete_events():
    tr = _load_bug("B01_truncated_midevent.json")
    assert len(tr) == 8, "8 complete events recovered"
    trunc = [w for w in tr.warnings if re.search(r"truncat|incomplete", w.message, re.I)]
    assert len(trunc) == 1, warnings_text(tr)
    assert 15 in names_lines(trunc[0]), str(trunc[0])
    assert len(tr.lanes) == 2
    cpu = lane_of(tr, 4242, 4242)
    assert cpu.process_name == "python3" and not cpu.is_gpu
    assert slices(tr, cpu) == [
        ("aten::linear", 1000 * US, 1060 * US, 0),
        ("cudaLaunchKernel", 1010 * US, 1017 * US, 1),
        ("aten::relu", 1070 * US, 1095 * US, 0),
        ("cudaLaunchKernel", 1075 * US, 1081 * US, 1),
        ("aten::softmax", 1100 * US, 1130 * US, 0),
        ("cudaLaunchKernel", 1105 * US, 1111 * US, 1),
    ]
    gpu = lane_of(tr, 0, 7)
    assert gpu.is_gpu and gpu.process_name == "GPU 0" and gpu.label == "stream 7"
    assert span_list(slices(tr, gpu)) == [
        ("sm80_gemm_128x64", 1020 * US, 1140 * US),
        ("relu_kernel", 1140 * US, 1170 * US),
    ]
    assert tuple(tr.extent_ns) == (1000 * US, 1170 * US)
    k = kernel_intervals(tr, 0)
    assert busy_ns(k) == 150 * US
    assert (k[0][0], k[-1][1]) == (1020 * US, 1170 * US)
    assert gaps_ns(k) == [], "the two kernels are back-to-back: no idle gap"


def test_b01_launch_103_is_unmatched_never_invented():
    tr = _load_bug("B01_truncated_midevent.json")
    launches = np.flatnonzero((tr.kind == int(Kind.LAUNCH)) & (tr.correlation == 103))
    assert launches.size == 1 and int(tr.start_ns[launches[0]]) == 1105 * US
    assert not np.any(tr.mask_kind(Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET) & (tr.correlation == 103))
    assert launches[0] not in set(tr.flow_src.tolist())
    # the two recovered launches are linked to their kernels
    pairs = {(tr.name(s), tr.name(d)) for s, d in zip(tr.flow_src.tolist(), tr.flow_dst.tolist())}
    assert pairs == {("cudaLaunchKernel", "sm80_gemm_128x64"), ("cudaLaunchKernel", "relu_kernel")}


# ------------------------------------------------------------------ B02
def test_b02_unterminated_array_loads_whole():
    tr = _load_bug("B02_unterminated_array.json")
    assert len(tr) == 5
    assert not [w for w in tr.warnings if re.search(r"truncat|corrupt|incomplete", w.message, re.I)], warnings_text(tr)
    assert len(tr.warnings) <= 1, "at most an informational note"
    assert len(tr.lanes) == 2
    host = lane_of(tr, 1, 11)
    dev = lane_of(tr, 1, 12)
    assert (host.process_name, host.thread_name) == ("app", "host thread")
    assert (dev.process_name, dev.thread_name) == ("app", "device queue 0")
    assert span_list(slices(tr, host)) == [
        ("enqueue_kernel", 100 * US, 112 * US),
        ("wait_queue", 115 * US, 215 * US),
        ("enqueue_kernel", 230 * US, 240 * US),
    ]
    assert span_list(slices(tr, dev)) == [
        ("vector_add", 130 * US, 210 * US),
        ("reduce_sum", 250 * US, 295 * US),
    ]
    assert tuple(tr.extent_ns) == (100 * US, 295 * US)
    # optional device-lane reading: busy 125 µs, one gap [210, 250]
    dev_iv = [(s, e) for _, s, e, _ in slices(tr, dev)]
    assert busy_ns(dev_iv) == 125 * US and gaps_ns(dev_iv) == us((210, 250))


# ------------------------------------------------------------------ B04
def test_b04_non_finite_timing_skipped_with_line_and_field():
    tr = _load_bug("B04_nan_infinity.json")
    for line, field in ((9, "dur"), (10, "ts"), (11, "dur")):
        hits = [w for w in tr.warnings if line in names_lines(w)]
        assert len(hits) == 1, (line, warnings_text(tr))
        w = hits[0]
        assert w.field == field or re.search(rf"\b{field}\b", w.message), str(w)
    counter_w = [w for w in tr.warnings if 13 in names_lines(w)]
    assert len(counter_w) == 1, warnings_text(tr)
    assert "util" in ((counter_w[0].field or "") + counter_w[0].message)
    assert not any(7 in names_lines(w) for w in tr.warnings), "aten::add timing is valid"
    names = {tr.name(i) for i in range(len(tr))}
    assert not names & {"mul_kernel", "div_kernel", "aten::mul"}
    cpu = lane_of(tr, 3300, 3300)
    assert span_list(slices(tr, cpu)) == [("aten::add", 100 * US, 120 * US)]
    add = [i for i in range(len(tr)) if tr.name(i) == "aten::add"][0]
    flops = tr.args_of(add).get("flops")
    assert (isinstance(flops, float) and math.isnan(flops)) or str(flops).lower() in ("nan", "non-finite")
    gpu = lane_of(tr, 0, 7)
    assert span_list(slices(tr, gpu, kinds={Kind.KERNEL})) == [
        ("add_kernel", 110 * US, 150 * US),
        ("sub_kernel", 300 * US, 350 * US),
    ]
    ctr = np.flatnonzero(tr.kind == int(Kind.COUNTER))
    assert [(tr.name(i), int(tr.start_ns[i]), float(tr.value[i])) for i in ctr] == [("gpu_util", 320 * US, 87.5)]
    assert tuple(tr.extent_ns) == (100 * US, 350 * US)
    assert np.isfinite(tr.value[ctr]).all()
    k = kernel_intervals(tr, 0)
    assert busy_ns(k) == 90 * US and (k[0][0], k[-1][1]) == (110 * US, 350 * US)
    assert busy_ns(k) / (k[-1][1] - k[0][0]) == pytest.approx(0.375)
    assert gaps_ns(k) == us((150, 300))


# ------------------------------------------------------------------ B06
def test_b06_multi_member_gzip_loads_whole():
    tr = _load_bug("B06_multi_member.json.gz")
    assert len(tr) == 12
    assert not [w for w in tr.warnings if re.search(r"truncat|incomplete|corrupt", w.message, re.I)]
    assert len(tr.lanes) == 2
    cpu = lane_of(tr, 7000, 7000)
    rows = slices(tr, cpu)
    assert len(rows) == 8
    assert sum(1 for r in rows if r[0] == "cudaLaunchKernel") == 4
    gpu = lane_of(tr, 0, 7)
    assert span_list(slices(tr, gpu)) == [
        ("embedding_kernel", 5000 * US, 5100 * US),
        ("attn_fwd_kernel", 5130 * US, 5200 * US),
        ("mlp_fwd_kernel", 5200 * US, 5260 * US),
        ("loss_kernel", 5400 * US, 5480 * US),
    ]
    k = kernel_intervals(tr, 0)
    assert busy_ns(k) == 310 * US and (k[0][0], k[-1][1]) == (5000 * US, 5480 * US)
    assert round(100 * busy_ns(k) / (480 * US), 2) == 64.58
    assert gaps_ns(k) == us((5100, 5130), (5260, 5400))


# ------------------------------------------------------------------ B07
def test_b07_legacy_autograd_array_string_pids():
    tr = _load_bug("B07_legacy_autograd_array.json")
    assert len(tr) == 8, "8 complete events (flows are links, not events)"
    assert tr.source.format in ("legacy-autograd", "chrome")
    t1 = lane_of(tr, "CPU functions", 1)
    t2 = lane_of(tr, "CPU functions", 2)
    g = lane_of(tr, "CUDA functions", 0)
    assert t1.process_name == "CPU functions" and not t1.is_gpu and not t2.is_gpu
    assert g.process_name == "CUDA functions" and g.is_gpu
    assert len(tr.lanes) == 3
    assert span_list(slices(tr, t1)) == [
        ("aten::mul", 1212 * US, 1242 * US),
        ("aten::add", 1250 * US, 1280 * US),
        ("aten::sum", 1290 * US, 1340 * US),
    ]
    assert span_list(slices(tr, t2)) == [("MulBackward0", 1350 * US, 1390 * US)]
    mul, add = (
        "vectorized_elementwise_kernel<4, MulFunctor<float>>",
        "vectorized_elementwise_kernel<4, AddFunctor<float>>",
    )
    assert span_list(slices(tr, g)) == [
        (mul, 1250 * US, 1290 * US),
        (add, 1300 * US, 1330 * US),
        ("reduce_kernel<512, 1>", 1400 * US, 1460 * US),
        (mul, 1470 * US, 1500 * US),
    ]
    assert int((tr.kind == int(Kind.KERNEL)).sum()) == 4
    flows = sorted(
        (tr.name(s), int(tr.start_ns[s]), tr.name(d), int(tr.start_ns[d]), tr.lanes[int(tr.lane[s])].tid)
        for s, d in zip(tr.flow_src.tolist(), tr.flow_dst.tolist())
    )
    assert flows == [
        ("MulBackward0", 1350 * US, mul, 1470 * US, "2"),
        ("aten::add", 1250 * US, add, 1300 * US, "1"),
        ("aten::mul", 1212 * US, mul, 1250 * US, "1"),
        ("aten::sum", 1290 * US, "reduce_kernel<512, 1>", 1400 * US, "1"),
    ]
    k = kernel_intervals(tr, g.device)
    assert busy_ns(k) == 160 * US and (k[0][0], k[-1][1]) == (1250 * US, 1500 * US)
    assert busy_ns(k) / (250 * US) == pytest.approx(0.64)
    assert gaps_ns(k) == us((1290, 1300), (1330, 1400), (1460, 1470))


# ------------------------------------------------------------------ B09
def test_b09_display_time_unit_never_rescales():
    tr = _load_bug("B09_display_time_unit_ns.json")
    assert tr.source.display_time_unit == "ns"
    gpu = lane_of(tr, 0, 7)
    assert span_list(slices(tr, gpu)) == [
        ("bmm_kernel", 1000 * US, 1250 * US),
        ("softmax_kernel", 2000 * US, 2125500),
    ]
    cpu = lane_of(tr, 6100, 6100)
    assert slices(tr, cpu) == [
        ("aten::bmm", 990 * US, 1010 * US, 0),
        ("cudaLaunchKernel", 995 * US, 1003 * US, 1),
        ("aten::softmax", 1900 * US, 1930 * US, 0),
        ("cudaLaunchKernel", 1905 * US, 1913 * US, 1),
    ]
    assert tuple(tr.extent_ns) == (990 * US, 2125500)
    assert tr.extent_ns[1] - tr.extent_ns[0] == 1_135_500  # 1.1355 ms
    k = kernel_intervals(tr, 0)
    assert busy_ns(k) == 375_500
    assert round(100 * busy_ns(k) / (k[-1][1] - k[0][0]), 2) == 33.36
    assert gaps_ns(k) == us((1250, 2000))
    lat = sorted(
        (int(tr.correlation[d]), int(tr.start_ns[d] - tr.start_ns[s]))
        for s, d in zip(tr.flow_src.tolist(), tr.flow_dst.tolist())
    )
    assert lat == [(41, 5 * US), (42, 95 * US)]


# ------------------------------------------------------------------ B14
B14 = 1615207264504900  # µs


def test_b14_zero_ts_kernels_excluded_with_one_warning():
    tr = _load_bug("B14_zero_ts_kernels.json")
    b = B14 * US
    origin = tr.extent_ns[0] - b  # 0 when start_ns are absolute
    assert origin in (0, -b), "start_ns absolute (or relative to B)"
    ext = (tr.extent_ns[0] - origin, tr.extent_ns[1] - origin)
    assert ext == (b, b + 330 * US), "extent [B, B+330] µs, not 51 years"
    w = [w for w in tr.warnings if {14, 18} <= names_lines(w)]
    assert len(w) == 1, warnings_text(tr)
    assert not [x for x in tr.warnings if x is not w[0] and names_lines(x) & {14, 18}], "one warning for both"
    cpu = lane_of(tr, 29463, 29463)
    rows = [(n, s - origin - b, e - origin - b, d) for n, s, e, d in slices(tr, cpu)]
    tops = [(n, s, e) for n, s, e, d in rows if d == 0]
    assert tops == [
        ("aten::conv2d", 0, 100 * US),
        ("aten::linear", 100 * US, 140 * US),
        ("aten::relu", 250 * US, 290 * US),
    ]
    launches = [(s, e) for n, s, e, d in rows if n == "cudaLaunchKernel"]
    assert [sum(1 for s, _ in launches if a <= s < z) for _, a, z in tops] == [3, 1, 1]
    gpu = lane_of(tr, 0, 7)
    krows = [(n, s - origin - b, e - origin - b) for n, s, e, _ in slices(tr, gpu, kinds={Kind.KERNEL})]
    assert krows == [
        ("implicit_gemm_conv", 30 * US, 80 * US),
        ("gemv_kernel", 120 * US, 160 * US),
        ("relu_kernel", 300 * US, 330 * US),
    ], "no kernel drawn at time 0"
    k = [(s - origin, e - origin) for s, e in kernel_intervals(tr, 0)]
    assert busy_ns(k) == 120 * US and (k[0][0], k[-1][1]) == (b + 30 * US, b + 330 * US)
    assert busy_ns(k) / (300 * US) == pytest.approx(0.40)
    assert gaps_ns(k) == [(b + 80 * US, b + 120 * US), (b + 160 * US, b + 300 * US)]
    for _s, d in zip(tr.flow_src.tolist(), tr.flow_dst.tolist()):
        assert int(tr.start_ns[d]) - origin >= b, "no launch linked to a kernel at time 0"


# ------------------------------------------------------------------ B16
def test_b16_same_stream_overlap_and_duplicate():
    tr = _load_bug("B16_overlapping_same_stream.json")
    ov = [w for w in tr.warnings if re.search(r"overlap", w.message, re.I)]
    assert len(ov) == 1 and {11, 12} <= names_lines(ov[0]), warnings_text(tr)
    assert re.search(r"\b10(\.0+)?\s*(µs|us)|10\s*000\s*ns|10000\s*ns", ov[0].message), str(ov[0])
    dup = [w for w in tr.warnings if re.search(r"duplicate", w.message, re.I)]
    assert len(dup) == 1 and {13, 14} <= names_lines(dup[0]), warnings_text(tr)
    gpu = lane_of(tr, 0, 7)
    names = [n for n, *_ in slices(tr, gpu, kinds={Kind.KERNEL})]
    assert names.count("wgrad_kernel") == 1, "duplicate record counted once"
    assert names.count("fmha_bwd_kernel") == 1 and names.count("dgrad_kernel") == 1, "both overlapping kernels stay"
    w = [(s, e) for n, s, e, _ in slices(tr, gpu) if n == "wgrad_kernel"]
    assert w == us((5150, 5200)) and sum(e - s for s, e in w) == 50 * US
    fmha = [e - s for n, s, e, _ in slices(tr, gpu) if n == "fmha_bwd_kernel"]
    assert fmha[0] in (100 * US, 90 * US)
    k = kernel_intervals(tr, 0)
    assert busy_ns(k) == 240 * US, "union, not the 300 µs sum"
    assert (k[0][0], k[-1][1]) == (5000 * US, 5300 * US)
    assert busy_ns(k) / (300 * US) == pytest.approx(0.80)
    assert gaps_ns(k) == us((5200, 5260))


# ------------------------------------------------------------------ B20
def test_b20_cuda_sync_is_a_wait_not_gpu_work():
    tr = _load_bug("B20_cuda_sync_on_gpu_lane.json")
    assert len(tr) == 12
    sync = [i for i in range(len(tr)) if tr.name(i) == "Stream Sync"]
    assert len(sync) == 1
    i = sync[0]
    assert Kind(int(tr.kind[i])) == Kind.SYNC_MARKER
    assert (int(tr.start_ns[i]), int(tr.start_ns[i] + tr.dur_ns[i])) == (27 * US, 238 * US)
    gpu = lane_of(tr, 0, 7)
    assert span_list(slices(tr, gpu, kinds={Kind.KERNEL})) == [
        ("gemm_kernel", 10 * US, 100 * US),
        ("add_kernel", 100 * US, 200 * US),
        ("mul_kernel", 246 * US, 300 * US),
    ]
    assert int(tr.lane[i]) != gpu.index or int(tr.depth[i]) == 0, "never stacked as a child of a kernel"
    k = kernel_intervals(tr, 0)
    assert busy_ns(k) == 244 * US and (k[0][0], k[-1][1]) == (10 * US, 300 * US)
    assert round(100 * busy_ns(k) / (290 * US), 2) == 84.14
    assert gaps_ns(k) == us((200, 246))
    gpu_work = tr.mask_kind(Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)
    assert not gpu_work[i]


# ------------------------------------------------------------------ B23
B23_NAMES = [
    "[rank0]:forward",
    "fit-profiler-[Strategy]SingleDeviceStrategy",
    "[/]",
    "[bold red]loss.backward()[/bold red]",
    "[link=https://example.invalid]open[/link]",
    "\\[escaped] literal",
]
B23_KERNELS = [
    "void gemv2T_kernel_val<int, int, float, float, 128, 16, 4, 4> [with T = float]",
    "void at::native::elementwise_kernel<128, 2, [lambda]>(int, [lambda])",
]


def test_b23_markup_names_verbatim():
    tr = _load_bug("B23_markup_in_names.json")
    assert len(tr.lanes) == 2
    cpu = lane_of(tr, 1200, 1200)
    assert (cpu.process_name, cpu.thread_name) == ("python3 [worker 0]", "[main]")
    assert span_list(slices(tr, cpu)) == [
        (n, (100 + 50 * j) * US, (140 + 50 * j) * US) for j, n in enumerate(B23_NAMES)
    ]
    gpu = lane_of(tr, 0, 7)
    assert span_list(slices(tr, gpu)) == [(B23_KERNELS[0], 120 * US, 150 * US), (B23_KERNELS[1], 170 * US, 200 * US)]
    assert tr.source.trace_name == "fit-profiler-[Strategy]SingleDeviceStrategy-1712345678.pt.trace.json"
    first = [i for i in range(len(tr)) if tr.name(i) == "[rank0]:forward"][0]
    a = tr.args_of(first)
    assert a.get("note") == "[b]not bold[/b]"
    assert a.get("Input Dims") == [[32, 128], [128, 64]]
    k = kernel_intervals(tr, 0)
    assert busy_ns(k) == 60 * US and (k[0][0], k[-1][1]) == (120 * US, 200 * US)
    assert gaps_ns(k) == us((150, 170))


# ====================================================================== families
def _write(tmp_path: Path, name: str, data) -> Path:
    p = tmp_path / name
    p.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return p


def _rows(tr):
    """Multiset of events: (name, pid, tid, start relative to the first, dur, kind)."""
    if len(tr) == 0:
        return []
    base = int(tr.start_ns.min())
    out = []
    for i in range(len(tr)):
        ln = tr.lanes[int(tr.lane[i])]
        out.append((tr.name(i), ln.pid, ln.tid, int(tr.start_ns[i]) - base, int(tr.dur_ns[i]), int(tr.kind[i])))
    return sorted(out)


_TRUNC_WORDS = re.compile(r"truncat|incomplete|unterminated|cut off|end of (file|data)|unexpected end", re.I)


def _events_array_start(text: str) -> int | None:
    """Index just after the ``[`` that opens the event array (object or array form)."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        return text.index("[") + 1
    m = re.search(r'"traceEvents"\s*:\s*\[', text)
    return m.end() if m else None


def complete_prefix(text: str, cut: int):
    """Independent reading of a file cut at ``cut`` characters.

    Returns (repaired_text, n_complete, at_boundary, closed, incomplete_line) where ``repaired_text`` is
    the header before the event array plus every event complete before the cut, closed
    properly; ``at_boundary`` means only whitespace/commas follow the last complete
    event; ``closed`` means the event array's ``]`` was reached; ``incomplete_line`` is
    the 1-based line where the cut-off event begins. None when the cut falls
    before the event array begins.
    """
    t = text[:cut]
    start = _events_array_start(t)
    if start is None:
        return None
    dec = json.JSONDecoder()
    pos, elems, closed, boundary = start, [], False, True
    while True:
        while pos < len(t) and t[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(t):
            break
        if t[pos] == "]":
            closed = True
            break
        try:
            _, end = dec.raw_decode(t, pos)
        except ValueError:
            boundary = False
            break
        elems.append(t[pos:end])
        pos = end
    array_form = not re.search(r'"traceEvents"\s*:\s*\[', t[:start])
    repaired = t[:start] + ",\n".join(elems) + "\n]" + ("" if array_form else "}")
    incomplete_line = t[:pos].count("\n") + 1  # where the cut-off event (or tail) begins
    return repaired, len(elems), boundary, closed, incomplete_line


def _truncation_sources():
    srcs = []
    b06 = BUGS / "B06_multi_member.json.gz"
    if b06.exists():
        srcs.append(("B06", gzip.decompress(b06.read_bytes()).decode()))
    b07 = BUGS / "B07_legacy_autograd_array.json"
    if b07.exists():
        srcs.append(("B07", b07.read_text()))
    for rel in ("kineto/after_fix_trace.json", "catapult/flow_simple.json", "catapult/nestable_async.json"):
        p = CORPUS / rel
        if p.exists():
            srcs.append((rel, p.read_text()))
    p = CORPUS / "hta/event_sync_trace.json.gz"
    if p.exists():
        srcs.append(("hta/event_sync_trace", gzip.decompress(p.read_bytes()).decode()))
    return srcs


def _cut_points(text: str, n: int = 24) -> list[int]:
    """Evenly spread cuts plus cuts at structural points (after '{', '}', '},', inside a
    number and a string)."""
    L = len(text)
    pts = {int(L * k / n) for k in range(1, n)}
    for pat in (r"\{", r"\}", r"\},\s*", r'"ts":\s*\d', r'"name":\s*"\w'):
        hits = [m.end() for m in re.finditer(pat, text)]
        if hits:
            pts.add(hits[len(hits) // 2])
            pts.add(hits[-1])
    pts.add(L - 1)
    pts.add(L - 2)
    return sorted(p for p in pts if 0 < p < L)


@pytest.mark.parametrize("src", [s for s, _ in _truncation_sources()] or ["none"])
def test_family_truncation_at_many_offsets(src, tmp_path, bugs):
    srcs = dict(_truncation_sources())
    if src not in srcs:
        pytest.fail(f"truncation source {src} missing")
    text = srcs[src]
    full_events = complete_prefix(text, len(text))[1]
    for cut in _cut_points(text):
        t = text[:cut]
        p = _write(tmp_path, f"cut_{cut}.json", t)
        info = complete_prefix(text, cut)
        try:
            tr = load(p)
        except TraceFormatError as exc:
            assert exc.line is not None, f"cut {cut}: error without a line: {exc}"
            assert info is None or info[1] == 0, f"cut {cut}: {info[1]} complete events not recovered: {exc}"
            continue
        except Exception as exc:
            pytest.fail(f"{src} cut at {cut}: {type(exc).__name__}: {exc}")
        if info is None:
            assert len(tr) == 0 and tr.warnings, f"cut {cut} in the header: empty trace must warn"
            continue
        repaired, n_complete, boundary, closed, start_line = info
        ref = load(_write(tmp_path, f"rep_{cut}.json", repaired))
        assert _rows(tr) == _rows(ref), f"{src} cut {cut}: recovered events differ ({len(tr)} vs {len(ref)})"
        trunc = [w for w in tr.warnings if _TRUNC_WORDS.search(w.message)]
        array_form = text.lstrip().startswith("[")
        legal = array_form and boundary  # B02: an array may end without ']'
        if legal or closed:  # nothing lost: only the closing '}' (or less) is missing
            assert len(trunc) <= 1, (cut, warnings_text(tr))
            continue
        assert len(trunc) == 1, f"{src} cut {cut}: expected one truncation warning, got {warnings_text(tr)}"
        eof_line = t.count("\n") + 1
        last_line = t.rstrip().count("\n") + 1
        assert names_lines(trunc[0]) & {eof_line, last_line, start_line}, (
            f"{src} cut {cut}: warning {trunc[0]} should name line {eof_line}"
        )
        assert len(tr.warnings) <= len(ref.warnings) + 1, (warnings_text(tr), warnings_text(ref))
    assert full_events > 0


def test_family_truncated_gzip_stream(tmp_path, bugs):
    raw = (BUGS / "B06_multi_member.json.gz").read_bytes()
    single = gzip.compress(gzip.decompress(raw), mtime=0)
    full = load(_write(tmp_path, "full.json.gz", single))
    for cut in sorted({len(single) * k // 12 for k in range(1, 12)} | {len(single) - 9, 11, 20}):
        p = _write(tmp_path, f"cut{cut}.json.gz", single[:cut])
        try:
            tr = load(p)
        except TraceFormatError:
            continue
        except Exception as exc:
            pytest.fail(f"gzip cut at {cut}: {type(exc).__name__}: {exc}")
        assert len(tr) <= len(full)
        if len(tr) < len(full):
            assert tr.warnings, f"gzip cut at {cut}: loaded {len(tr)} of {len(full)} events silently"


_NAN_TEMPLATE = """{{"traceEvents": [
{{"ph": "X", "cat": "cpu_op", "name": "before", "pid": 1, "tid": 1, "ts": 100, "dur": 10}},
{{"ph": "X", "cat": "kernel", "name": "victim", "pid": 0, "tid": 7, "ts": {ts}, "dur": {dur}, "args": {{"device": 0, "stream": 7, "correlation": 5}}}},
{{"ph": "X", "cat": "cpu_op", "name": "after", "pid": 1, "tid": 1, "ts": 200, "dur": 10}}
]}}
"""
_BAD_TOKENS = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999"]


@pytest.mark.parametrize("field", ["ts", "dur"])
@pytest.mark.parametrize("token", _BAD_TOKENS)
def test_family_non_finite_timing(field, token, tmp_path):
    vals = {"ts": "150", "dur": "20"}
    vals[field] = token
    tr = load(_write(tmp_path, "nan.json", _NAN_TEMPLATE.format(**vals)))
    names = sorted(tr.name(i) for i in range(len(tr)))
    if token.endswith("1e999"):
        # a finite but absurd JSON number (overflows float64): skipped, or kept out of the extent
        assert names in (["after", "before"], ["after", "before", "victim"])
    else:
        assert names == ["after", "before"], f"{field}={token}: event must be skipped"
    hits = [w for w in tr.warnings if 3 in names_lines(w)]
    assert len(hits) == 1, warnings_text(tr)
    assert hits[0].field == field or re.search(rf"\b{field}\b", hits[0].message), str(hits[0])
    assert tuple(tr.extent_ns) == (100 * US, 210 * US)


_ARGS_TEMPLATE = """{{"traceEvents": [
{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 100, "dur": 5, "args": {{"correlation": 5}}}},
{{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, "tid": 7, "ts": 110, "dur": 20, "args": {{"device": {device}, "stream": {stream}, "correlation": {correlation}, "bytes": {bytes}, "flops": {flops}}}}}
]}}
"""


@pytest.mark.parametrize("where", ["correlation", "device", "stream", "bytes", "flops"])
@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_family_non_finite_args_keep_event(where, token, tmp_path):
    vals = {"device": "0", "stream": "7", "correlation": "5", "bytes": "4096", "flops": "1"}
    vals[where] = token
    tr = load(_write(tmp_path, "args.json", _ARGS_TEMPLATE.format(**vals)))
    assert len(tr) == 2, "timing is valid: both events kept"
    assert tuple(tr.extent_ns) == (100 * US, 130 * US)
    assert int(tr.mask_kind(Kind.MEMCPY).sum()) == 1
    if where != "correlation":
        assert tr.flow_src.size == 1, "the valid correlation still links the copy to its call"


@pytest.mark.parametrize("token", _BAD_TOKENS)
def test_family_non_finite_counter_value(token, tmp_path):
    text = (
        '{"traceEvents": [\n'
        '{"ph": "C", "name": "util", "pid": 0, "ts": 100, "args": {"v": 50}},\n'
        f'{{"ph": "C", "name": "util", "pid": 0, "ts": 200, "args": {{"v": {token}}}}},\n'
        '{"ph": "C", "name": "util", "pid": 0, "ts": 300, "args": {"v": 70}}\n'
        "]}\n"
    )
    tr = load(_write(tmp_path, "ctr.json", text))
    ctr = np.flatnonzero(tr.kind == int(Kind.COUNTER))
    vals = sorted((int(tr.start_ns[i]), float(tr.value[i])) for i in ctr)
    assert vals == [(100 * US, 50.0), (300 * US, 70.0)]
    assert [w for w in tr.warnings if 3 in names_lines(w)], warnings_text(tr)


def test_family_ids_number_or_string_are_one(tmp_path):
    ev = [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "host"}},
        {"ph": "M", "name": "thread_name", "pid": "1", "tid": "7", "args": {"name": "main"}},
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 7,
            "ts": 100,
            "dur": 5,
            "args": {"correlation": 41},
        },
        {"ph": "X", "cat": "cpu_op", "name": "op", "pid": "1", "tid": "7", "ts": 90, "dur": 30},
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k",
            "pid": 0,
            "tid": "7",
            "ts": 110,
            "dur": 10,
            "args": {"device": 0, "stream": 7, "correlation": "41"},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k2",
            "pid": "0",
            "tid": 7,
            "ts": 130,
            "dur": 10,
            "args": {"device": "0", "stream": "7", "correlation": 42},
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": "1",
            "tid": 7,
            "ts": 121,
            "dur": 5,
            "args": {"correlation": "42"},
        },
        {"ph": "X", "cat": "cpu_op", "name": "big tid", "pid": 1, "tid": "4093687616", "ts": 95, "dur": 5},
    ]
    tr = load(_write(tmp_path, "ids.json", json.dumps({"traceEvents": ev})))
    assert sorted((ln.pid, ln.tid) for ln in tr.lanes) == [("0", "7"), ("1", "4093687616"), ("1", "7")]
    host = lane_of(tr, 1, 7)
    assert (host.process_name, host.thread_name) == ("host", "main")
    assert len(slices(tr, host)) == 3
    assert len(slices(tr, lane_of(tr, 0, 7))) == 2
    pairs = sorted((int(tr.start_ns[s]), tr.name(d)) for s, d in zip(tr.flow_src.tolist(), tr.flow_dst.tolist()))
    assert pairs == [(100 * US, "k"), (121 * US, "k2")]


def test_family_legacy_flow_ids_number_or_string(tmp_path):
    ev = [
        {"name": "op", "ph": "X", "ts": 10, "dur": 5, "pid": "CPU functions", "tid": 1},
        {"name": "op", "ph": "s", "ts": 10, "pid": "CPU functions", "tid": 1, "id": 1, "cat": "cpu_to_cuda"},
        {"name": "kern", "ph": "f", "ts": 20, "pid": "CUDA functions", "tid": 0, "id": "1", "cat": "cpu_to_cuda"},
        {"name": "kern", "ph": "X", "ts": 20, "dur": 5, "pid": "CUDA functions", "tid": 0},
    ]
    tr = load(_write(tmp_path, "legacy.json", json.dumps(ev)))
    pairs = [(tr.name(s), tr.name(d)) for s, d in zip(tr.flow_src.tolist(), tr.flow_dst.tolist())]
    assert pairs == [("op", "kern")]


def test_family_huge_ids_are_not_truncated(tmp_path):
    big = 10159970886766084423  # > 2**63, from hta/rank-70...
    ev = [
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": 100,
            "dur": 5,
            "args": {"correlation": big},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "same",
            "pid": 0,
            "tid": 7,
            "ts": 110,
            "dur": 10,
            "args": {"device": 0, "stream": 7, "correlation": big},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "other",
            "pid": 0,
            "tid": 7,
            "ts": 130,
            "dur": 10,
            "args": {"device": 0, "stream": 7, "correlation": big + 1},
        },
    ]
    tr = load(_write(tmp_path, "big.json", json.dumps({"traceEvents": ev})))
    assert len(tr) == 3
    dst = {tr.name(d) for d in tr.flow_dst.tolist()}
    assert "other" not in dst, "a different id must never link"


def _dtu_doc(unit, position):
    ev = [
        {"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 1000, "dur": 20.5},
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k",
            "pid": 0,
            "tid": 7,
            "ts": 1010.25,
            "dur": 250,
            "args": {"device": 0, "stream": 7},
        },
    ]
    body = json.dumps(ev)
    key = "" if unit is None else f'"displayTimeUnit": {json.dumps(unit)}'
    if position == "before":
        return "{" + (key + ", " if key else "") + '"traceEvents": ' + body + "}"
    return '{"traceEvents": ' + body + (", " + key if key else "") + "}"


@pytest.mark.parametrize("unit", [None, "ms", "ns", "us", "s", "bogus", "", 1000])
@pytest.mark.parametrize("position", ["before", "after"])
def test_family_display_time_unit_never_rescales(unit, position, tmp_path):
    tr = load(_write(tmp_path, "dtu.json", _dtu_doc(unit, position)))
    got = sorted((tr.name(i), int(tr.start_ns[i]), int(tr.dur_ns[i])) for i in range(len(tr)))
    assert got == [("k", 1_010_250, 250_000), ("op", 1_000_000, 20_500)]
    assert tuple(tr.extent_ns) == (1_000_000, 1_260_250)
    if unit not in ("ms", "ns", None):
        assert len(tr.warnings) <= 1
    else:
        assert not tr.warnings, warnings_text(tr)


@pytest.mark.parametrize(
    "ts_text, dur_text, start_ns, dur_ns",
    [
        ("1712345678901234.125", "0.001", 1712345678901234125, 1),
        ("1712345678901234.999", "1.5", 1712345678901234999, 1500),
        ("1712345678901234", "2", 1712345678901234000, 2000),
        ("1712345678901234.000", "0.010", 1712345678901234000, 10),
        ("1.712345678901234125e15", "1e-3", 1712345678901234125, 1),
        ("1712345678901234.1", "3.25", 1712345678901234100, 3250),
        ("9007199254740993.007", "0.5", 9007199254740993007, 500),
    ],
)
def test_family_epoch_us_keeps_nanoseconds(ts_text, dur_text, start_ns, dur_ns, tmp_path):
    text = (
        '{"traceEvents": [\n'
        f'{{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": {ts_text}, "dur": {dur_text}, "args": {{"device": 0, "stream": 7}}}},\n'
        f'{{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": {ts_text}, "dur": 1000}}\n'
        "]}\n"
    )
    tr = load(_write(tmp_path, "epoch.json", text))
    k = [i for i in range(len(tr)) if tr.name(i) == "k"]
    assert len(k) == 1
    assert int(tr.start_ns[k[0]]) == start_ns
    assert int(tr.dur_ns[k[0]]) == dur_ns
    assert tr.extent_ns[0] == start_ns and tr.extent_ns[1] == start_ns + 1_000_000


def test_family_sub_ns_digits_round_to_nearest(tmp_path):
    text = '[{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1712345678901234.1255, "dur": 0.0004}]'
    tr = load(_write(tmp_path, "subns.json", text))
    assert int(tr.start_ns[0]) in (1712345678901234125, 1712345678901234126)
    assert int(tr.dur_ns[0]) in (0, 1)


def _gzip_members(data: bytes, cuts) -> bytes:
    parts, prev = [], 0
    for c in list(cuts) + [len(data)]:
        parts.append(gzip.compress(data[prev:c], mtime=0))
        prev = c
    return b"".join(parts)


@pytest.mark.parametrize("src", ["B06", "after_fix"])
def test_family_multi_member_gzip(src, tmp_path, bugs):
    if src == "B06":
        data = gzip.decompress((BUGS / "B06_multi_member.json.gz").read_bytes())
    else:
        data = require(CORPUS / "kineto/after_fix_trace.json").read_bytes()
    whole = load(_write(tmp_path, "one.json.gz", gzip.compress(data, mtime=0)))
    n = len(data)
    for cuts in ([1], [n - 1], [n // 2], [n // 3, 2 * n // 3], [7, n // 5, n // 2, n - 3], list(range(97, n, 97))):
        blob = _gzip_members(data, cuts)
        assert zlib.decompressobj(31).decompress(blob) != data, "the test must need every member"
        tr = load(_write(tmp_path, f"m{len(cuts)}_{cuts[0]}.json.gz", blob))
        assert _rows(tr) == _rows(whole), f"cuts {cuts[:5]}"
        assert tuple(tr.extent_ns) == tuple(whole.extent_ns)
        assert len(tr.warnings) == len(whole.warnings), warnings_text(tr)


HOSTILE = (
    B23_NAMES
    + B23_KERNELS
    + [
        "",
        " ",
        "[",
        "]",
        "[[",
        "\\",
        "\\\\[x]",
        "[bold]",
        "[/bold]",
        "[@click=app.quit]x[/]",
        "\x1b[31mred\x1b[0m",
        "tab\there",
        "new\nline",
        "nul\x00byte",
        "名前",
        "😀 emoji",
        "\u202eRTL",
        '"quoted"',
        "<b>html</b>",
        "%s %d {0}",
        "x" * 5000,
    ]
)


def test_family_hostile_names_verbatim(tmp_path):
    ev = [
        {"ph": "M", "name": "process_name", "pid": 9, "args": {"name": HOSTILE[3]}},
        {"ph": "M", "name": "thread_name", "pid": 9, "tid": 9, "args": {"name": HOSTILE[10]}},
    ]
    for j, name in enumerate(HOSTILE):
        ev.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": name,
                "pid": 9,
                "tid": 9,
                "ts": 10 * j,
                "dur": 5,
                "args": {"note": name},
            }
        )
    tr = load(_write(tmp_path, "hostile.json", json.dumps({"traceEvents": ev, "traceName": HOSTILE[4]})))
    assert len(tr) == len(HOSTILE)
    by_start = {int(tr.start_ns[i]) // (10 * US): i for i in range(len(tr))}
    for j, name in enumerate(HOSTILE):
        i = by_start[j]
        assert tr.name(i) == name, (j, name)
        assert tr.args_of(i).get("note") == name
    ln = lane_of(tr, 9, 9)
    assert (ln.process_name, ln.thread_name) == (HOSTILE[3], HOSTILE[10])
    assert tr.source.trace_name == HOSTILE[4]


# ------------------------------------------- the stated GPU figures through analysis
_DIAG_CASES = [
    # file, busy µs, window µs, gaps µs, cause of the (only) gap or None
    ("B01_truncated_midevent.json", 150, (1020, 1170), [], None),
    ("B04_nan_infinity.json", 90, (110, 350), [(150, 300)], None),
    ("B06_multi_member.json.gz", 310, (5000, 5480), [(5100, 5130), (5260, 5400)], None),
    ("B07_legacy_autograd_array.json", 160, (1250, 1500), [(1290, 1300), (1330, 1400), (1460, 1470)], None),
    ("B09_display_time_unit_ns.json", 375.5, (1000, 2125.5), [(1250, 2000)], None),
    ("B14_zero_ts_kernels.json", 120, (B14 + 30, B14 + 330), [(B14 + 80, B14 + 120), (B14 + 160, B14 + 300)], None),
    ("B16_overlapping_same_stream.json", 240, (5000, 5300), [(5200, 5260)], "HOST"),
    ("B20_cuda_sync_on_gpu_lane.json", 244, (10, 300), [(200, 246)], "SYNC"),
    ("B23_markup_in_names.json", 60, (120, 200), [(150, 170)], None),
]


@pytest.mark.parametrize(
    "name, busy_us, window_us, gaps_us, cause", _DIAG_CASES, ids=[c[0].split("_")[0] for c in _DIAG_CASES]
)
def test_bug_case_gpu_figures_through_analysis(name, busy_us, window_us, gaps_us, cause, bugs):
    diag = pytest.importorskip("gapscope.analysis.diagnose")
    from gapscope.analysis.types import Cause

    tr = _load_bug(name)
    d = diag.diagnose(tr)
    assert len(d.devices) == 1
    dev = d.devices[0]
    assert dev.busy_ns == int(round(busy_us * US))
    assert (dev.window_start_ns, dev.window_end_ns) == (int(round(window_us[0] * US)), int(round(window_us[1] * US)))
    g = d.gaps
    assert list(zip(g.start_ns.tolist(), g.end_ns.tolist())) == [
        (int(round(a * US)), int(round(b * US))) for a, b in gaps_us
    ]
    if cause is not None:
        assert Cause(int(g.cause[0])) == Cause[cause]


_ABSURD = """{{"traceEvents": [
{{"ph": "X", "cat": "cpu_op", "name": "good_op", "pid": 1, "tid": 1, "ts": {b}, "dur": 100}},
{{"ph": "X", "cat": "kernel", "name": "good_kernel", "pid": 0, "tid": 7, "ts": {b10}, "dur": 40, "args": {{"device": 0, "stream": 7}}}},
{{"ph": "X", "cat": "kernel", "name": "late_kernel", "pid": 0, "tid": 7, "ts": {b60}, "dur": 20, "args": {{"device": 0, "stream": 7}}}},
{bad}
]}}
"""


@pytest.mark.parametrize(
    "bad",
    [
        '{"ph": "X", "cat": "cpu_op", "name": "bad", "pid": 1, "tid": 1, "ts": 0, "dur": 5}',
        '{"ph": "X", "cat": "kernel", "name": "bad", "pid": 0, "tid": 7, "ts": 0, "dur": 0, "args": {"device": 0, "stream": 7}}',
        '{"ph": "X", "cat": "kernel", "name": "bad", "pid": 0, "tid": 7, "ts": %d, "dur": -5, "args": {"device": 0, "stream": 7}}'
        % (B14 + 20),
        '{"ph": "X", "cat": "cpu_op", "name": "bad", "pid": 1, "tid": 1, "ts": %d, "dur": -0.5}' % (B14 + 20),
        '{"ph": "X", "cat": "cpu_op", "name": "bad", "pid": 1, "tid": 1, "ts": %d, "dur": 3155760000000000}'
        % (B14 + 20),
        '{"ph": "X", "cat": "kernel", "name": "bad", "pid": 0, "tid": 7, "ts": %d, "dur": 3155760000000000, "args": {"device": 0, "stream": 7}}'
        % (B14 + 20),
        '{"ph": "i", "s": "t", "name": "bad", "pid": 1, "tid": 1, "ts": 0}',
    ],
    ids=["ts0-cpu", "ts0-kernel", "neg-dur-kernel", "neg-dur-cpu", "century-cpu", "century-kernel", "ts0-instant"],
)
def test_family_absurd_values_flagged_and_out_of_extent(bad, tmp_path):
    """Issue 2: ts 0 among epoch values, negative or centuries-long durations are
    flagged (a warning naming the line) and kept out of the extent and busy time."""
    text = _ABSURD.format(b=B14, b10=B14 + 10, b60=B14 + 60, bad=bad)
    tr = load(_write(tmp_path, "absurd.json", text))
    b = B14 * US
    assert tuple(tr.extent_ns) == (b, b + 100 * US), (tuple(tr.extent_ns), warnings_text(tr))
    assert [w for w in tr.warnings if 5 in names_lines(w)], warnings_text(tr)
    for name in ("good_op", "good_kernel", "late_kernel"):
        assert [i for i in range(len(tr)) if tr.name(i) == name], f"{name} must be kept"
    diag = pytest.importorskip("gapscope.analysis.diagnose")
    d = diag.diagnose(tr)
    assert [(x.busy_ns, x.window_start_ns, x.window_end_ns) for x in d.devices] == [(60 * US, b + 10 * US, b + 80 * US)]


@pytest.mark.parametrize(
    "bad",
    [
        '{"ph": "X", "cat": "cpu_op", "name": "victim", "pid": NaN, "tid": 1, "ts": 150, "dur": 5}',
        '{"ph": "X", "cat": "cpu_op", "name": "victim", "pid": 1, "tid": Infinity, "ts": 150, "dur": 5}',
        '{"ph": "s", "cat": "ac2g", "name": "ac2g", "id": NaN, "pid": 1, "tid": 1, "ts": 150}',
        '{"ph": "f", "cat": "ac2g", "name": "ac2g", "id": -Infinity, "pid": 0, "tid": 7, "ts": 150, "bp": "e"}',
        '{"ph": "M", "name": "thread_sort_index", "pid": 1, "tid": 1, "args": {"sort_index": NaN}}',
        '{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "ts": NaN, "args": {"name": "main"}}',
        '{"ph": "C", "name": "util", "pid": 1, "ts": NaN, "args": {"v": 1}}',
        '{"ph": "i", "name": "mark", "pid": 1, "tid": 1, "ts": -Infinity}',
        '{"ph": "B", "name": "open", "pid": 1, "tid": 1, "ts": NaN}',
    ],
    ids=["pid", "tid", "flow-s-id", "flow-f-id", "sort-index", "meta-ts", "counter-ts", "instant-ts", "B-ts"],
)
def test_family_non_finite_elsewhere_never_crashes(bad, tmp_path):
    text = (
        '{"traceEvents": [\n'
        '{"ph": "X", "cat": "cpu_op", "name": "before", "pid": 1, "tid": 1, "ts": 100, "dur": 10},\n'
        f"{bad},\n"
        '{"ph": "X", "cat": "kernel", "name": "after", "pid": 0, "tid": 7, "ts": 200, "dur": 10, "args": {"device": 0, "stream": 7}}\n'
        "]}\n"
    )
    tr = load(_write(tmp_path, "nan2.json", text))
    names = {tr.name(i) for i in range(len(tr))}
    assert {"before", "after"} <= names
    assert tuple(tr.extent_ns) == (100 * US, 210 * US)
    if re.search(r'"ph": "[CiB]".*"ts": (NaN|-?Infinity)', bad):  # a timed event skipped: say so
        assert [w for w in tr.warnings if 3 in names_lines(w)], warnings_text(tr)
