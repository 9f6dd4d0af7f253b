"""What one ``resumable run`` is asked to do: the options of the command and of ``run_job``.

The click command and ``resumable.run_job`` both build a ``RunOptions`` and hand it to
``runner.session.run``; the launch descriptor (how ``status --resume`` replays the run) is derived
from it here, in one place, without the one-shot flags (``--force``, ``--reset``, ``--dry-run``...)
that must never be replayed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import Any

from resumable.errors import UsageError
from resumable.runner.jobfile import parse_duration

Duration = float | int | str | None


@dataclass(frozen=True)
class RunOptions:
    jobfile: str | None = None  # the TOML job file; None: resumable.toml, here or in a parent directory
    targets: tuple[str, ...] = ()  # steps to run with everything they need (make's targets); () = all
    job: str | None = None  # the job name = run id (--job)
    steps: tuple[str, ...] = ()  # checkpoint-run's --step ID:COMMAND, in order
    state_dir: str | None = None  # --dir / --state-dir: the runs directory
    store: str | None = None  # --store: a PostgreSQL URL
    jobs: int = 1
    timeout: float | None = None
    step_timeouts: tuple[str, ...] = ()
    grace: float | None = None
    keep_going: bool = False
    max_failures: int | None = None
    step_artifacts: tuple[str, ...] = ()
    retries: int | None = None
    backoff: float | None = None
    step_logs: tuple[str, ...] = ()
    logs_dir: str | None = None
    dry_run: bool = False
    explain: str | None = None
    force: bool = False
    reset: bool = False
    status: bool = False
    quiet: bool = False
    verbose: bool = False  # also a line per skipped step; and streams, as ``stream``
    stream: bool = False  # print each running step's output lines, prefixed with its id

    def __post_init__(self) -> None:
        if self.jobs < 0:
            raise UsageError("jobs must be >= 0 (0 = one per CPU)")
        if self.retries is not None and self.retries < 0:
            raise UsageError("retries must be >= 0")
        if self.max_failures is not None and self.max_failures < 1:
            raise UsageError("max_failures must be >= 1")
        if self.quiet and (self.verbose or self.stream):
            raise UsageError(f"--quiet and {'--verbose' if self.verbose else '--stream'} do not go together")

    @classmethod
    def from_api(cls, jobfile: str | os.PathLike[str] | None = None, **kw: Any) -> RunOptions:
        """``run_job``'s keywords: the field names, durations as seconds or "90s"/"10m" strings,
        paths as str or PathLike, sequences as any sequence."""
        known = {f.name for f in fields(cls)} - {"jobfile"}
        unknown = sorted(set(kw) - known)
        if unknown:
            raise UsageError(f"run_job() got unknown option(s) {', '.join(unknown)}; known: "
                             f"{', '.join(sorted(known))}")
        for name in ("timeout", "grace", "backoff"):
            if kw.get(name) is not None:
                kw[name] = parse_duration(kw[name], name)
        for name in ("state_dir", "logs_dir"):
            if kw.get(name) is not None:
                kw[name] = os.fspath(kw[name])
        for name in ("steps", "step_timeouts", "step_artifacts", "step_logs", "targets"):
            value = kw.get(name, ())
            if isinstance(value, str):
                raise UsageError(f"{name} must be a list of strings, not one string")
            kw[name] = tuple(str(v) for v in value)
        return cls(jobfile=os.fspath(jobfile) if jobfile is not None else None, **kw)

    @staticmethod
    def split_args(args: tuple[str, ...], with_steps: bool) -> tuple[str | None, tuple[str, ...]]:
        """``resumable run [JOBFILE] [STEP]...``: (the job file, the target steps). The first
        argument is the job file when it ends in ``.toml`` or ``.py`` (a Python file that builds
        the job) or holds a ``/`` (a step id can do none of these: ids have no ``/``, and a job
        file of another name is given as ``./name``); with ``--step`` flags every argument is a
        step."""
        if args and not with_steps and (args[0].endswith((".toml", ".py")) or "/" in args[0]):
            return args[0], args[1:]
        return None, args

    def replay_args(self) -> list[str]:
        """The arguments of ``resumable run`` that resume this run: everything that shapes the job
        and how it runs, none of the one-shot actions (force, reset, dry-run, explain, status)."""
        argv: list[str] = [self.jobfile] if self.jobfile else []
        argv.extend(self.targets)

        def add(flag: str, value: object) -> None:
            if value is None or value is False:
                return
            if value is True:
                argv.append(flag)
            elif isinstance(value, tuple):
                for v in value:
                    argv.extend((flag, str(v)))
            else:
                argv.extend((flag, f"{value:g}" if isinstance(value, float) else str(value)))

        add("--job", self.job)
        add("--step", self.steps)
        add("--dir", self.state_dir)
        add("--store", self.store)
        add("-j", self.jobs if self.jobs != 1 else None)
        add("--timeout", self.timeout)
        add("--step-timeout", self.step_timeouts)
        add("--grace", self.grace)
        add("--keep-going", self.keep_going)
        add("--max-failures", self.max_failures)
        add("--step-artifact", self.step_artifacts)
        add("--retry", self.retries)
        add("--backoff", self.backoff)
        add("--step-log", self.step_logs)
        add("--logs-dir", self.logs_dir)
        add("--quiet", self.quiet)
        return argv

