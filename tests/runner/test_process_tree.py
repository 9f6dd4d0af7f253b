"""A timeout kills the whole tree: three levels of descendants, one ignoring SIGTERM, all holding
the log (stdout) open. And a step's leftovers never outlive it; a reused pid is never killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from runnerhelpers import pid_alive, run_cli, status_of

LEVEL = """
import os, signal, subprocess, sys, time
depth = int(sys.argv[1])
if depth == 2:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # must still die (SIGKILL after the grace)
if depth < 3:
    subprocess.Popen([sys.executable, __file__, str(depth + 1)])  # inherits stdout: the log
open(f"pid{depth}.tmp", "w").write(str(os.getpid()))
os.rename(f"pid{depth}.tmp", f"pid{depth}")
print("level", depth, flush=True)
time.sleep(60)
"""


def _pids(work: Path) -> list[int]:
    return [int((work / f"pid{d}").read_text()) for d in (1, 2, 3) if (work / f"pid{d}").exists()]


def test_timeout_kills_three_levels(work: Path) -> None:
    (work / "level.py").write_text(LEVEL)
    t0 = time.monotonic()
    r = run_cli(["--job", "t", "--step", f"a:{sys.executable} level.py 1 & wait",
                 "--step-timeout", "a:1", "--grace", "0.3"])
    assert r.exit_code == 1
    assert time.monotonic() - t0 < 5
    assert status_of(work, "t") == {"a": "timeout"}
    pids = _pids(work)
    assert len(pids) == 3
    deadline = time.monotonic() + 2
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(pid_alive(p) for p in pids)


def test_leftover_background_process_of_a_finished_step_is_stopped(work: Path) -> None:
    r = run_cli(["--job", "bg", "--step", "a:sleep 60 & echo $! > bgpid; exit 0", "--grace", "0.2"])
    assert r.exit_code == 0
    assert not pid_alive(int((work / "bgpid").read_text()))


def test_only_processes_carrying_the_secret_are_reaped() -> None:
    """A lock file names groups; only processes proven to carry the recording runner's secret in
    their environment are signalled (wherever they are): a reused pid, or any process a forged
    file names, never is, even with its real start time recorded."""
    from resumable.runner.process import TOKEN_ENV, reap, start_token
    from resumable.store.values import LeftoverGroup

    other = subprocess.Popen(["sleep", "30"], start_new_session=True)
    ours = subprocess.Popen(["sleep", "30"], start_new_session=True, env={**os.environ, TOKEN_ENV: "s3cret"})
    try:
        time.sleep(0.05)
        forged = LeftoverGroup(other.pid, start_token(other.pid), "forged")
        gone, alive = reap([forged], grace=0.1)
        assert other.poll() is None and alive == []
        assert gone == [forged]  # nothing of ours is in that group: proven gone, dropped
        mine = LeftoverGroup(ours.pid, start_token(ours.pid), "s3cret")
        wrong_secret = LeftoverGroup(ours.pid, start_token(ours.pid), "other")
        gone, alive = reap([wrong_secret], grace=0.1)
        assert ours.poll() is None
        gone, alive = reap([mine], grace=0.5)
        assert gone == [mine] and alive == []
        ours.wait(timeout=2)
    finally:
        for p in (other, ours):
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
                p.wait()
