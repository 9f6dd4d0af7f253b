"""The scheduling policy: what follows a step's outcome, and how a run ends. Pure: no I/O and no
clock of its own (times and randomness are passed in), so the local runner (``runner.scheduler``,
``runner.conclude``) and the PostgreSQL workers (``store.postgres``) apply the very same rules and
a run reads the same in both stores.

The rules (make's):

- a step that failed (or timed out) is tried again while its retries last, after a backoff of
  ``base * 2^(k-1)`` (plus jitter) before retry k; an interrupted attempt is handed back, not
  counted as a failure;
- a step that failed for good stops the run (nothing new starts, running steps finish), unless the
  job keeps going: then every waiting step downstream of it is ``dep_blocked`` on the root failure,
  and the run stops only once ``max_failures`` steps have failed;
- once nothing runs and nothing more can start, the run's verdict: done when every step is done or
  skipped (and no unit the job no longer has is left undone), else needs attention, with one
  ``step-failed:<step>`` finding per step that failed; findings of steps now done are resolved.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from resumable.core import verbs

if TYPE_CHECKING:
    from resumable.core.types import Event

# A step that keeps failing must not sleep for hours between attempts because of doubling.
MAX_DELAY = 3600.0
ITEM_PREFIX = "step-failed:"  # a finding per failed step; a run moved between stores keeps its ids
FAILED_STATES = frozenset({"failed", "timeout"})
FINISHED_STATES = frozenset({"done", "skipped"})
WAITING_STATES = frozenset({"waiting", "pending"})  # not started (the local runner says waiting)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    retries: int = 0  # extra attempts after the first
    backoff: float = 1.0  # base: the wait before retry k is base * 2^(k-1)
    jitter: float = 0.1  # up to this fraction is added, so parallel retries do not stampede

    def should_retry(self, failed_attempts: int) -> bool:
        return failed_attempts <= self.retries

    def delay(self, retry: int, rand: Callable[[], float]) -> float:
        """Seconds to wait before retry number ``retry`` (1 for the first retry).

        ``rand`` returns a float in [0, 1); jitter only lengthens the wait, so ``BASE * 2^(k-1)``
        stays the minimum a user can rely on."""
        if retry < 1:
            return 0.0
        # The exponent is capped (a float overflows at 2^1024): any backoff that matters reaches
        # MAX_DELAY long before, so any retry count gives a bounded wait.
        base = min(self.backoff * (2.0 ** min(retry - 1, 1000)), MAX_DELAY)
        return base * (1.0 + self.jitter * rand())


@dataclass(frozen=True, slots=True)
class JobRules:
    """The job's options that decide what a failure does to the run."""

    keep_going: bool = False
    max_failures: int | None = None

    @classmethod
    def of(cls, options: Mapping[str, Any] | None) -> JobRules:
        """From a stored job's options (``{"keep_going": ..., "max_failures": ...}``)."""
        options = options or {}
        cap = options.get("max_failures")
        return cls(bool(options.get("keep_going")), cap if isinstance(cap, int) and not isinstance(cap, bool) else None)

    def stops(self, failed_steps: int) -> bool:
        """Whether a run with this many steps failed for good starts nothing more."""
        return not self.keep_going or (self.max_failures is not None and failed_steps >= self.max_failures)


@dataclass(frozen=True, slots=True)
class Settled:
    """What follows one attempt's outcome, for its step."""

    state: str  # done | pending (handed back, or a retry waiting for ``due``) | failed | timeout
    due: float | None = None  # a retry: when it may start (the clock ``now`` was read from)
    retry_in: float | None = None  # a retry: its backoff, in seconds

    @property
    def failed_for_good(self) -> bool:
        return self.state in FAILED_STATES


def settle(status: str, *, failures: int, retry: RetryPolicy, stopping: bool, now: float,
           rand: Callable[[], float]) -> Settled:
    """The step's next state after an attempt ended ``status`` (done failed timeout interrupted).
    ``failures``: the step's failed attempts, this one included; ``stopping``: the run starts
    nothing new (a retry would be a new start)."""
    if status == "done":
        return Settled("done")
    if status == "interrupted":
        return Settled("pending")
    if not stopping and retry.should_retry(failures):
        delay = retry.delay(failures, rand)
        return Settled("pending", now + delay, delay)
    return Settled(status)


@dataclass(slots=True)
class Blocked:
    """Steps newly dep_blocked by a failure, with the events recording them."""

    steps: dict[str, str] = field(default_factory=dict)  # step -> the root failure
    events: list[Event] = field(default_factory=list)


def block_dependents(failed: str, *, dependents: Mapping[str, Sequence[str]], needs: Mapping[str, Sequence[str]],
                     states: Mapping[str, str], roots: Mapping[str, str] | None = None) -> Blocked:
    """keep-going: every waiting step downstream of ``failed`` (a step failed for good, or itself
    dep_blocked) is dep_blocked on the root failure, each once. ``states`` need only hold the steps
    downstream of ``failed``; ``roots`` maps steps already blocked to their root."""
    root = (roots or {}).get(failed, failed)
    out = Blocked()
    queue = [failed]
    while queue:
        parent = queue.pop()
        for child in dependents.get(parent, ()):
            if child in out.steps or states.get(child) not in WAITING_STATES:
                continue
            out.steps[child] = root
            out.events.append(verbs.unit(child, "dep_blocked", note=f"blocked by {root}",
                                         deps=list(needs.get(child, ())), fields={"blockedBy": root}))
            queue.append(child)
    return out


def dependents_of(needs: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    """Who waits on whom, from each step's needs (in the job's order)."""
    out: dict[str, list[str]] = {}
    for step, wanted in needs.items():
        for need in dict.fromkeys(wanted):
            out.setdefault(need, []).append(step)
    return out


@dataclass(slots=True)
class Decision:
    """What follows an outcome: the step's next state, the steps it blocks, and whether the run
    now stops starting steps. ``events``: what to record besides the outcome itself."""

    settled: Settled
    blocked: Blocked
    stop: bool

    @property
    def events(self) -> list[Event]:
        return self.blocked.events


def decide(step: str, status: str, *, failures: int, retry: RetryPolicy, rules: JobRules, stopping: bool,
           failed_steps: int, dependents: Mapping[str, Sequence[str]], needs: Mapping[str, Sequence[str]],
           states: Mapping[str, str], now: float, rand: Callable[[], float],
           roots: Mapping[str, str] | None = None) -> Decision:
    """The whole rule for one outcome. ``failed_steps``: steps failed for good before this one;
    ``states``: at least the steps downstream of ``step`` (the others are not looked at)."""
    settled = settle(status, failures=failures, retry=retry, stopping=stopping, now=now, rand=rand)
    if not settled.failed_for_good:
        return Decision(settled, Blocked(), stopping)
    blocked = Blocked()
    if rules.keep_going:
        blocked = block_dependents(step, dependents=dependents, needs=needs, states=states, roots=roots)
    return Decision(settled, blocked, stopping or rules.stops(failed_steps + 1))


def needs_unrecorded(unit: object, needs: Sequence[str]) -> bool:
    """Whether a unit that has not started yet lacks its step's needs (``dependsOn``): both stores
    record them before the run starts, so `resume` and `get` never call a waiting step eligible
    before its needs are done. Only waiting units are restated: a finished one keeps its stamps."""
    if not isinstance(unit, dict) or unit.get("status") != "pending":
        return False
    return list(unit.get("dependsOn") or []) != list(needs)


# -- the verdict --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StepEnd:
    """How a step ended, for the verdict: its state, and for a failure what the finding says."""

    state: str
    attempts: int = 0  # attempts made in this session (runner) or since submitted (workers)
    last_exit: int | None = None
    log: str | None = None


@dataclass(slots=True)
class Verdict:
    status: str  # done | needs_attention
    summary: str  # "2 done, 1 failed" (+ ", 1 removed")
    events: list[Event]  # resolve, item, finalize: commit in order
    stale: list[str]  # units the job no longer has that are not done (they keep the run open)

    @property
    def finished(self) -> bool:
        return self.status == "done"

    def refused(self, reason: str) -> list[Event]:
        """The events to record instead when ``finalize done`` was refused (another process changed
        the run meanwhile: an open finding, a unit added): the run needs attention and says why."""
        return [verbs.finalize("needs_attention", f"{self.summary}; {reason}")]


def summary_of(states: Iterable[str], removed: int = 0) -> str:
    """``1 done, 2 skipped`` (+ ``, 1 removed``): the run's result line."""
    counts: dict[str, int] = {}
    for state in states:
        counts[state] = counts.get(state, 0) + 1
    parts = [f"{n} {st}" for st, n in sorted(counts.items())]
    if removed:
        parts.append(f"{removed} removed")
    return ", ".join(parts)


def verdict(ends: Mapping[str, StepEnd], doc: Mapping[str, Any]) -> Verdict:
    """The run's conclusion once nothing runs and nothing more will start: ``ends`` holds every
    step of the job, in its order; ``doc`` is the run's document as it stands."""
    raw_units = doc.get("units")
    units: Mapping[str, Any] = raw_units if isinstance(raw_units, dict) else {}
    open_items = [it for it in (doc.get("openItems") or []) if isinstance(it, dict)]
    ours = {it.get("id") for it in open_items if str(it.get("id", "")).startswith(ITEM_PREFIX)}
    events: list[Event] = []
    resolve = [f"{ITEM_PREFIX}{sid}" for sid, end in ends.items()
               if end.state in FINISHED_STATES and f"{ITEM_PREFIX}{sid}" in ours]
    if resolve:
        events.append(verbs.resolve(resolve))
    # Units the job no longer has are kept, marked removed, and counted apart; while one of them is
    # not done the run cannot honestly be finalized done.
    removed = sum(1 for uid, u in units.items() if uid not in ends and isinstance(u, dict) and u.get("removed") is True)
    summary = summary_of((end.state for end in ends.values()), removed)
    stale = sorted(uid for uid, u in units.items()
                   if uid not in ends and not (isinstance(u, dict) and u.get("status") == "done"))
    if all(end.state in FINISHED_STATES for end in ends.values()) and not stale:
        events.append(verbs.finalize("done", summary))
        return Verdict("done", summary, events, stale)
    items = [{
        "id": f"{ITEM_PREFIX}{sid}", "kind": "step_failed", "step": sid, "status": end.state,
        "attempts": end.attempts, "lastExitCode": end.last_exit, "log": end.log,
        "summary": f"step {sid} {end.state} (exit {end.last_exit})",
    } for sid, end in ends.items() if end.state in FAILED_STATES]
    if items:
        events.append(verbs.item(items))
    events.append(verbs.finalize("needs_attention", summary))
    return Verdict("needs_attention", summary, events, stale)


def interrupted(ends: Mapping[str, StepEnd], doc: Mapping[str, Any]) -> list[Event]:
    """A session stopped by a signal: nothing runs any more, so not "running"; needs_attention is
    live to init and gc alike, so the run is resumed, never re-initialised or archived."""
    return [verbs.finalize("needs_attention", f"interrupted ({verdict(ends, doc).summary})")]


# -- early cutoff ------------------------------------------------------------------------------
#
# Shake's "verifying traces", dune's and Bazel's content cutoff: a step records, with its
# fingerprint, what the steps it needs had made when it started (``needs``: a digest of each
# one's artifacts). A done step whose needs re-run is decided once they are done: it runs again
# only if one of them made something else, by content; needs that re-ran and made the same bytes
# leave it done. A step that declares neither artifacts nor inputs keeps make's rule (a need that
# re-ran re-runs it): it may depend on anything its needs did, and says nothing of what. A need
# that declares no artifacts cannot be compared: its re-run counts as a change.

CUTOFF_REASON = "upstream re-ran, its artifacts unchanged: skip"
KEPT_REASON = "done (what it needs was kept done)"


def artifacts_digest(records: object) -> str | None:
    """One digest of a step's artifacts as its unit records them (``{path: {"sha256": ...}}``);
    None when it declares none, or one is not recorded: nothing to compare."""
    if not isinstance(records, dict) or not records:
        return None
    import hashlib

    parts = []
    for path in sorted(records):
        rec = records[path]
        sha = rec.get("sha256") if isinstance(rec, dict) else None
        if not isinstance(sha, str):
            return None
        parts.append(f"{path}\0{sha}")
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()


def upstream_digests(needs: Iterable[str], artifacts_of: Callable[[str], object]) -> dict[str, str | None]:
    """What a step's needs made, now: ``artifacts_of(need)`` gives a need's artifact records."""
    return {n: artifacts_digest(artifacts_of(n)) for n in needs}


def upstream_record(current: Mapping[str, str | None]) -> dict[str, str]:
    """What a starting step's fingerprint keeps of ``upstream_digests``: the needs that declare
    artifacts (a fan-in over thousands of steps that declare none keeps nothing)."""
    return {n: d for n, d in current.items() if d is not None}


def recorded_upstream(fingerprint: object) -> Mapping[str, Any] | None:
    """The needs' digests a done step's fingerprint recorded (None: recorded before they were)."""
    recorded = fingerprint.get("needs") if isinstance(fingerprint, dict) else None
    return recorded if isinstance(recorded, dict) else None


def can_wait(fingerprint: object, rerunning: Iterable[bool]) -> bool:
    """Whether a done step whose needs re-run may stay done until they are done (and be decided
    then): its fingerprint recorded what its needs made, and each re-running need declares
    artifacts (``rerunning``: whether each does). Otherwise it is invalidated at once."""
    return recorded_upstream(fingerprint) is not None and all(rerunning)


def keeps_done(declares_files: bool, fingerprint: object, current: Mapping[str, str | None],
               reran: Collection[str]) -> bool:
    """The rule, once a waiting step's needs are done: it stays done when every need made what it
    had made when the step last ran (``current``: ``upstream_digests``) and, for a step that
    declares no artifacts or inputs, no need re-ran (``reran``: the needs that ran again)."""
    recorded = recorded_upstream(fingerprint)
    if recorded is None or any(recorded.get(n) != d for n, d in current.items()):
        return False
    if reran and not declares_files:
        return False
    return all(current.get(n) is not None for n in reran)


def kept_reason(reran: Collection[str]) -> str:
    return CUTOFF_REASON if reran else KEPT_REASON


def upstream_changes(fingerprint: object, current: Mapping[str, str | None]) -> list[str]:
    """The needs whose artifacts are not what a done step last ran on; [] when nothing was
    recorded to compare with."""
    recorded = recorded_upstream(fingerprint)
    if recorded is None:
        return []
    return [n for n, d in current.items() if recorded.get(n) != d]


def reran_since(needs: Iterable[str], units: Mapping[str, Any], since: float | None) -> list[str]:
    """The needs whose last attempt started at or after ``since`` (the session's start): those
    that ran again in it (for a store that keeps no other trace of it, the workers')."""
    from resumable.core.stamps import parse_stamp

    out = []
    for n in needs:
        unit = units.get(n)
        attempts = unit.get("attempts") if isinstance(unit, dict) else None
        last = attempts[-1] if isinstance(attempts, list) and attempts else None
        started = parse_stamp(last.get("startedAt")) if isinstance(last, dict) else None
        if since is None or (started is not None and started >= since):
            out.append(n)
    return out
