"""Which files ``gapscope mcp`` may read: only those under its ``--root`` folders.

A path from the agent is resolved first (made absolute against the first root,
``..`` collapsed, every symbolic link followed, ``os.path.realpath``), then checked:
the resolved file must lie inside a resolved root. So ``../x``, an absolute path
elsewhere and a link that points out of a root are all refused, whatever the text of
the path looks like. The check is on the name the loader then opens (the resolved
one), so a link swapped after the check cannot lead the load elsewhere.
"""

from __future__ import annotations

import os

__all__ = ["Roots", "OutsideRoots"]


class OutsideRoots(ValueError):
    """A path outside every root, or one that does not exist; ``str()`` is one line."""


class Roots:
    """The folders the server may read under, resolved once (``realpath``).

    ``folders``: the ``--root`` arguments (default: the current directory). Raises
    ``OutsideRoots`` when one is not a folder.
    """

    def __init__(self, folders: list[str] | None = None) -> None:
        given = folders or [os.getcwd()]
        resolved = []
        for f in given:
            real = os.path.realpath(os.path.abspath(os.path.expanduser(f)))
            if not os.path.isdir(real):
                raise OutsideRoots(f"--root {f}: not a folder")
            resolved.append(real)
        self.folders: tuple[str, ...] = tuple(dict.fromkeys(resolved))

    def __contains__(self, real: str) -> bool:
        return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in self.folders)

    def resolve(self, path: str, *, folder: bool = False) -> str:
        """The real path of ``path`` (relative paths are taken from the first root),
        when it is an existing file (``folder``: a file or a folder) inside a root.
        Raises ``OutsideRoots`` otherwise, naming the path as given (not where a link
        points: that is outside the roots' information the agent may have)."""
        text = str(path)
        if not text or "\x00" in text:
            raise OutsideRoots(f"{text!r}: not a path")
        base = text if os.path.isabs(os.path.expanduser(text)) else os.path.join(self.folders[0], text)
        real = os.path.realpath(os.path.expanduser(base))
        if real not in self:
            raise OutsideRoots(
                f"{text}: outside the folders this server may read (--root {', '.join(self.folders)}); "
                "paths are resolved, links followed, before the check"
            )
        if not os.path.exists(real):
            raise OutsideRoots(f"{text}: no such file")
        if not folder and not os.path.isfile(real):
            raise OutsideRoots(f"{text}: not a file")
        return real
