"""The PostgreSQL store's schema (versioned migrations, applied on first use and by `db upgrade`,
a newer schema refused in one line), moving runs between stores with export/import, and
`status --watch` following NOTIFY."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from pgtests import RESUMABLE, assert_error, base_env, cli, create_database, db_state, drop_database, ok, sql
from storecase import clean

from resumable.store.postgres.schema import latest

V = latest()  # the schema version this resumable brings


@pytest.fixture
def fresh_db() -> object:
    url = create_database("schema")
    yield url
    drop_database(url)


def test_first_use_applies_the_schema_and_records_its_version(fresh_db: str) -> None:
    env = base_env(RESUMABLE_STORE=fresh_db)
    version = ok(cli("db", "version", env=env))
    assert version.endswith(f"schema version none (never used); this resumable knows up to {V}\n")
    ok(cli("init", "r", "--task", "t", env=env))
    assert [v for (v,) in sql(fresh_db, "SELECT version FROM resumable_schema")] == list(range(1, V + 1))
    assert ok(cli("db", "upgrade", env=env)).endswith(f": schema version {V}, up to date\n")
    assert f"schema version {V};" in ok(cli("db", "version", env=env))


def test_db_upgrade_on_an_empty_database(fresh_db: str) -> None:
    env = base_env(RESUMABLE_STORE=fresh_db)
    assert ok(cli("db", "upgrade", env=env)).endswith(f": schema version 0 -> {V}\n")
    tables = {t for (t,) in sql(fresh_db, "SELECT tablename FROM pg_tables WHERE tablename LIKE 'resumable%%'")}
    assert {"resumable_runs", "resumable_events", "resumable_steps", "resumable_attempts"} <= tables


def test_a_newer_schema_is_refused_in_one_line(fresh_db: str) -> None:
    env = base_env(RESUMABLE_STORE=fresh_db)
    ok(cli("init", "r", "--task", "t", env=env))
    sql(fresh_db, "INSERT INTO resumable_schema (version, name) VALUES (7, '0007_future')")
    before = sql(fresh_db, "SELECT * FROM resumable_events ORDER BY 1, 2")
    for args in (["get", "r"], ["unit", "r", "a", "done"], ["status", "--list"], ["db", "upgrade"]):
        assert_error(cli(*args, env=env), 1,
                     f"has resumable schema version 7, newer than this resumable knows ({V})",
                     "upgrade resumable")
    assert sql(fresh_db, "SELECT * FROM resumable_events ORDER BY 1, 2") == before


def test_a_run_with_a_newer_schema_version_is_refused_by_readers_and_writers(pg_url: str) -> None:
    """As in a runs directory (tests/test_newer_formats.py): a run document a newer resumable
    wrote is refused in one line, never shown, resumed, written or archived."""
    clean(pg_url)
    env = base_env(RESUMABLE_STORE=pg_url)
    ok(cli("init", "r", "--task", "t", "--units", "a,b", env=env))
    ok(cli("unit", "r", "a", "done", env=env))
    ok(cli("finalize", "r", "aborted", env=env))
    doc = json.loads(ok(cli("get", "r", env=env)))
    doc["schemaVersion"] = 7
    sql(pg_url, "INSERT INTO resumable_snapshots (run_pk, seq, doc) SELECT pk, seq, %s FROM resumable_runs"
                " WHERE id = 'r' ON CONFLICT (run_pk) DO UPDATE SET seq = excluded.seq, doc = excluded.doc",
        (json.dumps(doc),))
    before = db_state(pg_url)
    message = "run r has schemaVersion 7, newer than this resumable understands (2); upgrade resumable"
    for args in (["get", "r"], ["resume", "r"], ["status", "r"], ["status"], ["report", "r", "-o", "-"],
                 ["unit", "r", "b", "done"], ["finalize", "r", "done"], ["init", "r", "--task", "again"]):
        assert_error(cli(*args, env=env), 1, message)
    assert f"(unreadable: {message})" in ok(cli("status", "--list", env=env))
    assert ok(cli("gc", "--keep-days", "0", env=env)).startswith("0 archived")
    assert db_state(pg_url) == before


def test_concurrent_first_uses_apply_the_schema_once(fresh_db: str) -> None:
    env = base_env(RESUMABLE_STORE=fresh_db)
    procs = [subprocess.Popen([RESUMABLE, "init", f"r{i}", "--task", "t"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(6)]
    assert [p.wait(60) for p in procs] == [0] * 6, [p.communicate() for p in procs]
    assert [v for (v,) in sql(fresh_db, "SELECT version FROM resumable_schema")] == list(range(1, V + 1))


def test_bad_urls_and_a_missing_server_are_one_line_errors(tmp_path: Path) -> None:
    env = base_env()
    assert_error(cli("get", "r", "--store", "mysql://x/y", env=env), 1, "unknown store 'mysql://x/y'")
    assert_error(cli("get", "r", "--store", "postgresql://nobody@127.0.0.1:1/none", env=env), 1,
                 "cannot connect to postgresql://nobody@127.0.0.1:1/none")
    assert_error(cli("worker", env=base_env(RESUMABLE_DIR=str(tmp_path))), 1, "workers need a PostgreSQL store")
    (tmp_path / "resumable.toml").write_text('[job]\nname = "j"\n[steps.a]\nrun = "true"\n')
    down = "postgresql://nobody@127.0.0.1:1/none"
    for args in (["worker", "--store", down], ["submit", "--store", down], ["run", "--store", down]):
        # At once, in one line: not after the minutes a worker waits for a server that went away.
        assert_error(cli(*args, env=env, cwd=tmp_path, timeout=30), 1, f"cannot connect to {down}")
    line = assert_error(cli("get", "r", "--store", "postgresql://u:secret@127.0.0.1:1/db", env=env), 1)
    assert "secret" not in line and "u:***@" in line


def test_export_import_round_trip_both_ways(pg_url: str, tmp_path: Path) -> None:
    clean(pg_url)
    files = base_env(RESUMABLE_DIR=str(tmp_path / "runs"))
    pg = base_env(RESUMABLE_STORE=pg_url)
    ok(cli("init", "mv", "--task", "move me", "--units", "a,b", env=files, cwd=tmp_path))
    for args in (["unit", "mv", "a", "done"], ["item", "mv", "--json", '{"x":1}'], ["phase", "mv", "p", "running"]):
        ok(cli(*args, env=files, cwd=tmp_path))
    assert ok(cli("export", "mv", env=files, cwd=tmp_path)) == "mv.resumable.json: run mv, 4 event(s)\n"
    assert ok(cli("import", "mv.resumable.json", env=pg, cwd=tmp_path)).startswith("imported run mv into ")
    for args in (["get", "mv"], ["log", "mv", "--json"], ["resume", "mv"]):
        assert ok(cli(*args, env=pg)) == ok(cli(*args, env=files, cwd=tmp_path)), args
    # ...and back, into another runs directory, after more work in PostgreSQL.
    ok(cli("unit", "mv", "b", "done", env=pg))
    ok(cli("export", "mv", "-o", str(tmp_path / "back.json"), env=pg))
    other = base_env(RESUMABLE_DIR=str(tmp_path / "other"))
    ok(cli("import", str(tmp_path / "back.json"), env=other))
    for args in (["get", "mv"], ["log", "mv", "--json"]):
        assert ok(cli(*args, env=other)) == ok(cli(*args, env=pg)), args
    assert_error(cli("import", str(tmp_path / "back.json"), env=pg), 2, "run mv already exists")


def test_import_refuses_bad_files_in_one_line(pg_url: str, tmp_path: Path) -> None:
    clean(pg_url)
    pg = base_env(RESUMABLE_STORE=pg_url)
    ok(cli("db", "upgrade", env=pg))  # whichever test of the module runs first: the rows are counted below
    (tmp_path / "junk.json").write_text("{not json")
    (tmp_path / "other.json").write_text('{"format": "something else"}')
    (tmp_path / "newer.json").write_text('{"format": "resumable-export", "v": 99}')
    os.mkfifo(tmp_path / "fifo")
    os.symlink(tmp_path / "junk.json", tmp_path / "link")
    for name, message in (("junk.json", "not a resumable export (not JSON"), ("other.json", "not a resumable export"),
                          ("newer.json", "newer than this resumable reads"), ("fifo", "not a regular file"),
                          ("link", "is a symbolic link"), ("missing", "cannot read")):
        assert_error(cli("import", str(tmp_path / name), env=pg), 1, message)
    assert sql(pg_url, "SELECT count(*) FROM resumable_runs")[0][0] == 0


def test_status_watch_follows_notify_until_the_run_ends(pg_url: str, tmp_path: Path) -> None:
    clean(pg_url)
    env = base_env(RESUMABLE_STORE=pg_url)
    ok(cli("init", "w", "--task", "watched", "--units", "a,b", env=env))
    watch = subprocess.Popen([RESUMABLE, "status", "w", "--watch", "--no-color"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    ok(cli("unit", "w", "a", "done", env=env))
    time.sleep(0.5)
    ok(cli("unit", "w", "b", "done", env=env))
    ok(cli("finalize", "w", "done", env=env))
    out, err = watch.communicate(timeout=30)
    assert watch.returncode == 0, err
    frames = out.split("── ")
    assert "0/2 done" in frames[0] and "2/2 done" in frames[-1] and "✓ DONE" in frames[-1]
    assert len(frames) >= 3  # it redrew on the changes, not only at the end
    assert json.loads(ok(cli("get", "w", "--summary", env=env)))["done"] == 2
