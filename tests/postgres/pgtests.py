"""Helpers for the PostgreSQL store's tests: the test server, a database per module, the state of a
database as an outside observer sees it (to prove that a refused command changed nothing), and
the real `resumable` command run against either store."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

BIN = Path(sys.executable).parent
RESUMABLE = str(BIN / "resumable")
ADMIN_URL = os.environ.get("RESUMABLE_TEST_PG", "postgresql://root@127.0.0.1:5432/postgres")


def server_problem() -> str | None:
    """Why the test server cannot be used, or None."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install '.[test]')"
    try:
        with psycopg.connect(ADMIN_URL, connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"{ADMIN_URL}: {str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}"
    return None


def _with_db(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def create_database(label: str) -> str:
    import psycopg

    name = "rtest_" + re.sub(r"[^a-z0-9_]", "_", label.lower())[:30] + f"_{os.getpid()}_{secrets.token_hex(2)}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return _with_db(ADMIN_URL, name)


def drop_database(url: str) -> None:
    import psycopg

    name = urlsplit(url).path.lstrip("/")
    try:
        with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    except psycopg.Error:
        pass  # a server restarted by a test may still be coming up; the next run's names differ


def sql(url: str, query: str, params: Any = None) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(query, params)
        return list(cur.fetchall()) if cur.description else []


def db_state(url: str) -> list[Any]:
    """Every row resumable keeps, in a fixed order (nothing changed <=> equal before and after)."""
    tables = [t for (t,) in sql(url, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                                     " AND tablename LIKE 'resumable%%' ORDER BY tablename")]
    out: list[Any] = []
    for table in tables:
        out.append((table, sql(url, f"SELECT * FROM {table} ORDER BY 1, 2")))
    return out


def cli(*args: str | bytes, env: dict[str, str], cwd: Path | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([RESUMABLE, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout,
                          check=False)


def base_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    env.update(extra)
    return env


def assert_error(proc: subprocess.CompletedProcess[str], code: int, *fragments: str) -> str:
    """Exit ``code``, nothing on stdout, exactly one line `resumable: ...` on stderr, no traceback."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("resumable: "), proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr == "", proc.stderr
    return proc.stdout
