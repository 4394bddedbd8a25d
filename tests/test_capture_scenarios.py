"""capture: every scenario, the script runner and ``gapscope capture`` on CPU (tiny sizes)."""

from __future__ import annotations

import importlib.util
import itertools
import os
import textwrap
import types

import pytest

from tests.conftest import default_sigint
from tests.test_capture import check_trace, parser_available, range_counts

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="torch is not installed (pip install 'gapscope[capture]')"
)


def _steps(counts) -> set[str]:
    return {k for k in counts if k.startswith("ProfilerStep#")}


# Expected ranges per scenario at tiny size on CPU, counted by hand from scenarios.py:
# schedule wait=0, warmup=1 (step 0), then `active` recorded steps 1..active.
EXPECTED = {
    # 4 tokens: step 1 = tokenize+prefill+first sample, steps 2-5 = one decode_step each, step 6 = detokenize
    "decode": ({"tokenize": 1, "prefill": 1, "decode_step": 4, "sample": 5, "log_token": 4, "detokenize": 1}, 6),
    "decode-graph": ({"tokenize": 1, "prefill": 1, "decode_step": 4, "sample": 1, "detokenize": 1}, 6),
    "decode-eager": ({"tokenize": 1, "prefill": 1, "decode_step": 4, "sample": 1, "detokenize": 1}, 6),
    "picket-fence": ({"decode_step": 2}, 2),
    "host-island": ({"prefill": 2, "tokenize": 2, "json": 2, "decode_step": 2}, 2),
    "copy-on-path": ({"to_device": 4, "model": 4, "to_host": 4, "postprocess": 2}, 2),
    "sync-cliff": ({"matmul": 4, "attn": 4, "check": 4}, 2),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_scenario_writes_a_trace_with_its_ranges(tmp_path, name, monkeypatch):
    import gapscope.capture.profile as profile
    from gapscope.capture.scenarios import SCENARIOS, run_scenario

    # the step clock read through a counter that moves 0.25 s a reading: each recorded
    # step's wall time is then 250 ms exactly when it is the clock between two step()
    # calls (a step reads it once, at its end, after the reading that began it)
    ticks = itertools.count(0.0, 0.25)
    monkeypatch.setattr(profile, "time", types.SimpleNamespace(perf_counter=lambda: next(ticks)))
    assert set(SCENARIOS) == set(EXPECTED)
    msgs = []
    prof = run_scenario(name, str(tmp_path), tiny=True, cuda=False, log=msgs.append)
    assert len(prof.traces) == 1 and prof.traces[0].endswith(f"_{name}.pt.trace.json.gz")
    ranges, active = EXPECTED[name]
    doc = check_trace(prof.traces[0], set(ranges))
    counts = range_counts(doc)
    assert {k: counts[k] for k in ranges} == ranges
    assert _steps(counts) == {f"ProfilerStep#{i}" for i in range(1, active + 1)}
    meta = doc["gapscope_capture"]
    assert meta["scenario"] == name and meta["cuda"] is False and meta["tiny"] is True
    assert any("CPU activity only" in m for m in msgs)
    # the wall time of each recorded step, measured in the capturing process, one per
    # ProfilerStep range of the trace (counted, not compared with torch's clock: two
    # clocks on a loaded machine differ by whatever the scheduler did between them)
    assert doc["gapscope_steps"]["wall_ms"] == [250.0] * active
    spans = [e for e in doc["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")]
    assert len(spans) == active
    ops = range_counts(doc, "cpu_op")
    if name == "picket-fence":  # 4 groups of mul, add, relu, tanh per step, 2 recorded steps
        assert ops["aten::relu"] == 8 and ops["aten::tanh"] == 8
    if name in ("decode", "sync-cliff"):  # the per-token / per-layer host reads
        # decode: first token + 4 decode steps; sync-cliff: 2 steps x 2 layers x 4 reads
        assert ops["aten::item"] == (5 if name == "decode" else 16)
    if name == "decode-graph":
        assert ops["aten::item"] == 0 and any("CUDA graphs need a GPU" in m for m in msgs)
    if name == "decode-eager":
        assert ops["aten::item"] == 0 and not any("CUDA graphs" in m for m in msgs)


def test_scenarios_are_deterministic(tmp_path):
    from gapscope.capture.scenarios import run_scenario

    a = run_scenario("decode", str(tmp_path / "a"), tiny=True, cuda=False, log=lambda m: None)
    b = run_scenario("decode", str(tmp_path / "b"), tiny=True, cuda=False, log=lambda m: None)
    ca = range_counts(check_trace(a.traces[0]), "cpu_op")
    cb = range_counts(check_trace(b.traces[0]), "cpu_op")
    assert ca == cb


# -- the script runner -----------------------------------------------------------------------


def _script(tmp_path, body: str) -> str:
    path = tmp_path / "user_script.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


STEPPED = """
    import gapscope.capture
    import sys, torch
    n = int(sys.argv[1])
    x = torch.ones(4, 4)
    for i in range(n):
        with torch.profiler.record_function("train_step"):
            x = torch.tanh(x @ x)
        gapscope.capture.step()
    if len(sys.argv) > 2:
        sys.exit(int(sys.argv[2]))
"""


def test_runner_profiles_the_marked_steps_and_returns_the_exit_status(tmp_path):
    from gapscope.capture import Schedule
    from gapscope.capture.runner import ScriptRunner

    script = _script(tmp_path, STEPPED)
    r = ScriptRunner(str(tmp_path / "out"), schedule=Schedule(wait=1, warmup=1, active=3), log=lambda m: None)
    status = r.run(["python", script, "8", "3"])
    assert status == 3 and r.mode == "steps" and r.steps == 8
    assert len(r.traces) == 1 and r.traces[0].endswith("_user_script.pt.trace.json.gz")
    counts = range_counts(check_trace(r.traces[0], {"train_step"}))
    # the schedule counts from the first gapscope.capture.step(): skip 1, warm 1, record 3 steps
    assert counts["train_step"] == 3 and len(_steps(counts)) == 3


def test_runner_too_few_steps_writes_the_setup_recording(tmp_path):
    from gapscope.capture import Schedule
    from gapscope.capture.runner import ScriptRunner

    script = _script(tmp_path, STEPPED)
    msgs = []
    r = ScriptRunner(str(tmp_path / "out"), schedule=Schedule(wait=1, warmup=1, active=3), log=msgs.append)
    assert r.run(["python", script, "2"]) == 0
    assert len(r.traces) == 1
    check_trace(r.traces[0], {"train_step"})  # the first step ran before the first gapscope.capture.step()
    assert any("set-up recording" in m and r.traces[0] in m for m in msgs)


@pytest.mark.parametrize(
    "ending, status",
    [
        ("raise ValueError('bad input')", 1),
        ("raise KeyboardInterrupt", 130),
        ("import sys; sys.exit('fatal: message')", 1),
        ("pass", 0),
    ],
)
def test_runner_time_window_keeps_the_recording_whatever_ends_the_script(tmp_path, capsys, ending, status):
    from gapscope.capture.runner import ScriptRunner

    script = _script(
        tmp_path,
        f"""
        import torch
        with torch.profiler.record_function("unmarked_work"):
            torch.ones(3).add(1)
        {ending}
    """,
    )
    msgs = []
    r = ScriptRunner(str(tmp_path / "out"), seconds=0, log=msgs.append)
    assert r.run(["python3", script]) == status
    assert r.mode == "window" and len(r.traces) == 1
    check_trace(r.traces[0], {"unmarked_work"})
    err = capsys.readouterr().err
    if status == 1 and "ValueError" in ending:
        assert "ValueError: bad input" in err and "runpy" not in err and "runner.py" not in err
    if "sys.exit" in ending:
        assert "fatal: message" in err


def test_runner_time_window_ends_on_the_timer(tmp_path):
    from gapscope.capture.runner import ScriptRunner

    script = _script(
        tmp_path,
        """
        import time, torch
        for i in range(40):
            with torch.profiler.record_function(f"tick{i}"):
                torch.ones(2).add(1)
            time.sleep(0.01)
    """,
    )
    msgs = []
    r = ScriptRunner(str(tmp_path / "out"), seconds=0.1, log=msgs.append)
    assert r.run(["python", script]) == 0
    counts = range_counts(check_trace(r.traces[0], {"tick0"}))
    assert "tick39" not in counts  # the window closed before the script's last ticks
    assert any("time window of 0.1 s ended" in m for m in msgs)


def test_parse_command():
    from gapscope.capture.runner import CommandError, parse_command

    assert parse_command(["python", "-u", "a.py", "x"]) == ("path", "a.py", ["a.py", "x"])
    assert parse_command(["python3.11", "-X", "dev", "-m", "pkg.mod", "--flag"]) == (
        "module",
        "pkg.mod",
        ["pkg.mod", "--flag"],
    )
    assert parse_command(["b.py"]) == ("path", "b.py", ["b.py"])
    for bad in ([], ["torchrun", "a.py"], ["python", "-c", "print(1)"], ["python"]):
        with pytest.raises(CommandError):
            parse_command(bad)


# -- gapscope capture ------------------------------------------------------------------------------


def test_cli_scenario_prints_the_path_on_stdout(tmp_path, capsys):
    from gapscope.capture.cmd import main

    assert main(["--scenario", "picket-fence", "--tiny", "--out", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    paths = out.split()
    assert len(paths) == 1 and os.path.dirname(paths[0]) == str(tmp_path)
    check_trace(paths[0], {"decode_step"})
    assert f"trace: {paths[0]}" in err and "summary:" in err and f"gapscope report {paths[0]}" in err
    if parser_available():
        assert "events" in err.split("summary:")[1].splitlines()[0]


def test_cli_runs_a_script_after_double_dash(tmp_path, capsys):
    from gapscope.capture.cmd import main

    script = _script(tmp_path, STEPPED)
    status = main(
        [
            "--out",
            str(tmp_path / "o"),
            "--wait",
            "0",
            "--warmup",
            "1",
            "--active",
            "2",
            "--no-summary",
            "--",
            "python",
            script,
            "5",
            "4",
        ]
    )
    assert status == 4
    err = capsys.readouterr().err
    assert "the script marked 5 steps" in err
    traces = os.listdir(tmp_path / "o")
    assert len(traces) == 1 and f"trace: {tmp_path / 'o' / traces[0]}" in err
    assert range_counts(check_trace(tmp_path / "o" / traces[0]))["train_step"] == 2


def test_cli_usage_errors_exit_2(tmp_path, capsys):
    from gapscope.capture.cmd import main

    assert main([]) == 2
    assert main(["--out", str(tmp_path), "--", "torchrun", "x.py"]) == 2
    assert main(["--scenario", "decode", "--", "python", "x.py"]) == 2
    assert main(["--active", "0", "--", "python", "x.py"]) == 2
    assert main(["--scenario", "no-such"]) == 2
    assert main(["--out", str(tmp_path), "--", "python", str(tmp_path / "missing.py")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "script not found" in err


def test_ctrl_c_on_the_command_keeps_the_steps_recorded_so_far(tmp_path):
    """A real SIGINT to ``gapscope capture -- python script.py`` mid-run: exit 130, and
    the trace holds the steps recorded before it, and stderr says where it is."""
    import signal
    import subprocess
    import sys
    import time

    ready = tmp_path / "ready"
    script = _script(
        tmp_path,
        f"""
        import gapscope.capture
        import pathlib, time, torch
        x = torch.ones(4, 4)
        i = 0
        while True:
            with torch.profiler.record_function("train_step"):
                x = torch.tanh(x @ x)
            gapscope.capture.step()
            i += 1
            if i == 6:
                pathlib.Path({str(ready)!r}).write_text("go")
            time.sleep(0.005)
    """,
    )
    out = tmp_path / "o"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gapscope",
            "capture",
            "--out",
            str(out),
            "--wait",
            "0",
            "--warmup",
            "1",
            "--active",
            "100000",
            "--no-summary",
            "--",
            "python",
            script,
        ],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():  # wait for the script, not for a fixed time
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "script never became ready"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    traces = os.listdir(out)
    assert len(traces) == 1, err
    path = str(out / traces[0])
    counts = range_counts(check_trace(path, {"train_step"}))
    assert counts["train_step"] >= 4  # steps 2..6 at least were recorded (step 1 is warm-up)
    assert "interrupted (Ctrl-C)" in err and path in err


def test_runner_runs_a_module_from_the_current_folder(tmp_path, monkeypatch):
    from gapscope.capture import Schedule
    from gapscope.capture.runner import ScriptRunner

    pkg = tmp_path / "pkgx"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "job.py").write_text(
        textwrap.dedent("""
        import gapscope.capture
        import sys, torch
        assert sys.argv[1:] == ["a", "b"], sys.argv
        for i in range(4):
            with torch.profiler.record_function("module_step"):
                torch.ones(3).add(i)
            gapscope.capture.step()
        sys.exit(5)
    """)
    )
    monkeypatch.chdir(tmp_path)
    path_before = list(__import__("sys").path)
    r = ScriptRunner(str(tmp_path / "o"), schedule=Schedule(wait=0, warmup=1, active=2), log=lambda m: None)
    assert r.run(["python", "-m", "pkgx.job", "a", "b"]) == 5
    assert r.traces[0].endswith("_pkgx.job.pt.trace.json.gz")
    assert range_counts(check_trace(r.traces[0]))["module_step"] == 2
    assert __import__("sys").path == path_before  # sys.path restored


def test_relative_out_folder_survives_a_chdir_in_the_script(tmp_path, monkeypatch):
    from gapscope.capture.runner import ScriptRunner

    (tmp_path / "elsewhere").mkdir()
    script = _script(
        tmp_path,
        """
        import os, torch
        os.chdir("elsewhere")
        torch.ones(2).add(1)
    """,
    )
    monkeypatch.chdir(tmp_path)
    r = ScriptRunner("traces", seconds=0, log=lambda m: None)
    assert r.run(["python", script]) == 0
    assert os.path.dirname(r.traces[0]) == str(tmp_path / "traces")
    assert os.listdir(tmp_path / "elsewhere") == []


def test_window_capture_names_the_script_thread_and_keeps_usdt_off_the_terminal(tmp_path):
    """issue 18 item 10: ``gapscope capture -- python work.py`` (a fresh process: Kineto
    keeps a thread's name from its first profile): the script's lane is 'thread N
    (work.py)', not '(gapscope)'; torch's 'USDT: … profiler_start' lines do not reach
    the terminal; the time-window message says the trace holds the window as one step."""
    import subprocess
    import sys

    from gapscope import parsers

    script = tmp_path / "work.py"
    script.write_text("import torch\nx = torch.ones(64, 64)\nfor _ in range(5):\n    x = x @ x / 64\n")
    out = tmp_path / "out"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gapscope",
            "capture",
            "--out",
            str(out),
            "--seconds",
            "0",
            "--no-summary",
            "--",
            "python",
            str(script),
        ],
        cwd=root,
        env=dict(os.environ, PYTHONPATH=root),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "USDT:" not in proc.stderr and "USDT:" not in proc.stdout
    assert "recorded a time window as one step (ProfilerStep#0 in the trace)" in proc.stderr
    (trace_path,) = list(out.iterdir())
    labels = [ln.label for ln in parsers.load(str(trace_path)).lanes]
    assert any(lb.endswith("(work.py)") for lb in labels), labels
    assert not any("(gapscope)" in lb for lb in labels)
