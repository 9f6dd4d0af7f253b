"""A job's steps as a graph, once they are all made: every input expanded to the files it names
(a file another step declares as an artifact makes the step need that one), and the needs
checked for cycles. Problems are added to the job file's (``runner.joblocate``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from resumable.runner import inputs
from resumable.runner.inputs import InputFile
from resumable.runner.joblocate import Problems
from resumable.runner.jobmodel import Step


def resolve_inputs(steps: list[Step], problems: Problems
                    ) -> tuple[list[Step], dict[str, Sequence[InputFile]]]:
    """Every input expanded to the files it names (kept for the plan: each is stat'ed once). A path
    that names nothing is a problem, unless another step declares it (or, for a glob or a
    directory, something it covers) as an artifact: then the step needs that step."""
    artifacts = {inputs.resolve(s.cwd, a): s.id for s in steps for a in s.artifacts}
    # Every directory that holds an artifact: a plain path outside them names none, and is told so
    # by a set lookup, not a scan of every artifact (which made a family of a thousand steps, each
    # with its own input, take seconds to read: a scan per input, of every step's artifacts).
    holders = {d for p in artifacts for d in _parents(p)}

    def producers(cwd: str, pattern: str) -> list[str]:
        if not inputs.is_glob(pattern):
            path = inputs.resolve(cwd, pattern)
            if path in artifacts:
                return [artifacts[path]]
            if path.rstrip("/") not in holders:
                return []
        return inputs.producers(cwd, pattern, artifacts)

    out: list[Step] = []
    found: dict[str, Sequence[InputFile]] = {}
    for step in steps:
        if not step.inputs:
            out.append(step)
            continue
        files, missing = inputs.expand(step.cwd, step.inputs, step.artifacts)
        found[step.id] = files
        if not artifacts and not missing:
            out.append(step)
            continue
        extra: list[str] = []
        if artifacts:
            for pattern in step.inputs:
                extra.extend(p for p in producers(step.cwd, pattern)
                             if p != step.id and p not in step.needs and p not in extra)
        unmade = [m for m in missing if not producers(step.cwd, m)] if artifacts else missing
        if unmade:
            what = ", ".join(map(repr, unmade))
            problems.add(f"steps.{step.id}", "inputs",
                         f"no file matches {what}" if all(map(inputs.is_glob, unmade)) else
                         f"input not found: {what} (no such file or directory, and no step declares it as an"
                         " artifact)")
        out.append(replace(step, needs=(*step.needs, *extra)) if extra else step)
    return out, found


def _parents(path: str) -> list[str]:
    """The directories above an absolute path: ``/a/b/c`` -> ``/a/b``, ``/a``."""
    out: list[str] = []
    while True:
        head = path.rpartition("/")[0]
        if not head or head == path:
            return out
        out.append(head)
        path = head


def acyclic(graph: Mapping[str, tuple[str, ...]]) -> bool:
    """Whether the (known-valid) graph has no cycle: Kahn's count, O(steps + needs); the slower
    search that names the cycles runs only when there is one."""
    remaining = {k: len(set(v)) for k, v in graph.items() if v}
    if not remaining:
        return True
    dependents: dict[str, list[str]] = {}
    for k, v in graph.items():
        for d in set(v):
            dependents.setdefault(d, []).append(k)
    ready = [k for k in graph if k not in remaining]
    seen = 0
    while ready:
        k = ready.pop()
        seen += 1
        for child in dependents.get(k, ()):
            remaining[child] -= 1
            if remaining[child] == 0:
                ready.append(child)
    return seen == len(graph)
