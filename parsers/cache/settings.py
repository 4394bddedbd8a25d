"""Where gapscope's cache lives, whether the trace cache is on, and its size limits.

Environment:

- ``GAPSCOPE_CACHE_DIR``: gapscope's cache directory (default
  ``platformdirs.user_cache_dir("gapscope")``, ``~/.cache/gapscope`` on Linux). Loaded
  traces go to ``traces/`` in it, exports of Nsight reports to ``nsys/``
  (``gapscope.parsers.nsys.rep``). Never next to an input.
- ``GAPSCOPE_NO_CACHE``: set (to anything but ``0`` or nothing) to neither read nor
  write the trace cache; ``gapscope --no-cache`` sets it.
- ``GAPSCOPE_CACHE_MAX_BYTES``: most bytes the trace cache keeps (default
  ``DEFAULT_MAX_BYTES``, 2 GiB; K/M/G suffixes as ``GAPSCOPE_MAX_TRACE_BYTES``); the
  entries used least recently go first. It also never takes more than half of the
  disk space that is free when it writes.
- ``GAPSCOPE_CACHE_MIN_BYTES``: traces of less text than this (default
  ``DEFAULT_MIN_BYTES``, 8 MiB; the file's size for an Nsight export) are not written:
  they load in well under 0.1 s anyway.

The variables are read by ``gapscope.settings.read_settings`` (every ``GAPSCOPE_*``
variable is; ``docs/settings.md``), which raises ``SettingsError`` naming the variable
for a value that is not a size; ``gapscope`` checks them before it runs a command.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from gapscope.settings import Settings, read_settings

__all__ = [
    "DIR_ENV",
    "NO_CACHE_ENV",
    "MAX_BYTES_ENV",
    "MIN_BYTES_ENV",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MIN_BYTES",
    "cache_root",
    "traces_dir",
    "enabled",
    "max_bytes",
    "min_bytes",
]

DIR_ENV = "GAPSCOPE_CACHE_DIR"
NO_CACHE_ENV = "GAPSCOPE_NO_CACHE"
MAX_BYTES_ENV = "GAPSCOPE_CACHE_MAX_BYTES"
MIN_BYTES_ENV = "GAPSCOPE_CACHE_MIN_BYTES"
DEFAULT_MAX_BYTES = Settings.cache_max_bytes
DEFAULT_MIN_BYTES = Settings.cache_min_bytes


def cache_root() -> Path:
    """gapscope's cache directory (``$GAPSCOPE_CACHE_DIR``, else the user cache dir)."""
    env = read_settings().cache_dir
    if env is not None:
        return env
    import platformdirs

    return Path(platformdirs.user_cache_dir("gapscope"))


def traces_dir() -> Path:
    """Where cached traces are kept."""
    return cache_root() / "traces"


def enabled() -> bool:
    """Whether ``load`` reads and writes the trace cache (``GAPSCOPE_NO_CACHE`` unset,
    empty or off)."""
    return not read_settings().no_cache


def max_bytes() -> int:
    """``GAPSCOPE_CACHE_MAX_BYTES``, else ``DEFAULT_MAX_BYTES``."""
    return read_settings().cache_max_bytes


def min_bytes() -> int:
    """``GAPSCOPE_CACHE_MIN_BYTES``, else ``DEFAULT_MIN_BYTES``."""
    return read_settings().cache_min_bytes


def unlinked_temporary_file() -> int | None:
    """A temporary file in ``cache_root()/inflated`` (created 0o700), unlinked at once
    and returned open for reading and writing: a large text the loader maps (an
    inflated ``.json.gz``, a transcoded ``.pftrace``) lives there and nothing is left
    behind, whatever happens. None where the folder or the file cannot be made."""
    try:
        folder = os.path.join(cache_root(), "inflated")
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".json")
    except OSError:
        return None
    try:
        os.unlink(tmp)
    except OSError:
        os.close(fd)
        return None
    return fd
