"""``NO_COLOR`` (https://no-color.org/): no colour at all, attributes kept.

Textual answers ``NO_COLOR`` with its ``Monochrome`` filter, which still sends 256-colour
greys; ``no_colour`` swaps it for ``NoColor``, which leaves every segment in the
terminal's default colours, so bold, reverse and underline (the selection, the cursor)
are what remains.
"""

from __future__ import annotations

from textual.app import App
from textual.filter import Monochrome, NoColor

__all__ = ["no_colour"]


def no_colour(app: App) -> None:
    """Make ``app`` (constructed, not yet running) draw without colour when the user
    set ``NO_COLOR`` (Textual has read it into ``app.no_color``)."""
    if not app.no_color:
        return
    filters = app._filters
    filters[:] = [f for f in filters if not isinstance(f, (Monochrome, NoColor))]
    filters.append(NoColor())
