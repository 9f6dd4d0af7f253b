"""Where a ``--skip-to`` resume should start: the first phase without a trustworthy checkpoint.

A phase is trusted when its newest valid attempt passes ``validate`` (with ``--root``/``--repo``
evidence when given) and was completed no earlier than the trusted checkpoint of the phase before it
(a phase re-done after its successor completed makes that successor stale). Every phase after the
first untrusted one is untrusted too: the pipeline resumes there and redoes the rest.
"""

from __future__ import annotations

import os

import msgspec

from resumable.ledger import checks, layout, store
from resumable.ledger.api import BaseArg, PhasesArg, correlation, schema_of
from resumable.ledger.ids import name_problem, normalize_run_id
from resumable.ledger.model import Schema


class PhaseTrust(msgspec.Struct, frozen=True):
    phase: str
    ordinal: int
    trusted: bool
    reason: str
    attempt_number: int | None = None
    checkpoint_path: str | None = None


class ResumePoint(msgspec.Struct, frozen=True):
    ticket_id: str
    run_id: str
    resume_phase: str | None  # None: every phase has a trusted checkpoint
    phases: tuple[PhaseTrust, ...]
    warnings: tuple[str, ...]
    correlation_id: str
    success: bool = True


def _stamp(f: store.StoredFile) -> str:
    assert f.checkpoint is not None
    return f.checkpoint.timestamp_utc.strftime("%Y-%m-%dT%H:%M:%SZ")


def resume_point(ticket_id: str, run_id: str, *, root: str | os.PathLike[str] | None = None,
                 repos: list[str] | checks.Repos | None = None, base_dir: BaseArg = None,
                 phases: PhasesArg = None, correlation_id: object = None) -> ResumePoint:
    from resumable.errors import InvalidInputError
    from resumable.ledger.model import now_utc

    schema = schema_of(phases)
    problem = name_problem(ticket_id, "ticket_id")
    if problem:
        raise InvalidInputError(problem)
    run = normalize_run_id(run_id)
    runs = store.read_ticket(layout.resolve_base_dir(base_dir), ticket_id, run, schema)
    files = runs[0].files if runs else ()
    repo_set = repos if isinstance(repos, checks.Repos) else checks.Repos.parse(list(repos or ()))
    git_checked: dict[str, bool] = {}
    now = now_utc()
    verdicts: list[PhaseTrust] = []
    warnings: list[str] = []
    resume: str | None = None
    previous: store.StoredFile | None = None
    by_phase: dict[tuple[str, int], list[store.StoredFile]] = {}
    for f in files:
        by_phase.setdefault((f.phase, f.ordinal), []).append(f)
    for spec in schema.phases.phases:
        if resume is not None:
            verdicts.append(PhaseTrust(spec.name, spec.ordinal, False, f"comes after the resume point ({resume})"))
            continue
        mine = by_phase.get((spec.name, spec.ordinal), [])
        valid = max((f for f in mine if f.checkpoint is not None), key=lambda f: f.attempt, default=None)
        for f in mine:
            if f.checkpoint is None and (valid is None or f.attempt > valid.attempt):
                warnings.append(f"Skipped corrupt checkpoint file {f.rel}: {f.problem}")
        verdict = _judge(spec.name, spec.ordinal, mine, valid, previous, root, repo_set, schema, git_checked)
        if valid is not None and valid.checkpoint is not None:
            warnings.extend(f"{valid.rel}: {w}" for w in checks.warnings_of(valid.checkpoint, now))
        verdicts.append(verdict)
        if verdict.trusted:
            previous = valid
        else:
            resume = spec.name
    return ResumePoint(ticket_id, run, resume, tuple(verdicts), tuple(warnings), correlation(correlation_id))


def _judge(phase: str, ordinal: int, mine: list[store.StoredFile], valid: store.StoredFile | None,
           previous: store.StoredFile | None, root: str | os.PathLike[str] | None, repos: checks.Repos,
           schema: Schema, git_checked: dict[str, bool]) -> PhaseTrust:
    if not mine:
        return PhaseTrust(phase, ordinal, False, "no checkpoint")
    if valid is None or valid.checkpoint is None:
        newest = max(mine, key=lambda f: f.attempt)
        return PhaseTrust(phase, ordinal, False, f"no valid checkpoint (newest, a{newest.attempt}: {newest.problem})")
    cp = valid.checkpoint
    n = valid.attempt

    def untrusted(reason: str) -> PhaseTrust:
        return PhaseTrust(phase, ordinal, False, reason, n, valid.rel)

    problems = []
    if root is not None:
        problems.extend(checks.root_problems(cp, os.fspath(root)))
    if repos:
        problems.extend(checks.repo_problems(cp, schema, repos, git_checked))
    if problems:
        return untrusted(f"attempt {n} fails validation: {problems[0]}")
    before = previous.checkpoint if previous is not None else None
    if previous is not None and before is not None and cp.timestamp_utc < before.timestamp_utc:
        return untrusted(f"attempt {n} ({_stamp(valid)}) predates {previous.phase} attempt {previous.attempt} "
                         f"({_stamp(previous)}), which it builds on")
    reason = f"attempt {n} is valid, completed {_stamp(valid)}"
    if previous is not None:
        reason += f", after {previous.phase} attempt {previous.attempt}"
    if root is not None:
        reason += f"; its {len(cp.artifact_paths)} artifact path(s) exist under {os.fspath(root)}"
    if repos:
        reason += "; its commits exist"
    return PhaseTrust(phase, ordinal, True, reason, n, valid.rel)
