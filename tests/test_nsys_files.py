"""Nsight files other than SQLite exports: ``.nsys-rep`` reports (exported with ``nsys``
into the cache when it is on PATH, else a clear error with the command), Nsight's
newline-delimited JSON export (refused with its name, line and the command to use), and
the routing in ``load``/``sniff`` (by content, not by name)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

from bench.gen_nsys import generate
from gapscope.parsers import Kind, TraceFormatError, load
from gapscope.parsers.detect import sniff
from gapscope.parsers.nsys import rep

from .conftest import ROOT


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    p = tmp_path_factory.mktemp("rep") / "made.sqlite"
    generate(p, 300, seed=1, launches_per_step=100)
    return p


@pytest.fixture
def report(tmp_path):
    """A binary ``.nsys-rep`` file (its content is opaque to gapscope)."""
    p = tmp_path / "in" / "run.nsys-rep"
    p.parent.mkdir()
    p.write_bytes(b"\x00NSYS-REP\x00" + bytes(range(256)) * 8)
    return p


def _fake_nsys(bin_dir, export, log, *, fail: bool = False):
    """An ``nsys`` that logs its arguments and writes ``export`` to ``--output``."""
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "nsys"
    script.write_text(f"""#!{sys.executable}
import shutil, sys
args = sys.argv[1:]
with open({str(log)!r}, "a") as fh:
    fh.write(" ".join(args) + "\\n")
if {fail!r}:
    print("some progress", flush=True)
    print("Failed to open the report: unsupported version", file=sys.stderr)
    sys.exit(3)
assert args[:3] == ["export", "--type", "sqlite"], args
out = args[args.index("--output") + 1]
shutil.copyfile({str(export)!r}, out)
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


@pytest.fixture
def env(tmp_path, monkeypatch):
    """An empty PATH entry for fake tools, and a cache dir of the test's own."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("GAPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    return bin_dir


def test_report_without_nsys_gives_the_export_command(report, env):
    for reader in (load, sniff):
        with pytest.raises(TraceFormatError) as e:
            reader(report)
        msg = str(e.value)
        assert "\n" not in msg and msg.startswith(f"{report}: an Nsight Systems report")
        assert "nsys is not on PATH" in msg
        assert f"nsys export --type sqlite --output run.sqlite {report}" in msg


def test_report_is_exported_once_into_the_cache(report, env, export, tmp_path):
    log = tmp_path / "calls.log"
    _fake_nsys(env, export, log)
    before = sorted(os.listdir(report.parent)), report.read_bytes()
    t = load(report)
    assert (t.kind == Kind.KERNEL).sum() == 300 and t.source.format == "nsys-sqlite"
    cached = rep.cached_export(str(report))
    assert t.source.path == str(cached) and cached.parent == tmp_path / "cache" / "nsys"
    assert cached.name.startswith("run-") and cached.suffix == ".sqlite"
    assert (sorted(os.listdir(report.parent)), report.read_bytes()) == before  # nothing beside the input
    assert not [p for p in cached.parent.iterdir() if "partial" in p.name]
    calls = log.read_text().splitlines()
    assert len(calls) == 1 and calls[0].endswith(str(report)) and "--force-overwrite true" in calls[0]
    load(report)
    assert sniff(report) == "nsys"
    assert len(log.read_text().splitlines()) == 1  # cached: nsys is not run again
    os.utime(report, ns=(report.stat().st_atime_ns, report.stat().st_mtime_ns + 10**9))
    load(report)  # a changed report (mtime) is exported again
    assert len(log.read_text().splitlines()) == 2


def test_failed_export_gives_nsys_last_line(report, env, export, tmp_path):
    _fake_nsys(env, export, tmp_path / "calls.log", fail=True)
    with pytest.raises(TraceFormatError) as e:
        load(report)
    msg = str(e.value)
    assert "nsys export failed (exit status 3): Failed to open the report: unsupported version" in msg
    assert "run it yourself to see why: nsys export --type sqlite" in msg
    assert not list((tmp_path / "cache" / "nsys").iterdir())


def test_report_cli_without_nsys_is_one_line(report, tmp_path):
    env = dict(os.environ, PATH=str(tmp_path), GAPSCOPE_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run(
        [sys.executable, "-m", "gapscope", "report", str(report)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "nsys export --type sqlite" in proc.stderr


def test_report_name_with_text_content_is_read_as_text(tmp_path):
    """Only a binary file is taken for a report: a renamed Chrome trace still loads."""
    p = tmp_path / "renamed.nsys-rep"
    p.write_text(
        json.dumps(
            {
                "traceEvents": [
                    {
                        "ph": "X",
                        "cat": "kernel",
                        "name": "k",
                        "pid": 0,
                        "tid": 7,
                        "ts": 1,
                        "dur": 2,
                        "args": {"device": 0, "stream": 7},
                    }
                ]
            }
        )
    )
    assert load(p).source.format != "nsys-sqlite"


def test_sqlite_export_is_found_by_content_whatever_its_name(export, tmp_path):
    p = tmp_path / "trace.json"
    p.write_bytes(export.read_bytes())
    assert load(p).source.format == "nsys-sqlite"
    assert sniff(p) == "nsys"


# ------------------------------------------------------------------ JSON export
_RECORDS = [
    {
        "Type": 48,
        "TraceProcessEvent": {
            "startNs": "140547168",
            "endNs": "140562944",
            "correlationId": 745,
            "eventClass": 1,
            "name": "330",
            "globalTid": "292568055813839",
        },
    },
    {
        "Type": 79,
        "CudaEvent": {
            "startNs": "140564259",
            "endNs": "140619331",
            "correlationId": 745,
            "deviceId": 1,
            "streamId": "7",
            "kernel": {"demangledName": "316"},
        },
    },
    {"type": "String", "id": "316", "value": "nvjet_tst_128x256"},
]


@pytest.mark.parametrize("lead", ["", "\n\n", "  "])
def test_nsight_json_export_is_refused_with_its_name(tmp_path, lead):
    p = tmp_path / "report.json"
    p.write_text(lead + "\n".join(json.dumps(r) for r in _RECORDS) + "\n")
    line = lead.count("\n") + 2
    for reader in (load, sniff):
        with pytest.raises(TraceFormatError) as e:
            reader(p)
        assert e.value.line == line and e.value.column == 1
        assert "an Nsight Systems JSON export" in e.value.message
        assert "nsys export --type sqlite" in (e.value.hint or "")


def test_string_records_alone_are_the_json_export(tmp_path):
    p = tmp_path / "strings.json"
    p.write_text(
        '{"type":"String","id":"3720","value":"Profiling has started."}\n'
        '{"type":"ThreadName","globalTid":"72057844756653436","nameId":"14","priority":"10"}\n'
    )
    with pytest.raises(TraceFormatError, match="Nsight Systems JSON export"):
        load(p)


def test_one_line_chrome_trace_is_not_taken_for_the_json_export(tmp_path):
    p = tmp_path / "one.json"
    p.write_text(
        json.dumps({"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": 1}]}) + "\n" + "{}\n"
    )
    try:
        load(p)
    except TraceFormatError as exc:
        assert "Nsight" not in str(exc)
