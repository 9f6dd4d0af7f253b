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

The PostgreSQL store is also a ``WorkQueue`` (below), for workers on many hosts (``resumable
worker``): a declared capability, checked with ``isinstance(backend, WorkQueue)``, never by
probing for methods.

It also imports an exported run whole, in one transaction (``RunImporter``: ``import_run(run_id,
batches, blobs)``).


Its ``RunHandle`` is the same protocol as the file store's; ``wait_for_change`` follows ``NOTIFY``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, TypeVar, runtime_checkable

from resumable.store.values import Doc, Event, GcResult, LeftoverGroup, Record, RunEntry

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence

    from resumable.core.policy import RetryPolicy, Settled
    from resumable.core.types import Attempt, AttemptState, Launch, Unit

    Picked = TypeVar("Picked")  # what a digest keeps of each unit (``UnitDigest``)

__all__ = ["Backend", "ClaimLike", "DigestReading", "Digests", "Doc", "Event", "GcResult", "LeaseState",
           "LeaseSurvey", "LeftoverGroup", "ListenerLike", "Record", "RunEntry", "RunHandle", "RunImporter",
           "RunnerLease", "UnitDigest", "WorkQueue"]


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

    def holder(self) -> LeaseHolder | None:
        """The live holder's description (pid, host, startedAt), or None when no runner holds the run.
        Read without taking the lease (a reader holding it even for an instant could turn a runner
        away)."""
        ...

    def workers(self) -> list[WorkerPresence] | None:
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


class LeaseHolder(TypedDict, total=False):
    """Who holds a runner lease, as its record says (``RunnerLease.holder``): ``{"pid": "?"}`` when
    the record says nothing (a lease held by a runner that has not written itself in yet)."""

    # As the record holds them: an int and two strings as resumable writes them, whatever a hand
    # edit of a lease file left (read each with a check).
    pid: object
    host: object
    startedAt: object


class WorkerPresence(TypedDict):
    """A worker on a run (``RunnerLease.workers``)."""

    worker: str
    host: str
    pid: int
    steps: list[str]  # the steps it holds, in job order
    expiresIn: float | None  # seconds until the last of those leases expires; None: it holds none


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

    def units(self, ids: Iterable[str]) -> dict[str, Unit] | None:
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
class Provenance(Protocol):
    """A handle that can tell whether bytes read from its run could have been written by someone other
    than this user: what a pickled step result is checked against before it is unpickled."""

    def foreign(self, ref: str | None = None) -> str | None:
        """Why the run's records (and the blob ``ref``, when given) may hold bytes another user wrote
        (a file or a directory on their path that another user owns or may write to, a link), in a
        line that says what to do; None when only this user could have written them."""
        ...


@runtime_checkable
class UnitDigest(Protocol):
    """A handle that can read a little of every unit without holding every unit (a runs directory's,
    when its snapshot is current): what answers a map over many recorded step calls."""

    def digest(self, pick: Callable[[str, Any], Picked]) -> tuple[Doc, dict[str, Picked]] | None:
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
                   blobs: Mapping[str, bytes]) -> Mapping[str, Any]:
        """Create ``run_id`` from ``batches`` (its init alone, then the rest of its history) and
        ``blobs`` (ref -> bytes, checked by the caller); the rebuilt document. ``RefusedError``
        (``store.transfer.AlreadyThere``) when a run with the id exists."""
        ...


class PlanDecision(TypedDict, total=False):
    """Whether a submitted step runs (``WorkQueue.submit``'s ``plan``), and why."""

    run: bool
    reason: str
    invalidate: bool  # a done unit, invalidated (explicitly) before it runs again


class Submitted(TypedDict):
    """What ``WorkQueue.submit`` recorded."""

    run: str
    run_steps: list[str]  # the steps that run, sorted
    skip: int  # how many steps are skipped
    concluded: bool  # nothing left to run: the run was finalized at once


class StepOutcome(TypedDict):
    """What a worker's attempt did, for ``WorkQueue.complete`` to record (``runner.worker_attempt``)."""

    status: AttemptState
    note: str
    attempt: Attempt
    fields: dict[str, object]  # the unit's, as the local runner records them
    exit_code: int | None  # None: it never ran
    reason: str | None  # why it failed although it exited 0
    log: bytes | None  # the end of its log, stored with the attempt


class ClaimLike(Protocol):
    """A step a worker holds (``WorkQueue.claim``): the attempt and its fencing token."""

    run_id: str
    step: str
    n: int  # the attempt number
    epoch: int  # the fencing token: an outcome is recorded only while it is the step's
    spec: dict[str, Any]  # how to run the step (runner.stepspec)
    unit: dict[str, Any]  # what the worker needs of the unit: its last fingerprint and its host
    log: str  # where this host writes the attempt's output


class ListenerLike(Protocol):
    """A ``LISTEN``: a descriptor to poll, and the notifications received."""

    def fileno(self) -> int | None: ...
    def drain(self) -> list[str]: ...
    def close(self) -> None: ...


@runtime_checkable
class WorkQueue(Protocol):
    """A store whose submitted jobs run on workers on any number of hosts (the PostgreSQL store).

    Claims and completions lock only the step rows they touch; a claim is a lease in the store's
    clock with a fencing token; an outcome whose token is no longer the step's is kept with its
    attempt and refused, never applied. What follows an outcome is ``core.policy``'s decision."""

    def submit(self, run_id: str, *, task: str, launch: Launch, steps: Sequence[Mapping[str, Any]],
               plan: Callable[[Mapping[str, Any]], Mapping[str, PlanDecision]], options: Mapping[str, Any],
               marks: Callable[[Mapping[str, Any]], Sequence[Event]] | None = None) -> Submitted:
        """Record a job's steps (``{"id", "needs", "spec", "command"}``), fingerprints and needs as a
        run (idempotent: submitting again resumes it); ``{"run", "skip", "run_steps", "concluded"}``."""
        ...

    def worker_info(self, worker_id: str) -> Any: ...
    def register(self, worker: Any) -> None: ...
    def unregister(self, worker: Any) -> None: ...

    def claim(self, worker: Any, runs: Sequence[str] | None, limit: int, *, ttl: float,
              log_path: Callable[[str, str, int], str], ahead: int = 0) -> tuple[Sequence[ClaimLike], float | None]:
        """Up to ``limit`` ready steps (and ``ahead`` more, claimed ahead of the free slots), in
        one transaction per run, taken with ``FOR UPDATE SKIP LOCKED``; and seconds until something
        falls due without a notification. A claim is not an attempt until ``record`` starts it."""
        ...

    def record(self, worker: Any, *, starts: Sequence[tuple[Any, float]] = (),
               items: Sequence[tuple[Any, Mapping[str, Any], RetryPolicy]] = (), unstarted: Sequence[Any] = (),
               slots: int = 0, ahead: int = 0, ttl: float = 0.0,
               log_path: Callable[[str, str, int], str] | None = None) -> Any:
        """What a worker says of one run, in one transaction: attempts started (claim, when),
        outcomes, claims handed back unstarted; the next claims (``slots`` + ``ahead``) with them.
        Returns ``settled`` (per outcome; None: stale), ``claims``, ``lost`` (started attempts whose
        claim no longer held) and ``stopping`` (the run starts nothing new)."""
        ...

    def renew(self, worker: Any, held: Sequence[Any], ttl: float) -> Sequence[ClaimLike]:
        """Heartbeat: every claim's lease renewed in one statement; returns the claims lost."""
        ...

    def complete(self, items: Sequence[tuple[Any, Mapping[str, Any], RetryPolicy]], *, more: int = 0,
                 worker: Any = None, ttl: float = 0.0, log_path: Callable[[str, str, int], str] | None = None
                 ) -> tuple[list[Settled | None], Sequence[ClaimLike]]:
        """Outcomes of one run's attempts, in one transaction: for each, what the policy made of it
        (None: its claim no longer held); ``more``: the next claims, in the same transaction."""
        ...

    def release(self, claim: Any, reason: str, **kw: Any) -> bool:
        """Hand a claim back without an outcome (a worker stopping)."""
        ...

    def tidy(self) -> None:
        """What the last claims and completions left to do (a run's conclusion, numbering its
        events), done once the worker has started the steps it claimed."""
        ...

    def run_states(self, runs: Sequence[str]) -> dict[str, str | None]: ...
    def step_summary(self, run_id: str) -> str: ...
    def work_listener(self) -> ListenerLike: ...
    def local_dir(self) -> str: ...
    def serve(self, *, patience: float) -> None: ...
    def open(self, run: str) -> RunHandle: ...
    def ready(self) -> Any: ...
