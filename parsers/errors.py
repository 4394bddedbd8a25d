"""Errors raised by the loaders."""

from __future__ import annotations


class TraceFormatError(Exception):
    """The input cannot be read as a trace.

    Attributes: ``path`` (str), ``line`` and ``column`` (1-based, or None), ``hint``
    (what the user can do). ``str(err)`` is one line naming all of them, fit for a CLI.
    """

    def __init__(
        self,
        path: str,
        message: str,
        *,
        line: int | None = None,
        column: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.path = str(path)
        self.message = message
        self.line = line
        self.column = column
        self.hint = hint
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = self.path
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        text = f"{where}: {self.message}"
        if self.hint:
            text += f" ({self.hint})"
        return text
