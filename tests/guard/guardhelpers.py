"""Helpers of the guard tests (not in conftest.py, whose name every test directory shares): run
``resumable guard`` as a real process (locks, signals and process groups are what is tested)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

RESUMABLE = str(Path(sys.executable).parent / "resumable")


def guard(*args: str, timeout: float = 30, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **(env or {})}
    return subprocess.run([RESUMABLE, "guard", *args], capture_output=True, text=True, timeout=timeout, env=full,
                          check=False)


def spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([RESUMABLE, "guard", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(predicate: Callable[[], bool], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.01)


def state_of(state_dir: Path, name: str) -> dict[str, str]:
    """The state file read the way the seed's shell did: grep '^key:' | awk '{print $2}'."""
    path = state_dir / f"{name}-state.yaml"
    values = {}
    for key in ("schema_version", "pass_count", "last_status", "last_run_at", "consecutive_failures", "dry_run",
                "last_exit_code", "breaker_tripped_at", "pass_started_at"):
        out = subprocess.run(["bash", "-c", f"grep '^{key}:' \"$1\" | awk '{{print $2}}'", "_", str(path)],
                             capture_output=True, text=True, check=True).stdout
        values[key] = out.strip()
    return values


def alive(pid: int) -> bool:
    """Running (a zombie waiting to be reaped by an unrelated parent counts as dead)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
