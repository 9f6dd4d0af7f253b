"""checkpoint-run's ``--step ID:COMMAND`` flags (checkpoint-run compatible) -> a :class:`Job`."""

from __future__ import annotations

import os
from collections.abc import Sequence

from resumable.errors import UsageError
from resumable.runner.jobfile import DEFAULT_BACKOFF, DEFAULT_GRACE, Job, Step, check_step_id, parse_duration


def _split_pair(value: str, flag: str) -> tuple[str, str]:
    # Split at the FIRST ':' as checkpoint-run does, so commands may contain ':' but ids may not.
    sid, sep, rest = value.partition(":")
    if not sep or not sid.strip() or not rest.strip():
        raise UsageError(f"{flag} {value!r}: expected ID:VALUE with a non-empty id and value")
    return sid.strip(), rest


def job_from_flags(
    name: str,
    step_specs: Sequence[str],
    *,
    timeout: float | None = None,
    step_timeouts: Sequence[str] = (),
    step_artifacts: Sequence[str] = (),
    retries: int = 0,
    backoff: float = DEFAULT_BACKOFF,
    step_logs: Sequence[str] = (),
    grace: float = DEFAULT_GRACE,
    cwd: str | None = None,
) -> Job:
    """checkpoint-run's flags: steps run one after another in the order given (no ``needs``; the
    scheduler keeps declaration order and stops at the first failure, as checkpoint-run does)."""
    check_step_id(name, "--job")
    base = os.path.abspath(cwd or os.getcwd())
    order: list[str] = []
    commands: dict[str, str] = {}
    for spec in step_specs:
        sid, command = _split_pair(spec, "--step")
        check_step_id(sid, f"--step {spec!r}")
        if sid in commands:
            raise UsageError(f"--step {sid!r} given twice; step ids must be unique")
        order.append(sid)
        commands[sid] = command
    if not order:
        raise UsageError("no steps: pass --step ID:COMMAND (repeatable) or a job file")

    def per_step(values: Sequence[str], flag: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for v in values:
            sid, val = _split_pair(v, flag)
            if sid not in commands:
                raise UsageError(f"{flag} {v!r}: no --step with id {sid!r}")
            out.setdefault(sid, "")
            # Several artifacts per id are allowed and all are required, as in checkpoint-run.
            out[sid] = f"{out[sid]}\0{val}" if out[sid] else val
        return out

    tmo = per_step(step_timeouts, "--step-timeout")
    arts = per_step(step_artifacts, "--step-artifact")
    logs = per_step(step_logs, "--step-log")
    steps = []
    for sid in order:
        t = timeout
        if sid in tmo:
            t = parse_duration(tmo[sid].split("\0")[-1], f"--step-timeout {sid}")
        log = logs[sid].split("\0")[-1] if sid in logs else None
        steps.append(Step(
            id=sid,
            command=commands[sid],
            timeout=t,
            retries=retries,
            backoff=backoff,
            grace=grace,
            artifacts=tuple(arts[sid].split("\0")) if sid in arts else (),
            cwd=base,
            log=os.path.join(base, log) if log else None,
        ))
    return Job(name=name, steps=tuple(steps), source="--step flags", base_dir=base)
