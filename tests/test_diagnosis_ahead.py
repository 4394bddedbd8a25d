"""The viewer's diagnosis begun by the load's own thread (``EarlyLoad.after_load``,
``tui.factory.DiagnosisAhead``) and the warm-up evidence computed beside the diagnosis
(``classify``'s ``warm_up``): the same diagnosis as without them, computed where they
say, once."""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import weakref

import numpy as np
import pytest

import gapscope.analysis.diagnosis_cache as dc
import gapscope.parsers.preview as preview_module
import gapscope.tui.factory as factory
from gapscope.analysis import diagnose
from gapscope.analysis.classify import SLOW_LAUNCH_NS
from gapscope.analysis.diagnose import _diagnose
from gapscope.analysis.evidence_kinds import one_time_mask
from gapscope.analysis.types import Params
from gapscope.parsers import load
from gapscope.parsers.cache import store
from gapscope.parsers.preview import EarlyLoad
from gapscope.tui.factory import DiagnosisAhead
from tests.conftest import SAMPLES
from tests.test_diagnosis_cache import assert_same


@pytest.fixture
def cache(monkeypatch, tmp_path):
    """The caches on, in ``tmp_path/cache``, for files of any size; writes waited for
    (deferrals left unset are let go by ``conftest``, after this)."""
    monkeypatch.delenv("GAPSCOPE_NO_CACHE", raising=False)
    monkeypatch.setenv("GAPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GAPSCOPE_CACHE_MIN_BYTES", "0")
    yield
    dc.wait_for_writes()
    store.wait_for_writes()


def _copy(name: str, tmp_path):
    dst = tmp_path / name
    shutil.copyfile(SAMPLES / name, dst)
    return str(dst)


class _HeldLoad:
    """``parsers.preview.load`` replaced: each load waits for ``release`` (so that
    ``after_load`` is asked while the load runs), then loads for real or raises."""

    def __init__(self, monkeypatch, fail: bool = False) -> None:
        self.release = threading.Event()
        self.fail = fail
        monkeypatch.setattr(preview_module, "load", self)

    def __call__(self, path):
        assert self.release.wait(30)
        if self.fail:
            raise ValueError("no trace here")
        return load(path)


def _ahead_on(monkeypatch, path: str, params: Params | None = None):
    """(the early load, its ``DiagnosisAhead`` begun after it, the loaded trace) of
    ``path``, the load held until the ahead is booked on it (``_HeldLoad``)."""
    held = _HeldLoad(monkeypatch)
    early = EarlyLoad(path)
    ahead = DiagnosisAhead(params)
    ahead.begin_after(early)
    held.release.set()
    return early, ahead, early(path)


def test_after_load_runs_in_the_load_thread_once_the_trace_is_handed_over(monkeypatch, tmp_path):
    held = _HeldLoad(monkeypatch)
    path = _copy("decode_10_steps.txt", tmp_path)
    early = EarlyLoad(path)
    seen: list = []
    assert early.after_load(lambda t: seen.append((threading.current_thread().name, t, early._done.is_set())))
    held.release.set()
    trace = early(path)
    early._thread.join(30)
    assert len(seen) == 1
    name, got, handed = seen[0]
    assert name == "gapscope-early-load" and got is trace and handed
    # the load is over: refused, and never called
    assert not early.after_load(lambda t: seen.append("late"))
    assert len(seen) == 1


def test_after_load_is_not_called_for_a_failed_load_and_what_it_raises_is_dropped(monkeypatch, tmp_path):
    path = _copy("decode_10_steps.txt", tmp_path)
    held = _HeldLoad(monkeypatch, fail=True)
    early = EarlyLoad(path)
    called: list = []
    assert early.after_load(called.append)
    held.release.set()
    with pytest.raises(ValueError, match="no trace here"):
        early(path)
    early._thread.join(30)
    assert called == []

    held = _HeldLoad(monkeypatch, fail=True)
    early = EarlyLoad(path)
    failed: list = []
    assert early.after_load(called.append, or_else=lambda: failed.append("failed"))
    held.release.set()
    with pytest.raises(ValueError, match="no trace here"):
        early(path)
    early._thread.join(30)
    assert called == [] and failed == ["failed"]  # ``or_else`` instead, in the load's thread

    held = _HeldLoad(monkeypatch)
    early = EarlyLoad(path)
    assert early.after_load(called.append, or_else=lambda: failed.append("not this time"))
    held.release.set()
    early(path)
    early._thread.join(30)
    assert len(called) == 1 and failed == ["failed"]

    held = _HeldLoad(monkeypatch)
    early = EarlyLoad(path)

    def boom(trace):
        raise RuntimeError("dropped")

    assert early.after_load(boom)
    held.release.set()
    assert len(early(path)) == len(load(path))
    early._thread.join(30)
    assert not early._thread.is_alive()


def test_the_diagnosis_ahead_is_computed_in_the_load_thread_and_equals_the_fresh_one(cache, monkeypatch, tmp_path):
    """A first open: the cache has no entry (``ready`` gives None), the load's thread
    diagnoses (once) and computes the findings; ``__call__`` gives that diagnosis."""
    path = _copy("decode_10_steps.txt", tmp_path)
    runs: list[str] = []
    real = dc.diagnose

    def spy(trace, params=None):
        runs.append(threading.current_thread().name)
        return real(trace, params)

    monkeypatch.setattr(dc, "diagnose", spy)
    early, ahead, trace = _ahead_on(monkeypatch, path, Params())
    assert ahead.ready(trace) is None  # nothing cached: diagnosed, not read
    got = ahead(trace)
    assert got.trace is trace
    assert runs == ["gapscope-early-load"]
    early._thread.join(30)
    assert "findings" in got.derived  # computed after it, in the load's thread
    assert_same(diagnose(trace), got)


def test_the_diagnosis_ahead_waits_for_the_first_frame(cache, monkeypatch, tmp_path):
    """``begin`` does not diagnose beside the viewer's first frame: it waits for
    ``painted`` (a preview drawn) or for the worker to ask (after the whole trace's
    first frame)."""
    path = _copy("decode_10_steps.txt", tmp_path)
    began = threading.Event()
    real = dc.diagnose

    def spy(trace, params=None):
        began.set()
        return real(trace, params)

    monkeypatch.setattr(dc, "diagnose", spy)
    early, ahead, trace = _ahead_on(monkeypatch, path)
    assert ahead._begun.wait(30)
    assert not began.wait(0.3)  # loaded, but nothing painted yet
    ahead.painted()
    assert began.wait(30)
    assert ahead(trace).trace is trace


def test_a_cached_trace_is_left_to_ready_which_reads_its_entry_in_the_callers_thread(cache, monkeypatch, tmp_path):
    """The load's thread does not read a cached entry (the read would hold the
    interpreter beside the viewer's first frame): ``ready`` reads it, in the caller's
    (the viewer's worker's) thread, and nothing is diagnosed."""
    path = _copy("picket_fence.txt", tmp_path)
    dc.diagnose_cached(load(path))
    dc.wait_for_writes()
    monkeypatch.setattr(dc, "diagnose", lambda *a: pytest.fail("diagnosed again"))
    reads: list[str] = []
    real_get = dc.DiagnosisCache.get_completed

    def spy(self, trace):
        reads.append(threading.current_thread().name)
        return real_get(self, trace)

    monkeypatch.setattr(dc.DiagnosisCache, "get_completed", spy)
    early, ahead, trace = _ahead_on(monkeypatch, path)
    early._thread.join(30)
    assert reads == []  # the load's thread left it
    got = ahead.ready(trace)
    assert got is not None and got.trace is trace
    assert reads == [threading.current_thread().name]
    monkeypatch.undo()
    assert_same(diagnose(trace), got)


def test_a_trace_it_was_not_begun_on_is_diagnosed_by_the_caller(cache, monkeypatch, tmp_path):
    """No ``begin_after`` (or a load over before it): ``ready`` and ``__call__`` are the
    defaults, in the caller's thread; another trace than the one begun on too."""
    path = _copy("decode_10_steps.txt", tmp_path)
    trace = load(path)
    ahead = DiagnosisAhead()
    assert ahead.ready(trace) is None
    got = ahead(trace)
    assert_same(diagnose(trace), got)

    monkeypatch.setattr(factory, "AHEAD_START_WAIT_S", 0.01)
    done = EarlyLoad(path)
    done(path)
    done._thread.join(30)
    late = DiagnosisAhead()
    late.begin_after(done)  # the load is over: nothing will be begun
    other = load(path)
    assert_same(diagnose(other), late(other))


def test_what_the_diagnosis_ahead_raises_is_raised_to_its_caller(monkeypatch, tmp_path):
    monkeypatch.setattr(factory, "default_ready_diagnosis", lambda t, p=None: None)

    def fails(trace, params=None):
        raise RuntimeError("diagnosis failed here")

    monkeypatch.setattr(factory, "default_diagnose", fails)
    path = _copy("decode_10_steps.txt", tmp_path)
    early, ahead, trace = _ahead_on(monkeypatch, path)
    with pytest.raises(RuntimeError, match="diagnosis failed here"):
        ahead(trace)
    with pytest.raises(RuntimeError, match="diagnosis failed here"):  # asked again: diagnosed again, not a KeyError
        ahead(trace)


@pytest.mark.parametrize(("name", "one_time_if_all"), [("decode_10_steps.txt", 20), ("picket_fence.txt", 127)])
def test_classify_takes_the_warm_up_mask_it_is_given(name, one_time_if_all):
    """``warm_up`` is the mask ``classify`` uses, asked for once: the diagnosis's
    (computed in its thread) equals one computed in place; with every event warm-up
    evidence, the gaps whose time is host or launch work on a thread become one-time
    (counted on these traces: 20 of decode_10_steps' 21 gaps, all 127 of
    picket_fence's), where the real mask makes none."""
    trace = load(str(SAMPLES / name))
    asked: list[int] = []

    def once():
        asked.append(1)
        return one_time_mask(trace, SLOW_LAUNCH_NS)

    real = _diagnose(trace, Params(), once)
    assert asked == [1]
    assert_same(diagnose(trace), real)
    assert not real.gaps.one_time.any()
    every = _diagnose(trace, Params(), lambda: np.ones(len(trace), dtype=bool))
    assert int(every.gaps.one_time.sum()) == one_time_if_all
    assert np.array_equal(every.gaps.cause, real.gaps.cause)  # the mask decides one-time only


def _entry_of(path: str):
    cache = store.TraceCache.open(path)
    assert cache is not None
    return cache.entry


def test_the_trace_cache_write_waits_for_the_diagnosis_ahead(cache, monkeypatch, tmp_path):
    """A first open: the load's trace cache entry is written once the diagnosis the
    causes wait for is in (``store.defer_writes``), not beside it. The diagnosis here
    lasts 0.3 s more, in which an undeferred write of this small file would be done."""
    import time

    path = _copy("decode_10_steps.txt", tmp_path)
    real = factory.default_diagnose
    during: list[bool] = []

    def slow(trace, params=None):
        time.sleep(0.3)
        during.append(_entry_of(path).exists())
        return real(trace, params)

    monkeypatch.setattr(factory, "default_diagnose", slow)
    early, ahead, trace = _ahead_on(monkeypatch, path)
    assert ahead(trace) is not None
    store.wait_for_writes()
    assert during == [False]  # not written while the diagnosis ran
    assert _entry_of(path).exists()  # written after it


def test_a_failed_load_or_one_over_first_holds_no_write(cache, monkeypatch, tmp_path):
    """The deferral ends when the load it waits on fails (``or_else``) or was over
    before the diagnosis was booked: a later load's entry is written at once."""
    path = _copy("decode_10_steps.txt", tmp_path)
    held = _HeldLoad(monkeypatch, fail=True)
    early = EarlyLoad(path)
    ahead = DiagnosisAhead()
    ahead.begin_after(early)
    held.release.set()
    with pytest.raises(ValueError):
        early(path)
    early._thread.join(30)
    assert ahead._writes.is_set()
    monkeypatch.undo()
    monkeypatch.delenv("GAPSCOPE_NO_CACHE", raising=False)
    monkeypatch.setenv("GAPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GAPSCOPE_CACHE_MIN_BYTES", "0")
    monkeypatch.setattr(store, "DEFER_MAX_S", 3600.0)  # a write held by it would never come here
    other = EarlyLoad(path)
    other(path)
    late = DiagnosisAhead()
    late.begin_after(other)  # the load is over: nothing to wait for
    assert late._writes.is_set()
    store.wait_for_writes()
    assert _entry_of(path).exists()


def test_a_deferred_write_goes_on_after_its_bound(cache, monkeypatch, tmp_path):
    path = _copy("decode_10_steps.txt", tmp_path)
    monkeypatch.setattr(store, "DEFER_MAX_S", 0.2)
    never = threading.Event()
    store.defer_writes(never, path)
    load(path)
    store.wait_for_writes()
    assert _entry_of(path).exists() and not never.is_set()
    never.set()


def test_a_deferred_write_holds_back_neither_another_files_write_nor_its_load(cache, monkeypatch, tmp_path):
    """While a viewer's diagnosis of A is pending, a fresh load of B neither waits for
    A's deferred write (``wait_for_writes(deferred=False)``) nor has its own write
    deferred: B's entry is written, A's not yet (the bound is an hour here: a wait
    for it would be this test's timeout)."""
    a = _copy("decode_10_steps.txt", tmp_path)
    b = str(tmp_path / "other.txt")
    shutil.copyfile(SAMPLES / "decode_10_steps.txt", b)
    with open(b, "a") as fh:
        fh.write("\n")  # another file, another entry
    monkeypatch.setattr(store, "DEFER_MAX_S", 3600.0)
    pending = threading.Event()
    store.defer_writes(pending, a)
    load(a)
    loaded = threading.Thread(target=load, args=(b,), daemon=True)
    loaded.start()
    loaded.join(60)
    assert not loaded.is_alive()
    store.wait_for_writes(deferred=False)
    assert _entry_of(b).exists() and not _entry_of(a).exists()
    pending.set()
    store.wait_for_writes()
    assert _entry_of(a).exists()


def test_a_deferred_write_is_made_when_the_program_ends(tmp_path):
    """A command that ends while its write waits (a viewer quit before its diagnosis
    is in) writes the entry then, as without the deferral, instead of waiting
    ``DEFER_MAX_S`` (an hour here: the run's timeout would end it first)."""
    path = _copy("decode_10_steps.txt", tmp_path)
    code = f"""
        import os, threading
        os.environ.pop("GAPSCOPE_NO_CACHE", None)
        os.environ["GAPSCOPE_CACHE_DIR"] = {str(tmp_path / "cache")!r}
        os.environ["GAPSCOPE_CACHE_MIN_BYTES"] = "0"
        from gapscope.parsers import load
        from gapscope.parsers.cache import store
        store.DEFER_MAX_S = 3600.0
        store.defer_writes(threading.Event(), {path!r})
        load({path!r})
        print("loaded")
    """
    done = _run_script(code, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "loaded"
    with pytest.MonkeyPatch.context() as m:
        m.delenv("GAPSCOPE_NO_CACHE", raising=False)
        m.setenv("GAPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
        m.setenv("GAPSCOPE_CACHE_MIN_BYTES", "0")
        assert _entry_of(path).exists()


def _run_script(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """``code`` run by a fresh interpreter (the caches off)."""
    env = dict(os.environ, GAPSCOPE_NO_CACHE="1")
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout, env=env
    )


def test_load_and_diagnose_still_work_from_an_atexit_hook():
    """A load and a diagnosis from an atexit hook work (as
    tests/test_cache.py::test_no_thread_at_interpreter_shutdown_means_no_entry has the
    load's cache do): their work beside the caller's thread (``Beside``) runs in it
    there. A ``ThreadPoolExecutor`` refused then (RuntimeError: cannot schedule new
    futures after interpreter shutdown)."""
    code = f"""
        import atexit
        from gapscope.parsers import load  # a script that uses gapscope: imported at its top
        from gapscope.analysis import diagnose
        def hook():
            try:
                t = load({str(SAMPLES / "decode_10_steps.txt")!r})
                print("LOADED", len(t))
                d = diagnose(t)
                print("DIAGNOSED", len(d.gaps))
            except BaseException as exc:
                print("FAILED", type(exc).__name__, exc)
        atexit.register(hook)
        """
    done = _run_script(code)
    assert "FAILED" not in done.stdout, done.stdout + done.stderr
    assert "LOADED" in done.stdout and "DIAGNOSED" in done.stdout, done.stdout + done.stderr


def test_diagnose_from_a_non_daemon_thread_after_main_returns():
    """A worker thread (non-daemon) that diagnoses after the main thread has returned,
    once the interpreter's shutdown has begun: the diagnosis is given, not a
    RuntimeError."""
    code = f"""
        import threading, time
        from gapscope.parsers import load
        from gapscope.analysis import diagnose
        t = load({str(SAMPLES / "decode_10_steps.txt")!r})
        def work():
            time.sleep(0.5)  # the main thread has returned by then
            try:
                print("DIAGNOSED", len(diagnose(t).gaps))
            except BaseException as exc:
                print("FAILED", type(exc).__name__, exc)
        threading.Thread(target=work).start()
        """
    done = _run_script(code)
    assert "DIAGNOSED" in done.stdout, done.stdout + done.stderr


def test_ahead_does_not_hang_when_begin_fails_before_its_diagnosis(monkeypatch, tmp_path):
    """Whatever ``begin`` meets before its diagnosis (``default_has_cached`` raising),
    ``__call__`` does not wait for ever: ``_done`` is set in any case (the viewer would
    say "diagnosing" for good). Here it diagnoses, the entry not known to be cached."""

    def broken(trace, params=None):
        raise OSError("cache directory unreadable")

    monkeypatch.setattr(factory, "default_has_cached", broken)
    path = _copy("decode_10_steps.txt", tmp_path)
    early, ahead, trace = _ahead_on(monkeypatch, path)
    ahead.painted()
    early._thread.join(30)
    box: dict = {}

    def call() -> None:
        try:
            box["got"] = ahead(trace)
        except BaseException as exc:
            box["error"] = exc

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(15)
    assert not t.is_alive(), "DiagnosisAhead.__call__ waits for ever after begin failed"
    assert box["got"].trace is trace


def test_a_failed_ahead_diagnosis_does_not_keep_its_frames_alive(monkeypatch, tmp_path):
    """A failed diagnosis ahead is raised once and not kept: ``DiagnosisAhead`` lives as
    long as the app (it is ``ViewOptions.diagnose``), and the exception's traceback
    holds every frame of the failed diagnosis and their arrays (at 5M events, hundreds
    of MB). The worker turns it into one line."""

    class Big:
        pass

    refs: list = []

    def fails(trace, params=None):
        big = Big()  # stands for the diagnosis's large local arrays
        refs.append(weakref.ref(big))
        raise RuntimeError("diagnosis failed here")

    monkeypatch.setattr(factory, "default_has_cached", lambda t, p=None: False)
    monkeypatch.setattr(factory, "default_diagnose", fails)
    path = _copy("decode_10_steps.txt", tmp_path)
    early, ahead, trace = _ahead_on(monkeypatch, path)
    ahead.painted()
    try:
        ahead(trace)
    except RuntimeError as exc:
        line = f"diagnosis failed: {type(exc).__name__}: {exc}"  # what workers.diagnose keeps
    early._thread.join(30)
    assert line
    gc.collect()
    assert refs and refs[0]() is None, "the failed diagnosis's frames are kept alive by the ahead"


def test_beside_runs_the_work_in_the_callers_thread_when_no_thread_starts(monkeypatch):
    """``Beside``: the result of the work begun in a thread; where no thread can be
    started (at interpreter shutdown), the same result, computed at the call in the
    caller's thread; what the work raised is raised, once."""
    from gapscope.parsers.beside import Beside

    ran_in: list[str] = []

    def work(x):
        ran_in.append(threading.current_thread().name)
        return x * 2

    assert Beside(work, 21, name="gapscope-test")() == 42
    assert ran_in == ["gapscope-test"]

    def refuse(self):
        raise RuntimeError("can't create new thread at interpreter shutdown")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    assert Beside(work, 4)() == 8
    assert ran_in[-1] == threading.current_thread().name
    monkeypatch.undo()

    def boom():
        raise ValueError("from the work")

    failed = Beside(boom)
    with pytest.raises(ValueError, match="from the work"):
        failed()
    assert "error" not in failed._box  # not kept after it was raised
