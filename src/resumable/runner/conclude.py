"""The end of a runner session: resolve or open the findings of failed steps, finalize the run,
say what happened and how to resume, and decide the exit code."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from resumable.core import policy, verbs
from resumable.runner.attempt import Outcome
from resumable.runner.jobfile import Job
from resumable.runner.writer import SafeWriter

if TYPE_CHECKING:
    from resumable.core.types import Event, UnitEvent

ITEM_PREFIX = policy.ITEM_PREFIX


def resume_hint(launch: Mapping[str, Any], store: str | None = None) -> str:
    """The command that resumes the run, pasteable: quoted, in its directory, and naming the
    PostgreSQL store (``store``: the URL in effect, without its password) when the launch did not
    name it (it came from RESUMABLE_STORE, which the reader's shell may not have)."""
    argv = list(launch["argv"])
    if store is not None and "--store" not in argv:
        argv += ["--store", redact_url(store)]
    cmd = shlex.join(argv)
    cwd = launch.get("cwd")
    return f"cd {shlex.quote(cwd)} && {cmd}" if cwd and cwd != os.getcwd() else cmd


def redact_url(url: str) -> str:
    """``url`` without its password (give it in PGPASSWORD or ~/.pgpass): for what is stored or printed."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        host = f"{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}"
        return urlunsplit(parts._replace(netloc=f"{parts.username or ''}@{host}"))
    except ValueError:
        return url


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


summary_of = policy.summary_of


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


def ends_of(job: Job, out: Outcome, doc: Mapping[str, Any],
            selected: Collection[str] | None = None) -> dict[str, policy.StepEnd]:
    """How each step of the job ended in this session, for ``policy.verdict``. A step left out
    of the ``selected`` ones (the targets and what they need) ends as its unit stands: skipped
    when done, else ``not selected``."""
    units = doc.get("units") if isinstance(doc.get("units"), dict) else {}
    assert isinstance(units, dict)
    ends = {}
    for step in job.steps:
        sid = step.id
        unit = units.get(sid)
        if selected is not None and sid not in selected:
            done = isinstance(unit, dict) and unit.get("status") == "done"
            ends[sid] = policy.StepEnd("skipped" if done else "not selected")
            continue
        state = out.states.get(sid, "pending")
        log = out.logs.get(sid) or (unit.get("log") if isinstance(unit, dict) else None)
        ends[sid] = policy.StepEnd(state, out.attempts.get(sid, 0), out.last_exit.get(sid), log)
    return ends


def _write_each(writer: SafeWriter, events: list[Event]) -> None:
    """Each event a write of its own, as the steps' writes are: a refused finalize leaves the
    resolved findings resolved."""
    for event in events:
        if event["t"] == "finalize":
            writer.finalize(event["status"], event.get("result"))
        elif event["t"] == "item":
            writer.item(event["items"])
        elif event["t"] == "resolve":
            writer.resolve(event["ids"])
        else:
            writer.write(event["t"], [event])


def conclude(job: Job, writer: SafeWriter, out: Outcome, launch: Mapping[str, Any], reporter: Any,
             *, quiet: bool, selected: Collection[str] | None = None) -> int:
    """``selected``: the steps of a run of targets (they and what they need): all of them done,
    the session succeeded, though the run stays open while the other steps are not done."""
    ends = ends_of(job, out, writer.doc, selected)
    verdict = policy.verdict(ends, writer.doc)
    summary = verdict.summary
    finished = verdict.finished and not out.interrupted
    if selected is not None and not out.interrupted:
        finished = finished or all(ends[sid].state in policy.FINISHED_STATES for sid in selected)
    if verdict.stale and all(e.state in policy.FINISHED_STATES for e in ends.values()):
        reporter.warn(f"the run has units this job no longer has, not done: {', '.join(verdict.stale)}; "
                      "the run stays needs_attention (use --reset to start afresh)")
    refusal: str | None = None
    if out.interrupted:
        _write_each(writer, [e for e in verdict.events if e.get("t") == "resolve"])
        _write_each(writer, policy.interrupted(ends, writer.doc))
    else:
        dropped = len(writer.dropped)
        _write_each(writer, verdict.events)
        if verdict.finished and len(writer.dropped) > dropped:
            # Refused: another process changed the run meanwhile (an open finding, a unit added).
            # The run is not left "running" with no runner: it needs attention, and says why.
            refusal = writer.dropped.pop().removeprefix("finalize done: ")
            finished = False
            _write_each(writer, verdict.refused(refusal))
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
