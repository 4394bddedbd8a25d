"""Why the loader forks its own children: the way a decoded part's columns come back.

Usage (from the repository root): ``.venv/bin/python bench/load_transport.py``

Two forked workers each make the columns of half of N events (numpy arrays about as
wide as ``EventColumns``: 56 bytes an event) and send them back, five alternating
rounds per N: by the loader's own fork and shared map
(``gapscope.parsers.chrome.child.run_in_children``, ``copy=False``: the arrays view
the child's map) and by the standard library's ``ProcessPoolExecutor`` with the fork
context (pickled through its pipe, copied on both ends), a pool made per load as a
loader would. The work in the worker is the same; only the way back differs. Prints
the medians and their ratio. On 2 busy cores (load average 8.7): 1M events 0.62 s
against 1.02 s (x1.65), 5M events 3.51 s against 5.13 s (x1.46).
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import statistics
import time
import warnings

import numpy as np

from gapscope.parsers.chrome import child


def work(j, n_events):
    rng = np.random.default_rng(j)
    cols = {f"i64_{k}": rng.integers(0, 1 << 40, n_events, dtype=np.int64) for k in range(5)}
    cols.update({f"i32_{k}": rng.integers(0, 1 << 20, n_events, dtype=np.int32) for k in range(3)})
    cols.update({f"i8_{k}": rng.integers(0, 100, n_events, dtype=np.int8) for k in range(4)})
    return cols


def mine(n):
    t = time.perf_counter()
    got = child.run_in_children(
        [lambda j=j: work(j, n // 2) for j in range(2)], 60 * n // 2 + (1 << 20), 600.0, copy=False
    )
    sum(int(a.sum() & 1) for d in got for a in d.values())  # read the arrays
    return time.perf_counter() - t


def pool(n):
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with cf.ProcessPoolExecutor(2, mp_context=mp.get_context("fork")) as ex:
            got = list(ex.map(work, range(2), [n // 2] * 2))
    sum(int(a.sum() & 1) for d in got for a in d.values())
    return time.perf_counter() - t


def main() -> None:
    for n in (1_000_000, 5_000_000):
        rounds(n)


def rounds(n: int) -> None:
    a, b = [], []
    for _ in range(5):
        a.append(mine(n))
        b.append(pool(n))
    mb = sum(x.nbytes for x in work(0, n).values()) / 1e6
    print(
        f"{n:>9} events ({mb:.0f} MB of columns): fork+shared map median {statistics.median(a):.3f} s, "
        f"ProcessPoolExecutor(fork) median {statistics.median(b):.3f} s, ratio pool/fork {statistics.median(b) / statistics.median(a):.2f}"
    )


if __name__ == "__main__":
    main()
