"""``resumable log``: a run's history, one line per recorded event, or the raw records."""

from __future__ import annotations

import sys

import click

from resumable import store
from resumable.cli.completion import complete_run
from resumable.cli.errors import command_class, warn
from resumable.core import recipe
from resumable.core.text import escape_controls
from resumable.errors import NoRunError, UsageError
from resumable.view import discovery
from resumable.view.history import describe


@click.command("log", cls=command_class(), short_help="Show a run's history, one line per event.")
@click.argument("run", required=False, shell_complete=complete_run)
@click.option("--json", "as_json", is_flag=True, help="The raw records, one JSON object per line (jq -c .).")
@click.option("--since", metavar="SEQ", type=int, default=0, help="Only records after sequence number SEQ.")
@click.option("--dir", "runs_dir", metavar="DIR", default=None,
              help="The runs directory (default: RESUMABLE_DIR, else the nearest .resumable/runs).")
@click.option("--store", "store_url", metavar="URL", default=None,
              help="A PostgreSQL store (default: RESUMABLE_STORE, else the runs directory).")
def log_command(run: str | None, as_json: bool, since: int, runs_dir: str | None, store_url: str | None) -> None:
    """The history of RUN (an id, an id prefix or a .json path; default the newest run), oldest
    first: when, the sequence number, and what changed. Every write a run ever received is there,
    every attempt included."""
    if since < 0:
        raise UsageError("--since takes a sequence number >= 0")
    backend = store.open_backend(runs_dir, url=store_url)
    picked = discovery.pick_run(backend, run)
    if picked is None:
        raise NoRunError(f"no runs under {backend.root}: no history to show")
    if picked.also_matched:
        warn(f"{run!r} also matches {', '.join(picked.also_matched[:5])}"
             f"{' …' if len(picked.also_matched) > 5 else ''}; showing {picked.entry.run_id}")
    if picked.entry.doc is None:
        # A history can only be trusted as far as the run can be read: say why it cannot.
        raise discovery.unreadable(picked.entry)
    out = sys.stdout
    shown = 0
    for record in picked.handle.history(since):
        shown += 1
        if as_json:
            out.write(record.raw + "\n")
        else:
            event = record.event
            at = event.get("at") if isinstance(event.get("at"), str) else "?"
            out.write(f"{at}  #{record.seq:<6} {escape_controls(describe(event))}\n")
    out.flush()
    if not shown and not as_json:
        why = f"after #{since}" if since else "recorded (a run written by checkpoint.mjs keeps only its document)"
        option = discovery.store_option(backend)
        show = recipe.command(["resumable", "status", picked.entry.run_id, *(option or ())])
        warn(f"run {picked.entry.run_id}: no history {why}; `{show}` shows the run")
