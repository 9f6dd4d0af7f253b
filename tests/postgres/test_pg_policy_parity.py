"""One scheduling policy (``core.policy``), two stores: the same jobs, with the same outcomes of
every attempt, run by the local runner into a runs directory and by a worker through PostgreSQL,
reach the same document (timestamps, hosts and log paths aside)."""

from __future__ import annotations

import itertools
import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pgtests import RESUMABLE

# What differs between two runs of one job whatever the store: when, where, and how long.
ASIDE = frozenset({"at", "clock", "createdAt", "updatedAt", "startedAt", "finishedAt", "duration", "ranSeconds",
                   "log", "host", "worker", "fingerprint", "fingerprintHost", "launch", "_journal"})
_names = itertools.count()


def essence(value: Any) -> Any:
    """The document without what is aside."""
    if isinstance(value, dict):
        return {k: essence(v) for k, v in value.items() if k not in ASIDE}
    if isinstance(value, list):
        return [essence(v) for v in value]
    return value


@st.composite
def jobs(draw: st.DrawFn) -> dict[str, Any]:
    """A small DAG whose steps exit with scripted codes, attempt by attempt, and the run's options."""
    n = draw(st.integers(1, 6))
    steps = []
    for i in range(n):
        needs = sorted(draw(st.sets(st.integers(0, i - 1), max_size=2))) if i else []
        codes = draw(st.lists(st.sampled_from([0, 0, 1, 3]), min_size=1, max_size=3))
        steps.append({"id": f"s{i}", "needs": [f"s{j}" for j in needs], "codes": codes,
                      "retries": draw(st.integers(0, 2))})
    keep_going = draw(st.booleans())
    cap = draw(st.one_of(st.none(), st.integers(1, 3))) if keep_going else None
    return {"steps": steps, "keep_going": keep_going, "max_failures": cap}


def job_file(path: Path, name: str, job: dict[str, Any]) -> Path:
    lines = ["[job]", f'name = "{name}"', 'backoff = "0s"', "jitter = 0"]
    for s in job["steps"]:
        # Attempt k exits with codes[k-1] (the last code once they run out).
        cases = " ".join(f"{k}) exit {c};;" for k, c in enumerate(s["codes"], 1))
        last = s["codes"][-1]
        command = f"case $RESUMABLE_ATTEMPT in {cases} *) exit {last};; esac"
        lines += [f"[steps.{s['id']}]", f"run = {json.dumps(command)}",
                  f"needs = {json.dumps(s['needs'])}", f"retries = {s['retries']}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def run_both(tmp: Path, url: str, env: dict[str, str], job: dict[str, Any]) -> tuple[Any, Any]:
    name = f"par{next(_names)}"
    jobfile = job_file(tmp / f"{name}.toml", name, job)
    flags = ["-j", "1", "-q"]
    if job["keep_going"]:
        flags.append("-k")
    if job["max_failures"] is not None:
        flags += ["--max-failures", str(job["max_failures"])]
    docs = []
    for store in (["--dir", str(tmp / "runs")], ["--store", url]):
        got = subprocess.run([RESUMABLE, "run", str(jobfile), *store, *flags], cwd=tmp, env=env,
                             capture_output=True, text=True)
        assert got.returncode in (0, 1), got.stderr
        shown = subprocess.run([RESUMABLE, "get", name, *store], cwd=tmp, env=env, capture_output=True, text=True)
        assert shown.returncode == 0, shown.stderr
        docs.append(json.loads(shown.stdout))
    return docs[0], docs[1]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(job=jobs())
def test_both_stores_reach_the_same_document(pg_url: str, pg_env: dict[str, str], job: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        local, on_workers = run_both(Path(tmp), pg_url, pg_env, job)
    assert essence(on_workers) == essence(local)


@pytest.mark.parametrize("keep_going", [False, True])
def test_a_failure_in_a_dag_reads_the_same(pg_url: str, pg_env: dict[str, str], tmp_path: Path,
                                           keep_going: bool) -> None:
    job = {"keep_going": keep_going, "max_failures": None, "steps": [
        {"id": "s0", "needs": [], "codes": [0], "retries": 0},
        {"id": "s1", "needs": ["s0"], "codes": [1, 0], "retries": 1},
        {"id": "s2", "needs": ["s1"], "codes": [3], "retries": 1},
        {"id": "s3", "needs": ["s2"], "codes": [0], "retries": 0},
        {"id": "s4", "needs": [], "codes": [0], "retries": 0}]}
    local, on_workers = run_both(tmp_path, pg_url, pg_env, job)
    assert local["status"] == "needs_attention"
    assert essence(on_workers) == essence(local)
    assert local["units"]["s3"]["status"] == ("dep_blocked" if keep_going else "pending")


def test_readers_agree_on_a_submitted_dag(pg_url: str, pg_env: dict[str, str], tmp_path: Path) -> None:
    """`resume` and `status` read a run that stopped at a failure the same in both stores; a job
    only submitted (no worker yet) already has every step's needs: only its first step is eligible."""
    job = {"keep_going": False, "max_failures": None, "steps": [
        {"id": "s0", "needs": [], "codes": [0], "retries": 0},
        {"id": "s1", "needs": ["s0"], "codes": [1], "retries": 0},
        {"id": "s2", "needs": ["s1"], "codes": [0], "retries": 0},
        {"id": "s3", "needs": ["s0", "s2"], "codes": [0], "retries": 0}]}
    local, on_workers = run_both(tmp_path, pg_url, pg_env, job)
    assert essence(on_workers) == essence(local)
    name = local["id"]
    seen = []
    for store in (["--dir", str(tmp_path / "runs")], ["--store", pg_url]):
        resume = subprocess.run([RESUMABLE, "resume", name, *store], cwd=tmp_path, env=pg_env, capture_output=True,
                                text=True)
        status = subprocess.run([RESUMABLE, "status", name, "--no-color", *store], cwd=tmp_path, env=pg_env,
                                capture_output=True, text=True)
        assert resume.returncode == 0 and status.returncode in (0, 1), (resume.stderr, status.stderr)
        counts = [line for line in status.stdout.splitlines() if line.lstrip().startswith(("units", "running"))]
        seen.append((json.loads(resume.stdout), counts))
    assert seen[0] == seen[1]
    assert seen[0][0]["eligible"] == ["s1"] and seen[0][0]["skip"] == ["s0"]

    fresh = job_file(tmp_path / "fresh.toml", "fresh", job)
    submitted = subprocess.run([RESUMABLE, "submit", str(fresh), "--store", pg_url, "-q"], cwd=tmp_path, env=pg_env,
                               capture_output=True, text=True)
    assert submitted.returncode == 0, submitted.stderr
    resume = subprocess.run([RESUMABLE, "resume", "fresh", "--store", pg_url], cwd=tmp_path, env=pg_env,
                            capture_output=True, text=True)
    assert json.loads(resume.stdout)["eligible"] == ["s0"], resume.stdout
    units = json.loads(subprocess.run([RESUMABLE, "get", "fresh", "--store", pg_url], cwd=tmp_path, env=pg_env,
                                      capture_output=True, text=True).stdout)["units"]
    assert {sid: u["dependsOn"] for sid, u in units.items()} == {s["id"]: s["needs"] for s in job["steps"]}
