"""The computation the kill and pool tests map over: deterministic, so a fresh run can check it."""

from __future__ import annotations

import hashlib
import os
import time


def compute(i: int) -> dict[str, object]:
    digest = hashlib.sha256(str(i).encode()).hexdigest()
    return {"i": i, "digest": digest[:16], "square": i * i}


def log_execution(log: str, i: int) -> None:
    """Append "<pid> <item> <time>" to ``log`` (O_APPEND: a whole line or nothing), so that a test
    can tell which process ran which item, and when."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, f"{os.getpid()} {i} {time.time()}\n".encode())
    finally:
        os.close(fd)
