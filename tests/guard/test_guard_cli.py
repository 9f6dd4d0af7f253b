"""``resumable guard`` end to end, as real processes: one pass at a time under a kernel lock, the
pass cap, the circuit breaker, outcomes, signal forwarding, and refusal of anything planted."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from pathlib import Path

import pytest
from guardhelpers import alive, guard, spawn, state_of, wait_for


def _lines(out: str) -> list[str]:
    """The guard's lines without their time stamps."""
    return [line.split("] ", 1)[1] if line.startswith("[") else line for line in out.splitlines()]


def test_a_pass_records_state_log_and_exits_with_the_commands_code(state_dir: Path) -> None:
    proc = guard("job", "--state-dir", str(state_dir), "--", "sh", "-c", "echo out; echo err >&2; exit 3")
    assert proc.returncode == 3
    assert _lines(proc.stdout)[-1] == "Pass 1 completed: failure (exit 3)"
    got = state_of(state_dir, "job")
    assert (got["schema_version"], got["pass_count"], got["last_status"], got["consecutive_failures"],
            got["dry_run"], got["last_exit_code"]) == ('"1.0.0"', "1", "failure", "1", "false", "3")
    logs = list((state_dir / "job-logs").iterdir())
    assert len(logs) == 1 and logs[0].name.startswith("pass-1-") and logs[0].read_text() == "out\nerr\n"
    history = [json.loads(line) for line in (state_dir / "job-history.jsonl").read_text().splitlines()]
    assert [e["event"] for e in history] == ["start", "pass"]  # counted before the command started
    assert history[0]["pass"] == 1 and history[0]["log"] == str(logs[0])
    assert history[1]["exit_code"] == 3 and history[1]["status"] == "failure"
    assert guard("job", "--state-dir", str(state_dir), "--", "true").returncode == 0
    assert state_of(state_dir, "job")["consecutive_failures"] == "0"


def _hold(state_dir: Path, name: str, tmp_path: Path) -> tuple[object, Path]:
    """Start a pass that runs until ``release`` is created; returns (process, release path)."""
    started, release = tmp_path / f"{name}.started", tmp_path / f"{name}.release"
    # Bounded (30 s): a test that fails before releasing it must not leave the loop running.
    script = f"touch {started}; i=0; while [ ! -e {release} ] && [ $i -lt 1500 ]; do sleep 0.02; i=$((i+1)); done"
    holder = spawn(name, "--state-dir", str(state_dir), "--", "sh", "-c", script)
    wait_for(started.exists)
    return holder, release


def test_a_second_invocation_skips_while_a_pass_runs(state_dir: Path, tmp_path: Path) -> None:
    holder, release = _hold(state_dir, "job", tmp_path)
    marker = tmp_path / "second-ran"
    second = guard("job", "--state-dir", str(state_dir), "--", "touch", str(marker))
    assert second.returncode == 0 and not marker.exists()
    assert re.fullmatch(rf"SKIP: previous invocation still running \(pid {holder.pid}, for [0-9]+s\)",  # type: ignore[attr-defined]
                        "\n".join(_lines(second.stdout)))
    # one run's exit never removes another's lock: after the skipper exited, the holder still holds it
    third = guard("job", "--state-dir", str(state_dir), "--", "touch", str(marker))
    assert "SKIP" in third.stdout and not marker.exists()
    release.touch()
    assert holder.wait(timeout=20) == 0  # type: ignore[attr-defined]
    assert (state_dir / "job.lock").exists()  # the lock file is never unlinked, so no one locks a stale copy
    assert not (state_dir / "job.lock-info").exists()
    assert guard("job", "--state-dir", str(state_dir), "--", "touch", str(marker)).returncode == 0
    assert marker.exists() and state_of(state_dir, "job")["pass_count"] == "2"


def test_the_skip_says_how_long_the_pass_has_run(state_dir: Path, tmp_path: Path) -> None:
    holder, release = _hold(state_dir, "job", tmp_path)
    info = state_dir / "job.lock-info"
    # The guard rewrites the info once its command runs (to name the command's pid), which may come
    # after the command's first line on a loaded machine: edit it only after that rewrite.
    wait_for(lambda: "command_pid=" in info.read_text())
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 12 * 60 - 5))
    lines = [f"started_at={started}" if line.startswith("started_at=") else line
             for line in info.read_text().splitlines()]
    info.write_text("\n".join(lines) + "\n")  # pretend it began 12 minutes ago
    second = guard("job", "--state-dir", str(state_dir), "--", "true")
    assert _lines(second.stdout) == [f"SKIP: previous invocation still running (pid {holder.pid}, for 12m)"]  # type: ignore[attr-defined]
    release.touch()
    holder.wait(timeout=20)  # type: ignore[attr-defined]


def test_a_sigkilled_guard_leaves_the_lock_to_its_command_and_its_pass_counted(
        state_dir: Path, tmp_path: Path, reaper: list[int]) -> None:
    """The command a SIGKILLed guard orphaned kept running while the next pass started, and the
    killed pass was never counted (so --max-passes could be overrun). Now the command holds a copy
    of the lock: the next invocation SKIPs until it has exited; and the pass was counted before the
    command started, then recorded as a failure once the lock is free again."""
    pid_file = tmp_path / "cmd.pid"
    holder = spawn("job", "--state-dir", str(state_dir), "--max-passes", "2", "--", "sh", "-c",
                   f"echo $$ > {pid_file}; exec sleep 60")
    wait_for(lambda: pid_file.exists() and pid_file.read_text().strip() != "")
    command = int(pid_file.read_text())
    reaper.append(command)  # the orphaned command's process group
    # the guard names its command in the lock info once it has started it (after the command's first
    # line, on a loaded machine): killed before that, the SKIP line could not name the command
    wait_for(lambda: f"command_pid={command}" in (state_dir / "job.lock-info").read_text())
    got = state_of(state_dir, "job")
    assert got["pass_count"] == "1" and got["pass_started_at"] != "none"  # counted before it started
    holder.kill()
    holder.wait(timeout=10)
    assert alive(command)
    marker = tmp_path / "ran"
    skipped = guard("job", "--state-dir", str(state_dir), "--max-passes", "2", "--", "touch", str(marker))
    assert skipped.returncode == 0 and not marker.exists()
    # (the seconds the pass has run: any number, on a loaded machine)
    assert re.fullmatch(rf"SKIP: previous invocation still running \(its command, pid {command}, "
                        rf"outlived its guard, pid {holder.pid}; for [0-9]+s\)", "\n".join(_lines(skipped.stdout)))
    status = guard("status", "job", "--state-dir", str(state_dir))
    assert f"running:              yes (its command, pid {command}, outlived its guard" in status.stdout
    assert "unfinished pass:      1, started at " in status.stdout and ", running" in status.stdout
    assert guard("reset", "job", "--state-dir", str(state_dir)).returncode == 2  # refused: the pass runs
    os.kill(command, signal.SIGKILL)
    wait_for(lambda: not alive(command))
    began = time.monotonic()
    nxt = guard("job", "--state-dir", str(state_dir), "--max-passes", "2", "--", "touch", str(marker))
    assert nxt.returncode == 0 and marker.exists() and time.monotonic() - began < 10  # at once: no stale timeout
    assert _lines(nxt.stdout)[0].startswith("Pass 1 (started ") and "never recorded its outcome (its guard was " \
        "killed): recorded as a failure" in _lines(nxt.stdout)[0]
    got = state_of(state_dir, "job")
    assert (got["pass_count"], got["last_status"], got["consecutive_failures"], got["pass_started_at"]) == \
        ("2", "success", "0", "none")
    events = [json.loads(line) for line in (state_dir / "job-history.jsonl").read_text().splitlines()]
    assert [(e["event"], e.get("pass"), e.get("status")) for e in events] == [
        ("start", 1, None), ("pass", 1, "failure"), ("start", 2, None), ("pass", 2, "success")]
    assert events[1]["exit_code"] is None and "killed" in events[1]["note"] and events[1]["log"] == events[0]["log"]
    history_rows = guard("status", "job", "--state-dir", str(state_dir), "--history").stdout.splitlines()[-2:]
    assert history_rows[0].split()[:2] == ["1", events[0]["started_at"]] and "failure  -" in history_rows[0]
    assert "(its guard was killed before it recorded the outcome)" in history_rows[0]
    capped = guard("job", "--state-dir", str(state_dir), "--max-passes", "2", "--", "touch", str(tmp_path / "no"))
    assert _lines(capped.stdout) == ["SKIP: max passes reached (2 >= 2)"] and not (tmp_path / "no").exists()


def test_the_command_holds_the_lock_and_is_told_its_descriptor(state_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "fd"
    proc = guard("job", "--state-dir", str(state_dir), "--", "sh", "-c",
                 f'echo "$RESUMABLE_GUARD_LOCK_FD" > {out}; ls -l /proc/$$/fd/$RESUMABLE_GUARD_LOCK_FD >> {out}')
    assert proc.returncode == 0
    fd, listing = out.read_text().splitlines()
    assert fd.isdigit() and listing.endswith(str(state_dir / "job.lock"))


def test_a_command_that_closes_the_descriptor_for_a_daemon_frees_the_lock(state_dir: Path, tmp_path: Path,
                                                                        reaper: list[int]) -> None:
    """A command that leaves something running on purpose closes the lock for it, as documented."""
    pid_file = tmp_path / "daemon.pid"
    script = (f'eval "exec $RESUMABLE_GUARD_LOCK_FD>&-"; setsid sh -c \'echo $$ > {pid_file}; exec sleep 60\' '
              "</dev/null >/dev/null 2>&1 &")
    assert guard("job", "--state-dir", str(state_dir), "--", "sh", "-c", script).returncode == 0
    wait_for(lambda: pid_file.exists() and pid_file.read_text().strip() != "")
    reaper.append(int(pid_file.read_text()))
    marker = tmp_path / "ran"
    assert guard("job", "--state-dir", str(state_dir), "--", "touch", str(marker)).returncode == 0 and marker.exists()


def test_the_breaker_halts_and_records_it(state_dir: Path, tmp_path: Path) -> None:
    for _ in range(3):
        assert guard("job", "--state-dir", str(state_dir), "--", "false").returncode == 1
    marker = tmp_path / "ran"
    halted = guard("job", "--state-dir", str(state_dir), "--", "touch", str(marker))
    assert halted.returncode == 1 and not marker.exists()
    assert _lines(halted.stdout) == [
        "HALT: 3 consecutive failures detected. Manual intervention required.",
        "  Last status: failure",
        f"  Last run: {state_of(state_dir, 'job')['last_run_at']}",
        f"  Reset by deleting or editing: {state_dir / 'job-state.yaml'}",
        f"  Or run: resumable guard reset job --state-dir {state_dir}"]
    assert halted.stderr == ("resumable: job: halted by the circuit breaker after 3 consecutive failures (resumable "
                             f"guard reset job --state-dir {state_dir})\n")
    got = state_of(state_dir, "job")
    assert got["breaker_tripped_at"] != "never" and got["pass_count"] == "3"  # recorded; not a pass
    events = [json.loads(line)["event"] for line in (state_dir / "job-history.jsonl").read_text().splitlines()]
    assert events == ["start", "pass"] * 3 + ["halt"]
    status = guard("status", "job", "--state-dir", str(state_dir), "--history")
    assert status.returncode == 0 and "breaker:              TRIPPED at" in status.stdout and "HALT" in status.stdout
    assert guard("reset", "job", "--state-dir", str(state_dir)).returncode == 0
    assert guard("job", "--state-dir", str(state_dir), "--", "touch", str(marker)).returncode == 0 and marker.exists()


def test_a_breaker_of_one_and_a_breaker_off(state_dir: Path) -> None:
    assert guard("a", "--state-dir", str(state_dir), "--breaker", "1", "--", "false").returncode == 1
    assert "HALT: 1 consecutive" in guard("a", "--state-dir", str(state_dir), "--breaker", "1", "--", "true").stdout
    for _ in range(4):
        assert guard("b", "--state-dir", str(state_dir), "--breaker", "0", "--", "false").returncode == 1
    assert state_of(state_dir, "b")["consecutive_failures"] == "4"


@pytest.mark.parametrize(("script", "status", "code", "failures"), [
    ("echo 'the cycle completed successfully'", "unknown", 0, "0"),
    ("echo 'Result: FAILURE.'", "failure", 0, "1"),
    ("echo noop; echo 'then: halt'", "halt", 0, "1"),
    ("echo 'Outcome: success'; exit 4", "failure", 4, "1"),
    ("echo 'NOOP'", "noop", 0, "0"),
])
def test_outcome_from_output(state_dir: Path, script: str, status: str, code: int, failures: str) -> None:
    proc = guard("job", "--state-dir", str(state_dir), "--outcome-from-output", "--", "sh", "-c", script)
    assert proc.returncode == code
    got = state_of(state_dir, "job")
    assert (got["last_status"], got["consecutive_failures"]) == (status, failures)


def test_unknown_neither_trips_nor_resets_the_breaker(state_dir: Path) -> None:
    args = ("job", "--state-dir", str(state_dir), "--outcome-from-output", "--breaker", "2", "--", "sh", "-c")
    guard(*args, "echo failure")
    guard(*args, "echo done")  # unknown
    guard(*args, "echo done")
    assert state_of(state_dir, "job")["consecutive_failures"] == "1"
    guard(*args, "echo failure")
    assert guard(*args, "echo success").returncode == 1  # the breaker (2) tripped on failure, unknown, unknown, failure


def test_sigterm_reaches_the_commands_whole_process_group(state_dir: Path, tmp_path: Path) -> None:
    child, grandchild = tmp_path / "child", tmp_path / "grandchild"
    script = f"sleep 60 & echo $! > {grandchild}; echo $$ > {child}; wait"
    holder = spawn("job", "--state-dir", str(state_dir), "--", "sh", "-c", script)
    wait_for(lambda: child.exists() and grandchild.exists() and child.read_text() != ""
             and grandchild.read_text() != "")
    pids = int(child.read_text()), int(grandchild.read_text())
    assert os.getpgid(pids[0]) == pids[0] != os.getpgid(holder.pid)  # its own session and group
    holder.send_signal(signal.SIGTERM)
    assert holder.wait(timeout=20) == 128 + signal.SIGTERM
    wait_for(lambda: not any(alive(p) for p in pids), timeout=10)
    got = state_of(state_dir, "job")
    assert (got["last_status"], got["last_exit_code"]) == ("failure", "143")


def test_max_passes(state_dir: Path, tmp_path: Path) -> None:
    marker = tmp_path / "count"
    for _ in range(3):
        proc = guard("job", "--state-dir", str(state_dir), "--max-passes", "2", "--", "sh", "-c", f"echo x >> {marker}")
        assert proc.returncode == 0
    assert marker.read_text() == "x\nx\n"
    assert _lines(proc.stdout) == ["SKIP: max passes reached (2 >= 2)"]


def test_a_dry_run_is_recorded_as_one_and_changes_nothing_else(state_dir: Path, tmp_path: Path) -> None:
    """It wrote nothing; the seed's state documents ``dry_run`` as "whether last pass used
    --dry-run". Now it records ``dry_run: true`` (and a history event), and nothing else: no pass
    counted, the failure count and the breaker as they were."""
    marker = tmp_path / "ran"
    proc = guard("job", "--state-dir", str(state_dir), "--dry-run", "--", "touch", str(marker))
    assert proc.returncode == 0 and not marker.exists()
    assert _lines(proc.stdout) == [f"DRY RUN: would start pass 1 (last: none at never): touch {marker}"]
    assert state_of(state_dir, "job") == {**state_of_fresh(), "dry_run": "true"}
    for _ in range(3):
        guard("job", "--state-dir", str(state_dir), "--", "false")
    before = state_of(state_dir, "job")
    assert before["dry_run"] == "false" and before["consecutive_failures"] == "3"
    halted = guard("job", "--state-dir", str(state_dir), "--dry-run", "--", "touch", str(marker))
    assert halted.returncode == 1 and "HALT: 3 consecutive failures" in halted.stdout and not marker.exists()
    assert state_of(state_dir, "job") == {**before, "dry_run": "true"}  # breaker not even marked tripped
    events = [json.loads(line) for line in (state_dir / "job-history.jsonl").read_text().splitlines()]
    assert [(e["event"], e.get("would")) for e in events if e["event"] == "dry-run"] == [
        ("dry-run", "start pass 1"), ("dry-run", "halt")]
    status = guard("status", "job", "--state-dir", str(state_dir), "--history")
    assert "last invocation:      a dry run" in status.stdout and "would halt" in status.stdout
    assert guard("reset", "job", "--state-dir", str(state_dir)).returncode == 0
    assert guard("job", "--state-dir", str(state_dir), "--", "true").returncode == 0
    assert state_of(state_dir, "job")["dry_run"] == "false"


def state_of_fresh() -> dict[str, str]:
    return {"schema_version": '"1.0.0"', "pass_count": "0", "last_status": "none", "last_run_at": "never",
            "consecutive_failures": "0", "dry_run": "false", "last_exit_code": "none", "breaker_tripped_at": "never",
            "pass_started_at": "none"}


def test_a_job_named_like_a_subcommand(state_dir: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    assert guard("run", "status", "--state-dir", str(state_dir), "--", "touch", str(marker)).returncode == 0
    assert marker.exists() and (state_dir / "status-state.yaml").exists()
    status = guard("status", "status", "--state-dir", str(state_dir))
    assert status.returncode == 0 and "passes:               1" in status.stdout


def test_options_before_the_name_and_a_missing_command(state_dir: Path) -> None:
    assert guard("--max-passes", "1", "job", "--state-dir", str(state_dir), "--", "true").returncode == 0
    proc = guard("job", "--state-dir", str(state_dir))
    assert proc.returncode == 1 and proc.stderr.startswith("resumable: ") and proc.stderr.count("\n") == 1


def test_status_and_reset(state_dir: Path, tmp_path: Path) -> None:
    assert guard("status", "nope", "--state-dir", str(state_dir)).returncode == 3
    holder, release = _hold(state_dir, "job", tmp_path)
    status = guard("status", "job", "--state-dir", str(state_dir))
    assert f"running:              yes (pid {holder.pid}" in status.stdout  # type: ignore[attr-defined]
    refused = guard("reset", "job", "--state-dir", str(state_dir))
    assert refused.returncode == 2 and "is running" in refused.stderr and refused.stderr.count("\n") == 1
    release.touch()
    holder.wait(timeout=20)  # type: ignore[attr-defined]
    assert guard("reset", "job", "--all", "--state-dir", str(state_dir)).returncode == 0
    assert state_of(state_dir, "job")["pass_count"] == "0"


def test_a_state_the_seed_left_is_continued(tmp_path: Path) -> None:
    """Switching from cron-closeout.sh: same directory, NAME cron-closeout, the seed's state file."""
    checkpoints = tmp_path / "onex" / "pipeline_checkpoints"
    checkpoints.mkdir(parents=True)
    (checkpoints / "cron-closeout-state.yaml").write_text(
        "# cron-closeout checkpoint\nschema_version: \"1.0.0\"\npass_count: 9\nlast_status: halt\n"
        "last_run_at: 2026-03-28T22:00:00Z\nconsecutive_failures: 3\ndry_run: false\n")
    proc = guard("cron-closeout", "--", "true", env={"ONEX_STATE_DIR": str(tmp_path / "onex")})
    assert proc.returncode == 1 and "HALT: 3 consecutive failures detected" in proc.stdout
    assert "  Last status: halt" in _lines(proc.stdout)


# --- planted files in the state directory ------------------------------------------------------


@pytest.mark.parametrize("planted", ["job-state.yaml", "job.lock", "job-history.jsonl", "job-logs"])
def test_a_planted_symlink_is_refused(planted: str, state_dir: Path, tmp_path: Path) -> None:
    state_dir.mkdir()
    victim = tmp_path / "victim"
    victim.mkdir() if planted == "job-logs" else victim.write_text("precious\n")
    (state_dir / planted).symlink_to(victim)
    marker = tmp_path / "ran"
    proc = guard("job", "--state-dir", str(state_dir), "--", "touch", str(marker))
    assert proc.returncode == 1, proc
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("resumable: refused: ")
    assert "symbolic link" in proc.stderr and "Traceback" not in proc.stderr
    assert not marker.exists() or planted == "job-history.jsonl"  # the history is written after the pass
    assert (victim.is_dir() and list(victim.iterdir()) == []) or victim.read_text() == "precious\n"


@pytest.mark.parametrize("planted", ["job-state.yaml", "job.lock"])
def test_a_planted_fifo_is_refused_without_blocking(planted: str, state_dir: Path, tmp_path: Path) -> None:
    state_dir.mkdir()
    os.mkfifo(state_dir / planted)
    proc = guard("job", "--state-dir", str(state_dir), "--", "true", timeout=20)
    assert proc.returncode == 1 and "is a FIFO" in proc.stderr and proc.stderr.count("\n") == 1
    assert guard("status", "job", "--state-dir", str(state_dir), timeout=20).returncode == 1


def test_control_characters_never_reach_the_terminal(state_dir: Path) -> None:
    state_dir.mkdir()
    (state_dir / "job-state.yaml").write_text("pass_count: 1\nlast_status: \x1b[31mred\nconsecutive_failures: 3\n")
    proc = guard("job", "--state-dir", str(state_dir), "--dry-run", "--", "printf", "\x1b]0;title\x07")
    assert "\x1b" not in proc.stdout + proc.stderr and "\\x1b[31mred" in proc.stdout
    proc = guard("job", "--state-dir", str(state_dir), "--breaker", "0", "--dry-run", "--", "printf", "\x1b]0;t\x07")
    assert "\x1b" not in proc.stdout and "\\x1b]0;t\\x07" in proc.stdout


@pytest.mark.parametrize("name", ["a/b", "..", "", "x" * 65, "sp ace"])
def test_bad_names_are_refused(name: str, state_dir: Path) -> None:
    proc = guard("run", name, "--state-dir", str(state_dir), "--", "true")
    assert proc.returncode == 1 and "Invalid guard name" in proc.stderr and proc.stderr.count("\n") == 1
    assert not state_dir.exists()


def test_the_halt_hint_pastes(tmp_path: Path) -> None:
    """``Or run: resumable guard reset g2`` left out the --state-dir the guard ran with: pasted, it
    failed with exit 3. The line repeats it, quoted for the shell."""
    import subprocess

    state_dir = tmp_path / "my state $HOME"  # a space and a dollar: quoting matters
    args = ("g2", "--state-dir", str(state_dir), "--breaker", "1")
    assert guard(*args, "--", "false").returncode == 1
    halted = guard(*args, "--", "true")
    assert halted.returncode == 1
    line = next(x for x in _lines(halted.stdout) if x.startswith("  Or run: "))
    hint = line.removeprefix("  Or run: ")
    assert hint in halted.stderr
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "HOME": str(tmp_path / "elsewhere")}  # another shell, another default state directory
    pasted = subprocess.run(["bash", "-c", hint], capture_output=True, text=True, env=env, cwd=tmp_path, check=False)
    assert pasted.returncode == 0, pasted.stderr
    assert "Reset g2: breaker (consecutive failures were 1)" in pasted.stdout
    assert guard(*args, "--", "true").returncode == 0
    state_file = (state_dir / "g2-state.yaml").read_text()
    comment = next(x for x in state_file.splitlines() if x.startswith("# Reset the breaker with"))
    assert subprocess.run(["bash", "-c", comment.split("`")[1]], env=env, capture_output=True,
                          check=False).returncode == 0


def test_reset_of_an_unknown_name_creates_nothing(state_dir: Path) -> None:
    """It left a lock file behind, after which ``guard status`` of the name exited 0."""
    state_dir.mkdir()
    for args in (("reset", "nope"), ("reset", "nope", "--all")):
        proc = guard(*args, "--state-dir", str(state_dir))
        assert proc.returncode == 3 and proc.stderr == f"resumable: no guard state for nope in {state_dir}\n"
    assert list(state_dir.iterdir()) == []
    assert guard("status", "nope", "--state-dir", str(state_dir)).returncode == 3


@pytest.mark.parametrize("text", ["", "hello: world\n", "\x00\x01garbage"])
def test_a_state_file_with_no_key_of_a_state_is_refused(text: str, state_dir: Path, tmp_path: Path) -> None:
    """It was silently reset to a fresh state by the next pass."""
    state_dir.mkdir()
    path = state_dir / "job-state.yaml"
    path.write_text(text)
    marker = tmp_path / "ran"
    for args in (("job", "--state-dir", str(state_dir), "--", "touch", str(marker)),
                 ("status", "job", "--state-dir", str(state_dir)),
                 ("reset", "job", "--state-dir", str(state_dir))):
        proc = guard(*args)
        assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc
        assert "holds none of a guard state's keys" in proc.stderr
        assert f"resumable guard reset job --all --state-dir {state_dir}" in proc.stderr
    assert not marker.exists() and path.read_text() == text
    assert guard("reset", "job", "--all", "--state-dir", str(state_dir)).returncode == 0
    assert state_of(state_dir, "job")["pass_count"] == "0"
    assert guard("job", "--state-dir", str(state_dir), "--", "touch", str(marker)).returncode == 0 and marker.exists()
