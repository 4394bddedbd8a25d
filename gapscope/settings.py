"""Every ``GAPSCOPE_*`` environment variable, read in one place (``read_settings``).

gapscope's settings are environment variables (a command line's options are its own):
each is a field of ``Settings``, named as the variable without its ``GAPSCOPE_`` prefix,
in lower case (``cache_max_bytes`` is ``GAPSCOPE_CACHE_MAX_BYTES``). ``read_settings``
reads them from ``os.environ`` at every call, so a test or a command that sets one
(``gapscope --no-cache`` sets ``GAPSCOPE_NO_CACHE=1``) is seen by the next reader; it is
cheap (13 lookups). The table of every variable, its meaning, default and unit, is
``docs/settings.md`` (``tests/test_settings.py`` checks the two list the same ones).

Values: a variable that is unset or empty holds its default. A switch takes ``1``,
``true``, ``yes``, ``on`` or ``0``, ``false``, ``no``, ``off`` (any case); a size is a
number of bytes with an optional K/M/G/T suffix (powers of 1024: ``64M``, ``2G``,
``1.5g``; ``parse_size``; below 2**63); a count is a whole number of 1 or more (ASCII
digits both). Any other value
raises ``SettingsError`` naming the variable and what it takes; ``gapscope`` checks every
variable before it runs a command and prints that error as one line (exit status 2).

A leaf like ``gapscope.units``: the standard library only, so every layer (parsers,
analysis, the commands, the viewer) may read it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from fractions import Fraction
from pathlib import Path

__all__ = ["PREFIX", "Settings", "SettingsError", "parse_size", "read_settings", "variable_of"]

#: The prefix of every variable: ``Settings.cache_dir`` is ``GAPSCOPE_CACHE_DIR``.
PREFIX = "GAPSCOPE_"

_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
#: The largest size: what a signed 64-bit file offset holds (``os.lseek``, ``mmap``).
MAX_SIZE_BYTES = (1 << 63) - 1


class SettingsError(ValueError):
    """A ``GAPSCOPE_*`` variable holds a value its setting does not take. ``str()`` is
    one line: ``GAPSCOPE_LOAD_PROCESSES='many' is not a count (a whole number, 1 or more)``."""

    def __init__(self, variable: str, value: str, expected: str) -> None:
        super().__init__(f"{variable}={value!r} is not {expected}")
        self.variable = variable
        self.value = value


def parse_size(text: str) -> int | None:
    """``"123"``, ``"64M"``, ``"2G"``, ``"1.5g"`` (powers of 1024; an optional ``B`` or
    ``iB`` after the suffix) to bytes, exact (a fraction of a byte is dropped); None if
    not a size: ASCII digits only, at most ``MAX_SIZE_BYTES``. Sizes as people write them
    in environment variables and options (``gapscope mcp --max-memory``)."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([kKmMgGtT]?)(?:i?[bB])?\s*", text)
    if not m:
        return None
    value = int(Fraction(m.group(1)) * _SUFFIX[m.group(2).upper()])
    return value if value <= MAX_SIZE_BYTES else None


@dataclass(frozen=True)
class Settings:
    """What the ``GAPSCOPE_*`` variables say; a field's default is what an unset variable
    means. Built by ``read_settings``; the meaning of each is in ``docs/settings.md``."""

    cache_dir: Path | None = None
    """gapscope's cache directory (loaded traces in ``traces/``, Nsight exports in
    ``nsys/``); None: the platform's user cache directory (``gapscope.parsers.cache``)."""
    no_cache: bool = False
    """Neither read nor write the trace cache (``gapscope --no-cache`` sets it)."""
    cache_max_bytes: int = 2 << 30
    """Most bytes the trace cache keeps; the entries used least recently go first."""
    cache_min_bytes: int = 8 << 20
    """Traces of fewer bytes of text are not cached (they load fast anyway)."""
    max_trace_bytes: int | None = None
    """Most bytes of trace text (after gzip) a load reads; None: a third of the available
    memory (``gapscope.parsers.detect.default_limit``)."""
    load_processes: int | None = None
    """Processes that decode one large JSON trace; 1 turns the split off; None: the CPUs
    this process may use, at most 8 (``gapscope.parsers.chrome.parallel.fork``)."""
    xscan: bool = True
    """Use the C scanner of JSON events where it was built (off: msgspec only)."""
    pfscan: bool = True
    """Use the C transcoder of Perfetto packets where it was built (off: the generated
    protobuf classes only)."""
    no_preview: bool = False
    """The viewer draws no device-lanes preview while a large trace loads."""
    state_dir: Path | None = None
    """Where exercise progress is kept; None: the platform's user state directory."""
    learner: str | None = None
    """Whose exercise progress it is; None: the login name."""
    dask_scheduler: str | None = None
    """The Dask scheduler address for rank sets (the default of ``--dask-scheduler``)."""
    debug: bool = False
    """An unexpected error shows its traceback instead of one line."""


def variable_of(name: str) -> str:
    """The environment variable of ``Settings`` field ``name`` (``"cache_dir"`` ->
    ``"GAPSCOPE_CACHE_DIR"``)."""
    return PREFIX + name.upper()


def _switch(variable: str, text: str) -> bool:
    low = text.lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise SettingsError(variable, text, "a switch (1/true/yes/on or 0/false/no/off)")


def _size(variable: str, text: str) -> int:
    value = parse_size(text)
    if value is None:
        raise SettingsError(variable, text, "a size (a number of bytes, or with K/M/G/T)")
    return value


def _count(variable: str, text: str) -> int:
    if not re.fullmatch(r"[0-9]+", text) or int(text) < 1:  # not isdigit(): '²' is a digit
        raise SettingsError(variable, text, "a count (a whole number, 1 or more)")
    return int(text)


def _path(variable: str, text: str) -> Path:
    return Path(os.path.expanduser(text))


def _text(variable: str, text: str) -> str:
    return text


#: How each field's text becomes its value (by the field's type).
_READERS: dict[str, Callable[[str, str], object]] = {
    "Path | None": _path,
    "bool": _switch,
    "int": _size,
    "int | None": _size,
    "str | None": _text,
}
#: Fields whose ``int`` is a count, not a size.
_COUNTS = frozenset({"load_processes"})


def read_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """The settings in ``environ`` (default ``os.environ``, read now). Raises
    ``SettingsError`` (a ``ValueError``) for the first variable whose value its
    setting does not take; unset or empty (after stripping blanks) is the default."""
    env = os.environ if environ is None else environ
    values: dict[str, object] = {}
    for f in fields(Settings):
        variable = variable_of(f.name)
        text = env.get(variable, "").strip()
        if not text:
            continue
        reader = _count if f.name in _COUNTS else _READERS[str(f.type)]
        values[f.name] = reader(variable, text)
    return Settings(**values)  # type: ignore[arg-type]
