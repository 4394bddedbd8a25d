"""Kineto ``cat`` / name → ``Kind`` tables, and copy-direction parsing.

Sources: Kineto's ``ActivityType`` names as written by ``ChromeTraceLogger``
(``cpu_op``, ``user_annotation``, ``gpu_user_annotation``, ``gpu_memcpy``,
``gpu_memset``, ``kernel``, ``cuda_runtime``, ``cuda_driver``, ``cuda_sync``,
``python_function``, ``mtia_runtime``, ``mtia_ccp_events``, ``cpu_instant_event``),
their 2020–2021 capitalised forms (``Operator``, ``Runtime``, ``Kernel``, ``Memcpy``,
``Memset``), and CUDA/HIP runtime API names (CUDA Runtime API reference, HIP API).
"""

from __future__ import annotations

from gapscope.parsers.model import CopyKind, Kind

__all__ = [
    "CAT_KIND",
    "DEVICE_NAME_CATS",
    "DEVICE_NAME_KIND",
    "RUNTIME_CATS",
    "KINETO_CATS",
    "KINETO_FLOW_CATS",
    "runtime_kind",
    "kind_of",
    "copy_kind_of",
    "is_pageable",
]

#: Kineto category → kind (runtime categories are refined by name, see ``runtime_kind``).
CAT_KIND: dict[str, Kind] = {
    "kernel": Kind.KERNEL,
    "Kernel": Kind.KERNEL,
    "mtia_ccp_events": Kind.KERNEL,
    "gpu_memcpy": Kind.MEMCPY,
    "Memcpy": Kind.MEMCPY,
    "gpu_memset": Kind.MEMSET,
    "Memset": Kind.MEMSET,
    "cuda_runtime": Kind.RUNTIME,
    "cuda_driver": Kind.RUNTIME,
    "Runtime": Kind.RUNTIME,
    "Driver": Kind.RUNTIME,
    "mtia_runtime": Kind.RUNTIME,
    "privateuse1_runtime": Kind.RUNTIME,
    "privateuse1_driver": Kind.RUNTIME,
    "cpu_op": Kind.CPU_OP,
    "Operator": Kind.CPU_OP,
    "python_function": Kind.PYTHON,
    "user_annotation": Kind.ANNOTATION,
    "gpu_user_annotation": Kind.GPU_ANNOTATION,
    "cuda_sync": Kind.SYNC_MARKER,
    "cpu_instant_event": Kind.INSTANT,
}

#: Categories of device ops refined by name (``DEVICE_NAME_KIND``): MTIA records its
#: DMA transfers and stream event records and waits under the category of its kernels.
DEVICE_NAME_CATS = frozenset({"mtia_ccp_events"})
#: Device ops that are not compute, by name (for ``DEVICE_NAME_CATS``): an MTIA
#: ``dma_request`` moves data (``args.direction``, ``args.size``: a copy); its
#: ``event_record`` and ``event_wait`` mark a stream recording or awaiting an event of
#: another stream (``args.wait_on_stream``), as Kineto's ``cuda_sync`` records do.
DEVICE_NAME_KIND: dict[str, Kind] = {
    "dma_request": Kind.MEMCPY,
    "event_record": Kind.SYNC_MARKER,
    "event_wait": Kind.SYNC_MARKER,
}

#: Categories whose events are CPU runtime/driver calls (kind refined by name).
RUNTIME_CATS = frozenset(c for c, k in CAT_KIND.items() if k == Kind.RUNTIME)
#: Categories that mark a file as Kineto output.
KINETO_CATS = frozenset(CAT_KIND) | {"ac2g", "async_gpu", "async_cpu_to_gpu", "fwdbwd", "Trace"}
#: Kineto flow categories linking a runtime call and its GPU op (same id as ``correlation``).
KINETO_FLOW_CATS = frozenset({"ac2g", "async_gpu", "async_cpu_to_gpu", "async"})

_LAUNCH_EXACT = frozenset(
    {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaLaunchKernelEx",
        "cudaLaunchCooperativeKernel",
        "cudaLaunchCooperativeKernelMultiDevice",
        "cudaLaunchDevice",
        "cudaGraphLaunch",
        "cuLaunchKernel",
        "cuLaunchKernelEx",
        "cuLaunchCooperativeKernel",
        "cuLaunchGrid",
        "cuGraphLaunch",
        "hipLaunchKernel",
        "hipExtLaunchKernel",
        "hipModuleLaunchKernel",
        "hipExtModuleLaunchKernel",
        "hipLaunchCooperativeKernel",
        "hipGraphLaunch",
        "hipHccModuleLaunchKernel",
        "hipExtLaunchMultiKernelMultiDevice",
    }
)
_SYNC_EXACT = frozenset(
    {
        "cudaStreamSynchronize",
        "cudaDeviceSynchronize",
        "cudaEventSynchronize",
        "cudaStreamWaitEvent",
        "cudaEventQuery",
        "cudaStreamQuery",
        "cudaThreadSynchronize",
        "cuStreamSynchronize",
        "cuCtxSynchronize",
        "cuEventSynchronize",
        "cuStreamWaitEvent",
        "cuEventQuery",
        "hipStreamSynchronize",
        "hipDeviceSynchronize",
        "hipEventSynchronize",
        "hipStreamWaitEvent",
        "hipEventQuery",
        "hipStreamQuery",
    }
)


def runtime_kind(name: str) -> Kind:
    """Kind of a CPU runtime/driver call from its API name.

    ``LAUNCH`` for kernel and graph launches (CUDA runtime/driver, HIP, MTIA
    ``launch``/``runFunction``), ``SYNC_CALL`` for calls that wait on the device,
    ``MEMCPY_CALL`` for ``cudaMemcpy*``/``cuMemcpy*``/``hipMemcpy*`` (MTIA
    ``enqueueCommand memcpy*``), else ``RUNTIME``
    (memset calls, allocations, event records, ...).
    """
    if name in _LAUNCH_EXACT:
        return Kind.LAUNCH
    if name in _SYNC_EXACT:
        return Kind.SYNC_CALL
    low = name.lower()
    if low.startswith(("cudamemcpy", "cumemcpy", "hipmemcpy", "mtiamemcpy", "enqueuecommand memcpy")):
        return Kind.MEMCPY_CALL  # MTIA: "enqueueCommand memcpyHtoDAsync"
    if (
        "launchkernel" in low
        or low.startswith(("cudalaunch", "culaunch", "hiplaunch", "hipextlaunch", "hipmodulelaunch"))
        or low.endswith("graphlaunch")
    ):
        return Kind.LAUNCH
    if low.startswith("mtia") and "launch" in low:
        return Kind.LAUNCH
    if low.startswith("runfunction") or low.startswith("mtiarunfunction"):
        return Kind.LAUNCH  # MTIA: "runFunction - job_prep_and_submit_for_execution"
    if "synchronize" in low or low.endswith("waitevent"):
        return Kind.SYNC_CALL
    return Kind.RUNTIME


def kind_of(cat: str | None, name: str, ph: str) -> Kind:
    """Kind of one event from its category, name and phase (scalar reference).

    Instants (``i``/``I``/``n``) are ``INSTANT``, counters (``C``) ``COUNTER``;
    durations take ``CAT_KIND`` (runtime categories refined by ``runtime_kind``);
    unknown categories are ``OTHER``.
    """
    if ph in ("i", "I", "n", "R"):
        return Kind.INSTANT
    if ph == "C":
        return Kind.COUNTER
    k = CAT_KIND.get(cat or "")
    if k is None:
        return Kind.OTHER
    if k == Kind.RUNTIME:
        return runtime_kind(name)
    if cat in DEVICE_NAME_CATS:
        return DEVICE_NAME_KIND.get(name, k)
    return k


_COPY_WORDS = (
    ("htod", CopyKind.H2D),
    ("h2d", CopyKind.H2D),
    ("dtoh", CopyKind.D2H),
    ("d2h", CopyKind.D2H),
    ("dtod", CopyKind.D2D),
    ("d2d", CopyKind.D2D),
    ("htoh", CopyKind.H2H),
    ("h2h", CopyKind.H2H),
    ("ptop", CopyKind.P2P),
    ("p2p", CopyKind.P2P),
    ("device_to_host", CopyKind.D2H),
    ("host_to_device", CopyKind.H2D),
    ("device_to_device", CopyKind.D2D),
    ("host_to_host", CopyKind.H2H),
)
#: hipMemcpyKind / cudaMemcpyKind numbers (0 H2H, 1 H2D, 2 D2H, 3 D2D, 4 default).
_COPY_NUMBERS = {0: CopyKind.H2H, 1: CopyKind.H2D, 2: CopyKind.D2H, 3: CopyKind.D2D}


def copy_kind_of(name: str, memcpy_kind: object = None) -> CopyKind:
    """Copy direction from ``args["memcpy kind"]``/``args["kind"]`` or the event name.

    Kineto names copies ``Memcpy HtoD (Pageable -> Device)``; ROCm adds
    ``args.kind`` = ``"HtoD"`` or a ``hipMemcpyKind`` number. Returns
    ``CopyKind.UNKNOWN`` when nothing says.
    """
    for text in (memcpy_kind, name):
        if text is None or isinstance(text, bool):
            continue
        if isinstance(text, float):
            if not text.is_integer():  # 2.5 is no memcpy kind
                continue
            text = int(text)
        if isinstance(text, int) or (isinstance(text, str) and text.strip().isascii() and text.strip().isdigit()):
            k = _COPY_NUMBERS.get(int(text))  # ASCII digits only: int("²") fails
            if k is not None:
                return k
            continue
        low = str(text).lower().replace(" ", "")
        for word, k in _COPY_WORDS:
            if word in low:
                return k
    return CopyKind.UNKNOWN


def is_pageable(name: str, src_kind: object = None, dst_kind: object = None) -> bool:
    """True when the host side of a copy is pageable memory (``args["src kind"]``/
    ``args["dst kind"]`` = ``"Pageable"``, or ``Pageable`` in the Kineto copy name)."""
    for v in (src_kind, dst_kind):
        if isinstance(v, str) and v.lower() == "pageable":
            return True
    return "Pageable" in name
