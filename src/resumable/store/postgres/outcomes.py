"""Outcomes: a worker records what its claims' attempts did, if the claims still hold.

A claim holds while the step's epoch is still the claim's (nobody took the step back after its
lease expired). What a worker has to say about one run goes in one transaction (``record``): the
attempts it started (``claims.start``), the outcomes of those that ended, with what follows from
them as ``core.policy`` decides it (dependents one need closer to ready, a retry after its
backoff, a failure that stops the run or blocks its dependents, keep-going), the claims it hands
back unstarted, and its next claims on the run. A stale claim's outcome is kept with its attempt
only (``stale``), never applied to the run's document.

Two round trips: the fenced updates and the rows they need (locked), then the rest with the
COMMIT. Only the step rows touched are locked, and the run's row only by the last statement.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from resumable.core import policy, verbs
from resumable.core.stamps import stamp
from resumable.store.postgres import append, claims
from resumable.store.postgres.claims import Claim, ClaimRequest, Start, WorkerInfo, take
from resumable.store.postgres.queries import WORK, Q

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from psycopg import Cursor

    from resumable.core.policy import RetryPolicy
    from resumable.store.postgres.db import Connection
    from resumable.store.postgres.place import Place

    Item = tuple[Claim, Mapping[str, Any], RetryPolicy]
    Answer = tuple[list[policy.Settled | None], list[Claim]]  # per item: what was recorded (None: stale)


class Work:
    """What a worker has to record of one run: attempts started, outcomes, claims handed back unstarted."""

    __slots__ = ("items", "pk", "run_id", "starts", "unstarted", "worker")

    def __init__(self, worker: WorkerInfo, run_id: str, pk: int, *, starts: Sequence[Start] = (),
                 items: Sequence[Item] = (), unstarted: Sequence[Claim] = ()) -> None:
        self.worker = worker
        self.run_id = run_id
        self.pk = pk
        self.starts = list(starts)
        self.items = list(items)
        self.unstarted = list(unstarted)


class Recorded:
    """What a ``record`` did: per outcome what the policy made of it (None: its claim no longer
    held), the claims taken with it, the started attempts whose claim no longer held, and whether
    the run starts nothing new (stopping, or not running)."""

    __slots__ = ("claims", "lost", "settled", "stopping")

    def __init__(self, settled: list[policy.Settled | None], claims: list[Claim], lost: list[Claim],
                 stopping: bool) -> None:
        self.settled = settled
        self.claims = claims
        self.lost = lost
        self.stopping = stopping


def record(place: Place, work: Work, more: ClaimRequest | None = None) -> Recorded:
    """Record what ``work`` says of one run, in one transaction, claiming up to ``more`` ready
    steps of the run with it.

    Each item is (claim, result, retry policy). ``result``: ``status`` (done failed timeout
    interrupted), ``note``, ``attempt`` (the unit's attempt record), ``fields``, ``exit_code``,
    ``reason``, ``log`` (bytes)."""
    batches: list[append.Batch] = []

    def txn(conn: Connection) -> tuple[Recorded, bool]:
        batch = append.Batch(work.pk, work.run_id)
        batches[:] = [batch]
        return Completion(conn, batch, work, more).run()

    def probe(conn: Connection) -> bool:
        return bool(batches) and append.saved(conn, batches[0])

    what = f"record {len(work.starts)} start(s) and {len(work.items)} outcome(s) of run {work.run_id}"
    answer, over = place.write(txn, what=what, probe=probe, pipeline=True)
    append.follow_up(place, work.run_id, work.pk, over=over)
    out: Recorded = answer
    return out


def complete(place: Place, worker: WorkerInfo, items: Sequence[Item], more: ClaimRequest | None = None) -> Answer:
    """Record the outcomes of attempts of one run, in one transaction (``record``)."""
    if not items:
        return [], []
    got = record(place, Work(worker, items[0][0].run_id, items[0][0].run_pk, items=items), more)
    return got.settled, got.claims


class Completion:
    """One transaction recording what a worker says of one run."""

    def __init__(self, conn: Connection, batch: append.Batch, work: Work, more: ClaimRequest | None) -> None:
        self.conn = conn
        self.batch = batch
        self.work = work
        self.items = work.items
        self.more = more
        self.pk = batch.pk

    def _ask(self) -> dict[str, Cursor[Any] | None]:
        """The first round trip: every statement whose answer the rest needs, in pipeline mode.
        Starts come first (an outcome in the same transaction acts on the started attempt); the
        run's view last (what is open once these outcomes and hand-backs are applied)."""
        conn, pk, work = self.conn, self.pk, self.work
        done = [(c, r) for c, r, _ in self.items if r["status"] == "done"]
        others = [c for c, r, _ in self.items if r["status"] != "done"]
        limit = self.more.most if self.more is not None else 0
        unstarted = {"pk": pk, "steps": [c.step for c in work.unstarted], "epochs": [c.epoch for c in work.unstarted]}
        return {
            "start": claims.start(conn, pk, work.worker, work.starts),
            "back": conn.execute(Q.release_unstarted, unstarted) if work.unstarted else None,
            "done": conn.execute(Q.finish_done, {
                "pk": pk, "steps": [c.step for c, _ in done], "epochs": [c.epoch for c, _ in done],
                "fingerprints": [_fingerprint(r) for _, r in done]}) if done else None,
            "rows": conn.execute(Q.claimed_rows, {"pk": pk, "steps": [c.step for c in others]}) if others else None,
            "ready": conn.execute(Q.ready_steps, {"pk": pk, "run": None, "limit": limit}) if limit > 0 else None,
            "view": conn.execute(Q.run_view, {
                "pk": pk, "steps": [c.step for c, _, _ in self.items], "failures": bool(others),
                "bound": self.more.bound if self.more is not None and self.more.ahead else 0}),
        }

    def run(self) -> tuple[Recorded, bool]:
        sent = self._ask()
        held = claims.started(self.batch, self.work.worker, self.work.starts, sent["start"])
        lost = [s.claim for s in self.work.starts if s.claim.step not in held]
        released = {r[0] for r in sent["back"].fetchall()} if sent["back"] is not None else set()
        matched: set[str] = set()
        freed: set[str] = set()
        current: dict[str, int] = {}
        for kind, step, epoch in (sent["done"].fetchall() if sent["done"] is not None else []):
            if kind == "epoch":
                current[step] = int(epoch)
            else:
                (matched if kind == "done" else freed).add(step)
        rows = {r[0]: r for r in (sent["rows"].fetchall() if sent["rows"] is not None else [])}
        ready = sent["ready"].fetchall() if sent["ready"] is not None else []
        run = sent["view"].fetchone() if sent["view"] is not None else None
        others_open, others_running = (bool(run[4]), bool(run[5])) if run else (True, True)
        view = (float(run[7]) if run and run[7] is not None else None), (int(run[8] or 0) if run else 0)
        stopping = bool(run[3]) if run else True
        rules = policy.JobRules.of(run[2] if run and isinstance(run[2], dict) else None)

        answers: dict[int, policy.Settled | None] = {}
        finished: list[tuple[Claim, Mapping[str, Any]]] = []
        stale: list[tuple[Claim, Mapping[str, Any], Any]] = []
        for claim, result, _ in self.items:
            if result["status"] != "done":
                continue
            if claim.step in matched:
                answers[id(claim)] = policy.Settled("done")
                finished.append((claim, result))
            else:
                stale.append((claim, result, (claim.step, None, current.get(claim.step))))
        others = [(c, r, p) for c, r, p in self.items if r["status"] != "done"]
        failed_now = self._settle(others, rows, stopping, answers, finished, stale)
        for claim, result in finished:
            self.batch.add(verbs.unit(claim.step, result["status"], note=result.get("note"),
                                      attempt=dict(result["attempt"]), fields=dict(result.get("fields") or {})))
        stop = stopping
        if failed_now:
            failed_before = int(run[6] or 0) if run else 0
            stop = stop or rules.stops(failed_before + len(failed_now))
            if rules.keep_going:
                self._block(failed_now)
        self.batch.stop = stop and not stopping
        self._stale(stale)
        live = run is not None and run[1] == "running"
        taken = self._claim(others, rows, answers, ready, view) if live and not stop else []
        # Nothing of the run open once this commits: every other step finished, and these close.
        closing = all(a is not None and a.state != "pending" for a in answers.values()) and not taken
        over = closing and live and (not others_open or (stop and not others_running))
        if released or freed - {c.step for c in taken} or any(
                a is not None and a.state == "pending" for a in answers.values()):
            self.batch.notify_work = True  # steps claimable by others: wake an idle worker
        elif closing and live and not over and others_running:
            # The last steps may be ending at once on other workers, each seeing the others open:
            # the workers are told, and the first to look after the last commit concludes the run.
            self.batch.notify_work = True
        self._write(finished, taken)
        return Recorded([answers.get(id(c)) for c, _, _ in self.items], taken, lost, stop or not live), over

    def _write(self, finished: Sequence[tuple[Claim, Mapping[str, Any]]], taken: Sequence[Claim]) -> None:
        """The last statement before the COMMIT (``write_outcomes``): claims, attempts, events, stop."""
        batch = self.batch
        self.conn.execute(Q.write_outcomes, {
            "pk": self.pk, "worker": self.work.worker.id, "ttl": self.more.ttl if self.more is not None else 0.0,
            "take": [c.step for c in taken], "take_epochs": [c.epoch for c in taken],
            "steps": [c.step for c, _ in finished], "ns": [c.n for c, _ in finished],
            "statuses": [r["status"] for _, r in finished], "exit_codes": [r.get("exit_code") for _, r in finished],
            "reasons": [r.get("reason") for _, r in finished], "logs": [r.get("log") for _, r in finished],
            "tx": batch.tx, "bodies": batch.bodies, "stop": batch.stop, "notify": batch.notify_work,
            "channel": WORK, "run": batch.run_id})
        append.wrote(batch)

    def _claim(self, others: Sequence[Item], rows: Mapping[str, Any], answers: Mapping[int, policy.Settled | None],
               ready: Sequence[Sequence[Any]], view: tuple[float | None, int]) -> list[Claim]:
        """The worker's next claims on the run: the ready steps and a retry due at once (ready
        again, in the job's order among them, as the local runner starts it). Taken by ``_write``."""
        if self.more is None:
            return []
        again = [(rows[c.step][8], _claimable(rows[c.step])) for c, _, _ in others if _due_now(answers.get(id(c)))]
        candidates = [(r[9], tuple(r[1:9])) for r in ready] + again
        return take(self.conn, self.batch, self.more, self.batch.run_id, claims.pick(candidates, self.more, view),
                    send=False)

    def _settle(self, others: Sequence[Item], rows: Mapping[str, Any], stopping: bool,
                answers: dict[int, policy.Settled | None], finished: list[tuple[Claim, Mapping[str, Any]]],
                stale: list[tuple[Claim, Mapping[str, Any], Any]]) -> list[str]:
        """Outcomes other than done, as the policy settles them; returns the steps failed for good."""
        updates: list[tuple[str, str, int, float | None]] = []
        failed_now = []
        for claim, result, retry in others:
            row = rows.get(claim.step)
            if row is None or int(row[2]) != claim.epoch or row[1] != "running":
                stale.append((claim, result, row))
                continue
            status = result["status"]
            failures = int(row[3]) + (status != "interrupted")
            # The backoff is counted in the server's clock (now() + delay): ``now`` is 0 here.
            settled = policy.settle(status, failures=failures, retry=retry, stopping=stopping, now=0.0,
                                    rand=random.random)
            answers[id(claim)] = settled
            finished.append((claim, result))
            updates.append((claim.step, settled.state, failures, settled.retry_in))
            if settled.failed_for_good:
                failed_now.append(claim.step)
        if updates:
            self.conn.execute(Q.settle_steps, {
                "pk": self.pk, "steps": [u[0] for u in updates], "states": [u[1] for u in updates],
                "failures": [u[2] for u in updates], "delays": [u[3] for u in updates]})
        return failed_now

    def _block(self, failed: list[str]) -> None:
        """keep-going: the steps downstream of the failures are dep_blocked (their rows locked)."""
        rows = self.conn.execute(Q.downstream, {"pk": self.pk, "steps": failed}).fetchall()
        needs = {r[0]: list(r[1]) for r in rows}
        states = {r[0]: r[2] for r in rows}
        dependents = policy.dependents_of(needs)
        roots: dict[str, str] = {}
        blocked: list[str] = []
        for step in failed:
            got = policy.block_dependents(step, dependents=dependents, needs=needs, states=states, roots=roots)
            for sid, root in got.steps.items():
                states[sid] = "dep_blocked"
                roots[sid] = root
                blocked.append(sid)
            self.batch.add(*got.events)
        if blocked:
            none = [None] * len(blocked)
            self.conn.execute(Q.settle_steps, {"pk": self.pk, "steps": blocked, "failures": none, "delays": none,
                                               "states": ["dep_blocked"] * len(blocked)})

    def _stale(self, stale: Sequence[tuple[Claim, Mapping[str, Any], Any]]) -> None:
        """Every attempt kept: the stale ones with what they said (the recorded ones: ``_write``)."""
        if stale:
            from psycopg.types.json import Jsonb

            self.conn.execute(Q.stale_attempts, {
                "pk": self.pk, "steps": [c.step for c, _, _ in stale], "ns": [c.n for c, _, _ in stale],
                "stales": [Jsonb({"status": r["status"], "exitCode": r.get("exit_code"), "at": stamp(ms=True),
                                  "epoch": c.epoch, "currentEpoch": _epoch(row)}) for c, r, row in stale],
                "logs": [r.get("log") for _, r, _ in stale]})


def _epoch(row: Sequence[Any] | None) -> int | None:
    return int(row[2]) if row is not None and row[2] is not None else None


def _due_now(settled: policy.Settled | None) -> bool:
    """A retry without a backoff: ready again at once."""
    return settled is not None and settled.due is not None and (settled.retry_in or 0.0) <= 0.0


def _claimable(row: Sequence[Any]) -> tuple[Any, ...]:
    """A ``claimed_rows`` row as ``take`` wants it (``ready_steps``' columns but the first and last)."""
    step, _, epoch, _, spec, attempt, needs, fingerprint, _, upstream, reran = row
    return step, spec, attempt, epoch, needs, fingerprint, upstream, reran


def _fingerprint(result: Mapping[str, Any]) -> Any:
    """What a later claim needs of the unit: its fingerprint, where it was taken, its artifacts."""
    from psycopg.types.json import Jsonb

    fields = result.get("fields") or {}
    return Jsonb({k: fields[k] for k in ("fingerprint", "fingerprintHost", "artifacts") if k in fields})


def release(place: Place, worker: WorkerInfo, claim: Claim, reason: str, *, attempt: Mapping[str, Any] | None = None,
            exit_code: int | None = None, log: bytes | None = None) -> bool:
    """Hand a claim back without an outcome (a stopping worker): the attempt ends ``interrupted``
    and the step is at once claimable by another worker."""
    record = dict(attempt or {"n": claim.n, "status": "interrupted", "finishedAt": stamp(ms=True)})
    record.setdefault("reason", reason)
    result = {"status": "interrupted", "note": reason, "attempt": record, "exit_code": exit_code,
              "reason": reason, "log": log, "fields": {}}
    return complete(place, worker, [(claim, result, policy.RetryPolicy())])[0][0] is not None
