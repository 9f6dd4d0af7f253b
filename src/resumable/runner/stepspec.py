"""A step as stored with a submitted run: everything a worker on another host needs to run it
exactly as the local runner would (``Step`` <-> plain JSON). Paths are absolute, as the job file
resolved them on the submitting host: a worker elsewhere needs the same paths (a shared file
system or the same checkout in the same place)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from resumable.errors import InvalidInputError
from resumable.runner.jobfile import Step

if TYPE_CHECKING:
    from resumable.core.types import Fingerprint

SPEC_VERSION = 1


class StepSpec(TypedDict):
    """A step as stored with a submitted run (``to_spec``); the store adds what it decided."""

    v: int
    id: str
    command: str | list[str]  # a string runs through ``shell``; a list runs as argv
    command_text: str
    shell: list[str]
    needs: list[str]
    timeout: float | None
    retries: int
    backoff: float
    jitter: float
    grace: float
    artifacts: list[str]
    inputs: list[str]
    env: list[list[str]]  # [name, value] pairs
    cwd: str
    log: str | None
    fingerprint: NotRequired[Fingerprint]  # the submitter's (``runner.fingerprint``)
    cutoff: NotRequired[bool]  # a done step waiting for its needs: the claim decides (``core.policy``)
    upstream: NotRequired[dict[str, str]]  # its needs' artifact digests, as the claim read them


def to_spec(step: Step) -> StepSpec:
    return {
        "v": SPEC_VERSION,
        "id": step.id,
        "command": step.command if isinstance(step.command, str) else list(step.command),
        "command_text": step.command_text,
        "shell": list(step.shell),
        "needs": list(step.needs),
        "timeout": step.timeout,
        "retries": step.retries,
        "backoff": step.backoff,
        "jitter": step.jitter,
        "grace": step.grace,
        "artifacts": list(step.artifacts),
        "inputs": list(step.inputs),
        "env": [list(pair) for pair in step.env],
        "cwd": step.cwd,
        "log": step.log,
    }


def from_spec(spec: Mapping[str, Any]) -> Step:
    """The ``Step`` of a stored spec; ``InvalidInputError`` for one this version cannot run."""
    version = spec.get("v")
    if not isinstance(version, int) or version > SPEC_VERSION:
        raise InvalidInputError(f"step {spec.get('id')!r} was submitted by a newer resumable (spec {version});"
                                " upgrade resumable on this worker")
    try:
        command = spec["command"]
        return Step(
            id=str(spec["id"]),
            command=command if isinstance(command, str) else tuple(str(a) for a in command),
            shell=tuple(str(a) for a in spec["shell"]),
            needs=tuple(str(n) for n in spec["needs"]),
            timeout=float(spec["timeout"]) if spec.get("timeout") is not None else None,
            retries=int(spec["retries"]),
            backoff=float(spec["backoff"]),
            jitter=float(spec["jitter"]),
            grace=float(spec["grace"]),
            artifacts=tuple(str(a) for a in spec["artifacts"]),
            inputs=tuple(str(a) for a in spec["inputs"]),
            env=tuple((str(k), str(v)) for k, v in spec["env"]),
            cwd=str(spec["cwd"]),
            log=str(spec["log"]) if spec.get("log") else None,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInputError(f"step {spec.get('id')!r}: its stored spec cannot be read ({exc})") from exc
