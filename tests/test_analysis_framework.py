"""Cards on framework machinery a gap's time belongs to (``gapscope.analysis.framework_work``):
host time in tensor copy ops that move data through the host, Triton's Python launcher
and graph replays, DDP's buffer sync and bucket-to-grad copies, autograd backward
nodes. Hand-made traces, and corpus cards checked against their raw events."""

from __future__ import annotations

import pytest

from gapscope.analysis import Cause, diagnose
from gapscope.analysis.card import card_for_gap
from gapscope.parsers import load
from gapscope.parsers.builder import TraceBuilder
from gapscope.parsers.model import Kind
from tests.conftest import CORPUS, require
from tests.test_analysis_cards import _main_and_stream

US = 1_000


def _host_copy(d2h: bool = True, h2d: bool = True, dtype: object = "float", dims: object = (1024, 128, 32)):
    """k1 [5, 10) µs, then on thread `main` `aten::clone` [10, 410) µs of a [1024, 128, 32]
    float tensor holding `aten::copy_` and `aten::_copy_from` [13, 407) µs, inside which
    the device copies 16 MiB to the host [20, 70) µs and back [350, 400) µs (either
    left out by the flags); k2 launched at 410 µs runs at 420 µs."""
    from gapscope.parsers.model import CopyKind

    b = TraceBuilder()
    cpu = b.lane("1", "1", process_name="python3", thread_name="main")
    gpu = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    b.event(cpu, "cudaLaunchKernel", 0, 5 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k1", 5 * US, 5 * US, Kind.KERNEL, correlation=1)
    shape = list(dims) if isinstance(dims, tuple) else dims
    dims = {"Input Dims": [shape, []], "Input type": [dtype, "Scalar"]}
    b.event(cpu, "aten::clone", 10 * US, 400 * US, Kind.CPU_OP, args=dims)
    b.event(cpu, "aten::copy_", 12 * US, 396 * US, Kind.CPU_OP, args=dims)
    b.event(cpu, "aten::_copy_from", 13 * US, 394 * US, Kind.CPU_OP, args=dims)
    mib16 = 16 << 20
    if d2h:
        b.event(gpu, "Memcpy DtoH", 20 * US, 50 * US, Kind.MEMCPY, bytes=mib16, copy_kind=CopyKind.D2H)
    if h2d:
        b.event(gpu, "Memcpy HtoD", 350 * US, 50 * US, Kind.MEMCPY, bytes=mib16, copy_kind=CopyKind.H2D)
    b.event(cpu, "cudaLaunchKernel", 410 * US, 5 * US, Kind.LAUNCH, correlation=2)
    b.event(gpu, "k2", 420 * US, 5 * US, Kind.KERNEL, correlation=2)
    return diagnose(b.build())


def test_host_time_in_a_copy_through_the_host_advises_keeping_it_on_the_device():
    """mtia_rank_0 #440: 6.2 ms of host time in backward `aten::_copy_from` calls that
    took a permuted 16 MiB tensor to the host and back were advised "take
    `aten::_copy_from` off the critical path". A copy op whose calls hold GPU copies
    both ways is a round trip: keep it on the device."""
    d = _host_copy()
    g = d.gaps
    assert len(g) == 1 and (g.start_ns[0], g.end_ns[0]) == (10 * US, 420 * US)
    c = card_for_gap(d, 0)
    assert c.cause == Cause.HOST
    assert c.first_experiment.startswith(
        "`aten::_copy_from` takes the data to the host and back: inside its calls the device ran 1 device-to-host "
        "copy (16.0 MiB) and 1 host-to-device copy (16.0 MiB), and the thread spent "
    )
    assert (
        "Keep the copy on the device: the largest call copies a [1024, 128, 32] float tensor under `aten::clone` into"
        in (c.first_experiment)
    )
    assert "off the critical path" not in c.first_experiment
    # the type is the trace's text: one that does not read as a type is left out
    c = card_for_gap(_host_copy(dtype="float\x1b[31m`x"), 0)
    assert "copies a [1024, 128, 32] tensor under `aten::clone`" in c.first_experiment


def test_host_time_in_a_one_way_copy_advises_the_device_or_pinned_memory():
    c = card_for_gap(_host_copy(d2h=False), 0)
    assert c.first_experiment.startswith(
        "`aten::_copy_from` copies to the device (inside its calls the device ran 1 host-to-device copy (16.0 MiB))"
    )
    assert "Make the tensor on the device" in c.first_experiment and "pin_memory()" in c.first_experiment
    c = card_for_gap(_host_copy(h2d=False), 0)
    assert c.first_experiment.startswith(
        "`aten::_copy_from` copies to the host (inside its calls the device ran 1 device-to-host copy (16.0 MiB))"
    )
    assert "read it after the step" in c.first_experiment
    # no GPU copy inside: the copy op's host time is host work like any other
    assert "copies to" not in card_for_gap(_host_copy(d2h=False, h2d=False), 0).first_experiment


def _triton_then_replay():
    """ROCm thread `main`: k1 [5, 10) µs; Triton's Python launcher
    `triton/runtime/jit.py(370): <lambda>` [10, 150) µs around `run` [11, 149), whose
    argument checks (`native_specialize_impl` [12, 60), `is_within_2gb` [60, 120)) come
    before its one `hipModuleLaunchKernel` [130, 138) of k2 [140, 150); then the step's
    replay `runner.py(10): replay` [150, 260) around torch's `graphs.py(139): replay`
    [152, 258), whose `hipGraphLaunch` [240, 250) runs node g1 at [300, 310) µs."""
    b = TraceBuilder()
    cpu = b.lane("1", "1", process_name="python3", thread_name="main")
    gpu = b.lane("0", "7", is_gpu=True, device=0, stream=7)
    b.event(cpu, "hipLaunchKernel", 0, 5 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k1", 5 * US, 5 * US, Kind.KERNEL, correlation=1)
    b.event(cpu, "triton/runtime/jit.py(370): <lambda>", 10 * US, 140 * US, Kind.PYTHON)
    b.event(cpu, "triton/runtime/jit.py(708): run", 11 * US, 138 * US, Kind.PYTHON)
    b.event(cpu, "<built-in function native_specialize_impl>", 12 * US, 48 * US, Kind.PYTHON)
    b.event(cpu, "triton/backends/amd/compiler.py(167): is_within_2gb", 60 * US, 60 * US, Kind.PYTHON)
    b.event(cpu, "hipModuleLaunchKernel", 130 * US, 8 * US, Kind.LAUNCH, correlation=2)
    b.event(gpu, "k2", 140 * US, 10 * US, Kind.KERNEL, correlation=2)
    b.event(cpu, "runner.py(10): replay", 150 * US, 110 * US, Kind.PYTHON)
    b.event(cpu, "torch/cuda/graphs.py(139): replay", 152 * US, 106 * US, Kind.PYTHON)
    b.event(cpu, "hipGraphLaunch", 240 * US, 10 * US, Kind.LAUNCH, correlation=3)
    b.event(gpu, "g1", 300 * US, 10 * US, Kind.KERNEL, correlation=3)
    return diagnose(b.build())


def test_triton_launcher_on_a_graph_replaying_thread_is_not_told_to_capture_a_graph():
    """sglang Qwen3 decode #4: 0.122 ms of Triton's Python launcher for one eager kernel,
    before the step's HIP graph replay, was advised "torch.compile (mode='reduce-overhead'
    adds HIP graphs)"; #5, the replay's own host time, the same. The launcher is named
    for what it does per call, and a thread that replays graphs is told to capture the
    eager work into them; the replay itself is a fixed cost per replay."""
    d = _triton_then_replay()
    g = d.gaps
    assert [(int(a) // US, int(b) // US) for a, b in zip(g.start_ns, g.end_ns)] == [(10, 140), (150, 300)]
    c = card_for_gap(d, 0)
    assert c.cause == Cause.HOST
    assert c.first_experiment.startswith(
        "`triton/backends/amd/compiler.py(167): is_within_2gb` (60.0 µs) runs inside Triton's Python launcher "
        "`triton/runtime/jit.py(370): <lambda>`: before its one launch call it specializes and checks"
    )
    assert "This thread replays HIP graphs (1 `hipGraphLaunch` call), and this kernel launches eagerly" in (
        c.first_experiment
    )
    assert "torch.compile" not in c.first_experiment
    c = card_for_gap(d, 1)
    assert "is the HIP graph replay itself: it launches the graph with `hipGraphLaunch`" in c.first_experiment
    assert "Replay less often" in c.first_experiment and "torch.compile" not in c.first_experiment


def _ddp_buffer_broadcast(group_size: int = 1, broadcast_before: bool = False):
    """k1 [5, 10) µs; on thread `main` `DistributedDataParallel.forward` [1, 400) µs
    broadcasts the buffers (`c10d::broadcast_` [20, 50) µs, or [2, 8) µs before the gap
    with ``broadcast_before``, holding `nccl:broadcast` and `record_param_comms` with
    its group size), then copies them back in 30 `aten::copy_` calls of 10 µs from 60 µs,
    each a 1 µs device-to-device copy; k2 launched at 390 µs runs at 400 µs."""
    from gapscope.parsers.model import CopyKind

    b = TraceBuilder()
    cpu, gpu = _main_and_stream(b)
    b.event(cpu, "DistributedDataParallel.forward", 1 * US, 404 * US, Kind.ANNOTATION)
    b.event(cpu, "cudaLaunchKernel", 9 * US, 1 * US if broadcast_before else 5 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k1", 5 * US, 5 * US, Kind.KERNEL, correlation=1)
    at = 2 if broadcast_before else 20
    b.event(cpu, "c10d::broadcast_", at * US, 6 * US if broadcast_before else 30 * US, Kind.CPU_OP)
    b.event(cpu, "nccl:broadcast", (at + 1) * US, 2 * US, Kind.CPU_OP)
    b.event(cpu, "record_param_comms", (at + 3) * US, 2 * US, Kind.CPU_OP, args={"Group size": group_size})
    for k in range(30):
        t = (60 + 10 * k) * US
        b.event(cpu, "aten::copy_", t, 9 * US, Kind.CPU_OP)
        b.event(cpu, "cudaMemcpyAsync", t + 2 * US, 5 * US, Kind.MEMCPY_CALL, correlation=10 + k)
        b.event(
            gpu, "Memcpy DtoD", t + 5 * US, 1 * US, Kind.MEMCPY, correlation=10 + k, bytes=1024, copy_kind=CopyKind.D2D
        )
    b.event(cpu, "cudaLaunchKernel", 390 * US, 5 * US, Kind.LAUNCH, correlation=2)
    b.event(gpu, "k2", 400 * US, 5 * US, Kind.KERNEL, correlation=2)
    return diagnose(b.build())


@pytest.mark.parametrize("broadcast_before", [False, True])
def test_ddp_buffer_broadcast_is_named_with_broadcast_buffers_false(broadcast_before):
    """hta/rank-0 #2: DDP's forward broadcast its buffers and copied them back in 159
    `aten::copy_` calls, in a process group of one rank, and the card advised
    torch.compile; nccl_data #4 (the broadcasts before the gap, 22.6 ms of
    `aten::unflatten_dense_tensors` in it) advised taking the unflatten off the
    critical path. The card names the buffer sync and `broadcast_buffers=False`."""
    d = _ddp_buffer_broadcast(broadcast_before=broadcast_before)
    g = d.gaps
    assert len(g) == 1 and (g.start_ns[0], g.end_ns[0]) == (10 * US, 400 * US)
    c = card_for_gap(d, 0)
    # the sync calls in the gap: the broadcast's 30 µs (when in it) and 30 copies of 9 µs
    sync = "0.300 ms" if not broadcast_before else "0.270 ms"
    assert c.first_experiment.startswith(
        # no flatten or unflatten recorded here: not named (an attack found them always said)
        "`DistributedDataParallel.forward` syncs the module's buffers before the forward (one broadcast, "
        f"then 30 `aten::copy_` calls back into the buffers; {sync} of this gap), on every forward"
    ), c.first_experiment
    assert "construct DDP with broadcast_buffers=False" in c.first_experiment
    assert "process group has one rank" in c.first_experiment and "torch.compile" not in c.first_experiment
    assert "one rank" not in card_for_gap(_ddp_buffer_broadcast(group_size=8), 0).first_experiment


def test_an_autograd_backward_node_is_not_told_to_move_after_the_step():
    """param/dlrm worker0 #101: 0.118 ms in `CatBackward0`, which made 26 `aten::narrow`
    views and launched nothing, was advised "take `CatBackward0` off the critical path:
    run it after the step". A backward node runs when backward() reaches it; the card
    says so, with the calls it makes."""
    b = TraceBuilder()
    cpu, gpu = _main_and_stream(b)
    b.event(cpu, "cudaLaunchKernel", 0, 2 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k1", 5 * US, 5 * US, Kind.KERNEL, correlation=1)
    b.event(cpu, "autograd::engine::evaluate_function: CatBackward0", 12 * US, 130 * US, Kind.CPU_OP)
    b.event(cpu, "CatBackward0", 13 * US, 128 * US, Kind.CPU_OP)
    for k in range(26):
        b.event(cpu, "aten::narrow", (14 + 4 * k) * US, 3 * US, Kind.CPU_OP)
    b.event(cpu, "cudaLaunchKernel", 145 * US, 5 * US, Kind.LAUNCH, correlation=2)
    b.event(gpu, "k2", 155 * US, 5 * US, Kind.KERNEL, correlation=2)
    c = card_for_gap(diagnose(b.build()), 0)
    assert c.cause == Cause.HOST
    assert "is autograd's backward of a forward `cat`: it runs when backward() reaches it" in c.first_experiment
    assert "making 26 `aten::narrow` calls, with no GPU work" in c.first_experiment, c.first_experiment
    assert "off the critical path" not in c.first_experiment


@pytest.mark.parametrize(
    ("dims", "dtype", "said"),
    [
        ((1024, 128, 32), "long int", "a [1024, 128, 32] long int tensor"),
        ((True, False), "float", None),  # bools are not sizes
        ((-1, 5), "float", None),
        ((10**30,), "float", None),
        ((7,) * 20, "float", None),  # at most 8 dimensions
        ((4, 4), "Scalar", "a [4, 4] tensor"),  # no dtype named
        ((4, 4), "TensorList", "a [4, 4] tensor"),
        ((4, 4), ["float"], "a [4, 4] tensor"),
    ],
)
def test_a_copied_tensor_is_named_only_from_args_that_read_as_a_shape(dims, dtype, said):
    """An attack with hand-made args: `Input Dims` of bools, negative or huge sizes, or
    20000 dimensions, and `Input type` words that are no dtype, were put in the text."""
    c = card_for_gap(_host_copy(dims=dims, dtype=dtype), 0)
    if said is None:
        assert "the largest call copies a tensor under `aten::clone`" in c.first_experiment, c.first_experiment
    else:
        assert f"the largest call copies {said} under `aten::clone`" in c.first_experiment, c.first_experiment


def test_a_copy_another_thread_issued_is_not_the_copy_ops():
    """An attack: thread 2's cudaMemcpyAsync ran its copy while thread 1 sat in
    `aten::to`, and the card said `aten::to` copied to the device."""
    from gapscope.parsers.model import CopyKind

    b = TraceBuilder()
    cpu, gpu = _main_and_stream(b)
    other = b.lane("1", "2", process_name="python3", thread_name="loader")
    s8 = b.lane("0", "8", is_gpu=True, device=0, stream=8)
    b.event(cpu, "cudaLaunchKernel", 0, 2 * US, Kind.LAUNCH, correlation=1)
    b.event(gpu, "k1", 5 * US, 5 * US, Kind.KERNEL, correlation=1)
    b.event(cpu, "aten::to", 10 * US, 400 * US, Kind.CPU_OP)
    b.event(other, "cudaMemcpyAsync", 20 * US, 5 * US, Kind.MEMCPY_CALL, correlation=60)
    b.event(
        s8,
        "Memcpy HtoD (Pageable -> Device)",
        30 * US,
        40 * US,
        Kind.MEMCPY,
        correlation=60,
        bytes=1 << 20,
        copy_kind=CopyKind.H2D,
        pageable=True,
    )
    b.event(cpu, "cudaLaunchKernel", 410 * US, 5 * US, Kind.LAUNCH, correlation=2)
    b.event(gpu, "k2", 420 * US, 5 * US, Kind.KERNEL, correlation=2)
    c = card_for_gap(diagnose(b.build()), 0)
    assert "copies to the device" not in c.first_experiment, c.first_experiment


def test_ddp_bucket_to_grad_copies_advise_gradient_as_bucket_view():
    """hta/rank-0 #84 (an audit of the raw events): 161 DtoD copies, every one issued
    inside `torch.distributed.ddp.reducer::copy_bucket_to_grad`, were advised "batch
    them into one copy of a flat buffer"; DDP's own remedy is gradient_as_bucket_view."""
    d = diagnose(load(require(CORPUS / "hta" / "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")))
    c = card_for_gap(d, 84)
    assert c.first_experiment.startswith(
        "These are DDP's copies of the reduced gradient buckets back into each parameter's .grad (161 copies "
        "issued inside `torch.distributed.ddp.reducer::copy_bucket_to_grad`): construct DDP with "
        "gradient_as_bucket_view=True"
    ), c.first_experiment
