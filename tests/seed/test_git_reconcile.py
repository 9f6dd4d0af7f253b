"""Git reconciliation against real repositories: the seed's table, Run-Id filtering, errors."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from seedhelpers import commit, fast_import_history, git, make_repo

from resumable.errors import InvalidInputError, UsageError
from resumable.git import reconcile as rc
from resumable.git.log import git_env, integrated_task_ids, resolve_ref

if TYPE_CHECKING:
    from resumable.api import Run

    def _run_is_a_writer(run: Run) -> rc.ReconcileWriter:
        return run  # mypy checks that the API's Run satisfies the writer protocol


class Recorder:
    """A writer that records what apply() asks of it."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def unit(self, unit_id: str, state: str, *, note: str | None = None) -> None:
        self.calls.append(("unit", unit_id, state, note))

    def item(self, items: object) -> object:
        self.calls.append(("item", items))
        return None


def doc_with(**states: str) -> dict[str, Any]:
    return {"id": "run1", "units": {u: {"status": s} for u, s in states.items()}, "openItems": []}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


# ---- integrated_task_ids ----------------------------------------------------------------------------

def test_newest_commit_per_task_wins(repo: Path) -> None:
    commit(repo, "base")
    old = commit(repo, "a v1", task="a")
    b = commit(repo, "b", task="b", body="Why:\nmany lines\n\nmore\n")
    new = commit(repo, "a v2", task="a")
    got = integrated_task_ids(repo, "main")
    assert got == {"a": new, "b": b}
    assert list(got) == ["a", "b"]  # newest first
    assert old not in got.values()


def test_merged_branches_count_unmerged_do_not(repo: Path) -> None:
    commit(repo, "base")
    git(repo, "checkout", "-q", "-b", "feature")
    feat = commit(repo, "feature work", task="f")
    git(repo, "checkout", "-q", "-b", "abandoned", "main")
    commit(repo, "never merged", task="x")
    git(repo, "checkout", "-q", "main")
    commit(repo, "main work", task="m")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge feature", "feature")
    got = integrated_task_ids(repo, "main")
    assert got["f"] == feat and "m" in got and "x" not in got
    assert set(integrated_task_ids(repo, "abandoned")) == {"x"}


def test_run_id_filter(repo: Path) -> None:
    mine = commit(repo, "mine", task="a", run="r1")
    commit(repo, "other run, newer", task="a", run="r2")
    anon = commit(repo, "no run id", task="b")
    commit(repo, "other run only", task="c", run="r2")
    assert integrated_task_ids(repo, "main", "r1") == {"a": mine, "b": anon}
    assert set(integrated_task_ids(repo, "main")) == {"a", "b", "c"}


def test_refs_and_revisions(repo: Path) -> None:
    first = commit(repo, "one", task="a")
    commit(repo, "two", task="b")
    git(repo, "tag", "v1", first)
    assert set(integrated_task_ids(repo, "v1")) == {"a"}
    assert set(integrated_task_ids(repo, "HEAD~1")) == {"a"}
    assert set(integrated_task_ids(repo, "refs/heads/main")) == {"a", "b"}
    assert set(integrated_task_ids(repo, first)) == {"a"}


def test_unresolvable_ref_is_one_line_error(repo: Path) -> None:
    commit(repo, "one", task="a")
    for ref in ("nope", "main..main", "HEAD:file", ""):
        with pytest.raises(InvalidInputError) as info:
            integrated_task_ids(repo, ref)
        assert "\n" not in str(info.value)
    with pytest.raises(InvalidInputError, match="ref 'nope' does not resolve to a commit"):
        integrated_task_ids(repo, "nope")
    assert integrated_task_ids(repo, "nope", allow_missing_ref=True) == {}


def test_empty_repository_has_no_head(repo: Path) -> None:
    with pytest.raises(InvalidInputError, match="'main' does not resolve"):
        integrated_task_ids(repo, "main")


def test_a_ref_is_never_an_option(repo: Path, tmp_path: Path) -> None:
    commit(repo, "one", task="a")
    target = tmp_path / "written"
    with pytest.raises(InvalidInputError, match="does not resolve"):
        integrated_task_ids(repo, f"--output={target}")
    assert not target.exists()


def test_not_a_repository_and_missing_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    with pytest.raises(InvalidInputError, match="is not a git repository"):
        integrated_task_ids(plain, "main")
    with pytest.raises(InvalidInputError, match="no such directory"):
        integrated_task_ids(tmp_path / "missing", "main")


def test_git_missing(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(InvalidInputError, match="git is not installed"):
        integrated_task_ids(repo, "main")


def test_inherited_git_environment_does_not_redirect(repo: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    mine = commit(repo, "mine", task="a")
    other = make_repo(tmp_path / "other")
    commit(other, "theirs", task="z")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'log.showsignature'='true'")
    assert integrated_task_ids(repo, "main") == {"a": mine}
    env = git_env()
    assert "GIT_DIR" not in env and "GIT_CONFIG_PARAMETERS" not in env
    assert env["GIT_TERMINAL_PROMPT"] == "0"


def test_messages_are_read_as_utf8_whatever_the_config(repo: Path) -> None:
    git(repo, "config", "i18n.logOutputEncoding", "ISO-8859-1")
    sha = commit(repo, "unicode", task="tâche-1")
    assert integrated_task_ids(repo, "main") == {"tâche-1": sha}


def test_record_separators_inside_a_message(repo: Path) -> None:
    # The seed's %x1e/%x1f records break on these bytes; NUL-separated records do not.
    sha = commit(repo, "odd \x1e\x1f bytes", task="a", body="line \x1e with RS\n")
    assert integrated_task_ids(repo, "main") == {"a": sha}


def test_resolve_ref_returns_the_commit(repo: Path) -> None:
    sha = commit(repo, "one")
    assert resolve_ref(repo, "main") == sha
    git(repo, "tag", "-a", "-m", "annotated", "v2")
    assert resolve_ref(repo, "v2") == sha  # peeled to the commit


# ---- the reconciliation table -----------------------------------------------------------------------

def test_plan_follows_the_seed_table() -> None:
    doc = doc_with(a="pending", b="done", c="done", d="pending", e="blocked")
    integrated = {"a": "sha-a", "b": "sha-b", "e": "sha-e", "zz": "sha-z"}
    p = rc.plan(doc, integrated, "main")
    assert p.summary() == {"integrated": ["a", "b", "e", "zz"], "reconciled": ["a", "e"], "staleDone": ["c"],
                           "runnable": ["d"]}
    assert p.already_done == ("b",)
    w = Recorder()
    assert rc.apply(p, w) == p.summary()
    assert w.calls == [
        ("unit", "a", "done", "reconciled-from-trailer:sha-a"),
        ("item", {"id": "stale-done:c", "kind": "stale-done", "severity": "blocker",
                  "issue": "unit c is marked done but no commit is reachable from main — stale/lost integration; "
                           "not trusted"}),
        ("unit", "e", "done", "reconciled-from-trailer:sha-e"),
    ]


def test_dry_run_writes_nothing() -> None:
    p = rc.plan(doc_with(a="pending", c="done"), {"a": "s"}, "main")
    w = Recorder()
    assert rc.apply(p, w, dry_run=True) == {"integrated": ["a"], "reconciled": ["a"], "staleDone": ["c"],
                                            "runnable": []}
    assert w.calls == []


def test_selection() -> None:
    doc = doc_with(a="pending", b="done", c="pending")
    assert rc.plan(doc, {"a": "s"}, "main", ["c", "a", "c"]).summary()["reconciled"] == ["a"]
    assert rc.plan(doc, {"a": "s"}, "main", ["c"]).summary() == {
        "integrated": ["a"], "reconciled": [], "staleDone": [], "runnable": ["c"]}
    assert rc.plan(doc, {"new": "s"}, "main", "new").writes == (("unit", "new", "reconciled-from-trailer:s"),)
    assert rc.select_units(doc, None, all_units=True) == ["a", "b", "c"]
    with pytest.raises(UsageError, match="not both"):
        rc.select_units(doc, ["a"], all_units=True)
    for bad in ("", "a,,b", " , "):
        with pytest.raises(UsageError):
            rc.parse_units_arg(bad)
    with pytest.raises(UsageError):
        rc.select_units(doc, [])
    assert rc.parse_units_arg(" a, b ") == ["a", "b"]


def test_malformed_units_are_not_done() -> None:
    doc = {"units": {"a": None, "b": "done", "c": {"status": "done"}}, "openItems": "junk"}
    p = rc.plan(doc, {"a": "s"}, "main")
    assert p.summary() == {"integrated": ["a"], "reconciled": ["a"], "staleDone": ["c"], "runnable": ["b"]}
    assert rc.plan({"units": []}, {}, "main").summary()["runnable"] == []


def test_an_identical_open_blocker_is_not_rewritten() -> None:
    doc = doc_with(c="done")
    doc["openItems"] = [{"at": "t", **rc.stale_done_item("c", "main")}]
    p = rc.plan(doc, {}, "main")
    assert p.stale_done == ("c",) and p.writes == ()
    assert rc.plan(doc, {}, "release").writes[0][0] == "item"  # another ref: a new issue text


# ---- end to end with the API's Run ------------------------------------------------------------------

def test_reconcile_a_real_run_and_a_rewritten_branch(repo: Path, tmp_path: Path) -> None:
    import resumable

    commit(repo, "base")
    a = commit(repo, "integrate a", task="a", run="run1")
    b = commit(repo, "integrate b", task="b", run="run1")
    run = resumable.open_run("run1", runs_dir=str(tmp_path / "runs"))
    run.init("demo", units=["a", "b", "c"])
    run.unit("b", "done")

    p = rc.reconcile(run.doc, repo, "main", run_id="run1")
    assert rc.apply(p, run)["reconciled"] == ["a"]
    doc = run.doc
    assert doc["units"]["a"]["status"] == "done"
    assert doc["units"]["a"]["note"] == f"reconciled-from-trailer:{a}"
    assert doc["units"]["b"].get("note", "") == ""  # already done: untouched
    assert rc.reconcile(run.doc, repo, "main").writes == ()  # idempotent

    # Rewrite history: b's commit is lost, so its done is stale; it stays done, a blocker opens.
    git(repo, "reset", "-q", "--hard", a)
    p = rc.reconcile(run.doc, repo, "main")
    assert p.summary() == {"integrated": ["a"], "reconciled": [], "staleDone": ["b"], "runnable": ["c"]}
    rc.apply(p, run)
    doc = run.doc
    assert doc["units"]["b"]["status"] == "done"
    blockers = [it for it in doc["openItems"] if it.get("id") == "stale-done:b"]
    assert len(blockers) == 1 and blockers[0]["severity"] == "blocker" and blockers[0]["kind"] == "stale-done"
    assert b not in blockers[0]["issue"] and "reachable from main" in blockers[0]["issue"]
    rc.apply(rc.reconcile(run.doc, repo, "main"), run)
    assert len([it for it in run.doc["openItems"] if it.get("id") == "stale-done:b"]) == 1


def test_shallow_clone_is_flagged(repo: Path, tmp_path: Path) -> None:
    for i in range(3):
        commit(repo, f"c{i}", task=f"t{i}")
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow))
    p = rc.reconcile(doc_with(t0="done"), shallow, "HEAD")
    assert p.stale_done == ("t0",)
    assert p.warnings and "shallow clone" in p.warnings[0]
    assert rc.reconcile(doc_with(t0="done"), repo, "main").warnings == ()


def test_usage_errors_come_before_git(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        rc.reconcile(doc_with(), tmp_path / "not-even-a-dir", "main", ["a"], all_units=True)


def test_ten_thousand_commits(repo: Path) -> None:
    """The size the issue names; its speed is measured by benchmarks/reconcile.py, not asserted."""
    fast_import_history(repo, 10_000)
    units = {f"t{i}": {"status": "done" if i % 2 else "pending"} for i in range(1, 10_001)}
    units["lost"] = {"status": "done"}
    started = time.perf_counter()
    p = rc.reconcile({"units": units, "openItems": []}, repo, "main", run_id="r1")
    elapsed = time.perf_counter() - started
    assert len(p.integrated) == 10_000
    assert len(p.reconciled) == 5_000 and p.stale_done == ("lost",) and p.runnable == ()
    assert p.integrated["t10000"] == git(repo, "rev-parse", "main")
    print(f"reconcile over 10,000 commits: {elapsed:.3f}s")  # informational (pytest -s)


def test_git_subcommands_are_read_only(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    commit(repo, "one", task="a")
    seen: list[list[str]] = []
    real = subprocess.run

    def spy(argv: list[str], *args: Any, **kwargs: Any) -> Any:
        seen.append(argv)
        assert kwargs.get("shell") is not True
        return real(argv, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", spy)
    rc.reconcile(doc_with(a="pending"), repo, "main")
    subs = set()
    for argv in seen:
        rest = argv[argv.index("-C") + 2:]
        while rest[0] == "-c":
            rest = rest[2:]
        subs.add(rest[0])
    assert subs <= {"rev-parse", "log"} and os.fspath(repo) in seen[0]
    with pytest.raises(ValueError):
        from resumable.git.log import run_git

        run_git(str(repo), ["commit", "-m", "x"])
