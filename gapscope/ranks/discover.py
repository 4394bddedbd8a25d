"""Which files form a rank set, and which rank each file is.

``expand(paths)`` turns the command line (folders and files) into trace files: a
folder contributes its trace files (``tensorboard_trace_handler`` writes
``worker0.….pt.trace.json.gz``, HTA folders hold ``rank-3.json.gz``), sorted by name
with numbers in numeric order. ``assign_ranks`` then gives each summarised file its
rank: from Kineto's ``distributedInfo.rank``, else from the file name
(``rank-3``, ``rank_3``, ``worker3``), else the smallest rank not yet taken, in the
order given; and it says what is doubtful: two files claiming one rank (the later
ones are left out of the cross-rank analysis), different world sizes (files from
different jobs), a rank past the world size, ranks missing from the set.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

__all__ = ["is_rank_set", "expand", "rank_from_name", "assign_ranks", "Assigned", "TRACE_SUFFIXES", "NoTraces"]

#: File names taken from a folder (anything ``gapscope.parsers.load`` reads, except
#: ASCII ``.txt`` timelines, which folders hold as notes as often as traces, and
#: ``.pb``, which other protobuf files share with Perfetto traces).
TRACE_SUFFIXES = (
    ".json",
    ".json.gz",
    ".sqlite",
    ".nsys-rep",
    ".pftrace",
    ".pftrace.gz",
    ".perfetto-trace",
    ".perfetto-trace.gz",
)
_RANK_RE = re.compile(r"(?:^|[^a-z])(?:rank|worker)[-_.]?(\d+)", re.IGNORECASE)
_NUM_RE = re.compile(r"(\d+)")
#: Duplicates named one by one in the warning (all are in the document's ``left_out``).
MAX_LISTED = 4


class NoTraces(ValueError):
    """A folder without trace files, or a path that does not exist (one line)."""


def is_rank_set(argv: list[str]) -> bool:
    """Whether a command line names a rank set: a folder holding trace files, or two or
    more existing files (option values such as ``--top 5`` are not files). A folder
    without trace files is not one: the single-trace commands then say "is a directory"."""
    paths = [a for a in argv if not a.startswith("-")]
    if any(os.path.isdir(p) and _has_traces(p) for p in paths):
        return True
    return sum(1 for p in paths if os.path.isfile(p)) >= 2


def _has_traces(folder: str) -> bool:
    try:
        return any(n.lower().endswith(TRACE_SUFFIXES) for n in os.listdir(folder))
    except OSError:
        return False


def _natural(name: str) -> list:
    return [int(p) if p.isdigit() else p for p in _NUM_RE.split(name)]


def expand(paths: list[str]) -> list[str]:
    """Trace files named by ``paths`` (folders expanded, one level), in order, each
    once. Raises ``NoTraces`` for a missing path or a folder with no trace file."""
    out: list[str] = []
    seen: set[str] = set()
    for p in paths:
        if os.path.isdir(p):
            names = sorted(
                (n for n in os.listdir(p) if n.lower().endswith(TRACE_SUFFIXES) and os.path.isfile(os.path.join(p, n))),
                key=_natural,
            )
            if not names:
                raise NoTraces(f"{p}: no trace files in this folder (looked for {', '.join(TRACE_SUFFIXES)})")
            files = [os.path.join(p, n) for n in names]
        elif os.path.exists(p):
            files = [p]
        else:
            raise NoTraces(f"{p}: no such file or folder")
        for f in files:
            key = os.path.realpath(f)
            if key not in seen:
                seen.add(key)
                out.append(f)
    return out


def rank_from_name(path: str) -> int | None:
    """The rank written in a file name (``rank-3.json.gz``, ``worker3.pt.trace.json``,
    ``trace_rank_12.json``), or None."""
    m = _RANK_RE.search(Path(path).name)
    return int(m.group(1)) if m else None


@dataclasses.dataclass(frozen=True)
class Assigned:
    """The rank of one file: ``rank``; ``source``: ``"distributedInfo"``,
    ``"file name"`` or ``"order"``; ``duplicate_of``: the path that already holds
    this rank (this file is then left out), else None."""

    path: str
    rank: int
    source: str
    duplicate_of: str | None = None


def assign_ranks(items: list[tuple[str, int | None, int | None]]) -> tuple[list[Assigned], list[str]]:
    """Ranks for ``items`` = ``(path, distributedInfo rank or None, world size or None)``
    in the order given. Returns the assignments (same order) and warning lines."""
    warnings: list[str] = []
    claimed: dict[int, str] = {}
    out: list[Assigned | None] = [None] * len(items)
    pending: list[int] = []
    for k, (path, meta, _ws) in enumerate(items):
        found = int(meta) if meta is not None else rank_from_name(path)
        if found is None:
            pending.append(k)
            continue
        source = "distributedInfo" if meta is not None else "file name"
        out[k] = _claim(path, found, source, claimed, warnings)
    nxt = 0
    for k in pending:
        while nxt in claimed:
            nxt += 1
        out[k] = _claim(items[k][0], nxt, "order", claimed, warnings)
    dups = [a for a in out if a is not None and a.duplicate_of is not None]
    if dups:
        shown = "; ".join(
            f"{_short(a.path)} (rank {a.rank}, {a.source}; {_short(a.duplicate_of or '')} has it)"
            for a in dups[:MAX_LISTED]
        )
        more = f"; and {len(dups) - MAX_LISTED} more" if len(dups) > MAX_LISTED else ""
        warnings.append(f"duplicate ranks: {len(dups)} file(s) left out: {shown}{more}")
    if pending:
        warnings.append(
            f"{len(pending)} file(s) name no rank (no distributedInfo, none in the file name): ranks given in the order of the command line"
        )
    sizes = sorted({ws for _p, _m, ws in items if ws is not None})
    if len(sizes) > 1:
        warnings.append(
            f"mixed jobs: the files give different world sizes ({', '.join(map(str, sizes))}); collectives are matched anyway, check the set"
        )
    if len(sizes) == 1:
        ws = sizes[0]
        kept = sorted(a.rank for a in out if a is not None and a.duplicate_of is None)
        past = [r for r in kept if r >= ws]
        if past:
            warnings.append(f"rank(s) {_ranges(past)} at or past the world size {ws}: files from another job?")
        missing = _missing_ranges(kept, ws)
        if missing and len(kept) < ws:
            warnings.append(
                f"{len(kept)} of {ws} ranks in the set (missing {missing}): waits are measured among the ranks present"
            )
    return [a for a in out if a is not None], warnings


def _short(path: str) -> str:
    return os.path.basename(path) or path


def _claim(path: str, rank: int, source: str, claimed: dict, warnings: list) -> Assigned:
    if rank in claimed:
        return Assigned(path, rank, source, duplicate_of=claimed[rank])
    claimed[rank] = path
    return Assigned(path, rank, source)


def _missing_ranges(kept: list[int], world_size: int) -> str:
    """The ranks of ``0 … world_size-1`` not in ``kept``, as ``_ranges`` writes them
    (``1-4, 6, 8-99``), found between the ranks kept: the world size comes from a
    file, and a world of 10**18 must not be listed rank by rank."""
    parts = []
    nxt = 0
    for r in sorted(set(kept)) + [world_size]:
        if r > world_size:
            break
        if r > nxt:
            parts.append(str(nxt) if r - 1 == nxt else f"{nxt}-{r - 1}")
        nxt = max(nxt, r + 1)
    return ", ".join(parts)


def _ranges(values: list[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` → ``0-2, 5, 7-8``."""
    parts = []
    vs = sorted(values)
    i = 0
    while i < len(vs):
        j = i
        while j + 1 < len(vs) and vs[j + 1] == vs[j] + 1:
            j += 1
        parts.append(str(vs[i]) if i == j else f"{vs[i]}-{vs[j]}")
        i = j + 1
    return ", ".join(parts)
