"""Deterministic generator of Nsight Systems SQLite exports (real export schema), and of
the same events as a Kineto (torch.profiler) trace.

Used by the tests of ``gapscope.parsers.nsys`` and by ``bench/load_nsys.py``. API::

    generate(path, n_kernels, *, seed=0, schema="2025", omit=(), kineto=None,
             devices=1) -> NsysStats

writes an export with exactly ``n_kernels`` kernels to ``path`` (an existing file is
replaced) and, when ``kineto`` is a path, the same run as Kineto JSON there. Command
line::

    python bench/gen_nsys.py OUT.sqlite 1000000 [--seed 0] [--schema 2022] [--kineto OUT.json]
        [--omit NVTX_EVENTS,CUPTI_ACTIVITY_KIND_MEMCPY] [--devices 2]

Schema: ``"2025"`` writes the tables as Nsight Systems 2025.1 exports them (schema
3.17.1: ``META_DATA_EXPORT``, ``ENUM_*`` tables, ``greenContextId`` columns, sync records
with ``deprecatedSyncType``/``eventSyncId``, ``TARGET_INFO_CUDA_DEVICE`` and
``TARGET_INFO_CUDA_CONTEXT_INFO``); ``"2022"`` as 2022.1 does (schema 2.9.1:
``EXPORT_META_DATA``, no enum tables, ``TARGET_INFO_CUDA_NULL_STREAM``); ``"2021"``
as the 2021 exports do (neither metadata table, ``TARGET_INFO_GPU`` with ``deviceId``,
``TARGET_INFO_CUDA_GPU``). Column lists follow the real files in
``shared/traces/public/extrap`` and ``nvfuser``. API names carry the export's ABI
suffix (``cudaLaunchKernel_v7000``); ``syncType`` is numbered as each version writes it
(2025: stream sync 2, context sync 4; 2022: stream sync 3, context sync 1).
``omit``: tables left out (as an export made without NVTX, OSRT or copies lacks them).

The run: a training loop on process 31337 (main thread 31337, data-loader thread
31350), ``steps`` iterations each in an NVTX range ``train_step`` on the main thread
(nested ``forward``/``backward``), kernels launched by ``cudaLaunchKernel`` (one in ten
by the driver's ``cuLaunchKernel``) on stream 7 of each device (one in five on stream
20), host work between launches (now and then an OS ``read`` of a batch, hundreds of
µs), a pageable H2D copy and a memset per step, a 4-byte pageable D2H copy and a
``cudaStreamSynchronize`` after some steps (``loss.item()``), a stream sync at the end
of every step and a ``cudaDeviceSynchronize`` every tenth. The data-loader thread does
``read`` calls in ``load_batch`` ranges. With ``devices=2`` every step launches its
kernels on both GPUs alternately (sync records of device 1 say ``deviceId`` 0, as real
exports of multi-GPU runs do).

``NsysStats``: ``n_kernels``, ``n_runtime`` (API rows), ``n_rows`` (rows of the event
tables), ``busy_ns`` ({device: union of its kernel intervals}), ``extent_ns``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sqlite3
import sys
from array import array
from pathlib import Path

__all__ = ["generate", "NsysStats", "HOST_PID", "MAIN_TID", "LOADER_TID", "STREAMS", "LAYOUT_VERSION"]

HOST_PID, MAIN_TID, LOADER_TID = 31337, 31337, 31350
STREAMS = (7, 20)
#: Bump when the output changes (caches of generated files include it in their name).
LAYOUT_VERSION = 2
T0_NS = 2_000_000_000
_INVALID = 0xFFFFFFFF
_VM = 1 << 48  # the "hardware/VM" bits of real globalTid values (0x0001 << 48)


def _gtid(pid: int, tid: int) -> int:
    return _VM | (pid << 24) | tid


_KERNELS = (  # (demangled, short)
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
        "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
        "vectorized_elementwise_kernel",
    ),
    ("nvjet_tst_192x192_64x4_2x1_v_bz_coopA_TNT", "nvjet_tst_192x192_64x4_2x1_v_bz_coopA_TNT"),
    (
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float, float const*, "
        "float const*, float const*, float*, float*, float*)",
        "vectorized_layer_norm_kernel",
    ),
    (
        "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false, false>(float*, float const*, "
        "int, int, int, bool const*, int, bool)",
        "softmax_warp_forward",
    ),
    ("triton_poi_fused_add_mul_0", "triton_poi_fused_add_mul_0"),
    (
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
        "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
        "unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
        "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
        "unsigned int, float, 4>)",
        "reduce_kernel",
    ),
)


@dataclasses.dataclass(frozen=True)
class NsysStats:
    """What ``generate`` wrote (times int ns, as in the export)."""

    n_kernels: int
    n_runtime: int
    n_rows: int
    busy_ns: dict
    extent_ns: tuple
    schema: str
    seed: int

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> NsysStats:
        d = json.loads(text)
        d["busy_ns"] = {int(k): v for k, v in d["busy_ns"].items()}
        d["extent_ns"] = tuple(d["extent_ns"])
        return cls(**d)


# ------------------------------------------------------------------ simulation
class _Run:
    """The time model. Events are tuples, first field the kind:

    ``("api", tid, start, end, name, corr, event_class)``,
    ``("kernel", dev, stream, start, end, corr, kernel_index)``,
    ``("memcpy", dev, stream, start, end, corr, bytes, copyKind, srcKind, dstKind)``,
    ``("memset", dev, stream, start, end, corr, bytes, memKind)``,
    ``("sync", dev, stream, start, end, corr, what)`` (what: "stream" / "context"),
    ``("nvtx", tid, start, end, text)``, ``("osrt", tid, start, end, name)``.
    """

    def __init__(self, seed: int, devices: int, device_syncs: bool = True) -> None:
        self.device_syncs = device_syncs
        self.rng = random.Random(seed)
        self.corr = 100
        self.devices = devices
        self.free = {(d, s): T0_NS for d in range(devices) for s in STREAMS}
        self.t = T0_NS
        self.loader_t = T0_NS
        self.kernels = 0

    def _c(self) -> int:
        self.corr += 1
        return self.corr

    def _host(self) -> int:
        r = self.rng.random()
        if r < 0.85:
            return self.rng.randint(1_000, 6_000)
        if r < 0.98:
            return self.rng.randint(10_000, 60_000)
        return self.rng.randint(150_000, 600_000)

    def _kdur(self) -> int:
        r = self.rng.random()
        if r < 0.55:
            return self.rng.randint(2_000, 12_000)
        if r < 0.95:
            return self.rng.randint(12_000, 150_000)
        return self.rng.randint(150_000, 700_000)

    def _gpu_start(self, dev: int, stream: int, call_end: int) -> int:
        return max(call_end + self.rng.randint(2_000, 8_000), self.free[(dev, stream)])

    def launch(self, out: list, dev: int) -> None:
        rng = self.rng
        t = self.t
        driver = rng.random() < 0.1
        name, cls = ("cuLaunchKernel", 1) if driver else ("cudaLaunchKernel_v7000", 0)
        d = rng.randint(3_000, 9_000)
        corr = self._c()
        stream = STREAMS[1] if rng.random() < 0.2 else STREAMS[0]
        ks = self._gpu_start(dev, stream, t + d)
        kd = self._kdur()
        self.free[(dev, stream)] = ks + kd
        out.append(("api", MAIN_TID, t, t + d, name, corr, cls))
        out.append(("kernel", dev, stream, ks, ks + kd, corr, rng.randrange(len(_KERNELS))))
        self.kernels += 1
        self.t = t + d

    def copy(self, out: list, dev: int, kind: int, nbytes: int) -> None:
        """cudaMemcpyAsync of ``kind`` (1 H2D, 2 D2H) from/to pageable memory."""
        t = self.t
        d = self.rng.randint(5_000, 15_000)
        corr = self._c()
        cs = self._gpu_start(dev, STREAMS[0], t + d)
        cd = 1_500 + nbytes // 10
        self.free[(dev, STREAMS[0])] = cs + cd
        src, dst = (0, 2) if kind == 1 else (2, 0)  # Nsight memory kinds: 0 pageable, 2 device
        out.append(("api", MAIN_TID, t, t + d, "cudaMemcpyAsync_v3020", corr, 0))
        out.append(("memcpy", dev, STREAMS[0], cs, cs + cd, corr, nbytes, kind, src, dst))
        self.t = t + d

    def memset(self, out: list, dev: int) -> None:
        t = self.t
        d = self.rng.randint(3_000, 6_000)
        corr = self._c()
        ms = self._gpu_start(dev, STREAMS[0], t + d)
        self.free[(dev, STREAMS[0])] = ms + 2_500
        out.append(("api", MAIN_TID, t, t + d, "cudaMemsetAsync_v3020", corr, 0))
        out.append(("memset", dev, STREAMS[0], ms, ms + 2_500, corr, 1 << 20, 2))
        self.t = t + d

    def sync(self, out: list, dev: int, context: bool = False) -> None:
        t = self.t
        corr = self._c()
        busy = [self.free[k] for k in self.free if context or k == (dev, STREAMS[0])]
        end = max(max(busy), t + 2_000) + self.rng.randint(1_500, 4_000)
        name = "cudaDeviceSynchronize_v3020" if context else "cudaStreamSynchronize_v3020"
        out.append(("api", MAIN_TID, t, end, name, corr, 0))
        out.append(
            (
                "sync",
                dev,
                _INVALID if context else STREAMS[0],
                t + 400,
                end - 300,
                corr,
                "context" if context else "stream",
            )
        )
        self.t = end

    def osrt(self, out: list, tid: int, name: str, dur: int) -> None:
        if tid == MAIN_TID:
            out.append(("osrt", tid, self.t, self.t + dur, name))
            self.t += dur
        else:
            out.append(("osrt", tid, self.loader_t, self.loader_t + dur, name))
            self.loader_t += dur

    def step(self, n_launch: int, index: int) -> list:
        rng = self.rng
        out: list = []
        t0 = self.t
        self.t += rng.randint(2_000, 8_000)
        if rng.random() < 0.5:  # the data loader hands over a batch
            self.osrt(out, MAIN_TID, "read", rng.randint(100_000, 400_000))
        dev = 0
        self.copy(out, dev, 1, 256 * 1024)
        self.t += self._host()
        f0 = self.t
        self.t += 300  # nvtxRangePush itself
        half = max(1, n_launch // 2)
        for k in range(n_launch):
            if k == half:
                out.append(("nvtx", MAIN_TID, f0, self.t, "forward"))
                f0 = self.t
                self.t += 300
            dev = (k % self.devices) if self.devices > 1 else 0
            self.launch(out, dev)
            self.t += self._host()
            if k == half // 2:
                self.memset(out, dev)
        out.append(("nvtx", MAIN_TID, f0, self.t, "backward"))
        if rng.random() < 0.3:  # loss.item(): a 4-byte D2H copy and a stream sync
            self.copy(out, 0, 2, 4)
            self.sync(out, 0)
            self.t += self._host()
        for d in range(self.devices):
            self.sync(out, d)
        if index % 10 == 9 and self.device_syncs:
            self.sync(out, 0, context=True)
        self.t += rng.randint(1_000, 3_000)
        out.append(("nvtx", MAIN_TID, t0, self.t, "train_step"))
        # the loader thread prepares the next batch meanwhile
        self.loader_t = max(self.loader_t, t0)
        l0 = self.loader_t
        self.loader_t += 300
        for _ in range(rng.randint(1, 3)):
            self.osrt(out, LOADER_TID, "read", rng.randint(20_000, 80_000))
            self.loader_t += rng.randint(2_000, 10_000)
        out.append(("nvtx", LOADER_TID, l0, self.loader_t, "load_batch"))
        self.t += self._host()
        return out


# ------------------------------------------------------------------ SQLite
_DDL_COMMON = {
    "StringIds": "id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL",
    "ThreadNames": "nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER",
    "PROCESSES": "globalPid INTEGER, pid INTEGER, name TEXT",
    "CUPTI_ACTIVITY_KIND_RUNTIME": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, "
        "globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, "
        "returnValue INTEGER NOT NULL, callchainId INTEGER"
    ),
    "OSRT_API": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER, "
        "correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, nestingLevel INTEGER, "
        "callchainId INTEGER"
    ),
    "NVTX_EVENTS": (
        "start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, category INTEGER, "
        "color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, "
        "uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value INTEGER, "
        "floatValue REAL, jsonTextId INTEGER, jsonText TEXT"
    ),
    "TARGET_INFO_CUDA_STREAM": (
        "streamId INTEGER NOT NULL, hwId INTEGER NOT NULL, vmId INTEGER NOT NULL, "
        "processId INTEGER NOT NULL, contextId INTEGER NOT NULL, priority INTEGER NOT NULL, "
        "flag INTEGER NOT NULL"
    ),
}
_KERNEL_TAIL = (
    "demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, launchType INTEGER, "
    "cacheConfig INTEGER, registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, "
    "gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL, "
    "staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL, "
    "localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL, "
    "sharedMemoryExecuted INTEGER, graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER"
)
_MEMCPY_TAIL = (
    "bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER, srcKind INTEGER, "
    "dstKind INTEGER, srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER, "
    "migrationCause INTEGER, graphNodeId INTEGER, virtualAddress INTEGER"
)
_MEMSET_TAIL = "value INTEGER NOT NULL, bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER"


def _gpu_head(green: bool) -> str:
    g = "greenContextId INTEGER, " if green else ""
    return (
        f"start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, {g}"
        "streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, "
    )


def _ddl(schema: str) -> dict:
    new = schema == "2025"
    d = dict(_DDL_COMMON)
    d["CUPTI_ACTIVITY_KIND_KERNEL"] = _gpu_head(new) + _KERNEL_TAIL
    d["CUPTI_ACTIVITY_KIND_MEMCPY"] = _gpu_head(new) + _MEMCPY_TAIL
    d["CUPTI_ACTIVITY_KIND_MEMSET"] = _gpu_head(new) + _MEMSET_TAIL
    sync_tail = (
        "deprecatedSyncType INTEGER, syncType INTEGER NOT NULL, eventId INTEGER NOT NULL, eventSyncId INTEGER"
        if new
        else "syncType INTEGER NOT NULL, eventId INTEGER NOT NULL"
    )
    d["CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"] = _gpu_head(new) + sync_tail
    if schema == "2021":
        d["TARGET_INFO_GPU"] = (
            "vmId INTEGER NOT NULL, deviceId INTEGER NOT NULL, name TEXT, busLocation TEXT, isDiscrete INTEGER"
        )
        d["TARGET_INFO_CUDA_GPU"] = (
            "vmId INTEGER NOT NULL, name TEXT NOT NULL, pciBusId TEXT, globalMemorySize INTEGER NOT NULL, "
            "numThreadsPerWarp INTEGER NOT NULL, numMultiprocessors INTEGER NOT NULL, "
            "computeCapabilityMajor INTEGER NOT NULL, computeCapabilityMinor INTEGER NOT NULL, "
            "deviceId INTEGER NOT NULL, pid INTEGER"
        )
        del d["PROCESSES"]
    else:
        d["TARGET_INFO_GPU"] = (
            "vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, busLocation TEXT, isDiscrete INTEGER, "
            "l2CacheSize INTEGER, totalMemory INTEGER, memoryBandwidth INTEGER, clockRate INTEGER, "
            "smCount INTEGER, pwGpuId INTEGER, uuid TEXT, luid INTEGER, chipName TEXT, cuDevice INTEGER, "
            "computeMajor INTEGER, computeMinor INTEGER, threadsPerWarp INTEGER"
        )
    if new:
        d["META_DATA_EXPORT"] = "name TEXT NOT NULL, value TEXT"
        d["TARGET_INFO_CUDA_DEVICE"] = "gpuId INTEGER, cudaId INTEGER NOT NULL, pid INTEGER NOT NULL"
        d["TARGET_INFO_CUDA_CONTEXT_INFO"] = (
            "nullStreamId INTEGER NOT NULL, hwId INTEGER NOT NULL, vmId INTEGER NOT NULL, "
            "processId INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, "
            "parentContextId INTEGER, isGreenContext INTEGER"
        )
        d["TARGET_INFO_SESSION_START_TIME"] = "utcEpochNs INTEGER, utcTime TEXT, localTime TEXT"
        for e in (
            "ENUM_CUDA_MEMCPY_OPER",
            "ENUM_CUDA_MEM_KIND",
            "ENUM_CUPTI_SYNC_TYPE",
            "ENUM_NSYS_EVENT_TYPE",
            "ENUM_NSYS_EVENT_CLASS",
        ):
            d[e] = "id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, label TEXT"
    elif schema == "2022":
        d["EXPORT_META_DATA"] = "name TEXT NOT NULL, value TEXT"
        d["TARGET_INFO_CUDA_NULL_STREAM"] = (
            "streamId INTEGER NOT NULL, hwId INTEGER NOT NULL, vmId INTEGER NOT NULL, "
            "processId INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL"
        )
    return d


_ENUMS = {
    "ENUM_CUDA_MEMCPY_OPER": [
        (0, "CUDA_MEMCPY_KIND_UNKNOWN", "Unknown"),
        (1, "CUDA_MEMCPY_KIND_HTOD", "Host-to-Device"),
        (2, "CUDA_MEMCPY_KIND_DTOH", "Device-to-Host"),
        (8, "CUDA_MEMCPY_KIND_DTOD", "Device-to-Device"),
        (10, "CUDA_MEMCPY_KIND_PTOP", "Peer-to-Peer"),
    ],
    "ENUM_CUDA_MEM_KIND": [
        (0, "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE", "Pageable"),
        (1, "CUDA_MEMOPR_MEMORY_KIND_PINNED", "Pinned"),
        (2, "CUDA_MEMOPR_MEMORY_KIND_DEVICE", "Device"),
        (7, "CUDA_MEMOPR_MEMORY_KIND_UNKNOWN", "Unknown"),
    ],
    "ENUM_CUPTI_SYNC_TYPE": [
        (0, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN", "Unknown"),
        (1, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE", "Event sync"),
        (2, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT", "Stream wait sync"),
        (3, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE", "Stream sync"),
        (4, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE", "Context sync"),
    ],
    "ENUM_NSYS_EVENT_TYPE": [
        (34, "NvtxMark", "NvtxMark"),
        (59, "NvtxPushPopRange", "NvtxPushPopRange"),
        (60, "NvtxStartEndRange", "NvtxStartEndRange"),
        (75, "NvtxDomainCreate", "NvtxDomainCreate"),
    ],
    "ENUM_NSYS_EVENT_CLASS": [
        (0, "TRACE_PROCESS_EVENT_CUDA_RUNTIME", "CUDA runtime"),
        (1, "TRACE_PROCESS_EVENT_CUDA_DRIVER", "CUDA driver"),
        (27, "TRACE_PROCESS_EVENT_OS_RUNTIME", "OSRT runtime"),
        (67, "TRACE_PROCESS_EVENT_CUDABACKTRACE", "CUDA backtrace"),
    ],
}
#: syncType as each export version writes it (see the module docstring).
_SYNC_TYPE = {
    "2025": {"stream": 2, "context": 4},
    "2022": {"stream": 3, "context": 1},
    "2021": {"stream": 3, "context": 1},
}
_CONTEXT = 1


class _Writer:
    def __init__(self, path: Path, schema: str, omit: set, devices: int) -> None:
        if path.exists():
            path.unlink()
        path.parent.mkdir(parents=True, exist_ok=True)
        self.con = sqlite3.connect(str(path))
        self.con.execute("PRAGMA journal_mode = OFF")
        self.con.execute("PRAGMA synchronous = OFF")
        self.schema = schema
        self.ddl = {t: c for t, c in _ddl(schema).items() if t not in omit}
        for t, cols in self.ddl.items():
            self.con.execute(f"CREATE TABLE {t} ({cols})")
        self.strings: dict[str, int] = {}
        self.rows: dict[str, list] = {t: [] for t in self.ddl}
        self.devices = devices
        self.n_rows = 0
        self.gpid = _gtid(HOST_PID, 0)

    def sid(self, s: str) -> int:
        k = self.strings.get(s)
        if k is None:
            k = self.strings[s] = len(self.strings)
        return k

    def add(self, ev: tuple) -> None:
        kind = ev[0]
        r = self.rows
        if kind == "api":
            _, tid, s, e, name, corr, cls = ev
            r.setdefault("CUPTI_ACTIVITY_KIND_RUNTIME", []).append(
                (s, e, cls, _gtid(HOST_PID, tid), corr, self.sid(name), 0, None)
            )
        elif kind == "kernel":
            _, dev, stream, s, e, corr, k = ev
            dem, short = _KERNELS[k]
            head = (s, e, dev, _CONTEXT + dev) + ((None,) if self.schema == "2025" else ()) + (stream, corr, self.gpid)
            r.setdefault("CUPTI_ACTIVITY_KIND_KERNEL", []).append(
                head
                + (self.sid(dem), self.sid(short), None, 1, 0, 32, 128, 1, 1, 256, 1, 1, 0, 0, 0, 0, corr, 0, None, 1)
            )
        elif kind == "memcpy":
            _, dev, stream, s, e, corr, nbytes, ck, src, dst = ev
            head = (s, e, dev, _CONTEXT + dev) + ((None,) if self.schema == "2025" else ()) + (stream, corr, self.gpid)
            r.setdefault("CUPTI_ACTIVITY_KIND_MEMCPY", []).append(
                head + (nbytes, ck, None, src, dst, dev, _CONTEXT + dev, dev, _CONTEXT + dev, None, None, None)
            )
        elif kind == "memset":
            _, dev, stream, s, e, corr, nbytes, mk = ev
            head = (s, e, dev, _CONTEXT + dev) + ((None,) if self.schema == "2025" else ()) + (stream, corr, self.gpid)
            r.setdefault("CUPTI_ACTIVITY_KIND_MEMSET", []).append(head + (0, nbytes, None, mk))
        elif kind == "sync":
            _, dev, stream, s, e, corr, what = ev
            t = _SYNC_TYPE[self.schema][what]
            # real multi-GPU exports write deviceId 0 on every sync record
            head = (s, e, 0, _CONTEXT + dev) + ((None,) if self.schema == "2025" else ()) + (stream, corr, self.gpid)
            tail = (None, t, _INVALID, _INVALID) if self.schema == "2025" else (t, _INVALID)
            r.setdefault("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", []).append(head + tail)
        elif kind == "nvtx":
            _, tid, s, e, text = ev
            r.setdefault("NVTX_EVENTS", []).append(
                (
                    s,
                    e,
                    59,
                    None,
                    None,
                    None,
                    text,
                    _gtid(HOST_PID, tid),
                    None,
                    None,
                    0,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                )
            )
        elif kind == "osrt":
            _, tid, s, e, name = ev
            r.setdefault("OSRT_API", []).append((s, e, 27, _gtid(HOST_PID, tid), 0, self.sid(name), 0, 0, 0))

    def flush(self) -> None:
        for t, rows in self.rows.items():
            if rows and t in self.ddl:
                marks = ", ".join("?" * len(rows[0]))
                self.con.executemany(f"INSERT INTO {t} VALUES ({marks})", rows)
                if t.startswith(("CUPTI_", "NVTX", "OSRT")):
                    self.n_rows += len(rows)
            rows.clear()

    def finish(self, seed: int) -> None:
        self.flush()
        c = self.con
        ins = c.executemany
        if "ThreadNames" in self.ddl:
            ins(
                "INSERT INTO ThreadNames VALUES (?, ?, ?)",
                [
                    (self.sid("python3"), 0, _gtid(HOST_PID, MAIN_TID)),
                    (self.sid("pt_data_loader"), 0, _gtid(HOST_PID, LOADER_TID)),
                ],
            )
        if "PROCESSES" in self.ddl:
            ins("INSERT INTO PROCESSES VALUES (?, ?, ?)", [(self.gpid, HOST_PID, "python3")])
        for d in range(self.devices):
            if self.schema == "2021":
                c.execute(
                    "INSERT INTO TARGET_INFO_GPU VALUES (?, ?, ?, ?, 1)",
                    (_VM, d, "NVIDIA H100 80GB HBM3", f"0000:{d + 1:02x}:00.0"),
                )
                c.execute(
                    "INSERT INTO TARGET_INFO_CUDA_GPU VALUES (?, ?, ?, ?, 32, 132, 9, 0, ?, ?)",
                    (_VM, "NVIDIA H100 80GB HBM3", "<UNKNOWN_BUS_ID>", 85029158912, d, HOST_PID),
                )
            else:
                c.execute(
                    "INSERT INTO TARGET_INFO_GPU VALUES (?, ?, ?, ?, 1, 52428800, 85029158912, 3352000000000, "
                    "1980000000, 132, 0, ?, 0, 'GH100', ?, 9, 0, 32)",
                    (
                        _VM,
                        d,
                        "NVIDIA H100 80GB HBM3",
                        f"0000:{d + 1:02x}:00.0",
                        f"00000000-0000-0000-0000-00000000000{d}",
                        d,
                    ),
                )
            for s in STREAMS:
                if "TARGET_INFO_CUDA_STREAM" in self.ddl:
                    c.execute(
                        "INSERT INTO TARGET_INFO_CUDA_STREAM VALUES (?, 0, 1, ?, ?, 0, ?)",
                        (s, HOST_PID, _CONTEXT + d, 3 if s == 7 else 2),
                    )
            if self.schema == "2025":
                c.execute("INSERT INTO TARGET_INFO_CUDA_DEVICE VALUES (?, ?, ?)", (d, d, HOST_PID))
                c.execute(
                    "INSERT INTO TARGET_INFO_CUDA_CONTEXT_INFO VALUES (7, 0, 1, ?, ?, ?, 0, 0)",
                    (HOST_PID, d, _CONTEXT + d),
                )
            elif self.schema == "2022":
                c.execute(
                    "INSERT INTO TARGET_INFO_CUDA_NULL_STREAM VALUES (7, 0, 1, ?, ?, ?)", (HOST_PID, d, _CONTEXT + d)
                )
        meta = {
            "2025": ("META_DATA_EXPORT", "2025.1.1.110", "3.17.1"),
            "2022": ("EXPORT_META_DATA", "2022.1.1.61", "2.9.1"),
        }
        if self.schema in meta and meta[self.schema][0] in self.ddl:
            table, product, version = meta[self.schema]
            ins(
                f"INSERT INTO {table} VALUES (?, ?)",
                [
                    ("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"),
                    ("EXPORT_PRODUCT_VERSION", product),
                    ("EXPORT_SCHEMA_VERSION", version),
                    ("EXPORT_PARAM_INPUT_FILE", f"gen_nsys-{seed}.nsys-rep"),
                ],
            )
        if "TARGET_INFO_SESSION_START_TIME" in self.ddl:
            c.execute(
                "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1741793819042497997, '2025-03-12T15:36:59', "
                "'2025-03-12T08:36:59')"
            )
        for t, rows in _ENUMS.items():
            if t in self.ddl:
                ins(f"INSERT INTO {t} VALUES (?, ?, ?)", rows)
        if "StringIds" in self.ddl:
            ins("INSERT INTO StringIds VALUES (?, ?)", [(v, k) for k, v in self.strings.items()])
        c.commit()
        c.close()


# ------------------------------------------------------------------ Kineto
def _us(ns: int) -> str:
    q, r = divmod(ns, 1000)
    return f"{q}.{r:03d}"


class _Kineto:
    """The same events as a Kineto trace (categories and names as libkineto writes them)."""

    _MEM = {0: "Pageable", 1: "Pinned", 2: "Device"}
    _DIR = {1: "HtoD", 2: "DtoH", 8: "DtoD"}

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fh = open(path, "w", encoding="utf-8")
        self.fh.write(
            '{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", '
            '"totalGlobalMem": 85029158912, "computeMajor": 9, "computeMinor": 0, "numSms": 132, '
            '"warpSize": 32}],\n"traceEvents": [\n'
        )
        self.first = True

    def _w(self, obj: str) -> None:
        if not self.first:
            self.fh.write(",\n")
        self.first = False
        self.fh.write(obj)

    def _x(self, cat, name, pid, tid, s, e, args: dict) -> None:
        self._w(
            f'{{"ph": "X", "cat": "{cat}", "name": {json.dumps(name)}, "pid": {pid}, "tid": {tid}, '
            f'"ts": {_us(s)}, "dur": {_us(e - s)}, "args": {json.dumps(args)}}}'
        )

    def add(self, ev: tuple) -> None:
        kind = ev[0]
        if kind == "api":
            _, tid, s, e, name, corr, cls = ev
            short = name.rsplit("_v", 1)[0] if name.rsplit("_v", 1)[-1].isdigit() else name
            self._x("cuda_driver" if cls == 1 else "cuda_runtime", short, HOST_PID, tid, s, e, {"correlation": corr})
        elif kind == "kernel":
            _, dev, stream, s, e, corr, k = ev
            self._x("kernel", _KERNELS[k][0], dev, stream, s, e, {"device": dev, "stream": stream, "correlation": corr})
        elif kind == "memcpy":
            _, dev, stream, s, e, corr, nbytes, ck, src, dst = ev
            name = f"Memcpy {self._DIR[ck]} ({self._MEM[src]} -> {self._MEM[dst]})"
            self._x(
                "gpu_memcpy",
                name,
                dev,
                stream,
                s,
                e,
                {"device": dev, "stream": stream, "correlation": corr, "bytes": nbytes},
            )
        elif kind == "memset":
            _, dev, stream, s, e, corr, nbytes, mk = ev
            self._x(
                "gpu_memset",
                f"Memset ({self._MEM[mk]})",
                dev,
                stream,
                s,
                e,
                {"device": dev, "stream": stream, "correlation": corr, "bytes": nbytes},
            )
        elif kind == "sync":
            _, dev, stream, s, e, corr, what = ev
            tid = -1 if stream == _INVALID else stream
            self._x(
                "cuda_sync",
                "Context Sync" if what == "context" else "Stream Sync",
                dev,
                tid,
                s,
                e,
                {"device": dev, "stream": tid, "correlation": corr},
            )
        elif kind == "nvtx":
            _, tid, s, e, text = ev
            self._x("user_annotation", text, HOST_PID, tid, s, e, {})
        elif kind == "osrt":
            _, tid, s, e, name = ev
            self._x("osrt", name, HOST_PID, tid, s, e, {})

    def finish(self, devices: int) -> None:
        meta = [
            ("process_name", HOST_PID, 0, "python3"),
            ("thread_name", HOST_PID, MAIN_TID, "python3"),
            ("thread_name", HOST_PID, LOADER_TID, "pt_data_loader"),
        ]
        for d in range(devices):
            meta.append(("process_name", d, 0, f"GPU {d}"))
        for name, pid, tid, value in meta:
            self._w(f'{{"ph": "M", "name": "{name}", "pid": {pid}, "tid": {tid}, "args": {{"name": "{value}"}}}}')
        self.fh.write("\n]}\n")
        self.fh.close()


# ------------------------------------------------------------------ driver
def _union_ns(starts: array, ends: array) -> int:
    import numpy as np

    if not starts:
        return 0
    s = np.frombuffer(starts, dtype=np.int64)
    e = np.frombuffer(ends, dtype=np.int64)
    o = np.argsort(s, kind="stable")
    s, e = s[o], e[o]
    run = np.maximum.accumulate(e)
    new = np.concatenate(([True], s[1:] > run[:-1]))
    idx = np.flatnonzero(new)
    ends_ = np.maximum.reduceat(e, idx)
    return int((ends_ - s[idx]).sum())


def generate(
    path,
    n_kernels: int,
    *,
    seed: int = 0,
    schema: str = "2025",
    omit=(),
    kineto=None,
    devices: int = 1,
    launches_per_step: int = 200,
    device_syncs: bool = True,
) -> NsysStats:
    """Write an export of exactly ``n_kernels`` kernels (see the module docstring).
    ``launches_per_step``: kernels per ``train_step``; ``device_syncs``: whether every
    tenth step ends in a ``cudaDeviceSynchronize`` (Kineto draws its ``Context Sync``
    record on tid -1, which gapscope's Chrome reader takes for a CPU thread, so a
    pair meant to diagnose alike leaves them out)."""
    if schema not in _SYNC_TYPE:
        raise ValueError(f"schema must be one of {sorted(_SYNC_TYPE)}, got {schema!r}")
    if n_kernels < 1:
        raise ValueError("n_kernels must be >= 1")
    path = Path(path)
    run = _Run(seed, devices, device_syncs)
    writer = _Writer(path, schema, set(omit), devices)
    kin = _Kineto(Path(kineto)) if kineto is not None else None
    k_start = {d: array("q") for d in range(devices)}
    k_end = {d: array("q") for d in range(devices)}
    n_runtime = 0
    lo, hi = None, None
    step = 0
    while run.kernels < n_kernels:
        events = run.step(min(launches_per_step, n_kernels - run.kernels), step)
        step += 1
        for ev in events:
            writer.add(ev)
            if kin is not None:
                kin.add(ev)
            if ev[0] == "kernel":
                k_start[ev[1]].append(ev[3])
                k_end[ev[1]].append(ev[4])
            elif ev[0] == "api":
                n_runtime += 1
            s, e = (ev[2], ev[3]) if ev[0] in ("api", "nvtx", "osrt") else (ev[3], ev[4])
            lo = s if lo is None or s < lo else lo
            hi = e if hi is None or e > hi else hi
        if step % 64 == 0:
            writer.flush()
    writer.finish(seed)
    if kin is not None:
        kin.finish(devices)
    busy = {d: _union_ns(k_start[d], k_end[d]) for d in range(devices)}
    return NsysStats(
        n_kernels=run.kernels,
        n_runtime=n_runtime,
        n_rows=writer.n_rows,
        busy_ns=busy,
        extent_ns=(lo, hi),
        schema=schema,
        seed=seed,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("kernels", type=int)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--schema", default="2025", choices=sorted(_SYNC_TYPE))
    ap.add_argument("--omit", default="", help="comma-separated tables to leave out")
    ap.add_argument("--kineto", default=None, help="also write the run as Kineto JSON here")
    ap.add_argument("--devices", type=int, default=1)
    a = ap.parse_args(argv)
    stats = generate(
        a.out,
        a.kernels,
        seed=a.seed,
        schema=a.schema,
        omit=[t for t in a.omit.split(",") if t],
        kineto=a.kineto,
        devices=a.devices,
    )
    print(stats.to_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
