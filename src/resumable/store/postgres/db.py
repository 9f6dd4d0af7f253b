"""Connections to the database: the one place that opens them, runs transactions, rides out a
server restart, and turns the driver's errors into resumable's one-line errors.

A transaction is a function of a connection, run by ``Db.transact``. It is retried, from the
start, when the server aborted it (a deadlock or serialization failure: nothing was written) and,
after reconnecting, when the connection was lost before ``COMMIT`` was sent. A connection lost
*during* ``COMMIT`` leaves the outcome unknown: the caller's ``probe`` asks the database whether
the transaction's writes are there, so nothing is applied twice; without a probe the error says
the write may or may not have been saved, as the file store says of a failed rollback.

``patience`` is how long to keep reconnecting before giving up with one line: a command a person
typed gives up at once, a worker waits for the server to come back (a restart, a failover).

No call waits forever (``session_options``): every session has a statement, lock and idle-in-
transaction timeout, TCP keepalives and a TCP user timeout (a server that vanished without a word
is noticed), and a transaction's output is drained within a bound before its COMMIT (``_drain``).
Past a bound the transaction is rolled back and the caller gets one line.
"""

from __future__ import annotations

import logging
import os
import random
import select
import socket
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg import errors as pgerrors

from resumable.errors import InvalidInputError, StoreError
from resumable.store.postgres.urls import redact

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from psycopg_pool import ConnectionPool

T = TypeVar("T")

# The driver and its pool log a broken connection as they discard it; resumable says what matters in
# its own one-line messages, so their records go nowhere (not to the last-resort stderr handler).
logging.getLogger("psycopg").addHandler(logging.NullHandler())

Connection = psycopg.Connection[Any]

# Aborted by the server with nothing written: run the transaction again.
_RETRY_AT_ONCE = (pgerrors.SerializationFailure, pgerrors.DeadlockDetected)
_CONNECT_TIMEOUT = 10

# The bounds of every session, in milliseconds (see "Limits and timeouts" in docs/many-machines.md).
# Generous next to what resumable's statements take (a 200,000-unit init commits in seconds), tight
# next to "forever". A URL's own ``options=-c ...`` come after these, so a user's setting wins.
STATEMENT_TIMEOUT_MS = 10 * 60 * 1000
LOCK_TIMEOUT_MS = 2 * 60 * 1000
IDLE_IN_TRANSACTION_MS = 10 * 60 * 1000
# A sent byte unacknowledged this long means the server is gone (a cable pulled, a host powered
# off): the socket errors out instead of waiting for the kernel's retransmissions (~15 minutes).
TCP_USER_TIMEOUT_MS = 60 * 1000
# How long the client waits for the server to take the rest of a transaction's statements.
DRAIN_TIMEOUT = STATEMENT_TIMEOUT_MS / 1000


def first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0].strip()


def host_name() -> str:
    return socket.gethostname()


class LostConnection(StoreError):
    """The connection to the server was lost and could not be made again within the patience."""


class RefusedValue(InvalidInputError):
    """The server refused a value of the transaction (a data error: a timestamp or a number out of
    range, text it cannot hold). Permanent: the same transaction fails the same way, so it is not
    a ``StoreError``, which long-lived callers (a worker) ride out by trying again; it ends them."""


def session_options(url: str) -> dict[str, Any]:
    """The keyword arguments of every connection: the session's bounds (see the module docstring),
    the URL's own ``options`` after them."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        given = conninfo_to_dict(url).get("options") or ""
    except psycopg.Error:
        given = ""  # a malformed URL is reported by the connect that uses it
    bounds = (f"-c statement_timeout={STATEMENT_TIMEOUT_MS} -c lock_timeout={LOCK_TIMEOUT_MS}"
              f" -c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_MS}")
    # Every statement resumable sends finds its rows by key (queries.sql), so the plan the server
    # makes once for a prepared statement is as good as one made for each call's values; planned
    # again at every call, the workers' statements spent a fifth of their server time planning.
    plans = "-c plan_cache_mode=force_generic_plan"
    return {"connect_timeout": _CONNECT_TIMEOUT, "application_name": "resumable",
            "options": f"{bounds} {plans} {given}".strip(), "keepalives": 1, "keepalives_idle": 30,
            "keepalives_interval": 10, "keepalives_count": 3, "tcp_user_timeout": TCP_USER_TIMEOUT_MS}


class Db:
    """Connections to one database for one process (not thread-safe)."""

    def __init__(self, url: str, *, patience: float = 0.0) -> None:
        self.url = url
        self.display = redact(url)
        self.patience = patience
        self._conn: Connection | None = None
        self._pool: ConnectionPool | None = None
        self.pid = os.getpid()

    # -- connections ----------------------------------------------------------------------------

    def connect(self, *, autocommit: bool = False) -> Connection:
        """A new connection of its own (LISTEN, advisory locks), or a one-line StoreError."""
        try:
            return psycopg.connect(self.url, autocommit=autocommit, **session_options(self.url))
        except psycopg.Error as exc:
            raise StoreError(f"cannot connect to {self.display}: {first_line(exc)} — is the server"
                             " running? check --store / RESUMABLE_STORE") from exc

    def use_pool(self, size: int = 2) -> None:
        """Hand out connections from a psycopg_pool pool from now on: a long-lived process (a
        worker) gets a connection broken by a server restart replaced in the background."""
        if self._pool is not None:
            return
        from psycopg_pool import ConnectionPool

        self._drop_single()
        self._pool = ConnectionPool(
            self.url, min_size=1, max_size=max(1, size), open=False, name="resumable",
            kwargs={"autocommit": False, **session_options(self.url)},
            reconnect_timeout=max(self.patience, 1.0))
        self._pool.open(wait=False)

    def _get(self, patience: float) -> Connection:
        if self._pool is not None:
            from psycopg_pool import PoolTimeout

            wait = max(patience, 1.0)
            try:
                return self._pool.getconn(timeout=wait)
            except PoolTimeout as exc:
                raise LostConnection(f"cannot connect to {self.display}: no connection within"
                                     f" {wait:g}s — is the server running?") from exc
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._drop_single()
            self._conn = self.connect()
        return self._conn

    def _put(self, conn: Connection) -> None:
        if self._pool is not None:
            self._pool.putconn(conn)

    def _drop_single(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except psycopg.Error:
                pass
            self._conn = None

    def close(self) -> None:
        if os.getpid() != self.pid:
            return  # a forked child must not close its parent's sockets
        self._drop_single()
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    # -- transactions ---------------------------------------------------------------------------

    def transact(self, fn: Callable[[Connection], T], *, what: str,
                 probe: Callable[[Connection], bool] | None = None, patience: float | None = None,
                 pipeline: bool = False, single: bool = False) -> T:
        """Run ``fn(conn)`` in a transaction and commit it; see the module docstring for retries.
        ``fn`` must be safe to run again from the start (it is, when a retry happens, as if it
        had never run: the server rolled it back). ``patience`` overrides the Db's for this call
        (a heartbeat gives up at once and tries again at the next beat). ``pipeline``: statements
        whose results ``fn`` does not read at once travel together, the last with the COMMIT (one
        round trip less per statement; ``fn`` must not COPY). ``single``: ``fn`` sends one statement,
        which is the whole transaction: the server commits it as it ends (autocommit), in one
        round trip with no BEGIN or COMMIT of its own; its outcome is unknown from the start if
        the connection is lost."""
        patience = self.patience if patience is None else patience
        deadline = time.monotonic() + patience
        pause = 0.05
        while True:
            try:
                conn = self._get(patience)
            except StoreError:
                if time.monotonic() >= deadline:
                    raise
                pause = _sleep(pause)
                continue
            committing = False
            try:
                if single:
                    committing = True
                    with _autocommit(conn):
                        result = fn(conn)
                elif pipeline:
                    with _pipelined(conn):
                        result = fn(conn)
                        _drain(conn, DRAIN_TIMEOUT)
                        committing = True
                        conn.execute("COMMIT")
                else:
                    result = fn(conn)
                    committing = True
                    conn.commit()
                return result
            except _RETRY_AT_ONCE:
                _rollback(conn)
                time.sleep(random.uniform(0, 0.01))
                continue
            # A bound of the session (lock_timeout, statement_timeout): the server cancelled the statement.
            except (pgerrors.LockNotAvailable, pgerrors.QueryCanceled) as exc:
                _rollback(conn)
                raise StoreError(f"{self.display}: {what}: {first_line(exc)} — the server's bound was reached;"
                                 " nothing was written, try again") from exc
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                if not (conn.closed or conn.broken):
                    _rollback(conn)
                    raise StoreError(f"{self.display}: {what}: {first_line(exc)}") from exc
                lost = exc
            except psycopg.DataError as exc:
                _rollback(conn)
                raise RefusedValue(f"{self.display}: {what}: {first_line(exc)} — the database refused a value;"
                                   " trying again cannot help") from exc
            except psycopg.Error as exc:
                _rollback(conn)
                raise StoreError(f"{self.display}: {what}: {first_line(exc)}") from exc
            except BaseException:
                _rollback(conn)
                raise
            finally:
                self._put(conn)
            # The connection is gone. Reconnect (within the patience) and find out what happened.
            self._drop_single()
            if time.monotonic() >= deadline:
                raise LostConnection(
                    f"lost the connection to {self.display} while trying to {what}: {first_line(lost)}"
                    + (" — the write may or may not have been saved" if committing and probe is None else ""))
            if committing:
                if probe is None:
                    raise LostConnection(f"lost the connection to {self.display} while committing ({what}):"
                                         " the write may or may not have been saved")
                if self._probe(probe, max(deadline, time.monotonic() + 5.0), patience):
                    return result
            pause = _sleep(pause)

    def _probe(self, probe: Callable[[Connection], bool], deadline: float, patience: float) -> bool:
        """Whether an ambiguous commit happened, asked on a fresh connection (waits for one)."""
        pause = 0.05
        while True:
            try:
                conn = self._get(patience)
            except StoreError:
                if time.monotonic() >= deadline:
                    raise
                pause = _sleep(pause)
                continue
            try:
                answer = probe(conn)
                conn.rollback()
                return answer
            except (psycopg.OperationalError, psycopg.InterfaceError):
                self._drop_single()
                if time.monotonic() >= deadline:
                    raise LostConnection(f"lost the connection to {self.display} and could not learn"
                                         " whether the last write was saved") from None
                pause = _sleep(pause)
            finally:
                self._put(conn)

    def read(self, fn: Callable[[Connection], T], *, what: str, patience: float | None = None) -> T:
        """A read-only transaction (retried like any other; there is nothing to commit)."""
        return self.transact(fn, what=what, patience=patience)


@contextmanager
def _autocommit(conn: Connection) -> Iterator[None]:
    """The connection in autocommit mode for a while (each statement its own transaction, or
    explicit BEGIN and COMMIT statements), then back as the pool hands it out."""
    conn.autocommit = True
    try:
        yield
    finally:
        _rollback(conn)  # a transaction left open by an error is not carried into the next use
        if not (conn.closed or conn.broken):
            try:
                conn.autocommit = False
            except psycopg.Error:
                conn.close()  # a connection in no state to be used again is not handed out


@contextmanager
def _pipelined(conn: Connection) -> Iterator[None]:
    """A transaction in pipeline mode whose BEGIN and COMMIT are statements of the pipeline, so
    they travel with the statements next to them. (psycopg's own BEGIN in pipeline mode waits for
    its answer, and its commit() inside a pipeline and the pipeline's end each wait for one more:
    three round trips a transaction spends on nothing but its bounds.) The connection is in
    autocommit mode meanwhile, so psycopg adds no BEGIN of its own; the COMMIT's answer, and
    every other not read yet, arrive when the pipeline ends."""
    with _autocommit(conn), conn.pipeline():
        conn.execute("BEGIN")
        yield


def _drain(conn: Connection, timeout: float) -> None:
    """Send everything the pipeline still holds before its COMMIT is queued.

    psycopg's pipeline sends a command and stops after one partial write when no command is left
    to send; its COMMIT then waits for an answer to statements the server has not fully received,
    and both sides wait forever (the server in ``ClientRead``, the client in ``poll``). A statement
    larger than the socket's buffers (a 200,000-unit init, a long import) is enough. So the
    output is written here, to the last byte, while what the server answers meanwhile is read into
    libpq's buffer (a server blocked on a full send buffer would stop reading ours); the COMMIT and
    the Sync that follow are a few bytes, which one write takes whole."""
    pgconn = conn.pgconn
    deadline = time.monotonic() + timeout
    while pgconn.flush() == 1:  # 1: part of the output is still in libpq's buffer
        left = deadline - time.monotonic()
        if left <= 0:
            # Closed, not rolled back: a rollback would queue behind the output that cannot be sent.
            conn.close()
            raise psycopg.OperationalError(f"the server took no more of the statements within {timeout:g}s")
        readable, _, _ = select.select([pgconn.socket], [pgconn.socket], [], left)
        if readable:
            pgconn.consume_input()


def _rollback(conn: Connection) -> None:
    if conn.closed or conn.broken:
        return
    try:
        conn.rollback()
    except psycopg.Error:
        pass


def _sleep(pause: float) -> float:
    time.sleep(pause * random.uniform(0.5, 1.0))
    return min(pause * 2, 2.0)
