"""Names of an Nsight Systems export: its ``StringIds`` table and the interned names of
the ``Trace``.

Kernel, API call, thread and registered NVTX names are ``StringIds`` ids in the
export. Event columns of ids become ``Trace.name_id`` columns through a lookup table
built over the distinct ids only (one Python call per distinct name, none per event).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["Strings", "Names", "distinct"]

#: Largest id for which a dense lookup table is used (else sort + searchsorted).
_DENSE_MAX_ID = 1 << 26


def distinct(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct values of the int64 column ``values``, index of each row's value
    among them), like ``np.unique(values, return_inverse=True)`` but without sorting
    the column when it can: a presence table for small non-negative ids, or a
    ``searchsorted`` into the distinct values of a sample when the sample holds them
    all (event columns such as thread ids repeat a few values)."""
    values = np.asarray(values, dtype=np.int64)
    n = values.size
    if n == 0:
        return values[:0].copy(), np.zeros(0, dtype=np.int64)
    lo, hi = int(values.min()), int(values.max())
    if lo >= 0 and hi < _DENSE_MAX_ID and hi < 64 * n + 4096:
        present = np.zeros(hi + 1, dtype=bool)
        present[values] = True
        uniq = np.flatnonzero(present).astype(np.int64)
        pos = np.zeros(hi + 1, dtype=np.int64)
        pos[uniq] = np.arange(uniq.size, dtype=np.int64)
        return uniq, pos[values]
    if n > 4096:
        sample = np.unique(values[:: max(1, n // 2048)])
        if sample.size <= 256:
            pos = np.searchsorted(sample, values)
            np.minimum(pos, sample.size - 1, out=pos)
            if bool((sample[pos] == values).all()):
                return sample, pos.astype(np.int64)
    uniq, inv = np.unique(values, return_inverse=True)
    return uniq.astype(np.int64), inv.reshape(-1).astype(np.int64)


class Strings:
    """``StringIds``: id → value (``get`` gives None for an id the table lacks)."""

    def __init__(self, db) -> None:
        self._by_id: dict[int, str] = {}
        cols = db.columns("StringIds")
        if "id" in cols and "value" in cols:
            for i, v in db.rows("SELECT id, value FROM StringIds", what="StringIds"):
                if isinstance(i, int):
                    self._by_id[i] = v if isinstance(v, str) else ("" if v is None else str(v))
        self.present = bool(cols)

    def get(self, string_id: int) -> str | None:
        return self._by_id.get(string_id)

    def __len__(self) -> int:
        return len(self._by_id)


class _Index(dict):
    """text → name id, appending to ``names`` on first sight."""

    def __init__(self, names: list[str]) -> None:
        super().__init__()
        self.names = names

    def __missing__(self, key: str) -> int:
        v = self[key] = len(self.names)
        self.names.append(key)
        return v


class Names:
    """The ``Trace.names`` being built: ``intern(text)`` and whole columns at once.

    ``missing``: how many distinct string ids were not in ``StringIds`` (named
    ``(string N)``), for the loader's warning.
    """

    def __init__(self, strings: Strings) -> None:
        self.strings = strings
        self.names: list[str] = []
        self._index = _Index(self.names)
        self.missing = 0

    def intern(self, text: str) -> int:
        return self._index[text]

    def intern_all(self, texts: list[str]) -> np.ndarray:
        """int32 name ids of ``texts`` (one dict lookup each, driven from C by ``map``)."""
        return np.fromiter(map(self._index.__getitem__, texts), dtype=np.int32, count=len(texts))

    def of_string_ids(
        self, ids: np.ndarray, transform: Callable[[str], str] | None = None, fallback: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """Name ids for a column of ``StringIds`` ids.

        ``transform`` rewrites each distinct name (e.g. ``schema.api_name``);
        ``fallback``: a second id column used where ``ids`` is negative (no string).
        Returns (int32 name id per row, the distinct string ids, their names), so the
        caller can derive more per-name facts (a runtime call's kind) without a row loop.
        """
        ids = np.asarray(ids, dtype=np.int64)
        if fallback is not None:
            ids = np.where(ids >= 0, ids, fallback)
        uniq, inv = distinct(ids)
        texts = []
        for u in uniq.tolist():
            s = self.strings.get(u)
            if s is None:
                self.missing += 1
                s = "(no name)" if u < 0 else f"(string {u})"
            texts.append(transform(s) if transform is not None else s)
        lut = np.array([self.intern(t) for t in texts], dtype=np.int32)
        return (lut[inv] if lut.size else np.zeros(0, np.int32)), uniq, texts
