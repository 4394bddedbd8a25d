"""Generator of N-rank Kineto jobs with a planted straggler (``gapscope report DIR``).

Every rank runs the same steps. Step ``k`` of rank ``r`` (times in µs, exact):

- ``ProfilerStep#k`` on the main thread from the step start ``T_k``;
- host work ``enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__`` (a
  ``cpu_op``) for ``load_us`` (plus ``late_us`` on the straggler in the late steps);
- ``kernels`` compute kernels ``gemm_i`` back to back on stream 7, ``compute_us`` in all,
  the first starting ``LAUNCH_US`` after the data arrived, each launched by
  ``cudaLaunchKernel`` (correlation, ``ac2g`` flow);
- one ``ncclKernel_AllReduce_RING_LL_Sum_float`` on the same stream right after the
  compute (its *arrival*), launched from ``record_param_comms`` / ``nccl:all_reduce``,
  with the ``Collective name`` args (and ``Seq`` = k when ``seq``); it ends
  ``transfer_us`` after the last rank's arrival, on every rank;
- the next step starts ``TAIL_US`` after the collective ends.

So in a late step every other rank's all-reduce is ``late_us`` longer than the
straggler's: its wait is ``late_us``, and the straggler's cost is
``(ranks - 1) * late_us`` per late step. Header ``distributedInfo`` with rank and world
size (``rank_in_header=False`` leaves it out, so the rank comes from the file name).

Command line (a bench of time and peak memory of the rank-set report)::

    python bench/gen_ranks.py OUT_DIR --ranks 64 --steps 20 --kernels 200 --straggler 5 --late 3,7
    python bench/gen_ranks.py OUT_DIR ... --bench      # then time the report on it, with peak memory
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import sys
import time
from pathlib import Path

__all__ = ["write_rank_set", "rank_events", "LAUNCH_US", "TAIL_US"]

LAUNCH_US = 5
TAIL_US = 10
T0_US = 1_700_000_000_000_000  # epoch µs, like real Kineto traces


def rank_events(
    rank: int,
    ranks: int,
    *,
    steps: int,
    straggler: int,
    late_steps: set[int],
    late_us: int,
    load_us: int = 100,
    compute_us: int = 400,
    kernels: int = 1,
    transfer_us: int = 50,
    seq: bool = False,
) -> list[dict]:
    """The ``traceEvents`` of one rank (see the module docstring)."""
    ev: list[dict] = [
        dict(ph="M", name="process_name", pid=100 + rank, tid=0, args=dict(name="python")),
        dict(ph="M", name="thread_name", pid=100 + rank, tid=1, args=dict(name="python main")),
        dict(ph="M", name="process_name", pid=0, tid=0, args=dict(name="GPU 0")),
        dict(ph="M", name="thread_name", pid=0, tid=7, args=dict(name="stream 7")),
    ]
    pid, tid = 100 + rank, 1
    t = T0_US
    corr = 1
    k_us = max(compute_us // kernels, 1)
    for k in range(steps):

        def load(r: int, k: int = k) -> int:
            return load_us + (late_us if (r == straggler and k in late_steps) else 0)

        arrive_last = t + max(load(q) for q in range(ranks)) + LAUNCH_US + k_us * kernels
        coll_end = arrive_last + transfer_us
        step_end = coll_end + TAIL_US
        ev.append(
            dict(ph="X", cat="user_annotation", name=f"ProfilerStep#{k}", pid=pid, tid=tid, ts=t, dur=step_end - t)
        )
        ld = load(rank)
        ev.append(
            dict(
                ph="X",
                cat="cpu_op",
                name="enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__",
                pid=pid,
                tid=tid,
                ts=t,
                dur=ld,
            )
        )
        g = t + ld + LAUNCH_US
        for i in range(kernels):
            launch = t + ld + 1 + (i * (LAUNCH_US - 2)) // max(kernels, 1)
            ev.append(
                dict(
                    ph="X",
                    cat="cuda_runtime",
                    name="cudaLaunchKernel",
                    pid=pid,
                    tid=tid,
                    ts=launch,
                    dur=1,
                    args=dict(correlation=corr),
                )
            )
            ev.append(
                dict(
                    ph="X",
                    cat="kernel",
                    name=f"gemm_{i % 7}",
                    pid=0,
                    tid=7,
                    ts=g,
                    dur=k_us,
                    args=dict(device=0, stream=7, correlation=corr),
                )
            )
            ev.append(dict(ph="s", cat="ac2g", name="ac2g", id=corr, pid=pid, tid=tid, ts=launch))
            ev.append(dict(ph="f", cat="ac2g", name="ac2g", id=corr, pid=0, tid=7, ts=g, bp="e"))
            corr += 1
            g += k_us
        arrival = g
        lc = t + ld + LAUNCH_US - 1
        ev.append(
            dict(
                ph="X",
                cat="cpu_op",
                name="record_param_comms",
                pid=pid,
                tid=tid,
                ts=lc - 1,
                dur=3,
                args={"Collective name": "allreduce", "In msg nelems": 1 << 20},
            )
        )
        ev.append(
            dict(
                ph="X",
                cat="cuda_runtime",
                name="cudaLaunchKernel",
                pid=pid,
                tid=tid,
                ts=lc,
                dur=1,
                args=dict(correlation=corr),
            )
        )
        cargs = {
            "device": 0,
            "stream": 7,
            "correlation": corr,
            "Collective name": "allreduce",
            "In msg nelems": 1 << 20,
            "Process Group Name": "0",
        }
        if seq:
            cargs["Seq"] = k
        ev.append(
            dict(
                ph="X",
                cat="kernel",
                name="ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
                pid=0,
                tid=7,
                ts=arrival,
                dur=coll_end - arrival,
                args=cargs,
            )
        )
        ev.append(dict(ph="s", cat="ac2g", name="ac2g", id=corr, pid=pid, tid=tid, ts=lc))
        ev.append(dict(ph="f", cat="ac2g", name="ac2g", id=corr, pid=0, tid=7, ts=arrival, bp="e"))
        corr += 1
        t = step_end
    return ev


def write_rank_set(
    out_dir: str | Path,
    ranks: int,
    *,
    steps: int = 4,
    straggler: int = 0,
    late_steps=(),
    late_us: int = 300,
    rank_in_header: bool = True,
    gz: bool = False,
    name: str = "worker{r}.pt.trace.json",
    **kw,
) -> list[Path]:
    """Write ``ranks`` Kineto files into ``out_dir``; their paths (rank order)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for r in range(ranks):
        doc = dict(
            schemaVersion=1,
            deviceProperties=[dict(id=0, name="NVIDIA H100")],
            traceEvents=rank_events(
                r, ranks, steps=steps, straggler=straggler, late_steps=set(late_steps), late_us=late_us, **kw
            ),
        )
        if rank_in_header:
            doc["distributedInfo"] = dict(backend="nccl", rank=r, world_size=ranks)
        p = out / (name.format(r=r) + (".gz" if gz else ""))
        data = json.dumps(doc).encode()
        p.write_bytes(gzip.compress(data, 1) if gz else data)
        paths.append(p)
    return paths


def bench(folder: str, *, jobs: int | None = None) -> dict:
    """Summarise ``folder`` in a process pool as ``gapscope report DIR`` does and print
    wall time, the coordinator's peak RSS, the largest worker's peak RSS, the summary
    size per rank and a projection of the coordinator's memory for 1,000 ranks."""
    import pickle

    from gapscope import __version__
    from gapscope.ranks.discover import assign_ranks, expand
    from gapscope.ranks.document import build_ranks_document
    from gapscope.ranks.pool import summarize_all
    from gapscope.ranks.summary import RankFailure

    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t = time.perf_counter()
    files = expand([folder])
    results = summarize_all(files, jobs=jobs)
    t_sum = time.perf_counter() - t
    ok = [r for r in results if not isinstance(r, RankFailure)]
    per_rank = sum(len(pickle.dumps(r)) for r in ok) / max(len(ok), 1)
    assigned, warnings = assign_ranks(
        [(r.path, getattr(r, "rank_meta", None), getattr(r, "world_size", None)) for r in results]
    )
    doc = build_ranks_document(results, assigned, warnings, version=__version__, inputs=[folder])
    wall = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    worker = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    events = sum(r.events for r in ok)
    out = dict(
        ranks=len(files),
        events=events,
        wall_s=round(wall, 2),
        summarize_s=round(t_sum, 2),
        coordinator_peak_mb=round(rss),
        coordinator_before_mb=round(rss0),
        worker_peak_mb=round(worker),
        summary_kb_per_rank=round(per_rank / 1024, 1),
        projected_1000_ranks_summaries_mb=round(1000 * per_rank / 2**20, 1),
        verdict=doc["verdict"]["line"],
    )
    print(json.dumps(out, indent=1))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--kernels", type=int, default=200, help="compute kernels per step")
    ap.add_argument("--straggler", type=int, default=5)
    ap.add_argument("--late", default="3,7", help="comma-separated late steps")
    ap.add_argument("--late-us", type=int, default=3000)
    ap.add_argument(
        "--bench",
        action="store_true",
        help="then summarise OUT as `gapscope report OUT` does; print time and peak memory",
    )
    ap.add_argument("--jobs", type=int, default=None)
    a = ap.parse_args(argv)
    late = {int(x) for x in a.late.split(",") if x}
    t = time.perf_counter()
    paths = write_rank_set(
        a.out,
        a.ranks,
        steps=a.steps,
        straggler=a.straggler,
        late_steps=late,
        late_us=a.late_us,
        kernels=a.kernels,
        compute_us=a.kernels * 4,
        gz=True,
        name="rank-{r}.pt.trace.json",
    )
    size = sum(os.path.getsize(p) for p in paths)
    print(f"wrote {len(paths)} ranks, {size / 1e6:.1f} MB gz, in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    if a.bench:
        bench(a.out, jobs=a.jobs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
