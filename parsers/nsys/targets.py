"""Who ran what in an Nsight Systems export: process and thread names, GPUs.

- Processes: ``PROCESSES`` (``globalPid``, ``pid``, ``name``); exports without it name a
  process after its main thread (``ThreadNames`` of tid = pid).
- Threads: ``ThreadNames`` (``nameId`` → ``StringIds``, ``globalTid``); the last name
  given to a thread wins.
- GPUs: ``TARGET_INFO_GPU`` (2022+: ``id``, ``name``, ``totalMemory``, ``smCount``,
  ``computeMajor``/``computeMinor``, ``cuDevice``, ``busLocation``, ``uuid``; 2021:
  ``deviceId``, ``name``, ``busLocation``), ``TARGET_INFO_CUDA_GPU`` (2021: the CUDA
  properties by ``deviceId``) and ``TARGET_INFO_CUDA_DEVICE`` (``gpuId``, ``cudaId``,
  ``pid``: which GPU a process's CUDA device is). Properties are given with Kineto's
  ``deviceProperties`` keys (``id``, ``name``, ``totalGlobalMem``, ``computeMajor``,
  ``computeMinor``, ``numSms``, ``warpSize``) plus Nsight's ``busLocation``, ``uuid`` and
  ``chipName``, so the report and the viewer show them as they show Kineto's.
"""

from __future__ import annotations

import numpy as np

from gapscope.parsers.nsys.schema import pid_of, tid_of

__all__ = ["process_names", "thread_names", "Devices"]


def process_names(db) -> dict[int, str]:
    """pid → process name from ``PROCESSES`` (empty when the table is missing)."""
    cols = db.columns("PROCESSES")
    if not {"pid", "name"} <= set(cols):
        return {}
    out = {}
    for pid, name in db.rows("SELECT pid, name FROM PROCESSES", what="PROCESSES"):
        if isinstance(pid, int) and isinstance(name, str) and name:
            out[pid] = name
    return out


def thread_names(db, strings) -> dict[int, str]:
    """globalTid → thread name from ``ThreadNames`` (``strings``: a ``Strings``)."""
    cols = db.columns("ThreadNames")
    if not {"nameId", "globalTid"} <= set(cols):
        return {}
    out = {}
    for gtid, name_id in db.rows("SELECT globalTid, nameId FROM ThreadNames ORDER BY rowid", what="ThreadNames"):
        if isinstance(gtid, int) and isinstance(name_id, int):
            name = strings.get(name_id)
            if name:
                out[gtid] = name
    return out


def main_thread_names(threads: dict[int, str]) -> dict[int, str]:
    """pid → name of its main thread (tid = pid), for exports without ``PROCESSES``."""
    out = {}
    # pid_of/tid_of take arrays: split every globalTid in one call each
    gtids = np.fromiter(threads, dtype=np.int64, count=len(threads))
    for pid, tid, name in zip(pid_of(gtids).tolist(), tid_of(gtids).tolist(), threads.values()):
        if pid == tid:
            out[pid] = name
    return out


_KINETO_KEYS = (  # (Kineto deviceProperties key, Nsight columns in order of preference)
    ("name", ("name",)),
    ("totalGlobalMem", ("totalMemory", "globalMemorySize")),
    ("computeMajor", ("computeMajor", "computeCapabilityMajor")),
    ("computeMinor", ("computeMinor", "computeCapabilityMinor")),
    ("numSms", ("smCount", "numMultiprocessors")),
    ("warpSize", ("threadsPerWarp", "numThreadsPerWarp")),
    ("clockRateHz", ("clockRate",)),
    ("busLocation", ("busLocation", "pciBusId")),
    ("uuid", ("uuid",)),
    ("chipName", ("chipName",)),
)


class Devices:
    """The GPUs of the export and the device index each process's CUDA device maps to.

    ``index(pid, cuda_device)``: the device index of a process's CUDA device: the GPU id
    of ``TARGET_INFO_CUDA_DEVICE`` when the export has it (so two processes that each
    see their GPU as CUDA device 0 under ``CUDA_VISIBLE_DEVICES`` stay apart), else the
    CUDA device number itself. ``properties(indices)``: Kineto-style property dicts of
    those devices (the ones with GPU work), in index order.
    """

    def __init__(self, db) -> None:
        self._map: dict[tuple[int, int], int] = {}
        cols = db.columns("TARGET_INFO_CUDA_DEVICE")
        if {"gpuId", "cudaId", "pid"} <= set(cols):
            for gpu, cuda, pid in db.rows(
                "SELECT gpuId, cudaId, pid FROM TARGET_INFO_CUDA_DEVICE", what="TARGET_INFO_CUDA_DEVICE"
            ):
                if isinstance(gpu, int) and isinstance(cuda, int) and isinstance(pid, int):
                    self._map[(pid, cuda)] = gpu
        self._gpus = self._read(db, "TARGET_INFO_GPU")
        self._cuda = self._read(db, "TARGET_INFO_CUDA_GPU")

    @staticmethod
    def _read(db, table: str) -> list[dict]:
        cols = db.columns(table)
        if not cols:
            return []
        return [dict(zip(cols, row)) for row in db.rows(f'SELECT * FROM "{table}"', what=table)]

    @property
    def mapped(self) -> bool:
        return bool(self._map)

    def index(self, pid: int, cuda_device: int) -> int:
        return self._map.get((pid, cuda_device), cuda_device)

    def _gpu_row(self, index: int) -> dict | None:
        rows = self._gpus
        if self._map:  # the index is a GPU id
            hit = [r for r in rows if r.get("id", r.get("deviceId")) == index]
        else:  # the index is a CUDA device number: prefer CUDA-capable rows
            cuda = [r for r in rows if r.get("smCount", 1)]
            hit = [r for r in cuda if r.get("cuDevice") == index] if any("cuDevice" in r for r in cuda) else []
            hit = hit or [r for r in cuda if r.get("id", r.get("deviceId")) == index]
        return hit[0] if hit else None

    def properties(self, indices: list[int]) -> list[dict]:
        out = []
        for d in sorted(set(indices)):
            rows = [r for r in (self._gpu_row(d), next((c for c in self._cuda if c.get("deviceId") == d), None)) if r]
            prop: dict = {"id": d}
            for key, names in _KINETO_KEYS:
                for row in rows:
                    v = next((row[n] for n in names if row.get(n) not in (None, "", "<UNKNOWN_BUS_ID>")), None)
                    if v is not None:
                        prop[key] = v
                        break
            if len(prop) > 1:
                out.append(prop)
        return out
