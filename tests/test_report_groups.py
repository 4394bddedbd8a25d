"""The text report lists the ``--top`` largest recurring groups and sums up the rest in
one line (count, idle they hold, its share of the idle in gaps, the largest of them);
``--json`` keeps every group."""

from __future__ import annotations

import io
import json

from gapscope.report import cmd as report_cmd
from gapscope.report.panels import groups_section
from gapscope.report.text import make_console

from .conftest import CORPUS, require

MS = 1_000_000


def _doc(n: int) -> dict:
    """``n`` groups holding n, n-1, …, 1 ms of idle; 200 ms of idle in gaps in all."""
    groups = [
        dict(
            id=k,
            label=f"k{k} → k{k + 1}",
            steps_with_gap=4,
            steps_total=5,
            median_ns=(n - k) * MS // 4,
            total_ns=(n - k) * MS,
            cause="host",
            card=None,
        )
        for k in range(n)
    ]
    return dict(groups=groups, idle_in_gaps_ns=200 * MS)


def _render(doc: dict, top: int) -> list[str]:
    buf = io.StringIO()
    groups_section(doc, make_console(buf, width=100, color=False), top)
    return [ln.rstrip() for ln in buf.getvalue().splitlines()]


def test_top_groups_then_one_line_for_the_rest():
    lines = _render(_doc(15), top=10)
    assert lines[1] == "Recurring gaps (15 groups by position in the step, largest total first)"
    # the 3 largest as cards (here without a card: one line each), the next 7 in a table
    assert [ln.split(" ", 1)[0] for ln in lines[2:5]] == ["G0", "G1", "G2"]
    assert lines[5] == "The next 7 groups (cards in --json):"
    assert [ln.split()[0] for ln in lines[7:14]] == [f"G{k}" for k in range(3, 10)]
    # G10..G14 hold 5+4+3+2+1 = 15 ms of the 200 ms: 7.5%; the largest of them 5 ms
    assert lines[14:] == [
        "… and 5 more groups (in --json): 15.000 ms of idle (7.5% of gap idle), at most 5.000 ms each"
    ]


def test_top_smaller_than_the_cards_and_zero():
    lines = _render(_doc(4), top=2)
    assert [ln.split(" ", 1)[0] for ln in lines[2:4]] == ["G0", "G1"]
    # G2, G3 hold 2 + 1 ms
    assert lines[4:] == ["… and 2 more groups (in --json): 3.000 ms of idle (1.5% of gap idle), at most 2.000 ms each"]
    assert _render(_doc(4), top=0)[2:] == [
        "4 groups (in --json): 10.000 ms of idle (5.0% of gap idle), at most 4.000 ms each"
    ]
    assert _render(_doc(4), top=4)[2:][-1].startswith("G3 ")  # all shown: no summary line


def test_resnet_report_respects_top():
    """resnet50 worker0 has 1,067 recurring groups (1,021 before its 309 sub-µs kernels
    written as ``dur: 0`` split the gaps they sit in): the text lists --top of them,
    the JSON all of them."""
    path = require(CORPUS / "kineto" / "resnet50_num_workers_0" / "worker0.pt.trace.json.gz")

    def run(*args):
        out = io.StringIO()
        assert report_cmd.run([str(path), "--width", "100", *args], stdout=out) == 0
        return out.getvalue()

    doc = json.loads(run("--json"))
    assert len(doc["groups"]) == 1067
    rest_ns = sum(g["total_ns"] for g in doc["groups"][10:])
    from gapscope.report.fmt import fmt_dur, fmt_share

    for args, shown in (((), 10), (("--top", "5"), 5)):
        text = run(*args)
        section = text.split("Recurring gaps")[1].split("\n\n")[0]
        ids = {w for ln in section.splitlines() for w in ln.split()[:3] if w[:1] == "G" and w[1:].isdigit()}
        assert ids == {f"G{g['id']}" for g in doc["groups"][:shown]}
        assert f"… and {1067 - shown:,} more groups (in --json)" in section
    line = next(ln for ln in run().splitlines() if ln.startswith("… and 1,057 more groups"))
    assert f"{fmt_dur(rest_ns)} of idle ({fmt_share(rest_ns, doc['idle_in_gaps_ns'])} of gap idle)" in line
    assert len(run().splitlines()) < 400


def test_what_if_rates_have_the_baseline_precision():
    """resnet50's figures: a 211.707 ms step is 4.72 steps/s; removing 101.347 ms of it
    leaves 110.360 ms, 9.06 steps/s (both rows and the baseline with two decimals)."""
    from gapscope.report.panels import budget_section

    base = dict(wall_ns=211_707_000, steps_per_s=1e9 / 211_707_000, tokens_per_s=None, decode=False)
    whatifs = [
        dict(
            removed_causes=["sync"],
            removed_ns=36_000,
            projected_step_ns=211_671_000,
            steps_per_s=1e9 / 211_671_000,
            tokens_per_s=None,
            speedup=211_707 / 211_671,
            assumptions=[],
        ),
        dict(
            removed_causes=["sync", "copy", "host"],
            removed_ns=101_347_000,
            projected_step_ns=110_360_000,
            steps_per_s=1e9 / 110_360_000,
            tokens_per_s=None,
            speedup=211_707 / 110_360,
            assumptions=[],
        ),
    ]
    doc = dict(steps=dict(count=6, source="ProfilerStep", name="ProfilerStep#1"), budget=base, what_if=whatifs)
    buf = io.StringIO()
    budget_section(doc, make_console(buf, width=100, color=False))
    lines = [ln.rstrip() for ln in buf.getvalue().splitlines()]
    assert "Steps/s         4.72" in lines
    assert lines[lines.index("What if these gaps were removed (per step)") + 2 :][:2] == [
        "sync                0.036 ms  211.671 ms     4.72     1.00x",
        "sync+copy+host    101.347 ms  110.360 ms     9.06     1.92x",
    ]


def test_what_if_rates_in_markdown_on_resnet():
    """The Markdown what-if table carries steps/s with two decimals, like the baseline."""
    path = require(CORPUS / "kineto" / "resnet50_num_workers_0" / "worker0.pt.trace.json.gz")
    out = io.StringIO()
    assert report_cmd.run([str(path), "--markdown"], stdout=out) == 0
    md = out.getvalue().splitlines()
    rows = md[md.index("What if these gaps were removed (per step):") + 4 :]
    rows = rows[: rows.index("")]
    assert len(rows) == 5
    for row in rows:
        step_ms, rate = (c.strip() for c in row.split("|")[3:5])
        # the rate is 1 / projected step: 211.707 ms -> 4.72, 110.396 ms -> 9.06
        assert rate == f"{1000 / float(step_ms.split()[0]):.2f}", row


def test_fmt_rate():
    from gapscope.units import fmt_rate

    assert [fmt_rate(x) for x in (4.7235, 9.0613, 99.994, 952.38, 2874.2, None)] == [
        "4.72",
        "9.06",
        "99.99",
        "952",
        "2,874",
        "-",
    ]
    # below 1/s two significant digits, never "0": mtia_rank_0's 13.336 s step is
    # 1 / 13.336 = 0.07499 steps/s; 1 / 2 s = 0.50
    assert [fmt_rate(x) for x in (1e9 / 13_336_000_000, 0.5, 0.001234)] == ["0.075", "0.50", "0.0012"]


def test_cause_table_of_a_nine_second_trace():
    """The 1M-event bench trace's figures: 2.317 s of idle in gaps, 13.151 ms of it sync."""
    from gapscope.report.text import _class_totals

    totals = dict(sync=13_151_000, copy=597_473_000, launch=136_194_000, host=1_546_856_000, unclassified=23_034_000)
    doc = dict(
        class_totals_ns=totals,
        params=dict(min_gap_ns=2_000),
        gap_count=21_670,
        class_gap_counts=dict(sync=43, copy=6_146, launch=7_025, host=4_404, unclassified=4_052),
        devices=[dict(device=0, idle_ns=2_318_496_000)],
    )
    buf = io.StringIO()
    _class_totals(doc, make_console(buf, width=120, color=False))
    lines = [ln.rstrip() for ln in buf.getvalue().splitlines()]
    # 13.151 ms of 2316.708 ms = 0.57%; 2318.496 - 2316.708 = 1.788 ms
    assert lines[3] == "sync           13.151 ms    0.6%              43"
    assert lines[8] == "total            2.317 s  100.0%          21,670"
    assert " ".join(lines[9:]).endswith("; 1.788 ms more idle in stretches shorter than the minimum gap")


def test_markdown_sums_up_the_groups_it_leaves_out():
    """rank0: Markdown shows 3 group cards and up to 30 table rows (``--top 50``); the
    line after the table says how many groups are left and how much idle they hold."""
    from gapscope.report.fmt import GROUP_CARDS, MD_GROUP_ROWS, fmt_dur, fmt_share

    path = require(CORPUS / "hta" / "rank0.json.gz")

    def run(*args):
        out = io.StringIO()
        assert report_cmd.run([str(path), *args], stdout=out) == 0
        return out.getvalue()

    doc = json.loads(run("--json"))
    left = doc["groups"][GROUP_CARDS + MD_GROUP_ROWS :]
    left_ns = sum(g["total_ns"] for g in left)
    (line,) = [ln for ln in run("--markdown", "--top", "50").splitlines() if ln.startswith("… and ") and "groups" in ln]
    assert line == (
        f"… and {len(left):,} more groups (in --json): {fmt_dur(left_ns)} of idle "
        f"({fmt_share(left_ns, doc['idle_in_gaps_ns'])} of gap idle), "
        f"at most {fmt_dur(max(g['total_ns'] for g in left))} each"
    )


def test_top_limits_every_list_and_counts_what_it_leaves_out():
    """issue 18 items 5 and 7: ``--top 3`` on rank0 shows 3 gaps, 3 group cards, no
    group table and 3 of the 33 picket-fence episodes, each list followed by a line
    with what was left out; no ``-1`` sentinel anywhere (JSON: null)."""
    from gapscope.report.fmt import fmt_dur

    path = require(CORPUS / "hta" / "rank0.json.gz")

    def run(*args):
        out = io.StringIO()
        assert report_cmd.run([str(path), *args], stdout=out) == 0
        return out.getvalue()

    doc = json.loads(run("--json"))
    eps = doc["episodes"]
    assert len(eps) == 33
    assert any(e["median_launch_ns"] is None for e in eps)
    assert all(e["median_launch_ns"] is None or e["median_launch_ns"] >= 0 for e in eps)
    for args in (("--markdown",), ()):
        text = run(*args, "--top", "3")
        assert "-1 ns" not in text and "-1ns" not in text
        assert "more recurring group" not in text and "The next" not in text
        left_ep_ns = sum(e["idle_ns"] for e in eps[3:])
        assert f"… and 30 more episodes: {fmt_dur(left_ep_ns)} of idle (all in --json)" in text
        assert f"… and {doc['gap_count'] - 3:,} more gaps: " in text
    md = run("--markdown", "--top", "3")
    assert len(md.splitlines()) < 160  # the verdict and the findings table lead (issue 47)
    rows = [ln for ln in md.split("## Picket-fence episodes")[1].split("##")[0].splitlines() if ln.startswith("| 0 ")]
    assert len(rows) == 3
