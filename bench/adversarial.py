"""Adversarial shapes from issue 14, each through ``gapscope report`` (text, Markdown,
JSON) in a fresh process; prints seconds and peak RSS per run. Every run must stay
under 5 s (the issue's bound).

    python bench/adversarial.py [--out DIR]

Shapes: 30k identical nested CPU ops over 50 kernels; a gzip of 150k identical CPU ops;
150k identical ``cudaLaunchKernel`` calls; two 10 MB names made of ``\\n`` escapes;
100k threads of one op each.

Measured (2 shared cores, 2026-12-01; before the fix in parentheses):

    shape                  text    markdown  json
    nested_30k             0.65 s  0.50 s    1.06 s   (68.6 s text)
    identical_cpu_150k.gz  1.14 s  1.11 s    3.21 s   (> 100 s)
    identical_launch_150k  1.30 s  -         1.57 s   (12.3 s text, 55.6 s json)
    names_10mb             1.48 s  1.48 s    2.50 s   (> 100 s text, 26 s markdown)
    threads_100k           2.49 s  3.45 s    2.98 s
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

#: Every load here is a first load: the trace cache is neither read nor written (nor by
#: the subprocesses this starts, which inherit it).
os.environ["GAPSCOPE_NO_CACHE"] = "1"

KERNELS = [
    {
        "ph": "X",
        "cat": "kernel",
        "name": "k",
        "pid": 0,
        "tid": 7,
        "ts": 100 + 100 * i,
        "dur": 10,
        "args": {"stream": 7, "device": 0},
    }
    for i in range(50)
]


def _cpu(n: int, cat: str = "cpu_op", name: str = "aten::add") -> list[dict]:
    return [{"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": 50, "dur": 6000}] * n


def build(out: Path) -> dict[str, Path]:
    paths = {}
    paths["nested_30k"] = out / "nested_30k.json"
    paths["nested_30k"].write_text(json.dumps({"traceEvents": _cpu(30_000) + KERNELS}))
    paths["identical_cpu_150k.gz"] = out / "identical_cpu_150k.json.gz"
    with gzip.open(paths["identical_cpu_150k.gz"], "wt") as fh:
        fh.write(json.dumps({"traceEvents": _cpu(150_000) + KERNELS}))
    paths["identical_launch_150k"] = out / "identical_launch_150k.json"
    paths["identical_launch_150k"].write_text(
        json.dumps({"traceEvents": _cpu(150_000, "cuda_runtime", "cudaLaunchKernel") + KERNELS})
    )
    name = "\\n" * (5 << 20)  # 10 MB of JSON escapes
    body = (
        f'{{"traceEvents": [{{"ph": "X", "cat": "kernel", "name": "{name}", "pid": 0, "tid": 7, "ts": 100, '
        f'"dur": 10}}, {{"ph": "X", "cat": "kernel", "name": "{name}", "pid": 0, "tid": 7, "ts": 1000, '
        f'"dur": 10}}, {{"ph": "X", "cat": "cpu_op", "name": "{name}", "pid": 1, "tid": 1, "ts": 50, '
        f'"dur": 2000}}]}}'
    )
    paths["names_10mb"] = out / "names_10mb.json"
    paths["names_10mb"].write_text(body)
    threads = [
        {"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": t, "ts": 50 + t % 5000, "dur": 5}
        for t in range(100_000)
    ]
    paths["threads_100k"] = out / "threads_100k.json"
    paths["threads_100k"].write_text(json.dumps({"traceEvents": threads + KERNELS}))
    return paths


def measure(path: Path, flag: str | None) -> tuple[float, int, int]:
    """(seconds, peak RSS bytes, exit status) of ``gapscope report [flag] path``."""
    probe = (
        "import resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "p = subprocess.run([sys.executable, '-m', 'gapscope', 'report', *sys.argv[1:]], "
        "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, p.returncode)\n"
    )
    args = [flag, str(path)] if flag else [str(path)]
    out = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=600).stdout
    secs, rss_kib, rc = out.split()
    return float(secs), int(rss_kib) * 1024, int(rc)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="folder for the generated traces (default: a temporary one)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        worst = 0.0
        for shape, path in build(out).items():
            for flag in (None, "--markdown", "--json"):
                secs, rss, rc = measure(path, flag)
                worst = max(worst, secs)
                print(f"{shape:24} {flag or 'text':10} {secs:6.2f} s  {rss / 2**20:7.1f} MiB  exit {rc}")
        print(f"worst {worst:.2f} s ({'ok' if worst < 5 else 'OVER the 5 s bound'})")
        return 0 if worst < 5 else 1


if __name__ == "__main__":
    sys.exit(main())
