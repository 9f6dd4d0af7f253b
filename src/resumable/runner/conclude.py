"""The end of a runner session: resolve or open the findings of failed steps, finalize the run,
say what happened and how to resume, and decide the exit code."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping
from typing import Any

from resumable.runner.attempt import Outcome
from resumable.runner.jobfile import Job
from resumable.runner.writer import SafeWriter

ITEM_PREFIX = "step-failed:"


def resume_hint(launch: Mapping[str, Any]) -> str:
    cmd = shlex.join(launch["argv"])
    cwd = launch.get("cwd")
    return f"cd {shlex.quote(cwd)} && {cmd}" if cwd and cwd != os.getcwd() else cmd


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
    summary = ", ".join(f"{n} {st}" for st, n in sorted(counts.items()))

    # Units the job no longer has (a step removed from the job file) are kept, as the seed keeps
    # them; but while one is not done the run cannot honestly be finalized done.
    step_ids = {s.id for s in job.steps}
    units = doc.get("units") if isinstance(doc.get("units"), dict) else {}
    assert isinstance(units, dict)
    stale = sorted(uid for uid, u in units.items()
                   if uid not in step_ids and not (isinstance(u, dict) and u.get("status") == "done"))
    finished = out.all_done and not stale
    status_word = "interrupted" if out.interrupted else ("done" if finished else "needs attention")
    if stale and out.all_done:
        reporter.warn(f"the run has units this job no longer has, not done: {', '.join(stale)}; "
                      "the run stays needs_attention (use --reset to start afresh)")
    if out.interrupted:
        # Not "running": nothing runs any more. needs_attention is live to init and gc alike, so
        # the run is resumed, never re-initialised or archived, and status says what to do.
        writer.finalize("needs_attention", f"interrupted ({summary})")
    elif finished:
        writer.finalize("done", summary)
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
    print(f"{job.name}: {status_word} ({summary})")
    if not finished:
        print(f"resume with: {resume_hint(launch)}")
    unsaved = writer.unsaved()
    if unsaved or writer.dropped:
        lost = [*unsaved, *writer.dropped]
        print(f"resumable: could not save the run's status: {'; '.join(lost)}", file=sys.stderr)
        print("resumable: free disk space and re-run the same command; steps whose completion "
              "was not saved will run again", file=sys.stderr)
    if out.interrupted:
        return 130
    if not finished or unsaved or writer.dropped:
        return 1
    return 0
