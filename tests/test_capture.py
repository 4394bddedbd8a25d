"""capture: the Profiler API, file naming and the failure paths (CPU, torch 2.13).

Each recorded trace is checked twice: decoded with ``gzip`` + ``json`` as an
independent reference (a Kineto object with ``traceEvents``; the ranges we expect by
name and count), and with ``gapscope.parsers.load`` once the Chrome/Kineto loader exists.
Tests that need torch skip when it is not importable (CI installs ``gapscope[capture]``).
"""

from __future__ import annotations

import collections
import gzip
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HAVE_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed (pip install 'gapscope[capture]')")


# -- helpers shared with test_capture_scenarios ---------------------------------------


def read_kineto(path: str | os.PathLike) -> dict:
    """Decode a ``.pt.trace.json.gz`` with the standard library and check its Kineto shape."""
    with gzip.open(path, "rb") as fh:
        doc = json.loads(fh.read().decode("utf-8"))
    assert isinstance(doc, dict), "Kineto traces are JSON objects"
    assert isinstance(doc.get("traceEvents"), list) and doc["traceEvents"], "no traceEvents"
    assert "baseTimeNanoseconds" in doc and "schemaVersion" in doc
    for ev in doc["traceEvents"]:
        assert "ph" in ev and "name" in ev, ev
        if ev["ph"] == "X":
            assert float(ev["dur"]) >= 0 and float(ev["ts"]) >= 0
    return doc


def range_counts(doc: dict, cat: str = "user_annotation") -> collections.Counter:
    """Count complete (``ph == "X"``) events of category ``cat`` by name."""
    return collections.Counter(e["name"] for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == cat)


def parser_available() -> bool:
    """True once the Chrome/Kineto loader (``parsers/chrome.py``) exists."""
    return importlib.util.find_spec("gapscope.parsers.chrome.loader") is not None


def check_trace(path: str | os.PathLike, expect_names: set[str] = frozenset()) -> dict:
    """Both checks: stdlib decode, and ``gapscope.parsers.load`` when the loader exists.

    ``expect_names`` must appear as ranges in the JSON and as names in the loaded trace.
    Returns the decoded JSON document.
    """
    doc = read_kineto(path)
    names = set(range_counts(doc)) | set(range_counts(doc, "cpu_op"))
    assert expect_names <= names, expect_names - names
    if parser_available():
        from gapscope import parsers

        trace = parsers.load(path)
        assert len(trace) > 0
        assert expect_names <= set(trace.names), expect_names - set(trace.names)
    return doc


def _fixed_name(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    import gapscope.capture.profile as cp

    monkeypatch.setattr(cp, "trace_basename", lambda label=None, **kw: name)


# -- without torch ------------------------------------------------------------------------


def test_capture_imports_without_torch_and_help_says_how_to_install():
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import gapscope.capture, gapscope.capture.cmd, gapscope.capture.scenarios, gapscope.capture.runner\n"
        "bad = [m for m in ('gapscope.parsers', 'gapscope.analysis', 'gapscope.tui', 'textual', 'rich') if m in sys.modules]\n"
        "assert not bad, bad\n"
        "assert gapscope.capture.cmd.main(['--help']) == 0\n"
        "assert gapscope.capture.cmd.main(['--scenario', 'decode']) == 2\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    # find_spec still sees the installed torch, so --help may not warn here; the run must:
    assert "pip install -e '.[capture]'" in r.stderr
    assert "Traceback" not in r.stderr


def test_help_warns_when_torch_is_not_installed(monkeypatch):
    import gapscope.capture.cmd as cli

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    assert "pip install -e '.[capture]'" in cli._torch_note()


def test_step_outside_a_profiler_is_a_no_op():
    from gapscope import capture

    assert capture.active_profiler() is None
    capture.step()  # must not raise


def test_schedule_rejects_bad_values():
    from gapscope.capture import Schedule

    with pytest.raises(ValueError):
        Schedule(active=0)
    with pytest.raises(ValueError):
        Schedule(wait=-1)
    assert Schedule(wait=2, warmup=3, active=1).first_recorded_step == 5


# -- naming and the atomic write ------------------------------------------------------------


def test_trace_basename_carries_host_pid_and_utc_time():
    from gapscope.capture.naming import trace_basename

    assert (
        trace_basename("decode", host="gpu-01", pid=4242, when_s=0)
        == "gpu-01_4242_19700101T000000Z_decode.pt.trace.json.gz"
    )
    # 2024-03-05 06:07:08 UTC = 1709618828
    assert trace_basename(None, host="h", pid=1, when_s=1709618828) == "h_1_20240305T060708Z.pt.trace.json.gz"
    # unsafe characters in host or label are replaced, never passed to the file system
    assert (
        trace_basename("a b/../c", host="x$(rm -rf)", pid=7, when_s=0)
        == "x-rm--rf_7_19700101T000000Z_a-b-..-c.pt.trace.json.gz"
    )


def test_write_atomic_never_overwrites_and_leaves_no_partial(tmp_path):
    from gapscope.capture.naming import write_atomic

    name = "h_1_19700101T000000Z.pt.trace.json.gz"
    (tmp_path / name).write_bytes(b"keep me")

    def writer(p):
        Path(p).write_bytes(b"new trace")

    out = write_atomic(str(tmp_path), name, writer)
    assert (tmp_path / name).read_bytes() == b"keep me"
    assert out.path == str(tmp_path / "h_1_19700101T000000Z-1.pt.trace.json.gz") and out.renamed
    out2 = write_atomic(str(tmp_path), name, writer)
    assert out2.path.endswith("-2.pt.trace.json.gz")

    def failing(p):
        Path(p).write_bytes(b"half")
        raise RuntimeError("export broke")

    with pytest.raises(RuntimeError):
        write_atomic(str(tmp_path), "other.pt.trace.json.gz", failing)
    assert set(os.listdir(tmp_path)) == {name, Path(out.path).name, Path(out2.path).name}


def test_write_atomic_falls_back_when_folder_is_unusable(tmp_path, monkeypatch):
    import gapscope.capture.naming as naming

    fb = tmp_path / "fallback"
    monkeypatch.setattr(naming, "fallback_dir", lambda: str(fb))
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the folder should be")
    out = naming.write_atomic(str(blocker), "t.pt.trace.json.gz", lambda p: Path(p).write_bytes(b"x"))
    assert out.fell_back and out.path == str(fb / "t.pt.trace.json.gz")
    assert str(blocker) in out.reason
    assert naming.check_writable(str(blocker)) == "not a directory"
    assert naming.check_writable(str(tmp_path / "new" / "deep")) is None


# -- Profiler on CPU ------------------------------------------------------------------------------


@needs_torch
def test_whole_block_records_every_step_and_says_cpu_only(tmp_path):
    import torch

    from gapscope.capture import Profiler

    msgs = []
    with Profiler(str(tmp_path), label="blk", cuda=False, log=msgs.append) as p:
        for _ in range(3):
            with torch.profiler.record_function("work"):
                torch.ones(4, 4).mul(2.0)
            p.step()
    assert p.steps == 3 and p.cuda is False and len(p.traces) == 1
    assert re.fullmatch(r".+_\d+_\d{8}T\d{6}Z_blk\.pt\.trace\.json\.gz", os.path.basename(p.traces[0]))
    doc = check_trace(p.traces[0], {"work", "aten::mul"})
    counts = range_counts(doc)
    # whole block: step 0..3 (the block's tail after the last step() is step 3)
    assert {k: v for k, v in counts.items() if k.startswith("ProfilerStep#")} == {
        f"ProfilerStep#{i}": 1 for i in range(4)
    }
    assert counts["work"] == 3
    assert doc["gapscope_capture"] == {"label": "blk", "cuda": False, "schedule": "whole block"}
    assert any("CPU activity only" in m for m in msgs)


@needs_torch
@pytest.mark.parametrize("wait, warmup", [(1, 1), (2, 0)])
def test_schedule_keeps_only_the_active_steps(tmp_path, recwarn, wait, warmup):
    import torch

    from gapscope.capture import Profiler, Schedule

    with Profiler(str(tmp_path), schedule=Schedule(wait=wait, warmup=warmup, active=2), log=lambda m: None) as p:
        for i in range(6):
            with torch.profiler.record_function(f"iter{i}"):
                torch.ones(2).add(1)
            p.step()
    doc = check_trace(p.traces[0])
    counts = range_counts(doc)
    assert {k for k in counts if k.startswith("ProfilerStep#")} == {"ProfilerStep#2", "ProfilerStep#3"}
    assert {k for k in counts if k.startswith("iter")} == {"iter2", "iter3"}
    assert not [w for w in recwarn if "warmup" in str(w.message)]  # no torch "no warmup" warning


@needs_torch
@pytest.mark.parametrize("exc_type", [ValueError, KeyboardInterrupt])
def test_block_that_raises_keeps_the_recorded_steps(tmp_path, exc_type):
    import torch

    from gapscope.capture import Profiler, Schedule

    msgs = []
    p = Profiler(str(tmp_path), schedule=Schedule(wait=0, warmup=1, active=5), log=msgs.append)
    with pytest.raises(exc_type):
        with p:
            for i in range(10):
                with torch.profiler.record_function(f"iter{i}"):
                    torch.ones(2).add(1)
                if i == 3:
                    raise exc_type("stop")
                p.step()
    assert len(p.traces) == 1
    counts = range_counts(check_trace(p.traces[0]))
    assert {k for k in counts if k.startswith("iter")} == {"iter1", "iter2", "iter3"}
    how = "interrupted (Ctrl-C)" if exc_type is KeyboardInterrupt else "raised ValueError"
    assert any(how in m and p.traces[0] in m for m in msgs), msgs


@needs_torch
def test_real_sigint_inside_the_block_still_writes(tmp_path):
    import torch

    from gapscope.capture import Profiler

    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT is not Python's default handler in this process")
    p = Profiler(str(tmp_path), log=lambda m: None)
    with pytest.raises(KeyboardInterrupt):
        with p:
            with torch.profiler.record_function("before_ctrl_c"):
                torch.ones(2).add(1)
            signal.raise_signal(signal.SIGINT)
            torch.ones(2).add(2)  # not reached on CPython: the handler raises at the next bytecode
    check_trace(p.traces[0], {"before_ctrl_c"})


def test_ctrl_c_during_a_write_is_delivered_after_it():
    from gapscope.capture.signals import signals_deferred

    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT is not Python's default handler in this process")
    done = []
    with pytest.raises(KeyboardInterrupt):
        with signals_deferred():
            signal.raise_signal(signal.SIGINT)
            done.append("write finished")
    assert done == ["write finished"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@needs_torch
def test_existing_file_is_never_overwritten(tmp_path, monkeypatch):
    import torch

    from gapscope.capture import Profiler

    name = "host_1_19700101T000000Z_x.pt.trace.json.gz"
    _fixed_name(monkeypatch, name)
    (tmp_path / name).write_bytes(b"an older trace")
    msgs = []
    with Profiler(str(tmp_path), log=msgs.append) as p:
        torch.ones(2).add(1)
    assert (tmp_path / name).read_bytes() == b"an older trace"
    assert p.traces == [str(tmp_path / "host_1_19700101T000000Z_x-1.pt.trace.json.gz")]
    check_trace(p.traces[0], {"aten::add"})
    assert any("existing file is untouched" in m for m in msgs)


@needs_torch
def test_unwritable_folder_falls_back_and_says_where(tmp_path, monkeypatch):
    import torch

    import gapscope.capture.naming as naming
    from gapscope.capture import Profiler

    fb = tmp_path / "fb"
    monkeypatch.setattr(naming, "fallback_dir", lambda: str(fb))
    blocker = tmp_path / "file"
    blocker.write_text("")
    msgs = []
    with Profiler(str(blocker), log=msgs.append) as p:
        torch.ones(2).add(1)
    assert len(p.traces) == 1 and os.path.dirname(p.traces[0]) == str(fb)
    assert p.outcomes[0].fell_back
    check_trace(p.traces[0], {"aten::add"})
    assert any(f"could not write to {blocker}" in m and p.traces[0] in m for m in msgs), msgs


@needs_torch
def test_block_ending_in_warmup_explains_why_there_is_no_trace(tmp_path):
    from gapscope.capture import Profiler, Schedule

    msgs = []
    with Profiler(str(tmp_path), schedule=Schedule(wait=1, warmup=2, active=2), log=msgs.append) as p:
        p.step()
        p.step()
    assert p.traces == [] and os.listdir(tmp_path) == []
    assert any("no trace written" in m and "recording starts after step() call 3" in m for m in msgs), msgs


@needs_torch
def test_profiled_decorator_passes_results_and_errors(tmp_path):
    import torch

    from gapscope.capture import profiled

    @profiled(out_dir=str(tmp_path), log=lambda m: None)
    def square(x):
        return torch.as_tensor(x) * torch.as_tensor(x)

    assert int(square(7)) == 49
    p = square.last_profiler
    assert len(p.traces) == 1 and p.traces[0].endswith("_square.pt.trace.json.gz")
    check_trace(p.traces[0], {"aten::mul"})

    @profiled(out_dir=str(tmp_path), log=lambda m: None)
    def broken():
        torch.ones(1).add(1)
        raise LookupError("no")

    with pytest.raises(LookupError):
        broken()
    assert len(broken.last_profiler.traces) == 1


MINI_KINETO = {
    "schemaVersion": 1,
    "traceEvents": [
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 100,
            "tid": 100,
            "ts": 1000.0,
            "dur": 5,
            "args": {"correlation": 1},
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 100,
            "tid": 100,
            "ts": 1025.0,
            "dur": 5,
            "args": {"correlation": 2},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k1",
            "pid": 0,
            "tid": 7,
            "ts": 1010.0,
            "dur": 10,
            "args": {"device": 0, "stream": 7, "correlation": 1},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k2",
            "pid": 0,
            "tid": 7,
            "ts": 1040.0,
            "dur": 10,
            "args": {"device": 0, "stream": 7, "correlation": 2},
        },
    ],
}


def test_summary_line_figures_by_hand(tmp_path):
    """Two 10 µs kernels at 1010 and 1040 µs: window 40 µs, busy 20 µs, one 20 µs gap."""
    if not parser_available():
        pytest.skip("parsers/chrome.py (the Kineto loader) is not there yet")
    from gapscope.capture.summary import summary_line

    path = tmp_path / "mini.json"
    path.write_text(json.dumps(MINI_KINETO))
    line = summary_line(path)
    assert line.startswith("4 events, 2 lanes; GPU 0: idle 20.0 µs of 40.0 µs (50%) in 1 gaps; by cause: "), line
    assert summary_line(tmp_path / "missing.json").startswith("no summary (could not load the trace: ")
    path.write_text("{not json")
    assert summary_line(path).startswith("no summary")


@needs_torch
def test_ctrl_c_while_a_cycle_is_written_waits_for_the_file(tmp_path, monkeypatch):
    """SIGINT arrives during the export at the end of the active steps: the file is
    completed first, then KeyboardInterrupt surfaces from that step() call."""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT is not Python's default handler in this process")
    import torch

    import gapscope.capture.profile as cp
    from gapscope.capture import Profiler, Schedule

    real = cp.write_atomic

    def pressed_while_writing(folder, basename, writer):
        signal.raise_signal(signal.SIGINT)
        return real(folder, basename, writer)

    monkeypatch.setattr(cp, "write_atomic", pressed_while_writing)
    p = Profiler(str(tmp_path), schedule=Schedule(wait=0, warmup=1, active=2), log=lambda m: None)
    with pytest.raises(KeyboardInterrupt):
        with p:
            for i in range(5):
                with torch.profiler.record_function(f"iter{i}"):
                    torch.ones(2).add(1)
                p.step()
    assert p.steps == 3  # step() 1 starts recording, 2 is the last active step, 3 exports
    counts = range_counts(check_trace(p.traces[0]))
    assert {k for k in counts if k.startswith("iter")} == {"iter1", "iter2"}
    assert [f for f in os.listdir(tmp_path) if f.startswith(".")] == []  # no partial file left


def test_without_usdt_lines_drops_only_torchs_probe_lines(capfd):
    import os as _os

    from gapscope.capture.terminal import without_usdt_lines

    with without_usdt_lines():
        _os.write(2, b"USDT:2026-12-01 09:39:57 1:1 SyncActivityProfilerHandler.cpp:52] profiler_start\n")
        _os.write(2, b"a real warning\n")
        _os.write(2, b"USDT:... profiler_stop\n")
    assert capfd.readouterr().err == "a real warning\n"


def test_name_main_thread_sets_and_returns_the_old_name():
    import sys as _sys
    import threading

    from gapscope.capture.terminal import name_main_thread

    if not _sys.platform.startswith("linux"):
        assert name_main_thread("x") is None
        return
    got = {}

    def body():
        old = name_main_thread("train_a_very_long_name.py")
        with open(f"/proc/self/task/{threading.get_native_id()}/comm") as f:
            got["now"] = f.read().strip()
        got["old"] = old

    t = threading.Thread(target=body, name="t")
    t.start()
    t.join()
    assert got["now"] == "train_a_very_lo" and got["old"]
