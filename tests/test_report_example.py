"""``docs/report-example.txt`` is real output: its first line is the command that made
it (``$ NO_COLOR=1 gapscope report ...``, run from the repository root), and the rest
must equal what that command prints today. When the report changes, regenerate it:

    (echo '$ NO_COLOR=1 gapscope report --width 100 ../shared/traces/public/hta/step_based_trace_2543932.json.gz'; \
     NO_COLOR=1 gapscope report --width 100 ../shared/traces/public/hta/step_based_trace_2543932.json.gz) \
     > docs/report-example.txt
"""

from __future__ import annotations

import io
import shlex

from gapscope.report import cmd as report_cmd

from .conftest import CORPUS, ROOT, require

EXAMPLE = ROOT / "docs" / "report-example.txt"


def _command() -> tuple[list[str], str]:
    """(arguments after ``gapscope report``, the trace path as written) of line 1."""
    first = EXAMPLE.read_text(encoding="utf-8").split("\n", 1)[0]
    assert first.startswith("$ "), first
    words = shlex.split(first[2:])
    assert words[:3] == ["NO_COLOR=1", "gapscope", "report"], words
    (path,) = [w for w in words[3:] if w.endswith((".json", ".json.gz", ".txt"))]
    return words[3:], path


def test_report_example_is_current():
    argv, path = _command()
    # the path is relative to the repository root; the corpus may live elsewhere
    # ($GAPSCOPE_SHARED), so read the trace from the corpus and compare from line 3 on
    # (line 2 echoes the path)
    rel = path.split("traces/public/", 1)[1]
    trace = require(CORPUS / rel)
    out = io.StringIO()
    assert report_cmd.run([str(trace) if a == path else a for a in argv], stdout=out) == 0
    want = EXAMPLE.read_text(encoding="utf-8").split("\n")
    got = out.getvalue().split("\n")
    # the verdict and the findings come first (issue 47); then the line echoing the path
    k = want.index(f"gapscope report: {path}")
    j = got.index(f"gapscope report: {trace}")
    assert want[1].startswith("Verdict: ") and got[0].startswith("Verdict: ")
    assert (got[:j], got[j + 1 :]) == (want[1:k], want[k + 1 :]), (
        "docs/report-example.txt is stale: regenerate it (see this module's docstring)"
    )
