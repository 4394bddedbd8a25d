"""Render the diff document as GitHub-flavoured Markdown (``gapscope diff --markdown``).

For tickets and pull requests. Trace names go into code spans (``md_code``) and prose
through ``md_text``, as in the report's Markdown. Same figures as the text: both read
``build_diff_document``'s dict.
"""

from __future__ import annotations

from gapscope.diff.document import class_text, not_compared_text, rate_text, side_damage_text
from gapscope.report.markdown import md_code, md_text, warnings_markdown
from gapscope.units import column_unit, fmt_delta, fmt_dur, fmt_dur_pair, fmt_in, fmt_rate

__all__ = ["render_diff_markdown"]


def _row(cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _table(header, rows) -> list[str]:
    return [_row(header), _row(["---"] * len(header))] + [_row(r) for r in rows]


def _ratio(r) -> str:
    return "-" if r is None else f"{r:.2f}×"


def _findings(doc: dict, top: int) -> list[str]:
    """The findings of the two traces matched (``diff.findings``)."""
    fd = doc.get("findings")
    if not fd or not fd["rows"]:
        return []
    out = ["", "## Findings (by cost per step; matched by kind and named range)", ""]
    if fd.get("sentence"):
        out += [md_text(fd["sentence"]), ""]
    out += _table(
        ["finding", "before", "after", "status"],
        [
            [
                md_text(r["title"]),
                "-" if r["before_per_step_ns"] is None else fmt_dur(r["before_per_step_ns"]),
                "-" if r["after_per_step_ns"] is None else fmt_dur(r["after_per_step_ns"]),
                r["status"],
            ]
            for r in fd["rows"][:top]
        ],
    )
    return out


def render_diff_markdown(doc: dict, top: int = 10) -> str:
    """The diff of ``doc`` as one Markdown string (ends with a newline); ``top`` rows
    of the position and kernel-family tables."""
    out = _head_markdown(doc)
    out += _findings(doc, top)
    out += _comparability_markdown(doc)
    out += _per_step_markdown(doc)
    out += _positions_markdown(doc, top)
    out += _families_markdown(doc, top)
    out += _left_markdown(doc)
    return "\n".join(out) + "\n"


def _head_markdown(doc: dict) -> list[str]:
    """The title, the verdict, GPU work, CI check and left lines, and the loader
    warnings of both sides."""
    b, a = doc["before"], doc["after"]
    out = [f"# gapscope diff: {md_code(b['path'], None, False)} → {md_code(a['path'], None, False)}", ""]
    out.append(f"**Verdict:** {md_text(doc['verdict']['line'])}")
    if doc["kernels"].get("sentence"):
        out += ["", f"**GPU work:** {md_text(doc['kernels']['sentence'])}"]
    if doc.get("check"):
        out += ["", f"**CI check:** {md_text(doc['check']['line'])}"]
    if doc.get("left"):
        out += ["", f"**Left:** {md_text(doc['left']['line'])}"]
    if b.get("warnings") or a.get("warnings"):
        for name, side in (("BEFORE", b), ("AFTER", a)):
            out += warnings_markdown(side.get("warnings") or [], f"## Loader warnings of {name}", "none")
    return out


def _comparability_markdown(doc: dict) -> list[str]:
    """``## Comparability``: each side's format, damage, steady steps and GPU, the
    notes, and the warm-up and incomplete steps left out."""
    b, a = doc["before"], doc["after"]
    out = ["", "## Comparability", ""]
    for name, side in (("Before", b), ("After", a)):
        st = side["steps"]
        gpu = f"; GPU {side['device']}: {md_code(side['gpu'], None, False)}" if side.get("gpu") else ""
        damage = side_damage_text(side)
        out.append(
            f"- {name}: {side['format']}; {damage + '; ' if damage else ''}{st['steady_count']} steady of "
            f"{st['count']} step(s) ({st['source']} {md_code(st['name'], 60, False) if st['name'] else ''}){gpu}"
        )
    out += [f"- {md_text(n)}" for n in doc["comparability"]["notes"]] or ["- same GPU, kernel mix and step count"]
    for side_name in ("before", "after"):
        for e in doc[side_name]["steps"]["excluded"][:3]:
            out.append(f"- warm-up left out of {side_name.upper()}: step {e['index'] + 1}, {md_text(e['reason'])}")
        for e in (doc[side_name]["steps"].get("incomplete") or [])[:3]:
            out.append(f"- incomplete, left out of {side_name.upper()}: step {e['index'] + 1}, {md_text(e['reason'])}")
    return out


def _per_step_markdown(doc: dict) -> list[str]:
    """``## Per step``: the medians of wall time, GPU busy and idle, idle by class and
    the rate, before and after."""
    out: list[str] = []
    ps = doc["per_step"]
    u = column_unit(max(int(ps["wall_ns"]["before_ns"] or 0), int(ps["wall_ns"]["after_ns"] or 0), 1))

    def cell(ns, spread=None):
        return "-" if ns is None else fmt_in(ns, u) + (f" ± {fmt_in(spread, u)}" if spread else "")

    out += ["", f"## Per step (median over {ps['steps_before']} and {ps['steps_after']} steady steps ± spread)", ""]
    rows = []
    for label, key in (("step wall time", "wall_ns"), ("GPU busy", "gpu_busy_ns"), ("GPU idle", "idle_ns")):
        r = ps[key]
        rows.append(
            [
                label,
                cell(r["before_ns"], r["before_spread_ns"]),
                cell(r["after_ns"], r["after_spread_ns"]),
                fmt_delta(r["change_ns"]),
                _ratio(r["ratio"]),
            ]
        )
    for label, r in ps["idle_by_class_ns"].items():
        if r["before_ns"] or r["after_ns"]:
            rows.append(
                [
                    f"idle: {label} (mean)",
                    cell(r["before_ns"]),
                    cell(r["after_ns"]),
                    fmt_delta(r["change_ns"]),
                    _ratio(r["ratio"]),
                ]
            )
    rlabel, _ = rate_text(ps)
    rate = ps[ps["rate_key"]]
    ch = rate["change"]
    rows.append(
        [
            rlabel,
            fmt_rate(rate["before"]),
            fmt_rate(rate["after"]),
            "-" if ch is None else ("+" if ch > 0 else "−" if ch < 0 else "±") + fmt_rate(abs(ch)),
            _ratio(rate["ratio"]),
        ]
    )
    out += _table(["", "before", "after", "change", "after ÷ before"], rows)
    return out


def _positions_markdown(doc: dict, top: int) -> list[str]:
    """``## Idle positions``: the ``top`` position groups, before → after."""
    out: list[str] = []
    change = doc.get("group_change_ns") or {}
    counts = ", ".join(
        f"{k} {v}" + (f" ({fmt_delta(change[k])}/step)" if change.get(k) else "")
        for k, v in doc["group_counts"].items()
    )
    out += ["", f"## Idle positions ({counts})", ""]
    groups = doc["groups"]
    if groups:
        rows = []
        for g in groups[: max(0, top)]:
            pb, pa = g["before"], g["after"]
            idle = (
                fmt_dur_pair(pb["idle_per_step_ns"], pa["idle_per_step_ns"])
                if pb and pa
                else f"{fmt_dur(pb['idle_per_step_ns'])} → -"
                if pb
                else f"- → {fmt_dur(pa['idle_per_step_ns'])}"
            )
            where = " (step boundary)" if (pa or pb)["boundary"] else ""
            rows.append(
                [
                    f"**{g['status']}**",
                    md_code(g["label"], 80) + where,
                    f"{class_text(pb)} → {class_text(pa)}",
                    idle,
                    fmt_delta(g["change_ns"]),
                ]
            )
        out += _table(["status", "position", "class before → after", "idle per step", "change"], rows)
        if len(groups) > top:
            out += ["", f"… and {len(groups) - top:,} more positions (in `--json`)"]
    else:
        out.append(not_compared_text(doc) or "No recurring idle in either trace.")
    return out


def _families_markdown(doc: dict, top: int) -> list[str]:
    """``## GPU busy by kernel family (per step)``: the ``top`` families."""
    out: list[str] = []
    fams = doc["kernels"]["families"]
    out += ["", "## GPU busy by kernel family (per step)", ""]
    if fams:
        out += _table(
            ["family", "before", "after", "change"],
            [
                [md_code(r["family"], 80), fmt_dur(r["before_ns"]), fmt_dur(r["after_ns"]), fmt_delta(r["change_ns"])]
                for r in fams[: max(0, top)]
            ],
        )
        if len(fams) > top:
            out += ["", f"… and {len(fams) - top:,} more families (in `--json`)"]
    elif not_compared_text(doc):
        out.append(str(not_compared_text(doc)))
    return out


def _left_markdown(doc: dict) -> list[str]:
    """``## What is left``: the card of the position left (nothing without one)."""
    out: list[str] = []
    left = doc.get("left")
    if left:
        c = left["card"]
        cause = c.get("cause") or "-"
        if c.get("secondary"):
            cause += f" (secondary: {c['secondary']} {100 * (c.get('secondary_share') or 0):.0f}%)"
        out += [
            "",
            f"## What is left: {md_code(left['position']['label'], 80, False)}",
            "",
            f"- **Smell:** {md_text(c.get('smell'))}",
            f"- **Cause class:** {cause}",
            f"- **Why the GPU is empty:** {md_text(c.get('why'))}",
            f"- **First experiment:** {md_text(c.get('first_experiment'))}",
            f"- **Forbidden next step:** {md_text(c.get('forbidden_step'))}",
            f"- **Proof of improvement:** {md_text(c.get('proof'))}",
        ]
    return out
