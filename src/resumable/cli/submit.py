"""``resumable submit``: record a job as a run in a PostgreSQL store, for workers to run."""

from __future__ import annotations

from typing import Any

import click

from resumable.cli.durations import duration
from resumable.cli.errors import command_class
from resumable.cli.worker import work_queue


@click.command("submit", cls=command_class(), short_help="Record a job for workers to run.")
@click.argument("jobfile", required=False)
@click.option("--job", metavar="NAME", help="Job name = run id (default: [job] name).")
@click.option("--step", "steps", metavar="ID:COMMAND", multiple=True,
              help="A step, repeatable, run in the order given (instead of a job file).")
@click.option("--store", metavar="URL", help="The PostgreSQL store (default: RESUMABLE_STORE).")
@click.option("--timeout", metavar="DURATION", callback=duration, help="Default per-step time budget.")
@click.option("--grace", metavar="DURATION", callback=duration, help="Wait between SIGTERM and SIGKILL.")
@click.option("--retry", "retries", type=click.IntRange(min=0), metavar="N", help="Extra attempts per step.")
@click.option("--backoff", metavar="SECONDS", callback=duration, help="Wait BASE * 2^(k-1) before retry k.")
@click.option("--continue-on-error", "--keep-going", "-k", "keep_going", is_flag=True,
              help="Run every step that does not depend on a failed one.")
@click.option("--max-failures", type=click.IntRange(min=1), metavar="N",
              help="With --keep-going: stop after N failed steps.")
@click.option("--force", is_flag=True, help="Re-run every step (history kept).")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
def submit_command(quiet: bool, **kw: Any) -> None:
    """Record JOBFILE (default ./resumable.toml) as a run in a PostgreSQL store: its steps, their
    fingerprints and needs. Steps proven done are skipped, as `resumable run` skips them; workers
    (`resumable worker`) on any host then run the rest. Submitting again resumes the run."""
    from resumable.core.stamps import stamp
    from resumable.runner.options import RunOptions
    from resumable.runner.session import load_job
    from resumable.runner.submission import launch_of, submit_job

    kw["steps"] = tuple(kw["steps"])
    opts = RunOptions(**kw)
    job = load_job(opts)
    backend: Any = work_queue(opts.store)
    try:
        launch = launch_of("submit", opts.replay_args())
        answer, _ = submit_job(backend, job, launch=launch, force=opts.force, keep_going=opts.keep_going,
                                       max_failures=opts.max_failures)
    finally:
        backend.close()
    if not quiet:
        n = len(answer["run_steps"])
        state = "nothing to run: the run is finished" if answer["concluded"] else "waiting for workers"
        click.echo(f"submitted {job.name} to {backend.root} at {stamp()}: {n} step(s) to run,"
                   f" {answer['skip']} skipped; {state}")
