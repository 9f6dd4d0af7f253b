"""Picking the run a reader means: by id, file name, path or id prefix, or the newest.

Everything here only reads. It never creates the runs directory, never takes a lock and never
rewrites a file: `resumable status` must leave the store byte-identical (mtimes included), because
people run it against a live run while its runner writes.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from resumable import store
from resumable.errors import CorruptRunError, NewerFormatError, NoRunError, ResumableError, StoreError
from resumable.store.backend import DigestReading
from resumable.store.values import RunEntry

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from resumable.core.types import Unit
    from resumable.store.backend import Backend, RunHandle, RunnerLease


class Picked:
    """The run a reader picked: its listing entry, a handle to read it through, and the other runs
    whose id also starts with what the user typed (ulpi's run-status picks the first silently; we say so).
    ``detail``: when the entry's document holds digests for units (``pick_run(digests=True)``), how
    to read some units whole."""

    __slots__ = ("also_matched", "detail", "entry", "handle")

    def __init__(self, entry: RunEntry, handle: RunHandle, also_matched: list[str],
                 detail: Callable[[Iterable[str]], dict[str, Unit]] | None = None) -> None:
        self.entry = entry
        self.handle = handle
        self.also_matched = also_matched
        self.detail = detail


def entry_of(handle: RunHandle, name: str) -> RunEntry:
    try:
        doc = handle.read()
    except ResumableError as exc:
        return RunEntry(name, handle.location, None, str(exc), "", newer=isinstance(exc, NewerFormatError))
    return RunEntry(name, handle.location, doc, None, "")


def picked_digests(handle: RunHandle, name: str) -> Picked | None:
    """The run as its digests (``store.DigestReading``: a large run's units counted without
    decoding them whole), or None when the store can only give the whole document."""
    if not isinstance(handle, DigestReading):
        return None
    try:
        view = handle.load_digests()
    except ResumableError:
        return None  # the whole load says what is wrong, in its own words
    if view is None:
        return None

    def detail(ids: Iterable[str]) -> dict[str, Unit]:
        wanted = list(ids)
        got = view.units(wanted)
        if got is None:  # the run moved on meanwhile: these few units from the whole document
            units = handle.read().get("units")
            got = {u: units[u] for u in wanted if u in units} if isinstance(units, dict) else {}
        return got

    return Picked(RunEntry(name, handle.location, view.doc, None, ""), handle, [], detail)


def unreadable(entry: RunEntry) -> StoreError:
    """The error to end a command with for an entry that could not be read: a newer resumable's
    run stays "newer" (upgrade), never reported as a damaged file."""
    kind = NewerFormatError if entry.newer else CorruptRunError
    return kind(entry.error or f"cannot read {entry.location}")


def pick_run(backend: Backend, run: str | None, digests: bool = False) -> Picked | None:
    """The run a user means, or None when there are no runs at all (and none was named).

    RUN is a path ending in `.json` (used as given), an exact id or file name, or an id prefix.
    Raises NoRunError (exit 3) when RUN matches nothing. ``digests``: a run named exactly may come
    as its digests (``picked_digests``), for a reader that only counts its units."""
    if run is not None and (run.endswith(".json") or os.sep in run):
        inside = os.path.join(backend.root, run)
        path = run if os.path.isfile(run) else inside if os.sep not in run and os.path.isfile(inside) else None
        if path is None:
            raise NoRunError(f'no run matches "{run}" (no such file)')
        # ulpi's run-status also matches a bare file name inside the runs directory.
        handle = store.open_path(path)
        name = os.path.basename(run) if path == run else run
        return (picked_digests(handle, name) if digests else None) or Picked(entry_of(handle, name), handle, [])
    if run is not None:
        # An exact id goes straight to the run, so naming a run does not load every other run.
        direct: RunHandle | None
        try:
            direct = backend.open(run)
        except ResumableError:
            direct = None
        if direct is not None and direct.exists():
            handle = direct
            lite = picked_digests(handle, f"{run}.json") if digests else None
            if lite is not None and lite.entry.run_id == run:
                return lite
            entry = entry_of(handle, f"{run}.json")
            if entry.doc is None or entry.run_id == run:
                return Picked(entry, handle, [])
    entries = backend.list_runs()
    if run is None:
        if not entries:
            return None
        chosen = next((e for e in entries if e.doc is not None), entries[0])
        return Picked(chosen, _handle(backend, chosen), [])
    for entry in entries:
        if run in (entry.run_id, entry.name, entry.name.removesuffix(".json")):
            return Picked(entry, _handle(backend, entry), [])
    prefixed = [e for e in entries if e.run_id.startswith(run) or e.name.startswith(run)]
    if prefixed:
        chosen = prefixed[0]
        return Picked(chosen, _handle(backend, chosen), [e.run_id for e in prefixed[1:]])
    if not entries:
        raise NoRunError(f'no run matches "{run}": there are no runs under {backend.root}')
    raise NoRunError(f'no run matches "{run}" under {backend.root}')


def _handle(backend: Backend, entry: RunEntry) -> RunHandle:
    if entry.location.endswith(".json") and os.path.isabs(entry.location):
        return store.open_path(entry.location)
    return backend.open(entry.run_id)


def how_found(backend: Backend) -> str | None:
    """How a runs directory was found ("found walking up from /srv/x", "given with --dir", ...: the
    file store's description says), None for a database."""
    prefix = f"runs directory {backend.root} ("
    description = backend.description
    if not (description.startswith(prefix) and description.endswith(")")):
        return None
    return description[len(prefix):-1]


def store_option(backend: Backend) -> tuple[str, str] | None:
    """The option that names ``backend`` in a command a hint prints (``--dir DIR`` or ``--store URL``,
    without a password), or None when the command finds it by itself: a runs directory found by
    walking up from here (or the default here), which the same command run from here finds again."""
    root = backend.root
    if root.startswith(store.URL_SCHEMES):
        return ("--store", root)
    if "walking up from" in (how_found(backend) or ""):
        return None
    return ("--dir", root)


def lease_of(backend: Backend, entry: RunEntry) -> RunnerLease | None:
    """The runner lease of a run: the lease beside its file for a run read from a path (picked by
    one, its runs directory may not be ``backend``'s), else ``backend``'s; None when there is none."""
    try:
        if entry.location.endswith(".json") and os.path.isabs(entry.location):
            stem = os.path.basename(entry.location)[: -len(".json")]
            return store.open_backend(os.path.dirname(entry.location)).lease(stem)
        return backend.lease(entry.run_id)
    except ResumableError:
        return None
