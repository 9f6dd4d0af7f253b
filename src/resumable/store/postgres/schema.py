"""The database schema: versioned SQL migrations shipped with the package, applied in order.

``migrations/NNNN_name.sql`` is schema version NNNN. ``resumable_schema`` records every version
applied, so a database says which resumable it was made for. Applying takes a transaction-level
advisory lock (two processes starting at once apply each migration once) and runs each file in
the same transaction as its version row: a migration is applied whole or not at all.

The first write that creates a run (``init``, ``submit``, ``import``), and a worker, apply what is
missing, as ``resumable db upgrade`` does; a read of a database without the schema is refused in
one line and changes nothing. A database
whose schema is newer than this resumable knows is refused with one line (``NewerFormatError``),
never read: a newer resumable may store things an older one would misread or overwrite.
"""

from __future__ import annotations

from importlib.resources import files
from typing import TYPE_CHECKING

from psycopg import sql

from resumable.errors import NewerFormatError, StoreError

if TYPE_CHECKING:
    from resumable.store.postgres.db import Connection, Db

class NoSchemaError(StoreError):
    """The database has no resumable schema: resumable never wrote to it (exit 1). A run's handle
    reads it as "no such run" where a caller only looks (before an init that creates the run)."""


_LOCK_KEY = 0x7265_7375  # "resu": the advisory lock migrations take
_VERSION_TABLE = "resumable_schema"


def migrations() -> list[tuple[int, str, str]]:
    """(version, name, SQL) of every migration shipped, in order."""
    out = []
    for entry in files("resumable.store.postgres").joinpath("migrations").iterdir():
        name = entry.name
        if not name.endswith(".sql") or not name[:4].isdigit():
            continue
        out.append((int(name[:4]), name[:-4], entry.read_text(encoding="utf-8")))
    out.sort()
    return out


def latest() -> int:
    return migrations()[-1][0]


def current(conn: Connection) -> int | None:
    """The database's schema version, or None when resumable never used it."""
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (_VERSION_TABLE,)).fetchone()
    if not row or not row[0]:
        return None
    got = conn.execute(sql.SQL("SELECT max(version) FROM {}").format(sql.Identifier(_VERSION_TABLE))).fetchone()
    return int(got[0]) if got and got[0] is not None else 0


def check(db: Db, *, migrate: bool) -> int:
    """The schema version in use; ``NewerFormatError`` when the database is newer than this
    resumable. ``migrate`` (a write that creates a run, a worker, ``db upgrade``): apply what is
    missing; otherwise a database without the schema, or with an older one, is refused in one
    line and left as it is: a read never changes a database, whichever it was pointed at."""
    have = db.read(current, what="read the schema version")
    if have is not None and have >= latest():
        _refuse_newer(db, have)
        return have
    if not migrate:
        if have is None:
            raise NoSchemaError(f"no resumable schema in {db.display}; run `resumable db upgrade` (or point"
                             " --store / RESUMABLE_STORE at the database that holds the runs)")
        raise StoreError(f"the database at {db.display} has resumable schema version {have}, older than this"
                         f" resumable's ({latest()}); run `resumable db upgrade`")
    return upgrade(db)[1]


def _refuse_newer(db: Db, have: int) -> None:
    if have > latest():
        raise NewerFormatError(
            f"the database at {db.display} has resumable schema version {have}, newer than this"
            f" resumable knows ({latest()}): it was written by a newer resumable — upgrade resumable")


def upgrade(db: Db) -> tuple[int | None, int]:
    """Apply every migration the database lacks; returns (version before, version after)."""

    def apply(conn: Connection) -> tuple[int | None, int]:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        before = current(conn)
        if before is None:
            conn.execute(sql.SQL(
                "CREATE TABLE {} (version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())").format(sql.Identifier(_VERSION_TABLE)))
        have = before or 0
        _refuse_newer(db, have)
        for version, name, text in migrations():
            if version <= have:
                continue
            conn.execute(text.encode("utf-8"))
            conn.execute(sql.SQL("INSERT INTO {} (version, name) VALUES (%s, %s)").format(
                sql.Identifier(_VERSION_TABLE)), (version, name))
            have = version
        return before, have

    from psycopg import errors as pgerrors

    for _ in range(5):
        try:
            return db.transact(apply, what="apply the schema migrations")
        except StoreError as exc:
            # Another process created the tables first; its commit can escape the catalog lookups of
            # a transaction that waited on the lock, so look again in a fresh one.
            if not isinstance(exc.__cause__, (pgerrors.DuplicateTable, pgerrors.DuplicateObject,
                                              pgerrors.UniqueViolation)):
                raise
    return db.transact(apply, what="apply the schema migrations")
