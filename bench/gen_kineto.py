"""Deterministic generator of Kineto-shaped (torch.profiler) Chrome traces.

Used by ``bench/load.py`` and by other benchmarks (diagnosis, TUI) and tests that need
a large realistic trace. The API below is stable:

``generate(path, n_events, *, seed=0, gzip=False) -> KinetoStats``
    Write a trace with exactly ``n_events`` entries in ``traceEvents`` to ``path``
    (gzip-compressed when ``gzip=True``) and return what was written, computed while
    writing (so tests can compare a loader against it without re-parsing).

Command line::

    python bench/gen_kineto.py OUT.json 1000000 [--seed 0] [--gzip] [--stats]

Layout (the field layout of real torch.profiler / libkineto output, see
``pytorch/kineto`` ``libkineto/src/output_json.cpp``): one JSON object with
``schemaVersion``, ``deviceProperties``, ``distributedInfo``, ``traceEvents``,
``traceName``, ``displayTimeUnit`` ("ms", a display hint only) and
``baseTimeNanoseconds``. ``ts``/``dur`` are microseconds with three decimals
(nanosecond precision) relative to ``baseTimeNanoseconds``; every event spans several
lines as libkineto writes them (about 300 bytes per event). Events:

- ``M``: ``process_name``/``process_labels``/``process_sort_index`` for the host
  process and GPU 0, ``thread_name``/``thread_sort_index`` for the two CPU threads and
  the GPU streams.
- ``X`` ``user_annotation`` ``ProfilerStep#N`` on the main thread: the events are
  spread over ``steps`` (default 20) iterations, as a profiler schedule records a few
  active steps; each step is many micro-batches (the annotation follows its events in
  the file).
- Nested ``X`` ``cpu_op`` (an outer module op such as ``aten::linear`` around an inner
  ``aten::addmm``), forward ops on the main thread, backward ops on the autograd thread.
- ``X`` ``cuda_runtime`` ``cudaLaunchKernel`` (``args.correlation``, ``cbid``) inside
  the inner op, with an ``ac2g`` flow start ``s`` (id = correlation).
- ``X`` ``kernel`` on GPU 0 (pid 0, tid = stream; ``args.device``, ``args.stream``,
  ``args.correlation``, grid/block...), on streams 7 (most), 20 and 24, with an
  ``ac2g`` flow end ``f``. Kernels on one stream never overlap; idle gaps come from
  launch latency and from host work between ops (occasionally hundreds of µs).
- ``aten::copy_`` → ``cudaMemcpyAsync`` → ``gpu_memcpy`` (``bytes``, name with the
  direction, e.g. ``Memcpy HtoD (Pinned -> Device)``).
- At the end of each step (and after 30 % of micro-batches, like ``loss.item()``) a
  ``cudaStreamSynchronize`` on the main thread and a ``cuda_sync`` ``Stream Sync``
  record on the stream lane (a wait, not GPU work).
- The last two events: a ``Trace`` span (pid ``"Spans"``) covering the window and an
  ``Iteration Start`` instant (pid ``"Traces"``), both with string pids as in Kineto.

The stream of events is cut at exactly ``n_events``; a cut can leave a launch without
its kernel or a flow without its end, as real trimmed traces do. Output is
deterministic for a given (n_events, seed, steps). Memory use is bounded (one
micro-batch buffered), so 5M events are fine. Layout version: ``LAYOUT_VERSION`` (bump it
when the output changes, so caches keyed on it regenerate).
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip as _gzip
import io
import json
import random
import sys
from array import array
from collections import Counter
from pathlib import Path

__all__ = [
    "generate",
    "parse_count",
    "KinetoStats",
    "LAYOUT_VERSION",
    "BASE_TIME_NS",
    "HOST_PID",
    "MAIN_TID",
    "BWD_TID",
    "STREAMS",
]

#: ``baseTimeNanoseconds`` written to every generated trace (epoch ns, 2024-04-05).
BASE_TIME_NS = 1712345600_000_000_000
#: Host process id; main thread id = pid; autograd (backward) thread id.
HOST_PID = 31337
MAIN_TID = 31337
BWD_TID = 31412
#: GPU streams of device 0 (pid 0, tid = stream).
STREAMS = (7, 20, 24)
#: Version of the generated layout; caches of generated files include it in their name.
LAYOUT_VERSION = 2
#: Relative time (ns after ``BASE_TIME_NS``) of the first event.
T0_NS = 5_000_000_000

_MIN_EVENTS = 24


@dataclasses.dataclass(frozen=True)
class KinetoStats:
    """What ``generate`` wrote. All times are int ns relative to ``BASE_TIME_NS``
    (i.e. ``ts`` × 1000, exact); add ``base_time_ns`` for absolute epoch ns.

    - ``n_events``: entries in ``traceEvents``; ``by_ph`` / ``by_cat``: counts per
      ``ph`` and per ``cat`` (metadata events have no ``cat``).
    - ``lanes``: number of distinct (pid, tid) pairs with at least one non-``M`` event.
    - ``n_kernels``, ``n_memcpy``: GPU ops written; ``n_launches``: ``cudaLaunchKernel``
      calls written.
    - ``gpu_busy_ns``: length of the union of kernel intervals on device 0 (all
      streams); ``gpu_work_busy_ns``: same with memcpys included.
    - ``gpu_window_ns``: (first kernel start, last kernel end), or None.
    - ``extent_ns``: (min ts, max ts+dur) over non-``M`` events.
    - ``bytes``: bytes of JSON text written (before compression).
    """

    n_events: int
    by_ph: dict
    by_cat: dict
    lanes: int
    n_kernels: int
    n_memcpy: int
    n_launches: int
    gpu_busy_ns: int
    gpu_work_busy_ns: int
    gpu_window_ns: tuple | None
    extent_ns: tuple
    base_time_ns: int
    bytes: int
    seed: int

    def to_json(self) -> str:
        """The stats as a JSON object (tuples become lists)."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> KinetoStats:
        d = json.loads(text)
        for k in ("gpu_window_ns", "extent_ns"):
            if d.get(k) is not None:
                d[k] = tuple(d[k])
        return cls(**d)


def _us(ns: int) -> str:
    """Relative ns → Kineto ``ts`` text: µs with three decimals, exact."""
    q, r = divmod(ns, 1000)
    return f"{q}.{r:03d}"


# ----------------------------------------------------------------- event text
def _x(cat: str, name: str, pid, tid, start: int, dur: int, args: str) -> str:
    return (
        "  {\n"
        f'    "ph": "X", "cat": "{cat}", "name": "{name}", "pid": {pid}, "tid": {tid},\n'
        f'    "ts": {_us(start)}, "dur": {_us(dur)},\n'
        '    "args": {\n'
        f"      {args}\n"
        "    }\n"
        "  }"
    )


def _flow(ph: str, fid: int, pid, tid, ts: int) -> str:
    bp = ', "bp": "e"' if ph == "f" else ""
    return (
        "  {\n"
        f'    "ph": "{ph}", "id": {fid}, "pid": {pid}, "tid": {tid}, "ts": {_us(ts)},\n'
        f'    "cat": "ac2g", "name": "ac2g"{bp}\n'
        "  }"
    )


def _meta(name: str, pid, tid, key: str, value) -> str:
    v = json.dumps(value)
    return (
        "  {\n"
        f'    "name": "{name}", "ph": "M", "ts": {_us(T0_NS)}, "pid": {pid}, "tid": {tid},\n'
        f'    "args": {{\n      "{key}": {v}\n    }}\n'
        "  }"
    )


_FWD_OPS = (
    ("aten::linear", "aten::addmm", "volta_sgemm_128x64_tn"),
    (
        "aten::conv2d",
        "aten::cudnn_convolution",
        "implicit_convolve_sgemm<float, float, 1024, 5, 5, 3, 3, 3, 1, false, false, true>",
    ),
    (
        "aten::layer_norm",
        "aten::native_layer_norm",
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float, float const*, float const*, float const*, float*, float*, float*)",
    ),
    (
        "aten::relu",
        "aten::clamp_min",
        "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>)",
    ),
    (
        "aten::softmax",
        "aten::_softmax",
        "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false, false>(float*, float const*, int, int, int, bool const*, int, bool)",
    ),
    (
        "aten::dropout",
        "aten::native_dropout",
        "void at::native::(anonymous namespace)::fused_dropout_kernel_vec<float, float, unsigned int, 1, 4, bool>(at::cuda::detail::TensorInfo<float, unsigned int>, at::cuda::detail::TensorInfo<float, unsigned int>, at::cuda::detail::TensorInfo<bool, unsigned int>, unsigned int, float, at::PhiloxCudaState)",
    ),
)
_BWD_OPS = (
    ("autograd::engine::evaluate_function: AddmmBackward0", "aten::mm", "volta_sgemm_64x64_nt"),
    (
        "autograd::engine::evaluate_function: ReluBackward0",
        "aten::threshold_backward",
        "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::(anonymous namespace)::threshold_kernel_impl<float>(at::TensorIteratorBase&, float, float)::{lambda(float, float)#1}>(at::TensorIteratorBase&, at::native::(anonymous namespace)::threshold_kernel_impl<float>(at::TensorIteratorBase&, float, float)::{lambda(float, float)#1} const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl<at::native::(anonymous namespace)::threshold_kernel_impl<float>(at::TensorIteratorBase&, float, float)::{lambda(float, float)#1}>(at::TensorIteratorBase&, at::native::(anonymous namespace)::threshold_kernel_impl<float>(at::TensorIteratorBase&, float, float)::{lambda(float, float)#1} const&)::{lambda(int)#1})",
    ),
    (
        "autograd::engine::evaluate_function: NativeLayerNormBackward0",
        "aten::native_layer_norm_backward",
        "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel<float, float>(float const*, float const*, float const*, float const*, float const*, float*, int)",
    ),
)
_COPIES = (
    ("Memcpy HtoD (Pinned -> Device)", 1, 4_194_304),
    ("Memcpy HtoD (Pageable -> Device)", 1, 65_536),
    ("Memcpy DtoH (Device -> Pageable)", 2, 4),
    ("Memcpy DtoD (Device -> Device)", 8, 1_048_576),
)


class _Sim:
    """Host/GPU time model; yields (text, info) per event, info = (ph, cat, pid, tid,
    start_ns, dur_ns, gpu) where gpu is 'k' (kernel), 'c' (memcpy) or ''."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.corr = 1000
        self.ext = 0
        self.free = {s: T0_NS for s in STREAMS}

    def _kernel_dur(self) -> int:
        r = self.rng.random()
        if r < 0.6:
            return self.rng.randint(2_000, 15_000)
        if r < 0.95:
            return self.rng.randint(15_000, 120_000)
        return self.rng.randint(120_000, 900_000)

    def _host_gap(self) -> int:
        r = self.rng.random()
        if r < 0.9:
            return self.rng.randint(500, 4_000)
        if r < 0.98:
            return self.rng.randint(20_000, 120_000)
        return self.rng.randint(200_000, 1_500_000)

    def _launch_op(self, tid: int, t: int, ops) -> tuple[list, int]:
        """One outer op ⊃ inner op ⊃ cudaLaunchKernel, its kernel and flows."""
        rng = self.rng
        outer_name, inner_name, kname = ops[rng.randrange(len(ops))]
        self.ext += 1
        self.corr += 1
        corr, ext = self.corr, self.ext
        stream = STREAMS[0] if rng.random() < 0.7 else STREAMS[1 + rng.randrange(len(STREAMS) - 1)]
        outer_s = t
        inner_s = outer_s + rng.randint(1_000, 3_000)
        launch_s = inner_s + rng.randint(1_500, 5_000)
        launch_d = rng.randint(3_000, 9_000)
        k_s = max(launch_s + rng.randint(4_000, 12_000), self.free[stream])
        k_d = self._kernel_dur()
        self.free[stream] = k_s + k_d
        inner_e = launch_s + launch_d + rng.randint(800, 3_000)
        outer_e = inner_e + rng.randint(500, 2_000)
        dims = f"[[{rng.choice((32, 64, 128))}, {rng.choice((256, 512, 1024))}], [{rng.choice((256, 512, 1024))}]]"
        p = HOST_PID
        grid = f"[{rng.randint(1, 512)}, {rng.randint(1, 8)}, 1]"
        ev = [
            (
                _x(
                    "cpu_op",
                    outer_name,
                    p,
                    tid,
                    outer_s,
                    outer_e - outer_s,
                    f'"External id": {ext}, "Record function id": 0, "Sequence number": {ext}, "Fwd thread id": 0, "Ev Idx": {ext}, "Input Dims": {dims}, "Input type": ["float", "float"]',
                ),
                ("X", "cpu_op", p, tid, outer_s, outer_e - outer_s, ""),
            ),
            (
                _x(
                    "cpu_op",
                    inner_name,
                    p,
                    tid,
                    inner_s,
                    inner_e - inner_s,
                    f'"External id": {ext}, "Record function id": 0, "Ev Idx": {ext}, "Input Dims": {dims}, "Input type": ["float", "float", "Scalar"], "Concrete Inputs": ["", "", "1"]',
                ),
                ("X", "cpu_op", p, tid, inner_s, inner_e - inner_s, ""),
            ),
            (
                _x(
                    "cuda_runtime",
                    "cudaLaunchKernel",
                    p,
                    tid,
                    launch_s,
                    launch_d,
                    f'"External id": {ext}, "cbid": 211, "correlation": {corr}',
                ),
                ("X", "cuda_runtime", p, tid, launch_s, launch_d, ""),
            ),
            (_flow("s", corr, p, tid, launch_s), ("s", "ac2g", p, tid, launch_s, 0, "")),
            (
                _x(
                    "kernel",
                    kname,
                    0,
                    stream,
                    k_s,
                    k_d,
                    f'"External id": {ext}, "queued": 0, "device": 0, "context": 1, "stream": {stream}, '
                    f'"correlation": {corr}, "registers per thread": 32, "shared memory": 0, "blocks per SM": 1.5, "warps per SM": 6.0, '
                    f'"grid": {grid}, "block": [128, 1, 1], "est. achieved occupancy %": {rng.randint(10, 100)}',
                ),
                ("X", "kernel", 0, stream, k_s, k_d, "k"),
            ),
            (_flow("f", corr, 0, stream, k_s), ("f", "ac2g", 0, stream, k_s, 0, "")),
        ]
        return ev, outer_e

    def _copy_op(self, tid: int, t: int) -> tuple[list, int]:
        rng = self.rng
        cname, ckind, nbytes = _COPIES[rng.randrange(len(_COPIES))]
        self.ext += 1
        self.corr += 1
        corr, ext = self.corr, self.ext
        stream = STREAMS[0]
        p = HOST_PID
        op_s = t
        call_s = op_s + rng.randint(2_000, 6_000)
        call_d = rng.randint(4_000, 12_000)
        c_s = max(call_s + rng.randint(3_000, 9_000), self.free[stream])
        c_d = 1_500 + nbytes // 12  # ~12 GB/s
        self.free[stream] = c_s + c_d
        op_e = call_s + call_d + rng.randint(1_000, 3_000)
        ev = [
            (
                _x(
                    "cpu_op",
                    "aten::copy_",
                    p,
                    tid,
                    op_s,
                    op_e - op_s,
                    f'"External id": {ext}, "Ev Idx": {ext}, "Input Dims": [[{nbytes // 4}], [{nbytes // 4}], []]',
                ),
                ("X", "cpu_op", p, tid, op_s, op_e - op_s, ""),
            ),
            (
                _x(
                    "cuda_runtime",
                    "cudaMemcpyAsync",
                    p,
                    tid,
                    call_s,
                    call_d,
                    f'"External id": {ext}, "cbid": 41, "correlation": {corr}',
                ),
                ("X", "cuda_runtime", p, tid, call_s, call_d, ""),
            ),
            (_flow("s", corr, p, tid, call_s), ("s", "ac2g", p, tid, call_s, 0, "")),
            (
                _x(
                    "gpu_memcpy",
                    cname,
                    0,
                    stream,
                    c_s,
                    c_d,
                    f'"External id": {ext}, "device": 0, "context": 1, "stream": {stream}, '
                    f'"correlation": {corr}, "bytes": {nbytes}, "memory bandwidth (GB/s)": {nbytes / c_d:.3f}',
                ),
                ("X", "gpu_memcpy", 0, stream, c_s, c_d, "c"),
            ),
            (_flow("f", corr, 0, stream, c_s), ("f", "ac2g", 0, stream, c_s, 0, "")),
        ]
        return ev, op_e

    def _sync(self, t: int) -> tuple[list, int]:
        """cudaStreamSynchronize on the main thread + Kineto's ``cuda_sync`` record on the
        stream lane, waiting until every stream is free."""
        rng = self.rng
        self.corr += 1
        sync_s = t + rng.randint(1_000, 3_000)
        sync_e = max(max(self.free.values()), sync_s + 2_000) + rng.randint(2_000, 6_000)
        p = HOST_PID
        ev = [
            (
                _x(
                    "cuda_runtime",
                    "cudaStreamSynchronize",
                    p,
                    MAIN_TID,
                    sync_s,
                    sync_e - sync_s,
                    f'"cbid": 131, "correlation": {self.corr}',
                ),
                ("X", "cuda_runtime", p, MAIN_TID, sync_s, sync_e - sync_s, ""),
            ),
            (
                _x(
                    "cuda_sync",
                    "Stream Sync",
                    0,
                    STREAMS[0],
                    sync_s,
                    sync_e - sync_s,
                    f'"device": 0, "stream": {STREAMS[0]}, "correlation": {self.corr}',
                ),
                ("X", "cuda_sync", 0, STREAMS[0], sync_s, sync_e - sync_s, ""),
            ),
        ]
        return ev, sync_e

    def block(self, t: int) -> tuple[list, int]:
        """One micro-batch starting at host time t: optional H2D copy, forward ops on the
        main thread, backward ops on the autograd thread, optional copy and
        (sometimes, e.g. ``loss.item()``) a stream synchronize. Returns (events, end)."""
        rng = self.rng
        body: list = []
        t += rng.randint(1_000, 5_000)
        if rng.random() < 0.5:
            ev, t = self._copy_op(MAIN_TID, t)
            body += ev
            t += self._host_gap()
        for _ in range(rng.randint(6, 14)):
            ev, t = self._launch_op(MAIN_TID, t, _FWD_OPS)
            body += ev
            t += self._host_gap()
        tb = t + rng.randint(2_000, 10_000)
        for _ in range(rng.randint(4, 10)):
            ev, tb = self._launch_op(BWD_TID, tb, _BWD_OPS)
            body += ev
            tb += self._host_gap()
        t = max(t, tb) + rng.randint(1_000, 5_000)
        if rng.random() < 0.3:
            ev, t = self._copy_op(MAIN_TID, t)
            body += ev
        if rng.random() < 0.3:
            ev, t = self._sync(t)
            body += ev
        return body, t + self._host_gap()

    def events(self, events_per_step: int):
        """Endless stream of (text, info): steps of about ``events_per_step`` events,
        each closed by a synchronize and its ``ProfilerStep#N`` annotation (written after
        the step's events, so nothing but the current block is buffered)."""
        t = T0_NS
        n = 1
        while True:
            t0 = t
            emitted = 0
            while emitted < events_per_step:
                body, t = self.block(t)
                emitted += len(body)
                yield from body
            body, t = self._sync(t)
            yield from body
            end = t + self.rng.randint(1_000, 3_000)
            self.ext += 1
            yield (
                _x(
                    "user_annotation",
                    f"ProfilerStep#{n}",
                    HOST_PID,
                    MAIN_TID,
                    t0,
                    end - t0,
                    f'"External id": {self.ext}',
                ),
                ("X", "user_annotation", HOST_PID, MAIN_TID, t0, end - t0, ""),
            )
            n += 1
            t = end + self._host_gap()


def _metadata() -> list:
    p = HOST_PID
    ev = [
        _meta("process_name", p, 0, "name", "python3"),
        _meta("process_labels", p, 0, "labels", "CPU"),
        _meta("process_sort_index", p, 0, "sort_index", p),
        _meta("process_name", 0, 0, "name", "python3"),
        _meta("process_labels", 0, 0, "labels", "GPU 0"),
        _meta("process_sort_index", 0, 0, "sort_index", 16777216),
        _meta("thread_name", p, MAIN_TID, "name", f"thread {MAIN_TID} (python3)"),
        _meta("thread_sort_index", p, MAIN_TID, "sort_index", MAIN_TID),
        _meta("thread_name", p, BWD_TID, "name", f"thread {BWD_TID} (pt_autograd_0)"),
        _meta("thread_sort_index", p, BWD_TID, "sort_index", BWD_TID),
    ]
    for s in STREAMS:
        ev.append(_meta("thread_name", 0, s, "name", f"stream {s} "))
        ev.append(_meta("thread_sort_index", 0, s, "sort_index", s))
    return ev


_HEADER = """{
  "schemaVersion": 1,
  "deviceProperties": [
    {
      "id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85029158912,
      "computeMajor": 9, "computeMinor": 0,
      "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
      "regsPerBlock": 65536, "warpSize": 32,
      "sharedMemPerBlock": 49152, "numSms": 132,
      "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 232448, "sharedMemPerMultiprocessor": 233472
    }
  ],
  "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
  "traceEvents": [
"""


def _union_ns(starts: array, ends: array) -> int:
    """Length of the union of [start, end) intervals (numpy, O(n log n))."""
    import numpy as np

    if not starts:
        return 0
    s = np.frombuffer(starts, dtype=np.int64)
    e = np.frombuffer(ends, dtype=np.int64)
    o = np.argsort(s, kind="stable")
    s, e = s[o], e[o]
    run_end = np.maximum.accumulate(e)
    # a new block starts where s > running max end of all previous intervals
    prev = np.concatenate(([np.iinfo(np.int64).min], run_end[:-1]))
    new = s > prev
    idx = np.flatnonzero(new)
    block_end = np.maximum.reduceat(e, idx)
    return int((block_end - s[idx]).sum())


def generate(path, n_events: int, *, seed: int = 0, gzip: bool = False, steps: int = 20) -> KinetoStats:
    """Write a Kineto-shaped trace of exactly ``n_events`` events to ``path``.

    ``path``: str or Path (parent folders are created); ``gzip``: compress (level 1);
    ``steps``: number of ``ProfilerStep#N`` iterations the events are spread over (each
    step holds at least 2000 events; the last one may be cut short and then has no
    annotation), as a ``torch.profiler`` schedule with ``active=steps`` records.
    Deterministic in (n_events, seed). Returns ``KinetoStats`` (times in ns relative to
    ``baseTimeNanoseconds``). Raises ``ValueError`` when ``n_events`` < 24.
    Cost: about 6 µs per event of CPU; memory bounded by one step.
    """
    n_events = int(n_events)
    if n_events < _MIN_EVENTS:
        raise ValueError(f"n_events must be >= {_MIN_EVENTS}, got {n_events}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = open(path, "wb")
    fh = _gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1, mtime=0) if gzip else raw
    out = io.TextIOWrapper(fh, encoding="utf-8", newline="\n", write_through=False)

    by_ph: Counter = Counter()
    by_cat: Counter = Counter()
    lanes: set = set()
    k_s, k_e, w_s, w_e = array("q"), array("q"), array("q"), array("q")
    n_launch = 0
    lo, hi = None, None
    nbytes = 0
    written = 0

    def emit(text: str) -> None:
        nonlocal nbytes, written
        if written:
            text = ",\n" + text
        out.write(text)
        nbytes += len(text)
        written += 1

    try:
        out.write(_HEADER)
        nbytes += len(_HEADER)
        for text in _metadata():
            emit(text)
            by_ph["M"] += 1
        body_budget = n_events - written - 2
        sim = _Sim(seed)
        per_step = max(2_000, -(-n_events // max(1, int(steps))))
        for text, (ph, cat, pid, tid, s, d, gpu) in sim.events(per_step):
            if body_budget <= 0:
                break
            emit(text)
            body_budget -= 1
            by_ph[ph] += 1
            by_cat[cat] += 1
            lanes.add((pid, tid))
            e = s + d
            lo = s if lo is None or s < lo else lo
            hi = e if hi is None or e > hi else hi
            if gpu:
                w_s.append(s)
                w_e.append(e)
                if gpu == "k":
                    k_s.append(s)
                    k_e.append(e)
            elif cat == "cuda_runtime" and text.find('"cudaLaunchKernel"') >= 0:
                n_launch += 1
        # Kineto's trailing span and instant (string pids)
        span_s, span_e = lo - 5_000, hi + 5_000
        emit(
            "  {\n"
            f'    "ph": "X", "cat": "Trace", "ts": {_us(span_s)}, "dur": {_us(span_e - span_s)},\n'
            '    "pid": "Spans", "tid": "PyTorch Profiler",\n'
            '    "name": "PyTorch Profiler (0)",\n'
            '    "args": {\n      "Op count": 0\n    }\n'
            "  }"
        )
        emit(
            "  {\n"
            '    "name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g",\n'
            f'    "pid": "Traces", "tid": "Trace PyTorch Profiler", "ts": {_us(span_s)}\n'
            "  }"
        )
        by_ph["X"] += 1
        by_cat["Trace"] += 1
        by_ph["i"] += 1
        lanes.add(("Spans", "PyTorch Profiler"))
        lanes.add(("Traces", "Trace PyTorch Profiler"))
        lo, hi = span_s, span_e
        footer = (
            "\n  ],\n"
            '  "traceName": "bench/gen_kineto.py",\n'
            '  "displayTimeUnit": "ms",\n'
            f'  "baseTimeNanoseconds": {BASE_TIME_NS}\n'
            "}\n"
        )
        out.write(footer)
        nbytes += len(footer)
    finally:
        out.close()
        if gzip:
            raw.close()

    gpu_window = (min(k_s), max(k_e)) if k_s else None
    return KinetoStats(
        n_events=written,
        by_ph=dict(sorted(by_ph.items())),
        by_cat=dict(sorted(by_cat.items())),
        lanes=len(lanes),
        n_kernels=len(k_s),
        n_memcpy=len(w_s) - len(k_s),
        n_launches=n_launch,
        gpu_busy_ns=_union_ns(k_s, k_e),
        gpu_work_busy_ns=_union_ns(w_s, w_e),
        gpu_window_ns=gpu_window,
        extent_ns=(lo, hi),
        base_time_ns=BASE_TIME_NS,
        bytes=nbytes,
        seed=seed,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="output path (.json or .json.gz)")
    ap.add_argument("n_events", help="number of events, e.g. 100000, 100k, 1M")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gzip", action="store_true", help="gzip-compress the output")
    ap.add_argument("--steps", type=int, default=20, help="ProfilerStep iterations (default 20)")
    ap.add_argument("--stats", action="store_true", help="print the stats as JSON")
    a = ap.parse_args(argv)
    stats = generate(a.out, parse_count(a.n_events), seed=a.seed, gzip=a.gzip, steps=a.steps)
    if a.stats:
        print(stats.to_json())
    else:
        print(f"{a.out}: {stats.n_events} events, {stats.bytes} bytes of JSON", file=sys.stderr)
    return 0


def parse_count(text: str) -> int:
    """``"100k"`` → 100000, ``"1M"`` → 1000000, ``"5m"`` → 5000000, ``"1234"`` → 1234."""
    t = text.strip().lower()
    mult = 1
    if t.endswith("k"):
        mult, t = 1_000, t[:-1]
    elif t.endswith("m"):
        mult, t = 1_000_000, t[:-1]
    return int(float(t) * mult)


if __name__ == "__main__":
    raise SystemExit(main())
