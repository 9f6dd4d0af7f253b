"""Ctrl-C in a durable script run under ``with open_run(...)``: what finished is recorded (each call
records itself; ``run.map`` lets the items running end and records them), then one line, then exit 130,
as ``resumable run`` does, rather than a traceback of the interpreter's.

**From the first moment.** While ``open_run(..., task=...)`` opens the run, Python's own SIGINT
handler is replaced by one that only remembers the signal (in the main thread, when Python's own
handler is the one in place: a program that installed its own keeps it). The ``with`` statement that
called it then exits at once (``Run.__enter__``), the same line and the same code; a script that
did not use ``with`` gets its ``KeyboardInterrupt`` at its next use of the run.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from typing import NoReturn

EXIT_CODE = 130


class Held:
    """Whether a SIGINT arrived while it was held back."""

    __slots__ = ("caught",)

    def __init__(self) -> None:
        self.caught = False


@contextlib.contextmanager
def held() -> Iterator[Held]:
    """SIGINT held back (remembered, not raised) for the duration of the block."""
    state = Held()
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield state
        return

    def hold(signum: int, frame: object) -> None:
        state.caught = True

    previous = signal.signal(signal.SIGINT, hold)
    try:
        yield state
    finally:
        signal.signal(signal.SIGINT, previous)


def line(recorded: int) -> str:
    calls = "call" if recorded == 1 else "calls"
    return f"interrupted: {recorded} {calls} recorded; run the script again to resume"


def exit_interrupted(recorded: int) -> NoReturn:
    """Say so in one line on stderr and end the script with the interrupted exit code."""
    try:
        sys.stderr.write(line(recorded) + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass  # stderr closed: the exit code still says it
    raise SystemExit(EXIT_CODE)
