"""What a worker needs from its store (``store.backend.WorkQueue``, a declared capability of the
PostgreSQL store) and what it tells the person watching it (``Sink``)."""

from __future__ import annotations

from typing import Protocol

from resumable.runner.jobfile import Step
from resumable.store.backend import ClaimLike, ListenerLike, WorkQueue

__all__ = ["ClaimLike", "ListenerLike", "Sink", "WorkQueue", "is_queue"]


def is_queue(backend: object) -> bool:
    """Whether a store runs submitted jobs on workers (it declares ``WorkQueue``)."""
    return isinstance(backend, WorkQueue)


class Sink(Protocol):
    """What the worker tells the person watching it."""

    def started(self, claim: ClaimLike, step: Step) -> None: ...
    def finished(self, claim: ClaimLike, step: Step, status: str, duration: float, exit_code: int | None,
                 retry_in: float | None, recorded: bool) -> None: ...
    def warn(self, message: str) -> None: ...
    def tick(self) -> None: ...
