"""Lanes of an Nsight Systems export: one per CPU thread (``globalTid``) and one per GPU
stream of a process on a device (``deviceId``, ``globalPid``, ``streamId``).

Stream ids are per CUDA context, so two processes sharing a GPU can both have a
stream 7: their streams get a lane each (``stream 7 (pid 4242)``), and a device's busy
time is still the union over all its lanes. Synchronization records that name no
stream (context and event syncs, stream id ``0xFFFFFFFF``) get one lane per device and
process, ``sync (no stream)``, with stream -1, as Kineto draws them on tid -1.

Order (``Lane.sort_key``): CPU lanes first, by process, main thread (tid = pid) first,
then by tid; then GPU lanes by device, stream, process.
"""

from __future__ import annotations

import numpy as np

from gapscope.parsers.lanes import PSEUDO_DEVICE_BASE, is_device_index
from gapscope.parsers.model import Lane
from gapscope.parsers.nsys.names import distinct
from gapscope.parsers.nsys.schema import INVALID_ID, pid_of, tid_of

__all__ = ["Lanes", "DEVICE_SHIFT", "PID_SHIFT", "MAX_DEVICE"]

#: A GPU lane key packs (device, pid, stream) into one int64: device in bits 54-62,
#: pid in bits 32-53 (Linux pids are below 2**22), stream in bits 0-31.
DEVICE_SHIFT, PID_SHIFT = 54, 32
MAX_DEVICE = (1 << (63 - DEVICE_SHIFT)) - 1


class Lanes:
    """Provisional lanes, numbered in order of first sight; ``build`` orders and names them."""

    def __init__(self) -> None:
        self._ids: dict[tuple, int] = {}
        self.keys: list[tuple] = []  # ("gpu", cuda_device, pid, stream) or ("cpu", globalTid)

    def _id(self, key: tuple) -> int:
        k = self._ids.get(key)
        if k is None:
            k = self._ids[key] = len(self.keys)
            self.keys.append(key)
        return k

    def gpu(self, packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(int32 lane per row, int64 pid per row) for packed GPU keys
        (``device << DEVICE_SHIFT | pid << PID_SHIFT | stream``)."""
        uniq, inv = distinct(packed)
        lut = np.empty(uniq.size, dtype=np.int32)
        pids = np.empty(uniq.size, dtype=np.int64)
        for j, key in enumerate(uniq.tolist()):
            device = key >> DEVICE_SHIFT
            pid = (key >> PID_SHIFT) & 0x3FFFFF
            stream = key & INVALID_ID
            lut[j] = self._id(("gpu", device, pid, -1 if stream == INVALID_ID else stream))
            pids[j] = pid
        return lut[inv], pids[inv]

    def cpu(self, global_tid: np.ndarray) -> np.ndarray:
        """int32 lane per row for a ``globalTid`` column (-1: no thread recorded)."""
        uniq, inv = distinct(global_tid)
        lut = np.array([self._id(("cpu", g)) for g in uniq.tolist()], dtype=np.int32)
        return lut[inv] if lut.size else np.zeros(0, np.int32)

    def cpu_known(self, global_tid: np.ndarray) -> np.ndarray:
        """int32 provisional lane per row for a ``globalTid`` column: the thread's lane
        when one exists already, else -1 (no lane is made)."""
        uniq, inv = distinct(global_tid)
        lut = np.array([self._ids.get(("cpu", g), -1) for g in uniq.tolist()], dtype=np.int32)
        return lut[inv] if lut.size else np.zeros(0, np.int32)

    def build(
        self, devices, processes: dict[int, str], threads: dict[int, str], used: np.ndarray
    ) -> tuple[list[Lane], np.ndarray]:
        """(lanes in display order, int32 map from provisional to final lane ids; -1 for
        lanes without events). ``used``: bool per provisional lane. ``devices``: a
        ``targets.Devices`` (GPU index of each process's CUDA device)."""
        pseudo: dict[int, int] = {}

        def device_of(pid: int, cuda: int) -> int:
            """The GPU index, or a pseudo-device (``PSEUDO_DEVICE_BASE`` on) for an id
            no node has (a damaged export's 2**62 overflowed the analysis' int32)."""
            d = devices.index(pid, cuda)
            return d if is_device_index(d) else pseudo.setdefault(d, PSEUDO_DEVICE_BASE + len(pseudo))

        shared: dict[tuple[int, int], set] = {}
        for key in self.keys:
            if key[0] == "gpu":
                shared.setdefault((device_of(key[2], key[1]), key[3]), set()).add(key[2])
        specs = []
        for k, key in enumerate(self.keys):
            if not used[k]:
                continue
            if key[0] == "gpu":
                _, cuda, pid, stream = key
                device = device_of(pid, cuda)
                many = len(shared[(device, stream)]) > 1
                # the lane's tid text (the CPU branch's tid is an int)
                if stream < 0:
                    stream_tid, tname = "sync", "sync (no stream)"
                else:
                    stream_tid, tname = str(stream), f"stream {stream}"
                if many:
                    stream_tid, tname = f"{stream_tid}@{pid}", f"{tname} (pid {pid})"
                sort = (1, device, stream if stream >= 0 else 1 << 40, pid)
                specs.append(
                    (
                        sort,
                        k,
                        Lane(
                            index=0,
                            pid=str(device),
                            tid=stream_tid,
                            process_name=f"GPU {device}",
                            thread_name=tname,
                            is_gpu=True,
                            device=device,
                            stream=max(stream, -1),
                            sort_key=sort,
                        ),
                    )
                )
            else:
                g = key[1]
                if g < 0:
                    pid, tid = -1, -1
                    pname, tname = "(no process)", "(no thread)"
                else:
                    pid, tid = int(pid_of(g)), int(tid_of(g))
                    pname = processes.get(pid) or f"process {pid}"
                    tname = threads.get(g) or ("(process-wide)" if tid == 0 else f"thread {tid}")
                sort = (0, pid, 0 if tid == pid else 1, tid)
                specs.append(
                    (
                        sort,
                        k,
                        Lane(
                            index=0,
                            pid=str(pid),
                            tid=str(tid),
                            process_name=pname,
                            thread_name=tname,
                            is_gpu=False,
                            sort_key=sort,
                        ),
                    )
                )
        specs.sort(key=lambda s: (s[0], s[1]))
        remap = np.full(len(self.keys), -1, dtype=np.int32)
        lanes = []
        for i, (_, k, ln) in enumerate(specs):
            remap[k] = i
            lanes.append(
                Lane(
                    index=i,
                    pid=ln.pid,
                    tid=ln.tid,
                    process_name=ln.process_name,
                    thread_name=ln.thread_name,
                    is_gpu=ln.is_gpu,
                    device=ln.device,
                    stream=ln.stream,
                    sort_key=ln.sort_key,
                )
            )
        return lanes, remap
