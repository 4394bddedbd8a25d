"""The children of a file claim their parts as they go (``parallel.fork.claim_pipe``),
and the parts they hold, from all over the file, join in the file's order
(``scan.merge_ordered``) into exactly what one pass gives: the same columns, names and
lanes numbered in order of first sight, flow and other events, starts.

Hand-made texts whose names and lanes first appear in different parts, so that a join
that kept each child's order (or numbered names child by child) would differ; and a
real load whose later children wait until the first has taken every part.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
import time

import numpy as np
import pytest

import gapscope.parsers.chrome.parallel.fork as cp
import gapscope.parsers.chrome.parallel.transfer as tx
from gapscope.parsers import load
from gapscope.parsers.chrome.decode import _DECODERS, _raw_ts
from gapscope.parsers.chrome.fastscan import read_part
from gapscope.parsers.chrome.parallel.cut import chunk_spans, find_cuts
from gapscope.parsers.chrome.scan import PH_FLOW, PH_OTHER, EventColumns, PartLayout, merge_ordered
from gapscope.parsers.json.mapped import file_stamp
from gapscope.parsers.json.scan import text_start
from tests.test_load_parallel import assert_same, force_parts

N_PARTS = 4


def _segmented(per_segment: int = 60) -> dict:
    """A Kineto-shaped trace of ``N_PARTS`` segments of about equal length: segment
    ``s`` runs ops named ``op{s}``/``aten::s{s}`` on thread ``10 + s`` beside a
    ``common`` op on thread 1, with a flow event and an instant event each; so each
    part (cut by bytes) brings names and lanes of its own."""
    ev: list[dict] = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "host"}}]
    t = 0.0
    for s in range(N_PARTS):
        for i in range(per_segment):
            t += 10.0
            ev.append({"ph": "X", "cat": "cpu_op", "name": "common", "pid": 1, "tid": 1, "ts": t, "dur": 2.0})
            name = f"op{s}" if i % 2 else f"aten::s{s}"
            ev.append(
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": name,
                    "pid": 1,
                    "tid": 10 + s,
                    "ts": t + 1,
                    "dur": 3.0,
                    "args": {"External id": s * 1000 + i},
                }
            )
            if i == per_segment // 2:
                ev.append({"ph": "s", "cat": "ac2g", "id": s, "pid": 1, "tid": 1, "ts": t, "name": "ac2g"})
                ev.append({"ph": "i", "cat": "mark", "name": f"mark{s}", "pid": 1, "tid": 1, "ts": t, "s": "t"})
    return {"traceEvents": ev, "schemaVersion": 1}


def _pipe_of(places: list[int]) -> int:
    """A read end that gives ``places`` as ``claim_pipe``'s does, then its end."""
    r, w = os.pipe()
    os.write(w, b"".join(struct.pack("<I", k) for k in places))
    os.close(w)
    return r


def _names(ec: EventColumns, ids: np.ndarray, of: str) -> list:
    keys = list(getattr(ec, of))
    return [keys[i] for i in ids.tolist()]


def _decode_claimed(path: str, claims_of: list[list[int]]) -> tuple:
    """The children's messages for a file whose child ``j`` claims the places
    ``claims_of[j]``, run in this process one after the other, unpacked."""
    fd = os.open(path, os.O_RDONLY)
    slots = mmap.mmap(-1, len(claims_of) * cp._SLOT.size)
    try:
        stamp = file_stamp(os.fstat(fd))
        sent = []
        for j, places in enumerate(claims_of):
            r = _pipe_of(places)
            try:
                pieces = cp._file_payload(
                    fd, stamp, j, len(claims_of), N_PARTS, text_start, _raw_ts, _DECODERS, slots, r
                )
            finally:
                os.close(r)
            sent.append(tx.unpack(b"".join(bytes(p) for p in pieces)))
        return sent, [cp._SLOT.unpack_from(slots, cp._SLOT.size * j) for j in range(len(claims_of))]
    finally:
        slots.close()
        os.close(fd)


@pytest.mark.parametrize(
    "claims_of",
    [
        [[0, 2], [1, 3]],  # taken in turn
        [[1, 2, 3], [0]],  # the second child took part 0
        [[0, 1, 2, 3], []],  # one child took all; the other claimed none
        [[3], [0, 2], [1]],  # three children
    ],
)
def test_claimed_parts_join_as_one_pass(tmp_path, claims_of):
    path = tmp_path / "t.json"
    data = json.dumps(_segmented(), indent=1).encode()
    path.write_bytes(data)
    begin, end, cuts, _ = find_cuts(data, 0, False, N_PARTS)
    spans = chunk_spans(begin, end, cuts)
    assert len(spans) == N_PARTS
    sent, slots = _decode_claimed(str(path), claims_of)
    total = sum(hi - lo + 1 for lo, hi in spans)
    for places, s, slot in zip(claims_of, sent, slots):
        assert s is not None and s.layout is not None
        assert s.layout.ids.tolist() == places  # the places it took, in its order
        assert slot == (sum(spans[k][1] - spans[k][0] + 1 for k in places), total)  # progress: of all parts
    joined = cp._joined(sent, N_PARTS)
    assert joined is not None
    merged, blobs, starts = joined

    decoder, x_class = _DECODERS[False]
    whole, flows, others, whole_starts = read_part(memoryview(data)[begin - 1 : end + 1], decoder, x_class, False)
    assert merged.n == whole.n
    # names and lanes numbered in order of first sight over the whole list, as one pass
    assert list(merged.names) == list(whole.names)
    assert list(merged.lanes) == list(whole.lanes)
    assert list(merged.names)[:3] == ["common", "aten::s0", "op0"]
    for f in ("code", "name_x", "lane_x", "start_ns", "start_status", "dur_ns", "dur_status", "kind_x"):
        assert np.array_equal(getattr(merged, f), getattr(whole, f)), f
    for f in ("correlation", "external_id", "device", "stream", "bytes", "copy_kind", "pageable"):
        assert np.array_equal(getattr(merged.args, f), getattr(whole.args, f)), f
    # categories may be numbered otherwise (nothing depends on it): compare by value
    assert _names(merged, merged.cat_x, "cats") == _names(whole, whole.cat_x, "cats")
    assert _names(merged, merged.cat_f, "cats") == _names(whole, whole.cat_f, "cats")
    assert merged.args.external_id[:4].tolist() == [-1, 0, -1, 1]
    # one blob per part, in the file's order: the flow of segment s is in part s
    assert len(blobs[PH_FLOW]) == len(blobs[PH_OTHER]) == N_PARTS
    flow_ids = [json.loads(b)[0]["id"] if json.loads(b) else None for b in blobs[PH_FLOW]]
    assert [i for i in flow_ids if i is not None] == sorted(i for i in flow_ids if i is not None)
    assert sum(len(json.loads(b)) for b in blobs[PH_FLOW]) == len(flows) == N_PARTS
    # the events' starts in the file, rising, at each event's "{"
    assert whole_starts is not None and starts is not None
    assert np.array_equal(starts, whole_starts + (begin - 1))
    assert all(data[int(a) : int(a) + 1] == b"{" for a in starts.tolist())


def test_claims_that_miss_or_repeat_a_part_do_not_join(tmp_path):
    """Places not 0 .. n-1 once each (a lost or doubled claim) or a damaged layout
    give None: the file is then decoded in one piece."""
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_segmented(), indent=1))
    sent, _ = _decode_claimed(str(path), [[0, 2], [1, 3]])
    assert cp._joined(sent, N_PARTS) is not None
    assert cp._joined(sent, N_PARTS + 1) is None  # the plan had a part nobody sent
    missing, _ = _decode_claimed(str(path), [[0, 2], [3]])
    assert cp._joined(missing, N_PARTS) is None
    doubled, _ = _decode_claimed(str(path), [[0, 1, 2], [2, 3]])
    assert cp._joined(doubled, N_PARTS) is None
    a, b = sent
    assert a.layout is not None and b.layout is not None
    cols = [a.columns, b.columns]
    assert merge_ordered(cols, [a.layout, b.layout]) is not None
    short = PartLayout(a.layout.ids, a.layout.ends - 1, a.layout.keys)  # counts that miss its events
    assert merge_ordered(cols, [short, b.layout]) is None
    falling = PartLayout(a.layout.ids, a.layout.ends[::-1].copy(), a.layout.keys)
    assert merge_ordered(cols, [falling, b.layout]) is None
    assert merge_ordered(cols, [a.layout]) is None  # a layout per child
    # a child's message without its places, beside claimed ones
    assert cp._joined([a, b._replace(layout=None)], N_PARTS) is None


def test_claim_pipe_gives_each_place_once_in_order():
    r = cp.claim_pipe(5)
    assert r is not None
    try:
        assert list(cp._claimed(r, 3)) == [0, 1, 2]  # stops at the first place beyond its plan
        assert list(cp._claimed(r, 5)) == [4]  # the place read at the stop is gone; the rest follows
        assert list(cp._claimed(r, 5)) == []  # empty, no writer: its end, not a wait
    finally:
        os.close(r)


def test_claims_end_when_the_pipe_is_empty_even_with_a_writer_left():
    """A write end kept open elsewhere (another thread's fork while the places were
    written) does not make a child wait: the pipe is non-blocking, and every place is
    in before the children start, so empty is the end."""
    r = cp.claim_pipe(2)
    assert r is not None and not os.get_blocking(r)
    os.close(r)
    r, w = os.pipe2(os.O_NONBLOCK)
    try:
        os.write(w, struct.pack("<II", 0, 1))
        assert list(cp._claimed(r, 5)) == [0, 1]  # and returns, with ``w`` still open
    finally:
        os.close(r)
        os.close(w)


def test_claim_pipe_declines_what_does_not_fit(monkeypatch):
    """Places that a pipe cannot hold at once (a short write) give None: the
    children then decode a run each, never wait on a pipe no one fills."""
    real_write = os.write
    monkeypatch.setattr(cp.os, "write", lambda fd, data: real_write(fd, data[: len(data) // 2]))
    assert cp.claim_pipe(8) is None


def test_progress_of_claiming_children_counts_all_parts_once():
    slots = mmap.mmap(-1, 2 * cp._SLOT.size)
    parts = cp.FileParts.__new__(cp.FileParts)
    parts.children, parts.slots, parts.claimed = [None, None], slots, True
    cp._SLOT.pack_into(slots, 0, 300, 1000)
    assert parts.progress_bytes() == (0, 0)  # the second child has not planned yet
    cp._SLOT.pack_into(slots, cp._SLOT.size, 200, 1000)
    assert parts.progress_bytes() == (500, 1000)
    parts.claimed = False  # runs: each slot's total is its own run's
    assert parts.progress_bytes() == (500, 2000)
    parts.children = None  # nothing to close
    slots.close()


def test_later_children_held_back_leave_every_part_to_the_first(tmp_path, monkeypatch):
    """A real load whose children 1 and 2 wait (as a child stopped for the device
    preview does) until child 0 has decoded every part: they claim none, and the
    load still equals the one-piece one."""
    spy = force_parts(monkeypatch, tmp_path)
    real_payload = cp._file_payload

    def held(fd, stamp, j, nproc, n_chunks, root_of, raw_ts_of, decoders, slots, claims=None):
        deadline = time.monotonic() + 30
        while j > 0 and time.monotonic() < deadline:
            done, total = cp._SLOT.unpack_from(slots, 0)
            if total > 0 and done == total:
                break
            time.sleep(0.005)
        return real_payload(fd, stamp, j, nproc, n_chunks, root_of, raw_ts_of, decoders, slots, claims)

    joined: list[list[list[int]]] = []
    real_joined = cp._joined

    def spying(sent, n_parts):
        joined.append([s.layout.ids.tolist() if s.layout is not None else None for s in sent])
        return real_joined(sent, n_parts)

    monkeypatch.setattr(cp, "_file_payload", held)
    monkeypatch.setattr(cp, "_joined", spying)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_segmented(400), indent=1))
    parts = load(str(path))
    assert spy == [True]
    (places,) = joined
    assert len(places) == 3 and len(places[0]) > 3
    assert places[0] == list(range(len(places[0]))) and places[1:] == [[], []]
    with monkeypatch.context() as m:
        m.setattr(cp, "enabled", lambda size, held=False: False)
        whole = load(str(path))
    assert_same(parts, whole)
    assert parts.names[:3] == whole.names[:3]


def test_resume_of_some_children_signals_those_only(monkeypatch):
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(cp.os, "kill", lambda pid, sig: sent.append((pid, sig)))

    class Child:
        def __init__(self, pid: int, done: bool = False) -> None:
            self.pid, self.done = pid, done

    parts = cp.FileParts.__new__(cp.FileParts)
    parts.children = [Child(11), Child(12), Child(13, done=True)]
    parts.resume(1)
    assert sent == [(11, cp.signal.SIGCONT)]
    sent.clear()
    parts.resume()
    assert sent == [(11, cp.signal.SIGCONT), (12, cp.signal.SIGCONT)]  # a child done is left alone
    parts.children = None  # nothing to close
