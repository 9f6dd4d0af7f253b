"""One attempt on a worker: the step's process and what it did, recorded as the local runner
records it (status, exit code, signal, duration, log, artifacts and the fingerprint taken before
it started), plus the end of its log, which is stored with the attempt."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from resumable.core.policy import RetryPolicy
from resumable.runner import fingerprint as fp
from resumable.runner import process
from resumable.runner.attempt import attempt_record, classify
from resumable.runner.jobfile import Step
from resumable.runner.workqueue import ClaimLike

if TYPE_CHECKING:
    from resumable.core.types import Fingerprint
    from resumable.store.backend import StepOutcome

LOG_LIMIT = 1 << 20  # bytes of an attempt's log stored with it (the end of the log: where errors are)


@dataclass
class Running:
    claim: ClaimLike
    step: Step
    handle: process.StepHandle
    started: float
    started_wall: float
    fingerprint: Fingerprint
    deadline: float | None
    kill_at: float | None = None
    killed: bool = False
    timed_out: bool = False
    handing_back: bool = False
    lost: bool = False  # the lease was taken over: the outcome will be fenced off


@dataclass
class Outcome:
    run: Running
    result: StepOutcome
    duration: float
    exit_code: int
    policy: RetryPolicy  # the step's retries: applied by the store with ``core.policy``


@dataclass
class Draining:
    handle: process.StepHandle
    kill_at: float
    termed: bool = False


def outcome_of(a: Running, code: int, now: float, wall: float, host: str, worker_id: str) -> Outcome:
    """What an attempt did, as the local runner records it (status, attempt, fields, log)."""
    step, c = a.step, a.claim
    duration = round(now - a.started, 3)
    log_file = step.log or c.log
    status, exit_code, reason, artifacts = classify(step, code, log_file, interrupted=a.handing_back,
                                                    timed_out=a.timed_out)
    attempt = attempt_record(c.n, status, a.started_wall, wall, exit_code, duration, log_file, code, reason)
    attempt["host"], attempt["worker"] = host, worker_id
    # The unit's fields as the local runner records them (runner.attempt.finished_attempt), plus
    # the host a done step's fingerprint was taken on (input hashes are reused only there).
    fields: dict[str, Any]
    if status == "done":
        fields = {"fingerprint": a.fingerprint, "fingerprintHost": host}
        if artifacts:
            fields["artifacts"] = artifacts
    else:
        fields = {"lastExitCode": exit_code, "log": log_file}
    note = reason or ("" if status == "done" else f"{status} (exit {exit_code})")
    result: StepOutcome = {"status": status, "note": note, "attempt": attempt, "fields": fields, "exit_code": exit_code,
              "reason": reason or None, "log": read_log(log_file)}
    return Outcome(a, result, duration, exit_code, RetryPolicy(step.retries, step.backoff, step.jitter))


def fingerprint_differences(submitted: object, here: Fingerprint) -> list[str]:
    """What differs between the fingerprint taken where the job was submitted and the one taken on
    this host before the step starts (the step runs as it is here; the difference is said)."""
    if not isinstance(submitted, dict):
        return []
    out = [f"{part} differs" for part in ("command", "env", "cwd") if submitted.get(part) != here.get(part)]
    theirs = submitted.get("inputs") if isinstance(submitted.get("inputs"), dict) else {}
    assert isinstance(theirs, dict)
    for path, rec in here.get("inputs", {}).items():
        old = theirs.get(path)
        if fp.record_sha(old) != fp.record_sha(rec):
            out.append(f"input {'missing' if rec is None else 'differs'}: {path}")
    return out


def read_log(path: str) -> bytes | None:
    """The end of an attempt's log (at most LOG_LIMIT bytes), to store with the attempt."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        start = max(0, st.st_size - LOG_LIMIT)
        data = os.pread(fd, LOG_LIMIT, start)
    except OSError:
        return None
    finally:
        os.close(fd)
    if start:
        data = b"[resumable: the first %d bytes of this log were not stored]\n" % start + data
    return data
