"""PostgreSQL restarted in the middle of a run: the workers ride it out (reconnect, re-LISTEN, record
what finished meanwhile) and the run finishes, every step done exactly once.

This restarts the machine's server, so it needs a local cluster it may restart (pg_ctlcluster, as
root or the postgres user); elsewhere it is skipped with the reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from pgtests import RESUMABLE, ok, server_problem, sql
from storecase import clean
from workers import check_exactly_once, dag_job, finish, start_worker

import resumable

# A restart ends every other test's connections: run alone, after the parallel phase (scripts/check).
pytestmark = pytest.mark.serial


def cluster() -> tuple[str, str] | None:
    """(version, name) of the local cluster to restart, or None."""
    if shutil.which("pg_ctlcluster") is None or os.geteuid() != 0 or not os.path.isdir("/etc/postgresql"):
        return None
    versions = sorted(os.listdir("/etc/postgresql"))
    if not versions or not os.path.isdir(f"/etc/postgresql/{versions[-1]}/main"):
        return None
    return versions[-1], "main"


def restart(version: str, name: str) -> None:
    subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", version, name, "restart"], check=True,
                   capture_output=True, timeout=120)
    deadline = time.monotonic() + 60
    while server_problem() is not None:
        assert time.monotonic() < deadline, "the server did not come back"
        time.sleep(0.2)


def test_server_restarted_mid_run_the_run_finishes(pg_url: str, pg_env: dict[str, str], tmp_path: Path) -> None:
    where = cluster()
    if where is None:
        pytest.skip("needs a local PostgreSQL cluster this test may restart (pg_ctlcluster, as root)")
    clean(pg_url)
    steps = 60
    job = dag_job(tmp_path / "restart.toml", "restart", steps, seed=3, sleep_every=1, sleep=0.3)
    ok(subprocess.run([RESUMABLE, "submit", str(job), "-q"], cwd=tmp_path, env=pg_env, capture_output=True,
                      text=True, check=False))
    procs = [start_worker(pg_env, tmp_path, "restart", "-j", "2", "--lease", "5s", "--reconnect", "60s")
             for _ in range(2)]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        (done,) = sql(pg_url, "SELECT count(*) FROM resumable_steps WHERE state = 'done'")[0]
        if done >= 10:
            break
        time.sleep(0.1)
    restart(*where)
    (before,) = sql(pg_url, "SELECT count(*) FROM resumable_steps WHERE state = 'done'")[0]
    assert before < steps  # the restart did land mid-run
    results = finish(procs, timeout=180)
    assert [code for code, _, _ in results] == [0, 0], results
    for _, _, err in results:  # whatever the workers said is resumable's own one-line messages
        assert all(line.startswith("resumable: ") for line in err.splitlines()), err
    handle = resumable.open_run("restart", store_url=pg_url)
    check_exactly_once(pg_url, "restart", steps, handle.doc, handle.history())
    handle.close()
