"""A checkout with nothing beside it passes: every test that reads the shared data
(``../shared`` or ``$GAPSCOPE_SHARED``) skips when it is missing and ``CI`` is unset.

The rule lives in ``tests/conftest.py`` (``require``, the ``corpus``/``bugs`` fixtures,
and the report hook for a test that reads a shared path without them). This test runs
the suite in a child with ``GAPSCOPE_SHARED`` an empty folder and ``CI`` unset: the
whole collection (a module that lists the corpus while it is imported must not fail),
then runs the tests that name the shared data (``conftest.names_shared``: about 180 of them,
about 20 s, since they skip), and fails on anything but passes and skips.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT, SHARED_ONLY_ENV


def _child_env(empty) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GAPSCOPE_FULL_CORPUS", "PYTEST_XDIST_WORKER")}
    env["GAPSCOPE_SHARED"] = str(empty)
    env[SHARED_ONLY_ENV] = "1"
    env.pop("PYTEST_ADDOPTS", None)
    return env


def _pytest(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", *args, "tests"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _summary(out: str) -> dict[str, int]:
    """pytest's last line as counts: {"passed": 8, "skipped": 174, ...}."""
    last = out.strip().splitlines()[-1]
    return {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected|xfailed)", last)}


@pytest.mark.skipif(bool(os.environ.get(SHARED_ONLY_ENV)), reason="the child run of this test itself")
def test_the_suite_without_the_shared_data_skips_what_needs_it(tmp_path):
    empty = tmp_path / "shared"
    empty.mkdir()
    env = _child_env(empty)

    # one child: it collects every module (an error there is an error of this run), then
    # runs the selection; the snapshots of the tests it leaves out are not "unused"
    run = _pytest(["-rfE", "--snapshot-warn-unused"], env)
    counts = _summary(run.stdout)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert not {"failed", "error", "errors"} & set(counts), run.stdout[-6000:]
    # the selection found the corpus tests, and they skipped: a run that skipped nothing
    # would prove nothing (the figures: 174 of 182 skip today; the 8 that pass read
    # only the bundled samples through ``require``)
    assert counts.get("skipped", 0) >= 100 and counts.get("deselected", 0) > 0, counts
