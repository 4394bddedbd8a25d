"""Rank sets on a real Dask ``LocalCluster`` (2 worker processes): the same document as
the local pool, and a complete report when a worker dies mid-run.

Needs the ``dask`` extra (part of the ``test`` extra); skipped locally without it,
failed under CI (``CI`` set), as the corpus tests are."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bench.gen_ranks import write_rank_set
from gapscope.ranks.cmd import collect

if os.environ.get("CI"):
    import distributed
else:
    distributed = pytest.importorskip("distributed")


def kill_worker_once(path: str, params):
    """Summarise ``path``; the first time a file named ``*die*`` is seen, kill the
    worker process running it (a marker file beside it remembers)."""
    from gapscope.ranks.summary import summarize_or_fail

    p = Path(path)
    marker = p.with_name(p.name + ".killed")
    if "die" in p.name and not marker.exists():
        marker.write_text(str(os.getpid()))
        os._exit(1)
    return summarize_or_fail(path, params)


@pytest.fixture(scope="module")
def cluster():
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, scheduler_port=0) as c:
        yield c


def _strip(doc: dict) -> str:
    return json.dumps({**doc, "inputs": [], "ranks": [{**r, "load_s": 0} for r in doc["ranks"]]}, sort_keys=True)


def test_dask_gives_the_local_pool_document(cluster, tmp_path):
    write_rank_set(tmp_path, 4, steps=3, straggler=3, late_steps=(1,), late_us=250)
    on_dask = collect([str(tmp_path)], dask_scheduler=cluster.scheduler_address)
    local = collect([str(tmp_path)], jobs=2)
    assert _strip(on_dask) == _strip(local)
    assert on_dask["verdict"]["straggler"] == 3 and on_dask["verdict"]["cost_ns"] == 3 * 250_000


def test_dask_survives_a_killed_worker(cluster, tmp_path):
    from distributed import Client

    from gapscope.ranks.dask_pool import summarize_on_dask
    from gapscope.ranks.summary import RankSummary

    paths = write_rank_set(tmp_path, 4, steps=2, straggler=1, late_steps=(1,), name="w{r}.json")
    dying = paths[2].rename(tmp_path / "die-w2.json")
    files = [str(paths[0]), str(paths[1]), str(dying), str(paths[3])]
    seen = []
    res = summarize_on_dask(
        files, scheduler=cluster.scheduler_address, fn=kill_worker_once, progress=lambda done, n, p: seen.append(done)
    )
    assert (tmp_path / "die-w2.json.killed").exists()  # a worker did die
    assert all(isinstance(r, RankSummary) for r in res)
    assert seen == [1, 2, 3, 4]
    with Client(cluster.scheduler_address, set_as_default=False) as c:
        c.wait_for_workers(2, timeout=60)  # the nanny restarted it


def test_unreadable_rank_on_dask(cluster, tmp_path):
    write_rank_set(tmp_path, 2, steps=2)
    (tmp_path / "worker2.json").write_text("not json at all")
    doc = collect([str(tmp_path)], dask_scheduler=cluster.scheduler_address)
    assert doc["ranks_analysed"] == 2 and [f["rank"] for f in doc["failed"]] == [2]


@pytest.mark.parametrize(
    "address, reason, connect_s",
    [
        ("tcp://127.0.0.1:1", "Timed out trying to connect to tcp://127.0.0.1:1", 1),
        # refused at once; a long connect timeout so that a busy machine cannot turn
        # the refusal into a time-out
        ("nowhere", "missing port number in address 'nowhere'", 30),
        ("foo://x:1", "unknown address scheme 'foo'", 30),
    ],
)
def test_a_scheduler_that_cannot_be_reached_is_a_usage_error(tmp_path, address, reason, connect_s):
    """A wrong ``--dask-scheduler``/``GAPSCOPE_DASK_SCHEDULER`` is the user's to fix: one
    line naming the address (exit status 2), not an internal error asking for a bug
    report (it was: ``OSError``/``ValueError`` out of ``distributed.Client``)."""
    import dask

    from gapscope.report.args import UsageError

    write_rank_set(tmp_path, 2, steps=2)
    with dask.config.set({"distributed.comm.timeouts.connect": f"{connect_s}s"}), pytest.raises(UsageError) as err:
        collect([str(tmp_path)], dask_scheduler=address)
    msg = str(err.value)
    assert msg.startswith(f"cannot reach the Dask scheduler {address!r} (--dask-scheduler, GAPSCOPE_DASK_SCHEDULER): ")
    assert reason in msg and "\n" not in msg
