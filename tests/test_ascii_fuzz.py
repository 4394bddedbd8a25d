"""ASCII timelines never fail with anything but ``TraceFormatError`` (no tracebacks)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gapscope.parsers import TraceFormatError
from gapscope.parsers.ascii import load_ascii

_PIECES = [
    "0",
    "1.5",
    ".5",
    "12",
    " ",
    "  ",
    "ms",
    "us",
    "µs",
    "s",
    "xs",
    "CPU",
    "GPU",
    "GPU1",
    "CPU:",
    "GPU:",
    "[",
    "]",
    "==",
    "--",
    "k",
    "k k",
    "begin",
    "end",
    "launch",
    "matmul",
    "4 ms",
    "^",
    "gaps of 8–20 µs",
    "3 µs kernels",
    "repeating 5 times",
    ".item()",
    "tensor.cpu()",
    "H2D",
    "D2H",
    "#",
    "wait",
    "99999999999999999999",
    "9" * 60,
    "1e5",
    "repeating 99999999999 times",
    "\t",
    "0 min",
    "x3",
    "20–8 µs",
    "tensor(batch)",
    "json",
    "é",
]

_LINES = st.lists(st.sampled_from(_PIECES), min_size=0, max_size=10).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(_LINES, min_size=1, max_size=8))
def test_random_text_loads_or_raises_trace_format_error(lines):
    try:
        t = load_ascii("\n".join(lines), "fuzz.txt")
    except TraceFormatError as err:
        assert err.line is not None and err.line >= 1
        assert err.column is not None and err.column >= 1
        return
    assert len(t.start_ns) == len(t.dur_ns)
    assert (t.dur_ns >= 0).all()
