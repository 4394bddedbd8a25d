"""The device preview (``gapscope.parsers.chrome.preview.device_preview``): a large
file's device lanes found by searching for their ``"cat"`` key and drawn before the
whole file is read (``load_with_preview(path, ...)``, ``EarlyLoad``, the viewer's preview
screen).

What must hold: the preview's device lanes and ops are exactly the whole trace's (on
every corpus trace that has device events, and on hand-made texts built to mislead a
search); where the search cannot be sure it gives no preview at all; a preview that
fails never fails the load; the viewer replaces the preview with the whole trace,
keeping the view the user moved to.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import threading

import numpy as np
import pytest

import gapscope.parsers.chrome.child as pc
import gapscope.parsers.chrome.decode as loader
import gapscope.parsers.chrome.parallel.fork as cp
import gapscope.parsers.chrome.preview as chrome_preview
from gapscope.analysis import diagnose
from gapscope.analysis.gaps import interior_gaps
from gapscope.parsers import load
from gapscope.parsers.chrome import fastscan
from gapscope.parsers.chrome.decode import load_chrome
from gapscope.parsers.chrome.preview import device_preview, device_preview_part
from gapscope.parsers.model import Kind, Trace
from gapscope.parsers.preview import load_with_preview
from tests.conftest import CORPUS, require
from tests.test_corpus import TRACES
from tests.test_load_parallel import _reaped

pytestmark = pytest.mark.skipif(not fastscan.available(), reason="the C scanner is not built")


def device_ops(trace: Trace) -> dict:
    """Per device lane (pid, tid): device, stream, and its ops' starts, lengths, kinds,
    names, bytes and copy kinds, in the trace's order."""
    out = {}
    for ln in trace.lanes:
        if not ln.is_gpu:
            continue
        a, b = int(trace.lane_offsets[ln.index]), int(trace.lane_offsets[ln.index + 1])
        out[(ln.pid, ln.tid)] = (
            ln.device,
            ln.stream,
            trace.start_ns[a:b].tolist(),
            trace.dur_ns[a:b].tolist(),
            trace.kind[a:b].tolist(),
            [trace.names[i] for i in trace.name_id[a:b].tolist()],
            trace.bytes[a:b].tolist(),
            trace.copy_kind[a:b].tolist(),
        )
    return out


def preview_of(data: bytes, path: str = "t.json", k: int = 2) -> Trace | None:
    """The preview of ``data`` from ``k`` shares, found one after another here (a
    load finds them at once, one forked child each)."""
    return device_preview([device_preview_part(data, j, k) for j in range(k)], data, path)


@pytest.mark.parametrize("rel", TRACES)
def test_corpus_preview_has_the_whole_traces_device_lanes(rel):
    """On every corpus trace, a preview (where one is made) holds exactly the device
    lanes and ops of the whole trace; a trace with device ops gets one."""
    path = require(CORPUS / rel)
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    full = device_ops(load(path))
    for k in (1, 3):  # one share (a 1-CPU machine's), and more shares than most traces' cuts
        got = preview_of(data, str(path), k)
        if got is None:  # only traces without device ops (CPU-only, Catapult, rocprof's own form)
            ops = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)
            assert not any(kind in ops for lane in full.values() for kind in lane[4])
            continue
        assert device_ops(got) == full, k


def copied_then_read(text: bytes, begin: int, end: int, raw_ts: bool = False):
    """What ``fastscan.device_scan`` must equal: the events found copied out
    (``device_event_spans``) and read again (``read_part``), with their spans; None
    where the search gives None or the read refuses the copy."""
    got = fastscan.device_event_spans(text, begin, end, chrome_preview.DEVICE_CATS)
    if got is None:
        return None
    doc, spans = got
    list_decoder, x_class = loader._DECODERS[raw_ts]
    try:
        ec, flows, others, _ = fastscan.read_part(doc, list_decoder, x_class, raw_ts)
        return ec, flows, others, spans
    except ValueError:  # msgspec's errors are ValueErrors
        return None


def same_read(a, b) -> bool:
    """Whether two (columns, flows, others, spans) are equal, every array and name."""
    import dataclasses

    def eq(x, y) -> bool:
        if dataclasses.is_dataclass(x):
            return type(x) is type(y) and all(eq(getattr(x, f.name), getattr(y, f.name)) for f in dataclasses.fields(x))
        if isinstance(x, np.ndarray):
            return isinstance(y, np.ndarray) and x.dtype == y.dtype and np.array_equal(x, y)
        if isinstance(x, (list, tuple)):
            return len(x) == len(y) and all(eq(u, v) for u, v in zip(x, y, strict=True))
        if x == y:
            return True
        return list(x) == list(y)  # an Interner: its names in order

    return eq(list(a), list(b))


@pytest.mark.parametrize("rel", TRACES)
def test_corpus_device_scan_reads_in_place_what_the_copy_reads(rel):
    """``device_scan`` (the events found and read where they lie, in one pass) gives
    what copying them out and reading the copy gives, every column, name, flow, other
    event and span, on every run of every corpus trace's events array (three runs
    each), and on every corpus trace with device events it reads them itself (no
    fallback to the copy)."""
    from gapscope.parsers.chrome.parallel.cut import chunk_spans, find_cuts
    from gapscope.parsers.json.scan import text_start

    path = require(CORPUS / rel)
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    try:
        root = text_start(data)
    except ValueError:
        pytest.skip("no JSON document")
    raw_ts = loader._raw_ts(data, root)
    planned = find_cuts(data, root, raw_ts, 3)
    if planned is None:
        pytest.skip("no events array to cut")
    begin, end, cuts, _ = planned
    list_decoder = loader._DECODERS[raw_ts][0]
    for lo, hi in chunk_spans(begin, end, cuts):
        want = copied_then_read(data, lo + 1, hi, raw_ts)
        got = fastscan.device_scan(data, lo + 1, hi, chrome_preview.DEVICE_CATS, list_decoder, raw_ts)
        if want is None:
            assert got is None
            continue
        assert got is not None, (lo, hi)
        assert same_read(got, want), (lo, hi)


def gap_rows(gaps, keep=slice(None)) -> set[tuple[int, int, int]]:
    """(device, start_ns, end_ns) of every gap (of those ``keep`` selects)."""
    return set(zip(gaps.device[keep].tolist(), gaps.start_ns[keep].tolist(), gaps.end_ns[keep].tolist(), strict=True))


@pytest.mark.parametrize("rel", TRACES)
def test_corpus_preview_gaps_are_the_diagnosis_gaps_between_the_kernels(rel):
    """The gaps a preview draws first (``interior_gaps`` of its device lanes) are the
    whole trace's diagnosed gaps between each device's first and last kernel, exactly:
    none missing, none extra, none shifted; only the idle time at the steps' edges
    waits for the whole file."""
    path = require(CORPUS / rel)
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    got = preview_of(data, str(path))
    if got is None:
        return
    full = load(path)
    whole = diagnose(full).gaps
    between = (whole.edge == 0) & (whole.prev_op >= 0) & (whole.next_op >= 0)
    early = interior_gaps(got)
    assert gap_rows(early) == gap_rows(whole, between)
    assert len(early) == int(between.sum())
    # and after the same kernel (the card names it)
    assert [got.name(i) for i in early.prev_op.tolist()] == [full.name(i) for i in whole.prev_op[between].tolist()]


def _x(cat: str, ts: float, dur: float, name: str = "k", tid: int = 7, **args) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _cpu(ts: float, dur: float, **extra) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": ts, "dur": dur, **extra}


def _doc(events: list, compact: bool = False) -> bytes:
    obj = {"schemaVersion": 1, "traceEvents": events, "baseTimeNanoseconds": 1_700_000_000_000_000_000}
    return json.dumps(obj, separators=(",", ":") if compact else (", ", ": "), indent=None if compact else 1).encode()


AWKWARD = {
    # a name that holds what a search could take for a key, quotes and braces
    "names": [
        _cpu(1, 5, args={"note": '"cat": "kernel", {"x": 1}'}),
        _x("kernel", 2, 1, name='a\\"}{"cat": "kernel"'),
        _x("kernel", 4, 1, name="ends in a backslash \\"),
        _x("gpu_memcpy", 6, 2, name="Memcpy HtoD (Pageable -> Device)", bytes=4096),
    ],
    # "cat" after nested values: args before it, an array of objects in args
    "cat_last": [
        {
            "ph": "X",
            "args": {"grid": [1, 2, 3], "o": [{"a": "}"}]},
            "name": "k1",
            "pid": 0,
            "tid": 7,
            "ts": 3,
            "dur": 1,
            "cat": "kernel",
        },
        _x("kernel", 5, 1),
        _cpu(0, 9),
    ],
    # a category given as a value elsewhere, "cat" as a value, not a key
    "cat_as_value": [
        _cpu(0, 9, args={"which": "cat"}),
        {"ph": "i", "name": "cat", "pid": 1, "tid": 1, "ts": 1, "s": "t", "cat": "cpu_instant_event"},
        _x("Kernel", 2, 3),
        _x("Memset", 6, 1, name="Memset (Device)", tid=20),
    ],
    # every vintage's device categories, and GPU-side ranges
    "vintages": [
        _x("kernel", 1, 1),
        _x("Kernel", 3, 1, tid=8),
        _x("gpu_memset", 5, 1),
        _x("gpu_user_annotation", 0, 9, name="## fwd ##"),
        _x("cuda_sync", 7, 0, name="Stream Sync", tid=7),
    ],
}


@pytest.mark.parametrize("compact", [False, True], ids=["spaced", "compact"])
@pytest.mark.parametrize("case", sorted(AWKWARD))
def test_awkward_texts_preview_as_the_whole_trace(case, compact):
    data = _doc(AWKWARD[case], compact)
    want = device_ops(load_chrome(data, "t.json"))
    for k in (1, 2, 3, 5):
        got = preview_of(data, k=k)
        assert got is not None
        assert device_ops(got) == want, k
    assert sum(len(v[2]) for v in want.values()) == sum(
        e["cat"] in ("kernel", "Kernel", "gpu_memcpy", "gpu_memset", "Memset", "gpu_user_annotation", "cuda_sync")
        for e in AWKWARD[case]
    )


def test_array_form_previews_too():
    data = json.dumps([_cpu(0, 9), _x("kernel", 2, 3), _x("kernel", 6, 1)]).encode()
    got = preview_of(data)
    assert got is not None and device_ops(got) == device_ops(load_chrome(data, "t.json"))
    assert device_ops(got)[("0", "7")][2] == [2000, 6000]


@pytest.mark.parametrize(
    "events",
    [
        # a device category under "cat" in an event's args: not an element of the array
        [_cpu(0, 9, args={"cat": "kernel"}), _x("kernel", 2, 3)],
        # an escaped category: the search cannot compare it
        [{**_x("kernel", 2, 3), "cat": "kern\\u0065l"}],
    ],
    ids=["cat_in_args", "escaped_category"],
)
def test_a_search_that_cannot_be_sure_gives_no_preview(events):
    """Rather than a preview that could differ from the whole trace, none."""
    data = _doc(events).replace(b"kern\\\\u0065l", b"kern\\u0065l")
    assert device_preview_part(data) is None
    assert preview_of(data, k=2) is None


def test_no_device_events_no_preview():
    assert preview_of(_doc([_cpu(0, 9), _cpu(10, 2)])) is None
    assert device_preview_part(b"not json") is None
    assert device_preview_part(b"") is None
    assert device_preview_part(_doc([_x("kernel", 2, 3)]), 2, 2) is None  # no such share


def _big(tmp_path, n: int = 4000):
    events = []
    for k in range(n):
        events.append(_cpu(10 * k, 4, args={"External id": k}))
        events.append(_x("kernel", 10 * k + 5, 3, name=f"k{k % 5}", correlation=k))
    path = tmp_path / "big.json"
    path.write_bytes(_doc(events))
    return path


@pytest.fixture
def split(monkeypatch):
    """Every file counts as large: decoded in parts by forked children, previewed. The
    decoders never say they are done, so a small file's preview is always waited for
    (they would often beat it on a busy machine)."""
    monkeypatch.setattr(cp, "MIN_BYTES", 0)
    monkeypatch.setattr(cp, "enabled", lambda size, held=False: True)
    monkeypatch.setattr(chrome_preview, "PREVIEW_MIN_BYTES", 0)
    monkeypatch.setattr(cp.FileParts, "progress_bytes", lambda self: (0, 0))
    # nor is a preview given up for being late: its bound for a small file is about 1 s,
    # which forked children missed on a machine at load average 10 (five tests lost
    # their preview in one run); lateness is not what these tests are about
    monkeypatch.setattr(chrome_preview, "PREVIEW_WAIT_S", 600.0)
    monkeypatch.setattr(chrome_preview, "PREVIEW_MAX_WAIT_S", 600.0)


def test_load_hands_over_the_preview_before_the_whole_trace(split, tmp_path):
    path = _big(tmp_path)
    got: list[Trace] = []
    full = load_with_preview(path, got.append)
    assert len(got) == 1
    assert device_ops(got[0]) == device_ops(full)
    assert len(got[0]) == 4000 and len(full) == 8000
    plain = load(path)
    for f in ("start_ns", "dur_ns", "lane", "kind", "correlation"):
        assert np.array_equal(getattr(plain, f), getattr(full, f))


def _shuffled_big(tmp_path, n: int = 3000):
    """``_big``'s shape with the kernels written latest first and each carrying its own
    number in its args: the preview's rows are sorted, so its args reader maps each row
    back to where its event lies in the file."""
    events = [_cpu(10 * k, 4, args={"External id": k}) for k in range(n)]
    events += [
        _x("kernel", 10 * k + 5, 3, name=f"k{k % 5}", correlation=k, mine=k, grid=[k, 1, 1]) for k in reversed(range(n))
    ]
    path = tmp_path / "shuffled.json"
    path.write_bytes(_doc(events))
    return path


@pytest.mark.parametrize("shares", [2, 3])
def test_a_preview_made_in_children_reads_each_events_own_args(split, tmp_path, monkeypatch, shares):
    """Made in forked children and sent back without its args reader, the preview reads
    every op's args from the file where that op lies, in the sorted order of its rows,
    as the whole trace does (the args hold the kernel's own number)."""
    monkeypatch.setattr(cp, "processes", lambda: shares)
    path = _shuffled_big(tmp_path)
    got: list[Trace] = []
    full = load_with_preview(path, got.append)
    assert len(got) == 1
    preview = got[0]
    kernels = np.flatnonzero(preview.kind == Kind.KERNEL)
    assert kernels.size == 3000
    # sorted by start, so row r is the kernel written 3000 - r - 1 entries into the kernels
    assert [preview.args_of(int(i))["mine"] for i in kernels] == list(range(3000))
    assert preview.args_of(int(kernels[7]))["grid"] == [7, 1, 1]
    whole = np.flatnonzero(full.kind == Kind.KERNEL)
    assert [full.args_of(int(i))["mine"] for i in whole[:5]] == [0, 1, 2, 3, 4]


def test_no_joining_child_still_hands_the_preview_over(split, tmp_path, monkeypatch):
    """A joining child that cannot be forked: the preview is joined in this process."""
    monkeypatch.setattr(cp, "processes", lambda: 2)
    monkeypatch.setattr(pc, "run_in_child", lambda *a, **k: pc.NO_CHILD)
    got: list[Trace] = []
    load_with_preview(_big(tmp_path), got.append)
    assert len(got) == 1 and len(got[0]) == 4000


def _child_states() -> list[str]:
    """The state letter (``/proc/PID/stat``) of each child of this process."""
    import os
    from pathlib import Path

    pids = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        pids += (task / "children").read_text().split()
    states = []
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:  # gone meanwhile
            continue
        states.append(stat[stat.rindex(")") + 2])
    return states


def test_the_decoders_stay_paused_until_the_preview_is_drawn(split, tmp_path, monkeypatch):
    """A ``preview`` that returns an Event holds the decoders stopped after the
    handover until it is set (the viewer's first frame gets the CPU), but the first:
    it goes on once the preview's shares are in (the join and the first frame are a
    core's work each; it claims the parts the others would have), and the others go
    on once the preview is drawn. The decoders begin with a sleep here, so that they
    are still running when the preview comes (a small file's are often done before
    it on a loaded machine)."""
    import time

    real = cp._file_payload

    def slow(*a, **k):
        time.sleep(1.5)
        return real(*a, **k)

    monkeypatch.setattr(cp, "_file_payload", slow)
    # no bound to reach on a loaded machine before the check below
    monkeypatch.setattr(chrome_preview, "PREVIEW_DRAWN_WAIT_S", 30.0)
    monkeypatch.setattr(chrome_preview, "PREVIEW_PAUSE_MAX_S", 60.0)
    path = _big(tmp_path)
    drawn = threading.Event()
    seen: list[list[str]] = []

    def draw_later() -> None:
        seen.append(_child_states())  # 0.3 s after the handover: decoders resumed then would be sleeping (S)
        drawn.set()

    def preview(trace):
        threading.Timer(0.3, draw_later).start()
        return drawn

    full = load_with_preview(path, preview)
    assert len(full) == 8000 and drawn.is_set()
    assert len(seen) == 1 and "T" in seen[0]
    assert len([state for state in seen[0] if state not in ("T", "Z")]) == 1, seen  # the first decoder, resumed


class _WaitSpy(threading.Event):
    """An Event that records each ``wait(timeout)`` and what it returned."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[tuple[float | None, bool]] = []

    def wait(self, timeout: float | None = None) -> bool:
        got = super().wait(timeout)
        self.waits.append((timeout, got))
        return got


def test_a_preview_never_said_drawn_holds_the_load_a_bounded_time(split, tmp_path, monkeypatch):
    """The load waits for the viewer's word once, with ``PREVIEW_DRAWN_WAIT_S`` as its
    bound, and goes on without it (the wait counted, not timed)."""
    monkeypatch.setattr(chrome_preview, "PREVIEW_DRAWN_WAIT_S", 0.4)
    drawn: list[_WaitSpy] = []

    def preview(trace):
        drawn.append(_WaitSpy())
        return drawn[-1]  # never set

    full = load_with_preview(_big(tmp_path), preview)
    assert len(full) == 8000 and len(drawn) == 1
    assert drawn[0].waits == [(0.4, False)]  # one bounded wait, which ran out


def test_early_load_goes_on_when_the_viewer_has_drawn_the_preview(split, tmp_path, monkeypatch):
    """``EarlyLoad.preview_drawn`` ends the wait at once (with a 30 s bound, a load
    that missed the word would take that long)."""

    from gapscope.parsers.preview import EarlyLoad

    monkeypatch.setattr(chrome_preview, "PREVIEW_DRAWN_WAIT_S", 30.0)
    monkeypatch.setattr(chrome_preview, "PREVIEW_PAUSE_MAX_S", 60.0)
    waits: list[tuple[float | None, bool]] = []
    real_wait = threading.Event.wait

    def wait(self, timeout=None):  # the loader's wait for the word: it was set, so it returned at once
        got = real_wait(self, timeout)
        if timeout == 30.0:
            waits.append((timeout, got))
        return got

    monkeypatch.setattr(threading.Event, "wait", wait)
    path = _big(tmp_path)
    early = EarlyLoad(path, preview=True)
    got: list[Trace] = []
    early.on_preview(lambda t: (got.append(t), early.preview_drawn()))
    full = early(path)
    assert len(got) == 1 and len(full) == 8000
    assert waits == [(30.0, True)]  # the word had come: the wait ended without running out


def test_a_failing_preview_never_fails_the_load(split, tmp_path, monkeypatch):
    path = _big(tmp_path)

    def broken(*a):
        raise RuntimeError("boom")

    monkeypatch.setattr(chrome_preview, "device_preview", broken)
    got: list[Trace] = []
    assert len(load_with_preview(path, got.append)) == 8000
    assert got == []


def test_small_files_get_no_preview(tmp_path, monkeypatch):
    monkeypatch.setattr(cp, "MIN_BYTES", 0)
    monkeypatch.setattr(cp, "enabled", lambda size, held=False: True)
    got: list[Trace] = []
    load_with_preview(_big(tmp_path, 100), got.append)  # well under PREVIEW_MIN_BYTES
    assert got == []


def test_early_load_hands_the_preview_to_whoever_asks(split, tmp_path):
    from gapscope.parsers.preview import EarlyLoad

    path = _big(tmp_path)
    early = EarlyLoad(path, preview=True)
    got: list[Trace] = []
    early.on_preview(got.append)
    full = early(path)
    assert len(got) == 1 and device_ops(got[0]) == device_ops(full)
    late: list[Trace] = []
    early.on_preview(late.append)  # after the load: the whole trace is there, no preview
    assert late == []


async def _until(pilot, cond, seconds: float = 20.0) -> None:
    """Pause the app until ``cond()`` holds (at most ``seconds``)."""
    for _ in range(int(seconds / 0.02)):
        if cond():
            return
        await pilot.pause(0.02)
    assert cond()


def _full_and_preview(tmp_path) -> tuple[Trace, Trace]:
    """The whole trace of ``_big``'s file and the one device preview its load gave."""
    got: list[Trace] = []
    full = load_with_preview(_big(tmp_path), got.append)
    assert len(got) == 1
    return full, got[0]


async def _shown_preview(pilot, app):
    """Wait for the preview screen and return it."""
    from gapscope.tui.screen import TraceScreen

    await _until(pilot, lambda: isinstance(app.screen, TraceScreen))
    assert app.screen.previewing
    return app.screen


async def _whole_shown(pilot, app):
    """Wait for the whole trace's screen to be the one on top and return it."""
    await _until(pilot, lambda: app.trace_screen is not None and app.screen is app.trace_screen)
    return app.screen


def _preview_app(full: Trace, shown: Trace, **kw):
    """An app whose load waits for ``release`` and whose preview ``shown`` comes at
    once (unless ``kw`` gives another ``preview``; ``kw``: more of ``make_app``'s
    arguments)."""
    from gapscope.tui.factory import make_app
    from gapscope.tui.session import ViewOptions

    release = threading.Event()

    def gated(path):
        release.wait(30)
        return full

    kw.setdefault("preview", lambda callback: callback(shown))
    app = make_app("big.json", ViewOptions(loader=gated, **kw))
    return app, release


def test_viewer_shows_the_preview_then_the_whole_trace_at_the_moved_view(split, tmp_path):
    from gapscope.tui.loading import LoadScreen
    from gapscope.tui.panel import GapPanel
    from gapscope.tui.screen import TraceScreen

    full, preview = _full_and_preview(tmp_path)
    app, release = _preview_app(full, preview)

    async def run():
        async with app.run_test(size=(120, 40)) as pilot:
            shown = await _shown_preview(pilot, app)
            assert isinstance(shown, TraceScreen) and shown.previewing
            assert [type(s) for s in app.screen_stack][-2:] == [LoadScreen, TraceScreen]
            assert all(r.kind != "lane" or shown.trace.lanes[r.lane].is_gpu for r in shown.lanes.rows)
            # its gaps come at once (the kernels of _big run 3 us every 10 us: 3999 gaps
            # of 7 us between them), without causes; n and s walk them
            await _until(pilot, lambda: shown.early is not None)
            assert shown.message.startswith("device lanes, gaps first; ")
            assert "│ 3,999 gaps, causes… │" in shown.header_text(120).plain
            await pilot.press("n")
            assert shown.lanes.selected_gap == 0 and int(shown.lanes.gaps.start_ns[0]) == 8_000
            card = app.screen.query_one(GapPanel).plain
            assert card.startswith(
                "Gap on GPU 0\n7.0 µs at 3.0 µs from the device lanes' first event\nCause: not known yet: "
            )
            assert "Previous kernel: k0\nNext op: k1\n" in card
            await pilot.press("1")  # a class key: the classes come with the whole file
            assert shown.message.startswith("causes come with the whole file (")
            await pilot.press("n")
            assert shown.selected_gap_key() == (0, 18_000)
            await pilot.press("plus", "plus")
            moved = shown.lanes.viewport
            release.set()
            await _until(pilot, lambda: app.screen is not shown and isinstance(app.screen, TraceScreen))
            screen = app.screen
            assert screen is app.trace_screen and screen.trace is full and not screen.previewing
            assert not any(isinstance(s, LoadScreen) for s in app.screen_stack)
            await _until(pilot, lambda: screen.diagnosis is not None)
            await pilot.pause()
            vp = screen.lanes.viewport
            assert (vp.start_ns, vp.end_ns) == pytest.approx((moved.start_ns, moved.end_ns), abs=2 * moved.ns_per_cell)
            assert any(r.kind == "lane" and not full.lanes[r.lane].is_gpu for r in screen.lanes.rows)
            # the gap selected on the preview is selected in the whole trace, with its cause
            assert screen.selected_gap_key() == (0, 18_000)
            assert screen.diagnosis.gaps is screen.lanes.gaps
            assert screen.query_one(GapPanel).plain.startswith(f"Gap #{screen.lanes.selected_gap}  GPU 0\n")

    asyncio.run(run())


def test_viewer_says_when_the_preview_is_drawn(split, tmp_path):
    """``preview_drawn`` is called once, after the frame that drew the preview's
    lanes (the load holds its decoders until then)."""
    from gapscope.tui.screen import TraceScreen
    from gapscope.tui.swimlanes import Swimlanes

    full, preview = _full_and_preview(tmp_path)
    renders: list[int] = []
    said: list[tuple] = []
    real = Swimlanes.render_lines

    def counted(self, crop):
        renders.append(1)
        return real(self, crop)

    def drawn() -> None:
        screen = app.screen
        said.append((isinstance(screen, TraceScreen) and screen.trace is preview, len(renders)))

    app, release = _preview_app(full, preview, preview_drawn=drawn)

    async def run():
        async with app.run_test(size=(120, 40)) as pilot:
            await _shown_preview(pilot, app)
            await _until(pilot, lambda: bool(said))
            release.set()
            await _whole_shown(pilot, app)
            await pilot.pause()

    Swimlanes.render_lines = counted
    try:
        asyncio.run(run())
    finally:
        Swimlanes.render_lines = real
    assert len(said) == 1
    on_preview, lanes_rendered = said[0]
    assert on_preview and lanes_rendered >= 1


def test_viewer_lets_the_load_go_on_when_it_does_not_show_the_preview(split, tmp_path):
    """A preview that comes while another screen covers the loading screen (the
    command palette, help) is not shown, and ``preview_drawn`` is called at once: the
    load does not wait for a frame that never comes."""
    from textual.screen import Screen

    full, preview = _full_and_preview(tmp_path)
    handover: list = []
    said: list[int] = []
    # the preview's callback kept, called below
    app, release = _preview_app(full, preview, preview=handover.append, preview_drawn=lambda: said.append(1))

    async def run():
        async with app.run_test(size=(120, 40)) as pilot:
            await _until(pilot, lambda: bool(handover))
            await app.push_screen(Screen())
            handover[0](preview)
            await _until(pilot, lambda: bool(said))
            assert app.preview_screen is None
            release.set()

    asyncio.run(run())
    assert said == [1]


def test_the_previews_gaps_stay_drawn_until_the_causes_come(split, tmp_path, monkeypatch):
    """At the swap the whole trace's screen draws the preview's gaps at once (the same
    gaps: interior_gaps of the same device ops), with the gap selected there and the
    cursor where it was, never "finding gaps…" in between; the causes replace them."""
    import gapscope.tui.factory as factory
    from gapscope.tui.lanes_draw import PENDING_TEXT
    from gapscope.tui.screen import EARLY_MESSAGE

    slow = threading.Event()
    real = factory.default_diagnose
    monkeypatch.setattr(factory, "default_diagnose", lambda t, p=None: (slow.wait(30), real(t, p))[1])
    full, preview = _full_and_preview(tmp_path)
    app, release = _preview_app(full, preview)

    async def run():
        async with app.run_test(size=(120, 40)) as pilot:
            shown = await _shown_preview(pilot, app)
            await pilot.press("n", "n")
            cursor = shown.lanes.cursor_ns
            release.set()
            screen = await _whole_shown(pilot, app)
            await pilot.pause()
            assert screen.trace is full and screen.diagnosing and screen.early is not None
            assert screen.lanes.gaps is screen.early and len(screen.early) == 3999
            assert screen.selected_gap_key() == (0, 18_000)
            assert screen.lanes.cursor_ns == cursor
            assert screen.detail_text().plain.startswith(f"@{(cursor - full.extent_ns[0]) / 1000:.1f} µs ")
            assert "│ 3,999 gaps, causes… │" in screen.header_text(120).plain
            assert screen.message == EARLY_MESSAGE  # not that the gaps are being found
            idle = next(i for i, r in enumerate(screen.lanes.rows) if r.kind == "idle")
            row_text = screen.lanes.render_line(idle + 1 - screen.lanes.top_row).text
            assert row_text.startswith("idle") and "░" in row_text and PENDING_TEXT not in row_text
            slow.set()
            await _until(pilot, lambda: screen.diagnosis is not None)
            await pilot.pause()
            assert screen.selected_gap_key() == (0, 18_000) and screen.lanes.gaps is screen.diagnosis.gaps

    asyncio.run(run())


def test_whole_trace_waits_while_help_covers_the_preview(split, tmp_path):

    full, preview = _full_and_preview(tmp_path)
    app, release = _preview_app(full, preview)

    async def run():
        async with app.run_test(size=(120, 40)) as pilot:
            shown = await _shown_preview(pilot, app)
            await pilot.press("question_mark")
            await pilot.pause()
            helper = app.screen
            assert helper is not shown
            release.set()
            await _until(pilot, lambda: app.session.trace is full)  # the whole trace came meanwhile
            await pilot.pause()
            assert app.screen is helper and app.trace_screen is None  # and waits: the help is not snatched away
            await pilot.press("escape")
            await _whole_shown(pilot, app)
            assert app.screen is app.trace_screen and app.screen.trace is full

    asyncio.run(run())


@pytest.mark.parametrize(
    ("share", "said"),
    [
        (0.45, "device lanes first; reading the rest 45%: CPU lanes, gaps and causes follow"),
        (None, "device lanes first; reading the rest: CPU lanes, gaps and causes follow"),
        (1.0, "device lanes first; building the whole trace: CPU lanes, gaps and causes follow"),
    ],
)
def test_preview_status_says_how_far_the_whole_file_is(share, said):
    from gapscope.analysis.types import Params
    from gapscope.tui.screen import PREVIEW_MESSAGE, TraceScreen, reading_text
    from gapscope.tui.session import Reading, Session
    from tests.test_tui_app import small_trace

    screen = TraceScreen(Session(path=None, params=Params(), preview=small_trace()))
    assert reading_text(PREVIEW_MESSAGE, Reading(share, seen=share is not None)) == said
    assert screen.previewing and screen.diagnosing  # gap keys wait; nothing is diagnosed


def test_preview_status_after_the_decode_says_the_trace_is_built():
    """``load_progress`` has no share while the parts are assembled, after it had
    one: the status line says the whole trace is being built then, not that the file
    is being read; with the preview's gaps drawn, it says so."""
    from gapscope.tui.screen import PREVIEW_GAPS_MESSAGE, PREVIEW_MESSAGE, reading_text
    from gapscope.tui.session import Reading

    said = [
        reading_text(PREVIEW_MESSAGE, Reading(None)),
        reading_text(PREVIEW_MESSAGE, Reading(0.5, seen=True)),
        reading_text(PREVIEW_GAPS_MESSAGE, Reading(None, seen=True)),
    ]
    assert said == [
        "device lanes first; reading the rest: CPU lanes, gaps and causes follow",
        "device lanes first; reading the rest 50%: CPU lanes, gaps and causes follow",
        "device lanes, gaps first; building the whole trace: CPU lanes, causes follow",
    ]


def test_an_object_ending_before_its_cat_key_gives_no_preview_and_no_hang():
    """Damaged text where the walk back to the ``{`` pairs quotes otherwise than the
    forward read (the attacker's reproducer): it looped for ever, the GIL released."""
    import subprocess
    import sys

    code = (
        "from gapscope.parsers.chrome.preview import device_preview_part;"
        'print(device_preview_part(b\'[{"a":"\\\\""}""cat":"kernel"]\'))'
    )
    cp_ = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert cp_.stdout.strip() == "None", cp_.stderr


@pytest.mark.parametrize(
    "events",
    [
        [
            {"ph": "B", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, "ts": 1},
            {"ph": "E", "pid": 0, "tid": 7, "ts": 5},
        ],
        [
            {**_cpu(0, 9), "pid": "CUDA functions", "tid": 0},
            {**_x("kernel", 2, 3), "pid": "CUDA functions", "tid": 0},
        ],
    ],
    ids=["begin_end_slices", "legacy_export"],
)
def test_what_other_events_decide_gives_no_preview(events):
    """A device ``B`` slice ends at an ``E`` without a category; in a legacy export the
    lane decides what an event is: the whole file decides both."""
    assert preview_of(json.dumps(events).encode()) is None


#: An event-shaped object in an array in a CPU op's args: taken for an event (the
#: search cannot tell it from an element of the events array without reading it all).
NESTED = (
    b'[{"ph":"X","name":"c","pid":1,"tid":1,"ts":0,"dur":9,"args":{"l":[{},{"cat":"kernel","ph":"X",'
    b'"name":"fake","pid":0,"tid":7,"ts":3,"dur":1}]},"cat":"cpu_op"},'
    b'{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":10,"dur":2}]'
)


def test_a_preview_that_differs_is_told_apart():
    from gapscope.parsers.model import same_device_ops

    got, full = preview_of(NESTED), load_chrome(NESTED, "t.json")
    assert got is not None and device_ops(got)[("0", "7")][5] == ["fake", "k"]
    assert device_ops(full)[("0", "7")][5] == ["k"]
    assert not same_device_ops(got, full)
    assert same_device_ops(preview_of(_doc(AWKWARD["names"])), load_chrome(_doc(AWKWARD["names"]), "t.json"))


def test_viewer_says_when_the_preview_differed():
    from gapscope.tui.app import PREVIEW_DIFFERED
    from gapscope.tui.screen import TraceScreen

    app, release = _preview_app(load_chrome(NESTED, "t.json"), preview_of(NESTED))

    async def run():
        async with app.run_test(size=(120, 40)) as pilot:
            await _until(pilot, lambda: isinstance(app.screen, TraceScreen))
            shown = app.screen
            # the preview has a gap the whole file has not (after the "fake" kernel of
            # an array in args): selected there, it is not looked for in the whole trace
            await pilot.press("n")
            assert shown.selected_gap_key() == (0, 4_000)
            release.set()
            await _whole_shown(pilot, app)
            await _until(pilot, lambda: app.screen.is_mounted and app.screen.message != "")
            assert app.screen.message == PREVIEW_DIFFERED
            assert app.screen.select_key is None

    asyncio.run(run())


class _Handover:
    """A preview source that hands its trace over once and keeps no reference to it
    (as ``EarlyLoad`` drops its own), and says when it has."""

    def __init__(self, trace: Trace) -> None:
        self.trace: Trace | None = trace
        self.handed = threading.Event()

    def __call__(self, callback) -> None:
        trace, self.trace = self.trace, None
        callback(trace)
        self.handed.set()


def test_whole_trace_right_after_the_preview_before_its_screen_is_up(split, tmp_path):
    """The load ending just after the preview was posted (before the preview screen
    was composed) once crashed the viewer (its view was asked of unmounted lanes)."""
    from gapscope.tui.factory import make_app
    from gapscope.tui.session import ViewOptions

    full, preview = _full_and_preview(tmp_path)
    for _ in range(3):
        source = _Handover(preview)
        app = make_app("big.json", ViewOptions(loader=lambda p, s=source: (s.handed.wait(30), full)[1], preview=source))

        async def run(app=app):
            async with app.run_test(size=(120, 40)) as pilot:
                await _whole_shown(pilot, app)
                await pilot.pause()
                assert app.screen.trace is full and app.preview_screen is None

        asyncio.run(run())


def test_the_preview_is_freed_once_replaced(split, tmp_path):
    """The whole trace's diagnosis freezes what is alive into the permanent GC
    generation; the preview it replaced, garbage held by its widgets' cycles, must be
    collected first."""
    import gc
    import weakref

    from gapscope.tui.factory import make_app
    from gapscope.tui.screen import TraceScreen
    from gapscope.tui.session import ViewOptions

    full, preview = _full_and_preview(tmp_path)
    source = _Handover(preview)
    del preview
    gone = weakref.ref(source.trace)
    release = threading.Event()
    app = make_app("big.json", ViewOptions(loader=lambda p: (release.wait(30), full)[1], preview=source))

    async def run():
        async with app.run_test(size=(120, 40)) as pilot:
            await _until(pilot, lambda: isinstance(app.screen, TraceScreen))
            release.set()
            await _until(pilot, lambda: app.trace_screen is not None and not app.trace_screen.diagnosing)
            # a worker thread may still hold it a moment on a busy machine; collecting
            # frees only what was not frozen, so a frozen preview still fails here
            await _until(pilot, lambda: gc.collect() >= 0 and gone() is None, seconds=5.0)

    try:
        asyncio.run(run())
    finally:
        gc.unfreeze()


def test_an_open_prompt_on_the_preview_holds_the_whole_trace_back(split, tmp_path):

    full, preview = _full_and_preview(tmp_path)
    app, release = _preview_app(full, preview)

    async def run():
        async with app.run_test(size=(120, 40)) as pilot:
            shown = await _shown_preview(pilot, app)
            await pilot.press("slash", "k")
            assert shown.prompt_open
            release.set()
            await _until(pilot, lambda: app.session.trace is full)
            await pilot.pause()
            assert app.screen is shown and app.trace_screen is None  # the typed text is not thrown away
            # and the status line says what it waits for (it said the trace was being built)
            from gapscope.tui.screen import READING_WAITING

            await _until(pilot, lambda: READING_WAITING in shown.message)
            await pilot.press("escape")
            await _whole_shown(pilot, app)
            assert app.screen.trace is full

    asyncio.run(run())


def test_no_wait_for_a_preview_once_the_decoders_are_done(split, tmp_path, monkeypatch):
    """A cold page cache can make the preview's search slower than the decode itself:
    then the load goes on without it instead of waiting for it."""
    path = _big(tmp_path)
    monkeypatch.setattr(cp.FileParts, "progress_bytes", lambda self: (1, 1))
    got: list[Trace] = []
    assert len(load_with_preview(path, got.append)) == 8000
    assert got == []


def test_a_child_given_up_is_not_waited_for(tmp_path, forks):
    """Given up, the child is killed and reaped before it could finish: its mark of a
    finished run is never written (counted, not timed)."""
    import time

    mark = tmp_path / "finished"

    def slow():
        time.sleep(20)
        mark.write_text("1")
        return 1

    asked: list[bool] = []

    def give_up() -> bool:
        asked.append(True)
        return len(asked) >= 3

    assert pc.run_in_child(slow, 1 << 10, 30.0, give_up=give_up) is None
    assert len(asked) >= 3 and len(forks) == 1 and _reaped(forks) and not mark.exists()
    assert pc.run_in_child(lambda: 7, 1 << 10, 30.0, give_up=lambda: False) == 7


def test_damaged_texts_give_no_preview_or_one_of_device_events():
    """Mutated texts (bytes dropped, replaced, inserted, at random; seeded): the search
    gives None or whole bracketed objects in order, the array of exactly them; a share
    gives None or the decoded events of the device categories, never a crash; the
    read in place (``device_scan``) gives None or what reading that array gives."""
    import random

    base = _doc(
        [
            _x("kernel", 2, 1, grid=[1, 2, 3], device=0, stream=7, correlation=5, note='a "}" {'),
            _cpu(0, 9, args={"which": "cat", "l": [1, {"a": "kernel"}]}),
            _x("gpu_memset", 6, 2, name="Memset (Device)", bytes=64, stream=20),
        ],
        compact=True,
    )
    rng = random.Random(15)
    alphabet = b'{}[]",:\\ ak01'
    seen_json = seen_part = seen_scan = 0
    for _ in range(3000):
        t = bytearray(base)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(t))
            op = rng.randrange(3)
            if op == 0:
                del t[i]
            elif op == 1:
                t[i] = rng.choice(alphabet)
            else:
                t.insert(i, rng.choice(alphabet))
        text = bytes(t)
        part = device_preview_part(text)
        if part is not None:
            seen_part += 1
            assert set(part.scanned.cats) <= {"kernel", "gpu_memset"}
            assert part.scanned.n == part.spans.shape[0]
        begin, end = text.find(b"[") + 1, max(text.rfind(b"]"), 1)
        if begin < 1 or end < begin:
            continue
        got = fastscan.device_event_spans(text, begin, end, chrome_preview.DEVICE_CATS)
        if got is None:
            continue
        doc, spans = got
        scanned = fastscan.device_scan(text, begin, end, chrome_preview.DEVICE_CATS, loader._DECODERS[False][0], False)
        if scanned is not None:  # read in place: what the copy read gives
            seen_scan += 1
            want = copied_then_read(text, begin, end)
            assert want is not None and same_read(scanned, want)
        pieces = [text[a:b] for a, b in spans.tolist()]
        assert doc == b"[" + b",".join(pieces) + b"]"
        assert all(p[:1] == b"{" and p[-1:] == b"}" for p in pieces)
        assert all(begin <= a < b <= end for a, b in spans.tolist())
        assert all(b0 <= a1 for (_, b0), (a1, _) in zip(spans.tolist(), spans.tolist()[1:]))
        try:
            json.loads(doc)
            seen_json += 1
        except ValueError:
            pass  # damage inside an object: the share's decode refuses it (above)
    assert seen_json > 1000 and seen_part > 1000 and seen_scan > 1000


def test_shares_cut_inside_a_string_give_the_whole_preview_or_none():
    """The runs are cut at text that looks like an element boundary (``}, {``), which
    a name can hold: a cut inside one leaves its event unplaceable, so the preview is
    then None, never a preview with an event lost or made up. Kernel names full of
    such text, cut at every share count up to 40."""
    tricky = "void f<{lambda()#1}, {lambda()#2}>"
    events = []
    for k in range(60):
        events.append(_cpu(10 * k, 4, name=f"op {{a}}, {{b}} {k}"))
        events.append(_x("kernel", 10 * k + 5, 3, name=f"{tricky} {k % 3}", correlation=k, grid=[{"x": 1}, {"y": 2}]))
    for compact in (False, True):
        data = _doc(events, compact)
        want = device_ops(load_chrome(data, "t.json"))
        made = 0
        for k in range(1, 41):
            got = preview_of(data, k=k)
            if got is not None:
                made += 1
                assert device_ops(got) == want, (compact, k)
        assert made >= 1  # one share always has a preview


def test_a_previews_args_are_read_from_the_file_where_the_shares_found_them(split, tmp_path):
    path = _big(tmp_path, 300)
    got: list[Trace] = []
    full = load_with_preview(path, got.append)
    (pv,) = got
    kernels = np.flatnonzero(pv.kind == int(Kind.KERNEL))
    whole = {int(full.start_ns[i]): full.args_of(int(i)) for i in np.flatnonzero(full.kind == int(Kind.KERNEL))}
    assert kernels.size == 300
    for i in kernels[::37].tolist():
        assert pv.args_of(i) == whole[int(pv.start_ns[i])] and "correlation" in pv.args_of(i)


def test_children_run_at_once_and_answer_in_order(tmp_path):
    import os as os_
    import time

    def nap(v):
        """Mark this child started, then wait (20 s at most) for all four marks: only
        children that run at the same time all see them (one after another, the first
        would wait in vain)."""
        (tmp_path / f"started{v}").touch()
        for _ in range(2000):
            if len(list(tmp_path.glob("started*"))) == 4:
                return v, os_.getpid(), True
            time.sleep(0.01)
        return v, os_.getpid(), False

    got = pc.run_in_children([lambda v=v: nap(v) for v in range(4)], 1 << 10, 60.0)
    assert [v for v, _, _ in got] == [0, 1, 2, 3]
    assert len({pid for _, pid, _ in got}) == 4 and os_.getpid() not in {pid for _, pid, _ in got}
    assert [all_seen for _, _, all_seen in got] == [True] * 4  # at once, not one after another

    def boom():
        raise RuntimeError("a share failed")

    assert pc.run_in_children([lambda: 1, boom, lambda: 3], 1 << 10, 30.0) is None
    assert pc.run_in_children([], 1 << 10, 30.0) == []


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["wide", "narrow"])
def test_the_whole_trace_keeps_the_order_card_and_steps_set_on_the_preview(split, tmp_path, size):
    """``s`` (largest first), ``p`` (the card hidden, or expanded when narrow) and the
    protocol step that ``s`` ticks, set on the preview, hold on the whole trace's
    screen: the next ``n`` goes on largest first from the selected gap."""
    from gapscope.tui.navigation import SIZE

    full, preview = _full_and_preview(tmp_path)
    app, release = _preview_app(full, preview)

    async def run():
        async with app.run_test(size=size) as pilot:
            shown = await _shown_preview(pilot, app)
            await _until(pilot, lambda: shown.early is not None)
            await pilot.press("s", "n", "p")
            mode, key = shown.panel_mode, shown.selected_gap_key()
            assert shown.order_mode == SIZE and 3 in shown.done
            assert mode == ("hidden" if size[0] >= 100 else "expanded")
            release.set()
            screen = await _whole_shown(pilot, app)
            await pilot.pause()
            assert screen.panel_mode == mode and screen.order_mode == SIZE and 3 in screen.done
            assert screen.selected_gap_key() == key
            await _until(pilot, lambda: screen.diagnosis is not None)
            await pilot.pause()
            assert screen.panel_mode == mode
            g = screen.diagnosis.gaps
            now = screen.lanes.selected_gap
            await pilot.press("n")
            nxt = screen.lanes.selected_gap
            order = screen.diagnosis.order_by_size().tolist()
            assert order.index(nxt) == order.index(now) + 1  # largest first, on from the selected gap
            assert int(g.end_ns[nxt] - g.start_ns[nxt]) <= int(g.end_ns[now] - g.start_ns[now])

    asyncio.run(run())


def test_a_share_without_a_preview_ends_the_wait_at_once(tmp_path, forks):
    """The first share to answer None ends it: no waiting for the slower ones (the
    decoders are paused meanwhile)."""
    import time

    mark = tmp_path / "finished"

    def slow():
        time.sleep(20)
        mark.write_text("1")
        return 1

    got = pc.run_in_children([slow, lambda: None], 1 << 10, 30.0, stop=lambda v: v is None)
    assert got is None and len(forks) == 2 and _reaped(forks)
    assert not mark.exists()  # the slow share was killed, not waited for
    assert pc.run_in_children([lambda: 2, lambda: 3], 1 << 10, 30.0, stop=lambda v: v is None) == [2, 3]


def test_the_decoders_pause_for_the_preview_and_go_on_after(split, tmp_path, monkeypatch):
    """While the preview's children search, the decoders are stopped (SIGSTOP), and
    continued after: no lasting loss of priority (niced decoders kept it for the whole
    load). They are continued after ``PREVIEW_PAUSE_MAX_S`` at the latest, even while
    the preview still runs."""
    import time

    seen: list[str] = []
    real = pc.run_in_children

    def watching(*a, **k):
        if k.get("stop") is not None:  # the preview's shares (run_in_child calls it too)
            (parts,) = cp._ACTIVE
            for _ in range(100):  # a stop takes effect when the signal is delivered
                states = set()
                for c in parts.children:
                    with open(f"/proc/{c.pid}/stat") as fh:
                        states.add(fh.read().rsplit(")", 1)[1].split()[0])
                if states <= {"T", "Z"}:  # stopped (or done already)
                    break
                time.sleep(0.01)
            seen.append("".join(sorted(states)))
        return real(*a, **k)

    monkeypatch.setattr(pc, "run_in_children", watching)
    path = _big(tmp_path)
    got: list[Trace] = []
    full = load_with_preview(path, got.append)
    assert seen and set(seen[0]) <= {"T", "Z"}  # stopped while the shares ran
    assert len(got) == 1 and device_ops(got[0]) == device_ops(full)

    # a preview slower than the pause: the decoders go on without it, while it still runs
    monkeypatch.setattr(chrome_preview, "PREVIEW_PAUSE_MAX_S", 0.2)
    resumed: list[set[str]] = []

    def slow_preview(*a, **k):
        if k.get("stop") is None:  # not the preview's shares
            return real(*a, **k)
        (parts,) = cp._ACTIVE
        for _ in range(1000):  # 10 s at most: the timer continues them after 0.2 s
            states = set()
            for c in parts.children:
                try:
                    with open(f"/proc/{c.pid}/stat") as fh:
                        states.add(fh.read().rsplit(")", 1)[1].split()[0])
                except FileNotFoundError:
                    states.add("gone")
            if "T" not in states:
                break
            time.sleep(0.01)
        resumed.append(states)
        return None

    monkeypatch.setattr(pc, "run_in_children", slow_preview)
    assert len(load_with_preview(path, got.append)) == 8000
    assert len(resumed) == 1 and "T" not in resumed[0]  # continued before the preview ended


def test_a_file_mostly_of_device_events_gets_no_preview(split, tmp_path):
    """A preview of a file that is mostly device events is most of the load again."""
    events = [_x("kernel", 10 * k, 3, name=f"k{k % 5}", correlation=k) for k in range(4000)]
    path = tmp_path / "kernels.json"
    path.write_bytes(_doc(events))
    got: list[Trace] = []
    assert len(load_with_preview(path, got.append)) == 4000
    assert got == []
    assert chrome_preview._mostly_device(lambda off, n: path.read_bytes()[off : off + n], path.stat().st_size)
    big = _big(tmp_path)  # half device events: previewed (above)
    assert not chrome_preview._mostly_device(lambda off, n: big.read_bytes()[off : off + n], big.stat().st_size)


def test_the_go_to_prompt_offers_gap_numbers_only_once_they_are_known(split, tmp_path):
    """On the preview gaps have no numbers yet (they come with the causes): its ``g``
    prompt offers times only; the whole trace's, once diagnosed, gap numbers too."""
    from textual.widgets import Input

    full, preview = _full_and_preview(tmp_path)
    app, release = _preview_app(full, preview)

    async def run():
        async with app.run_test(size=(120, 40)) as pilot:
            shown = await _shown_preview(pilot, app)
            await pilot.press("g")
            said = shown.query_one("#prompt", Input).placeholder
            assert said == "go to time (1.5ms, 250us from the device lanes' first event)"
            await pilot.press("escape")
            release.set()
            screen = await _whole_shown(pilot, app)
            await _until(pilot, lambda: screen.diagnosis is not None)
            await pilot.press("g")
            assert (
                screen.query_one("#prompt", Input).placeholder
                == "go to time (1.5ms, 250us from trace start) or gap (#12)"
            )

    asyncio.run(run())
