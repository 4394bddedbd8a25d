"""The event list of a text decoded in two parts (``gapscope.parsers.chrome.parallel.fork``)."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import numpy as np

from gapscope.parsers.chrome.fastscan import FlowTexts
from gapscope.parsers.chrome.lazy_args import EventText
from gapscope.parsers.chrome.scan import PH_FLOW, PH_M, PH_OTHER
from gapscope.parsers.chrome.schema import EVENT_LIST, EVENT_LIST_RAW_TS

__all__ = ["JoinedEvents", "SerialFallback"]


class SerialFallback(Exception):
    """Input decoded in parts met a case that needs the whole event list decoded in
    one piece (raised by the loader's build and by ``JoinedEvents``; the loader then
    decodes the text again, in one piece)."""


#: The phase codes of each group of non-``X`` events.
_MEMBERS = {PH_FLOW: (PH_FLOW,), PH_OTHER: (PH_M, PH_OTHER)}


class JoinedEvents(Sequence):
    """The events of both parts as one sequence, for the loader's later passes.

    Only non-``X`` events are kept: those this process read (``head_lists``: structs,
    or its flow events as ``fastscan.FlowTexts``), then those of each child, in order,
    as the child's blobs (``blobs``: group → one blob per child: JSON for flow events,
    msgpack or JSON for the others, ``chrome_transfer``), decoded on first use; an ``X`` event (rarely asked for: a warning's
    value, v2 flows) is decoded again from ``text``, where the events lie in the
    document. ``code``: int8 phase code of every event (``chrome_scan``).
    """

    def __init__(
        self,
        code: np.ndarray,
        head_lists: dict[int, Sequence],
        blobs: dict[int, list[bytes]],
        raw_ts: bool,
        x_class: type,
        text: EventText,
    ) -> None:
        self.code = code
        self.raw_ts = raw_ts
        self.n = int(code.size)
        self._head = head_lists
        self._tail: dict[int, list] = {}
        self._blobs = blobs
        self._decoders = {
            PH_FLOW: msgspec.json.Decoder(EVENT_LIST),
            PH_OTHER: (msgspec.json.Decoder(EVENT_LIST_RAW_TS) if raw_ts else msgspec.msgpack.Decoder(EVENT_LIST)),
        }
        self._members_of: dict[int, np.ndarray] = {}  # ``_members`` of each group
        self._x_decoder: msgspec.json.Decoder = msgspec.json.Decoder(x_class)
        self.text = text

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[j] for j in range(*k.indices(self.n))]
        if k < 0:
            k += self.n
        if not 0 <= k < self.n:
            raise IndexError(k)
        c = int(self.code[k])
        if c not in (PH_FLOW, PH_M, PH_OTHER):
            e = self.text.decode_event(k, self._x_decoder)
            if e is None:
                raise SerialFallback(f"event {k} not found in the text")
            return e
        group = PH_FLOW if c == PH_FLOW else PH_OTHER
        r = int(np.searchsorted(self._members(group), k))
        head = self._head_list(group)
        if r < len(head):
            return head[r]
        return self._tail_list(group)[r - len(head)]

    def take(self, ks) -> list:
        """``[self[k] for k in ks]``, in one pass when every ``k`` is a flow, metadata
        or other non-``X`` event (no per-event lookup)."""
        ks = np.asarray(ks, dtype=np.int64)
        if ks.size == 0:
            return []
        codes = self.code[ks]
        for group in (PH_FLOW, PH_OTHER):
            if bool(np.isin(codes, _MEMBERS[group]).all()):
                both = self._head_list(group) + self._tail_list(group)
                return [both[r] for r in np.searchsorted(self._members(group), ks).tolist()]
        return [self[int(k)] for k in ks.tolist()]

    def _members(self, group: int) -> np.ndarray:
        """int64 indices of the events of ``group``, rising (cached): an event's rank
        among them is its ``searchsorted`` place. Not a rank for every event: at 5M
        events that array (and its ``- 1``) took 0.17 s, mostly fresh pages."""
        members = self._members_of.get(group)
        if members is None:
            members = self._members_of[group] = np.flatnonzero(np.isin(self.code, _MEMBERS[group]))
        return members

    def _head_list(self, group: int) -> list:
        """This process's events of ``group``, decoded (a part's flow events come as
        ``fastscan.FlowTexts``, decoded on first use)."""
        head = self._head[group]
        if isinstance(head, FlowTexts):
            try:
                head = self._head[group] = head.events()
            except (msgspec.DecodeError, msgspec.ValidationError) as e:
                raise SerialFallback("head flow events") from e
        return list(head) if not isinstance(head, list) else head

    def _tail_list(self, group: int) -> list:
        got = self._tail.get(group)
        if got is None:
            got = []
            try:
                for blob in self._blobs.pop(group):
                    got += self._decoders[group].decode(blob)
            except (msgspec.DecodeError, msgspec.ValidationError) as e:
                raise SerialFallback("tail events") from e
            self._tail[group] = got
        return got
