"""Plain-text formatting shared by the report renderers: shares, rates, sizes, safe names
(durations and times: ``gapscope.units``).

No Rich, no Textual: pure string functions, so the text and Markdown renderers (and
their tests) agree on every figure.
"""

from __future__ import annotations

import re
import unicodedata

from gapscope.analysis.names import short_kernel_name
from gapscope.units import Unit, column_unit, fmt_bytes, fmt_dur, fmt_in, fmt_rate

__all__ = [
    "fmt_share",
    "safe_name",
    "budget_rows",
    "BUDGET_LABELS",
    "short_name",
    "device_label",
    "rank_text",
    "kind_counts_text",
    "NO_RATE",
    "more_groups_line",
    "more_gaps_line",
    "more_episodes_line",
    "warning_message",
]


def fmt_share(part: int | float, whole: int | float) -> str:
    """``part / whole`` as a percentage with one decimal (``70.3%``); ``-`` when whole is 0."""
    if not whole:
        return "-"
    return f"{100.0 * float(part) / float(whole):.1f}%"


_AMD_NAME = re.compile(r"\b(?:AMD|Radeon|Instinct)\b", re.IGNORECASE)


def device_label(prop: object) -> str:
    """One line for an entry of Kineto's ``deviceProperties``: name, memory,
    architecture and compute-unit count (``NVIDIA H100, 79.2 GiB, sm_90, 132 SMs``).

    The architecture is ``gcnArchName`` when present (ROCm; shown without its
    ``:feature`` suffixes, e.g. ``gfx90a``), else ``sm_<computeMajor><computeMinor>``
    for NVIDIA devices only. Kineto on ROCm fills ``computeMajor``/``computeMinor``
    from HIP's ``major``/``minor``, which are not CUDA SM versions (an MI250 reports
    9.0, an MI300X 9.4), so an AMD device (``gcnArchName``, a 64-wide ``warpSize`` or
    an AMD name) gets no ``sm_`` label, and its ``numSms`` (HIP's
    ``multiProcessorCount``) is counted in CUs. Names are untrusted: made safe here.
    """
    if not isinstance(prop, dict):
        return safe_name(str(prop))
    name = safe_name(str(prop.get("name") or "")) or "?"
    parts = [name]
    mem = prop.get("totalGlobalMem")
    if isinstance(mem, (int, float)) and not isinstance(mem, bool) and mem > 0:
        parts.append(fmt_bytes(int(mem)))
    arch = prop.get("gcnArchName")
    amd = bool(arch) or prop.get("warpSize") == 64 or bool(_AMD_NAME.search(name))
    if isinstance(arch, str) and arch:
        parts.append(safe_name(arch.split(":", 1)[0]))
    elif not amd and "computeMajor" in prop:
        parts.append(safe_name(f"sm_{prop.get('computeMajor')}{prop.get('computeMinor', '')}"))
    if "numSms" in prop:
        parts.append(safe_name(f"{prop['numSms']} {'CUs' if amd else 'SMs'}"))
    return ", ".join(parts)


def rank_text(source: dict) -> str | None:
    """``"<rank> of world size <world_size>"`` of a report document's ``source`` (``?``
    for the one not recorded), or None when the trace records neither."""
    rank, world = source.get("rank"), source.get("world_size")
    if rank is None and world is None:
        return None
    return f"{'?' if rank is None else rank} of world size {'?' if world is None else world}"


def kind_counts_text(by_kind: dict, shown: int = 4) -> str:
    """A lane's ``event_counts_by_kind`` as ``kernel 130, memcpy 10``: the ``shown``
    most frequent kinds, then `` …`` when there are more."""
    kinds = sorted(by_kind.items(), key=lambda kv: -kv[1])
    return ", ".join(f"{k} {v:,}" for k, v in kinds[:shown]) + (" …" if len(kinds) > shown else "")


#: Most characters of a trace string a text or Markdown report shows (the JSON report
#: keeps names whole); longer ones end with ``…``.
DISPLAY_MAX_CHARS = 8192

_ESC_SEQ = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)?|[@-Z\\-_])")


def safe_name(name: str, max_len: int | None = None) -> str:
    """An untrusted trace string made safe for a terminal, otherwise unchanged.

    Terminal escape sequences (CSI, OSC, two-byte ESC) are replaced by a visible
    ``\\e[…`` marker as a whole; every other control or format character (Unicode
    categories Cc, Cf, Cs: NUL, newline, bidi overrides, zero-width joiners, …) is
    shown as ``\\xNN`` / ``\\uNNNN``. Brackets and backslashes are kept verbatim: the
    result must still be wrapped in ``rich.text.Text``, never used as markup.
    ``max_len`` truncates with ``…``; with no ``max_len`` the result is still cut at
    ``DISPLAY_MAX_CHARS``. Work is bounded by the output length, not the input's: only
    the head that can be shown is escaped (a 10 MB name took seconds per mention).
    """
    s = str(name)
    max_len = DISPLAY_MAX_CHARS if max_len is None else min(max_len, DISPLAY_MAX_CHARS)
    if len(s) > max_len + 16:  # escaping never shortens: this head gives the shown prefix
        s = s[: max_len + 16]
    if s.isprintable() and "\x1b" not in s:
        out = s
    else:
        s = _ESC_SEQ.sub(lambda m: "\\e" + _escape_chars(m.group(0)[1:]), s)
        out = _escape_chars(s)
    if len(out) > max_len > 1:
        out = out[: max_len - 1] + "…"
    return out


#: A quoted name in a loader message (Python ``repr``, single or double quotes).
_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'" + r'|"(?:[^"\\]|\\.)*"')


def warning_message(message: str, name_len: int = 60) -> str:
    """A loader warning as a reader takes it in: each quoted name longer than
    ``name_len`` characters elided in its middle (its head and tail stay: ``'void
    at::native::reduce_kernel<512, 1, …unsigned int, long, 4>)'``), so that the finding
    (``overlaps … by 2 µs; both kept``) is not cut off behind a kernel's template name.
    Not made safe: callers still pass the result through ``safe_name`` or ``sanitize``."""

    def elide(m: re.Match) -> str:
        q = m.group(0)
        if len(q) <= name_len:
            return q
        head = (name_len * 2) // 3
        tail = name_len - head - 1
        return q[:head] + "…" + q[-tail:]

    return _QUOTED.sub(elide, message)


def _escape_chars(s: str) -> str:
    parts = []
    for ch in s:
        if ch == " " or unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            parts.append(ch)
        elif ord(ch) < 0x100:
            parts.append(f"\\x{ord(ch):02x}")
        else:
            parts.append(f"\\u{ord(ch):04x}")
    return "".join(parts)


#: Labels of the known budget keys (others are shown with their key name).
BUDGET_LABELS = {
    "device": "Device",
    "wall_ns": "Step wall time",
    "gpu_busy_ns": "GPU busy per step",
    "idle_ns": "GPU idle per step",
    "idle_share": "Idle share",
    "steps_per_s": "Steps/s",
    "tokens_per_s": "Tokens/s (one token per step)",
    "class_idle_ns": "Idle per step by cause",
    "one_time_idle_ns": "One-time idle per step",
    "typical_steps": "Split over steps",
}


def what_if_label(w: dict) -> str:
    """What a what-if row removes: its classes ("sync+host") or its named CPU segments
    ("`tensor.item()`, `logging callback`")."""
    names = w.get("removed_names") or []
    if names:
        return ", ".join(names)
    return "+".join(w.get("removed_causes", []))


def rate_key(budget: dict | None) -> tuple[str, str]:
    """(key, column name) of the per-step rate of a what-if row: tokens/s for a decode
    step (``budget["decode"]``, absent in older documents: tokens/s), else steps/s."""
    if budget is not None and budget.get("decode") is False:
        return "steps_per_s", "steps/s"
    return "tokens_per_s", "tokens/s"


#: A per-step rate that cannot be measured: the step has no length.
NO_RATE = "n/a (the step has no length: every event at one time)"


def more_gaps_line(doc: dict) -> str | None:
    """The line after the largest gaps for those a report leaves out, e.g. ``… and
    5,329 more gaps: 25.1 ms of idle (61.0% of gap idle)``; None when every gap is
    listed (``--json`` lists no more: ``top_gaps`` is limited too)."""
    shown = doc.get("top_gaps") or []
    left = int(doc.get("gap_count") or 0) - len(shown)
    if left <= 0:
        return None
    total = int(doc.get("idle_in_gaps_ns") or 0)
    idle = max(0, total - sum(int(g.get("dur_ns") or 0) for g in shown))
    share = f" ({fmt_share(idle, total)} of gap idle)" if total else ""
    return f"… and {left:,} more gap{'s' if left != 1 else ''}: {fmt_dur(idle)} of idle{share}"


def more_episodes_line(rest: list[dict], shown: int) -> str:
    """The line for the picket-fence episodes a report leaves out, e.g. ``… and 30 more
    episodes: 4.2 ms of idle (all in --json)``."""
    idle = sum(int(e.get("idle_ns") or 0) for e in rest)
    head = f"… and {len(rest):,} more" if shown else f"{len(rest):,}"
    return f"{head} episode{'s' if len(rest) != 1 else ''}: {fmt_dur(idle)} of idle (all in --json)"


def more_groups_line(rest: list[dict], idle_in_gaps_ns: int | None, shown: int = 1) -> str:
    """The line for the groups a report leaves out, e.g. ``… and 1,011 more groups:
    (in --json): 307.367 ms of idle (47.1% of gap idle), at most 2.814 ms each``
    (without "… and" / "more" when ``shown`` is 0)."""
    idle_ns = sum(int(g.get("total_ns") or 0) for g in rest)
    largest_ns = max(int(g.get("total_ns") or 0) for g in rest)
    n = f"{len(rest):,} group{'s' if len(rest) != 1 else ''}"
    head = f"… and {len(rest):,} more group{'s' if len(rest) != 1 else ''}" if shown else n
    share = f" ({fmt_share(idle_ns, idle_in_gaps_ns)} of gap idle)" if idle_in_gaps_ns else ""
    each = f", at most {fmt_dur(largest_ns)} each" if len(rest) > 1 else ""
    return f"{head} (in --json): {fmt_dur(idle_ns)} of idle{share}{each}"


def budget_rows(budget: dict) -> list[tuple[str, str]]:
    """(label, value) rows of a budget dict (``Budget`` as JSON), one unit for all
    durations (chosen by ``wall_ns``). ``steps`` and ``source`` are left out: the
    report prints them on its "Steps" line. Values are plain strings (no names)."""
    u = column_unit(int(budget.get("wall_ns") or 0))
    rows = []
    for k, v in budget.items():
        if k == "steps_per_s" and v is None and budget.get("tokens_per_s") is None:
            rows.append((BUDGET_LABELS[k], NO_RATE))  # a step of no length: never "0.00"
            continue
        if v is None or isinstance(v, list) or k in ("steps", "source", "decode"):
            continue
        if k == "steps_per_s" and budget.get("tokens_per_s") is not None:
            continue  # a decode step: the rate is shown as tokens/s
        label = BUDGET_LABELS.get(k, k.replace("_", " "))
        if k == "typical_steps":  # whose idle the split by cause is
            rows.append((label, _typical_steps_value(budget, v, u)))
            continue
        if k in ("other_steps_idle_ns", "warm_up_steps") or (k == "one_time_idle_ns" and not v):
            continue
        if k == "one_time_idle_ns":  # the warm-up inside the steps, in no class
            rows.append((label, f"{fmt_in(int(v), u)} (warm-up: in no cause and no what-if)"))
            continue
        value = _budget_value(k, v, u)
        if value is not None:
            rows.append((label, value))
    return rows


def _typical_steps_value(budget: dict, v, u: Unit | None) -> str:
    """The ``typical_steps`` row: ``k of n`` steps whose idle the split by cause is,
    with the other steps' idle range (in unit ``u``) left out."""
    n = int(budget.get("steps") or 0)
    other = budget.get("other_steps_idle_ns")
    rest = ""
    if isinstance(other, list) and len(other) == 2 and n > int(v):
        lo, hi = fmt_in(int(other[0]), u), fmt_in(int(other[1]), u)
        # one value once (df_index_resolver read "the other 1 idle 93.228 ms to 93.228 ms")
        idle = lo if lo == hi else f"{lo} to {hi}"
        rest = f"; the other {n - int(v)} idle {idle}, left out"
    warm = " and no warm-up in them" if budget.get("warm_up_steps") else ""
    return f"{v} of {n} (idle within 1.5x of the median step's{warm}{rest})" if n > 1 else str(v)


def _budget_value(k: str, v, u: Unit | None) -> str | None:
    """A budget field's value as text by its kind: ``*_ns`` durations (and dicts of
    them by class) in unit ``u``, ``*_share`` as percent, booleans, rates; None for a
    dict that is not of durations (no row)."""
    if isinstance(v, dict):
        if k.endswith("_ns"):
            parts = [f"{c} {fmt_in(int(x), u)}" for c, x in v.items() if isinstance(x, (int, float)) and x]
            return ", ".join(parts) or "-"
        return None
    if isinstance(v, bool):
        return str(v).lower()
    if k.endswith("_ns") and isinstance(v, (int, float)):
        return fmt_in(int(v), u)
    if k.endswith("_share") and isinstance(v, (int, float)):
        return f"{100 * v:.1f}%"
    if isinstance(v, float):
        return fmt_rate(v)
    return str(v)


def short_name(name: str, max_len: int) -> str:
    """``name`` made terminal-safe (``safe_name``) and, only when longer than
    ``max_len``, shortened the way profilers show C++ kernel names: without the
    ``void`` return type, the parameter list and namespace qualifiers, with nested
    template arguments folded to ``<…>``, then cut with ``…``. A name that fits is
    returned verbatim."""
    s = safe_name(name)
    if len(s) <= max_len:
        return s
    if " → " in s:  # a position label "A → B": shorten each side
        a, b = s.split(" → ", 1)
        half = max(8, (max_len - 3) // 2)
        return short_name(a, half) + " → " + short_name(b, max(8, max_len - 3 - min(len(a), half)))
    t = short_kernel_name(s, max_len)
    return safe_name(t, max_len)


#: Recurring groups shown with their full card in text and Markdown (the rest as a table).
GROUP_CARDS = 3
#: Rows of the Markdown table of further groups (tickets and chat need the largest few).
MD_GROUP_ROWS = 30
