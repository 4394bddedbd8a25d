"""The lazy ``args_of`` of a cached trace: what is stored, and how it reads the original.

A fresh trace's args loader reads args from the text it was decoded from, kept in
memory. A cached trace has no text: its loader stores where each row's args lie and
reads the *original file* on the first ``args_of``, after checking that the file still
has the key of the entry (``gapscope.parsers.cache.key``); the text is then kept, so
later calls cost what they cost on a fresh trace. A file changed since gives no args
(``Trace.args_of`` returns ``{}``) rather than another file's.

What each loader becomes (``stored_args``), by row in the trace's sorted order:

- Chrome (``gapscope.parsers.chrome.lazy_args.EventArgs``): the byte spans of the rows'
  events when the loader already knew them (``args.start``/``args.end``), else each
  row's event index (``args.src``), the events' count and the text's root offset, from
  which the spans are found again on first use exactly as a fresh trace finds them.
  For a gzip file the spans refer to the inflated text: the first ``args_of`` inflates
  the file again (a fresh trace holds it inflated from the start). A text the tolerant
  decoder repaired (``NaN`` tokens, lone surrogates) is not the file's text, so such a
  trace is not cached: its spans would read other bytes.
- Nsight (``gapscope.parsers.nsys.loader.RowArgs``): the table code and rowid of each
  row (``args.code``, ``args.rowid``); args are read back from the export, as fresh.
  For a report, that is the SQLite export in the nsys cache, whose size and mtime are
  stored: an export that is gone or changed makes the entry unusable.
- A built trace's list (``gapscope.parsers.builder.ListArgs``, ASCII timelines): the
  list itself, in the header.
- No loader: nothing.

Any other loader is not cached.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import msgspec
import numpy as np

from gapscope.parsers.builder import ListArgs
from gapscope.parsers.cache.key import FileKey, key_of
from gapscope.parsers.json.scan import Text
from gapscope.parsers.model import SortedArgs

__all__ = ["StoredArgs", "stored_args", "args_loader", "CachedTextArgs", "NONE", "LIST", "CHROME", "NSYS"]

NONE, LIST, CHROME, NSYS = "none", "list", "chrome", "nsys"

#: ``read_text(path)``: the text ``load`` decodes (gzip undone), in memory or mapped:
#: ``detect.args_text``.
ReadText = Callable[[str], Text]


class StoredArgs(msgspec.Struct, forbid_unknown_fields=True):
    """The header's part about args: ``kind`` (``NONE``, ``LIST``, ``CHROME``, ``NSYS``)
    and what that kind needs beside its arrays (``args.*`` in the entry)."""

    kind: str
    meta: dict[str, Any] = {}


class Unusable(Exception):
    """A stored args form that cannot serve (an Nsight export gone or changed)."""


def stored_args(
    loader: Callable[[int], dict] | None, path: str, text: Text | None
) -> tuple[StoredArgs, dict[str, np.ndarray]] | None:
    """What to store for ``loader`` (a trace's ``_args_loader``) of the trace loaded from
    ``path``, whose text (gzip undone; None for Nsight) was ``text``: the header part
    and the arrays (one element per row, sorted order). None when it cannot be stored."""
    order: np.ndarray | None = None
    inner = loader
    if isinstance(loader, SortedArgs):
        order, inner = loader.order, loader.inner

    def rows(a: np.ndarray) -> np.ndarray:
        return a if order is None else a[order]

    if inner is None:
        return StoredArgs(NONE), {}
    if isinstance(inner, ListArgs):
        got = inner.args if order is None else [inner.args[k] for k in order.tolist()]
        return StoredArgs(LIST, {"args": list(got)}), {}
    from gapscope.parsers.chrome.lazy_args import EventArgs

    if isinstance(inner, EventArgs):
        t = inner.text
        if text is None or t.data is not text:  # repaired by the tolerant decoder
            return None
        src = rows(np.asarray(inner.src, dtype=np.int64))
        starts, ends = t.starts, t.ends
        if starts is not None:
            if ends is None:  # an event's text runs to the next one's start (EventText.event_text)
                ends = np.append(starts[1:], len(t.data)).astype(np.int64)
            return StoredArgs(CHROME), {"args.start": starts[src], "args.end": ends[src]}
        return StoredArgs(CHROME, {"root": int(t.root), "events": int(t.n)}), {"args.src": src}
    from gapscope.parsers.nsys.loader import RowArgs

    if isinstance(inner, RowArgs):
        meta: dict[str, Any] = {"tables": list(inner.tables), "export": None}
        if os.path.abspath(inner.path) != os.path.abspath(path):  # a report's export in the nsys cache
            st = os.stat(inner.path)
            meta["export"] = [os.path.abspath(inner.path), st.st_size, st.st_mtime_ns]
        code = rows(np.asarray(inner.code, dtype=np.int16))
        rowid = rows(np.asarray(inner.rowid, dtype=np.int64))
        return StoredArgs(NSYS, meta), {"args.code": code, "args.rowid": rowid}
    return None


def args_loader(
    stored: StoredArgs, arrays: dict[str, np.ndarray], path: str, key: FileKey, read_text: ReadText
) -> Callable[[int], dict] | None:
    """The args loader of a cached trace from what ``stored_args`` stored, for the
    input at ``path`` (whose key is ``key``). Raises ``Unusable`` (or ``KeyError``,
    ``ValueError``, ``TypeError`` for a malformed header)."""
    kind, meta = stored.kind, stored.meta
    if kind == NONE:
        return None
    if kind == LIST:
        got = meta["args"]
        if not isinstance(got, list):
            raise ValueError("args list")
        return ListArgs(got)
    if kind == CHROME:
        if "args.src" in arrays:
            return CachedTextArgs(
                path, key, read_text, src=arrays["args.src"], root=meta["root"], events=meta["events"]
            )
        return CachedTextArgs(path, key, read_text, start=arrays["args.start"], end=arrays["args.end"])
    if kind == NSYS:
        from gapscope.parsers.nsys.loader import RowArgs

        db = path
        if meta["export"] is not None:
            db, size, mtime_ns = meta["export"]
            try:
                st = os.stat(db)
            except OSError:
                raise Unusable(f"export {db} is gone") from None
            if (st.st_size, st.st_mtime_ns) != (size, mtime_ns):
                raise Unusable(f"export {db} changed")
        return RowArgs(db, list(meta["tables"]), arrays["args.code"], arrays["args.rowid"])
    raise ValueError(f"args kind {kind!r}")


class CachedTextArgs:
    """``args_of`` of a cached Chrome trace: the original file's text, read on first
    use (once its key is checked, before and after the read), then the args of row
    ``i`` as ``EventText.args`` reads them: from the row's span (``start``/``end``,
    int64 byte offsets per row), or from event ``src[i]`` of the ``events`` events
    found in the text from offset ``root`` on. Raises ``ValueError`` when the file has
    changed (``Trace.args_of`` then gives ``{}``). Safe to call from any thread."""

    def __init__(
        self,
        path: str,
        key: FileKey,
        read_text: ReadText,
        *,
        src: np.ndarray | None = None,
        root: int = 0,
        events: int = 0,
        start: np.ndarray | None = None,
        end: np.ndarray | None = None,
    ) -> None:
        self.path, self.key, self.read_text = path, key, read_text
        self.src, self.root, self.events, self.start, self.end = src, root, events, start, end
        self._text: Any = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:  # picklable as a fresh trace's loader is; the text is read again
        return {k: v for k, v in self.__dict__.items() if k not in ("_text", "_lock")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._text = None
        self._lock = threading.Lock()

    def text(self):
        """The ``EventText`` of the original file (read on the first call)."""
        with self._lock:
            if self._text is None:
                from gapscope.parsers.chrome.lazy_args import EventText

                if key_of(self.path) != self.key:
                    raise ValueError(f"{self.path} changed since it was cached")
                data = self.read_text(self.path)
                if key_of(self.path) != self.key:
                    raise ValueError(f"{self.path} changed while read")
                if self.src is not None:
                    self._text = EventText(data, self.root, self.events)
                else:
                    assert self.start is not None
                    self._text = EventText(data, 0, int(self.start.size), self.start, self.end)
            return self._text

    def __call__(self, i: int) -> dict:
        text = self.text()
        return text.args(int(self.src[i]) if self.src is not None else int(i))
