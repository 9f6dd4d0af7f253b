"""Helpers shared by the store, CLI and failure-mode tests: read a run's files the way an outside
observer would (raw bytes, plain json), and run the real `resumable` console script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from resumable.store.files import journal

BIN = Path(sys.executable).parent
RESUMABLE = shutil.which("resumable", path=str(BIN)) or str(BIN / "resumable")


def records(journal_path: Path) -> list[tuple[int, dict[str, Any]]]:
    """Every complete record of a journal (raises CorruptRunError like the store would)."""
    data = journal_path.read_bytes() if journal_path.exists() else b""
    return journal.scan(data, base=0, path=str(journal_path), after_seq=0).records


def journal_records(journal_path: Path) -> bytes:
    """A journal's bytes up to the first zero byte (resumable 0.1.0 kept zero padding after its
    records; this version never writes any)."""
    return journal_path.read_bytes().split(b"\0", 1)[0]


def snapshot_file(path: Path) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(document, marker) as `jq` would see the snapshot file."""
    doc = json.loads(path.read_text())
    marker = doc.pop("_journal", None)
    return doc, marker


def tree(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` with its bytes (to prove a command changed nothing)."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def cli(*args: str, runs: Path | None = None, cwd: Path | None = None, env: dict[str, str] | None = None,
        timeout: float = 30) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    if runs is not None:
        full_env["RESUMABLE_DIR"] = str(runs)
    full_env.update(env or {})
    return subprocess.run([RESUMABLE, *args], capture_output=True, text=True, cwd=cwd, env=full_env,
                          timeout=timeout, check=False)


def assert_error(proc: subprocess.CompletedProcess[str], code: int, *fragments: str) -> str:
    """Exit ``code``, nothing on stdout, exactly one line `resumable: ...` on stderr, no traceback."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("resumable: "), proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr == "", proc.stderr
    return proc.stdout


def journal_of(run: Any) -> Path:
    """A file-store run's journal, next to its snapshot (``run.path``)."""
    path: Path = run.path
    return path.with_name(path.name[: -len(".json")] + ".journal.jsonl")


def lock_of(run: Any) -> Path:
    path: Path = run.path
    return path.with_name(path.name[: -len(".json")] + ".lock")


def data_dir_of(run: Any) -> Path:
    path: Path = run.path
    return path.with_name(path.name[: -len(".json")])


def needs(program: str, why: str) -> pytest.MarkDecorator:
    """Skip a test when ``program`` is missing, with one line saying why; under CI (``CI=true``) a
    missing program is a failure instead: CI installs every real tool the suite drives."""
    import os
    import shutil

    missing = shutil.which(program) is None and not os.access(program, os.X_OK)
    return pytest.mark.skipif(missing and os.environ.get("CI") != "true", reason=f"{program} is not installed: {why}")


# A diamond of needs (a; b and c after a; d after both), a step beside it and one after it: the
# job the target tests select from, under both stores.
DIAMOND = """
[job]
name = "d"
[steps.a]
run = "echo a >> trace"
[steps.b]
run = "echo b >> trace"
needs = ["a"]
[steps.c]
run = "echo c >> trace"
needs = ["a"]
[steps.d]
run = "echo d >> trace"
needs = ["b", "c"]
[steps.other]
run = "echo other >> trace"
[steps.after]
run = "echo after >> trace"
needs = ["d"]
"""
