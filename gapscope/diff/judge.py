"""Can this diff be judged, and if not, why: the gate before any "faster" or "slower".

A verdict compares the steady steps of two traces; it is only as good as those steps.
``judgement`` refuses one when a side has no complete steady-state step (its file was
cut off before any step is known to be complete, every event sits at one time, or no
steps are known and its GPU window holds a single op), and names the damage the loader
reported on a side that is still judged (cut off: compared over its complete steps
only; events skipped or values replaced on load). What makes a step incomplete is
decided in ``side._incomplete``; what counts as damage in ``gapscope.report.damage``.

A side without GPU work is not judged here when it is intact (the comparability check
gives no verdict for it: "not comparable", which ``--fail-if-slower`` does not fail);
when it is damaged, the damage may be why, so it cannot be judged (and the check fails).
"""

from __future__ import annotations

from gapscope.diff.side import Side

__all__ = ["judgement", "CANNOT_JUDGE"]

#: The verdict word of a diff the gate refused.
CANNOT_JUDGE = "cannot judge"


def judgement(before: Side, after: Side) -> dict:
    """``judged`` (bool), ``reasons`` (why not, one sentence per side; empty when
    judged) and ``caveats`` (the damage of a judged side, for the verdict line)."""
    reasons: list[str] = []
    caveats: list[str] = []
    for name, side in (("BEFORE", before), ("AFTER", after)):
        damage = side.damage.words()
        if not side.has_gpu:
            if side.damage.damaged:  # the damage may be why: not "another program"
                reasons.append(f"{name} has no GPU work ({damage})")
            continue
        if side.n_steady == 0:
            why = side.incomplete[0][1] if side.incomplete else "no steady step"
            reasons.append(f"{name} has no complete steady-state step ({why})")
        elif side.damage.truncated:
            caveats.append(f"{name} {damage}: compared over its {side.n_steady} complete step(s) only")
        elif side.damage.damaged:
            caveats.append(f"{name} {damage}")
    return dict(judged=not reasons, reasons=reasons, caveats=caveats)
