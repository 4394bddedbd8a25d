"""The attack cases of issue 42 part B, read in place from ``../shared/bugs/attack/``
(``tests/conftest.py``'s ``require``: skipped without the folder, failed under CI):
every header field untrusted (B29, B30) and a damaged Nsight export's schema (B31).
Each case runs through ``gapscope report`` in a child process, as a user would, and
its ``.expected.md`` is checked value by value; on 42d559e each was an internal error
(exit 1, "this is a bug"). Their families are fuzzed in ``tests/test_fuzz_untrusted.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import BUGS, ROOT, require

ATTACK = BUGS / "attack"


def _report(path, *flags: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "GAPSCOPE_DEBUG"}
    return subprocess.run(
        [sys.executable, "-m", "gapscope", "report", *flags, str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def _no_internal_error(cp: subprocess.CompletedProcess) -> None:
    assert "this is a bug" not in cp.stderr, cp.stderr
    assert "Traceback" not in cp.stderr, cp.stderr


def _json_report(name: str) -> dict:
    cp = _report(require(ATTACK / name), "--json")
    _no_internal_error(cp)
    assert cp.returncode == 0, cp.stderr
    return json.loads(cp.stdout)


def test_b29_a_device_property_beyond_float_range_is_a_warning():
    doc = _json_report("B29_bigint_device_properties.json")
    (dev,) = doc["devices"]
    assert dev["busy_ns"] == 2_000  # one kernel, dur 2 µs
    assert doc["event_count"] == 1
    (w,) = doc["warnings"]
    assert w["field"] == "deviceProperties[0].totalGlobalMem"
    assert "401 digits" in w["message"] and "ignored" in w["message"]
    # the value is left out; the rest of the entry is kept
    assert doc["source"]["device_properties"] == [{"id": 0}]


def test_b30_a_truncated_file_with_1e999_in_its_header_loads_its_whole_events():
    doc = _json_report("B30_truncated_header_1e999.json")
    (dev,) = doc["devices"]
    assert dev["busy_ns"] == 4_000  # the two complete kernels, 2 µs each
    assert doc["event_count"] == 2
    by_field = {w["field"]: w for w in doc["warnings"]}
    assert by_field[None]["line"] == 4 and "truncated" in by_field[None]["message"]
    assert "schemaVersion" in by_field and "not a finite number" in by_field["schemaVersion"]["message"]
    assert doc["source"]["schema_version"] is None


def test_b31_an_nsight_export_with_a_damaged_schema_is_refused_in_one_line():
    path = require(ATTACK / "B31_nsys_sqlite_master_bitflip.sqlite")
    cp = _report(path)
    _no_internal_error(cp)
    assert cp.returncode == 2, cp.stderr
    (line,) = cp.stderr.strip().splitlines()
    assert line.startswith(f"gapscope: error: {path}: ")
    assert "malformed database schema" in line


@pytest.mark.parametrize(
    "name",
    ["B29_bigint_device_properties.json", "B30_truncated_header_1e999.json", "B31_nsys_sqlite_master_bitflip.sqlite"],
)
@pytest.mark.parametrize("flags", [(), ("--markdown",), ("--json",)], ids=["text", "markdown", "json"])
def test_attack_cases_b29_to_b31_never_reach_an_internal_error(name, flags):
    cp = _report(require(ATTACK / name), *flags)
    _no_internal_error(cp)
    assert cp.returncode in (0, 2), cp.stderr
