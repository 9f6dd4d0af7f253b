"""The PostgreSQL store's runner lease: asking whether a runner holds a run never turns a starting
runner away, a runner started right after another finished gets the lease, and a live runner is
refused at once (as the file store's lease: tests/test_runner_lease.py)."""

from __future__ import annotations

import threading
import time

import pytest
from storecase import clean

from resumable.errors import RefusedError
from resumable.store.postgres.backend import PgBackend
from resumable.store.postgres.lease import PROBE_GRACE


@pytest.fixture
def backend(pg_url: str) -> PgBackend:
    clean(pg_url)
    found = PgBackend(pg_url)
    found.ready(migrate=True)
    return found


def test_holder_names_a_runner_and_nothing_else(backend: PgBackend) -> None:
    assert backend.lease("r").holder() is None
    lease = backend.lease("r")
    lease.acquire()
    try:
        holder = backend.lease("r").holder()
        assert holder is not None and isinstance(holder["pid"], int)
        assert backend.lease("other").holder() is None
    finally:
        lease.release()
    assert backend.lease("r").holder() is None


def test_runners_starting_while_status_probes_and_one_after_another(pg_url: str, backend: PgBackend) -> None:
    """A probe used to take the lock for an instant, and a released lease stayed held until the
    server had ended the session: about one start in ten was refused in this loop."""
    stop = threading.Event()
    probes = [0]

    def probe() -> None:
        other = PgBackend(pg_url)
        while not stop.is_set():
            other.lease("r").holder()
            probes[0] += 1

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    refused = []
    try:
        for _ in range(60):
            lease = backend.lease("r")
            try:
                lease.acquire()
            except RefusedError as exc:
                refused.append(str(exc))
                continue
            lease.release()
    finally:
        stop.set()
        thread.join()
    assert probes[0] > 10 and refused == []


def test_a_live_runner_is_refused_at_once(backend: PgBackend) -> None:
    lease = backend.lease("r")
    lease.acquire()
    try:
        t0 = time.monotonic()
        with pytest.raises(RefusedError, match=r"'r' is already being run by pid \d+ on "):
            backend.lease("r").acquire()
        assert time.monotonic() - t0 < PROBE_GRACE
    finally:
        lease.release()
