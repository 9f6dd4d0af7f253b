"""``resumable worker``: run the steps of jobs submitted to a PostgreSQL store, on this host."""

from __future__ import annotations

from typing import Any

import click

from resumable import store
from resumable.cli.durations import at_least, duration
from resumable.cli.errors import command_class
from resumable.errors import UsageError


def work_queue(store_url: str | None) -> Any:
    """The store of ``--store`` / ``RESUMABLE_STORE``; a one-line error unless it runs workers."""
    from resumable.runner.workqueue import is_queue

    if store.store_url(store_url) is None:
        raise UsageError("workers need a PostgreSQL store: give --store postgresql://user@host/db"
                         " (or set RESUMABLE_STORE)")
    backend = store.open_backend(url=store_url)
    if not is_queue(backend):
        raise UsageError(f"{backend.description} does not run steps on workers")
    return backend


@click.command("worker", cls=command_class(), short_help="Run submitted steps on this host.")
@click.option("--store", "store_url", metavar="URL", default=None,
              help="The PostgreSQL store (default: RESUMABLE_STORE).")
@click.option("--run", "runs", metavar="ID", multiple=True,
              help="Work only on this run (repeatable); the worker exits once these runs have ended.")
@click.option("-j", "--jobs", type=click.IntRange(min=0), default=1, show_default=True,
              help="Steps run at once on this host; 0 = one per CPU.")
@click.option("--lease", metavar="DURATION", default="30s", show_default=True, callback=at_least(1.0),
              help="How long a claim lasts without a heartbeat (heartbeats come every third of it).")
@click.option("--grace", metavar="DURATION", default="30s", show_default=True, callback=duration,
              help="After SIGTERM: how long running steps may finish before they are handed back.")
@click.option("--reconnect", metavar="DURATION", default="5m", show_default=True, callback=duration,
              help="How long to wait for the database to come back after losing it.")
@click.option("--wait", "wait", metavar="DURATION", default="0s", show_default=True, callback=duration,
              help="With --run: how long to wait for the runs to be submitted (else a missing run exits 3).")
@click.option("--ahead", type=click.IntRange(min=0), default=None,
              help="Claims held beyond the free slots, so a freed slot starts its next step at once"
                   " (default: what the steps ending during one transaction need, at least -j, at most 32;"
                   " 0: none).")
@click.option("--logs-dir", metavar="DIR",
              help="Write step logs to DIR/<step>.<attempt>.log on this host; DIR/<step>.log is the latest.")
@click.option("-q", "--quiet", is_flag=True, help="Print only warnings.")
@click.pass_context
def worker_command(ctx: click.Context, store_url: str | None, runs: tuple[str, ...], jobs: int, lease: float,
                   grace: float, reconnect: float, wait: float, ahead: int | None, logs_dir: str | None,
                   quiet: bool) -> None:
    """Claim ready steps of submitted jobs (`resumable submit`), run them on this host as
    `resumable run` would, and record their outcomes. Claims are leases renewed by heartbeats; a
    worker that dies loses them and another worker takes each step over. SIGTERM or Ctrl-C: stop
    claiming, let running steps finish within --grace, hand the rest back; exit 130."""
    from resumable.core.model import check_run_id
    from resumable.runner.process import seal_inherited_fds
    from resumable.runner.submission import LineSink
    from resumable.runner.worker import Worker, WorkerOptions, install_signal_handlers

    seal_inherited_fds()  # what the shell left open is not the steps' to inherit: they start by posix_spawn
    for run_id in runs:
        check_run_id(run_id)
    backend = work_queue(store_url)
    try:
        # A wrong URL or a server that is down is said at once, not after --reconnect. A worker may
        # start before anything is submitted: it brings the schema up to date, as a submit would.
        backend.ready(migrate=True)
        backend.serve(patience=reconnect)
        worker = Worker(backend, WorkerOptions(runs=tuple(runs) or None, jobs=jobs, ttl=lease, drain_grace=grace,
                                               logs_dir=logs_dir, ahead=ahead, wait=wait), LineSink(quiet=quiet))
        restore = install_signal_handlers(worker)
        try:
            code = worker.run()
        finally:
            restore()
    finally:
        backend.close()
    ctx.exit(code)
