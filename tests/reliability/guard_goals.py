"""The guard under kills (``resumable guard``): invocations of one recurring job SIGKILLed at random
points, the next ones started before the last has ended, as a cron or a watchdog would.

What must hold, whatever was killed when:

- never two passes at once: a killed guard's command keeps a copy of the pass lock, so the next
  invocation SKIPs until that command has ended (before, the next pass started beside it);
- ``--max-passes`` is never overrun: a pass is counted before its command starts, so commands run
  never outnumber the passes counted, and those never exceed the cap (before, 40 invocations with
  11 kills ran the command 33 times while 30 passes were recorded);
- every pass counted is in the history with exactly one outcome, once an invocation has held the
  lock after the last kill (a pass whose guard was killed is recorded then, as a failure).

The command marks its start and end in a file; an atomic ``mkdir`` tells an overlap. No assertion
depends on timing: a loaded machine makes fewer kills land mid-pass, never a wrong answer.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from .goals import Result

RESUMABLE = str(Path(sys.executable).parent / "resumable")


def _command(work: Path) -> list[str]:
    """A pass: record its start, hold an atomic marker while it runs (a second one at once is an
    overlap), take a moment, record its end."""
    script = (f'echo "begin $RESUMABLE_GUARD_PASS" >> {work}/runs; '
              f"if mkdir {work}/inpass 2>/dev/null; then sleep 0.$((RANDOM % 5 + 2)); rmdir {work}/inpass; "
              f'else echo "overlap $RESUMABLE_GUARD_PASS" >> {work}/runs; fi; '
              f'echo "end $RESUMABLE_GUARD_PASS" >> {work}/runs')
    return ["sh", "-c", script]


def _spawn(work: Path, max_passes: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([RESUMABLE, "guard", "job", "--state-dir", str(work / "state"), "--max-passes",
                             str(max_passes), "--breaker", "0", "--", *_command(work)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, start_new_session=True)


def _settle_all(work: Path, max_passes: int, env: dict[str, str], deadline: float) -> None:
    """Wait for orphaned commands to end (the lock is free again), then invoke once more, which
    records a pass whose guard was killed."""
    lock = work / "state" / "job.lock"
    import fcntl

    while time.monotonic() < deadline:
        try:
            fd = os.open(lock, os.O_RDONLY)
        except FileNotFoundError:
            break
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            time.sleep(0.05)
        finally:
            os.close(fd)
    proc = _spawn(work, max_passes, env)
    proc.wait(timeout=60)


def _state(work: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    path = work / "state" / "job-state.yaml"
    if path.exists():
        for line in path.read_text().splitlines():
            key, sep, rest = line.partition(":")
            if sep and not key.startswith("#"):
                values[key] = rest.split()[0] if rest.split() else ""
    return values


def r12_guard_kills(base: Path, invocations: int = 40, kill_rate: float = 0.3, max_passes: int = 25,
                    seed: int = 12) -> Result:
    rng = random.Random(seed)
    work = base / "guard"
    work.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    env.update(HOME=str(base / "home"), XDG_STATE_HOME=str(base / "xdg"))
    res = Result("R12", True, "")
    kills = 0
    live: list[subprocess.Popen[bytes]] = []
    for _ in range(invocations):
        proc = _spawn(work, max_passes, env)
        live.append(proc)
        if rng.random() < kill_rate:
            time.sleep(rng.uniform(0.05, 0.8))  # before the lock, while counting, or mid-command
            proc.send_signal(signal.SIGKILL)
            kills += 1
        if rng.random() < 0.5:  # the next invocation does not always wait for this one
            proc.wait(timeout=60)
        for p in [p for p in live if p.poll() is not None]:
            live.remove(p)
            err = p.stderr.read().decode("utf-8", "replace") if p.stderr else ""
            if p.returncode not in (0, -signal.SIGKILL) or "Traceback" in err or "internal error" in err:
                res.fail(f"an invocation ended {p.returncode}: {err.strip()[:200]}")
    for p in live:
        p.wait(timeout=60)
    _settle_all(work, max_passes, env, time.monotonic() + 60)
    lines = (work / "runs").read_text().splitlines() if (work / "runs").exists() else []
    runs = sum(1 for line in lines if line.startswith("begin "))
    overlaps = [line for line in lines if line.startswith("overlap ")]
    got = _state(work)
    counted = int(got.get("pass_count", "0"))
    events = [json.loads(line) for line in (work / "state" / "job-history.jsonl").read_text().splitlines()] \
        if (work / "state" / "job-history.jsonl").exists() else []
    outcomes = sorted(e["pass"] for e in events if e.get("event") == "pass")
    if overlaps:
        res.fail(f"{len(overlaps)} passes ran beside another: {overlaps[:3]}")
    if runs > counted:
        res.fail(f"the command ran {runs} times but {counted} passes were counted")
    if counted > max_passes:
        res.fail(f"{counted} passes counted over --max-passes {max_passes}")
    if outcomes != list(range(1, counted + 1)):
        res.fail(f"passes with a recorded outcome {outcomes} are not exactly 1..{counted}")
    if got.get("pass_started_at", "none") != "none":
        res.fail(f"a pass is still unfinished after the last invocation: {got}")
    killed_passes = sum(1 for e in events if e.get("event") == "pass" and e.get("exit_code") is None)
    res.figure = (f"{invocations} guard invocations, {kills} SIGKILLed at random points, --max-passes {max_passes}: "
                  f"the command ran {runs} times, {counted} passes counted ({killed_passes} recorded as failures "
                  f"after their guard was killed), {len(overlaps)} overlaps")
    return res
