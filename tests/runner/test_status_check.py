"""An honest status: a run made by `resumable run` from a job that still exists is checked against
the job as the files are now (runner.freshness): `status` says whether it is up to date, and how
many steps `resumable run` would run and why; `status --check` exits 1 unless the run is done and
up to date. Each kind of change gets its test; status writes nothing."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from runnerhelpers import run_cli, write

from resumable.cli.status import status_command

JOB = """[job]
name = "st"
[steps.count]
run = "wc -l < names.txt > count.txt"
inputs = ["names.txt"]
artifacts = ["count.txt"]
[steps.report]
run = "cat count.txt > report.txt"
needs = ["count"]
artifacts = ["report.txt"]
"""


def status(*args: str) -> Result:
    return CliRunner().invoke(status_command, ["st", *args], catch_exceptions=False)


def _tree(root: Path) -> dict[str, str]:
    """Every file under the runs directory with its content hash and mtime: what status must not touch."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out[str(p)] = f"{hashlib.sha256(p.read_bytes()).hexdigest()} {p.stat().st_mtime_ns}"
    return out


@pytest.fixture
def done(work: Path) -> Path:
    write(work / "names.txt", "ada\ngrace\n")
    write(work / "resumable.toml", JOB)
    r = run_cli([])
    assert r.exit_code == 0, r.output
    return work


def test_up_to_date(done: Path) -> None:
    r = status("--check")
    assert r.exit_code == 0, r.output
    assert "job      up to date (`resumable run` would run nothing)" in r.output
    assert "✓ converged: nothing to resume" in r.output


def _out_of_date(expect: list[str], n: int) -> None:
    before = _tree(Path("runs"))
    r = status()
    assert r.exit_code == 0  # the plain view is not a check
    assert f"job      out of date: `resumable run` would run {n} of 2 steps" in r.output, r.output
    for line in expect:
        assert f"\n  {line}\n" in r.output, r.output
    assert "nothing to resume" not in r.output
    assert f"→ bring it up to date: resumable run   ({n} step{'s' if n > 1 else ''} would run)" in r.output
    assert status("--check").exit_code == 1
    assert status("--check", "--json").exit_code == 1
    assert _tree(Path("runs")) == before  # read-only: no byte, no mtime changed
    r = run_cli([])  # and a run brings it up to date
    assert r.exit_code == 0, r.output
    assert status("--check").exit_code == 0


def test_after_an_input_is_edited(done: Path) -> None:
    write(done / "names.txt", "ada\ngrace\nlinus\n")
    _out_of_date(["run   count: input changed: names.txt",
                  "run   report: upstream re-runs: count (kept done if what it made comes out the same)"], 2)


def test_after_an_artifact_is_deleted(done: Path) -> None:
    (done / "report.txt").unlink()
    _out_of_date(["run   report: artifact missing: report.txt"], 1)


def test_after_the_job_file_is_edited(done: Path) -> None:
    write(done / "resumable.toml", JOB.replace("cat count.txt > report.txt", "cat count.txt count.txt > report.txt"))
    _out_of_date(["run   report: command changed"], 1)


def test_after_a_step_is_added(done: Path) -> None:
    write(done / "resumable.toml", JOB + '[steps.extra]\nrun = "true"\n')
    r = status()
    assert "would run 1 of 3 steps" in r.output and "\n  run   extra: never ran\n" in r.output
    assert status("--check").exit_code == 1
    assert run_cli([]).exit_code == 0
    assert status("--check").exit_code == 0


def test_a_run_not_done_fails_the_check(work: Path) -> None:
    write(work / "resumable.toml", '[job]\nname = "st"\n[steps.a]\nrun = "false"\n')
    assert run_cli([]).exit_code == 1
    r = status("--check")
    assert r.exit_code == 1
    assert "job      out of date: `resumable run` would run 1 of 1 step" in r.output
    assert "run   a: failed last time (exit code 1)" in r.output


def test_when_the_job_file_is_gone_the_check_fails_and_says_why(done: Path) -> None:
    (done / "resumable.toml").unlink()
    r = status("--check")
    assert r.exit_code == 1
    assert f"job      its job file {done / 'resumable.toml'} no longer exists: cannot tell whether it is up to date" \
        in r.output
    assert "whether its job is up to date is not known" in r.output


def test_a_job_file_with_problems_is_not_up_to_date(done: Path) -> None:
    write(done / "resumable.toml", JOB + "[steps.bad]\nrun = 5\n")
    r = status("--check")
    assert r.exit_code == 1
    assert "job      its job cannot be read: " in r.output and "run: expected a command string" in r.output


def test_no_runs_fails_the_check(work: Path) -> None:
    r = CliRunner().invoke(status_command, ["--check"], catch_exceptions=False)
    assert r.exit_code == 1 and "no runs yet" in r.output


def test_a_run_of_step_flags_is_checked_from_its_flags(work: Path) -> None:
    assert run_cli(["--job", "st", "--step", "a:echo hi > hi.txt", "--step-artifact", "a:hi.txt"]).exit_code == 0
    assert status("--check").exit_code == 0
    (work / "hi.txt").unlink()
    r = status("--check")
    assert r.exit_code == 1 and "run   a: artifact missing: hi.txt" in r.output


def test_a_run_the_low_level_verbs_made_is_judged_by_its_state(work: Path) -> None:
    from resumable.api import open_run

    run = open_run("st")
    run.init("by hand", units=["x"])
    assert status("--check").exit_code == 1
    run.unit("x", "done")
    run.finalize("done")
    r = status("--check")
    assert r.exit_code == 0 and "job      " not in r.output


def test_the_check_is_made_from_where_the_run_was_launched(done: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (done / "elsewhere").mkdir()
    monkeypatch.chdir(done / "elsewhere")
    write(done / "names.txt", "changed\n")
    r = status("--check")
    assert r.exit_code == 1
    assert f"cd {done} && resumable run" in r.output


def test_a_family_job_is_judged_with_its_files(work: Path) -> None:
    (work / "raw").mkdir()
    write(work / "raw" / "1.csv", "1")
    write(work / "resumable.toml", '[job]\nname = "st"\n[steps.c]\nfiles = "raw/{n}.csv"\nrun = "cat raw/{n}.csv"\n'
                                   'inputs = ["raw/{n}.csv"]\n')
    assert run_cli([]).exit_code == 0
    assert status("--check").exit_code == 0
    write(work / "raw" / "2.csv", "2")
    r = status("--check")
    assert r.exit_code == 1 and "run   c: 1 of 2 instances (c+2: never ran); 1 skip (done)" in r.output
