"""A full disk during a run (the store's fault seam, resumable.fsio) does not stop the work."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from pathlib import Path

import pytest
from runnerhelpers import run_cli, status_of, write

from resumable import fsio

JOB = """
[job]
name = "df"
[steps.a]
run = "echo a >> trace; test -f once || touch once full"
[steps.b]
run = "echo b >> trace"
needs = ["a"]
[steps.c]
run = "echo c >> trace; {fix}"
needs = ["b"]
"""


@pytest.fixture
def full_disk(work: Path) -> Iterator[None]:
    """ENOSPC on every store write while the file `full` exists (the steps create/remove it)."""
    flag = work / "full"

    def hook(op: str, path: str) -> None:
        if op in ("write", "fsync") and flag.exists():
            raise OSError(errno.ENOSPC, "No space left on device", path)

    old = fsio.set_fault_hook(hook)
    yield
    fsio.set_fault_hook(old)


def test_disk_full_then_recovered(work: Path, full_disk: None) -> None:
    write(work / "resumable.toml", JOB.format(fix="rm full"))
    r = run_cli([])
    assert (work / "trace").read_text().split() == ["a", "b", "c"]  # the work went on
    assert r.output.count("could not save the run's status") == 1  # warned once
    # The disk came back before the end: every queued transition was saved, in order.
    assert r.exit_code == 0, r.output
    assert status_of(work, "df") == {"a": "done", "b": "done", "c": "done"}


def test_disk_stays_full(work: Path, full_disk: None) -> None:
    write(work / "resumable.toml", JOB.format(fix="true"))
    r = run_cli([])
    assert (work / "trace").read_text().split() == ["a", "b", "c"]
    assert r.exit_code == 1
    assert "could not save the run's status: a -> done" in r.output
    assert "free disk space and re-run the same command" in r.output
    assert "Traceback" not in r.output
    (work / "full").unlink()
    # What was saved says a is still in progress: the next run re-runs only what is not saved.
    assert status_of(work, "df")["a"] == "in_progress"
    r = run_cli([])
    assert r.exit_code == 0 and status_of(work, "df") == {"a": "done", "b": "done", "c": "done"}
