"""``gapscope FILE`` in a subprocess: bad input is refused before the full-screen UI
starts, with the one-line form of ``gapscope report`` and no terminal escape codes."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO), TERM="xterm-256color")
    return subprocess.run(
        [sys.executable, "-m", "gapscope", *args],
        capture_output=True,
        env=env,
        timeout=60,
        stdin=subprocess.DEVNULL,
        cwd=REPO,
    )


def _check(p: subprocess.CompletedProcess, expect_err: str) -> None:
    assert p.returncode == 2
    assert p.stdout == b""
    assert b"\x1b" not in p.stderr
    assert p.stderr.decode() == expect_err + "\n"


@pytest.mark.parametrize("case", ["markdown", "missing", "directory", "binary", "empty", "bad_gzip"])
def test_bad_file_refused_before_the_ui(tmp_path, case):
    if case == "markdown":
        f = tmp_path / "notes.md"
        f.write_text("# Title\n\n**Why was the GPU idle?**\n")
        p = _run(str(f))
        assert p.returncode == 2 and p.stdout == b"" and b"\x1b" not in p.stderr
        line = p.stderr.decode()
        assert line.startswith(f"gapscope: error: {f}:3:1: not a timeline: line starts with '**Why was the GPU id")
        assert line.endswith("see docs/ascii-timelines.md)\n") and line.count("\n") == 1
        return
    elif case == "missing":
        f = tmp_path / "nonexistent.json"
        expect = f"{f}: cannot read: No such file or directory"
    elif case == "directory":
        f = tmp_path
        expect = f"{f}: is a directory, not a trace file (pass a .json, .json.gz or .txt file)"
    elif case == "binary":
        f = tmp_path / "x.bin"
        f.write_bytes(b"NSYS\x00\x01\x02")
        expect = (
            f"{f}:1:1: binary file, not a trace (expected Chrome trace JSON (.json/.json.gz), an ASCII "
            "timeline or an Nsight Systems export (.sqlite, .nsys-rep))"
        )
    elif case == "empty":
        f = tmp_path / "empty.json"
        f.write_bytes(b"  \n")
        expect = f"{f}:1:1: file is empty (expected Chrome trace JSON or an ASCII timeline)"
    else:
        f = tmp_path / "cut.json.gz"
        f.write_bytes(b"\x1f\x8b\x08\x00garbage-not-deflate")
        p = _run(str(f))
        assert p.returncode == 2 and p.stdout == b"" and b"\x1b" not in p.stderr
        assert p.stderr.decode().startswith(f"gapscope: error: {f}: corrupt gzip data (")
        return
    _check(_run(str(f)), "gapscope: error: " + expect)


def test_viewer_and_report_print_the_same_line(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("hello\n")
    view, report = _run(str(f)), _run("report", str(f))
    assert view.returncode == report.returncode == 2
    assert view.stderr == report.stderr and view.stderr.startswith(b"gapscope: error: ")


def test_sniff_reads_only_the_head(tmp_path):
    """A big gzip JSON whose head is fine passes the sniff (its body is not read)."""
    from gapscope.parsers.detect import SNIFF_BYTES, sniff

    body = b'{"traceEvents": [' + b'{"ph": "X"}, ' * (SNIFF_BYTES // 4) + b"BROKEN"
    f = tmp_path / "big.json.gz"
    f.write_bytes(gzip.compress(body))
    assert sniff(f) == "chrome"
    t = tmp_path / "art.txt"
    t.write_text("# title\n" + "#\n" * (SNIFF_BYTES // 2) + "GPU: [== k 4 ms ==]\n")
    assert sniff(t) == "ascii"


def test_load_error_after_the_ui_closes(tmp_path):
    """A file whose head looks like a trace starts the UI (in a pseudo-terminal); its
    load error is printed in the same one-line form once the UI has left the screen."""
    pty = pytest.importorskip("pty")
    import fcntl
    import select
    import struct
    import termios
    import time

    f = tmp_path / "no_events.json"
    f.write_text('{"traceEvents": 5}')
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    env = dict(os.environ, PYTHONPATH=str(REPO), TERM="xterm-256color")
    p = subprocess.Popen(
        [sys.executable, "-m", "gapscope", str(f)], stdin=slave, stdout=slave, stderr=subprocess.PIPE, env=env, cwd=REPO
    )
    os.close(slave)
    t0 = time.monotonic()
    try:
        while p.poll() is None and time.monotonic() - t0 < 60:
            if select.select([master], [], [], 0.1)[0]:
                try:
                    os.read(master, 65536)
                except OSError:
                    break
        rc = p.wait(timeout=10)
        err = p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
        os.close(master)
        p.stderr.close()
    assert rc == 2
    # Textual draws on stderr; the error line comes after it left the alternate screen
    ui, _, tail = err.rpartition(b"\x1b[?1049l")
    assert b"\x1b[?1049h" in ui
    line = tail.rsplit(b"\n", 2)[-2].split(b"\x1b[?1006l")[-1].decode()
    assert line == (
        f"gapscope: error: {f}:1:1: JSON object without a traceEvents array (not a Chrome Trace Event "
        'Format file: expected {"traceEvents": [...]} or a JSON array of events)'
    )
