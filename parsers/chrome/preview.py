"""The device preview of a large Chrome-trace file: its device lanes alone, read while
the whole file is decoded, for a viewer to draw first.

``while_decoding(on_preview)`` is the hook a viewer's load passes to
``gapscope.parsers.detect.load`` (``gapscope.parsers.preview.EarlyLoad`` does): the
loader calls it with the children decoding the file, and it pauses them while forked
children of its own search the file for the device events (``device_preview_part``,
``device_preview``), hands the preview on, and lets them go on. The loader knows
nothing of previews: only that something may run while its children decode.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import mmap
import os
import re
import threading
import time
import typing
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import numpy as np

from gapscope.parsers.chrome import child, fastscan

# the loader's own decode and build steps, which a preview takes on a part of the file
from gapscope.parsers.chrome.decode import _DECODERS, _raw_ts
from gapscope.parsers.chrome.lazy_args import EventArgs, EventText
from gapscope.parsers.chrome.loader import Input, build, header_of
from gapscope.parsers.chrome.parallel import fork as chrome_parallel
from gapscope.parsers.chrome.parallel.cut import chunk_spans, find_cuts
from gapscope.parsers.chrome.parallel.joined import JoinedEvents, SerialFallback
from gapscope.parsers.chrome.scan import PH_FLOW, PH_OTHER, PH_X, EventColumns, merge_all
from gapscope.parsers.errors import TraceFormatError
from gapscope.parsers.json.mapped import MappedText, file_stamp
from gapscope.parsers.json.scan import Text, text_start
from gapscope.parsers.kinds import CAT_KIND
from gapscope.parsers.model import Kind, SortedArgs, Trace

__all__ = [
    "while_decoding",
    "show_preview",
    "device_preview",
    "device_preview_part",
    "PreviewPart",
    "DEVICE_CATS",
]


#: Categories whose events are drawn on device lanes: device ops, GPU-side ranges and
#: Kineto's ``cuda_sync`` records (``parsers.kinds.CAT_KIND``).
DEVICE_CATS = tuple(
    c.encode()
    for c, k in CAT_KIND.items()
    if k in (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.GPU_ANNOTATION, Kind.SYNC_MARKER)
)
#: Files this large get a device preview when one is asked for (smaller ones load in
#: well under a second whole).
PREVIEW_MIN_BYTES = 64 << 20
#: The decoders are stopped (SIGSTOP) while the preview's children search and the
#: preview is built and handed on, so that those and the viewer's start-up get the
#: CPU first, and continued (SIGCONT) when the preview is done or after this many
#: seconds at most: a pause, never a lasting
#: loss of priority (niced decoders kept their niceness for the whole load: with two
#: busy loops started just before, a 1M load took 31 s instead of 2.4 s).
PREVIEW_PAUSE_MAX_S = 2.0
#: The longest the decoders stay paused after the preview is handed on, for the
#: receiver to draw it (``while_decoding``'s ``on_preview``): its first frame alone on a
#: core, not beside two decoders. At 1M events on 2 cores the first swimlanes came
#: 0.70 s after the command against 0.75 s when the decoders went on at the handover
#: (10 alternating rounds of bench/tui.py's command; the floor's decode 1.00 s), the
#: causes no later (2.63 s both).
PREVIEW_DRAWN_WAIT_S = 0.5
#: No preview when more than this share of the events sampled (``_mostly_device``)
#: are device events: the preview would be most of the load again (a file of 2.2M
#: kernels alone loaded in 3.7-5.8 s with one, 2 s without). Kineto traces: about a third.
PREVIEW_MAX_DEVICE_SHARE = 0.6
#: The preview is given up (its child killed) after this many seconds plus one per
#: this many bytes of the file, and after ``PREVIEW_MAX_WAIT_S`` at most: a later one
#: would come too near the whole trace, which waits for it.
PREVIEW_WAIT_S = 1.0
PREVIEW_BYTES_PER_S = 100 << 20
PREVIEW_MAX_WAIT_S = 10.0
#: Room for a share's columns in its child's shared map beyond a share of the file's
#: bytes (columns take far less than their text; a larger answer comes by the pipe).
PREVIEW_RESULT_SLACK_BYTES = 16 << 20


_CAT_VALUE = re.compile(rb'"cat"\s*:\s*"([^"\\]*)"')


def _mostly_device(read_at, size: int) -> bool:
    """Whether more than ``PREVIEW_MAX_DEVICE_SHARE`` of the events in
    ``chrome_parallel.SAMPLE_WINDOWS`` windows spread over a text of ``size`` bytes
    are of ``DEVICE_CATS`` (``read_at(offset, n)`` gives bytes); a performance guess
    only, as ``chrome_parallel.mostly_parent_work`` is."""
    cats = chrome_parallel.sampled(_CAT_VALUE, read_at, size)
    if len(cats) < chrome_parallel.MIN_SAMPLED:
        return False
    device = set(DEVICE_CATS)
    return sum(1 for c in cats if c in device) > PREVIEW_MAX_DEVICE_SHARE * len(cats)


@dataclasses.dataclass
class PreviewPart:
    """One share of a device preview (``device_preview_part``): the columns of the
    device events of one run of the events array (``scanned``; ``n`` events) and its
    flow and other events (structs), where each event lies in the text (``spans``:
    int64[n, 2], the offset of its ``{`` and one past its ``}``), whether ``ts`` is
    kept as text, the offset of the text's first ``{``/``[`` (``root``), the object
    form's header as ``_header`` gives it ({} for the array form), and the plan of the
    runs (``chrome_cut.find_cuts``: begin, end, cuts) every share must agree on."""

    scanned: EventColumns
    flows: Sequence
    others: list
    spans: np.ndarray
    raw_ts: bool
    root: int
    header: dict[str, Any]
    plan: tuple


def device_preview_part(data: Text | mmap.mmap, j: int = 0, k: int = 1) -> PreviewPart | None:
    """Share ``j`` of ``k`` of the device preview of ``data``: the events of
    ``DEVICE_CATS`` in the ``j``-th of ``k`` runs of whole elements of the events array
    (``chrome_cut.find_cuts``, about equal in bytes; a share past the runs there are
    is empty), found by searching the text for their ``"cat"`` key, not by reading
    every event, and read into columns where they lie (``fastscan.device_scan``); an
    event outside the C scanner's subset has them copied out and decoded
    (``fastscan.device_event_spans``, ``fastscan.read_part``). The shares are meant
    to run at once, one per forked child (``show_preview``); ``device_preview`` joins them.

    None when the scanner is not available, no events array is found, a category is
    escaped, an object cannot be placed (a cut inside a string, which the search
    cannot tell from a boundary, ends here: the event it splits cannot be placed), or
    the events do not decode. Reads ``data`` through the buffer protocol: for a map of
    a file, run it in a forked child (``chrome.child.run_in_children``). Never
    raises on bad text."""
    if not fastscan.available() or not 0 <= j < k:
        return None
    try:
        root = text_start(data)
        raw_ts = _raw_ts(data, root)
        planned = find_cuts(data, root, raw_ts, k)
        if planned is None:
            return None
        begin, end, cuts, header = planned
        runs = chunk_spans(begin, end, cuts)
        lo, hi = (runs[j][0] + 1, runs[j][1]) if j < len(runs) else (begin, begin)
        list_decoder, x_class = _DECODERS[raw_ts]
        read = fastscan.device_scan(data, lo, hi, DEVICE_CATS, list_decoder, raw_ts)
        if read is not None:
            ec, flows, others, spans = read
        else:  # an event the scanner does not take (or none to place): copied out for msgspec
            got = fastscan.device_event_spans(data, lo, hi, DEVICE_CATS)
            if got is None:
                return None
            doc, spans = got
            ec, flows, others, _ = fastscan.read_part(doc, list_decoder, x_class, raw_ts)
    except (ValueError, msgspec.MsgspecError, RecursionError):
        return None
    if ec.n != spans.shape[0]:
        return None
    return PreviewPart(
        ec, flows, others, spans, raw_ts, root, header_of(header) if header is not None else {}, (begin, end, cuts)
    )


def device_preview(shares: Sequence[PreviewPart | None], data: Text, path: str) -> Trace | None:
    """The ``Trace`` of the device events of the file ``path`` that the shares of
    ``device_preview_part`` (all ``k`` of them, in order) found in its text ``data``,
    for a viewer to draw while the whole file is read. It has no CPU lanes and no
    launch links, no source lines and no warnings (those of the whole trace are the
    file's); ``args_of`` reads the events from ``data`` where the shares found them.

    Its device lanes and their ops are the whole trace's where the device-category
    ``X`` events decide them, as in what torch.profiler writes (every corpus trace
    with device events: ``tests/test_device_preview.py``). Where other events have a
    say they can differ: an event of another category on a stream, GPU ops on a CPU
    thread (split off there), times judged absurd against the whole trace, an
    event-shaped object in an array in ``args`` or in an array under a key after the
    events array (``chrome_cut.array_bounds`` can take that array's ``]`` for the
    events array's), a ``"cat"`` key spelled with an escape (``"c\\u0061t"``: not
    found), a damaged text. A viewer says so when
    the whole trace comes (``gapscope.tui.app``). None when a share is None or they
    planned differently, when there is no device event, for a legacy export or device
    slices of other phases (the whole file decides those), or when the events do not
    load; never raises on bad text."""
    if not shares or any(p is None for p in shares):
        return None
    parts = typing.cast(Sequence[PreviewPart], shares)
    first = parts[0]
    if any((p.raw_ts, p.root, p.plan) != (first.raw_ts, first.root, first.plan) for p in parts):
        return None
    list_decoder, x_class = _DECODERS[first.raw_ts]
    was = gc.isenabled()
    gc.disable()
    try:
        ec = merge_all([p.scanned for p in parts])
        if ec is None or ec.n == 0:
            return None
        if ec.legacy or bool((ec.code != PH_X).any()):
            return None  # a legacy export's lanes, or slices whose ends other events give: the whole file decides
        spans = np.concatenate([p.spans for p in parts]) if len(parts) > 1 else first.spans
        flows = [e for p in parts for e in p.flows]
        others = [e for p in parts for e in p.others]
        # the events' own spans in the file's text: their args are read there; lines
        # and warnings are never counted for a preview
        text = EventText(data, first.root, ec.n, np.ascontiguousarray(spans[:, 0]), np.ascontiguousarray(spans[:, 1]))
        events = JoinedEvents(
            ec.code, {PH_FLOW: flows, PH_OTHER: others}, {PH_FLOW: [], PH_OTHER: []}, first.raw_ts, x_class, text
        )
        return build(Input(path, events, text, header=first.header, x_class=x_class, scanned=ec, excerpt=True))
    except (SerialFallback, TraceFormatError, ValueError, msgspec.MsgspecError):
        return None
    finally:
        if was:
            gc.enable()


def while_decoding(on_preview: Callable[[Trace], object]) -> Callable[[chrome_parallel.FileParts, str], None]:
    """The hook ``detect.load(path, while_decoding=...)`` takes that hands the device
    preview of a large Chrome file to ``on_preview(trace)`` while the file's children
    decode it (``show_preview``); ``on_preview`` may return a ``threading.Event`` that
    the receiver sets once the preview is drawn: the decoders stay paused until then
    (``PREVIEW_DRAWN_WAIT_S`` at most). Called, in the loading thread, only for a file
    of ``PREVIEW_MIN_BYTES`` or more that is not mostly device events
    (``_mostly_device``), when the C scanner is there."""

    def hook(parts: chrome_parallel.FileParts, path: str) -> None:
        if not fastscan.available() or parts.size < PREVIEW_MIN_BYTES:
            return
        try:
            if _mostly_device(lambda off, n: os.pread(parts.fd, n, off), parts.size):
                return
        except OSError:
            return
        show_preview(parts, path, on_preview)

    return hook


def show_preview(parts: chrome_parallel.FileParts, path: str, on_preview: Callable[[Trace], object]) -> None:
    """``on_preview(trace)`` with the device preview of the file the children of
    ``parts`` decode, when there is one; nothing otherwise, nor when the decoders are
    done before it (a cold page cache), nor after ``PREVIEW_MAX_WAIT_S``.

    Made in forked children on their own maps, off this interpreter, which is busy
    with the viewer's imports and first frames meanwhile: the shares
    (``device_preview_part``, one per decoder, one child each), then joined
    (``device_preview``) in a child of its own, forked once they are here (it inherits
    them); the trace comes back without its args reader (``_shipped``), given one on
    the text mapped here (``_landed``). Joined here when no child can be forked."""
    k = max(1, len(parts.children))

    def work(j: int) -> PreviewPart | None:
        with mmap.mmap(parts.fd, 0, access=mmap.ACCESS_READ) as view:
            if file_stamp(os.fstat(parts.fd)) != parts.stamp:
                return None
            return device_preview_part(view, j, k)

    deadline = time.monotonic() + min(PREVIEW_MAX_WAIT_S, PREVIEW_WAIT_S + parts.size / PREVIEW_BYTES_PER_S)
    result_bytes = parts.size // k + PREVIEW_RESULT_SLACK_BYTES

    def decoded() -> bool:  # the decoders are done: the whole trace is near, a preview is not worth waiting for
        done, total = parts.progress_bytes()
        return total > 0 and done >= total

    parts.pause()  # the preview's children and the viewer first; continued below, or by the timer
    timer = threading.Timer(PREVIEW_PAUSE_MAX_S, parts.resume)
    timer.daemon = True
    timer.start()
    try:
        got = child.run_in_children(
            [functools.partial(work, j) for j in range(k)],
            result_bytes,
            deadline - time.monotonic(),
            copy=False,
            give_up=decoded,
            stop=lambda share: share is None,  # one share without a preview: none, at once
        )
        if not isinstance(got, list) or any(p is None for p in got):
            return
        try:
            if file_stamp(os.fstat(parts.fd)) != parts.stamp:
                return
            text = MappedText(parts.fd, 0, access=mmap.ACCESS_READ)  # what the preview's args are read from
        except (OSError, ValueError):
            return
        shares = typing.cast(list[PreviewPart], got)
        # the join below is one child, and the preview's first frame one thread here:
        # a core is free meanwhile, and a decoder that claims its parts as it goes
        # (``chrome_parallel.claim_pipe``) takes there what the others would have
        parts.resume(1)
        shipped = child.run_in_child(
            lambda: _shipped(device_preview(shares, text, path)),
            result_bytes,
            max(0.0, deadline - time.monotonic()),
            copy=False,
            give_up=decoded,
        )
        if shipped is child.NO_CHILD:  # joined here, then
            shipped = _shipped(device_preview(shares, text, path))
        landed = _landed(shipped, text)
        if landed is not None:
            # still paused: handing the preview on is the viewer's next frame, which
            # the decoders would share the CPU with; until it is drawn, when the
            # receiver says when (an Event)
            drawn = on_preview(landed)
            if isinstance(drawn, threading.Event):
                drawn.wait(PREVIEW_DRAWN_WAIT_S)
    finally:
        timer.cancel()
        parts.resume()


def _shipped(trace: Trace | None) -> tuple | None:
    """``trace`` (a ``device_preview``) to send from a child: without its args reader,
    whose text is a map of the file, as (trace, root, n, starts, ends, src) of its
    ``EventArgs`` (``src`` in the trace's order: a ``SortedArgs`` is undone); None for
    None."""
    if trace is None:
        return None
    args = trace._args_loader
    order = None
    if isinstance(args, SortedArgs):
        order, args = args.order, args.inner
    if not isinstance(args, EventArgs):
        return None
    t = args.text
    src = args.src if order is None else np.asarray(args.src)[order]
    return dataclasses.replace(trace, _args_loader=None), t.root, t.n, t.starts, t.ends, src


def _landed(shipped: object, text: Text) -> Trace | None:
    """The trace of ``_shipped``, with its args read from ``text`` (the file's text,
    as the child read it); None for anything else (a failed child: None or
    ``NO_CHILD``)."""
    if not isinstance(shipped, tuple) or len(shipped) != 6 or not isinstance(shipped[0], Trace):
        return None
    trace, root, n, starts, ends, src = shipped
    return dataclasses.replace(trace, _args_loader=EventArgs(EventText(text, root, n, starts, ends), src))
