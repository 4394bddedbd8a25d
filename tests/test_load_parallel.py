"""Decoding in two parts (``gapscope.parsers.chrome.parallel.fork``) gives exactly the one-piece result.

Every corpus JSON file and a set of hand-made awkward texts are loaded twice, once
with the two-part decode forced on (``MIN_BYTES`` 0) and once with it off, and every
field of the two ``Trace`` objects is compared. A spy records whether the two-part
path really ran, so a silent fallback cannot make a comparison pass vacuously; the
cases built to defeat it (a cut inside a string or inside ``args``, a child that
crashes or hangs, v2 flows, truncation) must fall back and still agree.

The sweep over every corpus file (``test_corpus_two_parts_equal_one_piece`` and
``test_two_part_path_runs_on_every_corpus_file_of_100_events``) runs in full under
``CI`` or with ``GAPSCOPE_FULL_CORPUS=1``; otherwise on ``SAMPLE``, eleven files that
cover the shapes the splitter meets (Catapult text with B/E, async, counters and
nanosecond units; Perfetto's v2 flows; Kineto with and without gzip, NVIDIA and AMD;
a DLRM worker, the largest plain-JSON kind; a 0.2 KB gzip of no events), the other
cases skipped with that reason.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import signal
import time

import numpy as np
import pytest

import gapscope.parsers.chrome.parallel.fork as cp
import gapscope.parsers.chrome.parallel.transfer as tx
from gapscope.parsers import load
from gapscope.parsers.chrome.decode import load_chrome
from gapscope.parsers.json.mapped import file_stamp
from tests.conftest import CORPUS, FULL_CORPUS, SAMPLES, require, sweep
from tests.test_corpus import REFUSED, TRACES

#: The files the corpus sweeps read when the full corpus is not asked for (see above).
SAMPLE = (
    "catapult/simple_trace.json",
    "catapult/nanoseconds.json",
    "catapult/nestable_async.json",
    "catapult/instance_counters.json",
    "catapult/x_event_trace.json",
    "perfetto/flow_events_json_v2.json",
    "kineto/before_fix_trace.json",
    "hta/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    "hta/rank-70.Mar_25_20_48_12.2861.pt.trace.json.gz",
    "tracelens/mi300/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "param/dlrm_kineto/worker5_step_12.1694128201549.pt.trace.json",
)

_ARRAYS = (
    "start_ns",
    "dur_ns",
    "lane",
    "name_id",
    "kind",
    "correlation",
    "depth",
    "bytes",
    "copy_kind",
    "pageable",
    "value",
    "src_line",
    "external_id",
    "lane_offsets",
    "flow_src",
    "flow_dst",
)


def assert_same(a, b) -> None:
    """Every field of two traces is equal (arrays exactly, NaN equal to NaN)."""
    for f in _ARRAYS:
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype, f
        assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), f
    assert a.names == b.names
    assert a.lanes == b.lanes
    assert a.warnings == b.warnings
    assert a.extent_ns == b.extent_ns
    assert dataclasses.asdict(a.source) == dataclasses.asdict(b.source)
    for i in sorted({0, len(a) // 2, len(a) - 1}) if len(a) else []:
        assert a.args_of(i) == b.args_of(i)


def force_parts(monkeypatch, tmp_path) -> list[bool]:
    """Force the two-part decode and record what each attempt returned."""
    calls: list[bool] = []

    def spying(real):
        def wrapped(*args, **kwargs):
            got = real(*args, **kwargs)
            calls.append(got is not None)
            return got

        return wrapped

    monkeypatch.setenv("GAPSCOPE_CACHE_DIR", str(tmp_path / "cache"))  # where a .gz is inflated
    monkeypatch.setattr(cp, "MIN_BYTES", 0)
    monkeypatch.setattr(cp, "enabled", lambda size, held=False: True)
    monkeypatch.setattr(cp, "processes", lambda: 3)  # three children of a file...
    monkeypatch.setattr(cp, "CHUNK_BYTES", 16 << 10)  # ...each decoding several parts
    monkeypatch.setattr(cp, "METADATA_SHARE", 2.0)  # split even what mostly the parent would decode
    monkeypatch.setattr(cp, "decode_parts", spying(cp.decode_parts))
    monkeypatch.setattr(cp, "decode_file", spying(cp.decode_file))
    return calls


@pytest.fixture
def spy(monkeypatch, tmp_path):
    return force_parts(monkeypatch, tmp_path)


def _both(path, monkeypatch, spy):
    parts = load(path)
    with monkeypatch.context() as m:
        m.setattr(cp, "enabled", lambda size, held=False: False)
        whole = load(path)
    return parts, whole


@pytest.mark.parametrize("rel", sweep([t for t in TRACES if t not in REFUSED], SAMPLE))
def test_corpus_two_parts_equal_one_piece(rel, monkeypatch, spy):
    path = require(require(CORPUS) / rel)
    parts, whole = _both(path, monkeypatch, spy)
    assert_same(parts, whole)


@pytest.mark.parametrize(
    "rel", ["hta/rank0.json.gz", "tracelens/mi300/resnet_act_checkpoint.json.gz", "kineto/before_fix_trace.json"]
)
def test_corpus_parts_without_the_c_scanner_equal_one_piece(rel, monkeypatch, spy):
    """The msgspec path of each part (no C compiler, or ``GAPSCOPE_XSCAN=0``) is kept
    exercised end to end: above, the C scanner reads every part of the corpus."""
    monkeypatch.setenv("GAPSCOPE_XSCAN", "0")
    path = require(require(CORPUS) / rel)
    parts, whole = _both(path, monkeypatch, spy)
    assert spy[0] is True
    assert_same(parts, whole)


def test_two_part_path_runs_on_every_corpus_file_of_100_events(monkeypatch, spy):
    """The comparison above is not vacuous: every corpus file with at least 100
    events (all but one tiny file) is really decoded in two parts (``SAMPLE``'s files
    unless the full corpus is asked for)."""
    require(CORPUS)
    missed = []
    for rel in TRACES if FULL_CORPUS else SAMPLE:
        spy.clear()
        tr = load(CORPUS / rel)
        if len(tr) >= 100 and spy != [True]:
            missed.append((rel, list(spy)))  # (file, what each split gave)
    assert missed == []


def _kineto(n: int, name=lambda i: f"k{i}", args=lambda i: {"correlation": i, "device": 0, "stream": 7}) -> dict:
    ev = [{"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}}]
    for i in range(n):
        ev.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": 10.0 * i,
                "dur": 2.5,
                "args": {"correlation": i},
            }
        )
        ev.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": name(i),
                "pid": 0,
                "tid": 7,
                "ts": 10.0 * i + 3.125,
                "dur": 4.0,
                "args": args(i),
            }
        )
        ev.append({"ph": "s", "cat": "ac2g", "id": i, "pid": 1, "tid": 1, "ts": 10.0 * i, "bp": "e"})
    ev.append({"ph": "i", "name": "end", "pid": 1, "tid": 1, "ts": 10.0 * n, "s": "t"})
    return {"schemaVersion": 1, "traceEvents": ev, "traceName": "t", "baseTimeNanoseconds": 1}


def _write(tmp_path, obj_or_text, name="t.json") -> str:
    p = tmp_path / name
    text = obj_or_text if isinstance(obj_or_text, (str, bytes)) else json.dumps(obj_or_text, indent=1)
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    return str(p)


def test_object_and_array_forms_split(tmp_path, monkeypatch, spy):
    obj = _kineto(300)
    for text in (json.dumps(obj, indent=1), json.dumps(obj["traceEvents"]), json.dumps(obj, separators=(",", ":"))):
        spy.clear()
        parts, whole = _both(_write(tmp_path, text), monkeypatch, spy)
        assert spy == [True]
        assert_same(parts, whole)
        assert len(parts) == 2 * 300 + 1


def test_bytes_and_bytearray_give_the_same_and_data_is_restored(tmp_path, monkeypatch, spy):
    raw = json.dumps(_kineto(200), indent=1).encode()
    buf = bytearray(raw)
    a = load_chrome(buf, "x.json")
    assert bytes(buf) == raw  # the in-place framing is undone
    b = load_chrome(raw, "x.json")
    assert spy == [True, True]
    assert_same(a, b)


def test_progress_is_the_share_of_bytes_decoded_while_a_file_is_split(tmp_path, monkeypatch, spy):
    """``fork.progress`` (the viewer's loading bar) grows from 0 to 1 while the
    children decode their parts, and is None before they plan and after the load."""
    import threading

    real = tx.part_payload

    def slowly(texts, *args, **kwargs):  # inherited by the forked children
        def each():
            for t in texts:
                time.sleep(0.02)
                yield t

        return real(each(), *args, **kwargs)

    monkeypatch.setattr(tx, "part_payload", slowly)
    path = _write(tmp_path, _kineto(3000))  # about 20 parts of 16 KB per child
    seen: list = []
    stop = threading.Event()

    def poll():
        while not stop.is_set():
            seen.append(cp.progress())
            time.sleep(0.003)

    poller = threading.Thread(target=poll)
    assert cp.progress() is None
    poller.start()
    try:
        trace = load(path)
    finally:
        stop.set()
        poller.join()
    assert len(trace) == 2 * 3000 + 1
    assert cp.progress() is None
    shares = [v for v in seen if v is not None]
    assert len(shares) >= 5, seen[:20]
    assert shares == sorted(shares) and 0 <= shares[0] and shares[-1] <= 1
    assert any(0.1 < v < 0.9 for v in shares)


def test_input_file_is_not_changed(tmp_path, monkeypatch, spy):
    path = _write(tmp_path, _kineto(200))
    before = open(path, "rb").read()
    st = os.stat(path)
    load(path)
    assert open(path, "rb").read() == before and os.stat(path).st_mtime_ns == st.st_mtime_ns


def test_cut_inside_a_string_falls_back(tmp_path, monkeypatch, spy):
    """A name made of ``}, {`` in the middle of the text: the cut lands inside it, the
    head does not decode, and the one-piece decode gives the answer."""
    obj = _kineto(20, name=lambda i: "x" + "}, {" * 20000 if i == 10 else f"k{i}")
    parts, whole = _both(_write(tmp_path, obj), monkeypatch, spy)
    assert spy and not any(spy)  # neither the file's children nor the in-memory split
    assert_same(parts, whole)
    assert any(n.startswith("x}, {") for n in parts.names)


def test_cut_inside_nested_args_falls_back(tmp_path, monkeypatch, spy):
    obj = _kineto(
        20,
        args=lambda i: {
            "correlation": i,
            "device": 0,
            "stream": 7,
            "blocks": [{"a": j} for j in range(40000)] if i == 10 else [],
        },
    )
    parts, whole = _both(_write(tmp_path, obj), monkeypatch, spy)
    assert spy and not any(spy)  # neither the file's children nor the in-memory split
    assert_same(parts, whole)


@pytest.mark.parametrize("damage", ["truncate", "trailing_comma", "nan"])
def test_damaged_text_falls_back_to_the_repairing_path(damage, tmp_path, monkeypatch, spy):
    text = json.dumps(_kineto(200), indent=1)
    if damage == "truncate":
        text = text[: len(text) * 3 // 4]
    elif damage == "trailing_comma":
        text = text.replace('"s": "t"\n  }\n ]', '"s": "t"\n  },\n ]')
        assert "},\n ]" in text
    else:
        text = text.replace('"dur": 4.0', '"dur": NaN', 1)
    parts, whole = _both(_write(tmp_path, text), monkeypatch, spy)
    assert spy and not any(spy)  # neither the file's children nor the in-memory split
    assert_same(parts, whole)
    assert bool(parts.warnings) == (damage != "trailing_comma")  # a trailing comma is legal


def test_gzip_input_is_inflated_to_an_unlinked_file_and_split(tmp_path, monkeypatch, spy):
    path = _write(tmp_path, gzip.compress(json.dumps(_kineto(200)).encode()), "t.json.gz")
    parts, whole = _both(path, monkeypatch, spy)
    assert spy == [True]  # the file's children, on the inflated text
    assert_same(parts, whole)
    assert os.listdir(tmp_path / "cache" / "inflated") == []  # unlinked before it was written
    k = int(np.flatnonzero(parts.kind == 0)[0])
    assert parts.args_of(k) == whole.args_of(k) != {}


@pytest.mark.parametrize("fail", ["no room", "damaged"])
def test_gzip_that_cannot_be_inflated_to_a_file_splits_from_memory(fail, tmp_path, monkeypatch, spy):
    """A full disk, or a damaged member (read in memory, where the recovery is), leaves
    the in-memory split: the same trace."""
    import gapscope.parsers.detect as detect

    blob = gzip.compress(json.dumps(_kineto(200)).encode())
    if fail == "damaged":
        blob = blob[: len(blob) - 40]
    else:
        real_write = os.write

        def full(fd, data):
            if os.fstat(fd).st_size > 1000:
                raise OSError(28, "No space left on device")
            return real_write(fd, data)

        monkeypatch.setattr(detect.os, "write", full)
    path = _write(tmp_path, blob, "t.json.gz")
    parts, whole = _both(path, monkeypatch, spy)
    assert spy and spy[-1] is (fail == "no room")  # a cut-off text does not split
    assert_same(parts, whole)
    assert os.listdir(tmp_path / "cache" / "inflated") == []


def _metadata_heavy() -> tuple[dict, dict]:
    """A Kineto trace of 400 ops, and the same with 2,000 ``thread_name`` metadata
    events among its first 600 events: mostly events this process decodes itself."""
    obj = _kineto(400)
    meta = [
        {"ph": "M", "name": "thread_name", "pid": 9, "tid": t, "args": {"name": f"worker {t}"}} for t in range(2000)
    ]
    return obj, {**obj, "traceEvents": obj["traceEvents"][:600] + meta + obj["traceEvents"][600:]}


def test_a_gzip_text_not_split_is_mapped_not_read_into_memory(tmp_path, monkeypatch, spy):
    """A ``.gz`` whose inflated text is mostly metadata (``hta/mtia_rank_0.json.gz``)
    is loaded in one piece from a read-only map of the unlinked inflated file: its
    87 MB were read back into this process's memory. The same trace, args included;
    nothing is left in the cache folder."""
    import gapscope.parsers.detect as detect

    monkeypatch.setattr(cp, "METADATA_SHARE", 0.25)
    monkeypatch.setattr(cp, "SAMPLE_BYTES", 4096)
    _, heavy = _metadata_heavy()
    path = _write(tmp_path, gzip.compress(json.dumps(heavy).encode()), "heavy.json.gz")

    def refuse(fd):
        raise AssertionError("the inflated JSON text was read into memory")

    monkeypatch.setattr(detect, "_read_fd", refuse)
    parts, whole = _both(path, monkeypatch, spy)
    assert not any(spy)
    assert_same(parts, whole)
    k = int(np.flatnonzero(parts.kind == 0)[0])
    assert parts.args_of(k) == whole.args_of(k) != {}
    assert os.listdir(tmp_path / "cache" / "inflated") == []


def test_a_gzip_timeline_that_is_not_json_is_read_not_mapped(tmp_path, monkeypatch, spy):
    """An ASCII timeline in a ``.gz`` large enough to be inflated to a file is read
    back (the timeline reader decodes text), the same trace as the plain file."""
    src = SAMPLES / "decode_step.txt"
    path = _write(tmp_path, gzip.compress(src.read_bytes()), "t.txt.gz")
    a, b = load(path), load(src)
    assert a.names == b.names and a.start_ns.tolist() == b.start_ns.tolist() and len(a) == len(b) > 0


def test_epoch_timestamps_kept_as_text_split(tmp_path, monkeypatch, spy):
    """Epoch-µs ``ts`` with a fraction: the parts keep ``ts`` as text; the tail's
    non-X events travel as JSON and keep their exact ns."""
    obj = _kineto(200)
    for e in obj["traceEvents"]:
        if "ts" in e:
            e["ts"] = 1712345678000000 + e["ts"]
    text = json.dumps(obj, indent=1).replace(".0,", ".125,")
    parts, whole = _both(_write(tmp_path, text), monkeypatch, spy)
    assert spy == [True]
    assert_same(parts, whole)
    end = parts.names.index("end")
    assert parts.start_ns[parts.name_id == end].tolist() == [1712345678002000125]


def test_v2_flows_fall_back_after_the_split(tmp_path, monkeypatch, spy):
    obj = _kineto(200)
    obj["traceEvents"][-3]["bind_id"] = 5
    obj["traceEvents"][-3]["flow_out"] = True
    obj["traceEvents"][-6]["bind_id"] = 5
    obj["traceEvents"][-6]["flow_in"] = True
    parts, whole = _both(_write(tmp_path, obj), monkeypatch, spy)
    assert spy == [True, True]  # both splits worked; each build asked for the whole list
    assert_same(parts, whole)


def _reaped(pids) -> bool:
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue
        return False
    return True


def test_child_that_crashes_falls_back(tmp_path, monkeypatch, spy, forks):
    def boom(*a, **k):
        raise MemoryError("simulated")

    monkeypatch.setattr(tx, "part_payload", boom)
    parts, whole = _both(_write(tmp_path, _kineto(100)), monkeypatch, spy)
    assert spy and not any(spy)
    assert_same(parts, whole)
    assert len(forks) == 3 + 1 and _reaped(forks)  # the file's three, then the in-memory one; none left


def test_child_that_hangs_is_killed_and_falls_back(tmp_path, monkeypatch, spy, forks):
    """A child past its wait is killed, not waited for: none of them writes its mark of a
    finished run (counted, not timed)."""
    marks = tmp_path / "marks"
    marks.mkdir()

    def hang(*a, **k):
        time.sleep(60)
        (marks / str(os.getpid())).touch()

    monkeypatch.setattr(tx, "part_payload", hang)
    monkeypatch.setattr(cp, "MIN_WAIT_S", 0.5)
    monkeypatch.setattr(cp, "WAIT_FACTOR", 0.0)
    monkeypatch.setattr(cp, "WAIT_S_PER_BYTE", 0.0)
    parts, whole = _both(_write(tmp_path, _kineto(100)), monkeypatch, spy)
    assert spy and not any(spy)
    assert_same(parts, whole)
    assert len(forks) == 3 + 1 and _reaped(forks)
    assert list(marks.iterdir()) == []


def test_payload_too_big_for_shared_memory_goes_through_the_pipe(tmp_path, monkeypatch, spy):
    real = cp.mmap.mmap
    monkeypatch.setattr(cp.mmap, "mmap", lambda fd, size, **kw: real(fd, size, **kw) if kw else real(fd, 16))
    parts, whole = _both(_write(tmp_path, _kineto(300)), monkeypatch, spy)
    assert spy == [True]
    assert_same(parts, whole)


def test_enabled_rules(monkeypatch):
    monkeypatch.setattr(cp, "MIN_BYTES", 100)
    assert not cp.enabled(99)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert not cp.enabled(10**9)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert cp.enabled(10**9) == os.sys.platform.startswith("linux")
    # a text this process holds splits from twice the size of a plain file
    linux = os.sys.platform.startswith("linux")
    assert (cp.enabled(150), cp.enabled(150, held=True), cp.enabled(200, held=True)) == (linux, False, linux)
    monkeypatch.setenv("GAPSCOPE_LOAD_PROCESSES", "1")
    assert not cp.enabled(10**9)


def test_file_changed_after_the_plan_is_decoded_as_read(tmp_path, monkeypatch, spy, forks):
    """The file's children planned on the old text; the file grows before their result
    is taken, so it is dropped and the text actually read is split anew."""
    path = _write(tmp_path, _kineto(300))
    real = cp.start_file

    def start_then_grow(p, *a, **kw):
        got = real(p, *a, **kw)
        time.sleep(0.01)
        with open(p, "ab") as fh:
            fh.write(b"\n\n")
        return got

    monkeypatch.setattr(cp, "start_file", start_then_grow)
    parts = load(path)
    monkeypatch.setattr(cp, "start_file", real)
    with monkeypatch.context() as m:
        m.setattr(cp, "enabled", lambda size, held=False: False)
        whole = load(path)
    assert spy == [False, True]
    assert len(forks) == 3 + 1 and _reaped(forks)  # the file's children, then one from memory
    assert_same(parts, whole)


def _unpack(pieces):
    return tx.unpack(b"".join(bytes(p) for p in pieces))


def _start(path):
    from gapscope.parsers.chrome.decode import _DECODERS, _raw_ts
    from gapscope.parsers.json.scan import text_start

    return cp.start_file(str(path), lambda d: text_start(d) if len(d) else -1, _raw_ts, _DECODERS)


def test_parts_dropped_without_close_leave_no_progress_and_no_children(tmp_path, monkeypatch, spy, forks):
    """``FileParts`` dropped between ``start_file`` and its use (an interrupt there) is
    collected: ``progress`` forgets it and its children are reaped."""
    import gc

    parts = _start(_write(tmp_path, _kineto(300)))
    assert parts is not None and len(forks) == 3
    deadline = time.monotonic() + 10
    while cp.progress() is None and time.monotonic() < deadline:  # the children plan
        time.sleep(0.01)
    assert cp.progress() is not None
    del parts
    gc.collect()
    assert cp.progress() is None
    assert _reaped(forks)


def test_child_of_a_changed_file_gives_up(tmp_path):
    """A file's child checks the file's stamp before and after its decode, and plans
    what ``find_cuts`` plans on the text."""
    from gapscope.parsers.chrome.decode import _DECODERS, _raw_ts
    from gapscope.parsers.chrome.parallel.cut import chunk_spans, find_cuts
    from gapscope.parsers.json.scan import text_start as _root

    path = _write(tmp_path, _kineto(50))
    fd = os.open(path, os.O_RDONLY)
    try:
        stamp = file_stamp(os.fstat(fd))
        data = open(path, "rb").read()
        begin, end, cuts, _ = find_cuts(data, 0, False, 4)
        assert len(cuts) == 3
        slots = cp.mmap.mmap(-1, 2 * cp._SLOT.size)
        got = _unpack(cp._file_payload(fd, stamp, 1, 2, 4, _root, _raw_ts, _DECODERS, slots))
        mine = chunk_spans(begin, end, cuts)[2:]
        assert cp._SLOT.unpack_from(slots, cp._SLOT.size) == (sum(b - a + 1 for a, b in mine),) * 2  # all done
        assert cp._SLOT.unpack_from(slots, 0) == (0, 0)  # child 0's slot untouched
        assert got is not None and got[2] == (0, False, begin, end, cuts)
        assert got[0].n == data[cuts[1][1] :].count(b'"ph"')  # child 1 of 2 decodes parts 2 and 3
        assert got[3] is None  # only child 0 sends the header
        head = _unpack(cp._file_payload(fd, stamp, 0, 2, 4, _root, _raw_ts, _DECODERS, slots))
        assert head is not None and head[0].n == data[: cuts[1][0]].count(b'"ph"')
        assert head[3] is not None and json.loads(head[3]["schemaVersion"]) == 1
        assert open(path, "rb").read() == data  # the "[" and "]" are private to the child's map
        time.sleep(0.01)
        with open(path, "ab") as fh:
            fh.write(b" ")
        assert _unpack(cp._file_payload(fd, stamp, 0, 2, 4, _root, _raw_ts, _DECODERS, slots)) is None
    finally:
        os.close(fd)


def test_file_cut_short_while_a_child_decodes(tmp_path, monkeypatch, spy, forks):
    """Truncating the file under the children's maps kills them (SIGBUS) or makes
    their parts fail, never this process: it reads what is left, as a damaged file."""
    from gapscope.parsers.errors import TraceFormatError

    path = _write(tmp_path, _kineto(3000))
    real_payload = tx.part_payload

    def truncate_then_decode(texts, *a, **kw):
        try:
            os.truncate(path, 100)
        except OSError:
            pass
        return real_payload(texts, *a, **kw)

    monkeypatch.setattr(tx, "part_payload", truncate_then_decode)
    try:
        got = load(path)
    except TraceFormatError:
        got = None
    assert spy[:1] == [False]
    assert forks and _reaped(forks)
    if got is not None:
        assert len(got) < 2 * 3000


def test_start_file_declines_what_it_cannot_split(tmp_path, monkeypatch):
    monkeypatch.setattr(cp, "MIN_BYTES", 0)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    start_parts = _start
    gz = _write(tmp_path, gzip.compress(json.dumps(_kineto(50)).encode()), "t.json.gz")
    assert start_parts(gz) is None
    text = _write(tmp_path, "A |###   |\n", "t.txt")
    assert start_parts(text) is None
    assert start_parts(str(tmp_path)) is None
    assert start_parts(str(tmp_path / "missing.json")) is None
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert start_parts(str(fifo)) is None  # does not block
    monkeypatch.setattr(cp, "MIN_BYTES", 1 << 40)
    assert start_parts(_write(tmp_path, _kineto(50))) is None
    monkeypatch.setattr(cp, "MIN_BYTES", 0)
    pending = start_parts(_write(tmp_path, _kineto(50)))
    assert pending is not None
    pending.close()
    pending.close()  # idempotent


@pytest.mark.parametrize(
    "field, head_value, tail_value",
    [
        ("ts", None, "0.5015"),  # a string ts: exact (502 ns) whichever part it is in
        ("dur", None, "0.5015"),
        ("correlation", None, 93.5),  # not an integer id: -1 (no flow), never truncated to 93
        ("External id", None, 5.5),  # nor is any other non-integer
    ],
)
def test_a_value_reads_the_same_whatever_its_neighbours(tmp_path, monkeypatch, spy, field, head_value, tail_value):
    """Found by the attack round: the fast column paths used to depend on the other
    values of the list, so a part could read a value differently from the whole."""
    obj = _kineto(100)
    ev = obj["traceEvents"]
    head, tail = ev[29], ev[-21]  # kernels, one in each part
    for e, v in ((head, head_value), (tail, tail_value)):
        if field in ("ts", "dur"):
            e[field] = v
        else:
            e["args"][field] = v
    parts, whole = _both(_write(tmp_path, obj), monkeypatch, spy)
    assert spy == [True]
    assert_same(parts, whole)
    k = parts.names.index(tail["name"])
    row = np.flatnonzero(parts.name_id == k)[0]
    if field == "ts":
        assert parts.start_ns[row] == 502
    elif field == "dur":
        assert parts.dur_ns[row] == 502
    elif field == "correlation":
        assert parts.correlation[row] == -1
    else:
        assert parts.external_id[row] == -1


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("fail", ["fork", "pipe", "mmap"])
def test_no_fork_no_pipe_no_memory_falls_back_without_leaks(tmp_path, monkeypatch, spy, fail):
    def refuse(*a, **k):
        raise BlockingIOError(11, "Resource temporarily unavailable")

    path = _write(tmp_path, _kineto(100))
    load(path)  # warm imports
    before = _fds()
    if fail == "mmap":
        real = cp.mmap.mmap
        monkeypatch.setattr(cp.mmap, "mmap", lambda fd, size, **kw: real(fd, size, **kw) if kw else refuse())
    else:
        monkeypatch.setattr(os, fail, refuse)
    parts, whole = _both(path, monkeypatch, spy)
    assert_same(parts, whole)
    assert _fds() == before


def test_high_fd_numbers_work(tmp_path, monkeypatch, spy):
    """``select`` cannot watch fd 1024 or above; the pipe is polled instead."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip("fd limit below 1200")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        parts, whole = _both(_write(tmp_path, _kineto(100)), monkeypatch, spy)
        assert spy[0] is True
        assert_same(parts, whole)
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_array_end_is_found_cheaply_behind_keys_with_brackets(tmp_path, monkeypatch, spy):
    """A big key before the events and many ``]`` after them: the text before the array
    is decoded twice in all, not once per candidate."""
    import gapscope.parsers.chrome.parallel.cut as cc

    obj = {"meta": ["x" * 100] * 20000, **_kineto(300), "logs": [["a"], ["b"]] * 20, "traceName": "]" * 40}
    text = json.dumps(obj)
    calls = []

    class Counting:
        def decode(self, buf):
            calls.append(len(buf))
            return real.decode(buf)

    real = cc._HEADER
    monkeypatch.setattr(cc, "_HEADER", Counting())
    begin, brace, comma, end, header = cc.find_cut(text.encode(), 0, False, 0.5)
    assert text[end] == "]" and text[end + 1 :].startswith(', "traceName": "]]]')
    assert sum(1 for c in calls if c > 2_000_000) == 2
    assert bytes(header.traceName) == b'"' + b"]" * 40 + b'"'
    monkeypatch.setattr(cc, "_HEADER", real)
    parts, whole = _both(_write(tmp_path, text), monkeypatch, spy)
    assert spy == [True]
    assert_same(parts, whole)


def test_ctrl_c_held_back_during_the_fork_leaves_nothing(tmp_path, monkeypatch, spy, forks):
    """Found by the second attack round: a Ctrl-C that arrives while SIGINT is blocked
    across the fork is raised when the mask is restored; the child is killed and
    reaped and the pipe closed before it propagates."""
    path = _write(tmp_path, _kineto(100))
    load(path)
    before = _fds()
    real = signal.pthread_sigmask
    state = {"blocked": False}

    def mask(how, sigs):
        old = real(how, sigs)
        if how == signal.SIG_BLOCK:
            state["blocked"] = True
        elif how == signal.SIG_SETMASK and state["blocked"] and os.getpid() == parent:
            state["blocked"] = False
            raise KeyboardInterrupt("held back")
        return old

    parent = os.getpid()
    monkeypatch.setattr(signal, "pthread_sigmask", mask)
    with pytest.raises(KeyboardInterrupt):
        load(path)
    monkeypatch.setattr(signal, "pthread_sigmask", real)
    assert forks and _reaped(forks)
    assert _fds() == before


def test_the_children_are_used_only_for_the_file_they_started_on(tmp_path, monkeypatch):
    """``decode_file`` compares the stamp the children started with to the file's
    now: a file replaced by another of the same size is read anew."""
    monkeypatch.setattr(cp, "MIN_BYTES", 0)
    monkeypatch.setattr(cp, "processes", lambda: 2)
    from gapscope.parsers.chrome.decode import _DECODERS

    a = _write(tmp_path, _kineto(10), "a.json")
    b = _write(tmp_path, _kineto(10), "b.json")
    started = _start(a)
    assert started is not None
    os.replace(b, a)
    assert cp.decode_file(started, _DECODERS) is None
    assert all(c.done for c in started.children)
    started = _start(a)
    got = cp.decode_file(started, _DECODERS)
    assert got is not None and got[0].scanned.n == 3 * 10 + 2


def test_args_of_a_changed_file_are_not_read(tmp_path, monkeypatch, spy):
    """The mapped text is read again only while the file is unchanged (a file cut
    short under a map would be a SIGBUS): after a rewrite, ``args_of`` is empty."""
    path = _write(tmp_path, _kineto(200))
    tr = load(path)
    assert spy == [True]
    k = int(np.flatnonzero(tr.kind == 0)[0])
    assert tr.args_of(k)["correlation"] >= 0
    time.sleep(0.01)
    with open(path, "r+b") as fh:
        fh.truncate(10)
    assert tr.args_of(k) == {}


def test_the_file_is_not_read_into_memory(tmp_path, monkeypatch, spy):
    import gapscope.parsers.detect as detect

    def refuse(*a, **k):
        raise AssertionError("read")

    path = _write(tmp_path, _kineto(200))
    monkeypatch.setattr(detect, "read_bytes", refuse)
    tr = load(path)
    assert spy == [True] and len(tr) == 2 * 200 + 1  # the metadata and ac2g flows are not rows


def test_a_text_mostly_of_metadata_is_not_split(tmp_path, monkeypatch, spy):
    """Metadata (and B/E, instants...) are decoded again by this process after a
    split: a text that is mostly such events (as ``hta/mtia_rank_0.json.gz``) loads in
    one piece, the same trace; one mostly of X events and flows is split."""
    monkeypatch.setattr(cp, "METADATA_SHARE", 0.25)
    monkeypatch.setattr(cp, "SAMPLE_BYTES", 4096)
    obj, heavy = _metadata_heavy()
    parts, whole = _both(_write(tmp_path, heavy, "heavy.json"), monkeypatch, spy)
    assert not any(spy)  # neither the file's children nor the in-memory split
    assert_same(parts, whole)
    spy.clear()
    parts, whole = _both(_write(tmp_path, obj, "light.json"), monkeypatch, spy)
    assert spy == [True]
    assert_same(parts, whole)
    assert cp.mostly_parent_work(lambda off, n: b"", 10) is False  # nothing sampled: no opinion


def test_last_non_blank_is_the_byte_loop_it_replaced():
    """``cut.last_non_blank`` (steps of ``bytes.rstrip``) against the byte-at-a-time
    loop it replaced (3 GB of blanks after a gzip's events took minutes), at step
    sizes from 1 byte up, on random texts of blanks and others."""
    import random

    import gapscope.parsers.chrome.parallel.cut as cut

    rng = random.Random(7)
    for step in (1, 2, 3, 7, 1 << 16):
        cut._BLANK_STEP_BYTES = step
        try:
            for _ in range(400):
                text = bytes(rng.choice(b" \t\r\nab]") for _ in range(rng.randint(1, 200)))
                lo = rng.randint(0, len(text) - 1)
                hi = rng.randint(lo, len(text) - 1)
                want = hi
                while want > lo and text[want] in b" \t\r\n":
                    want -= 1
                assert cut.last_non_blank(text, lo, hi) == want, (text, lo, hi)
        finally:
            cut._BLANK_STEP_BYTES = 1 << 16


def _event_text(trace):
    """The ``EventText`` a loaded Chrome trace reads its args from."""
    args = trace._args_loader
    args = getattr(args, "inner", args)  # a SortedArgs
    return args.text


@pytest.mark.parametrize("name", ["t.json", "t.json.gz"])
def test_the_childrens_scanners_give_every_events_start(tmp_path, monkeypatch, spy, name):
    """A trace decoded in parts by the C scanner knows where each event starts in the
    text (``transfer.part_message``'s ``starts``): the first read of an event's args
    scans nothing (at 1M events that scan took 1 s, in the findings' first card), and
    the starts are the ones the scan finds (``EventText._find_starts``)."""
    from gapscope.parsers.chrome import fastscan
    from gapscope.parsers.chrome.lazy_args import EventText

    if not fastscan.available():
        pytest.skip("the C scanner is not built")
    from gapscope.parsers.chrome import loader as chrome_loader

    # neither the cache's writer nor the source lines (a text of 8 MiB or less) may
    # find the starts themselves: as for a large file
    monkeypatch.setenv("GAPSCOPE_NO_CACHE", "1")
    monkeypatch.setattr(chrome_loader, "SRC_LINE_LIMIT_BYTES", 0)
    obj = _kineto(3000)
    path = _write(tmp_path, gzip.compress(json.dumps(obj, indent=1).encode(), 1) if name.endswith(".gz") else obj, name)
    scans: list[int] = []
    real = EventText._find_starts
    monkeypatch.setattr(EventText, "_find_starts", lambda self: scans.append(1) or real(self))
    parts, whole = _both(path, monkeypatch, spy)
    assert spy and all(spy)  # decoded in parts
    text = _event_text(parts)
    assert text.starts is not None and text.starts.dtype == np.int64 and text.starts.shape == (text.n,)
    scans.clear()
    assert [parts.args_of(i) for i in range(len(parts))] == [whole.args_of(i) for i in range(len(whole))]
    assert scans == []  # no scan for the parts' trace
    expect, _ = real(EventText(text.data, text.root, text.n))
    assert np.array_equal(text.starts, expect)
