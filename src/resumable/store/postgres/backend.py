"""Runs in a PostgreSQL database, behind the ``Backend`` protocol (``store.backend``), and the
``WorkQueue`` capability workers on many hosts use: submit (``jobs``), claim and renew
(``claims``), complete and release (``outcomes``), and what they recorded (``reads``). Each of
those works on the backend's ``Place``; none calls back into the backend.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from resumable.core.model import check_run_id, newer_version
from resumable.core.stamps import parse_stamp, stamp
from resumable.errors import NewerFormatError, ResumableError
from resumable.store.backend import WorkQueue
from resumable.store.postgres import append, claims, jobs, outcomes, reads, runstate, schema, transfer
from resumable.store.postgres.claims import ClaimRequest, WorkerInfo
from resumable.store.postgres.db import host_name
from resumable.store.postgres.handle import PgRunHandle
from resumable.store.postgres.place import Place
from resumable.store.postgres.queries import WORK, Q
from resumable.store.values import GcResult, RunEntry

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import TypeVar

    from resumable.core.policy import RetryPolicy, Settled
    from resumable.store.backend import Submitted
    from resumable.store.postgres.claims import Claim
    from resumable.store.postgres.db import Connection, Db
    from resumable.store.postgres.lease import PgRunnerLease
    from resumable.store.postgres.listen import Listener
    from resumable.store.values import Event

    T = TypeVar("T")


class PgBackend(WorkQueue):
    """A PostgreSQL database of runs; it declares the ``WorkQueue`` capability."""

    def __init__(self, url: str, *, patience: float = 0.0) -> None:
        self.place = Place(url, patience=patience)

    @property
    def db(self) -> Db:
        return self.place.db

    # -- the Backend protocol -------------------------------------------------------------------

    @property
    def description(self) -> str:
        return f"PostgreSQL database {self.db.display}"

    @property
    def root(self) -> str:
        return self.db.display

    def open(self, run: str) -> PgRunHandle:
        return PgRunHandle(self.place, check_run_id(run))

    def list_runs(self) -> list[RunEntry]:
        def ids(conn: Connection) -> list[tuple[str, Any]]:
            return [(r[0], r[1]) for r in conn.execute(Q.live_runs)]

        entries = []
        for run_id, created in self.read(ids, what="list the runs"):
            handle = self.open(run_id)
            try:
                doc = handle.read()
            except ResumableError as exc:
                entries.append(RunEntry(run_id, handle.location, None, str(exc), stamp(created.timestamp()),
                                        newer=isinstance(exc, NewerFormatError)))
                continue
            key = next((v for v in (doc.get("updatedAt"), doc.get("createdAt")) if isinstance(v, str) and v), "")
            entries.append(RunEntry(run_id, handle.location, doc, None, key or stamp(created.timestamp())))
        entries.sort(key=lambda e: e.sort_key, reverse=True)  # stable: ties stay in id order
        return entries

    def gc(self, keep_days: float, *, now: float | None = None) -> GcResult:
        import time

        cutoff = (time.time() if now is None else now) - keep_days * 86400

        def candidates(conn: Connection) -> list[str]:
            return [r[0] for r in conn.execute(Q.finished_runs)]

        moved = 0
        for run_id in self.read(candidates, what="list finished runs"):
            def archive(conn: Connection, run_id: str = run_id) -> bool:
                row = runstate.find_row(conn, run_id, lock=True)
                if row is None or row.status not in ("done", "aborted"):
                    return False  # changed meanwhile: live again, or gone
                state = runstate.load(conn, row.pk, f"{self.root}#{run_id}")
                doc: Mapping[str, Any] = state.doc or {}
                if newer_version(doc) is not None:
                    return False  # a newer resumable's run: what its status means is not ours to judge
                updated = parse_stamp(doc.get("updatedAt"))
                if updated is None:
                    got = conn.execute(Q.changed_at, (row.pk,)).fetchone()
                    updated = float(got[0]) if got else None
                if updated is None or updated > cutoff:
                    return False
                conn.execute(Q.archive_run, (row.pk,))
                return True

            moved += self.write(archive, what=f"archive run {run_id}")

        def forget_workers(conn: Connection) -> None:
            conn.execute(Q.forget_workers, (cutoff,))

        self.write(forget_workers, what="forget stopped workers")
        return GcResult(moved, f"{self.root} (archived runs)")

    def delete(self, run: str) -> list[str]:
        check_run_id(run)

        def drop(conn: Connection) -> list[str]:
            row = conn.execute(Q.delete_run, (run,)).fetchone()
            return [f"run {run} ({row[0]} events) from {self.root}"] if row else []

        removed = self.write(drop, what=f"delete run {run}")
        logs = os.path.join(self.local_dir(), run)
        if os.path.isdir(logs) and not os.path.islink(logs):
            import shutil

            shutil.rmtree(logs, ignore_errors=True)
            removed.append(logs + "/")
        return removed

    def read_cache(self, name: str) -> bytes | None:
        return None  # nothing kept: a job file is parsed by each runner (its runs live on a server)

    def write_cache(self, name: str, data: bytes) -> None:
        pass

    def lease(self, run_id: str) -> PgRunnerLease:
        from resumable.store.postgres.lease import PgRunnerLease

        self.ready(migrate=True)  # taken by `run --store`, which submits the run next
        return PgRunnerLease(self.db, check_run_id(run_id))

    def close(self) -> None:
        self.place.close()

    def import_run(self, run_id: str, batches: Sequence[Sequence[Event]],
                   blobs: Mapping[str, bytes]) -> Mapping[str, Any]:
        """An exported run, whole, in one transaction (``RunImporter``; ``postgres.transfer``)."""
        return transfer.import_run(self.place, check_run_id(run_id), batches, blobs)

    # -- schema ---------------------------------------------------------------------------------

    def ready(self, *, migrate: bool = False) -> Db:
        """The database, its schema checked once per process; ``migrate``: brought up to date
        (writes that create a run, workers), else a database without it is refused."""
        return self.place.ready(migrate=migrate)

    def upgrade(self) -> tuple[int | None, int]:
        before, after = schema.upgrade(self.db)
        self.place.version = after
        return before, after

    def schema_version(self) -> int | None:
        """The database's schema version (None: resumable never used it); nothing is applied."""
        return self.db.read(schema.current, what="read the schema version")

    def schema_latest(self) -> int:
        return schema.latest()

    # -- plumbing for handles and the queue -----------------------------------------------------

    def read(self, fn: Callable[[Connection], T], *, what: str, patience: float | None = None) -> T:
        return self.place.read(fn, what=what, patience=patience)

    def write(self, fn: Callable[[Connection], T], *, what: str, probe: Callable[[Connection], bool] | None = None,
              patience: float | None = None, pipeline: bool = False, migrate: bool = False) -> T:
        return self.place.write(fn, what=what, probe=probe, patience=patience, pipeline=pipeline, migrate=migrate)

    def listener(self, channels: Sequence[str]) -> Listener:
        return self.place.listener(channels)

    def serve(self, *, patience: float) -> None:
        """Become a long-lived process's backend: connections from a pool, and a server restart
        ridden out for up to ``patience`` seconds instead of failing at once."""
        self.db.patience = patience
        self.db.use_pool()

    def local_dir(self) -> str:
        """This host's directory for the runs of this database (step logs before they are stored)."""
        return self.place.local_dir()

    # -- the WorkQueue capability (store.backend) -----------------------------------------------

    def submit(self, run_id: str, **kw: Any) -> Submitted:
        """Record a job as a run (``jobs.submit``)."""
        return jobs.submit(self.place, run_id, **kw)

    def register(self, worker: WorkerInfo) -> None:
        claims.register(self.place, worker)

    def unregister(self, worker: WorkerInfo) -> None:
        claims.unregister(self.place, worker)

    def claim(self, worker: WorkerInfo, runs: Sequence[str] | None, limit: int, *, ttl: float,
              log_path: Callable[[str, str, int], str], ahead: int = 0) -> tuple[list[Claim], float | None]:
        """Ready steps under leases (``claims.claim``), and when to look again without a notification."""
        return claims.claim(self.place, ClaimRequest(worker, limit, ttl, log_path, ahead), runs)

    def renew(self, worker: WorkerInfo, held: Sequence[Claim], ttl: float) -> list[Claim]:
        return claims.renew(self.place, worker, held, ttl)

    def record(self, worker: WorkerInfo, *, starts: Sequence[tuple[Claim, float]] = (),
               items: Sequence[tuple[Claim, Mapping[str, Any], RetryPolicy]] = (), unstarted: Sequence[Claim] = (),
               slots: int = 0, ahead: int = 0, ttl: float = 0.0,
               log_path: Callable[[str, str, int], str] | None = None) -> outcomes.Recorded:
        """What a worker says of one run (``outcomes.record``): starts, outcomes, claims handed
        back unstarted, and up to ``slots`` + ``ahead`` next claims, in one transaction."""
        first = next(iter([*(c for c, _ in starts), *(c for c, _, _ in items), *unstarted]))
        work = outcomes.Work(worker, first.run_id, first.run_pk, starts=[claims.Start(c, at) for c, at in starts],
                             items=items, unstarted=unstarted)
        request = ClaimRequest(worker, slots, ttl, log_path, ahead) if (slots or ahead) and log_path else None
        return outcomes.record(self.place, work, request)

    def complete(self, items: Sequence[tuple[Claim, Mapping[str, Any], RetryPolicy]], *,
                 more: int = 0, worker: WorkerInfo | None = None, ttl: float = 0.0,
                 log_path: Callable[[str, str, int], str] | None = None) -> tuple[list[Settled | None], list[Claim]]:
        """Record outcomes of one run's attempts if their claims hold (``outcomes.complete``),
        claiming up to ``more`` ready steps of the run in the same transaction."""
        assert worker is not None
        request = ClaimRequest(worker, more, ttl, log_path) if more and log_path else None
        return outcomes.complete(self.place, worker, items, request)

    def tidy(self) -> None:
        """What the last claims and completions left to do: conclude a run seen with nothing open,
        number a run's events (``append.tidy``). The worker calls it once its steps are started."""
        append.tidy(self.place)

    def release(self, claim: Claim, reason: str, **kw: Any) -> bool:
        worker = kw.pop("worker")
        return outcomes.release(self.place, worker, claim, reason, **kw)

    def run_states(self, runs: Sequence[str]) -> dict[str, str | None]:
        return reads.run_states(self.place, runs)

    def step_summary(self, run_id: str) -> str:
        return reads.step_summary(self.place, run_id)

    def attempts(self, run_id: str, step: str | None = None) -> list[dict[str, object]]:
        return reads.attempts(self.place, run_id, step)

    def attempt_log(self, run_id: str, step: str, n: int | None = None) -> tuple[int, bytes | None] | None:
        return reads.attempt_log(self.place, run_id, step, n)

    def work_listener(self) -> Listener:
        """A ``LISTEN`` on the channel workers wait on (a step may have become claimable)."""
        return self.listener([WORK])

    def worker_info(self, worker_id: str) -> WorkerInfo:
        return WorkerInfo(worker_id, host_name(), os.getpid())
