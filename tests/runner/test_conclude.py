"""The end of a run: what it says when a save did not happen matches why it did not."""

from __future__ import annotations

import errno
import json
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
from runnerhelpers import doc, run_cli, write

from corehelpers import RESUMABLE
from resumable import fsio


def test_a_finalize_refused_because_of_a_late_finding_says_why_and_leaves_needs_attention(work: Path) -> None:
    """Another process (here the step itself) opens a finding while the run runs: finalize done is
    refused. The run is not left "running" with no runner, and nothing mentions disk space."""
    command = f"{RESUMABLE} item f --json {shlex.quote(json.dumps({'id': 'late', 'issue': 'found'}))}"
    write(work / "resumable.toml", f'[job]\nname = "f"\n[steps.a]\nrun = {json.dumps(command)}\n')
    r = run_cli([])
    assert r.exit_code == 1, r.output
    assert "free disk space" not in r.output
    assert ("resumable: the run was not finalized done: refusing finalize done — 1 open finding(s) in"
            " openItems (use needs_attention); it needs attention") in r.output
    assert "f: needs attention (1 done)" in r.output
    d = doc(work, "f")
    assert d["status"] == "needs_attention" and "open finding" in d["result"]
    assert "sessionStartedAt" not in d  # the session is closed: status shows no live runner


@pytest.fixture
def broken_store(work: Path) -> Iterator[None]:
    """EIO (not a full disk) on every store write while the file `broken` exists."""
    flag = work / "broken"

    def hook(op: str, path: str) -> None:
        if op in ("write", "fsync") and flag.exists():
            raise OSError(errno.EIO, "Input/output error", path)

    old = fsio.set_fault_hook(hook)
    yield
    fsio.set_fault_hook(old)


def test_a_save_that_failed_for_another_reason_says_that_reason(work: Path, broken_store: None) -> None:
    write(work / "resumable.toml", '[job]\nname = "e"\n[steps.a]\nrun = "touch broken"\n')
    r = run_cli([])
    assert r.exit_code == 1
    assert "could not save the run's status: a -> done" in r.output
    assert "free disk space" not in r.output
    hint = [line for line in r.output.splitlines() if "re-run the same command" in line]
    assert hint and "Input/output error" in hint[0], r.output


def test_a_resume_line_names_the_postgresql_store_without_its_password() -> None:
    import os

    from resumable.runner.conclude import resume_hint

    launch = {"argv": ["resumable", "run", "-k"], "cwd": os.getcwd()}
    assert resume_hint(launch) == "resumable run -k"
    assert resume_hint(launch, "postgresql://ann:secret@db.example:5433/runs?sslmode=require") == (
        "resumable run -k --store 'postgresql://ann@db.example:5433/runs?sslmode=require'")
    named = {"argv": ["resumable", "run", "--store", "postgresql://db/x"], "cwd": os.getcwd()}
    assert resume_hint(named, "postgresql://db/x") == "resumable run --store postgresql://db/x"
