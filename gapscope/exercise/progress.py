"""Per-learner progress in the XDG state directory, one JSON file per learner.

Location: ``$GAPSCOPE_STATE_DIR`` when set (tests), else
``platformdirs.user_state_dir("gapscope")``; file ``progress-<learner>.json``. The
learner is ``$GAPSCOPE_LEARNER`` or the login name. Writes are atomic (a temp file with
a name of its own in the same directory, then ``os.replace``: runs at the same time
never share a temp file, so none loses its write to another's rename). On load the file is validated against ``validate`` (the schema of
``ProgressStore``); one that is not a regular file, is over ``MAX_PROGRESS_BYTES``, is
not JSON or does not fit the schema is moved aside as ``*.corrupt`` (or
``*.corrupt-N``), ``ProgressStore.notice`` says so naming the backup, and progress
restarts.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import stat
import tempfile
from pathlib import Path

from gapscope.settings import read_settings

__all__ = ["ProgressStore", "state_dir", "learner_name", "validate", "MAX_PROGRESS_BYTES"]

#: Largest progress file read (a real one is a few KB; answers are short).
MAX_PROGRESS_BYTES = 1 << 20
#: Largest count (attempts, hints, current task) accepted in a progress file.
MAX_COUNT = 1_000_000
#: Deepest nesting of a stored answer (the rest of the schema is 4 levels).
MAX_ANSWER_DEPTH = 32

_TASK_KEYS = {"done": bool, "attempts": int, "hints": int, "notes": str}


def _count(v, where: str) -> None:
    if type(v) is not int or not 0 <= v <= MAX_COUNT:
        raise ValueError(f"{where}: expected a whole number 0-{MAX_COUNT:,}, got {_show(v)}")


def _show(v) -> str:
    text = json.dumps(v) if isinstance(v, (int, float, str, bool, type(None))) else type(v).__name__
    return text if len(text) <= 40 else text[:39] + "…"


def _depth_ok(v, depth: int) -> bool:
    if depth > MAX_ANSWER_DEPTH:
        return False
    if isinstance(v, dict):
        return all(isinstance(k, str) and _depth_ok(x, depth + 1) for k, x in v.items())
    if isinstance(v, list):
        return all(_depth_ok(x, depth + 1) for x in v)
    return v is None or isinstance(v, (str, bool, int)) or (isinstance(v, float) and abs(v) < float("inf"))


def validate(data) -> None:
    """Check ``data`` (decoded JSON) against the progress schema: ``{"version": 1,
    "exercises": {id: {"current": count, "finished": bool, "tasks": {id: {"done":
    bool, "attempts": count, "hints": count, "answer": JSON up to MAX_ANSWER_DEPTH
    deep, "notes": str}}}}}`` (counts: whole numbers 0 to ``MAX_COUNT``; keys other
    than these are kept). Raises ``ValueError`` naming the first bad field."""
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {_show(data)}")
    if data.get("version", 1) != 1 or type(data.get("version", 1)) is not int:
        raise ValueError(f"version: expected 1, got {_show(data.get('version'))}")
    exs = data.get("exercises")
    if not isinstance(exs, dict):
        raise ValueError(f"exercises: expected an object, got {_show(exs)}")
    for ex_id, rec in exs.items():
        where = f"exercises.{ex_id}"
        if not isinstance(rec, dict):
            raise ValueError(f"{where}: expected an object, got {_show(rec)}")
        _count(rec.get("current", 0), f"{where}.current")
        if type(rec.get("finished", False)) is not bool:
            raise ValueError(f"{where}.finished: expected true/false, got {_show(rec.get('finished'))}")
        tasks = rec.get("tasks", {})
        if not isinstance(tasks, dict):
            raise ValueError(f"{where}.tasks: expected an object, got {_show(tasks)}")
        for task_id, t in tasks.items():
            tw = f"{where}.tasks.{task_id}"
            if not isinstance(t, dict):
                raise ValueError(f"{tw}: expected an object, got {_show(t)}")
            for key, kind in _TASK_KEYS.items():
                if key not in t:
                    continue
                if kind is int:
                    _count(t[key], f"{tw}.{key}")
                elif type(t[key]) is not kind:
                    raise ValueError(
                        f"{tw}.{key}: expected {'true/false' if kind is bool else 'a string'}, got {_show(t[key])}"
                    )
            if not _depth_ok(t.get("answer"), 0):
                raise ValueError(f"{tw}.answer: nested deeper than {MAX_ANSWER_DEPTH} or not finite")


def state_dir() -> Path:
    """The directory progress lives in (not created here)."""
    env = read_settings().state_dir
    if env is not None:
        return env
    import platformdirs

    return Path(platformdirs.user_state_dir("gapscope"))


def learner_name() -> str:
    """``$GAPSCOPE_LEARNER``, else the login name, made safe for a file name."""
    name = read_settings().learner
    if not name:
        try:
            name = getpass.getuser()
        except (KeyError, OSError):  # no login name in some containers (KeyError before 3.13)
            name = "learner"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "learner"


class ProgressStore:
    """Progress of one learner: per exercise, the current task and per task
    ``done`` (bool), ``attempts`` (int), ``hints`` (int, hints unlocked), ``answer``
    (the last answer, JSON) and ``notes`` (free text kept for the learner)."""

    def __init__(self, directory: Path | None = None, learner: str | None = None) -> None:
        self.directory = Path(directory) if directory is not None else state_dir()
        self.learner = learner or learner_name()
        self.path = self.directory / f"progress-{self.learner}.json"
        self.error: str | None = None  # last save failure (progress then lives in memory)
        self.notice: str | None = None  # set when a bad progress file was moved aside
        self.data = self._read()

    def _read(self) -> dict:
        """The validated progress, or a fresh record after moving a bad file aside
        (``notice`` then names the backup). Never raises, never blocks: the file is
        opened non-blocking and read only when regular and at most ``MAX_PROGRESS_BYTES``."""
        try:
            data = self._load()
        except FileNotFoundError:
            return self._fresh()
        except (OSError, ValueError, RecursionError, UnicodeDecodeError) as exc:
            why = (
                exc.strerror
                if isinstance(exc, OSError) and exc.strerror
                else ("nested too deep" if isinstance(exc, RecursionError) else str(exc))
            )
            self.notice = self._set_aside(why)
            return self._fresh()
        return data

    @staticmethod
    def _fresh() -> dict:
        return {"version": 1, "exercises": {}}

    def _load(self) -> dict:
        st = os.stat(self.path)  # follows a symlink: what it points to must be a regular file
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file (a pipe, device or directory)")
        if st.st_size > MAX_PROGRESS_BYTES:
            raise ValueError(f"{st.st_size:,} bytes, more than the {MAX_PROGRESS_BYTES:,} a progress file may have")
        fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):  # swapped since the stat
                raise ValueError("not a regular file (a pipe, device or directory)")
            raw = fh.read(MAX_PROGRESS_BYTES + 1)
        if len(raw) > MAX_PROGRESS_BYTES:
            raise ValueError(f"more than the {MAX_PROGRESS_BYTES:,} bytes a progress file may have")
        try:
            data = json.loads(raw.decode("utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
        validate(data)
        return data

    def _set_aside(self, why: str) -> str:
        """Move the bad file to ``*.corrupt`` (``*.corrupt-N`` when taken); the message."""
        backup = self.path.with_suffix(".corrupt")
        n = 1
        while os.path.lexists(backup) and n < 100:
            backup = self.path.with_suffix(f".corrupt-{n}")
            n += 1
        try:
            os.replace(self.path, backup)
        except OSError as exc:
            return (
                f"{self.path}: progress file is not usable ({why}) and could not be moved aside "
                f"({exc.strerror or exc}); starting afresh in memory"
            )
        return f"{self.path}: progress file is not usable ({why}); moved aside to {backup}, starting afresh"

    def save(self) -> bool:
        """Write atomically (creates the directory). Returns False and sets ``error``
        when the state directory is not writable; progress then stays in memory."""
        tmp: str | None = None
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(json.dumps(self.data, indent=1, sort_keys=True))
            os.replace(tmp, self.path)
            tmp = None
        except OSError as exc:
            self.error = f"cannot save progress to {self.path}: {exc.strerror or exc}"
            return False
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
        self.error = None
        return True

    def exercise(self, ex_id: str) -> dict:
        """The mutable record of ``ex_id`` (created empty)."""
        rec = self.data["exercises"].setdefault(ex_id, {})
        for key, value in (("current", 0), ("finished", False), ("tasks", {})):
            rec.setdefault(key, value)  # a valid file may leave fields out
        return rec

    def task(self, ex_id: str, task_id: str) -> dict:
        rec = self.exercise(ex_id)["tasks"].setdefault(task_id, {})
        for key, value in (("done", False), ("attempts", 0), ("hints", 0), ("answer", None), ("notes", "")):
            rec.setdefault(key, value)
        return rec

    def summary(self, ex_id: str, n_tasks: int) -> tuple[int, int, bool]:
        """(tasks done, tasks total, finished) for listings."""
        rec = self.data["exercises"].get(ex_id)
        if not rec:
            return 0, n_tasks, False
        done = sum(1 for t in rec["tasks"].values() if t.get("done"))
        return min(done, n_tasks), n_tasks, bool(rec.get("finished"))

    def reset(self, ex_id: str | None = None) -> list[str]:
        """Forget ``ex_id`` (or everything); returns the ids forgotten; saves."""
        ex = self.data["exercises"]
        gone = [ex_id] if ex_id is not None and ex_id in ex else (list(ex) if ex_id is None else [])
        for k in gone:
            del ex[k]
        self.save()
        return gone
