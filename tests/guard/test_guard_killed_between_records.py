"""A guard SIGKILLed between the two records of a pass's outcome (the history line and the state)
loses nothing: the next invocation records the outcome exactly once, the one the command had.

The kill lands at that exact point through a wrapper that lets the guard's first outcome write
finish and then SIGKILLs the guard, whichever of the two it writes first. (When the state came
first, the state said the pass had ended and no invocation ever wrote its outcome to the history:
tests/reliability R12 saw pass 23 go missing so.)"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from guardhelpers import guard, state_of

KILLED_AFTER_FIRST_OUTCOME_WRITE = """
import os, signal, sys
from resumable.guard import history, state
from resumable.cli.main import main

real_write, real_append = state.write, history.append

def write(path, value, name):
    real_write(path, value, name)
    if value.pass_started_at == "none":  # the pass's end (a fresh state dir: no other write says so)
        os.kill(os.getpid(), signal.SIGKILL)

def append(path, event):
    real_append(path, event)
    if event.get("event") == "pass":
        os.kill(os.getpid(), signal.SIGKILL)

state.write, history.append = write, append
sys.exit(main(sys.argv[1:]))
"""


def _outcomes(state_dir: Path) -> list[dict[str, object]]:
    lines = (state_dir / "job-history.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == "pass"]


def _kill_between_records(state_dir: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", KILLED_AFTER_FIRST_OUTCOME_WRITE, "guard", "job", "--state-dir",
                           str(state_dir), "--outcome-from-output", "--", "sh", "-c", "echo noop; exit 0"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr


def test_the_next_invocation_records_the_outcome_once_as_the_command_ended(state_dir: Path) -> None:
    _kill_between_records(state_dir)
    nxt = guard("job", "--state-dir", str(state_dir), "--max-passes", "1", "--", "true")
    assert nxt.returncode == 0, nxt.stderr
    assert "Pass 1 (started " in nxt.stdout and "ended noop (exit 0), as its history says" in nxt.stdout
    assert "SKIP: max passes reached (1 >= 1)" in nxt.stdout
    got = state_of(state_dir, "job")
    assert (got["pass_count"], got["last_status"], got["last_exit_code"], got["pass_started_at"],
            got["consecutive_failures"]) == ("1", "noop", "0", "none", "0")
    [ended] = _outcomes(state_dir)  # exactly one outcome, the command's (not a "killed" failure)
    assert (ended["pass"], ended["status"], ended["exit_code"]) == (1, "noop", 0)
    assert guard("job", "--state-dir", str(state_dir), "--", "true").returncode == 0
    assert [e["pass"] for e in _outcomes(state_dir)] == [1, 2]


def test_a_dry_run_says_so_and_writes_nothing_of_it(state_dir: Path) -> None:
    _kill_between_records(state_dir)
    dry = guard("job", "--state-dir", str(state_dir), "--dry-run", "--", "true")
    assert dry.returncode == 0, dry.stderr
    assert "ended noop (exit 0), as its history says" in dry.stdout and "it will be recorded" in dry.stdout
    assert state_of(state_dir, "job")["pass_started_at"] != "none" and len(_outcomes(state_dir)) == 1


def test_an_outcome_line_of_another_pass_start_is_not_taken(state_dir: Path) -> None:
    """The history is informational: only the line with the unfinished pass's number and start time
    (and well-formed) is its outcome; anything else leaves it to be recorded as a failure."""
    _kill_between_records(state_dir)
    path = state_dir / "job-history.jsonl"
    events = [json.loads(line) for line in path.read_text().splitlines()]
    for event in events:
        if event["event"] == "pass":
            event["started_at"] = "2001-01-01T00:00:00Z"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    nxt = guard("job", "--state-dir", str(state_dir), "--", "true")
    assert nxt.returncode == 0 and "never recorded its outcome (its guard was killed)" in nxt.stdout
    got = [(e["pass"], e["status"], e["exit_code"]) for e in _outcomes(state_dir)]
    assert got == [(1, "noop", 0), (1, "failure", None), (2, "success", 0)]
