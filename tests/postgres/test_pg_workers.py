"""Workers on many machines (several worker processes standing in for hosts): a DAG run to the end
while workers are SIGKILLed at random and restarted, every step done exactly once and every attempt
on record; a worker paused past its lease has its completion fenced off; SIGTERM hands steps back."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from pgtests import RESUMABLE, ok, sql
from storecase import clean
from workers import attempts, check_exactly_once, dag_job, finish, start_worker

import resumable


def read(url: str, run: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    handle = resumable.open_run(run, store_url=url)
    try:
        return handle.doc, handle.history()
    finally:
        handle.close()


def chaos(url: str, env: dict[str, str], tmp: Path, *, steps: int, kills: int, workers: int = 4,
          seed: int = 7, sleep_every: int = 7, sleep: float = 0.05,
          every: tuple[float, float] = (0.1, 0.4)) -> dict[str, int]:
    clean(url)
    job = dag_job(tmp / "chaos.toml", "chaos", steps, seed=seed, sleep_every=sleep_every, sleep=sleep)
    ok(subprocess.run([RESUMABLE, "submit", str(job), "-q"], cwd=tmp, env=env, capture_output=True, text=True,
                      check=False))
    rng = random.Random(seed)
    extra = ("-j", "2", "--lease", "1s", "--grace", "1s")
    procs = [start_worker(env, tmp, "chaos", *extra) for _ in range(workers)]
    everyone = list(procs)
    done_kills = 0
    deadline = time.monotonic() + 600
    while done_kills < kills and time.monotonic() < deadline:
        time.sleep(rng.uniform(*every))
        alive = [p for p in procs if p.poll() is None]
        if not alive:
            break  # the run ended before every kill was spent
        # Mostly a worker that holds claims right now. On a loaded machine fresh workers take a
        # while to start and claim: wait for one that holds a claim rather than spend the kills
        # on workers still starting (which would prove nothing about taking claims back).
        want_busy = rng.random() < 0.9
        wait_until = time.monotonic() + 10
        while True:
            holding = {pid for (pid,) in sql(url, "SELECT pid FROM resumable_attempts WHERE status = 'running'")}
            busy = [p for p in alive if p.pid in holding]
            if busy or not want_busy or time.monotonic() > wait_until:
                break
            time.sleep(0.05)
            alive = [p for p in procs if p.poll() is None]
            if not alive:
                break
        if not alive:
            break
        victim = rng.choice(busy if busy and want_busy else alive)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        procs.remove(victim)
        done_kills += 1
        fresh = start_worker(env, tmp, "chaos", *extra)
        procs.append(fresh)
        everyone.append(fresh)
    results = finish(procs, timeout=600)
    assert all(code == 0 for code, _, _ in results), results
    doc, history = read(url, "chaos")
    counts = check_exactly_once(url, "chaos", steps, doc, history)
    counts["kills"] = done_kills
    return counts


def test_workers_killed_at_random_every_step_done_exactly_once(pg_url: str, pg_env: dict[str, str],
                                                                tmp_path: Path) -> None:
    counts = chaos(pg_url, pg_env, tmp_path, steps=300, kills=12, sleep_every=2, sleep=0.3)
    assert counts["kills"] >= 6 and counts["expired"] >= 1, counts  # the kills did take claims away


@pytest.mark.slow
def test_four_workers_two_thousand_steps_a_hundred_kills(pg_url: str, pg_env: dict[str, str],
                                                        tmp_path: Path) -> None:
    counts = chaos(pg_url, pg_env, tmp_path, steps=2000, kills=100, sleep_every=3, sleep=0.2, every=(0.05, 0.25))
    assert counts["kills"] == 100 and counts["expired"] >= 20, counts


def wait_for(what: str, check: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_worker_paused_past_its_lease_is_fenced_off(pg_url: str, pg_env: dict[str, str], tmp_path: Path) -> None:
    """Worker A claims the step and is stopped (SIGSTOP) past its lease; worker B takes the step back
    and runs it again; A's own attempt ends while A is stopped; resumed (SIGCONT), A tries to record
    it: refused (stale), kept with its attempt, never overwriting B's."""
    clean(pg_url)
    (tmp_path / "fence.toml").write_text('[job]\nname = "fence"\n[steps.work]\n'
                                         'run = "sleep 1.5; echo $RESUMABLE_ATTEMPT >> finished"\n')
    ok(subprocess.run([RESUMABLE, "submit", "fence.toml", "-q"], cwd=tmp_path, env=pg_env, capture_output=True,
                      text=True, check=False))
    a = subprocess.Popen([RESUMABLE, "worker", "--run", "fence", "--lease", "1s"], cwd=tmp_path, env=pg_env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for("A's claim", lambda: len(attempts(pg_url, "fence")) == 1)
    a.send_signal(signal.SIGSTOP)
    try:
        b = start_worker(pg_env, tmp_path, "fence", "--lease", "1s")
        wait_for("B to take the step over", lambda: len(attempts(pg_url, "fence")) == 2)
        wait_for("A's attempt to end while A is stopped",
                 lambda: (tmp_path / "finished").exists() and "1" in (tmp_path / "finished").read_text().split())
    finally:
        a.send_signal(signal.SIGCONT)
    results = finish([a, b], timeout=60)
    assert [code for code, _, _ in results] == [0, 0], results
    assert "(stale)" in results[0][1] or "lost the lease" in results[0][2], results[0]
    doc, history = read(pg_url, "fence")
    first, second = attempts(pg_url, "fence")
    assert first["status"] == "expired" and first["stale"] is not None and first["stale"]["status"] == "done"
    assert first["stale"]["epoch"] == first["epoch"] < first["stale"]["currentEpoch"] == second["epoch"]
    assert second["status"] == "done" and second["stale"] is None
    unit = doc["units"]["work"]
    assert [(x["n"], x["status"]) for x in unit["attempts"]] == [(1, "interrupted"), (2, "done")]
    assert "lease expired" in unit["attempts"][0]["reason"]
    assert [e["state"] for e in history if e["t"] == "unit" and e["state"] == "done"] == ["done"]
    assert sorted((tmp_path / "finished").read_text().split()) == ["1", "2"]  # both really ran


def test_sigterm_hands_running_steps_back(pg_url: str, pg_env: dict[str, str], tmp_path: Path) -> None:
    """SIGTERM: stop claiming; a step that does not finish within --grace is stopped and handed back
    (recorded interrupted, claimable at once, not waiting for its lease); exit 130. Another worker
    then finishes the run."""
    clean(pg_url)
    (tmp_path / "term.toml").write_text('[job]\nname = "term"\n[steps.long]\n'
                                        'run = "echo $RESUMABLE_ATTEMPT >> started; sleep 20"\n'
                                        '[steps.quick]\nrun = "true"\nneeds = ["long"]\n')
    ok(subprocess.run([RESUMABLE, "submit", "term.toml", "-q"], cwd=tmp_path, env=pg_env, capture_output=True,
                      text=True, check=False))
    a = start_worker(pg_env, tmp_path, "term", "--grace", "0.3s", "--lease", "60s")
    wait_for("the step to start", lambda: (tmp_path / "started").exists())
    t0 = time.monotonic()
    a.send_signal(signal.SIGTERM)
    code, _, err = finish([a], timeout=30)[0]
    assert code == 130, err
    assert time.monotonic() - t0 < 20  # handed back, not waited for
    rows = attempts(pg_url, "term")
    assert [(r["step"], r["n"], r["status"]) for r in rows] == [("long", 1, "interrupted")]
    state = sql(pg_url, "SELECT state, lease_expires FROM resumable_steps WHERE step = 'long'")
    assert state == [("pending", None)]
    (tmp_path / "term.toml").write_text((tmp_path / "term.toml").read_text().replace("sleep 20", "true"))
    ok(subprocess.run([RESUMABLE, "submit", "term.toml", "-q"], cwd=tmp_path, env=pg_env, capture_output=True,
                      text=True, check=False))
    b = start_worker(pg_env, tmp_path, "term")
    assert finish([b], timeout=60)[0][0] == 0
    doc, _ = read(pg_url, "term")
    assert doc["status"] == "done"
    assert [x["status"] for x in doc["units"]["long"]["attempts"]] == ["interrupted", "done"]
    assert json.loads(ok(subprocess.run([RESUMABLE, "db", "attempts", "term", "--json"], env=pg_env,
                                        capture_output=True, text=True, check=False)).splitlines()[0])["step"] == "long"


def test_fingerprints_are_taken_on_the_workers_host(pg_url: str, pg_env: dict[str, str], tmp_path: Path) -> None:
    """An input that differs on the worker's host from where the job was submitted: the step runs
    as it is there, the worker says what differs, and the fingerprint recorded is the worker's."""
    clean(pg_url)
    (tmp_path / "in.txt").write_text("as submitted")
    (tmp_path / "fp.toml").write_text('[job]\nname = "fp"\n[steps.use]\nrun = "cat in.txt > out.txt"\n'
                                      'inputs = ["in.txt"]\nartifacts = ["out.txt"]\n')
    ok(subprocess.run([RESUMABLE, "submit", "fp.toml", "-q"], cwd=tmp_path, env=pg_env, capture_output=True,
                      text=True, check=False))
    (tmp_path / "in.txt").write_text("as on the worker's host")
    code, _, err = finish([start_worker(pg_env, tmp_path, "fp")], timeout=60)[0]
    assert code == 0 and "input differs: in.txt since the job was submitted" in err, err
    doc, _ = read(pg_url, "fp")
    unit = doc["units"]["use"]
    import hashlib

    # "<sha256> <size> <mtime_ns> <inode>"
    assert unit["fingerprint"]["inputs"]["in.txt"].split()[0] == hashlib.sha256(b"as on the worker's host").hexdigest()
    assert unit["fingerprintHost"] and (tmp_path / "out.txt").read_text() == "as on the worker's host"
    again = subprocess.run([RESUMABLE, "run", "fp.toml", "--dry-run"], cwd=tmp_path, env=pg_env, capture_output=True,
                           text=True, check=False)
    assert "skip  use: done" in again.stdout, again
