"""Glyphs and cell rows of the swimlanes (shapes per kind, partial blocks, density).

``Cells`` holds one row as numpy arrays (uint32 code points and style ids into a small
palette) and turns runs of equal style into Rich ``Segment``s, so a row costs a few
numpy operations plus one Segment per run instead of one per cell. A wide character
(CJK, emoji) takes its cell plus a ``WIDE_TAIL`` (0) cell after it; a combining mark
rides on the cell before it (``clusters``), so names keep their real cell width.
"""

from __future__ import annotations

import numpy as np
from rich.cells import cell_len, get_character_cell_size
from rich.segment import Segment
from rich.style import Style

from gapscope.tui.viewmodel import GlyphClass

__all__ = ["CLASS_GLYPH", "CLASS_NAME", "GLYPH_CODES", "WIDE_TAIL", "Cells", "crop", "kernel_codes", "pad", "sized"]

#: Code point of the second cell of a wide character (drawn as nothing after its head).
WIDE_TAIL = 0

#: Full-cell glyph per class: shapes differ so kinds read without colour.
CLASS_GLYPH = {
    GlyphClass.KERNEL: "█",
    GlyphClass.MEMCPY: "▓",
    GlyphClass.MEMSET: "▒",
    GlyphClass.SYNC: "~",
    GlyphClass.RUNTIME: "^",
    GlyphClass.CPU_OP: "=",
    GlyphClass.PYTHON: "-",
    GlyphClass.ANNOTATION: "─",
    GlyphClass.OTHER: "∙",
}
CLASS_NAME = {
    GlyphClass.KERNEL: "kernel",
    GlyphClass.MEMCPY: "memcpy",
    GlyphClass.MEMSET: "memset",
    GlyphClass.SYNC: "sync",
    GlyphClass.RUNTIME: "runtime",
    GlyphClass.CPU_OP: "cpu-op",
    GlyphClass.PYTHON: "python",
    GlyphClass.ANNOTATION: "annotation",
    GlyphClass.OTHER: "other",
}
_LEFT_EIGHTHS = "▏▎▍▌▋▊▉█"
_VERT_EIGHTHS = "▁▂▃▄▅▆▇█"


def sized(coverage: float, left: float, right: float, count: int) -> str:
    """Kernel glyph for a partly covered cell: density bar when several events share
    the cell, else a left or right partial block for the sub-cell edge."""
    if coverage >= 0.999:
        return "█"
    if count >= 2:
        return _VERT_EIGHTHS[min(7, max(0, int(np.ceil(coverage * 8)) - 1))]
    if left >= right:
        return _LEFT_EIGHTHS[min(7, max(0, int(np.ceil(coverage * 8)) - 1))]
    return "▐" if coverage >= 0.375 else "▕"


GLYPH_CODES = np.array([ord(CLASS_GLYPH[GlyphClass(c)]) for c in range(len(GlyphClass))], dtype=np.uint32)
_LEFT_CODES = np.array([ord(ch) for ch in _LEFT_EIGHTHS], dtype=np.uint32)
_VERT_CODES = np.array([ord(ch) for ch in _VERT_EIGHTHS], dtype=np.uint32)


def kernel_codes(summ) -> np.ndarray:
    """Vectorised ``sized``: the kernel glyph of every cell (uint32 code points)."""
    cov = summ.coverage
    eighth = np.clip(np.ceil(cov * 8).astype(np.int64) - 1, 0, 7)
    right = np.where(cov >= 0.375, ord("▐"), ord("▕")).astype(np.uint32)
    out = np.where(summ.left >= summ.right, _LEFT_CODES[eighth], right)
    out = np.where(summ.count >= 2, _VERT_CODES[eighth], out)
    return np.where(cov >= 0.999, ord("█"), out).astype(np.uint32)


class Cells:
    """One row of cells as arrays: ``chars`` (uint32 code points) and ``ids`` (indices
    into ``palette``, a list of Rich styles); ``segments`` turns runs into Segments."""

    __slots__ = ("chars", "ids", "palette", "_index", "clusters", "_wide")

    def __init__(self, width: int, base: Style) -> None:
        self.chars = np.full(width, ord(" "), dtype=np.uint32)
        self.ids = np.zeros(width, dtype=np.int32)
        self.palette: list[Style] = [base]
        self._index: dict[Style, int] = {base: 0}
        #: cell -> its whole text when a combining mark follows the base code point.
        self.clusters: dict[int, str] = {}
        self._wide = False

    def add(self, style: Style) -> int:
        k = self._index.get(style)
        if k is None:
            k = self._index[style] = len(self.palette)
            self.palette.append(style)
        return k

    def text(self, c0: int, text: str, style_id: int | None) -> None:
        """Write ``text`` (already sanitised) from cell ``c0``, clipped to the row, by
        cell width: a wide character takes two cells (one that does not fit becomes a
        space), a combining mark joins the cell before it. Keeps the cells' styles
        when ``style_id`` is None."""
        w = self.chars.shape[0]
        if not text or c0 < 0 or c0 >= w:
            return
        if text.isascii():
            text = text[: w - c0]
            self.chars[c0 : c0 + len(text)] = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
            c1 = c0 + len(text)
        else:
            self._wide = True
            c = c0
            for ch in text:
                cw = get_character_cell_size(ch)
                if cw == 0:
                    if c > c0:
                        self.clusters[c - 1] = self.clusters.get(c - 1, chr(int(self.chars[c - 1]))) + ch
                    continue
                if c + cw > w:
                    if c < w:
                        self.chars[c] = ord(" ")
                        c += 1
                    break
                self.chars[c] = ord(ch)
                self.clusters.pop(c, None)
                if cw == 2:
                    self.chars[c + 1] = WIDE_TAIL
                    self.clusters.pop(c + 1, None)
                c += cw
            c1 = c
        if style_id is not None:
            self.ids[c0:c1] = style_id

    def _cell_texts(self) -> list[str]:
        """The text of every cell after repairs: a wide head whose tail was drawn
        over, or a tail without its head, become a space; clusters still headed by
        their base code point keep their marks."""
        chars = self.chars.tolist()
        n = len(chars)
        out = [chr(c) for c in chars]
        k = 0
        while k < n:
            c = chars[k]
            if c == WIDE_TAIL:
                out[k] = " "
            elif c > 0x7F and get_character_cell_size(out[k]) == 2:
                if k + 1 < n and chars[k + 1] == WIDE_TAIL:
                    out[k + 1] = ""
                    k += 2
                    continue
                out[k] = " "
            k += 1
        for k, cl in self.clusters.items():
            if out[k] and cl[0] == out[k]:
                out[k] = cl
        return out

    def overlay(self, c0: int, c1: int, style: Style) -> None:
        """Combine ``style`` into the cells ``[c0, c1)``."""
        for k in range(c0, c1):
            self.ids[k] = self.add(self.palette[int(self.ids[k])] + style)

    def segments(self, cursor_cell: int, cursor_style: Style) -> list[Segment]:
        if 0 <= cursor_cell < self.ids.shape[0]:
            self.overlay(cursor_cell, cursor_cell + 1, cursor_style)
        ids = self.ids
        n = ids.shape[0]
        cuts = np.flatnonzero(ids[1:] != ids[:-1]) + 1
        starts = [0] + cuts.tolist()
        ends = cuts.tolist() + [n]
        pal = self.palette
        if self._wide:
            cell = self._cell_texts()
            return [Segment("".join(cell[a:b]), pal[int(ids[a])]) for a, b in zip(starts, ends)]
        text = self.chars.tobytes().decode("utf-32-le")
        return [Segment(text[a:b], pal[int(ids[a])]) for a, b in zip(starts, ends)]


def crop(text: str, cells: int) -> str:
    """``text`` cut to at most ``cells`` terminal cells (Rich's cell width), the cut
    marked with ``…``; a wide character never straddles the edge."""
    if cells <= 0:
        return ""
    if text.isascii():
        return text if len(text) <= cells else text[: cells - 1] + "…"
    if cell_len(text) <= cells:
        return text
    out, used = [], 0
    for ch in text:
        w = get_character_cell_size(ch)
        if used + w > cells - 1:
            break
        out.append(ch)
        used += w
    return "".join(out) + "…"


def pad(text: str, cells: int) -> str:
    """``text`` cropped (``crop``) and padded with spaces to exactly ``cells`` cells."""
    text = crop(text, cells)
    return text + " " * (cells - cell_len(text))
