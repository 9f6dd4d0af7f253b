"""An exported run imported in one transaction (``store.transfer``, ``RunImporter``).

The run's row, its whole history, its snapshot and its stored values are written by one
transaction: a process killed half way, or a history that does not replay, leaves nothing, and
importing again starts afresh. The events are applied under the checkpoint rules exactly as
commits would apply them (``RunWriter.apply``), so the rebuilt document is the one commits build.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from resumable.store.postgres import runstate
from resumable.store.postgres.queries import Q
from resumable.store.postgres.runstate import RunState, RunWriter
from resumable.store.transfer import already_there

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from resumable.store.postgres.db import Connection
    from resumable.store.postgres.place import Place
    from resumable.store.values import Event


def import_run(place: Place, run_id: str, batches: Sequence[Sequence[Event]],
               blobs: Mapping[str, bytes]) -> Mapping[str, Any]:
    where = f"{place.root}#{run_id}"
    holder: list[RunWriter] = []

    def txn(conn: Connection) -> Mapping[str, Any]:
        conn.execute(Q.create_run, (run_id,))
        row = runstate.find_row(conn, run_id, lock=True)
        if row is None or row.seq > 0:
            raise already_there(run_id, place.root)
        writer = RunWriter(conn, row, RunState(row.pk, 0, None), run_id, where)
        holder[:] = [writer]
        for events in batches:
            writer.apply([cast("Event", dict(e)) for e in events])  # apply stamps: the caller's stay as they were
        writer.force_snapshot = True  # an import is read next: its document stored whole, not replayed
        if blobs:
            with conn.cursor() as cur:
                cur.executemany(Q.put_blob, [(row.pk, ref, data) for ref, data in blobs.items()])
        doc = writer.doc
        writer.save()
        return doc

    def probe(conn: Connection) -> bool:
        return bool(holder) and holder[0].saved(conn)

    out: Mapping[str, Any] = place.write(txn, what=f"import run {run_id}", probe=probe, pipeline=True, migrate=True)
    return out
