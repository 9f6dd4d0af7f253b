"""What a job is once read: its steps (every default applied) and where it came from. Built by the
job file's reader (``runner.jobfile``), the ``--step`` flags (``runner.jobflags``), a family's
expansion (``runner.expand``) and a job built in Python (``runner.jobpython``)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from resumable.errors import UsageError
from resumable.runner.inputs import InputFile

DEFAULT_JOB_FILE = "resumable.toml"
DEFAULT_SHELL: tuple[str, ...] = ("/bin/sh", "-c")
DEFAULT_GRACE = 5.0
DEFAULT_BACKOFF = 1.0
DEFAULT_JITTER = 0.1


@dataclass(slots=True)
class Step:
    """One step, with every default already applied. Never changed once loaded (``replace``
    makes a new one); not a frozen dataclass only because that triples the cost of building the
    steps of a 100,000-step job."""

    id: str
    command: str | tuple[str, ...]  # a string runs through ``shell``; a tuple runs as argv
    shell: tuple[str, ...] = DEFAULT_SHELL
    needs: tuple[str, ...] = ()
    timeout: float | None = None
    retries: int = 0
    backoff: float = DEFAULT_BACKOFF
    jitter: float = DEFAULT_JITTER
    grace: float = DEFAULT_GRACE
    artifacts: tuple[str, ...] = ()
    inputs: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # the job's and step's overrides, sorted; not os.environ
    cwd: str = "."  # absolute once the job is loaded
    log: str | None = None  # explicit log path (--step-log); else the runs-dir default

    @property
    def argv(self) -> list[str]:
        if isinstance(self.command, str):
            return [*self.shell, self.command]
        return list(self.command)

    @property
    def command_text(self) -> str:
        """The command as the user wrote it, for display and for checkpoint-run's "command" field."""
        if isinstance(self.command, str):
            return self.command
        import shlex

        return shlex.join(self.command)


@dataclass(frozen=True)
class Job:
    name: str
    steps: tuple[Step, ...]
    source: str  # the job file path, or "--step flags"
    base_dir: str = field(default=".")
    # [job] reconcile = { ref = "main", repo = "." }: (ref, repository) to reconcile against git
    # before planning, so steps whose Task-Id trailer is integrated are skipped.
    reconcile: tuple[str, str] | None = None
    # The files each step's inputs named when the job was loaded (``runner.inputs``): the plan
    # reads their stats instead of asking the file system a second time.
    input_files: Mapping[str, Sequence[InputFile]] = field(default_factory=dict)
    # The directories a family's ``files`` pattern listed, with their stats then: what the job's
    # steps rest on besides the job file (a file added there is a new step; ``runner.verdict``).
    scanned: Sequence[tuple[str, os.stat_result]] = ()

    def step(self, step_id: str) -> Step:
        for s in self.steps:
            if s.id == step_id:
                return s
        raise UsageError(f"job {self.name!r} has no step {step_id!r}")
