"""Find exercises: the bundled ones (``gapscope/exercise/content/*.toml``) by id or file name,
or any file path."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from gapscope.exercise.load import load_exercise
from gapscope.exercise.model import Exercise, ExerciseError

__all__ = ["bundled_paths", "bundled", "find"]


def bundled_paths() -> list[Path]:
    """Paths of the bundled exercise files, sorted by name."""
    root = resources.files("gapscope.exercise.content")
    return sorted(Path(str(p)) for p in root.iterdir() if p.name.endswith(".toml"))


def bundled() -> list[Exercise]:
    """The bundled exercises, loaded (raises ``ExerciseError`` if one is broken)."""
    return [load_exercise(p) for p in bundled_paths()]


def find(name: str) -> Exercise:
    """The exercise ``name``: a bundled id, a bundled file stem, or a path to a file.
    A unique prefix of a bundled id is accepted. Raises ``ExerciseError`` (a ``.toml``
    path that cannot be read says so, rather than "no such exercise")."""
    p = Path(name)
    if p.suffix == ".toml":
        return load_exercise(p)
    exs = bundled()
    for ex in exs:
        if name in (ex.id, ex.path.stem):
            return ex
    hits = [ex for ex in exs if ex.id.startswith(name)]
    if len(hits) == 1:
        return hits[0]
    known = ", ".join(ex.id for ex in exs)
    raise ExerciseError(
        name, f"no such exercise (bundled: {known})" if not hits else f"ambiguous: {', '.join(e.id for e in hits)}"
    )
