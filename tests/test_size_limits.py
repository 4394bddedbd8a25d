"""Size limits checked while reading (issue 14): gzip bombs and huge or sparse files are
refused with one line naming the size found and the limit, early and in bounded memory.

Each case runs ``gapscope report`` in a child process so its peak RSS (``ru_maxrss`` of
the child) is measured; how early a bomb is refused is counted, not timed: the line
says how many bytes were inflated when it stopped, a bounded number far below what the
file expands to. The time these refusals take, against a report of the bundled sample,
is ``bench/size_limits.py``. The inputs are built here, cheaply: a bomb is one 64 MiB
gzip member repeated (gzip allows any number of members), a huge file is sparse
(``truncate``), so neither costs the disk what it claims.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from gapscope.parsers import TraceFormatError, detect, load
from gapscope.settings import parse_size

ROOT = Path(__file__).resolve().parents[1]
EVENT = b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2},'
MAX_RSS_BYTES = 500 << 20


def _gzip_member(payload: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return c.compress(payload) + c.flush()


def _bomb(path: Path, head: bytes, unit: bytes, inflated_bytes: int) -> None:
    """A gzip file of ``head`` then ``unit`` repeated to ``inflated_bytes``, as members."""
    block = unit * ((64 << 20) // len(unit))
    member = _gzip_member(block)
    with open(path, "wb") as fh:
        fh.write(_gzip_member(head))
        for _ in range(inflated_bytes // len(block)):
            fh.write(member)


def _report(path: Path, env_extra: dict | None = None) -> tuple[subprocess.CompletedProcess, float, int]:
    """Run ``gapscope report path`` in a child; (result, seconds, peak RSS bytes of it).
    The seconds are for ``bench/size_limits.py``: no test asserts them."""
    env = {**os.environ, **(env_extra or {})}
    # ru_maxrss of RUSAGE_CHILDREN is the largest child so far: measure in a fresh
    # interpreter that runs only this one child.
    probe = (
        "import resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "p = subprocess.run([sys.executable, '-m', 'gapscope', 'report', sys.argv[1]], capture_output=True)\n"
        "dt = time.perf_counter() - t\n"
        "sys.stdout.write(f'{p.returncode}\\n{dt}\\n{resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}\\n')\n"
        "sys.stdout.write(p.stderr.decode(errors='replace'))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, str(path)], cwd=ROOT, capture_output=True, text=True, env=env, timeout=120
    )
    rc, secs, rss_kib, *err = out.stdout.split("\n")
    return subprocess.CompletedProcess([], int(rc), "", "\n".join(err)), float(secs), int(rss_kib) * 1024


def _inflated_bytes(line: str) -> int:
    """The bytes inflated when a bomb was refused, as its line says them
    ("... expands 1,024x (134,217,728 bytes from ..." or "... expands past 209,716,224 bytes ...")."""
    m = re.search(r"expands (?:past )?(?:[\d,]+x \()?([\d,]+) bytes", line)
    assert m, line
    return int(m.group(1).replace(",", ""))


def _assert_refused(proc, path: Path, needle: str) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"gapscope: error: {path}"), lines[0]
    assert needle in lines[0], lines[0]
    assert "MemoryError" not in proc.stderr and "internal error" not in proc.stderr
    return lines[0]


@pytest.mark.parametrize("kind", ["events", "spaces"])
def test_20_gib_gzip_bomb_refused_fast_in_bounded_memory(tmp_path, kind):
    path = tmp_path / f"bomb-{kind}.json.gz"
    unit = EVENT if kind == "events" else b" " * 4096
    _bomb(path, b'{"traceEvents": [', unit, 20 << 30)
    proc, secs, rss = _report(path, {"GAPSCOPE_MAX_TRACE_BYTES": ""})
    line = _assert_refused(proc, path, "gzip data expands")
    assert "x (" in line and f"limit of {detect.MAX_INFLATE_RATIO}x" in line
    # refused at the first ratio check past RATIO_CHECK_BYTES: at most one more piece of
    # inflated output (INFLATE_OUT_BYTES) beyond it, not the 20 GiB the file holds
    inflated = _inflated_bytes(line)
    assert detect.RATIO_CHECK_BYTES < inflated <= detect.RATIO_CHECK_BYTES + detect.INFLATE_OUT_BYTES, line
    assert rss < MAX_RSS_BYTES, rss


def test_gzip_bomb_refused_at_a_set_limit_while_inflating(tmp_path):
    path = tmp_path / "bomb.json.gz"
    _bomb(path, b'{"traceEvents": [', EVENT, 20 << 30)
    proc, secs, rss = _report(path, {"GAPSCOPE_MAX_TRACE_BYTES": "200M"})
    line = _assert_refused(proc, path, "limit set by GAPSCOPE_MAX_TRACE_BYTES of 209,715,200 bytes")
    assert "expands past" in line
    inflated = _inflated_bytes(line)  # stopped at the limit, not at the file's 20 GiB
    assert 209_715_200 < inflated <= 209_715_200 + detect.INFLATE_OUT_BYTES, line
    assert rss < MAX_RSS_BYTES, rss


@pytest.mark.parametrize("head", [b"", b'{"traceEvents": [' + EVENT * 1000], ids=["zeros", "json-head"])
def test_10_gb_sparse_file_refused_fast_in_bounded_memory(tmp_path, head):
    path = tmp_path / "sparse.json"
    with open(path, "wb") as fh:
        fh.write(head)
        fh.truncate(10 * 10**9)
    for env in ({"GAPSCOPE_MAX_TRACE_BYTES": ""}, {"GAPSCOPE_MAX_TRACE_BYTES": "20G"}):
        proc, secs, rss = _report(path, env)
        line = _assert_refused(proc, path, "")
        assert ("file is 10,000,000,000 bytes" in line) or ("NUL" in line) or ("binary" in line), line
        assert rss < MAX_RSS_BYTES, (env, rss)


def test_file_over_a_set_limit_names_both_sizes(tmp_path, monkeypatch):
    path = tmp_path / "t.json"
    path.write_bytes(b'{"traceEvents": [' + EVENT * 100 + b"{}]}")
    monkeypatch.setenv("GAPSCOPE_MAX_TRACE_BYTES", "1K")
    with pytest.raises(
        TraceFormatError,
        match=r"file is [\d,]+ bytes, more than the limit set by "
        r"GAPSCOPE_MAX_TRACE_BYTES of 1,024 bytes",
    ):
        load(path)


def test_bad_limit_value_is_an_error_not_a_crash(tmp_path, monkeypatch):
    path = tmp_path / "t.json"
    path.write_bytes(b'{"traceEvents": []}')
    monkeypatch.setenv("GAPSCOPE_MAX_TRACE_BYTES", "lots")
    with pytest.raises(TraceFormatError, match="GAPSCOPE_MAX_TRACE_BYTES='lots' is not a size"):
        load(path)


def test_nul_after_the_head_is_refused_with_its_line(tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes(b'{"traceEvents": [\n' + EVENT + b"\n" + b"\x00" * 10)
    with pytest.raises(TraceFormatError, match="NUL byte") as err:
        load(path)
    assert err.value.line == 3


@pytest.mark.parametrize(
    "text,want",
    [("123", 123), ("64M", 64 << 20), ("2G", 2 << 30), ("1.5k", 1536), ("3GiB", 3 << 30), ("x", None), ("-1", None)],
)
def test_parse_size(text, want):
    assert parse_size(text) == want


def test_default_limit_follows_available_memory(monkeypatch):
    monkeypatch.setattr(detect, "_available_memory_bytes", lambda: 30 << 30)
    assert detect.default_limit() == 10 << 30
    monkeypatch.setattr(detect, "_available_memory_bytes", lambda: None)
    assert detect.default_limit() == detect.FALLBACK_LIMIT
    monkeypatch.setattr(detect, "_available_memory_bytes", lambda: 1 << 20)
    assert detect.default_limit() == detect.MIN_DEFAULT_LIMIT


def test_ordinary_gzip_multi_member_still_loads(tmp_path):
    path = tmp_path / "t.json.gz"
    events = b"".join(
        b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": %d, "dur": 2},' % (3 * i)
        for i in range(2000)
    )
    body = b'{"traceEvents": [' + events + b'{"ph": "M", "name": "process_name", "pid": 0, "args": {}}]}'
    path.write_bytes(_gzip_member(body[:5000]) + b"\x00" * 100 + _gzip_member(body[5000:]))
    assert len(load(path)) == 2000
