"""The runner's contract against both stores: `resumable run JOB` on a runs directory (the local
runner) and with `--store URL` (a submit plus one local worker) prints the same lines and ends with
the same exit codes: skips, failures and resumes, keep-going, retries, timeouts that kill the whole
process tree, missing artifacts, changed commands, Ctrl-C."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from pgtests import RESUMABLE, ok
from storecase import StoreCase

JOB = """
[job]
name = "demo"
[steps.a]
run = "echo a >> trace"
[steps.b]
run = "echo b >> trace; test -f ok-b"
needs = ["a"]
[steps.c]
run = "echo c > c.out; echo c >> trace"
needs = ["a"]
artifacts = ["c.out"]
[steps.d]
run = "echo d >> trace"
needs = ["b", "c"]
"""


def normal(text: str, store: StoreCase) -> str:
    """Run output with what differs by design masked: log paths (store-specific) and durations."""
    text = re.sub(r"log \S+?\.log", "log <log>", text)
    text = re.sub(r"\(\d+(\.\d+)?m?s", "(<d>", text)
    return re.sub(r"--- last lines of (\S+) \(\S+\) ---", r"--- last lines of \1 ---", store.normal(text))


def run(store: StoreCase, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return store.r("run", *args, timeout=timeout)


def doc(store: StoreCase, run_id: str = "demo") -> dict[str, Any]:
    out: dict[str, Any] = json.loads(ok(store.r("get", run_id)))
    return out


def states(store: StoreCase, run_id: str = "demo") -> dict[str, str]:
    return {k: v["status"] for k, v in doc(store, run_id)["units"].items()}


@pytest.fixture
def job(store: StoreCase) -> Path:
    (store.tmp / "resumable.toml").write_text(JOB)
    return store.tmp / "resumable.toml"


def test_failure_stops_then_resume_finishes(store: StoreCase, job: Path) -> None:
    first = run(store, "-j", "2")
    assert first.returncode == 1, first
    out = normal(first.stdout, store)
    assert "demo: needs attention (" in out and "resume with: resumable run -j 2" in out
    assert "failed b (<d>, exit 1; log <log>)" in out
    assert states(store)["b"] == "failed" and states(store)["d"] == "pending"
    assert doc(store)["status"] == "needs_attention"
    assert [i["id"] for i in doc(store)["openItems"]] == ["step-failed:b"]
    (store.tmp / "ok-b").write_text("")
    second = run(store, "-j", "2")
    assert second.returncode == 0, second
    lines = normal(second.stdout, store).splitlines()
    assert "rerun  b (failed last time (exit code 1))" in lines
    assert any(line.startswith("skip   2 steps already done") for line in lines), lines
    assert lines[-1] == "demo: done (3 skipped, 2 done)" or lines[-1] == "demo: done (2 done, 2 skipped)"
    assert doc(store)["status"] == "done" and doc(store)["openItems"] == []
    assert [i["id"] for i in doc(store)["resolvedItems"]] == ["step-failed:b"]
    third = run(store)
    assert third.returncode == 0 and normal(third.stdout, store).splitlines()[-1] == "demo: done (4 skipped)"
    assert (store.tmp / "trace").read_text().split() == ["a", "b", "c", "b", "d"] or \
        (store.tmp / "trace").read_text().split() == ["a", "c", "b", "b", "d"]


def test_same_output_in_both_stores(tmp_path: Path, pg_url: str) -> None:
    """One scenario, run against each store: the same lines (but for log paths and durations)."""
    outs = []
    for kind in ("files", "postgres"):
        case = StoreCase(kind, tmp_path / kind, pg_url if kind == "postgres" else None)
        case.tmp.mkdir()
        (case.tmp / "resumable.toml").write_text(JOB)
        seen = []
        for args in (["-j", "1"], ["--dry-run"], ["--explain", "d"]):
            proc = run(case, *args)
            seen.append((proc.returncode, normal(proc.stdout, case), normal(proc.stderr, case)))
        (case.tmp / "ok-b").write_text("")
        for args in (["-j", "1"], ["-j", "1"], ["--force", "-j", "1"]):
            proc = run(case, *args)
            seen.append((proc.returncode, normal(proc.stdout, case), normal(proc.stderr, case)))
        outs.append(seen)
    # The PostgreSQL store came from RESUMABLE_STORE: its resume line names it, pasteable in a shell
    # without that variable; the runs directory was found from the working directory.
    hinted = "resume with: resumable run --<store> <root>"
    assert any(hinted in out for _, out, _ in outs[1])
    outs[1] = [(code, out.replace(hinted, "resume with: resumable run"), err) for code, out, err in outs[1]]
    for x, y in zip(*outs, strict=True):
        assert x == y


def test_keep_going_blocks_dependents(store: StoreCase) -> None:
    (store.tmp / "resumable.toml").write_text("""
[job]
name = "k"
[steps.bad]
run = "exit 5"
[steps.child]
run = "true"
needs = ["bad"]
[steps.grandchild]
run = "true"
needs = ["child"]
[steps.other]
run = "true"
""")
    proc = run(store, "--keep-going")
    assert proc.returncode == 1, proc
    assert states(store, "k") == {"bad": "failed", "child": "dep_blocked", "grandchild": "dep_blocked",
                                  "other": "done"}
    units = doc(store, "k")["units"]
    assert units["child"]["blockedBy"] == "bad" and units["grandchild"]["blockedBy"] == "bad"
    assert units["bad"]["lastExitCode"] == 5


def test_retries_with_backoff_keep_every_attempt(store: StoreCase) -> None:
    (store.tmp / "resumable.toml").write_text("""
[job]
name = "retry"
[steps.flaky]
run = "n=$(cat n 2>/dev/null || echo 0); echo $((n+1)) > n; test $n -ge 2"
retries = 3
backoff = "0.2s"
""")
    t0 = time.monotonic()
    proc = run(store)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 0, proc
    out = normal(proc.stdout, store)
    assert out.count("retrying in") == 2 and "done   flaky" in out
    attempts = doc(store, "retry")["units"]["flaky"]["attempts"]
    assert [(a["n"], a["status"], a["exitCode"]) for a in attempts] == [(1, "failed", 1), (2, "failed", 1),
                                                                          (3, "done", 0)]
    assert elapsed >= 0.2 + 0.4  # the backoff was waited out: base * 2^(k-1), jitter only adds


def test_timeout_kills_the_whole_process_tree(store: StoreCase) -> None:
    (store.tmp / "resumable.toml").write_text("""
[job]
name = "slow"
grace = "0.3s"
[steps.hang]
run = "sh -c 'trap \\"\\" TERM; sleep 30 & echo $! > grandchild; wait' ; sleep 30"
timeout = "0.5s"
""")
    proc = run(store)
    assert proc.returncode == 1, proc
    unit = doc(store, "slow")["units"]["hang"]
    assert unit["status"] == "timeout" and unit["attempts"][-1]["status"] == "timeout"
    pid = int((store.tmp / "grandchild").read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    assert not _alive(pid), "the step's grandchild survived its timeout"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_missing_artifact_and_changed_command(store: StoreCase) -> None:
    job = store.tmp / "resumable.toml"
    job.write_text("""
[job]
name = "art"
[steps.make]
run = "true"
artifacts = ["out.txt"]
""")
    proc = run(store)
    assert proc.returncode == 1
    unit = doc(store, "art")["units"]["make"]
    assert unit["status"] == "failed" and unit["lastExitCode"] == -2
    assert unit["attempts"][-1]["reason"] == "exited 0 but artifact missing: out.txt"
    job.write_text(job.read_text().replace('run = "true"', 'run = "echo x > out.txt"'))
    assert run(store).returncode == 0
    job.write_text(job.read_text().replace("echo x", "echo y"))
    proc = run(store)
    assert proc.returncode == 0 and "rerun  make (command changed)" in proc.stdout
    unit = doc(store, "art")["units"]["make"]
    assert unit["invalidations"][-1]["reason"] == "command changed" and unit["invalidations"][-1]["from"] == "done"
    assert (store.tmp / "out.txt").read_text() == "y\n"


def test_ctrl_c_saves_and_exits_130_then_resumes(store: StoreCase) -> None:
    (store.tmp / "resumable.toml").write_text("""
[job]
name = "int"
grace = "0.5s"
[steps.long]
run = "echo started > started; sleep 30"
[steps.after]
run = "true"
needs = ["long"]
""")
    proc = subprocess.Popen([RESUMABLE, "run"], cwd=store.tmp, env=store.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not (store.tmp / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, (out, err)
    assert "int: interrupted (" in out and "resume with: resumable run" in out
    unit = doc(store, "int")["units"]["long"]
    assert unit["status"] == "interrupted" and unit["attempts"][-1]["status"] == "interrupted"
    (store.tmp / "resumable.toml").write_text((store.tmp / "resumable.toml").read_text().replace("sleep 30", "true"))
    again = run(store)
    assert again.returncode == 0, again
    assert [a["n"] for a in doc(store, "int")["units"]["long"]["attempts"]] == [1, 2]


def test_reset_and_status_of_a_job(store: StoreCase, job: Path) -> None:
    (store.tmp / "ok-b").write_text("")
    assert run(store).returncode == 0
    status = ok(store.r("status", "demo", "--no-color"))
    assert "✓ DONE" in status and "4/4 done" in status
    proc = run(store, "--job", "demo", "--reset")
    assert proc.returncode == 0 and proc.stdout.startswith("reset demo: ")
    assert store.r("get", "demo").returncode == 3
    assert os.path.exists(job)


def test_a_password_in_the_store_url_is_never_recorded(pg_url: str, tmp_path: Path) -> None:
    from urllib.parse import urlsplit, urlunsplit

    from pgtests import base_env, cli
    from storecase import clean

    clean(pg_url)
    parts = urlsplit(pg_url)
    secret_url = urlunsplit(parts._replace(netloc=f"{parts.username}:hunter2@{parts.hostname}:{parts.port}"))
    (tmp_path / "resumable.toml").write_text('[job]\nname = "pw"\n[steps.a]\nrun = "true"\n')
    env = base_env(XDG_STATE_HOME=str(tmp_path / "state"))
    for command in ("submit", "run"):
        proc = cli(command, "--store", secret_url, env=env, cwd=tmp_path)
        assert proc.returncode == 0, proc
        assert "hunter2" not in proc.stdout + proc.stderr
    got = ok(cli("get", "pw", "--store", pg_url, env=env))
    assert "hunter2" not in got and json.loads(got)["launch"]["argv"][:2] == ["resumable", "run"]
    report = cli("report", "pw", "-o", "-", "--store", pg_url, env=env)
    assert report.returncode == 0 and "<html" in report.stdout.lower() and "hunter2" not in report.stdout
    listing = ok(cli("status", "--list", "--no-color", "--store", pg_url, env=env))
    assert listing.splitlines()[1].startswith("✓ pw ")  # after the "N runs under ..." header


def test_a_step_removed_from_the_job_is_marked_removed_and_counted_apart(store: StoreCase, job: Path) -> None:
    (store.tmp / "ok-b").write_text("")
    assert run(store).returncode == 0
    job.write_text(JOB.split("[steps.d]")[0])  # d leaves the job file
    again = run(store)
    assert again.returncode == 0, again
    units = doc(store)["units"]
    assert units["d"]["removed"] is True and units["d"]["status"] == "done"
    assert all("removed" not in units[s] or units[s]["removed"] is False for s in "abc")
    shown = ok(store.r("status", "demo"))
    assert "3/3 done" in shown, shown  # the removed unit is in no done/total
    job.write_text(JOB)  # d is back: no longer removed, and skipped as done (same fingerprint)
    back = run(store)
    assert back.returncode == 0, back
    assert doc(store)["units"]["d"]["removed"] is False
    assert "4/4 done" in ok(store.r("status", "demo"))
