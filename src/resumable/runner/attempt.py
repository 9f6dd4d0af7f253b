"""One attempt of a step: what the scheduler keeps while it runs, how its end is recorded, and the
stand-ins for a process that has not started yet or could not start."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from resumable import fsio
from resumable.core import verbs
from resumable.core.stamps import stamp
from resumable.runner import fingerprint as fp
from resumable.runner.jobfile import Step
from resumable.runner.process import StepHandle

if TYPE_CHECKING:
    from resumable.core.types import Attempt as AttemptRecord
    from resumable.core.types import AttemptState, FileRecord, Fingerprint, UnitEvent


@dataclass
class Attempt:
    step: Step
    n: int
    handle: StepHandle
    started: float
    started_wall: float
    log: str
    fingerprint: Fingerprint
    deadline: float | None
    kill_at: float | None = None
    killed: bool = False
    timed_out: bool = False
    interrupted: bool = False
    launching: bool = False  # prepared or handed to a launcher thread, not started yet
    durable: bool = False  # its in_progress record is durable (it may start)


class Timed(Protocol):
    """A running step as the local runner and a worker both keep it: what its timeout needs."""

    step: Step
    handle: StepHandle
    deadline: float | None
    kill_at: float | None
    killed: bool
    timed_out: bool


def enforce_timeout(a: Timed, now: float, *, exempt: bool = False) -> None:
    """A step past its deadline is sent SIGTERM, and SIGKILL once its grace has passed. ``exempt``:
    the step is already being stopped for another reason (an interrupt, a hand-back), so running
    out of time now is not its outcome."""
    if a.deadline is not None and not a.timed_out and not exempt and now >= a.deadline:
        a.timed_out = True
        a.handle.terminate()
        a.kill_at = now + a.step.grace
    elif a.kill_at is not None and not a.killed and now >= a.kill_at:
        a.handle.kill()
        a.killed = True


@dataclass
class Draining:
    handle: StepHandle
    kill_at: float
    termed: bool = False


@dataclass
class Outcome:
    states: dict[str, str] = field(default_factory=dict)  # final state per step in this run
    failed: list[str] = field(default_factory=list)
    interrupted: bool = False
    attempts: dict[str, int] = field(default_factory=dict)  # attempts made in this run
    last_exit: dict[str, int | None] = field(default_factory=dict)
    logs: dict[str, str] = field(default_factory=dict)
    durations: dict[str, float] = field(default_factory=dict)

    @property
    def all_done(self) -> bool:
        return not self.interrupted and all(s in ("done", "skipped") for s in self.states.values())


def next_attempt_number(unit: object) -> int:
    if not isinstance(unit, Mapping):
        return 1
    attempts = unit.get("attempts")
    ns = [a.get("n") for a in attempts if isinstance(a, Mapping)] if isinstance(attempts, list) else []
    return max([n for n in ns if isinstance(n, int)], default=0) + 1


MISSING_ARTIFACT_EXIT = -2  # checkpoint-run's code for "exited 0 but the artifact is missing"


def classify(step: Step, code: int, log: str, *, interrupted: bool, timed_out: bool
             ) -> tuple[AttemptState, int, str, dict[str, FileRecord | None]]:
    """(status, exit code, reason, artifact records) of an attempt whose process ended with
    ``code`` (negative: killed by that signal), as both the local runner and a worker record it.
    A step that exits 0 without a declared artifact has failed; the reason goes to its log too."""
    exit_code = 128 - code if code < 0 else code  # signals as the shell shows them
    if interrupted:
        return "interrupted", exit_code, "", {}
    if timed_out:
        return "timeout", exit_code, "", {}
    if code != 0:
        return "failed", exit_code, "", {}
    artifacts = fp.artifact_records(step)
    missing = [p for p, rec in artifacts.items() if rec is None]
    if missing:
        reason = f"exited 0 but artifact missing: {', '.join(missing)}"
        append_log(log, f"\nresumable: {reason}\n")
        return "failed", MISSING_ARTIFACT_EXIT, reason, artifacts
    return "done", exit_code, "", artifacts


def attempt_record(n: int, status: AttemptState, started_wall: float, wall: float, exit_code: int,
                   duration: float, log: str, code: int, reason: str) -> AttemptRecord:
    """The attempt's entry in its unit's ``attempts``."""
    attempt: AttemptRecord = {
        "n": n, "status": status, "startedAt": stamp(started_wall, ms=True),
        "finishedAt": stamp(wall, ms=True), "exitCode": exit_code, "duration": duration, "log": log,
    }
    if code < 0:
        attempt["signal"] = -code
    if reason:
        attempt["reason"] = reason
    return attempt


def finished_attempt(a: Attempt, code: int, now: float, wall: float) -> tuple[str, int, UnitEvent]:
    """(status, exit code, the unit event recording it) for an attempt whose process ended with
    ``code`` (negative: killed by that signal) at monotonic ``now`` / wall-clock ``wall``."""
    step = a.step
    status, exit_code, reason, artifacts = classify(step, code, a.log, interrupted=a.interrupted,
                                                    timed_out=a.timed_out)
    attempt = attempt_record(a.n, status, a.started_wall, wall, exit_code, round(now - a.started, 3), a.log,
                             code, reason)
    # The unit keeps what a person or `resumable run` needs next time; what the attempt record
    # already says (its log, its exit code) is repeated only for a step that did not finish: a
    # 100,000-step run holds every unit in memory, and each key costs.
    fields: dict[str, Any]
    if status == "done":
        fields = {"fingerprint": a.fingerprint}
        if artifacts:
            fields["artifacts"] = artifacts
    else:
        fields = {"lastExitCode": exit_code, "log": a.log}
    note = reason or ("" if status == "done" else f"{status} (exit {exit_code})")
    return status, exit_code, verbs.unit(step.id, status, note=note, attempt=attempt, fields=fields,
                                          shallow=True)


def append_log(path: str, text: str) -> None:
    try:
        # Never through a planted link, never blocking on a FIFO (see process.open_log).
        fd = fsio.open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write(text)
    except OSError:
        pass


class NotStarted:
    """The handle of an attempt prepared but not launched yet (its record is not durable yet)."""

    pid = 0
    pgid = 0
    token: str | None = None

    def poll(self) -> int | None:
        return None

    def terminate(self) -> None:
        pass

    def kill(self) -> None:
        pass

    def leftovers(self) -> bool:
        return False

    def fileno(self) -> int | None:
        return None

    def close(self) -> None:
        pass


NOT_STARTED = NotStarted()


class FailedSpawn(NotStarted):
    """Stands in for a process that could not start (bad cwd, missing program): exit 127."""

    def __init__(self, message: str, log: str) -> None:
        append_log(log, message)

    def poll(self) -> int | None:
        return 127
