"""One ``resumable run``: find the job and its run, take the runner lease, reap what a dead runner
left, plan, schedule, conclude. ``run(options)`` is the whole lifecycle; the click command and
``resumable.run_job`` only build the options.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from resumable import store
from resumable.core import policy, verbs
from resumable.core.instance import family_of
from resumable.core.stamps import stamp
from resumable.errors import RefusedError, ResumableError, UsageError
from resumable.runner import explain, familyview, process
from resumable.runner.conclude import conclude, removal_marks, removed_count, summary_of
from resumable.runner.jobfile import DEFAULT_GRACE, DEFAULT_JOB_FILE, Job, Step, load_job_file
from resumable.runner.jobflags import job_from_flags
from resumable.runner.options import RunOptions
from resumable.runner.writer import SafeWriter

if TYPE_CHECKING:
    from resumable.core.types import Event, Launch
    from resumable.store.backend import Backend, RunHandle, RunnerLease


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
    if opts.jobfile:
        path: str | Path = opts.jobfile
    else:
        from resumable.runner.joblocate import find_job_file

        found = find_job_file(DEFAULT_JOB_FILE)
        if found is None:
            raise UsageError(f"no job file {DEFAULT_JOB_FILE!r} here or in a parent directory; write one (the"
                             " format is in the runner's guide, docs/runner.md) or pass --step ID:COMMAND")
        path = found
    job = _parsed(opts, path)
    # Command-line defaults override the file's, for one invocation.
    over: dict[str, Any] = {}
    for name in ("timeout", "retries", "backoff", "grace"):
        value = getattr(opts, name)
        if value is not None:
            over[name] = value
    if over:
        job = replace(job, steps=tuple(replace(s, **over) for s in job.steps))
    return job


def _parsed(opts: RunOptions, path: str | Path) -> Job:
    """The job file's job: parsed once, then read from the runs directory's cache while the file is
    unchanged (``runner.jobcache``); a database store keeps no cache (parsed by each runner)."""
    from resumable.runner import jobcache

    if opts.state_dir is None and store.store_url(opts.store) is not None:
        jobcache.forget()
        return load_job_file(path, name_override=opts.job)

    return jobcache.load(path, opts.job, lambda base: store.open_backend(opts.state_dir, start=base))


def open_backend(opts: RunOptions, job: Job | None) -> Backend:
    """The store of this job's run: found from the job file's directory (walking up), not from the
    current directory, so the same job finds the same run wherever it is started from."""
    start = job.base_dir if job is not None and not opts.steps else None
    return store.open_backend(opts.state_dir, url=opts.store, start=start)


def run(opts: RunOptions, *, keep_built: bool = False) -> int:
    """Run the job as the options say and return the exit code; raises ResumableError.
    ``keep_built``: a Python job already built (``Job.run``) is not built again."""
    import gc

    # A big job and its run are millions of objects that live as long as the runner: the cyclic
    # collector would walk them over and over while they are built (most of the loading time of a
    # 100,000-step run). Collection is off while loading, and what was loaded is frozen (never
    # walked again) before the steps run; both are undone on the way out (run_job may be called
    # from a long-lived program).
    from resumable.runner import jobpython

    if not keep_built:
        jobpython.forget()  # a Python job file runs once per invocation: this one
    enabled = gc.isenabled()
    gc.disable()
    try:
        code = _run(opts)
        from resumable.runner import jobcache

        jobcache.keep()  # the run went ahead: its parsed job file may be kept
        return code
    finally:
        if gc.get_freeze_count():
            gc.unfreeze()
        if enabled:
            gc.enable()


def settle_memory() -> None:
    """Everything loaded so far lives for the whole run: freeze it, then collect as usual."""
    import gc

    gc.freeze()
    gc.enable()


def _run(opts: RunOptions) -> int:
    from resumable.runner import verdict

    changed: list[str] = []
    if verdict.eligible(opts):
        code, changed = kept_answer(opts)
        if code is not None:
            return code
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
        work = selection(job, opts.targets)
        if opts.explain or opts.dry_run:
            return preview(job, work, handle, opts, backend, changed)
        from resumable.store.backend import WorkQueue

        if isinstance(backend, WorkQueue):  # a store whose steps run on workers
            from resumable.runner.submission import run_job_on
            return run_job_on(job, backend, opts, work)
        return execute(job, backend, handle, opts, work, changed)
    finally:
        backend.close()


def kept_answer(opts: RunOptions) -> tuple[int | None, list[str]]:
    """A re-run (or --dry-run) with nothing to do, answered as the last one was when nothing it
    depends on changed (``runner.verdict``): (the exit code, or None: take the long way; the
    files whose content changed under the stat kept, which the long way must hash)."""
    from resumable.runner import verdict

    found = verdict.find(opts)
    if found is None:
        return None, []
    try:
        if opts.dry_run:
            return verdict.answer(found, opts, None), found.changed
        lease = found.backend.lease(found.name)
        lease.acquire()  # refuses (exit 2) when another runner is live, as the long way does
        try:
            reap_leftovers(lease, warn=lambda text: print(f"warning: {text}", file=sys.stderr))
            return verdict.answer(found, opts, launch_of(opts)), found.changed
        finally:
            lease.release()
    finally:
        found.backend.close()


def launch_of(opts: RunOptions) -> Launch:
    return {"kind": "resumable", "argv": ["resumable", "run", *opts.replay_args()], "cwd": os.getcwd()}


def selection(job: Job, targets: tuple[str, ...]) -> Job:
    """The job cut down to the target steps and everything they need (the whole job without
    targets); a family's name stands for every instance of it. A target the job does not have
    is refused, with the closest id."""
    if not targets:
        return job
    from resumable.core.plan import needed_by

    wanted = expand_targets(job, targets)
    keep = needed_by({s.id: s.needs for s in job.steps}, wanted)
    return replace(job, steps=tuple(s for s in job.steps if s.id in keep))


def expand_targets(job: Job, targets: tuple[str, ...]) -> tuple[str, ...]:
    """The step ids the targets name: a step or an instance itself, a family every instance."""
    from resumable.runner.jobfile import did_you_mean

    ids = [s.id for s in job.steps]
    known = set(ids)
    families: dict[str, list[str]] = {}
    for sid in ids:
        fam = family_of(sid)
        if fam is not None:
            families.setdefault(fam, []).append(sid)
    out: list[str] = []
    for t in targets:
        if t in known:
            out.append(t)
        elif t in families:
            out.extend(families[t])
        else:
            raise UsageError(f"job {job.name!r} has no step {t!r}{did_you_mean(t, [*families, *ids])}; its steps"
                             " are listed by `resumable run --dry-run`")
    return tuple(dict.fromkeys(out))


def preview(job: Job, work: Job, handle: RunHandle, opts: RunOptions, backend: Backend | None = None,
            changed: list[str] | None = None) -> int:
    """--dry-run and --explain: the decisions, printed; nothing executed or written (but the
    answer of a dry run with nothing to do, kept for the next one: ``runner.verdict``).
    ``changed``: files to hash rather than trust by their stat (``verdict.smudged``)."""
    from resumable.core.text import escape_controls
    from resumable.runner import verdict

    before = verdict.run_files(handle)
    units, decisions = decisions_of(job, work, handle, force=opts.force, changed=changed)
    if opts.explain:
        print("\n".join(map(escape_controls, explained(job, opts, decisions))))
        return 0
    # Reasons carry file names (inputs, artifacts): data, escaped. One write for all the
    # lines: a 100,000-step plan prints in a blink. A family of steps is a line (-v: a line
    # per instance).
    if opts.verbose or not familyview.has_families(decisions):
        lines = [d.line() for d in decisions.values()]
    else:
        lines = familyview.lines(decisions)
    n = sum(d.run for d in decisions.values())
    others = len(job.steps) - len(work.steps)
    rest = f", {others} not selected" if others else ""
    lines.append(f"{n} to run, {len(decisions) - n} to skip{rest} (dry run: nothing executed or written)")
    sys.stdout.write("\n".join(map(escape_controls, lines)) + "\n")
    if n == 0 and backend is not None:
        verdict.keep(job, work, opts, backend, handle, units, decisions, before)
    return 0


def decisions_of(job: Job, work: Job, handle: RunHandle, *, force: bool = False, changed: list[str] | None = None
                 ) -> tuple[dict[str, Any], dict[str, explain.Decision]]:
    """(the run's units, as a reconcile would leave them; the decision for each step of ``work``):
    what --dry-run, --explain and ``status`` print, read without writing anything. ``changed``:
    files to hash rather than trust by their stat (``verdict.smudged``)."""
    from resumable.runner import verdict

    doc: Mapping[str, Any] = handle.load() or {}
    units = doc.get("units") if isinstance(doc.get("units"), dict) else {}
    assert isinstance(units, dict)
    if job.reconcile is not None:
        units = reconciled_view(job, doc, units)
    return units, explain.plan(work, verdict.smudged(work, units, changed or []), force=force)


def explained(job: Job, opts: RunOptions, decisions: Mapping[str, explain.Decision]) -> list[str]:
    """``--explain STEP``: why it runs or is skipped; for a family, its line and each instance that
    runs."""
    assert opts.explain is not None
    if opts.explain not in decisions and any(family_of(sid) == opts.explain for sid in decisions):
        return familyview.explain_family(opts.explain, decisions)
    (step,) = expand_targets(job, (opts.explain,))
    d = decisions.get(step)
    return [d.line() if d is not None else f"skip  {step}: not selected (not needed by {', '.join(opts.targets)})"]


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
    must never overlap an earlier one. Refused when some cannot be stopped.

    The lease keeps the leftovers until ``reaped`` says they are gone, so a runner killed or
    interrupted (Ctrl-C) while it waits out the grace period leaves them to the next runner, and
    nothing is started here before every one of them is proven gone. Every earlier runner is among
    them (whatever carries its secret), however it ended."""
    leftovers = lease.leftovers()
    if not leftovers:
        return
    stopped: list[int] = []
    gone, alive = process.reap(leftovers, stopped=stopped)
    lease.reaped(gone)
    if alive:
        raise RefusedError(
            f"processes a previous runner started are still alive and could not be stopped"
            f" (pids {', '.join(map(str, alive))}): stop them, then re-run")
    if warn is not None and stopped:
        warn(f"stopped {len(stopped)} leftover process(es) that an earlier runner's steps left running"
             f" (pids {', '.join(map(str, stopped[:10]))}{' …' if len(stopped) > 10 else ''})")


def execute(job: Job, backend: Backend, handle: RunHandle, opts: RunOptions, work: Job | None = None,
            changed: list[str] | None = None) -> int:
    """Run ``work`` (the job's selected steps; default all of them) under the runner lease.
    ``changed``: files to hash rather than trust by their stat (``verdict.smudged``)."""
    from resumable.runner.display import make_reporter

    work = work or job
    reporter = make_reporter(opts.quiet, verbose=opts.verbose, stream=opts.stream or opts.verbose)
    lease = backend.lease(job.name)
    lease.acquire()  # refuses (exit 2) when another runner is live
    try:
        reap_leftovers(lease, reporter.warn)
        launch = launch_of(opts)
        from resumable.runner import verdict

        before = verdict.run_files(handle)
        writer = SafeWriter(handle, reporter.warn, reopen=lambda: backend.open(job.name))
        if not handle.exists():
            writer.write("init", [verbs.init(f"resumable run {job.name}", job.name,
                                             units=[s.id for s in job.steps], launch=launch)])
        doc = writer.doc
        units = _units(doc)
        closing = close_dead_attempts(writer, units)
        if closing:
            units = _units(writer.doc) or units
        if job.reconcile is not None and reconcile(job, writer, doc, reporter):
            units = _units(writer.doc) or units
        decisions = explain.plan(work, verdict.smudged(work, units, changed or []), force=opts.force)
        marks = removal_marks(job, units)
        # Inputs touched with their content unchanged: their new stats are stored (not hashed again).
        refresh: list[Event] = [verbs.unit(sid, "done", fields={"fingerprint": d.refresh})
                                for sid, d in decisions.items() if d.refresh is not None]
        if not closing and not marks and nothing_to_do(work, doc, decisions, launch):
            # As make with nothing to do: no write at all (a 100,000-step run would otherwise
            # rewrite its whole snapshot to record that nothing happened).
            if refresh:
                writer.write(f"{len(refresh)} step(s) with touched inputs", refresh, lazy=True)
            reporter.start(work, decisions, {})
            reporter.close()
            removed = removed_count(units, {s.id for s in job.steps})
            summary = f"{job.name}: done ({summary_of(['skipped'] * len(decisions), removed)})"
            print(summary)
            if not refresh:
                verdict.keep(job, work, opts, backend, handle, units, decisions, before, launch, summary)
            return 0
        writer.begin(launch)
        from resumable.runner import jobcache

        # The run went ahead: its parsed job file is kept now, not at the end, so that its
        # encoding (the size of the job file) is not held while the run's document grows.
        jobcache.keep()
        # One batch (one flush) for every step's bookkeeping before the work starts, however many.
        # Removal marks come first: each restates its unit's state as planned, before an
        # invalidation below may change that state.
        prepare = [*marks, *refresh, *_bookkeeping(work, decisions, units)]
        if prepare:
            writer.write(f"{len(prepare)} step(s) to run: invalidations and new units", prepare, lazy=True)
        out = _schedule(work, writer, units, decisions, opts, reporter, lease, handle)
        code = conclude(job, writer, out, launch, reporter, quiet=opts.quiet,
                        selected={s.id for s in work.steps} if work is not job else None)
        # Every step done: the next re-run's answer is kept now, from what this run holds.
        end = verdict.ending(writer.store) if code == 0 and out.all_done and verdict.eligible(opts) else None
        try:
            # Large runs refresh the snapshot on a budget: leave it exact for `cat` and `jq`.
            writer.store.close()
        except (ResumableError, OSError):
            end = None
        if end is not None:
            verdict.keep_run(job, work, opts, backend, writer.store, end, launch)
        return code
    finally:
        lease.release()


def close_dead_attempts(writer: SafeWriter, units: Mapping[str, Any]) -> list[Event]:
    """A unit still in_progress belongs to a runner that died (we hold the lease and reaped its
    processes): its attempt counts, and is closed as interrupted before the step runs again."""
    from resumable.runner.attempt import next_attempt_number

    now = stamp(time.time(), ms=True)
    closing: list[Event] = []
    for sid, u in units.items():
        if isinstance(u, dict) and u.get("status") == "in_progress":
            n = next_attempt_number(u) - 1
            att = {"n": n, "status": "interrupted", "finishedAt": now} if n > 0 else None
            closing.append(verbs.unit(sid, "interrupted", note="runner died during this step", attempt=att))
    if closing:
        writer.write(f"{len(closing)} interrupted step(s) of a dead runner", closing)
    return closing


def _bookkeeping(work: Job, decisions: Mapping[str, explain.Decision], units: Mapping[str, Any]) -> list[Event]:
    """The invalidations of done steps that run again, the units of steps new to the run, and the
    needs of units not started yet that lack them (as a submit records them)."""
    out: list[Event] = []
    for s in work.steps:
        d = decisions[s.id]
        if d.invalidate:
            out.append(verbs.invalidate(s.id, d.reason))
        elif s.id not in units:
            out.append(verbs.unit(s.id, "pending", deps=list(s.needs), fields={"command": s.command_text}))
        elif policy.needs_unrecorded(units.get(s.id), s.needs):
            out.append(verbs.unit(s.id, "pending", deps=list(s.needs)))  # `resume` and `get` read its needs
    return out


def _log_path(opts: RunOptions, handle: RunHandle, warn: Any, follow: Any = None) -> Any:
    """Where each attempt's log goes: the step's own ``log``, else ``<logs-dir>/<id>.<n>.log``;
    ``follow(step, n, path)`` is told each (live output reads the logs)."""
    logs_dir = os.path.abspath(opts.logs_dir) if opts.logs_dir else handle.log_dir()
    warned: list[str] = []

    def log_path(step: Step, n: int) -> str:
        path = _where(step, n)
        if follow is not None:
            follow(step.id, n, path)
        return path

    def _where(step: Step, n: int) -> str:
        if step.log:
            return step.log
        numbered = os.path.join(logs_dir, f"{step.id}.{n}.log")
        if opts.logs_dir:
            # checkpoint-run's name for a step's log, DIR/<id>.log, is the latest attempt's.
            from resumable.runner import latestlog

            problem = latestlog.point(numbered, latestlog.latest_name(logs_dir, step.id))
            if problem is not None and not warned:
                warned.append(problem)  # once: a filesystem without hard links fails them all
                warn(problem)
        return numbered

    return log_path


_AHEAD_PER_SLOT = 8  # steps recorded ahead per slot, at most (for steps of a few milliseconds)


def _schedule(work: Job, writer: SafeWriter, units: Mapping[str, Any], decisions: Mapping[str, explain.Decision],
              opts: RunOptions, reporter: Any, lease: RunnerLease, handle: RunHandle) -> Any:
    """The steps run, interruptible: the scheduler's outcome."""
    from resumable.runner.scheduler import Options, Scheduler, install_signal_handlers

    jobs = opts.jobs if opts.jobs > 0 else (os.cpu_count() or 1)
    sched = Scheduler(
        work, writer, units, decisions,
        Options(jobs=opts.jobs, keep_going=opts.keep_going, max_failures=opts.max_failures, force=opts.force),
        spawner=process.spawn, reporter=reporter, groups=lease,
        log_path=_log_path(opts, handle, reporter.warn, reporter.will_log if reporter.follower else None),
        # Steps start on the scheduler's thread (posix_spawn returns once the step's program is
        # running: a thread per start costs more CPU in hand-offs than it saves, measured), through
        # the C library without the GIL (runner.libcspawn), so the flusher works meanwhile; with
        # parallel slots, records are flushed on a thread of their own, so the loop goes on
        # reaping and starting while the disk works, and what it collects meanwhile shares the
        # next flush (runner.flusher).
        # The next steps' in_progress records are written while the slots are busy, a few at a
        # time, so a slot that frees starts its next step without waiting for a flush, and the
        # batches are fewer than the steps (Scheduler's docstring says what such a record means).
        flush_thread=jobs > 1,
        record_ahead=_AHEAD_PER_SLOT * jobs if jobs > 1 else 0,
    )
    settle_memory()
    reporter.start(work, decisions, _estimates(units) if reporter.wants_estimates else {})
    restore = install_signal_handlers(sched)
    try:
        return sched.run()
    finally:
        restore()
        reporter.close()


def nothing_to_do(job: Job, doc: Mapping[str, Any], decisions: Mapping[str, explain.Decision],
                  launch: Mapping[str, Any]) -> bool:
    """Whether this invocation would change nothing: every step skips, the run is already done,
    launched the same way, and every unit the job no longer has is done."""
    if doc.get("status") != "done" or doc.get("launch") != launch:
        return False
    if any(d.run for d in decisions.values()):
        return False
    units = _units(doc)
    if len(units) == len(decisions):
        return True
    return all(isinstance(u, dict) and u.get("status") == "done"
               for uid, u in units.items() if uid not in decisions)


def reconcile(job: Job, writer: SafeWriter, doc: Mapping[str, Any], reporter: Any) -> bool:
    """[job] reconcile: trust git over the checkpoint before planning. A step whose Task-Id trailer
    is on a commit reachable from the ref is marked done (and skipped: "integrated in <sha>"); a done
    step with no such commit gets an open stale-done blocker. True when something was written."""
    from resumable.git.reconcile import reconcile as plan_reconcile

    assert job.reconcile is not None
    ref, repo = job.reconcile
    plan = plan_reconcile(doc, repo, ref, [s.id for s in job.steps], run_id=job.name)
    for warning in plan.warnings:
        reporter.warn(warning)
    events: list[Event] = [verbs.unit(uid, "done", note=payload) if kind == "unit" else verbs.item(payload)
              for kind, uid, payload in plan.writes]
    if events:
        writer.write(f"reconcile against {ref}", events)
    return bool(events)


def reconciled_view(job: Job, doc: Mapping[str, Any], units: Mapping[str, object]) -> dict[str, object]:
    """The units as a reconcile would leave them, without writing (for --dry-run and --explain)."""
    from resumable.git.reconcile import NOTE_PREFIX
    from resumable.git.reconcile import reconcile as plan_reconcile

    assert job.reconcile is not None
    ref, repo = job.reconcile
    plan = plan_reconcile(doc, repo, ref, [s.id for s in job.steps], run_id=job.name)
    view = dict(units)
    for uid in plan.reconciled:
        old = units.get(uid)
        view[uid] = {**(old if isinstance(old, dict) else {}), "status": "done",
                     "note": NOTE_PREFIX + plan.integrated[uid]}
    return view


def _units(doc: Mapping[str, Any]) -> dict[str, object]:
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
