"""Planted Kineto traces for the ``gapscope diff`` tests: steps of kernels on one
stream with host work of known length between them (all times in µs, exact)."""

from __future__ import annotations

import json
from pathlib import Path

#: One step: (kernel name, launch start, kernel start, kernel end, host op before the
#: launch or None as (name, start, end)[, stream]), times relative to the step start, in
#: µs; the stream is 7 unless a sixth element gives another.
Step = list[tuple]


def kineto(
    path: Path,
    step: Step,
    *,
    steps: int = 6,
    step_us: int = 1000,
    gpu: str = "NVIDIA H100",
    step_us_of=None,
    step_of=None,
) -> Path:
    """Write a Kineto trace with ``steps`` ``ProfilerStep#N`` ranges of ``step_us``
    (or ``step_us_of(k)``) each, every step laid out as ``step`` (or ``step_of(k)``):
    each kernel launched by ``cudaLaunchKernel`` on the main thread (correlation and
    ``ac2g`` flow), optional host ``cpu_op`` ranges. Returns ``path``."""
    ev: list[dict] = [
        dict(ph="M", name="process_name", pid=1, tid=0, args=dict(name="python")),
        dict(ph="M", name="thread_name", pid=1, tid=1, args=dict(name="python main")),
        dict(ph="M", name="process_name", pid=0, tid=0, args=dict(name="GPU 0")),
        dict(ph="M", name="thread_name", pid=0, tid=7, args=dict(name="stream 7")),
    ]
    t0 = 1_000_000
    corr = 1
    for k in range(steps):
        length = step_us_of(k) if step_us_of else step_us
        ev.append(dict(ph="X", cat="user_annotation", name=f"ProfilerStep#{k}", pid=1, tid=1, ts=t0, dur=length))
        for name, launch, start, end, host, *on in step_of(k) if step_of else step:
            stream = on[0] if on else 7
            if host is not None:
                hname, hs, he = host
                ev.append(dict(ph="X", cat="cpu_op", name=hname, pid=1, tid=1, ts=t0 + hs, dur=he - hs))
            ev.append(
                dict(
                    ph="X",
                    cat="cuda_runtime",
                    name="cudaLaunchKernel",
                    pid=1,
                    tid=1,
                    ts=t0 + launch,
                    dur=3,
                    args=dict(correlation=corr),
                )
            )
            ev.append(
                dict(
                    ph="X",
                    cat="kernel",
                    name=name,
                    pid=0,
                    tid=stream,
                    ts=t0 + start,
                    dur=end - start,
                    args=dict(device=0, stream=stream, correlation=corr),
                )
            )
            ev.append(dict(ph="s", cat="ac2g", name="ac2g", id=corr, pid=1, tid=1, ts=t0 + launch))
            ev.append(dict(ph="f", cat="ac2g", name="ac2g", id=corr, pid=0, tid=stream, ts=t0 + start, bp="e"))
            corr += 1
        t0 += length
    doc = dict(
        schemaVersion=1,
        deviceProperties=[dict(id=0, name=gpu, totalGlobalMem=80 * 2**30, computeMajor=9, computeMinor=0, numSms=132)],
        traceEvents=ev,
    )
    path.write_text(json.dumps(doc))
    return path


GEMM_F = "void gemm_kernel<float, 128, 0x7f00a1>(float const*, float*)"
GEMM_H = "void gemm_kernel<__half, 64, 0x7f9cc2>(__half const*, __half*)"
RELU = "void relu_kernel<float>(float*)"
SOFTMAX = "void softmax_kernel<4>(float*)"
BIAS = "void bias_add_kernel<float>(float*)"

#: BEFORE: gemm 10-210, host "tokenize" 210-255 then relu 260-460 (gap A: 50 µs),
#: host "log" 460-480 then softmax 490-990 (gap B: 30 µs), next step's gemm at +10
#: (the boundary stretch: 20 µs). Busy 900 µs, idle 100 µs of a 1000 µs step.
BEFORE: Step = [
    (GEMM_F, 0, 10, 210, None),
    (RELU, 255, 260, 460, ("tokenize", 210, 255)),
    (SOFTMAX, 485, 490, 990, ("log", 460, 480)),
]
#: AFTER: gemm with other template arguments; A gone (relu right after gemm), B shrunk
#: to 10 µs, a new gap D of 40 µs before a new bias_add kernel (host "json" 920-955),
#: the boundary stretch (now after bias_add) still 20 µs. Busy 930 µs, idle 70 µs.
AFTER: Step = [
    (GEMM_H, 0, 10, 210, None),
    (RELU, 200, 210, 410, None),
    (SOFTMAX, 415, 420, 920, ("log", 410, 415)),
    (BIAS, 955, 960, 990, ("json", 920, 955)),
]
#: SLOWER: BEFORE with gap B grown by 100 µs (host "log" 460-580, softmax 590-1090)
#: in an 1100 µs step.
SLOWER: Step = [
    (GEMM_F, 0, 10, 210, None),
    (RELU, 255, 260, 460, ("tokenize", 210, 255)),
    (SOFTMAX, 585, 590, 1090, ("log", 460, 580)),
]
