"""Every seed behaviour of checkpoint-run (seed-contracts §3.2-3.4) through the CLI."""

from __future__ import annotations

import json
import os
from pathlib import Path

from runnerhelpers import doc, run_cli, status_of, units

J = ["--job", "render"]


def test_runs_steps_in_order_and_resume_skips_done(work: Path) -> None:
    r = run_cli([*J, "--step", "a:echo a >> trace", "--step", "b:echo b >> trace",
                 "--step", "c:echo c >> trace"])
    assert r.exit_code == 0, r.output
    assert (work / "trace").read_text() == "a\nb\nc\n"
    assert status_of(work, "render") == {"a": "done", "b": "done", "c": "done"}
    assert doc(work, "render")["status"] == "done"
    r = run_cli([*J, "--step", "a:echo a >> trace", "--step", "b:echo b >> trace",
                 "--step", "c:echo c >> trace"])
    # Piped: one summary line for the skipped steps; -v lists each.
    assert r.exit_code == 0 and "skip   all 3 steps already done (-v lists them)" in r.output
    assert "skip   a (" not in r.output
    r = run_cli([*J, "-v", "--step", "a:echo a >> trace", "--step", "b:echo b >> trace",
                 "--step", "c:echo c >> trace"])
    assert r.exit_code == 0 and "skip   a (done)" in r.output and "already done" not in r.output
    assert (work / "trace").read_text() == "a\nb\nc\n"


def test_failure_stops_later_steps_and_rerun_resumes_there(work: Path) -> None:
    steps = ["--step", "a:echo a >> trace", "--step", "b:test -f ok || exit 7",
             "--step", "c:echo c >> trace"]
    r = run_cli([*J, *steps])
    assert r.exit_code == 1
    st = status_of(work, "render")
    assert st == {"a": "done", "b": "failed", "c": "pending"}
    u = units(work, "render")["b"]
    assert u["lastExitCode"] == 7 and u["attempts"][0]["exitCode"] == 7
    d = doc(work, "render")
    assert d["status"] == "needs_attention"
    item = d["openItems"][0]
    assert item["step"] == "b" and item["lastExitCode"] == 7 and item["attempts"] == 1
    assert item["log"].endswith("b.1.log")
    assert "resume with: resumable run --job render" in r.output
    (work / "ok").touch()
    r = run_cli([*J, *steps])
    assert r.exit_code == 0, r.output
    assert (work / "trace").read_text() == "a\nc\n"
    d = doc(work, "render")
    assert d["status"] == "done" and d["openItems"] == []
    assert [a["n"] for a in d["units"]["b"]["attempts"]] == [1, 2]  # history kept


def test_changed_command_runs_again_with_recorded_invalidation(work: Path) -> None:
    assert run_cli([*J, "--step", "a:echo 1 > out"]).exit_code == 0
    r = run_cli([*J, "--step", "a:echo 2 > out"])
    assert r.exit_code == 0 and "rerun  a (command changed)" in r.output
    assert (work / "out").read_text() == "2\n"
    inv = units(work, "render")["a"]["invalidations"]
    assert inv[0]["reason"] == "command changed"


def test_artifact_missing_after_exit_zero_fails_with_minus_two_and_retries(work: Path) -> None:
    r = run_cli([*J, "--step", "a:true", "--step-artifact", "a:out.bin", "--retry", "1",
                 "--backoff", "0.01"])
    assert r.exit_code == 1
    u = units(work, "render")["a"]
    assert u["status"] == "failed" and u["lastExitCode"] == -2
    assert [a["exitCode"] for a in u["attempts"]] == [-2, -2]


def test_artifact_checksum_verified_on_resume(work: Path) -> None:
    args = [*J, "--step", "a:echo hi > out.bin; echo x >> count", "--step-artifact", "a:out.bin"]
    assert run_cli(args).exit_code == 0
    assert run_cli(args).exit_code == 0
    assert (work / "count").read_text() == "x\n"
    (work / "out.bin").write_text("tampered\n")
    r = run_cli(args)
    assert "artifact changed: out.bin" in r.output
    assert (work / "count").read_text() == "x\nx\n"
    (work / "out.bin").unlink()
    r = run_cli(args)
    assert "artifact missing: out.bin" in r.output and (work / "out.bin").exists()


def test_dry_run_writes_nothing(work: Path) -> None:
    r = run_cli([*J, "--step", "a:touch made", "--dry-run"])
    assert r.exit_code == 0 and "run   a: never ran" in r.output
    assert not (work / "made").exists() and not (work / "runs").exists()


def test_dry_run_after_failure_shows_exit_code(work: Path) -> None:
    run_cli([*J, "--step", "a:exit 4"])
    before = {p.name: p.read_bytes() for p in (work / "runs").iterdir() if p.is_file()}
    r = run_cli([*J, "--step", "a:exit 4", "--dry-run"])
    assert "run   a: failed last time (exit code 4)" in r.output
    after = {p.name: p.read_bytes() for p in (work / "runs").iterdir() if p.is_file()}
    assert before == after
    r = run_cli([*J, "--step", "a:exit 4", "--explain", "a"])
    assert r.output.strip() == "run   a: failed last time (exit code 4)"


def test_status_and_reset(work: Path) -> None:
    run_cli([*J, "--step", "a:true", "--step", "b:false"])
    r = run_cli([*J, "--status"])
    assert r.exit_code in (0, 1) and "render" in r.output
    r = run_cli([*J, "--reset"])
    assert r.exit_code == 0
    assert not (work / "runs" / "render.json").exists()
    r = run_cli([*J, "--step", "a:true", "--dry-run"])
    assert "never ran" in r.output


def test_force_reruns_everything_keeping_history(work: Path) -> None:
    args = [*J, "--step", "a:echo x >> count"]
    run_cli(args)
    r = run_cli([*args, "--force"])
    assert r.exit_code == 0 and (work / "count").read_text() == "x\nx\n"
    u = units(work, "render")["a"]
    assert len(u["attempts"]) == 2 and u["invalidations"][0]["reason"] == "forced"


def test_timeout_and_step_timeout(work: Path) -> None:
    r = run_cli([*J, "--step", "a:sleep 5", "--step", "b:true", "--timeout", "10",
                 "--step-timeout", "a:0.3", "--grace", "0.2"])
    assert r.exit_code == 1
    assert status_of(work, "render") == {"a": "timeout", "b": "pending"}


def test_continue_on_error_and_max_failures(work: Path) -> None:
    r = run_cli([*J, "--step", "a:false", "--step", "b:true", "--continue-on-error"])
    assert r.exit_code == 1 and status_of(work, "render") == {"a": "failed", "b": "done"}
    r = run_cli(["--job", "m", "--step", "a:false", "--step", "b:false", "--step", "c:true",
                 "--keep-going", "--max-failures", "2"])
    assert status_of(work, "m") == {"a": "failed", "b": "failed", "c": "pending"}


def test_retry_backoff_succeeds_second_time(work: Path) -> None:
    r = run_cli([*J, "--step", "a:test -f m || { touch m; exit 3; }", "--retry", "2",
                 "--backoff", "0.05"])
    assert r.exit_code == 0, r.output
    atts = units(work, "render")["a"]["attempts"]
    assert [(a["status"], a["exitCode"]) for a in atts] == [("failed", 3), ("done", 0)]


def test_step_log_and_logs_dir(work: Path) -> None:
    r = run_cli([*J, "--step", "a:echo to-a", "--step", "b:echo to-b",
                 "--step-log", "a:a.log", "--logs-dir", "L"])
    assert r.exit_code == 0
    assert (work / "a.log").read_text() == "to-a\n"
    assert (work / "L" / "b.1.log").read_text() == "to-b\n"


def test_logs_dir_names_the_latest_attempt_as_the_seed_does(work: Path) -> None:
    """DIR/<id>.log (the seed's name) is the latest attempt's output; each attempt keeps its own
    numbered file beside it, and that numbered file is what the records and the runner name."""
    step = "a:echo try; test -f m || { touch m; echo first; exit 3; }; echo second"
    r = run_cli([*J, "--step", step, "--retry", "1", "--backoff", "0.01", "--logs-dir", "L"])
    assert r.exit_code == 0, r.output
    logs = work / "L"
    assert (logs / "a.1.log").read_text() == "try\nfirst\n"
    assert (logs / "a.2.log").read_text() == "try\nsecond\n"
    assert (logs / "a.log").read_text() == "try\nsecond\n"
    assert (logs / "a.log").stat().st_ino == (logs / "a.2.log").stat().st_ino
    assert "log L/a.1.log" in r.output and "log L/a.2.log" in r.output
    atts = units(work, "render")["a"]["attempts"]
    assert [Path(a["log"]).name for a in atts] == ["a.1.log", "a.2.log"]
    assert sorted(p.name for p in logs.iterdir()) == ["a.1.log", "a.2.log", "a.log"]  # no temp left
    # The next attempt (a forced re-run) takes the name over.
    assert run_cli([*J, "--step", "a:echo third", "--logs-dir", "L", "--force"]).exit_code == 0
    assert (logs / "a.log").read_text() == "third\n" and (logs / "a.2.log").read_text() == "try\nsecond\n"


def test_logs_dir_replaces_a_link_planted_at_the_latest_name(work: Path) -> None:
    victim = work / "victim"
    victim.write_text("precious\n")
    (work / "L").mkdir()
    (work / "L" / "a.log").symlink_to(victim)
    assert run_cli([*J, "--step", "a:echo out", "--logs-dir", "L"]).exit_code == 0
    assert victim.read_text() == "precious\n"
    latest = work / "L" / "a.log"
    assert not latest.is_symlink() and latest.read_text() == "out\n"


def test_logs_dir_that_cannot_hold_the_latest_name_warns_and_runs(work: Path) -> None:
    (work / "L" / "a.log").mkdir(parents=True)  # a directory where the link would go
    r = run_cli([*J, "--step", "a:echo out", "--logs-dir", "L"])
    assert r.exit_code == 0, r.output
    assert "could not make" in r.output and "L/a.1.log" in r.output
    assert (work / "L" / "a.1.log").read_text() == "out\n"


def test_default_logs_per_attempt(work: Path) -> None:
    run_cli([*J, "--step", "a:echo one; exit 1"])
    run_cli([*J, "--step", "a:echo two"])
    logs = work / "runs" / "render" / "logs"
    assert (logs / "a.1.log").read_text() == "one\n" and (logs / "a.2.log").read_text() == "two\n"


def test_usage_errors_are_one_line_without_traceback(work: Path) -> None:
    for args, needle in [
        ([*J, "--step", "a:x", "--step", "a:y"], "given twice"),
        ([*J, "--step", ":x"], "non-empty id"),
        (["--step", "a:x"], "needs --job"),
        ([*J, "--step", "a:x", "--step-timeout", "b:3"], "no --step with id 'b'"),
        ([], "no job file"),
    ]:
        r = run_cli(args)
        assert r.exit_code == 1, (args, r.output)
        assert needle in r.output and "Traceback" not in r.output


def test_launch_descriptor_records_exact_argv(work: Path) -> None:
    args = [*J, "--step", "a:echo 'x y'"]
    run_cli(args)
    launch = doc(work, "render")["launch"]
    assert launch == {"kind": "resumable", "argv": ["resumable", "run", *args], "cwd": str(work)}
    assert json.loads(json.dumps(launch)) == launch
    assert os.path.isabs(launch["cwd"])
