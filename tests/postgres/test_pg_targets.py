"""`resumable run [JOBFILE] STEP... --store URL`: the targets and everything they need, run by the
workers, nothing else; the other steps keep their state in the run's document; --dry-run and
--explain speak of the same selection; the document reads as the runs directory's run of the same
targets does."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from pgtests import RESUMABLE, assert_error, db_state, sql
from storecase import clean
from test_pg_policy_parity import essence
from workers import finish, start_worker

from corehelpers import DIAMOND


def _run(env: dict[str, str], work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([RESUMABLE, "run", *args], cwd=work, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def _doc(env: dict[str, str], work: Path, name: str = "d", *store: str) -> dict[str, Any]:
    got = subprocess.run([RESUMABLE, "get", name, *store], cwd=work, env=env, capture_output=True, text=True,
                         check=False)
    assert got.returncode == 0, got.stderr
    doc: dict[str, Any] = json.loads(got.stdout)
    return doc


def _trace(work: Path) -> list[str]:
    path = work / "trace"
    return path.read_text().split() if path.exists() else []


def _states(doc: dict[str, Any]) -> dict[str, str]:
    return {sid: u["status"] for sid, u in doc["units"].items()}


def test_a_target_with_a_diamond_of_needs_runs_on_the_workers(pg_url: str, pg_env: dict[str, str],
                                                              tmp_path: Path) -> None:
    clean(pg_url)
    (tmp_path / "resumable.toml").write_text(DIAMOND)
    before = db_state(pg_url)
    plan = _run(pg_env, tmp_path, "--dry-run", "d")
    assert plan.returncode == 0, plan.stderr
    assert [ln.split()[1].rstrip(":") for ln in plan.stdout.splitlines()[:-1]] == ["a", "b", "c", "d"]
    assert plan.stdout.splitlines()[-1] == "4 to run, 0 to skip, 2 not selected (dry run: nothing executed or written)"
    explained = _run(pg_env, tmp_path, "--explain", "other", "d")
    assert explained.stdout.strip() == "skip  other: not selected (not needed by d)", explained
    assert db_state(pg_url) == before  # a preview writes nothing

    r = _run(pg_env, tmp_path, "d", "-j", "2")
    assert r.returncode == 0, (r.stdout, r.stderr)
    trace = _trace(tmp_path)
    assert trace[0] == "a" and sorted(trace[1:3]) == ["b", "c"] and trace[3:] == ["d"]
    assert "d: done (4 done, 2 not selected)" in r.stdout and "resume with" not in r.stdout
    doc = _doc(pg_env, tmp_path)
    assert _states(doc) == {"a": "done", "b": "done", "c": "done", "d": "done", "other": "pending",
                            "after": "pending"}
    assert doc["status"] == "needs_attention"  # the run as a whole is not done
    assert "skip  d: done" in _run(pg_env, tmp_path, "--dry-run", "d").stdout

    # The rest, later: only what is not done runs, and the run is done.
    r = _run(pg_env, tmp_path)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert sorted(_trace(tmp_path)[4:]) == ["after", "other"]
    assert _doc(pg_env, tmp_path)["status"] == "done"


def test_steps_not_selected_keep_their_state(pg_url: str, pg_env: dict[str, str], tmp_path: Path) -> None:
    clean(pg_url)
    (tmp_path / "jobs.toml").write_text(DIAMOND.replace("echo other >> trace", "exit 3"))
    r = _run(pg_env, tmp_path, "jobs.toml", "other")
    assert r.returncode == 1, (r.stdout, r.stderr)
    failed = _doc(pg_env, tmp_path)["units"]["other"]
    assert failed["status"] == "failed"
    r = _run(pg_env, tmp_path, "jobs.toml", "b", "c")  # two targets, and the job file named first
    assert r.returncode == 0, (r.stdout, r.stderr)
    doc = _doc(pg_env, tmp_path)
    assert doc["units"]["other"] == failed  # failed stays failed, untouched
    assert _states(doc)["d"] == "pending" and _states(doc)["after"] == "pending"  # never run stays unrun
    assert "attempts" not in doc["units"]["d"]
    done = doc["units"]["b"]
    assert done["status"] == "done"
    r = _run(pg_env, tmp_path, "jobs.toml", "c")  # done stays done: b is neither needed nor run again
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert _doc(pg_env, tmp_path)["units"]["b"] == done
    assert _trace(tmp_path).count("b") == 1
    assert _doc(pg_env, tmp_path)["launch"]["argv"] == ["resumable", "run", "jobs.toml", "c"]


def test_a_target_runs_again_once_its_input_changed(pg_url: str, pg_env: dict[str, str], tmp_path: Path) -> None:
    clean(pg_url)
    (tmp_path / "src.txt").write_text("one\n")
    (tmp_path / "resumable.toml").write_text(DIAMOND.replace('run = "echo b >> trace"',
                                                             'run = "echo b >> trace"\ninputs = ["src.txt"]'))
    assert _run(pg_env, tmp_path, "b").returncode == 0
    assert _trace(tmp_path) == ["a", "b"]
    assert _run(pg_env, tmp_path, "b").returncode == 0
    assert _trace(tmp_path) == ["a", "b"]  # nothing changed: nothing runs
    (tmp_path / "src.txt").write_text("two\n")
    plan = _run(pg_env, tmp_path, "--dry-run", "b")
    assert "run   b: input changed: src.txt" in plan.stdout, plan.stdout
    r = _run(pg_env, tmp_path, "b")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert _trace(tmp_path) == ["a", "b", "b"]
    doc = _doc(pg_env, tmp_path)
    assert doc["units"]["b"]["invalidations"][-1]["reason"] == "input changed: src.txt"
    assert _states(doc)["c"] == "pending"


def test_an_unknown_target_is_refused_with_the_closest_id(pg_url: str, pg_env: dict[str, str],
                                                          tmp_path: Path) -> None:
    clean(pg_url)
    (tmp_path / "resumable.toml").write_text(DIAMOND.replace("[steps.d]", "[steps.combine]")
                                             .replace('["d"]', '["combine"]'))
    before = db_state(pg_url)
    assert_error(_run(pg_env, tmp_path, "combin"), 1, "job 'd' has no step 'combin' (did you mean 'combine'?)")
    assert db_state(pg_url) == before and not (tmp_path / "trace").exists()


def test_the_document_reads_as_the_runs_directory_run_of_the_same_targets(
        pg_url: str, pg_env: dict[str, str], tmp_path: Path) -> None:
    clean(pg_url)
    docs = []
    for store in (["--dir", str(tmp_path / "runs")], ["--store", pg_url]):
        work = tmp_path / store[0].strip("-")
        work.mkdir()
        (work / "jobs.toml").write_text(DIAMOND.replace("echo other >> trace", "exit 3"))
        codes = [_run(pg_env, work, "jobs.toml", *targets, *store, "-j", "1", "-q").returncode
                 for targets in (["other"], ["b"], ["d"])]
        assert codes == [1, 0, 0]
        docs.append(_doc(pg_env, work, "d", *store))
    local, on_workers = docs
    assert local["status"] == "needs_attention" and local["result"] == "2 done, 2 not selected, 2 skipped"
    assert essence(on_workers) == essence(local)


def test_a_step_not_selected_that_a_worker_runs_keeps_its_claim(pg_url: str, pg_env: dict[str, str],
                                                                tmp_path: Path) -> None:
    """Targets submitted while a worker runs another step of the same run: that step is not taken
    from it; its outcome is recorded, and the run ends once it is done."""
    clean(pg_url)
    (tmp_path / "resumable.toml").write_text(DIAMOND.replace('run = "echo other >> trace"',
                                                             'run = "touch started; sleep 3; echo other >> trace"'))
    sub = subprocess.run([RESUMABLE, "submit", "-q"], cwd=tmp_path, env=pg_env, capture_output=True, text=True,
                         check=False)
    assert sub.returncode == 0, sub.stderr
    sql(pg_url, "UPDATE resumable_steps SET remaining = 1 WHERE step <> 'other'")  # the worker takes `other` only
    worker = start_worker(pg_env, tmp_path, "d")
    for _ in range(600):
        if (tmp_path / "started").exists():
            break
        time.sleep(0.05)
    assert (tmp_path / "started").exists()
    r = _run(pg_env, tmp_path, "b")
    assert r.returncode == 0, (r.stdout, r.stderr)
    code, out, err = finish([worker], timeout=120)[0]
    assert code == 0 and "not recorded" not in out + err, (out, err)
    doc = _doc(pg_env, tmp_path)
    assert doc["units"]["other"]["status"] == "done" and len(doc["units"]["other"]["attempts"]) == 1
    assert _states(doc)["b"] == "done" and _states(doc)["d"] == "pending"
    assert doc["result"] == "3 done, 3 not selected", doc["result"]
