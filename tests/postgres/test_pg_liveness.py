"""What status, status --list, --watch, --resume and doctor say about a live run, against both stores
with real processes: a job being run (the local runner, or `run --store`: a submit and a worker),
the same job once its runner was SIGKILLed, workers started on their own, and a durable script that
ended without run.finish(). Every view gives the same verdict, and every hint pastes into a shell
where neither RESUMABLE_DIR nor RESUMABLE_STORE is set."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pgtests import RESUMABLE, base_env, ok
from storecase import StoreCase

HOST = socket.gethostname()


def marker_job(path: Path, name: str, marker: str, steps: str = "ab") -> None:
    """Steps that sleep until killed, each findable by its own marker in its command line."""
    body = "".join(f'[steps.{s}]\nrun = "exec sleep 600 # {marker}-{s}"\n' for s in steps)
    path.write_text(f'[job]\nname = "{name}"\n{body}')


def wait_for(what: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def running_steps(store: StoreCase, run_id: str) -> set[str]:
    got = store.r("get", run_id)
    if got.returncode != 0:
        return set()
    units = json.loads(got.stdout).get("units") or {}
    return {uid for uid, u in units.items() if u.get("status") == "in_progress"}


def kill_marked(marker: str) -> None:
    """Stop the step processes this test started (found by their marker), by pid."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if marker.encode() in cmdline and int(name) != os.getpid():
            try:
                os.kill(int(name), signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def marker(tmp_path: Path) -> Iterator[str]:
    mark = f"liveness-{os.getpid()}-{tmp_path.name}"
    yield mark
    kill_marked(mark)


def first_frame(store: StoreCase, run_id: str) -> str:
    """`status --watch` into a pipe: its first frame, up to the resume line."""
    proc = subprocess.Popen([RESUMABLE, "status", run_id, "--watch"], cwd=store.tmp, env=store.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("→"):
                break
    finally:
        proc.kill()
        proc.wait()
    return "".join(lines)


def hint_env() -> dict[str, str]:
    """A shell where the store is not set: a hint must name it itself."""
    return base_env()


def test_a_live_job_then_its_runner_killed(store: StoreCase, marker: str) -> None:
    marker_job(store.tmp / "resumable.toml", "demo", marker)
    runner = subprocess.Popen([RESUMABLE, "run", "-j", "2", "-q"], cwd=store.tmp, env=store.env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: running_steps(store, "demo") == {"a", "b"})
        status = ok(store.r("status", "demo"))
        assert status.splitlines()[0].startswith("● RUNNING"), status
        holder = "runner" if store.kind == "files" else "1 worker:"
        assert f"held by  {holder} pid {runner.pid} on {HOST} (a, b)" in status, status
        assert "→ running; once it stops, resume:" in status
        listing = ok(store.r("status", "--list")).splitlines()
        assert listing[1].startswith("● demo"), listing
        assert listing[1].endswith("(1 worker)" if store.kind == "postgres" else f"(runner pid {runner.pid} on"
                                   f" {HOST} (a, b))"), listing
        resume = ok(store.r("status", "demo", "--resume"))
        assert resume.splitlines()[0].startswith("# run demo is running (") and "once it has stopped" in resume
        watched = first_frame(store, "demo")
        assert watched.startswith("● RUNNING") and f"pid {runner.pid} on {HOST}" in watched, watched
        doctor = store.r("doctor")
        assert doctor.returncode == 0 and "1 run, 1 running" in doctor.stdout, doctor.stdout
    finally:
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait()

    status = ok(store.r("status", "demo"))
    resume = ok(store.r("status", "demo", "--resume"))
    listing = ok(store.r("status", "--list")).splitlines()
    doctor = store.r("doctor")
    assert "resume only once" not in resume  # status knows the runner is gone; so does --resume
    if store.kind == "files":
        assert status.splitlines()[0].startswith("↯ STOPPED") and "its runner is not running" in status
        hint = f"resumable run -j 2 --quiet --dir {store.runs}"
        assert f"→ resume: {hint}" in status
        assert resume.splitlines()[0] == "# run demo is marked running, but its runner is gone" and hint in resume
        assert listing[1].startswith("↯ demo") and listing[1].endswith("(stopped: its runner is gone)")
        assert doctor.returncode == 1
        assert f"run demo is running but its runner is gone (stopped) — resume it: `resumable status demo --resume"\
               f" --dir {store.runs}`" in doctor.stdout, doctor.stdout
        assert "1 run, 0 running" in doctor.stdout
    else:
        assert status.splitlines()[0].startswith("◌ WAITING") and "no worker holds a step of it" in status
        assert f"worker pid {runner.pid} on {HOST} (a, b) is gone; its lease expires in" in status, status
        worker = f"resumable worker --run demo --store {store.url}"
        assert f"→ start a worker: {worker}" in status
        assert f"  or re-run: resumable run -j 2 --quiet --store {store.url}" in status
        assert resume.splitlines()[0] == "# run demo is marked running, but no worker holds a step of it"
        assert f"#   {worker}" in resume
        assert listing[1].startswith("◌ demo") and listing[1].endswith("(waiting: no worker holds a step)")
        assert doctor.returncode == 0, doctor.stdout  # workers come and go: worth a look, not a failure
        assert f"run demo is running but no worker holds a step of it — start a worker: {worker}" in doctor.stdout


def test_workers_started_on_their_own_are_named(store: StoreCase, marker: str) -> None:
    if store.kind == "files":
        pytest.skip("workers are the PostgreSQL store's")
    marker_job(store.tmp / "pg.toml", "pgjob", marker, steps="abc")
    ok(store.r("submit", "pg.toml"))
    assert ok(store.r("status", "pgjob")).splitlines()[0].startswith("◌ WAITING")  # submitted, no worker yet
    workers = [subprocess.Popen([RESUMABLE, "worker", "--run", "pgjob", "-j", "2", "-q"], cwd=store.tmp,
                                env=store.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for _ in range(2)]
    try:
        wait_for(lambda: running_steps(store, "pgjob") == {"a", "b", "c"})
        status = ok(store.r("status", "pgjob"))
        assert status.splitlines()[0].startswith("● RUNNING"), status
        held = status.splitlines()[1]
        assert held.startswith("held by  2 workers: "), held
        for w in workers:
            assert f"pid {w.pid} on {HOST} (" in held
        assert "(1 worker)" not in ok(store.r("status", "--list")) and "(2 workers)" in ok(store.r("status", "--list"))
        doctor = store.r("doctor")
        assert doctor.returncode == 0 and "1 run, 1 running" in doctor.stdout, doctor.stdout
        assert not [line for line in doctor.stdout.splitlines() if line.startswith(("warning", "problem"))]
    finally:
        for signals in range(2):  # the first stops claiming, the second hands the steps back now
            for w in workers:
                w.send_signal(signal.SIGTERM)
            if not signals:
                time.sleep(0.3)
        for w in workers:
            try:
                w.wait(timeout=30)
            except subprocess.TimeoutExpired:
                w.kill()
                w.wait()
    status = ok(store.r("status", "pgjob"))
    assert status.splitlines()[0].startswith("◌ WAITING") and " is gone" not in status



def test_a_busy_worker_holds_no_claim_ahead_of_long_steps(store: StoreCase, marker: str) -> None:
    """Steps that run long are not claimed ahead: a worker whose slots are all busy leaves the next
    ready step to a worker started later, instead of holding it for as long as its own steps run."""
    if store.kind == "files":
        pytest.skip("workers are the PostgreSQL store's")
    marker_job(store.tmp / "pg.toml", "pgjob", marker, steps="abc")
    ok(store.r("submit", "pg.toml"))

    def worker() -> subprocess.Popen[bytes]:
        return subprocess.Popen([RESUMABLE, "worker", "--run", "pgjob", "-j", "2", "-q"], cwd=store.tmp,
                                env=store.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    workers = [worker()]
    try:
        wait_for(lambda: len(running_steps(store, "pgjob")) == 2)
        time.sleep(1.0)  # the first worker's recorder has had its turns to claim ahead, had it wanted to
        workers.append(worker())
        wait_for(lambda: running_steps(store, "pgjob") == {"a", "b", "c"})
    finally:
        for w in workers:
            w.kill()
            w.wait()

def test_a_run_store_runner_waiting_for_a_retry_is_running(store: StoreCase) -> None:
    """Between a failed attempt and its retry a `resumable run --store` holds no step; it is alive,
    so the run is running (as the local runner's run is, which holds its lease throughout)."""
    (store.tmp / "resumable.toml").write_text(
        '[job]\nname = "retry"\n[steps.a]\nrun = "test -f again || { touch again; exit 1; }"\n'
        'retries = 1\nbackoff = 30\n')
    runner = subprocess.Popen([RESUMABLE, "run", "-q"], cwd=store.tmp, env=store.env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        def failed_once() -> bool:
            got = store.r("get", "retry")
            if got.returncode != 0:
                return False
            attempts = (json.loads(got.stdout)["units"].get("a") or {}).get("attempts") or []
            return [a.get("status") for a in attempts] == ["failed"]

        wait_for(failed_once)
        status = ok(store.r("status", "retry"))
        assert status.splitlines()[0].startswith("● RUNNING"), status
        if store.kind == "postgres":
            assert f"held by  1 worker: pid {runner.pid} on {HOST} (waiting for its next step)" in status, status
        else:
            assert f"held by  runner pid {runner.pid} on {HOST}" in status, status
        doctor = store.r("doctor")
        assert doctor.returncode == 0 and "1 run, 1 running" in doctor.stdout, doctor.stdout
    finally:
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait()
    assert not ok(store.r("status", "retry")).startswith("● RUNNING")


SCRIPT = """
import resumable
run = resumable.open_run("dur", task="durable demo")

@run.step
def square(x: int) -> int:
    return x * x

print([square(i) for i in range(3)])
"""


def test_a_script_that_ended_without_finish(store: StoreCase) -> None:
    (store.tmp / "train.py").write_text(SCRIPT)
    got = subprocess.run([sys.executable, "train.py"], cwd=store.tmp, env=store.env, capture_output=True,
                         text=True, timeout=60, check=False)
    assert got.returncode == 0 and got.stdout == "[0, 1, 4]\n", got.stderr
    status = ok(store.r("status", "dur"))
    lines = status.splitlines()
    assert lines[0].startswith("↯ STOPPED") and lines[1].startswith("the script ended without run.finish()")
    assert "running for" not in status
    [finish] = [line for line in lines if line.startswith("→ finish it: ")]
    assert f"  or run the script again: {sys.executable} train.py" in status
    listing = ok(store.r("status", "--list")).splitlines()
    assert listing[1].startswith("↯ dur") and listing[1].endswith("(the script ended without run.finish())")
    resume = ok(store.r("status", "dur", "--resume"))
    assert "# run dur is marked running, but the script ended without run.finish()" in resume
    assert f"#   {finish.removeprefix('→ finish it: ')}" in resume
    doctor = store.r("doctor")
    assert doctor.returncode == 0, doctor.stdout
    assert f"run dur is running but the script ended without run.finish() — {finish[2:]}" in doctor.stdout
    # The printed line finishes it, pasted into a shell that knows nothing of the store.
    pasted = subprocess.run(["sh", "-c", finish.removeprefix("→ finish it: ")], cwd="/", env=hint_env(),
                            capture_output=True, text=True, timeout=60, check=False)
    assert (pasted.returncode, pasted.stdout) == (0, "done\n"), pasted.stderr
    assert ok(store.r("status", "dur")).startswith("✓ DONE")
    assert "(the script" not in ok(store.r("status", "--list"))
