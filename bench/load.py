"""Benchmark ``gapscope.parsers.load`` on generated Kineto-shaped traces, beside the JSON floor.

Usage (from the repository root)::

    .venv/bin/python bench/load.py                      # 100k and 1M events
    .venv/bin/python bench/load.py --sizes 100k,1M,5M   # 5M needs ~1.5 GB disk, minutes
    .venv/bin/python bench/load.py --sizes 1M --gzip --repeat 3

Traces come from ``bench/gen_kineto.generate`` (seed 0) and are cached under
``bench/out/`` (git-ignored) with their stats beside them. Every measurement runs in a
fresh subprocess; peak RSS is that process's ``resource.getrusage`` ``ru_maxrss``
(imports included, shown separately as "base"); "cpu s" is the user+sys CPU time over
the measured call of the process and its children (the loader's forked decoder).
Rows:

- ``gapscope.parsers.load``: the whole load (read, decode, columns, sort, lanes, flows) as a
  user gets it: texts of 48 MB or more are decoded in two parts at once
  (``gapscope.parsers.chrome.parallel.fork``); the note gives the forked child's peak RSS (which
  counts the page-cache pages of the file it maps) and the peak of both processes'
  private memory together (``RssAnon`` + ``RssShmem``, sampled every 5 ms), which the
  memory targets are checked against along with the peak RSS. The row's ``check`` says
  whether its kernel count, GPU busy (union of kernels) and extent match what the
  generator wrote.
- ``gapscope.parsers.load 1 proc``: the same with ``GAPSCOPE_LOAD_PROCESSES=1`` (one process).
- ``msgspec typed``: ``msgspec.json.decode`` into a Struct with the timeline fields
  only (``args`` kept raw) — the decode floor a typed loader can reach.
- ``msgspec dicts`` / ``orjson dicts``: decode into Python dicts (GC off). Skipped
  when the estimated RSS (about 2.2 KB per event) exceeds 70 % of available memory.
- ``HTA 0.5.0``: HolisticTraceAnalysis ``TraceAnalysis`` parse of the same file, when
  ``hta`` is importable by ``--hta-python`` (default: this interpreter, or
  ``$GAPSCOPE_HTA_PYTHON``); skipped otherwise. It is never a dependency.

Targets (issue 2, 2-core machine): 1M events (~300 MB) in ≤ 1.5 s with peak RSS
< 1 GB; 5M events with peak RSS < 5 GB. Timings on a shared machine vary: read ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

#: Every load here is a first load: the trace cache is neither read nor written (nor by
#: the subprocesses this starts, which inherit it).
os.environ["GAPSCOPE_NO_CACHE"] = "1"

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
sys.path.insert(0, str(ROOT))

from bench.gen_kineto import LAYOUT_VERSION, KinetoStats, generate, parse_count  # noqa: E402

_PRELUDE = r"""
import gc, json, resource, sys, time
path = sys.argv[1]
def rss_kb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime + c.ru_utime + c.ru_stime
def child_kb():
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
"""

SCRIPTS: dict[str, str] = {
    "gapscope.parsers.load": _PRELUDE
    + r"""
sys.path.insert(0, sys.argv[2])
import numpy as np
from gapscope import parsers
from gapscope.parsers.model import Kind
try:  # import the loader modules before timing (import cost is not load cost)
    import gapscope.parsers.chrome.loader  # noqa: F401
except ImportError:
    pass
import os, threading
def private_kb(pid):  # anonymous + shared-memory pages: what the process allocated
    try:
        with open(f"/proc/{pid}/status") as fh:
            return sum(int(l.split()[1]) for l in fh if l.startswith(("RssAnon:", "RssShmem:")))
    except OSError:
        return 0
both = [0]
done = threading.Event()
def sample():  # peak private memory of this process and its forked decoder together
    me = os.getpid()
    while not done.wait(0.005):
        try:
            with open(f"/proc/{me}/task/{me}/children") as fh:
                kids = [int(x) for x in fh.read().split()]
        except OSError:
            kids = []
        both[0] = max(both[0], private_kb(me) + sum(private_kb(k) for k in kids))
sampler = threading.Thread(target=sample, daemon=True)
base = rss_kb()
sampler.start()
c0 = cpu_s(); t0 = time.perf_counter()
tr = gapscope.parsers.load(path)
dt = time.perf_counter() - t0
cpu = cpu_s() - c0
done.set(); sampler.join()
peak = rss_kb()
k = tr.kind == int(Kind.KERNEL)
s, e = tr.start_ns[k], tr.end_ns[k]
o = np.argsort(s, kind="stable")
s, e = s[o], e[o]
busy = 0
if s.size:
    run = np.maximum.accumulate(e)
    prev = np.concatenate(([np.iinfo(np.int64).min], run[:-1]))
    idx = np.flatnonzero(s > prev)
    busy = int((np.maximum.reduceat(e, idx) - s[idx]).sum())
print(json.dumps({"time_s": dt, "cpu_s": cpu, "peak_kb": peak, "child_peak_kb": child_kb(), "both_private_kb": both[0], "base_kb": base, "events": len(tr),
                  "kernels": int(k.sum()), "busy_ns": busy, "extent_ns": list(map(int, tr.extent_ns)),
                  "base_time_ns": tr.source.base_time_ns, "warnings": len(tr.warnings)}))
""",
    "msgspec typed": _PRELUDE
    + r"""
import msgspec
class Ev(msgspec.Struct, omit_defaults=True):
    ph: str = ""
    name: str = ""
    cat: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float = 0.0
    dur: float = 0.0
    id: int | str | None = None
    args: msgspec.Raw = msgspec.Raw(b"{}")
class Doc(msgspec.Struct):
    traceEvents: list[Ev]
dec = msgspec.json.Decoder(Doc)
base = rss_kb()
gc.disable()
c0 = cpu_s(); t0 = time.perf_counter()
with open(path, "rb") as fh:
    data = fh.read()
doc = dec.decode(data)
dt = time.perf_counter() - t0
print(json.dumps({"time_s": dt, "cpu_s": cpu_s() - c0, "peak_kb": rss_kb(), "base_kb": base, "events": len(doc.traceEvents)}))
""",
    "msgspec dicts": _PRELUDE
    + r"""
import msgspec
base = rss_kb()
gc.disable()
c0 = cpu_s(); t0 = time.perf_counter()
with open(path, "rb") as fh:
    data = fh.read()
doc = msgspec.json.decode(data)
dt = time.perf_counter() - t0
print(json.dumps({"time_s": dt, "cpu_s": cpu_s() - c0, "peak_kb": rss_kb(), "base_kb": base, "events": len(doc["traceEvents"])}))
""",
    "orjson dicts": _PRELUDE
    + r"""
import orjson
base = rss_kb()
gc.disable()
c0 = cpu_s(); t0 = time.perf_counter()
with open(path, "rb") as fh:
    data = fh.read()
doc = orjson.loads(data)
dt = time.perf_counter() - t0
print(json.dumps({"time_s": dt, "cpu_s": cpu_s() - c0, "peak_kb": rss_kb(), "base_kb": base, "events": len(doc["traceEvents"])}))
""",
    # HTA 0.5.0: TraceAnalysis(trace_dir=...) parses every rank file of a folder.
    "HTA 0.5.0": _PRELUDE
    + r"""
import logging, os, shutil, tempfile
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
base = rss_kb()
d = tempfile.mkdtemp(prefix="hta-bench-")
link = os.path.join(d, "rank-0.pt.trace.json" + (".gz" if path.endswith(".gz") else ""))
os.symlink(os.path.abspath(path), link)
try:
    c0 = cpu_s(); t0 = time.perf_counter()
    ta = TraceAnalysis(trace_dir=d)
    dt = time.perf_counter() - t0
    n = sum(len(df) for df in ta.t.traces.values())
finally:
    shutil.rmtree(d, ignore_errors=True)
print(json.dumps({"time_s": dt, "cpu_s": cpu_s() - c0, "peak_kb": rss_kb(), "base_kb": base, "events": n}))
""",
}

SCRIPTS = {
    "gapscope.parsers.load": SCRIPTS["gapscope.parsers.load"],
    "gapscope.parsers.load 1 proc": SCRIPTS["gapscope.parsers.load"],
    **{k: v for k, v in SCRIPTS.items() if k != "gapscope.parsers.load"},
}
#: Environment of each tool's subprocess beyond the inherited one.
TOOL_ENV = {"gapscope.parsers.load 1 proc": {"GAPSCOPE_LOAD_PROCESSES": "1"}}

_DICT_BYTES_PER_EVENT = 2200  # PERF_BASELINE.md: a tree of dicts costs ~2 KB/event


def trace_path(n: int, gz: bool) -> Path:
    """Cached generated trace for ``n`` events (generated on first use)."""
    p = OUT / (f"kineto_v{LAYOUT_VERSION}_{n}_s0.json" + (".gz" if gz else ""))
    stats_p = p.with_name(p.name + ".stats.json")
    if not (p.exists() and stats_p.exists()):
        OUT.mkdir(parents=True, exist_ok=True)
        print(f"generating {p.name} ...", file=sys.stderr, flush=True)
        tmp = p.with_name(p.name + ".tmp")
        stats = generate(tmp, n, seed=0, gzip=gz)
        tmp.replace(p)
        stats_p.write_text(stats.to_json())
    return p


def stats_of(p: Path) -> KinetoStats:
    return KinetoStats.from_json(p.with_name(p.name + ".stats.json").read_text())


def mem_available_bytes() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 8 << 30


def run_one(tool: str, path: Path, python: str, timeout_s: float) -> dict:
    """Run one measurement in a fresh subprocess; returns its JSON or {"error": ...}."""
    cmd = [python, "-c", SCRIPTS[tool], str(path), str(ROOT)]
    env = {**os.environ, **TOOL_ENV.get(tool, {})}
    try:
        cp = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=str(ROOT), env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout_s:.0f} s"}
    if cp.returncode != 0:
        tail = (cp.stderr or cp.stdout).strip().splitlines()
        return {"error": (tail[-1] if tail else f"exit {cp.returncode}")[:120]}
    try:
        return json.loads(cp.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": "no result"}


def hta_python(arg: str | None) -> str | None:
    """Interpreter that can import ``hta``, or None."""
    cands = [c for c in (arg, os.environ.get("GAPSCOPE_HTA_PYTHON"), sys.executable) if c]
    for c in cands:
        try:
            cp = subprocess.run([c, "-c", "import hta.trace_analysis"], capture_output=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if cp.returncode == 0:
            return c
    return None


def check(res: dict, st: KinetoStats) -> str:
    """Compare a gapscope.parsers.load result with the generator's stats."""
    bad = []
    if res.get("kernels") != st.n_kernels:
        bad.append(f"kernels {res.get('kernels')}≠{st.n_kernels}")
    if res.get("busy_ns") != st.gpu_busy_ns:
        bad.append(f"busy {res.get('busy_ns')}≠{st.gpu_busy_ns}")
    ext = res.get("extent_ns") or [0, 0]
    want = list(st.extent_ns)
    off = ext[0] - want[0]
    if off not in (0, st.base_time_ns) or ext[1] - ext[0] != want[1] - want[0]:
        bad.append(f"extent {ext}≠{want}(+base?)")
    return "ok" if not bad else "; ".join(bad)


def fmt_row(cols, widths):
    return "  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(cols, widths)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Load-time and peak-RSS benchmark of gapscope.parsers.load")
    ap.add_argument("--sizes", default="100k,1M", help="comma list of event counts, e.g. 100k,1M,5M")
    ap.add_argument("--repeat", type=int, default=1, help="runs per cell (median reported)")
    ap.add_argument("--gzip", action="store_true", help="also benchmark .json.gz copies")
    ap.add_argument("--tools", default="all", help="comma list among: " + ", ".join(SCRIPTS))
    ap.add_argument("--hta-python", default=None, help="interpreter with hta installed")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per measurement")
    a = ap.parse_args(argv)

    sizes = [parse_count(s) for s in a.sizes.split(",") if s.strip()]
    tools = list(SCRIPTS) if a.tools == "all" else [t.strip() for t in a.tools.split(",")]
    hta_py = hta_python(a.hta_python) if "HTA 0.5.0" in tools else None
    avail = mem_available_bytes()

    header = ["events", "file", "tool", "time s", "cpu s", "peak RSS", "base", "check / note"]
    widths = [7, 9, 19, 8, 7, 9, 7, 30]
    rows = []
    print(fmt_row(header, widths))
    print(fmt_row(["-" * w for w in widths], widths))
    for n in sizes:
        variants = [False, True] if a.gzip else [False]
        for gz in variants:
            path = trace_path(n, gz)
            st = stats_of(path)
            size = path.stat().st_size
            label = f"{n // 1000}k" if n < 1_000_000 else f"{n / 1e6:g}M"
            file_col = f"{size / 1e6:.0f} MB" + (" gz" if gz else "")
            for tool in tools:
                python = sys.executable
                note = ""
                if tool == "HTA 0.5.0":
                    if hta_py is None:
                        rows.append([label, file_col, tool, "-", "-", "-", "-", "skipped: hta not importable"])
                        print(fmt_row(rows[-1], widths), flush=True)
                        continue
                    python = hta_py
                if tool in ("msgspec dicts", "orjson dicts"):
                    est = n * _DICT_BYTES_PER_EVENT + st.bytes
                    if est > 0.7 * avail:
                        rows.append(
                            [label, file_col, tool, "-", "-", "-", "-", f"skipped: needs ~{est / 2**30:.0f} GB"]
                        )
                        print(fmt_row(rows[-1], widths), flush=True)
                        continue
                    if gz:
                        continue  # the floor is measured on the plain file
                if tool == "msgspec typed" and gz:
                    continue
                runs = [run_one(tool, path, python, a.timeout) for _ in range(max(1, a.repeat))]
                ok = [r for r in runs if "error" not in r]
                if not ok:
                    rows.append([label, file_col, tool, "-", "-", "-", "-", f"error: {runs[0]['error']}"])
                    print(fmt_row(rows[-1], widths), flush=True)
                    continue
                t = statistics.median(r["time_s"] for r in ok)
                cpu = statistics.median(r.get("cpu_s", float("nan")) for r in ok)
                peak = max(r["peak_kb"] for r in ok) * 1024
                base = min(r["base_kb"] for r in ok) * 1024
                if tool.startswith("gapscope.parsers.load"):
                    note = check(ok[0], st)
                    child = max(r.get("child_peak_kb", 0) for r in ok) * 1024
                    both = max(r.get("both_private_kb", 0) for r in ok) * 1024
                    if child:
                        note += f", child peak {child / 2**30:.2f} GB, both private {both / 2**30:.2f} GB"
                    if ok[0].get("warnings"):
                        note += f", {ok[0]['warnings']} warnings"
                    target = ""
                    if n == 1_000_000 and not gz and tool == "gapscope.parsers.load":
                        target = (
                            " [target ≤1.5 s, <1 GB: "
                            + ("MET" if t <= 1.5 and max(peak, both) < 1 << 30 else "MISSED")
                            + "]"
                        )
                    if n == 5_000_000 and not gz and tool == "gapscope.parsers.load":
                        target = " [target <5 GB: " + ("MET" if max(peak, both) < 5 << 30 else "MISSED") + "]"
                    note += target
                elif ok[0].get("events") not in (None, st.n_events):
                    note = f"{ok[0]['events']} rows"
                rows.append(
                    [
                        label,
                        file_col,
                        tool,
                        f"{t:.2f}",
                        f"{cpu:.2f}",
                        f"{peak / 2**30:.2f} GB",
                        f"{base / 2**20:.0f} MB",
                        note,
                    ]
                )
                print(fmt_row(rows[-1], widths), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
