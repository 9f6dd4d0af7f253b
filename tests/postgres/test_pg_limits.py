"""Every duration is bounded up front, by one parser, in one line (exit 1); and a value the
database refuses ends a worker instead of being retried every second forever."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pgtests import assert_error, base_env, cli, ok, sql
from storecase import clean

_JOB = '[job]\nname = "lim"\n[steps.a]\nrun = "true"\n'
_HUGE = "1000000000000000s"


@pytest.mark.parametrize(("args", "option"), [
    (["worker", "--lease", _HUGE], "--lease"), (["worker", "--grace", _HUGE], "--grace"),
    (["worker", "--reconnect", "99999999h"], "--reconnect"), (["run", "--timeout", _HUGE], "--timeout"),
    (["run", "--grace", _HUGE], "--grace"), (["run", "--backoff", _HUGE], "--backoff"),
    (["submit", "--timeout", _HUGE], "--timeout"), (["submit", "--backoff", _HUGE], "--backoff"),
    (["submit", "--grace", _HUGE], "--grace"), (["doctor", "--timeout", _HUGE], "--timeout"),
], ids=lambda v: "-".join(v) if isinstance(v, list) else v)
def test_a_duration_past_the_bound_is_refused_up_front(pg_url: str, tmp_path: Path, args: list[str],
                                                       option: str) -> None:
    (tmp_path / "resumable.toml").write_text(_JOB)
    env = base_env(RESUMABLE_STORE=pg_url, XDG_STATE_HOME=str(tmp_path / "state"))
    assert_error(cli(*args, env=env, cwd=tmp_path, timeout=30), 1, option, "at most 3650 days")


@pytest.mark.parametrize(("args", "message"), [
    (["worker", "--lease", "0.2s"], "at least 1s"), (["worker", "--lease", "0"], "at least 1s"),
    (["worker", "--grace", "-1s"], "bad duration"), (["run", "--timeout", "nan"], "bad duration"),
])
def test_a_duration_below_its_floor_or_malformed_is_refused(pg_url: str, tmp_path: Path, args: list[str],
                                                            message: str) -> None:
    (tmp_path / "resumable.toml").write_text(_JOB)
    assert_error(cli(*args, env=base_env(RESUMABLE_STORE=pg_url), cwd=tmp_path, timeout=30), 1, message)


@pytest.mark.parametrize("value", ["1e30", '"1000000000000000s"', "9" * 400])
def test_a_job_file_duration_past_the_bound_is_refused(tmp_path: Path, value: str) -> None:
    (tmp_path / "resumable.toml").write_text(f'[job]\nname = "lim"\ntimeout = {value}\n[steps.a]\nrun = "true"\n')
    env = base_env(RESUMABLE_DIR=str(tmp_path / "runs"))
    assert_error(cli("run", env=env, cwd=tmp_path), 1, "timeout", "at most 3650 days")
    assert not (tmp_path / "runs").exists()


def test_gc_keep_days_past_the_bound_is_refused(pg_url: str) -> None:
    clean(pg_url)
    env = base_env(RESUMABLE_STORE=pg_url)
    ok(cli("db", "upgrade", env=env))
    for bad in ("1e15", "3651"):
        assert_error(cli("gc", "--keep-days", bad, env=env), 1, "--keep-days must be a non-negative number",
                     "at most 3650")
    assert ok(cli("gc", "--keep-days", "3650", env=env)).startswith("0 archived")


_WORKER = """
import sys
from resumable import store
from resumable.errors import ResumableError
from resumable.runner.submission import LineSink
from resumable.runner.worker import Worker, WorkerOptions

backend = store.open_backend(url=sys.argv[1])
try:
    backend.ready(migrate=True)
    backend.serve(patience=5.0)
    # A lease past what the database's timestamps hold: the option parser refuses it; the API is
    # used here to reach the claim with it all the same.
    code = Worker(backend, WorkerOptions(runs=("lim",), ttl=1e15), LineSink(quiet=True)).run()
except ResumableError as exc:
    print(f"resumable: {exc}", file=sys.stderr)
    code = exc.exit_code
finally:
    backend.close()
sys.exit(code)
"""


def test_a_value_the_database_refuses_ends_the_worker(pg_url: str, tmp_path: Path) -> None:
    clean(pg_url)
    (tmp_path / "resumable.toml").write_text(_JOB)
    env = base_env(RESUMABLE_STORE=pg_url, XDG_STATE_HOME=str(tmp_path / "state"))
    ok(cli("submit", env=env, cwd=tmp_path))
    proc = subprocess.run([sys.executable, "-c", _WORKER, pg_url], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=60, check=False)
    line = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 1, proc.stderr
    assert "out of range" in line and "trying again cannot help" in line, proc.stderr
    assert "trying again every second" not in proc.stderr
    assert sql(pg_url, "SELECT state FROM resumable_steps") == [("pending",)]  # nothing claimed
