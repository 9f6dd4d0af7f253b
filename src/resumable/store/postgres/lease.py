"""The runner lease of the PostgreSQL store: a session advisory lock on a connection of its own.

The server releases the lock when that connection ends, however the holder ends (SIGKILL, a lost
host): nothing is taken over on a timer. The holder's description (pid, host, start) is a row of
``resumable_runner_leases``, information for the refusal message, never an instruction.

Steps of a PostgreSQL-stored run are run by workers, which are not runners: their process groups
are tracked by their own leases, per step. This lease is what ``resumable run --reset`` holds,
and it is refused while a worker holds an unexpired claim on the run.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from resumable.core.stamps import stamp
from resumable.errors import RefusedError
from resumable.store.postgres.db import host_name
from resumable.store.postgres.queries import Q

if TYPE_CHECKING:
    from collections.abc import Sequence

    from resumable.store.backend import LeaseHolder, WorkerPresence
    from resumable.store.postgres.db import Connection, Db
    from resumable.store.values import LeftoverGroup


# As the file store's lease (store.files.lease.PROBE_GRACE): how long a holder that is not proven to
# be a runner gets to let go before a starting runner is refused.
PROBE_GRACE = 0.2
_PROBE_POLL = 0.01


def lock_key(run_id: str) -> int:
    """A signed 64-bit advisory lock key for a run id."""
    return int.from_bytes(hashlib.sha256(b"resumable-runner:" + run_id.encode()).digest()[:8], "big", signed=True)


class PgRunnerLease:
    def __init__(self, db: Db, run_id: str) -> None:
        self.db = db
        self.run_id = run_id
        self.conn: Connection | None = None
        self._secret = secrets.token_hex(16)

    @property
    def secret(self) -> str:
        return self._secret

    def acquire(self) -> None:
        conn = self.db.connect(autocommit=True)
        try:
            holder = self._take(conn)
            if holder is not None:
                raise RefusedError(
                    f"run {self.run_id!r} is already being run by pid {holder.get('pid', '?')} on"
                    f" {holder.get('host', '?')}, started {holder.get('startedAt', '?')}; wait for it to"
                    " finish or stop it")
            claims = conn.execute(Q.live_claims, (self.run_id,)).fetchone()
            if claims and claims[0]:
                raise RefusedError(
                    f"run {self.run_id!r} has {claims[0]} step(s) running on workers ({claims[1] or '?'});"
                    " stop those workers (SIGTERM hands their steps back) and try again")
            conn.execute(Q.hold_runner_lease, (self.run_id, os.getpid(), host_name(), datetime.now(UTC)))
        except BaseException:
            conn.close()
            raise
        self.conn = conn

    def _take(self, conn: Connection) -> LeaseHolder | None:
        """Take the advisory lock; None when taken, else the holder's row ({} without one). A
        session holding the lock without a row is a runner between taking it and writing its row,
        or a session on its way out (a connection's close does not wait for the server to let go)
        or an older resumable's probe: each lets go within ``PROBE_GRACE``, so it is waited for.
        A holder with a row is a runner: refused at once."""
        key = lock_key(self.run_id)
        deadline = time.monotonic() + PROBE_GRACE
        while True:
            got = conn.execute(Q.try_runner_lock, (key,)).fetchone()
            if got and got[0]:
                return None
            holder = self._holder_row(conn)
            if holder is not None or time.monotonic() >= deadline:
                return holder or {}
            time.sleep(_PROBE_POLL)

    def _holder_row(self, conn: Connection) -> LeaseHolder | None:
        row = conn.execute(Q.runner_lease,
                           (self.run_id,)).fetchone()
        return {"pid": row[0], "host": row[1], "startedAt": stamp(row[2].timestamp())} if row else None

    def holder(self) -> LeaseHolder | None:
        """Read from pg_locks, without taking the lock: a probe that took it, even for an instant,
        would turn away a runner starting at that instant (and a second probe would see the first
        as a runner)."""
        conn = self.db.connect(autocommit=True)
        try:
            key = lock_key(self.run_id)
            # A bigint advisory key shows as its high half in classid, its low half in objid,
            # with objsubid 1 (the two-int4 form has objsubid 2).
            held = conn.execute(Q.runner_lock_held, ((key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF)).fetchone()
            if held is None:
                return None
            return self._holder_row(conn) or {"pid": "?"}
        finally:
            conn.close()

    def workers(self) -> list[WorkerPresence] | None:
        """The workers holding unexpired claims on the run's steps (``RunnerLease.workers``), from
        the steps' leases and the attempts they run; then, with no steps, the registered workers that
        have not stopped, made an attempt on the run and hold nothing now (waiting for a retry's
        backoff: whether one is alive only its own host can tell). Reads only."""
        conn = self.db.connect(autocommit=True)
        try:
            rows = conn.execute(Q.workers_holding, (self.run_id,)).fetchall()
            holding = {r[0] for r in rows}
            idle = [r for r in conn.execute(Q.workers_of_run, (self.run_id,)) if r[0] not in holding]
        finally:
            conn.close()
        out: list[WorkerPresence] = [{"worker": w, "host": h, "pid": p, "steps": list(steps), "expiresIn": float(left)}
                                     for w, h, p, steps, left in rows]
        return out + [{"worker": w, "host": h, "pid": p, "steps": [], "expiresIn": None} for w, h, p in idle]

    def leftovers(self) -> list[LeftoverGroup]:
        return []  # steps run on workers, which hand their own steps back (see the module docstring)

    def reaped(self, groups: Sequence[LeftoverGroup]) -> None:
        pass

    def track(self, group: LeftoverGroup) -> None:
        pass

    def untrack(self, pgid: int) -> None:
        pass

    def sync(self) -> None:
        pass

    def release(self) -> None:
        if self.conn is not None:
            try:
                self.conn.execute(Q.drop_runner_lease,
                                  (self.run_id, os.getpid()))
                # Let go now: the server ends a closed session's locks only once its backend has
                # exited, after close() returns, and a runner started right after this one would
                # find the lock still held.
                self.conn.execute(Q.runner_unlock, (lock_key(self.run_id),))
            except Exception:
                pass
            self.conn.close()  # ending the session releases the advisory lock in any case
            self.conn = None
