"""``gapscope diff BEFORE AFTER``: the seed's decode step vs its graph-captured version,
a trace diffed with itself, planted pairs (a gap removed, one shrunk, a new one,
kernel names with other template arguments), exit codes, and the real before/after
pairs of the corpus. Expected values are computed by hand from the timelines."""

from __future__ import annotations

import io
import json
import re

import numpy as np
import pytest

from gapscope import cli
from gapscope.analysis.card import card_for_group
from gapscope.diff import cmd as diff_cmd
from gapscope.diff.names import family

from .conftest import CORPUS, ROOT, SAMPLES, require
from .diff_planted import AFTER, BEFORE, GEMM_F, GEMM_H, SLOWER, kineto

STEP = SAMPLES / "decode_step.txt"
GRAPH = SAMPLES / "decode_graph.txt"
TEN = SAMPLES / "decode_10_steps.txt"


def run(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    rc = diff_cmd.run([*map(str, args), "--width", "120"], stdout=out)
    return rc, out.getvalue()


def doc_of(*args) -> dict:
    rc, text = run(*args, "--json")
    return json.loads(text)


def by_label(doc: dict, label: str) -> dict:
    (g,) = [g for g in doc["groups"] if g["label"] == label]
    return g


# ---------------------------------------------------------------- the seed, Part C
@pytest.fixture(scope="module")
def seed() -> dict:
    return doc_of(STEP, GRAPH)


def test_seed_step_busy_idle(seed):
    ps = seed["per_step"]
    # step 1.050 ms → 0.348 ms (CPU decode_step end; CPU step end)
    assert (ps["wall_ns"]["before_ns"], ps["wall_ns"]["after_ns"]) == (1_050_000, 348_000)
    # busy (0.410-0.258) + (0.590-0.430) = 0.312 ms → graph 0.340-0.012 = 0.328 ms
    assert (ps["gpu_busy_ns"]["before_ns"], ps["gpu_busy_ns"]["after_ns"]) == (312_000, 328_000)
    assert (ps["idle_ns"]["before_ns"], ps["idle_ns"]["after_ns"]) == (738_000, 20_000)
    assert ps["rate_key"] == "tokens_per_s"
    assert ps["tokens_per_s"]["before"] == pytest.approx(1e9 / 1_050_000)
    assert ps["tokens_per_s"]["after"] == pytest.approx(1e9 / 348_000)
    v = seed["verdict"]
    assert v["verdict"] == "faster" and v["speedup"] == pytest.approx(1050 / 348)
    # one step each: no spread, the noise is 1% of the 1.050 ms step
    assert v["noise_ns"] == 10_500 and v["change_ns"] == -702_000
    assert v["line"] == (
        "faster: step 1.050 → 0.348 ms, 3.0× shorter (−0.702 ms; noise ±10.5 µs) — with care: "
        "kernels inside a graph not recorded"
    )
    assert seed["kernels"]["sentence"] == (
        "GPU busy 0.312 → 0.328 ms: the kernels did not get faster; the step is "
        "3.0× shorter because idle fell from 0.738 to 0.020 ms"
    )


def test_seed_smells_died_and_what_is_left(seed):
    assert seed["group_counts"] == dict(died=2, shrank=0, grew=0, appeared=1, unchanged=0)
    assert seed["group_change_ns"] == dict(died=-738_000, shrank=0, grew=0, appeared=20_000, unchanged=0)
    # the host+sync stretch: attention end 0.590 → step end 1.050 (0.460) + step start → matmul 0.258
    stretch = by_label(seed, "attention → matmul")
    b = stretch["before"]
    assert stretch["status"] == "died" and stretch["after"] is None
    assert b["boundary"] and b["idle_per_step_ns"] == 718_000
    assert (b["leading_ns"], b["trailing_ns"]) == (258_000, 460_000)
    # tensor.item() 0.090-0.250 blocks for 0.160 ms of it: sync is the secondary class
    assert b["cause"] == "host" and b["secondary"] == "sync"
    assert b["secondary_share"] == pytest.approx(160_000 / 718_000)
    # the 20 µs launch gap matmul end 0.410 → attention start 0.430
    launch = by_label(seed, "matmul → attention")
    assert launch["status"] == "died" and launch["before"]["idle_per_step_ns"] == 20_000
    assert launch["before"]["cause"] == "launch"
    # what remains: 12 µs until the graph starts (its launch) and 8 µs after it ends (its tail)
    left = seed["left"]
    p = left["position"]
    assert left["status"] == "appeared" and p["label"] == "graph → graph" and p["boundary"]
    assert (p["idle_per_step_ns"], p["leading_ns"], p["trailing_ns"]) == (20_000, 12_000, 8_000)
    assert p["launch_name"] == "launch fused decode graph"
    assert (
        "12.0 µs from the step start until `graph` starts (launched by `launch fused decode graph`), "
        "8.0 µs from the end of `graph` to the step end"
    ) in left["line"]
    assert left["card"]["smell"] and left["card"]["why"]


def test_seed_comparability_names_the_graph(seed):
    comp = seed["comparability"]
    assert comp["comparable"] and comp["common_kernel_share"] == 0.0
    notes = " ".join(comp["notes"])
    assert "only in BEFORE: `attention`, `matmul`; only in AFTER: `graph`" in notes
    assert "captured graph (`launch fused decode graph`)" in notes
    assert "only GPU busy in total (about the same: 1.05×)" in notes  # 0.328 / 0.312
    assert comp["caveats"] == ["kernels inside a graph not recorded"]
    assert seed["after"]["graph_launches"] == ["launch fused decode graph"]


def test_seed_text_and_markdown_read_the_same_figures(seed):
    rc, text = run(STEP, GRAPH)
    assert rc == 0
    assert seed["verdict"]["line"] in " ".join(text.split())
    assert "the kernels did not get faster" in text
    rows = [ln.split(None, 1)[1] for ln in text.splitlines() if ln.startswith(("died", "appeared"))]
    assert [r.split()[:4] for r in rows] == [
        ["attention", "→", "matmul", "boundary"],
        ["matmul", "→", "attention", "39%"],
        ["graph", "→", "graph", "boundary"],
    ]
    assert "host, sync 22% → -" in rows[0] and rows[0].endswith("0.718 ms → -  −0.718 ms")
    assert rows[1].endswith("20.0 µs → -   −20.0 µs") and rows[2].endswith("- → 20.0 µs   +20.0 µs")
    step_row = next(ln for ln in text.splitlines() if ln.startswith("step wall time"))
    assert step_row.split() == ["step", "wall", "time", "1.050", "ms", "0.348", "ms", "−0.702", "ms", "0.33×"]
    tok = next(ln for ln in text.splitlines() if ln.startswith("tokens/s"))
    assert tok.split() == ["tokens/s", "952", "2,874", "+1,921", "3.02×"]
    rc, md = run(STEP, GRAPH, "--markdown")
    assert rc == 0
    assert md.startswith("# gapscope diff: `")
    assert "**Verdict:** faster: step 1.050 → 0.348 ms, 3.0× shorter" in md
    assert "| **died** | `attention → matmul` (step boundary) | host, sync 22% → - | 0.718 ms → - | −0.718 ms |" in md
    assert "## What is left: `graph → graph`" in md


# ---------------------------------------------------------------- a trace with itself
@pytest.mark.parametrize("path", [STEP, TEN])
def test_self_diff_is_all_unchanged(path):
    doc = doc_of(path, path)
    assert doc["verdict"]["verdict"] == "no change" and doc["verdict"]["change_ns"] == 0
    assert doc["groups"] and all(g["status"] == "unchanged" and g["change_ns"] == 0 for g in doc["groups"])
    assert all(g["match"] == "names" for g in doc["groups"])
    assert doc["comparability"]["notes"] == []
    assert doc["comparability"]["common_kernel_share"] == pytest.approx(1.0)
    rc, _ = run(path, path, "--fail-if-slower", "0")
    assert rc == 0


def test_ten_steps_leave_out_the_first(tmp_path):
    doc = doc_of(TEN, TEN)
    st = doc["before"]["steps"]
    assert (st["count"], st["steady_count"]) == (10, 9)
    assert st["excluded"][0]["index"] == 0
    # steps 2-10 of the file: 1056, 1039, 1042, 1045, 1448, 1051, 1034, 1057, 1053 µs → median 1.051 ms
    assert doc["per_step"]["wall_ns"]["before_ns"] == 1_051_000


def test_self_diff_of_a_real_trace():
    path = require(CORPUS / "kineto" / "resnet50_num_workers_0" / "worker0.1623143089861.pt.trace.json.gz")
    doc = doc_of(path, path)
    assert doc["verdict"]["verdict"] == "no change"
    assert {g["status"] for g in doc["groups"]} == {"unchanged"}
    assert doc["group_counts"]["unchanged"] == len(doc["groups"]) == doc["before"]["position_count"]


# ---------------------------------------------------------------- planted pairs
def test_family_drops_template_arguments_addresses_and_numbers():
    assert family(GEMM_F) == family(GEMM_H) == "gemm_kernel"
    assert (
        family("void at::native::vectorized_elementwise_kernel<4, AddFunctor<float>>(int, AddFunctor<float>)")
        == "at::native::vectorized_elementwise_kernel"
    )
    assert family("computeOffsetsKernel(ComputeOffsetsParams)") == family("computeOffsetsKernel")
    assert family("sm80_xmma_gemm_128x64_nn") == family("sm90_xmma_gemm_64x64_nn") == "sm#_xmma_gemm_#x#_nn"
    assert family("Memcpy HtoD (Pageable -> Device)") == "Memcpy HtoD"
    assert family("operator<<") == "operator<<" and family("") == ""


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    d = tmp_path_factory.mktemp("planted")
    return dict(
        before=kineto(d / "before.json", BEFORE),
        after=kineto(d / "after.json", AFTER),
        slower=kineto(d / "slower.json", SLOWER, step_us=1100),
        dir=d,
    )


def test_planted_removed_shrunk_new_and_renamed(planted):
    doc = doc_of(planted["before"], planted["after"])
    rows = {
        (g["status"], (g["before"] or g["after"])["prev_family"], (g["before"] or g["after"])["next_family"]): g
        for g in doc["groups"]
    }
    assert sorted(rows) == [
        ("appeared", "softmax_kernel", "bias_add_kernel"),
        ("died", "gemm_kernel", "relu_kernel"),
        ("shrank", "relu_kernel", "softmax_kernel"),
        ("unchanged", "softmax_kernel", "gemm_kernel"),
    ]
    # gap A: gemm end 210 → relu start 260 µs, gone (relu runs right after gemm)
    died = rows[("died", "gemm_kernel", "relu_kernel")]
    assert died["before"]["idle_per_step_ns"] == 50_000 and died["before"]["cause"] == "host"
    assert died["before"]["prev_name"] == GEMM_F
    # gap B: relu end 460 → softmax 490 (30 µs) becomes 410 → 420 (10 µs)
    shrank = rows[("shrank", "relu_kernel", "softmax_kernel")]
    assert (shrank["before"]["idle_per_step_ns"], shrank["after"]["idle_per_step_ns"]) == (30_000, 10_000)
    assert shrank["match"] == "names" and shrank["change_ns"] == -20_000
    # gap D: softmax end 920 → bias_add 960 (40 µs), new
    new = rows[("appeared", "softmax_kernel", "bias_add_kernel")]
    assert new["after"]["idle_per_step_ns"] == 40_000 and new["before"] is None
    # the step boundary: last kernel end 990 → next step's gemm at +10: 20 µs in both;
    # its previous kernel changed (softmax → bias_add), so it matches by one neighbour
    edge = rows[("unchanged", "softmax_kernel", "gemm_kernel")]
    assert edge["after"]["prev_family"] == "bias_add_kernel" and edge["match"] == "one neighbour"
    assert edge["before"]["boundary"] and edge["after"]["boundary"]
    # per steady step (steps 1-5; each crossing split over the two steps it spans, 10 µs
    # each): the last step's 10 µs tail is the capture's edge, in no position (issue 47):
    # (4 x 20 + 10) / 5 = 18 µs
    assert edge["before"]["idle_per_step_ns"] == edge["after"]["idle_per_step_ns"] == (4 * 20 + 10) * 1000 // 5
    # the gemm kernels with other template arguments are one family in the busy table
    fams = {r["family"]: r for r in doc["kernels"]["families"]}
    assert (fams["gemm_kernel"]["before_ns"], fams["gemm_kernel"]["after_ns"]) == (200_000, 200_000)
    assert (fams["bias_add_kernel"]["before_ns"], fams["bias_add_kernel"]["after_ns"]) == (0, 30_000)
    ps = doc["per_step"]
    assert (ps["steps_before"], ps["steps_after"]) == (5, 5)  # 6 steps, the first is warm-up
    assert (ps["wall_ns"]["before_ns"], ps["wall_ns"]["after_ns"]) == (1_000_000, 1_000_000)
    assert (ps["gpu_busy_ns"]["before_ns"], ps["gpu_busy_ns"]["after_ns"]) == (900_000, 930_000)
    assert (ps["idle_ns"]["before_ns"], ps["idle_ns"]["after_ns"]) == (100_000, 70_000)
    assert doc["verdict"]["verdict"] == "no change"
    assert doc["kernels"]["sentence"] == (
        "GPU busy 0.900 → 0.930 ms: new kernels (`bias_add_kernel`) added GPU "
        "work, but idle fell from 0.100 to 0.070 ms: the step did not change"
    )
    assert doc["left"]["position"]["next_family"] == "bias_add_kernel"


def test_planted_slower_and_fail_if_slower(planted):
    doc = doc_of(planted["before"], planted["slower"])
    v = doc["verdict"]
    # gap B grew by 100 µs in every step: 1.000 → 1.100 ms; no spread, noise = 1% = 10 µs
    assert v["verdict"] == "slower" and v["change_ns"] == 100_000 and v["noise_ns"] == 10_000
    assert v["line"] == "slower: step 1.000 → 1.100 ms, 10.0% longer (+0.100 ms; noise ±10.0 µs)"
    grew = [g for g in doc["groups"] if g["status"] == "grew"]
    assert [(g["before"]["idle_per_step_ns"], g["after"]["idle_per_step_ns"]) for g in grew] == [(30_000, 130_000)]
    assert doc["kernels"]["sentence"].startswith("GPU busy 0.900 → 0.900 ms: the kernels did not get slower")
    # limit = 10 µs noise + PCT % of 1.000 ms: 8% → 90 µs (fails), 9% → 100 µs (passes: not more than)
    for pct, rc_want in (("5", 1), ("8", 1), ("9", 0), ("20", 0)):
        rc, _ = run(planted["before"], planted["slower"], "--fail-if-slower", pct)
        assert rc == rc_want, pct
    d = doc_of(planted["before"], planted["slower"], "--fail-if-slower", "8")
    assert d["check"] == dict(
        pct=8.0,
        limit_ns=90_000,
        failed=True,
        line="FAILED: step +10.0% (+0.100 ms); the limit is 8% + noise = +90.0 µs",
    )
    # faster is never a failure
    rc, _ = run(planted["slower"], planted["before"], "--fail-if-slower", "0")
    assert rc == 0


def test_steps_that_separate_are_beyond_noise(tmp_path):
    """AFTER's steady steps vary by ±0.2 ms (noise 0.6 ms), but each is slower than
    every BEFORE step: the +0.5 ms median change is a slowdown."""
    lengths = [1000, 1100, 1500, 1110, 1600, 1700]  # steady: 1100 1500 1110 1600 1700 → median 1500, MAD 200
    before = kineto(tmp_path / "b.json", BEFORE)
    after = kineto(tmp_path / "a.json", BEFORE, step_us_of=lambda k: lengths[k])
    v = doc_of(before, after)["verdict"]
    assert (v["change_ns"], v["noise_ns"], v["margin_ns"]) == (500_000, 600_000, 10_000)
    assert v["verdict"] == "slower" and v["separated"]
    assert "every one of the 5 AFTER steps is slower than all 5 BEFORE steps" in v["line"]


def test_unrelated_traces_get_no_verdict(planted, tmp_path):
    other = kineto(tmp_path / "other.json", [("void conv2d_kernel<float>(float*)", 0, 10, 900, None)])
    doc = doc_of(planted["before"], other)
    assert doc["verdict"]["verdict"] == "not comparable" and not doc["comparability"]["comparable"]
    assert doc["verdict"]["line"].startswith("no verdict: the traces do not look like the same program: only 0%")
    # a graph-captured step against unrelated GPU work of another size: no verdict either
    graph = doc_of(GRAPH, SAMPLES / "dataloader_stall.txt")
    assert graph["verdict"]["verdict"] == "not comparable"
    assert doc["kernels"]["sentence"].startswith("GPU busy 0.900 → 0.890 ms; idle")
    out, err = io.StringIO(), io.StringIO()
    import contextlib

    with contextlib.redirect_stderr(err):
        rc = diff_cmd.run([str(planted["before"]), str(other), "--fail-if-slower", "0"], stdout=out)
    assert rc == 0 and "gapscope: warning: --fail-if-slower not checked: no verdict" in err.getvalue()


def test_different_gpu_and_step_count_are_stated(planted, tmp_path):
    other = kineto(tmp_path / "a100.json", BEFORE, steps=9, gpu="NVIDIA A100-SXM4-80GB")
    notes = doc_of(planted["before"], other)["comparability"]["notes"]
    assert any(
        n.startswith("different GPU: BEFORE ran on NVIDIA H100") and "AFTER on NVIDIA A100-SXM4-80GB" in n
        for n in notes
    )
    assert doc_of(planted["before"], other)["verdict"]["line"].endswith(" — with care: different GPU")
    assert "different step count: 5 steady step(s) in BEFORE, 8 in AFTER (every figure is per step)" in notes


def test_no_gpu_kernels_in_one_trace(tmp_path, planted):
    cpu = tmp_path / "cpu.json"
    cpu.write_text(
        json.dumps(
            {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1, "dur": 5}]}
        )
    )
    doc = doc_of(planted["before"], cpu)
    assert doc["verdict"]["verdict"] == "not comparable"
    assert doc["comparability"]["reason"] == "no GPU kernels in AFTER: nothing to compare"
    assert doc["left"] is None


# ---------------------------------------------------------------- exit codes and errors
def test_exit_codes_through_the_cli(planted, capsys):
    b, s = str(planted["before"]), str(planted["slower"])
    assert cli.main(["diff", b, b, "--json"]) == 0
    assert cli.main(["diff", b, s, "--fail-if-slower", "5", "--json"]) == 1
    assert cli.main(["diff", s, b, "--fail-if-slower", "5", "--json"]) == 0
    capsys.readouterr()
    bad = planted["dir"] / "bad.json"
    bad.write_text('{\n "traceEvents": [ {"ph": "X", bad')
    assert cli.main(["diff", str(bad), b]) == 2
    err = capsys.readouterr().err.strip()
    assert re.fullmatch(rf"gapscope: error: {re.escape(str(bad))}:2:\d+: .+", err), err
    assert cli.main(["diff", b, str(planted["dir"] / "missing.json")]) == 2
    assert capsys.readouterr().err.startswith(f"gapscope: error: {planted['dir'] / 'missing.json'}")
    assert cli.main(["diff", b]) == 2
    assert "AFTER" in capsys.readouterr().err
    assert cli.main(["diff", b, b, "--fail-if-slower", "-1"]) == 2
    assert "--fail-if-slower must be a finite percentage" in capsys.readouterr().err
    assert cli.main(["diff", "--help"]) == 0
    help_text = capsys.readouterr().out
    assert "--fail-if-slower PCT" in help_text and "--min-gap-us" in help_text
    assert "diff" in cli.usage()


def test_thresholds_reach_both_diagnoses(planted):
    # with a 40 µs minimum gap only gap A (50 µs) is a gap in BEFORE, only D (40 µs) in AFTER
    doc = doc_of(planted["before"], planted["after"], "--min-gap-us", "40")
    assert doc["params"]["min_gap_ns"] == 40_000
    assert sorted(g["status"] for g in doc["groups"]) == ["appeared", "died"]


# ---------------------------------------------------------------- the JSON document
def _paths(obj, prefix=""):
    if isinstance(obj, dict):
        for k, v in obj.items():
            p = f"{prefix}.{k}" if prefix else k
            yield p
            yield from _paths(v, p)
    elif isinstance(obj, list):
        for v in obj:
            yield from _paths(v, prefix + "[]")


def test_every_key_is_documented(planted):
    text = (ROOT / "docs" / "diff-json.md").read_text()
    documented = set(re.findall(r"^\| `([^`]+)` \|", text, flags=re.M))
    docs = [doc_of(STEP, GRAPH, "--fail-if-slower", "5"), doc_of(TEN, TEN), doc_of(planted["before"], planted["after"])]
    missing = set()
    for doc in docs:
        for p in set(_paths(doc)):
            if p.startswith(("left.card.", "params.", "group_change_ns.")) or re.match(
                r"per_step\.idle_by_class_ns\.", p
            ):
                continue  # the report's card and Params keys; class rows keyed by label
            p = re.sub(r"^(groups\[\]\.(before|after)|left\.position)\.", "position.", p)
            p = re.sub(r"^per_step\.(wall_ns|gpu_busy_ns|idle_ns)\.", "row.", p)
            p = re.sub(r"^after\.", "before.", p)
            p = re.sub(r"^per_step\.steps_per_s\.", "per_step.tokens_per_s.", p)
            if p not in documented:
                missing.add(p)
    assert not missing, f"undocumented keys (add them to docs/diff-json.md): {sorted(missing)}"


def test_class_rows_follow_cause(seed):
    from gapscope.analysis.types import Cause

    assert list(seed["per_step"]["idle_by_class_ns"]) == [c.label for c in Cause]
    cls = seed["per_step"]["idle_by_class_ns"]
    # decode step: sync 0.160 (tensor.item()), launch 0.028, host 0.550 ms; graph: host 8 µs, and the
    # 12 µs launch of the graph before it starts is launch (what remains at batch 1)
    assert {k: (r["before_ns"], r["after_ns"]) for k, r in cls.items() if r["before_ns"] or r["after_ns"]} == {
        "sync": (160_000, 0),
        "launch": (28_000, 12_000),
        "host": (550_000, 8_000),
    }


# ---------------------------------------------------------------- real pairs
def test_resnet_dataloader_fix():
    """num_workers=0 → 4: the data-loading stalls under enumerate(DataLoader) shrink,
    the step is 1.4× shorter, and GPU busy did not fall."""
    b = require(CORPUS / "kineto" / "resnet50_num_workers_0" / "worker0.1623143089861.pt.trace.json.gz")
    a = require(CORPUS / "kineto" / "resnet50_num_workers_4" / "worker0.1623212756351.pt.trace.json.gz")
    from gapscope import parsers
    from gapscope.analysis import diagnose

    doc = doc_of(b, a)
    v = doc["verdict"]
    assert v["verdict"] == "faster" and 1.3 < v["speedup"] < 1.5
    # cross-check: the median of the steps 2..6 of each diagnosis
    for path, key in ((b, "before_ns"), (a, "after_ns")):
        steps = diagnose(parsers.load(path)).steps
        assert doc["per_step"]["wall_ns"][key] == int(np.median((steps.end_ns - steps.start_ns)[1:]))
    assert doc["kernels"]["sentence"].startswith("GPU busy 96.925 → 98.754 ms: the kernels did not get faster")
    before_diag = diagnose(parsers.load(b))
    big = [g for g in doc["groups"] if g["before"] and g["before"]["idle_per_step_ns"] > 10_000_000]
    assert len(big) == 2 and all(g["status"] in ("shrank", "died") for g in big)
    for g in big:
        assert "enumerate(DataLoader)" in card_for_group(before_diag, g["before"]["ref"]).why
        assert (g["after"]["idle_per_step_ns"] if g["after"] else 0) < g["before"]["idle_per_step_ns"] / 50
    cls = doc["per_step"]["idle_by_class_ns"]
    assert cls["host"]["after_ns"] < cls["host"]["before_ns"] / 2
    assert doc["comparability"]["notes"] == []


def test_kineto_ordering_fix_one_kernel_is_no_step():
    # each trace holds one 20 ns kernel and no steps: its duration is not a step, so no
    # "no change beyond noise, 50,000,000 steps/s" (issue 42)
    b = require(CORPUS / "kineto" / "before_fix_trace.json")
    a = require(CORPUS / "kineto" / "after_fix_trace.json")
    doc = doc_of(b, a)
    assert doc["verdict"]["verdict"] == "cannot judge" and doc["verdict"]["change_ns"] is None
    assert not doc["judgement"]["judged"] and len(doc["judgement"]["reasons"]) == 2
    assert "the GPU window holds 1 GPU op" in doc["verdict"]["line"]
    assert doc["per_step"]["wall_ns"]["before_ns"] is None and doc["per_step"]["steps_per_s"]["before"] is None
    assert [e["index"] for e in doc["before"]["steps"]["incomplete"]] == [0]
    # nor a steady-state step on either side for the findings to compare (issue 47)
    assert not doc["findings"]["before_steady_state"] and not doc["findings"]["after_steady_state"]


def test_hta_trace_diff_pair():
    b = require(CORPUS / "hta" / "control.json.gz")
    a = require(CORPUS / "hta" / "test.json.gz")
    doc = doc_of(b, a)
    notes = doc["comparability"]["notes"]
    assert any(n.startswith("different GPU: BEFORE ran on NVIDIA A100-PG509-200") for n in notes)
    assert "different rank: BEFORE rank 3 of 8, AFTER rank 1 of 2" in notes
    v = doc["verdict"]
    assert doc["comparability"]["comparable"] and v["verdict"] == "slower" and v["separated"]
    assert doc["comparability"]["caveats"] == ["different GPU", "different world size", "different kernel mix"]
    assert v["line"].endswith(" — with care: different GPU, different world size, different kernel mix")
    rc, _ = run(b, a, "--fail-if-slower", "10")
    assert rc == 1


# ---------------------------------------------------------------- vectorised helpers
from hypothesis import given, settings
from hypothesis import strategies as st


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 4)), max_size=40))
def test_per_group_mode_and_median_match_a_slow_reference(pairs):
    from collections import Counter

    from gapscope.diff.side import _median_per_group, _mode_per_group

    g = np.array([p[0] for p in pairs], np.int64)
    v = np.array([p[1] for p in pairs], np.int64)
    mode, med = _mode_per_group(g, v, 6), _median_per_group(g, v, 6)
    for k in range(6):
        vals = [b for a, b in pairs if a == k]
        if not vals:
            assert mode[k] == -1 and np.isnan(med[k])
            continue
        c = Counter(vals)
        best = max(c.values())
        assert mode[k] == min(x for x, n in c.items() if n == best)
        assert med[k] == pytest.approx(float(np.median(vals)))
