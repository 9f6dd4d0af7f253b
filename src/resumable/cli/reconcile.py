"""``resumable reconcile``: trust git over the checkpoint (commits' ``Task-Id:`` trailers)."""

from __future__ import annotations

import click

from resumable.api import open_run
from resumable.cli.completion import complete_run
from resumable.cli.errors import command_class, warn
from resumable.core.text import escape_controls
from resumable.errors import UsageError
from resumable.git.reconcile import parse_units_arg
from resumable.view.printer import dump_json


@click.command("reconcile", cls=command_class(), short_help="Mark units done from integrated commits.")
@click.argument("run", shell_complete=complete_run)
@click.option("--repo", metavar="DIR", default=".", show_default=True, help="The git repository.")
@click.option("--ref", metavar="REF", default=None,
              help="Integration ref (default: the run's pipeline.integrationRef, else HEAD).")
@click.option("--units", "units_csv", metavar="A,B", default=None, help="Only these units.")
@click.option("--all", "all_units", is_flag=True, help="Every unit of the run (the default).")
@click.option("--dry-run", is_flag=True, help="Say what would change; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print {integrated, reconciled, staleDone, runnable}.")
@click.option("--dir", "runs_dir", metavar="DIR", default=None, help="The runs directory.")
@click.option("--store", "store_url", metavar="URL", default=None, help="A PostgreSQL store.")
def reconcile_command(run: str, repo: str, ref: str | None, units_csv: str | None, all_units: bool,
                      dry_run: bool, as_json: bool, runs_dir: str | None, store_url: str | None) -> None:
    """RUN's units against git: a unit whose Task-Id trailer is on a commit reachable from REF is
    done (note reconciled-from-trailer:<sha>); a done unit with no such commit gets an open
    blocker stale-done:<id> (it stays done). Reads git only (log, rev-parse); never runs a shell."""
    if units_csv is not None and all_units:
        raise UsageError("give --units or --all, not both")
    units = parse_units_arg(units_csv) if units_csv is not None else None
    result = open_run(run, runs_dir=runs_dir, store_url=store_url).reconcile(
        repo, ref, units=units, all_units=all_units, dry_run=dry_run)
    for message in result.pop("warnings"):
        warn(message)
    if as_json:
        click.echo(dump_json(result))
        return
    lines = [f"integrated {len(result['integrated'])} task(s)"]
    for key, label in (("reconciled", "marked done"), ("staleDone", "stale done (blocker recorded)"),
                       ("runnable", "not integrated, still to do")):
        if result[key]:
            lines.append(f"{label}: {', '.join(result[key])}")
    if dry_run:
        lines.append("(dry run: nothing written)")
    click.echo("\n".join(escape_controls(line) for line in lines))
