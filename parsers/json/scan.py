"""Byte-level JSON helpers for Chrome-trace files (numpy, linear, no recursion).

Where events begin and end (the events array, element boundaries): ``json.boundaries``.

- ``text_start``: the first byte after a BOM and blanks.
- ``repair_nonfinite``: ``NaN``/``Infinity``/``-Infinity`` value tokens → same-length
  sentinel strings, so byte offsets and line numbers stay valid.
- ``LineIndex``: 1-based line and column of byte offsets.
"""

from __future__ import annotations

import re

import numpy as np

from gapscope.parsers.json.mapped import MappedText

#: JSON text as the readers take it: in memory, or a read-only map of a file.
Text = bytes | bytearray | MappedText

__all__ = [
    "Text",
    "text_start",
    "repair_nonfinite",
    "SENTINELS",
    "SENTINEL_VALUES",
    "LineIndex",
]

#: Same-length JSON strings that replace the non-JSON number tokens.
SENTINELS = {b"NaN": b'"N"', b"Infinity": b'"Infini"', b"-Infinity": b'"-Infini"'}
#: Sentinel string → the float it stands for (used when showing args).
SENTINEL_VALUES = {"N": float("nan"), "Infini": float("inf"), "-Infini": float("-inf")}


_LEADING_BLANKS = re.compile(rb"(?:\xef\xbb\xbf)?[ \t\r\n]*")


def text_start(data) -> int:
    """Offset of the first byte after a UTF-8 BOM and JSON whitespace (``len(data)``
    when there is none)."""
    m = _LEADING_BLANKS.match(data)
    assert m is not None  # the pattern matches the empty string
    return m.end()


def repair_nonfinite(text: bytes | bytearray) -> tuple[bytes | bytearray, int]:
    """Replace ``NaN``/``Infinity``/``-Infinity`` value tokens by same-length sentinel
    strings (``SENTINELS``); returns (new text, number replaced).

    A token is a value when the previous non-blank byte is ``:``, ``,`` or ``[`` and
    the next one ``,``, ``}`` or ``]``. Linear: ``bytes.find`` per token kind, Python
    work only per occurrence.
    """
    if b"NaN" not in text and b"Infinity" not in text:
        return text, 0
    out = bytearray(text)
    count = 0
    size = len(text)
    blanks = b" \t\r\n"
    for tok in (b"-Infinity", b"Infinity", b"NaN"):
        rep = SENTINELS[tok]
        i = text.find(tok)
        while i >= 0:
            j = i + len(tok)
            if not (tok == b"Infinity" and i > 0 and text[i - 1] == 45):  # part of -Infinity
                p = i - 1
                while p >= 0 and text[p] in blanks:
                    p -= 1
                q = j
                while q < size and text[q] in blanks:
                    q += 1
                if p >= 0 and q < size and text[p] in b":,[" and text[q] in b",}]":
                    out[i:j] = rep
                    count += 1
            i = text.find(tok, j)
    return (bytes(out), count) if count else (text, 0)


class LineIndex:
    """1-based line and column of byte offsets in ``data`` (counts newlines lazily)."""

    def __init__(self, data: Text) -> None:
        self._data = data

    def lines(self, offsets: np.ndarray) -> np.ndarray:
        """int64 line numbers of ``offsets`` (any order); linear in the data size."""
        offsets = np.asarray(offsets, dtype=np.int64)
        out = np.zeros(offsets.size, dtype=np.int64)
        if offsets.size == 0:
            return out
        order = np.argsort(offsets, kind="stable")
        line, prev = 1, 0
        count = self._data.count
        srt = offsets[order].tolist()
        res = []
        for off in srt:
            if off > prev:
                line += count(b"\n", prev, off)
                prev = off
            res.append(line)
        out[order] = res
        return out

    def line(self, offset: int) -> int:
        return int(self.lines(np.array([offset]))[0])

    def column(self, offset: int) -> int:
        return offset - (self._data.rfind(b"\n", 0, offset) + 1) + 1


# A backslash escape, scanned left to right so ``\\\\u...`` (an escaped backslash then
# "u") is never read as a ``\\u`` escape: a valid surrogate pair, a lone surrogate, or
# any other escape (kept).
_ESCAPE = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
    rb"|(\\u[dD][89a-fA-F][0-9a-fA-F]{2})|\\.",
    re.S,
)
_LONE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_KEY_BEFORE = re.compile(rb'"([^"\\]{1,64})"\s*:\s*"[^"]*$')


def repair_surrogates(text: bytes | bytearray) -> tuple[bytes | bytearray, list[tuple[int, str, str]]]:
    """Replace each lone UTF-16 surrogate escape (``\\ud800`` not paired with a low
    surrogate, or a low one alone), which no JSON decoder here accepts, by
    ``\\ufffd`` (U+FFFD, the same 6 bytes, so every offset stays). Returns (the text,
    a copy when changed; [(offset, escape, key of the string it was in or "")]).
    Python work only per backslash escape, and only when a lone one is present."""
    if b"\\u" not in text or _LONE.search(text) is None:
        return text, []
    out = None
    found: list[tuple[int, str, str]] = []
    for m in _ESCAPE.finditer(text):
        if m.group(1) is None:
            continue
        if out is None:
            out = bytearray(text)
        i = m.start()
        out[i : i + 6] = b"\\ufffd"
        key = _KEY_BEFORE.search(bytes(text[max(0, i - 256) : i]))
        found.append((i, m.group(1).decode("ascii"), key.group(1).decode("utf-8", "replace") if key else ""))
    return (out if out is not None else text), found
