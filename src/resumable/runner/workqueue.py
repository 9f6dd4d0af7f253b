"""What a worker needs from its store, and what it tells the person watching it: the protocols
between ``runner.worker`` and a work-queue store (``store.postgres``'s backend, whose methods
``store.backend`` lists)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from resumable.core.policy import RetryPolicy, Settled
from resumable.runner.jobfile import Step


class ClaimLike(Protocol):
    run_id: str
    step: str
    n: int
    epoch: int
    spec: dict[str, Any]
    unit: dict[str, Any]
    log: str


class ListenerLike(Protocol):
    def fileno(self) -> int | None: ...
    def drain(self) -> list[str]: ...
    def close(self) -> None: ...


class WorkQueue(Protocol):
    """What a worker needs from its store (``store.postgres``'s backend; see ``store.backend``)."""

    def worker_info(self, worker_id: str) -> Any: ...
    def register(self, worker: Any) -> None: ...
    def unregister(self, worker: Any) -> None: ...
    def claim(self, worker: Any, runs: Sequence[str] | None, limit: int, *, ttl: float,
              log_path: Callable[[str, str, int], str]) -> tuple[Sequence[ClaimLike], float | None]: ...
    def renew(self, worker: Any, held: Sequence[Any], ttl: float) -> Sequence[ClaimLike]: ...
    def complete(self, items: Sequence[tuple[Any, Mapping[str, Any], RetryPolicy]], *,
                 more: int = 0, worker: Any = None, ttl: float = 0.0,
                 log_path: Callable[[str, str, int], str] | None = None
                 ) -> tuple[list[Settled | None], Sequence[ClaimLike]]: ...
    def release(self, claim: Any, reason: str, **kw: Any) -> bool: ...
    def run_states(self, runs: Sequence[str]) -> dict[str, str | None]: ...
    def work_listener(self) -> ListenerLike: ...
    def local_dir(self) -> str: ...


def is_queue(backend: object) -> bool:
    """Whether a store runs submitted jobs on workers (the PostgreSQL store)."""
    return callable(getattr(backend, "claim", None)) and callable(getattr(backend, "submit", None))


class Sink(Protocol):
    """What the worker tells the person watching it."""

    def started(self, claim: ClaimLike, step: Step) -> None: ...
    def finished(self, claim: ClaimLike, step: Step, status: str, duration: float, exit_code: int | None,
                 retry_in: float | None, recorded: bool) -> None: ...
    def warn(self, message: str) -> None: ...
    def tick(self) -> None: ...
