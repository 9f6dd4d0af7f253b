"""``--logs-dir DIR``: ``DIR/<id>.log`` is always the latest attempt's log, as checkpoint-run names it.

Each attempt writes its own numbered file, ``DIR/<id>.<n>.log``, which its attempt record names
for good (an earlier attempt's output is evidence, and a record must not come to name another
attempt's output). ``DIR/<id>.log`` is a hard link to the latest one, re-pointed as each attempt
is prepared, before its process starts, so ``tail -f DIR/<id>.log`` follows the running attempt.

Re-pointing links the numbered file under a temporary name and renames that over ``<id>.log``:
rename replaces the directory entry itself, so whatever was planted at that name (a link to a file
elsewhere, a FIFO) is replaced, never followed, truncated or waited on, and a reader never finds
the name missing. Nothing is ever written through ``<id>.log``: the step writes to the numbered file,
which is opened without following a link (``fsio.open_regular``).
"""

from __future__ import annotations

import os

from resumable import fsio


def latest_name(logs_dir: str, step_id: str) -> str:
    return os.path.join(logs_dir, f"{step_id}.log")


def point(numbered: str, latest: str) -> str | None:
    """Make ``latest`` a hard link to ``numbered`` (created empty if missing, never truncated: the
    step's spawn truncates it). Returns None, or one line saying why it could not be done (the
    step still runs and writes its numbered log)."""
    directory = os.path.dirname(latest) or "."
    tmp = os.path.join(directory, f".{os.path.basename(latest)}.{os.getpid()}.tmp")
    try:
        os.makedirs(directory, exist_ok=True)
        os.close(fsio.open_regular(numbered, os.O_WRONLY | os.O_CREAT))
        try:
            os.unlink(tmp)  # left by a runner killed between the link and the rename
        except FileNotFoundError:
            pass
        os.link(numbered, tmp, follow_symlinks=False)
        try:
            os.rename(tmp, latest)
        except OSError:
            os.unlink(tmp)
            raise
    except OSError as exc:
        return (f"could not make {latest} the latest attempt's log ({exc.strerror or exc}); the"
                f" attempt's output is in {numbered}")
    return None
