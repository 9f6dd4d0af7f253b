"""``resumable db``: the PostgreSQL store's schema, and what workers recorded (attempts, logs)."""

from __future__ import annotations

import sys

import click

from resumable.cli.errors import command_class
from resumable.cli.worker import work_queue
from resumable.core.text import escape_controls

_STORE = click.option("--store", "store_url", metavar="URL", default=None,
                      help="The PostgreSQL store (default: RESUMABLE_STORE).")


@click.group("db", short_help="The PostgreSQL store: schema, attempts, logs.")
def db_group() -> None:
    """The PostgreSQL store: apply its schema migrations, and read what workers recorded."""


@db_group.command("upgrade", cls=command_class())
@_STORE
def upgrade_command(store_url: str | None) -> None:
    """Apply the schema migrations the database lacks (first use applies them too)."""
    backend = work_queue(store_url)
    try:
        before, after = backend.upgrade()
    finally:
        backend.close()
    if before == after:
        click.echo(f"{backend.root}: schema version {after}, up to date")
    else:
        click.echo(f"{backend.root}: schema version {before or 0} -> {after}")


@db_group.command("version", cls=command_class())
@_STORE
def version_command(store_url: str | None) -> None:
    """The database's schema version, and the newest this resumable knows."""
    backend = work_queue(store_url)
    try:
        have, latest = backend.schema_version(), backend.schema_latest()
    finally:
        backend.close()
    click.echo(f"{backend.root}: schema version {have if have is not None else 'none (never used)'};"
               f" this resumable knows up to {latest}")


@db_group.command("attempts", cls=command_class())
@click.argument("run")
@click.argument("step", required=False)
@_STORE
@click.option("--json", "as_json", is_flag=True, help="One JSON object per attempt.")
def attempts_command(run: str, step: str | None, store_url: str | None, as_json: bool) -> None:
    """Every attempt workers made on RUN's steps (or STEP's), oldest first, stale ones included:
    where it ran, when, how it ended, and whether its completion was fenced off."""
    from datetime import UTC

    from resumable.core import jsonio
    from resumable.core.model import check_run_id
    from resumable.errors import NoRunError

    check_run_id(run)
    backend = work_queue(store_url)
    try:
        backend.ready()  # a database without the schema says so, rather than "no run"
        if not backend.open(run).exists():
            raise NoRunError(f"no run matches \"{run}\" under {backend.root}")
        rows = backend.attempts(run, step)
    finally:
        backend.close()
    for a in rows:
        if as_json:
            out: dict[str, object] = {k: (v.astimezone(UTC).isoformat() if hasattr(v, "astimezone") else v)
                                   for k, v in a.items()}
            sys.stdout.write(jsonio.dumps(out).decode() + "\n")
            continue
        stale = a["stale"]
        fenced = f"  STALE: its completion ({stale.get('status')}) was refused" if stale else ""
        code = "" if a["exitCode"] is None else f" exit {a['exitCode']}"
        when = (a["startedAt"].astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
                if a["startedAt"] else "?")
        line = (f"{a['step']} #{a['n']} epoch {a['epoch']}  {a['status']}{code}  {when}  on {a['host']}"
                f" ({a['worker']}){fenced}")
        click.echo(escape_controls(line))


@db_group.command("log", cls=command_class())
@click.argument("run")
@click.argument("step")
@click.option("--attempt", "n", type=int, default=None, metavar="N", help="Attempt N (default: the last).")
@_STORE
def log_command(run: str, step: str, n: int | None, store_url: str | None) -> None:
    """Print the log a worker stored with STEP's attempt (its last MiB)."""
    from resumable.core.model import check_run_id
    from resumable.errors import NoRunError

    check_run_id(run)
    backend = work_queue(store_url)
    try:
        got = backend.attempt_log(run, step, n)
    finally:
        backend.close()
    if got is None:
        which = "attempt" if n is None else f"attempt {n}"
        raise NoRunError(f"no {which} of step {step!r} of run {run!r} under {backend.root}")
    data = got[1]
    if not data:
        # Said, not silent: a person would otherwise not know whether the step printed nothing or
        # the command failed.
        click.echo("(empty log)" if data is not None else f"(no log stored with attempt {got[0]})")
        return
    if sys.stdout.isatty():
        text = data.decode("utf-8", "replace")
        sys.stdout.write("\n".join(escape_controls(line) for line in text.split("\n")))
    else:
        sys.stdout.buffer.write(data)
    sys.stdout.flush()
