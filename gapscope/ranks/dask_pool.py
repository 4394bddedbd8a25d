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

__all__ = ["summarize_on_dask", "DaskMissing", "SchedulerUnreachable"]


class DaskMissing(ImportError):
    """``distributed`` is not installed (one line, with the install command)."""


class SchedulerUnreachable(Exception):
    """``distributed.Client`` could not connect to the scheduler (a wrong address, none
    listening there, a malformed one): one line naming the address and the reason."""


def _check_address(scheduler: Any) -> None:
    """Raise ``ValueError`` for a malformed scheduler address (an unknown scheme, a host
    without a port) before ``distributed.Client`` is made: a Client that fails on one
    leaves its event-loop runner half started in this process, and the next Client
    made here then fails on an assertion inside ``distributed``. Objects (a cluster)
    pass unchecked."""
    if not isinstance(scheduler, str):
        return
    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.comm.registry import get_backend

    scheme, location = parse_address(scheduler)
    get_backend(scheme)
    if scheme in ("tcp", "tls", "ws", "wss"):
        parse_host_port(location)


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
    ``SchedulerUnreachable`` when ``distributed.Client`` cannot connect to ``scheduler``
    (its ``OSError``, or ``ValueError`` for a malformed address)."""
    try:
        from distributed import Client, as_completed
    except ImportError as exc:
        raise DaskMissing("--dask-scheduler needs Dask distributed: pip install 'gapscope[dask]'") from exc
    params = params or Params()
    results: list = [None] * len(paths)
    try:
        _check_address(scheduler)
        client = Client(scheduler)
    except (OSError, ValueError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise SchedulerUnreachable(
            f"cannot reach the Dask scheduler {scheduler!r} (--dask-scheduler, GAPSCOPE_DASK_SCHEDULER): {reason}"
        ) from None
    with client:
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
