"""Diagnosis of the bundled ASCII exercise timelines (``sample_traces/``), exactly as
the seeds' exercises state them."""

from __future__ import annotations

import pytest

from gapscope.analysis import Cause, diagnose
from gapscope.analysis.card import card_for_gap, card_for_group
from gapscope.parsers import load
from tests.conftest import SAMPLES

US = 1_000


def _diag(name):
    return diagnose(load(SAMPLES / name))


def test_decode_step_sample():
    d = _diag("decode_step.txt")
    g = d.gaps
    assert g.dur_ns.tolist() == [258 * US, 20 * US, 460 * US]
    assert Cause(g.cause[1]) == Cause.LAUNCH  # 0.020 ms before attention
    big = d.groups[0]
    assert big.label == "attention → matmul" and big.median_ns == 718 * US
    card = card_for_group(d, big.id)
    assert card.cause == Cause.HOST and card.secondary == Cause.SYNC
    assert card.secondary_share == pytest.approx(160 / 718)
    assert "logging callback" in card.why and "tensor.item()" in card.why
    assert "uninstrumented" in card.why
    for text in (card.why, card.first_experiment, card.forbidden_step, card.proof):
        assert "matmul" not in text and "attention" not in text
    assert round(d.budget.tokens_per_s) == 952
    assert d.budget.gpu_busy_ns == 312 * US
    w = d.what_if(names=("tensor.item()", "logging callback"))
    assert (w.removed_ns, w.projected_step_ns, round(w.tokens_per_s)) == (450 * US, 600 * US, 1667)
    assert len(w.assumptions) >= 5


def test_decode_graph_sample():
    d = _diag("decode_graph.txt")
    assert d.total_idle_ns() == 20 * US
    assert round(d.budget.tokens_per_s) == 2874


@pytest.mark.parametrize(
    "name, cause, smell",
    [
        ("picket_fence.txt", Cause.LAUNCH, "picket fence"),
        ("host_island.txt", Cause.HOST, "host island"),
        ("copy_on_path.txt", Cause.COPY, "copy on the path"),
        ("sync_cliff.txt", Cause.SYNC, "sync cliff"),
    ],
)
def test_four_smells(name, cause, smell):
    d = _diag(name)
    totals = d.class_totals_ns()
    assert max(totals, key=lambda c: (totals[c], -int(c))) == cause
    top = int(d.order_by_size()[0])
    card = card_for_gap(d, top)
    assert card.cause == cause and card.smell == smell
    assert sum(totals.values()) == d.total_idle_ns()


def test_four_smells_one_each():
    causes = [
        max(t := _diag(n).class_totals_ns(), key=lambda c: t[c])
        for n in ("picket_fence.txt", "host_island.txt", "copy_on_path.txt", "sync_cliff.txt")
    ]
    assert sorted(causes) == [Cause.SYNC, Cause.COPY, Cause.LAUNCH, Cause.HOST]
