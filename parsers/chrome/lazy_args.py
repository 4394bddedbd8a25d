"""Where each event lies in the JSON text: lines for warnings, full ``args`` on demand.

The fast decode keeps only timeline fields, so the detail view's ``args`` and the
line numbers of warnings are read back from the text, lazily: event ``k`` starts at
the ``{`` just before its ``"ph"`` key when every event starts with that key and the
text has exactly one per event (one vectorised scan), else at the element the
bracket scanner finds (exact, slower).
"""

from __future__ import annotations

import json

import msgspec
import numpy as np

from gapscope.parsers.chrome import child
from gapscope.parsers.chrome.text import key_positions
from gapscope.parsers.json.boundaries import ends_before, find_events_array, first_key_starts, scan_elements
from gapscope.parsers.json.scan import SENTINEL_VALUES, LineIndex, Text

__all__ = ["EventText", "EventArgs"]


class EventText:
    """Byte spans, lines and args of the ``n`` events of a Chrome-trace text.

    ``data``: the (possibly repaired) JSON text the events were decoded from, or a
    read-only map of the file (``chrome_parallel.MappedText``: read only while its
    ``unchanged()`` holds);
    ``root``: offset of its first ``{``/``[``; ``starts``/``ends``: exact element spans
    when already known (tolerant path).
    """

    def __init__(
        self,
        data: Text,
        root: int,
        n: int,
        starts: np.ndarray | None = None,
        ends: np.ndarray | None = None,
        repaired: bool = False,
    ) -> None:
        self.data = data
        self.repaired = repaired
        self.root = root
        self.n = n
        self.starts = starts
        self.ends = ends
        self.lines = LineIndex(data)

    def begin(self) -> int:
        b = find_events_array(self.data, self.root)
        return b if b >= 0 else self.root

    def spans(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Exact (starts, ends) of every event from the bracket scanner (None when the
        scanner does not find one element per event)."""
        if self.starts is not None and self.ends is not None:
            return self.starts, self.ends
        begin = find_events_array(self.data, self.root)
        if begin < 0:
            return None
        scan = scan_elements(self.data, begin)
        if scan.starts.size != self.n:
            return None
        self.starts, self.ends = scan.starts, scan.ends
        return scan.starts, scan.ends

    def _first_key_starts(self, ph: np.ndarray) -> np.ndarray | None:
        """Offsets of the ``{`` right before each ``"ph"`` key, when ``"ph"`` is the
        first key of every event (only whitespace between, at most 64 bytes of it) and
        each such ``{`` opens an element of an array (``[`` or ``,`` before it); else
        None. A ``"ph"`` of a nested object (``"args": {"ph": 1}``) or of a header
        object after the events is no event's, and one standing in for a ``"ph"`` the
        key scan missed (``"\u0070h"``) would shift every later event's args."""
        return first_key_starts(self.data, ph)

    def starts_all(self) -> np.ndarray | None:
        """Exact offsets of every event's ``{`` (cached): from the ``"ph"`` keys when
        each event starts with it (one vectorised scan), else the bracket scanner. On
        a map of a file the scan runs in a forked child (``_guarded``)."""
        if self.starts is None:
            got = self._guarded(self._find_starts)
            if got is not None:
                self.starts, ends = got
                if ends is not None:
                    self.ends = ends
        return self.starts

    def _find_starts(self) -> tuple[np.ndarray, np.ndarray | None] | None:
        """(starts, ends or None) of every event, or None (see ``starts_all``)."""
        ph = key_positions(self.data, b'"ph"', self.begin())
        st = self._first_key_starts(ph) if ph.size == self.n else None
        if st is not None:
            return st, None
        sp = self.spans()
        return None if sp is None else (sp[0], sp[1])

    def _guarded(self, work):
        """``work()``, which scans ``self.data`` through the buffer protocol: here for
        text in memory; for a map of a file (``MappedText``), None once the file has
        changed, else run in a forked child (a file cut short during the scan would
        kill this process with SIGBUS, and kills only the child). Done here when no
        child can be forked."""
        unchanged = getattr(self.data, "unchanged", None)
        if unchanged is None:
            return work()
        if not unchanged():
            return None
        size = len(self.data)
        got = child.run_in_child(work, 16 * self.n + 4096, child.MIN_WAIT_S + child.WAIT_S_PER_BYTE * size)
        if got is child.NO_CHILD:
            return work()
        return got if unchanged() else None

    def offsets(self, ks) -> np.ndarray | None:
        """Byte offsets of the ``{`` that opens events ``ks`` (None when unknown).
        A few events early in a large file need only a partial scan."""
        ks = np.asarray(ks, dtype=np.int64)
        if self.starts is None and 0 < ks.size <= 1000:
            upto = int(ks.max()) + 1
            if upto < self.n // 2:

                def partial():
                    ph = key_positions(self.data, b'"ph"', self.begin(), limit=upto)
                    return self._first_key_starts(ph[ks]) if ph.size == upto else None

                st = self._guarded(partial)
                if st is not None:
                    return st
        st = self.starts_all()
        return None if st is None else st[ks]

    def lines_of(self, ks) -> list[int | None]:
        """1-based lines where events ``ks`` start (None when unknown, and for a map of
        a file that changed since it was loaded, before or while its lines are
        counted: a file cut short reads short, and its lines would be wrong)."""
        ks = np.asarray(ks, dtype=np.int64)
        if ks.size == 0:
            return []
        unchanged = getattr(self.data, "unchanged", None)
        if unchanged is not None and not unchanged():
            return [None] * int(ks.size)
        offs = self.offsets(ks)
        if offs is None:
            return [None] * int(ks.size)
        lines: list[int | None] = [int(x) for x in self.lines.lines(offs)]
        if unchanged is not None and not unchanged():
            return [None] * int(ks.size)
        return lines

    def event_text(self, k: int) -> bytes | bytearray | None:
        """The JSON text of event ``k`` (None when it cannot be located); the first
        call costs one scan of the text, later calls are O(1). None as well when the
        text is a map of a file that changed since it was loaded (``unchanged()``)."""
        unchanged = getattr(self.data, "unchanged", None)
        if unchanged is not None and not unchanged():
            return None
        if self.ends is not None and self.starts is not None:
            return self.data[int(self.starts[k]) : int(self.ends[k])]
        st = self.starts_all()
        if st is None:
            return None
        if self.ends is not None:
            return self.data[int(st[k]) : int(self.ends[k])]
        b = int(st[k + 1]) if k + 1 < self.n else len(self.data)
        return self.data[int(st[k]) : b]

    def decode_event(self, k: int, decoder=None):
        """Event ``k`` decoded by ``decoder`` (a ``msgspec.json.Decoder``; generic when
        None), or None. The text may run past the event (up to the next one), so the
        closing brace is searched from the end; repaired NaN/Infinity sentinels and
        numbers beyond float range (``1e999``, read as infinity by the stdlib) are
        handled."""
        text = self.event_text(k)
        if not text:
            return None
        dec = decoder.decode if decoder is not None else msgspec.json.decode
        tried = 0
        for end in ends_before(text, len(text), 16):
            tried += 1
            chunk = text[: end + 1]
            try:
                return dec(chunk)
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
                pass
            if decoder is None:
                try:
                    return json.loads(chunk)
                except (ValueError, RecursionError):
                    continue
        if tried < 16:  # no closing brace left to try
            return None
        # the last event runs up to the end of the text: many closing braces may follow
        # it (header keys after the events array); read one value from its start instead
        try:
            obj, _ = json.JSONDecoder().raw_decode(text.decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            return None
        if decoder is None:
            return obj
        try:
            return decoder.decode(msgspec.json.encode(obj))
        except (msgspec.DecodeError, msgspec.ValidationError, msgspec.EncodeError, TypeError, RecursionError):
            return None

    def event_dict(self, k: int) -> dict:
        """Event ``k`` decoded generically ({} when unreadable)."""
        obj = self.decode_event(k)
        return obj if isinstance(obj, dict) else {}

    def args(self, k: int) -> dict:
        """The ``args`` of event ``k`` as a new dict ({} when none)."""
        args = self.event_dict(k).get("args")
        if not isinstance(args, dict):
            return {} if args is None else {"args": args}
        return _unsentinel(args) if self.repaired else args


class EventArgs:
    """``args_of`` of a Chrome trace: the args of event ``src[i]`` of ``text`` for row
    ``i`` (int64 ``src``: the event index of each row, input order). An object, not a
    closure, so the cache (``gapscope.parsers.cache``) can see where the args lie."""

    __slots__ = ("text", "src")

    def __init__(self, text: EventText, src: np.ndarray) -> None:
        self.text = text
        self.src = src

    def __call__(self, i: int) -> dict:
        return self.text.args(int(self.src[i]))


def _unsentinel(obj):
    if isinstance(obj, dict):
        return {k: _unsentinel(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_unsentinel(v) for v in obj]
    if isinstance(obj, str) and obj in SENTINEL_VALUES:
        return SENTINEL_VALUES[obj]
    return obj
