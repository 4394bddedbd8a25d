"""A finding's fix and the host work no named range holds (the audit of issue 47,
defects 2 and 3): the fix is the card's first experiment in a few words; a step range,
the loop body, the backward pass or an allocator op is never an island to move; host
time inside an enclosing range joins that range, dispersed op dispatch is per-op
overhead, and the untraced finding's card is of untraced time.

Each planted trace: 4 steps of 1000 µs from 1000 µs on one thread; kernels [0, 100),
[300, 400), [600, 700), [900, 1000) µs of each step, each launched by a 5 µs call 6 µs
before it, so the three gaps A [100, 300), B [400, 600), C [700, 900) µs each hold
194 µs of host time (the last 6 µs are the launch path), and there are no edges.
"""

from __future__ import annotations

import numpy as np

from gapscope.analysis import diagnose
from gapscope.analysis.card.advice import short_fix
from gapscope.analysis.card.host_rules import HOST_RULES
from gapscope.analysis.findings import PER_OP_TITLE, UNTRACED_TITLE, _representative, findings
from gapscope.analysis.types import Cause
from gapscope.parsers import load
from gapscope.parsers.builder import TraceBuilder
from gapscope.parsers.model import Kind

from .conftest import CORPUS, require

US = 1_000
STEPS = 4


def _trace(cpu):
    """The planted trace; ``cpu(b, thread, base_ns)`` adds each step's host events."""
    b = TraceBuilder()
    t = b.lane("1", "1", process_name="python3", thread_name="main")
    g0 = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    corr = 0
    for s in range(STEPS):
        base = (1 + s) * 1000 * US
        b.event(t, f"ProfilerStep#{s}", base, 1000 * US, Kind.ANNOTATION)
        for k0 in (0, 300, 600, 900):
            corr += 1
            b.event(t, "cudaLaunchKernel", base + (k0 - 6) * US, 5 * US, Kind.LAUNCH, correlation=corr)
            b.event(g0, f"k{k0}", base + k0 * US, 100 * US, Kind.KERNEL, correlation=corr)
        cpu(b, t, base)
    return diagnose(b.build())


def test_loop_body_backward_and_allocator_are_no_islands_and_the_fix_is_the_cards():
    """`decode_step` (a user range over the whole step, enclosing its 4 launches);
    in gap A `aten::empty` [110, 260) µs; in gap B `## backward ##` [400, 594) µs with
    nothing finer; gap C holds only `decode_step`. Own time per step: `## backward ##`
    194 µs; `aten::empty` 150 µs; `decode_step` 194 - 150 (gap A) + 194 (gap C) = 238 µs."""

    def cpu(b, t, base):
        b.event(t, "decode_step", base, 1000 * US, Kind.ANNOTATION)
        b.event(t, "aten::empty", base + 110 * US, 150 * US, Kind.CPU_OP)
        b.event(t, "## backward ##", base + 400 * US, 194 * US, Kind.ANNOTATION)

    f = findings(_trace(cpu))
    by = {x.name: x for x in f.ranked}
    body, bwd, alloc = by["decode_step"], by["## backward ##"], by["aten::empty"]
    assert (body.per_step_ns, bwd.per_step_ns, alloc.per_step_ns) == (238 * US, 194 * US, 150 * US)
    assert body.title == "host work inside `decode_step` (no finer range)"
    assert bwd.title == "host work inside `## backward ##` (no finer range)"
    # no cudaMalloc inside it: host time in the caching allocator, not device allocation
    assert alloc.title == "tensor allocation (caching allocator) in `aten::empty`"
    for x in (body, bwd, alloc):
        assert "island" not in x.title
        assert "take `" not in x.fix  # never moved off the critical path as a unit
        assert x.card is not None and x.fix == x.card.fix and x.fix
    # the verdict's first fix is the top finding's, the card's words
    assert f.top is body
    assert f"first fix: {body.card.fix};" in f.verdict and "take `decode_step`" not in f.verdict


def test_allocation_is_device_allocation_only_with_a_malloc_call_inside():
    """`aten::empty` [110, 260) µs in gap A of each step, with a `cudaMalloc` [120, 250)
    µs inside it: both are device memory allocation, `cudaMalloc` 130 µs a step and
    `aten::empty` the 150 - 130 = 20 µs left; no gap is mostly `aten::empty`'s (20 of
    194 µs), so it shows no card and its fix is the allocator advice."""

    def cpu(b, t, base):
        b.event(t, "aten::empty", base + 110 * US, 150 * US, Kind.CPU_OP)
        b.event(t, "cudaMalloc", base + 120 * US, 130 * US, Kind.RUNTIME)

    f = findings(_trace(cpu))
    by = {x.name: x for x in f.ranked}
    alloc, malloc = by["aten::empty"], by["cudaMalloc"]
    assert alloc.title == "device memory allocation in `aten::empty`"
    assert malloc.title == "device memory allocation in `cudaMalloc`"
    assert (alloc.per_step_ns, malloc.per_step_ns) == (20 * US, 130 * US)
    assert alloc.card is None
    assert alloc.fix == "fewer temporaries: preallocate and reuse buffers (out=, in-place ops) or torch.compile"
    assert malloc.card is not None and malloc.fix == malloc.card.fix


def test_host_time_splits_by_enclosing_range_per_op_overhead_and_untraced():
    """Gap A: `## optimizer ##` [100, 294) µs holding ten ops `opt0`..`opt9` of 18 µs
    back to back from 100 µs (180 µs; 14 µs untraced inside the range after them).
    Gap B: twelve distinct ops `disp0`..`disp11` of 15 µs from 400 µs (180 µs), none
    enclosing the rest. Gap C: nothing recorded. The named islands are the five largest
    names: `opt0`..`opt4` (18 µs a step each, 72 µs in all; ties by name); the rest:
    inside `## optimizer ##`: 194 - 5 * 18 = 104 µs a step; per-op overhead: gap B's
    194 µs; untraced: gap C's 194 µs."""

    def cpu(b, t, base):
        b.event(t, "## optimizer ##", base + 100 * US, 194 * US, Kind.ANNOTATION)
        for k in range(10):
            b.event(t, f"opt{k}", base + (100 + 18 * k) * US, 18 * US, Kind.CPU_OP)
        for k in range(12):
            b.event(t, f"disp{k}", base + (400 + 15 * k) * US, 15 * US, Kind.CPU_OP)

    d = _trace(cpu)
    f = findings(d)
    by = {x.title: x for x in f.ranked}
    opt = by["host work inside `## optimizer ##`"]
    per_op, untraced = by[PER_OP_TITLE], by[UNTRACED_TITLE]
    assert opt.per_step_ns == 104 * US and opt.name == "## optimizer ##"
    assert per_op.per_step_ns == 194 * US and untraced.per_step_ns == 194 * US
    assert {x.name for x in f.ranked if x.title.startswith("host island")} == {f"opt{k}" for k in range(5)}
    assert all(x.per_step_ns == 18 * US for x in f.ranked if x.title.startswith("host island"))
    # each finding's positions are its own gaps: A, B, C of every step
    g = d.gaps
    starts = {x.title: sorted({int(g.start_ns[i]) % (1000 * US) for i in x.positions}) for x in (opt, per_op, untraced)}
    assert starts == {opt.title: [100 * US], per_op.title: [400 * US], untraced.title: [700 * US]}
    assert per_op.fix == "fewer, larger ops per step: a bigger batch, torch.compile, CUDA graphs"
    # the untraced finding's card is of gap C, whose host time has no event at all
    assert untraced.card is not None and untraced.card.first_experiment.startswith("Find out what the CPU does")
    assert untraced.card.evidence and all(e.event < 0 for e in untraced.card.evidence if e.cause == untraced.cause)
    # nothing is counted twice: the host findings add up to the host time, 3 * 194 µs a step
    assert sum(x.per_step_ns for x in f.ranked if x.kind == "host") == 3 * 194 * US


def test_short_fix_is_the_first_sentence_cut_at_a_clause():
    assert short_fix("Do this now: a, b. Then that.") == "Do this now: a, b"
    long = "Make the tensor on the device (" + "x" * 120 + "), or pin it, and copy it non_blocking. More."
    assert short_fix(long) == "Make the tensor on the device (" + "x" * 120 + ")"
    assert all(r.fix for r in HOST_RULES)  # every host rule says its fix in a few words


def test_corpus_catch_all_is_no_longer_first_and_no_fix_moves_a_pass():
    """hta/nccl_data (DDP training): the audit found its first finding the catch-all
    "host work with no named range" with a DDP card, and fixes "take `## backward ##` /
    `aten::empty` / `aten::unflatten_dense_tensors` off the critical path"."""
    d = diagnose(load(require(CORPUS / "hta" / "nccl_data.json.gz")))
    f = findings(d)
    assert f.top is not None and f.top.title != UNTRACED_TITLE
    for x in f.ranked:
        for name in ("## backward ##", "aten::empty", "aten::unflatten_dense_tensors", "ProfilerStep"):
            assert f"take `{name}" not in x.fix, (x.title, x.fix)
    # the buffers' broadcast: the DDP card's fix, broadcast_buffers=False
    (unflat,) = [x for x in f.ranked if x.name == "aten::unflatten_dense_tensors"]
    assert "broadcast_buffers=False" in unflat.fix


def test_the_card_of_host_work_inside_a_range_is_a_gap_of_its_own_time():
    """Gap A of each step: `## fwd ##` [100, 300) µs (enclosing the launch call at 294
    µs: a user range issuing GPU work, a container); in step 0 only, `inner` [110, 210)
    µs inside it. Gap C: six ops `p0`..`p5` of 32 µs from 700 µs. Own time in all:
    `## fwd ##` 4 * 194 - 100 = 676 µs, each `p` 4 * 32 = 128 µs, `inner` 100 µs, so the
    five named are `## fwd ##`, `p0`..`p3` and `inner`'s 100 µs joins `## fwd ##`
    (194 µs a step). Its largest gap (ties by position) is step 0's, half of it `inner`
    (100 of 194 µs): the representative gap is step 1's gap A, `## fwd ##`'s alone (the
    shown card is the recurring group's, which tells `## fwd ##` either way)."""

    def cpu(b, t, base):
        b.event(t, "## fwd ##", base + 100 * US, 200 * US, Kind.ANNOTATION)
        if base == 1000 * US:
            b.event(t, "inner", base + 110 * US, 100 * US, Kind.CPU_OP)
        for k in range(6):
            b.event(t, f"p{k}", base + (700 + 32 * k) * US, 32 * US, Kind.CPU_OP)

    d = _trace(cpu)
    f = findings(d)
    fwd = next(x for x in f.ranked if x.name == "## fwd ##")
    assert fwd.title == "host work inside `## fwd ##` (no finer range)"
    assert fwd.per_step_ns == 194 * US
    assert {x.name for x in f.ranked if x.title.startswith("host island")} == {"p0", "p1", "p2", "p3"}
    g = d.gaps
    assert int(g.start_ns[fwd.positions[0]]) == 1100 * US  # step 0's gap A leads
    vec = np.zeros(len(g), np.int64)
    vec[fwd.positions] = 194 * US
    i, subject = _representative(d, fwd.positions, Cause.HOST, fwd.title, fwd.name, vec)
    assert (int(g.start_ns[i]), subject) == (2100 * US, True)
    assert fwd.card is not None and fwd.fix == fwd.card.fix
    assert "inner" not in fwd.card.first_experiment and "## fwd ##" in fwd.card.first_experiment


def test_the_per_op_card_prefers_a_gap_with_no_copy():
    """Gap A: twelve ops `a0`..`a11` of 15 µs from 100 µs (180 µs) and a copy call
    `cudaMemcpyAsync` [282, 290) µs; gap B: nine ops `b0`..`b8` of 12 µs from 400 µs
    (108 µs, over half of B's 194 µs of host time). The five named islands are `a0`,
    `a1`, `a10`, `a11`, `a2` (60 µs each in all, ties by name), so per-op overhead holds
    gap A's rest and all of gap B. Gap A has the most recorded op time, but a copy on
    its list: the representative is gap B."""

    def cpu(b, t, base):
        for k in range(12):
            b.event(t, f"a{k}", base + (100 + 15 * k) * US, 15 * US, Kind.CPU_OP)
        b.event(t, "cudaMemcpyAsync", base + 282 * US, 8 * US, Kind.MEMCPY_CALL)
        for k in range(9):
            b.event(t, f"b{k}", base + (400 + 12 * k) * US, 12 * US, Kind.CPU_OP)

    d = _trace(cpu)
    f = findings(d)
    g = d.gaps
    islands = {x.name for x in f.ranked if x.title.startswith("host island")}
    assert islands == {"a0", "a1", "a10", "a11", "a2"}
    per_op = next(x for x in f.ranked if x.title == PER_OP_TITLE)
    assert sorted({int(g.start_ns[i]) % (1000 * US) for i in per_op.positions}) == [100 * US, 400 * US]
    vec = np.zeros(len(g), np.int64)
    vec[per_op.positions] = 194 * US
    i, subject = _representative(d, per_op.positions, Cause.HOST, PER_OP_TITLE, "", vec)
    assert (int(g.start_ns[i]) % (1000 * US), subject) == (400 * US, True)
    assert per_op.fix == "fewer, larger ops per step: a bigger batch, torch.compile, CUDA graphs"


def test_host_time_in_a_copy_call_is_its_own_finding_with_the_pinned_copy_fix():
    """Copy is GPU copy time only (issue 43): on the H200 decode capture the thread's
    time in the per-step pageable `cudaMemcpyAsync` is host work, and its finding says
    so and gives the copy's fix, not "take it off the critical path"."""
    from .conftest import SAMPLES

    d = diagnose(load(str(SAMPLES / "gpu" / "h200_decode.pt.trace.json.gz")))
    f = next(x for x in findings(d).ranked if x.title == "host time in the copy call `cudaMemcpyAsync`")
    assert f.cause == Cause.HOST
    assert f.fix.startswith("copy from pinned host memory with non_blocking=True")
    assert all(not x.title.startswith("copies on the path") for x in findings(d).ranked)


def test_a_native_programs_copy_finding_is_told_in_the_runtimes_words():
    """The fourth audit: profile16 (a C CUDA program, no torch event) was told "keep
    tensors on the device (pinned memory and non_blocking)"; its copy finding says
    cudaMemcpyAsync from page-locked memory on a non-default stream instead."""
    d = diagnose(load(require(CORPUS / "extrap/profile16.sqlite")))
    (f,) = [x for x in findings(d).ranked if x.kind == "copy"]
    assert "cudaMemcpyAsync" in f.fix and "cudaHostAlloc" in f.fix and "non-default stream" in f.fix
    assert "tensor" not in f.fix and "non_blocking" not in f.fix and "pinned memory" not in f.fix


def test_a_native_sync_finding_on_a_synchronize_says_blocking_call_not_read():
    """The fourth audit: ex-gpu's sync finding said "remove the blocking read in
    `cudaDeviceSynchronize`": a device synchronize reads nothing, so it is a blocking
    call."""
    d = diagnose(load(require(CORPUS / "extrap/ex-gpu.s10.sqlite")))
    (f,) = [x for x in findings(d).ranked if x.kind == "sync"]
    assert f.name == "cudaDeviceSynchronize"
    assert f.fix.startswith("remove the blocking call in `cudaDeviceSynchronize`"), f.fix
    assert "blocking read" not in f.fix and "read values" not in f.fix


def test_a_torch_programs_copy_fix_keeps_the_torch_words():
    """The control: a PyTorch trace's copy finding keeps pinned memory and non_blocking."""
    d = diagnose(load(require(CORPUS / "tracelens/mi300/resnet_act_checkpoint.json.gz")))
    (f,) = [x for x in findings(d).ranked if x.kind == "copy"]
    assert "non_blocking" in f.fix and "cudaHostAlloc" not in f.fix
