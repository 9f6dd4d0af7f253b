"""`resumable reconcile` and `Run.reconcile`: the seed's Task-Id table from the CLI and the API."""

from __future__ import annotations

import json
from pathlib import Path

from seedhelpers import commit, git, make_repo

import resumable
from corehelpers import assert_error, cli, ok, tree


def setup(tmp_path: Path) -> tuple[Path, Path]:
    repo = make_repo(tmp_path / "repo")
    commit(repo, "a", task="a", run="r")
    commit(repo, "b elsewhere", task="b", run="another-run")  # another run's: ignored
    commit(repo, "c", task="c")
    runs = tmp_path / "runs"
    run = resumable.open_run("r", runs_dir=runs)
    run.init("t", units=["a", "b", "c", "d"])
    run.unit("d", "done")  # done, but no commit: stale
    run.close()
    return repo, runs


def test_cli_reconciles_and_reports_the_seed_shape(tmp_path: Path) -> None:
    repo, runs = setup(tmp_path)
    before = tree(runs)
    dry = json.loads(ok(cli("reconcile", "r", "--repo", str(repo), "--dry-run", "--json", runs=runs)))
    assert tree(runs) == before
    out = json.loads(ok(cli("reconcile", "r", "--repo", str(repo), "--json", runs=runs)))
    assert out == dry
    assert sorted(out) == ["integrated", "reconciled", "runnable", "staleDone"]
    assert out["reconciled"] == ["a", "c"] and out["staleDone"] == ["d"] and out["runnable"] == ["b"]
    doc = resumable.read_doc(runs / "r.json")
    sha = git(repo, "rev-parse", "HEAD").strip()
    assert doc["units"]["c"]["note"] == f"reconciled-from-trailer:{sha}"
    assert doc["units"]["d"]["status"] == "done"  # never demoted
    assert [i["id"] for i in doc["openItems"]] == ["stale-done:d"]
    assert "↺ c  reconciled-from-trailer:" in ok(cli("status", "r", runs=runs))
    # Once more: nothing new is written (idempotent).
    again = tree(runs)
    ok(cli("reconcile", "r", "--repo", str(repo), "--json", runs=runs))
    assert tree(runs) == again


def test_text_output_and_unit_selection(tmp_path: Path) -> None:
    repo, runs = setup(tmp_path)
    text = ok(cli("reconcile", "r", "--repo", str(repo), "--units", "a,b", runs=runs))
    assert text.splitlines() == ["integrated 2 task(s)", "marked done: a", "not integrated, still to do: b"]


def test_errors_are_one_line(tmp_path: Path) -> None:
    repo, runs = setup(tmp_path)
    before = tree(runs)
    assert_error(cli("reconcile", "r", "--repo", str(repo), "--ref", "no-such-branch", runs=runs), 1, "no-such-branch")
    assert_error(cli("reconcile", "r", "--repo", str(tmp_path), runs=runs), 1)
    assert_error(cli("reconcile", "r", "--repo", str(repo), "--units", "a", "--all", runs=runs), 1, "not both")
    assert_error(cli("reconcile", "nope", "--repo", str(repo), runs=runs), 3)
    assert tree(runs) == before


def test_api_uses_the_runs_integration_ref(tmp_path: Path) -> None:
    repo, runs = setup(tmp_path)
    git(repo, "checkout", "-q", "-b", "feature")
    commit(repo, "b", task="b", run="r")
    git(repo, "checkout", "-q", "main")
    run = resumable.open_run("r", runs_dir=runs)
    assert run.reconcile(repo, dry_run=True)["runnable"] == ["b"]  # HEAD: main
    assert run.reconcile(repo, "feature", dry_run=True)["runnable"] == []
