"""`resumable doctor`: one line per finding, a problem says what to do, exit 0 only when nothing
needs doing; and it only reads (no file written, created or locked, nothing signalled)."""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

import resumable
from corehelpers import RESUMABLE, cli, ok, tree
from resumable.cli import hostinfo
from resumable.cli.doctor import redact
from resumable.store.files import survey


def leases(runs: Path) -> dict[str, survey.LeaseState]:
    return {lease.run_id: lease for lease in survey.survey(str(runs))}


def doctor(*args: str, runs: Path | None = None, cwd: Path | None = None,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return cli("doctor", *args, runs=runs, cwd=cwd, env=env)


def lines_of(proc: subprocess.CompletedProcess[str], level: str) -> list[str]:
    return [line for line in proc.stdout.splitlines() if line.startswith(level + " ")]


def finished_run(runs: Path, rid: str = "r") -> None:
    ok(cli("init", rid, "--task", "t", "--units", "a", runs=runs))
    ok(cli("unit", rid, "a", "done", runs=runs))
    ok(cli("finalize", rid, "done", runs=runs))


def snapshot_of(directory: Path) -> tuple[dict[str, bytes], dict[str, int]]:
    return tree(directory), {str(p): p.stat().st_mtime_ns for p in directory.rglob("*")}


def test_a_healthy_project(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    finished_run(runs)
    before = snapshot_of(runs)
    proc = doctor(runs=runs, cwd=tmp_path)
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stdout
    out = proc.stdout.splitlines()
    assert out[-1] == "healthy: nothing needs doing"
    checks = [line.split()[1] for line in out[:-1]]
    assert checks[:3] == ["version", "git", "store"] and {"filesystem", "leftovers", "runs"} <= set(checks)
    assert f"resumable {resumable.__version__}, Python " in out[0]
    assert any(f"runs directory {runs} (from RESUMABLE_DIR)" in line for line in out)
    assert not lines_of(proc, "problem")
    assert snapshot_of(runs) == before  # read-only: every byte and mtime as it was


def test_json(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    finished_run(runs)
    proc = doctor("--json", runs=runs, cwd=tmp_path)
    assert proc.returncode == 0
    report = json.loads(proc.stdout)
    assert report["version"] == resumable.__version__ and report["healthy"] is True
    assert {c["check"] for c in report["checks"]} >= {"version", "git", "store", "filesystem", "leftovers", "runs"}
    assert all(set(c) <= {"check", "level", "message", "fix"} for c in report["checks"])
    ok(cli("init", "open", "--task", "t", runs=runs))
    ok(cli("finalize", "open", "needs_attention", runs=runs))
    report = json.loads(doctor("--json", runs=runs, cwd=tmp_path).stdout)
    assert report["healthy"] is True  # a run's outcome is not the installation's health
    [warning] = [c for c in report["checks"] if c["level"] == "warning"]
    assert warning["message"] == "run open needs attention"
    assert f"resumable status open --dir {runs}" in warning["fix"]  # pastes where RESUMABLE_DIR is unset
    (runs / "damaged.json").write_text("{ not json")
    report = json.loads(doctor("--json", runs=runs, cwd=tmp_path).stdout)
    assert report["healthy"] is False
    [problem] = [c for c in report["checks"] if c["level"] == "problem"]
    assert "damaged.json cannot be read" in problem["message"]


def test_no_runs_directory_yet_is_healthy_and_creates_nothing(tmp_path: Path) -> None:
    proc = doctor(runs=tmp_path / "none", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout
    assert "does not exist yet" in proc.stdout
    assert list(tmp_path.iterdir()) == []


def test_runs_that_need_attention(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    finished_run(runs)
    ok(cli("init", "bad", "--task", "t", "--units", "a", runs=runs))
    ok(cli("unit", "bad", "a", "failed", runs=runs))
    ok(cli("finalize", "bad", "needs_attention", runs=runs))
    # A failed step is the job's news, not a problem of the installation: a warning, exit 0.
    proc = doctor(runs=runs, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout
    [warning] = [w for w in lines_of(proc, "warning") if " runs " in w]
    assert f"run bad needs attention — `resumable status bad --dir {runs}`" in warning
    (runs / "damaged.json").write_text("{ not json")
    proc = doctor(runs=runs, cwd=tmp_path)
    assert proc.returncode == 1
    problems = lines_of(proc, "problem")
    assert len(problems) == 1, proc.stdout
    assert "damaged.json cannot be read" in problems[0]
    assert proc.stdout.splitlines()[-1] == '1 problem: each line marked "problem" says what to do'
    # a run written by a newer resumable
    (runs / "future.json").write_text(json.dumps({"schemaVersion": 3, "id": "future", "status": "done",
                                                  "units": {}}))
    problems = lines_of(doctor(runs=runs, cwd=tmp_path), "problem")
    assert any("run future has schemaVersion 3, newer than this resumable understands (2); upgrade resumable"
               " — pip install -U . " in p for p in problems), problems
    (runs / "future.json").unlink()
    # a journal holding a record a newer resumable wrote: an upgrade, not damage
    ok(cli("init", "later", "--task", "t", "--units", "a", runs=runs))
    head = b'{"v":2,"seq":2,"t":"unit","unit":"a","shape":"of the future"'
    with (runs / "later.journal.jsonl").open("ab") as f:
        f.write(b'%s,"crc":"%08x"}\n' % (head, zlib.crc32(head)))
    problems = lines_of(doctor(runs=runs, cwd=tmp_path), "problem")
    later = [p for p in problems if "later.journal.jsonl" in p]
    assert len(later) == 1 and "written by a newer resumable" in later[0], problems
    assert "pip install -U . (or pipx install --force .)" in later[0] and "cannot be read" not in later[0]
    (runs / "later.json").unlink()
    (runs / "later.journal.jsonl").unlink()
    # a seed tool's run is "running" with no runner at all: that is not a problem
    ok(cli("init", "agent", "--task", "t", runs=runs))
    assert len(lines_of(doctor(runs=runs, cwd=tmp_path), "problem")) == 1


def _wait_for(predicate: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_live_runner_is_fine_and_a_killed_one_is_reported(tmp_path: Path) -> None:
    (tmp_path / "resumable.toml").write_text('[job]\nname = "slow"\n[steps.sleepy]\nrun = "sleep 60"\n')
    runs = tmp_path / ".resumable" / "runs"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    runner = subprocess.Popen([RESUMABLE, "run", "-q"], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    lease = runs / "slow.runner.lock"
    pgids: list[int] = []
    try:
        def started() -> bool:
            try:
                groups = json.loads(lease.read_text()).get("groups")
            except (OSError, ValueError):
                return False
            pgids[:] = [g["pgid"] for g in groups or []]
            return bool(pgids)

        _wait_for(started)
        proc = doctor(cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout  # a live runner: nothing to do
        assert "1 run, 1 running" in proc.stdout
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait()
        proc = doctor(cwd=tmp_path)
        assert proc.returncode == 1
        problems = lines_of(proc, "problem")
        assert any("run slow is running but its runner is gone" in p and "resumable status slow --resume" in p
                   for p in problems), proc.stdout
        leftover = [p for p in problems if "started by a runner that is gone still run" in p]
        assert len(leftover) == 1 and str(pgids[0]) in leftover[0], proc.stdout
        # Only read: the step is still running, untouched.
        os.killpg(pgids[0], 0)
    finally:
        if runner.poll() is None:
            os.kill(runner.pid, signal.SIGKILL)
            runner.wait()
        for pgid in pgids:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    # The step gone, the run still stopped: one problem left.
    _wait_for(lambda: not hostinfo.carriers(set(leases(runs)["slow"].secrets)))
    problems = lines_of(doctor(cwd=tmp_path), "problem")
    assert len(problems) == 1 and "runner is gone" in problems[0]


def test_stale_temp_files(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    finished_run(runs)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    (runs / f".r.json.tmp.{dead}").write_text("half")
    (runs / f".r.json.tmp.{os.getpid()}").write_text("a write in flight")  # a live writer's: not stale
    proc = doctor(runs=runs, cwd=tmp_path)
    assert proc.returncode == 0
    [warning] = [line for line in lines_of(proc, "warning") if "leftovers" in line]
    assert f"1 temp file(s) left by killed writers in {runs} (.r.json.tmp.{dead})" in warning
    assert (runs / f".r.json.tmp.{dead}").exists()  # reported, never removed


def test_a_runner_lease_from_a_newer_resumable(tmp_path: Path) -> None:
    """`resumable run` refuses it (tests/test_runner_lease.py); doctor says so, and does not read
    the secrets in it as this format's."""
    runs = tmp_path / "runs"
    finished_run(runs)
    (runs / "r.runner.lock").write_text(json.dumps({"v": 3, "pid": 1, "host": "h", "secret": "s"}))
    proc = doctor(runs=runs, cwd=tmp_path)
    assert proc.returncode == 1
    [problem] = lines_of(proc, "problem")
    assert (f"run r: its runner lease {runs / 'r.runner.lock'} was written by a newer resumable (format 3, this"
            " one reads up to 2) — pip install -U .") in problem
    assert leases(runs)["r"].newer == 3 and leases(runs)["r"].secrets == frozenset()  # not read as ours
    (runs / "r.runner.lock").write_text(json.dumps({"v": 2, "pid": 1, "host": "h"}))
    assert leases(runs)["r"].newer is None
    assert doctor(runs=runs, cwd=tmp_path).returncode == 0


def test_a_runs_directory_others_may_write(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    finished_run(runs)
    runs.chmod(0o777)
    proc = doctor(runs=runs, cwd=tmp_path)
    assert proc.returncode == 1
    [problem] = lines_of(proc, "problem")
    assert "writable by other users (mode 777)" in problem and f"chmod go-w {runs}" in problem


@pytest.mark.skipif(not os.path.isdir("/dev/shm") or (hostinfo.mount_of("/dev/shm") or ("",))[0] != "tmpfs",
                    reason="no tmpfs at /dev/shm")
def test_tmpfs_is_a_warning(tmp_path: Path) -> None:
    runs = Path("/dev/shm") / f"resumable-doctor-{os.getpid()}-{tmp_path.name}"
    runs.mkdir(mode=0o700)
    try:
        proc = doctor(runs=runs, cwd=tmp_path)
        assert proc.returncode == 0
        [warning] = [line for line in lines_of(proc, "warning") if "filesystem" in line]
        assert "tmpfs" in warning and "fsync is a no-op and runs do not survive a reboot" in warning
    finally:
        runs.rmdir()


def test_postgresql_store(tmp_path: Path) -> None:
    url = "postgresql://me:s3cret@127.0.0.1:9/db?password=s3cret"  # port 9: nothing answers there
    proc = doctor(env={"RESUMABLE_STORE": url}, cwd=tmp_path)
    assert proc.returncode == 1
    assert "s3cret" not in proc.stdout + proc.stderr
    assert "PostgreSQL database postgresql://me:***@127.0.0.1:9/db?password=***" in proc.stdout
    [problem] = lines_of(proc, "problem")
    if importlib.util.find_spec("psycopg") is None:
        assert "the PostgreSQL extra is not installed" in problem and "pip install '.[postgres]'" in problem
    else:
        assert "does not answer" in problem
    # --dir wins over RESUMABLE_STORE, as for every command
    assert doctor("--dir", str(tmp_path / "runs"), env={"RESUMABLE_STORE": url}, cwd=tmp_path).returncode == 0
    proc = doctor(env={"RESUMABLE_STORE": "mysql://x"}, cwd=tmp_path)
    assert proc.returncode == 1 and "unknown store" in lines_of(proc, "problem")[0]


def test_environment_and_git(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    # A switch an earlier release had for tests only is gone: it is nothing to report.
    assert doctor(runs=runs, cwd=tmp_path, env={"RESUMABLE_UNSAFE_NO_LOCK": "1"}).returncode == 0
    proc = doctor(runs=runs, cwd=tmp_path, env={"PATH": str(tmp_path)})
    assert proc.returncode == 0
    assert any("git not found on PATH" in line for line in lines_of(proc, "warning"))


def test_control_characters_in_paths_are_escaped(tmp_path: Path) -> None:
    runs = tmp_path / "x\x1b[2Jy"
    proc = doctor(runs=runs, cwd=tmp_path)
    assert "\x1b" not in proc.stdout and "x\\x1b[2Jy" in proc.stdout


# --- what it reads from the machine --------------------------------------------------------------


def test_locked_inodes_sees_an_flock_without_taking_one(tmp_path: Path) -> None:
    path = tmp_path / "held"
    path.write_text("")
    st = path.stat()
    key = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    locks = survey.locked_inodes()
    if locks is None:
        pytest.skip("no /proc/locks")
    assert key not in locks
    with path.open() as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        assert key in (survey.locked_inodes() or set())


def test_the_lease_survey_reads_only_what_is_there(tmp_path: Path) -> None:
    (tmp_path / "a.runner.lock").write_text(json.dumps({
        "v": 2, "pid": 1, "host": "elsewhere.example", "groups": [{"pgid": 5, "secret": "s1"}],
        "leftovers": [{"pgid": 0, "secret": "s2"}, "junk"], "secret": "s3"}))
    (tmp_path / "b.runner.lock").write_text("not json")
    os.mkfifo(tmp_path / "c.runner.lock")  # never waited on
    found = leases(tmp_path)
    assert found["a"].held is None  # another host's runner: cannot tell from here
    assert found["a"].secrets == {"s1", "s2", "s3"}
    assert found["b"].secrets == set() and found["b"].held is False
    assert "c" not in found


def test_redact() -> None:
    assert redact("postgresql://u:pw@h:5/db") == "postgresql://u:***@h:5/db"
    assert redact("postgresql://u@h/db?sslmode=require&password=pw") == \
        "postgresql://u@h/db?sslmode=require&password=***"
    assert redact("postgresql://h/db") == "postgresql://h/db"


def test_only_the_file_store_names_lease_files_or_reads_the_lock_table() -> None:
    """doctor asks the store (LeaseSurvey, RunnerLease.holder) what runner leases say: nothing above
    store/files names a run's lease file or reads the kernel's lock table itself."""
    src = Path(resumable.__file__).parent
    offenders = [str(p.relative_to(src)) for p in src.rglob("*.py")
                 if "store/files" not in p.as_posix()
                 and any(name in p.read_text() for name in (".runner.lock", "/proc/locks"))]
    assert offenders == []
