"""run.finish, resumable rerun (job-file runs too), and the other commands on durable runs:
status, report (one bar per attempt), log, the seed verbs, a second process refused by the lease."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import resumable
from resumable.cli.main import main

from .helpers import HERE, python, read_doc, step_units


def test_finish_opens_findings_and_resolves_them_once_fixed(runs: Path) -> None:
    run = resumable.open_run("f", runs_dir=runs, task="finish")
    broken = [True]

    @run.step(key=lambda x: x)
    def f(x: str) -> str:
        if broken[0] and x == "b":
            raise RuntimeError("b is broken")
        return x

    for x in "abc":
        try:
            f(x)
        except RuntimeError:
            pass
    assert run.finish() == "needs_attention"
    doc = read_doc(runs, "f")
    assert doc["status"] == "needs_attention"
    (item,) = doc["openItems"]
    assert item["id"] == "step-failed:f:b" and "RuntimeError: b is broken" in item["summary"]
    broken[0] = False
    assert f("b") == "b"
    assert run.finish() == "done"
    doc = read_doc(runs, "f")
    assert doc["status"] == "done" and doc["openItems"] == []
    assert [it["id"] for it in doc["resolvedItems"]] == ["step-failed:f:b"]


def test_finish_while_a_step_runs_is_refused(runs: Path) -> None:
    run = resumable.open_run("f", runs_dir=runs, task="finish")

    @run.step
    def inner(x: int) -> str:
        return run.finish()

    with pytest.raises(resumable.RefusedError, match="still running"):
        inner(1)


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_rerun_cli(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = resumable.open_run("rr", runs_dir=runs, task="rerun")
    calls: list[str] = []

    @run.step(key=lambda x: x)
    def f(x: str) -> str:
        calls.append(x)
        return x.upper()

    f("a"), f("b")
    assert run.finish() == "done"
    code, out, err = cli(capsys, "unit", "rr", "f:a", "pending")
    assert code == 2 and "already done" in err  # the ordinary verb still refuses to demote
    code, out, err = cli(capsys, "rerun", "rr", "f:a", "--reason", "bad input file")
    assert (code, err) == (0, "") and out == "rr: 1 unit(s) will run again: f:a\n"
    doc = read_doc(runs, "rr")
    assert doc["status"] == "needs_attention"  # a finished run is reopened
    unit = doc["units"]["f:a"]
    assert unit["status"] == "pending"
    assert unit["invalidations"][-1]["reason"] == "bad input file"
    assert unit["invalidations"][-1]["from"] == "done"
    assert f("a") == "A" and f("b") == "B"
    assert calls == ["a", "b", "a"]
    code, out, err = cli(capsys, "rerun", "rr", "--step", "f")
    assert code == 0 and "2 unit(s)" in out
    assert run.finish() == "needs_attention"  # pending units are not done


@pytest.mark.parametrize(("args", "code", "message"), [
    (["rerun", "rr", "nope"], 1, "has no unit nope"),
    (["rerun", "rr"], 1, "needs unit ids"),
    (["rerun", "rr", "--step", "g"], 1, "no unit of a step named 'g'"),
    (["rerun", "missing", "x"], 3, "no such run"),
    (["rerun", "rr", "a b"], 1, "commas/whitespace"),
])
def test_rerun_errors(runs: Path, capsys: pytest.CaptureFixture[str], args: list[str], code: int,
                      message: str) -> None:
    run = resumable.open_run("rr", runs_dir=runs, task="rerun")
    run.step(lambda x: x, name="f")(1)
    before = (runs / "rr.journal.jsonl").read_bytes()
    got, _out, err = cli(capsys, *args)
    assert got == code and message in err
    assert len(err.splitlines()) == 1 and err.startswith("resumable: ")
    assert (runs / "rr.journal.jsonl").read_bytes() == before


def test_rerun_refuses_a_unit_in_progress(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = resumable.open_run("rr", runs_dir=runs, task="rerun")
    run.unit("busy", "in_progress")
    code, _out, err = cli(capsys, "rerun", "rr", "busy")
    assert code == 2 and "in progress" in err


def test_rerun_of_a_job_file_step_runs_it_again(runs: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "job.toml").write_text('[job]\nname = "job"\n[steps.a]\nrun = "echo a >> trace"\n'
                                       '[steps.b]\nrun = "echo b >> trace"\nneeds = ["a"]\n')
    assert resumable.run_job(str(tmp_path / "job.toml"), quiet=True) == 0
    assert resumable.run_job(str(tmp_path / "job.toml"), quiet=True) == 0
    assert (tmp_path / "trace").read_text().split() == ["a", "b"]
    code, _out, _err = cli(capsys, "rerun", "job", "b", "--reason", "flaky output")
    assert code == 0
    assert resumable.run_job(str(tmp_path / "job.toml"), quiet=True) == 0
    assert (tmp_path / "trace").read_text().split() == ["a", "b", "b"]
    assert read_doc(runs, "job")["status"] == "done"


def test_status_report_log_and_seed_verbs_on_a_durable_run(runs: Path, capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    run = resumable.open_run("views", runs_dir=runs, task="views of a durable run")
    tries = [0]

    @run.step(key=lambda x: x, retries=1, backoff=0)
    def f(x: str) -> str:
        tries[0] += 1
        if x == "flaky" and tries[0] == 1:
            raise ValueError("once")
        return x

    f("flaky"), f("steady")
    run.finish()
    code, out, _ = cli(capsys, "status", "views")
    assert code == 0 and "DONE" in out and "2/2 done" in out
    code, out, _ = cli(capsys, "report", "views", "-o", "-")
    assert code == 0
    assert int(re.search(r'data-bars="(\d+)"', out).group(1)) == 3  # type: ignore[union-attr]
    code, out, _ = cli(capsys, "log", "views")
    assert code == 0 and "unit f:flaky -> failed (attempt 1)" in out and "unit f:flaky -> done (attempt 2)" in out
    code, out, _ = cli(capsys, "get", "views", "--summary")
    assert code == 0 and json.loads(out)["done"] == 2
    code, out, _ = cli(capsys, "resume", "views")
    assert code == 0 and sorted(json.loads(out)["skip"]) == ["f:flaky", "f:steady"]
    code, _, _ = cli(capsys, "unit", "views", "manual", "done")
    assert code == 0


def test_a_second_process_is_refused_while_the_first_runs_steps(runs: Path, tmp_path: Path) -> None:
    script = tmp_path / "hold.py"
    script.write_text(
        "import sys, time, resumable\n"
        f"run = resumable.open_run('held', runs_dir={str(runs)!r}, task='t')\n"
        "step = run.step(lambda x: x, name='f')\n"
        "step(int(sys.argv[1]))\n"
        "print('ready', flush=True)\n"
        "time.sleep(30)\n")
    holder = python([str(script), "1"], tmp_path)
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "ready"
    try:
        other = python([str(script), "2"], tmp_path)
        _out, err = other.communicate(timeout=60)
        assert other.returncode == 1
        assert f"already being run by pid {holder.pid}" in err
        # A hit needs no lease: the recorded call is answered while the holder lives.
        hit = python(["-c", "import resumable\n"
                            f"run = resumable.open_run('held', runs_dir={str(runs)!r}, task='t')\n"
                            "print(run.step(lambda x: x, name='f')(1))\n"], tmp_path)
        assert hit.communicate(timeout=60)[0].strip() == "1"
    finally:
        holder.kill()
        holder.communicate()
    # The holder died: its lease went with it; the next process runs steps at once.
    after = python([str(script), "3"], tmp_path)
    assert after.stdout is not None and after.stdout.readline().strip() == "ready"
    after.kill()
    after.communicate()
    assert len(step_units(read_doc(runs, "held"))) == 2  # calls 1 and 3; never 2


def test_a_long_step_left_running_by_a_dead_process_is_recorded_interrupted(runs: Path, tmp_path: Path) -> None:
    script = tmp_path / "long.py"
    script.write_text(
        "import time, resumable\n"
        "from resumable.durable.opening import engine_of\n"
        f"run = resumable.open_run('long', runs_dir={str(runs)!r}, task='t')\n"
        "engine_of(run).record_start_after = 0.05\n"
        "@run.step(key=lambda x: x)\n"
        "def slow(x):\n"
        "    print('started', flush=True)\n"
        "    time.sleep(30)\n"
        "    return x\n"
        "slow('only')\n")
    proc = python([str(script)], tmp_path)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
    for _ in range(100):
        unit = read_doc(runs, "long")["units"].get("slow:only")
        if unit is not None and unit["status"] == "in_progress":
            break
        import time

        time.sleep(0.05)
    assert unit is not None and unit["status"] == "in_progress"
    assert unit["attempts"][0]["status"] == "running" and unit["attempts"][0]["pid"] == proc.pid
    proc.kill()
    proc.communicate()
    run = resumable.open_run("long", runs_dir=runs, task="t")
    assert run.step(lambda x: x.upper(), name="slow", key=lambda x: x)("only") == "ONLY"
    unit = read_doc(runs, "long")["units"]["slow:only"]
    assert [(a["n"], a["status"]) for a in unit["attempts"]] == [(1, "interrupted"), (2, "done")]
    assert HERE.is_dir()
