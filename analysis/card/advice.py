"""What a card advises (``Advice``: first experiment, forbidden next step, proof,
the fix in a few words) and ``short_fix``: shared by the rule tables of
``gapscope.analysis.card`` (``rules``, ``host_rules``, ``copy_rules``)."""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["Advice", "short_fix", "SHORT_FIX_CHARS"]


class Advice(NamedTuple):
    """A card's advice: the first experiment, the forbidden next step, the proof, and
    ``fix``: the first experiment in a few words (a finding's "fix"; ``short_fix`` of
    ``first`` when the rule gives none)."""

    first: str
    forbidden: str
    proof: str
    fix: str = ""


#: Characters of a ``short_fix`` (the first experiment's first sentence, cut at a clause).
SHORT_FIX_CHARS = 160


def short_fix(first: str) -> str:
    """The first experiment ``first`` in a few words: its first sentence, cut at the
    last clause boundary (``;`` or ``,``) before ``SHORT_FIX_CHARS`` characters when
    longer, without the trailing period."""
    head = re.split(r"(?<=[.!?])\s+(?=[A-Z`])", first.strip(), maxsplit=1)[0].rstrip(".")
    if len(head) <= SHORT_FIX_CHARS:
        return head
    cut = max(head.rfind("; ", 0, SHORT_FIX_CHARS), head.rfind(", ", 0, SHORT_FIX_CHARS))
    return head[:cut] if cut > 0 else head[: SHORT_FIX_CHARS - 1].rstrip() + "…"
