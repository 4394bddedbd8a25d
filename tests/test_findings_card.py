"""A finding's card fits the finding (the third audit of issue 43, defect 2): it is
the card of a typical member gap, nearest the idle-weighted median length of the
members of the finding's class (the fourth audit: by idle, not by count), whose card
tells the finding's class; never a one-time (warm-up)
gap's, a slow launch call's or a recurring position's one-off. When no member's card
fits, the finding shows no card and says why (``Finding.card_note``)."""

from __future__ import annotations

import numpy as np
import pytest

from gapscope.analysis import diagnose
from gapscope.analysis.findings import findings
from gapscope.analysis.types import Cause
from gapscope.parsers import load
from gapscope.parsers.builder import TraceBuilder
from gapscope.parsers.model import Kind

from .conftest import CORPUS, require

US = 1_000
STEPS = 6
#: launch calls per step, each ``CALL_US`` long, back to back from the step's start
CALLS = 9
CALL_US = 30
KERNEL_US = 4
#: step and call of the one slow launch call (a one-off), and its length
SLOW_STEP, SLOW_CALL, SLOW_US = 3, 4, 700


def _diag():
    """``STEPS`` steps on one thread. Step s: ``CALLS`` launch calls back to back, call j
    (``CALL_US`` µs, ``SLOW_US`` for call ``SLOW_CALL`` of step ``SLOW_STEP``) launching
    kernel j 1 µs after the call ends; kernels 0-7 last ``KERNEL_US`` µs, kernel 8 runs
    until the next step's first kernel (the last step's: 200 µs). So the gaps between
    kernels j and j+1 are ``CALL_US - KERNEL_US`` = 26 µs with the thread in the next
    launch call (launch), except the one before kernel ``SLOW_CALL`` in step
    ``SLOW_STEP``: ``SLOW_US - KERNEL_US`` = 696 µs, one slow call of a kernel that ran
    in every step before it."""
    b = TraceBuilder()
    t = b.lane("1", "1", process_name="python3", thread_name="main")
    g0 = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    calls = []  # (step, j, start_ns, dur_ns)
    at = 1000 * US
    for s in range(STEPS):
        for j in range(CALLS):
            call = (SLOW_US if (s, j) == (SLOW_STEP, SLOW_CALL) else CALL_US) * US
            calls.append((s, j, at, call))
            at += call
    first_kernel = {s: c[2] + c[3] + 1 * US for c in calls if c[1] == 0 for s in [c[0]]}
    for corr, (s, j, c0, call) in enumerate(calls, start=1):
        b.event(t, "cudaLaunchKernel", c0, call - 1 * US, Kind.LAUNCH, correlation=corr)
        k0 = c0 + call + 1 * US
        k1 = k0 + KERNEL_US * US if j < CALLS - 1 else first_kernel.get(s + 1, k0 + 200 * US)
        b.event(g0, f"k{j}", k0, k1 - k0, Kind.KERNEL, correlation=corr)
    for s in range(STEPS):
        s0 = min(c[2] for c in calls if c[0] == s)
        s1 = min((c[2] for c in calls if c[0] == s + 1), default=at + 300 * US)
        b.event(t, f"ProfilerStep#{s}", s0, s1 - s0, Kind.ANNOTATION)
    return diagnose(b.build())


def test_the_launch_finding_shows_a_typical_member_not_its_one_off():
    d = _diag()
    g = d.gaps
    f = next(x for x in findings(d).ranked if x.kind == "launch")
    # the one slow call's gap is the finding's largest member ...
    assert int(g.dur_ns[f.positions].max()) == (SLOW_US - KERNEL_US) * US
    slow = int(f.positions[np.argmax(g.dur_ns[f.positions])])
    # ... but its card is a typical 26 µs member's, which tells launch overhead
    assert f.card is not None and f.card_gap >= 0 and f.card_gap != slow
    assert int(g.dur_ns[f.card_gap]) == (CALL_US - KERNEL_US) * US
    assert f.card.cause == Cause.LAUNCH
    assert "slow launch" not in f.card.smell and "one-time" not in f.card.smell
    assert "one-off" not in f.card.why
    assert f.card_note == ""


def _one_offs(d) -> set[int]:
    return {int(i) for grp in d.groups for i in grp.one_offs.tolist()}


AUDITED = (
    ("tracelens/b200/eager_trace.json.gz", 1),
    ("extrap/ex-gpu.s10.sqlite", 1),
    ("hta/control.json.gz", 1),
)


@pytest.mark.parametrize("name,k", AUDITED, ids=[p.split("/")[1] for p, _ in AUDITED])
def test_audited_findings_cards_fit_their_finding(name, k):
    """b200 F2 (launch overhead) showed a one-time module-loading card, ex-gpu F2 (a
    sync cliff) a launch card, hta/control F2 (launch overhead) a one-off of one blocked
    cudaLaunchKernel. Every ranked finding with gaps: its card, if any, is of its class,
    of a gap neither one-time nor a one-off, and tells no one-time cost; without a card
    it says why."""
    d = diagnose(load(require(CORPUS / name)))
    found = findings(d)
    g = d.gaps
    once = _one_offs(d)
    for f in found.ranked:
        if f.positions.size == 0 or f.kind in ("communication", "unmeasurable"):
            continue
        if f.card is None:
            assert f.card_note or f.kind == "host", f.title
            continue
        assert f.card.cause == f.cause, f.title
        assert "one-time" not in f.card.smell and "slow launch" not in f.card.smell, f.title
        assert f.card_gap >= 0 and not bool(g.one_time[f.card_gap]) and f.card_gap not in once, f.title
        assert int(f.card_gap) in set(f.positions.tolist()), f.title
    f = found.ranked[k]
    assert f.card is None or f.card.cause == f.cause


def test_ex_gpu_sync_cliff_shows_no_launch_card_and_says_why():
    """ex-gpu's sync cliff at ``cudaDeviceSynchronize``: its 4 gaps are each mostly
    launch (a 5 µs kernel, then the sync, then the next launch), so no member's card
    tells a sync: no card, and the viewer says so instead of a launch card."""
    from rich.text import Text

    from gapscope.analysis.findings import NO_FIT_NOTE
    from gapscope.tui.findings_view import walk_text

    d = diagnose(load(require(CORPUS / "extrap/ex-gpu.s10.sqlite")))
    found = findings(d)
    (k,) = [n for n, f in enumerate(found.ranked) if f.kind == "sync"]
    f = found.ranked[k]
    assert (f.card, f.card_gap, f.card_note) == (None, -1, NO_FIT_NOTE)
    assert (d.gaps.cause[f.positions] == int(Cause.LAUNCH)).all()
    text = walk_text(found, k, 0, Text("")).plain
    assert NO_FIT_NOTE in text and "Smell:" not in text


#: per step: ``SMALL_COPIES`` memset gaps of 6 µs, then one DtoD copy gap of 292 µs
SMALL_COPIES = 8


def _copy_diag():
    """3 ProfilerSteps of 1000 µs from 1000 µs. In each, from the step's start: 20 µs
    kernels, the i-th after ``SMALL_COPIES`` gaps of 6 µs (a 4 µs memset [1, 5) µs into
    it) then one gap of 292 µs (a 290 µs DtoD copy [1, 291) into it); a last kernel to
    980 µs. Every launch and copy call is issued long before its op runs (host ahead).
    By count the typical member is a 6 µs memset gap (24 of 27); by idle, each step's
    292 µs copy gap (292 of the step's 340 µs copy idle, 86%)."""
    b = TraceBuilder()
    t = b.lane("1", "1", process_name="python3", thread_name="main")
    g0 = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    corr = 0
    for s in range(3):
        base = (1 + s) * 1000 * US
        b.event(t, f"ProfilerStep#{s}", base, 1000 * US, Kind.ANNOTATION)
        at = host = 0  # µs from the step's start: the GPU's next op, the thread's next call
        for is_memset in [True] * SMALL_COPIES + [False]:
            corr += 1
            b.event(t, "cudaLaunchKernel", base + host * US, 3 * US, Kind.LAUNCH, correlation=corr)
            b.event(g0, "gemm", base + at * US, 20 * US, Kind.KERNEL, correlation=corr)
            corr += 1
            host, at = host + 8, at + 21
            if is_memset:
                b.event(t, "cudaMemsetAsync", base + (host - 4) * US, 3 * US, Kind.MEMCPY_CALL, correlation=corr)
                b.event(g0, "Memset (Device)", base + at * US, 4 * US, Kind.MEMSET, correlation=corr, bytes=1 << 10)
                at += 5
            else:
                b.event(t, "cudaMemcpyAsync", base + (host - 4) * US, 3 * US, Kind.MEMCPY_CALL, correlation=corr)
                dtod = "Memcpy DtoD (Device -> Device)"
                b.event(g0, dtod, base + at * US, 290 * US, Kind.MEMCPY, correlation=corr, bytes=256 << 20)
                at += 291
        corr += 1
        b.event(t, "cudaLaunchKernel", base + host * US, 3 * US, Kind.LAUNCH, correlation=corr)
        b.event(g0, "gemm", base + at * US, (980 - at) * US, Kind.KERNEL, correlation=corr)
    return diagnose(b.build())


def test_the_copy_finding_shows_the_gap_its_idle_is_in_not_the_most_numerous():
    """Many tiny memset gaps and a few large DtoD copy gaps form one copy finding: its
    card is of a large one (the idle-weighted median: summed shortest first, the 24
    memset gaps hold 144 of the 1020 µs idle, so half is crossed in the copy gaps), not
    of a memset gap (the count median: the rule before the fourth audit)."""
    d = _copy_diag()
    g = d.gaps
    f = next(x for x in findings(d).ranked if x.kind == "copy")
    dur_us = sorted((g.dur_ns[f.positions] // US).tolist())
    assert dur_us == [6] * 3 * SMALL_COPIES + [292] * 3
    assert f.card is not None and f.card.cause == Cause.COPY
    assert int(g.dur_ns[f.card_gap]) == 292 * US
    assert "Memcpy DtoD" in f.card.why and "Memset" not in f.card.why


def test_mi300_copy_finding_shows_a_ddp_copy_not_a_memset():
    """The fourth audit: mi300 resnet's copy finding (35 gaps) showed a 5.3 µs memset
    gap's card ("fuse or remove the memset") though memsets hold ~9% of its idle and DtoD
    copies (DDP's ``copy_bucket_to_grad``, its forward) the rest."""
    d = diagnose(load(require(CORPUS / "tracelens/mi300/resnet_act_checkpoint.json.gz")))
    g = d.gaps
    f = next(x for x in findings(d).ranked if x.kind == "copy")
    assert f.positions.size == 35
    assert f.card is not None and f.card.cause == Cause.COPY
    assert "memset" not in f.card.smell.lower() and "memset" not in f.card.first_experiment.lower()
    assert "Memcpy DtoD" in f.card.why
    # a member holding a quarter of the copy idle or more, not one of the ~5 µs ones
    assert int(g.dur_ns[f.card_gap]) > 200 * US
