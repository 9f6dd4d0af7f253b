"""``resumable export`` / ``resumable import``: move a run, its document, its whole history and its
stored values, between stores (a runs directory and a PostgreSQL database, either way). The file
format and the replay are ``store.transfer``'s.
"""

from __future__ import annotations

import click

from resumable import fsio, store
from resumable.cli.errors import command_class
from resumable.core import jsonio
from resumable.errors import StoreError
from resumable.view import discovery

_DIR = click.option("--dir", "runs_dir", metavar="DIR", default=None,
                    help="The runs directory (default: RESUMABLE_DIR, else the nearest .resumable/runs).")
_STORE = click.option("--store", "store_url", metavar="URL", default=None,
                      help="A PostgreSQL store (default: RESUMABLE_STORE, else the runs directory).")


@click.command("export", cls=command_class(), short_help="Write a run and its history to a file.")
@click.argument("run")
@click.option("-o", "--output", metavar="FILE", default=None,
              help="Where to write it (default ./<run-id>.resumable.json; '-' for stdout).")
@_DIR
@_STORE
def export_command(run: str, output: str | None, runs_dir: str | None, store_url: str | None) -> None:
    """Write RUN (an id, an id prefix or a .json path), its document, every event of its history
    and every stored value it refers to (durable results over 64 KiB), to one file that
    `resumable import` reads into another store."""
    from resumable.store.transfer import export_run

    backend = store.open_backend(runs_dir, url=store_url)
    try:
        picked = discovery.pick_run(backend, run)
        assert picked is not None  # a named run matches or raises NoRunError
        data, events = export_run(picked.handle, picked.entry.run_id)
    finally:
        backend.close()
    if output == "-":
        import sys

        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    target = output or f"{picked.entry.run_id}.resumable.json"
    try:
        fsio.write_output(target, data)
    except OSError as exc:
        raise StoreError(f"cannot write {target}: {exc.strerror or exc} — give -o a file in an existing"
                         " directory (or -o - for stdout)") from exc
    click.echo(f"{target}: run {picked.entry.run_id}, {events} event(s)")


@click.command("import", cls=command_class(), short_help="Read a run exported from another store.")
@click.argument("file")
@_DIR
@_STORE
def import_command(file: str, runs_dir: str | None, store_url: str | None) -> None:
    """Read FILE (written by `resumable export`) into this store: the run's whole history is
    replayed and its stored values are checked against their hashes, so `log`, `report`, `status`
    and cache hits see it as the source did. All or nothing: an import that fails, or is killed,
    leaves no run behind. Refused (exit 2) when a run with its id already exists here."""
    from resumable.core.model import check_run_id
    from resumable.store.transfer import import_run, read_export

    export = read_export(file)
    check_run_id(export.run_id)
    backend = store.open_backend(runs_dir, url=store_url)
    try:
        doc = import_run(backend, export, source=file)
    finally:
        backend.close()
    same = jsonio.dumps(doc) == jsonio.dumps(export.doc)
    click.echo(f"imported run {export.run_id} into {backend.root}: {len(export.history)} event(s)"
               + ("" if same else "; note: the rebuilt document differs from the exported one"))
