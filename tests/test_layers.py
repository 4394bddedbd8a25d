"""Imports flow one way (``docs/architecture.md`` "Layers"; ``docs/style.md`` rule 1): the headless packages
never load a UI library. Each check imports in a fresh interpreter and inspects
``sys.modules``, so an import done by an earlier test cannot hide a violation."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .conftest import ROOT


def _loaded_after(imports: str) -> set[str]:
    """Top-level names loaded, with ours named by their sub-package (``gapscope.tui``)."""
    code = f"import json, sys\n{imports}\nprint(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = set()
    for m in json.loads(proc.stdout.strip().splitlines()[-1]):
        parts = m.split(".")
        out.add(".".join(parts[:2]) if parts[0] == "gapscope" and len(parts) > 1 else parts[0])
    return out


@pytest.mark.parametrize(
    "imports, forbidden",
    [
        (
            "import gapscope.parsers, gapscope.parsers.builder, gapscope.parsers.detect",
            {"textual", "rich", "gapscope.analysis", "gapscope.tui", "gapscope.report"},
        ),
        ("import gapscope.analysis, gapscope.analysis.types", {"textual", "rich", "gapscope.tui", "gapscope.report"}),
        ("import gapscope.report.cmd, gapscope.report.document, gapscope.report.args", {"textual"}),
        ("import gapscope.diff.cmd, gapscope.diff.document, gapscope.diff.match", {"textual", "gapscope.tui"}),
        ("import gapscope.cli", {"textual", "rich"}),
        # the agent interface: the SDK only when the server is built (an optional extra)
        ("import gapscope.mcp.cmd, gapscope.mcp.service, gapscope.mcp.answers", {"textual", "gapscope.tui", "mcp"}),
        (
            "import gapscope.ranks.cmd, gapscope.ranks.document, gapscope.ranks.text, "
            "gapscope.ranks.markdown, gapscope.ranks.pool",
            {"textual", "rich", "gapscope.tui"},
        ),
        # the viewers' commands import Textual only when they open a screen
        ("import gapscope.tui.ranks.cmd, gapscope.tui.exercise.cmd, gapscope.tui.cmd", {"textual", "rich"}),
        ("import gapscope.capture", {"textual", "rich", "gapscope.parsers", "gapscope.analysis", "gapscope.tui"}),
        # the leaf every layer reads its environment variables through: the standard library only
        (
            "import gapscope.settings",
            {"textual", "rich", "numpy", "msgspec", "platformdirs", "gapscope.parsers", "gapscope.analysis"},
        ),
        # the leaf every layer formats its times with: the standard library only
        (
            "import gapscope.units",
            {"textual", "rich", "numpy", "msgspec", "gapscope.parsers", "gapscope.analysis", "gapscope.report"},
        ),
    ],
)
def test_headless_imports_load_no_ui(imports, forbidden):
    loaded = _loaded_after(imports)
    assert not (loaded & forbidden), f"{imports!r} loaded {sorted(loaded & forbidden)}"


def test_checker_sees_a_loaded_module():
    # The check above can fail: importing rich is visible to it.
    assert "rich" in _loaded_after("import rich.text")


def test_report_run_loads_no_textual(tmp_path):
    """The whole report path (load, diagnose, render) on an ASCII-free tiny trace."""
    path = tmp_path / "t.json"
    path.write_text(
        json.dumps(
            {
                "traceEvents": [
                    {
                        "ph": "X",
                        "cat": "kernel",
                        "name": "k",
                        "pid": 0,
                        "tid": 7,
                        "ts": 1,
                        "dur": 2,
                        "args": {"device": 0, "stream": 7},
                    },
                ]
            }
        )
    )
    code = (
        "import sys, io, json\n"
        "from gapscope.report import cmd as report_cmd\n"
        f"rc = report_cmd.main([{str(path)!r}])\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'textual')), file=sys.stderr)\n"
        "raise SystemExit(rc)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "[]"
