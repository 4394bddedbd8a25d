"""The import graph of ``gapscope.tui``: no cycles and no private names imported
across its modules (``docs/style.md`` rule 9), read from the sources with ``ast`` (every import
counts, in functions and under ``TYPE_CHECKING`` too)."""

from __future__ import annotations

import ast
from pathlib import Path

import gapscope.tui

TUI = Path(gapscope.tui.__file__).parent
MODULES = {p.stem: p for p in TUI.glob("*.py") if p.stem != "__init__"}


def _imports() -> dict[str, set[str]]:
    """Module -> the tui modules it imports (names: ``swimlanes``...)."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for m, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                parts = name.split(".")
                if parts[:2] == ["gapscope", "tui"] and len(parts) > 2 and parts[2] in MODULES and parts[2] != m:
                    graph[m].add(parts[2])
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return path[path.index(n) :] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_the_graph_is_read():
    graph = _imports()
    assert "lanes_draw" in graph["swimlanes"] and "screen" in graph["app"]


def test_no_import_cycles_in_tui():
    assert _cycle(_imports()) is None


def test_cycle_finder_finds_one():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]


def test_no_private_names_imported_across_tui_modules():
    bad = []
    for m, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gapscope.tui"):
                bad += [f"{m}: {node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
    assert bad == []
