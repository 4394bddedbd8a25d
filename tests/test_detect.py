"""File-level hardening of ``gapscope.parsers.load`` / ``gapscope.parsers.detect.sniff``: special files,
gzip bombs and gzip cut inside its header give one clear ``TraceFormatError``, fast."""

from __future__ import annotations

import gzip
import os
import zlib

import numpy as np
import pytest

from gapscope.parsers import TraceFormatError, load
from gapscope.parsers.detect import sniff
from tests.conftest import CORPUS, require

TRACE = b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2}]}'


@pytest.mark.parametrize("reader", [load, sniff])
def test_fifo_is_refused_without_blocking(tmp_path, reader):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)  # opening it for reading would block forever with no writer
    with pytest.raises(TraceFormatError, match="not a regular file"):
        reader(fifo)


@pytest.mark.parametrize("reader", [load, sniff])
def test_character_device_is_refused(reader):
    with pytest.raises(TraceFormatError, match="not a regular file"):
        reader("/dev/zero")


def test_missing_file_names_the_path(tmp_path):
    with pytest.raises(TraceFormatError, match="No such file") as err:
        load(tmp_path / "nope.json")
    assert str(tmp_path / "nope.json") in str(err.value)


def test_gzip_bomb_is_refused_at_the_limit(tmp_path, monkeypatch):
    # 4 MiB of spaces inside a JSON array compresses ~1000x; with the limit set to 1 MiB
    # the loader must stop at the limit instead of inflating all of it.
    monkeypatch.setenv("GAPSCOPE_MAX_TRACE_BYTES", str(1 << 20))
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b"[" + b" " * (4 << 20) + b"]"))
    with pytest.raises(
        TraceFormatError, match="expands past .* limit set by GAPSCOPE_MAX_TRACE_BYTES of 1,048,576 bytes"
    ):
        load(bomb)


def test_default_limit_admits_real_ratios(tmp_path):
    # A real trace inflates far less than MAX_INFLATE_RATIO: it loads with the default limit.
    path = tmp_path / "ok.json.gz"
    path.write_bytes(gzip.compress(TRACE))
    assert len(load(path)) == 1


@pytest.mark.parametrize("cut", [2, 3, 10, 11])
def test_gzip_cut_inside_its_header(tmp_path, cut):
    path = tmp_path / "cut.json.gz"
    path.write_bytes(gzip.compress(TRACE)[:cut])
    with pytest.raises(TraceFormatError) as err:
        load(path)
    assert "empty" not in str(err.value)
    assert "gzip" in str(err.value)


def test_multi_member_still_whole(tmp_path):
    half = len(TRACE) // 2
    path = tmp_path / "multi.json.gz"
    path.write_bytes(gzip.compress(TRACE[:half]) + gzip.compress(TRACE[half:]))
    assert len(load(path)) == 1
    assert zlib.decompress(gzip.compress(TRACE), 31) == TRACE


@pytest.mark.parametrize(
    "text, message",
    [
        (
            '{"traceEvents":[{"ph":"X","pid":{},"tid":1,"ts":1,"dur":2,"name":"a"}]}',
            ":1:17: unusable event (field pid: expected a number, a string or null, got an object); no usable trace events",
        ),
        ("[project]\nname = 'x'\n", ":1:2: not JSON: an array starting with 'project]'"),
        ("null", ":1:1: a JSON null, not a trace"),
        ('"str"', ":1:1: a JSON string, not a trace"),
        ("  -4.5e3 ", ":1:1: a JSON number, not a trace"),
    ],
)
def test_non_trace_json_gets_a_plain_message(tmp_path, text, message):
    p = tmp_path / "x.json"
    p.write_text(text)
    with pytest.raises(TraceFormatError) as exc:
        load(p)
    assert f"{p}{message}" in str(exc.value)
    assert "Expected `" not in str(exc.value)


def test_rocprof_json_is_named(corpus):
    with pytest.raises(TraceFormatError) as exc:
        load(corpus / "tracelens" / "rocprof" / "908_results.json.gz")
    assert (
        ":1:1: a rocprofv3 (rocprofiler-sdk) JSON file, not a Chrome trace (gapscope reads Chrome-trace JSON; "
        "on ROCm, torch.profiler writes one)" in str(exc.value)
    )


def test_a_json_text_may_start_with_many_blanks(tmp_path):
    """Found by the second attack round: 4096 bytes of leading whitespace read as an
    empty file."""
    p = tmp_path / "ws.json"
    p.write_bytes(b" \n" * 5000 + b'{"traceEvents": [{"ph": "X", "name": "k", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]}')
    tr = load(p)
    assert len(tr) == 1 and tr.names[tr.name_id[0]] == "k"
    blank = tmp_path / "blank.json"
    blank.write_bytes(b" \n" * 5000)
    with pytest.raises(TraceFormatError, match="file is empty"):
        load(blank)


def test_isal_and_zlib_inflate_the_same(tmp_path, monkeypatch):
    """ISA-L inflates when installed (faster on large traces); zlib, the fallback where
    it is missing, gives the same text, members and a cut-off member included."""
    import zlib

    import gapscope.parsers.detect as detect

    pytest.importorskip("isal")
    assert detect._inflate.__name__.endswith("isal_zlib")
    text = b'{"traceEvents": [' + b",".join(b'{"ph": "X", "ts": %d, "dur": 1}' % i for i in range(5000)) + b"]}"
    blob = gzip.compress(text[:20000]) + b"\0" * 7 + gzip.compress(text[20000:])
    for name, data in (("whole.json.gz", blob), ("cut.json.gz", blob[: len(blob) - 50])):
        path = tmp_path / name
        path.write_bytes(data)
        fast = detect.read_bytes(path)
        with monkeypatch.context() as m:
            m.setattr(detect, "_inflate", zlib)
            slow = detect.read_bytes(path)
        assert bytes(fast) == bytes(slow)
        assert (bytes(fast) == text) == (name == "whole.json.gz")


def test_a_load_begun_early_gives_what_load_gives(tmp_path):
    """``EarlyLoad``, a load begun in a thread: the trace ``load`` gives, its error, or a plain load of another path."""
    from gapscope.parsers.preview import EarlyLoad

    good = require(CORPUS / "kineto" / "before_fix_trace.json")
    early = EarlyLoad(good)
    assert early._thread.name == "gapscope-early-load"
    a, b = early(str(good)), load(good)
    assert len(a) == len(b) and a.names == b.names and np.array_equal(a.start_ns, b.start_ns)
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": 5}')
    with pytest.raises(TraceFormatError) as first:
        EarlyLoad(bad)(bad)
    with pytest.raises(TraceFormatError) as second:
        load(bad)
    assert str(first.value) == str(second.value)
    assert len(EarlyLoad(bad)(good)) == len(b)  # another path: loaded there and then


def test_inflating_to_a_file_reads_the_gzip_in_steps_not_the_whole_limit_at_once(tmp_path, monkeypatch):
    """``inflate_to_file`` read the compressed file with ``read(limit + 1)``, which asks
    for the whole limit at once (8 GB by default: a ``MemoryError`` under ``ulimit -v``);
    with a limit of 2**62 bytes such a read cannot even be allocated. It reads in steps
    now, and the inflated text is the file's."""
    from gapscope.parsers import detect

    monkeypatch.setenv("GAPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    text = b'{"traceEvents": []}' * 1000
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(text))
    fd = detect.inflate_to_file(str(path), 1 << 62, True)
    assert fd is not None
    try:
        assert os.pread(fd, len(text) + 1, 0) == text
    finally:
        os.close(fd)


@pytest.mark.parametrize("size", [2_000, 3_000_000])
def test_a_gzip_trailer_that_does_not_match_its_text_is_refused_at_every_size(tmp_path, size):
    """Intact deflate data with a wrong CRC-32 in the trailer: a small file was refused
    ("incorrect data check") but a large one lost the last inflated piece and loaded
    with a cut-off-event warning. Both are refused now, naming the trailer."""
    text = (
        b'{"traceEvents": ['
        + b",".join(
            b'{"ph": "X", "name": "k%d", "ts": %d, "dur": 1, "pid": 1, "tid": 1}' % (k, k) for k in range(size // 60)
        )
        + b"]}"
    )
    blob = gzip.compress(text, 1)
    path = tmp_path / "t.json.gz"
    path.write_bytes(blob[:-8] + bytes(4) + blob[-4:])
    with pytest.raises(TraceFormatError, match="checksum or size in its gzip trailer"):
        load(path)


def test_a_nul_byte_in_gzip_text_is_refused_as_in_a_plain_file(tmp_path, monkeypatch):
    """A NUL inside a name: the plain file was refused as binary data, the same bytes
    gzipped loaded with an "event skipped" warning (an attacker's find). Both are
    refused now, naming the line; inflating to a file gives up on it (the in-memory
    read says where)."""
    from gapscope.parsers import detect

    monkeypatch.setenv("GAPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    text = b'{"traceEvents": [{"ph": "X", "name": "a\x00b", "ts": 1, "dur": 1, "pid": 1, "tid": 1}]}'
    plain, packed = tmp_path / "t.json", tmp_path / "t.json.gz"
    plain.write_bytes(text)
    packed.write_bytes(gzip.compress(text))
    for path in (plain, packed):
        with pytest.raises(TraceFormatError, match=r"binary data \(a NUL byte at byte 39\)") as err:
            load(path)
        assert err.value.line == 1
    assert detect.inflate_to_file(str(packed), 1 << 30, True) is None
