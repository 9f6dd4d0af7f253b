"""A worker's backoff is bounded for any retry count: a step with retries = 10^9 that has already
failed past 2^1024's reach (the row's failure count) is retried, not an OverflowError that stops
the worker."""

from __future__ import annotations

import subprocess
from pathlib import Path

from pgtests import RESUMABLE, ok, sql
from storecase import clean
from workers import finish, start_worker

import resumable

JOB = """
[job]
name = "many"
backoff = "0s"
[steps.a]
run = "test $RESUMABLE_ATTEMPT -gt 1"
retries = 1000000000
"""


def test_a_step_failed_past_1024_times_is_retried_by_a_worker(pg_url: str, pg_env: dict[str, str],
                                                               tmp_path: Path) -> None:
    clean(pg_url)
    (tmp_path / "many.toml").write_text(JOB)
    ok(subprocess.run([RESUMABLE, "submit", "many.toml", "-q"], cwd=tmp_path, env=pg_env, capture_output=True,
                      text=True, check=False))
    sql(pg_url, "UPDATE resumable_steps SET failures = 1100")  # as after 1,100 failed attempts
    code, _, err = finish([start_worker(pg_env, tmp_path, "many")], timeout=120)[0]
    assert code == 0 and "Traceback" not in err and "OverflowError" not in err, err
    handle = resumable.open_run("many", store_url=pg_env["RESUMABLE_STORE"])
    try:
        doc = handle.doc
    finally:
        handle.close()
    assert doc["status"] == "done", doc.get("result")
    assert [a["status"] for a in doc["units"]["a"]["attempts"]] == ["failed", "done"]
