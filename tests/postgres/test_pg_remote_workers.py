"""Workers "on other hosts": connected to PostgreSQL through a proxy on 127.0.0.1 that adds 1 ms
each way (benchmarks/latency_proxy.py), so every round trip costs what it would across a network.
A DAG runs to the end while one of them is SIGKILLed: every step done exactly once, every attempt
on record, the history gap-free, and the run's document the one a local run writes."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from pgtests import RESUMABLE, ok, sql
from storecase import clean
from test_pg_workers import read, wait_for
from workers import attempts, check_exactly_once, dag_job, finish, start_worker

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout's benchmarks package

from benchmarks.latency_proxy import LatencyProxy, round_trip


def test_workers_through_a_latency_proxy_do_each_step_once(pg_url: str, pg_env: dict[str, str],
                                                            tmp_path: Path) -> None:
    clean(pg_url)
    parts = urlsplit(pg_url)
    with LatencyProxy((parts.hostname or "127.0.0.1", parts.port or 5432), delay=0.001) as proxy:
        far = proxy.url(pg_url)
        assert round_trip(far, 10) >= 0.002  # the delay is really there, both ways
        env = dict(pg_env, RESUMABLE_STORE=far)
        dag_job(tmp_path / "far.toml", "far", 40, seed=3, sleep_every=3, sleep=0.2)
        ok(subprocess.run([RESUMABLE, "submit", "far.toml", "-q"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, check=False))
        workers = [start_worker(env, tmp_path, "far", "-j", "2", "--lease", "1s") for _ in range(3)]
        wait_for("a claim", lambda: any(a["status"] == "running" for a in attempts(pg_url, "far")))
        time.sleep(0.3)
        workers[0].send_signal(signal.SIGKILL)
        workers[0].wait()
        results = finish(workers[1:], timeout=120)
    assert [code for code, _, _ in results] == [0, 0], results
    doc, history = read(pg_url, "far")
    counts = check_exactly_once(pg_url, "far", 40, doc, history)
    assert counts["attempts"] >= 40
    seqs = [r.seq for r in _records(pg_url, "far")]
    assert seqs == list(range(1, len(seqs) + 1))  # one gap-free history, whoever wrote it
    needs = dict(sql(pg_url, "SELECT s.step, s.needs FROM resumable_steps s JOIN resumable_runs r ON r.pk = s.run_pk"
                             " WHERE r.id = 'far' AND r.archived_at IS NULL"))
    assert {sid: unit["dependsOn"] for sid, unit in doc["units"].items()} == needs
    assert any(needs.values())


def _records(url: str, run: str) -> list[object]:
    from resumable.store import open_backend

    backend = open_backend(url=url)
    try:
        return list(backend.open(run).history())
    finally:
        backend.close()
