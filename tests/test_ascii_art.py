"""Lane-art ASCII timelines: the four smells from the seeds, layout rules, errors."""

from __future__ import annotations

import pytest

from gapscope import parsers
from gapscope.parsers import CopyKind, Kind, TraceFormatError
from gapscope.parsers.ascii import load_ascii
from gapscope.parsers.ascii.art import DEFAULT_SCALE_NS
from gapscope.sample_traces import path as sample_path

MS = 1_000_000
US = 1_000


def rows_of(trace, gpu):
    """[(name, start_ns, end_ns, kind, copy_kind, pageable, index)] on GPU or CPU lanes."""
    out = []
    for i in range(len(trace)):
        if trace.lanes[int(trace.lane[i])].is_gpu == gpu:
            s = int(trace.start_ns[i])
            out.append(
                (
                    trace.name(i),
                    s,
                    s + int(trace.dur_ns[i]),
                    Kind(int(trace.kind[i])),
                    CopyKind(int(trace.copy_kind[i])),
                    bool(trace.pageable[i]),
                    i,
                )
            )
    return sorted(out, key=lambda r: (r[1], r[6]))


def covered_ns(intervals, lo, hi):
    """ns of [lo, hi) covered by the union of ``intervals``."""
    t, total = lo, 0
    for s, e in sorted(intervals):
        s, e = max(s, t), min(e, hi)
        if e > s:
            total += e - s
            t = e
    return total


def test_picket_fence_expands_128_kernels():
    t = parsers.load(sample_path("picket_fence.txt"))
    assert t.source.format == "ascii-art"
    gpu = rows_of(t, True)
    assert len(gpu) == 128  # "repeating 128 times" = 128 kernels
    assert {r[3] for r in gpu} == {Kind.KERNEL}
    assert {r[2] - r[1] for r in gpu} == {3 * US}
    gaps = [b[1] - a[2] for a, b in zip(gpu, gpu[1:])]
    assert len(gaps) == 127
    assert min(gaps) == 8 * US and max(gaps) == 20 * US
    assert set(gaps) == {8 * US, 10 * US, 12 * US, 14 * US, 16 * US, 18 * US, 20 * US}
    assert gaps[:8] == [8 * US, 10 * US, 12 * US, 14 * US, 16 * US, 18 * US, 20 * US, 8 * US]
    cpu = rows_of(t, False)
    launches = [r for r in cpu if r[3] == Kind.LAUNCH]
    assert len(launches) == 128
    assert any(r[3] == Kind.PYTHON for r in cpu)
    # every kernel has its launch call, which ends when the kernel starts
    links = {int(d): int(s) for s, d in zip(t.flow_src, t.flow_dst)}
    for r in gpu:
        s = links[r[6]]
        assert Kind(int(t.kind[s])) == Kind.LAUNCH
        assert int(t.start_ns[s] + t.dur_ns[s]) == r[1]
    # launch calls cover 2/3 of each gap, Python the rest: the CPU is never idle
    for a, b in zip(gpu, gpu[1:]):
        launch = covered_ns([(r[1], r[2]) for r in launches], a[2], b[1])
        assert launch == 2 * (b[1] - a[2]) // 3


def test_host_island():
    t = parsers.load(sample_path("host_island.txt"))
    gpu = rows_of(t, True)
    cpu = rows_of(t, False)
    assert [(r[0], r[3]) for r in gpu] == [("prefill", Kind.KERNEL), ("decode step", Kind.KERNEL)]
    prefill = gpu[0]
    assert prefill[1:3] == (0, 42 * MS)
    assert [(r[0], r[2] - r[1]) for r in cpu] == [("tokenize", 28 * MS), ("json", 9 * MS)]
    tok, js = cpu
    assert tok[1] >= prefill[2] and js[1] >= tok[2]
    assert tok[1] == 42 * MS  # tokenize starts where prefill ends (edges 2 columns apart snap)
    gap = (prefill[2], gpu[1][1])
    assert gap[1] > gap[0]
    assert covered_ns([(r[1], r[2]) for r in cpu], *gap) == gap[1] - gap[0]


def test_copy_on_path():
    t = parsers.load(sample_path("copy_on_path.txt"))
    gpu = rows_of(t, True)
    assert [(r[0], r[3], r[4], r[2] - r[1]) for r in gpu] == [
        ("H2D", Kind.MEMCPY, CopyKind.H2D, 6 * MS),
        ("kernel", Kind.KERNEL, CopyKind.NONE, 4 * MS),
        ("D2H", Kind.MEMCPY, CopyKind.D2H, 5 * MS),
        ("kernel", Kind.KERNEL, CopyKind.NONE, 4 * MS),
    ]
    assert [r[1] for r in gpu] == [0, 6 * MS, 10 * MS, 15 * MS]
    cpu = rows_of(t, False)
    assert [(r[0], r[1], r[2], r[3], r[4], r[5]) for r in cpu] == [
        ("tensor(batch)", 0, 6 * MS, Kind.MEMCPY_CALL, CopyKind.H2D, True),
        ("np.array ← tensor.cpu()", 10 * MS, 15 * MS, Kind.MEMCPY_CALL, CopyKind.D2H, True),
    ]
    pairs = {(t.name(int(s)), t.name(int(d))) for s, d in zip(t.flow_src, t.flow_dst)}
    assert pairs == {("tensor(batch)", "H2D"), ("np.array ← tensor.cpu()", "D2H")}
    assert t.warnings == ()  # issue 18 item 11: a bundled sample loads clean


def test_sync_cliff_default_scale():
    t = parsers.load(sample_path("sync_cliff.txt"))
    assert t.source.extra["scale_ns_per_column"] == DEFAULT_SCALE_NS
    gpu = rows_of(t, True)
    assert [(r[0], r[1], r[2]) for r in gpu] == [
        ("matmul", 0, 80 * US),
        ("attn", 80 * US, 140 * US),
        ("matmul", 240 * US, 320 * US),
        ("attn", 320 * US, 380 * US),
    ]
    cpu = rows_of(t, False)
    assert [r[0] for r in cpu] == [".item()", "wait", ".item()", "wait"]
    assert {r[3] for r in cpu} == {Kind.SYNC_CALL}
    assert covered_ns([(r[1], r[2]) for r in cpu], 140 * US, 240 * US) == 100 * US
    assert cpu[0][1:3] == (140 * US, 240 * US)


def test_all_samples_load_without_error():
    from gapscope import sample_traces

    txt = [n for n in sample_traces.names() if n.endswith(".txt")]
    assert {
        "decode_step.txt",
        "decode_graph.txt",
        "picket_fence.txt",
        "host_island.txt",
        "copy_on_path.txt",
        "sync_cliff.txt",
    } <= set(txt)
    for n in txt:
        t = parsers.load(sample_path(n))
        assert len(t) > 0 and t.gpu_lanes() and t.source.trace_name, n
        assert t.warnings == (), (n, [str(w) for w in t.warnings])  # issue 18 item 11: samples load clean


def test_unlabelled_spans_take_width_times_scale():
    t = load_ascii("GPU: [a 8 ms][bbbbbb]   [c]\n")
    gpu = rows_of(t, True)
    # scale 1 ms/column from "[a 8 ms]"; [bbbbbb] is 8 columns, 3 blank columns, [c] 3
    assert [(r[0], r[1], r[2]) for r in gpu] == [("a", 0, 8 * MS), ("bbbbbb", 8 * MS, 16 * MS), ("c", 19 * MS, 22 * MS)]


def test_fence_without_numbers_uses_columns():
    t = load_ascii("GPU: k  k   k\n")
    gpu = rows_of(t, True)
    s = DEFAULT_SCALE_NS
    assert [r[2] - r[1] for r in gpu] == [s, s, s]
    assert [b[1] - a[2] for a, b in zip(gpu, gpu[1:])] == [2 * s, 3 * s]


def test_launch_phrase_links_to_named_span():
    t = load_ascii("GPU:          [== gemm 5 ms ==]\nCPU:   launch gemm\n")
    pairs = [(t.name(int(s)), t.name(int(d))) for s, d in zip(t.flow_src, t.flow_dst)]
    assert pairs == [("launch gemm", "gemm")]


@pytest.mark.parametrize(
    "text,line,col,needle",
    [
        ("GPU: [a 4 ms\n", 1, 6, "'[' without a closing ']'"),
        ("GPU: a 4 ms]\n", 1, 12, "']' without an opening '['"),
        ("GPU: [a 4 min]\n", 1, 11, "unknown unit 'min'"),
        ("GPU: [a 4 ms][b 4 ms]\nCPU: [--- c 9 ms --]\n", 2, 6, "already take 8.000 ms"),
        ("GPU: [a]\nCPU: [b]\nGPU: [c]\n", 3, 1, "second GPU: row"),
        ("GPU: k k k\n  ^gaps of 20–8 µs\n", 2, 3, "no usable numbers"),
        ("GPU:\nCPU:\n", 1, 1, "nothing drawn"),
        ("GPU: k k\n ^repeating 1000000000 times\n", 2, 2, "at most 100000"),
        ("GPU: [a 9999999999999 s]\n", 1, 9, "duration 9999999999999 s is out of range"),
        ("GPU: k k\n ^4000000000 s kernels, 3 times\n", 1, 1, "2^62"),
    ],
)
def test_art_errors_have_line_and_column(tmp_path, text, line, col, needle):
    p = tmp_path / "art.txt"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(TraceFormatError) as ei:
        parsers.load(p)
    err = ei.value
    assert (err.line, err.column) == (line, col), str(err)
    assert needle in err.message, err.message


def test_off_scale_labels_hold_with_one_warning():
    """issue 18 item 13: spans labelled but drawn at inconsistent scales (a chat
    sketch without a ruler) load; each labelled duration is exact, the unlabelled
    stretch takes the fitted scale, and one warning names the first off-scale span."""
    t = load_ascii("GPU: [a 1 ms][b 1 ms][c 10 ms]   [d 2 ms]\n")
    gpu = rows_of(t, True)
    assert [(r[0], r[2] - r[1]) for r in gpu] == [("a", MS), ("b", MS), ("c", 10 * MS), ("d", 2 * MS)]
    assert [r[1] for r in gpu] == [0, MS, 2 * MS, 12 * MS + 3 * t.source.extra["scale_ns_per_column"]]
    (w,) = t.warnings
    assert (w.line, w.field) == (1, "scale")
    assert w.message.startswith("column 22: span 'c' is labelled 10.000 ms but drawn 9 columns wide (")
    assert w.message.endswith("); laid out by its label")
    t = load_ascii("GPU: [a 1 ms][b 1 ms][c 10 ms][d 9 ms]\n")
    (w,) = t.warnings
    assert "span 'c'" in w.message and w.message.endswith("; laid out by its label; 1 more span off scale too")


def test_label_bound_short_span_is_not_a_contradiction():
    # "[-- json 9 ms --]" is drawn as wide as its text needs: no error (host island).
    t = load_ascii("GPU: [========== a 40 ms ==========]\nCPU:                                [-- json 1 ms --]\n")
    assert [r[2] - r[1] for r in rows_of(t, False)] == [1 * MS]


# ------------------------------------------------------------------ round trip
from hypothesis import given, settings
from hypothesis import strategies as st


def _draw_span(name: str, dur_ms: int, width: int) -> str:
    label = f" {name} {dur_ms} ms "
    fill = width - 2 - len(label)
    left = fill // 2
    return "[" + "=" * left + label + "=" * (fill - left) + "]"


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 6), st.integers(12, 60), st.sampled_from("abcdxyz")), min_size=1, max_size=6),
    st.integers(0, 8),
)
def test_round_trip_spans_drawn_to_scale(spans, indent):
    """Spans drawn at 1 ms per column, with blank gaps, come back exactly."""
    row, expected, t = "GPU:" + " " * (indent + 1), [], 0
    for gap_cols, dur_ms, name in spans:
        row += " " * gap_cols + _draw_span(name, dur_ms, dur_ms)
        t += gap_cols * MS if expected else 0  # time 0 is the first drawn column
        expected.append((name, t, t + dur_ms * MS))
        t += dur_ms * MS
    trace = load_ascii(row + "\n")
    assert [(r[0], r[1], r[2]) for r in rows_of(trace, True)] == expected
    assert trace.source.extra["scale_ns_per_column"] == MS
