"""``resumable export`` / ``resumable import``: move a run, its document and its whole history,
between stores (a runs directory and a PostgreSQL database, either way).

The file is one JSON object: ``{"format": "resumable-export", "v": 1, "run", "source",
"exportedAt", "doc", "history": [event, ...]}``. Import replays the history through the target
store's ordinary commit, so every event passes the checkpoint rules again and the target builds
the document exactly as the source did (checked against ``doc``); the events keep their stamps.
A history that starts from an adopted document (a seed file's ``base``) gets an ``init`` first.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import TYPE_CHECKING, Any

import click

from resumable import fsio, store
from resumable.cli.errors import command_class
from resumable.core import jsonio
from resumable.core.stamps import stamp
from resumable.errors import InvalidInputError, RefusedError, ResumableError, StoreError
from resumable.view import discovery

if TYPE_CHECKING:
    from resumable.core.types import Event, InitEvent

FORMAT = "resumable-export"
VERSION = 1
_MAX_BYTES = 1 << 31

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
    """Write RUN (an id, an id prefix or a .json path), its document and every event of its
    history, to one file that `resumable import` reads into another store."""
    backend = store.open_backend(runs_dir, url=store_url)
    try:
        picked = discovery.pick_run(backend, run)
        assert picked is not None  # a named run matches or raises NoRunError
        handle = picked.handle
        doc = handle.read()
        history = [r.event for r in handle.history(0)]
        location = handle.location
    finally:
        backend.close()
    data = jsonio.dumps({"format": FORMAT, "v": VERSION, "run": picked.entry.run_id, "source": location,
                         "exportedAt": stamp(), "doc": doc, "history": history}) + b"\n"
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
    click.echo(f"{target}: run {picked.entry.run_id}, {len(history)} event(s)")


def read_export(path: str) -> dict[str, Any]:
    """The export file at ``path``: a regular file (never a link, a FIFO or a device), whole."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        what = "is a symbolic link" if exc.errno == errno.ELOOP else (exc.strerror or str(exc))
        raise InvalidInputError(f"cannot read {path}: {what}") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InvalidInputError(f"cannot read {path}: not a regular file")
        if st.st_size > _MAX_BYTES:
            raise InvalidInputError(f"cannot read {path}: {st.st_size} bytes is more than an export holds")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    except OSError as exc:
        raise InvalidInputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    try:
        value = jsonio.loads(b"".join(chunks))
    except ValueError as exc:
        raise InvalidInputError(f"{path}: not a resumable export (not JSON: {exc})") from exc
    if not isinstance(value, dict) or value.get("format") != FORMAT:
        raise InvalidInputError(f"{path}: not a resumable export (write one with `resumable export RUN`)")
    version = value.get("v")
    if not isinstance(version, int) or version > VERSION:
        raise InvalidInputError(f"{path}: export format {version!r} is newer than this resumable reads; upgrade")
    history, doc = value.get("history"), value.get("doc")
    if not isinstance(history, list) or not history or not all(isinstance(e, dict) and isinstance(e.get("t"), str)
                                                               for e in history):
        raise InvalidInputError(f"{path}: its history is not a non-empty list of events")
    if not isinstance(doc, dict) or not isinstance(value.get("run"), str):
        raise InvalidInputError(f"{path}: it has no run id or no document")
    return value


def plan_import(run_id: str, history: list[Event]) -> list[list[Event]]:
    """The commits that rebuild the run: its init alone, then everything else at once."""
    first, rest = history[0], history[1:]
    if first.get("t") != "init":
        # A run whose history starts from an adopted document (a seed file): an init to adopt it into.
        init: InitEvent = {"t": "init", "id": run_id, "task": "imported", "units": [], "at": first.get("at", stamp())}
        first, rest = init, history
    return [[first], rest] if rest else [[first]]


@click.command("import", cls=command_class(), short_help="Read a run exported from another store.")
@click.argument("file")
@_DIR
@_STORE
def import_command(file: str, runs_dir: str | None, store_url: str | None) -> None:
    """Read FILE (written by `resumable export`) into this store: the run's whole history is
    replayed, so `log`, `report` and `status` show it as the source did. Refused (exit 2) when
    a run with its id already exists here."""
    from resumable.core.model import check_run_id

    value = read_export(file)
    run_id = check_run_id(value["run"])
    history: list[Event] = value["history"]
    backend = store.open_backend(runs_dir, url=store_url)
    try:
        handle = backend.open(run_id)
        if handle.exists():
            raise RefusedError(f"run {run_id} already exists in {backend.root}: import it into another store,"
                               " or delete it first (resumable run --job ID --reset)")
        commits = plan_import(run_id, history)
        handle.commit(commits[0])
        try:
            for events in commits[1:]:
                handle.commit(events)
            doc = handle.read()
        except ResumableError as exc:
            backend.delete(run_id)  # nothing half imported is left behind
            raise StoreError(f"{file}: the history does not replay ({exc}); nothing was imported") from exc
        handle.close()
    finally:
        backend.close()
    same = jsonio.dumps(doc) == jsonio.dumps(value["doc"])
    click.echo(f"imported run {run_id} into {backend.root}: {len(history)} event(s)"
               + ("" if same else "; note: the rebuilt document differs from the exported one"))
