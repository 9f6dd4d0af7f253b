"""Starting step processes off the scheduler's thread.

Starting a process is the largest cost of a short step: the parent waits until the child has
replaced itself with the step's program (about a millisecond), and opening the log and reading the
child's identity wait on the kernel too. Python releases the GIL for all of it, so a few worker
threads start steps side by side while the scheduler keeps reaping, recording and flushing: a
``-j 2`` job of trivial steps then runs at about make's pace instead of the runner's.

Creating a step's log file is the other large cost (a new file waits on the filesystem's journal):
``prepare`` creates it on a worker while the scheduler flushes the step's ``in_progress`` record,
so the spawn that follows only opens an existing file.

Only the spawn and the log's creation run on a worker. Everything that records (the store, the runner lease, the
reporter) stays on the scheduler's thread, which learns of finished launches through a pipe it polls
together with the running steps' pidfds.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Mapping
from typing import Any

from resumable.runner.process import Spawner, StepHandle

Launch = tuple[Any, list[str], str, Mapping[str, str], str]  # (key, argv, cwd, env, log)
_PREPARE = object()  # the key of a job that only creates a log file
Result = tuple[Any, "StepHandle | BaseException"]


class Launcher:
    def __init__(self, spawn: Spawner, workers: int) -> None:
        self._spawn = spawn
        self._workers = max(1, workers)
        self._todo: queue.SimpleQueue[Launch | None] = queue.SimpleQueue()
        self._done: queue.SimpleQueue[Result] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._rfd, self._wfd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.pending = 0  # launches submitted and not yet collected
        self._dirs: set[str] = set()  # log directories known to exist

    def fileno(self) -> int:
        """Readable when a launch has finished (collect it with ``completed``)."""
        return self._rfd

    def _grow(self) -> None:
        if len(self._threads) < self._workers:
            t = threading.Thread(target=self._work, name="resumable-launcher", daemon=True)
            t.start()
            self._threads.append(t)

    def prepare(self, log: str) -> None:
        """Create ``log`` (empty, not truncating anything) ahead of the spawn that will write it."""
        self._grow()
        self._todo.put((_PREPARE, [], "", {}, log))

    def submit(self, key: Any, argv: list[str], cwd: str, env: Mapping[str, str], log: str) -> None:
        self._grow()
        self.pending += 1
        self._todo.put((key, argv, cwd, env, log))

    def _work(self) -> None:
        while True:
            job = self._todo.get()
            if job is None:
                return
            key, argv, cwd, env, log = job
            if key is _PREPARE:
                _create(log, self._dirs)
                continue
            result: StepHandle | BaseException
            try:
                result = self._spawn(argv, cwd, env, log)
            except BaseException as exc:  # handed to the scheduler's thread, which decides
                result = exc
            self._done.put((key, result))
            try:
                os.write(self._wfd, b"x")
            except OSError:
                pass  # the pipe is full: the scheduler has wake-ups pending already

    def completed(self) -> list[Result]:
        """Launches finished since the last call (never blocks)."""
        try:
            while os.read(self._rfd, 4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass
        out: list[Result] = []
        while True:
            try:
                out.append(self._done.get_nowait())
            except queue.Empty:
                break
        self.pending -= len(out)
        return out

    def close(self) -> None:
        for _ in self._threads:
            self._todo.put(None)
        for t in self._threads:
            t.join()
        self._threads.clear()
        for fd in (self._rfd, self._wfd):
            try:
                os.close(fd)
            except OSError:
                pass


def _create(path: str, known_dirs: set[str]) -> None:
    """Best effort: the spawn creates (and truncates) the log anyway. Never follows a link, never
    waits on a FIFO, never truncates: the spawn may already be writing this file."""
    directory = os.path.dirname(path) or "."
    try:
        if directory not in known_dirs:
            os.makedirs(directory, exist_ok=True)
            known_dirs.add(directory)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError:
        return
    os.close(fd)
