"""``validate --root DIR`` (artifact paths exist under DIR, links resolved, never outside it) and
``--repo [NAME=]DIR`` (commit SHAs exist in that git repository, asked read-only)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from ledgerhelpers import RUN, cli, document

from corehelpers import needs
from resumable import ledger
from resumable.errors import InvalidInputError

needs_git = needs("git", "apt-get install -y git")


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "repo"
    path.mkdir()
    _git(path, "init", "-q")
    (path / "f").write_text("x")
    _git(path, "add", "f")
    _git(path, "commit", "-q", "-m", "one")
    return path, _git(path, "rev-parse", "HEAD")


def test_root_checks_each_artifact_exists(tmp_path: Path) -> None:
    root = tmp_path / "work"
    (root / "src").mkdir(parents=True)
    (root / "src" / "foo.py").write_text("")
    doc = document(artifact_paths=["src/foo.py", "tests/test_foo.py"])
    result = ledger.validate(doc, root=root)
    assert not result.is_valid
    assert result.errors == (f"Artifact path does not exist under {root}: tests/test_foo.py",)
    (root / "tests").mkdir()
    (root / "tests" / "test_foo.py").write_text("")
    assert ledger.validate(doc, root=root).is_valid


def test_root_refuses_artifacts_that_escape_through_a_link(tmp_path: Path) -> None:
    root = tmp_path / "work"
    root.mkdir()
    (tmp_path / "secret").write_text("")
    (root / "escape").symlink_to(tmp_path)
    result = ledger.validate(document(artifact_paths=["escape/secret"]), root=root)
    assert result.errors == (f"Artifact path escapes root {root}: escape/secret",)


def test_root_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="is not a directory"):
        ledger.validate(document(), root=tmp_path / "missing")


@needs_git
def test_repo_checks_each_commit(repo: tuple[Path, str], base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, head = repo
    payload = {"phase": "implement", "branch_name": "b", "commit_sha": head[:7], "files_changed": []}
    good = document(repo_commit_map={"repo": head}, phase_payload=payload)
    assert ledger.validate(good, repos=[str(path)]).is_valid
    missing = "0" * 40
    bad = document(repo_commit_map={"repo": head, "other": missing}, phase_payload=payload)
    result = ledger.validate(bad, repos=[str(path)])
    assert result.errors == (f"Commit {missing} (repo 'other') not found in {path}",)
    # NAME=DIR binds one map entry; the default repository is then not asked about it
    assert ledger.validate(bad, repos=[f"repo={path}"]).is_valid
    # and the CLI
    ledger.write_checkpoint(bad, base_dir=base)
    code, out, _ = cli(capsys, "validate", "--ticket-id", "OMN-2143", "--run-id", RUN, "--phase", "implement",
                       "--repo", str(path), base=base)
    assert code == 1 and json.loads(out)["errors"] == [f"Commit {missing} (repo 'other') not found in {path}"]


@needs_git
def test_repo_that_is_not_a_repository(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="is not a git repository"):
        ledger.validate(document(repo_commit_map={"r": "a1b2c3d"}), repos=[str(tmp_path)])


@needs_git
def test_git_is_asked_read_only_with_a_fixed_argv(repo: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    path, head = repo
    calls: list[list[str]] = []
    real = subprocess.run

    def spy(argv: list[str], **kw: object) -> subprocess.CompletedProcess[bytes]:
        calls.append(list(argv))
        assert "shell" not in kw
        return real(argv, **kw)  # type: ignore[call-overload, no-any-return]

    monkeypatch.setattr(subprocess, "run", spy)
    monkeypatch.setenv("GIT_DIR", "/nonexistent")  # an override in the environment must not redirect git
    payload = {"phase": "implement", "branch_name": "b", "commit_sha": head, "files_changed": []}
    assert ledger.validate(document(repo_commit_map={"r": head}, phase_payload=payload), repos=[str(path)]).is_valid
    assert calls[-1] == ["git", "-C", str(path), "cat-file", "-e", f"{head}^{{commit}}"]
    assert {c[3] for c in calls} <= {"rev-parse", "cat-file"}
