"""Event lists read for the whole text at once (issue 15): the lines the one regex takes
and the lines read one by one give the values the line-by-line loader gave
(``tests/reference_ascii_events.py``), and well-formed lines never take the per-line path."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gapscope.parsers import Kind, TraceFormatError
from gapscope.parsers.ascii import events, load_ascii, timeline_shape
from gapscope.parsers.ascii.art import load_art
from gapscope.parsers.ascii.common import split_lines

from .reference_ascii_events import load_events_reference

US, MS = 1_000, 1_000_000


def snapshot(t):
    """Everything a ``Trace`` holds, as plain values (arrays as dtype and bytes: nan == nan)."""
    arrays = {
        f.name: (str(v.dtype), v.shape, v.tobytes())
        for f in dataclasses.fields(t)
        if isinstance(v := getattr(t, f.name), np.ndarray)
    }
    return (
        arrays,
        t.names,
        t.lanes,
        dataclasses.asdict(t.source),
        t.warnings,
        t.extent_ns,
        [t.args_of(i) for i in range(len(t))],
    )


def outcome(load, text):
    """The snapshot of ``load``'s trace, or its error's fields."""
    try:
        return snapshot(load(text))
    except TraceFormatError as err:
        return ("error", err.message, err.line, err.column, err.hint)


def new(text):
    return load_ascii(text, "t.txt")


def reference(text):
    """``load_ascii`` with the line-by-line event-list loader."""
    lines = split_lines(text)
    if timeline_shape(lines, "t.txt") == "events":
        return load_events_reference(lines, "t.txt")
    return load_art(lines, "t.txt")


class Spy:
    """Count calls of ``events.<name>`` and the line numbers (``lineno``) they got."""

    def __init__(self, monkeypatch, name):
        self.calls: list[tuple] = []
        real = getattr(events, name)

        def spy(*args, **kw):
            self.calls.append(args)
            return real(*args, **kw)

        monkeypatch.setattr(events, name, spy)


# ------------------------------------------------------------------ a hand-made list
HAND = (
    "# decode step, by hand\n"  # 1
    "0.000 ms  CPU decode_step begin\n"  # 2  whole text
    "30 us     CPU sample previous token\n"  # 3  whole text
    "9e1 us    CPU tensor.item()\n"  # 4  one by one: exponent
    "0.25ms    CPU launch matmul\n"  # 5  whole text: glued unit
    "258000    ns GPU matmul begin\n"  # 6  whole text
    "0.000410000000000000000 s GPU matmul end\n"  # 7  one by one: 21 fraction digits
    ".422 ms CPU\u00a0launch attention\n"  # 8  one by one: a no-break space (parse_line)
    "430.0000005 us GPU attention begin\n"  # 9  whole text: 430000.5 ns, a tie: to even
    "\u0665\u0669\u0660 us GPU attention end\n"  # 10 one by one: Arabic-Indic digits (590)
    "\n"  # 11
    "760 CPU logging callback\n"  # 12 whole text: the unit carried (us)
    "1.05 ms CPU: decode_step end\n"  # 13 whole text: a colon after the lane
    "1.05 ms GPU1 orphan end\n"  # 14 whole text: no begin, a warning
)


def test_hand_made_list_exact_values(monkeypatch):
    per_line = Spy(monkeypatch, "parse_line")
    numbers = Spy(monkeypatch, "to_ns")
    t = new(HAND)
    got = [
        (t.lanes[int(t.lane[i])].label, t.name(i), int(t.start_ns[i]), int(t.dur_ns[i]), Kind(int(t.kind[i])))
        for i in range(len(t))
    ]
    assert got == [
        ("main", "decode_step", 0, 1_050 * US, Kind.ANNOTATION),
        ("main", "sample previous token", 30 * US, 60 * US, Kind.CPU_OP),
        ("main", "tensor.item()", 90 * US, 160 * US, Kind.SYNC_CALL),
        ("main", "launch matmul", 250 * US, 172 * US, Kind.LAUNCH),
        ("main", "launch attention", 422 * US, 338 * US, Kind.LAUNCH),
        ("main", "logging callback", 760 * US, 290 * US, Kind.PYTHON),
        ("stream 0", "matmul", 258 * US, 152 * US, Kind.KERNEL),
        ("stream 0", "attention", 430 * US, 160 * US, Kind.KERNEL),
        ("stream 0", "orphan", 0, 1_050 * US, Kind.KERNEL),
    ]
    assert [ln.device for ln in t.lanes] == [-1, 0, 1]
    assert t.src_line.tolist() == [2, 3, 4, 5, 8, 12, 6, 9, 14]
    assert t.names == (  # in the order events are added: by (start, -dur, annotations first)
        "decode_step",
        "orphan",
        "sample previous token",
        "tensor.item()",
        "launch matmul",
        "matmul",
        "launch attention",
        "attention",
        "logging callback",
    )
    assert t.correlation.tolist() == [-1, -1, -1, 1, 2, -1, 1, 2, -1]
    assert [(t.name(int(s)), t.name(int(d))) for s, d in zip(t.flow_src, t.flow_dst)] == [
        ("launch matmul", "matmul"),
        ("launch attention", "attention"),
    ]
    assert [t.args_of(i) for i in (3, 4)] == [{"target": "matmul"}, {"target": "attention"}]
    assert [(w.line, w.field, w.message) for w in t.warnings] == [
        (14, "text", "'orphan end' on GPU1 has no 'begin': taken to start at the first time of the file (0 ms)")
    ]
    assert t.source.display_time_unit == "ms" and t.source.trace_name == "decode step, by hand"
    # which lines were read one by one: numbers by to_ns (4, 7, 10) or by parse_line (8);
    # a warning reads its line (14) again, for the unit it quotes
    assert [c[1] for c in per_line.calls] == [8]
    assert sorted(c[0] for c in numbers.calls) == [
        ".422",
        "0.000410000000000000000",
        "1.05",
        "9e1",
        "\u0665\u0669\u0660",
    ]
    assert outcome(new, HAND) == outcome(reference, HAND)


@pytest.mark.parametrize(
    "text,line,col,needle",
    [
        # the first problem in file order wins, whichever reading finds it
        (
            "0 ms CPU a\n1e3 ms CPU b\n0.5 ms CPU c\nhello\n",
            3,
            1,
            "time goes backwards on lane CPU: 0.5 ms after 1000 ms",
        ),
        ("0 ms CPU a\n1 ms CPU b\nhello\n0.5 ms CPU c\n", 3, 1, "expected a time"),
        ("0 ms CPU a\n" + "9" * 18 + " s CPU b\n1.2.3 ms CPU c\n", 2, 1, "out of range"),
        ("0 ms CPU a\n1.2.3 ms CPU c\n" + "9" * 18 + " s CPU b\n", 2, 1, "malformed number"),
        ("0 ms CPU a end\n1 ms CPU a end\n0 ms GPU end\n", 2, 10, "'a end' without 'a begin'"),
        ("0 ms CPU a begin\n1 ms GPU end\n2 ms CPU a end\n3 ms CPU a end\n", 2, 10, "'end' needs a name"),
        ("1 ms CPU a\n2 ms CPU b\n1.5 ms CPU c\n", 3, 1, "1.5 ms after 2 ms on line 2"),
    ],
)
def test_errors_in_file_order(text, line, col, needle):
    with pytest.raises(TraceFormatError) as ei:
        new(text)
    assert (ei.value.line, ei.value.column) == (line, col), str(ei.value)
    assert needle in ei.value.message
    assert outcome(new, text) == outcome(reference, text)


# ------------------------------------------------------------------ the work per line
def well_formed(n_steps: int) -> str:
    """A list of decode steps in every form the whole-text reading takes."""
    out = ["# steps", ""]
    t = 0
    for k in range(n_steps):
        out += [
            f"{t / 1000:.3f} ms  CPU decode_step begin",
            f"{t + 30}us CPU sample",
            f"\t{t + 40} us\tCPU\tlaunch matmul",
            f"{(t + 48) / 1e6:.6f} s GPU1: matmul begin",
            f"{(t + 90) * 1000} ns GPU1 matmul end",
            f"{t + 95}.5 us cpu x.cpu()",
            f"{t + 96} GPU1 D2H begin",  # unit carried: us
            f"{t + 99}.000000000000000001 GPU1 D2H end",  # 18 fraction digits
            "   # a note",
            f".{k % 10}5 ms CPU2 callback" if t == 0 else f"{t + 100} us CPU2 logging callback",
            f"{t + 120}  us  CPU decode_step end",
        ]
        t += 200
    return "\n".join(out) + "\n"


def test_well_formed_lines_never_take_the_per_line_path(monkeypatch):
    spies = {name: Spy(monkeypatch, name) for name in ("parse_line", "parse_fast", "to_ns")}
    t = new(well_formed(300))
    assert len(t) == 300 * 7 and t.warnings == ()
    assert int((t.correlation >= 0).sum()) == 300 * 4  # launches and copies all linked
    assert {name: len(s.calls) for name, s in spies.items()} == {"parse_line": 0, "parse_fast": 0, "to_ns": 0}


def test_other_lines_are_read_one_by_one_each_once(monkeypatch):
    lines = well_formed(50).splitlines()
    odd = {5: "1e3 us CPU9 zz", 40: "2.5E+5  us GPU9 k", 90: "0" * 20 + "123 us GPU8 k2", 200: "120 us CPU7::  y"}
    for at, line in sorted(odd.items()):
        lines.insert(at, line)
    text = "\n".join(lines) + "\n"
    per_line, numbers = Spy(monkeypatch, "parse_line"), Spy(monkeypatch, "to_ns")
    t = new(text)
    assert len(t) == 50 * 7 + 4
    assert sorted(c[0] for c in numbers.calls) == sorted(["1e3", "2.5E+5", "0" * 20 + "123", "120"])
    assert [c[1] for c in per_line.calls] == [201]  # the double colon: only parse_line reads it
    assert outcome(new, text) == outcome(reference, text)


# ------------------------------------------------------------------ random lists
_NUM = st.sampled_from(
    ["0", "1", "2", "5", "12", "30", ".5", "1.", "1.25", "007", "1e1", "2.5E+1", "1e-3", "0.0000005", "0.0000015"]
    + ["2.5", "3.5", "999999999999999999", "9" * 19, "1." + "5" * 18, "1." + "5" * 19, "\u0663", "1e30"]
)
_TEXT = st.sampled_from(
    ["a begin", "a end", "a Begin", "a END", "b c begin", "b c end", "k", "begin", "end", "x\tbegin", "x\u00a0end"]
    + ["launch k", "launch a", "launch b c", "cudaLaunchKernel", "tensor.item()", "x.cpu()", "batch.cuda()"]
    + ["H2D begin", "H2D end", "memcpy begin", "memcpy end", "memset begin", "\u540d begin", "\u540d end"]
    + ['q "x" end', "trail  ", "z\u3000", "k begin", "k end", "b begin", "b end", "c begin", "c end"]
)
_LINE = st.one_of(
    st.tuples(
        st.sampled_from(["", "", " ", "\t"]),
        _NUM,
        st.sampled_from(["", "", " ", "  ", "\t"]),
        st.sampled_from(["", "", "ms", "us", "\u00b5s", "ns", "s", "xs"]),
        st.sampled_from([" ", " ", "  ", "\t", "\u00a0"]),
        st.sampled_from(["CPU", "CPU", "GPU", "GPU", "cpu", "GPU1:", "CPU2", "GPU0", "CPU::", "FPGA", "GPU12345"]),
        st.sampled_from([" ", " ", "\t", "  "]),
        _TEXT,
    ).map("".join),
    st.sampled_from(["", "# c", "  # c", "hello", "1 ms CPU"]),
)


@settings(max_examples=250, deadline=None)
@given(st.lists(_LINE, min_size=1, max_size=25), st.sampled_from(["\n", "\r\n"]))
def test_random_lists_equal_the_line_by_line_loader(lines, eol):
    text = eol.join(lines) + eol
    assert outcome(new, text) == outcome(reference, text)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["CPU", "CPU1", "GPU", "GPU1"]), _TEXT, st.integers(0, 3)), max_size=60))
def test_random_valid_lists_equal_the_line_by_line_loader(steps):
    """Times that never go back on a lane: the ranges, points and links, not the errors."""
    clock: dict[str, int] = {}
    lines = []
    for lane, text, step in steps:
        clock[lane] = clock.get(lane, 0) + step
        lines.append(f"{clock[lane]} us {lane} {text}")
    text = "\n".join(lines) + "\n"
    assert outcome(new, text) == outcome(reference, text)


_WORDS = [f"w{i}" for i in range(13)]


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["CPU", "CPU", "GPU", "GPU1"]),
            st.lists(st.sampled_from(_WORDS), min_size=1, max_size=12, unique=True),
            st.integers(0, 2),
            st.booleans(),
        ),
        max_size=50,
    )
)
def test_launches_compete_for_kernels_by_name(steps):
    """Launch targets and kernel names of 1 to 12 words: subsets, supersets, by order."""
    clock: dict[str, int] = {}
    lines = []
    for lane, words, step, plain in steps:
        clock[lane] = clock.get(lane, 0) + step
        name = " ".join(words)
        if lane == "CPU":
            lines.append(f"{clock[lane]} us CPU " + ("cudaLaunchKernel" if plain else f"launch {name}"))
        else:
            lines.append(f"{clock[lane]} us {lane} {name} begin")
            clock[lane] += step
            lines.append(f"{clock[lane]} us {lane} {name} end")
    text = "\n".join(lines) + "\n"
    assert outcome(new, text) == outcome(reference, text)
