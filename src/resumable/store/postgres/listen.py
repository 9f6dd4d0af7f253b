"""``LISTEN``: a connection of its own that wakes a waiting process when something it cares about
is committed (a step became claimable, a run changed), so nothing polls in a tight loop.

Notifications are only a hint that it is worth looking again: a waiter always re-reads the state
after waking, and wakes anyway after its timeout, so a notification lost with a dropped connection
(a server restart) delays nothing by more than that timeout. The connection is made again on the
next wait after it was lost.
"""

from __future__ import annotations

import select
import time
from typing import TYPE_CHECKING

import psycopg
from psycopg import sql

from resumable.errors import StoreError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from resumable.store.postgres.db import Connection, Db


class Listener:
    def __init__(self, db: Db, channels: Sequence[str]) -> None:
        self.db = db
        self.channels = list(channels)
        self.conn: Connection | None = None
        self.payloads: list[str] = []  # received, not yet handed out
        self.ensure()
        self.payloads.clear()

    def ensure(self) -> bool:
        """Connected and listening; False (and retried on the next call) while the server is away."""
        if self.conn is not None and not self.conn.closed and not self.conn.broken:
            return True
        self.close()
        try:
            conn = self.db.connect(autocommit=True)
        except StoreError:
            return False
        try:
            for channel in self.channels:
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        except psycopg.Error:
            conn.close()
            return False
        self.conn = conn
        # Whatever was announced while the connection was down is lost: wake the waiter so that it
        # looks for itself (an empty payload: "something may have changed").
        self.payloads.append("")
        return True

    def fileno(self) -> int | None:
        """The socket to poll together with other descriptors (None while disconnected)."""
        if not self.ensure():
            return None
        assert self.conn is not None
        try:
            return self.conn.fileno()
        except psycopg.Error:
            return None

    def drain(self) -> list[str]:
        """Every payload received so far, without waiting."""
        if self.ensure():
            assert self.conn is not None
            try:
                self.payloads.extend(n.payload for n in self.conn.notifies(timeout=0))
            except psycopg.Error:
                self.close()
        out, self.payloads = self.payloads, []
        return out

    def wait(self, timeout: float, *, want: str | None = None) -> list[str]:
        """Wait up to ``timeout`` seconds for a notification (with payload ``want``, if given)."""
        deadline = time.monotonic() + timeout
        got: list[str] = []
        while True:
            got += self.drain()
            if got and (want is None or want in got or "" in got):
                return got
            left = deadline - time.monotonic()
            if left <= 0:
                return got
            fd = self.fileno()
            if fd is None:
                time.sleep(min(left, 0.5))  # the server is away: look again soon
                continue
            poller = select.poll()
            poller.register(fd, select.POLLIN | select.POLLERR | select.POLLHUP)
            poller.poll(left * 1000.0)

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except psycopg.Error:
                pass
            self.conn = None
