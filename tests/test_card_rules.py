"""The card's facts and rules (``gapscope.analysis.card.facts`` / ``rules``): one test per
rule added for issue 43, each on a hand-made trace that reproduces the pattern, and the
table's own contract (first match wins, every rule named and explained)."""

from __future__ import annotations

import numpy as np
import pytest

from gapscope.analysis import Cause, diagnose
from gapscope.analysis.card import card_for_gap
from gapscope.analysis.card.facts import card_facts
from gapscope.analysis.card.host_rules import HOST_RULES
from gapscope.analysis.card.program import program_kind
from gapscope.analysis.card.rules import RULES, matching_rule
from gapscope.analysis.evidence_kinds import earlier_runs, recurring_alloc_mask
from gapscope.parsers import load
from gapscope.parsers.builder import TraceBuilder
from gapscope.parsers.model import CopyKind, Kind

from .conftest import CORPUS, require

US = 1_000


def _lanes(b: TraceBuilder) -> tuple[int, int]:
    cpu = b.lane("1", "1", process_name="python3", thread_name="main")
    return cpu, b.lane("0", "7", is_gpu=True, device=0, stream=7)


def _largest(d) -> int:
    return int(np.argmax(d.gaps.dur_ns))


def test_every_rule_is_named_and_explained_and_the_last_always_holds():
    for table in (RULES, HOST_RULES):
        assert len({r.name for r in table}) == len(table)
        assert all(r.rationale and len(r.rationale.splitlines()) == 1 for r in table)
    assert RULES[-1].when(None) is True  # type: ignore[arg-type]


def _alloc_loop(n_steps: int, free_every_step: bool) -> TraceBuilder:
    """``n_steps`` steps of: a kernel, then (every step, or the first only) a 1 ms
    ``hipFree`` on the launching thread, then the next launch. An ATen op marks the
    program as PyTorch."""
    b = TraceBuilder()
    cpu, gpu = _lanes(b)
    t = 0
    corr = 1
    b.event(cpu, "aten::add", 0, 2 * US, Kind.CPU_OP)
    t = 5
    for step in range(n_steps):
        b.event(cpu, "hipLaunchKernel", t * US, 5 * US, Kind.LAUNCH, correlation=corr)
        b.event(gpu, "k", (t + 8) * US, 20 * US, Kind.KERNEL, correlation=corr)
        corr += 1
        t += 30
        if free_every_step or step == 0:
            b.event(cpu, "hipFree", t * US, 1000 * US, Kind.RUNTIME)
            t += 1000
        else:
            t += 5
    b.event(cpu, "hipLaunchKernel", t * US, 5 * US, Kind.LAUNCH, correlation=corr)
    b.event(gpu, "k", (t + 8) * US, 20 * US, Kind.KERNEL, correlation=corr)
    return b


def test_recurring_allocator_calls_are_steady_state_with_caching_allocator_advice():
    """Issue 43, MI300X ResNet with the caching allocator off: a 1 ms ``hipFree`` in
    every step recurs, so its gaps are not one-time (they stay in the budget) and the
    advice is the caching allocator, not "warm up before profiling"."""
    d = diagnose(_alloc_loop(6, free_every_step=True).build())
    assert recurring_alloc_mask(d.trace).sum() == 6
    big = np.flatnonzero(d.gaps.dur_ns >= 1000 * US)
    assert big.size == 6 and not d.gaps.one_time[big].any()
    c = card_for_gap(d, int(big[2]))
    assert c.cause == Cause.HOST
    assert "caching allocator" in c.first_experiment and "expandable_segments" in c.first_experiment
    assert "warm up" not in c.first_experiment


def test_a_single_allocator_call_is_still_one_time():
    """The control: one ``hipFree`` in the first step only is allocator growth at warm-up."""
    d = diagnose(_alloc_loop(6, free_every_step=False).build())
    assert not recurring_alloc_mask(d.trace).any()
    i = _largest(d)
    assert d.gaps.dur_ns[i] >= 1000 * US and bool(d.gaps.one_time[i])
    assert "warm up before profiling" in card_for_gap(d, i).first_experiment


def _slow_launch(kernel: str) -> TraceBuilder:
    """Six kernels ``k`` with 5 µs launches, then a 3 ms launch of ``kernel``."""
    b = TraceBuilder()
    cpu, gpu = _lanes(b)
    b.event(cpu, "aten::mm", 0, 2 * US, Kind.CPU_OP)
    t = 5
    for j in range(1, 7):
        b.event(cpu, "cudaLaunchKernel", t * US, 5 * US, Kind.LAUNCH, correlation=j)
        b.event(gpu, "k", (t + 6) * US, 10 * US, Kind.KERNEL, correlation=j)
        t += 20
    b.event(cpu, "cudaLaunchKernel", t * US, 3000 * US, Kind.LAUNCH, correlation=7)
    b.event(gpu, kernel, (t + 3002) * US, 10 * US, Kind.KERNEL, correlation=7)
    return b


def test_slow_launch_of_a_kernel_seen_before_is_contention_not_first_use():
    """Issue 43, 2xH100 FSDP: a slow launch of a kernel that ran 84 times before is no
    first use: no warm-up or CUDA_MODULE_LOADING advice, not one-time."""
    d = diagnose(_slow_launch("k").build())
    i = _largest(d)
    call = int(np.flatnonzero(d.trace.dur_ns == 3000 * US)[0])
    assert earlier_runs(d.trace)[call] == 6
    assert not bool(d.gaps.one_time[i])
    c = card_for_gap(d, i)
    assert c.cause == Cause.LAUNCH
    assert "its kernel had run 6 time(s) before" in c.why and "first-use" not in c.why
    assert "host contention" in c.first_experiment and "CUDA_MODULE_LOADING" not in c.first_experiment


def test_slow_launch_of_a_new_kernel_is_first_use():
    d = diagnose(_slow_launch("k_new").build())
    i = _largest(d)
    assert bool(d.gaps.one_time[i])
    c = card_for_gap(d, i)
    assert "a first-use cost" in c.why and "CUDA_MODULE_LOADING=EAGER" in c.first_experiment


def test_lazy_function_loading_in_the_gap_is_module_loading_not_a_host_island():
    """Issue 43, B200: the first call of a GEMM holds a "Lazy Function Loading" range
    on the launching thread; the card says module loading (one-time), not py-spy."""
    b = TraceBuilder()
    cpu, gpu = _lanes(b)
    b.event(cpu, "aten::mm", 0, 2 * US, Kind.CPU_OP)
    b.event(cpu, "cudaLaunchKernel", 5 * US, 5 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k", 12 * US, 10 * US, Kind.KERNEL, correlation=1)
    b.event(cpu, "aten::linear", 20 * US, 900 * US, Kind.CPU_OP)
    b.event(cpu, "Lazy Function Loading", 30 * US, 800 * US, Kind.RUNTIME)
    b.event(cpu, "cudaLaunchKernel", 900 * US, 5 * US, Kind.LAUNCH, correlation=2)
    b.event(gpu, "gemm", 910 * US, 10 * US, Kind.KERNEL, correlation=2)
    d = diagnose(b.build())
    i = _largest(d)
    c = card_for_gap(d, i)
    assert "lazy module loading" in c.first_experiment and "py-spy" not in c.first_experiment
    assert c.smell == "module loading (one-time cost)" and "0.800 ms of lazy module loading" in c.why
    # the fix is the experiment, not the description sentence that opens it (re-audit defect 5)
    assert c.fix == "warm up before profiling (run a few steps first), then capture a steady-state window"
    f = card_facts(d, np.array([i]), c.cause, list(c.evidence), "x")
    assert f.lazy_loading_ns == 800 * US and matching_rule(f).name == "module loading"


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("TorchDynamo Cache Lookup", "mark_static"),
        ("Optimizer.step#AdamW.step", "fused=True"),
        ("torch/autograd/graph.py(824): _engine_run_backward", "autograd engine"),
    ],
)
def test_framework_internals_get_their_own_fix(name, words):
    """Issue 43: Dynamo's guard check, the optimizer step and the autograd engine's
    start-up are not told "take it off the critical path, run it in another thread"."""
    b = TraceBuilder()
    cpu, gpu = _lanes(b)
    b.event(cpu, "cudaLaunchKernel", 0, 5 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k", 6 * US, 10 * US, Kind.KERNEL, correlation=1)
    b.event(cpu, name, 20 * US, 500 * US, Kind.CPU_OP)
    b.event(cpu, "aten::add", 30 * US, 480 * US, Kind.CPU_OP)
    b.event(cpu, "cudaLaunchKernel", 525 * US, 5 * US, Kind.LAUNCH, correlation=2)
    b.event(gpu, "k2", 532 * US, 10 * US, Kind.KERNEL, correlation=2)
    d = diagnose(b.build())
    c = card_for_gap(d, _largest(d))
    assert c.cause == Cause.HOST
    assert words in c.first_experiment, c.first_experiment
    assert "another thread" not in c.first_experiment


def test_a_program_without_python_is_not_given_python_words():
    """Issue 43: an Nsight export of a C++ program is told neither "uninstrumented
    Python" nor torch.where."""
    b = TraceBuilder(format="nsys-sqlite")
    cpu = b.lane("1", "1", process_name="solver", thread_name="main")
    gpu = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    b.event(cpu, "cudaLaunchKernel", 0, 5 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k", 6 * US, 10 * US, Kind.KERNEL, correlation=1)
    b.event(cpu, "cudaStreamSynchronize", 10 * US, 20 * US, Kind.SYNC_CALL)
    b.event(cpu, "cudaLaunchKernel", 400 * US, 5 * US, Kind.LAUNCH, correlation=2)
    b.event(gpu, "k2", 407 * US, 10 * US, Kind.KERNEL, correlation=2)
    d = diagnose(b.build())
    pk = program_kind(d.trace)
    assert (pk.framework, pk.python, pk.torch) == ("native", False, False)
    for i in range(len(d.gaps)):
        c = card_for_gap(d, i)
        text = " ".join((c.why, c.first_experiment, c.forbidden_step, c.proof))
        assert "Python" not in text and "torch" not in text, text


@pytest.mark.parametrize(
    ("rel", "framework", "python"),
    [("extrap/ex-gpu.s10.sqlite", "native", False), ("tracelens/b200/eager_trace.json.gz", "pytorch", True)],
)
def test_program_kind_of_corpus_traces(rel, framework, python):
    pk = program_kind(load(require(CORPUS / rel)))
    assert (pk.framework, pk.python) == (framework, python)


def _memset_in_gap(outer: str) -> TraceBuilder:
    """A 100 µs memset between two kernels, its ``cudaMemsetAsync`` issued inside the
    CPU range ``outer``."""
    b = TraceBuilder()
    cpu, gpu = _lanes(b)
    b.event(cpu, "aten::conv2d", 0, 2 * US, Kind.CPU_OP)
    b.event(cpu, "cudaLaunchKernel", 3 * US, 2 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k1", 6 * US, 4 * US, Kind.KERNEL, correlation=1)
    b.event(cpu, outer, 8 * US, 20 * US, Kind.CPU_OP)
    b.event(cpu, "cudaMemsetAsync", 10 * US, 3 * US, Kind.MEMCPY_CALL, correlation=2)
    b.event(gpu, "Memset (Device)", 20 * US, 100 * US, Kind.MEMSET, correlation=2, bytes=1 << 20)
    b.event(cpu, "cudaLaunchKernel", 15 * US, 2 * US, Kind.LAUNCH, correlation=3)
    b.event(gpu, "k2", 125 * US, 5 * US, Kind.KERNEL, correlation=3)
    return b


def test_a_memset_issued_by_cudnn_is_the_librarys_not_torch_zeros():
    """Issue 43: memsets cuDNN/MIOpen issue are not told "remove your torch.zeros"."""
    d = diagnose(_memset_in_gap("cudnnConvolutionForward").build())
    c = card_for_gap(d, _largest(d))
    assert c.cause == Cause.COPY, c.why
    assert "`cudnnConvolutionForward`" in c.first_experiment and "torch.zeros" not in c.first_experiment


def test_a_memset_of_the_users_code_is_told_to_fuse_or_remove():
    d = diagnose(_memset_in_gap("aten::zeros").build())
    c = card_for_gap(d, _largest(d))
    assert c.cause == Cause.COPY and "torch.zeros" in c.first_experiment


def test_b200_first_gemm_calls_are_module_loading_not_py_spy():
    """tracelens/b200: the three largest gaps lie in the first ``aten::addmm``/``aten::mm``
    calls of a shape, whose calls hold Kineto's "Lazy Function Loading" events (on a
    lane of their own); they are module loading, not a host island told to use py-spy."""
    d = diagnose(load(require(CORPUS / "tracelens/b200/eager_trace.json.gz")))
    top = [int(i) for i in d.order_by_size()[:3]]
    for i in top:
        c = card_for_gap(d, i)
        assert c.smell == "module loading (one-time cost)", (i, c.smell)
        assert "py-spy" not in c.first_experiment and "lazy module loading" in c.why


def test_short_bubbles_between_queued_kernels_are_dispatch_counted_in_one_line():
    """Issue 43, hta/rank0: 3-10 µs bubbles between kernels queued far ahead, with no
    recorded wait, are per-kernel dispatch (wait kind ``dispatch``), not "dependency"
    with "capture every rank" advice; the report counts them in one trust line."""
    from gapscope.analysis.types import WaitKind
    from gapscope.report.document import build_document, trust_lines

    b = TraceBuilder()
    cpu, gpu = _lanes(b)
    for j in range(1, 5):  # launched long before they run
        b.event(cpu, "cudaLaunchKernel", j * 2 * US, 1 * US, Kind.LAUNCH, correlation=j)
    for j, start in enumerate((100, 120, 138, 170), start=1):  # gaps of 10, 8 and 22 µs
        b.event(gpu, f"k{j}", start * US, 10 * US, Kind.KERNEL, correlation=j)
    d = diagnose(b.build())
    assert d.gaps.dur_ns.tolist() == [10 * US, 8 * US, 22 * US]
    assert d.gaps.queued.all()
    kinds = [WaitKind(int(k)) for k in d.gaps.wait_kind]
    assert kinds == [WaitKind.DISPATCH, WaitKind.DISPATCH, WaitKind.NOTHING_RECORDED]
    doc = build_document(d.trace, d, top_n=3, full=False)
    assert doc["trust"]["dispatch"] == {"count": 2, "idle_ns": 18 * US}
    assert any(
        line.startswith("2 gaps (18.0 µs) are bubbles between kernels queued ahead") for line in trust_lines(doc)
    )


def test_a_cuda_call_is_named_rather_than_the_syscall_inside_it():
    """Issue 43: an Nsight export's ``cudaMalloc`` holding an ``ioctl`` (OS runtime call)
    is named as itself, and told the allocator's advice in the program's words."""
    b = TraceBuilder(format="nsys-sqlite")
    cpu, gpu = _lanes(b)
    for step in range(5):  # the allocation recurs in every step
        t = step * 1000
        b.event(cpu, "cudaLaunchKernel", t * US, 5 * US, Kind.LAUNCH, correlation=2 * step + 1)
        b.event(gpu, "k", (t + 6) * US, 10 * US, Kind.KERNEL, correlation=2 * step + 1)
        b.event(cpu, "cudaMalloc", (t + 20) * US, 500 * US, Kind.RUNTIME)
        b.event(cpu, "ioctl", (t + 30) * US, 480 * US, Kind.OTHER)
        b.event(cpu, "cudaLaunchKernel", (t + 525) * US, 5 * US, Kind.LAUNCH, correlation=2 * step + 2)
        b.event(gpu, "k2", (t + 532) * US, 10 * US, Kind.KERNEL, correlation=2 * step + 2)
    d = diagnose(b.build())
    i = _largest(d)
    c = card_for_gap(d, i)
    assert not bool(d.gaps.one_time[i])
    assert "`cudaMalloc`" in c.why and "ioctl" not in c.why
    assert "allocate the buffers once" in c.first_experiment and "PYTORCH" not in c.first_experiment


def test_a_second_blocking_sync_in_the_cliff_is_named():
    """Issue 43: a second ``cudaDeviceSynchronize`` (in a ``timing`` range) after the
    first wait is named in the sentence, not folded into the host work after it."""
    b = TraceBuilder(format="nsys-sqlite")
    cpu, gpu = _lanes(b)
    b.event(cpu, "cudaLaunchKernel", 0, 5 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k", 6 * US, 100 * US, Kind.KERNEL, correlation=1)
    b.event(cpu, "cudaStreamSynchronize", 10 * US, 100 * US, Kind.SYNC_CALL)  # drains the queue at 106
    b.event(cpu, "timing", 150 * US, 60 * US, Kind.ANNOTATION)
    b.event(cpu, "cudaDeviceSynchronize", 160 * US, 40 * US, Kind.SYNC_CALL)
    b.event(cpu, "cudaLaunchKernel", 300 * US, 5 * US, Kind.LAUNCH, correlation=2)
    b.event(gpu, "k2", 306 * US, 10 * US, Kind.KERNEL, correlation=2)
    d = diagnose(b.build())
    c = card_for_gap(d, _largest(d))
    assert c.cause == Cause.SYNC, c.why
    assert "blocked again in `cudaDeviceSynchronize`" in c.why, c.why


def test_an_nsight_export_of_a_python_process_is_python():
    b = TraceBuilder(format="nsys-sqlite")
    cpu, gpu = _lanes(b)  # process python3
    b.event(cpu, "cudaLaunchKernel", 0, 5 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k", 6 * US, 10 * US, Kind.KERNEL, correlation=1)
    pk = program_kind(b.build())
    assert (pk.framework, pk.python) == ("unknown", True)


def _copy_gap(blocking: bool) -> tuple:
    """A kernel [6, 106) µs, then a ``cudaMemcpyAsync`` of a 1 MiB pageable copy, then the
    next launch at 300 µs. ``blocking``: the call starts under the kernel (10 µs) and
    returns at 200 µs, after its linked copy [110, 130) ended: it waited for the queue.
    Else it starts in the gap (110 µs) and returns at 250 µs with its copy [160, 180)
    not linked to it."""
    b = TraceBuilder()
    cpu, gpu = _lanes(b)
    b.event(cpu, "aten::add", 0, 2 * US, Kind.CPU_OP)  # a PyTorch program
    b.event(cpu, "cudaLaunchKernel", 0, 5 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k", 6 * US, 100 * US, Kind.KERNEL, correlation=1)
    if blocking:
        b.event(cpu, "cudaMemcpyAsync", 10 * US, 190 * US, Kind.MEMCPY_CALL, correlation=2)
        b.event(gpu, "Memcpy DtoH (Device -> Pageable)", 110 * US, 20 * US, Kind.MEMCPY, correlation=2,
                bytes=1 << 20, copy_kind=CopyKind.D2H, pageable=True)  # fmt: skip
    else:
        b.event(cpu, "cudaMemcpyAsync", 110 * US, 140 * US, Kind.MEMCPY_CALL)
        b.event(gpu, "Memcpy HtoD (Pageable -> Device)", 160 * US, 20 * US, Kind.MEMCPY,
                bytes=1 << 20, copy_kind=CopyKind.H2D, pageable=True)  # fmt: skip
    b.event(cpu, "cudaLaunchKernel", 300 * US, 5 * US, Kind.LAUNCH, correlation=3)
    b.event(gpu, "k2", 306 * US, 10 * US, Kind.KERNEL, correlation=3)
    d = diagnose(b.build())
    return d, _largest(d)


def test_copy_is_the_gpus_copy_time_and_the_copy_call_is_host_work():
    """Issue 43 (b200: a 3.1 µs GPU copy made a gap 39% copy): the gap [106, 306) µs
    holds a 20 µs GPU copy; the thread's 120 µs in the copy call outside it are host
    work, and the card advises on that call (pinned memory, non_blocking)."""
    d, i = _copy_gap(blocking=False)
    cn = d.gaps.class_ns[i]
    assert (int(d.gaps.start_ns[i]), int(d.gaps.end_ns[i])) == (106 * US, 306 * US)
    assert int(cn[int(Cause.COPY)]) == 20 * US
    # [106, 110) and [250, 300) untraced, [110, 250) in the call less the copy, [300, 306) launch
    assert int(cn[int(Cause.HOST)]) == (4 + 120 + 50) * US and int(cn[int(Cause.SYNC)]) == 0
    c = card_for_gap(d, i)
    assert c.cause == Cause.HOST
    assert "0.120 ms in `cudaMemcpyAsync`" in c.why and "20.0 µs copying" in c.why, c.why
    assert c.first_experiment.startswith("The thread spent 0.120 ms inside the copy call `cudaMemcpyAsync`")
    assert "non_blocking=True" in c.first_experiment


def test_a_blocking_copy_call_is_a_wait_that_drained_the_queue():
    """The copy call began under the kernel and returned after its copy ended: a
    blocking wait, so [106, 300) is the sync cliff less the 20 µs GPU copy, and the
    card names the call as the wait and advises a pinned asynchronous copy."""
    d, i = _copy_gap(blocking=True)
    cn = d.gaps.class_ns[i]
    assert int(cn[int(Cause.COPY)]) == 20 * US and int(cn[int(Cause.SYNC)]) == (194 - 20) * US
    assert int(cn[int(Cause.HOST)]) == 0
    c = card_for_gap(d, i)
    assert c.cause == Cause.SYNC
    # [106, 200) in the call less [110, 130) under the copy: 74 µs; then 100 µs until the launch
    assert "74.0 µs in the blocking copy call `cudaMemcpyAsync` outside the GPU's copies" in c.why, c.why
    assert c.first_experiment.startswith("The copy call `cudaMemcpyAsync` returned only after its copy ended")
    assert "pinned host memory and non_blocking=True" in c.first_experiment


def _decode_loop(n_steps: int) -> TraceBuilder:
    """``n_steps`` decode steps (``ProfilerStep#k``, 200 µs apart): a 100 µs kernel, then
    the token read (``aten::item`` from under the kernel, its 8 B device-to-host copy
    right after it), then 60 µs of sampling until the next step's launch."""
    b = TraceBuilder()
    cpu, gpu = _lanes(b)
    b.event(cpu, "aten::add", 0, 2 * US, Kind.CPU_OP)
    c, t = 1, 10
    for k in range(n_steps):
        b.event(cpu, f"ProfilerStep#{k}", t * US, 200 * US, Kind.ANNOTATION)
        b.event(cpu, "cudaLaunchKernel", (t + 5) * US, 5 * US, Kind.LAUNCH, correlation=c)
        b.event(gpu, "decode", (t + 12) * US, 100 * US, Kind.KERNEL, correlation=c)
        b.event(cpu, "aten::item", (t + 20) * US, 110 * US, Kind.CPU_OP)
        b.event(cpu, "cudaMemcpyAsync", (t + 25) * US, 100 * US, Kind.MEMCPY_CALL, correlation=c + 1)
        b.event(gpu, "Memcpy DtoH (Device -> Pageable)", (t + 115) * US, 2 * US, Kind.MEMCPY, correlation=c + 1,
                bytes=8, copy_kind=CopyKind.D2H, pageable=True)  # fmt: skip
        b.event(cpu, "sample", (t + 132) * US, 60 * US, Kind.CPU_OP)
        c, t = c + 2, t + 200
    return b


def test_the_generations_final_read_is_named_required_and_the_loops_reads_keep_their_advice():
    """Issue 43: the last step's token read, after the device's last kernel with nothing
    following, is the program's result: the card says so and never advises removing
    it; the reads inside the loop (each followed by the next step's kernel) keep
    "Remove the blocking wait"."""
    d = diagnose(_decode_loop(4).build())
    g = d.gaps
    sync = [i for i in range(len(g)) if g.cause[i] == int(Cause.SYNC)]
    assert len(sync) == 4
    *loop, last = sync
    assert int(g.next_op[last]) == -1 and all(int(g.next_op[i]) >= 0 for i in loop)
    for i in loop:
        c = card_for_gap(d, i)
        assert c.first_experiment.startswith("Remove the blocking wait `aten::item` from the loop"), c.first_experiment
    c = card_for_gap(d, last)
    assert c.first_experiment.startswith("Nothing to remove here: `aten::item` is the program's final read")
    assert "Remove" not in c.first_experiment and "Do not remove this read" in c.forbidden_step
    assert c.fix == "none: the final read is the program's result"


def test_the_final_read_of_the_h200_decode_captures():
    """sample_traces/gpu: the graph-replayed decode ends with a `.cpu()` of the tokens
    (a blocking `cudaMemcpyAsync` inside `aten::copy_`) after the last kernel: required;
    the eager decode's per-step `.item()` reads keep their advice."""
    from .conftest import SAMPLES

    d = diagnose(load(str(SAMPLES / "gpu" / "h200_decode_graph.pt.trace.json.gz")))
    last = len(d.gaps) - 1
    assert int(d.gaps.cause[last]) == int(Cause.SYNC) and int(d.gaps.next_op[last]) == -1
    c = card_for_gap(d, last)
    assert c.first_experiment.startswith("Nothing to remove here: `aten::copy_` is the program's final read")
    d = diagnose(load(str(SAMPLES / "gpu" / "h200_decode.pt.trace.json.gz")))
    reads = [i for i in range(len(d.gaps)) if int(d.gaps.cause[i]) == int(Cause.SYNC)]
    assert reads and all(int(d.gaps.next_op[i]) >= 0 for i in reads)
    for i in reads:  # the loop's reads keep their advice (one wait, or each wait of the step)
        first = card_for_gap(d, i).first_experiment
        assert first.startswith("Remove ") and "`aten::item`" in first and "final read" not in first, first


def test_every_blocking_sync_of_the_step_is_named_with_its_time():
    """Issue 43, on a Kineto trace: a step (``ProfilerStep#1``) whose ``.item()``
    (``aten::item`` holding ``aten::_local_scalar_dense`` and its
    ``cudaStreamSynchronize``) drains the queue, then a ``timing`` range whose
    ``cudaDeviceSynchronize`` blocks 30 µs: the card names both, each with its own time,
    the nested calls of the read as that one read, and advises each its own fix."""
    b = TraceBuilder()
    cpu, gpu = _lanes(b)
    b.event(cpu, "ProfilerStep#0", 0, 400 * US, Kind.ANNOTATION)
    b.event(cpu, "ProfilerStep#1", 400 * US, 400 * US, Kind.ANNOTATION)
    for k, t in enumerate((0, 400)):
        b.event(cpu, "cudaLaunchKernel", (t + 5) * US, 5 * US, Kind.LAUNCH, correlation=10 * k + 1)
        b.event(gpu, "k", (t + 12) * US, 100 * US, Kind.KERNEL, correlation=10 * k + 1)
    t = 400
    b.event(cpu, "aten::item", (t + 20) * US, 100 * US, Kind.CPU_OP)
    b.event(cpu, "aten::_local_scalar_dense", (t + 21) * US, 98 * US, Kind.CPU_OP)
    b.event(cpu, "cudaStreamSynchronize", (t + 30) * US, 85 * US, Kind.SYNC_CALL)
    b.event(cpu, "timing", (t + 150) * US, 50 * US, Kind.ANNOTATION)
    b.event(cpu, "cudaDeviceSynchronize", (t + 160) * US, 30 * US, Kind.SYNC_CALL)
    b.event(cpu, "cudaLaunchKernel", (t + 300) * US, 5 * US, Kind.LAUNCH, correlation=99)
    b.event(gpu, "k2", (t + 306) * US, 10 * US, Kind.KERNEL, correlation=99)
    d = diagnose(b.build())
    i = int(np.flatnonzero(d.gaps.start_ns == (t + 112) * US)[0])
    assert int(d.gaps.end_ns[i]) == (t + 306) * US
    facts_waits = [(d.trace.name(w.event), w.where, w.calls, w.ns) for w in card_facts_of(d, i).step_waits]
    # each wait counts by its overlap with the GPU's idle: the read [420, 520) µs only
    # from the kernel's end at 512 (audit 3)
    assert facts_waits == [("aten::item", "", 1, 8 * US), ("cudaDeviceSynchronize", "timing", 1, 30 * US)]
    c = card_for_gap(d, i)
    assert c.cause == Cause.SYNC
    assert (
        "In this step the thread blocked on the device 2 times: `aten::item` (8.0 µs; in this gap), "
        "`cudaDeviceSynchronize` in `timing` (30.0 µs; in this gap)."
    ) in c.why, c.why
    assert c.first_experiment.startswith("Remove each blocking wait of the step, not only the first")
    assert "`aten::item`: keep the value on the GPU" in c.first_experiment
    assert "`cudaDeviceSynchronize` in `timing`: drop each where nothing needs the device finished" in (
        c.first_experiment
    )
    # one wait in the step: the single-wait advice, no list
    b2 = TraceBuilder()
    cpu, gpu = _lanes(b2)
    b2.event(cpu, "cudaLaunchKernel", 0, 5 * US, Kind.LAUNCH, correlation=1)
    b2.event(gpu, "k", 6 * US, 100 * US, Kind.KERNEL, correlation=1)
    b2.event(cpu, "cudaStreamSynchronize", 10 * US, 100 * US, Kind.SYNC_CALL)
    b2.event(cpu, "cudaLaunchKernel", 300 * US, 5 * US, Kind.LAUNCH, correlation=2)
    b2.event(gpu, "k2", 306 * US, 10 * US, Kind.KERNEL, correlation=2)
    d2 = diagnose(b2.build())
    c2 = card_for_gap(d2, _largest(d2))
    assert "blocked on the device" not in c2.why
    # no steps: no loop to name (audit 3)
    assert c2.first_experiment.startswith("Remove the blocking wait `cudaStreamSynchronize`: keep the decision")


def card_facts_of(d, i: int):
    """The ``Facts`` the card of gap ``i`` is chosen from."""
    rows = np.array([i])
    return card_facts(d, rows, Cause(int(d.gaps.cause[i])), list(d.evidence(i)), "")


def test_a_models_own_tensor_op_is_per_op_overhead_not_work_to_move():
    """Audit 4 (tracelens b200): host time led by one of the model's tensor ops (a
    with_stack ``Tensor.view`` call) was told to run "after the step, or in another
    thread"; a tensor op is the program itself: the fix is the per-op cost (graphs,
    compile). Work that is not a tensor op keeps the generic advice."""

    def card(lead: str):
        b = TraceBuilder()
        cpu, gpu = _lanes(b)
        b.event(cpu, "aten::mm", 0, 3 * US, Kind.CPU_OP)  # a PyTorch program
        b.event(cpu, "cudaLaunchKernel", 4 * US, 5 * US, Kind.LAUNCH, correlation=1)
        b.event(gpu, "k", 10 * US, 10 * US, Kind.KERNEL, correlation=1)
        b.event(cpu, lead, 20 * US, 300 * US, Kind.PYTHON)
        b.event(cpu, "cudaLaunchKernel", 325 * US, 5 * US, Kind.LAUNCH, correlation=2)
        b.event(gpu, "k2", 332 * US, 10 * US, Kind.KERNEL, correlation=2)
        d = diagnose(b.build())
        c = card_for_gap(d, _largest(d))
        assert c.cause == Cause.HOST
        return c

    c = card("<built-in method view of Tensor object at 0x7f00>")
    assert "one of the model's own tensor operations" in c.first_experiment, c.first_experiment
    assert "another thread" in c.first_experiment  # "cannot run ... on another thread"
    assert "cannot run after the step" in c.first_experiment
    assert c.fix == "cut the per-op host cost: a CUDA graph or torch.compile (mode='reduce-overhead')"
    other = card("log_metrics")
    assert "tensor operations" not in other.first_experiment


def _memset_before_queued_kernel(memset_dur_us: float) -> TraceBuilder:
    """A 64 MiB memset recorded as ``memset_dur_us`` right before a kernel that was
    queued long before, then 400 µs of idle before that kernel starts."""
    b = TraceBuilder()
    cpu, gpu = _lanes(b)
    b.event(cpu, "cudaLaunchKernel", 0, 5 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k0", 10 * US, 50 * US, Kind.KERNEL, correlation=1)
    b.event(cpu, "cudaMemsetAsync", 6 * US, 3 * US, Kind.RUNTIME, correlation=2)
    b.event(gpu, "Memset (Device)", 60 * US, int(memset_dur_us * US), Kind.MEMSET, correlation=2, bytes=64 << 20)
    b.event(cpu, "cudaLaunchKernel", 10 * US, 5 * US, Kind.LAUNCH, correlation=3)
    b.event(gpu, "k1", 462 * US, 50 * US, Kind.KERNEL, correlation=3)
    return b


def test_a_memset_recorded_faster_than_any_memory_is_told_as_still_running():
    """Audit 4 (extrap/profile16 #1, #2): a 61 MiB memset recorded as 2 µs (32 TB/s)
    before each 0.44 ms "queued, waiting" gap; the card asked for a cudaStreamWaitEvent
    the program does not have. 64 MiB in 2 µs is 33,554 bytes/ns, over the 20,000 bound;
    the same memset recorded as 380 µs (177 GB/s) is plausible and keeps the
    dependency advice."""
    d = diagnose(_memset_before_queued_kernel(2).build())
    i = _largest(d)
    c = card_for_gap(d, i)
    assert c.cause == Cause.DEPENDENCY
    assert c.smell == "device op still running (recorded too short)"
    assert "64.0 MiB as taking 2.0 µs (34 TB/s" in c.first_experiment, c.first_experiment
    assert "cudaStreamWaitEvent" not in c.first_experiment
    slow = diagnose(_memset_before_queued_kernel(380).build())
    c2 = card_for_gap(slow, _largest(slow))
    assert "recorded too short" not in c2.smell and "TB/s" not in c2.first_experiment


def test_profile16_memsets_recorded_too_short():
    """The corpus case: profile16's gaps #1 and #2 follow a 61.0 MiB memset recorded as
    about 2 µs (checked here from the trace's own columns, not the card's text)."""
    path = require(CORPUS / "extrap" / "profile16.sqlite")
    d = diagnose(load(str(path)))
    for i in (1, 2):
        c = card_for_gap(d, i)
        assert c.smell == "device op still running (recorded too short)", (i, c.smell)
    t = d.trace
    ms = np.flatnonzero((t.kind == int(Kind.MEMSET)) & (t.bytes == 64_000_000))
    assert ms.size and int(t.dur_ns[ms].min()) < 3_000  # 61.0 MiB in under 3 µs: over 20 TB/s
