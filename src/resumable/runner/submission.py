"""Jobs on workers: ``resumable submit`` records a job as a run in a work-queue store, and
``resumable run JOB --store URL`` is a submit plus one local worker until the run ends, printing
what the local runner prints and ending with its exit codes (0 done, 1 a step failed, 130
interrupted)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import IO, TYPE_CHECKING, Any, TypedDict

from resumable.runner import explain
from resumable.runner.conclude import redact_url, removal_marks, resume_hint
from resumable.runner.display import PlainReporter, fmt_duration, make_reporter
from resumable.runner.fingerprint import fingerprint
from resumable.runner.jobfile import Job, Step
from resumable.runner.options import RunOptions
from resumable.runner.stepspec import StepSpec, to_spec
from resumable.runner.worker import Worker, WorkerOptions, install_signal_handlers
from resumable.runner.workqueue import ClaimLike
from resumable.store import store_url

if TYPE_CHECKING:
    from resumable.core.types import Launch
    from resumable.store.backend import PlanDecision, Submitted


def submit_job(queue: Any, job: Job, *, launch: Launch, force: bool = False, keep_going: bool = False,
               max_failures: int | None = None, work: Job | None = None,
               ) -> tuple[Submitted, dict[str, explain.Decision]]:
    """Record ``job`` as a run (idempotent: a resume when it exists); returns the store's answer
    and the decisions (run or skip, and why), taken on the run's document under its lock.
    ``work``: the job cut down to target steps and what they need (``session.selection``); only
    those are submitted, and the job's other steps keep their units as they stand."""
    decided: dict[str, explain.Decision] = {}
    work = work or job
    steps = [_step_of(s) for s in work.steps]

    def plan(units: Mapping[str, Any]) -> dict[str, PlanDecision]:
        decided.clear()
        decided.update(explain.plan(work, units, force=force))
        for s in steps:
            # A done step waiting for its needs (early cutoff): the claim decides, by core.policy.
            s["spec"]["cutoff"] = decided[s["id"]].cutoff
        return {sid: {"run": d.run, "reason": d.reason, "invalidate": d.invalidate} for sid, d in decided.items()}

    options: dict[str, object] = {"keep_going": keep_going, "max_failures": max_failures, "source": job.source}
    extra: dict[str, object] = {}
    if work is not job:
        by_id = {s.id: s for s in job.steps}
        options["targets"] = True  # the verdict counts the steps left out as the local runner does
        extra = {"units": [s.id for s in job.steps],
                 "held": lambda sid: _step_of(by_id[sid]) if sid in by_id else None}
    out: Submitted = queue.submit(job.name, task=f"resumable run {job.name}", launch=launch, steps=steps,
                                       plan=plan, options=options,
                                       marks=lambda units: removal_marks(job, units), **extra)
    return out, dict(decided)


def _step_of(s: Step) -> SubmittedStep:
    """A step as the store records it: its spec (what a worker runs), fingerprint and needs."""
    return {"id": s.id, "needs": list(s.needs), "spec": to_spec(s) | {"fingerprint": fingerprint(s)},
            "command": s.command_text}


class SubmittedStep(TypedDict):
    """A step as the store records it (``WorkQueue.submit``'s ``steps``)."""

    id: str
    needs: list[str]
    spec: StepSpec
    command: str


class ReporterSink:
    """The worker's events through the local runner's reporter (``resumable run --store``)."""

    def __init__(self, reporter: PlainReporter) -> None:
        self.reporter = reporter

    def started(self, claim: ClaimLike, step: Step) -> None:
        if self.reporter.follower is not None:
            self.reporter.will_log(step.id, claim.n, step.log or claim.log)
        self.reporter.step_started(step, claim.n)

    def finished(self, claim: ClaimLike, step: Step, status: str, duration: float, exit_code: int | None,
                 retry_in: float | None, recorded: bool) -> None:
        if not recorded and status != "interrupted":
            self.reporter.warn(f"the outcome of {step.id} (attempt {claim.n}) was not recorded: its lease was"
                               " taken over by another worker")
            return
        self.reporter.step_finished(step, claim.n, status, duration, exit_code, step.log or claim.log, retry_in)

    def warn(self, message: str) -> None:
        self.reporter.warn(message)

    def tick(self) -> None:
        self.reporter.tick()


class LineSink:
    """One line per step start and finish, naming the run (``resumable worker``)."""

    def __init__(self, out: IO[str] | None = None, err: IO[str] | None = None, quiet: bool = False) -> None:
        self.plain = PlainReporter(out, err, quiet=quiet)

    def started(self, claim: ClaimLike, step: Step) -> None:
        self.plain._p(f"start  {claim.run_id}/{step.id} (attempt {claim.n})")

    def finished(self, claim: ClaimLike, step: Step, status: str, duration: float, exit_code: int | None,
                 retry_in: float | None, recorded: bool) -> None:
        code = "" if status == "done" else f", exit {exit_code}"
        retry = f"; retrying in {retry_in:.1f}s" if retry_in is not None else ""
        fenced = "" if recorded or status == "interrupted" else "; not recorded: the lease was taken over (stale)"
        self.plain._p(f"{status:<6} {claim.run_id}/{step.id} ({fmt_duration(duration)}{code};"
                      f" log {step.log or claim.log}){retry}{fenced}")

    def warn(self, message: str) -> None:
        self.plain.warn(message)

    def tick(self) -> None:
        pass


def launch_of(command: str, args: list[str]) -> Launch:
    """The launch descriptor of ``resumable COMMAND ARGS`` (how ``status --resume`` replays it),
    without a password a ``--store`` URL may carry: the descriptor is stored in the run, where
    anyone who may read the run can read it (give the password in PGPASSWORD or ~/.pgpass)."""
    argv = list(args)
    for i, arg in enumerate(argv[:-1]):
        if arg == "--store":
            argv[i + 1] = redact_url(argv[i + 1])
    return {"kind": "resumable", "argv": ["resumable", command, *argv], "cwd": os.getcwd()}


def run_job_on(job: Job, queue: Any, opts: RunOptions, work: Job | None = None) -> int:
    """``resumable run`` on a work-queue store: submit, then work on this run until it ends.
    ``work``: the target steps and what they need (default the whole job); once all of them are
    done, the session succeeded, though the run stays open while the other steps are not done."""
    work = work or job
    reporter = make_reporter(opts.quiet, verbose=opts.verbose, stream=opts.stream or opts.verbose)
    launch = launch_of("run", opts.replay_args())
    _, decisions = submit_job(queue, job, launch=launch, force=opts.force, keep_going=opts.keep_going,
                              max_failures=opts.max_failures, work=work)
    queue.serve(patience=300.0)  # from now on a server restart is ridden out, as by any worker
    reporter.start(work, decisions, {})
    worker = Worker(queue, WorkerOptions(runs=(job.name,), jobs=opts.jobs, drain_grace=0.0, logs_dir=opts.logs_dir),
                    ReporterSink(reporter))
    restore = install_signal_handlers(worker)
    try:
        code = worker.run()
    finally:
        restore()
        reporter.close()
    if code == 130:
        print(f"{job.name}: interrupted ({queue.step_summary(job.name)})")
        print(f"resume with: {resume_hint(launch, store_url(opts.store))}")
        return 130
    doc = queue.open(job.name).read()
    finished = doc.get("status") == "done" or (work is not job and _all_done(doc, work))
    if not finished and not opts.quiet:
        reporter.failure_tails(sys.stdout)
    print(f"{job.name}: {'done' if finished else 'needs attention'} ({doc.get('result')})")
    if not finished:
        print(f"resume with: {resume_hint(launch, store_url(opts.store))}")
    return 0 if finished else 1


def _all_done(doc: Mapping[str, Any], work: Job) -> bool:
    """Whether every selected step's unit is done (the run concluded: nothing of them runs)."""
    units = doc.get("units")
    if doc.get("status") == "running" or not isinstance(units, dict):
        return False
    return all(isinstance(units.get(s.id), dict) and units[s.id].get("status") == "done" for s in work.steps)
