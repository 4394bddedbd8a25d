"""tools/check.py builds the installed layout (gapscope.parsers from parsers/, ...) as a
symlink tree for mypy and import-linter; these tests check the tree against the
setuptools table, and that a package folder the table misses is refused."""

from __future__ import annotations

import importlib.util
import textwrap

import pytest

from .conftest import ROOT


def _load_check():
    spec = importlib.util.spec_from_file_location("tools_check", ROOT / "tools" / "check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _fake_repo(tmp_path, packages, dirs):
    (tmp_path / "pyproject.toml").write_text(
        textwrap.dedent(f"""\
        [tool.setuptools]
        packages = {packages!r}
        [tool.setuptools.package-dir]
        "gapscope" = "gapscope"
        "gapscope.parsers" = "parsers"
        """).replace("'", '"')
    )
    for d in dirs:
        (tmp_path / d).mkdir(parents=True)
        (tmp_path / d / "__init__.py").write_text("")
        (tmp_path / d / "mod.py").write_text("X = 1\n")


def test_source_dir_takes_the_longest_mapped_prefix():
    check = _load_check()
    mapping = {"gapscope": "gapscope", "gapscope.parsers": "parsers"}
    assert check.source_dir("gapscope.parsers.chrome.parallel", mapping) == ROOT / "parsers" / "chrome" / "parallel"
    assert check.source_dir("gapscope.report", mapping) == ROOT / "gapscope" / "report"


def test_tree_links_every_module_where_the_wheel_puts_it(tmp_path, monkeypatch):
    check = _load_check()
    _fake_repo(
        tmp_path, ["gapscope", "gapscope.parsers", "gapscope.parsers.chrome"], ["gapscope", "parsers", "parsers/chrome"]
    )
    monkeypatch.setattr(check, "ROOT", tmp_path)
    monkeypatch.setattr(check, "TREE", tmp_path / "build" / "srctree")
    check.build_tree()
    link = tmp_path / "build" / "srctree" / "gapscope" / "parsers" / "chrome" / "mod.py"
    assert link.is_symlink() and link.resolve() == (tmp_path / "parsers" / "chrome" / "mod.py").resolve()
    assert (tmp_path / "build" / "srctree" / "gapscope" / "mod.py").is_symlink()


def test_a_package_folder_missing_from_the_table_is_refused(tmp_path, monkeypatch, capsys):
    check = _load_check()
    _fake_repo(tmp_path, ["gapscope", "gapscope.parsers"], ["gapscope", "parsers", "parsers/chrome"])
    monkeypatch.setattr(check, "ROOT", tmp_path)
    monkeypatch.setattr(check, "TREE", tmp_path / "build" / "srctree")
    with pytest.raises(SystemExit) as info:
        check.build_tree()
    assert info.value.code == 2
    assert "parsers/chrome/ has an __init__.py but no entry in [tool.setuptools] packages" in capsys.readouterr().err


def test_the_repository_table_lists_every_package_folder():
    """The real table: what the wheel ships is what the source tree holds."""
    check = _load_check()
    packages, package_dir = check._setuptools_table()
    listed = {check.source_dir(p, package_dir).resolve() for p in packages}
    for mapped in set(package_dir.values()):
        for init in (ROOT / mapped).rglob("__init__.py"):
            if "__pycache__" not in init.parts:
                assert init.parent.resolve() in listed, init.parent
