"""Exercise progress (save, resume, reset in a temporary state dir) and the
``gapscope exercise`` command (list, --check, --reset)."""

from __future__ import annotations

import builtins
import json
import os

import pytest

from gapscope.exercise import ProgressStore, Session, Workbook, bundled_paths, find, load_exercise
from gapscope.exercise.progress import MAX_PROGRESS_BYTES
from gapscope.tui.exercise import cmd as exercise_cmd


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("GAPSCOPE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("GAPSCOPE_LEARNER", "ada")
    return tmp_path / "state"


@pytest.fixture(scope="module")
def decode():
    ex = find("decode-step")
    return ex, Workbook(ex)


def test_session_saves_resumes_and_resets(state, decode):
    ex, wb = decode
    s = Session(ex, workbook=wb)
    assert s.store.path == state / "progress-ada.json"
    assert s.index == 0 and s.task.id == "look"
    assert s.hint() == ex.tasks[0].hints[0]
    assert s.hint() is None  # only one hint
    v = s.submit(1)  # "dense": wrong
    assert not v.correct and s.index == 0
    assert s.submit(0).correct and s.index == 1
    data = json.loads((state / "progress-ada.json").read_text())
    rec = data["exercises"]["decode-step"]
    assert rec["current"] == 1 and rec["tasks"]["look"] == {
        "done": True,
        "attempts": 2,
        "hints": 1,
        "answer": 0,
        "notes": "",
    }

    s2 = Session(ex, store=ProgressStore(), workbook=wb)  # a new run resumes
    assert s2.index == 1 and s2.task.id == "largest-gap"
    assert s2.store.summary("decode-step", len(ex.tasks)) == (1, len(ex.tasks), False)
    s2.reset()
    assert s2.index == 0
    s3 = Session(ex, store=ProgressStore(), workbook=wb)
    assert s3.index == 0 and s3.record()["attempts"] == 0


def test_notes_kept_and_learners_separate(state, decode):
    ex, wb = decode
    s = Session(ex, workbook=wb)
    for tid, ans in (("look", 0),):
        assert s.task.id == tid and s.submit(ans).correct
    other = ProgressStore(learner="bob")
    assert other.path.name == "progress-bob.json"
    assert other.summary("decode-step", 14) == (0, 14, False)


def test_finishing_marks_exercise_done(state, decode):
    ex, wb = decode
    s = Session(ex, workbook=wb)
    store = s.store
    for t in ex.tasks:
        store.task(ex.id, t.id)["done"] = True
    store.save()
    s = Session(ex, store=ProgressStore(), workbook=wb)
    assert s.finished and s.task is None
    with pytest.raises(RuntimeError):
        s.submit(0)


def test_corrupt_progress_file_is_set_aside(state):
    state.mkdir(parents=True)
    (state / "progress-ada.json").write_text("{not json", encoding="utf-8")
    store = ProgressStore()
    assert store.data == {"version": 1, "exercises": {}}
    assert (state / "progress-ada.corrupt").read_text() == "{not json"


def test_cmd_lists_with_progress(state, decode, capsys):
    ex, wb = decode
    s = Session(ex, workbook=wb)
    s.submit(0)
    assert exercise_cmd.main([]) == 0
    out = capsys.readouterr().out
    assert "progress of ada" in out
    assert f"decode-step        1/{len(ex.tasks)}  Decode-step gap detective" in out
    n = len(load_exercise([p for p in bundled_paths() if p.stem == "four-smells"][0]).tasks)
    assert f"four-smells        0/{n}  Four timeline smells" in out


def test_cmd_reset(state, decode, capsys):
    ex, wb = decode
    Session(ex, workbook=wb).submit(0)
    assert exercise_cmd.main(["--reset", "decode"]) == 0  # unique prefix
    assert "progress of decode-step reset" in capsys.readouterr().out
    assert ProgressStore().summary("decode-step", 14) == (0, 14, False)
    assert exercise_cmd.main(["--reset", "nope"]) == 2
    assert "no such exercise" in capsys.readouterr().err
    assert exercise_cmd.main(["--reset"]) == 0


def test_cmd_reset_that_cannot_save_says_only_that(tmp_path, monkeypatch, capsys):
    """A reset whose progress file cannot be written (``GAPSCOPE_STATE_DIR`` a file)
    says it failed, and not also that it was done (it printed 'progress of ... reset'
    before the error line)."""
    monkeypatch.setenv("GAPSCOPE_STATE_DIR", os.devnull)
    monkeypatch.setenv("GAPSCOPE_LEARNER", "ada")
    for argv in (["--reset", "decode-step"], ["--reset"]):
        assert exercise_cmd.main(argv) == 1
        cap = capsys.readouterr()
        assert cap.out == ""
        notice, err = cap.err.splitlines()  # the store's notice that it starts afresh, then the failure
        assert notice.startswith(f"gapscope: warning: {os.devnull}/progress-ada.json: progress file is not usable")
        assert err.startswith(f"gapscope: error: cannot save progress to {os.devnull}/progress-ada.json: ")


def test_cmd_check_exit_codes(tmp_path, capsys):
    paths = [str(p) for p in bundled_paths()]
    assert exercise_cmd.main(["--check", *paths]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"{p}: ok" for p in paths]
    text = bundled_paths()[0].read_text(encoding="utf-8")
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("value = 2326", "value = 3000", 1), encoding="utf-8")
    assert exercise_cmd.main(["--check", str(bad)]) == 1
    cap = capsys.readouterr()
    assert cap.out == ""
    (err,) = cap.err.splitlines()
    assert err.startswith(f"gapscope: error: {bad}:")
    assert ": task 'projected': key " in err and "3000 tokens/s" in err and "2326 tokens/s" in err


def test_cmd_unknown_exercise(state, capsys):
    assert exercise_cmd.main(["no-such-exercise"]) == 2
    assert "no such exercise" in capsys.readouterr().err


def test_cmd_runs_the_screen_with_loaded_traces(state, monkeypatch):
    from gapscope.tui.exercise.app import ExerciseApp

    ran = {}

    def fake_run(self):
        ran["session"] = self.session

    monkeypatch.setattr(ExerciseApp, "run", fake_run)
    assert exercise_cmd.main(["four"]) == 0
    s = ran["session"]
    assert s.exercise.id == "four-smells" and s.index == 0
    assert set(s.workbook._facts) == {"picket", "island", "copy", "cliff"}


def test_cmd_unreadable_trace_is_one_line(state, tmp_path, capsys):
    (tmp_path / "t.txt").write_text("\x00\x01binary", encoding="latin-1")
    ex = tmp_path / "x.toml"
    ex.write_text(
        'title = "x"\nprompt = "p"\n[[traces]]\npath = "t.txt"\n[[tasks]]\nkind = "pick_gap"\nprompt = "p"\ngap = "largest"\n',
        encoding="utf-8",
    )
    assert exercise_cmd.main([str(ex)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gapscope: error: {tmp_path / 't.txt'}") and "Traceback" not in err
    assert len(err.splitlines()) == 1
    assert exercise_cmd.main(["--check", str(ex)]) == 1
    assert capsys.readouterr().err.startswith(f"gapscope: error: {ex}:5: task 'task1': trace 'trace1' cannot be read: ")


def test_headless_exercise_modules_do_not_import_textual():
    import subprocess
    import sys

    code = "import sys, gapscope.exercise, gapscope.tui.exercise.cmd; gapscope.exercise.check_exercise(gapscope.exercise.bundled_paths()[0]); print(sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_unwritable_state_dir_keeps_progress_in_memory(tmp_path, decode):
    ex, wb = decode
    blocker = tmp_path / "file"
    blocker.write_text("not a directory", encoding="utf-8")
    store = ProgressStore(blocker / "state", "ada")
    s = Session(ex, store=store, workbook=wb)
    assert s.submit(0).correct and s.index == 1  # the answer still counts
    assert store.error is not None and "cannot save progress" in store.error
    assert not (blocker / "state").exists()


def test_verdict_text_renders_names_literally():
    from gapscope.exercise import Verdict
    from gapscope.tui.exercise.text import verdict_text

    v = Verdict(False, "You picked [bold]x[/bold]", evidence=("  evidence: [red]launch[/] (host, 1.0 µs)",))
    t = verdict_text(v)
    assert t.plain == "✗ Not yet. You picked [bold]x[/bold]\n  evidence: [red]launch[/] (host, 1.0 µs)"


def test_cmd_errors_in_the_house_form_exit_2(state, tmp_path, capsys):
    """Bad input prints ``gapscope: error: PATH[:LINE[:COL]]: message`` on stderr and
    exits 2, like ``gapscope report``: a file that is no exercise (here a Markdown file:
    line 3 column 1 is not TOML), a .toml path that does not exist, an unknown name."""
    md = tmp_path / "notes.md"
    md.write_text("# Title\n\n**bold** text\n", encoding="utf-8")
    assert exercise_cmd.main(["--check", str(md)]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    assert cap.err == f"gapscope: error: {md}:3:1: not valid TOML: Invalid statement\n"
    # with a good file too: its ok line on stdout, status still 2
    good = str(bundled_paths()[0])
    assert exercise_cmd.main(["--check", str(md), good]) == 2
    assert capsys.readouterr().out == f"{good}: ok\n"
    missing = tmp_path / "gone.toml"
    for argv in (["--check", str(missing)], [str(missing)]):
        assert exercise_cmd.main(argv) == 2
        assert capsys.readouterr().err == f"gapscope: error: {missing}: cannot read: No such file or directory\n"
    for argv in (["nope"], ["--reset", "nope"]):
        assert exercise_cmd.main(argv) == 2
        assert (
            capsys.readouterr().err
            == "gapscope: error: nope: no such exercise (bundled: decode-step, four-smells, gpu-decode, graph-capture)\n"
        )


def test_help_says_where_progress_is_kept_and_how_to_reset(tmp_path, monkeypatch, capsys):
    """--help prints the resolved progress file: $GAPSCOPE_STATE_DIR when set, else
    $XDG_STATE_HOME/gapscope (platformdirs on Linux), and the reset command."""
    import sys

    monkeypatch.setenv("GAPSCOPE_LEARNER", "ada")
    monkeypatch.setenv("GAPSCOPE_STATE_DIR", str(tmp_path / "mine"))
    with pytest.raises(SystemExit) as ei:
        exercise_cmd.main(["--help"])
    assert ei.value.code == 0
    out = capsys.readouterr().out
    assert f"  kept in {tmp_path / 'mine' / 'progress-ada.json'}\n" in out
    assert "$GAPSCOPE_STATE_DIR when set" in out and "$XDG_STATE_HOME/gapscope" in out
    assert "reset: 'gapscope exercise --reset NAME' (one exercise), '--reset' (all)" in out
    if sys.platform.startswith("linux"):
        monkeypatch.delenv("GAPSCOPE_STATE_DIR")
        monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
        with pytest.raises(SystemExit):
            exercise_cmd.main(["--help"])
        assert f"  kept in {tmp_path / 'xdg' / 'gapscope' / 'progress-ada.json'}\n" in capsys.readouterr().out


# --- hardening (issue 14): validated on load, bad files moved aside with a message ---


def _deep(n: int) -> str:
    return "[" * n + "]" * n


@pytest.mark.parametrize(
    "body,why",
    [
        ("{not json", "not JSON"),
        ('{"version": 1, "exercises": []}', "exercises: expected an object"),
        ('{"version": 1, "exercises": {"e": {"tasks": {"t": {"hints": 1e308}}}}}', "exercises.e.tasks.t.hints"),
        ('{"version": 1, "exercises": {"e": {"tasks": {"t": {"attempts": "3"}}}}}', "attempts"),
        ('{"version": 1, "exercises": {"e": {"current": true}}}', "exercises.e.current"),
        ('{"version": 1, "exercises": {"e": {"tasks": {"t": {"done": 1}}}}}', "done: expected true/false"),
        ('{"version": 1, "exercises": {"e": {"tasks": {"t": {"answer": ' + _deep(100) + "}}}}}", "answer"),
        (_deep(100_000), "nested too deep"),
        ('{"version": 1, "exercises": {"e": {"tasks": "x"}}}', "tasks: expected an object"),
        ("[1]", "expected a JSON object"),
    ],
)
def test_bad_progress_is_moved_aside_with_a_message(tmp_path, body, why):
    path = tmp_path / "progress-ada.json"
    path.write_text(body)
    store = ProgressStore(tmp_path, "ada")
    assert store.data == {"version": 1, "exercises": {}}
    assert store.notice is not None and why in store.notice, store.notice
    assert str(tmp_path / "progress-ada.corrupt") in store.notice
    assert (tmp_path / "progress-ada.corrupt").read_text() == body
    store.task("e", "t")["hints"] += 1  # usable afterwards
    assert store.save()


def test_second_bad_file_does_not_overwrite_the_first_backup(tmp_path):
    for n, body in enumerate(["{a", "{b"]):
        (tmp_path / "progress-ada.json").write_text(body)
        store = ProgressStore(tmp_path, "ada")
        want = "progress-ada.corrupt" + ("" if n == 0 else "-1")
        assert want in store.notice and (tmp_path / want).read_text() == body


def test_partial_records_get_their_defaults(tmp_path):
    (tmp_path / "progress-ada.json").write_text('{"version": 1, "exercises": {"e": {"tasks": {"t": {"done": true}}}}}')
    store = ProgressStore(tmp_path, "ada")
    assert store.notice is None
    assert store.task("e", "t") == {"done": True, "attempts": 0, "hints": 0, "answer": None, "notes": ""}
    assert store.summary("e", 3) == (1, 3, False)


@pytest.fixture
def opened(monkeypatch) -> list[str]:
    """The paths opened (``open``, ``os.open``) while the test runs: a file refused by
    its kind or size is never opened, so it can neither block (a FIFO) nor be read (a
    device, a 10 GB file); counted, not timed."""
    paths: list[str] = []
    real_open, real_os_open = builtins.open, os.open

    def spy_open(file, *a, **k):
        paths.append(os.fspath(file) if not isinstance(file, int) else f"fd {file}")
        return real_open(file, *a, **k)

    def spy_os_open(path, *a, **k):
        paths.append(os.fspath(path))
        return real_os_open(path, *a, **k)

    monkeypatch.setattr(builtins, "open", spy_open)
    monkeypatch.setattr(os, "open", spy_os_open)
    return paths


def test_fifo_is_refused_without_blocking(tmp_path, opened):
    os.mkfifo(tmp_path / "progress-ada.json")
    store = ProgressStore(tmp_path, "ada")
    assert "not a regular file" in store.notice
    assert str(tmp_path / "progress-ada.json") not in opened  # an open for reading would wait for a writer


def test_symlink_to_dev_zero_is_refused_quickly(tmp_path, opened):
    os.symlink("/dev/zero", tmp_path / "progress-ada.json")
    store = ProgressStore(tmp_path, "ada")
    assert "not a regular file" in store.notice
    assert str(tmp_path / "progress-ada.json") not in opened and "/dev/zero" not in opened
    assert os.path.islink(tmp_path / "progress-ada.corrupt")  # the link moved, /dev/zero untouched


def test_huge_file_is_refused_without_reading_it(tmp_path, opened):
    with open(tmp_path / "progress-ada.json", "wb") as fh:
        fh.truncate(10 * 10**9)  # sparse
    opened.clear()
    store = ProgressStore(tmp_path, "ada")
    assert f"more than the {MAX_PROGRESS_BYTES:,}" in store.notice
    assert str(tmp_path / "progress-ada.json") not in opened


def test_cmd_prints_the_notice_once(state, capsys):
    state.mkdir(parents=True, exist_ok=True)
    (state / "progress-ada.json").write_text('{"version": 1, "exercises": {"e": {"tasks": {"t": {"hints": 1e308}}}}}')
    assert exercise_cmd.main([]) == 0
    err = capsys.readouterr().err
    assert err.count("gapscope: warning: ") == 1 and "moved aside to" in err and "Traceback" not in err


def test_overlapping_saves_never_share_a_temp_file(tmp_path, monkeypatch):
    # issue 42: two `exercise --reset` runs saving at once wrote one `.tmp` name; the
    # one that renamed second found it gone and lost its update. Here run B saves
    # between run A's write and A's rename: both must land, and no temp file stays.
    from gapscope.exercise import progress as progress_mod

    a, b = ProgressStore(tmp_path, "ada"), ProgressStore(tmp_path, "ada")
    b.task("decode-step", "t1")["done"] = True
    real_replace = os.replace
    interleaved = []

    def replace(src, dst):
        if not interleaved:
            interleaved.append(src)
            assert b.save(), b.error
        real_replace(src, dst)

    monkeypatch.setattr(progress_mod.os, "replace", replace)
    a.task("decode-step", "t2")["notes"] = "a's note"
    assert a.save(), a.error
    assert len(interleaved) == 1
    monkeypatch.setattr(progress_mod.os, "replace", real_replace)
    kept = json.loads((tmp_path / "progress-ada.json").read_text(encoding="utf-8"))
    assert kept["exercises"]["decode-step"]["tasks"]["t2"]["notes"] == "a's note"  # A renamed last
    assert sorted(p.name for p in tmp_path.iterdir()) == ["progress-ada.json"]


def test_concurrent_saves_all_land(tmp_path):
    # eight writers saving 20 times each at once: every save succeeds, the file is
    # always one writer's whole record, and no temp file is left behind
    import threading

    results: list[bool] = []
    lock = threading.Lock()

    def writer(k: int) -> None:
        store = ProgressStore(tmp_path, "ada")
        for i in range(20):
            store.task("decode-step", f"t{k}")["attempts"] = i + 1
            ok = store.save()
            with lock:
                results.append(ok)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 160
    store = ProgressStore(tmp_path, "ada")
    assert store.notice is None  # a whole, valid record
    assert sorted(p.name for p in tmp_path.iterdir()) == ["progress-ada.json"]
