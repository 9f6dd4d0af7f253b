"""Live output (``resumable run --stream``): each running step's new log lines, as they come,
prefixed with the step's id, as ``docker compose`` shows its services' output.

A step's output still goes only to its log file (never a pipe: a grandchild holding a pipe open
would hang the runner, see ``runner.process``); the runner reads the logs' new bytes at every
pass of its loop (a tenth of a second at most) and prints whole lines only. So the lines of
parallel steps interleave line by line and never mid-line: a line still being written waits for
its newline, or for its step's end. The logs are not changed. Every line is printed with its
control characters escaped: a step's output is data, and raw it could clear the screen or forge
lines of another step.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from resumable.core.text import escape_controls

_READ = 1 << 16
_PER_PASS = 1 << 20  # bytes read from one log per pass: a step printing gigabytes cannot stall the loop
_MAX_LINE = 1 << 16  # a "line" without a newline beyond this is shown in pieces


@dataclass
class _Followed:
    prefix: str
    path: str
    fd: int | None = None
    offset: int = 0
    partial: bytes = b""


@dataclass
class LogFollower:
    """The new complete lines of each followed log, written by ``emit`` (one call per pass)."""

    emit: Callable[[list[str]], None]
    width: int = 0  # the ids are padded to this width, so the lines' text lines up
    followed: dict[str, _Followed] = field(default_factory=dict)

    def follow(self, step_id: str, path: str) -> None:
        self.finish(step_id)  # a retry's new log replaces the last attempt's
        self.followed[step_id] = _Followed(f"{escape_controls(step_id):<{self.width}} | ", path)

    def poll(self) -> None:
        lines: list[str] = []
        for f in self.followed.values():
            self._read(f, lines, final=False)
        if lines:
            self.emit(lines)

    def finish(self, step_id: str) -> None:
        """The step ended: its last lines, a final one without a newline included, and no more."""
        f = self.followed.pop(step_id, None)
        if f is None:
            return
        lines: list[str] = []
        self._read(f, lines, final=True)
        if f.fd is not None:
            os.close(f.fd)
        if lines:
            self.emit(lines)

    def close(self) -> None:
        for step_id in list(self.followed):
            self.finish(step_id)

    def _read(self, f: _Followed, lines: list[str], *, final: bool) -> None:
        if f.fd is None:
            try:
                # Never through a link planted at the log's name, never blocking on a FIFO.
                f.fd = os.open(f.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                return
        got = 0
        while got < _PER_PASS or final:
            try:
                data = os.pread(f.fd, _READ, f.offset)
            except OSError:
                break
            if not data:
                break
            f.offset += len(data)
            got += len(data)
            self._split(f, f.partial + data, lines)
        if final and f.partial:
            lines.append(f.prefix + _text(f.partial))
            f.partial = b""

    @staticmethod
    def _split(f: _Followed, data: bytes, lines: list[str]) -> None:
        *complete, rest = data.split(b"\n")
        lines.extend(f.prefix + _text(line) for line in complete)
        while len(rest) > _MAX_LINE:
            lines.append(f.prefix + _text(rest[:_MAX_LINE]))
            rest = rest[_MAX_LINE:]
        f.partial = rest


def _text(line: bytes) -> str:
    return escape_controls(line.decode("utf-8", "replace").removesuffix("\r"))
