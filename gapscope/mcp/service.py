"""What each ``gapscope mcp`` tool does, without the protocol: check the paths, load
(or reuse) the trace, build the answer, within the call's time limit.

``Service`` methods are ``async`` and return ``(structured answer, short text)``;
they raise ``ToolFailure`` with the one line the agent gets as the tool error (the
CLI's own message for a bad trace: ``path:line:col: message (hint)``). The MCP layer
(``gapscope.mcp.server``) only registers them as tools.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

from gapscope.mcp import answers
from gapscope.mcp.roots import OutsideRoots, Roots
from gapscope.mcp.store import CallTimeout, Loaded, TraceStore, estimate_bytes, run_limited
from gapscope.parsers.errors import TraceFormatError
from gapscope.report.fmt import safe_name

__all__ = ["Service", "ToolFailure", "load_trace", "DEFAULT_TIME_LIMIT_S"]

#: Most trace files of one ``rank_set`` (a list, or a folder's files).
MAX_RANK_FILES = 4_096
#: Seconds a call waits for its work by default (``--time-limit``).
DEFAULT_TIME_LIMIT_S = 60.0

T = TypeVar("T")


class ToolFailure(Exception):
    """A tool call that cannot be answered; ``str()`` is the one line for the agent."""


def load_trace(path: str) -> Loaded:
    """Load ``path`` (``gapscope.parsers.load``: the trace cache as everywhere),
    diagnose it with the default thresholds and build its report document as
    ``gapscope report --json`` does. Raises ``TraceFormatError`` for a bad file."""
    from gapscope import __version__, parsers
    from gapscope.analysis.types import Params
    from gapscope.report.document import build_document, diagnose_or_none

    st = os.stat(path)
    trace = parsers.load(path)
    diag = diagnose_or_none(trace, Params())
    doc = build_document(trace, diag, version=__version__, full=True)
    return Loaded(path, st.st_mtime_ns, st.st_size, trace, diag, doc, estimate_bytes(trace, diag))


def one_line(exc: BaseException) -> str:
    """The agent's line for a failure: the CLI's message for bad input (``gapscope:
    error: …``), else ``internal error: Type: message`` (never a traceback)."""
    from gapscope.report.args import UsageError
    from gapscope.report.cmd import error_line

    if isinstance(exc, (TraceFormatError, OutsideRoots, answers.ToolInputError, CallTimeout, UsageError)):
        return error_line(str(exc))
    if isinstance(exc, MemoryError):
        return error_line("out of memory for this trace; give the server more memory, or load a shorter capture")
    if isinstance(exc, OSError):
        return error_line(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": "))
    text = safe_name(f"{type(exc).__name__}: {exc}", 300)
    return f"gapscope: internal error: {text} (this is a bug in gapscope: please report it)"


class Service:
    """The tools' work. ``roots``: the folders files may come from; ``store``: the
    loaded traces (default: 4 traces, 2 GiB estimated); ``time_limit_s``: the longest
    a call waits for its work."""

    def __init__(
        self,
        roots: Roots,
        *,
        store: TraceStore | None = None,
        time_limit_s: float = DEFAULT_TIME_LIMIT_S,
        load_fn: Callable[[str], Loaded] = load_trace,
    ) -> None:
        self.roots = roots
        self.store = store or TraceStore(load_fn)
        self.time_limit_s = float(time_limit_s)

    async def _run(self, fn: Callable[[], T]) -> T:
        try:
            return await run_limited(fn, self.time_limit_s)
        except Exception as exc:
            raise ToolFailure(one_line(exc)) from exc

    def _loaded(self, path: str) -> Loaded:
        return self.store.get(self.roots.resolve(path))

    async def open_trace(self, path: str) -> tuple[dict, str]:
        ans = await self._run(lambda: answers.open_answer(self._loaded(path), self._handle(path)))
        return ans, answers.open_text(ans)

    def _handle(self, path: str) -> str:
        return self.roots.resolve(path)

    async def list_gaps(
        self, path: str, cause: str | None, min_us: float | None, limit: int, offset: int
    ) -> tuple[dict, str]:
        ans = await self._run(lambda: answers.gaps_answer(self._loaded(path), cause, min_us, limit, offset))
        return ans, _page_text(ans, f"gaps (largest first) from offset {ans['offset']}", "Rows")

    async def gap_card(self, path: str, gap: int | str) -> tuple[dict, str]:
        ans = await self._run(lambda: answers.card_answer(self._loaded(path), gap))
        return ans, answers.card_text(ans)

    async def events_around(
        self, path: str, gap: int | str, window_us: float, limit: int, offset: int
    ) -> tuple[dict, str]:
        ans = await self._run(lambda: answers.events_answer(self._loaded(path), gap, window_us, limit, offset))
        return ans, _page_text(ans, f"events on {len(ans['lanes'])} lanes around gap {ans['gap']}", "Events")

    async def what_if(self, path: str, remove: list[str | int]) -> tuple[dict, str]:
        ans = await self._run(lambda: answers.what_if_answer(self._loaded(path), remove))
        return ans, answers.what_if_text(ans)

    async def full_name(self, path: str, event: int, offset: int) -> tuple[dict, str]:
        ans = await self._run(lambda: answers.name_answer(self._loaded(path), event, offset))
        return ans, f"The name of event {event} is in the structured content (characters {ans['offset']}…)."

    async def diff_traces(self, before: str, after: str, limit: int, offset: int) -> tuple[dict, str]:
        def work() -> dict:
            from gapscope import __version__
            from gapscope.diff.document import build_diff_document

            b, a = self._loaded(before), self._loaded(after)
            if b.diag is None or a.diag is None:
                raise answers.ToolInputError("no diagnosis (the analysis is not installed)")
            doc = build_diff_document(b.trace, b.diag, a.trace, a.diag, version=__version__, paths=(b.path, a.path))
            return answers.diff_answer(doc, limit, offset)

        ans = await self._run(work)
        return ans, answers.diff_text(ans)

    async def rank_set(self, paths_or_dir: str | list[str], limit: int, offset: int) -> tuple[dict, str]:
        def work() -> dict:
            from gapscope.analysis.types import Params
            from gapscope.ranks.cmd import collect
            from gapscope.ranks.discover import NoTraces, expand

            given = [paths_or_dir] if isinstance(paths_or_dir, str) else list(paths_or_dir)
            if not given or len(given) > MAX_RANK_FILES:
                raise answers.ToolInputError(f"paths_or_dir must name a folder or 1 to {MAX_RANK_FILES:,} trace files")
            real = [self.roots.resolve(p, folder=True) for p in given]
            try:
                files = expand(real)
            except NoTraces as exc:
                raise answers.ToolInputError(str(exc)) from None
            if len(files) > MAX_RANK_FILES:  # a folder counts as its files: all would be loaded
                raise answers.ToolInputError(
                    f"{len(files):,} trace files: at most {MAX_RANK_FILES:,} in a rank set (name fewer files or a smaller folder)"
                )
            # a folder's entries may be links: each file must resolve inside a root too
            files = [self.roots.resolve(f) for f in files]
            with self.store.load_slot():  # its files load outside the store: one slot all the same
                doc = collect(files, Params(), jobs=1)
            return answers.ranks_answer(doc, limit, offset)

        ans = await self._run(work)
        return ans, answers.ranks_text(ans)


def _page_text(ans: dict, what: str, items: str) -> str:
    """The short text of a paged answer: ``"20 of 1,060 <what>; next_offset 20. <items>
    are in the structured content."`` (``; the last page`` when none follows)."""
    more = f"; next_offset {ans['next_offset']}" if ans["next_offset"] is not None else "; the last page"
    return f"{ans['returned']} of {ans['total']} {what}{more}. {items} are in the structured content."
