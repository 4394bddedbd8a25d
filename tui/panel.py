"""The side panel: the card of the selected gap, its evidence and the six-step protocol.

All text from the trace (names in evidence, smell strings) goes through ``rich.text.Text``
built from literal strings, never through markup.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
from rich.text import Text
from textual.strip import Strip
from textual.widget import Widget

from gapscope.analysis.causes import CAUSES
from gapscope.analysis.findings import edge_note, edge_place
from gapscope.analysis.types import Cause
from gapscope.parsers.model import Kind
from gapscope.tui.cards import card_of
from gapscope.tui.findings_view import FindingsState, findings_of, overview_lines, overview_text, walk_lines, walk_text
from gapscope.tui.lanes_model import sanitize
from gapscope.units import fmt_delta, fmt_dur, fmt_offset

__all__ = [
    "GapPanel",
    "DetailLine",
    "PROTOCOL",
    "card_text",
    "early_card_text",
    "compact_card_text",
    "protocol_text",
    "first_sentence",
    "COMPACT_LINES",
    "FINDINGS_PENDING",
]

#: Lines of the compact card (narrow terminals, stacked under the lanes).
COMPACT_LINES = 5
#: Where the findings overview goes while they are computed (the causes are drawn).
FINDINGS_PENDING = "Finding the verdict and what to fix first… (n walks the gaps meanwhile)"

#: The six-step protocol (design: "The six-step protocol").
PROTOCOL = (
    ("Capture", "a steady-state window: warm-up excluded, several steps, ranges named"),
    ("Look before you guess", "is the GPU lane dense, or full of white space?"),
    ("Rank the white space", "largest gaps and the gaps that repeat every step"),
    ("Classify", "launch, host, copy or sync, from what the CPU did"),
    ("Predict and test", "the smallest confirming experiment; name the forbidden step"),
    ("Re-measure", "the same figure on a new capture; compare the two traces"),
)

#: Each class in its colour from the table of causes (``gapscope.analysis.causes``).
_CAUSE_STYLE = {c: f"bold {info.colour}" for c, info in CAUSES.items()}


def secondary_text(card) -> str:
    """ ", then copy (5%)": the card's secondary class and its share, as both card forms
    give it (call only when ``card.secondary`` is set)."""
    return f", then {Cause(card.secondary).label} ({int(round(card.secondary_share * 100))}%)"


def evidence_levels(trace, items) -> list[int]:
    """For each evidence item, how many of the items listed before it enclose it (on its
    lane, within their time, deeper in the call tree): 0 for a top-level item. A parent
    and its children listed side by side read as if their times added up (a newcomer
    summed 14 ms of evidence in a 10.2 ms gap)."""
    out: list[int] = []
    spans: list[tuple[int, int, int, int] | None] = []
    for e in items:
        if e.event < 0:
            out.append(0)
            spans.append(None)
            continue
        s, d = int(trace.start_ns[e.event]), int(trace.depth[e.event])
        end = s + int(trace.dur_ns[e.event])
        level = sum(
            int(sp is not None and sp[0] == e.lane and sp[1] <= s and end <= sp[2] and sp[3] < d) for sp in spans
        )
        out.append(level)
        spans.append((e.lane, s, end, d))
    return out


def next_gap_hint(largest_first: bool, press: bool = False) -> str:
    """What ``n`` does with no gap selected, in the order the gaps are walked; ``press``:
    worded as what to press."""
    if press:
        if largest_first:
            return "Press n for the largest gap (gaps are ordered largest first; s orders them in time)."
        return "Press n for the next gap, or s then n for the largest."
    if largest_first:
        return "n goes to the largest (gaps are ordered largest first; s orders them in time)."
    return "n goes to the next, s then n to the largest."


def early_card_text(trace, gaps, gap: int | None, preview: bool, largest_first: bool = False) -> Text:
    """The card while only the gaps are known (the trace screen's early gaps,
    ``gapscope.analysis.gaps.interior_gaps``: ``gaps`` of ``trace``, ``gap`` an index
    into them or None): where the gap is and the ops around it, and that its cause
    follows; ``preview``: ``trace`` is a device preview, so the CPU lanes, which hold
    the cause, are still being read; ``largest_first``: ``n`` walks the gaps largest
    first."""
    t = Text()
    if gap is None:
        n = len(gaps)
        t.append(f"{n:,} idle gap{'' if n == 1 else 's'} so far\n", style="bold")
        t.append(next_gap_hint(largest_first) + "\n")
        t.append("These lie between each GPU's first and last kernel. ")
        t.append("Causes and step-edge gaps come with " + ("the whole file.\n" if preview else "the diagnosis.\n"))
        return t
    s, e = int(gaps.start_ns[gap]), int(gaps.end_ns[gap])
    dev = int(gaps.device[gap])
    t.append(f"Gap on GPU {dev}\n", style="bold")
    # a preview's times count from the first event of its device lanes, the whole
    # trace's from its first event of any lane
    origin = " from the device lanes' first event" if preview else ""
    t.append(f"{fmt_dur(e - s)} at {fmt_offset(s - int(trace.extent_ns[0]))}{origin}\n")
    t.append("Cause: ", style="bold")
    if preview:
        t.append(
            "not known yet: it takes the CPU lanes, still being read (whether the launch "
            "came late or the op was queued and waited on the GPU).\n"
        )
    else:
        t.append("being found…\n")
    for label, verb, names in (
        ("Previous kernel", "end", _kernels_at(trace, dev, s, ending=True)),
        ("Next op", "start", _kernels_at(trace, dev, e, ending=False)),
    ):
        if names:
            t.append(f"{label}{'s' if len(names) > 1 else ''}: ", style="bold")
            shown = ", ".join(sanitize(n, 200) for n in names[:3])
            more = f" and {len(names) - 3} more" if len(names) > 3 else ""
            together = f" ({len(names)} {verb} together)" if len(names) > 1 else ""
            t.append(shown + more + together + "\n")
    return t


def _kernels_at(trace, device: int, t_ns: int, *, ending: bool) -> list[str]:
    """Names of the kernels of GPU ``device`` that end (``ending``) or start at
    ``t_ns`` (int ns), distinct, in lane order: a gap's neighbours, all of them (two
    streams' kernels can end together; which one ``Gaps.prev_op`` names is a tie)."""
    out: list[str] = []
    for ln in trace.lanes:
        if not ln.is_gpu or ln.device != device:
            continue
        sl = trace.lane_slice(ln.index)
        at = trace.start_ns[sl] + (trace.dur_ns[sl] if ending else 0)
        hit = np.flatnonzero((at == t_ns) & (trace.kind[sl] == int(Kind.KERNEL))) + sl.start
        for i in hit.tolist():
            name = trace.name(i)
            if name not in out:
                out.append(name)
    return out


def card_text(
    diagnosis,
    gap: int | None,
    pending: bool = False,
    failed: str | None = None,
    early: tuple | None = None,
    largest_first: bool = False,
) -> Text:
    """The card of ``gap`` as a Rich ``Text`` (literal strings only); ``pending``: the
    diagnosis is still running (the trace screen's worker); ``failed``: why there is
    no diagnosis (said instead of any card); ``early``: (trace, gaps, preview) of
    ``early_card_text`` while only the gaps are known (``gap`` indexes those);
    ``largest_first``: ``n`` walks the gaps largest first (said with no gap selected)."""
    t = Text()
    if pending and early is not None:
        return early_card_text(early[0], early[1], gap, early[2], largest_first)
    if pending:
        t.append("Finding the idle gaps and their causes…\n", style="bold")
        t.append("The lanes can be browsed meanwhile; the gap keys (n, 1-5, g #N) work once the gaps are found.\n")
        return t
    if failed is not None:
        t.append("No diagnosis.\n", style="bold")
        t.append(sanitize(failed, 300) + "\n")
        t.append("The lanes are the trace as loaded; no gap is known, and none is shown.\n")
        return t
    if diagnosis is None or gap is None or len(diagnosis.gaps) == 0:
        t.append("No gap selected.\n", style="bold")
        if diagnosis is not None and len(diagnosis.gaps) == 0:
            t.append("This trace has no idle GPU gaps", style="")
            t.append(" (no kernels, or none of at least the minimum gap).\n")
        else:
            t.append(next_gap_hint(largest_first, press=True) + "\n")
        return t
    g = diagnosis.gaps
    s = int(g.start_ns[gap])
    e = int(g.end_ns[gap])
    t.append(f"Gap #{gap}  GPU {int(g.device[gap])}\n", style="bold")
    t.append(f"{fmt_dur(e - s)} at {fmt_offset(s - int(diagnosis.trace.extent_ns[0]))}\n")
    where = edge_place(diagnosis, gap)
    if where is not None:  # the card's advice is about a steady state this gap is not part of
        t.append("Edge gap: ", style="bold")
        t.append(f"{edge_note(where)}; ")
        t.append(
            "to see this stretch of a step, capture a window that starts after warm-up and stops inside the loop.\n"
        )
    try:
        card = card_of(diagnosis, gap)
    except Exception as exc:  # noqa: BLE001 - the card is advisory; a fault there must not kill the view
        t.append(f"(card unavailable: {type(exc).__name__})\n")
        return t
    rows = (
        ("Smell", card.smell),
        ("Cause", None),
        ("Why", card.why),
        ("First experiment", card.first_experiment),
        ("Forbidden", card.forbidden_step),
        ("Proof", card.proof),
    )
    for label, value in rows:
        t.append(f"{label}: ", style="bold")
        if value is None:
            t.append(card.cause.label, style=_CAUSE_STYLE.get(card.cause, "bold"))
            t.append(f" ({int(round(float(g.cause_share[gap]) * 100))}%)")
            if card.secondary is not None:
                t.append(secondary_text(card))
            t.append("\n")
        else:
            t.append(sanitize(str(value)) + "\n")
    lat = int(g.lateness_ns[gap])
    if int(g.launch[gap]) >= 0:
        t.append("Launch lateness: ", style="bold")
        t.append(fmt_delta(lat) + "\n")
    if card.evidence:
        shown = card.evidence[:12]
        levels = evidence_levels(diagnosis.trace, shown)
        t.append("\nEvidence\n", style="bold underline")
        if any(levels):
            t.append(
                " (↳ marks a call inside the item above it: an op's time holds the ops inside it, not its "
                "launch, copy and sync calls)\n",
                style="dim",
            )
        for ev, level in zip(shown, levels):
            t.append(f" {ev.cause.label:<6} ", style=_CAUSE_STYLE.get(ev.cause, ""))
            t.append(f"{fmt_dur(ev.overlap_ns):>9} ")
            t.append("  " * (level - 1) + "↳ " if level else "")
            t.append(sanitize(ev.name, 80))
            if ev.bytes >= 0:
                t.append(f" {ev.bytes} B" + (" pageable" if ev.pageable else ""))
            t.append("\n")
    return t


def first_sentence(text: str) -> str:
    """``text`` up to and including its first sentence end (``. ``, ``! ``, ``? ``),
    or the whole text when it has one sentence. Abbreviations such as ``e.g.`` are
    not split (a sentence ends before a space and an upper-case letter or digit)."""
    t = " ".join(str(text).split())
    for k in range(len(t) - 2):
        if t[k] in ".!?" and t[k + 1] == " " and (t[k + 2].isupper() or t[k + 2].isdigit()):
            return t[: k + 1]
    return t


#: A name between backticks at least this long is shortened in the compact card.
SHORT_NAME_CHARS = 48
#: every name between backticks, in order: a pattern of long ones only would also take
#: the text between two short names for one ("the GP…an 9 copies" at 80x24)
_TICKED = re.compile(r"`([^`]*)`")
_OPEN_CLOSE = {"<": ">", "(": ")", "[": "]"}


def _elide(name: str, keep_template: bool) -> str | None:
    """``name`` with its bracketed lists replaced by ``…``, brackets matched by kind (so
    the ``->`` of ``(Device -> Device)`` closes nothing); with ``keep_template`` the
    outermost template list keeps its own text (``Kernel<cutlass_80_tensorop…>``) and
    only what is nested in it goes. None when the brackets do not balance."""
    out: list[str] = []
    stack: list[str] = []
    for ch in name:
        kept = keep_template and stack == [">"]  # inside the outermost <...>, not deeper
        if ch in _OPEN_CLOSE:
            if not stack:
                out.append(ch if keep_template and ch == "<" else ch + "…")
            elif kept:
                out.append("…")
            stack.append(_OPEN_CLOSE[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
            if not stack:
                out.append(ch)
        elif not stack or kept:
            out.append(ch)
    return "".join(out) if not stack else None


def short_name(name: str, max_chars: int = 64) -> str:
    """A long (C++) name as a narrow card shows it: its parameter lists and what is
    nested in its template list elided (``cutlass::Kernel<cutlass_80_tensorop…>(…)``),
    or the template list too when that is still long
    (``multi_tensor_apply_kernel<…>(…)``), then the middle when still longer than
    ``max_chars`` (start and end kept). The full card shows the name as it is."""
    short = _elide(name, keep_template=True)
    if short is None:
        short = name  # unbalanced: as it is, cut below
    elif len(short) > max_chars + 16:
        short = _elide(name, keep_template=False) or short
    if len(short) > max_chars:
        short = short[: max_chars - 13] + "…" + short[-12:]
    return short


def short_names(text: str) -> str:
    """``text`` with each long backticked name shortened (``short_name``)."""
    return _TICKED.sub(
        lambda m: "`" + (short_name(m.group(1)) if len(m.group(1)) >= SHORT_NAME_CHARS else m.group(1)) + "`", text
    )


def compact_card_text(
    diagnosis,
    gap: int | None,
    pending: bool = False,
    failed: str | None = None,
    early: tuple | None = None,
    largest_first: bool = False,
) -> list[Text]:
    """The card of ``gap`` for narrow terminals: a summary with the cause, the smell,
    the first sentence of *why*, then the first experiment, forbidden step and proof;
    each item is one logical line (the panel wraps them, keeps the first three, and
    shows the rest as far as its height allows: ``COMPACT_LINES`` rows at least)."""
    if pending or failed is not None or diagnosis is None or gap is None or len(diagnosis.gaps) == 0:
        return list(card_text(diagnosis, gap, pending, failed, early, largest_first).split("\n"))
    g = diagnosis.gaps
    s = int(g.start_ns[gap])
    e = int(g.end_ns[gap])
    head = Text()
    head.append(
        f"Gap #{gap} GPU {int(g.device[gap])}: {fmt_dur(e - s)}"
        f" at {fmt_offset(s - int(diagnosis.trace.extent_ns[0]))}  ",
        style="bold",
    )
    try:
        card = card_of(diagnosis, gap)
    except Exception as exc:  # noqa: BLE001 - advisory, as in card_text
        head.append(f"(card unavailable: {type(exc).__name__})")
        return [head]
    head.append("Cause: ", style="bold")
    head.append(card.cause.label, style=_CAUSE_STYLE.get(card.cause, "bold"))
    head.append(f" ({int(round(float(g.cause_share[gap]) * 100))}%)")
    if card.secondary is not None:  # with its share, as the full card gives it
        head.append(secondary_text(card))
    smell = Text()
    where = edge_place(diagnosis, gap)
    if where is not None:  # kept among the first three lines: it says the advice below is not this gap's
        smell.append("Edge gap, ", style="bold")
        smell.append(f"{where}: listed apart. ")
    smell.append("Smell: ", style="bold")
    smell.append(sanitize(str(card.smell)))
    why = Text()
    why.append("Why: ", style="bold")
    why.append(sanitize(short_names(first_sentence(card.why))))
    extras = []
    for label, value in (
        ("First experiment: ", card.first_experiment),
        ("Forbidden: ", card.forbidden_step),
        ("Proof: ", card.proof),
    ):
        t = Text()
        t.append(label, style="bold")
        t.append(sanitize(short_names(str(value))))
        extras.append(t)
    return [head, smell, why, *extras]


def budget_text(diagnosis) -> Text:
    """Per-step budget (median step: wall, GPU busy, idle share, and tokens/s for a
    decode step (one token per step) or steps/s otherwise), or empty."""
    t = Text()
    b = getattr(diagnosis, "budget", None)
    if b is None:
        return t
    t.append("Step budget", style="bold underline")
    steps = getattr(diagnosis, "steps", None)
    on_gpu = ", as the GPU ran them" if getattr(steps, "on_gpu", False) else ""
    t.append(f" ({b.steps} step{'s' if b.steps != 1 else ''}, {b.source}{on_gpu})\n")
    decode = getattr(b, "decode", False)
    per_s = b.tokens_per_s if decode else getattr(b, "steps_per_s", None)
    unit = "tokens/s" if decode else "steps/s"
    if per_s is None:  # a step of no length: no rate, never "0.0 steps/s"
        rate = f"{unit} n/a"
    else:
        rate = f"{per_s:,.0f} {unit}" if decode else f"{per_s:,.1f} {unit}"
    t.append(f" wall {fmt_dur(b.wall_ns)}  GPU busy {fmt_dur(b.gpu_busy_ns)}  idle {100 * b.idle_share:.0f}%  {rate}\n")
    once_ns = getattr(b, "one_time_idle_ns", 0)
    if once_ns:
        t.append(f" of the idle, {fmt_dur(once_ns)} per step is one-time (warm-up)\n", style="dim")
    return t


def protocol_text(done: set[int]) -> Text:
    """The six-step checklist; ``done`` holds the 1-based steps already ticked."""
    t = Text()
    t.append("Protocol\n", style="bold underline")
    for k, (title, what) in enumerate(PROTOCOL, start=1):
        mark = "[x]" if k in done else "[ ]"
        t.append(f"{mark} {k}. {title}", style="bold" if k in done else "")
        t.append(f": {what}\n", style="dim")
    return t


#: Most lines of the compact panel's first items, the rest wrapped into the rows left:
#: a card's summary one line and its smell two; the findings overview's verdict two (at
#: 80x24 one line cut it at "fixed: 0.760 ms,…" with five rows empty below).
CARD_CAPS: tuple[int, ...] = (1, 2)
OVERVIEW_CAPS: tuple[int, ...] = (2,)


def _with_ellipsis(line: Text, width: int) -> Text:
    """``line`` ending in ``…`` within ``width`` cells (the "there is more" mark)."""
    last = line.copy()
    last.rstrip()
    if last.cell_len >= width:
        last.truncate(width - 1)
    last.append("…")
    return last


class GapPanel(Widget):
    """Side panel: the card with its evidence, then the protocol checklist.

    A Line-API widget: ``show(diagnosis, gap, done)`` re-wraps the text and repaints
    without a layout pass (a ``Static`` in a scroll container reflows the whole screen
    on every update). The mouse wheel scrolls it; reusable by other screens.
    """

    DEFAULT_CSS = """
    GapPanel { width: 44; border-left: vkey $primary 50%; padding: 0 1; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._text = Text("")
        self._lines: list[Text] = []
        self._strips: dict[int, Strip] = {}
        self._wrapped_for: tuple | None = None
        self._card_key: tuple | None = None
        self._done: set[int] | None = None
        self._card = Text("")
        self._protocol = protocol_text(set())
        self._compact: list[Text] | None = []
        self._compact_fn: Callable[[], list[Text]] = list
        self._compact_caps: tuple[int, ...] = CARD_CAPS
        self._compact_key: object = None
        #: Show the compact card (``compact_card_text``) instead of the full text.
        self.compact = False
        self.offset_y = 0

    def show(
        self,
        diagnosis,
        gap: int | None,
        done: set[int],
        pending: bool = False,
        failed: str | None = None,
        early: tuple | None = None,
        largest_first: bool = False,
        findings: FindingsState | None = None,
        findings_pending: bool = False,
    ) -> None:
        """Show the card of ``gap`` (or what to do without one; ``pending``: the
        diagnosis is still running; ``failed``: why there is none; ``early``: the
        gaps known before it; ``largest_first``: the order ``n`` walks, ``card_text``),
        the step budget and the protocol ``done``. ``findings``: what to show of the
        diagnosis's findings (``tui.findings_view``): the overview (the first screen)
        or the card of the finding whose positions ``n`` walks; ``findings_pending``:
        they are being computed (``FINDINGS_PENDING`` said where the overview goes;
        nothing here computes them)."""
        ready = findings is not None and not pending and failed is None and not findings_pending
        found = findings_of(diagnosis) if ready else None
        if found is not None and not found.ranked and not found.apart and found.verdict_kind == "none":
            found = None
        key = (
            id(diagnosis),
            gap,
            pending,
            failed,
            None if early is None else (id(early[1]), early[2]),
            largest_first and gap is None,
            findings if found is not None else None,
            findings_pending,
        )
        changed = False
        if key != self._card_key:
            self._card_key = key
            args = (diagnosis, gap, pending, failed, early, largest_first)
            self._choose_card(args, found, findings, findings_pending)
            self._compact = None  # built when first drawn (compact mode only)
            self._compact_key = object()
            self.offset_y = 0
            changed = True
        if set(done) != self._done:
            self._done = set(done)
            self._protocol = protocol_text(done)
            changed = True
        if changed:
            self._text = Text.assemble(self._card, "\n", budget_text(diagnosis), "\n", self._protocol)
            self._wrapped_for = None
            self.refresh()

    def _choose_card(self, args: tuple, found, findings: FindingsState | None, findings_pending: bool) -> None:
        """Set the full card (``_card``) and the compact one's builder (``_compact_fn``)
        for ``show``: the walked finding's card, the findings overview, the card under a
        "findings are coming" line, or the gap's card (``card_text(*args)``)."""
        self._compact_caps = CARD_CAPS
        diagnosis, gap, largest_first = args[0], args[1], args[5]
        walking = findings.walking if findings is not None else None
        if found is not None and walking is not None and gap is not None and walking < len(found.ranked):
            place = findings.place if findings is not None else 0
            self._card = walk_text(found, walking, place, card_text(*args))
            self._compact_fn = lambda: walk_lines(found, walking, place, compact_card_text(*args))
        elif (
            found is not None
            and findings is not None
            and findings.overview
            and (gap is None or findings.active)  # a gap carried over shows its card
            and len(diagnosis.gaps)
        ):
            cursor, active = findings.cursor, findings.active
            self._card = overview_text(found, cursor, active, largest_first)
            self._compact_fn = lambda: overview_lines(found, cursor, active, largest_first)
            self._compact_caps = OVERVIEW_CAPS
        elif findings_pending and gap is None and diagnosis is not None and len(diagnosis.gaps):
            self._card = Text.assemble(Text(FINDINGS_PENDING, style="italic"), "\n\n", card_text(*args))
            self._compact_fn = lambda: [Text(FINDINGS_PENDING, style="italic"), *compact_card_text(*args)]
        else:
            self._card = card_text(*args)
            self._compact_fn = lambda: compact_card_text(*args)

    def set_compact(self, compact: bool) -> None:
        """Switch between the compact card and the full panel text."""
        if compact != self.compact:
            self.compact = compact
            self.offset_y = 0
            self._wrapped_for = None
            self.refresh()

    @property
    def plain(self) -> str:
        """The panel's full text (for tests and screen readers)."""
        return self._text.plain

    @property
    def compact_plain(self) -> str:
        """The compact card's text, one logical line per line."""
        return "\n".join(t.plain for t in self._compact_items())

    def _compact_items(self) -> list[Text]:
        if self._compact is None:
            self._compact = self._compact_fn()
        return self._compact

    def _wrap(self, width: int) -> list[Text]:
        """Wrapped lines of the text; rebuilt when text, width, mode or CSS change.
        Their strips are built when first drawn (``_strip``): a long card costs only
        the lines on screen."""
        key = (width, id(self._compact_key) if self.compact else id(self._text), self.compact, self.size.height)
        if self._wrapped_for != key:
            console = self.app.console
            if self.compact:
                self._lines = self._compact_lines(console, max(1, width), max(1, self.size.height))
            else:
                self._lines = list(self._text.wrap(console, max(1, width), overflow="fold"))
            self._strips = {}
            self._base = self.rich_style
            self._blank = Strip.blank(width, self._base)
            self._wrapped_for = key
        return self._lines

    def _strip(self, k: int, width: int) -> Strip:
        strip = self._strips.get(k)
        if strip is None:
            line = self._lines[k]
            base = self._base
            strip = Strip(list(line.render(self.app.console)), line.cell_len).apply_style(base)
            strip = self._strips[k] = strip.adjust_cell_length(width, base).simplify()
        return strip

    def _compact_lines(self, console, width: int, height: int) -> list[Text]:
        """The compact card wrapped to ``width`` and cut to ``height`` lines: the
        summary takes one line, the smell at most two, *why* the rest; the first
        experiment, forbidden step and proof follow when rows are left. The last line
        ends in ``…`` whenever anything is cut or left out."""
        out: list[Text] = []
        items = self._compact_items()
        caps = self._compact_caps
        core = min(len(items), 3)  # summary, smell, why; later items fill spare rows
        for i, item in enumerate(items):
            room = height - len(out) - max(0, core - 1 - i)
            if i < len(caps):
                room = min(room, caps[i])
            if room <= 0:
                # items left out: the last line says so, as a cut item does
                if out and not out[-1].plain.endswith("…"):
                    out[-1] = _with_ellipsis(out[-1], width)
                break
            wrapped = list(item.wrap(console, width, overflow="fold"))
            if len(wrapped) > room:
                wrapped = wrapped[:room]
                wrapped[-1] = _with_ellipsis(wrapped[-1], width)
            out.extend(wrapped)
        return out

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._wrapped_for = None

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        lines = self._wrap(width)
        k = y + self.offset_y
        if not self.compact and y == self.size.height - 1 and y > 0 and k < len(lines) - 1:
            return self._more_strip(width, len(lines) - k)
        if 0 <= k < len(lines):
            return self._strip(k, width)
        return self._blank

    def _more_strip(self, width: int, left: int) -> Strip:
        """The last visible row when the text goes on: how to scroll to the rest."""
        text = Text(f"▼ {left} more lines (PgDn/^d, PgUp/^u)", style="bold reverse")
        text.truncate(width)
        return (
            Strip(list(text.render(self.app.console)), text.cell_len)
            .apply_style(self._base)
            .adjust_cell_length(width, self._base)
        )

    def scroll_lines(self, delta: int) -> bool:
        """Scroll the text by ``delta`` lines (clamped); True when the offset changed."""
        lines = self._wrap(self.size.width)
        new = min(max(0, len(lines) - self.size.height), max(0, self.offset_y + int(delta)))
        if new == self.offset_y:
            return False
        self.offset_y = new
        self.refresh()
        return True

    def scroll_page(self, direction: int) -> bool:
        """Scroll one page (the height less one line) down (+1) or up (-1)."""
        return self.scroll_lines(direction * max(1, self.size.height - 1))

    @property
    def more_below(self) -> bool:
        """True when wrapped lines lie below the visible part."""
        return self.offset_y + self.size.height < len(self._lines)

    def on_mouse_scroll_down(self, event) -> None:
        self.scroll_lines(2)
        event.stop()

    def on_mouse_scroll_up(self, event) -> None:
        self.scroll_lines(-2)
        event.stop()


class DetailLine(Widget):
    """One line of text (the detail line). ``show(text)`` repaints without a layout pass,
    unlike ``Static.update`` (which reflows the screen)."""

    DEFAULT_CSS = "DetailLine { height: 1; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._text = Text("")

    def show(self, text: Text) -> None:
        if text.plain != self._text.plain or text.spans != self._text.spans:
            self._text = text
            self.refresh()

    def render(self) -> Text:
        """The text on one line, cut with ``…`` where it is wider than the widget."""
        width = self.size.width
        if width and self._text.cell_len > width:
            text = self._text.copy()
            text.truncate(width, overflow="ellipsis")
            return text
        return self._text
