"""The one settings object (``gapscope.settings``): every ``GAPSCOPE_*`` variable read in
one place, validated, and documented in one table (``docs/settings.md``)."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from gapscope import cli
from gapscope.settings import Settings, SettingsError, parse_size, read_settings, variable_of

from .conftest import ROOT

#: The installed package's source folders (tests/ and bench/ read their own variables).
SOURCES = ("gapscope", "parsers", "analysis", "tui", "capture")


def _variables() -> set[str]:
    return {variable_of(f.name) for f in fields(Settings)}


def _table_rows(section: str) -> list[list[str]]:
    """The rows of the first Markdown table after heading text ``section`` (or from the
    top when empty), as lists of cells, header and rule rows left out."""
    text = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    if section:
        text = text[text.index(section) :]
    rows, seen = [], False
    for line in text.splitlines():
        if line.startswith("|"):
            seen = True
            cells = [c.strip() for c in line.strip("|").split("|")]
            if cells[0] != "variable" and not set(cells[0]) <= set("- "):
                rows.append(cells)
        elif seen:
            break
    return rows


def test_the_table_lists_every_setting_and_nothing_else():
    rows = _table_rows("")
    names = [re.fullmatch(r"`(GAPSCOPE_[A-Z_]+)`", r[0]).group(1) for r in rows]
    assert len(names) == len(set(names)) == 13
    assert set(names) == _variables()
    assert all(len(r) == 4 and all(r) for r in rows)  # meaning, default, unit all given


def test_every_variable_the_package_names_is_a_setting():
    """No ``GAPSCOPE_*`` name in the package that is not a field (a typo, or a variable
    read behind the settings' back); the docstrings and messages name most of them."""
    named = set()
    for folder in SOURCES:
        for path in (ROOT / folder).rglob("*.py"):
            named |= set(re.findall(r"GAPSCOPE_[A-Z_]*[A-Z]", path.read_text(encoding="utf-8")))
    assert named <= _variables()
    assert len(named) >= 10


#: A read of the environment (a write, ``os.environ[NAME] = ...``, is not one), and its key.
_READ = re.compile(r"os\.(?:environ\.get|getenv)\(\s*([^,)]+)|os\.environ\[([^\]]+)\](?!\s*=[^=])")


def _reads_of_ours(text: str) -> list[str]:
    """The reads of a ``GAPSCOPE_*`` variable in ``text``: by its name, or by a constant
    holding it (``LIMIT_ENV``)."""
    found = []
    for m in _READ.finditer(text):
        key = m.group(1) or m.group(2)
        if "GAPSCOPE" in key or re.search(r"_ENV\b", key):
            found.append(m.group(0))
    return found


def test_only_the_settings_module_reads_the_environment_for_them():
    readers = []
    for folder in SOURCES:
        for path in (ROOT / folder).rglob("*.py"):
            if path != ROOT / "gapscope" / "settings.py":
                readers += [f"{path.relative_to(ROOT)}: {r}" for r in _reads_of_ours(path.read_text(encoding="utf-8"))]
    assert readers == []


def test_the_reader_check_sees_a_read():
    # the check above can fail: each form of a read is seen, a write is not
    assert len(_reads_of_ours('os.environ.get("GAPSCOPE_XSCAN", "1")')) == 1
    assert len(_reads_of_ours("os.getenv(LIMIT_ENV)")) == 1
    assert len(_reads_of_ours('if os.environ["GAPSCOPE_DEBUG"] == "1": pass')) == 1
    assert _reads_of_ours('os.environ["GAPSCOPE_NO_CACHE"] = "1"') == []
    assert _reads_of_ours('os.environ.get("HOME")') == []


def test_the_developers_table_lists_what_tests_and_bench_read():
    named = set()
    for folder in ("tests", "bench"):
        for path in (ROOT / folder).rglob("*.py"):
            named |= set(re.findall(r"GAPSCOPE_[A-Z_]*[A-Z]", path.read_text(encoding="utf-8")))
    listed = set()
    for row in _table_rows("## For tests and benchmarks"):
        listed |= set(re.findall(r"`(GAPSCOPE_[A-Z_]+)`", row[0]))
    assert named - _variables() == listed


def test_unset_or_empty_is_the_default():
    assert read_settings({}) == Settings()
    blank = {v: "  " for v in _variables()}
    assert read_settings(blank) == Settings()
    d = Settings()
    assert (d.cache_max_bytes, d.cache_min_bytes) == (2 * 1024**3, 8 * 1024**2)
    assert (d.xscan, d.pfscan, d.no_cache, d.no_preview, d.debug) == (True, True, False, False, False)
    assert (d.max_trace_bytes, d.load_processes, d.cache_dir, d.state_dir, d.learner, d.dask_scheduler) == (None,) * 6


def test_every_variable_reaches_its_field():
    env = {
        "GAPSCOPE_CACHE_DIR": "/tmp/c",
        "GAPSCOPE_NO_CACHE": "yes",
        "GAPSCOPE_CACHE_MAX_BYTES": "500M",
        "GAPSCOPE_CACHE_MIN_BYTES": "1.5K",
        "GAPSCOPE_MAX_TRACE_BYTES": "8GiB",
        "GAPSCOPE_LOAD_PROCESSES": " 3 ",
        "GAPSCOPE_XSCAN": "0",
        "GAPSCOPE_PFSCAN": "Off",
        "GAPSCOPE_NO_PREVIEW": "1",
        "GAPSCOPE_STATE_DIR": "/tmp/s",
        "GAPSCOPE_LEARNER": "ada",
        "GAPSCOPE_DASK_SCHEDULER": "tcp://h:8786",
        "GAPSCOPE_DEBUG": "TRUE",
        "OTHER": "x",
    }
    assert set(env) - {"OTHER"} == _variables()
    assert read_settings(env) == Settings(
        cache_dir=Path("/tmp/c"),
        no_cache=True,
        cache_max_bytes=500 * 1024 * 1024,
        cache_min_bytes=1536,
        max_trace_bytes=8 * 1024**3,
        load_processes=3,
        xscan=False,
        pfscan=False,
        no_preview=True,
        state_dir=Path("/tmp/s"),
        learner="ada",
        dask_scheduler="tcp://h:8786",
        debug=True,
    )


@pytest.mark.parametrize(
    "variable, value, expected",
    [
        ("GAPSCOPE_XSCAN", "maybe", "is not a switch (1/true/yes/on or 0/false/no/off)"),
        ("GAPSCOPE_DEBUG", "2", "is not a switch"),
        ("GAPSCOPE_CACHE_MAX_BYTES", "lots", "is not a size (a number of bytes, or with K/M/G/T)"),
        ("GAPSCOPE_MAX_TRACE_BYTES", "-1G", "is not a size"),
        ("GAPSCOPE_LOAD_PROCESSES", "0", "is not a count (a whole number, 1 or more)"),
        ("GAPSCOPE_LOAD_PROCESSES", "two", "is not a count"),
    ],
)
def test_a_bad_value_names_its_variable(variable, value, expected):
    with pytest.raises(SettingsError) as err:
        read_settings({variable: value})
    assert str(err.value).startswith(f"{variable}={value!r} {expected}")
    assert (err.value.variable, err.value.value) == (variable, value)
    assert isinstance(err.value, ValueError)


def test_read_when_called(monkeypatch):
    monkeypatch.setenv("GAPSCOPE_LEARNER", "ada")
    assert read_settings().learner == "ada"
    monkeypatch.setenv("GAPSCOPE_LEARNER", "bob")
    assert read_settings().learner == "bob"
    monkeypatch.delenv("GAPSCOPE_LEARNER")
    assert read_settings().learner is None


def test_settings_are_frozen():
    with pytest.raises(AttributeError):
        Settings().debug = True  # type: ignore[misc]


def test_parse_size_by_hand():
    assert parse_size("123") == 123
    assert parse_size("64M") == 64 << 20
    assert parse_size("1.5g") == 3 << 29
    assert parse_size(" 2 KiB ") == 2048
    assert parse_size("2 kb") == 2048
    assert parse_size("") is None
    assert parse_size("1e3") is None
    assert parse_size("5P") is None


def test_the_command_line_refuses_a_bad_value_in_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("GAPSCOPE_LOAD_PROCESSES", "many")
    assert cli.main(["report", str(tmp_path / "none.json")]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err == (
        "gapscope: error: GAPSCOPE_LOAD_PROCESSES='many' is not a count (a whole number, 1 or more) "
        "(docs/settings.md lists what each takes)\n"
    )


def test_a_bad_limit_names_the_trace_and_the_variable(monkeypatch, tmp_path):
    from gapscope.parsers import TraceFormatError, load

    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": []}', encoding="utf-8")
    monkeypatch.setenv("GAPSCOPE_MAX_TRACE_BYTES", "big")
    with pytest.raises(TraceFormatError, match=r"t\.json: GAPSCOPE_MAX_TRACE_BYTES='big' is not a size"):
        load(str(path))


@pytest.mark.parametrize(
    "variable, value, expected",
    [
        # str.isdigit() holds for superscripts, which int() refuses: a ValueError leaked
        ("GAPSCOPE_LOAD_PROCESSES", "\u00b2", "is not a count"),
        # other scripts' digits are not what docs/settings.md means by a whole number
        ("GAPSCOPE_LOAD_PROCESSES", "\u0661\u0662", "is not a count"),
        ("GAPSCOPE_LOAD_PROCESSES", "\uff13", "is not a count"),
        # 400 nines made float() infinite and int() raised OverflowError
        ("GAPSCOPE_CACHE_MAX_BYTES", "9" * 400, "is not a size"),
        ("GAPSCOPE_MAX_TRACE_BYTES", "99999999999T", "is not a size"),
        ("GAPSCOPE_CACHE_MIN_BYTES", "\u0661\u0662M", "is not a size"),
    ],
)
def test_odd_numbers_are_refused_by_name(variable, value, expected):
    with pytest.raises(SettingsError) as err:
        read_settings({variable: value})
    assert str(err.value).startswith(f"{variable}={value!r} {expected}")


def test_parse_size_is_exact_and_bounded():
    """Sizes are decimal fractions of a power of 1024, exact (no float rounding), and at
    most 2**63 - 1 bytes (what a file offset holds); beyond is not a size."""
    assert parse_size("1.1T") == (11 << 40) // 10
    assert parse_size("8388607T") == 8388607 << 40
    assert parse_size("8388608T") is None  # 2**63
    assert parse_size(str(2**63 - 1)) == 2**63 - 1
    assert parse_size("9" * 400) is None


def test_the_command_line_refuses_an_overflowing_size_in_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("GAPSCOPE_CACHE_MAX_BYTES", "9" * 400)
    assert cli.main(["report", str(tmp_path / "none.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gapscope: error: GAPSCOPE_CACHE_MAX_BYTES=") and err.count("\n") == 1
