"""The file store's runner lease (store/files/lease.py): a reader's brief probe never turns a runner
away, a live runner always does, and a lease file a newer resumable wrote is refused in one line."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from corehelpers import assert_error, cli, ok
from resumable.errors import NewerFormatError, RefusedError
from resumable.store.files import lease as lease_module
from resumable.store.files.lease import PROBE_GRACE, FileRunnerLease


@pytest.fixture
def lock_path(tmp_path: Path) -> Path:
    runs = tmp_path / "runs"
    runs.mkdir(mode=0o755)
    return runs / "j.runner.lock"


def hold_shared(path: Path, seconds: float, held: threading.Event) -> None:
    """What `resumable status` or a seed verb's write does to ask whether a runner holds the run."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        held.set()
        time.sleep(seconds)
    finally:
        os.close(fd)


def probe_while(path: Path, seconds: float) -> threading.Thread:
    held = threading.Event()
    thread = threading.Thread(target=hold_shared, args=(path, seconds, held), daemon=True)
    thread.start()
    assert held.wait(5)
    return thread


@pytest.mark.parametrize("content", ["", '{"v":2,"pid":1,"host":"h","startedAt":"x"}'])
def test_a_runner_starting_during_a_probe_gets_the_lease(lock_path: Path, content: str) -> None:
    """A fresh lease file, and one a finished runner left: the probe is gone in 50 ms."""
    lock_path.write_text(content)
    thread = probe_while(lock_path, 0.05)
    lease = FileRunnerLease(str(lock_path), "j")
    lease.acquire()
    try:
        assert json.loads(lock_path.read_text())["pid"] == os.getpid()
    finally:
        lease.release()
        thread.join()


def test_a_lock_held_past_the_grace_is_refused_as_before(lock_path: Path) -> None:
    """Held for 2 s by something the file does not prove to be a live runner (a runner that took
    the lock and never wrote itself in, an old version's runner): refused after the grace."""
    lock_path.write_text("")
    thread = probe_while(lock_path, 2.0)
    t0 = time.monotonic()
    with pytest.raises(RefusedError, match="'j' is already being run by"):
        FileRunnerLease(str(lock_path), "j").acquire()
    elapsed = time.monotonic() - t0
    assert PROBE_GRACE <= elapsed < PROBE_GRACE + 1.0, elapsed
    assert lock_path.read_text() == ""
    thread.join()


LIVE_RUNNER = """
import sys, time
from resumable.store.files.lease import FileRunnerLease
lease = FileRunnerLease(sys.argv[1], "j")
lease.acquire()
print("held", flush=True)
time.sleep(float(sys.argv[2]))
lease.release()
"""


def test_a_live_runner_is_refused_at_once_naming_it(lock_path: Path) -> None:
    runner = subprocess.Popen([sys.executable, "-c", LIVE_RUNNER, str(lock_path), "2"], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert runner.stdout is not None and runner.stdout.readline() == "held\n"
        t0 = time.monotonic()
        with pytest.raises(RefusedError, match=f"already being run by pid {runner.pid} on "):
            FileRunnerLease(str(lock_path), "j").acquire()
        # The file proves a live runner: no waiting for it to let go.
        assert time.monotonic() - t0 < PROBE_GRACE
    finally:
        runner.kill()
        runner.wait()


def test_held_by_live_runner_needs_this_host_a_live_pid_its_start_and_a_secret() -> None:
    live = lease_module.held_by_live_runner
    me = {"pid": os.getpid(), "host": socket.gethostname(), "start": lease_module._proc_start(os.getpid()),
          "secret": "s" * 32}
    assert live(me)
    assert not live({**me, "secret": None})  # released: the secret goes when the lease does
    assert not live({**me, "start": "1"})  # the pid was reused
    assert not live({**me, "host": "elsewhere"})
    assert not live({**me, "pid": True})
    assert not live({})


# --- a lease file from a newer resumable ----------------------------------------------------------


def test_a_newer_lease_file_is_refused_and_left_as_it_was(lock_path: Path) -> None:
    text = json.dumps({"v": lease_module.FORMAT + 1, "pid": 1, "host": "h", "startedAt": "x",
                       "leftovers": {"kept": "in a shape this version does not know"}})
    lock_path.write_text(text)
    lock_path.chmod(0o644)
    with pytest.raises(NewerFormatError, match=r"j\.runner\.lock was written by a newer resumable \(runner lease"
                                               r" format 3, this one reads up to 2\): upgrade resumable"):
        FileRunnerLease(str(lock_path), "j").acquire()
    assert lock_path.read_text() == text and lock_path.stat().st_mode & 0o777 == 0o644
    # refused only by the newer format: the lock itself was let go
    fd = os.open(lock_path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)


def test_the_runner_refuses_a_newer_lease_file_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "resumable.toml").write_text('[job]\nname = "j"\n[steps.a]\nrun = "echo a >> trace"\n')
    runs = tmp_path / "runs"
    ok(cli("run", "-q", runs=runs, cwd=tmp_path))
    lease = runs / "j.runner.lock"
    info = json.loads(lease.read_text())
    info["v"] = lease_module.FORMAT + 1
    lease.write_text(json.dumps(info))
    before = lease.read_bytes()
    assert_error(cli("run", "--force", runs=runs, cwd=tmp_path), 1, "j.runner.lock was written by a newer resumable",
                 "upgrade resumable")
    assert (tmp_path / "trace").read_text() == "a\n" and lease.read_bytes() == before
