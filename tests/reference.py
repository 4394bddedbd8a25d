"""Slow, independent reference for Chrome / Kineto trace figures (stdlib only).

Written from the definitions in ``shared/bugs/README.md`` and ``docs/definitions.md``
without looking at the loader, so ``tests/test_corpus.py`` can hold ``gapscope.parsers.load``
to figures it did not compute. Only ``json``, ``gzip``, ``decimal`` and ``re``.

Definitions:

- Times: ``ts``/``dur`` are µs whatever ``displayTimeUnit`` says; converted exactly to
  int ns through ``decimal.Decimal`` (round half to even below 1 ns).
- A lane is one (pid, tid) pair; ids are compared as text (``7`` == ``"7"``).
- GPU work: ``X`` events whose ``cat`` is ``kernel``, ``gpu_memcpy``, ``gpu_memset``
  (Kineto), ``Kernel``, ``Memcpy``, ``Memset`` (2020-21 Kineto) or
  ``mtia_ccp_events`` (MTIA device ops); never ``cuda_sync``, nor MTIA's stream event
  records ``event_record`` / ``event_wait``. Kernels are ``kernel``, ``Kernel`` and
  ``mtia_ccp_events`` other than its DMA transfers (``dma_request``, copies) and those
  event records. Device of a GPU op: ``args.device``, else pid.
- GPU busy of a device: length of the union of its kernel intervals over all streams
  (overlaps merged, never summed).
- Invalid timing (kept out of extent and busy): non-finite ``ts``/``dur``, negative
  ``dur``, and ``ts == 0`` in a trace whose other timestamps are epoch-like (> 1e14 µs).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
from collections import Counter, defaultdict
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

__all__ = [
    "GPU_WORK_CATS",
    "KERNEL_CATS",
    "DeviceRef",
    "TraceRef",
    "reference",
    "union_ns",
    "to_ns",
    "provenance",
]

KERNEL_CATS = frozenset({"kernel", "Kernel", "mtia_ccp_events"})
GPU_WORK_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset", "mtia_ccp_events"})
#: MTIA device ops that are not kernels, by name: copies, and stream event records.
MTIA_COPY_NAMES = frozenset({"dma_request"})
MTIA_EVENT_NAMES = frozenset({"event_record", "event_wait"})
_EPOCH_US = Decimal(10) ** 14
_CUDA_RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver", "Runtime"})
_RUNTIME_CATS = _CUDA_RUNTIME_CATS | {"Driver", "mtia_runtime", "privateuse1_runtime", "privateuse1_driver"}
_THOUSAND = Decimal(1000)


def to_ns(v) -> int | None:
    """µs value from JSON (int, Decimal, float, numeric str) → exact int ns; None when
    missing or non-finite."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v * 1000
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            return None
        v = Decimal(repr(v))
    if isinstance(v, str):
        try:
            v = Decimal(v)
        except Exception:
            return None
    if isinstance(v, Decimal):
        if not v.is_finite():
            return None
        return int((v * _THOUSAND).to_integral_value(rounding=ROUND_HALF_EVEN))
    return None


def slow_union(intervals) -> list[list[int]]:
    """The union of [start, end) int intervals as sorted disjoint [start, end] pairs,
    empty intervals dropped (pure Python reference for ``gapscope.analysis.busy``)."""
    out: list[list[int]] = []
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def union_ns(intervals) -> int:
    """Length of the union of half-open [start, end) int intervals (pure Python)."""
    total = 0
    cur_s = cur_e = None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        elif e > cur_e:
            cur_e = e
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def _id(v) -> str:
    """pid/tid as text: ``7`` and ``"7"`` are one id; ``7.0`` is ``7``."""
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, Decimal) and v == v.to_integral_value():
        return str(int(v))
    if v is None:
        return ""
    return str(v)


@dataclasses.dataclass
class DeviceRef:
    """Per-device GPU figures (ns)."""

    n_kernels: int = 0
    n_memcpy: int = 0
    n_memset: int = 0
    kernels: list = dataclasses.field(default_factory=list)  # (start_ns, end_ns)
    work: list = dataclasses.field(default_factory=list)  # kernels + copies + memsets
    streams: set = dataclasses.field(default_factory=set)

    @property
    def busy_ns(self) -> int:
        return union_ns(self.kernels)

    @property
    def work_busy_ns(self) -> int:
        return union_ns(self.work)

    @property
    def window_ns(self) -> tuple[int, int] | None:
        if not self.kernels:
            return None
        return min(s for s, _ in self.kernels), max(e for _, e in self.kernels)


@dataclasses.dataclass
class TraceRef:
    """Reference figures of one trace file.

    - ``n_events``: entries of ``traceEvents`` (or of the bare array);
      ``by_ph``/``by_cat``: counts (``cat`` missing → ``None``).
    - ``lanes_by_ph``: ph → set of (pid, tid) text pairs having such an event.
    - ``extent_by_ph``: ph → (min start ns, max end ns) over events of that phase with
      valid timing (``dur`` counted for ``X`` only).
    - ``devices``: device (int or text) → ``DeviceRef``.
    - ``gpu_streams``: PROVENANCE-style set of (args.device or pid, args.stream or tid).
    - ``max_decimals``: most digits after the point in any ``ts`` (> 3: sub-ns values).
    - ``invalid``: events whose timing was invalid (skipped).
    - ``header``: the top-level keys other than ``traceEvents`` (object form).
    - ``counter_series``: (pid, name) of ``C`` events; ``async_tracks``: (pid, cat or
      name) of async events (``b``/``e``/``n``, legacy ``S``/``T``/``F``).
    - ``by_ph_cat``: counts per (ph, cat); ``mtia_by_name``: ``X`` events of
      ``mtia_ccp_events`` per name.
    - ``gpu_linked``: GPU work ops whose ``args.correlation`` equals that of a CPU
      runtime/driver call (``cuda_runtime``, ``cuda_driver``, ``Runtime``, ``Driver``,
      ``mtia_runtime``, ``privateuse1_*``); ``gpu_unmatched_cuda``: GPU work ops whose
      correlation matches no ``cuda_runtime``/``cuda_driver``/``Runtime`` call
      (PROVENANCE.md's definition).
    """

    n_events: int = 0
    by_ph: Counter = dataclasses.field(default_factory=Counter)
    by_cat: Counter = dataclasses.field(default_factory=Counter)
    by_ph_cat: Counter = dataclasses.field(default_factory=Counter)
    mtia_by_name: Counter = dataclasses.field(default_factory=Counter)
    #: [start, end) ns of MTIA's stream event records (GPU category, not GPU work)
    mtia_event_records: list = dataclasses.field(default_factory=list)
    lanes_by_ph: dict = dataclasses.field(default_factory=lambda: defaultdict(set))
    extent_by_ph: dict = dataclasses.field(default_factory=dict)
    devices: dict = dataclasses.field(default_factory=dict)
    gpu_streams: set = dataclasses.field(default_factory=set)
    max_decimals: int = 0
    invalid: int = 0
    header: dict = dataclasses.field(default_factory=dict)
    bare_array: bool = False
    counter_series: set = dataclasses.field(default_factory=set)
    async_tracks: set = dataclasses.field(default_factory=set)
    gpu_linked: int = 0
    gpu_unmatched_cuda: int = 0

    def lanes(self, phases) -> set:
        """(pid, tid) pairs with at least one event of the given phases."""
        out: set = set()
        for ph in phases:
            out |= self.lanes_by_ph.get(ph, set())
        return out

    def extent(self, phases) -> tuple[int, int] | None:
        """(min start, max end) ns over events of the given phases, or None."""
        xs = [self.extent_by_ph[p] for p in phases if p in self.extent_by_ph]
        if not xs:
            return None
        return min(a for a, _ in xs), max(b for _, b in xs)

    @property
    def n_kernels(self) -> int:
        return sum(d.n_kernels for d in self.devices.values())

    @property
    def n_gpu_ops(self) -> int:
        return sum(d.n_kernels + d.n_memcpy + d.n_memset for d in self.devices.values())


def read_json(path: str | Path):
    """Parse a (possibly gzip, possibly multi-member) JSON file; floats as Decimal."""
    data = Path(path).read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)  # reads every member
    return json.loads(data, parse_float=Decimal)


def _events_of(doc, ref: TraceRef, path: str | Path) -> list:
    """The event list of a parsed trace (a bare array, or ``traceEvents`` with the other
    top-level keys kept in ``ref.header``)."""
    if isinstance(doc, list):
        ref.bare_array = True
        return doc
    if isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
        ref.header = {k: v for k, v in doc.items() if k != "traceEvents"}
        return doc["traceEvents"]
    raise ValueError(f"{path}: not a Chrome trace")


def _is_epoch(events: list) -> bool:
    """Whether any ``ts`` is epoch-like (> 1e14 µs): then ``ts == 0`` is invalid."""
    return any(
        isinstance(e, dict)
        and isinstance(e.get("ts"), (int, Decimal))
        and not isinstance(e.get("ts"), bool)
        and e["ts"] > _EPOCH_US
        for e in events
    )


def _count(ref: TraceRef, e: dict, ph, cat) -> None:
    """The per-phase and per-category counts, and the most decimals of ``ts``."""
    ref.by_ph[ph] += 1
    ref.by_cat[cat] += 1
    ref.by_ph_cat[(ph, cat if isinstance(cat, str) else None)] += 1
    if ph == "X" and cat == "mtia_ccp_events":
        ref.mtia_by_name[e.get("name")] += 1
    ts = e.get("ts")
    if isinstance(ts, Decimal):
        ref.max_decimals = max(ref.max_decimals, -ts.as_tuple().exponent)


def _add_track(ref: TraceRef, e: dict, ph, cat) -> None:
    """The lane of a non-metadata event, and its counter series or async track."""
    pid, tid = _id(e.get("pid")), _id(e.get("tid"))
    ref.lanes_by_ph[ph].add((pid, tid))
    if ph == "C":
        ref.counter_series.add((pid, _id(e.get("name"))))
    elif ph in ("b", "e", "n", "S", "T", "F"):
        ref.async_tracks.add((pid, _id(cat) if cat else _id(e.get("name"))))


@dataclasses.dataclass
class _Correlations:
    """``args.correlation`` ids (as text) of the CPU runtime/driver calls, and of each
    GPU work op in order (None: it has none)."""

    runtime: set = dataclasses.field(default_factory=set)
    cuda: set = dataclasses.field(default_factory=set)
    gpu: list = dataclasses.field(default_factory=list)

    def add_call(self, e: dict, cat) -> None:
        a = e.get("args") if isinstance(e.get("args"), dict) else {}
        if "correlation" in a:
            self.runtime.add(_id(a["correlation"]))
            if cat in _CUDA_RUNTIME_CATS:
                self.cuda.add(_id(a["correlation"]))


def _add_gpu_op(ref: TraceRef, e: dict, cat, mtia_name, s: int, end: int, corr: _Correlations) -> None:
    """A GPU work op [s, end) ns: its device and stream, and its count by kind."""
    args = e.get("args") if isinstance(e.get("args"), dict) else {}
    dev_raw = args.get("device", e.get("pid"))
    dev = int(dev_raw) if isinstance(dev_raw, (int, Decimal)) else _id(dev_raw)
    stream = args.get("stream", e.get("tid"))
    ref.gpu_streams.add((_id(dev_raw), _id(stream)))
    dref = ref.devices.setdefault(dev, DeviceRef())
    dref.streams.add(_id(stream))
    dref.work.append((s, end))
    corr.gpu.append(_id(args.get("correlation")) if "correlation" in args else None)
    if cat in KERNEL_CATS and mtia_name not in MTIA_COPY_NAMES:
        dref.n_kernels += 1
        dref.kernels.append((s, end))
    elif cat in ("gpu_memcpy", "Memcpy") or mtia_name in MTIA_COPY_NAMES:
        dref.n_memcpy += 1
    else:
        dref.n_memset += 1


def _add_timed(ref: TraceRef, e: dict, ph, cat, s: int, end: int, ext: dict, corr: _Correlations) -> None:
    """An event with valid timing [s, end) ns: the extent of its phase, and what it is
    among runtime calls, MTIA event records and GPU work."""
    if ph == "X" and cat in _RUNTIME_CATS:
        corr.add_call(e, cat)
    lo_hi = ext.get(ph)
    ext[ph] = (s, end) if lo_hi is None else (min(lo_hi[0], s), max(lo_hi[1], end))
    mtia_name = e.get("name") if cat == "mtia_ccp_events" else None
    if ph == "X" and mtia_name in MTIA_EVENT_NAMES:
        ref.mtia_event_records.append((s, end))
    if ph == "X" and cat in GPU_WORK_CATS and mtia_name not in MTIA_EVENT_NAMES:
        _add_gpu_op(ref, e, cat, mtia_name, s, end, corr)


def reference(path: str | Path) -> TraceRef:
    """Compute ``TraceRef`` for a valid Chrome/Kineto JSON trace file.

    Raises ``ValueError`` when the JSON is not a Chrome trace (no ``traceEvents`` and
    not a top-level array).
    """
    ref = TraceRef()
    events = _events_of(read_json(path), ref, path)
    ref.n_events = len(events)
    epoch = _is_epoch(events)
    ext: dict = {}
    corr = _Correlations()
    for e in events:
        if not isinstance(e, dict):
            continue
        ph = e.get("ph")
        cat = e.get("cat")
        _count(ref, e, ph, cat)
        if ph == "M":
            continue
        _add_track(ref, e, ph, cat)
        s = to_ns(e.get("ts"))
        d = to_ns(e.get("dur", 0)) if ph == "X" else 0
        if s is None or d is None or d < 0 or (epoch and s == 0):
            ref.invalid += 1
            continue
        _add_timed(ref, e, ph, cat, s, s + d, ext, corr)
    ref.extent_by_ph = ext
    ref.gpu_linked = sum(1 for c in corr.gpu if c is not None and c in corr.runtime)
    ref.gpu_unmatched_cuda = sum(1 for c in corr.gpu if c is None or c not in corr.cuda)
    return ref


# ------------------------------------------------------------ PROVENANCE.md
_ROW = re.compile(r"^\| (traces/public/\S+) \|")


def provenance(md_path: str | Path) -> dict[str, dict]:
    """Figures stated in ``PROVENANCE.md``'s table, keyed by path relative to
    ``traces/public/``.

    Each value may hold: ``events`` (int), ``ph`` (dict ph → count), ``cats`` (the listed
    most common cats → count; the list may be cut with "+N more"), ``gpu_streams``,
    ``gpu_devices``, ``span_us`` (float, the rounded span in µs) with ``span_digits``
    (significant decimals shown, for the tolerance), ``gpu_ops`` (int), ``busy_pct``
    (int, union of all GPU work over the GPU-op window, rounded), ``gpu_unmatched``
    (GPU ops without a matching runtime correlation, when stated), ``not_chrome`` (bool).
    """
    out: dict[str, dict] = {}
    for line in Path(md_path).read_text(encoding="utf-8").splitlines():
        m = _ROW.match(line)
        if not m:
            continue
        rel = m.group(1)[len("traces/public/") :]
        contents = line.rstrip().rstrip("|").split(" | ")[-1]
        info: dict = {"text": contents}
        if "NOT Chrome-trace" in contents:
            info["not_chrome"] = True
        m2 = re.search(r"(\d+) events \(ph ([^)]*)\)", contents)
        if m2:
            info["events"] = int(m2.group(1))
            info["ph"] = {k: int(v) for k, v in re.findall(r"(\S+?):(\d+)", m2.group(2))}
        m3 = re.search(r"cats: (.*?)\.(?: GPU| \d+ GPU)", contents)
        if m3 and m3.group(1) != "none":
            cats = {}
            for item in m3.group(1).split(", "):
                k, sep, v = item.rpartition(":")
                if sep and v.isdigit():
                    cats[k] = int(v)
            info["cats"] = cats
        m4 = re.search(r"(\d+) GPU stream\(s\) on (\d+) device\(s\)", contents)
        if m4:
            info["gpu_streams"] = int(m4.group(1))
            info["gpu_devices"] = int(m4.group(2))
        m5 = re.search(r"span ([\d.]+) (us|ms|s)\b", contents)
        if m5:
            num = m5.group(1)
            scale = {"us": 1.0, "ms": 1e3, "s": 1e6}[m5.group(2)]
            info["span_us"] = float(num) * scale
            decimals = len(num.split(".")[1]) if "." in num else 0
            info["span_tol_us"] = 0.5 * 10 ** (-decimals) * scale
        m7 = re.search(r"(\d+) GPU ops w/o matching runtime correlation", contents)
        if m7:
            info["gpu_unmatched"] = int(m7.group(1))
        m6 = re.search(r"GPU busy (\d+)% of [\d.]+ \w+ \((\d+) GPU ops\)", contents)
        if m6:
            info["busy_pct"] = int(m6.group(1))
            info["gpu_ops"] = int(m6.group(2))
        out[rel] = info
    return out
