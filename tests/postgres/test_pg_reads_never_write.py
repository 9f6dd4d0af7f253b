"""Reads never change a database: only a write that creates a run (``init``, ``submit``, ``run``,
``import``), a worker, and ``db upgrade`` apply the schema. A read of a database without it is
refused in one line, and a URL that names no database is refused before anything connects."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pgtests import ADMIN_URL, assert_error, base_env, cli, create_database, drop_database, ok, sql

from resumable.store.postgres.schema import latest

_NO_SCHEMA = "; run `resumable db upgrade`"


@pytest.fixture
def empty_db() -> Iterator[str]:
    url = create_database("empty")
    yield url
    drop_database(url)


def _tables(url: str) -> list[str]:
    return [t for (t,) in sql(url, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]


@pytest.mark.parametrize("args", [
    ["status"], ["status", "--list"], ["status", "r"], ["get", "r"], ["unit", "r", "a", "done"], ["log", "r"],
    ["report", "r", "-o", "-"], ["resume", "r"], ["export", "r", "-o", "-"], ["db", "attempts", "r"],
    ["db", "log", "r", "s"], ["gc", "--keep-days", "0"],
], ids=lambda a: "-".join(a))
def test_a_read_of_a_database_without_the_schema_is_refused_and_creates_nothing(empty_db: str,
                                                                                 args: list[str]) -> None:
    proc = cli(*args, env=base_env(RESUMABLE_STORE=empty_db))
    assert_error(proc, 1, f"no resumable schema in {empty_db}{_NO_SCHEMA}")
    assert _tables(empty_db) == []


def test_db_version_reads_without_applying(empty_db: str) -> None:
    assert "schema version none (never used)" in ok(cli("db", "version", env=base_env(RESUMABLE_STORE=empty_db)))
    assert _tables(empty_db) == []


def test_an_import_into_a_fresh_database_applies_the_schema(empty_db: str, tmp_path: Path) -> None:
    files = base_env(RESUMABLE_DIR=str(tmp_path / "runs"))
    ok(cli("init", "mv", "--task", "t", "--units", "a", env=files))
    ok(cli("export", "mv", "-o", str(tmp_path / "mv.json"), env=files))
    assert ok(cli("import", str(tmp_path / "mv.json"), env=base_env(RESUMABLE_STORE=empty_db))).startswith(
        "imported run mv")
    assert [v for (v,) in sql(empty_db, "SELECT version FROM resumable_schema")] == list(range(1, latest() + 1))


def test_a_worker_on_a_fresh_database_applies_the_schema(empty_db: str, tmp_path: Path) -> None:
    """Workers may start before the first submit: the worker brings the schema, as submit would."""
    env = base_env(RESUMABLE_STORE=empty_db, XDG_STATE_HOME=str(tmp_path / "state"))
    proc = cli("worker", "--run", "nothing-yet", env=env, timeout=60)  # exits at once: no such run
    assert_error(proc, 3, "cannot read run nothing-yet", "no such run")
    assert [v for (v,) in sql(empty_db, "SELECT version FROM resumable_schema")] == list(range(1, latest() + 1))


@pytest.mark.parametrize("url", ["postgresql://", "postgresql://127.0.0.1/", "postgresql://root@127.0.0.1:5432",
                                 "postgres://u:secret@127.0.0.1/"])
def test_a_url_without_a_database_name_is_refused_up_front(url: str) -> None:
    before = sql(ADMIN_URL, "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'resumable%%'")
    for args in (["get", "r"], ["init", "r", "--task", "t"], ["db", "upgrade"], ["worker"]):
        line = assert_error(cli(*args, "--store", url, env=base_env(), timeout=30), 1, "names no database",
                            "postgresql://user@host/DBNAME")
        assert "secret" not in line
    assert sql(ADMIN_URL, "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'resumable%%'") == before


def test_a_missing_psycopg_says_how_to_install_the_extra(tmp_path: Path) -> None:
    code = ("import sys\nsys.modules['psycopg'] = None  # `import psycopg` raises ImportError, as when not installed\n"
            "from resumable.cli.main import main\nsys.exit(main(sys.argv[1:]))\n")
    proc = subprocess.run([sys.executable, "-c", code, "get", "r", "--store", "postgresql://u@127.0.0.1:9/db"],
                          capture_output=True, text=True, env=base_env(), timeout=60, check=False)
    assert_error(proc, 1, "needs psycopg, which is not installed", "pip install 'resumable-runs[postgres]'",
                 "pip install '.[postgres]'")
