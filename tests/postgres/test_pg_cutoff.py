"""Early cutoff on PostgreSQL workers: the same rule as the local runner's (core.policy), applied
as a worker claims a step whose needs re-ran: one that made the same bytes leaves it done."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from pgtests import RESUMABLE, ok
from storecase import clean
from workers import finish, start_worker

import resumable

JOB = """
[job]
name = "pgcut"
[steps.a]
run = "cp src.txt a.out; echo a >> trace"
inputs = ["src.txt"]
artifacts = ["a.out"]
[steps.b]
run = "wc -l < a.out > b.out; echo b >> trace"
needs = ["a"]
artifacts = ["b.out"]
[steps.c]
run = "cat b.out > c.out; echo c >> trace"
needs = ["b"]
artifacts = ["c.out"]
[steps.d]
run = "echo d >> trace"
needs = ["c"]
"""


def _round(env: dict[str, str], work: Path) -> dict[str, Any]:
    ok(subprocess.run([RESUMABLE, "submit", "cut.toml", "-q"], cwd=work, env=env, capture_output=True, text=True,
                      check=False))
    code, _, err = finish([start_worker(env, work, "pgcut", "-j", "2")], timeout=120)[0]
    assert code == 0, err
    handle = resumable.open_run("pgcut", store_url=env["RESUMABLE_STORE"])
    try:
        return handle.doc
    finally:
        handle.close()


def test_three_levels_on_workers_where_the_middle_output_is_byte_identical(
        pg_url: str, pg_env: dict[str, str], tmp_path: Path) -> None:
    clean(pg_url)
    (tmp_path / "cut.toml").write_text(JOB)
    (tmp_path / "src.txt").write_text("one\ntwo\n")
    doc = _round(pg_env, tmp_path)
    assert doc["status"] == "done"
    assert (tmp_path / "trace").read_text().split() == ["a", "b", "c", "d"]
    assert "b" in doc["units"]["c"]["fingerprint"]["needs"]

    (tmp_path / "src.txt").write_text("one\nTWO\n")  # b.out comes out the same
    doc = _round(pg_env, tmp_path)
    assert doc["status"] == "done", doc.get("result")
    assert (tmp_path / "trace").read_text().split() == ["a", "b", "c", "d", "a", "b"]
    units = doc["units"]
    assert len(units["c"]["attempts"]) == 1 and not units["c"].get("invalidations")
    assert len(units["d"]["attempts"]) == 1

    (tmp_path / "src.txt").write_text("one\ntwo\nthree\n")  # now b.out changes: c and d run
    doc = _round(pg_env, tmp_path)
    assert doc["status"] == "done", doc.get("result")
    assert (tmp_path / "trace").read_text().split()[6:] == ["a", "b", "c", "d"]
    assert doc["units"]["c"]["invalidations"][-1]["reason"] == "upstream re-ran: b"
    plan = subprocess.run([RESUMABLE, "run", "cut.toml", "--dry-run"], cwd=tmp_path, env=pg_env,
                          capture_output=True, text=True, check=False)
    assert "skip  c: done" in plan.stdout and "skip  d: done" in plan.stdout, plan
