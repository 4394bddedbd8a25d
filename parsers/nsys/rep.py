"""Nsight Systems reports (``.nsys-rep``, formerly ``.qdrep``): opened through their
SQLite export.

A report is a binary format only ``nsys`` reads. When ``nsys`` is on ``PATH`` the
report is exported once, with ``nsys export --type sqlite``, into the user cache
directory (``platformdirs.user_cache_dir("gapscope")/nsys``, or
``$GAPSCOPE_CACHE_DIR/nsys``), never next to the input; the export is keyed by the
report's absolute path, size and mtime, so a changed report is exported again and an
unchanged one never is. The export is written under a temporary name and renamed when
complete, so an interrupted export leaves nothing that looks finished. ``nsys``'s own
progress output goes to stderr when stderr is a terminal. Without ``nsys`` the error
gives the export command to run where Nsight Systems is installed.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from gapscope.parsers.cache.settings import cache_root
from gapscope.parsers.errors import TraceFormatError

__all__ = ["REPORT_SUFFIXES", "is_report_name", "cache_dir", "cached_export", "export_report"]

#: File name endings of Nsight Systems reports.
REPORT_SUFFIXES = (".nsys-rep", ".qdrep")


def is_report_name(path: str) -> bool:
    return path.lower().endswith(REPORT_SUFFIXES)


def cache_dir() -> Path:
    """Where exports of reports are kept (``nsys/`` in gapscope's cache directory,
    ``gapscope.parsers.cache.settings.cache_root``)."""
    return cache_root() / "nsys"


def _export_command(path: str, out: str) -> str:
    return f"nsys export --type sqlite --output {shlex.quote(out)} {shlex.quote(path)}"


def cached_export(path: str) -> Path:
    """Path the SQLite export of report ``path`` has (or will have) in the cache."""
    p = os.path.abspath(path)
    st = os.stat(p)
    key = hashlib.sha256(f"{p}\0{st.st_size}\0{st.st_mtime_ns}".encode("utf-8", "surrogateescape")).hexdigest()[:20]
    stem = Path(p).name
    for suffix in REPORT_SUFFIXES:
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
    return cache_dir() / f"{stem or 'report'}-{key}.sqlite"


def export_report(path: str) -> str:
    """The path of the SQLite export of report ``path``, exporting it first when the
    cache has none. Raises ``TraceFormatError`` when ``nsys`` is not on ``PATH`` (the
    message gives the command to run) or the export fails (with ``nsys``'s last line)."""
    try:
        out = cached_export(path)
    except OSError as exc:
        raise TraceFormatError(path, f"cannot read: {exc.strerror or exc}") from None
    if out.is_file():
        return str(out)
    suggested = str(Path(path).with_suffix(".sqlite").name)
    nsys = shutil.which("nsys")
    if nsys is None:
        raise TraceFormatError(
            path,
            "an Nsight Systems report: gapscope reads its SQLite export, and nsys is not on PATH to make one",
            hint=f"export it where Nsight Systems is installed: {_export_command(path, suggested)}"
            f", then open {suggested}",
        )
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TraceFormatError(
            path,
            f"cannot create the export cache {out.parent}: {exc.strerror or exc}",
            hint=f"set GAPSCOPE_CACHE_DIR, or export it yourself: {_export_command(path, suggested)}",
        ) from exc
    tmp = out.with_name(f"{out.stem}.{os.getpid()}.partial.sqlite")
    tty = sys.stderr.isatty()
    if tty:
        print(
            f"gapscope: exporting {path} to SQLite with nsys (once; kept in {out.parent})", file=sys.stderr, flush=True
        )
    cmd = [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(tmp), os.path.abspath(path)]
    try:
        proc = subprocess.run(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=sys.stderr.fileno() if tty else subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
    except OSError as exc:
        raise TraceFormatError(
            path,
            f"cannot run nsys: {exc.strerror or exc}",
            hint=f"export it yourself: {_export_command(path, suggested)}",
        ) from None
    made = next((c for c in (tmp, Path(str(tmp) + ".sqlite")) if c.is_file()), None)
    if proc.returncode != 0 or made is None:
        for c in (tmp, Path(str(tmp) + ".sqlite")):
            c.unlink(missing_ok=True)
        last = next(
            (ln.strip() for ln in reversed(proc.stderr.decode("utf-8", "replace").splitlines()) if ln.strip()),
            "no output",
        )
        why = f"exit status {proc.returncode}" if proc.returncode else "it wrote no file"
        raise TraceFormatError(
            path,
            f"nsys export failed ({why}): {last}",
            hint=f"run it yourself to see why: {_export_command(path, suggested)}",
        )
    os.replace(made, out)
    return str(out)
