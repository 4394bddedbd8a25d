"""Benchmark ``gapscope.parsers.load`` against the JSON decode floor, alternating, with ratios.

Usage (from the repository root)::

    .venv/bin/python bench/load.py                          # 1M of both shapes + the two largest corpus traces
    .venv/bin/python bench/load.py --sizes 1M,5M --repeat 3  # 5M needs ~3 GB of disk and minutes
    .venv/bin/python bench/load.py --tools all              # + msgspec/orjson dicts, one process, HTA
    .venv/bin/python bench/load.py --gzip --no-corpus       # + each generated trace as a level-1 .json.gz
    .venv/bin/python bench/load.py --before /work/main/.venv/bin/python  # + main's load, alternating

Files: generated Kineto-shaped traces (``bench/gen_kineto.generate``, seed 0) of two
shapes, ``steps20`` (20 long ``ProfilerStep``s, the default) and ``steps500`` (500
short ones: a decode loop), cached under ``bench/out/`` (git-ignored); and the two
largest JSON traces of the corpus (``hta/mtia_rank_0.json.gz``, 310k metadata
events, and ``hta/df_index_resolver.json.gz``).

Every measurement runs in a fresh subprocess with ``GAPSCOPE_NO_CACHE=1`` (a first
load), and the tools run in turn within each repetition (gapscope, floor, gapscope,
floor, ...), so a ratio compares runs that saw the same machine load. Columns:

- ``wall s``: the measured call; ``cpu s``: user+sys CPU of the process and all its
  children over the call (gapscope's forked decoders included);
- ``private``: peak of the private memory of the process and its children together:
  their proportional set sizes (``Pss_Anon`` + ``Pss_Shmem`` of ``/proc/PID/smaps_rollup``),
  so a page a forked child still shares copy-on-write with its parent is counted once
  in the sum, not once per process as ``RssAnon`` counts it; sampled every 20 ms by a
  thread of the measured process (without ``smaps_rollup``: ``RssAnon`` + ``RssShmem``
  every 5 ms), in a round of its own after the timed rounds: reading ``smaps_rollup``
  walks the page tables under the lock page faults take, which slowed a 5M load split
  over children by 2.5 s of wall (8.1 s against 5.6 s) and the one-process floor less,
  so the times come from rounds without the sampler; ``×file``: that over the size of
  the uncompressed text;
- ``wall×``/``cpu×``: medians over the floor's medians on the same file.

Tools: ``gapscope``: ``gapscope.parsers.load`` as a user gets it (its ``check`` says
whether kernels, GPU busy and extent match what the generator wrote); ``floor``:
``msgspec.json.decode`` of the whole text into a Struct with the timeline fields only
(``args`` kept raw), single-threaded, after reading the file (and inflating it in one
call, for ``.gz``, with ISA-L as gapscope does, else zlib): the decode a typed loader cannot beat in one process. Optional:
``gapscope 1 proc`` (``GAPSCOPE_LOAD_PROCESSES=1``: what the split over processes
saves), ``gapscope inflate first`` (a ``.gz`` inflated whole before its decoders are
forked: what decoding while inflating saves), ``gapscope msgspec`` (the C scanner
off, ``GAPSCOPE_XSCAN=0``: msgspec decodes every event), ``msgspec dicts``, ``orjson
dicts``, ``HTA 0.5.0`` (HolisticTraceAnalysis, when ``hta`` is importable by
``--hta-python`` or ``$GAPSCOPE_HTA_PYTHON``; never a dependency).

Goals (issue 15): wall ≤ 1.0× floor with a second core free, CPU ≤ 1.6× floor
(metadata-heavy traces ≤ 2×), private memory ≤ 1.0× the file. Machines are shared
and noisy: read the ratios, and the load average printed with them.
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
import gc, json, os, resource, sys, threading, time
path = sys.argv[1]
def rss_kb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime + c.ru_utime + c.ru_stime
ROLLUP = os.path.exists(f"/proc/{os.getpid()}/smaps_rollup")
def private_kb(pid):  # anonymous + shared-memory pages: what the process allocated
    # PSS: a page a forked child still shares copy-on-write with its parent counts half
    # in each (RssAnon would count it in both), so the sum over the processes is right
    keys = ("Pss_Anon:", "Pss_Shmem:") if ROLLUP else ("RssAnon:", "RssShmem:")
    try:
        with open(f"/proc/{pid}/smaps_rollup" if ROLLUP else f"/proc/{pid}/status") as fh:
            return sum(int(l.split()[1]) for l in fh if l.startswith(keys))
    except OSError:
        return 0
peak = [0]
sampler_cpu = [0.0]
done = threading.Event()
def sample_once():  # private memory of this process and its children together, into peak
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as fh:
            kids = [int(x) for x in fh.read().split()]
    except OSError:
        kids = []
    peak[0] = max(peak[0], private_kb(me) + sum(private_kb(k) for k in kids))
def sample():
    while not done.wait(0.02 if ROLLUP else 0.005):
        c = time.thread_time()
        sample_once()
        sampler_cpu[0] += time.thread_time() - c  # its own CPU: not the measured call's
sampler = threading.Thread(target=sample, daemon=True)
SAMPLE = os.environ.get("BENCH_SAMPLE_MEMORY") == "1"
def start():
    global base, c0, t0
    base = private_kb(os.getpid())
    if SAMPLE:
        sampler.start()
    c0 = cpu_s(); t0 = time.perf_counter()
def stop(**extra):
    dt = time.perf_counter() - t0
    cpu = cpu_s() - c0
    done.set()
    if SAMPLE:
        sampler.join()
        sample_once()  # a C call that holds the GIL (the floor's decode) starves the sampler: its result is alive here
    cpu -= sampler_cpu[0]
    print(json.dumps({"time_s": dt, "cpu_s": cpu, "private_kb": max(0, peak[0] - base), "base_kb": base, **extra}))
def text_of(path):
    with open(path, "rb") as fh:
        data = fh.read()
    if data[:2] == b"\x1f\x8b":
        try:  # the inflater gapscope uses (ISA-L), else zlib
            from isal import isal_zlib as zlib
        except ImportError:
            import zlib
        data = zlib.decompress(data, 16 + 15)
    return data
"""

#: The tool ``--before`` adds.
BEFORE = "gapscope before"

SCRIPTS: dict[str, str] = {
    "gapscope": _PRELUDE
    + r"""
sys.path.insert(0, sys.argv[2])
import numpy as np
from gapscope import parsers
from gapscope.parsers.model import Kind
import gapscope.parsers.chrome.loader  # noqa: F401  (import cost is not load cost)
try:
    import gapscope.parsers.chrome.decode  # noqa: F401  (its front door, where there is one)
except ImportError:
    pass
import gapscope.parsers.cache.store  # noqa: F401  (opened even with the cache off)
start()
tr = gapscope.parsers.load(path)
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
stop(events=len(tr), kernels=int(k.sum()), busy_ns=busy, extent_ns=list(map(int, tr.extent_ns)), warnings=len(tr.warnings))
""",
    "floor": _PRELUDE
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
gc.disable()
start()
doc = dec.decode(text_of(path))
stop(events=len(doc.traceEvents))
""",
    "msgspec dicts": _PRELUDE
    + r"""
import msgspec
gc.disable()
start()
doc = msgspec.json.decode(text_of(path))
stop(events=len(doc["traceEvents"]))
""",
    "orjson dicts": _PRELUDE
    + r"""
import orjson
gc.disable()
start()
doc = orjson.loads(text_of(path))
stop(events=len(doc["traceEvents"]))
""",
    # HTA 0.5.0: TraceAnalysis(trace_dir=...) parses every rank file of a folder.
    "HTA 0.5.0": _PRELUDE
    + r"""
import logging, shutil, tempfile
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
d = tempfile.mkdtemp(prefix="hta-bench-")
link = os.path.join(d, "rank-0.pt.trace.json" + (".gz" if path.endswith(".gz") else ""))
os.symlink(os.path.abspath(path), link)
try:
    start()
    ta = TraceAnalysis(trace_dir=d)
    n = sum(len(df) for df in ta.t.traces.values())
    stop(events=n)
finally:
    shutil.rmtree(d, ignore_errors=True)
""",
}
SCRIPTS["gapscope 1 proc"] = SCRIPTS["gapscope"]
SCRIPTS["gapscope msgspec"] = SCRIPTS["gapscope"]
# a .gz inflated into its temporary file first, then split over processes (the
# decoders are not forked while it inflates): what decode-while-inflating saves
SCRIPTS["gapscope inflate first"] = SCRIPTS["gapscope"].replace(
    "\nstart()\ntr = ",
    "\nimport gapscope.parsers.chrome.parallel.fork as _f\n_f.GROWING_MIN_BYTES = 1 << 62\nstart()\ntr = ",
    1,
)
assert SCRIPTS["gapscope inflate first"] != SCRIPTS["gapscope"]
#: ``--before PYTHON``: ``gapscope`` by another checkout (that interpreter's editable
#: install), in turn with this one's in each round, so the ratio of the two saw the same
#: machine load.
SCRIPTS[BEFORE] = SCRIPTS["gapscope"]
#: Environment of each tool's subprocess beyond the inherited one.
TOOL_ENV = {"gapscope 1 proc": {"GAPSCOPE_LOAD_PROCESSES": "1"}, "gapscope msgspec": {"GAPSCOPE_XSCAN": "0"}}
#: Tools run unless ``--tools`` says otherwise.
DEFAULT_TOOLS = ("gapscope", "floor")
#: Shapes of generated traces: name -> ``generate(steps=...)``.
SHAPES = {"steps20": 20, "steps500": 500}
#: The two largest JSON traces of the corpus (``../shared/traces/public``).
CORPUS_FILES = ("hta/mtia_rank_0.json.gz", "hta/df_index_resolver.json.gz")
CORPUS = Path(os.environ.get("GAPSCOPE_SHARED", ROOT.parent / "shared")) / "traces" / "public"


def trace_path(n: int, steps: int = 20, gz: bool = False) -> Path:
    """Cached generated trace for ``n`` events of ``steps`` steps (generated on first
    use); ``gz``: gzip level 1, as ``gen_kineto --gzip`` writes it."""
    tag = "" if steps == 20 else f"_steps{steps}"
    p = OUT / f"kineto_v{LAYOUT_VERSION}_{n}_s0{tag}.json{'.gz' if gz else ''}"
    stats_p = p.with_name(p.name + ".stats.json")
    if not (p.exists() and stats_p.exists()):
        OUT.mkdir(parents=True, exist_ok=True)
        print(f"generating {p.name} ...", file=sys.stderr, flush=True)
        tmp = p.with_name(p.name + ".tmp")
        stats = generate(tmp, n, seed=0, steps=steps, gzip=gz)
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


def run_one(tool: str, path: Path, python: str, timeout_s: float, memory: bool = False, root: Path = ROOT) -> dict:
    """Run one measurement in a fresh subprocess; returns its JSON or {"error": ...}.
    ``memory``: sample its private memory (a round of its own: see the module doc);
    ``root``: the checkout whose ``gapscope`` ``python`` imports."""
    cmd = [python, "-c", SCRIPTS[tool], str(path), str(root)]
    env = {**os.environ, **TOOL_ENV.get(tool, {}), "BENCH_SAMPLE_MEMORY": "1" if memory else "0"}
    try:
        cp = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=str(root), env=env)
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
    """Compare a gapscope result with the generator's stats."""
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


def text_bytes(path: Path) -> int:
    """Size of the uncompressed text (a gzip file's inflated size, counted by streaming)."""
    with open(path, "rb") as fh:
        if fh.read(2) != b"\x1f\x8b":
            return path.stat().st_size
    import zlib

    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    total = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            total += len(d.decompress(chunk))
    return total


def fmt_row(cols, widths):
    return "  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(cols, widths)))


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


#: The columns of the table and their widths.
HEADER = ["file", "tool", "wall s", "cpu s", "private", "×file", "wall×", "cpu×", "check / note"]
WIDTHS = [30, 16, 7, 7, 9, 6, 6, 6, 24]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="gapscope.parsers.load against the JSON decode floor, alternating")
    ap.add_argument("--sizes", default="1M", help="comma list of event counts of the generated traces, e.g. 1M,5M")
    ap.add_argument("--shapes", default=",".join(SHAPES), help="comma list among: " + ", ".join(SHAPES))
    ap.add_argument("--no-corpus", action="store_true", help="leave out the two largest corpus traces")
    ap.add_argument("--gzip", action="store_true", help="also each generated trace gzipped (level 1)")
    ap.add_argument("--gzip-only", action="store_true", help="each generated trace gzipped (level 1) only")
    ap.add_argument("--repeat", type=int, default=3, help="alternating rounds per file (medians reported)")
    ap.add_argument(
        "--tools", default=",".join(DEFAULT_TOOLS), help="'all' or a comma list among: " + ", ".join(SCRIPTS)
    )
    ap.add_argument("--hta-python", default=None, help="interpreter with hta installed")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per measurement")
    ap.add_argument(
        "--before",
        metavar="PYTHON",
        help=f"add '{BEFORE}': the load by another checkout's venv interpreter (e.g. /work/main/.venv/bin/python)",
    )
    return ap.parse_args(argv)


def tools_of(a: argparse.Namespace) -> list[str]:
    """The tools to run, in their order within a round (``floor`` always among them)."""
    tools = (
        [t for t in SCRIPTS if t != BEFORE]
        if a.tools == "all"
        else [t.strip() for t in a.tools.split(",") if t.strip()]
    )
    if a.before and BEFORE not in tools:
        tools.insert(1, BEFORE)
    if "floor" not in tools:
        tools.append("floor")
    return tools


def files_of(a: argparse.Namespace) -> list[tuple[str, Path, KinetoStats | None]]:
    """(label, path, generator stats or None for a corpus trace) of each file measured;
    generated traces are written on first use."""
    files: list[tuple[str, Path, KinetoStats | None]] = []
    for n in [parse_count(x) for x in a.sizes.split(",") if x.strip()]:
        label = f"{n // 1000}k" if n < 1_000_000 else f"{n / 1e6:g}M"
        for shape in [x.strip() for x in a.shapes.split(",") if x.strip()]:
            for gz in (True,) if a.gzip_only else (False, True) if a.gzip else (False,):
                path = trace_path(n, SHAPES[shape], gz)
                files.append((f"{label} {shape}{' .gz' if gz else ''}", path, stats_of(path)))
    if not a.no_corpus:
        for rel in CORPUS_FILES:
            if (CORPUS / rel).exists():
                files.append((rel, CORPUS / rel, None))
            else:
                print(f"skipped {rel}: {CORPUS} not found", file=sys.stderr)
    return files


def skipped_tools(tools: list[str], size: int, hta_py: str | None, avail: int) -> dict[str, str]:
    """The tools left out on a file of ``size`` text bytes, with why."""
    skip: dict[str, str] = {}
    for t in tools:
        if t == "HTA 0.5.0" and hta_py is None:
            skip[t] = "skipped: hta not importable"
        if t in ("msgspec dicts", "orjson dicts") and size * 8 > 0.7 * avail:
            skip[t] = "skipped: not enough memory"
    return skip


def measure(
    a: argparse.Namespace, tools: list[str], skip: dict[str, str], path: Path, hta_py: str | None, before_root: Path
) -> tuple[dict[str, list[dict]], dict[str, dict]]:
    """The timed rounds (each tool in turn within a round: the floor last, the others
    rotated by one each round), then one round sampling memory: the results of each
    tool per timed round, and its memory round's result. ``before_root``: the
    checkout ``--before``'s interpreter imports.

    Why: the tool that runs right after the floor (which has just freed 4 GB at 5M
    events) was 20-26% slower in wall on the 2-core VM; in a fixed order this build
    read 1.19x ``--before``'s wall, and 0.79x with the two swapped. Rotated so, each
    other tool follows the floor in turn."""
    rounds = max(1, a.repeat)
    runs: dict[str, list[dict]] = {t: [] for t in tools}
    mem: dict[str, dict] = {}
    others = [t for t in tools if t != "floor"]
    for r in range(rounds + 1):
        k = r % len(others) if others else 0
        for t in others[k:] + others[:k] + [t for t in tools if t == "floor"]:
            if t in skip:
                continue
            python = hta_py if t == "HTA 0.5.0" and hta_py else sys.executable
            root = ROOT
            if t == BEFORE:
                python, root = a.before, before_root
            got = run_one(t, path, python, a.timeout, memory=r == rounds, root=root)
            if r < rounds:
                runs[t].append(got)
            else:
                mem[t] = got
    return runs, mem


def note_of(t: str, ok: list[dict], st: KinetoStats | None) -> str:
    """The check / note column of tool ``t`` from its first good result."""
    note = ""
    if t.startswith("gapscope"):
        note = check(ok[0], st) if st is not None else f"{ok[0]['events']:,} events"
        if ok[0].get("warnings"):
            note += f", {ok[0]['warnings']} warnings"
    elif t != "floor" and st is not None and ok[0].get("events") not in (None, st.n_events):
        note = f"{ok[0]['events']} rows"
    return note


def print_tools(
    label: str,
    tools: list[str],
    skip: dict[str, str],
    runs: dict[str, list[dict]],
    mem: dict[str, dict],
    size: int,
    st: KinetoStats | None,
) -> dict[str, tuple[float, float]]:
    """One row per tool of one file; returns the (wall s, cpu s) medians per tool measured."""
    med: dict[str, tuple[float, float]] = {}
    for t in tools:
        ok = [r for r in runs[t] if "error" not in r]
        if t in skip or not ok:
            note = skip.get(t) or f"error: {runs[t][0]['error']}"
            print(fmt_row([label, t, "-", "-", "-", "-", "-", "-", note], WIDTHS), flush=True)
            continue
        wall = statistics.median(r["time_s"] for r in ok)
        cpu = statistics.median(r["cpu_s"] for r in ok)
        private = mem.get(t, {}).get("private_kb", 0) * 1024
        med[t] = (wall, cpu)
        row = [
            label,
            t,
            f"{wall:.2f}",
            f"{cpu:.2f}",
            f"{private / 1e6:.0f} MB",  # decimal, as the text sizes
            f"{private / size:.2f}",
            "",
            "",
            note_of(t, ok, st),
        ]
        print(fmt_row(row, WIDTHS), flush=True)
    return med


def print_ratios(med: dict[str, tuple[float, float]]) -> None:
    """The medians of each tool over the floor's, and of gapscope over ``--before``'s."""
    if "floor" in med:
        fw, fc = med["floor"]
        for t, (w, c) in med.items():
            if t != "floor":
                print(fmt_row(["", f"{t} / floor", "", "", "", "", f"{w / fw:.2f}", f"{c / fc:.2f}", ""], WIDTHS))
    if BEFORE in med and "gapscope" in med:
        (w, c), (bw, bc) = med["gapscope"], med[BEFORE]
        print(fmt_row(["", "gapscope / before", "", "", "", "", f"{w / bw:.2f}", f"{c / bc:.2f}", ""], WIDTHS))


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    tools = tools_of(a)
    #: the checkout of the ``--before`` venv (VENV/bin/python)
    before_root = Path(a.before).absolute().parents[2] if a.before else ROOT
    hta_py = hta_python(a.hta_python) if "HTA 0.5.0" in tools else None
    avail = mem_available_bytes()
    files = files_of(a)
    print(f"machine: {os.cpu_count()} CPUs, load average {load_average()} at start; {a.repeat} alternating rounds")
    print(fmt_row(HEADER, WIDTHS))
    print(fmt_row(["-" * w for w in WIDTHS], WIDTHS))
    for label, path, st in files:
        size = text_bytes(path)
        skip = skipped_tools(tools, size, hta_py, avail)
        runs, mem = measure(a, tools, skip, path, hta_py, before_root)
        print_ratios(print_tools(label, tools, skip, runs, mem, size, st))
    print(f"load average {load_average()} at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
