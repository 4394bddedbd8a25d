"""The kind of program a trace recorded (``ProgramKind``): which framework (PyTorch,
JAX, a native C++/CUDA/MPI program from Nsight) and which platform (CUDA, ROCm, MTIA),
so a card speaks its vocabulary ("Cards as facts and rules" in the design: no Python or
torch advice where there is no Python). Read from the trace's own names and launches.
"""

from __future__ import annotations

import dataclasses
import re
import weakref

import numpy as np

from gapscope.parsers.model import Kind, Trace

__all__ = ["ProgramKind", "program_kind", "is_mtia", "is_rocm"]


_MTIA: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def is_mtia(trace) -> bool:
    """Whether the trace's device is an MTIA (its launches are ``runFunction`` calls):
    then CUDA's own remedies (cuBLAS, CUDA graphs, ``CUDA_MODULE_LOADING``, Kineto's
    ``cuda_sync`` records) are not named. Cached per trace."""
    got = _MTIA.get(trace)
    if got is None:
        ids = trace.name_ids_matching(lambda n: n.startswith("runFunction"))
        got = _MTIA[trace] = bool(ids.size) and bool(np.isin(trace.name_id[trace.kind == int(Kind.LAUNCH)], ids).any())
    return got


_ROCM: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def is_rocm(trace) -> bool:
    """Whether the trace's device is an AMD GPU under ROCm (its launches are HIP
    calls: ``hipLaunchKernel``, ``hipExtModuleLaunchKernel``, ``hipGraphLaunch``): then
    the math libraries are rocBLAS / hipBLASLt and graphs are HIP graphs, and
    ``CUDA_MODULE_LOADING`` is not named. Cached per trace."""
    got = _ROCM.get(trace)
    if got is None:
        ids = trace.name_ids_matching(lambda n: n.startswith("hip"))
        got = _ROCM[trace] = bool(ids.size) and bool(np.isin(trace.name_id[trace.kind == int(Kind.LAUNCH)], ids).any())
    return got


@dataclasses.dataclass(frozen=True)
class ProgramKind:
    """What kind of program the trace recorded, from its own events (``program_kind``).

    ``framework``: ``"pytorch"`` (ATen ops, ``ProfilerStep``, ``torch`` ranges),
    ``"jax"`` (XLA modules, ``jit_`` / ``pjit`` ranges), ``"native"`` (an Nsight export
    with no Python or framework event: a C++, CUDA or MPI program) or ``"unknown"``;
    ``platform``: ``"cuda"``, ``"rocm"`` (HIP launches) or ``"mtia"`` (``runFunction``
    launches); ``python``: whether Python runs in it (Python frames, or a Python
    framework), so Python and torch advice may be given."""

    framework: str
    platform: str
    python: bool

    @property
    def torch(self) -> bool:
        """Whether torch advice (``torch.compile``, ``pin_memory``, ``.item()``) fits."""
        return self.framework == "pytorch"

    @property
    def profiler_is_torch(self) -> bool:
        """Whether a new capture would be made with torch.profiler (a PyTorch program,
        or a Kineto trace of unknown framework): false for a native Nsight program and
        for JAX, which get their own profiler's words (audit 3: a C program was told
        torch.profiler and ``wait_stream``)."""
        return self.framework in ("pytorch", "unknown")


_TORCH_RE = re.compile(r"^(aten::|torch|autograd::|ProfilerStep#|Optimizer\.|enumerate\(DataLoader\)|c10d::)")
_JAX_RE = re.compile(r"^(jit_|pjit|XlaModule|xla::|PjitFunction|TfrtCpu|PjRt)", re.IGNORECASE)
_PYTHON_RE = re.compile(r"\.py\(\d+\)|^<built-in|^python", re.IGNORECASE)
_PROGRAM: weakref.WeakKeyDictionary[Trace, ProgramKind] = weakref.WeakKeyDictionary()


def program_kind(trace: Trace) -> ProgramKind:
    """The ``ProgramKind`` of ``trace``, from the names it interned (one pass over the
    distinct names, not the events) and its launch calls. Cached per trace."""
    got = _PROGRAM.get(trace)
    if got is not None:
        return got
    names = trace.names
    torch = any(_TORCH_RE.match(s) for s in names)
    jax = not torch and any(_JAX_RE.match(s) for s in names)
    python = (
        torch
        or jax
        or bool((trace.kind == int(Kind.PYTHON)).any())
        or any(_PYTHON_RE.search(s) for s in names)
        # an Nsight export of a Python program names its process so (python3, python3.10)
        or any(_PYTHON_RE.search(ln.process_name) for ln in trace.lanes if not ln.is_gpu)
    )
    if torch:
        framework = "pytorch"
    elif jax:
        framework = "jax"
    elif str(trace.source.format).startswith("nsys") and not python:
        framework = "native"
    else:
        framework = "unknown"
    platform = "mtia" if is_mtia(trace) else "rocm" if is_rocm(trace) else "cuda"
    got = _PROGRAM[trace] = ProgramKind(framework, platform, python)
    return got
