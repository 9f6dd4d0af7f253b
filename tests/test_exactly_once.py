"""A step never runs twice at once, a run's state follows its job, and a live runner's run is not
overwritten behind its back (issue: hardening, items 1-4).

Real `resumable run` processes and real signals: each test kills or interrupts runners at the
points where a runner used to lose track of what an earlier one started (while reaping it, right
after starting a step, with a step that left its group), then checks with an flock the step holds
that no two attempts were ever alive together, and that nothing of an old attempt survived.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from corehelpers import tree
from resumable.api import RUNNER_TOKEN_ENV, read_doc
from resumable.runner.process import TOKEN_ENV

# One attempt of a step: ignores SIGTERM (as `trap '' TERM` does; so does everything it starts),
# takes an exclusive flock that a live earlier attempt would still hold (then logs OVERLAP), starts
# a grandchild that shares the lock, logs its pids, and waits for DIR/go.
STEP = r"""
import fcntl, os, signal, subprocess, sys, time
d = sys.argv[1]
signal.signal(signal.SIGTERM, signal.SIG_IGN)
fd = os.open(os.path.join(d, "step.lock"), os.O_RDWR | os.O_CREAT, 0o644)
def log(text):
    with open(os.path.join(d, "log"), "a") as f:
        f.write(text + "\n")
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    log(f"OVERLAP {os.getpid()}")
    sys.exit(3)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], pass_fds=(fd,))
log(f"start {os.getpid()} {child.pid}")
while not os.path.exists(os.path.join(d, "go")):
    time.sleep(0.02)
child.kill()
"""

# A runner whose step starts and which then dies at once, before it can record the step's group:
# the window in which a runner used to lose track of a step it had started.
DIES_AFTER_SPAWN = """
import os, signal, sys
from resumable.runner import process
real = process.spawn
def spawn(*args, **kwargs):
    handle = real(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)
process.spawn = spawn
from resumable.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}


def _job(d: Path, command: str, name: str = "j") -> Path:
    (d / "step.py").write_text(STEP)
    job = d / "resumable.toml"
    job.write_text(f'[job]\nname = "{name}"\ngrace = "0.3s"\n[steps.s]\nrun = {json.dumps(command)}\n')
    (d / ".resumable" / "runs").mkdir(parents=True, exist_ok=True)
    return job


def _runner(job: Path, *extra: str, cwd: Path | None = None, script: str | None = None) -> subprocess.Popen[str]:
    head = [sys.executable, "-c", script] if script else [sys.executable, "-m", "resumable"]
    return subprocess.Popen([*head, "run", str(job), "-q", *extra], cwd=cwd or job.parent, env=_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait(pred: Callable[[], bool], timeout: float = 30, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _log(d: Path) -> list[str]:
    path = d / "log"
    return path.read_text().splitlines() if path.exists() else []


def _starts(d: Path) -> list[list[int]]:
    return [[int(p) for p in line.split()[1:]] for line in _log(d) if line.startswith("start")]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return False
    return data[data.rfind(b")") + 2 :][:1] not in (b"Z", b"X")


def _held(lock: Path) -> bool:
    """Whether a live runner holds the run (its lease file is flocked)."""
    import fcntl

    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _cleanup(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _finish(d: Path, runner: subprocess.Popen[str]) -> tuple[str, str]:
    (d / "go").write_text("")
    out, err = runner.communicate(timeout=60)
    assert runner.returncode == 0, (runner.returncode, out, err)
    return out, err


def _no_overlap_and_nothing_left(d: Path, attempts: int) -> None:
    starts = _starts(d)
    assert not [line for line in _log(d) if line.startswith("OVERLAP")], _log(d)
    assert len(starts) == attempts, _log(d)
    old = [pid for pids in starts[:-1] for pid in pids]
    assert not [pid for pid in old if alive(pid)], "a process of an earlier attempt survived"


# --- 1. the reaping window -----------------------------------------------------------------------


def test_the_issue_reproduction_sigkill_then_ctrl_c_while_reaping(tmp_path: Path) -> None:
    """A step `trap '' TERM; ...`; SIGKILL runner 1; Ctrl-C runner 2 during its grace (it has sent
    SIGTERM, which the step ignores); runner 3 must still stop attempt 1 before attempt 2."""
    job = _job(tmp_path, f"trap '' TERM; {sys.executable} step.py {tmp_path}")
    lease = tmp_path / ".resumable" / "runs" / "j.runner.lock"
    r1 = _runner(job)
    try:
        _wait(lambda: len(_starts(tmp_path)) == 1, what="attempt 1")
        r1.kill()
        r1.wait()
        first = _starts(tmp_path)[0]
        assert all(alive(p) for p in first)  # its own session: it outlives its runner
        r2 = _runner(job)
        _wait(lambda: _held(lease), what="runner 2 to take the run")
        time.sleep(0.4)  # inside the 2 s grace it gives the leftover after SIGTERM
        assert all(alive(p) for p in first)
        r2.send_signal(signal.SIGINT)
        _out, err = r2.communicate(timeout=30)
        assert r2.returncode == 130, err
        assert all(alive(p) for p in first) and len(_starts(tmp_path)) == 1
        r3 = _runner(job)
        _wait(lambda: len(_log(tmp_path)) >= 2, what="attempt 2 (or an overlap)")
        _finish(tmp_path, r3)
        _no_overlap_and_nothing_left(tmp_path, 2)
        atts = read_doc(tmp_path / ".resumable" / "runs" / "j.json")["units"]["s"]["attempts"]
        assert [(a["n"], a["status"]) for a in atts] == [(1, "interrupted"), (2, "done")]
    finally:
        _cleanup([p for pids in _starts(tmp_path) for p in pids])


def test_a_runner_killed_right_after_starting_a_step_loses_nothing(tmp_path: Path) -> None:
    """The runner dies between starting the step and recording its group: the next runner must
    still find and stop it (everything carrying the dead runner's secret) before attempt 2."""
    job = _job(tmp_path, f"{sys.executable} step.py {tmp_path}")
    try:
        r1 = _runner(job, script=DIES_AFTER_SPAWN)
        r1.communicate(timeout=30)
        assert r1.returncode == -signal.SIGKILL
        _wait(lambda: len(_starts(tmp_path)) == 1, what="attempt 1")
        r2 = _runner(job)
        _wait(lambda: len(_log(tmp_path)) >= 2, what="attempt 2")
        _out, err = _finish(tmp_path, r2)
        assert "leftover" in err
        _no_overlap_and_nothing_left(tmp_path, 2)
    finally:
        _cleanup([p for pids in _starts(tmp_path) for p in pids])


def test_a_process_that_left_its_steps_group_is_stopped_too(tmp_path: Path) -> None:
    """A step's daemon (its own session, so not in the step's process group) still carries the
    runner's secret: after the runner dies, the next runner stops it before the step re-runs."""
    daemon = tmp_path / "daemon"
    command = (f"{sys.executable} -c \"import os, time; os.setsid(); open('{daemon}.tmp', 'w').write(str(os.getpid()));"
               f" os.rename('{daemon}.tmp', '{daemon}'); time.sleep(120)\" & "
               f"{sys.executable} step.py {tmp_path}")
    job = _job(tmp_path, command)
    r1 = _runner(job)
    try:
        _wait(lambda: daemon.exists() and len(_starts(tmp_path)) == 1, what="attempt 1 and its daemon")
        pid = int(daemon.read_text())
        with open(f"/proc/{pid}/stat") as f:
            assert int(f.read().rsplit(")", 1)[1].split()[3]) != _starts(tmp_path)[0][0]  # another group
        r1.kill()
        r1.wait()
        daemon.unlink()
        r2 = _runner(job)
        _wait(lambda: len(_log(tmp_path)) >= 2, what="attempt 2")
        assert not alive(pid), "the daemon of attempt 1 outlived the reaping"
        _finish(tmp_path, r2)
        _no_overlap_and_nothing_left(tmp_path, 2)
    finally:
        _cleanup([p for pids in _starts(tmp_path) for p in pids])
        if daemon.exists():
            _cleanup([int(daemon.read_text())])


def test_leftovers_survive_a_runner_killed_while_rewriting_the_lease(tmp_path: Path) -> None:
    """The lease file is rewritten in place; a runner killed half way through a shorter rewrite
    (after the write, before the truncate) must not leave the next runner an unreadable file,
    which would read as "nothing left running"."""
    from resumable.store.files.lease import FileRunnerLease
    from resumable.store.values import LeftoverGroup

    runs = tmp_path / "runs"
    runs.mkdir(mode=0o755)
    path = runs / "j.runner.lock"
    groups = [{"pgid": 1000 + i, "start": "1", "secret": f"secret-{i:02d}" * 4} for i in range(5)]
    path.write_text(json.dumps({"v": 2, "pid": 1, "host": "h", "startedAt": "x", "leftovers": groups}))
    pid = os.fork()
    if pid == 0:  # a runner that reaped one group and dies before the truncate
        try:
            lease = FileRunnerLease(str(path), "j")
            lease.acquire()
            os.ftruncate = lambda fd, n: os.kill(os.getpid(), signal.SIGKILL)
            lease.reaped([LeftoverGroup(1000, "1", "secret-00" * 4)])
        finally:
            os._exit(70)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    lease = FileRunnerLease(str(path), "j")
    lease.acquire()
    try:
        secrets = {g.secret for g in lease.leftovers()}
        # Four groups still to stop, and the dead runner itself (it died holding the lease).
        assert {f"secret-{i:02d}" * 4 for i in range(1, 5)} <= secrets and len(secrets) == 5
    finally:
        lease.release()


def test_the_lease_records_the_secret_first_and_hands_it_on(tmp_path: Path) -> None:
    """The secret is in the file (readable by its owner only) from the moment the lease is held;
    released, it becomes a leftover for the next runner to check, however the runner ended."""
    from resumable.runner.process import reap
    from resumable.store.files.lease import FileRunnerLease, whole_runner
    from resumable.store.values import LeftoverGroup

    runs = tmp_path / "runs"
    runs.mkdir(mode=0o755)
    path = runs / "j.runner.lock"
    path.write_text("{}")
    path.chmod(0o644)
    idle = FileRunnerLease(str(path), "j")
    idle.acquire()
    idle.release()  # started nothing (a --reset, a durable session): leaves nothing to check
    lease = FileRunnerLease(str(path), "j")
    lease.acquire()
    assert lease.leftovers() == []
    assert json.loads(path.read_text())["secret"] == lease.secret
    assert path.stat().st_mode & 0o777 == 0o600
    lease.track(LeftoverGroup(4_000_000, "1", lease.secret))  # a step ran, and ended
    lease.untrack(4_000_000)
    lease.release()
    assert "secret" not in json.loads(path.read_text())
    again = FileRunnerLease(str(path), "j")
    again.acquire()
    assert again.leftovers() == [whole_runner(lease.secret)]
    gone, alive = reap(again.leftovers(), grace=0.1)  # nothing carries it: proven gone at once
    assert (gone, alive) == ([whole_runner(lease.secret)], [])
    again.reaped(gone)
    assert again.leftovers() == []
    again.release()


def test_a_retry_first_stops_what_the_failed_attempt_left_outside_its_group(tmp_path: Path) -> None:
    """Attempt 1 fails, leaving a process in a session of its own (the group's termination misses
    it); the runner's retry must not start while it lives."""
    (tmp_path / ".resumable" / "runs").mkdir(parents=True)
    (tmp_path / "step.py").write_text(STEP)
    stray = (f"{sys.executable} -c \"import os, signal, time; os.setsid();"
             " signal.signal(signal.SIGTERM, signal.SIG_IGN);"
             " open('stray.' + os.environ['RESUMABLE_ATTEMPT'], 'w').write(str(os.getpid())); time.sleep(120)\"")
    command = f"if [ $RESUMABLE_ATTEMPT = 1 ]; then {stray} & sleep 0.3; exit 1; fi; echo $RESUMABLE_ATTEMPT > second"
    (tmp_path / "resumable.toml").write_text(
        f'[job]\nname = "j"\n[steps.s]\nrun = {json.dumps(command)}\nretries = 1\nbackoff = 0\n')
    p = subprocess.run([sys.executable, "-m", "resumable", "run", "-q"], cwd=tmp_path, env=_env(), capture_output=True,
                       text=True, timeout=60)
    pid = int((tmp_path / "stray.1").read_text())
    try:
        assert p.returncode == 0, p.stderr
        assert (tmp_path / "second").read_text() == "2\n"
        assert not alive(pid)
    finally:
        _cleanup([pid])


def test_a_runner_refuses_a_run_whose_state_it_cannot_read(tmp_path: Path) -> None:
    """A corrupt journal leaves which steps are done unknown: the runner stops with one line before
    anything runs (it used to take the unreadable state for "nothing done" and run everything)."""
    (tmp_path / ".resumable" / "runs").mkdir(parents=True)
    (tmp_path / "resumable.toml").write_text('[job]\nname = "j"\n[steps.a]\nrun = "echo a >> trace"\n')
    run = [sys.executable, "-m", "resumable", "run", "-q"]
    assert subprocess.run(run, cwd=tmp_path, env=_env(), capture_output=True, timeout=60).returncode == 0
    runs = tmp_path / ".resumable" / "runs"
    (runs / "j.json").unlink()  # no view to fall back on: the journal alone holds the state
    data = bytearray((runs / "j.journal.jsonl").read_bytes())
    data[data.index(b"\n") + 30] ^= 0x01
    (runs / "j.journal.jsonl").write_bytes(bytes(data))
    before = tree(tmp_path)
    p = subprocess.run(run, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and p.stderr.count("\n") == 1 and "corrupt journal record" in p.stderr, p.stderr
    assert (tmp_path / "trace").read_text() == "a\n"
    after = tree(tmp_path)
    assert {k: v for k, v in after.items() if not k.endswith(".runner.lock")} == {
        k: v for k, v in before.items() if not k.endswith(".runner.lock")}


# --- 2. the state follows the job file -----------------------------------------------------------


def test_a_job_run_from_elsewhere_finds_its_state(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / ".resumable" / "runs").mkdir(parents=True)
    (proj / "resumable.toml").write_text('[job]\nname = "j"\n[steps.a]\nrun = "echo a >> trace"\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for cwd, job in ((proj, "resumable.toml"), (elsewhere, "../proj/resumable.toml")):
        p = subprocess.run([sys.executable, "-m", "resumable", "run", job], cwd=cwd, env=_env(),
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
    assert (proj / "trace").read_text() == "a\n"  # the second run skipped the done step
    assert "skip" in p.stdout
    assert not (elsewhere / ".resumable").exists()


def test_two_runners_of_one_job_from_two_directories(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    job = _job(proj, f"{sys.executable} step.py {proj}")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r1 = _runner(job)
    try:
        _wait(lambda: len(_starts(proj)) == 1, what="attempt 1")
        p = subprocess.run([sys.executable, "-m", "resumable", "run", "../proj/resumable.toml"], cwd=elsewhere,
                           env=_env(), capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and f"pid {r1.pid}" in p.stderr and p.stderr.count("\n") == 1, p.stderr
        _finish(proj, r1)
        _no_overlap_and_nothing_left(proj, 1)
    finally:
        r1.kill()
        _cleanup([p for pids in _starts(proj) for p in pids])


# --- 3. a live runner's run is not overwritten ----------------------------------------------------

OTHER_WRITES = """
import json, os, subprocess, sys
runs, token = sys.argv[1], sys.argv[2]
env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
env["RESUMABLE_DIR"] = runs
if token:
    env["RESUMABLE_RUNNER_TOKEN"] = token
out = {}
for args in (["unit", "j", "s", "failed"], ["finalize", "j", "aborted"], ["init", "j", "--task", "t"],
             ["item", "j", "--json", '{"x": 1}'], ["phase", "j", "p", "running"], ["validation", "j", "green"]):
    p = subprocess.run([sys.executable, "-m", "resumable", *args], capture_output=True, text=True, env=env)
    out[args[0]] = [p.returncode, p.stderr]
    if args[0] == "item" and p.returncode == 0:  # resolved again, or the runner could not finish done
        p = subprocess.run([sys.executable, "-m", "resumable", "resolve", "j", "--json", p.stdout],
                           capture_output=True, text=True, env=env)
        out["resolve"] = [p.returncode, p.stderr]
print(json.dumps(out))
"""


def test_unit_finalize_and_init_are_refused_while_a_runner_holds_the_run(tmp_path: Path) -> None:
    """Decision: refuse (exit 2, naming the runner) rather than let the runner silently overwrite
    the write; findings, phases and validation stay open to everyone, and the runner's own steps
    (which carry its secret) may write anything."""
    job = _job(tmp_path, f"{sys.executable} step.py {tmp_path}")
    runs = tmp_path / ".resumable" / "runs"
    (tmp_path / "others.py").write_text(OTHER_WRITES)
    r1 = _runner(job)
    try:
        _wait(lambda: len(_starts(tmp_path)) == 1, what="the step")
        before = read_doc(runs / "j.json")["units"]["s"]
        p = subprocess.run([sys.executable, str(tmp_path / "others.py"), str(runs), ""], capture_output=True,
                           text=True, timeout=60)
        out = json.loads(p.stdout)
        for verb in ("unit", "finalize", "init"):
            code, err = out[verb]
            assert code == 2 and err.count("\n") == 1 and f"pid {r1.pid} on {os.uname().nodename}" in err, (verb, err)
            assert "started" in err and "overwritten by the runner" in err
        for verb in ("item", "resolve", "phase", "validation"):
            assert out[verb][0] == 0, (verb, out[verb])
        assert read_doc(runs / "j.json")["units"]["s"]["status"] == before["status"] == "in_progress"
        # A process carrying a wrong secret is refused too.
        p = subprocess.run([sys.executable, str(tmp_path / "others.py"), str(runs), "not-the-secret"],
                           capture_output=True, text=True, timeout=60)
        assert json.loads(p.stdout)["unit"][0] == 2
        _finish(tmp_path, r1)
    finally:
        r1.kill()
        _cleanup([p for pids in _starts(tmp_path) for p in pids])
    doc = read_doc(runs / "j.json")
    assert doc["units"]["s"]["status"] == "done" and doc["status"] == "done"
    assert doc["resolvedItems"] and not doc["openItems"] and doc["phases"]["p"]["status"] == "running"
    # The runner gone, the same writes are accepted again.
    p = subprocess.run([sys.executable, "-m", "resumable", "init", "j", "--task", "again"], capture_output=True,
                       text=True, env={**_env(), "RESUMABLE_DIR": str(runs)}, timeout=60)
    assert p.returncode == 0, p.stderr


def test_the_runners_own_steps_may_write_their_run(tmp_path: Path) -> None:
    runs = tmp_path / ".resumable" / "runs"
    runs.mkdir(parents=True)
    (tmp_path / "resumable.toml").write_text(
        '[job]\nname = "j"\n[steps.a]\nrun = "resumable unit j extra done --note from-a-step && resumable unit j a'
        ' in_progress --note me"\n')
    env = {**_env(), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    p = subprocess.run([sys.executable, "-m", "resumable", "run"], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, (p.stdout, p.stderr)
    units = read_doc(runs / "j.json")["units"]
    assert units["extra"]["status"] == "done" and units["a"]["status"] == "done"


def test_the_process_holding_the_lease_may_write_its_run(tmp_path: Path) -> None:
    """A process that holds the run's lease itself (durable functions' session) is its owner."""
    from resumable import store

    runs = tmp_path / "runs"
    runs.mkdir(mode=0o755)
    run = resumable_open("r", runs)
    run.init("t", units=["a"])
    lease = store.open_backend(str(runs)).lease("r")
    lease.acquire()
    try:
        run.unit("a", "done")
        p = subprocess.run([sys.executable, "-m", "resumable", "unit", "r", "a", "failed", "--dir", str(runs)],
                           env=_env(), capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and f"pid {os.getpid()}" in p.stderr
    finally:
        lease.release()
    assert read_doc(runs / "r.json")["units"]["a"]["status"] == "done"


def resumable_open(run_id: str, runs: Path) -> Any:
    from resumable.api import open_run

    return open_run(run_id, runs_dir=runs)


def test_the_token_variable_is_the_runners() -> None:
    assert RUNNER_TOKEN_ENV == TOKEN_ENV


# --- 4. one-shot flags are never replayed; a dry run deletes nothing -------------------------------


def test_the_resume_command_never_replays_force(tmp_path: Path) -> None:
    (tmp_path / ".resumable" / "runs").mkdir(parents=True)
    (tmp_path / "resumable.toml").write_text(
        '[job]\nname = "j"\n[steps.a]\nrun = "true"\n[steps.b]\nrun = "false"\nneeds = ["a"]\n')
    p = subprocess.run([sys.executable, "-m", "resumable", "run", "--force", "-j", "2", "--retry", "0"], cwd=tmp_path,
                       env=_env(), capture_output=True, text=True, timeout=60)
    assert p.returncode == 1
    assert "resume with:" in p.stdout and "--force" not in p.stdout
    launch = read_doc(tmp_path / ".resumable" / "runs" / "j.json")["launch"]
    assert "--force" not in launch["argv"] and "-j" in launch["argv"]
    p = subprocess.run([sys.executable, "-m", "resumable", "status", "j", "--resume"], cwd=tmp_path, env=_env(),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "resumable run" in p.stdout and "--force" not in p.stdout


@pytest.mark.parametrize("how", [["--dry-run", "--reset"], ["--reset", "--dry-run"]])
def test_dry_run_reset_deletes_nothing(tmp_path: Path, how: list[str]) -> None:
    (tmp_path / ".resumable" / "runs").mkdir(parents=True)
    (tmp_path / "resumable.toml").write_text('[job]\nname = "j"\n[steps.a]\nrun = "echo hi"\n')
    env = _env()
    subprocess.run([sys.executable, "-m", "resumable", "run", "-q"], cwd=tmp_path, env=env, check=True,
                   capture_output=True, timeout=60)
    before = tree(tmp_path)
    p = subprocess.run([sys.executable, "-m", "resumable", "run", *how], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0 and "nothing deleted" in p.stdout, (p.stdout, p.stderr)
    assert tree(tmp_path) == before
    p = subprocess.run([sys.executable, "-m", "resumable", "run", "--reset", "-q"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and not (tmp_path / ".resumable" / "runs" / "j.json").exists()
