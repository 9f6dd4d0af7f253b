"""Moving runs between a runs directory and PostgreSQL with export/import: stored values (durable
results over 64 KiB, kept as blobs) travel with the run in both directions and answer the first
cache hit after the import; an import is one transaction, so a killed import leaves nothing and
importing again works."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pgtests import RESUMABLE, assert_error, base_env, cli, ok, sql
from storecase import clean

# A durable step whose result (80 KiB) is stored as a blob; each execution appends to COUNTER.
_SCRIPT = """
import hashlib, os, sys
from resumable.api import open_run

run = open_run("mv", task="moved", store_url=os.environ.get("STORE") or None)

@run.step
def produce(n: int) -> str:
    with open(os.environ["COUNTER"], "a") as f:
        f.write("x")
    return "v" * (80 * 1024) + str(n)

value = produce(7)
print(len(value), hashlib.sha256(value.encode()).hexdigest()[:16])
run.close()
"""


@pytest.fixture(autouse=True, scope="module")
def _schema(pg_url: str) -> None:
    """The module's database has the schema whichever test runs first (they count its rows)."""
    ok(cli("db", "upgrade", env=base_env(RESUMABLE_STORE=pg_url)))


def _step(tmp_path: Path, **env: str) -> tuple[str, int]:
    counter = tmp_path / "counter"
    full = base_env(COUNTER=str(counter), XDG_STATE_HOME=str(tmp_path / "state"), **env)
    proc = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, env=full,
                          cwd=tmp_path, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, len(counter.read_text()) if counter.exists() else 0


def test_stored_values_travel_both_ways_and_answer_the_first_cache_hit(pg_url: str, tmp_path: Path) -> None:
    clean(pg_url)
    first = tmp_path / "runs"
    out, calls = _step(tmp_path, RESUMABLE_DIR=str(first))
    assert (out, calls) == (out, 1) and out.startswith(f"{80 * 1024 + 1} ")
    files = base_env(RESUMABLE_DIR=str(first))
    ok(cli("export", "mv", "-o", str(tmp_path / "mv.json"), env=files))
    exported = json.loads((tmp_path / "mv.json").read_text())
    assert exported["v"] == 2 and len(exported["blobs"]) == 1
    ok(cli("import", str(tmp_path / "mv.json"), env=base_env(RESUMABLE_STORE=pg_url)))
    assert sql(pg_url, "SELECT count(*) FROM resumable_blobs")[0][0] == 1
    # In PostgreSQL: a cache hit, the value as it was, the step not executed again.
    assert _step(tmp_path, STORE=pg_url) == (out, 1)
    # ...and back into another runs directory.
    ok(cli("export", "mv", "-o", str(tmp_path / "back.json"), env=base_env(RESUMABLE_STORE=pg_url)))
    other = tmp_path / "other"
    ok(cli("import", str(tmp_path / "back.json"), env=base_env(RESUMABLE_DIR=str(other))))
    assert _step(tmp_path, RESUMABLE_DIR=str(other)) == (out, 1)


def _file_with_a_blob(pg_url: str, tmp_path: Path) -> dict[str, object]:
    clean(pg_url)
    _step(tmp_path, RESUMABLE_DIR=str(tmp_path / "runs"))
    ok(cli("export", "mv", "-o", str(tmp_path / "mv.json"), env=base_env(RESUMABLE_DIR=str(tmp_path / "runs"))))
    value: dict[str, object] = json.loads((tmp_path / "mv.json").read_text())
    return value


@pytest.mark.parametrize("damage", ["missing", "older format", "wrong bytes", "not base64", "bad ref"])
def test_an_export_whose_stored_values_do_not_check_out_is_refused(pg_url: str, tmp_path: Path,
                                                                   damage: str) -> None:
    value = _file_with_a_blob(pg_url, tmp_path)
    blobs = value["blobs"]
    assert isinstance(blobs, dict)
    (ref,) = blobs
    expected = {"missing": f"it lacks stored value {ref}", "older format": "written before exports carried them",
                "wrong bytes": f"stored value {ref} does not match its hash", "not base64": "is not valid base64",
                "bad ref": "is not a sha256:<hex> reference"}[damage]
    if damage in ("missing", "older format"):
        value["blobs"] = {}
        if damage == "older format":
            value["v"] = 1
            del value["blobs"]
    elif damage == "wrong bytes":
        blobs[ref] = base64.b64encode(b"something else").decode()
    elif damage == "not base64":
        blobs[ref] = "%%%"
    else:
        value["blobs"] = {"sha256:abc": blobs[ref]}
    (tmp_path / "bad.json").write_text(json.dumps(value))
    for env in (base_env(RESUMABLE_STORE=pg_url), base_env(RESUMABLE_DIR=str(tmp_path / "other"))):
        assert_error(cli("import", str(tmp_path / "bad.json"), env=env), 1, expected)
    assert sql(pg_url, "SELECT count(*) FROM resumable_runs")[0][0] == 0
    assert not (tmp_path / "other").exists() or not any((tmp_path / "other").iterdir())


def _big_export(path: Path, run_id: str, units: int) -> None:
    at = "2026-01-01T00:00:00Z"
    history: list[dict[str, object]] = [{"t": "init", "id": run_id, "task": "t",
                                         "units": [f"u{i}" for i in range(units)], "at": at}]
    for i in range(units):
        history.append({"t": "unit", "unit": f"u{i}", "state": "in_progress", "at": at})
        history.append({"t": "unit", "unit": f"u{i}", "state": "done", "at": at, "note": "n" * 40})
    path.write_text(json.dumps({"format": "resumable-export", "v": 2, "run": run_id, "source": "elsewhere",
                                "exportedAt": at, "doc": {}, "history": history, "blobs": {}}))


def _open_transaction(url: str) -> bool:
    """Whether a resumable session on the database has a transaction that has written."""
    name = url.rsplit("/", 1)[1]
    rows = sql(url, "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND application_name = 'resumable'"
                    " AND backend_xid IS NOT NULL", (name,))
    return bool(rows[0][0])


def test_a_killed_import_leaves_nothing_and_the_next_import_works(pg_url: str, tmp_path: Path) -> None:
    clean(pg_url)
    export = tmp_path / "big.json"
    _big_export(export, "imp", 100_000)
    env = base_env(RESUMABLE_STORE=pg_url)
    proc = subprocess.Popen([RESUMABLE, "import", str(export)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not _open_transaction(pg_url):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.02)
        time.sleep(0.3)  # into the replay of the history
        assert proc.poll() is None, "the import ended before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    deadline = time.monotonic() + 30
    while _open_transaction(pg_url):  # the server notices the closed socket and rolls back
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert sql(pg_url, "SELECT count(*) FROM resumable_runs")[0][0] == 0
    assert sql(pg_url, "SELECT count(*) FROM resumable_events")[0][0] == 0
    assert ok(cli("import", str(export), env=env, timeout=90)).startswith("imported run imp")
    assert sql(pg_url, "SELECT seq FROM resumable_runs WHERE id = 'imp'") == [(200_001,)]


def test_an_import_that_does_not_replay_leaves_nothing(pg_url: str, tmp_path: Path) -> None:
    clean(pg_url)
    at = "2026-01-01T00:00:00Z"
    history = [{"t": "init", "id": "bad", "task": "t", "units": ["a"], "at": at},
               {"t": "unit", "unit": "a", "state": "done", "at": at},
               {"t": "unit", "unit": "a", "state": "pending", "at": at}]  # a done unit demoted: refused
    (tmp_path / "bad.json").write_text(json.dumps({"format": "resumable-export", "v": 2, "run": "bad",
                                                   "source": "x", "exportedAt": at, "doc": {}, "history": history}))
    for env in (base_env(RESUMABLE_STORE=pg_url), base_env(RESUMABLE_DIR=str(tmp_path / "runs"))):
        assert_error(cli("import", str(tmp_path / "bad.json"), env=env), 1, "the history does not replay",
                     "nothing was imported")
        assert_error(cli("get", "bad", env=env), 3)
    assert sql(pg_url, "SELECT count(*) FROM resumable_runs")[0][0] == 0


_HALF_IMPORT = """
import sys
from resumable import store
from resumable.store.transfer import plan_import, read_export

export = read_export(sys.argv[1])
handle = store.open_backend(sys.argv[2]).open(export.run_id)
handle.commit(plan_import(export.run_id, export.history)[0])  # the first commit of an import, alone
"""


def test_a_runs_directory_import_killed_after_its_init_is_finished_by_the_next(tmp_path: Path) -> None:
    """A runs directory has no transactions: an import killed between its init and the rest
    leaves the init alone, and importing the same file again finishes the import."""
    out, _ = _step(tmp_path, RESUMABLE_DIR=str(tmp_path / "runs"))
    ok(cli("export", "mv", "-o", str(tmp_path / "mv.json"), env=base_env(RESUMABLE_DIR=str(tmp_path / "runs"))))
    other = tmp_path / "other"
    half = subprocess.run([sys.executable, "-c", _HALF_IMPORT, str(tmp_path / "mv.json"), str(other)],
                          capture_output=True, text=True, env=base_env(), timeout=60, check=False)
    assert half.returncode == 0, half.stderr
    env = base_env(RESUMABLE_DIR=str(other))
    assert ok(cli("import", str(tmp_path / "mv.json"), env=env)).startswith("imported run mv")
    files = base_env(RESUMABLE_DIR=str(tmp_path / "runs"))
    for args in (["get", "mv"], ["log", "mv", "--json"]):
        assert ok(cli(*args, env=env)) == ok(cli(*args, env=files)), args
    assert _step(tmp_path, RESUMABLE_DIR=str(other)) == (out, 1)  # the stored value came too
    assert_error(cli("import", str(tmp_path / "mv.json"), env=env), 2, "run mv already exists")


def test_an_init_only_export_is_refused_the_second_time(tmp_path: Path) -> None:
    runs = base_env(RESUMABLE_DIR=str(tmp_path / "runs"))
    ok(cli("init", "one", "--task", "t", env=runs))
    ok(cli("export", "one", "-o", str(tmp_path / "one.json"), env=runs))
    other = base_env(RESUMABLE_DIR=str(tmp_path / "other"))
    ok(cli("import", str(tmp_path / "one.json"), env=other))
    assert_error(cli("import", str(tmp_path / "one.json"), env=other), 2, "run one already exists")
