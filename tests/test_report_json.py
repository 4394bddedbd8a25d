"""The ``--json`` document: every key documented in docs/report-json.md, units in key
names, figures carried through from the diagnosis; and the text/Markdown renderers on
a full document (groups, cards, episodes, budget). Uses a stand-in diagnosis that
follows the analysis API contract, so the report layer is tested on its own."""

from __future__ import annotations

import dataclasses
import io
import json
import re

import numpy as np
import pytest

from gapscope.analysis.picket import PicketEpisode
from gapscope.analysis.steps import GapGroup, Steps
from gapscope.analysis.types import Card, Cause, DeviceSummary, Evidence, Gaps, Params
from gapscope.parsers.builder import TraceBuilder
from gapscope.parsers.model import Kind
from gapscope.report import document
from gapscope.report.document import SCHEMA, build_document
from gapscope.report.markdown import render_markdown
from gapscope.report.text import make_console, render_text

from .conftest import ROOT

US = 1000


@dataclasses.dataclass
class Budget:
    wall_ns: int
    gpu_busy_ns: int
    idle_share: float
    tokens_per_s: float | None


@dataclasses.dataclass
class WhatIf:
    projected_step_ns: int
    tokens_per_s: float | None
    removed_ns: int
    assumptions: list


def two_step_trace():
    """Two 100 µs steps; kernels [10,40] and [70,90] in each: gaps 10+30+10 per step."""
    b = TraceBuilder(
        format="kineto",
        path="steps.json",
        schema_version=1,
        rank=0,
        world_size=2,
        device_properties=[{"id": 0, "name": "NVIDIA H100 [80GB]", "totalGlobalMem": 85899345920}],
    )
    cpu = b.lane("1", "1", process_name="python3", thread_name="[main]")
    gpu = b.lane("0", "7", process_name="GPU 0", thread_name="stream 7", is_gpu=True, device=0, stream=7)
    for k, base in enumerate((0, 100 * US)):
        b.event(cpu, f"ProfilerStep#{k}", base, 100 * US, Kind.ANNOTATION)
        b.event(cpu, "aten::item", base + 40 * US, 28 * US, Kind.SYNC_CALL)
        b.event(gpu, "[bold]gemm[/bold]", base + 10 * US, 30 * US, Kind.KERNEL)
        b.event(gpu, "attn\x1b[2J", base + 70 * US, 20 * US, Kind.KERNEL)
    b.warn(7, "dur", "negative duration [/] skipped")
    return b.build()


class FakeDiag:
    """Follows analysis_api: devices, gaps, order_by_size, card, class_totals_ns, ..."""

    def __init__(self, trace):
        self.trace, self.params = trace, Params()
        st = np.array([0, 40, 90, 100, 140, 190], dtype=np.int64) * US
        en = np.array([10, 70, 100, 110, 170, 200], dtype=np.int64) * US
        n = st.size
        kern = np.flatnonzero(trace.kind == int(Kind.KERNEL))
        cause = np.array([3, 0, 3, 3, 0, 3], dtype=np.int8)
        self.gaps = Gaps(
            device=np.zeros(n, np.int32),
            start_ns=st,
            end_ns=en,
            prev_op=np.array([-1, kern[0], kern[1], kern[1], kern[2], kern[3]], np.int64),
            next_op=np.array([kern[0], kern[1], kern[2], kern[2], kern[3], -1], np.int64),
            launch=np.full(n, -1, np.int64),
            launch_lane=np.full(n, -1, np.int32),
            lateness_ns=np.zeros(n, np.int64),
            exposed_copy_ns=np.zeros(n, np.int64),
            cause=cause,
            secondary=np.array([-1, 3, -1, -1, 3, -1], np.int8),
            cause_share=np.ones(n),
            secondary_share=np.array([0, 0.07, 0, 0, 0.07, 0]),
            group=np.array([-1, 0, -1, -1, 0, -1], np.int32),
            episode=np.full(n, -1, np.int32),
        )
        self.devices = [DeviceSummary(0, 0, 200 * US, 100 * US, 100 * US, 4, 0)]
        self.episodes = [PicketEpisode(0, 10 * US, 90 * US, np.array([1]), 2, 25 * US, 5 * US, 30 * US)]
        self.steps = Steps(
            "ProfilerStep",
            "ProfilerStep",
            np.array([0, 100 * US]),
            np.array([100 * US, 200 * US]),
            np.zeros(0, np.int64),
        )
        self.groups = [GapGroup(0, "after [bold]gemm[/bold]", np.array([1, 4]), 2, 2, 30 * US, 60 * US, Cause.SYNC)]
        self.budget = Budget(100 * US, 50 * US, 0.5, 10_000.0)

    def order_by_size(self):
        return np.lexsort((self.gaps.start_ns, -self.gaps.dur_ns))

    def card(self, i):
        c = Cause(int(self.gaps.cause[i]))
        return Card(
            "sync cliff" if c == Cause.SYNC else "host island",
            c,
            None,
            0.0,
            f"The host waited in aten::item for {self.gaps.dur_ns[i] // US} µs [x]",
            "move .item() after the loop",
            "a faster [bold]gemm[/bold] kernel",
            "step time in ProfilerStep",
            (Evidence(3, "aten::item", 0, Cause.SYNC, 28 * US, 4, True),),
        )

    def class_totals_ns(self, device=None):
        d = self.gaps.dur_ns
        return {c: int(d[self.gaps.cause == int(c)].sum()) for c in Cause if (self.gaps.cause == int(c)).any()}

    def what_if(self, *, gaps=(), causes=(), names=()):
        rm = sum(self.class_totals_ns().get(c, 0) for c in causes) // 2
        return WhatIf(100 * US - rm, 1e9 / (100 * US - rm), rm, ["launch tax stays [0.03 ms]"])

    def to_json(self):
        return {"gaps": {"start_ns": self.gaps.start_ns, "cause": [Cause(int(c)) for c in self.gaps.cause]}}


@pytest.fixture(autouse=True)
def _fake_cards(monkeypatch):
    """The report asks ``gapscope.analysis.card`` and ``jsonout`` for cards and the
    diagnosis JSON; for a ``FakeDiag`` they come from the fake itself."""
    gap, group, to_json = document.card_for_gap, document.card_for_group, document.diagnosis_to_json

    def fake_gap(diag, i):
        return diag.card(i) if isinstance(diag, FakeDiag) else gap(diag, i)

    def fake_group(diag, g):
        return diag.card(int(diag.groups[g].gap_indices[0])) if isinstance(diag, FakeDiag) else group(diag, g)

    def fake_json(diag, top=50):
        return diag.to_json() if isinstance(diag, FakeDiag) else to_json(diag, top=top)

    monkeypatch.setattr(document, "card_for_gap", fake_gap)
    monkeypatch.setattr(document, "card_for_group", fake_group)
    monkeypatch.setattr(document, "diagnosis_to_json", fake_json)


@pytest.fixture
def doc():
    t = two_step_trace()
    return json.loads(json.dumps(build_document(t, FakeDiag(t), top_n=4, version="9.9")))


def test_figures(doc):
    assert doc["schema"] == SCHEMA and doc["gapscope_version"] == "9.9"
    assert doc["span"] == {"start_ns": 0, "end_ns": 200_000, "dur_ns": 200_000}
    assert doc["class_totals_ns"] == {
        "sync": 60_000,
        "copy": 0,
        "launch": 0,
        "host": 40_000,
        "unclassified": 0,
        "dependency": 0,
    }
    assert sum(doc["class_totals_ns"].values()) == doc["idle_in_gaps_ns"] == 100_000
    assert doc["class_gap_counts"] == {"sync": 2, "copy": 0, "launch": 0, "host": 4, "unclassified": 0, "dependency": 0}
    assert [(g["start_ns"], g["dur_ns"]) for g in doc["top_gaps"]] == [
        (40_000, 30_000),
        (140_000, 30_000),
        (0, 10_000),
        (90_000, 10_000),
    ]
    assert doc["top_gaps"][0]["prev_op"]["name"] == "[bold]gemm[/bold]"
    assert doc["top_gaps"][0]["next_op"]["name"] == "attn\x1b[2J"  # verbatim in JSON
    assert doc["top_gaps"][2]["prev_op"] is None
    assert doc["devices"][0]["class_totals_ns"]["sync"] == 60_000
    assert doc["devices"][0]["idle_share"] == 0.5
    assert doc["groups"][0]["gap_indices"] == [1, 4] and doc["groups"][0]["cause"] == "sync"
    assert doc["groups"][0]["card"]["smell"] == "sync cliff"
    assert doc["steps"]["count"] == 2 and doc["steps"]["dur_ns"] == [100_000, 100_000]
    assert doc["episodes"][0]["dur_ns"] == 80_000
    assert [w["removed_causes"] for w in doc["what_if"]] == [["sync"], ["host"], ["sync", "host"]]
    assert doc["what_if"][0]["projected_step_ns"] == 70_000
    assert doc["diagnosis"]["gaps"]["cause"][:2] == ["host", "sync"]
    assert doc["params"]["min_gap_ns"] == 2000
    assert doc["source"]["device_properties"][0]["name"] == "NVIDIA H100 [80GB]"


def _paths(obj, prefix=""):
    if isinstance(obj, dict):
        for k, v in obj.items():
            p = f"{prefix}.{k}" if prefix else k
            yield p
            yield from _paths(v, p)
    elif isinstance(obj, list):
        for v in obj:
            yield from _paths(v, prefix + "[]")


def _documented() -> set[str]:
    text = (ROOT / "docs" / "report-json.md").read_text()
    return set(re.findall(r"^\| `([^`]+)` \|", text, flags=re.M))


def test_every_key_is_documented(doc):
    documented = _documented()
    missing = set()
    for p in set(_paths(doc)):
        if (
            p.startswith("diagnosis.")
            or p.startswith("source.device_properties[]")
            or p.startswith("source.ignored_counts.")
        ):
            continue
        if re.search(r"class_totals_ns\.|class_gap_counts\.|event_counts_by_kind\.", p):
            continue  # keyed by class/kind labels, documented as such
        p = re.sub(r"^top_gaps\[\]\.(prev_op|next_op|launch)\.", "*.", p)
        p = re.sub(r"^(top_gaps|groups)\[\]\.card\.", "card.", p)
        if p not in documented:
            missing.add(p)
    assert not missing, f"undocumented keys (add them to docs/report-json.md): {sorted(missing)}"


def test_time_keys_carry_units(doc):
    for p in set(_paths(doc)):
        leaf = p.rsplit(".", 1)[-1]
        if re.search(r"class_(totals_ns|gap_counts|idle_ns)\.", p):
            continue  # class labels ("dependency" holds "end"), not quantities
        if any(w in leaf for w in ("start", "end", "dur", "busy", "idle", "window", "lateness", "wall")):
            assert re.search(r"_(ns|share|count|indices|available)$", leaf) or leaf in ("gpu_busy_ns",), p


def test_text_renders_full_document(doc):
    out = io.StringIO()
    render_text(doc, make_console(out, width=120, color=False))
    text = out.getvalue()
    assert "recurs in 2 of 2 steps, 30.0 µs median, 60.0 µs total" in text
    assert "after [bold]gemm[/bold]" in text
    assert "attn\\e[2J" in text and "\x1b[2J" not in text
    assert "The host waited in aten::item for 30 µs [x]" in text
    assert "a faster [bold]gemm[/bold] kernel" in text
    assert "4 B pageable" in text
    row = [line for line in text.splitlines() if line.startswith("sync ")][-1]
    assert row.split() == ["sync", "0.030", "ms", "0.070", "ms", "14,286", "-"]
    assert "- launch tax stays [0.03 ms]" in text
    assert "line 7: [dur] negative duration [/] skipped" in text
    assert "0 of world size 2" in text and "NVIDIA H100 [80GB], 80.0 GiB" in text
    sync_row = next(line for line in text.splitlines() if line.strip().startswith("sync"))
    assert "0.060 ms" in sync_row and "60.0%" in sync_row


def test_markdown_renders_full_document(doc):
    md = render_markdown(doc)
    assert "| `[bold]gemm[/bold]` |" in md
    assert "### G0 `after [bold]gemm[/bold]`: recurs in 2 of 2 steps, 30.0 µs median" in md
    assert "| sync | 0.060 ms | 60.0% |" in md


def test_warnings_capped_in_text():
    b = TraceBuilder(path="w.json")
    lane = b.lane("1", "1")
    b.event(lane, "x", 0, 1, Kind.CPU_OP)
    for k in range(25):
        b.warn(k + 1, None, f"warning {k}")
    out = io.StringIO()
    render_text(build_document(b.build(), None), make_console(out, width=100, color=False))
    text = out.getvalue()
    assert "Warnings (25)" in text and "line 20: warning 19" in text and "warning 20" not in text
    assert "... and 5 more (all in --json)" in text


def test_lone_cards_skip_grouped_gaps_and_repeat_episodes():
    from gapscope.report.document import lone_gaps

    doc = {
        "top_gaps": [
            dict(index=i, group=gr, episode=ep)
            for i, (gr, ep) in zip((7, 3, 9, 1, 4, 8), ((0, -1), (-1, 2), (-1, 2), (-1, -1), (-1, 3), (-1, -1)))
        ]
    }
    assert [number for number, _ in lone_gaps(doc)] == [3, 1, 4]  # the gaps' own numbers


def test_json_writer_keeps_lone_surrogates_and_is_compact_off_a_terminal():
    from gapscope.report.cmd import write_json

    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8")
    write_json({"name": "k\ud800[x]µ", "n": [1, 2]}, out)
    data = raw.getvalue()
    assert data == '{"name":"k\\ud800[x]µ","n":[1,2]}\n'.encode()
    assert json.loads(data) == {"name": "k\ud800[x]µ", "n": [1, 2]}
    raw2 = io.BytesIO()
    out2 = io.TextIOWrapper(raw2, encoding="utf-8")
    write_json({"a": 1}, out2, indent=2)
    assert raw2.getvalue() == b'{\n  "a": 1\n}\n'


def test_json_escapes_c1_controls_and_bidi_overrides_but_keeps_values(tmp_path):
    """An 8-bit CSI (U+009B) or a bidi override in a kernel name must not reach the
    terminal raw through --json; the decoded value stays verbatim."""
    from gapscope.report import cmd as report_cmd

    name = "k\u009b31m\u202eevil"
    path = tmp_path / "c1.json"
    path.write_text(
        json.dumps(
            {
                "traceEvents": [
                    {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": 0, "dur": 5},
                    {"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, "ts": 20, "dur": 5},
                ]
            }
        ),
        encoding="utf-8",
    )
    out = io.StringIO()
    assert report_cmd.run([str(path), "--json"], stdout=out) == 0
    text = out.getvalue()
    assert "\u009b" not in text and "\u202e" not in text
    assert "\\u009b" in text and "\\u202e" in text
    assert name in json.dumps(json.loads(text), ensure_ascii=False)


def test_text_document_builds_only_the_group_cards_it_prints():
    """A card costs evidence ranking; a long trace has thousands of groups. The text
    and Markdown document (full=False) carries the GROUP_CARDS (3) cards they print,
    the JSON document GROUP_CARD_LIMIT."""
    t = two_step_trace()
    diag = FakeDiag(t)
    diag.groups = [dataclasses.replace(diag.groups[0], id=k) for k in range(5)]
    calls = []
    card = diag.card
    diag.card = lambda i: calls.append(i) or card(i)
    text_doc = build_document(t, diag, top_n=0, full=False)
    assert [g["card"] is not None for g in text_doc["groups"]] == [True, True, True, False, False]
    assert len(calls) == 3
    json_doc = build_document(t, diag, top_n=0, full=True)
    assert all(g["card"] is not None for g in json_doc["groups"]) and len(calls) == 3 + 5
