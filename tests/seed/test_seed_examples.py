"""The ulpi seed tools' documented examples (checkpoint-resume.md), with only the command name
changed: `node checkpoint.mjs X` -> `resumable X`, `node run-status.mjs` -> `resumable status`, run
in a project whose runs live in `.ulpi/runs` (found by walking up, as the seed's reader finds them)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from corehelpers import RESUMABLE, assert_error, ok

LAUNCH = '{"scriptPath":"autonomous-pipeline/scripts/pipeline.mjs","args":{"command":"resume","run":"my-run"}}'


def sh(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith(("RESUMABLE_", "ULPI_"))}
    env["CLAUDE_CONFIG_DIR"] = str(cwd / "no-claude")
    return subprocess.run([RESUMABLE, *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=60,
                          check=False)


def test_the_documented_checkpoint_flow(tmp_path: Path) -> None:
    project = tmp_path / "project"
    work = project / "src" / "deep"
    work.mkdir(parents=True)
    (project / ".ulpi" / "runs").mkdir(parents=True)
    f = ".ulpi/runs/my-run.json"
    # init <file> --task ... --units ... --id ... --launch ...
    assert ok(sh(project, "init", f, "--task", "migrate users", "--units", "a,b,c", "--id", "my-run",
                 "--launch", LAUNCH)) == "my-run\n"
    ok(sh(project, "unit", f, "b", "pending", "--deps", "a"))
    ok(sh(project, "unit", f, "c", "pending", "--deps", "b"))
    ok(sh(project, "phase", f, "build", "running"))
    ok(sh(project, "unit", f, "a", "in_progress"))
    summary = json.loads(ok(sh(project, "get", f, "--summary")))
    assert summary["in_progress"] == ["a"] and summary["total"] == 3 and summary["done"] == 0
    assert summary["currentPhase"] == "build"
    resume = ok(sh(project, "resume", f))
    assert json.loads(resume) == {"skip": [], "eligible": ["a"], "dep_blocked": {"b": "a", "c": "a"}}
    assert resume.startswith("{\n  ") and resume.endswith("}\n")  # the seed's indented JSON
    ok(sh(project, "unit", f, "a", "done"))
    # Refusals, exit 2: demoting done, re-init over a live run, finalize done while units are open.
    assert_error(sh(project, "unit", f, "a", "pending"), 2, "refusing to demote")
    assert_error(sh(project, "init", f, "--task", "again"), 2, "LIVE checkpoint")
    assert_error(sh(project, "finalize", f, "done"), 2, "refusing finalize done", "2 unit(s) not done: b, c")
    assert ok(sh(project, "item", f, "--json", '{"phase":"test","issue":"gap"}')) == '["f-9e559be5907f"]\n'

    # The reader, from a subdirectory: it walks up to .ulpi/runs.
    text = ok(sh(work, "status"))
    assert "my-run" in text and "1/3 done" in text and ".ulpi/runs" in text
    assert ok(sh(work, "status", "my")).splitlines()[0] == text.splitlines()[0]  # an id prefix is enough
    listing = ok(sh(work, "status", "--list")).splitlines()
    assert listing[0].startswith("1 run under runs directory ") and ".ulpi/runs" in listing[0]
    assert listing[1].split()[1] == "my-run"
    assert json.loads(ok(sh(work, "status", "--json")))["id"] == "my-run"
    recipe = ok(sh(work, "status", "--resume"))
    assert "node pipeline.mjs resume --run my-run" in recipe.splitlines()
    desc = json.loads(ok(sh(work, "status", "--resume", "--json")))
    assert desc["kind"] == "codex-cli" and desc["argv"] == ["pipeline.mjs", "resume", "--run", "my-run"]
    assert desc["resumeSet"] == {"skip": ["a"], "eligible": ["b"], "dep_blocked": {"c": "b"}}
    missing = sh(work, "status", "nope")
    assert missing.returncode == 3 and 'no run matches "nope"' in missing.stderr

    # The documented fallback: a jq edit of the snapshot, adopted rather than overwritten.
    snap = project / f
    edited = subprocess.run(["jq", '.units.b.status="done"', str(snap)], capture_output=True, check=True).stdout
    snap.with_name("my-run.json.tmp").write_bytes(edited)
    snap.with_name("my-run.json.tmp").replace(snap)
    ok(sh(project, "unit", f, "c", "done"))
    doc = json.loads(ok(sh(project, "get", f)))
    assert [doc["units"][u]["status"] for u in "abc"] == ["done", "done", "done"]
    ok(sh(project, "resolve", f, "--ids", "f-9e559be5907f"))
    ok(sh(project, "finalize", f, "done", "--result", "all migrated"))
    assert "converged" in ok(sh(work, "status"))
    # gc <runs-dir>: terminal runs older than N days, into archive/<name>.json as the seed names it.
    assert ok(sh(project, "gc", ".ulpi/runs", "--keep-days", "0")).startswith("1 archived to ")
    assert (project / ".ulpi" / "runs" / "archive" / "my-run.json").is_file()


def test_bare_command_prints_one_usage_line(tmp_path: Path) -> None:
    proc = sh(tmp_path)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("resumable: usage: resumable <init|") and proc.stderr.count("\n") == 1
