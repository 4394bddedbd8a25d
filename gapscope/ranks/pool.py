"""Summarise every rank of a set in a local process pool.

Each worker process loads and diagnoses one rank at a time and sends back only its
``RankSummary`` (``gapscope.ranks.summary``), so the coordinator's memory is the
summaries, and a worker's is one rank's trace. Results stream back as they finish
(``progress(done, total, path)`` is called for each); the list returned is in the
order of ``paths``. A file that fails to load comes back as a ``RankFailure`` with its
error. A worker process that dies (killed, out of memory) breaks the pool: the ranks
not finished are retried in a fresh pool, then each alone in its own worker, then
reported as failed.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from gapscope.analysis.types import Params
from gapscope.ranks.summary import RankFailure, RankSummary, summarize_or_fail

__all__ = ["summarize_all", "default_jobs"]

Progress = Callable[[int, int, str], None]


def default_jobs() -> int:
    """The number of CPU cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def summarize_all(
    paths: list[str],
    params: Params | None = None,
    *,
    jobs: int | None = None,
    progress: Progress | None = None,
    fn: Callable = summarize_or_fail,
) -> list[RankSummary | RankFailure]:
    """``fn(path, params)`` (default ``summarize_or_fail``; a picklable module-level
    function) for every path; ``jobs`` worker processes (default: the cores; 1 runs in
    this process, without a pool)."""
    params = params or Params()
    n = len(paths)
    jobs = min(jobs or default_jobs(), max(n, 1))
    results: list = [None] * n
    done = 0

    def finish(k: int, r) -> None:
        nonlocal done
        results[k] = r
        done += 1
        if progress is not None:
            progress(done, n, paths[k])

    if jobs <= 1:
        for k, p in enumerate(paths):
            finish(k, fn(p, params))
        return results
    todo = list(range(n))
    for _attempt in (1, 2):
        todo = _run_pool(fn, paths, todo, params, jobs, finish)
        if not todo:
            return results
    # Still unfinished after two pools: each alone, so one rank that kills its worker
    # every time cannot take the others down with it.
    for k in todo:
        if _run_pool(fn, paths, [k], params, 1, finish):
            finish(
                k,
                RankFailure(
                    paths[k], "the worker process died each time it summarised this rank (killed or out of memory?)"
                ),
            )
    return results


def _run_pool(fn, paths, todo, params, jobs, finish) -> list[int]:
    """Run ``todo`` (indices into ``paths``) in a pool; the indices left unfinished when
    the pool broke."""
    left = set(todo)
    try:
        with ProcessPoolExecutor(max_workers=min(jobs, len(todo))) as ex:
            futs = {ex.submit(fn, paths[k], params): k for k in todo}
            pending = set(futs)
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in finished:
                    k = futs[f]
                    try:
                        r = f.result()
                    except BrokenProcessPool:
                        continue
                    left.discard(k)
                    finish(k, r)
    except BrokenProcessPool:
        pass
    return sorted(left)
