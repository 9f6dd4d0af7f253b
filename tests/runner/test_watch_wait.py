"""`status --watch` started before the run: it waits for the session to start (up to --wait, or
Ctrl-C), then follows it, and what it shows is that session's, not the previous one's."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from runnerhelpers import spawn_cli, write

STATUS = [sys.executable, "-c", "from resumable.cli.status import status_command; status_command(prog_name='s')"]
JOB = '[job]\nname = "w"\n[steps.a]\nrun = "sleep 0.3; echo {v} > out"\n[steps.b]\nrun = "sleep 0.3"\nneeds = ["a"]\n'


def _watch(work: Path, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, RESUMABLE_DIR=str(work / "runs"), NO_COLOR="1")
    return subprocess.Popen([*STATUS, "--watch", "--no-color", *args], cwd=work, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _run(work: Path) -> None:
    p = spawn_cli([], work)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 0, err


def test_watch_started_before_the_first_run_waits_for_it_then_follows_it(work: Path) -> None:
    write(work / "resumable.toml", JOB.format(v=1))
    watch = _watch(work, "--wait", "60", "w")
    time.sleep(1.0)
    assert watch.poll() is None  # still waiting
    _run(work)
    out, err = watch.communicate(timeout=60)
    assert watch.returncode == 0, err
    assert out.splitlines()[0] == "no run 'w' yet; waiting for it to start (Ctrl-C to stop)"
    frames = out.split("── ")
    assert "2/2 done" in frames[-1]


def test_watch_of_an_ended_run_waits_for_its_next_session_and_shows_only_that(work: Path) -> None:
    write(work / "resumable.toml", JOB.format(v=1))
    _run(work)
    write(work / "resumable.toml", JOB.format(v=2))  # a's command changed: the next session re-runs it
    watch = _watch(work, "w")  # no --wait: until Ctrl-C or the next session
    time.sleep(1.0)
    assert watch.poll() is None
    _run(work)
    out, err = watch.communicate(timeout=60)
    assert watch.returncode == 0, err
    first, *rest = out.splitlines()
    assert first.startswith("run w is done (")
    assert first.endswith("waiting for its next session to start (Ctrl-C to stop)")
    # The previous session's screen is never printed: after the waiting line, the new session's.
    assert rest and "2/2 done" in out.split("── ")[-1]
    assert (work / "out").read_text() == "2\n"


def test_wait_gives_up_after_its_duration(work: Path) -> None:
    write(work / "resumable.toml", JOB.format(v=1))
    _run(work)
    watch = _watch(work, "--wait", "1s", "w")
    out, _ = watch.communicate(timeout=60)
    assert watch.returncode == 1
    assert out.strip().endswith("no session of run w started in time")
    watch = _watch(work, "--wait", "1s", "nope")
    out, _ = watch.communicate(timeout=60)
    assert watch.returncode == 1 and out.strip().endswith("no run 'nope' started in time")


def test_wait_without_watch_is_a_usage_error(work: Path) -> None:
    env = dict(os.environ, RESUMABLE_DIR=str(work / "runs"))
    p = subprocess.run([*STATUS, "--wait", "5"], cwd=work, env=env, text=True, capture_output=True, check=False)
    assert p.returncode == 1 and "--wait goes with --watch" in p.stderr
