"""Claims held ahead of a worker's free slots: a claim is not an attempt until its step starts, so
claims handed back unstarted (a stop signal, a run a failure stopped) leave no attempt behind; and
a worker may be started before its run is submitted (``--wait``)."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from pgtests import RESUMABLE, assert_error, ok, sql
from storecase import clean
from test_pg_workers import read, wait_for
from workers import attempts, finish, start_worker


def submit(tmp: Path, env: dict[str, str], name: str, body: str) -> None:
    (tmp / f"{name}.toml").write_text(f'[job]\nname = "{name}"\n' + body)
    ok(subprocess.run([RESUMABLE, "submit", f"{name}.toml", "-q"], cwd=tmp, env=env, capture_output=True, text=True,
                      check=False))


def held(url: str, run: str) -> list[str]:
    return [s for (s,) in sql(url, "SELECT s.step FROM resumable_steps s JOIN resumable_runs r ON r.pk = s.run_pk"
                                   " WHERE r.id = %s AND s.state = 'running' ORDER BY s.ord", (run,))]


def test_claims_held_ahead_go_back_unstarted_on_sigterm(pg_url: str, pg_env: dict[str, str], tmp_path: Path) -> None:
    clean(pg_url)
    submit(tmp_path, pg_env, "ahead", "".join(f'[steps.s{i}]\nrun = "echo $RESUMABLE_STEP >> started; sleep 30"\n'
                                              for i in range(6)))
    a = start_worker(pg_env, tmp_path, "ahead", "-j", "1", "--ahead", "3", "--grace", "0.3s", "--lease", "60s")
    wait_for("the first step and three claims ahead of it",
             lambda: (tmp_path / "started").exists() and len(held(pg_url, "ahead")) == 4)
    assert [(r["step"], r["n"], r["status"]) for r in attempts(pg_url, "ahead")] == [("s0", 1, "running")]
    a.send_signal(signal.SIGTERM)
    code, _, err = finish([a], timeout=60)[0]
    assert code == 130, err
    assert (tmp_path / "started").read_text().split() == ["s0"]  # what was held ahead never ran
    assert [(r["step"], r["n"], r["status"]) for r in attempts(pg_url, "ahead")] == [("s0", 1, "interrupted")]
    assert held(pg_url, "ahead") == []
    states = sql(pg_url, "SELECT step, state, attempt, tries, worker FROM resumable_steps ORDER BY ord")
    assert states == [("s0", "pending", 1, 1, None)] + [(f"s{i}", "pending", 0, 0, None) for i in range(1, 6)]
    doc, _ = read(pg_url, "ahead")
    assert [x["status"] for x in doc["units"]["s0"]["attempts"]] == ["interrupted"]
    assert all(not doc["units"][f"s{i}"].get("attempts") for i in range(1, 6)), doc["units"]


def test_a_failure_that_stops_the_run_starts_nothing_held_ahead(pg_url: str, pg_env: dict[str, str],
                                                                tmp_path: Path) -> None:
    """As the local runner with -j 1: the first step fails, the run stops, and the steps claimed
    ahead of it go back without an attempt; the run needs attention, the others still pending."""
    clean(pg_url)
    submit(tmp_path, pg_env, "stops", '[steps.bad]\nrun = "sleep 0.3; exit 3"\n'
           + "".join(f'[steps.s{i}]\nrun = "echo $RESUMABLE_STEP >> started"\n' for i in range(4)))
    code, _, err = finish([start_worker(pg_env, tmp_path, "stops", "-j", "1", "--ahead", "4")], timeout=60)[0]
    assert code == 0, err
    assert not (tmp_path / "started").exists()
    assert [(r["step"], r["status"]) for r in attempts(pg_url, "stops")] == [("bad", "failed")]
    doc, _ = read(pg_url, "stops")
    assert doc["status"] == "needs_attention"
    assert {sid: u["status"] for sid, u in doc["units"].items()} == {"bad": "failed", **{f"s{i}": "pending"
                                                                                         for i in range(4)}}


def test_a_worker_waits_for_its_run_to_be_submitted(pg_url: str, pg_env: dict[str, str], tmp_path: Path) -> None:
    clean(pg_url)
    a = start_worker(pg_env, tmp_path, "later", "--wait", "60s")
    time.sleep(1.0)
    assert a.poll() is None  # still waiting
    submit(tmp_path, pg_env, "later", '[steps.one]\nrun = "true"\n[steps.two]\nrun = "true"\nneeds = ["one"]\n')
    code, _, err = finish([a], timeout=60)[0]
    assert code == 0, err
    assert read(pg_url, "later")[0]["status"] == "done"


def test_a_worker_waiting_in_vain_exits_3_in_one_line(pg_url: str, pg_env: dict[str, str], tmp_path: Path) -> None:
    clean(pg_url)
    proc = subprocess.run([RESUMABLE, "worker", "--run", "never", "--wait", "0.5s"], cwd=tmp_path, env=pg_env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert_error(proc, 3, "no run never was submitted within 0.5s", "resumable submit")
