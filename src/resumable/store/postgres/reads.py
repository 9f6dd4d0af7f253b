"""What workers recorded, for people: run states, step counts, attempts (stale ones included), logs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from resumable.store.postgres.queries import Q

if TYPE_CHECKING:
    from collections.abc import Sequence

    from resumable.store.postgres.db import Connection
    from resumable.store.postgres.place import Place


def run_states(place: Place, runs: Sequence[str]) -> dict[str, str | None]:
    """The status of each run (None when it does not exist)."""
    def look(conn: Connection) -> dict[str, str | None]:
        got = {r[0]: r[1] for r in conn.execute(Q.run_states, (list(runs),))}
        return {r: got.get(r) for r in runs}

    return place.read(look, what="read the runs' status", patience=0)


def step_summary(place: Place, run_id: str) -> str:
    def look(conn: Connection) -> str:
        rows = conn.execute(Q.step_counts, (run_id,)).fetchall()
        return ", ".join(f"{n} {st}" for st, n in rows)

    return place.read(look, what=f"read the steps of run {run_id}")


def attempts(place: Place, run_id: str, step: str | None = None) -> list[dict[str, object]]:
    """Every attempt workers made on the run's steps (stale ones included), oldest first."""
    def look(conn: Connection) -> list[dict[str, object]]:
        keys = ("step", "n", "epoch", "worker", "host", "pid", "startedAt", "finishedAt", "status", "exitCode",
                "reason", "stale", "logPath", "logBytes")
        return [dict(zip(keys, r, strict=True)) for r in conn.execute(Q.attempts, {"run": run_id, "step": step})]

    return place.read(look, what=f"read the attempts of run {run_id}")


def attempt_log(place: Place, run_id: str, step: str, n: int | None) -> tuple[int, bytes | None] | None:
    """(attempt number, stored log) of a step's attempt ``n`` (the last one when None)."""
    def look(conn: Connection) -> tuple[int, bytes | None] | None:
        got = conn.execute(Q.attempt_log, {"run": run_id, "step": step, "n": n}).fetchone()
        return (int(got[0]), bytes(got[1]) if got[1] is not None else None) if got else None

    return place.read(look, what=f"read a log of run {run_id}")
