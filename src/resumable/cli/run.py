"""``resumable run``: the click command (`run_command`, registered lazily by resumable.cli.main).

Parsing and printing only; the work is in jobfile / explain / scheduler. User mistakes become one
line on stderr and an exit code here, never a traceback.
"""

from __future__ import annotations

import os
import shlex
import socket
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from resumable.errors import ResumableError, UsageError
from resumable.runner import explain
from resumable.runner.jobfile import (
    DEFAULT_GRACE,
    Job,
    Step,
    job_from_flags,
    load_job_file,
    parse_duration,
)
from resumable.runner.writer import SafeWriter
from resumable.store.files import lease as ownership

DEFAULT_JOB_FILE = "resumable.toml"
ITEM_PREFIX = "step-failed:"


class _RawArgsCommand(click.Command):
    """Keeps the exact argv, for the launch descriptor and the resume hint."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["resumable.raw_args"] = list(args)
        return super().parse_args(ctx, args)


def _duration(ctx: click.Context, param: click.Parameter, value: object) -> float | None:
    if value is None:
        return None
    try:
        return parse_duration(value, f"--{param.name}")
    except ResumableError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command("run", cls=_RawArgsCommand)
@click.argument("jobfile", required=False, type=click.Path(dir_okay=False))
@click.option("--job", "job_name", metavar="NAME", help="Job name = run id (default: [job] name).")
@click.option("--step", "steps", metavar="ID:COMMAND", multiple=True,
              help="A step, repeatable, run in the order given (instead of a job file).")
@click.option("--state-dir", "--dir", "state_dir", metavar="DIR",
              help="The runs directory (default: RESUMABLE_DIR, else the nearest .resumable/runs).")
@click.option("-j", "--jobs", type=click.IntRange(min=0), default=1, show_default=True,
              help="Steps run in parallel; 0 = one per CPU.")
@click.option("--timeout", metavar="DURATION", callback=_duration,
              help="Default per-step time budget: 90, 90s, 10m, 2h.")
@click.option("--step-timeout", "step_timeouts", metavar="ID:DURATION", multiple=True,
              help="Per-step time budget (repeatable).")
@click.option("--grace", metavar="DURATION", callback=_duration,
              help=f"Wait between SIGTERM and SIGKILL (default {DEFAULT_GRACE:g}s).")
@click.option("--continue-on-error", "--keep-going", "keep_going", is_flag=True,
              help="Run every step that does not depend on a failed one.")
@click.option("--max-failures", type=click.IntRange(min=1), metavar="N",
              help="With --continue-on-error: stop after N failed steps.")
@click.option("--step-artifact", "step_artifacts", metavar="ID:PATH", multiple=True,
              help="A file the step must produce (repeatable; all are required).")
@click.option("--retry", "retries", type=click.IntRange(min=0), metavar="N",
              help="Extra attempts for a failing step (default 0).")
@click.option("--backoff", metavar="SECONDS", callback=_duration,
              help="Wait BASE * 2^(k-1) (+ jitter) before retry k (default 1).")
@click.option("--step-log", "step_logs", metavar="ID:PATH", multiple=True,
              help="Write that step's output to PATH (truncated per attempt).")
@click.option("--logs-dir", metavar="DIR", help="Write logs to DIR/<step>.<attempt>.log.")
@click.option("--dry-run", is_flag=True, help="Print what would run or skip, and why; write nothing.")
@click.option("--explain", "explain_step", metavar="STEP", help="Why STEP would run or skip.")
@click.option("--force", is_flag=True, help="Re-run every step (history kept).")
@click.option("--reset", is_flag=True, help="Delete the run's state (refused while it runs).")
@click.option("--status", "show_status", is_flag=True, help="Show the run as `resumable status` does.")
@click.option("-q", "--quiet", is_flag=True, help="Print only errors and the final summary.")
@click.pass_context
def run_command(ctx: click.Context, /, **kw: Any) -> None:
    """Run a job as a resumable DAG of steps; re-run the same command to finish what is left.

    JOBFILE is a TOML job file (default ./resumable.toml); or describe the steps with --step.
    """
    try:
        code = main(ctx.meta.get("resumable.raw_args", []), **kw)
    except ResumableError as exc:
        click.echo(f"resumable: {exc}", err=True)
        code = exc.exit_code
    except KeyboardInterrupt:
        # Ctrl-C before any step started (while loading or reaping): nothing to save.
        click.echo("resumable: interrupted", err=True)
        code = 130
    ctx.exit(code)


def _load_job(jobfile: str | None, job_name: str | None, steps: Sequence[str],
              kw: Mapping[str, Any]) -> Job:
    if steps:
        if jobfile:
            raise UsageError("give either a job file or --step flags, not both")
        if not job_name:
            raise UsageError("--step needs --job NAME (the run id)")
        return job_from_flags(
            job_name, steps,
            timeout=kw["timeout"], step_timeouts=kw["step_timeouts"],
            step_artifacts=kw["step_artifacts"], retries=kw["retries"] or 0,
            backoff=kw["backoff"] if kw["backoff"] is not None else 1.0,
            step_logs=kw["step_logs"],
            grace=kw["grace"] if kw["grace"] is not None else DEFAULT_GRACE,
        )
    for flag in ("step_timeouts", "step_artifacts", "step_logs"):
        if kw[flag]:
            raise UsageError(f"--{flag.replace('_', '-')[:-1]} needs --step flags; "
                             "in a job file set it on the step")
    job = load_job_file(jobfile or DEFAULT_JOB_FILE, name_override=job_name)
    # Command-line defaults override the file's, for one invocation.
    from dataclasses import replace

    over: dict[str, Any] = {}
    if kw["timeout"] is not None:
        over["timeout"] = kw["timeout"]
    if kw["retries"] is not None:
        over["retries"] = kw["retries"]
    if kw["backoff"] is not None:
        over["backoff"] = kw["backoff"]
    if kw["grace"] is not None:
        over["grace"] = kw["grace"]
    if over:
        job = replace(job, steps=tuple(replace(s, **over) for s in job.steps))
    return job


def _resume_hint(launch: Mapping[str, Any]) -> str:
    cmd = shlex.join(launch["argv"])
    cwd = launch.get("cwd")
    return f"cd {shlex.quote(cwd)} && {cmd}" if cwd and cwd != os.getcwd() else cmd


def main(raw: list[str], **kw: Any) -> int:
    """`resumable run` with its options as keywords (the click parameter names); ``raw`` is the
    argv recorded in the launch descriptor. Returns the exit code; raises ResumableError."""
    from resumable import api

    steps: tuple[str, ...] = kw["steps"]
    job_name: str | None = kw["job_name"]
    quiet: bool = kw["quiet"]
    state_only = kw["show_status"] or kw["reset"]

    job: Job | None = None
    if not (state_only and job_name and not steps):
        job = _load_job(kw["jobfile"], job_name, steps, kw)
        job_name = job.name
    assert job_name is not None

    write_mode = not (kw["dry_run"] or kw["explain_step"] or kw["show_status"])
    runs_dir = api.find_runs_dir(kw["state_dir"], create=write_mode)

    if kw["show_status"]:
        return _show_status(job_name, runs_dir)
    if kw["reset"]:
        return _reset(job_name, runs_dir, quiet)
    assert job is not None

    run = api.open_run(job_name, runs_dir=runs_dir)
    doc: dict[str, Any] = run.doc if run.exists() else {}
    units = doc.get("units") if isinstance(doc.get("units"), dict) else {}
    assert isinstance(units, dict)

    if kw["explain_step"]:
        step = job.step(kw["explain_step"])
        print(explain.plan(job, units, force=kw["force"])[step.id].line())
        return 0
    if kw["dry_run"]:
        decisions = explain.plan(job, units, force=kw["force"])
        for d in decisions.values():
            print(d.line())
        n = sum(d.run for d in decisions.values())
        print(f"{n} to run, {len(decisions) - n} to skip (dry run: nothing executed or written)")
        return 0
    return _execute(job, run, runs_dir, kw, raw)


def _show_status(run_id: str, runs_dir: Path) -> int:
    from resumable.view.watch import status_command

    try:
        rv = status_command.main(args=[run_id, "--dir", str(runs_dir)],
                                 prog_name="resumable status", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    return int(rv) if isinstance(rv, int) else 0


def _reset(run_id: str, runs_dir: Path, quiet: bool) -> int:
    from resumable.runner import process
    from resumable.store.files import writer as store

    # Holding the runner lock for the whole reset: a runner starting meanwhile is refused rather
    # than writing into files being deleted (checking liveness first and deleting after would
    # leave that window open).
    lock = ownership.RunnerLock(ownership.lock_path(runs_dir, run_id), run_id)
    lock.acquire()  # refuses (exit 2) while a runner holds the run
    try:
        # A dead runner's leftover steps would otherwise outlive the state that tracked them.
        process.reap_leftovers(lock.previous_groups(), lock.previous_token())
        removed = store.delete_run(store.resolve_run(run_id, str(runs_dir)))
    finally:
        lock.release()
    if not quiet:
        print(f"reset {run_id}: " + (", ".join(removed) if removed else "no state to delete"))
    return 0


def _execute(job: Job, run: Any, runs_dir: Path, kw: Mapping[str, Any], raw: list[str]) -> int:
    from resumable import api
    from resumable.runner import process
    from resumable.runner.display import make_reporter
    from resumable.runner.scheduler import Options, Scheduler, install_signal_handlers, iso

    reporter = make_reporter(kw["quiet"])
    lock = ownership.RunnerLock(ownership.lock_path(runs_dir, job.name), job.name)
    lock.acquire()  # refuses (exit 2) when another runner is live
    try:
        reaped = process.reap_leftovers(lock.previous_groups(), lock.previous_token())
        if reaped:
            reporter.warn(f"stopped {len(reaped)} leftover process(es) of a dead runner "
                          f"(pids {', '.join(map(str, reaped))})")
        launch = {"kind": "resumable", "argv": ["resumable", "run", *raw], "cwd": os.getcwd()}

        def reopen() -> Any:
            fresh = api.open_run(job.name, runs_dir=runs_dir)
            return fresh

        writer = SafeWriter(run, reporter.warn, reopen=reopen)
        if run.exists():
            writer.call("begin", lambda s: s.begin(launch))
        else:
            ids = [s.id for s in job.steps]
            writer.call("init", lambda s: s.init(
                f"resumable run {job.name}", units=ids, run_id=job.name, launch=launch))
            writer.call("begin", lambda s: s.begin(launch))
        doc = _doc(writer)
        got = doc.get("units")
        units: dict[str, Any] = got if isinstance(got, dict) else {}
        now = iso(__import__("time").time())
        # A unit still in_progress belongs to a runner that died (we hold the lock): its attempt
        # counts, and is closed as interrupted before the step runs again.
        for sid, u in list(units.items()):
            if isinstance(u, dict) and u.get("status") == "in_progress":
                from resumable.runner.scheduler import next_attempt_number

                n = next_attempt_number(u) - 1
                att = {"n": n, "status": "interrupted", "finishedAt": now} if n > 0 else None
                writer.unit(sid, "interrupted", note="runner died during this step", attempt=att)
        doc = _doc(writer) or doc
        got = doc.get("units")
        units = got if isinstance(got, dict) else units
        decisions = explain.plan(job, units, force=kw["force"])
        for s in job.steps:
            d = decisions[s.id]
            if d.invalidate:
                writer.invalidate(s.id, d.reason)
            elif s.id not in units:
                writer.unit(s.id, "pending", deps=list(s.needs), fields={"command": s.command_text})

        def log_path(step: Step, n: int) -> str:
            if step.log:
                return step.log
            base = Path(kw["logs_dir"]).resolve() if kw["logs_dir"] else run.data_dir / "logs"
            return str(base / f"{step.id}.{n}.log")

        estimates = _estimates(units)
        sched = Scheduler(
            job, writer, units, decisions,
            Options(jobs=kw["jobs"], keep_going=kw["keep_going"], max_failures=kw["max_failures"],
                    force=kw["force"]),
            spawner=process.spawn, reporter=reporter, log_path=log_path, groups=_Tracker(lock),
        )
        reporter.start(job, decisions, estimates)
        restore = install_signal_handlers(sched)
        try:
            out = sched.run()
        finally:
            restore()
            reporter.close()
        code = _conclude(job, writer, out, decisions, launch, reporter, kw["quiet"])
        try:
            # Large runs refresh the snapshot on a budget: leave it exact for `cat` and `jq`.
            writer.store.close()
        except (ResumableError, OSError):
            pass
        return code
    finally:
        lock.release()


class _Tracker:
    def __init__(self, lock: ownership.RunnerLock) -> None:
        self.lock = lock
        self.token = lock.token

    def add_group(self, group: Any) -> None:
        self.lock.add_group(group)

    def remove_group(self, pgid: int) -> None:
        self.lock.remove_group(pgid)


def _doc(writer: SafeWriter) -> dict[str, Any]:
    try:
        d = writer.store.doc
    except (ResumableError, OSError):
        return {}
    return d if isinstance(d, dict) else {}


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


def _conclude(job: Job, writer: SafeWriter, out: Any, decisions: Mapping[str, Any],
              launch: Mapping[str, Any], reporter: Any, quiet: bool) -> int:
    doc = _doc(writer)
    open_items = [it for it in (doc.get("openItems") or []) if isinstance(it, dict)]
    ours = {it.get("id") for it in open_items if str(it.get("id", "")).startswith(ITEM_PREFIX)}
    done_ids = [f"{ITEM_PREFIX}{sid}" for sid, st in out.states.items() if st in ("done", "skipped")]
    to_resolve = [i for i in done_ids if i in ours]
    if to_resolve:
        writer.resolve(to_resolve)
    counts: dict[str, int] = {}
    for st in out.states.values():
        counts[st] = counts.get(st, 0) + 1
    summary = ", ".join(f"{n} {st}" for st, n in sorted(counts.items()))

    # Units the job no longer has (a step removed from the job file) are kept, as the seed keeps
    # them; but while one is not done the run cannot honestly be finalized done.
    stale = sorted(uid for uid, u in (doc.get("units") or {}).items()
                   if uid not in {s.id for s in job.steps}
                   and not (isinstance(u, dict) and u.get("status") == "done"))
    finished = out.all_done and not stale
    status_word = "interrupted" if out.interrupted else ("done" if finished else "needs attention")
    if stale and out.all_done:
        reporter.warn(f"the run has units this job no longer has, not done: {', '.join(stale)}; "
                      "the run stays needs_attention (use --reset to start afresh)")
    if out.interrupted:
        # Not "running": nothing runs any more. needs_attention is live to init and gc alike, so
        # the run is resumed, never re-initialised or archived, and status says what to do.
        writer.finalize("needs_attention", f"interrupted ({summary})")
    else:
        if out.all_done and not stale:
            writer.finalize("done", summary)
        else:
            items = []
            for sid in out.failed:
                items.append({
                    "id": f"{ITEM_PREFIX}{sid}", "kind": "step_failed", "step": sid,
                    "status": out.states.get(sid), "attempts": out.attempts.get(sid, 0),
                    "lastExitCode": out.last_exit.get(sid), "log": out.logs.get(sid),
                    "summary": f"step {sid} {out.states.get(sid)} (exit {out.last_exit.get(sid)})",
                })
            if items:
                writer.item(items)
            writer.finalize("needs_attention", summary)
    writer.retry()

    err = sys.stderr
    if out.failed and not quiet:
        reporter.failure_tails(sys.stdout)
    print(f"{job.name}: {status_word} ({summary})")
    if not finished:
        print(f"resume with: {_resume_hint(launch)}")
    unsaved = writer.unsaved()
    if unsaved or writer.dropped:
        lost = [*unsaved, *writer.dropped]
        print(f"resumable: could not save the run's status: {'; '.join(lost)}", file=err)
        print("resumable: free disk space and re-run the same command; steps whose completion "
              "was not saved will run again", file=err)
    if out.interrupted:
        return 130
    if not finished or unsaved or writer.dropped:
        return 1
    return 0


def _hostname() -> str:
    return socket.gethostname()
