"""The release: one version, written once (``resumable.__version__``), is what the installed
metadata, ``resumable --version`` and the changelog say; the distribution's name; and the release
scripts CI calls are in place."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

import resumable
from corehelpers import cli, ok

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
DIST = "resumable-runs"


def test_the_version_is_written_once() -> None:
    project = PYPROJECT["project"]
    assert "version" not in project and project["dynamic"] == ["version"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "resumable.__version__"}
    # A literal, so setuptools reads it without importing the package.
    tree = ast.parse((ROOT / "src" / "resumable" / "__init__.py").read_text())
    [assign] = [n for n in tree.body if isinstance(n, ast.Assign)
                and any(getattr(t, "id", None) == "__version__" for t in n.targets)]
    assert isinstance(assign.value, ast.Constant) and assign.value.value == resumable.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", resumable.__version__)


def test_installed_metadata_and_the_command_agree(tmp_path: Path) -> None:
    assert metadata.version(DIST) == resumable.__version__
    assert ok(cli("--version", cwd=tmp_path)) == f"resumable, version {resumable.__version__}\n"
    proc = subprocess.run([sys.executable, "-m", "resumable", "--version"], capture_output=True, text=True,
                          cwd=tmp_path, check=True)
    assert proc.stdout == f"resumable, version {resumable.__version__}\n"


def test_the_distribution_name_and_the_import_name() -> None:
    assert PYPROJECT["project"]["name"] == DIST
    dist = metadata.distribution(DIST)
    assert dist.metadata["Name"] == DIST
    assert "resumable" in (dist.read_text("top_level.txt") or "resumable").split()
    # The command is a script file, not an entry point (tests/test_launcher.py says why).
    assert not [ep for ep in dist.entry_points if ep.group == "console_scripts"]
    assert PYPROJECT["tool"]["setuptools"]["script-files"] == ["scripts/resumable"]


def test_install_hints_name_the_distribution() -> None:
    """`pip install 'resumable[postgres]'` installs an unrelated package (it owns the name on the
    package index): every hint names the distribution, never the import name."""
    wrong = re.compile(r"(?<![\w./-])resumable\[")
    found = []
    for top in ("src", "benchmarks", "docs", "scripts", "examples", "README.md", "CHANGELOG.md"):
        path = ROOT / top
        files = [path] if path.is_file() else [f for f in path.rglob("*") if f.is_file()]
        for f in files:
            try:
                text = f.read_text()
            except (UnicodeDecodeError, OSError):
                continue
            found += [f"{f.relative_to(ROOT)}:{n}" for n, line in enumerate(text.splitlines(), 1)
                      if wrong.search(line)]
    assert not found, found


def test_a_missing_psycopg_names_the_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    from resumable.errors import UsageError
    from resumable.store.postgres import connect_backend

    monkeypatch.setitem(sys.modules, "psycopg", None)  # `import psycopg` now raises ImportError
    with pytest.raises(UsageError) as info:
        connect_backend("postgresql://u@127.0.0.1:9/db")
    assert str(info.value) == (f"the PostgreSQL store needs psycopg, which is not installed: pip install"
                               f" '{DIST}[postgres]' (from a checkout: pip install '.[postgres]')")


def test_the_changelog_starts_with_this_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    releases = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2}|unreleased)$", text, re.M)
    assert releases and releases[0][0] == resumable.__version__, releases[:2]
    assert [v for v, _ in releases][-1] == "0.1.0"
    assert "## [Unreleased]" in text  # Keep a Changelog: where the next entries go


def test_package_data_exists_in_the_checkout() -> None:
    """What release-check looks for in the wheel is there to be packaged."""
    for package, patterns in PYPROJECT["tool"]["setuptools"]["package-data"].items():
        base = ROOT / "src" / Path(*package.split("."))
        for pattern in patterns:
            assert list(base.glob(pattern)), f"{package}: {pattern} matches nothing"


@pytest.mark.parametrize("name", ["release-check", "ci-other-pythons"])
def test_release_scripts_are_strict_executable_bash(name: str) -> None:
    script = ROOT / "scripts" / name
    text = script.read_text()
    assert text.startswith("#!/usr/bin/env bash\n") and "\nset -euo pipefail\n" in text
    assert os.access(script, os.X_OK)
    subprocess.run(["bash", "-n", str(script)], check=True)
    if shutil.which("shellcheck"):
        proc = subprocess.run(["shellcheck", str(script)], capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stdout


def test_build_and_twine_are_in_the_test_extra() -> None:
    test = PYPROJECT["project"]["optional-dependencies"]["test"]
    for tool in ("build", "twine"):
        [pin] = [d for d in test if re.match(rf"{tool}\b", d)]
        assert ">=" in pin, pin
