"""The findings as the viewer's first screen shows them (issue 47; "Findings: what the
tool says first" in the design): the verdict line, the ranked findings with the
highlighted one marked, the edge and one-time entries apart; and the card of a finding
while ``n``/``N`` walk its positions. Pure functions of the diagnosis's
``Findings`` (``analysis.findings.findings(diagnosis)``), drawn by ``GapPanel``.
"""

from __future__ import annotations

import dataclasses

from rich.text import Text

from gapscope.analysis.diagnose import Diagnosis
from gapscope.analysis.findings import findings
from gapscope.tui.lanes_model import sanitize
from gapscope.units import fmt_dur, fmt_rate

__all__ = [
    "FindingsState",
    "findings_of",
    "verdict_badge",
    "overview_text",
    "overview_lines",
    "walk_text",
    "walk_lines",
    "rate_text",
    "fixed_text",
]

#: Findings listed in the compact overview (80x24: the verdict, these, the keys).
COMPACT_FINDINGS = 6
_STYLE = {"sync": "magenta", "copy": "cyan", "launch": "yellow", "host": "red", "dependency": "blue"}


@dataclasses.dataclass(frozen=True)
class FindingsState:
    """What the panel shows of the findings: ``overview`` (the ranked list, the first
    screen), ``active`` (``f`` pressed: j/k and Enter choose in the list rather than
    act on the lanes), ``cursor`` (the highlighted finding, 0-based), ``walking`` (the finding
    whose positions ``n``/``N`` walk, None when ``n`` walks all gaps) and ``place``
    (the position walked, 0-based)."""

    overview: bool = True
    active: bool = False
    cursor: int = 0
    walking: int | None = None
    place: int = 0


def findings_of(diagnosis):
    """The ``Findings`` of ``diagnosis`` or None (no diagnosis, or one without them)."""
    if not isinstance(diagnosis, Diagnosis):
        return None
    try:
        return findings(diagnosis)
    except Exception:  # noqa: BLE001 - the findings are advisory; the lanes and cards stay
        return None


def rate_text(f) -> str:
    """``"2,112 steps/s"``, ``"1,667 tokens/s"`` (a decode step: ``Finding.tokens_per_s``)
    or ``"0.075 steps/s"`` (``units.fmt_rate``) of a finding's projection."""
    if f.steps_per_s is None:
        return "n/a"
    if f.tokens_per_s is not None:
        return f"{fmt_rate(f.tokens_per_s)} tokens/s"
    return f"{fmt_rate(f.steps_per_s)} steps/s"


def fixed_text(f) -> str:
    """A finding's projected step and rate (``"0.473 ms, 2,112 tokens/s"``), or why
    there is none: ``"not measurable"`` (``Finding.measurable`` False: its idle may not
    be idle) or ``"not projected (too few steps)"`` (``Finding.projected`` False)."""
    if not f.measurable:
        return "not measurable"
    if not f.projected:
        return "not projected (too few steps)"
    return f"{fmt_dur(f.projected_step_ns)}, {rate_text(f)}"


def verdict_badge(found) -> str:
    """The header's figure for the verdict: ``"launch 51%/step"``, ``"GPU-bound"``,
    or ``""`` when there is nothing to say."""
    if found is None:
        return ""
    if found.verdict_kind == "gpu-bound":
        return "GPU-bound"
    if found.verdict_kind == "none":
        return "no steady pattern"
    if found.verdict_kind == "no steady state":
        return "no steady step"
    if found.top is None:
        return ""
    return f"{found.top.kind} {100 * found.top.step_share:.0f}%/step"


def top_kind(found) -> str | None:
    """The top finding's kind when the verdict names it (not GPU-bound, not refused)."""
    return found.top.kind if found.top is not None else None


def _finding_line(f, k: int, marked: bool) -> Text:
    t = Text()
    t.append("▶ " if marked else "  ", style="bold")
    t.append(f"F{k + 1} ", style="bold")
    t.append(f"{f.kind:<6}", style=_STYLE.get(f.cause.label, ""))
    t.append(f" {fmt_dur(f.per_step_ns)}/step {100 * f.step_share:.0f}%  ")
    t.append(sanitize(f.title, 120))
    return t


def _keys_hint(active: bool, largest_first: bool) -> Text:
    if active:
        return Text("j/k choose · Enter walks its gaps (n/N) · f: the card", style="dim")
    if largest_first:
        return Text(
            "Press n for the top finding's largest gap (gaps are ordered largest first; s orders them in time). "
            "f: choose a finding.",
            style="dim",
        )
    return Text(
        "Press n for the next gap, or s then n for the top finding's largest. f: choose a finding.", style="dim"
    )


def overview_text(found, cursor: int = 0, active: bool = False, largest_first: bool = False) -> Text:
    """The full overview: the verdict, then each ranked finding (class, cost per step,
    share, title; then its steps, positions, first fix and projected step), the
    entries kept apart, and what the keys do (``active``: ``f`` chose the list;
    ``largest_first``: the order ``n`` walks)."""
    t = Text()
    if found is None:
        return t
    t.append("Verdict\n", style="bold underline")
    t.append(sanitize(found.verdict, 600) + "\n\n")
    if found.ranked:
        t.append("Findings (by time a fix recovers per step)\n", style="bold underline")
    for k, f in enumerate(found.ranked):
        t.append_text(_finding_line(f, k, k == cursor))
        t.append("\n")
        t.append(
            f"     {f.steps_with}/{f.steps_total} steps, {f.positions.size:,} {'gap' if f.positions.size == 1 else 'gaps'}; fix: "
            f"{sanitize(f.fix, 200)} → {fixed_text(f)}\n",
            style="dim",
        )
    for f in found.apart:
        t.append("  apart: ", style="dim")
        t.append(sanitize(f.title, 200) + " (in no per-step figure)\n", style="dim")
    t.append("\n")
    t.append_text(_keys_hint(active and bool(found.ranked), largest_first))
    t.append("\n")
    return t


def overview_lines(found, cursor: int = 0, active: bool = False, largest_first: bool = False) -> list[Text]:
    """The compact overview (narrow terminals): the verdict, then one line per
    finding, the highlighted one marked; each item one logical line."""
    if found is None:
        return []
    head = Text()
    head.append("Verdict: ", style="bold")
    top = found.top
    if found.verdict_kind == top_kind(found) and top is not None and top.measurable:
        # the sentence's figures in one line: class, cost of the step, fixed step
        head.append(f"{top.kind}-bound, ", style=_STYLE.get(top.cause.label, "bold"))
        head.append(
            f"{fmt_dur(top.per_step_ns)} of each {fmt_dur(top.projected_step_ns + top.per_step_ns)} step "
            f"({100 * top.step_share:.0f}%); fixed: {fmt_dur(top.projected_step_ns)}, {rate_text(top)}"
        )
    else:
        head.append(sanitize(found.verdict, 600))
    out = [head]
    # the first COMPACT_FINDINGS, or the window holding the cursor
    lo = max(0, min(cursor - COMPACT_FINDINGS + 1, len(found.ranked) - COMPACT_FINDINGS))
    shown = list(enumerate(found.ranked))[lo : lo + COMPACT_FINDINGS]
    out += [_finding_line(f, k, k == cursor) for k, f in shown]
    more = len(found.ranked) - len(shown)
    if more > 0:
        out.append(Text(f"  … {more} more (f, then j/k)", style="dim"))
    out.append(_keys_hint(active and bool(found.ranked), largest_first))
    return out


def _walk_head(found, k: int, place: int) -> Text:
    f = found.ranked[k]
    t = Text()
    t.append(f"Finding F{k + 1} ", style="bold")
    t.append(f.kind, style=_STYLE.get(f.cause.label, "bold"))
    t.append(f": {sanitize(f.title, 120)} — gap {place + 1} of {f.positions.size} (n/N)")
    return t


def walk_text(found, k: int, place: int, gap_card: Text) -> Text:
    """The card of finding ``k`` while ``n``/``N`` walk its positions (``place``: the
    one selected): what it costs and would recover, its card (smell, why, first
    experiment, forbidden step, proof; none where no gap is mostly its own), then the
    selected gap's own card."""
    f = found.ranked[k]
    t = _walk_head(found, k, place)
    t.append("\n")
    t.append(
        f"{fmt_dur(f.per_step_ns)} per step ({100 * f.step_share:.1f}%), in {f.steps_with} of {f.steps_total} steps; "
        f"fixed: {fixed_text(f)}\n"
    )
    t.append("Fix: ", style="bold")
    t.append(sanitize(f.fix, 200) + "\n")
    c = f.card
    if c is not None:  # none where no gap is mostly the finding's own (``findings``)
        for label, value in (
            ("Smell", c.smell),
            ("Why", c.why),
            ("First experiment", c.first_experiment),
            ("Forbidden", c.forbidden_step),
            ("Proof", c.proof),
        ):
            t.append(f"{label}: ", style="bold")
            t.append(sanitize(str(value)) + "\n")
    elif f.card_note:  # no member's card fits the finding: said, not a contradicting card
        t.append(sanitize(f.card_note) + "\n", style="italic")
    t.append("\nThis gap\n", style="bold underline")
    t.append_text(gap_card)
    return t


def walk_lines(found, k: int, place: int, gap_lines: list[Text]) -> list[Text]:
    """The compact form of ``walk_text``: the finding's line, then the gap's compact
    card."""
    f = found.ranked[k]
    fix = Text()
    fix.append("Fix: ", style="bold")
    fix.append(f"{sanitize(f.fix, 200)} → {fixed_text(f)}")
    return [_walk_head(found, k, place), fix, *gap_lines]
