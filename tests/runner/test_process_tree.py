"""A timeout kills the whole tree: three levels of descendants, one ignoring SIGTERM, all holding
the log (stdout) open. And a step's leftovers never outlive it; a reused pid is never killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import pid_alive, run_cli, status_of

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


def test_reused_pid_is_never_killed() -> None:
    from resumable.runner.process import GroupRecord, reap_leftovers

    other = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        time.sleep(0.05)
        # A record naming this pgid but with another start token: a reused pid, not ours.
        killed = reap_leftovers([GroupRecord(other.pid, "12345")], "some-dead-runner", grace=0.1)
        assert killed == [] and other.poll() is None
        from resumable.runner.process import start_token

        killed = reap_leftovers([GroupRecord(other.pid, start_token(other.pid))], None, grace=0.5)
        assert killed == [other.pid]
        other.wait(timeout=2)
    finally:
        if other.poll() is None:
            os.kill(other.pid, signal.SIGKILL)
            other.wait()
