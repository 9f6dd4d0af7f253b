"""Ctrl-C in a durable script under ``with open_run(...)``: what finished is recorded, one line is
printed ("interrupted: N calls recorded; run the script again to resume"), exit 130; from the first
moment (while open_run opens the run), on threads, on worker processes and while a rate limit waits."""

from __future__ import annotations

import os
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from .helpers import python, read_doc, step_units

SCRIPT = textwrap.dedent("""
    import os, sys, time
    import resumable

    runs, log, executor, rate = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] or None

    def work(i):
        with open(log, "a") as f:
            f.write(f"{i}\\n")
        time.sleep(0.05)
        return i

    if __name__ == "__main__":
        with resumable.open_run("r", runs_dir=runs, task="t") as run:
            run.map(run.step(work), range(10_000), jobs=2, executor=executor, rate=rate, progress=False)
""")

def expected(n: int) -> str:
    return f"interrupted: {n} call{'' if n == 1 else 's'} recorded; run the script again to resume\n"


def start(tmp_path: Path, executor: str = "thread", rate: str = "") -> tuple[subprocess.Popen[str], Path]:
    script, log = tmp_path / "script.py", tmp_path / "exec.log"
    script.write_text(SCRIPT)
    # A session of its own: the test signals its whole process group, as a terminal's Ctrl-C does.
    proc = python([str(script), str(tmp_path / "runs"), str(log), executor, rate], tmp_path,
                  start_new_session=True)
    return proc, log


def wait_for_lines(log: Path, count: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120
    while not log.exists() or len(log.read_text().splitlines()) < count:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the script made no progress"
        time.sleep(0.01)


def ctrl_c(proc: subprocess.Popen[str]) -> tuple[str, str]:
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    return out, err


def done_units(tmp_path: Path) -> int:
    return sum(u["status"] == "done" for u in step_units(read_doc(tmp_path / "runs", "r")).values())


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_ctrl_c_during_a_map_records_what_ended_and_says_so_in_one_line(tmp_path: Path, executor: str) -> None:
    proc, log = start(tmp_path, executor)
    wait_for_lines(log, 12, proc)
    out, err = ctrl_c(proc)
    recorded = done_units(tmp_path)
    assert (proc.returncode, out, err) == (130, "", expected(recorded))
    assert recorded >= 10  # the items that ended, those running at the signal included
    again, _ = start(tmp_path, executor)
    wait_for_lines(log, len(log.read_text().splitlines()) + 2, again)
    ctrl_c(again)
    assert done_units(tmp_path) > recorded  # run again: it went on from there


def test_ctrl_c_while_a_rate_limit_waits_ends_at_once(tmp_path: Path) -> None:
    proc, log = start(tmp_path, "thread", "1/hour")
    wait_for_lines(log, 1, proc)
    began = time.monotonic()
    _, err = ctrl_c(proc)
    assert (proc.returncode, err) == (130, expected(done_units(tmp_path)))
    assert done_units(tmp_path) == 1  # the one item its limit let start, which ended
    assert time.monotonic() - began < 60  # not an hour


EARLY = textwrap.dedent("""
    import os, signal, sys
    import resumable
    from resumable.durable import opening

    real = opening.open_with_task

    def interrupted_while_opening(run, task):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C in the first moments, as the run is opened
        real(run, task)

    opening.open_with_task = interrupted_while_opening
    if sys.argv[2] == "with":
        with resumable.open_run("r", runs_dir=sys.argv[1], task="t") as run:
            print("the block ran")
    else:
        run = resumable.open_run("r", runs_dir=sys.argv[1], task="t")
        print("opened")
        try:
            run.step(lambda: 1, name="one")
        except KeyboardInterrupt:
            print("KeyboardInterrupt at the next use")
""")


def test_ctrl_c_while_open_run_opens_the_run(tmp_path: Path) -> None:
    script = tmp_path / "early.py"
    script.write_text(EARLY)
    proc = python([str(script), str(tmp_path / "runs"), "with"], tmp_path)
    out, err = proc.communicate(timeout=120)
    assert (proc.returncode, out, err) == (130, "", expected(0))
    proc = python([str(script), str(tmp_path / "runs"), "plain"], tmp_path)
    out, err = proc.communicate(timeout=120)
    assert (proc.returncode, out, err) == (0, "opened\nKeyboardInterrupt at the next use\n", "")
