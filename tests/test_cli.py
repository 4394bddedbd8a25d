"""The ``gapscope`` command line: top-level help/version, one-line errors with exit
status 2 for bad input, exit status 1 (one line) for internal errors, never a traceback,
never a write to the input file. Subprocess tests run ``python -m gapscope``."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys

import pytest

from gapscope import __version__, cli
from gapscope.report import cmd as report_cmd

from .conftest import CORPUS, ROOT, require


def gapscope(*args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, NO_COLOR="1", COLUMNS="100")
    env.pop("GAPSCOPE_DEBUG", None)
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "gapscope", *args], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env
    )


def _assert_one_line_error(proc: subprocess.CompletedProcess, path: str, needle: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    line = lines[0]
    assert line.startswith(f"gapscope: error: {path}"), line
    assert needle in line, line
    return line


def test_version():
    """The version, then which decoder reads JSON traces (for bug reports)."""
    from gapscope.parsers.chrome import fastscan

    proc = gapscope("--version")
    assert proc.returncode == 0
    first, second = proc.stdout.splitlines()
    assert first == f"gapscope {__version__}"
    assert second.startswith("JSON traces read by: C scanner") == fastscan.available()
    off = gapscope("--version", env_extra={"GAPSCOPE_XSCAN": "0"})
    assert off.stdout.splitlines()[1] in (
        "JSON traces read by: msgspec only: GAPSCOPE_XSCAN=0",
        "JSON traces read by: msgspec only: the C scanner was not built (install with a C compiler)",
    )


def test_top_level_help_lists_subcommands():
    proc = gapscope("--help")
    assert proc.returncode == 0, proc.stderr
    for name in cli.SUBCOMMANDS:
        assert f"\n  {name} " in proc.stdout
    assert "--version" in proc.stdout


def test_missing_file(tmp_path):
    p = tmp_path / "nope.json"
    _assert_one_line_error(gapscope("report", str(p)), str(p), "No such file")


def test_directory(tmp_path):
    _assert_one_line_error(gapscope("report", str(tmp_path)), str(tmp_path), "directory")


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads any file")
def test_permission_denied(tmp_path):
    p = tmp_path / "secret.json"
    p.write_text("{}")
    p.chmod(0)
    try:
        _assert_one_line_error(gapscope("report", str(p)), str(p), "ermission denied")
    finally:
        p.chmod(0o600)


def _unchanged_after(p, *args):
    before = (p.read_bytes(), p.stat().st_mtime_ns)
    proc = gapscope("report", str(p), *args)
    assert (p.read_bytes(), p.stat().st_mtime_ns) == before
    return proc


def test_empty_file(tmp_path):
    p = tmp_path / "empty.json"
    p.write_bytes(b"")
    line = _assert_one_line_error(_unchanged_after(p), str(p), "empty")
    assert line.startswith(f"gapscope: error: {p}:1:1: ")


def test_binary_file(tmp_path):
    p = tmp_path / "trace.bin"
    p.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4)
    line = _assert_one_line_error(_unchanged_after(p), str(p), "binary")
    assert line.startswith(f"gapscope: error: {p}:1:1: ")


def test_gzip_of_binary(tmp_path):
    p = tmp_path / "x.json.gz"
    p.write_bytes(gzip.compress(b"\x00\x01\x02garbage" * 50))
    _assert_one_line_error(_unchanged_after(p), str(p), "binary")


def test_non_trace_json_is_refused():
    p = require(CORPUS / "tracelens" / "rocprof" / "908_results.json.gz")
    line = _assert_one_line_error(_unchanged_after(p), str(p), "")
    # path:line:col: message (hint)
    rest = line[len(f"gapscope: error: {p}") :]
    assert rest.startswith(":") and rest.split(":")[1].isdigit() and rest.split(":")[2].isdigit(), line
    assert "(" in line and line.endswith(")"), line


def test_json_that_is_not_a_trace(tmp_path):
    p = tmp_path / "config.json"
    p.write_text('{"model": "llama", "layers": 32}\n')
    _assert_one_line_error(_unchanged_after(p), str(p), "")


def test_bad_usage_is_one_line_exit_2(tmp_path):
    for args in (
        ["report"],
        ["report", "x.json", "--min-gap-us", "abc"],
        ["report", "x.json", "--top", "-1"],
        ["report", "x.json", "--json", "--markdown"],
    ):
        proc = gapscope(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("gapscope: error: "), (args, proc.stderr)
        assert "Traceback" not in proc.stderr


def test_error_line_escapes_control_characters():
    assert report_cmd.error_line("a\nb\x1b[31m") == "gapscope: error: a\\x0ab\\e[31m"


def test_internal_error_is_one_line_exit_1(monkeypatch, capsys):
    def boom(argv, stdout=None):
        raise ZeroDivisionError("division by zero\nsecond line")

    monkeypatch.setattr(report_cmd, "run", boom)
    monkeypatch.delenv("GAPSCOPE_DEBUG", raising=False)
    assert cli.main(["report", "whatever.json"]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert err.startswith("gapscope: internal error: ZeroDivisionError: division by zero\\x0asecond line")
    assert "report" in err and "Traceback" not in err


def test_out_of_memory_is_a_clear_error_not_a_bug_report(monkeypatch, capsys):
    """Under ``ulimit -v 500000`` a report died with "internal error: MemoryError ...
    this is a bug in gapscope": a memory limit is said as such, exit status 2."""

    def boom(argv, stdout=None):
        raise MemoryError()

    monkeypatch.setattr(report_cmd, "run", boom)
    monkeypatch.delenv("GAPSCOPE_DEBUG", raising=False)
    assert cli.main(["report", "whatever.json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gapscope: error: out of memory for this trace") and "bug" not in err
    assert len(err.splitlines()) == 1


def test_internal_error_reraised_for_developers(monkeypatch):
    def boom(argv, stdout=None):
        raise ZeroDivisionError("x")

    monkeypatch.setattr(report_cmd, "run", boom)
    monkeypatch.setenv("GAPSCOPE_DEBUG", "1")
    with pytest.raises(ZeroDivisionError):
        cli.main(["report", "whatever.json"])


def test_report_main_does_not_hide_programming_errors(monkeypatch):
    """Called directly (as tests do), report_cmd.main lets a bug propagate."""
    monkeypatch.setattr(report_cmd, "build_parser", lambda prog: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        report_cmd.main(["x.json"])


def test_report_help_lists_every_threshold():
    import dataclasses

    from gapscope.analysis.types import Params

    proc = gapscope("report", "--help")
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    for f in dataclasses.fields(Params):
        flag = "--" + (f.name[:-3] + "_us" if f.name.endswith("_ns") else f.name).replace("_", "-")
        assert flag in text, flag
    assert "[unit: µs; default 2 µs]" in text  # min_gap_ns = 2_000 ns
    assert "[unit: bytes; default 65536 bytes]" in text
    # the definition does not repeat the default the help prints beside it
    assert "(design: 2 µs)" not in text and "(30 µs)" not in text and "default 30 µs)" not in text
    assert "a gap this short or shorter can be a picket-fence gap [unit: µs; default 30 µs]" in text
    assert "docs/definitions.md" in text


def test_permission_denied_in_process(monkeypatch, capsys, tmp_path):
    """Root can read any file, so simulate EACCES at open() in the loader."""
    from gapscope.parsers import detect

    p = tmp_path / "secret.json"
    p.write_text("{}")

    def denied(path, mode="r", *a, **k):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(detect, "open", denied, raising=False)
    assert report_cmd.main([str(p)]) == 2
    err = capsys.readouterr().err
    assert err == f"gapscope: error: {p}: cannot read: Permission denied\n"


def test_broken_pipe_is_quiet():
    sample = require(ROOT / "sample_traces" / "decode_10_steps.txt")
    proc = subprocess.run(
        f"{sys.executable} -m gapscope report {sample} | head -n 1",
        shell=True,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, NO_COLOR="1"),
    )
    assert proc.stdout.startswith("Verdict: ")  # the report leads with it (issue 47)
    assert "Traceback" not in proc.stderr and "Error" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("fmt", [[], ["--json"], ["--markdown"]])
def test_successful_report_leaves_input_untouched(fmt):
    sample = require(ROOT / "sample_traces" / "decode_step.txt")
    proc = _unchanged_after(sample, *fmt)
    assert proc.returncode == 0 and proc.stderr == ""


def test_openblas_threads_are_one_except_for_the_capture(monkeypatch):
    """numpy's OpenBLAS threads spin ~0.1 s of CPU each after import for no BLAS call
    of ours: every command but ``capture`` (the user's workload) asks for one thread,
    unless the user set a number; the setting is there before the command runs."""
    seen = []
    monkeypatch.setattr(
        report_cmd, "run", lambda argv, stdout=None: seen.append(os.environ.get(cli.OPENBLAS_THREADS_VAR))
    )
    monkeypatch.delenv(cli.OPENBLAS_THREADS_VAR, raising=False)
    assert cli.main(["report", "whatever.json"]) == 0
    assert seen == ["1"]
    monkeypatch.setenv(cli.OPENBLAS_THREADS_VAR, "4")
    cli.main(["report", "whatever.json"])
    assert seen == ["1", "4"]
    monkeypatch.delenv(cli.OPENBLAS_THREADS_VAR)
    from gapscope.capture import cmd as capture_cli

    monkeypatch.setattr(capture_cli, "main", lambda argv: seen.append(os.environ.get(cli.OPENBLAS_THREADS_VAR)))
    cli.main(["capture", "--help"])
    assert seen == ["1", "4", None]


def _run_with(monkeypatch, rc: int, app_ran: bool, threads: list) -> list:
    """``cli.run`` with ``main`` returning ``rc`` after starting ``threads``; the calls
    of ``os._exit`` (the process is not ended: the stand-in raises)."""
    import threading

    exits: list = []

    class HardExit(Exception):
        pass

    def fake_exit(code):
        exits.append((code, [t.is_alive() for t in threads if not t.daemon]))
        raise HardExit

    def fake_main(argv=None):
        for t in threads:
            t.start()
        return rc

    monkeypatch.setattr(cli, "main", fake_main)
    monkeypatch.setattr(cli, "_app_ran", app_ran)
    monkeypatch.setattr(cli.os, "_exit", fake_exit)
    stop = threading.Event()
    threads[:] = [threading.Thread(target=f, args=(stop,), daemon=d) for f, d in threads]
    try:
        with pytest.raises((HardExit, SystemExit)) as got:
            cli.run()
    finally:
        stop.set()
        for t in threads:
            t.join(5)
    if got.type is SystemExit:
        exits.append(("SystemExit", got.value.code))
    return exits


def test_run_ends_a_viewer_with_a_worker_still_running_without_the_interpreters_shutdown(monkeypatch):
    """A daemon thread still running after a viewer (its diagnosis, which the shutdown
    would abort in numpy's C++ code): ``os._exit`` with main's status, after the
    non-daemon threads (the cache writer) are done; otherwise ``SystemExit``."""
    import time

    def worker(stop):  # a diagnosis the user quit
        stop.wait(10)

    def writer(stop):  # the cache's writer: must finish
        time.sleep(0.2)

    assert _run_with(monkeypatch, 3, True, [(worker, True), (writer, False)]) == [(3, [False])]
    # no daemon thread left: the ordinary exit
    assert _run_with(monkeypatch, 0, True, [(writer, False)]) == [("SystemExit", 0)]
    # not a viewer (a report, a rank set's pool): the ordinary exit, whatever runs
    assert _run_with(monkeypatch, 2, False, [(worker, True)]) == [("SystemExit", 2)]


def test_guarded_marks_the_viewer_commands(monkeypatch, tmp_path):
    monkeypatch.setattr(cli, "_app_ran", False)
    cli.main(["report", str(tmp_path / "missing.json")])
    assert cli._app_ran is False
    cli.main([str(tmp_path / "missing.json")])  # the viewer, refused before it opens
    assert cli._app_ran is True
