"""A snapshot refresh and a write holding the run's row take their locks in one order.

A handle's write locks the run's row, then stores the snapshot's row with its events
(``save_events_and_snapshot``). A refresh used to store the snapshot's row first and then wait for
the run's row: each waited for the other until the server's deadlock check broke the tie, a second
later, and every worker's numbering queued behind them meanwhile. Now a refresh that finds the
run's row held stores nothing (the next numbering asks for it again), and the write goes on.
"""

from __future__ import annotations

import threading
import time

import psycopg
from storecase import clean

from resumable.api import open_run
from resumable.store.postgres.queries import Q


def _run_pk(url: str) -> int:
    run = open_run("snap", store_url=url)
    run.init("t", units=["a", "b"])
    run.unit("a", "in_progress")
    run.close()
    with psycopg.connect(url, autocommit=True) as conn:
        got = conn.execute("SELECT pk FROM resumable_runs WHERE id = 'snap' AND archived_at IS NULL").fetchone()
    assert got is not None
    return int(got[0])


def _refresh(url: str, pk: int, seq: int, out: dict[str, object]) -> None:
    try:
        with psycopg.connect(url) as conn:
            cur = conn.execute(Q.refresh_snapshot, {"pk": pk, "seq": seq, "doc": '{"refreshed": true}',
                                                    "snap_bytes": 19, "covered": 0})
            out["rows"] = cur.rowcount
            conn.commit()
    except psycopg.Error as exc:
        out["error"] = exc


def _waiting_on_a_lock(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        got = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                           " AND wait_event_type = 'Lock'").fetchone()
    return int(got[0]) if got else 0


def test_a_refresh_beside_a_write_holding_the_run_stores_nothing_and_deadlocks_with_nothing(pg_url: str) -> None:
    clean(pg_url)
    pk = _run_pk(pg_url)
    out: dict[str, object] = {}
    with psycopg.connect(pg_url) as writer:
        # A handle's write: the run's row first (lock_run) ...
        writer.execute("SELECT pk FROM resumable_runs WHERE pk = %s FOR NO KEY UPDATE", (pk,))
        refresher = threading.Thread(target=_refresh, args=(pg_url, pk, 1_000, out))
        refresher.start()
        # ... the refresh either ends at once or (before) took the snapshot's row and waits for the run's.
        for _ in range(500):
            if not refresher.is_alive() or _waiting_on_a_lock(pg_url):
                break
            time.sleep(0.01)
        # ... then the snapshot's row, as save_events_and_snapshot stores it.
        writer.execute("INSERT INTO resumable_snapshots (run_pk, seq, doc) VALUES (%s, 2, '{}')"
                       " ON CONFLICT (run_pk) DO UPDATE SET seq = excluded.seq, doc = excluded.doc", (pk,))
        writer.commit()
    refresher.join(timeout=30)
    assert not refresher.is_alive()
    assert "error" not in out, out.get("error")
    assert out["rows"] == 0  # the run's row was held: nothing stored, nothing waited for
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT seq, doc FROM resumable_snapshots WHERE run_pk = %s", (pk,)).fetchall() \
            == [(2, "{}")]


def test_a_refresh_with_the_run_free_stores_the_newer_snapshot(pg_url: str) -> None:
    clean(pg_url)
    pk = _run_pk(pg_url)
    out: dict[str, object] = {}
    _refresh(pg_url, pk, 1_000, out)
    assert "error" not in out, out.get("error")
    assert out["rows"] == 1
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT seq, doc FROM resumable_snapshots WHERE run_pk = %s", (pk,)).fetchall() \
            == [(1_000, '{"refreshed": true}')]
        assert conn.execute("SELECT snap_seq, snap_bytes FROM resumable_runs WHERE pk = %s", (pk,)).fetchall() \
            == [(1_000, 19)]
    # An older snapshot never replaces a newer one.
    _refresh(pg_url, pk, 999, out)
    assert out["rows"] == 0
