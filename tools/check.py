"""Static checks that need the installed package layout: ``types`` (mypy) and ``layers``
(import-linter). Used by ``.ci/run`` and ``.pre-commit-config.yaml``; run it from
anywhere with the venv's Python::

    python tools/check.py types     # mypy, configured in pyproject.toml [tool.mypy]
    python tools/check.py layers    # import-linter, pyproject.toml [tool.importlinter],
                                    # then no import cycle among gapscope's modules
    python tools/check.py tree      # only build the tree and print its path

Why a script: ``pyproject.toml`` maps the top-level folders to sub-packages with
setuptools ``package-dir`` (``parsers/`` installs as ``gapscope.parsers``). An editable
install resolves that at import time with a meta-path finder, which static tools never
run: mypy says "Can't find package 'gapscope.parsers'" and import-linter's scan of the
``gapscope/`` folder never sees ``gapscope.parsers``. So the script builds the layout the
wheel would have, as real folders holding symlinks to the source files, under
``build/srctree/`` (one stable place, so mypy's incremental cache stays valid), puts it
first on the tools' path, and maps the paths in their output back to the source files.

The tree is built from ``[tool.setuptools] packages`` and ``package-dir``, the same
table the wheel is built from; a folder with an ``__init__.py`` that the table does not
list is an error (the wheel would silently lack it while an editable install works).
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TREE = ROOT / "build" / "srctree"
#: What a package folder contributes to the tree: the modules and the typing marker.
SUFFIXES = (".py", ".pyi", ".typed")
#: Packages whose errors are counted separately in the summary line.
GROUPS = ("gapscope.parsers", "gapscope.analysis", "gapscope.tui", "gapscope.capture")


def _setuptools_table() -> tuple[list[str], dict[str, str]]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        table = tomllib.load(f)["tool"]["setuptools"]
    return list(table["packages"]), dict(table.get("package-dir", {}))


def source_dir(package: str, package_dir: dict[str, str]) -> Path:
    """The folder setuptools takes ``package`` from: the longest mapped prefix, as
    setuptools resolves ``package-dir``."""
    parts = package.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in package_dir:
            return ROOT / package_dir[prefix] / Path(*parts[n:])
    return ROOT / Path(*parts)


def build_tree() -> None:
    """Rebuild ``TREE`` from the setuptools table. Raises SystemExit(2) when a package
    folder is missing from the table, or a listed package has no folder."""
    packages, package_dir = _setuptools_table()
    problems: list[str] = []
    listed = {source_dir(p, package_dir).resolve(): p for p in packages}
    for folder, package in sorted(listed.items(), key=lambda kv: kv[1]):
        if not (folder / "__init__.py").is_file():
            problems.append(f"{package}: listed in [tool.setuptools] packages but {folder} has no __init__.py")
    for mapped in sorted({*package_dir.values()}):
        for init in sorted((ROOT / mapped).rglob("__init__.py")):
            if "__pycache__" not in init.parts and init.parent.resolve() not in listed:
                rel = init.parent.relative_to(ROOT)
                problems.append(f"{rel}/ has an __init__.py but no entry in [tool.setuptools] packages")
    if problems:
        for line in problems:
            print(f"tools/check.py: {line}", file=sys.stderr)
        raise SystemExit(2)

    if TREE.exists():
        shutil.rmtree(TREE)
    for package in packages:
        src = source_dir(package, package_dir)
        dst = TREE / Path(*package.split("."))
        dst.mkdir(parents=True, exist_ok=True)
        for f in sorted(src.iterdir()):
            if f.is_file() and f.name.endswith(SUFFIXES):
                (dst / f.name).symlink_to(f.resolve())


#: A path into the tree as the tools print it (relative to ROOT, or absolute).
_TREE_PATH = re.compile(rf"(?:{re.escape(str(ROOT))}/)?{re.escape(str(TREE.relative_to(ROOT)))}/[\w/.-]+?\.pyi?\b")


def _unmap(text: str) -> str:
    """Tree paths in a tool's output -> the repository files they link to."""
    return _TREE_PATH.sub(lambda m: os.path.relpath(os.path.realpath(ROOT / m.group(0)), ROOT), text)


def _group(path: str) -> str:
    """Which package a repository path belongs to, for the summary line."""
    top = path.split("/", 1)[0]
    for g in GROUPS:
        if top == g.split(".")[1]:
            return g
    return "gapscope"


def types(args: list[str]) -> int:
    """mypy over the whole package in the tree; exit status 1 on any error."""
    build_tree()
    env = {**os.environ, "MYPYPATH": str(TREE)}
    cmd = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), "-p", "gapscope", *args]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    out = _unmap(proc.stdout)
    sys.stdout.write(out)
    sys.stderr.write(_unmap(proc.stderr))
    counts = Counter(_group(m.group(1)) for m in re.finditer(r"^(\S+\.pyi?):\d+: error:", out, re.M))
    if counts:
        per = ", ".join(f"{g} {counts[g]}" for g in ("gapscope", *GROUPS) if counts[g])
        print(f"tools/check.py types: errors by package: {per}")
    return proc.returncode


def layers(args: list[str]) -> int:
    """import-linter contracts from pyproject.toml, run on the tree, then
    ``import_cycles`` of the tree; exit status 1 when a contract is broken or a cycle
    is found (lint-imports' own status when it fails otherwise)."""
    build_tree()
    # lint-imports puts its working directory first on sys.path: run it in the tree, so
    # the repository's own gapscope/ folder (without parsers, analysis, ...) is not
    # what it finds.
    env = {**os.environ, "PYTHONPATH": str(TREE)}
    lint = shutil.which("lint-imports", path=os.path.dirname(sys.executable)) or "lint-imports"
    cmd = [lint, str(ROOT / "pyproject.toml"), "--no-cache", "--no-logo", *args]
    status = subprocess.run(cmd, cwd=TREE, env=env).returncode
    cycles = import_cycles(TREE)
    for modules in cycles:
        print(f"tools/check.py layers: import cycle among {len(modules)} modules: {', '.join(modules)}")
    print(f"tools/check.py layers: {len(cycles)} import cycles among gapscope's modules")
    return status or (1 if cycles else 0)


def import_cycles(tree: Path) -> list[list[str]]:
    """The import cycles among the modules of ``gapscope`` under ``tree``: each strongly
    connected set of two or more modules of its import graph (or one importing itself),
    sorted, as grimp's graph has them: every ``import`` statement counts, inside a
    function or ``if TYPE_CHECKING`` as well (a deferred import is still a cycle).
    Package ``__init__`` modules count as modules; an import of a submodule is not an
    import of its package."""
    sys.path.insert(0, str(tree))
    try:
        import grimp  # import-linter's own graph builder (a dependency of the check extra)

        graph = grimp.build_graph("gapscope", cache_dir=None)
    finally:
        sys.path.remove(str(tree))
    edges = {m: graph.find_modules_directly_imported_by(m) & graph.modules for m in graph.modules}
    # Tarjan's strongly connected components, iterative (no recursion limit)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1 or v in edges[v]:
                    found.append(sorted(component))
    return sorted(found)


def tree(args: list[str]) -> int:
    """Only build the tree and print where it is (to run another tool on it)."""
    build_tree()
    print(TREE)
    return 0


def main(argv: list[str]) -> int:
    commands = {"types": types, "layers": layers, "tree": tree}
    if not argv or argv[0] not in commands:
        print(f"usage: python tools/check.py {{{','.join(commands)}}} [tool options]", file=sys.stderr)
        return 2
    TREE.parent.mkdir(parents=True, exist_ok=True)
    # One run at a time: each rebuilds the tree the other may be reading.
    with open(TREE.parent / "srctree.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
