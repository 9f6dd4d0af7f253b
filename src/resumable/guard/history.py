"""``<NAME>-history.jsonl``: one JSON object per pass or breaker refusal, appended (``guard status
--history`` prints it). Informational: a line that cannot be parsed is shown as such, never fatal."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping

from resumable.core import jsonio
from resumable.guard.state import refuse_or_translate, refused

HISTORY_FORMAT = 1


def append(path: str, event: Mapping[str, object]) -> None:
    from resumable import fsio

    line = (jsonio.stdlib_dumps({"v": HISTORY_FORMAT, **event}, sort_keys=False) + "\n").encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     0o644)
    except OSError as exc:
        raise refuse_or_translate(exc, path) from exc
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise refused(path, mode)
        fsio.write_all(fd, line, path)
        fsio.fsync(fd, path)
    except OSError as exc:
        raise refuse_or_translate(exc, path) from exc
    finally:
        os.close(fd)


def read(path: str) -> list[dict[str, object] | None]:
    """Every event, oldest first (None for a line that is not a JSON object)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise refuse_or_translate(exc, path) from exc
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise refused(path, mode)
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read()
    finally:
        os.close(fd)
    events: list[dict[str, object] | None] = []
    for line in data.splitlines():
        try:
            event = jsonio.stdlib_loads(line)
        except ValueError:
            event = None
        events.append(event if isinstance(event, dict) else None)
    return events
