"""Glyphs and cell rows of the swimlanes (shapes per kind, partial blocks, density).

``Cells`` holds one row as numpy arrays (uint32 code points and style ids into a small
palette) and turns runs of equal style into Rich ``Segment``s, so a row costs a few
numpy operations plus one Segment per run instead of one per cell.
"""

from __future__ import annotations

import numpy as np
from rich.segment import Segment
from rich.style import Style

from gapscope.tui.viewmodel import GlyphClass

__all__ = ["CLASS_GLYPH", "CLASS_NAME", "GLYPH_CODES", "Cells", "kernel_codes", "sized"]

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

    __slots__ = ("chars", "ids", "palette", "_index")

    def __init__(self, width: int, base: Style) -> None:
        self.chars = np.full(width, ord(" "), dtype=np.uint32)
        self.ids = np.zeros(width, dtype=np.int32)
        self.palette: list[Style] = [base]
        self._index: dict[Style, int] = {base: 0}

    def add(self, style: Style) -> int:
        k = self._index.get(style)
        if k is None:
            k = self._index[style] = len(self.palette)
            self.palette.append(style)
        return k

    def text(self, c0: int, text: str, style_id: int | None) -> None:
        """Write ``text`` from cell ``c0`` (clipped); keeps the cells' styles when
        ``style_id`` is None."""
        w = self.chars.shape[0]
        text = text[: max(0, w - c0)]
        if not text or c0 < 0:
            return
        self.chars[c0 : c0 + len(text)] = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        if style_id is not None:
            self.ids[c0 : c0 + len(text)] = style_id

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
        text = self.chars.tobytes().decode("utf-32-le")
        pal = self.palette
        return [Segment(text[a:b], pal[int(ids[a])]) for a, b in zip(starts, ends)]
