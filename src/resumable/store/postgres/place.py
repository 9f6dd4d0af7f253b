"""Where the PostgreSQL store's runs live: one database, its schema checked once per process, the
transactions on it, and one long-lived handle per run. Everything in ``store.postgres`` works on a
``Place``; the backend (``backend.PgBackend``) is built on it and nothing below calls back into the
backend."""

from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING, TypeVar

from resumable.store.postgres import schema
from resumable.store.postgres.db import Db

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from resumable.store.postgres.db import Connection
    from resumable.store.postgres.handle import PgRunHandle
    from resumable.store.postgres.listen import Listener
    from resumable.store.postgres.snapshots import Refresher

T = TypeVar("T")


class Place:
    def __init__(self, url: str, *, patience: float = 0.0) -> None:
        self.db = Db(url, patience=patience)
        self.version: int | None = None
        self.no_schema: schema.NoSchemaError | None = None  # what a read of a database without it said
        self.handles: dict[str, PgRunHandle] = {}
        self.follow_ups: dict[int, tuple[str, bool]] = {}  # run row key -> (id, seen with nothing open)
        self._refresher: Refresher | None = None

    @property
    def root(self) -> str:
        return self.db.display

    def ready(self, *, migrate: bool = False) -> Db:
        """The database, its schema checked once per process; ``migrate``: brought up to date
        (writes that create a run, workers), else a database without it is refused."""
        if self.version is None:
            try:
                self.version = schema.check(self.db, migrate=migrate)
            except schema.NoSchemaError as exc:
                self.no_schema = exc
                raise
        return self.db

    def read(self, fn: Callable[[Connection], T], *, what: str, patience: float | None = None) -> T:
        return self.ready().read(fn, what=what, patience=patience)

    def write(self, fn: Callable[[Connection], T], *, what: str, probe: Callable[[Connection], bool] | None = None,
              patience: float | None = None, pipeline: bool = False, single: bool = False, migrate: bool = False) -> T:
        return self.ready(migrate=migrate).transact(fn, what=what, probe=probe, patience=patience, pipeline=pipeline,
                                                    single=single)

    def handle(self, run_id: str) -> PgRunHandle:
        """A long-lived handle (its cached document kept between transactions), one per run."""
        got = self.handles.get(run_id)
        if got is None:
            from resumable.core.model import check_run_id
            from resumable.store.postgres.handle import PgRunHandle

            got = self.handles[run_id] = PgRunHandle(self, check_run_id(run_id))
        return got

    def listener(self, channels: Sequence[str]) -> Listener:
        from resumable.store.postgres.listen import Listener

        return Listener(self.ready(), channels)

    def local_dir(self) -> str:
        """This host's directory for the runs of this database (step logs before they are stored)."""
        base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
        tag = hashlib.sha256(self.db.display.encode()).hexdigest()[:12]
        return os.path.join(base, "resumable", f"pg-{tag}")

    def refresher(self) -> Refresher:
        """Where snapshot refreshes are asked for (a thread of their own, started at first use)."""
        if self._refresher is None:
            from resumable.store.postgres.snapshots import Refresher

            self._refresher = Refresher(self.db.url)
        return self._refresher

    def close(self) -> None:
        if self._refresher is not None:
            self._refresher.close()
            self._refresher = None
        for handle in self.handles.values():
            handle.close()
        self.handles.clear()
        self.db.close()
