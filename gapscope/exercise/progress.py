"""Per-learner progress in the XDG state directory, one JSON file per learner.

Location: ``$GAPSCOPE_STATE_DIR`` when set (tests), else
``platformdirs.user_state_dir("gapscope")``; file ``progress-<learner>.json``. The
learner is ``$GAPSCOPE_LEARNER`` or the login name. Writes are atomic (temp file +
``os.replace``); a corrupt file is kept aside as ``*.corrupt`` and progress restarts.
"""

from __future__ import annotations

import getpass
import json
import os
import re
from pathlib import Path

__all__ = ["ProgressStore", "state_dir", "learner_name"]


def state_dir() -> Path:
    """The directory progress lives in (not created here)."""
    env = os.environ.get("GAPSCOPE_STATE_DIR")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_state_dir("gapscope"))


def learner_name() -> str:
    """``$GAPSCOPE_LEARNER``, else the login name, made safe for a file name."""
    name = os.environ.get("GAPSCOPE_LEARNER")
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
        self.data = self._read()

    def _read(self) -> dict:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if isinstance(data, dict) and isinstance(data.get("exercises"), dict):
                return data
            raise ValueError("not a progress file")
        except FileNotFoundError:
            pass
        except (OSError, ValueError):
            try:
                os.replace(self.path, self.path.with_suffix(".corrupt"))
            except OSError:
                pass
        return {"version": 1, "exercises": {}}

    def save(self) -> bool:
        """Write atomically (creates the directory). Returns False and sets ``error``
        when the state directory is not writable; progress then stays in memory."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True), encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError as exc:
            self.error = f"cannot save progress to {self.path}: {exc.strerror or exc}"
            return False
        self.error = None
        return True

    def exercise(self, ex_id: str) -> dict:
        """The mutable record of ``ex_id`` (created empty)."""
        return self.data["exercises"].setdefault(ex_id, {"current": 0, "finished": False, "tasks": {}})

    def task(self, ex_id: str, task_id: str) -> dict:
        rec = self.exercise(ex_id)["tasks"]
        return rec.setdefault(task_id, {"done": False, "attempts": 0, "hints": 0, "answer": None, "notes": ""})

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
