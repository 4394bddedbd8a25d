"""Small deterministic torch workloads that reproduce each idle-gap smell.

Each scenario is a generator ``fn(ctx)``: the code before its ``yield`` is set-up
(weights, cuBLAS warm-up, CUDA graph capture) and runs unprofiled; the code after it
runs under a ``Profiler`` with the scenario's ``Schedule`` and calls ``ctx.step()``
once per step. The first step is the profiler's warm-up (same work, not recorded).
Sizes are chosen per device: seconds on a GPU, about a second on a CPU, and smaller
still with ``tiny=True`` (tests). On a CPU only CPU activity is recorded; the CPU
lane still shows the host side of each smell (the ranges, ``aten::item``, the copies'
``aten::to``), and the run says so.

| name | smell (cause class) | what the steps do |
| --- | --- | --- |
| decode | host island + launch tax (host, launch; the ``.item()`` wait is a sync cliff only where the kernels outlast the launches: 3% on an H200) | toy decoder, ``.item()`` and a JSON log line per token |
| decode-graph | graph-captured decode (launch tax removed) | same model, decode step replayed from a ``torch.cuda.CUDAGraph`` |
| decode-eager | launch-bound decode (launch) | decode-graph's loop with the step launched op by op (the pair's before) |
| picket-fence | picket fence (launch) | hundreds of tiny elementwise kernels from a Python loop |
| host-island | host island (host) | GPU prefill, then tokenize + JSON on the CPU, then a decode step |
| copy-on-path | copy on the path (copy) | ``.cpu().numpy()`` and ``torch.from_numpy(np).to(device)`` between kernels |
| sync-cliff | sync cliff (sync) | matmul + attention, a loop of ``.item()`` reads per layer, synchronize for timing |
"""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from gapscope.capture.profile import Profiler, Schedule, require_torch
from gapscope.capture.signals import Stopped, stop_on_signals
from gapscope.capture.toymodel import TEXT, Sizes, ToyDecoder, detokenize, tokenize

__all__ = ["Scenario", "SCENARIOS", "Ctx", "run_scenario"]


class Ctx:
    """What a scenario sees: ``torch``, ``device``, ``cuda`` (bool), ``tiny`` (bool),
    ``step()`` (advance the profiler), ``rf(name)`` (``record_function`` range),
    ``note(msg)`` (a message for the user, also stored in the trace's run log)."""

    def __init__(self, torch: Any, cuda: bool, tiny: bool, say: Callable[[str], None]) -> None:
        self.torch = torch
        self.cuda = cuda
        self.tiny = tiny
        self.device = torch.device("cuda" if cuda else "cpu")
        self.profiler: Profiler | None = None
        self.note = say

    def step(self) -> None:
        if self.profiler is not None:
            self.profiler.step()

    def rf(self, name: str) -> Any:
        return self.torch.profiler.record_function(name)

    def pick(self, gpu: Any, cpu: Any, tiny: Any) -> Any:
        """Size for this run: ``tiny`` when tiny, else ``gpu`` or ``cpu`` by device."""
        return tiny if self.tiny else (gpu if self.cuda else cpu)


@dataclass(frozen=True)
class Scenario:
    """A workload: ``name``, the ``smell`` and ``cause`` it reproduces, ``about`` (one
    sentence), ``schedule(ctx)`` -> ``Schedule``, ``fn(ctx)`` the generator."""

    name: str
    smell: str
    cause: str
    about: str
    schedule: Callable[[Ctx], Schedule]
    fn: Callable[[Ctx], Iterator[None]]


# -- decode and decode-graph ---------------------------------------------------------


def _decode_sizes(ctx: Ctx) -> Sizes:
    return ctx.pick(
        # GPU: few, fat layers, so the per-token host work (the seed's .item() + logging
        # callback) rather than the launch tax of many tiny kernels makes most of the idle
        gpu=Sizes(vocab=8192, d_model=2048, layers=2, max_len=256, prompt_repeat=3, new_tokens=32),
        cpu=Sizes(vocab=512, d_model=128, layers=4, max_len=128, prompt_repeat=1, new_tokens=16),
        tiny=Sizes(vocab=64, d_model=32, layers=2, max_len=64, prompt_repeat=1, new_tokens=4),
    )


def _quiet_logger(name: str) -> logging.Logger:
    """A logger that formats every record into a buffer (real logging work, no console output)."""
    log = logging.getLogger(name)
    log.handlers[:] = [logging.StreamHandler(io.StringIO())]
    log.handlers[0].setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    log.setLevel(logging.INFO)
    log.propagate = False
    return log


_STOP = re.compile(r"\b(?:feed the machine|end of text)\b")


def _log_token(log: logging.Logger, i: int, out: list[int]) -> bool:
    """The per-token callback of a naive server: detokenize the running text, check the
    stop strings, log a JSON record. Pure host work, on the critical path of every token."""
    text = detokenize(out)
    stop = _STOP.search(text) is not None
    log.info(
        "%s", json.dumps({"i": i, "token": out[-1], "text": text, "ids": out, "stop": stop}, indent=1, sort_keys=True)
    )
    return stop


def _prompt_ids(sz: Sizes) -> list[int]:
    ids = tokenize(" ".join([TEXT] * sz.prompt_repeat), sz.vocab)
    return ids[: sz.max_len - sz.new_tokens - 1]


def _decode(ctx: Ctx) -> Iterator[None]:
    """Batch-1 decode with a per-token ``.item()`` (sync) and per-token logging (host)."""
    torch, sz = ctx.torch, _decode_sizes(ctx)
    model = ToyDecoder(torch, ctx.device, sz)
    log = _quiet_logger("gapscope.scenario.decode")
    model.prefill(_prompt_ids(sz))  # cuBLAS handles and allocator warm-up, unprofiled

    def request(stepwise: bool) -> None:
        with ctx.rf("tokenize"):
            ids = _prompt_ids(sz)
        with ctx.rf("prefill"):
            logits = model.prefill(ids)
        with ctx.rf("sample"):
            token = torch.argmax(logits).view(1)
            out = [int(token.item())]
        pos = torch.tensor([len(ids)], device=ctx.device)
        if stepwise:
            ctx.step()
        for i in range(sz.new_tokens):
            with ctx.rf("decode_step"):
                logits = model.decode(token, pos)
                with ctx.rf("sample"):
                    token = torch.argmax(logits).view(1)
                    out.append(int(token.item()))  # the per-token sync
                pos += 1
                with ctx.rf("log_token"):
                    _log_token(log, i, out)
            if stepwise:
                ctx.step()
        with ctx.rf("detokenize"):
            detokenize(out)
        if stepwise:
            ctx.step()

    yield
    request(stepwise=False)  # the profiler's warm-up step: one whole request
    ctx.step()
    request(stepwise=True)


def _decode_schedule(ctx: Ctx) -> Schedule:
    return Schedule(wait=0, warmup=1, active=_decode_sizes(ctx).new_tokens + 2)


def _decode_graph(ctx: Ctx) -> Iterator[None]:
    """The decode loop with the step captured once and replayed (CUDA graph)."""
    return _decode_static(ctx, graph=True)


def _decode_eager(ctx: Ctx) -> Iterator[None]:
    """``decode-graph``'s loop with the step launched op by op: the pair's "before"."""
    return _decode_static(ctx, graph=False)


def _decode_static(ctx: Ctx, *, graph: bool) -> Iterator[None]:
    """Static-shape decode (buffers on the device, no ``.item()``, no logging); the step
    is a CUDA graph replay when ``graph`` and a CUDA device, else the eager body."""
    torch, sz = ctx.torch, _decode_sizes(ctx)
    model = ToyDecoder(torch, ctx.device, sz)
    token_buf = torch.zeros(1, dtype=torch.long, device=ctx.device)
    pos_buf = torch.zeros(1, dtype=torch.long, device=ctx.device)
    out_buf = torch.zeros(sz.max_len, dtype=torch.long, device=ctx.device)

    def body() -> None:
        nxt = torch.argmax(model.decode(token_buf, pos_buf)).view(1)
        out_buf.index_copy_(0, pos_buf, nxt)
        token_buf.copy_(nxt)
        pos_buf.add_(1)

    replay: Callable[[], None] = body
    if ctx.cuda and graph:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm up on a side stream before capture (PyTorch docs)
            for _ in range(3):
                body()
        torch.cuda.current_stream().wait_stream(side)
        cuda_graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(cuda_graph):
            body()
        replay = cuda_graph.replay
    elif graph:
        ctx.note(
            "decode-graph: CUDA graphs need a GPU; on the CPU the same static-shape step runs eagerly, "
            "so this trace shows the loop's structure, not the launch savings"
        )
        body()
    else:
        body()  # the eager step's first run (allocator, cuBLAS), unprofiled like the graph's warm-up

    def request(stepwise: bool) -> None:
        with ctx.rf("tokenize"):
            ids = _prompt_ids(sz)
        with ctx.rf("prefill"):
            logits = model.prefill(ids)
        with ctx.rf("sample"):
            token_buf.copy_(torch.argmax(logits).view(1))
            pos_buf.fill_(len(ids))
        if stepwise:
            ctx.step()
        for _ in range(sz.new_tokens):
            with ctx.rf("decode_step"):
                replay()  # no .item(), no logging: tokens stay on the device
            if stepwise:
                ctx.step()
        with ctx.rf("detokenize"):
            detokenize(out_buf[len(ids) : len(ids) + sz.new_tokens].cpu().tolist())  # one read, after the loop
        if stepwise:
            ctx.step()

    yield
    request(stepwise=False)
    ctx.step()
    request(stepwise=True)


# -- picket fence ----------------------------------------------------------------------


def _picket_fence(ctx: Ctx) -> Iterator[None]:
    """Many tiny elementwise kernels launched one by one from a Python loop (launch-bound)."""
    torch = ctx.torch
    groups = ctx.pick(gpu=32, cpu=16, tiny=4)  # 4 kernels per group
    x = torch.ones(256, device=ctx.device)
    yield
    for _ in range(_fence_schedule(ctx).active + 1):
        with ctx.rf("decode_step"):
            for _ in range(groups):
                x = x * 1.0001
                x = x + 0.0001
                x = torch.relu(x)
                x = torch.tanh(x)
        ctx.step()


def _fence_schedule(ctx: Ctx) -> Schedule:
    return Schedule(wait=0, warmup=1, active=ctx.pick(gpu=8, cpu=4, tiny=2))


# -- host island -------------------------------------------------------------------------


def _host_island(ctx: Ctx) -> Iterator[None]:
    """GPU prefill, then CPU tokenize of the next request and a JSON response, then decode."""
    torch = ctx.torch
    n = ctx.pick(gpu=2048, cpu=128, tiny=32)
    layers = ctx.pick(gpu=8, cpu=4, tiny=2)
    words = ctx.pick(gpu=400, cpu=60, tiny=6)  # copies of TEXT tokenized per step
    g = torch.Generator().manual_seed(0)
    w = [(torch.randn(n, n, generator=g) / n**0.5).to(ctx.device) for _ in range(layers)]
    x = torch.randn(n, n, generator=g).to(ctx.device)
    text = " ".join([TEXT] * words)
    _ = x @ w[0]
    yield
    for k in range(_host_schedule(ctx).active + 1):
        with ctx.rf("prefill"):
            h = x
            for m in w:
                h = torch.tanh(h @ m)
        with ctx.rf("tokenize"):
            ids = tokenize(text, 32000)
        with ctx.rf("json"):
            body = json.dumps({"request": k, "ids": ids, "text": text[:4096]})
            json.loads(body)
        with ctx.rf("decode_step"):
            h = torch.tanh(h[:1] @ w[0])
        ctx.step()


def _host_schedule(ctx: Ctx) -> Schedule:
    return Schedule(wait=0, warmup=1, active=ctx.pick(gpu=4, cpu=3, tiny=2))


# -- copy on the path ----------------------------------------------------------------------


def _copy_on_path(ctx: Ctx) -> Iterator[None]:
    """Host numpy round trips force D2H and pageable H2D copies between kernels.

    The host work between the copies is kept small on purpose (a few columns), so the
    idle time is the copies' own: ``tensor.cpu().numpy()`` (D2H, waits for the kernel),
    ``torch.from_numpy(...).to(device)`` and ``torch.as_tensor(np, device=...)`` (pageable H2D).
    """
    torch = ctx.torch
    rows, cols = ctx.pick(gpu=(4096, 1024), cpu=(256, 128), tiny=(32, 16))
    g = torch.Generator().manual_seed(0)
    w = (torch.randn(cols, cols, generator=g) / cols**0.5).to(ctx.device)
    batch_np = torch.randn(rows, cols, generator=g).numpy()  # the host-side batch, pageable memory
    if not ctx.cuda:
        ctx.note(
            "copy-on-path: on the CPU .cpu() and .to(device) do not copy; the trace shows the "
            "numpy round trips (aten::to, aten::copy_) on the CPU lane only"
        )
    _ = torch.from_numpy(batch_np).to(ctx.device) @ w
    yield
    for _ in range(_copy_schedule(ctx).active + 1):
        with ctx.rf("to_device"):
            x = torch.from_numpy(batch_np).to(ctx.device)  # pageable H2D
        with ctx.rf("model"):
            y = torch.tanh(x @ w)
        with ctx.rf("to_host"):
            y_np = y.cpu().numpy()  # D2H: waits for the kernel, then copies
        with ctx.rf("postprocess"):
            y_np[:, :4] = y_np[:, :4].clip(-3.0, 3.0)  # a little numpy: the reason for the round trip
        with ctx.rf("to_device"):
            z = torch.as_tensor(y_np, device=ctx.device)  # pageable H2D again
        with ctx.rf("model"):
            z = torch.tanh(z @ w)
        with ctx.rf("to_host"):
            batch_np = z.cpu().numpy()  # and back, feeding the next step
        ctx.step()


def _copy_schedule(ctx: Ctx) -> Schedule:
    return Schedule(wait=0, warmup=1, active=ctx.pick(gpu=4, cpu=3, tiny=2))


# -- sync cliff ------------------------------------------------------------------------------


def _sync_cliff(ctx: Ctx) -> Iterator[None]:
    """Each layer's result is read element by element on the host (``v.item()`` in a
    Python loop), and each step is timed with a device synchronize: the queue drains,
    and the GPU waits while the host does one blocking round trip per element."""
    import time

    torch = ctx.torch
    n = ctx.pick(gpu=2048, cpu=128, tiny=32)
    layers = ctx.pick(gpu=4, cpu=2, tiny=2)
    reads = ctx.pick(gpu=16, cpu=8, tiny=4)  # .item() calls per layer
    g = torch.Generator().manual_seed(0)
    wq = [(torch.randn(n, n, generator=g) / n**0.5).to(ctx.device) for _ in range(layers)]
    x = torch.randn(n, n, generator=g).to(ctx.device)
    _ = (x @ wq[0]).sum().item()
    yield
    for _ in range(_sync_schedule(ctx).active + 1):
        t0 = time.perf_counter()
        h = x
        for w in wq:
            with ctx.rf("matmul"):
                h = h @ w
            with ctx.rf("attn"):
                h = torch.softmax(h, dim=-1) @ x * (1.0 / n**0.5)
            with ctx.rf("check"):
                peaks = h.abs().amax(dim=1)
                if max(v.item() for v in peaks[:reads]) > 1e6:  # one sync per element read
                    h = h / 1e6
        if ctx.cuda:
            with ctx.rf("timing"):
                torch.cuda.synchronize()  # "timing" with a device-wide sync
        _elapsed_s = time.perf_counter() - t0
        ctx.step()


def _sync_schedule(ctx: Ctx) -> Schedule:
    return Schedule(wait=0, warmup=1, active=ctx.pick(gpu=6, cpu=3, tiny=2))


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "decode",
            "host island + launch tax",
            "host, launch (sync where kernels outlast the launches)",
            "toy batch-1 decoder: tokenize, prefill, then per token decode_step, sample with .item(), a JSON log line; detokenize",
            _decode_schedule,
            _decode,
        ),
        Scenario(
            "decode-graph",
            "graph-captured decode",
            "launch (removed), residual host/launch",
            "the same decoder with the decode step captured in a CUDA graph and replayed; tokens read once after the loop",
            _decode_schedule,
            _decode_graph,
        ),
        Scenario(
            "decode-eager",
            "launch-bound decode",
            "launch",
            "decode-graph's loop launched op by op: the same static-shape step, no .item(), no logging; "
            "the pair's before",
            _decode_schedule,
            _decode_eager,
        ),
        Scenario(
            "picket-fence",
            "picket fence",
            "launch",
            "hundreds of tiny elementwise kernels per step from a Python loop, no syncs",
            _fence_schedule,
            _picket_fence,
        ),
        Scenario(
            "host-island",
            "host island",
            "host",
            "GPU prefill, then tokenize and JSON on the CPU while the GPU has nothing queued, then a decode step",
            _host_schedule,
            _host_island,
        ),
        Scenario(
            "copy-on-path",
            "copy on the path",
            "copy",
            "tensor.cpu().numpy(), a little numpy and torch.from_numpy(np).to(device) between kernels",
            _copy_schedule,
            _copy_on_path,
        ),
        Scenario(
            "sync-cliff",
            "sync cliff",
            "sync",
            "matmul + attention per layer, then a Python loop of .item() reads, torch.cuda.synchronize() for timing",
            _sync_schedule,
            _sync_cliff,
        ),
    )
}


def run_scenario(
    name: str,
    out_dir: str = ".",
    *,
    tiny: bool = False,
    cuda: bool | None = None,
    record_shapes: bool = False,
    with_stack: bool = False,
    log: Callable[[str], None] | None = None,
) -> Profiler:
    """Run scenario ``name`` under a ``Profiler`` writing to ``out_dir``; return the profiler.

    ``profiler.traces`` lists the written trace (one file, label = scenario name).
    ``cuda=None`` uses CUDA when available. A Ctrl-C (``KeyboardInterrupt``) or, in
    the main thread, a stop signal (``signals.STOP_SIGNALS``, turned into ``Stopped``
    while the workload runs, as the script runner does) ends the workload early: the
    trace keeps the steps recorded until then, and the profiler comes back with
    ``stopped_by`` set to the signal (the caller decides the exit status). Raises
    ``KeyError`` for an unknown name, ``TorchMissing`` without torch; other
    exceptions from the workload propagate after the trace is written.
    """
    sc = SCENARIOS[name]
    torch = require_torch()
    torch.manual_seed(0)
    use_cuda = bool(torch.cuda.is_available()) if cuda is None else bool(cuda and torch.cuda.is_available())
    prof = Profiler(
        out_dir,
        label=name,
        cuda=cuda,
        record_shapes=record_shapes,
        with_stack=with_stack,
        log=log,
        metadata={"scenario": name, "smell": sc.smell, "tiny": tiny},
    )
    ctx = Ctx(torch, use_cuda, tiny, prof.say)
    prof.schedule = sc.schedule(ctx)
    gen = sc.fn(ctx)
    next(gen)  # set-up, unprofiled
    ctx.profiler = prof
    restore = stop_on_signals()
    try:
        with prof:
            for _ in gen:
                pass
    except (KeyboardInterrupt, Stopped):
        pass  # written by the profiler's exit; ``prof.stopped_by`` says which signal
    finally:
        restore()
    return prof
