"""Fuzz tests (issue 14) of every reader and the report stages: whatever hypothesis
builds, ``load`` returns a Trace or raises ``TraceFormatError``, and ``gapscope
report`` (text, Markdown, JSON) exits 0 or 2 with no traceback and no internal error.
Bounded examples, no deadline; the inputs are small so the module runs in seconds."""

from __future__ import annotations

import io
import json
import math
import random
import shutil
import sqlite3

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gapscope.parsers import TraceFormatError, load
from gapscope.report.cmd import run

SETTINGS = dict(
    deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)

_num = st.one_of(
    st.integers(-(2**63), 2**63),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, 1e15, 1.8e308, -1, 2**43 + 0.5]),
)
_text = st.text(st.characters(codec="utf-8"), max_size=12) | st.sampled_from(
    ["", "\n", "\u2028", "\x1b[31m", "[bold]x[/]", "aten::mm", "cudaLaunchKernel", "\ud800"[:0]]
)
_value = st.one_of(
    _num, _text, st.none(), st.booleans(), st.lists(_num, max_size=2), st.dictionaries(_text, _num, max_size=2)
)
_event = st.fixed_dictionaries(
    {"ph": st.sampled_from(["X", "B", "E", "i", "M", "s", "f", "C", "b", "e", "?"]), "ts": _num},
    optional={
        "dur": _num,
        "pid": _value,
        "tid": _value,
        "name": _text,
        "cat": st.sampled_from(["kernel", "cpu_op", "cuda_runtime", "gpu_memcpy", "user_annotation", "x"]),
        "args": st.one_of(
            st.dictionaries(
                st.sampled_from(["stream", "device", "correlation", "External id", "name", "bytes"]), _value, max_size=3
            ),
            _value,
        ),
        "id": _value,
        "bp": _text,
    },
)


def _load_or_error(path):
    try:
        return load(path)
    except TraceFormatError as exc:
        assert str(exc).startswith(str(path)), str(exc)
        return None


def _report_all(path):
    for flags in ((), ("--markdown",), ("--json",)):
        out = io.StringIO()
        status = run([*flags, str(path)], stdout=out)
        assert status in (0, 2), (flags, status)
        if status == 0 and flags == ("--json",):
            json.loads(out.getvalue())


def _dumps(doc) -> str:
    return json.dumps(doc, allow_nan=True, ensure_ascii=False)


@settings(max_examples=60, **SETTINGS)
@given(
    events=st.lists(_event, max_size=12),
    wrap=st.booleans(),
    header=st.dictionaries(
        st.sampled_from(
            [
                "deviceProperties",
                "schemaVersion",
                "displayTimeUnit",
                "baseTimeNanoseconds",
                "distributedInfo",
                "traceName",
            ]
        ),
        _value,
        max_size=3,
    ),
)
def test_chrome_reader_and_report(tmp_path_factory, events, wrap, header):
    path = tmp_path_factory.mktemp("fz") / "t.json"
    doc = {**header, "traceEvents": events} if wrap else events
    path.write_text(_dumps(doc), encoding="utf-8", errors="surrogatepass")
    if _load_or_error(path) is not None:
        _report_all(path)


@settings(max_examples=60, **SETTINGS)
@given(
    events=st.lists(_event, min_size=1, max_size=8),
    cut=st.floats(0, 1),
    junk=st.binary(max_size=8),
    seed=st.integers(0, 2**32 - 1),
)
def test_chrome_reader_on_damaged_text(tmp_path_factory, events, cut, junk, seed):
    text = _dumps({"traceEvents": events}).encode("utf-8", "surrogatepass")
    rng = random.Random(seed)
    at = int(len(text) * cut)
    kind = rng.randrange(3)
    data = text[:at] if kind == 0 else text[:at] + junk + text[at:] if kind == 1 else text + junk
    path = tmp_path_factory.mktemp("fz") / "t.json"
    path.write_bytes(data)
    if _load_or_error(path) is not None:
        _report_all(path)


_art_cell = st.sampled_from(
    [
        "[",
        "]",
        "=",
        " ",
        "k",
        "4 ms",
        "[H2D 6 ms]",
        "[kernel 4 ms]",
        "[== x 2 ms ==]",
        "junk",
        "13337 s",
        "^",
        "|",
        "µs",
        "0.5",
    ]
)
_event_line = st.builds(
    lambda t, lane, kind, name, d: f"{t} ms  {lane}  {kind} {name} {d}",
    st.sampled_from(["0.000", "1.5", "-1", "1e308", "x", "2.000"]),
    st.sampled_from(["GPU", "CPU", "GPU1", "H2D"]),
    st.sampled_from(["kernel", "launch", "begin", "end", "sync", ""]),
    st.sampled_from(["matmul", "relu", "a b", ""]),
    st.sampled_from(["1.0 ms", "2 us", "", "0"]),
)


@settings(max_examples=80, **SETTINGS)
@given(
    shape=st.sampled_from(["art", "events"]),
    rows=st.lists(st.lists(_art_cell, max_size=8), max_size=4),
    lines=st.lists(_event_line, max_size=6),
    blank=st.integers(0, 5000),
    comment=st.booleans(),
)
def test_ascii_reader_and_report(tmp_path_factory, shape, rows, lines, blank, comment):
    if shape == "art":
        body = "\n".join(f"{lab}:  {''.join(cells)}" for lab, cells in zip(["GPU", "CPU", "GPU1", "H2D"], rows))
    else:
        body = "\n".join(lines)
    text = ("# a timeline\n" if comment else "") + "\n" * blank + body + "\n"
    path = tmp_path_factory.mktemp("fz") / "t.txt"
    path.write_text(text, encoding="utf-8")
    if _load_or_error(path) is not None:
        _report_all(path)


@pytest.fixture(scope="module")
def nsys_export(tmp_path_factory):
    from bench.gen_nsys import generate

    path = tmp_path_factory.mktemp("nsys") / "base.sqlite"
    generate(path, 200, seed=5, launches_per_step=50)
    return path


def _tables(con) -> dict[str, list[str]]:
    names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    return {n: [r[1] for r in con.execute(f'PRAGMA table_info("{n}")')] for n in names}


@settings(max_examples=30, **SETTINGS)
@given(seed=st.integers(0, 2**32 - 1), edits=st.integers(1, 6), drop=st.booleans())
@example(seed=10011043, edits=2, drop=False)  # a device id of 2**62: lane_devices overflowed int32
def test_nsight_reader_on_mutated_exports(tmp_path_factory, nsys_export, seed, edits, drop):
    rng = random.Random(seed)
    path = tmp_path_factory.mktemp("fz") / "t.sqlite"
    shutil.copy(nsys_export, path)
    con = sqlite3.connect(path)
    tables = {t: c for t, c in _tables(con).items() if c}
    for _ in range(edits):
        table = rng.choice(sorted(tables))
        col = rng.choice(tables[table])
        value = rng.choice([None, -1, 0, 2**62, -(2**62), 1e308, float("nan"), "x", b"\x00", 3])
        if isinstance(value, float) and math.isnan(value):
            value = None  # SQLite stores NaN as NULL
        try:
            con.execute(f'UPDATE "{table}" SET "{col}" = ? WHERE rowid % ? = 0', (value, rng.randint(1, 5)))
        except sqlite3.IntegrityError:  # a NOT NULL or UNIQUE column: the schema refuses that edit
            pass
    if drop:
        con.execute(f'DROP TABLE "{rng.choice(sorted(tables))}"')
    con.commit()
    con.close()
    if _load_or_error(path) is not None:
        _report_all(path)
