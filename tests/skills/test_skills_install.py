"""`resumable skills install`: where each agent looks, what it prints, a second install that changes
nothing, a user's edit never overwritten without --force, and never a write to the real home."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from resumable import skills

RESUMABLE = str(Path(sys.executable).parent / "resumable")
NAMES = skills.names()


def cli(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    env["HOME"] = str(home)
    return subprocess.run([RESUMABLE, "skills", *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=60, check=False)


def state(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file below ``root``: content and mtime (a no-op leaves both alone)."""
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))
            if p.is_file()}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


def test_install_into_a_dir_then_again_is_a_no_op(tmp_path: Path, home: Path) -> None:
    dest = tmp_path / "dest"
    first = cli("install", "--dir", str(dest), cwd=tmp_path, home=home)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == [f"create    dest/{n}/SKILL.md" for n in NAMES] + [
        f"3 skills in {dest}: 3 written"]
    for name in NAMES:
        assert (dest / name / "SKILL.md").read_bytes() == skills.text(name)
    manifest = json.loads((dest / ".resumable-skills.json").read_text())
    assert set(manifest["skills"]) == set(NAMES)
    before = state(dest)
    second = cli("install", "--dir", str(dest), cwd=tmp_path, home=home)
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines()[-1] == f"3 skills in {dest}: nothing to write"
    assert all(line.startswith("unchanged ") for line in second.stdout.splitlines()[:-1])
    assert state(dest) == before
    assert not any(home.iterdir())


def test_an_edited_skill_is_never_overwritten_without_force(tmp_path: Path, home: Path) -> None:
    dest = tmp_path / "dest"
    assert cli("install", "--dir", str(dest), cwd=tmp_path, home=home).returncode == 0
    edited = dest / "step-runner" / "SKILL.md"
    edited.write_bytes(edited.read_bytes() + b"\nMy own note.\n")
    before = state(dest)
    refused = cli("install", "--dir", str(dest), cwd=tmp_path, home=home)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.startswith("resumable: refusing to overwrite") and str(edited) in refused.stderr
    assert "--force" in refused.stderr and len(refused.stderr.splitlines()) == 1
    assert state(dest) == before  # nothing written, the other skills included
    forced = cli("install", "--dir", str(dest), "--force", cwd=tmp_path, home=home)
    assert forced.returncode == 0, forced.stderr
    assert "overwrite dest/step-runner/SKILL.md" in forced.stdout
    assert edited.read_bytes() == skills.text("step-runner")
    # Forced once, it is resumable's again: the next install is a no-op.
    assert cli("install", "--dir", str(dest), cwd=tmp_path, home=home).stdout.endswith("nothing to write\n")


def test_an_older_copy_resumable_wrote_is_updated(tmp_path: Path, home: Path) -> None:
    """A skill still exactly as an earlier resumable wrote it (the manifest says so) is updated
    without --force: it holds no edit of the user's."""
    from resumable.skills.install import digest

    dest = tmp_path / "dest"
    assert cli("install", "--dir", str(dest), cwd=tmp_path, home=home).returncode == 0
    old = b"---\nname: step-runner\ndescription: an older version\n---\nold\n"
    (dest / "step-runner" / "SKILL.md").write_bytes(old)
    manifest_path = dest / ".resumable-skills.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["skills"]["step-runner"] = digest(old)
    manifest_path.write_text(json.dumps(manifest))
    got = cli("install", "--dir", str(dest), cwd=tmp_path, home=home)
    assert got.returncode == 0 and "update    dest/step-runner/SKILL.md" in got.stdout
    assert (dest / "step-runner" / "SKILL.md").read_bytes() == skills.text("step-runner")


def test_a_skill_of_the_same_name_that_is_not_ours_is_kept(tmp_path: Path, home: Path) -> None:
    dest = tmp_path / "dest"
    (dest / "checkpoint-resume").mkdir(parents=True)
    (dest / "checkpoint-resume" / "SKILL.md").write_text("---\nname: checkpoint-resume\ndescription: mine\n---\n")
    got = cli("install", "--dir", str(dest), cwd=tmp_path, home=home)
    assert got.returncode == 2 and "checkpoint-resume" in got.stderr
    assert sorted(p.name for p in dest.iterdir()) == ["checkpoint-resume"]


def test_a_linked_skill_folder_is_not_written_through(tmp_path: Path, home: Path) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (dest / "step-runner").symlink_to(elsewhere)
    got = cli("install", "--dir", str(dest), "--force", cwd=tmp_path, home=home)
    assert got.returncode == 2 and "symbolic link" in got.stderr
    assert not any(elsewhere.iterdir())


@pytest.mark.parametrize(("agent", "project_dir", "user_dir"), [("claude", ".claude/skills", ".claude/skills"),
                                                                ("codex", ".agents/skills", ".agents/skills")])
def test_where_each_agent_looks(agent: str, project_dir: str, user_dir: str, tmp_path: Path, home: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    deep = repo / "src" / "pkg"
    deep.mkdir(parents=True)
    got = cli("install", "--for", agent, cwd=deep, home=home)  # --project is the default
    assert got.returncode == 0, got.stderr
    for name in NAMES:
        assert (repo / project_dir / name / "SKILL.md").read_bytes() == skills.text(name)
    assert not any(home.iterdir())
    got = cli("install", "--for", agent, "--user", cwd=deep, home=home)
    assert got.returncode == 0, got.stderr
    assert sorted(p.name for p in (home / user_dir).iterdir()) == [".resumable-skills.json", *NAMES]


def test_list_and_show(tmp_path: Path, home: Path) -> None:
    listed = cli("list", cwd=tmp_path, home=home)
    assert listed.returncode == 0 and [line.split()[0] for line in listed.stdout.splitlines()] == NAMES
    shown = cli("show", "phase-checkpoint", cwd=tmp_path, home=home)
    assert shown.returncode == 0 and shown.stdout.encode() == skills.text("phase-checkpoint")
    missing = cli("show", "../etc", cwd=tmp_path, home=home)
    assert missing.returncode == 1 and missing.stderr.startswith("resumable: no skill '../etc'")
    assert not any(tmp_path.glob("*.md"))


def test_bad_options_are_one_line(tmp_path: Path, home: Path) -> None:
    for args in (("install", "--for", "vim"), ("install", "--user", "--dir", "x")):
        got = cli(*args, cwd=tmp_path, home=home)
        assert got.returncode == 1 and len(got.stderr.splitlines()) == 1, got.stderr
    afile = tmp_path / "afile"
    afile.write_text("x")
    got = cli("install", "--dir", str(afile), cwd=tmp_path, home=home)
    assert got.returncode == 1 and "not a directory" in got.stderr
