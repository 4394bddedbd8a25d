"""Fuzz of what a trace says about itself (issue 42 part B): the header fields of a
Chrome / Kineto trace and the bytes of an Nsight SQLite export. Whatever they hold,
``load`` returns a ``Trace`` or raises ``TraceFormatError``, and ``gapscope report``
(text, Markdown, JSON) exits 0 or 2: never an internal error. The families of the
attack cases B29-B31 (``tests/test_bugs_attack_headers.py``).

- header fields (``schemaVersion``, ``baseTimeNanoseconds``, ``displayTimeUnit``,
  ``traceName``, ``distributedInfo`` and its ``rank``/``world_size``,
  ``deviceProperties``/``computeProperties`` and their entries' fields) given huge
  integers, ``1e999``, ``NaN``/``Infinity``, negatives, strings, objects, arrays,
  null, booleans, written as JSON text (``json.dumps`` cannot write most of them);
  in a complete file, a truncated one (cut inside its last event) and a damaged one
  (junk between two events: the recovery path), before or after the events array,
  with the C scanner on and off. The events are valid, so the trace always loads,
  with its kernels, and a refused value of a scalar field is a warning naming it.
- SQLite bytes: a public export (copied, never changed in place) with bits flipped in
  its schema's SQL text (the B31 family: SQLite's error message then holds bytes that
  are not UTF-8), anywhere in its first pages or anywhere at all; and text columns set
  to bytes that are not UTF-8.

Hypothesis with bounded examples and no deadline, or seeded mutation: seconds.
"""

from __future__ import annotations

import io
import json
import random
import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gapscope.parsers import TraceFormatError, load
from gapscope.report.cmd import run
from tests.conftest import CORPUS, require

SETTINGS = dict(
    deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)

#: Values as JSON text; the first group is refused by every scalar field it is given to.
BAD_SCALARS = [
    "1" + "0" * 400,  # beyond int64 and msgspec; within float
    "-" + "9" * 30,
    "1" + "0" * 5000,  # beyond Python's int-to-str limit (4300 digits)
    "1e999",
    "-1e999",
    "NaN",
    "Infinity",
    "-Infinity",
    "{}",
    '{"a": [1, {"b": null}]}',
    "[1, 2]",
    "true",
]
OTHER_VALUES = ["null", "0", "-1", "1", "1.5", "2147483648", "9223372036854775807", '"x"', '""', '"ms"', '"\\u0000"']
_value = st.sampled_from(BAD_SCALARS + OTHER_VALUES)

#: Scalar header fields: the kind each must be, and the range of an integer.
SCALARS = {
    "schemaVersion": ("integer", 0, 2**31 - 1),
    "baseTimeNanoseconds": ("integer", 0, 2**63 - 1),
    "displayTimeUnit": ("string", None, None),
    "traceName": ("string", None, None),
}


def _refused(key: str, text: str) -> bool:
    """Whether ``key`` given the JSON ``text`` must be refused (a reference written
    from the Kineto field definitions, independent of ``chrome.header``)."""
    kind, lo, hi = SCALARS[key]
    try:
        v = json.loads(text)  # NaN, Infinity and 1e999 read as floats here
    except ValueError:  # more digits than Python converts
        return True
    if v is None:
        return False
    if kind == "string":
        return not isinstance(v, str)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return True
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf")) or not v.is_integer()):
        return True
    return not lo <= v <= hi


PROP_KEYS = ["id", "name", "totalGlobalMem", "computeMajor", "numSms", "warpSize", "gcnArchName", "nested"]

_KERNELS = [
    '{"ph":"X","cat":"kernel","name":"k1","pid":0,"tid":7,"ts":1,"dur":2}',
    '{"ph":"X","cat":"kernel","name":"k2","pid":0,"tid":7,"ts":10,"dur":2}',
    '{"ph":"X","cat":"kernel","name":"k3","pid":0,"tid":7,"ts":20,"dur":2}',
]


def _obj(pairs: list[tuple[str, str]]) -> str:
    return "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in pairs) + "}"


@st.composite
def _header(draw) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """(key, JSON text) pairs of a header, and the scalar fields given a bad value."""
    pairs: list[tuple[str, str]] = []
    bad: dict[str, str] = {}
    for key in draw(st.lists(st.sampled_from(sorted(SCALARS)), unique=True, max_size=4)):
        v = draw(_value)
        pairs.append((key, v))
        if _refused(key, v):
            bad[key] = v
    if draw(st.booleans()):
        di = [
            (k, draw(_value)) for k in draw(st.lists(st.sampled_from(["rank", "world_size", "backend"]), unique=True))
        ]
        pairs.append(("distributedInfo", draw(st.sampled_from([_obj(di), *BAD_SCALARS[:8]]))))
    if draw(st.booleans()):
        entries = []
        for _ in range(draw(st.integers(0, 3))):
            keys = draw(st.lists(st.sampled_from(PROP_KEYS), unique=True, max_size=5))
            entries.append(_obj([(k, draw(_value)) for k in keys]))
        entries += draw(st.lists(_value, max_size=1))  # an entry that is not an object
        key = draw(st.sampled_from(["deviceProperties", "computeProperties"]))
        pairs.append((key, draw(st.sampled_from(["[" + ", ".join(entries) + "]", *BAD_SCALARS[:8]]))))
    return pairs, bad


def _document(pairs, after: bool) -> str:
    head = ", ".join(f"{json.dumps(k)}: {v}" for k, v in pairs)
    events = '"traceEvents": [\n' + ",\n".join(_KERNELS) + "\n]"
    if not head:
        return "{" + events + "}\n"
    return "{" + (f"{events}, {head}" if after else f"{head}, {events}") + "}\n"


def _load_or_error(path):
    try:
        return load(path)
    except TraceFormatError as exc:
        assert str(exc).startswith(str(path)), str(exc)
        return None


def _report_all(path) -> None:
    for flags in ((), ("--markdown",), ("--json",)):
        out = io.StringIO()
        status = run([*flags, str(path)], stdout=out)
        assert status in (0, 2), (flags, status)
        if status == 0 and flags == ("--json",):
            json.loads(out.getvalue())


@settings(max_examples=120, **SETTINGS)
@given(
    header=_header(),
    after=st.booleans(),
    shape=st.sampled_from(["complete", "truncated", "damaged"]),
    xscan=st.booleans(),
)
def test_header_fields_are_untrusted(tmp_path_factory, monkeypatch, header, after, shape, xscan):
    pairs, bad = header
    text = _document(pairs, after and shape == "complete")  # a cut file has no header after its events
    if shape == "truncated":
        text = text[: text.index(_KERNELS[2]) + 30]  # inside the third kernel
    elif shape == "damaged":
        text = text.replace(_KERNELS[1] + ",", _KERNELS[1] + ", @@ junk @@,")
    path = tmp_path_factory.mktemp("hf") / "t.json"
    path.write_text(text, encoding="utf-8")
    monkeypatch.setenv("GAPSCOPE_XSCAN", "1" if xscan else "0")
    t = load(path)  # valid events: always a trace
    assert sorted(t.names) == (["k1", "k2"] if shape == "truncated" else ["k1", "k2", "k3"])
    fields = {w.field for w in t.warnings}
    for key in bad:
        assert key in fields, (key, bad[key], t.warnings)
    _report_all(path)


def test_header_fields_refused_on_every_path_name_the_field(tmp_path, monkeypatch):
    """The same hand-picked header on the typed decode, the scanner, the truncated and
    the recovery paths: the same fields refused, by name."""
    pairs = [
        ("schemaVersion", "1e999"),
        ("baseTimeNanoseconds", "1" + "0" * 400),
        ("traceName", "[1]"),
        ("distributedInfo", '{"rank": NaN, "world_size": "8"}'),
        ("deviceProperties", '[{"id": 0, "name": 7, "totalGlobalMem": -1e999, "numSms": 132}, 5]'),
    ]
    want = {
        "schemaVersion",
        "baseTimeNanoseconds",
        "traceName",
        "distributedInfo.rank",
        "distributedInfo.world_size",
        "deviceProperties[0].name",
        "deviceProperties[0].totalGlobalMem",
        "deviceProperties[1]",
    }
    text = _document(pairs, after=False)
    for shape, xscan in [("complete", "1"), ("complete", "0"), ("truncated", "1"), ("damaged", "0")]:
        body = text
        if shape == "truncated":
            body = text[: text.index(_KERNELS[2]) + 30]
        elif shape == "damaged":
            body = text.replace(_KERNELS[1] + ",", _KERNELS[1] + ", @@,")
        path = tmp_path / f"{shape}{xscan}.json"
        path.write_text(body)
        monkeypatch.setenv("GAPSCOPE_XSCAN", xscan)
        t = load(path)
        assert {w.field for w in t.warnings} >= want, (shape, xscan, t.warnings)
        s = t.source
        assert (s.schema_version, s.base_time_ns, s.trace_name, s.rank, s.world_size) == (None,) * 5
        assert s.device_properties == [{"id": 0, "numSms": 132}]


# ------------------------------------------------------------------------- SQLite


@pytest.fixture(scope="module")
def export_bytes() -> bytes:
    """A public Nsight export, read (never changed) from the corpus."""
    return require(CORPUS / "extrap" / "con_kernel.sqlite").read_bytes()


def _schema_text_offsets(data: bytes) -> list[int]:
    """Offsets of the bytes of the SQL text SQLite keeps for its schema
    (``CREATE TABLE ...`` up to its closing parenthesis)."""
    out: list[int] = []
    at = data.find(b"CREATE TABLE")
    while at >= 0:
        end = data.find(b")", at)
        out.extend(range(at + 13, end if end > 0 else at + 40))
        at = data.find(b"CREATE TABLE", at + 1)
    return out


def _check_loads_or_refuses(path) -> None:
    if _load_or_error(path) is not None:
        _report_all(path)


@pytest.mark.parametrize("seed", range(12))
def test_high_bit_in_the_schema_text_is_refused_or_loaded(tmp_path, export_bytes, seed):
    """The B31 family: a byte of the schema's SQL text given its high bit, so that it
    is not UTF-8 (SQLite names the bytes near its syntax error in its message)."""
    rng = random.Random(seed)
    data = bytearray(export_bytes)
    offsets = _schema_text_offsets(export_bytes)
    assert offsets, "no schema text found"
    for at in rng.sample(offsets, rng.choice([1, 1, 3])):
        data[at] |= 0x80
    path = tmp_path / "t.sqlite"
    path.write_bytes(bytes(data))
    _check_loads_or_refuses(path)


@pytest.mark.parametrize("seed", range(24))
def test_flipped_bits_in_an_export_are_refused_or_loaded(tmp_path, export_bytes, seed):
    """Bits flipped in the first pages (the SQLite header, the schema) or anywhere."""
    rng = random.Random(1000 + seed)
    data = bytearray(export_bytes)
    span = len(data) if seed % 2 else min(len(data), 16 * 4096)
    for _ in range(rng.choice([1, 2, 8])):
        data[rng.randrange(span)] ^= 1 << rng.randrange(8)
    path = tmp_path / "t.sqlite"
    path.write_bytes(bytes(data))
    _check_loads_or_refuses(path)


@pytest.mark.parametrize("table_column", [("StringIds", "value"), ("TARGET_INFO_GPU", "name")])
def test_text_columns_that_are_not_utf8_load(tmp_path, export_bytes, table_column):
    table, column = table_column
    path = tmp_path / "t.sqlite"
    path.write_bytes(export_bytes)
    con = sqlite3.connect(path)
    cols = [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]
    if column not in cols:
        con.close()
        pytest.skip(f"{table}.{column} not in this export")
    con.execute(f'UPDATE "{table}" SET "{column}" = CAST(X\'C328FFFE\' AS TEXT)')
    con.commit()
    con.close()
    t = load(path)  # names are decoded with errors replaced
    assert len(t) > 0
    _report_all(path)
