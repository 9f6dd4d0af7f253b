"""Whether a run is up to date with its job as the files are now: what ``resumable run`` (as the
run was launched) would run, and why. ``resumable status`` asks it; it never writes anything.

The kept re-run answer (``runner.verdict``) answers first: when the job file, the run's files and
every input and artifact are as they were when it was kept, the job is up to date at the cost of a
``stat`` per file. Otherwise the job is read (a job file, ``--step`` flags or a Python file, which
is run as ``resumable run`` would run it) and planned against the run's units, as ``--dry-run``
plans it.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from resumable.errors import ResumableError
from resumable.view.status import JobCheck

if TYPE_CHECKING:
    from resumable.runner.options import RunOptions

REASON_LINES = 5  # decision lines shown by status, at most


def absolute(opts: RunOptions, cwd: str) -> RunOptions:
    """The options with their paths taken from the directory the run was launched in."""
    def at(path: str | None) -> str | None:
        return os.path.join(cwd, os.path.expanduser(path)) if path is not None else None

    jobfile = at(opts.jobfile)
    if jobfile is None and not opts.steps:
        from resumable.runner.jobfile import DEFAULT_JOB_FILE
        from resumable.runner.joblocate import find_job_file

        found = find_job_file(DEFAULT_JOB_FILE, cwd) if os.path.isdir(cwd) else None
        jobfile = str(Path(cwd, found)) if found is not None else os.path.join(cwd, DEFAULT_JOB_FILE)
    return replace(opts, jobfile=jobfile, state_dir=at(opts.state_dir), logs_dir=at(opts.logs_dir))


def judge(opts: RunOptions, command: str) -> JobCheck:
    """What ``command`` (the run's resume command) would do now; ``opts`` its options, paths
    absolute (``absolute``). Never raises for a job that cannot be read: says so."""
    if opts.jobfile is not None and not os.path.isfile(opts.jobfile):
        return JobCheck("unknown", command=command,
                        note=f"its job file {opts.jobfile} no longer exists: cannot tell whether it is up to date")
    from resumable.runner import jobpython

    jobpython.forget()
    try:
        kept = _kept(opts)
        if kept is not None:
            return JobCheck("current", 0, kept, command=command)
        return _planned(opts, command)
    except ResumableError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return JobCheck("unknown", command=command, note=f"its job cannot be read: {first}")
    except OSError as exc:
        return JobCheck("unknown", command=command, note=f"its job cannot be read: {exc}")


def _kept(opts: RunOptions) -> int | None:
    """The number of steps, when the kept answer holds (nothing would run); else None."""
    from resumable.runner import verdict

    if not verdict.eligible(opts):
        return None
    found = verdict.find(opts)
    if found is None:
        return None
    try:
        handle = found.backend.open(found.name)
        if not found.current(handle):
            return None
        total = found.doc.get("total")
        return len(found.ids()) if not isinstance(total, int) else total
    finally:
        found.backend.close()


def _planned(opts: RunOptions, command: str) -> JobCheck:
    """The long way: the job read and planned against the run, as ``--dry-run`` does."""
    from resumable.runner import familyview, session

    job = session.load_job(opts)
    work = session.selection(job, opts.targets)
    backend = session.open_backend(opts, job)
    try:
        _, decisions = session.decisions_of(job, work, backend.open(job.name))
    finally:
        backend.close()
    runs = {sid: d for sid, d in decisions.items() if d.run}
    if not runs:
        return JobCheck("current", 0, len(decisions), command=command)
    if familyview.has_families(runs):
        lines = [line for line in familyview.lines(decisions) if not line.startswith("skip")]
    else:
        lines = [d.line() for d in runs.values()]
    return JobCheck("stale", len(runs), len(decisions), tuple(lines[:REASON_LINES]), command=command,
                    more=max(0, len(lines) - REASON_LINES))
