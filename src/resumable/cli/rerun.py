"""``resumable rerun``: mark units of a run to run again, with an explicit invalidation record."""

from __future__ import annotations

import click

from resumable import api
from resumable.cli.completion import complete_run
from resumable.cli.errors import command_class
from resumable.core.model import unit_status
from resumable.core.text import escape_controls
from resumable.errors import UsageError


@click.command("rerun", cls=command_class(), short_help="Mark units of a run to run again.")
@click.argument("run", shell_complete=complete_run)
@click.argument("unit_ids", nargs=-1, metavar="ID...")
@click.option("--step", "steps", metavar="NAME", multiple=True,
              help="Every unit of the durable step NAME (repeatable), besides the IDs given.")
@click.option("--reason", metavar="TEXT", default=None, help="Why, kept on each unit (default: re-run requested).")
@click.option("--dir", "runs_dir", metavar="DIR", default=None,
              help="The runs directory (default: RESUMABLE_DIR, else the nearest .resumable/runs).")
@click.option("--store", "store_url", metavar="URL", default=None,
              help="A PostgreSQL store (default: RESUMABLE_STORE, else the runs directory).")
def rerun_command(run: str, unit_ids: tuple[str, ...], steps: tuple[str, ...], reason: str | None,
                  runs_dir: str | None, store_url: str | None) -> None:
    """Send units of RUN (a run id or a .json path) back to pending, done ones included, recording
    an invalidation (when and why) on each: the next `resumable run` of a job, or the next call of a
    durable step, runs them again. `resumable unit RUN ID pending` still refuses to demote a done
    unit: this is the explicit way. Refused (exit 2) for a unit in progress and for an aborted run."""
    if not unit_ids and not steps:
        raise UsageError("rerun needs unit ids, or --step NAME")
    opened = api.open_run(run, runs_dir=runs_dir, store_url=store_url)
    doc = opened.handle.read()
    ids = list(unit_ids)
    if steps:
        from resumable.durable.finish import step_units

        ids += step_units(doc, steps)
    # A pending unit runs next time anyway: another invalidation would only say so twice.
    units = doc.get("units")
    pending = [u for u in dict.fromkeys(ids)
               if isinstance(units, dict) and unit_status(units.get(u)) == "pending"]
    rest = [u for u in ids if u not in pending]
    done = opened.rerun(rest, reason) if rest else []
    if done:
        click.echo(escape_controls(f"{opened.run_id}: {len(done)} unit(s) will run again: {_some(done)}"))
    if pending:
        click.echo(escape_controls(f"{opened.run_id}: already pending: {len(pending)} ({_some(pending)})"))


def _some(ids: list[str]) -> str:
    return ", ".join(ids[:20]) + (f" and {len(ids) - 20} more" if len(ids) > 20 else "")
