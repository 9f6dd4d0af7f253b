"""Why a step runs or is skipped: the one skip rule, shared by the scheduler, --dry-run and --explain.

A step is skipped only when its unit is ``done``, its fingerprint is unchanged, every artifact is
intact, and no step it needs re-runs. Every other case gets a reason a person can act on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from resumable.core import policy
from resumable.runner.fingerprint import changes_between, check_artifacts, done_and_current, fingerprint, unchanged
from resumable.runner.inputs import InputFile
from resumable.runner.jobfile import Job, Step

if TYPE_CHECKING:
    from resumable.core.types import Fingerprint

INTEGRATED = "reconciled-from-trailer:"  # a unit marked done from an integrated commit


# Not frozen (never changed once made, all the same): a re-run of a 100,000-step job makes one per
# step, and a frozen dataclass's __init__ costs several times a plain one's.
@dataclass(slots=True)
class Decision:
    step: str
    run: bool
    reason: str
    invalidate: bool = False  # the unit is done and must be invalidated (explicitly) before re-running
    # A skipped step whose inputs were touched but hold the same content: its fingerprint with the
    # files' new size, mtime and inode, to store, so the next run need not hash them again.
    refresh: Fingerprint | None = None
    # Runs only because a need re-runs, and may be cut off early (``core.policy.cut_off``): decided
    # again once its needs are done, and invalidated only then, if it does run.
    cutoff: bool = False

    def line(self) -> str:
        return f"{'run ' if self.run else 'skip'}  {self.step}: {self.reason}"


def _last_exit(unit: Mapping[str, Any]) -> object:
    code = unit.get("lastExitCode")
    if code is None:
        attempts = unit.get("attempts")
        if isinstance(attempts, list) and attempts and isinstance(attempts[-1], Mapping):
            code = attempts[-1].get("exitCode")
    return code


Upstream = Callable[[], Mapping[str, "str | None"]]  # what a step's needs made, now (policy.upstream_digests)


def decide(step: Step, unit: object, *, force: bool, upstream_runs: list[str],
           files: Sequence[InputFile] | None = None, upstream: Upstream | None = None,
           cutoff_ok: bool = False) -> Decision:
    """The decision for one step, given its stored unit (anything, null-safe), the needs that
    will run in this invocation and the files its inputs named a moment ago (None: look now).
    ``upstream``: the digests of what its needs made (for early cutoff); ``cutoff_ok``: every
    need that re-runs declares artifacts (so whether it made the same can be known)."""
    # dict, not Mapping: documents are plain JSON objects, and an ABC check per step adds up.
    u: Mapping[str, Any] = unit if isinstance(unit, dict) else {}
    status = u.get("status") if u else None
    done = status == "done"
    if done and not force and not upstream_runs and unchanged(step, u.get("fingerprint"), files):
        # The common case of a re-run, first and fast: unchanged, intact, nothing upstream.
        art = check_artifacts(step, u.get("artifacts"))
        if not art.ok:
            return Decision(step.id, True, art.reason, invalidate=True)
        return _upstream_check(step, u.get("fingerprint"), upstream) or Decision(step.id, False, "done")
    if force:
        return Decision(step.id, True, "forced", invalidate=done)
    if not u or status is None:
        return Decision(step.id, True, "never ran")
    if status == "failed":
        return Decision(step.id, True, f"failed last time (exit code {_last_exit(u)})")
    if status == "timeout":
        return Decision(step.id, True, "timed out last time")
    if status in ("interrupted", "in_progress"):
        return Decision(step.id, True, "interrupted last time")
    if status == "dep_blocked":
        return Decision(step.id, True, "was blocked by a failed step last time")
    invs = u.get("invalidations")
    if status == "pending" and isinstance(invs, list) and invs and isinstance(invs[-1], Mapping):
        # Invalidated by an earlier runner that stopped before re-running it.
        return Decision(step.id, True, str(invs[-1].get("reason") or "invalidated"))
    if not done:
        return Decision(step.id, True, "never ran" if status == "pending" else f"not done ({status})")
    note = u.get("note")
    if u.get("fingerprint") is None and isinstance(note, str) and note.startswith(INTEGRATED):
        # Done by reconciliation ([job] reconcile): git holds the proof, not a fingerprint.
        return Decision(step.id, False, f"integrated in {note[len(INTEGRATED):]}")
    stored = u.get("fingerprint")
    now = fingerprint(step, stored if isinstance(stored, dict) else None, files)
    changes = changes_between(stored, now)
    if changes:
        return Decision(step.id, True, ", ".join(changes), invalidate=True)
    art = check_artifacts(step, u.get("artifacts"))
    if not art.ok:
        return Decision(step.id, True, art.reason, invalidate=True)
    if upstream_runs:
        reason = f"upstream re-runs: {', '.join(upstream_runs)}"
        if policy.can_wait(stored, [cutoff_ok]):
            return Decision(step.id, True, f"{reason} (kept done if what it made comes out the same)", cutoff=True)
        return Decision(step.id, True, reason, invalidate=True)
    touched = step.inputs and isinstance(stored, dict) and now.get("inputs") != stored.get("inputs")
    return _upstream_check(step, stored, upstream) or Decision(step.id, False, "done",
                                                               refresh=now if touched else None)


def _upstream_check(step: Step, stored: object, upstream: Upstream | None) -> Decision | None:
    """A done step none of whose needs re-runs: run it if one of them made something else since it
    ran (a session that stopped between the two, an artifact changed by hand)."""
    if upstream is None or not step.needs or not policy.recorded_upstream(stored):
        return None  # nothing recorded to compare with (its needs declare no artifacts): no cost
    changed = policy.upstream_changes(stored, upstream())
    if not changed:
        return None
    return Decision(step.id, True, f"upstream artifacts changed: {', '.join(changed)}", invalidate=True)


def upstream_of(units: Mapping[str, Any]) -> Callable[[Sequence[str]], dict[str, str | None]]:
    """``made(needs)``: the digests of what those steps made, from their units (each computed once)."""
    memo: dict[str, str | None] = {}

    def artifacts_of(sid: str) -> object:
        unit = units.get(sid)
        return unit.get("artifacts") if isinstance(unit, dict) else None

    def made(needs: Sequence[str]) -> dict[str, str | None]:
        for n in needs:
            if n not in memo:
                memo[n] = policy.artifacts_digest(artifacts_of(n))
        return {n: memo[n] for n in needs}

    return made


def plan(job: Job, units: Mapping[str, Any], *, force: bool) -> dict[str, Decision]:
    """Decisions for every step, in the job's order, each after its needs' (the job is acyclic)."""
    out: dict[str, Decision] = {}
    files = job.input_files
    if not any(s.needs for s in job.steps):
        current = done_and_current(job.steps, units) if not force else [False] * len(job.steps)
        for step, ok in zip(job.steps, current, strict=True):
            if ok:  # a re-run's common case, decided in a few compares
                out[step.id] = Decision(step.id, False, "done")
            else:
                out[step.id] = decide(step, units.get(step.id), force=force, upstream_runs=[],
                                      files=files.get(step.id))
        return out
    from resumable.core.plan import topological_order

    order = topological_order({s.id: s.needs for s in job.steps})
    by_id = {s.id: s for s in job.steps}
    made = upstream_of(units)
    for sid in order:
        step = by_id[sid]
        upstream = [d for d in step.needs if out[d].run]
        out[sid] = decide(step, units.get(sid), force=force, upstream_runs=upstream, files=files.get(sid),
                          upstream=lambda step=step: made(step.needs),  # type: ignore[misc]
                          cutoff_ok=all(by_id[d].artifacts for d in upstream))
    # Report in the job's own order, which is what the user wrote.
    return {s.id: out[s.id] for s in job.steps}
