"""``gapscope report`` on real corpus traces: the figures it prints agree with the
stdlib-only reference (``tests/reference.py``, written without the loader), class
totals add up to the idle time to the nanosecond, and the text carries them."""

from __future__ import annotations

import io
import json

import pytest

from gapscope.report import cmd as report_cmd

from .reference import reference

TRACES = [
    "hta/step_based_trace_2543932.json.gz",
    "hta/inference_rank_1.json.gz",
    "hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
]


def run(path, *args):
    out = io.StringIO()
    assert report_cmd.run([str(path), "--width", "100", *args], stdout=out) == 0
    return out.getvalue()


@pytest.mark.parametrize("rel", TRACES)
def test_corpus_report_matches_reference(corpus, rel):
    path = corpus / rel
    ref = reference(path)
    doc = json.loads(run(path, "--json"))
    assert doc["event_count"] > 0 and doc["diagnosis_available"]
    devs = {d["device"]: d for d in doc["devices"]}
    ref_devs = {int(k): v for k, v in ref.devices.items() if v.n_kernels}
    assert sorted(devs) == sorted(ref_devs)
    for dev, r in ref_devs.items():
        d = devs[dev]
        assert d["kernel_count"] == r.n_kernels
        lo, hi = r.window_ns
        assert d["window_start_ns"] <= lo and d["window_end_ns"] >= hi
        assert d["busy_ns"] == r.busy_ns  # every kernel lies inside the window
        assert d["busy_with_copies_ns"] <= r.work_busy_ns
        assert d["idle_ns"] == d["window_ns"] - r.busy_ns
        assert sum(d["class_totals_ns"].values()) == d["gap_idle_ns"] <= d["idle_ns"]
    assert sum(doc["class_totals_ns"].values()) == doc["idle_in_gaps_ns"]
    assert doc["idle_in_gaps_ns"] == sum(d["gap_idle_ns"] for d in doc["devices"])
    sizes = [g["dur_ns"] for g in doc["top_gaps"]]
    assert sizes == sorted(sizes, reverse=True) and len(sizes) == min(10, doc["gap_count"])
    for g in doc["top_gaps"]:
        assert g["dur_ns"] >= doc["params"]["min_gap_ns"] and g["cause"] in doc["class_totals_ns"]


def test_corpus_text_report(corpus):
    path = corpus / TRACES[0]
    ref = reference(path)
    doc = json.loads(run(path, "--json"))
    text = run(path)
    (d,) = doc["devices"]
    from gapscope.report.fmt import fmt_share
    from gapscope.units import column_unit, fmt_dur, fmt_in

    u = column_unit(d["window_ns"])
    assert f"{fmt_in(ref.devices[0].busy_ns, u)} ({fmt_share(ref.devices[0].busy_ns, d['window_ns'])})" in text
    assert f"Kineto schemaVersion {doc['source']['schema_version']}" in text
    first = doc["top_gaps"][0]
    section = text.split("Largest idle gaps")[1]
    row = next(line for line in section.splitlines() if line.lstrip()[:1] == "#" and line.lstrip()[1:2].isdigit())
    assert fmt_dur(first["dur_ns"]) in row and first["cause"] in row


def test_markdown_keeps_to_the_largest_group_cards(corpus):
    """A ticket needs the few largest cards: rank0 has over a thousand recurring groups;
    Markdown shows GROUP_CARDS of them as cards and the next ones up to ``--top`` (at
    most MD_GROUP_ROWS) in a table."""
    from gapscope.report.fmt import GROUP_CARDS, MD_GROUP_ROWS

    md = run(corpus / "hta" / "rank0.json.gz", "--markdown")
    assert md.count("- **Smell:**") <= GROUP_CARDS + 10  # group cards + lone-gap cards
    assert sum(ln.startswith("### G") and not ln.startswith("### Gap") for ln in md.splitlines()) == GROUP_CARDS
    table_rows = [
        ln
        for ln in md.splitlines()
        if ln.split("|")[1:2] and ln.split("|")[1].strip()[:1] == "G" and ln.split("|")[1].strip()[1:].isdigit()
    ]
    assert len(table_rows) == 10 - GROUP_CARDS  # the default --top 10
    assert "The next 7 recurring groups (cards in `--json`)" in md
    md = run(corpus / "hta" / "rank0.json.gz", "--markdown", "--top", "100")
    table_rows = [
        ln
        for ln in md.splitlines()
        if ln.split("|")[1:2] and ln.split("|")[1].strip()[:1] == "G" and ln.split("|")[1].strip()[1:].isdigit()
    ]
    assert len(table_rows) == MD_GROUP_ROWS


def test_amd_devices_get_no_cuda_architecture(corpus):
    """MI250 (ROCm 6.2): Kineto's computeMajor/Minor 9.0 are HIP's, not an sm_90."""
    text = run(corpus / "hta" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz")
    header = text.split("\nSpan ")[0]
    # four identical devices are one line (issue 47: identical device lines are folded)
    devices = [ln for ln in header.splitlines() if ln.startswith("Device")]
    assert devices == ["Devices 0-3  AMD Radeon Graphics, 64.0 GiB, 104 CUs"]
    md = run(corpus / "hta" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz", "--markdown")
    assert "sm_" not in text and "sm_" not in md


def test_markdown_header_and_lanes_match_the_text_report(corpus):
    """step_based_trace records rank 0 but no world size, a trace name, and one instant
    event with an empty pid/tid (lane 0): Markdown says what the text report says."""
    path = corpus / TRACES[0]
    md = run(path, "--markdown").splitlines()
    assert "- Trace name: `/private/home/anupamb/step_based_trace_2543932.json`" in md
    assert "- Rank: 0 of world size ?" in md and not any("None" in ln for ln in md)
    # totalGlobalMem 17069309952 B = 15.897 GiB; computeMajor 6, minor 0; 56 SMs
    # two identical devices are one line (issue 47)
    assert md.count("- Devices 0, 1: `Quadro GP100, 15.9 GiB, sm_60, 56 SMs`") == 1
    lanes = md[md.index("## Lanes") + 2 :]
    lanes = lanes[: lanes.index("")]
    assert lanes == [
        "| process / device | lane | events | by kind |",
        "| --- | --- | --- | --- |",
        "| - | - | 1 | instant 1 |",
        "| `Traces` | `Trace PyTorch Profiler` | 1 | instant 1 |",
        "| `python` | `thread 2543932 (python)` | 403 | cpu_op 283, launch 80, sync_call 10, memcpy_call 10 … |",
        "| `python` | `thread 2544009 (python)` | 430 | cpu_op 360, launch 50, runtime 20 |",
        "| `Spans` | `PyTorch Profiler` | 1 | other 1 |",
        "| GPU 0 · `python` | `stream 7` | 150 | kernel 130, memcpy 10, gpu_annotation 10 |",
    ]
    text = run(path)
    # the text report folds identical devices (issue 47): "Devices 0, 1" widens the column
    assert "Trace name    /private/home/anupamb/step_based_trace_2543932.json" in text
    assert "Rank          0 of world size ?" in text
    assert "Devices 0, 1  Quadro GP100, 15.9 GiB, sm_60, 56 SMs" in text
