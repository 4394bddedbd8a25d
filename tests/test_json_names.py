"""``--json`` escapes what terminals or JavaScript treat as control (DEL, C1, U+2028,
U+2029); a lone surrogate escape in a name keeps the event, with a warning (issue 14)."""

from __future__ import annotations

import io
import json

import pytest

from gapscope.parsers import load
from gapscope.parsers.json.scan import repair_surrogates
from gapscope.report.cmd import run, write_json


def test_json_escapes_del_and_line_separators():
    out = io.StringIO()
    write_json({"name": "a\u2028b\u2029c\x7fd\x9be"}, out)
    text = out.getvalue()
    for raw in ("\u2028", "\u2029", "\x7f", "\x9b"):
        assert raw not in text
    assert json.loads(text)["name"] == "a\u2028b\u2029c\x7fd\x9be"


def _events(*names: str) -> str:
    """Events named by raw JSON string bodies (escapes kept as written)."""
    ev = '{"ph": "X", "cat": "kernel", "name": "NAME", "pid": 0, "tid": 7, "ts": TS, "dur": 2}'
    return (
        '{"traceEvents": ['
        + ", ".join(ev.replace("NAME", n).replace("TS", str(10 * i)) for i, n in enumerate(names))
        + "]}"
    )


@pytest.mark.parametrize("esc", ["\\ud800", "\\udfff", "\\uDBFF"])
def test_lone_surrogate_is_kept_as_replacement_with_a_warning(tmp_path, esc):
    path = tmp_path / "t.json"
    path.write_text(_events(f"a{esc}b", "ok"))
    t = load(path)
    assert len(t) == 2
    assert sorted(t.name(i) for i in range(2)) == ["a\ufffdb", "ok"]
    (w,) = [w for w in t.warnings if "surrogate" in w.message]
    assert w.line == 1 and w.field == "name" and esc.lower()[1:] in w.message.lower()
    out = io.StringIO()
    assert run(["--json", str(path)], stdout=out) == 0
    assert any("surrogate" in x["message"] for x in json.loads(out.getvalue())["warnings"])


def test_pairs_and_escaped_backslashes_are_left_alone():
    text = b'["\\ud83d\\ude00", "\\\\ud800", "\\u00e9"]'
    assert repair_surrogates(text) == (text, [])
    fixed, found = repair_surrogates(b'["x\\\\\\ud800"]')  # an escaped backslash, then a lone escape
    assert fixed == b'["x\\\\\\ufffd"]' and len(found) == 1
