"""Moving a run between stores: the export file, and replaying it into another store.

The file is one JSON object::

    {"format": "resumable-export", "v": 2, "run": ID, "source": WHERE, "exportedAt": STAMP,
     "doc": {...}, "history": [event, ...], "blobs": {"sha256:<hex>": "<base64>", ...}}

``blobs`` carries every stored value the run refers to (durable results over 64 KiB live beside the
run, not in its document): without them an imported run looks whole and fails at its first cache
hit. Each is checked against its hash on import, and an export that lacks one its history refers
to (a version 1 file never carried them) is refused, never imported half.

Import replays the history through the target store's checkpoint rules (``core.events.apply``),
so the target builds the document exactly as the source did; the events keep their stamps. A
history that starts from an adopted document (an ulpi or OmniNode file's ``base``) gets an ``init`` first. A
store that can (``RunImporter``: PostgreSQL) imports in one transaction, whole or not at all.
"""

from __future__ import annotations

import base64
import binascii
import errno
import hashlib
import os
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from resumable.core import jsonio
from resumable.core.stamps import stamp
from resumable.errors import InvalidInputError, RefusedError, StoreError
from resumable.store.backend import RunImporter

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from resumable.store.backend import Backend, RunHandle
    from resumable.store.values import Doc, Event

FORMAT = "resumable-export"
VERSION = 2
_MAX_BYTES = 1 << 31
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True, slots=True)
class Export:
    run_id: str
    doc: dict[str, object]  # as the file holds it: the store judges the document it rebuilds
    history: list[Event]  # objects with a string ``t``; the checkpoint rules judge the rest on import
    blobs: dict[str, bytes]


def is_ref(value: object) -> bool:
    if not isinstance(value, str) or not value.startswith("sha256:"):
        return False
    digest = value[7:]
    return len(digest) == 64 and _HEX.issuperset(digest)


def blob_refs(values: Iterable[Any]) -> set[str]:
    """Every stored value referred to in ``values``: a stored result is an object with a ``codec``
    and a ``ref`` (``durable.codec``), found at any depth (a unit, an event, an adopted document)."""
    found: set[str] = set()
    stack = list(values)
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            if "codec" in value and is_ref(value.get("ref")):
                found.add(value["ref"])
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return found


def export_run(handle: RunHandle, run_id: str) -> tuple[bytes, int]:
    """The export file's bytes for the run behind ``handle``, and its number of events. Every stored
    value is read back (and so checked against its hash) as it is copied in."""
    doc = handle.read()
    history = [r.event for r in handle.history(0)]
    blobs = {ref: base64.b64encode(handle.get_blob(ref)).decode("ascii")
             for ref in sorted(blob_refs(history) | blob_refs([doc]))}
    data = jsonio.dumps({"format": FORMAT, "v": VERSION, "run": run_id, "source": handle.location,
                         "exportedAt": stamp(), "doc": doc, "history": history, "blobs": blobs}) + b"\n"
    return data, len(history)


def read_export(path: str) -> Export:
    """The export file at ``path``: a regular file (never a link, a FIFO or a device), whole, its
    stored values checked against their hashes."""
    value = _load(path)
    if not isinstance(value, dict) or value.get("format") != FORMAT:
        raise InvalidInputError(f"{path}: not a resumable export (write one with `resumable export RUN`)")
    version = value.get("v")
    if not isinstance(version, int) or version > VERSION:
        raise InvalidInputError(f"{path}: export format {version!r} is newer than this resumable reads; upgrade")
    history, doc, run_id = value.get("history"), value.get("doc"), value.get("run")
    if not isinstance(history, list) or not history or not all(isinstance(e, dict) and isinstance(e.get("t"), str)
                                                               for e in history):
        raise InvalidInputError(f"{path}: its history is not a non-empty list of events")
    if not isinstance(doc, dict) or not isinstance(run_id, str):
        raise InvalidInputError(f"{path}: it has no run id or no document")
    blobs = _blobs(path, value.get("blobs", {}))
    missing = sorted((blob_refs(history) | blob_refs([doc])) - blobs.keys())
    if missing:
        older = " (an export written before exports carried them)" if version < 2 else ""
        raise InvalidInputError(f"{path}: it lacks stored value {missing[0]}{older}, which the run refers to"
                                f" ({len(missing)} missing): export the run again with this resumable")
    return Export(run_id, doc, cast("list[Event]", history), blobs)


def _load(path: str) -> Any:
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
        return jsonio.loads(b"".join(chunks))
    except ValueError as exc:
        raise InvalidInputError(f"{path}: not a resumable export (not JSON: {exc})") from exc


def _blobs(path: str, raw: object) -> dict[str, bytes]:
    if not isinstance(raw, dict):
        raise InvalidInputError(f"{path}: its blobs are not an object of sha256:<hex> -> base64")
    out = {}
    for ref, text in raw.items():
        if not is_ref(ref) or not isinstance(text, str):
            raise InvalidInputError(f"{path}: blob {str(ref)[:80]!r} is not a sha256:<hex> reference with base64"
                                    " content")
        try:
            data = base64.b64decode(text.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError) as exc:
            raise InvalidInputError(f"{path}: stored value {ref} is not valid base64 ({exc})") from exc
        if hashlib.sha256(data).hexdigest() != ref[7:]:
            raise InvalidInputError(f"{path}: stored value {ref} does not match its hash: the file is damaged;"
                                    " export the run again")
        out[ref] = data
    return out


def plan_import(run_id: str, history: list[Event]) -> list[list[Event]]:
    """The commits that rebuild the run: its init alone, then everything else at once."""
    first, rest = history[0], history[1:]
    if first.get("t") != "init":
        # A run whose history starts from an adopted document (an ulpi or OmniNode file): an init to adopt it into.
        at = first.get("at")
        init: Event = {"t": "init", "id": run_id, "task": "imported", "units": [],
                       "at": at if isinstance(at, str) else stamp()}
        first, rest = init, history
    return [[first], rest] if rest else [[first]]


class AlreadyThere(RefusedError):
    """The target store has a run with the export's id (exit 2, as any refusal)."""


def already_there(run_id: str, root: str) -> AlreadyThere:
    return AlreadyThere(f"run {run_id} already exists in {root}: import it into another store, or delete it"
                        " first (resumable run --job ID --reset)")


def import_run(backend: Backend, export: Export, *, source: str) -> Mapping[str, Any]:
    """Rebuild the exported run in ``backend``; its document as rebuilt. ``RefusedError`` when a
    run with its id is there already; a history that does not replay is a ``StoreError`` and
    leaves nothing behind."""
    batches = plan_import(export.run_id, export.history)
    try:
        if isinstance(backend, RunImporter):
            return backend.import_run(export.run_id, batches, export.blobs)
        return _import_by_commits(backend, export.run_id, batches, export.blobs)
    except AlreadyThere:
        raise
    except (InvalidInputError, RefusedError) as exc:  # an event the checkpoint rules refuse
        raise StoreError(f"{source}: the history does not replay ({exc}); nothing was imported") from exc


def _import_by_commits(backend: Backend, run_id: str, batches: list[list[Event]],
                       blobs: Mapping[str, bytes]) -> Doc:
    """A store without one-transaction imports (a runs directory): the init, the stored values,
    then the rest of the history in one commit; a failure deletes what was written. A process
    killed between the two commits leaves the run holding the export's init alone: importing
    the same file again finishes that import instead of refusing it."""
    handle = backend.open(run_id)
    try:
        if not handle.exists():
            handle.commit(batches[0])
        elif len(batches) == 1 or not _interrupted_import(handle, batches[0]):
            raise already_there(run_id, backend.root)
        try:
            for data in blobs.values():
                handle.put_blob(data)  # its name is its hash: the same ref, checked on read
            for events in batches[1:]:
                handle.commit(events)
            return handle.read()
        except BaseException:
            backend.delete(run_id)  # nothing half imported is left behind
            raise
    finally:
        handle.close()


def _interrupted_import(handle: RunHandle, first: list[Event]) -> bool:
    """Whether the run's whole history is the export's first commit (its init): what an import
    killed before its second commit leaves."""
    history = [r.event for r in handle.history(0)]
    return jsonio.dumps(history) == jsonio.dumps(first)
