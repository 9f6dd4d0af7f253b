"""`[job] reconcile`: steps whose Task-Id trailer is integrated are skipped before planning."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from runnerhelpers import doc, run_cli, write

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "seed"))
from seedhelpers import commit, make_repo

JOB = """
[job]
name = "ship"
reconcile = { ref = "main", repo = "repo" }
[steps.a]
run = "echo a >> trace"
[steps.b]
run = "echo b >> trace"
needs = ["a"]
"""


def test_integrated_steps_are_skipped_and_say_why(work: Path) -> None:
    repo = make_repo(work / "repo")
    sha = commit(repo, "a landed", task="a", run="ship")
    write(work / "resumable.toml", JOB)
    dry = run_cli(["--dry-run"])
    assert f"skip  a: integrated in {sha}" in dry.output  # a dry run reads git, writes nothing
    assert not (work / "runs").exists()
    r = run_cli([])
    assert r.exit_code == 0, r.output
    assert (work / "trace").read_text().split() == ["b"]
    units = doc(work, "ship")["units"]
    assert units["a"]["note"] == f"reconciled-from-trailer:{sha}" and units["a"]["status"] == "done"
    assert "skip  a: integrated in " + sha in run_cli(["--dry-run"]).output


def test_a_bad_reconcile_table_is_a_job_file_error(work: Path) -> None:
    write(work / "resumable.toml", JOB.replace('repo = "repo"', 'rep = "x"'))
    r = run_cli([])
    assert r.exit_code == 1 and "reconcile" in r.output and "unknown key 'rep'" in r.output


def test_an_unknown_ref_stops_the_run_in_one_line(work: Path) -> None:
    make_repo(work / "repo")
    commit(work / "repo", "x")
    write(work / "resumable.toml", JOB.replace('ref = "main"', 'ref = "nope"'))
    r = run_cli([])
    assert r.exit_code == 1 and "nope" in r.output
    assert not (work / "trace").exists()
    assert subprocess.run(["git", "-C", str(work / "repo"), "status"], capture_output=True).returncode == 0
