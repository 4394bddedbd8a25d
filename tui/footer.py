"""The key bar at the foot of gapscope's screens."""

from __future__ import annotations

from textual.widgets import Footer

__all__ = ["KeyFooter"]


class KeyFooter(Footer):
    """Textual's ``Footer``, with the screen's keys from its first frame when
    ``at_once`` (the default).

    Textual's footer composes nothing until the screen's bindings signal comes, which
    it sends after the first refresh: a screen shown while the terminal is busy (the
    whole trace replacing its device preview) drew an empty key row for 25-230 ms.
    Composed at once, it shows the screen's keys as they are at mount; the signal
    then recomposes it as Textual's does. ``at_once=False``: as Textual's, the keys
    one frame after the rest: for a trace's first screen, whose lanes come sooner so
    (a key per widget, styled: 50-100 ms of a 150-250 ms first frame at 200x50)."""

    def __init__(self, *args, at_once: bool = True, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        ready = getattr(Footer, "_bindings_ready", None)  # Textual's own flag (8.x); else as Textual draws it
        if ready is not None and at_once:
            self.set_reactive(ready, True)
