"""The storage seam: the only way the rest of resumable reaches stored runs.

::

    cli/ ── api ──┬── runner/ ──┐
                  └── view/ ────┴──> store.Backend ──> RunHandle   (this module: the protocol)
                                         │
                        ┌────────────────┴─────────────────┐
                   store/files/                       store/postgres/
                   runs directory: journal +          tables, migrations, leases,
                   snapshot, flock, archive           LISTEN/NOTIFY (optional extra)

A ``Backend`` is a place runs live (a runs directory, a database). ``open`` gives a ``RunHandle`` for
one run: its current document, an atomic ``commit`` of events (the checkpoint rules of
``core.events.apply`` hold inside it, so a refused event changes nothing), its history, and a change
token for ``status --watch``. ``lease`` gives the runner lease: at most one live runner per run, and
what a dead runner left running. Nothing outside ``store/files/`` names a run's files and nothing
outside ``store/postgres/`` speaks SQL; everything above reaches runs through these three protocols.

Events are plain dicts (``core.events``); a handle stamps ``at`` on events that lack one. A write is
durable before ``commit`` returns (the file store fsyncs its journal; PostgreSQL commits).

The PostgreSQL store adds, for workers on many hosts (``resumable worker``; ``runner.workqueue``
types what the runner uses of it), on its backend object:

- ``submit(run_id, task=, launch=, steps=, plan=, options=) -> dict``: record a job's steps,
  fingerprints and needs as a run (idempotent: submitting again resumes it).
- ``claim(worker, runs, limit, ttl=, log_path=) -> (claims, wake)``: eligible units (every need
  done, not leased), taken with ``FOR UPDATE SKIP LOCKED``; each ``Claim`` carries the unit, the
  attempt number, and a fencing token (the lease epoch); ``wake``: seconds until something falls
  due without a notification.
- ``renew(worker, claims, ttl) -> list[Claim]``: heartbeat; returns the claims that were lost.
- ``complete([(claim, result, retry_policy), ...], more=) -> (settled, claims)``: commit outcomes
  only where the claim's epoch is still current; a stale completion is kept with its attempt and
  refused (False), never applied. ``more``: the next claims, in the same transaction.
- ``release(claim, reason)``: hand a claim back without an outcome (a worker stopping).
- ``work_listener()``: a ``LISTEN`` that wakes a worker when a step may have become claimable.
- ``upgrade()`` / ``schema_version()``: versioned migrations; an older resumable refuses a newer schema.
- ``import_run(run_id, batches, blobs)`` (``RunImporter``): an exported run, whole, in one transaction.

Its ``RunHandle`` is the same protocol as the file store's; ``wait_for_change`` follows ``NOTIFY``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from resumable.store.values import Doc, Event, GcResult, LeftoverGroup, Record, RunEntry

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence

__all__ = ["Backend", "DigestReading", "Digests", "Doc", "Event", "GcResult", "LeaseState", "LeaseSurvey",
           "LeftoverGroup", "Record", "RunEntry", "RunHandle", "RunImporter", "RunnerLease", "UnitDigest"]


class RunnerLease(Protocol):
    """At most one live runner per run, wherever it was started from.

    The holder keeps the lease until ``release`` or its death (the file store's lease is an flock,
    released by the kernel; PostgreSQL's a session advisory lock, released with the connection), so a
    killed runner never blocks the next one and nothing is taken over on a timer."""

    @property
    def secret(self) -> str:
        """This runner's secret, for its steps' environment (see ``LeftoverGroup``)."""
        ...

    def acquire(self) -> None:
        """Take the lease; ``RefusedError`` naming the live holder (pid, host, start) if there is one."""
        ...

    def holder(self) -> dict[str, Any] | None:
        """The live holder's description (pid, host, startedAt), or None when no runner holds the run.
        Read without taking the lease (a reader holding it even for an instant could turn a runner
        away)."""
        ...

    def workers(self) -> list[dict[str, Any]] | None:
        """Who runs the run's steps on workers now: one entry per worker holding an unexpired claim
        on a step of it (``worker``, ``host``, ``pid``, ``steps``: the step ids it holds, in job
        order, ``expiresIn``: seconds until the last of those leases expires), then one per worker
        that worked on the run, has not stopped and holds nothing now (``steps`` empty,
        ``expiresIn`` None: it may be waiting for a retry, or dead without a word), read without
        taking anything. None for a store whose steps run only under the runner lease (a runs
        directory)."""
        ...

    def leftovers(self) -> list[LeftoverGroup]:
        """Groups that dead runners left running and that are not yet proven gone. The list only
        shrinks through ``reaped``: a runner interrupted while reaping leaves it for the next one."""
        ...

    def reaped(self, groups: Sequence[LeftoverGroup]) -> None:
        """Groups proven gone: drop them from the leftovers."""
        ...

    def track(self, group: LeftoverGroup) -> None:
        """A step's group started: record it before anything else can lose track of it."""
        ...

    def untrack(self, pgid: int) -> None:
        """A step's group is gone."""
        ...

    def sync(self) -> None:
        """Called on every pass of the runner's loop: a lease that records the running groups
        lazily (they are information; the runner's secret is what finds its processes) writes
        them now if they changed and are due."""
        ...

    def release(self) -> None: ...


@dataclass(frozen=True, slots=True)
class LeaseState:
    """What a run's runner lease says, read without taking it (``LeaseSurvey``)."""

    run_id: str
    where: str  # the lease, for people (a lease file's path)
    held: bool | None  # None: this host cannot tell (a runner on another host)
    newer: int | None  # the format, when a newer resumable wrote it (then nothing else is read)
    # Secrets of the runners it names, whose processes may still run once no runner holds it.
    secrets: frozenset[str]


@runtime_checkable
class LeaseSurvey(Protocol):
    """A store that can list every runner lease at once (a runs directory): what ``doctor`` checks
    for processes that dead runners left running."""

    def runner_leases(self) -> list[LeaseState]:
        """Every run's runner lease, by run id, read without taking any; ``StoreError`` when the
        store cannot be listed."""
        ...


class Digests(Protocol):
    """A run read without decoding its units whole: ``doc`` is the document with each unit replaced
    by its digest (a unit's ``status``, ``dependsOn``, ``removed`` and a ``note`` that starts with
    ``reconciled-from-trailer``; a malformed unit as it is), all that counting readers look at."""

    @property
    def doc(self) -> Doc: ...

    def units(self, ids: Iterable[str]) -> dict[str, Any] | None:
        """The whole values of those units (the ones the run has) as of ``doc``; None when the store
        moved on meanwhile (read the whole document then)."""
        ...


@runtime_checkable
class DigestReading(Protocol):
    """A handle that can read a large run's digests (a runs directory keeps an index for it): what
    ``get --summary``, ``resume`` and ``status`` read, in a fraction of a whole load's time and
    memory."""

    def load_digests(self) -> Digests | None:
        """The run's digests, or None when only the whole document answers (``load``)."""
        ...


class RunHandle(Protocol):
    """One run in one store, for one process. Not thread-safe; open one per thread."""

    @property
    def run_id(self) -> str: ...

    @property
    def location(self) -> str:
        """Where the run lives, for people (the snapshot file's path; a database and run id)."""
        ...

    @property
    def warning(self) -> str | None:
        """Set when the last commit was durable but a derived view could not be brought up to date
        (the file store's snapshot, e.g. in a read-only directory); None otherwise."""
        ...

    def exists(self) -> bool: ...

    def load(self) -> Doc | None:
        """The current document (None when the run does not exist), without taking a lock. The
        returned dict is the handle's own: treat it as read-only."""
        ...

    def read(self) -> Doc:
        """``load``, raising the store's "no such run" error (``NoRunError`` for a run named by id)."""
        ...

    def commit(self, events: Sequence[Event], *, lazy_view: bool = False) -> list[Any]:
        """Apply ``events`` in order, atomically, and make them durable; returns each event's output.

        A refusal (``RefusedError``) or bad input (``InvalidInputError``) by any event leaves the run
        unchanged. An ``init`` event may only come first and alone. ``lazy_view`` lets the file store
        leave its snapshot view to its amortised budget for this write."""
        ...

    def flush(self) -> None:
        """Bring derived views up to date (the file store's snapshot); a no-op where there are none."""
        ...

    def history(self, since: int = 0) -> Iterator[Record]:
        """Every record with a sequence number above ``since``, oldest first."""
        ...

    def change_token(self) -> Hashable:
        """A cheap value that changes whenever a commit lands (compared by ``status --watch``)."""
        ...

    def wait_for_change(self, token: Hashable, timeout: float) -> Hashable:
        """Block until the change token differs from ``token`` or ``timeout`` seconds pass; returns
        the current token."""
        ...

    def log_dir(self) -> str:
        """A local directory for this run's step logs."""
        ...

    def put_blob(self, data: bytes) -> str:
        """Store ``data`` by content and return its reference (``sha256:<hex>``), durably: a record
        that names the reference may be committed as soon as this returns. Storing the same bytes
        twice stores them once."""
        ...

    def get_blob(self, ref: str) -> bytes:
        """The bytes stored under ``ref``; ``CorruptRunError`` when they are missing or damaged."""
        ...

    def close(self) -> None:
        """Flush and release what the handle holds (descriptors, connections)."""
        ...


@runtime_checkable
class UnitDigest(Protocol):
    """A handle that can read a little of every unit without holding every unit (a runs directory's,
    when its snapshot is current): what answers a map over many recorded step calls."""

    def digest(self, pick: Callable[[str, Any], Any]) -> tuple[Doc, dict[str, Any]] | None:
        """(the document without its units, {unit id: ``pick(unit id, unit)``} for each unit ``pick``
        keeps: None drops it), read without a lock, each unit let go once picked; None when the run
        cannot be read that way now (``load`` then reads it)."""
        ...


class Backend(Protocol):
    """A place runs live."""

    @property
    def description(self) -> str:
        """For people: "runs directory /srv/x/.resumable/runs (found walking up from /srv/x)"."""
        ...

    @property
    def root(self) -> str:
        """The runs directory or the database URL (without a password)."""
        ...

    def open(self, run: str) -> RunHandle:
        """A run by id (the file store also takes the path of a ``.json`` status file). Opening does
        not touch the store; the first commit of an ``init`` creates the run."""
        ...

    def list_runs(self) -> list[RunEntry]:
        """Every run, newest first (updatedAt, else createdAt, else the store's own time)."""
        ...

    def gc(self, keep_days: float, *, now: float | None = None) -> GcResult:
        """Archive finished (done/aborted) runs last updated more than ``keep_days`` ago."""
        ...

    def delete(self, run: str) -> list[str]:
        """Delete a run's state and logs (the caller holds its runner lease); returns what went."""
        ...

    def lease(self, run_id: str) -> RunnerLease: ...

    def read_cache(self, name: str) -> bytes | None:
        """Derived data kept under ``name`` (``[a-z][a-z0-9-]*.<hex>``), exactly as written, or
        None: absent, or not provably intact. A cache: whatever it holds can be made again."""
        ...

    def write_cache(self, name: str, data: bytes) -> None:
        """Keep ``data`` under ``name`` (best effort: a store may keep nothing; OSError on failure)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class RunImporter(Protocol):
    """A store that imports an exported run in one transaction: the whole history and every stored
    value, or nothing (a process killed half way leaves no run behind)."""

    def import_run(self, run_id: str, batches: Sequence[Sequence[Event]],
                   blobs: Mapping[str, bytes]) -> dict[str, Any]:
        """Create ``run_id`` from ``batches`` (its init alone, then the rest of its history) and
        ``blobs`` (ref -> bytes, checked by the caller); the rebuilt document. ``RefusedError``
        (``store.transfer.AlreadyThere``) when a run with the id exists."""
        ...
