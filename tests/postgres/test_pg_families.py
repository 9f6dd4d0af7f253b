"""A job with families of steps on PostgreSQL: families are made into steps before the job is
submitted, so `resumable submit` records ordinary steps and a `resumable worker` runs them; a new
file is one more step on the next submit (only it runs), a family is a target of `resumable run
--store`, and `status --check` judges the run from the store."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from pgtests import RESUMABLE, ok
from storecase import clean
from workers import finish, start_worker

JOB = """[job]
name = "fam"
[steps.clean]
files = "raw/{shard}.csv"
run = "mkdir -p out && tr a-z A-Z < raw/{shard}.csv > out/{shard}.csv && echo {shard} >> trace"
inputs = ["raw/{shard}.csv"]
artifacts = ["out/{shard}.csv"]
[steps.score]
params = { metric = ["rows", "bytes"] }
run = "cat {clean.artifacts} | wc -c > out/{metric}.txt && echo {metric} >> trace"
artifacts = ["out/{metric}.txt"]
"""


def _cli(env: dict[str, str], work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([RESUMABLE, *args], cwd=work, env=env, capture_output=True, text=True, timeout=120,
                          check=False)


def _doc(env: dict[str, str], work: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(ok(_cli(env, work, "get", "fam")))
    return doc


def _trace(work: Path) -> list[str]:
    path = work / "trace"
    out = sorted(path.read_text().split()) if path.exists() else []
    path.unlink(missing_ok=True)
    return out


def _work(env: dict[str, str], work: Path) -> None:
    (code, out, err), = finish([start_worker(env, work, "fam")], timeout=120)
    assert code == 0, (out, err)


def test_submit_a_family_job_and_a_worker_runs_its_instances(pg_url: str, pg_env: dict[str, str],
                                                             tmp_path: Path) -> None:
    clean(pg_url)
    (tmp_path / "raw").mkdir()
    for shard in ("01", "02"):
        (tmp_path / "raw" / f"{shard}.csv").write_text(f"shard {shard}\n")
    (tmp_path / "resumable.toml").write_text(JOB)
    out = ok(_cli(pg_env, tmp_path, "submit"))
    assert "4 step(s) to run, 0 skipped" in out
    _work(pg_env, tmp_path)
    assert _trace(tmp_path) == ["01", "02", "bytes", "rows"]
    doc = _doc(pg_env, tmp_path)
    assert doc["status"] == "done"
    assert sorted(doc["units"]) == ["clean+01", "clean+02", "score+bytes", "score+rows"]
    assert doc["units"]["score+rows"]["dependsOn"] == ["clean+01", "clean+02"]
    assert _cli(pg_env, tmp_path, "status", "fam", "--check").returncode == 0

    # A new file: one more instance; on the next submit only it runs, and what fans in over them.
    (tmp_path / "raw" / "03.csv").write_text("shard 03\n")
    check = _cli(pg_env, tmp_path, "status", "fam", "--check")
    assert check.returncode == 1 and "run   clean: 1 of 3 instances (clean+03: never ran)" in check.stdout
    assert "3 step(s) to run, 2 skipped" in ok(_cli(pg_env, tmp_path, "submit"))
    _work(pg_env, tmp_path)
    assert _trace(tmp_path) == ["03", "bytes", "rows"]
    assert _cli(pg_env, tmp_path, "status", "fam", "--check").returncode == 0

    # A family as the target of `resumable run --store`: its instances, on a worker of its own.
    (tmp_path / "raw" / "01.csv").write_text("edited\n")
    r = _cli(pg_env, tmp_path, "run", "clean")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert _trace(tmp_path) == ["01"]
    assert "fam: done" in r.stdout
    dry = ok(_cli(pg_env, tmp_path, "run", "--dry-run")).splitlines()
    assert dry[0] == "skip  clean: 3 instances (done)"
    assert dry[1].startswith("run   score: 2 of 2 instances (")
