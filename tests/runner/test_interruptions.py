"""Failure modes of the runner process itself: SIGINT, SIGKILL, and a second runner."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from pathlib import Path

from runnerhelpers import pid_alive, spawn_cli, status_of, units, write

JOB = """
[job]
name = "long"
grace = "0.3s"
[steps.a]
run = "echo a >> trace"
[steps.b]
run = "echo $$ > bpid; echo b >> trace; test -f fast || sleep 30"
needs = ["a"]
[steps.c]
run = "echo c >> trace"
needs = ["b"]
"""


def _wait_for(path: Path, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def test_sigint_mid_run_then_resume(work: Path) -> None:
    write(work / "resumable.toml", JOB)
    p = spawn_cli([], work)
    _wait_for(work / "bpid")
    time.sleep(0.1)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=10)
    assert p.returncode == 130, (out, err)
    bpid = int((work / "bpid").read_text())
    assert not pid_alive(bpid)
    assert status_of(work, "long") == {"a": "done", "b": "interrupted", "c": "pending"}
    assert units(work, "long")["b"]["attempts"][0]["status"] == "interrupted"
    assert "resume with: resumable run" in out
    (work / "fast").touch()
    p = spawn_cli([], work)
    out, err = p.communicate(timeout=20)
    assert p.returncode == 0, (out, err)
    assert (work / "trace").read_text().split() == ["a", "b", "b", "c"]  # a did not re-run
    assert [a["n"] for a in units(work, "long")["b"]["attempts"]] == [1, 2]


def test_second_ctrl_c_kills_at_once(work: Path) -> None:
    write(work / "resumable.toml", JOB.replace('grace = "0.3s"', 'grace = "30s"').replace(
        "test -f fast || sleep 30", "trap '' TERM; sleep 30"))
    p = spawn_cli([], work)
    _wait_for(work / "bpid")
    time.sleep(0.1)
    p.send_signal(signal.SIGINT)
    # Said at once, not after the grace period.
    assert _line(p, 2.0) == "resumable: stopping 1 step (Ctrl-C again to kill now)\n"
    time.sleep(0.3)
    assert p.poll() is None  # waiting out the 30 s grace
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    assert _line(p, 2.0) == "resumable: killing 1 step now\n"
    p.communicate(timeout=10)
    assert p.returncode == 130 and time.monotonic() - t0 < 3


def _line(p: subprocess.Popen[str], timeout: float) -> str:
    """The next line the runner writes to stderr, or "" when none comes within ``timeout``."""
    assert p.stderr is not None
    ready, _, _ = select.select([p.stderr], [], [], timeout)
    return p.stderr.readline() if ready else ""


def test_sigkill_of_runner_then_resume_reaps_leftovers(work: Path) -> None:
    write(work / "resumable.toml", JOB)
    p = spawn_cli([], work)
    _wait_for(work / "bpid")
    time.sleep(0.1)
    p.kill()
    p.wait()
    bpid = int((work / "bpid").read_text())
    assert pid_alive(bpid)  # its own session: the step outlives the runner
    assert status_of(work, "long")["b"] == "in_progress"
    (work / "bpid").unlink()
    (work / "fast").touch()
    p = spawn_cli([], work)
    out, err = p.communicate(timeout=20)
    assert p.returncode == 0, (out, err)
    assert "leftover" in err
    assert not pid_alive(bpid)
    assert (work / "trace").read_text().split() == ["a", "b", "b", "c"]
    atts = units(work, "long")["b"]["attempts"]
    assert [(a["n"], a["status"]) for a in atts] == [(1, "interrupted"), (2, "done")]


def test_two_runners_on_one_job(work: Path) -> None:
    write(work / "resumable.toml", JOB)
    p = spawn_cli([], work)
    try:
        _wait_for(work / "bpid")
        q = spawn_cli([], work)
        _out, err = q.communicate(timeout=10)
        assert q.returncode == 2
        assert f"pid {p.pid} on {os.uname().nodename}" in err and "started" in err
        assert err.count("\n") == 1
        # --reset while live is refused too (through the runner lock, not a timer), deleting nothing
        r = spawn_cli(["--reset"], work)
        _out, err = r.communicate(timeout=10)
        assert r.returncode == 2 and "already being run" in err and err.count("\n") == 1
        assert (work / "runs" / "long.json").exists()
    finally:
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=10)
    assert p.returncode == 130
    assert status_of(work, "long")["b"] == "interrupted"
