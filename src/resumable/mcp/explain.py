"""``explain``: what `resumable run` would do with a job file, and why, without running anything.

The decisions are the runner's own (``runner.explain.plan``, the rule the scheduler and
``--dry-run`` use), planned against the server's store, never another one the job file's directory
would lead to. Unlike ``--dry-run`` this writes nothing at all: the job file is parsed afresh (no
parse cache is kept in the store), and no kept answer is recorded.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from resumable.core.model import check_run_id
from resumable.errors import InvalidInputError
from resumable.mcp import answers
from resumable.mcp.answers import clip
from resumable.mcp.bound import BoundStore, bounded, job_file, unit_id

DEFAULT_JOB = "resumable.toml"


def targets_of(targets: object) -> tuple[str, ...]:
    if targets is None:
        return ()
    if not isinstance(targets, list) or len(targets) > 1000:
        raise InvalidInputError("targets must be a list of step ids (at most 1,000)")
    return tuple(unit_id(t) for t in targets)


def load(bound: BoundStore, jobfile: str | None, targets: tuple[str, ...]) -> tuple[Any, Any]:
    """(the job, the part of it the targets select), from a job file below the server's directory."""
    from resumable.runner.jobfile import load_job_file
    from resumable.runner.session import selection

    rel = job_file(jobfile if jobfile is not None else DEFAULT_JOB, bound.root)
    job = load_job_file(os.path.join(bound.root, rel))
    check_run_id(job.name)
    return job, selection(job, targets)


def decisions(bound: BoundStore, job: Any, work: Any) -> Mapping[str, Any]:
    """The runner's decision for each selected step, against the run as the store has it now."""
    from resumable.runner import explain as rules
    from resumable.runner import verdict
    from resumable.runner.session import reconciled_view

    doc: Mapping[str, Any] = bound.backend.open(job.name).load() or {}
    units = doc.get("units") if isinstance(doc.get("units"), dict) else {}
    assert isinstance(units, dict)
    if job.reconcile is not None:
        units = reconciled_view(job, doc, units)
    return rules.plan(work, verdict.smudged(work, units, []), force=False)


def explain(bound: BoundStore, jobfile: str | None = None, step: str | None = None,
            targets: list[str] | None = None, cursor: str | None = None, limit: int = 200) -> dict[str, Any]:
    """Each step's decision (run or skip, and why), a page at a time; with ``step``, that one only."""
    limit = bounded(limit, "limit", 1, 1000)
    chosen = targets_of(targets)
    want = unit_id(step) if step is not None else None
    with bound.lock:
        job, work = load(bound, jobfile, chosen)
        if want is not None:
            job.step(want)  # a step the job does not have: UsageError naming it
        plan = decisions(bound, job, work)
    runs = sum(1 for d in plan.values() if d.run)
    out: dict[str, Any] = {"job": clip(job.source, 500), "run": job.name, "to_run": runs,
                           "to_skip": len(plan) - runs}
    if len(job.steps) != len(work.steps):
        out["not_selected"] = len(job.steps) - len(work.steps)
    if want is not None:
        d = plan.get(want)
        out["steps"] = [{"step": want, "run": d.run, "reason": clip(d.reason, 500)} if d is not None
                        else {"step": want, "run": False, "reason": "not selected by the targets given"}]
        return out
    query = answers.query_key("explain", job=job.source, targets=list(chosen))
    state = answers.read_cursor(cursor, query)
    start = answers.cursor_int(state, "i") if state else 0
    items = list(plan.values())
    page = answers.Page(limit)
    taken, more = answers.fill(page, items[start:], lambda d: {"step": clip(d.step, 256), "run": d.run,
                                                               "reason": clip(d.reason, 300)})
    out["steps"] = page.items
    if more:
        out["next_cursor"] = answers.make_cursor(query, {"i": start + taken})
    return out
