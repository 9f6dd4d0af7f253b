"""Adopting ulpi's event log (``<id>.events.jsonl``) when it is ahead of the run.

ulpi appends a transition to its log (fsynced), then renames a new snapshot into place; a crash
between the two leaves the log ahead of the snapshot, and only ulpi's next append would repair
it. resumable reads such a run as ulpi would: readers see the replayed document, and the next
write adopts it as the run's base (a ``base`` journal record whose reason says so) before applying
its own change. The log itself is never written (``ulpi_eventlog`` only reads it).

How a run knows it has taken the log in: an adoption stores, in the adopted document,
``adoptedEventLog: {"file", "events", "afterHash"}`` (``afterHash``: the last record adopted), and
so does the first write to a ulpi run whose log is in step with its snapshot (``note_in_sync``: the
log's document is the run's). The key travels with the document through the journal, the snapshot
and every catch-up, so "already adopted" costs one read of the log's last line, however long the
log and the run. Then:

- the recorded afterHash is the log's last one, or (nothing recorded) the document's digest is (ulpi's
  own in-sync test): nothing to adopt;
- the run has no document yet (ulpi crashed between writing its log and its first snapshot):
  the replayed document is adopted;
- the document's digest is an earlier afterHash of the chain (the snapshot is stale): the replayed
  document is adopted (it is the snapshot plus the records after it, by the chain's hashes);
- the recorded afterHash is an earlier one (ulpi appended more after our adoption and crashed
  before its snapshot): the records after it are applied to the run's document, so what resumable
  recorded since is kept (ulpi itself would have dropped it);
- neither hash is in the chain: the log and the run diverged (ulpi's own store wrote the
  snapshot without the log, or resumable wrote since): the snapshot and journal stay the run's
  truth and nothing is adopted.

A log that cannot be verified (a corrupt complete line, a broken chain, a link or FIFO in its
place) fails reads and writes alike, in one line naming the file and the line: guessing which
document ulpi meant would risk losing its writes.
"""

from __future__ import annotations

import os
from typing import Final, cast  # loaded already: ulpi_eventlog imports typing

from resumable import fsio
from resumable.errors import CorruptRunError, StoreError
from resumable.store.files import ulpi_eventlog
from resumable.store.files.layout import RunFiles

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from resumable.core.types import RunDocument as Doc

KEY: Final = "adoptedEventLog"


class Adoption:
    """The document to adopt and the reason its base record gives."""

    __slots__ = ("doc", "reason")

    def __init__(self, doc: Doc, reason: str) -> None:
        self.doc = doc
        self.reason = reason


def recorded_hash(doc: object) -> str | None:
    """The afterHash an earlier adoption recorded in ``doc``, if any."""
    meta = doc.get(KEY) if isinstance(doc, dict) else None
    value = meta.get("afterHash") if isinstance(meta, dict) else None
    return value if isinstance(value, str) else None


def consider(files: RunFiles, doc: Mapping[str, Any] | None) -> Adoption | None:
    """What the run whose document is ``doc`` (None: no snapshot and no journal) must adopt from
    its event log, or None. Raises CorruptRunError / StoreError (one line) for a log that cannot
    be verified."""
    try:
        return _consider(files, doc)
    except CorruptRunError as exc:
        raise CorruptRunError(
            f"{exc} — nothing was changed; resumable never writes ulpi's event log: repair it"
            " or move it aside to use the snapshot") from exc
    except StoreError as exc:
        raise StoreError(f"{exc} — move it aside to use the snapshot") from exc


def _consider(files: RunFiles, doc: Mapping[str, Any] | None) -> Adoption | None:
    name = os.path.basename(files.events)
    recorded = recorded_hash(doc)
    if doc is not None:
        # The cheap test first: one read of the log's last line, one digest at most.
        last = ulpi_eventlog.last_after_hash(files.snapshot)
        if last == (recorded if recorded is not None else ulpi_eventlog.digest(doc)):
            return None
    replayed = ulpi_eventlog.replay(files.snapshot, keep_records=recorded is not None)
    hashes = replayed.after_hashes
    if doc is None:
        return Adoption(_stamped(replayed.doc, name, replayed),
                        f"adopted {name}: no snapshot; rebuilt from its {_events(replayed.events)}")
    if recorded is not None:
        if recorded == hashes[-1] or recorded not in hashes:
            return None  # in sync after all (the log grew between the reads), or a new log
        at = _last_index(hashes, recorded)
        # records[i] took the chain from hashes[i] to hashes[i + 1].
        merged = ulpi_eventlog.apply_events(doc, replayed.records[at:])
        return Adoption(_stamped(merged, name, replayed),
                        f"adopted {name}: {_events(len(hashes) - 1 - at)} ahead of the snapshot")
    mine = ulpi_eventlog.digest(doc)
    if mine == hashes[-1] or mine not in hashes:
        return None  # in sync after all, or diverged: the snapshot stays the truth
    ahead = len(hashes) - 1 - _last_index(hashes, mine)
    return Adoption(_stamped(replayed.doc, name, replayed),
                    f"adopted {name}: {_events(ahead)} ahead of the snapshot")


def note_in_sync(files: RunFiles, doc: Doc) -> None:
    """When a ulpi document is first imported (its first resumable write) and its event log is in
    step with it, record the log's position in it as an adoption would: events ulpi appends
    later are then known to be new (and merged) rather than taken for a diverged log."""
    mine = ulpi_eventlog.digest(doc)
    if mine != ulpi_eventlog.last_after_hash(files.snapshot):
        return  # diverged: nothing of the log is in the document
    try:
        events = fsio.read_bytes(files.events).count(b"\n")  # complete records; never through a link
    except OSError as exc:
        raise StoreError(f"cannot read {files.events}: {exc.strerror or exc}") from exc
    doc[KEY] = {"file": os.path.basename(files.events), "events": events, "afterHash": mine}


def _last_index(hashes: tuple[str, ...], value: str) -> int:
    # The latest state with that hash: a chain can come back to an earlier document (set, then
    # delete), and the latest match leaves the fewest records to adopt.
    return len(hashes) - 1 - hashes[::-1].index(value)


def _events(n: int) -> str:
    return f"{n} event{'' if n == 1 else 's'}"


def _stamped(doc: dict[str, object], name: str, replayed: ulpi_eventlog.Replayed) -> Doc:
    doc[KEY] = {"file": name, "events": replayed.events, "afterHash": replayed.last_hash}
    # ulpi's document (an object, as its replay checked): held as a run's document from now on, and
    # judged by its readers as any stored one (``core.model.is_document``).
    return cast("Doc", doc)
