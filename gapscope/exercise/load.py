"""Load and validate exercise files (TOML, stdlib ``tomllib``); format in
``docs/exercises.md``. Every error is an ``ExerciseError`` naming the file, the line
when it can be found, and the task id."""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from pathlib import Path
from typing import Any

from gapscope.analysis.causes import CAUSE_LABELS
from gapscope.exercise.model import (
    CARD_FIELDS,
    DIFF_STATUSES,
    QUANTITIES,
    TASK_KINDS,
    Assumption,
    CardField,
    Constraint,
    Exercise,
    ExerciseError,
    GapSelector,
    NumberKey,
    Option,
    PairRef,
    Projection,
    Task,
    TraceRef,
)

__all__ = ["load_exercise", "parse_exercise", "UNITS"]

#: Units a number task may use, by the quantity family they measure.
UNITS = {
    "ns": ("time", 1.0),
    "us": ("time", 1e3),
    "µs": ("time", 1e3),
    "ms": ("time", 1e6),
    "s": ("time", 1e9),
    "%": ("share", 1.0),
    "tokens/s": ("rate", 1.0),
}
_FAMILY = {"ms": "time", "%": "share", "tokens/s": "rate"}


def load_exercise(path: str | os.PathLike) -> Exercise:
    """Read and validate the exercise file at ``path``.

    Returns an ``Exercise``; raises ``ExerciseError`` (file, line, task id) for a file
    that cannot be read, is not TOML, or breaks the format. Trace files are resolved
    (bundled sample names or paths relative to the exercise file) and must exist.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ExerciseError(str(p), f"cannot read: {reason}") from None
    return parse_exercise(text, p)


def parse_exercise(text: str, path: Path) -> Exercise:
    """Validate TOML ``text`` as an exercise; ``path`` names it in errors and anchors
    relative trace paths. Raises ``ExerciseError``."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # tomllib: "Invalid statement (at line 3, column 1)": the place goes in front
        m = re.search(r"\s*\(at line (\d+), column (\d+)\)$", str(exc))
        msg = str(exc)[: m.start()] if m else str(exc)
        raise ExerciseError(
            str(path),
            f"not valid TOML: {msg}",
            line=int(m.group(1)) if m else None,
            column=int(m.group(2)) if m else None,
        ) from None
    return _Parser(text, path).exercise(doc)


class _Parser:
    def __init__(self, text: str, path: Path) -> None:
        self.path = path
        self.pairs: dict[str, PairRef] = {}
        self.lines = text.splitlines()
        self.task_lines = [i + 1 for i, s in enumerate(self.lines) if re.match(r"\s*\[\[\s*tasks\s*\]\]", s)]

    # ------------------------------------------------------------ helpers
    def err(self, msg: str, *, line: int | None = None, task: str | None = None) -> ExerciseError:
        return ExerciseError(str(self.path), msg, line=line, task=task)

    def line_of(self, key: str) -> int | None:
        for i, s in enumerate(self.lines):
            if re.match(rf"\s*{re.escape(key)}\s*=", s):
                return i + 1
        return None

    def projection(self, pr: dict, tid: str, line: int | None) -> Projection:
        """One reading of a projection table (``remove_gaps``, ``remove_events``,
        ``assumptions``, ``label``); its ``readings`` are read by the caller."""
        return Projection(
            remove_gaps=tuple(
                self.selector(g, tid, line) for g in self.get(pr, "remove_gaps", list, default=[], task=tid, line=line)
            ),
            remove_events=self.strs(pr, "remove_events", tid, line),
            assumptions=self.strs(pr, "assumptions", tid, line),
            label=self.get(pr, "label", str, default="", task=tid, line=line),
        )

    def get(
        self,
        d: dict,
        key: str,
        typ: type | tuple,
        *,
        required: bool = False,
        default: Any = None,
        task: str | None = None,
        line: int | None = None,
    ) -> Any:
        if key not in d:
            if required:
                raise self.err(f"missing required key {key!r}", line=line, task=task)
            return default
        v = d[key]
        if typ is float and isinstance(v, int) and not isinstance(v, bool):
            v = float(v)
        if not isinstance(v, typ) or (isinstance(v, bool) and typ in (int, float)):
            want = typ.__name__ if isinstance(typ, type) else "/".join(t.__name__ for t in typ)
            raise self.err(f"{key!r} must be {want}, got {type(v).__name__}", line=line or self.line_of(key), task=task)
        return v

    def strs(self, d: dict, key: str, task: str | None, line: int | None) -> tuple[str, ...]:
        v = self.get(d, key, list, default=[], task=task, line=line)
        if not all(isinstance(x, str) for x in v):
            raise self.err(f"{key!r} must be a list of strings", line=line, task=task)
        return tuple(v)

    # ------------------------------------------------------------ document
    def exercise(self, doc: dict) -> Exercise:
        fmt = doc.get("format", 1)
        if fmt != 1:
            raise self.err(f"unsupported format {fmt!r} (this gapscope reads format 1)", line=self.line_of("format"))
        title = self.get(doc, "title", str, required=True)
        prompt = self.get(doc, "prompt", str, required=True)
        ex_id = self.get(doc, "id", str, default=self.path.stem)
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", ex_id):
            raise self.err(f"id {ex_id!r} must be letters, digits, '-', '_' or '.'", line=self.line_of("id"))
        traces = tuple(self.trace(t, i) for i, t in enumerate(self.get(doc, "traces", list, required=True)))
        if not traces:
            raise self.err("an exercise needs at least one [[traces]] entry")
        ids = [t.id for t in traces]
        if len(set(ids)) != len(ids):
            raise self.err(f"duplicate trace ids in {ids}")
        pairs = tuple(self.pair(p, i, ids) for i, p in enumerate(self.get(doc, "pairs", list, default=[])))
        if len({p.id for p in pairs}) != len(pairs):
            raise self.err(f"duplicate pair ids in {[p.id for p in pairs]}", line=self.line_of("before"))
        self.pairs = {p.id: p for p in pairs}
        constraints = tuple(self.constraint(c) for c in self.get(doc, "constraints", list, default=[]))
        raw_tasks = self.get(doc, "tasks", list, required=True)
        if not raw_tasks:
            raise self.err("an exercise needs at least one [[tasks]] entry")
        tasks = []
        seen: set[str] = set()
        for i, t in enumerate(raw_tasks):
            line = self.task_lines[i] if i < len(self.task_lines) else None
            task = self.task(t, i, line, ids, {c.id for c in constraints})
            if task.id in seen:
                raise self.err("duplicate task id", line=line, task=task.id)
            seen.add(task.id)
            tasks.append(task)
        known = {"format", "id", "title", "summary", "prompt", "debrief", "traces", "pairs", "constraints", "tasks"}
        extra = sorted(set(doc) - known)
        if extra:
            raise self.err(f"unknown top-level keys {extra}", line=self.line_of(extra[0]))
        return Exercise(
            id=ex_id,
            title=title,
            summary=self.get(doc, "summary", str, default=""),
            prompt=prompt,
            debrief=self.get(doc, "debrief", str, default=""),
            path=self.path,
            traces=traces,
            constraints=constraints,
            tasks=tuple(tasks),
            pairs=pairs,
        )

    def trace(self, t: Any, i: int) -> TraceRef:
        if not isinstance(t, dict):
            raise self.err(f"traces[{i}] must be a table")
        tid = self.get(t, "id", str, default=f"trace{i + 1}")
        sample, rel = t.get("sample"), t.get("path")
        if (sample is None) == (rel is None):
            raise self.err(f"trace {tid!r}: give exactly one of 'sample' (a bundled sample name) or 'path'")
        if sample is not None:
            from gapscope import sample_traces

            p = sample_traces.path(str(sample))
        else:
            p = (self.path.parent / str(rel)).resolve()
        if not p.is_file():
            raise self.err(f"trace {tid!r}: file not found: {p}", line=self.line_of("sample" if sample else "path"))
        return TraceRef(id=tid, path=p, label=self.get(t, "label", str, default=""))

    def pair(self, p: Any, i: int, trace_ids: list[str]) -> PairRef:
        if not isinstance(p, dict):
            raise self.err(f"pairs[{i}] must be a table")
        line = self.line_of("before")
        pid = self.get(p, "id", str, default=f"pair{i + 1}", line=line)
        ends = []
        for key in ("before", "after"):
            tid = self.get(p, key, str, required=True, line=line)
            if tid not in trace_ids:
                raise self.err(
                    f"pair {pid!r}: {key} names unknown trace {tid!r} (known: {', '.join(trace_ids)})", line=line
                )
            ends.append(tid)
        unknown = sorted(set(p) - {"id", "before", "after", "label"})
        if unknown:
            raise self.err(f"pair {pid!r}: unknown keys {unknown}", line=line)
        return PairRef(pid, ends[0], ends[1], self.get(p, "label", str, default="", line=line))

    def constraint(self, c: Any) -> Constraint:
        if not isinstance(c, dict):
            raise self.err("each [[constraints]] entry must be a table")
        cid = self.get(c, "id", str, required=True)
        return Constraint(cid, self.get(c, "text", str, required=True), self.strs(c, "forbidden_keywords", None, None))

    def option(self, o: Any, tid: str, line: int | None, constraint_ids: set[str]) -> Option:
        if isinstance(o, str):
            o = {"text": o}
        if not isinstance(o, dict):
            raise self.err("each option must be a table or a string", line=line, task=tid)
        violates = self.strs(o, "violates", tid, line)
        for v in violates:
            if v not in constraint_ids:
                raise self.err(f"option {o.get('text')!r} names unknown constraint {v!r}", line=line, task=tid)
        position = self.get(o, "position", str, default="", task=tid, line=line)
        status = self.get(o, "status", str, default="", task=tid, line=line)
        if bool(position) != bool(status):
            raise self.err("an option's diff claim needs both 'position' and 'status'", line=line, task=tid)
        if status and status not in DIFF_STATUSES:
            raise self.err(f"status {status!r} is not one of {', '.join(DIFF_STATUSES)}", line=line, task=tid)
        return Option(
            text=self.get(o, "text", str, required=True, task=tid, line=line),
            correct=self.get(o, "correct", bool, default=False, task=tid, line=line),
            explain=self.get(o, "explain", str, default="", task=tid, line=line),
            violates=violates,
            position=position,
            status=status,
        )

    def options(self, d: dict, tid: str, line: int | None, cids: set[str], what: str) -> tuple[Option, ...]:
        opts = tuple(
            self.option(o, tid, line, cids) for o in self.get(d, "options", list, default=[], task=tid, line=line)
        )
        if len(opts) < 2:
            raise self.err(f"{what} needs at least two options", line=line, task=tid)
        if not any(o.correct for o in opts):
            raise self.err(f"{what}: no option is marked correct = true", line=line, task=tid)
        return opts

    def selector(self, v: Any, tid: str, line: int | None) -> GapSelector:
        if v == "largest":
            return GapSelector(rank=1)
        if not isinstance(v, dict):
            raise self.err(
                f'gap must be "largest" or a table with rank / start_ms+end_ms / contains_ms, got {v!r}',
                line=line,
                task=tid,
            )

        def num(k: str) -> Any:
            return self.get(v, k, float, task=tid, line=line)

        sel = GapSelector(
            rank=self.get(v, "rank", int, task=tid, line=line),
            start_ms=num("start_ms"),
            end_ms=num("end_ms"),
            contains_ms=num("contains_ms"),
            expect_start_ms=num("expect_start_ms"),
            expect_end_ms=num("expect_end_ms"),
            tol_ms=num("tol_ms") if "tol_ms" in v else 0.001,
        )
        kinds = (
            (sel.rank is not None)
            + (sel.start_ms is not None or sel.end_ms is not None)
            + (sel.contains_ms is not None)
        )
        if kinds != 1 or ((sel.start_ms is None) != (sel.end_ms is None)):
            raise self.err("gap needs exactly one of: rank, start_ms with end_ms, contains_ms", line=line, task=tid)
        if sel.rank is not None and sel.rank < 1:
            raise self.err("gap rank starts at 1 (the largest)", line=line, task=tid)
        return sel

    def task(self, t: Any, i: int, line: int | None, trace_ids: list[str], cids: set[str]) -> Task:
        if not isinstance(t, dict):
            raise self.err(f"tasks[{i}] must be a table", line=line)
        tid = self.get(t, "id", str, default=f"task{i + 1}", line=line)
        kind = self.get(t, "kind", str, required=True, task=tid, line=line)
        if kind not in TASK_KINDS:
            raise self.err(f"unknown kind {kind!r} (one of {', '.join(TASK_KINDS)})", line=line, task=tid)
        pair = self.get(t, "pair", str, default="", task=tid, line=line)
        if pair and pair not in self.pairs:
            raise self.err(f"unknown pair {pair!r} (known: {', '.join(self.pairs) or 'none'})", line=line, task=tid)
        if pair and kind != "choice":
            raise self.err(f"a task on a pair must be a choice task, not {kind!r}", line=line, task=tid)
        trace = self.get(t, "trace", str, default=self.pairs[pair].after if pair else trace_ids[0], task=tid, line=line)
        if trace not in trace_ids:
            raise self.err(f"unknown trace {trace!r} (known: {', '.join(trace_ids)})", line=line, task=tid)
        step = self.get(t, "protocol_step", int, default=0, task=tid, line=line)
        if not 0 <= step <= 6:
            raise self.err("protocol_step must be 1..6 (0 = none)", line=line, task=tid)
        kw: dict[str, Any] = dict(
            id=tid,
            kind=kind,
            line=line,
            trace=trace,
            protocol_step=step,
            pair=pair,
            prompt=self.get(t, "prompt", str, required=True, task=tid, line=line),
            hints=self.strs(t, "hints", tid, line),
            feedback=self.get(t, "feedback", str, default="", task=tid, line=line),
            wrong_feedback=self.get(t, "wrong_feedback", str, default="", task=tid, line=line),
        )
        if "gap" in t:
            kw["gap"] = self.selector(t["gap"], tid, line)
        cause = self.get(t, "cause", str, task=tid, line=line)
        if cause is not None and cause not in CAUSE_LABELS:
            raise self.err(f"cause {cause!r} is not a cause class ({', '.join(CAUSE_LABELS)})", line=line, task=tid)
        kw["cause"] = cause
        if kind == "pick_gap" and kw.get("gap") is None:
            raise self.err('pick_gap needs its key: gap = "largest" or a gap table', line=line, task=tid)
        if kind in ("cause", "card"):
            if cause is None:
                raise self.err(f"{kind} needs its key: cause = one of {', '.join(CAUSE_LABELS)}", line=line, task=tid)
            kw.setdefault("gap", GapSelector(rank=1))
        if kind == "choice":
            kw["options"] = self.options(t, tid, line, cids, "choice")
            if not pair and any(o.status for o in kw["options"]):
                raise self.err("an option claims a diff status, but the task names no pair", line=line, task=tid)
            kw["notes"] = self.get(t, "notes", bool, default=False, task=tid, line=line)
        if kind == "number":
            self.number(t, tid, line, kw)
        if kind == "card":
            kw["fields"] = self.card(t, tid, line, cids)
        return Task(**kw)

    def number(self, t: dict, tid: str, line: int | None, kw: dict) -> None:
        q = self.get(t, "quantity", str, required=True, task=tid, line=line)
        if q not in QUANTITIES:
            raise self.err(f"unknown quantity {q!r} (one of {', '.join(QUANTITIES)})", line=line, task=tid)
        key = self.get(t, "key", dict, required=True, task=tid, line=line)
        unit = self.get(key, "unit", str, default=QUANTITIES[q], task=tid, line=line)
        self.check_unit(q, unit, tid, line)
        nk = NumberKey(
            value=self.get(key, "value", float, required=True, task=tid, line=line),
            unit=unit,
            tolerance=self.get(key, "tolerance", float, task=tid, line=line),
            tolerance_pct=self.get(key, "tolerance_pct", float, task=tid, line=line),
        )
        if (nk.tolerance is None) == (nk.tolerance_pct is None) or nk.tolerance_abs() < 0:
            raise self.err(
                "number key needs one non-negative 'tolerance' (in its unit) or 'tolerance_pct'", line=line, task=tid
            )
        kw.update(quantity=q, key=nk)
        if q == "gap" and kw.get("gap") is None:
            raise self.err("quantity 'gap' needs a gap selector", line=line, task=tid)
        if q.startswith("projected"):
            pr = self.get(t, "projection", dict, required=True, task=tid, line=line)
            readings = []
            for r in self.get(pr, "readings", list, default=[], task=tid, line=line):
                if not isinstance(r, dict):
                    raise self.err("each [[tasks.projection.readings]] must be a table", line=line, task=tid)
                readings.append(self.projection(r, tid, line))
            kw["projection"] = dataclasses.replace(self.projection(pr, tid, line), readings=tuple(readings))
        assumptions = []
        for a in self.get(t, "assume", list, default=[], task=tid, line=line):
            if not isinstance(a, dict):
                raise self.err("each [[tasks.assume]] must be a table", line=line, task=tid)
            aq = self.get(a, "quantity", str, required=True, task=tid, line=line)
            if aq not in QUANTITIES or aq.startswith("projected"):
                raise self.err(f"assumption quantity {aq!r} is not a measured quantity", line=line, task=tid)
            au = self.get(a, "unit", str, default=QUANTITIES[aq], task=tid, line=line)
            self.check_unit(aq, au, tid, line)
            assumptions.append(
                Assumption(
                    aq,
                    self.get(a, "value", float, required=True, task=tid, line=line),
                    au,
                    self.get(a, "text", str, default="", task=tid, line=line),
                )
            )
        kw["assumptions"] = tuple(assumptions)

    def check_unit(self, q: str, unit: str, tid: str, line: int | None) -> None:
        if unit not in UNITS or UNITS[unit][0] != _FAMILY[QUANTITIES[q]]:
            ok = [u for u, (f, _) in UNITS.items() if f == _FAMILY[QUANTITIES[q]]]
            raise self.err(f"unit {unit!r} does not fit quantity {q!r} (use {', '.join(ok)})", line=line, task=tid)

    def card(self, t: dict, tid: str, line: int | None, cids: set[str]) -> tuple[CardField, ...]:
        raw = self.get(t, "fields", dict, required=True, task=tid, line=line)
        unknown = sorted(set(raw) - set(CARD_FIELDS))
        if unknown:
            raise self.err(f"unknown card fields {unknown} (known: {', '.join(CARD_FIELDS)})", line=line, task=tid)
        out = []
        for name in CARD_FIELDS:
            if name == "cause":
                out.append(CardField("cause", prompt=str(raw.get("cause", {}).get("prompt", "Cause class"))))
                continue
            f = raw.get(name)
            if f is None:
                raise self.err(f"card field {name!r} is missing", line=line, task=tid)
            if not isinstance(f, dict):
                raise self.err(f"card field {name!r} must be a table", line=line, task=tid)
            prompt = self.get(f, "prompt", str, default=name, task=tid, line=line)
            if "options" in f:
                out.append(CardField(name, prompt, options=self.options(f, tid, line, cids, f"card field {name!r}")))
            else:
                groups = self.get(f, "keywords", list, task=tid, line=line)
                if not groups or not all(
                    isinstance(g, list) and g and all(isinstance(w, str) for w in g) for g in groups
                ):
                    raise self.err(
                        f"card field {name!r} needs options or keywords (a list of word lists)", line=line, task=tid
                    )
                out.append(
                    CardField(
                        name,
                        prompt,
                        keywords=tuple(tuple(w.casefold() for w in g) for g in groups),
                        example=self.get(f, "example", str, default="", task=tid, line=line),
                    )
                )
        return tuple(out)
