"""Cards of a diagnosis's gaps, built once each and ahead of the key that shows them.

``card_of(diagnosis, gap)`` is ``gapscope.analysis.card.card_for_gap`` remembered per
gap on the diagnosis itself (``Diagnosis.derived``, so the cards live and die with it);
``prefetch_cards(diagnosis, gaps, cancelled)`` builds the cards of the gaps the next
keys are likely to show (the neighbours of the selected gap in the order ``n``/``N``
walk) in a thread worker, so that "next gap" finds its card built instead of building
it on the key (4-10 ms of analysis per card at 1M events, more with long evidence).

A card is a pure function of (diagnosis, gap), so two threads that build the same card
both get equal cards and either may be kept. No Textual here: the trace screen runs the
prefetch in its worker.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from gapscope.analysis.card import card_for_gap
from gapscope.analysis.types import Card

__all__ = ["card_of", "has_card", "prefetch_cards", "DERIVED_KEY"]

#: Where the cards are kept in ``Diagnosis.derived`` (gap index -> ``Card``).
DERIVED_KEY = "gapscope.tui.cards"

_LOCK = threading.Lock()


def _memo(diagnosis) -> dict[int, Card] | None:
    """The diagnosis's card memo (made on first use), or None for an object without
    ``derived`` (a stand-in diagnosis in tests: cards are then built every time)."""
    derived = getattr(diagnosis, "derived", None)
    if not isinstance(derived, dict):
        return None
    with _LOCK:
        memo = derived.get(DERIVED_KEY)
        if not isinstance(memo, dict):
            memo = derived[DERIVED_KEY] = {}
    return memo


def card_of(diagnosis, gap: int) -> Card:
    """``card_for_gap(diagnosis, gap)``, built once per gap of ``diagnosis``.

    Raises what ``card_for_gap`` raises (a failed build is not remembered)."""
    gap = int(gap)
    memo = _memo(diagnosis)
    if memo is None:
        return card_for_gap(diagnosis, gap)
    card = memo.get(gap)
    if card is None:
        card = memo[gap] = card_for_gap(diagnosis, gap)
    return card


def has_card(diagnosis, gap: int) -> bool:
    """Whether the card of ``gap`` is built already (``card_of`` then costs a lookup)."""
    memo = _memo(diagnosis)
    return memo is not None and int(gap) in memo


def prefetch_cards(diagnosis, gaps: Iterable[int], cancelled: Callable[[], bool] = lambda: False) -> int:
    """Build the cards of ``gaps`` (gap indices) not built yet, in order, stopping when
    ``cancelled()`` turns true; a card whose build fails is skipped (the panel says so
    when that gap is shown). Returns how many cards were built."""
    memo = _memo(diagnosis)
    if memo is None:
        return 0
    built = 0
    for gap in gaps:
        if cancelled():
            break
        gap = int(gap)
        if gap < 0 or gap in memo:
            continue
        try:
            memo[gap] = card_for_gap(diagnosis, gap)
        except Exception:  # noqa: BLE001 - the panel reports it when that gap is shown
            continue
        built += 1
    return built
