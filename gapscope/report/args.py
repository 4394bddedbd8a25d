"""Command-line arguments of ``gapscope report``, thresholds derived from ``Params``.

Every field of ``gapscope.analysis.types.Params`` becomes an option, with its unit in the flag
(``min_gap_ns`` → ``--min-gap-us`` in microseconds, ``small_copy_max_bytes`` →
``--small-copy-max-bytes``), its default and its definition (taken from the field's
line in the ``Params`` docstring) in ``--help``. A field added to ``Params`` later is
picked up without a change here.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys

from gapscope.analysis.findings import FINDING_MIN_SHARE, GPU_BOUND_IDLE_SHARE, VERDICT_MIN_SHARE
from gapscope.analysis.types import Params

__all__ = [
    "build_parser",
    "add_threshold_options",
    "params_from_args",
    "threshold_specs",
    "ThresholdSpec",
    "UsageError",
    "Parser",
]

DEFINITIONS = "docs/definitions.md"


class UsageError(Exception):
    """Bad command-line usage; ``str()`` is one line. Exit status 2."""


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` that raises ``UsageError`` instead of printing usage and
    exiting, so the command can print one line and exit 2 like every other error."""

    def error(self, message: str):
        raise UsageError(f"{message} (see '{self.prog} --help')")


@dataclasses.dataclass(frozen=True)
class ThresholdSpec:
    """One ``Params`` field as a command-line option.

    ``field``: name in ``Params``; ``flag``: option string; ``unit``: what the user
    types (``µs``, ``bytes``, ``count`` …); ``scale``: ns per user unit (1000 for µs,
    1 otherwise); ``kind``: ``int`` or ``float``; ``default``: the user-unit default;
    ``definition``: one line from the ``Params`` docstring.
    """

    field: str
    flag: str
    unit: str
    scale: int
    kind: type
    default: float | int
    definition: str


def _docstring_lines() -> dict[str, str]:
    """``{field: definition}`` from ``- ``field``: text`` items of ``Params.__doc__``."""
    doc = Params.__doc__ or ""
    out: dict[str, str] = {}
    current: str | None = None
    for raw in doc.splitlines():
        line = raw.strip()
        m = re.match(r"-\s+``(\w+)``\s*:\s*(.*)", line)
        if m:
            current = m.group(1)
            out[current] = m.group(2)
        elif current and line and not line.startswith("-"):
            out[current] += " " + line
        else:
            current = None
    return {k: " ".join(v.replace("``", "").split()) for k, v in out.items()}


def threshold_specs() -> list[ThresholdSpec]:
    """The options for every ``Params`` field, in declaration order."""
    docs = _docstring_lines()
    specs = []
    defaults = Params()
    for f in dataclasses.fields(Params):
        value = getattr(defaults, f.name)
        ann = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
        kind: type = float if "float" in ann or isinstance(value, float) else int
        if isinstance(value, bool) or "bool" in ann:
            continue  # no boolean thresholds today; keep their defaults
        base = f.name
        if base.endswith("_ns"):
            flag, unit, scale, kind = base[:-3] + "_us", "µs", 1000, float
            default: float | int = value / 1000
        elif base.endswith("_bytes"):
            flag, unit, scale, default = base, "bytes", 1, value
        elif base.endswith(("_share", "_fraction", "_ratio")):
            flag, unit, scale, default = base, "fraction", 1, value
        else:
            flag, unit, scale, default = base, "count" if kind is int else "", 1, value
        definition = docs.get(f.name, "see gapscope.analysis.types.Params")
        specs.append(ThresholdSpec(f.name, "--" + flag.replace("_", "-"), unit, scale, kind, default, definition))
    return specs


def _fmt_default(spec: ThresholdSpec) -> str:
    d = spec.default
    if isinstance(d, float) and d.is_integer():
        d = int(d) if spec.unit != "µs" else d
    unit = f" {spec.unit}" if spec.unit and spec.unit != "count" else ""
    return f"{d:g}{unit}" if isinstance(d, float) else f"{d}{unit}"


def build_parser(prog: str = "gapscope report") -> argparse.ArgumentParser:
    """The ``gapscope report`` argument parser (raises ``UsageError`` on bad usage)."""
    p = Parser(
        prog=prog,
        description=(
            "Print a headless report of a trace: first the verdict and the findings (patterns "
            "across the steady-state steps, ranked by the idle a fix would recover per step), then "
            "format, span, lanes, per-device GPU busy "
            "and idle, idle gaps with their cause class, recurring groups with cards, "
            "picket-fence episodes, the per-step budget and the loader's warnings. "
            "Never imports the viewer; never writes the input file."
        ),
        epilog=(
            "Definitions (GPU busy = union of kernels over all streams of a device; "
            "'fully idle' also counts copies and memsets as busy; idle gap; cause classes "
            f"sync > copy > launch > host) follow {DEFINITIONS}. The verdict is 'GPU-bound' below "
            f"{100 * GPU_BOUND_IDLE_SHARE:.0f}% idle per step and names no class whose top finding "
            f"recovers under {100 * VERDICT_MIN_SHARE:.0f}% of the step; findings under "
            f"{100 * FINDING_MIN_SHARE:.1f}% are not listed; edge gaps (before the first kernel, after "
            "the last) are in no per-step figure. Exit status: 0 ok, "
            "2 bad input or usage, 1 internal error (please report it)."
        ),
    )
    p.add_argument(
        "trace",
        metavar="TRACE",
        help="Chrome/Kineto trace (.json, .json.gz), ASCII timeline (.txt) or Nsight Systems export (.sqlite, .nsys-rep)",
    )
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="one JSON document with stable keys (docs/report-json.md)")
    fmt.add_argument("--markdown", action="store_true", help="Markdown, for tickets and chat")
    p.add_argument(
        "--top",
        type=int,
        default=10,
        metavar="N",
        help="how many of the largest gaps, and of the recurring groups, to list (default 10; --json has every group)",
    )
    add_width_option(p)
    p.add_argument(
        "--what-if",
        dest="what_if",
        action="append",
        default=[],
        metavar="NAME[,NAME...]",
        help="also project the step with these CPU event names removed (verbatim, else substring; "
        "their time inside idle gaps is taken out), e.g. --what-if 'tensor.item(),logging callback'",
    )
    add_threshold_options(p)
    return p


#: The widest text the renderers lay out (columns): far past any terminal; a width of
#: 100,000,000 took Rich over a minute and 1.6 GB.
MAX_WIDTH = 1000


def _width(text: str) -> int:
    """``--width``'s value: a whole number of at most ``MAX_WIDTH`` columns (each
    command checks its own least)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of columns: {text!r}") from None
    if value > MAX_WIDTH:
        raise argparse.ArgumentTypeError(f"at most {MAX_WIDTH} columns, got {text}")
    return value


def add_width_option(p: argparse.ArgumentParser) -> None:
    """``--width COLS`` of the text renderers (shared by report, diff and rank sets),
    at most ``MAX_WIDTH``."""
    p.add_argument(
        "--width",
        type=_width,
        default=None,
        metavar="COLS",
        help="text width (default: the terminal's, or $COLUMNS, or 100 when not a terminal)",
    )


def add_threshold_options(p: argparse.ArgumentParser) -> None:
    """Add one option per ``Params`` field to ``p``, in a "thresholds" group (shared by
    ``gapscope report`` and ``gapscope diff``)."""
    g = p.add_argument_group(
        "thresholds",
        f"Thresholds of the diagnosis (gapscope.analysis.types.Params); definitions from {DEFINITIONS}.",
    )
    for spec in threshold_specs():
        metavar = "X" if spec.kind is float else "N"
        g.add_argument(
            spec.flag,
            dest=spec.field,
            type=spec.kind,
            default=None,
            metavar=metavar,
            help=f"{_plain_definition(spec.definition)} [unit: {spec.unit or 'number'}; default {_fmt_default(spec)}]",
        )


_VALUE_NOTE = re.compile(r"\s*\((?:design: )?[\d.,]+\s*(?:µs|ms|ns|KiB|MiB|bytes)?\)\.?$")


def _plain_definition(text: str) -> str:
    """The definition without a closing "(30 µs)." / "(design: 2 µs)." that only
    repeats the default the help prints next to it."""
    return re.sub(r";\s*default [\d.,]+\s*[^\s)]*\)", ")", _VALUE_NOTE.sub("", text))


def params_from_args(ns: argparse.Namespace) -> Params:
    """``Params`` with every threshold the user gave, converted to its field's unit.

    Raises ``UsageError`` for a negative threshold or one that does not fit the field.
    """
    changes = {}
    for spec in threshold_specs():
        v = getattr(ns, spec.field, None)
        if v is None:
            continue
        if v != v or v < 0 or v in (float("inf"),):
            raise UsageError(f"{spec.flag} must be a finite number >= 0, got {v!r}")
        if spec.scale != 1:
            v = int(round(v * spec.scale))
        elif isinstance(getattr(Params(), spec.field), int):
            v = int(v)
        changes[spec.field] = v
    return dataclasses.replace(Params(), **changes)


def stdout_is_tty() -> bool:
    """Whether standard output is a terminal (False when closed or redirected)."""
    try:
        return sys.stdout.isatty()
    except (ValueError, AttributeError):
        return False
