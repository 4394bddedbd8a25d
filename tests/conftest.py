"""Shared fixtures: paths to the shared corpus and bug cases.

The corpus lives beside the checkout in ``../shared`` and is read in place, never
copied. When it is missing, tests that need it skip locally but FAIL under CI
(``CI`` set), so a CI run without the corpus cannot pass silently.

The run is hermetic: the trace cache is off (``GAPSCOPE_NO_CACHE=1``) and gapscope's
cache directory is a temporary one per process (``GAPSCOPE_CACHE_DIR``), for this
process and every subprocess it starts, so no test reads or writes the user's cache.
Tests of the cache turn it on for themselves (``tests/test_cache.py``).
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("GAPSCOPE_SHARED", ROOT.parent / "shared"))
CORPUS = SHARED / "traces" / "public"
BUGS = SHARED / "bugs"
SAMPLES = ROOT / "sample_traces"


_CACHE_DIR: str | None = None


def pytest_configure(config) -> None:
    global _CACHE_DIR
    _CACHE_DIR = tempfile.mkdtemp(prefix="gapscope-test-cache-")
    os.environ["GAPSCOPE_CACHE_DIR"] = _CACHE_DIR
    os.environ["GAPSCOPE_NO_CACHE"] = "1"


def pytest_unconfigure(config) -> None:
    if _CACHE_DIR is not None:
        shutil.rmtree(_CACHE_DIR, ignore_errors=True)


def default_sigint() -> None:
    """``preexec_fn`` for a child a test sends SIGINT to: the default disposition, so
    its Python installs its own handler even when the suite runs with SIGINT ignored (a
    background job, ``nohup``: a newcomer's run hung 120 s twice, then left a capture
    running)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def require(path: Path) -> Path:
    """Return ``path``; skip the test when it is missing, or fail when ``CI`` is set."""
    if not path.exists():
        msg = f"shared test data missing: {path}"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return path


@pytest.fixture
def corpus() -> Path:
    return require(CORPUS)


@pytest.fixture
def bugs() -> Path:
    return require(BUGS)


@pytest.fixture
def forks(monkeypatch):
    """pids of the children forked during the test."""
    pids: list[int] = []
    real = os.fork

    def fork():
        pid = real()
        if pid:
            pids.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", fork)
    return pids
