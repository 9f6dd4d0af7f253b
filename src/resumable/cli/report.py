"""``resumable report``: a run's timeline as one self-contained HTML file."""

from __future__ import annotations

import time

import click

from resumable import fsio, store
from resumable.cli.completion import complete_run
from resumable.cli.errors import command_class
from resumable.errors import NoRunError, ResumableError, StoreError
from resumable.view import discovery
from resumable.view.report import after_a_failure, build_html


@click.command("report", cls=command_class(), short_help="Write a run's timeline as one HTML file.")
@click.argument("run", required=False, shell_complete=complete_run)
@click.option("-o", "--output", "output", metavar="FILE", default=None,
              help="Where to write the HTML (default ./<run-id>.report.html; '-' for stdout).")
@click.option("--dir", "runs_dir", metavar="DIR", default=None,
              help="The runs directory (default: RESUMABLE_DIR, else the nearest .resumable/runs).")
@click.option("--store", "store_url", metavar="URL", default=None,
              help="A PostgreSQL store (default: RESUMABLE_STORE, else the runs directory).")
def report_command(run: str | None, output: str | None, runs_dir: str | None, store_url: str | None) -> None:
    """Write a run's timeline (every attempt of every unit), summary and findings as one
    self-contained HTML file (RUN: an id, an id prefix or a .json path; default the newest)."""
    backend = store.open_backend(runs_dir, url=store_url)
    picked = discovery.pick_run(backend, run)
    if picked is None:
        raise NoRunError(f"no runs under {backend.root}: nothing to report")
    entry = picked.entry
    if entry.doc is None:
        raise discovery.unreadable(entry)
    history = None
    if after_a_failure(entry.doc):  # the history is read only when it can change the count
        try:
            history = [record.event for record in picked.handle.history()] or None
        except ResumableError:
            pass  # the document alone still makes the page (retries counted from it)
    page = build_html(entry.doc, now=time.time(), file=entry.location, history=history)
    if output == "-":
        click.echo(page, nl=False)
        return
    target = output or f"{_file_name(entry.run_id, entry.location)}.report.html"
    try:
        fsio.write_output(target, page.encode("utf-8"))
    except OSError as exc:
        what = exc.strerror or str(exc)
        raise StoreError(f"cannot write {target}: {what} — give -o a file in an existing directory"
                         " (or -o - for stdout)") from exc
    click.echo(target)


def _file_name(run_id: str, location: str) -> str:
    """The default output's name: the run id, unless the document's id (data, which a planted or
    hand-edited file may set to "../../x") is not a valid run id; then the file's own name."""
    import os

    from resumable.core.model import check_run_id
    from resumable.errors import InvalidInputError

    try:
        return check_run_id(run_id)
    except InvalidInputError:
        return os.path.basename(location).removesuffix(".json") or "run"
