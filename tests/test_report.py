"""``gapscope report`` on the bug cases and the ASCII samples: exact figures in the
text, Markdown and JSON outputs (values from the cases' ``.expected.md`` and the
exercise's own timestamps)."""

from __future__ import annotations

import io
import json

import pytest

from gapscope.report import cmd as report_cmd

from .conftest import SAMPLES, require


def report(path, *args: str) -> str:
    out = io.StringIO()
    assert report_cmd.run([str(path), "--width", "100", *args], stdout=out) == 0
    return out.getvalue()


def report_json(path, *args: str) -> dict:
    return json.loads(report(path, "--json", *args))


def device0(doc: dict) -> dict:
    (d,) = [d for d in doc["devices"] if d["device"] == 0]
    return d


# ----------------------------------------------------------------- bug cases
def test_b20_one_sync_gap(bugs):
    doc = report_json(bugs / "B20_cuda_sync_on_gpu_lane.json")
    d = device0(doc)
    assert (d["window_start_ns"], d["window_end_ns"], d["busy_ns"]) == (10_000, 300_000, 244_000)
    assert d["idle_ns"] == 46_000 and d["kernel_count"] == 3
    assert doc["gap_count"] == 1
    (g,) = doc["top_gaps"]
    assert (g["start_ns"], g["end_ns"], g["dur_ns"]) == (200_000, 246_000, 46_000)
    assert g["cause"] == "sync"
    assert g["prev_op"]["name"] == "add_kernel" and g["next_op"]["name"] == "mul_kernel"
    # per-class split of the 46 µs: the host sat in cudaStreamSynchronize [27, 238] µs
    # (inside torch.cuda.synchronize [25, 238.2]) for at least 38 µs of it
    totals = doc["class_totals_ns"]
    assert list(totals) == ["sync", "copy", "launch", "host", "unclassified", "dependency"]
    assert sum(totals.values()) == 46_000 and totals["sync"] >= 38_000 and totals["copy"] == 0
    text = report(bugs / "B20_cuda_sync_on_gpu_lane.json")
    assert "0.244 ms (84.1%)" in text
    row = next(line for line in text.splitlines() if "add_kernel" in line and "mul_kernel" in line)
    assert "46.0 µs" in row and "sync" in row
    assert "Stream Sync" not in row


def test_b06_busy_and_two_gaps(bugs):
    doc = report_json(bugs / "B06_multi_member.json.gz")
    d = device0(doc)
    assert (d["busy_ns"], d["window_ns"]) == (310_000, 480_000)
    assert d["fully_idle_ns"] == d["idle_ns"] == 170_000
    assert [(g["start_ns"], g["dur_ns"]) for g in doc["top_gaps"]] == [(5_260_000, 140_000), (5_100_000, 30_000)]
    assert sum(doc["class_totals_ns"].values()) == 170_000
    lanes = {(ln["process_name"], ln["label"]): ln["event_count"] for ln in doc["lanes"]}
    assert lanes == {("python3", "7000"): 8, ("GPU 0", "stream 7"): 4}
    text = report(bugs / "B06_multi_member.json.gz")
    assert "0.310 ms (64.6%)" in text and "0.480 ms" in text


def test_b16_union_not_sum(bugs):
    doc = report_json(bugs / "B16_overlapping_same_stream.json")
    d = device0(doc)
    assert (d["busy_ns"], d["window_ns"]) == (240_000, 300_000)
    assert [(g["start_ns"], g["end_ns"]) for g in doc["top_gaps"]] == [(5_200_000, 5_260_000)]
    assert len(doc["warnings"]) >= 2  # overlap and duplicate


def test_b14_untimed_kernels_stay_out(bugs):
    doc = report_json(bugs / "B14_zero_ts_kernels.json")
    base = 1615207264504900 * 1000
    assert doc["span"] == {"start_ns": base, "end_ns": base + 330_000, "dur_ns": 330_000}
    d = device0(doc)
    assert (d["window_start_ns"] - base, d["window_end_ns"] - base, d["busy_ns"]) == (30_000, 330_000, 120_000)
    assert [(g["start_rel_ns"], g["dur_ns"]) for g in doc["top_gaps"]] == [(160_000, 140_000), (80_000, 40_000)]
    assert any("14" in (w["message"] + str(w["line"])) for w in doc["warnings"])


B23_NAMES = [
    "[rank0]:forward",
    "fit-profiler-[Strategy]SingleDeviceStrategy",
    "python3 [worker 0]",
    "[main]",
    "void gemv2T_kernel_val<int, int, float, float, 128, 16, 4, 4> [with T = float]",
    "void at::native::elementwise_kernel<128, 2, [lambda]>(int, [lambda])",
]


def test_b23_names_verbatim_in_text_and_json(bugs):
    path = bugs / "B23_markup_in_names.json"
    doc = report_json(path)
    d = device0(doc)
    assert (d["busy_ns"], d["window_ns"]) == (60_000, 80_000)
    (g,) = doc["top_gaps"]
    assert (g["start_rel_ns"], g["dur_ns"]) == (50_000, 20_000)
    assert g["prev_op"]["name"] == B23_NAMES[4] and g["next_op"]["name"] == B23_NAMES[5]
    assert doc["source"]["trace_name"] == "fit-profiler-[Strategy]SingleDeviceStrategy-1712345678.pt.trace.json"
    lanes = {(ln["process_name"], ln["thread_name"]) for ln in doc["lanes"]}
    assert ("python3 [worker 0]", "[main]") in lanes
    text = report(path, "--width", "250")
    for name in [
        "python3 [worker 0]",
        "[main]",
        B23_NAMES[4],
        B23_NAMES[5],
        "fit-profiler-[Strategy]SingleDeviceStrategy-1712345678.pt.trace.json",
    ]:
        assert name in text, name
    md = report(path, "--markdown")
    assert "`[main]`" in md and "`python3 [worker 0]`" in md


def test_b23_colour_output_does_not_apply_markup_from_data(bugs):
    """With colour on, bracketed names still print literally and add no styles."""
    from gapscope import parsers
    from gapscope.report.document import build_document
    from gapscope.report.text import make_console, render_text

    trace = parsers.load(bugs / "B23_markup_in_names.json")
    doc = build_document(trace, None)
    doc["lanes"][0]["label"] = "[bold red]x[/bold red]\x1b[31m"
    out = io.StringIO()
    console = make_console(out, width=200, color=True)
    render_text(doc, console)
    text = out.getvalue()
    assert "[bold red]x[/bold red]\\e[31m" in text
    assert "\x1b[31m" not in text.split("[bold red]x[/bold red]")[1][:20]


# ------------------------------------------------------------- ASCII samples
def test_decode_step_sample():
    """Exercise part A: GPU busy 0.312 ms of the 1.050 ms step, idle 0.738 ms = 70.3%;
    952 tokens/s; the largest stretch (attention end → next matmul) recurs each step."""
    path = require(SAMPLES / "decode_step.txt")
    doc = report_json(path)
    d = device0(doc)
    assert (d["window_start_ns"], d["window_end_ns"]) == (0, 1_050_000)
    assert (d["busy_ns"], d["idle_ns"], d["fully_idle_ns"]) == (312_000, 738_000, 738_000)
    assert sum(doc["class_totals_ns"].values()) == doc["idle_in_gaps_ns"] == 738_000
    assert [(g["start_rel_ns"], g["dur_ns"]) for g in doc["top_gaps"]] == [
        (590_000, 460_000),
        (0, 258_000),
        (410_000, 20_000),
    ]
    assert doc["top_gaps"][2]["cause"] == "launch"
    assert doc["steps"]["count"] == 1 and doc["steps"]["name"] == "decode_step"
    assert round(doc["budget"]["tokens_per_s"]) == 952
    text = report(path)
    assert "0.312 ms (29.7%)" in text and "0.738 ms" in text and "70.3%" in text
    assert "952" in text.split("Tokens/s (one token per step)")[1].splitlines()[0]
    biggest = next(
        line
        for line in text.split("Largest idle gaps")[1].splitlines()
        if line.lstrip()[:1] == "#" and line.lstrip()[1:2].isdigit()
    )
    assert "0.590 ms" in biggest and "0.460 ms" in biggest and "attention" in biggest
    md = report(path, "--markdown")
    assert "0.312 ms (29.7%)" in md and "0.738 ms (70.3%)" in md


def test_graph_captured_sample():
    """Exercise part C: GPU 0.012–0.340 ms, step 0.348 ms: busy 0.328, idle 0.020 ms."""
    path = require(SAMPLES / "decode_graph.txt")
    doc = report_json(path)
    d = device0(doc)
    assert (d["window_ns"], d["busy_ns"], d["idle_ns"]) == (348_000, 328_000, 20_000)
    assert round(doc["budget"]["tokens_per_s"]) == 2874
    text = report(path)
    assert "0.328 ms (94.3%)" in text and "0.020 ms" in text


@pytest.mark.parametrize("name", ["decode_step.txt", "decode_graph.txt"])
def test_report_figures_agree_with_independent_busy(name):
    """analysis' busy union equals the report's own (independent) union of kernels."""
    from gapscope import parsers
    from gapscope.report.busy import device_busy

    trace = parsers.load(require(SAMPLES / name))
    (mine,) = device_busy(trace)
    d = device0(report_json(SAMPLES / name))
    assert d["busy_ns"] == mine["busy_ns"] and d["busy_with_copies_ns"] == mine["busy_with_copies_ns"]


def test_two_devices_report(tmp_path):
    """Per-device busy and class columns; the union is per device, never across."""
    ev = []
    for dev, kernels in ((0, [(0, 10), (30, 40)]), (1, [(5, 20), (50, 60)])):
        for k, (s, e) in enumerate(kernels):
            ev.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": f"k{dev}{k}",
                    "pid": dev,
                    "tid": 7,
                    "ts": s,
                    "dur": e - s,
                    "args": {"device": dev, "stream": 7},
                }
            )
    path = tmp_path / "two.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    doc = report_json(path)
    assert [(d["device"], d["window_ns"], d["busy_ns"], d["idle_ns"]) for d in doc["devices"]] == [
        (0, 40_000, 20_000, 20_000),
        (1, 55_000, 25_000, 30_000),
    ]
    assert [(g["device"], g["start_ns"], g["dur_ns"]) for g in doc["top_gaps"]] == [
        (1, 20_000, 30_000),
        (0, 10_000, 20_000),
    ]
    assert doc["idle_in_gaps_ns"] == 50_000 == sum(doc["class_totals_ns"].values())
    text = report(path)
    total_row = next(line for line in text.splitlines() if line.startswith("total "))
    assert total_row.split()[-4:] == ["20.0", "µs", "30.0", "µs"]


@pytest.mark.parametrize("no_color", [None, "1"])
def test_colour_only_on_a_terminal_without_no_color(monkeypatch, capsys, bugs, no_color):
    from gapscope.report import args as report_args

    monkeypatch.setattr(report_args, "stdout_is_tty", lambda: True)
    if no_color is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", no_color)
    assert report_cmd.main([str(bugs / "B23_markup_in_names.json"), "--width", "200"]) == 0
    out = capsys.readouterr().out
    assert ("\x1b[" in out) is (no_color is None)
    assert "[main]" in out and "python3 [worker 0]" in out


def test_no_colour_when_not_a_terminal(monkeypatch, capsys, bugs):
    monkeypatch.delenv("NO_COLOR", raising=False)
    # a width off a terminal comes from $COLUMNS when set (pytest-xdist hands its workers
    # the terminal's): the default is what is tested
    monkeypatch.delenv("COLUMNS", raising=False)
    assert report_cmd.main([str(bugs / "B20_cuda_sync_on_gpu_lane.json")]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "46.0 µs" in out
    assert max(len(line) for line in out.splitlines()) <= 100  # default width off a terminal


def test_thresholds_reach_the_diagnosis(bugs):
    """--min-gap-us 50 drops B06's 30 µs gap and keeps the 140 µs one; --top limits rows."""
    path = bugs / "B06_multi_member.json.gz"
    doc = report_json(path, "--min-gap-us", "50", "--picket-min-kernels", "3", "--small-copy-max-bytes", "1024")
    assert doc["params"]["min_gap_ns"] == 50_000
    assert doc["params"]["picket_min_kernels"] == 3 and doc["params"]["small_copy_max_bytes"] == 1024
    assert [(g["start_ns"], g["dur_ns"]) for g in doc["top_gaps"]] == [(5_260_000, 140_000)]
    assert device0(doc)["gap_idle_ns"] == 140_000 and device0(doc)["idle_ns"] == 170_000
    doc = report_json(path, "--top", "1", "--min-gap-us", "0.5")
    assert doc["gap_count"] == 2 and len(doc["top_gaps"]) == 1 and doc["params"]["min_gap_ns"] == 500
    assert "50.0 µs" in report(path, "--min-gap-us", "50").split("Idle time by cause")[1].splitlines()[0]


def test_what_if_named_segments_on_the_decode_step(capsys):
    """Removing `tensor.item()` and `logging callback` from the decode step: 0.160 +
    0.290 ms of idle go, the step is 1.050 - 0.450 = 0.600 ms, 1,667 tokens/s."""
    from gapscope import sample_traces

    path = str(sample_traces.path("decode_step.txt"))
    assert (
        report_cmd.run([path, "--json", "--what-if", "tensor.item(),logging callback", "--what-if", "no such op"]) == 0
    )
    doc = json.loads(capsys.readouterr().out)
    w = doc["what_if"][-1]
    assert w["removed_names"] == ["tensor.item()", "logging callback", "no such op"] and w["removed_causes"] == []
    assert (w["removed_ns"], w["projected_step_ns"], round(w["tokens_per_s"])) == (450_000, 600_000, 1_667)
    assert w["unmatched"] == ["no such op"]
    assert report_cmd.run([path, "--width", "100", "--what-if", "tensor.item(),logging callback"]) == 0
    text = capsys.readouterr().out
    assert "tensor.item(), logging callback      0.450 ms  0.600 ms     1,667     1.75x" in text


@pytest.mark.parametrize("width", ["100000000", "99999999999999999999"])
def test_a_width_past_any_terminal_is_refused_in_one_line(capsys, bugs, width):
    """--width 100000000 rendered for over a minute in 1.6 GB, and a width past a C
    long was an internal error (OverflowError): at most ``MAX_WIDTH`` columns, else one
    usage line (exit 2), for report, diff and rank sets alike."""
    from gapscope.diff import cmd as diff_cmd
    from gapscope.ranks import cmd as ranks_cmd
    from gapscope.report.args import MAX_WIDTH

    path = str(bugs / "B20_cuda_sync_on_gpu_lane.json")
    for main, argv in ((report_cmd.main, [path]), (diff_cmd.main, [path, path]), (ranks_cmd.main, [path, path])):
        assert main([*argv, "--width", width]) == 2
        cap = capsys.readouterr()
        assert cap.out == ""
        assert f"argument --width: at most {MAX_WIDTH} columns, got {width}" in cap.err
        assert cap.err.count("\n") == 1
    assert MAX_WIDTH == 1000


def test_columns_past_any_terminal_are_capped(monkeypatch, capsys, bugs):
    """$COLUMNS (off a terminal) past ``MAX_WIDTH`` renders at ``MAX_WIDTH``."""
    from gapscope.report.args import MAX_WIDTH

    monkeypatch.setenv("COLUMNS", "100000000")
    assert report_cmd._env_columns() == MAX_WIDTH
    monkeypatch.setenv("COLUMNS", "99999999999999999999")
    assert report_cmd._env_columns() == MAX_WIDTH
