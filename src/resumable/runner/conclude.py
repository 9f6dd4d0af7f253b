"""The end of a runner session: resolve or open the findings of failed steps, finalize the run,
say what happened and how to resume, and decide the exit code."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from resumable.core import verbs
from resumable.runner.attempt import Outcome
from resumable.runner.jobfile import Job
from resumable.runner.writer import SafeWriter

if TYPE_CHECKING:
    from resumable.core.types import UnitEvent

ITEM_PREFIX = "step-failed:"


def resume_hint(launch: Mapping[str, Any]) -> str:
    cmd = shlex.join(launch["argv"])
    cwd = launch.get("cwd")
    return f"cd {shlex.quote(cwd)} && {cmd}" if cwd and cwd != os.getcwd() else cmd


def removed_count(units: Mapping[str, Any], step_ids: set[str] | frozenset[str]) -> int:
    """Units marked removed that the job still does not have (status counts these apart)."""
    return sum(1 for uid, u in units.items()
               if uid not in step_ids and isinstance(u, dict) and u.get("removed") is True)


def removal_marks(job: Job, units: Mapping[str, Any]) -> list[UnitEvent]:
    """Events marking the units of steps the job file no longer has ``removed`` (status shows them
    apart and counts them in no done/total, as the runner's summary does), and clearing the mark of
    a step that came back. A unit keeps its state and stamps either way: a step that comes back
    done, with the same fingerprint, is skipped as done. Pure."""
    from resumable.core.model import UNIT_STATES

    steps = {s.id for s in job.steps}
    out: list[UnitEvent] = []
    for uid, unit in units.items():
        if not isinstance(unit, dict) or unit.get("status") not in UNIT_STATES:
            continue  # malformed: shown as such by status, not restated here
        removed = unit.get("removed") is True
        if (uid not in steps) != removed:
            out.append(verbs.unit(uid, unit["status"], fields={"removed": not removed}))
    return out


def summary_of(counts: Mapping[str, int], removed: int) -> str:
    """``1 done, 2 skipped`` (+ ``, 1 removed``): the runner's summary line and the run's result."""
    parts = [f"{n} {st}" for st, n in sorted(counts.items())]
    if removed:
        parts.append(f"{removed} removed")
    return ", ".join(parts)


def unsaved_hint(writer: SafeWriter) -> str:
    """What to do about writes that were not saved, matching why they were not."""
    if not writer.unsaved():
        # Only refusals (their reasons are on the line before): nothing to free, nothing queued.
        return "re-run the same command once the reason above is dealt with"
    again = "; steps whose completion was not saved will run again"
    if writer.disk_full():
        return f"free disk space and re-run the same command{again}"
    reason = str(writer.last_error) if writer.last_error is not None else "the store could not be written"
    return f"{reason}; re-run the same command{again}"


def conclude(job: Job, writer: SafeWriter, out: Outcome, launch: Mapping[str, Any], reporter: Any,
             *, quiet: bool) -> int:
    doc = writer.doc
    open_items = [it for it in (doc.get("openItems") or []) if isinstance(it, dict)]
    ours = {it.get("id") for it in open_items if str(it.get("id", "")).startswith(ITEM_PREFIX)}
    to_resolve = [f"{ITEM_PREFIX}{sid}" for sid, st in out.states.items()
                  if st in ("done", "skipped") and f"{ITEM_PREFIX}{sid}" in ours]
    if to_resolve:
        writer.resolve(to_resolve)
    counts: dict[str, int] = {}
    for st in out.states.values():
        counts[st] = counts.get(st, 0) + 1
    # Units the job no longer has (a step removed from the job file) are kept, as the seed keeps
    # them, marked removed (session.removal_marks): counted apart here as status counts them.
    step_ids = {s.id for s in job.steps}
    units = doc.get("units") if isinstance(doc.get("units"), dict) else {}
    assert isinstance(units, dict)
    summary = summary_of(counts, removed_count(units, step_ids))

    # While a removed unit is not done the run cannot honestly be finalized done.
    stale = sorted(uid for uid, u in units.items()
                   if uid not in step_ids and not (isinstance(u, dict) and u.get("status") == "done"))
    finished = out.all_done and not stale
    if stale and out.all_done:
        reporter.warn(f"the run has units this job no longer has, not done: {', '.join(stale)}; "
                      "the run stays needs_attention (use --reset to start afresh)")
    refusal: str | None = None
    if out.interrupted:
        # Not "running": nothing runs any more. needs_attention is live to init and gc alike, so
        # the run is resumed, never re-initialised or archived, and status says what to do.
        writer.finalize("needs_attention", f"interrupted ({summary})")
    elif finished:
        dropped = len(writer.dropped)
        writer.finalize("done", summary)
        if len(writer.dropped) > dropped:
            # Refused: another process changed the run meanwhile (an open finding, a unit added).
            # The run is not left "running" with no runner: it needs attention, and says why.
            refusal = writer.dropped.pop().removeprefix("finalize done: ")
            finished = False
            writer.finalize("needs_attention", f"{summary}; {refusal}")
    else:
        items = [{
            "id": f"{ITEM_PREFIX}{sid}", "kind": "step_failed", "step": sid,
            "status": out.states.get(sid), "attempts": out.attempts.get(sid, 0),
            "lastExitCode": out.last_exit.get(sid), "log": out.logs.get(sid),
            "summary": f"step {sid} {out.states.get(sid)} (exit {out.last_exit.get(sid)})",
        } for sid in out.failed]
        if items:
            writer.item(items)
        writer.finalize("needs_attention", summary)
    writer.retry()

    if out.failed and not quiet:
        reporter.failure_tails(sys.stdout)
    status_word = "interrupted" if out.interrupted else ("done" if finished else "needs attention")
    print(f"{job.name}: {status_word} ({summary})")
    if not finished:
        print(f"resume with: {resume_hint(launch)}")
    if refusal is not None:
        print(f"resumable: the run was not finalized done: {refusal}; it needs attention",
              file=sys.stderr)
    unsaved = writer.unsaved()
    if unsaved or writer.dropped:
        lost = [*unsaved, *writer.dropped]
        print(f"resumable: could not save the run's status: {'; '.join(lost)}", file=sys.stderr)
        print(f"resumable: {unsaved_hint(writer)}", file=sys.stderr)
    if out.interrupted:
        return 130
    if not finished or unsaved or writer.dropped:
        return 1
    return 0
