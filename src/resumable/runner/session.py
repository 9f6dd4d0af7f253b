"""One ``resumable run``: find the job and its run, take the runner lease, reap what a dead runner
left, plan, schedule, conclude. ``run(options)`` is the whole lifecycle; the click command and
``resumable.run_job`` only build the options.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from resumable import store
from resumable.core import verbs
from resumable.core.stamps import stamp
from resumable.errors import RefusedError, ResumableError, UsageError
from resumable.runner import explain, process
from resumable.runner.conclude import conclude
from resumable.runner.jobfile import DEFAULT_GRACE, Job, Step, job_from_flags, load_job_file
from resumable.runner.options import RunOptions
from resumable.runner.writer import SafeWriter

if TYPE_CHECKING:
    from resumable.store.backend import Backend, RunHandle, RunnerLease

DEFAULT_JOB_FILE = "resumable.toml"


def load_job(opts: RunOptions) -> Job:
    if opts.steps:
        if opts.jobfile:
            raise UsageError("give either a job file or --step flags, not both")
        if not opts.job:
            raise UsageError("--step needs --job NAME (the run id)")
        return job_from_flags(
            opts.job, opts.steps,
            timeout=opts.timeout, step_timeouts=opts.step_timeouts,
            step_artifacts=opts.step_artifacts, retries=opts.retries or 0,
            backoff=opts.backoff if opts.backoff is not None else 1.0,
            step_logs=opts.step_logs,
            grace=opts.grace if opts.grace is not None else DEFAULT_GRACE,
        )
    for flag, value in (("--step-timeout", opts.step_timeouts), ("--step-artifact", opts.step_artifacts),
                        ("--step-log", opts.step_logs)):
        if value:
            raise UsageError(f"{flag} needs --step flags; in a job file set it on the step")
    job = load_job_file(opts.jobfile or DEFAULT_JOB_FILE, name_override=opts.job)
    # Command-line defaults override the file's, for one invocation.
    over: dict[str, Any] = {}
    for name in ("timeout", "retries", "backoff", "grace"):
        value = getattr(opts, name)
        if value is not None:
            over[name] = value
    if over:
        job = replace(job, steps=tuple(replace(s, **over) for s in job.steps))
    return job


def open_backend(opts: RunOptions, job: Job | None) -> Backend:
    """The store of this job's run: found from the job file's directory (walking up), not from the
    current directory, so the same job finds the same run wherever it is started from."""
    start = job.base_dir if job is not None and not opts.steps else None
    return store.open_backend(opts.state_dir, url=opts.store, start=start)


def run(opts: RunOptions) -> int:
    """Run the job as the options say and return the exit code; raises ResumableError."""
    job: Job | None = None
    name = opts.job
    if not ((opts.status or opts.reset) and opts.job and not opts.steps):
        job = load_job(opts)
        name = job.name
    assert name is not None
    backend = open_backend(opts, job)
    try:
        if opts.status:
            from resumable.view.printer import show_status

            handle = backend.open(name)
            show_status(handle.read(), handle.location)
            return 0
        if opts.reset:
            return reset(backend, name, quiet=opts.quiet, dry_run=opts.dry_run)
        assert job is not None
        handle = backend.open(name)
        if opts.explain or opts.dry_run:
            doc = handle.load() or {}
            units = doc.get("units") if isinstance(doc.get("units"), dict) else {}
            assert isinstance(units, dict)
            decisions = explain.plan(job, units, force=opts.force)
            if opts.explain:
                print(decisions[job.step(opts.explain).id].line())
                return 0
            for d in decisions.values():
                print(d.line())
            n = sum(d.run for d in decisions.values())
            print(f"{n} to run, {len(decisions) - n} to skip (dry run: nothing executed or written)")
            return 0
        if callable(getattr(backend, "submit", None)):  # a work-queue store: steps run on workers
            from resumable.runner.submission import run_job_on
            return run_job_on(job, backend, opts)
        return execute(job, backend, handle, opts)
    finally:
        backend.close()


def reset(backend: Backend, run_id: str, *, quiet: bool, dry_run: bool = False) -> int:
    """Delete the run's state and logs, holding the runner lease for the whole reset: a runner
    starting meanwhile is refused rather than writing into files being deleted."""
    if dry_run:
        print(f"reset {run_id}: would delete its state and logs (dry run: nothing deleted)")
        return 0
    lease = backend.lease(run_id)
    lease.acquire()  # refuses (exit 2) while a runner holds the run
    try:
        # A dead runner's leftover steps would otherwise outlive the state that tracked them.
        reap_leftovers(lease, warn=None)
        removed = backend.delete(run_id)
    finally:
        lease.release()
    if not quiet:
        print(f"reset {run_id}: " + (", ".join(removed) if removed else "no state to delete"))
    return 0


def reap_leftovers(lease: RunnerLease, warn: Any) -> None:
    """Stop every process a dead runner left, before anything else runs: a step's next attempt
    must never overlap an earlier one. Refused when some cannot be stopped."""
    leftovers = lease.leftovers()
    if not leftovers:
        return
    gone, alive = process.reap(leftovers)
    lease.reaped(gone)
    if alive:
        raise RefusedError(
            f"processes a previous runner started are still alive and could not be stopped"
            f" (pids {', '.join(map(str, alive))}): stop them, then re-run")
    if warn is not None:
        warn(f"stopped the leftover processes of {len(gone)} step(s) of a dead runner")


def execute(job: Job, backend: Backend, handle: RunHandle, opts: RunOptions) -> int:
    from resumable.runner.display import make_reporter
    from resumable.runner.scheduler import Options, Scheduler, install_signal_handlers, next_attempt_number

    reporter = make_reporter(opts.quiet, verbose=opts.verbose)
    lease = backend.lease(job.name)
    lease.acquire()  # refuses (exit 2) when another runner is live
    try:
        reap_leftovers(lease, reporter.warn)
        launch = {"kind": "resumable", "argv": ["resumable", "run", *opts.replay_args()], "cwd": os.getcwd()}
        writer = SafeWriter(handle, reporter.warn, reopen=lambda: backend.open(job.name))
        if not handle.exists():
            writer.write("init", [verbs.init(f"resumable run {job.name}", job.name,
                                             units=[s.id for s in job.steps], launch=launch)])
        writer.write("begin", [verbs.begin(launch)])
        units = _units(writer.doc)
        now = stamp(time.time(), ms=True)
        # A unit still in_progress belongs to a runner that died (we hold the lease and reaped its
        # processes): its attempt counts, and is closed as interrupted before the step runs again.
        for sid, u in list(units.items()):
            if isinstance(u, dict) and u.get("status") == "in_progress":
                n = next_attempt_number(u) - 1
                att = {"n": n, "status": "interrupted", "finishedAt": now} if n > 0 else None
                writer.unit(sid, "interrupted", note="runner died during this step", attempt=att)
        units = _units(writer.doc) or units
        decisions = explain.plan(job, units, force=opts.force)
        for s in job.steps:
            d = decisions[s.id]
            if d.invalidate:
                writer.invalidate(s.id, d.reason)
            elif s.id not in units:
                writer.unit(s.id, "pending", deps=list(s.needs), fields={"command": s.command_text})

        logs_dir = os.path.abspath(opts.logs_dir) if opts.logs_dir else handle.log_dir()

        def log_path(step: Step, n: int) -> str:
            return step.log or os.path.join(logs_dir, f"{step.id}.{n}.log")

        sched = Scheduler(
            job, writer, units, decisions,
            Options(jobs=opts.jobs, keep_going=opts.keep_going, max_failures=opts.max_failures,
                    force=opts.force),
            spawner=process.spawn, reporter=reporter, log_path=log_path, groups=lease,
        )
        reporter.start(job, decisions, _estimates(units))
        restore = install_signal_handlers(sched)
        try:
            out = sched.run()
        finally:
            restore()
            reporter.close()
        code = conclude(job, writer, out, launch, reporter, quiet=opts.quiet)
        try:
            # Large runs refresh the snapshot on a budget: leave it exact for `cat` and `jq`.
            writer.store.close()
        except (ResumableError, OSError):
            pass
        return code
    finally:
        lease.release()


def _units(doc: Mapping[str, Any]) -> dict[str, Any]:
    got = doc.get("units")
    return got if isinstance(got, dict) else {}


def _estimates(units: Mapping[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for sid, u in units.items():
        atts = u.get("attempts") if isinstance(u, dict) else None
        if isinstance(atts, list):
            ds = [float(a["duration"]) for a in atts
                  if isinstance(a, dict) and a.get("status") == "done"
                  and isinstance(a.get("duration"), (int, float))]
            if ds:
                out[sid] = float(ds[-1])
    return out
