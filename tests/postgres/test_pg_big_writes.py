"""Large writes to the PostgreSQL store finish, and no store call waits forever.

A transaction's statements travel in psycopg's pipeline; one larger than the socket's buffers (a
200,000-unit init, a 200,000-event import) used to leave the end of its output unsent while the
COMMIT waited for an answer: both sides waited forever. Each write here runs in a subprocess with
a timeout, so a hang fails the test instead of stalling the suite.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import psycopg
from pgtests import assert_error, base_env, cli, ok, sql
from storecase import clean

_BIG = 200_000
_AT = "2026-01-01T00:00:00Z"


def _python(code: str, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout,
                          env=base_env(), check=False)


def test_a_200000_unit_init_commits(pg_url: str) -> None:
    clean(pg_url)
    code = ("import sys\nfrom resumable.api import open_run\n"
            "run = open_run('big', store_url=sys.argv[1])\n"
            f"run.init('t', units=[f'u{{i}}' for i in range({_BIG})])\n")
    proc = _python(code, pg_url)
    assert proc.returncode == 0, proc.stderr
    assert sql(pg_url, "SELECT seq FROM resumable_runs WHERE id = 'big'") == [(1,)]
    summary = json.loads(ok(cli("get", "big", "--summary", env=base_env(RESUMABLE_STORE=pg_url))))
    assert (summary["total"], summary["done"]) == (_BIG, 0)


def test_a_200000_event_import_commits(pg_url: str, tmp_path: Path) -> None:
    clean(pg_url)
    half = _BIG // 2
    history: list[dict[str, object]] = [{"t": "init", "id": "imp", "task": "t",
                                         "units": [f"u{i}" for i in range(half)], "at": _AT}]
    for i in range(half):
        history.append({"t": "unit", "unit": f"u{i}", "state": "in_progress", "at": _AT})
        history.append({"t": "unit", "unit": f"u{i}", "state": "done", "at": _AT, "note": "n" * 40})
    export = tmp_path / "imp.json"
    export.write_text(json.dumps({"format": "resumable-export", "v": 1, "run": "imp", "source": "elsewhere",
                                  "exportedAt": _AT, "doc": {}, "history": history}))
    env = base_env(RESUMABLE_STORE=pg_url)
    out = ok(cli("import", str(export), env=env, timeout=90))
    assert out.startswith(f"imported run imp into {pg_url}: {_BIG + 1} event(s)")
    assert sql(pg_url, "SELECT seq, status FROM resumable_runs WHERE id = 'imp'") == [(_BIG + 1, "running")]
    assert json.loads(ok(cli("get", "imp", "--summary", env=env)))["done"] == half


def test_every_session_carries_bounds(pg_url: str) -> None:
    """Statement, lock and idle-in-transaction timeouts on every connection resumable opens."""
    from resumable.store.postgres.db import Db

    db = Db(pg_url)
    try:
        got = db.read(lambda conn: [conn.execute(f"SHOW {name}").fetchone() for name in
                                    ("statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout")],
                      what="read the session's settings")
    finally:
        db.close()
    assert got == [("10min",), ("2min",), ("10min",)]


def test_a_write_blocked_past_the_lock_timeout_is_one_line_and_writes_nothing(pg_url: str) -> None:
    """Another session holds the run's row lock: the write gives up at the bound (here the URL's
    own, shorter lock_timeout, which wins over resumable's), rolls back, and says so in one line."""
    clean(pg_url)
    env = base_env(RESUMABLE_STORE=pg_url)
    ok(cli("init", "r", "--task", "t", "--units", "a", env=env))
    before = sql(pg_url, "SELECT seq FROM resumable_runs WHERE id = 'r'")
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        with psycopg.connect(pg_url) as conn:
            conn.execute("SELECT 1 FROM resumable_runs WHERE id = 'r' FOR UPDATE")
            locked.set()
            release.wait(60)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert locked.wait(30)
        short = base_env(RESUMABLE_STORE=pg_url + "?options=-c%20lock_timeout%3D300")
        assert_error(cli("unit", "r", "a", "done", env=short, timeout=60), 1, "write run r",
                     "lock timeout", "nothing was written")
    finally:
        release.set()
        holder.join()
    assert sql(pg_url, "SELECT seq FROM resumable_runs WHERE id = 'r'") == before
    ok(cli("unit", "r", "a", "done", env=env))  # the lock gone, the same write goes through
