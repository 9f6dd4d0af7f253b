"""The job file is found as the runs directory is: walking up from the current directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from runnerhelpers import run_cli, status_of, write


def test_run_from_a_subdirectory_finds_the_job_file_above(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(work / "resumable.toml", '[job]\nname = "up"\n[steps.a]\nrun = "pwd > where"\n')
    deep = work / "src" / "deep"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    r = run_cli([])
    assert r.exit_code == 0, r.output
    assert status_of(work, "up") == {"a": "done"}
    assert (work / "where").read_text().strip() == str(work)  # the step runs where the job file is
    assert "skip  a: done" in run_cli(["--dry-run"]).output


def test_no_job_file_anywhere_points_to_the_docs(work: Path) -> None:
    r = run_cli([])
    assert r.exit_code == 1
    assert "no job file 'resumable.toml' here or in a parent directory" in r.output
    assert "docs/runner.md" in r.output and "examples/" not in r.output
    r = run_cli(["missing.toml"])
    assert r.exit_code == 1 and "no job file 'missing.toml'" in r.output and "examples/" not in r.output
