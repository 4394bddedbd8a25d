"""Shared fixtures: paths to the shared corpus and bug cases.

The corpus lives beside the checkout in ``../shared`` (or ``$GAPSCOPE_SHARED``) and is
read in place, never copied. When it is missing, tests that need it skip locally but
FAIL under CI (``CI`` set), so a CI run without the corpus cannot pass silently.

One rule does it, whichever way a test reaches the data:

- ``require(path)`` and the ``corpus`` and ``bugs`` fixtures say it up front (the way
  to write a new corpus test);
- a test that reads a path under ``SHARED`` without them and fails because that path
  is missing (``FileNotFoundError``, ``TraceFormatError: cannot read``, anything whose
  message or ``filename`` names the missing path) gets the same verdict from
  ``pytest_runtest_makereport`` below: skipped locally, failed under CI with the
  missing path said first;
- collection must not touch the data: a module-level list of corpus files is empty
  when the folder is missing (pytest then skips the test with an empty parameter set).

``tests/test_shared_absent.py`` proves the rule in every run: the suite collected, and
its tests that name the shared data run, with ``GAPSCOPE_SHARED`` an empty folder and
``CI`` unset, must end with no failure and no error.

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
import types
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


def _missing_shared_path(exc: BaseException | None) -> Path | None:
    """The path under ``SHARED`` that is missing and that ``exc`` (or an exception it
    was raised from) names, or None. Only a missing path counts: a test that fails on
    data that is there fails."""
    shared = str(SHARED)
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        texts = [str(getattr(exc, "filename", None) or ""), str(exc)]
        for text in texts:
            at = text.find(shared)
            while at >= 0:
                tail = text[at:].split()[0].split("'")[0].split('"')[0].rstrip(":,;)")
                candidate = Path(tail)
                if not candidate.exists():
                    return candidate
                at = text.find(shared, at + 1)
        exc = exc.__cause__ or exc.__context__
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test that failed because shared test data is missing: skipped locally, failed
    under ``CI`` with that said first (the rule ``require`` applies, for a test that
    read the path without it)."""
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is None or not report.failed or call.excinfo.errisinstance(pytest.skip.Exception):
        return
    missing = _missing_shared_path(call.excinfo.value)
    if missing is None:
        return
    msg = f"shared test data missing: {missing} (read without require())"
    if os.environ.get("CI"):
        report.longrepr = f"{msg}\n{report.longrepr}"
        return
    report.outcome = "skipped"
    report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {msg}")


#: The exhaustive corpus sweeps (a loader path over every corpus file) run in full
#: under ``CI`` or with ``GAPSCOPE_FULL_CORPUS=1``; otherwise on the fixed sample each
#: module names (``sweep``), so the default local run stays short.
FULL_CORPUS = bool(os.environ.get("CI") or os.environ.get("GAPSCOPE_FULL_CORPUS"))


def sweep(rels: list[str], sample: tuple[str, ...]) -> list:
    """``rels`` as pytest parameters: each in ``sample`` runs always, the others only
    under ``FULL_CORPUS`` (skipped with that reason otherwise: every case is collected
    and counted). A name of ``sample`` missing from ``rels`` while the corpus is there is
    a ValueError at collection: a misspelt sample would shrink silently."""
    if CORPUS.is_dir() and set(sample) - set(rels):
        raise ValueError(f"sample files not among the sweep's: {sorted(set(sample) - set(rels))}")
    later = pytest.mark.skipif(
        not FULL_CORPUS, reason="outside this sweep's local sample: runs under CI or GAPSCOPE_FULL_CORPUS=1"
    )
    return [rel if rel in sample else pytest.param(rel, marks=later) for rel in rels]


#: Set by ``tests/test_shared_absent.py`` for its child run: keep only the tests that
#: name the shared data (see ``names_shared``).
SHARED_ONLY_ENV = "GAPSCOPE_TEST_SHARED_ONLY"
_SHARED_NAMES = frozenset({"SHARED", "CORPUS", "BUGS", "require", "corpus", "bugs"})


def _code_names(code: types.CodeType) -> set[str]:
    """Every global or attribute name ``code`` and the functions nested in it use."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def names_shared(fn: object, seen: set[int] | None = None) -> bool:
    """Whether test function ``fn``, or a function of the test modules it calls by name,
    names the shared data (``SHARED``, ``CORPUS``, ``BUGS``, ``require``, or a module
    constant that is a path under ``SHARED``)."""
    seen = set() if seen is None else seen
    code = getattr(fn, "__code__", None)
    if code is None or id(code) in seen:
        return False
    seen.add(id(code))
    names = _code_names(code)
    if names & _SHARED_NAMES:
        return True
    scope = getattr(fn, "__globals__", {})
    for name in names:
        value = scope.get(name)
        if isinstance(value, Path) and value.is_relative_to(SHARED):
            return True
        if isinstance(value, types.FunctionType) and value.__module__.startswith("tests"):
            if names_shared(value, seen):
                return True
    return False


def pytest_collection_modifyitems(config, items) -> None:
    if not os.environ.get(SHARED_ONLY_ENV):
        return
    keep, drop = [], []
    for item in items:
        fn = getattr(item, "function", None)
        params = getattr(getattr(item, "callspec", None), "params", {})
        uses = (
            bool({"corpus", "bugs"} & set(getattr(item, "fixturenames", ())))
            or (fn is not None and names_shared(fn))
            or any(isinstance(v, Path) and v.is_relative_to(SHARED) for v in params.values())
        )
        (keep if uses else drop).append(item)
    config.hook.pytest_deselected(items=drop)
    items[:] = keep


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


@pytest.fixture(autouse=True)
def _no_deferral_outlives_its_test():
    """A cache write deferral a test leaves unset (``parsers.cache.store.defer_writes``,
    a viewer's ``DiagnosisAhead`` whose load never ended) is let go after it: a later
    test's write of the same file must not wait for it (``DEFER_MAX_S``)."""
    yield
    from gapscope.parsers.cache import store

    with store._writers_lock:
        left = [event for _, event in store._deferred]
        store._deferred.clear()
    for event in left:
        event.set()
