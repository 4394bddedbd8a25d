"""Decoding a ``.json.gz`` while it is inflated (``chrome_parallel.start_growing``) gives
exactly the one-piece result.

The children are forked once the head of the text is written and decode each part as
soon as the inflating has passed it. Every corpus ``.gz`` and generated texts are
loaded so (with small parts and small inflate steps, so that the children really wait
on the text) and compared field by field with a load in one piece; a spy says which
way each load went, so a silent fallback cannot pass for the growing path. The cases
built against it (a size field that lies, a cut inside a string, damage, a bomb, a
child that dies) must fall back, leave no child behind, and still agree.

The sweep over every corpus ``.gz`` (``test_corpus_gzip_decoded_while_inflating_equals_one_piece``)
runs in full under ``CI`` or with ``GAPSCOPE_FULL_CORPUS=1``; otherwise on ``SAMPLE``,
seven files that reach each of its three outcomes: texts shorter than a head (inflated
first: the 0.2 KB and 1.6 KB HTA files, ``catapult/simple_trace_gz.gz`` without
``.json`` in its name), Fuchsia's events array ended before the last cut (refused once
inflated), and three decoded while inflating (two HTA ranks of 120-180 KB, a TraceLens
H100 file of 430 KB); the other cases are skipped with that reason.
"""

from __future__ import annotations

import gzip
import json
import os
import time
import types
import zlib

import pytest

import gapscope.parsers.chrome.parallel.fork as cp
import gapscope.parsers.detect as detect
from gapscope.parsers import load
from gapscope.parsers.chrome import decode as chrome_decode
from gapscope.parsers.errors import TraceFormatError
from tests.conftest import CORPUS, require, sweep
from tests.test_corpus import REFUSED, TRACES
from tests.test_load_parallel import _kineto, _reaped, _write, assert_same, force_parts

GZ_TRACES = [t for t in TRACES if t.endswith(".gz") and t not in REFUSED]
#: The files the corpus sweep reads when the full corpus is not asked for (see above).
SAMPLE = (
    "hta/rank-70.Mar_25_20_48_12.2861.pt.trace.json.gz",
    "hta/inference_rank_1.json.gz",
    "catapult/simple_trace_gz.gz",
    "catapult/fuchsia_trace.json.gz",
    "hta/sampled_rank-0.json.gz",
    "hta/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    "tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
)


@pytest.fixture
def grow(monkeypatch, tmp_path):
    """Parts forced on as in ``test_load_parallel``, the growing path for any size, and
    a head and inflate steps small enough for generated texts: a list of
    (kind of parts, whether their decode gave a trace) per ``decode_file``."""
    force_parts(monkeypatch, tmp_path)
    # a child late on a loaded machine falls back (same trace) and fails the path's
    # assertion (a newcomer's run at load average 3.5): lateness has tests of its own
    monkeypatch.setattr(cp, "MIN_WAIT_S", 600.0)
    monkeypatch.setattr(cp, "GROWING_MIN_BYTES", 0)
    monkeypatch.setattr(cp, "GROWING_HEAD_BYTES", chrome_decode.EPOCH_SAMPLE_BYTES + 4096)
    monkeypatch.setattr(detect, "INFLATE_OUT_BYTES", 32 << 10)
    calls: list[tuple[str, bool]] = []
    real = cp.decode_file

    def spying(parts, decoders):
        got = real(parts, decoders)
        calls.append((type(parts).__name__, got is not None))
        return got

    monkeypatch.setattr(cp, "decode_file", spying)
    return calls


def _whole(path, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(cp, "enabled", lambda size, held=False: False)
        return load(path)


def _gz(tmp_path, obj, name="t.json.gz", level=1) -> str:
    return _write(tmp_path, gzip.compress(json.dumps(obj, indent=1).encode(), compresslevel=level), name)


@pytest.mark.parametrize("rel", sweep(GZ_TRACES, SAMPLE))
def test_corpus_gzip_decoded_while_inflating_equals_one_piece(rel, monkeypatch, grow):
    path = require(require(CORPUS) / rel)
    with gzip.open(path) as fh:
        text_bytes = len(fh.read())
    got = load(path)
    assert_same(got, _whole(path, monkeypatch))
    if text_bytes < cp.GROWING_HEAD_BYTES:  # the whole text is in before a head's worth: inflated first
        assert [kind for kind, _ in grow] == ["FileParts"]
    elif rel == "catapult/fuchsia_trace.json.gz":
        # its ``systemTraceEvents`` follow the events array, which ends before the last
        # cut planned: refused once inflated (``finish``), and the file's children decode it
        assert grow == [("FileParts", True)]
    else:
        assert grow[0] == ("GrowingParts", True)


def test_the_children_decode_while_the_text_is_still_inflating(tmp_path, monkeypatch, grow):
    """The progress the children report (bytes of their parts decoded) is above 0
    before the last piece of text is written: decoding overlaps inflating."""
    path = _gz(tmp_path, _kineto(6000))
    seen: list[float] = []
    real = chrome_decode.Inflating.__call__

    def slow(self, fd, written, consumed, compressed):
        real(self, fd, written, consumed, compressed)
        if self.parts is not None:
            time.sleep(0.002)  # an inflater slower than the children: they catch up and wait
            seen.append(cp.progress() or 0.0)

    monkeypatch.setattr(chrome_decode.Inflating, "__call__", slow)
    got = load(path)
    assert grow == [("GrowingParts", True)]
    assert len(seen) > 10 and 0 < seen[-2] < 1  # decoded some, not all, before the end
    assert_same(got, _whole(path, monkeypatch))
    assert os.listdir(tmp_path / "cache" / "inflated") == []


def test_epoch_timestamps_and_the_array_form_grow(tmp_path, monkeypatch, grow):
    """``ts`` kept as text is decided on the head the children read (the loader's
    sample fits in it), and the array form has its end found at the text's end."""
    assert cp.GROWING_HEAD_BYTES - 4096 >= chrome_decode.EPOCH_SAMPLE_BYTES  # the real head holds the sample
    obj = _kineto(5000)
    for e in obj["traceEvents"]:
        if "ts" in e:
            e["ts"] = 1_700_000_000_000_000.125 + e["ts"]
    for i, text in enumerate((obj, obj["traceEvents"])):
        path = _gz(tmp_path, text, f"t{i}.json.gz")
        got = load(path)
        assert grow[-1] == ("GrowingParts", True)
        assert_same(got, _whole(path, monkeypatch))
    assert len(got) == 2 * 5000 + 1


def test_a_size_field_far_from_the_text_refits_the_children_to_the_whole_file(tmp_path, monkeypatch, grow, forks):
    """A gzip file of two members gives the last member's size in its trailer: the
    children planned for a text a fraction of its size are killed once the text is
    complete, and the file's own children decode it (``start_file``)."""
    raw = json.dumps(_kineto(6000), indent=1).encode()
    path = _write(tmp_path, gzip.compress(raw[:-5000], 1) + gzip.compress(raw[-5000:], 1), "two.json.gz")
    got = load(path)
    assert grow == [("FileParts", True)]
    assert_same(got, _whole(path, monkeypatch))
    assert _reaped(forks)


def test_planned_size_adds_the_wraps_of_a_size_field_mod_2_32():
    assert chrome_decode.planned_size(300_000_000, 4 << 20, 400_000, 30_000_000) == 300_000_000
    big = 5_000_000_000  # a 5 GB text: its ISIZE field is 5e9 mod 2**32
    assert chrome_decode.planned_size(big % (1 << 32), 4 << 20, 450_000, 500_000_000) == big
    assert chrome_decode.planned_size(123, 10, 0, 0) == 123  # nothing read yet: the field as it is
    # a head of repeated events inflating 1000x suggests 30 GB; 64x its 30 MB bounds the plan
    assert chrome_decode.planned_size(290_000_000, 4 << 20, 4200, 30_000_000) == 290_000_000


def test_a_cut_inside_a_string_falls_back_to_the_same_trace(tmp_path, monkeypatch, grow):
    """Names full of element boundaries: wherever the growing plan's cuts fall, a
    part that does not decode sends None, and the trace is the one-piece one."""
    obj = _kineto(3000, name=lambda i: '}, {"ph": "X", "x": "' * 40 + str(i))
    path = _gz(tmp_path, obj)
    got = load(path)
    assert grow and grow[0][0] == "GrowingParts"
    assert_same(got, _whole(path, monkeypatch))


@pytest.mark.parametrize("damage", ["cut off", "bad member"])
def test_damaged_gzip_stops_the_children_and_reads_it_in_memory(damage, tmp_path, monkeypatch, grow, forks):
    """A member cut off, or a second member that does not inflate, is found after the
    children started: they are killed, and the text read in memory (where the
    recovery of a cut-off event is) gives the one-piece trace."""
    raw = json.dumps(_kineto(6000), indent=1).encode()
    blob = gzip.compress(raw, 1)
    blob = blob[:-4000] if damage == "cut off" else blob + b"\x1f\x8b\x08\x00" + os.urandom(64)
    path = _write(tmp_path, blob, "bad.json.gz")
    # the last 4 bytes are no size field now; as if they were the text's (else it is not believed)
    monkeypatch.setattr(detect, "_gzip_size_field", lambda p: len(raw))
    try:
        got = load(path)
    except TraceFormatError as exc:
        assert damage == "bad member" and "corrupt gzip" in str(exc)
    else:
        assert_same(got, _whole(path, monkeypatch))
    assert _reaped(forks) and forks  # children were forked, none is left
    assert os.listdir(tmp_path / "cache" / "inflated") == []


def test_a_limit_passed_while_inflating_is_refused_and_leaves_no_child(tmp_path, monkeypatch, grow, forks):
    path = _gz(tmp_path, _kineto(6000))
    monkeypatch.setenv("GAPSCOPE_MAX_TRACE_BYTES", str(1 << 20))
    monkeypatch.setattr(detect, "_is_large_gzip", lambda p, n: True)
    with pytest.raises(TraceFormatError, match="expands past"):
        load(path)
    assert _reaped(forks) and forks


def test_a_child_that_dies_falls_back_to_the_files_children(tmp_path, monkeypatch, grow, forks):
    def boom(*a, **k):
        raise MemoryError("simulated")

    monkeypatch.setattr(cp, "_growing_payload", boom)
    path = _gz(tmp_path, _kineto(6000))
    got = load(path)
    assert grow == [("GrowingParts", False), ("FileParts", True)]
    assert_same(got, _whole(path, monkeypatch))
    assert _reaped(forks)


def test_a_small_or_metadata_headed_text_does_not_grow(tmp_path, monkeypatch, grow):
    """Below ``GROWING_MIN_BYTES``, or with a head mostly of events this process decodes
    itself, the text is inflated first and the file's children decode it."""
    path = _gz(tmp_path, _kineto(6000))
    monkeypatch.setattr(cp, "GROWING_MIN_BYTES", 1 << 40)
    load(path)
    monkeypatch.setattr(cp, "GROWING_MIN_BYTES", 0)
    monkeypatch.setattr(cp, "METADATA_SHARE", 0.25)
    monkeypatch.setattr(cp, "SAMPLE_BYTES", 4096)
    meta = [{"ph": "M", "name": "thread_name", "pid": 9, "tid": t, "args": {"name": f"w{t}"}} for t in range(9000)]
    obj = _kineto(6000)
    load(_gz(tmp_path, {**obj, "traceEvents": meta + obj["traceEvents"]}, "meta.json.gz"))
    assert [kind for kind, _ in grow] == ["FileParts"]  # the metadata-headed one is not split at all


def test_growing_agree_checks_the_chain_of_cuts():
    parts = types.SimpleNamespace(children=[1, 2, 3])  # three children; agree reads no more of them
    a, b = (100, 101), (200, 201)
    good = [(0, False, 5, None, a, None), (0, False, 5, a, b, None), (0, False, 5, b, None, 300)]
    assert (
        cp.GrowingParts.agree(parts, good[:1])
        and cp.GrowingParts.agree(parts, good[:2])
        and cp.GrowingParts.agree(parts, good, complete=True)
    )
    assert not cp.GrowingParts.agree(parts, good[:2], complete=True)  # one child missing
    assert not cp.GrowingParts.agree(parts, [good[0], (0, False, 5, (100, 102), b, None)])  # a gap between the runs
    assert not cp.GrowingParts.agree(parts, [good[0], (0, True, 5, a, b, None)])  # another reading of ts
    assert not cp.GrowingParts.agree(
        parts, [good[0], good[1], (0, False, 5, b, None, 150)], complete=True
    )  # a cut past the end
    assert not cp.GrowingParts.agree(parts, [(0, False, 5, a, a, None)])  # the first child starts at a cut


def test_growing_runs_give_the_first_child_its_share_and_split_the_rest():
    assert cp.growing_runs(16, 2) == [(0, 8), (8, 16)]  # equal halves by default
    assert cp.growing_runs(16, 2, 0.7) == [(0, 11), (11, 16)]  # round(11.2)
    assert cp.growing_runs(12, 3, 0.5) == [(0, 6), (6, 9), (9, 12)]
    assert cp.growing_runs(2, 2, 0.99) == [(0, 1), (1, 2)]  # every child keeps a part
    assert cp.growing_runs(4, 2, 0.01) == [(0, 1), (1, 4)]  # and the first one too


def test_growing_runs_never_drop_a_part_nor_take_a_share_that_is_none():
    """One child takes every part whatever the share (it took the share's alone:
    ``growing_runs(4, 1, 0.5)`` was ``[(0, 2)]``, parts 2 and 3 decoded by no one);
    a share outside [0, 1] is a ValueError (NaN was one, infinity an OverflowError
    the loader does not catch)."""
    assert cp.growing_runs(4, 1, 0.5) == [(0, 4)]
    assert cp.growing_runs(3, 3, 0.0) == cp.growing_runs(3, 3, 1.0) == [(0, 1), (1, 2), (2, 3)]
    for share in (float("nan"), float("inf"), -0.5, 1.5):
        with pytest.raises(ValueError, match="first_share"):
            cp.growing_runs(9, 3, share)


def test_zlib_and_isal_inflate_alike_while_growing(tmp_path, monkeypatch, grow):
    """Without ISA-L (``isal`` missing), zlib inflates the text the children read."""
    monkeypatch.setattr(detect, "_inflate", zlib)
    path = _gz(tmp_path, _kineto(6000), level=6)
    got = load(path)
    assert grow == [("GrowingParts", True)]
    assert_same(got, _whole(path, monkeypatch))


def test_a_size_field_after_junk_is_not_believed(tmp_path, monkeypatch, grow):
    """Bytes after the gzip data make the last four bytes no size field: one that
    says the text is over ``PLAUSIBLE_INFLATE_RATIO`` times the file is not planned
    for: no children are forked while it inflates."""
    blob = gzip.compress(json.dumps(_kineto(6000), indent=1).encode(), 1) + b"\x00\x00\x00\x7f"  # 2.1 GB "size"
    path = _write(tmp_path, blob, "junk.json.gz")
    asked: list[int] = []
    real = chrome_decode.start_growing
    monkeypatch.setattr(
        chrome_decode, "start_growing", lambda fd, g, planned, p: asked.append(planned) or real(fd, g, planned, p)
    )
    got = load(path)
    assert asked == [] and grow == []  # no children planned on it; the junk then sends the text to memory
    assert_same(got, _whole(path, monkeypatch))


def test_keys_after_the_array_are_found_when_the_text_is_complete(tmp_path, monkeypatch, grow, forks):
    """Large keys after the events array (as Chrome's ``systemTraceEvents``) leave the
    last cuts planned past the array's end: ``finish`` finds the end from the tail and
    refuses the plan before the children decode on (they are killed), and the file's
    children decode the whole text."""
    obj = _kineto(3000)
    obj["systemTraceEvents"] = {"events": [{"ph": "k", "pid": i, "tid": i, "ts": i} for i in range(60000)]}
    path = _gz(tmp_path, obj)
    got = load(path)
    assert grow == [("FileParts", True)]
    assert_same(got, _whole(path, monkeypatch))
    assert _reaped(forks)


def test_a_text_longer_than_planned_is_cut_further_by_the_last_child(tmp_path, monkeypatch, grow):
    """Two members, the last 80 % of the text: the size field says 80 % of it, within
    ``GROWING_OVERRUN``. The last child cuts what is past the plan into parts as long
    as the others, instead of decoding it as one part of a fifth of the text."""
    import gapscope.parsers.chrome.parallel.transfer as tx

    raw = json.dumps(_kineto(6000), indent=1).encode()
    cut = len(raw) // 5
    path = _write(tmp_path, gzip.compress(raw[:cut], 1) + gzip.compress(raw[cut:], 1), "two.json.gz")
    lengths = tmp_path / "lengths"
    real = tx.read_part

    def spying(text, *a):  # in the children: each part's length, to a file
        with open(lengths, "a") as fh:
            fh.write(f"{len(text)}\n")
        return real(text, *a)

    monkeypatch.setattr(tx, "read_part", spying)
    got = load(path)
    assert grow == [("GrowingParts", True)]
    assert_same(got, _whole(path, monkeypatch))
    sizes = [int(x) for x in lengths.read_text().split()]
    assert len(raw) // 2 < sum(sizes) <= len(raw) + 2 * len(sizes)  # each part framed in 2 bytes of its own
    assert max(sizes) < 3 * cp.CHUNK_BYTES  # a part of about one step, not the fifth past the plan


def test_the_children_close_each_parts_map(tmp_path):
    """A child keeps no descriptor per part (``mmap`` holds its own): with 40 free
    descriptors, 300 parts per child still decode while growing."""
    import subprocess
    import sys

    path = _gz(tmp_path, _kineto(30000))
    script = f"""
import os, resource, sys
sys.path.insert(0, {str(os.getcwd())!r})
os.environ["GAPSCOPE_NO_CACHE"] = "1"
os.environ["GAPSCOPE_CACHE_DIR"] = {str(tmp_path / "cache")!r}
import gapscope.parsers.chrome.parallel.fork as cp, gapscope.parsers.detect as detect
from gapscope.parsers.chrome import decode as chrome_decode
from gapscope.parsers import load
cp.MIN_BYTES, cp.enabled, cp.processes, cp.CHUNK_BYTES = 0, (lambda s, held=False: True), (lambda: 2), 16 << 10
cp.METADATA_SHARE, cp.GROWING_MIN_BYTES, cp.GROWING_HEAD_BYTES = 2.0, 0, chrome_decode.EPOCH_SAMPLE_BYTES + 4096
detect.INFLATE_OUT_BYTES = 32 << 10
got = []
real = cp.decode_file
cp.decode_file = lambda parts, d: got.append((type(parts).__name__, real(parts, d) is not None)) or None
open_now = len(os.listdir("/proc/self/fd"))
resource.setrlimit(resource.RLIMIT_NOFILE, (open_now + 40, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
try:
    load({str(path)!r})
except Exception:
    pass
print(got[0])
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.stdout.strip().splitlines()[-1] == "('GrowingParts', True)", out.stderr[-2000:]
