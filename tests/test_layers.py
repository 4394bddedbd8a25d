"""Imports flow one way (design "Data flow"; STYLE.md rule 1): the headless packages
never load a UI library. Each check imports in a fresh interpreter and inspects
``sys.modules``, so an import done by an earlier test cannot hide a violation."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .conftest import ROOT


def _loaded_after(imports: str) -> set[str]:
    code = f"import json, sys\n{imports}\nprint(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return {m.split(".")[0] for m in json.loads(proc.stdout.strip().splitlines()[-1])}


@pytest.mark.parametrize(
    "imports, forbidden",
    [
        ("import parsers, parsers.builder, parsers.detect", {"textual", "rich"}),
        ("import analysis, analysis.types", {"textual", "rich"}),
        ("import gapscope.report_cmd, gapscope.report_json, gapscope.report_args", {"textual"}),
        ("import gapscope.cli", {"textual", "rich"}),
        ("import capture", {"textual", "rich", "parsers", "analysis", "tui"}),
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
    path.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2, "args": {"device": 0, "stream": 7}},
    ]}))
    code = (
        "import sys, io, json\n"
        "from gapscope import report_cmd\n"
        f"rc = report_cmd.main([{str(path)!r}])\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'textual')), file=sys.stderr)\n"
        "raise SystemExit(rc)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "[]"
