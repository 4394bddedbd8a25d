"""Numbers with units in both ASCII shapes: one tokenizer (``gapscope.parsers.ascii.common.quantities``),
exponents, malformed numbers, exact long fractions, fence counts, capped quotes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gapscope import parsers
from gapscope.parsers import TraceFormatError
from gapscope.parsers.ascii.common import clip, quantities, to_ns

MS = 1_000_000


def load_text(tmp_path, text):
    p = tmp_path / "t.txt"
    p.write_text(text, encoding="utf-8")
    return parsers.load(p)


def error_of(tmp_path, text):
    with pytest.raises(TraceFormatError) as ei:
        load_text(tmp_path, text)
    return ei.value


def spans(trace):
    """{name: (start_ns, dur_ns)} of a trace with unique names."""
    return {trace.name(i): (int(trace.start_ns[i]), int(trace.dur_ns[i])) for i in range(len(trace))}


@pytest.mark.parametrize(
    "text,line,col,needle",
    [
        # the attack inputs: 1e30 was read as a name ending in '1e' plus 30 ms
        ("GPU: [== a 1e30 ms ==]  [== b 1e30 ms ==]\n", 1, 12, "duration 1e30 ms is out of range"),
        (
            "GPU: k k k k k k k k\n  ^ 1e30 ms kernels, gaps of 8–20 µs\n",
            2,
            5,
            "picket fence number 1e30 ms is out of range",
        ),
        ("GPU: k k k\n  ^ 3 µs kernels, gaps of 8–2e30 µs\n", 2, 29, "picket fence number 2e30 µs is out of range"),
        ("1e30 ms GPU a begin\n", 1, 1, "time 1e30 ms is out of range"),
        ("0 ms GPU a begin\n1e30ms GPU a end\n", 2, 1, "time 1e30 ms is out of range"),
        # malformed numbers: the same rule in both shapes, at the number's column
        ("1.2.3 ms GPU a begin\n", 1, 1, "malformed number '1.2.3'"),
        ("0 ms GPU a\n 1e ms GPU b\n", 2, 2, "malformed number '1e'"),
        ("GPU: [== a 1.2.3 ms ==]\n", 1, 12, "malformed number '1.2.3' before 'ms'"),
        ("GPU: [== a 1e ms ==]\n", 1, 12, "malformed number '1e' before 'ms'"),
        ("GPU: k k k\n  ^ 1.2.3 µs kernels\n", 2, 5, "malformed number '1.2.3' before 'µs'"),
        # the requested count is named, not the cap + 1
        (
            "GPU: k k k k k k k k\n  ^ 3 µs kernels, gaps of 8–20 µs, repeating 1000000000000 times\n",
            2,
            3,
            "picket fence of 1000000000000 kernels: at most 100000",
        ),
        ("GPU: k k\n  ^ repeating 1e12 times\n", 2, 3, "picket fence of 1e12 kernels: at most 100000"),
        ("GPU: k k\n  ^ gaps of 1 µs, repeating 2.5 times\n", 2, 3, "no usable numbers"),
    ],
)
def test_number_errors(tmp_path, text, line, col, needle):
    err = error_of(tmp_path, text)
    assert (err.line, err.column) == (line, col), str(err)
    assert needle in err.message, err.message


def test_exponents_are_numbers_in_both_shapes(tmp_path):
    t = load_text(tmp_path, "0 ms GPU a begin\n1e-3 ms GPU a end\n2.5E3 us GPU b begin\n3e+3us GPU b end\n")
    assert spans(t) == {"a": (0, 1_000), "b": (2_500_000, 500_000)}
    t = load_text(tmp_path, "GPU: [== a 2e3 us ==][=== b 4 ms ===]\n")
    assert spans(t)["a"] == (0, 2 * MS)
    assert spans(t)["b"] == (2 * MS, 4 * MS)


def test_number_glued_to_a_word_is_not_a_duration(tmp_path):
    # 'k1e30' is a name: no number stands alone before 'ms', so the span has no duration
    t = load_text(tmp_path, "GPU: [== k1e30 ms ==]\n")
    assert t.name(0) == "k1e30 ms"
    assert quantities("k1e30 ms") == []
    assert [(q.num, q.unit, q.ns) for q in quantities("H2D 6 ms, gaps of 8–20 µs")] == [
        ("6", "ms", 6 * MS),
        ("20", "µs", 20_000),
    ]


def test_long_fractions_are_exact(tmp_path):
    # 1.5555…(40 fives) ms = 1555555.5…ns → 1555556 ns; 30 digits gave the same
    t = load_text(tmp_path, "0 ms GPU a begin\n1." + "5" * 40 + " ms GPU a end\n")
    assert spans(t) == {"a": (0, 1_555_556)}
    t = load_text(tmp_path, "0 ms GPU a begin\n0." + "0" * 5000 + "1 ms GPU a end\n")
    assert spans(t) == {"a": (0, 0)}
    t = load_text(tmp_path, "GPU: [== a 1." + "5" * 40 + " ms ==]\n")
    assert spans(t) == {"a": (0, 1_555_556)}
    assert to_ns("0.0000005", "ms") == 0  # 0.5 ns: ties to even
    assert to_ns("0.0000015", "ms") == 2
    assert to_ns("0.00000150000000000000000000001", "ms") == 2
    assert to_ns("0.00000049999999999999999999999", "ms") == 0
    assert to_ns("4.611686018427387904e9", "s") == 2**62
    assert to_ns("4.611686018427387905e9", "s") is None
    assert to_ns("1e999999999", "s") is None
    assert to_ns("1e-999999999", "s") == 0


def test_clip():
    assert clip("a" * 40) == "a" * 40
    assert clip("a" * 41) == "a" * 40 + "…"


LONG = "N" * 200_000


@pytest.mark.parametrize(
    "text,line,col,needle",
    [
        ("0 ms " + LONG + "\n", 1, 6, "found '" + "N" * 40 + "…'"),
        ("0 " + LONG[:5000] + " CPU a\n", 1, 3, "unknown unit '" + "N" * 40 + "…'"),
        (
            "0 ms CPU " + LONG + " begin\n1 ms CPU " + LONG + " end\n2 ms CPU " + LONG + " end\n",
            3,
            10,
            "'" + "N" * 40 + "… end' without '" + "N" * 40 + "… begin'",
        ),
        (
            "GPU: [a 4 ms][b 4 ms]\nCPU: [--- " + LONG[:3000] + " 7 ms --]\n",
            2,
            6,
            "span '" + "N" * 40 + "…' is labelled 7.000 ms",
        ),
        ("GPU: k k\n ^ " + LONG + " gaps of 20–8 µs\n", 2, 2, "no usable numbers: '" + "N" * 40 + "…'"),
        ("0 ms GPU" + "9" * 5000 + " x\n", 1, 6, "lane number too large in 'GPU" + "9" * 37 + "…'"),
        ("GPU" + "9" * 5000 + ": [a]\n", 1, 1, "lane number too large in 'GPU" + "9" * 37 + "…'"),
        ("1." + "2" * 5000 + ".3 ms GPU a\n", 1, 1, "malformed number '1." + "2" * 38 + "…'"),
    ],
    ids=lambda v: str(v)[:30] if isinstance(v, str) else None,
)
def test_quoted_input_is_capped(tmp_path, text, line, col, needle):
    err = error_of(tmp_path, text)
    assert (err.line, err.column) == (line, col), str(err)[:300]
    assert needle in err.message, err.message[:300]
    assert len(str(err)) < 400 + len(str(tmp_path))


def test_off_scale_warning_quotes_a_capped_name(tmp_path):
    t = load_text(tmp_path, "GPU: [a 1 ms][b 1 ms][" + LONG[:3000] + " 1000 s]\n")
    (w,) = t.warnings
    assert ("span '" + "N" * 40 + "…' is labelled 1000.000 s") in w.message and len(w.message) < 300


def test_warnings_quote_capped_names(tmp_path):
    t = load_text(tmp_path, "0 ms CPU " + LONG + " end\n1 ms CPU launch " + LONG + "\n")
    assert t.warnings and all(len(w.message) < 300 for w in t.warnings)
    assert any(("'" + "N" * 40 + "… end' on CPU has no 'begin'") in w.message for w in t.warnings)


FAST_LINES = [
    "0 ms CPU a begin",
    "  12.5us GPU k end  ",
    ".5 s gpu3: x y",
    "7\tCPU\tlaunch k",
    "1. ns Cpu12 z",
    "3 GPU copy H2D",
    "999999999999999 ns CPU a",
    "1.123456789 ms GPU b begin",
    "0 s CPU: end",
]


@pytest.mark.parametrize("raw", FAST_LINES)
def test_fast_path_equals_parse_line(raw):
    from gapscope.parsers.ascii.events import parse_fast, parse_line

    for unit in ("ms", "us"):
        fast = parse_fast(raw, 3, unit, {})
        assert fast is not None, raw
        assert fast == parse_line(raw, 3, unit, "p")


_PIECES = [
    "0",
    "12",
    ".5",
    "1.",
    "e3",
    "5e-1",
    " ",
    "  ",
    "\t",
    "ms",
    "us",
    "s",
    "ns",
    "µs",
    "xs",
    "CPU",
    "gpu",
    "GPU1",
    "CPU12345",
    ":",
    "x",
    "begin",
    "end",
    "#",
    "1.2.3",
    "\u00a0",
    "9" * 16,
]


@given(st.lists(st.sampled_from(_PIECES), max_size=9).map("".join))
def test_fast_path_agrees_or_declines(raw):
    from gapscope.parsers.ascii.events import parse_fast, parse_line

    fast = parse_fast(raw, 1, "ms", {})
    if fast is not None:
        assert fast == parse_line(raw, 1, "ms", "p")


@given(
    st.tuples(
        st.sampled_from(["", " ", "\t", "\u00a0"]),
        st.sampled_from(["0", "12", ".5", "1.", "1.25", "3e2", "1.2.3", "9" * 15, "9" * 16, "0.0000000005"]),
        st.sampled_from(["", " ", "  "]),
        st.sampled_from(["", "ms", "us", "s", "ns", "µs", "xs"]),
        st.sampled_from([" ", "\t", ""]),
        st.sampled_from(["CPU", "gpu", "GPU1:", "CPU12345", "FPGA", "CPU::"]),
        st.sampled_from([" ", "\t", "", "\u00a0"]),
        st.sampled_from(["a begin", "x", "end", " k end  ", ""]),
    ).map("".join)
)
def test_fast_path_agrees_on_shaped_lines(raw):
    from gapscope.parsers.ascii.events import parse_fast, parse_line

    fast = parse_fast(raw, 1, "us", {})
    if fast is not None:
        assert fast == parse_line(raw, 1, "us", "p")


def test_begin_end_words_after_any_blank(tmp_path):
    # the fast 'X begin' check (last word after a space) and _BEGIN_END (any whitespace) agree
    t = load_text(
        tmp_path,
        "0 ms GPU a\tbegin\n1 ms GPU a  END\n2 ms GPU b c begin\n3 ms GPU b c\u00a0end\n"
        "4 ms GPU begin begin\n5 ms GPU begin end\n",
    )
    assert spans(t) == {"a": (0, MS), "b c": (2 * MS, MS), "begin": (4 * MS, MS)}
