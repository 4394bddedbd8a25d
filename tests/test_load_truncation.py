"""Attacks on the parts path of a plain file: a file cut short under this process's
map (SIGBUS), descriptor exhaustion while the children answer, and plans whose last
targets fall inside the last element (or an element longer than the search window).

The SIGBUS cases run in a subprocess: a regression kills that process, not pytest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import gapscope.parsers.chrome.parallel.cut as cut
import gapscope.parsers.chrome.parallel.fork as cp
from gapscope.parsers import load
from tests.test_load_parallel import assert_same, force_parts


@pytest.fixture
def spy(monkeypatch, tmp_path):
    return force_parts(monkeypatch, tmp_path)


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_FORCE = """
import os, json
import gapscope.parsers.chrome.parallel.fork as cp
import gapscope.parsers.chrome.loader as L
cp.MIN_BYTES = 0
cp.enabled = lambda size, held=False: True
cp.processes = lambda: 3
cp.CHUNK_BYTES = 4096
L.SRC_LINE_LIMIT_BYTES = 0  # as a file over 8 MB: no line per event, starts found on demand
from gapscope.parsers import load
"""


def _events(n: int, with_dur=lambda i: True) -> list[dict]:
    ev = [{"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}}]
    for i in range(n):
        e = {"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": i * 10}
        if with_dur(i):
            e["dur"] = 5
        e["args"] = {"correlation": i, "device": 0, "stream": 7}
        ev.append(e)
    return ev


def _run(tmp_path, body: str, trace: dict) -> subprocess.CompletedProcess:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace, indent=1))
    code = _FORCE + f"P = {str(path)!r}\n" + textwrap.dedent(body)
    env = dict(os.environ, GAPSCOPE_NO_CACHE="1", PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)


def test_file_cut_short_during_the_first_args_scan_does_not_kill_the_process(tmp_path):
    """The first ``args_of`` scans the whole map for the events' starts when the load
    did not find them (the children's scanners send them now: forgotten here, as
    without the C scanner): a file cut short meanwhile (a profiler rewriting it with
    "w") gave SIGBUS in this process."""
    got = _run(
        tmp_path,
        """
        tr = load(P)
        text = tr._args_loader.inner.text if hasattr(tr._args_loader, "inner") else tr._args_loader.text
        text.starts = text.ends = None
        import gapscope.parsers.chrome.lazy_args as la
        real = la.key_positions
        def cutting(*a, **k):
            os.truncate(P, 4096)
            return real(*a, **k)
        la.key_positions = cutting
        print("ARGS", tr.args_of(len(tr) // 2))
        """,
        {"traceEvents": _events(5000)},
    )
    assert got.returncode == 0, got.stderr[-2000:]
    assert "ARGS {}" in got.stdout


def test_file_cut_short_before_an_args_read_at_known_starts_gives_no_args(tmp_path):
    """With the events' starts known from the load, an args read after the file was
    cut short reads nothing from the map: ``{}``, the process alive."""
    got = _run(
        tmp_path,
        """
        tr = load(P)
        text = tr._args_loader.inner.text if hasattr(tr._args_loader, "inner") else tr._args_loader.text
        print("KNOWN", text.starts is not None)
        os.truncate(P, 4096)
        print("ARGS", tr.args_of(len(tr) // 2))
        """,
        {"traceEvents": _events(5000)},
    )
    assert got.returncode == 0, got.stderr[-2000:]
    assert "KNOWN True" in got.stdout and "ARGS {}" in got.stdout


def test_file_cut_short_after_the_children_does_not_kill_the_load(tmp_path):
    """The warnings' lines are read from the map after the children answer: a file cut
    short just then gave SIGBUS in this process. Now the load ends, lines unknown."""
    got = _run(
        tmp_path,
        """
        real = cp.decode_file
        def cut_after(*a, **k):
            out = real(*a, **k)
            os.truncate(P, 0)
            return out
        cp.decode_file = cut_after
        tr = load(P)
        print("N", len(tr), [w.line for w in tr.warnings])
        """,
        {"traceEvents": _events(5000, with_dur=lambda i: i % 2 == 0)},
    )
    assert got.returncode == 0, got.stderr[-2000:]
    assert "N 5000 [None]" in got.stdout


def test_mapped_text_reads_of_a_cut_file_are_short_not_fatal(tmp_path):
    got = _run(
        tmp_path,
        """
        import mmap
        from gapscope.parsers.json.mapped import MappedText
        fd = os.open(P, os.O_RDONLY)
        m = MappedText(fd, 0, access=mmap.ACCESS_READ)
        n = len(m)
        whole = m[0:n]
        assert m.count(b"\\n") == whole.count(b"\\n") and m[5] == whole[5]
        os.truncate(P, 100)
        print("LEN", len(m[0:n]), len(m[n - 10 : n]), m.count(b"\\n"), m.unchanged())
        """,
        {"traceEvents": _events(2000)},
    )
    assert got.returncode == 0, got.stderr[-2000:]
    assert "LEN 100 0" in got.stdout and got.stdout.strip().endswith("False")


def test_no_descriptor_left_for_the_answer_falls_back_not_fails(tmp_path):
    """With the last descriptors taken by the children's pipes, receiving their
    answers raised OSError (EMFILE from the epoll selector): the load failed with an
    internal error instead of decoding the file in one piece."""
    got = _run(
        tmp_path,
        """
        import gapscope.parsers.nsys.files, gapscope.parsers.chrome.loader, gapscope.parsers.cache.store, ctypes, tempfile
        from gapscope.parsers.errors import TraceFormatError
        for free in range(1, 14):
            held = []
            try:
                while True:
                    held.append(os.open(os.devnull, os.O_RDONLY))
            except OSError:
                pass
            for _ in range(free):
                os.close(held.pop())
            try:
                tr = load(P)
                out = f"ok {len(tr)}"
            except TraceFormatError as exc:
                out = "refused " + str(exc)[:80]
            except OSError as exc:
                out = f"OSError {exc}"
            for fd in held:
                os.close(fd)
            print(free, out)
        """,
        {"traceEvents": _events(3000)},
    )
    assert got.returncode == 0, got.stderr[-2000:]
    assert "OSError" not in got.stdout, got.stdout
    assert got.stdout.count("ok 3000") >= 10, got.stdout


def _doc(events: list[dict]) -> bytes:
    return json.dumps({"traceEvents": events}).encode()


def test_cuts_planned_past_the_last_boundary_keep_the_parts():
    """Targets inside the last element (a part's share smaller than it) made
    ``find_cuts`` give up: the whole file was decoded in one piece."""
    data = _doc(_events(50))
    planned = cut.find_cuts(data, 0, False, len(data))  # a target every byte
    assert planned is not None
    begin, end, cuts, _ = planned
    assert len(cuts) == 50  # one cut at every element boundary
    assert all(data[b : b + 1] == b"}" and data[c : c + 1] == b"," for b, c in cuts)


def test_an_element_longer_than_the_window_is_skipped_not_fatal(monkeypatch):
    events = _events(40)
    events[20]["args"]["blob"] = "x" * 5000
    data = _doc(events)
    monkeypatch.setattr(cut, "BOUNDARY_WINDOW_BYTES", 1000)
    planned = cut.find_cuts(data, 0, False, 64)
    assert planned is not None
    assert len(planned[2]) > 10


@pytest.mark.parametrize("chunk", [1, 64])
def test_tiny_parts_still_decode_in_parts(tmp_path, monkeypatch, spy, chunk):
    path = tmp_path / "t.json"
    path.write_bytes(_doc(_events(300)))
    monkeypatch.setattr(cp, "CHUNK_BYTES", chunk)
    parts = load(path)
    assert spy == [True]
    with monkeypatch.context() as m:
        m.setattr(cp, "enabled", lambda size, held=False: False)
        whole = load(path)
    assert_same(parts, whole)
