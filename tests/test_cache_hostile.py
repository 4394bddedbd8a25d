"""The trace cache against what another process can put in its place (issue 42, the
cache attacks): only regular files are opened, never waited on, and a cached trace
does not depend on its entry file staying whole.

- a FIFO, a directory or a symbolic link where an entry should be: a fresh load,
  never a hang (a FIFO blocked the load in ``openat`` on 42d559e);
- the entry truncated while a cached trace is in use: its arrays still read (on
  42d559e they were a map of the file: the reader died of SIGBUS, exit 135);
- the entry cut between its header and its data being read: a fresh load.

Each case runs in a child process with a timeout, so a hang or a signal is a failed
test, not a stuck or killed suite.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gapscope.parsers.cache import layout
from gapscope.parsers.cache.key import NotRegular, key_of, open_regular
from tests.conftest import ROOT

#: The child: load the trace twice (the second a hit), damage the entry as the
#: argument says, then use the trace and load again; prints what it saw as JSON.
_CHILD = textwrap.dedent(
    r"""
    import json, os, sys
    from pathlib import Path
    from gapscope.parsers import detect, load
    from gapscope.parsers.cache import store
    fresh = []
    real = detect._load_fresh
    detect._load_fresh = lambda p, *a, **k: (fresh.append(p), real(p, *a, **k))[1]
    path, how = sys.argv[1], sys.argv[2]
    load(path)
    store.wait_for_writes()
    (entry,) = sorted(Path(os.environ["GAPSCOPE_CACHE_DIR"], "traces").glob("*.trace"))
    first = load(path)  # a hit: its arrays come from the entry
    hit = len(fresh) == 1
    if how == "truncate-in-use":
        os.truncate(entry, 0)
        total = int(sum(int(getattr(first, f).sum()) for f in ("start_ns", "dur_ns", "lane", "name_id")))
        print(json.dumps({"hit": hit, "total": total, "args": first.args_of(len(first) - 1)}))
        raise SystemExit(0)
    entry.unlink()
    if how == "fifo":
        os.mkfifo(entry)
    elif how == "directory":
        entry.mkdir()
    elif how == "symlink":
        os.symlink(sys.argv[3], entry)
    again = load(path)
    print(json.dumps({"hit": hit, "fresh_after": len(fresh), "events": len(again), "names": list(again.names)}))
    """
)


def _trace(tmp_path: Path) -> Path:
    ev = [
        {"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": 10 * i, "dur": 3, "args": {"n": i}}
        for i in range(50)
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    return path


def _child(tmp_path: Path, how: str, *extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "GAPSCOPE_NO_CACHE"}
    env["GAPSCOPE_CACHE_DIR"] = str(tmp_path / "cache")
    env["GAPSCOPE_CACHE_MIN_BYTES"] = "0"
    try:
        return subprocess.run(
            [sys.executable, "-c", _CHILD, str(_trace(tmp_path)), how, *extra],
            capture_output=True,
            text=True,
            cwd=str(ROOT),
            env=env,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the load hung with a {how} in place of the cache entry")


@pytest.mark.parametrize("how", ["fifo", "directory", "symlink"])
def test_something_else_in_place_of_an_entry_gives_a_fresh_load(tmp_path, how):
    target = tmp_path / "elsewhere.fifo"  # a link is not followed: to a FIFO, it would block
    os.mkfifo(target)
    cp = _child(tmp_path, how, str(target))
    assert cp.returncode == 0, cp.stderr[-2000:]
    got = json.loads(cp.stdout.strip().splitlines()[-1])
    assert got["hit"] is True
    assert got["fresh_after"] == 2  # the third load was fresh: the FIFO was not opened
    assert got["events"] == 50 and got["names"][:2] == ["k0", "k1"]


def test_entry_truncated_under_a_cached_trace_in_use(tmp_path):
    cp = _child(tmp_path, "truncate-in-use")
    assert cp.returncode != -signal.SIGBUS, "killed by SIGBUS: the trace was a map of its entry"
    assert cp.returncode == 0, cp.stderr[-2000:]
    got = json.loads(cp.stdout.strip().splitlines()[-1])
    # start_ns 10_000 * i, dur 3_000, one lane (0), names 0..49, by hand:
    want = sum(10_000 * i for i in range(50)) + 50 * 3_000 + 0 + sum(range(50))
    assert got == {"hit": True, "total": want, "args": {"n": 49}}


def test_entry_cut_while_read_is_a_bad_entry(tmp_path, monkeypatch):
    """The file ends before its data does once the size was checked: a short read."""
    from gapscope.parsers.cache import store

    path = _trace(tmp_path)
    monkeypatch.delenv("GAPSCOPE_NO_CACHE", raising=False)
    monkeypatch.setenv("GAPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GAPSCOPE_CACHE_MIN_BYTES", "0")
    from gapscope.parsers import load

    load(path)
    store.wait_for_writes()
    (entry,) = sorted((tmp_path / "cache" / "traces").glob("*.trace"))
    key = key_of(str(path))
    assert key is not None
    real = os.preadv

    def cut(fd, buffers, offset):  # the entry is truncated just before the data is read
        os.truncate(entry, offset)
        return real(fd, buffers, offset)

    monkeypatch.setattr(os, "preadv", cut)
    with pytest.raises(layout.BadEntry, match="cut short"):
        layout.read_entry(entry, key, store.build_id())


def test_open_regular_refuses_a_fifo_without_waiting(tmp_path):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    with pytest.raises(NotRegular):
        open_regular(fifo)
    assert key_of(str(fifo)) is None
    link = tmp_path / "l"
    link.symlink_to(tmp_path)
    with pytest.raises(NotRegular):
        open_regular(link)  # a directory, followed
    with pytest.raises(OSError):
        open_regular(link, follow=False)
