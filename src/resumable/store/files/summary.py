"""A large run's digests as of its snapshot, kept by the writer that wrote the snapshot, so that
``status``, ``get --summary`` and ``resume`` on a run at rest read one small file instead of every
unit's digest line in the index.

Kept in the runs directory's cache (``cache``: checksummed, the owner's alone, never read through
a link) when a writer refreshes the snapshot of a run that has an index: the document without its
units, each distinct digest once (``index.digest``: the fields the views count), and each unit's
digest by position. It is the document only while the run is as the writer left it: the snapshot
is the very file it wrote (inode, size, mtime_ns: another program's edit is a new inode or a new
mtime), the journal has no record after it (same inode, size and mtime_ns: every write appends),
and the index reflects the same record (its whole units are read from there for the few units a
view details). Readers check all three, and otherwise read the index as before. Readers never
write it (``status`` never writes).
"""

from __future__ import annotations

import os

from resumable.core import jsonio

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from resumable.store.files.digests import DigestView
    from resumable.store.files.layout import RunFiles

FORMAT = 1


def _name(files: RunFiles) -> str:
    import hashlib

    return "summary." + hashlib.sha256(os.path.abspath(files.snapshot).encode("utf-8", "surrogateescape")
                                       ).hexdigest()[:32]


def _stat(path: str) -> list[int] | None:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return [st.st_ino, st.st_size, st.st_mtime_ns]


def keep(files: RunFiles, doc: Mapping[str, Any], seq: int) -> None:
    """Keep the summary of ``doc``, the document as of journal record ``seq`` whose snapshot was
    just written (best effort; only for a run with an index, in a runs directory with a cache)."""
    from resumable.store.files import cache
    from resumable.store.files.index import digest

    units = doc.get("units")
    if not isinstance(units, dict) or not os.path.lexists(files.index) \
            or not os.path.isdir(os.path.join(files.dir, cache.DIR)):
        return
    snap, journal = _stat(files.snapshot), _stat(files.journal)
    if snap is None or journal is None:
        return
    ids = "\n".join(units)
    if ids.count("\n") != len(units) - 1 and units:
        return  # an id with a newline in it: not kept (the ids are stored one a line)
    table: dict[bytes, int] = {}
    which: list[int] = []
    for unit in units.values():
        text = jsonio.dumps(digest(unit))
        which.append(table.setdefault(text, len(table)))
    head = {k: ({} if k == "units" else v) for k, v in doc.items()}
    try:
        payload = b"".join((
            b'{"v": %d, "seq": %d, "snapshot": %s, "journal": %s, "head": ' % (
                FORMAT, seq, jsonio.dumps(snap), jsonio.dumps(journal)),
            jsonio.dumps(head), b', "ids": ', jsonio.dumps(ids),
            b', "table": [', b",".join(table), b'], "which": ', jsonio.dumps(which), b"}"))
        cache.write(files.dir, _name(files), payload)
    except (OSError, ValueError, TypeError):
        pass  # a cache: readers read the index


def read(files: RunFiles) -> DigestView | None:
    """The run as its digests, from the kept summary, when it is still the run; else None."""
    from resumable.store.files import cache
    from resumable.store.files.digests import DigestView
    from resumable.store.files.index import Index

    payload = cache.read(files.dir, _name(files))
    if payload is None:
        return None
    try:
        kept = jsonio.loads(payload)
        if kept.get("v") != FORMAT or _stat(files.snapshot) != kept["snapshot"] \
                or _stat(files.journal) != kept["journal"]:
            return None
        ix = Index.open(files.index)
        if ix is None:
            return None
        try:
            # The few units a view details are read whole from the index: it must be at this record.
            if ix.h.seq != kept["seq"] or ix.h.jend != kept["journal"][1]:
                return None
            header = ix.page
        finally:
            ix.close()
        ids = kept["ids"].split("\n") if kept["ids"] else []
        table = kept["table"]
        doc = kept["head"]
        doc["units"] = dict(zip(ids, [table[i] for i in kept["which"]], strict=True))
    except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError):
        return None
    return DigestView(files, doc, header, [])
