"""Summarise the ranks of a set on a Dask distributed cluster (the ``dask`` extra).

The same per-rank function as the local pool (``gapscope.ranks.summary.summarize_or_fail``)
runs as one Dask task per rank file, so the workers must see the files at the same
paths (shared storage). Results stream back as they finish (``progress(done, total,
path)``), and the coordinator keeps only the summaries. A worker that dies mid-run is
Dask's to handle: its tasks are rescheduled on the other workers; a rank whose task has
killed ``distributed.scheduler.allowed-failures`` workers (default 3) comes back as a
``RankFailure`` with the ``KilledWorker`` error, and the rest completes.

``scheduler``: a scheduler address (``tcp://host:8786``) or a Dask cluster object (a
``LocalCluster``, or a ``dask_jobqueue.SLURMCluster``/``PBSCluster`` for batch systems:
see the README, "Many ranks").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gapscope.analysis.types import Params
from gapscope.ranks.summary import RankFailure, summarize_or_fail

__all__ = ["summarize_on_dask", "DaskMissing"]


class DaskMissing(ImportError):
    """``distributed`` is not installed (one line, with the install command)."""


def summarize_on_dask(
    paths: list[str],
    params: Params | None = None,
    *,
    scheduler: Any,
    progress: Callable[[int, int, str], None] | None = None,
    fn: Callable = summarize_or_fail,
) -> list:
    """``fn(path, params)`` for every path as tasks on the Dask cluster ``scheduler``;
    the results in the order of ``paths``. Raises ``DaskMissing`` without the extra, and
    what ``distributed.Client`` raises when the scheduler cannot be reached."""
    try:
        from distributed import Client, as_completed
    except ImportError as exc:
        raise DaskMissing("--dask-scheduler needs Dask distributed: pip install 'gapscope[dask]'") from exc
    params = params or Params()
    results: list = [None] * len(paths)
    with Client(scheduler) as client:
        futures = client.map(
            fn, paths, params=params, pure=False, key=[f"gapscope-rank-{k}" for k in range(len(paths))]
        )
        index = {f.key: k for k, f in enumerate(futures)}
        done = 0
        for fut in as_completed(futures):
            k = index[fut.key]
            if fut.status == "error":
                err = fut.exception()
                msg = " ".join(str(err).split()) or type(err).__name__
                results[k] = RankFailure(paths[k], f"{type(err).__name__}: {msg}"[:300])
            else:
                results[k] = fut.result()
            fut.release()
            done += 1
            if progress is not None:
                progress(done, len(paths), paths[k])
    return results
