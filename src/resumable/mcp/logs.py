"""The tail of a step's log, read only inside the store the server was started on.

A unit records where its log is, and a document can be edited by hand: a recorded path is only
read when it is a file directly in the run's own log directory (``RunHandle.log_dir``), opened
without following a link at any component below the store, and only as a regular file (a FIFO
planted there would block the server). A log kept elsewhere (``--logs-dir``, ``--step-log``) is
named, not read. A worker's log (the PostgreSQL store) comes from the database. A cursor pages
backwards through a long log.
"""

from __future__ import annotations

import os
from typing import Any

from resumable import fsio
from resumable.errors import InvalidInputError, NoRunError, ResumableError
from resumable.mcp import answers
from resumable.mcp.answers import clip
from resumable.mcp.bound import BoundStore, bounded, unit_id
from resumable.store.backend import WorkQueue
from resumable.view.units import last_attempt

# What one answer carries of a log; the summary's tail of a failed step is shorter.
CHUNK = 10_000
SUMMARY_TAIL = 800
SUMMARY_LINES = 10


class Outside(Exception):
    """A recorded log path outside the run's log directory: named to the agent, never read."""


def _open_logs_dir(bound: BoundStore, log_dir: str) -> int:
    """The run's log directory, opened without following a link below the store's root (a runs
    directory); for a database store, the directory itself, not followed if it is a link."""
    root = bound.backend.root
    rel = os.path.relpath(log_dir, root) if not bound.is_database else None
    if rel is not None and not rel.startswith(".."):
        return fsio.open_dirs(root, [p for p in rel.split(os.sep) if p not in ("", ".")])
    return os.open(log_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)


def read_range(bound: BoundStore, handle: Any, path: str, end: int | None, cap: int) -> tuple[bytes, int, int]:
    """(bytes, from, size) of the file ``path`` in the run's log directory: the ``cap`` bytes that end
    at ``end`` (None: the end of the file)."""
    log_dir = os.path.normpath(handle.log_dir())
    if os.path.dirname(os.path.normpath(path)) != log_dir:
        raise Outside(path)
    dir_fd = _open_logs_dir(bound, log_dir)
    try:
        fd = fsio.open_regular(path, os.O_RDONLY, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    try:
        size = os.fstat(fd).st_size
        stop = size if end is None else min(end, size)
        start = max(0, stop - cap)
        os.lseek(fd, start, os.SEEK_SET)
        data = b""
        while len(data) < stop - start:
            chunk = os.read(fd, stop - start - len(data))
            if not chunk:
                break
            data += chunk
        return data, start, size
    finally:
        os.close(fd)


def whole_lines(data: bytes, start: int) -> tuple[bytes, int]:
    """Drop a partial first line when the chunk does not start at the file's beginning."""
    if start == 0:
        return data, start
    cut = data.find(b"\n")
    if cut < 0 or cut == len(data) - 1:
        return data, start
    return data[cut + 1:], start + cut + 1


def fitted(text: str, budget: int) -> str:
    """The end of ``text`` whose JSON takes at most ``budget`` bytes (control characters escape to
    six bytes each, so a log full of colour codes grows when encoded)."""
    while text and answers.size(text) > budget:
        text = text[len(text) // 4 or 1:]
    return text


def _unit(bound: BoundStore, handle: Any, rid: str, step: str) -> dict[str, Any]:
    view = bound.view(rid)
    got = view.whole([step]).get(step)
    if got is None:
        raise NoRunError(f"run {rid!r} has no unit {step!r} (list_units lists them)")
    if not isinstance(got, dict):
        raise InvalidInputError(f"unit {step!r} of run {rid!r} is malformed; it has no log")
    return got


def _attempt(unit: dict[str, Any], n: int | None) -> dict[str, Any] | None:
    attempts = unit.get("attempts")
    if n is None:
        got = last_attempt(unit)
        return dict(got) if got is not None else None
    if isinstance(attempts, list):
        for a in attempts:
            if isinstance(a, dict) and a.get("n") == n:
                return a
    raise InvalidInputError(f"the unit has no attempt {n}")


def tail_log(bound: BoundStore, run: str, step: str | None = None, attempt: int | None = None,
             cursor: str | None = None) -> dict[str, Any]:
    """The end of a step's log (its last attempt, or ``attempt``), or, without ``step``, the output of
    a `resumable run` this server started; ``next_cursor`` reads the part before."""
    if step is None:
        from resumable.mcp.bound import run_id

        started = bound.started.get(run_id(run))
        if started is None:
            raise InvalidInputError("give the step whose log to read (without one, tail_log reads the output"
                                    " of a `resumable run` this server started, and it started none for this run)")
        tail: dict[str, Any] = started.output_tail(cursor)
        return tail
    step = unit_id(step)
    if attempt is not None:
        attempt = bounded(attempt, "attempt", 1, 1 << 31)
    with bound.lock:
        handle = bound.handle(run)
        rid = handle.run_id
        query = answers.query_key("tail_log", run=rid, step=step, attempt=attempt)
        state = answers.read_cursor(cursor, query)
        end = answers.cursor_int(state, "end") if state else None
        unit = _unit(bound, handle, rid, step)
        att = _attempt(unit, attempt)
        n = att.get("n") if att else None
        path = (att.get("log") if att else None) or (unit.get("log") if attempt is None else None)
        out: dict[str, Any] = {"id": rid, "step": step, "attempt": n}
        if isinstance(path, str) and path:
            out["path"] = clip(path, 500)
            try:
                data, start, size = read_range(bound, handle, path, end, CHUNK)
            except Outside:
                out["note"] = ("the log is kept outside this store's log directory; this server reads only"
                               " inside its store: read the path yourself")
                return out
            except FileNotFoundError:
                data, start, size = _stored(bound, rid, step, n, end)
                if size < 0:
                    out["note"] = "the log file is gone (and no copy is stored)"
                    return out
            except OSError as exc:
                raise InvalidInputError(f"cannot read the log {path[:300]}: {exc.strerror or exc}") from None
        else:
            data, start, size = _stored(bound, rid, step, n, end)
            if size < 0:
                out["note"] = "no log is recorded for this attempt"
                return out
    data, start = whole_lines(data, start)
    text = fitted(data.decode("utf-8", "replace"), CHUNK)
    start += len(data) - len(text.encode("utf-8", "replace"))
    out.update({"size": size, "from": max(start, 0), "to": start + len(text.encode("utf-8", "replace")),
                "text": text})
    if start > 0:
        out["next_cursor"] = answers.make_cursor(query, {"end": start})
    return out


def _stored(bound: BoundStore, rid: str, step: str, n: object, end: int | None) -> tuple[bytes, int, int]:
    """A worker's log, kept in the database with its attempt: (bytes, from, size); size -1: none."""
    backend = bound.backend
    if not isinstance(backend, WorkQueue):
        return b"", 0, -1
    reader: Any = backend  # the PostgreSQL store keeps each attempt's log (``resumable db log``)
    got = reader.attempt_log(rid, step, n if isinstance(n, int) else None)
    if got is None or got[1] is None:
        return b"", 0, -1
    data: bytes = got[1]
    stop = len(data) if end is None else min(end, len(data))
    start = max(0, stop - CHUNK)
    return data[start:stop], start, len(data)


def summary_tail(bound: BoundStore, handle: Any, uid: str, unit: dict[str, Any]) -> list[str] | None:
    """The last few lines of a failed unit's last log, for a run's summary (None: none readable)."""
    att = last_attempt(unit)
    path = (att.get("log") if att else None) or unit.get("log")
    try:
        if isinstance(path, str) and path:
            data, start, _ = read_range(bound, handle, path, None, SUMMARY_TAIL)
        else:
            data, start, size = _stored(bound, handle.run_id, uid, att.get("n") if att else None, None)
            if size < 0:
                return None
            data = data[-SUMMARY_TAIL:]
    except (Outside, OSError, ResumableError):
        return None  # the summary stands without the tail (tail_log says why)
    data, start = whole_lines(data, start)
    lines = data.decode("utf-8", "replace").splitlines()[-SUMMARY_LINES:]
    return [clip(line, 200) for line in lines]
