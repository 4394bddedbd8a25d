"""Where events begin and end (``gapscope.parsers.json.boundaries``): one rule, checked
by its exact scanner (``scan_elements``), and every fast finder held to it.

The C scanner keeps its own inner loop for the rule (it parses each event in place as
it goes): on every JSON trace of the corpus, the spans it reports for the device
events it searches (``_xscan.device_events``) and the starts of every event it scans
(``_xscan.scan``) are exactly the exact scanner's. The Python candidates
(``next_boundary``, ``first_key_starts``, ``next_event_line``) are held to the same
spans on the corpus and on texts made by hand.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import pytest

from gapscope.parsers.chrome import fastscan
from gapscope.parsers.chrome.decode import _DECODERS, _raw_ts
from gapscope.parsers.chrome.preview import DEVICE_CATS
from gapscope.parsers.chrome.text import key_positions
from gapscope.parsers.json.boundaries import (
    find_events_array,
    first_key_starts,
    line_prefix,
    next_boundary,
    next_event_line,
    scan_elements,
)
from gapscope.parsers.json.scan import text_start
from tests.conftest import CORPUS, require, sweep


def _json_files() -> list[str]:
    if not CORPUS.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"the corpus is missing: {CORPUS}")
        return []
    return sorted(str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*") if p.name.endswith((".json", ".json.gz")))


#: The files the corpus sweeps read when the full corpus is not asked for
#: (``tests.conftest.sweep``: all of them under ``CI`` or ``GAPSCOPE_FULL_CORPUS=1``).
SAMPLE = (
    "catapult/fuchsia_trace.json.gz",
    "hta/inference_rank_1.json.gz",
    "hta/rank-70.Mar_25_20_48_12.2861.pt.trace.json.gz",
    "kineto/after_fix_trace.json",
    "perfetto/flow_events_json_v2.json",
    "tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
)


def _text(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def _exact(data: bytes) -> tuple[int, np.ndarray, np.ndarray, int] | None:
    """(after the events array's ``[``, starts, ends, its ``]``) by the exact scanner."""
    begin = find_events_array(data, text_start(data))
    if begin < 0:
        return None
    scan = scan_elements(data, begin)
    return begin, scan.starts, scan.ends, scan.close


@pytest.mark.parametrize("rel", sweep(_json_files(), SAMPLE))
def test_the_c_scanner_finds_the_exact_scanners_events(rel: str) -> None:
    if not fastscan.available():
        pytest.skip("the C scanner is not built")
    data = _text(require(CORPUS / rel))
    exact = _exact(data)
    if exact is None:
        pytest.skip("no events array (rocprof's own format)")
    begin, starts, ends, close = exact
    assert starts.size > 0
    # every device event it finds by searching for its "cat" key: one of the elements
    got = fastscan.device_event_spans(data, begin, close, DEVICE_CATS)
    assert got is not None
    spans = got[1]
    elements = set(zip(starts.tolist(), ends.tolist()))
    assert {(int(s), int(e)) for s, e in spans} <= elements
    # and as many as the elements whose "cat" is one of them (by a decode of each)
    import msgspec

    cats = {c.decode() for c in DEVICE_CATS}
    want = [
        (s, e)
        for s, e in zip(starts.tolist(), ends.tolist())
        if (lambda ev: isinstance(ev, dict) and ev.get("cat") in cats)(msgspec.json.decode(data[s:e]))
    ]
    assert [(int(s), int(e)) for s, e in spans] == want
    # every event's "{" of a whole scan (when the text is inside what it takes)
    array = data[begin - 1 : close + 1]
    raw_ts = _raw_ts(data, text_start(data))
    scanned = fastscan.scan_text(array, _DECODERS[raw_ts][0], raw_ts)
    if scanned is not None:
        assert np.array_equal(scanned[3] + (begin - 1), starts)


@pytest.mark.parametrize("rel", sweep(_json_files(), SAMPLE))
def test_boundary_candidates_are_element_boundaries_on_the_corpus(rel: str) -> None:
    """``next_boundary`` at 16 offsets spread over the array: the ``}`` ends an element
    and the ``{`` after its ``,`` begins the next (no string of the corpus holds
    ``}``, ``{``)."""
    data = _text(require(CORPUS / rel))
    exact = _exact(data)
    if exact is None or exact[1].size < 2:
        pytest.skip("no events array of two events")
    begin, starts, ends, close = exact
    start_set, end_set = set(starts.tolist()), set(ends.tolist())
    found = 0
    for target in np.linspace(begin, close, 16, dtype=np.int64).tolist():
        edge = next_boundary(data, target, close)
        if edge is None:
            continue
        brace, comma = edge
        found += 1
        assert brace + 1 in end_set
        assert data[comma : comma + 1] == b","
        assert comma + 1 + len(data[comma + 1 :]) - len(data[comma + 1 :].lstrip()) in start_set
    assert found > 0


@pytest.mark.parametrize("rel", sweep(_json_files(), SAMPLE))
def test_first_key_starts_are_the_exact_starts(rel: str) -> None:
    """Where every event begins with ``"ph"`` (and only they have it first), the ``{``
    before each ``"ph"`` key is the exact scanner's start; else None, never others."""
    data = _text(require(CORPUS / rel))
    exact = _exact(data)
    if exact is None:
        pytest.skip("no events array")
    begin, starts, _, _ = exact
    ph = key_positions(data, b'"ph"', begin)
    got = first_key_starts(data, ph) if ph.size == starts.size else None
    if got is not None:
        assert np.array_equal(got, starts)


def test_first_key_starts_refuses_a_key_not_first_or_nested() -> None:
    text = b'[{"ph": "X", "a": 1},\n  {"b": {"ph": 2}}]'
    ph = key_positions(text, b'"ph"', 1)
    assert ph.size == 2
    assert first_key_starts(text, ph[:1]).tolist() == [1]
    assert first_key_starts(text, ph) is None  # the second "ph" is nested in "b"
    assert first_key_starts(text, ph[:0]).tolist() == []


def test_exact_scanner_ignores_brackets_and_escaped_quotes_in_strings() -> None:
    text = b'[{"name": "a}, {b", "x": "\\\\"}, {"name": "\\"}]"},{"y": [1, {"z": 2}]}]'
    scan = scan_elements(text, 1)
    got = [text[s:e] for s, e in zip(scan.starts, scan.ends)]
    assert got == [b'{"name": "a}, {b", "x": "\\\\"}', b'{"name": "\\"}]"}', b'{"y": [1, {"z": 2}]}']
    assert scan.close == len(text) - 1 and scan.partial_start == -1
    # a candidate may fall inside a string (refuted later by a decode): the exact one does not
    assert next_boundary(text, 1, len(text)) == (12, 13)
    assert 13 not in set(scan.ends.tolist())


def test_next_event_line_resumes_at_the_indentation_of_the_events() -> None:
    text = b'{"traceEvents": [\n  {"ph": "X", "name": "a},\n  {"ph": "X"},\n    {"no": 1},\n  {"ph": "i"}]}'
    first = text.index(b'{"ph"')
    prefix = line_prefix(text, first)
    assert prefix == b"  "
    second = next_event_line(text, first, prefix)
    assert text[second : second + 5] == b'{"ph"' and second == text.index(b'{"ph": "X"}')
    third = next_event_line(text, second, prefix)
    assert third == text.index(b'{"ph": "i"}')  # the line indented by four is skipped
    assert next_event_line(text, third, prefix) == -1
    assert line_prefix(text, text.index(b'"name"')) is None  # text before it on its line


def test_candidates_before_an_offset_come_nearest_first_and_stop() -> None:
    from gapscope.parsers.json.boundaries import ends_before, starts_before

    text = b'[{"a": {"b": 1}}, {"c": 2}]'
    close = text.rindex(b"}")
    assert list(starts_before(text, 1, close, 8)) == [18, 7, 1]  # "{" of {"c"}, of {"b"}, of {"a"}
    assert list(starts_before(text, 1, close, 2)) == [18, 7]
    event = text[1:17] + b', {"c": 2}]'  # an event's text running on past its end
    assert list(ends_before(event, len(event), 8)) == [25, 14, 13]
    assert list(ends_before(event, len(event), 1)) == [25]
    assert list(ends_before(b"[1, 2]", 6, 8)) == []
