"""`status --watch` left open on an ended run while it is run again (`run --force`, or a re-run
after a failure): once the new session has started, no frame shows the previous session's
result, only what the new session is doing and then its own result."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from runnerhelpers import spawn_cli, write

STATUS = [sys.executable, "-c", "from resumable.cli.status import status_command; status_command(prog_name='s')"]
JOB = '[job]\nname = "w"\n[steps.a]\nrun = "sleep 0.5"\n[steps.b]\nrun = "sleep 0.5; exit {code}"\nneeds = ["a"]\n'


def _watch(work: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, RESUMABLE_DIR=str(work / "runs"), NO_COLOR="1")
    return subprocess.Popen([*STATUS, "--watch", "--no-color", "--wait", "60", "w"], cwd=work, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _run(work: Path, *args: str) -> int:
    p = spawn_cli(list(args), work)
    p.communicate(timeout=60)
    return p.returncode


def _results(frame: str) -> list[str]:
    return [line.split(None, 1)[1] for line in frame.splitlines() if line.startswith("result ")]


def _watched_rerun(work: Path, *args: str) -> tuple[str, list[str]]:
    """The waiting line, and every frame the watch printed while the next session ran."""
    watch = _watch(work)
    time.sleep(1.0)
    assert watch.poll() is None  # waiting for the next session
    _run(work, *args)
    out, err = watch.communicate(timeout=60)
    assert watch.returncode == 0, err
    first, _, rest = out.partition("\n")
    assert first.endswith("waiting for its next session to start (Ctrl-C to stop)"), out
    assert rest, out
    return first, rest.split("── ")


def test_run_force_shows_only_the_new_sessions_result(work: Path) -> None:
    write(work / "resumable.toml", JOB.format(code=0))
    assert _run(work) == 0
    write(work / "resumable.toml", JOB.format(code=3))  # the forced session fails where the last one did not
    first, frames = _watched_rerun(work, "--force")
    assert "(2 done)" in first  # the ended session, named on the waiting line only
    for frame in frames[:-1]:
        assert _results(frame) == [], frame  # a session under way has no result yet
    assert _results(frames[-1]) == ["1 done, 1 failed"], frames[-1]


def test_a_rerun_after_a_failure_shows_only_the_new_sessions_result(work: Path) -> None:
    write(work / "resumable.toml", JOB.format(code=3))
    assert _run(work) == 1
    write(work / "resumable.toml", JOB.format(code=0))
    first, frames = _watched_rerun(work)
    assert "(1 done, 1 failed)" in first
    for frame in frames[:-1]:
        assert _results(frame) == [], frame
    assert _results(frames[-1]) == ["1 done, 1 skipped"], frames[-1]
