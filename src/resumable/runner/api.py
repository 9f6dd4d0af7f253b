"""`resumable run` from Python: ``run_job`` takes the command's options as keywords.

    import resumable
    code = resumable.run_job("jobs/nightly.toml", jobs=2, keep_going=True)
    code = resumable.run_job(job="render", steps=["fetch:curl -o a.bin URL", "convert:make out"])

It behaves exactly as the command line (same files, output and exit code) because it is the same
code; the launch descriptor it records is the equivalent command line, so `resumable status
--resume` can say how to resume the run from a shell.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from resumable.runner.jobfile import parse_duration

Duration = float | int | str | None


def _argv(jobfile: str | None, options: list[tuple[str, object]]) -> list[str]:
    argv = [jobfile] if jobfile else []
    for flag, value in options:
        if value is None or value is False or value == ():
            continue
        if value is True:
            argv.append(flag)
        elif isinstance(value, (list, tuple)):
            for v in value:
                argv += [flag, str(v)]
        else:
            argv += [flag, str(value)]
    return argv


def run_job(
    jobfile: str | os.PathLike[str] | None = None,
    *,
    job: str | None = None,
    steps: Sequence[str] = (),
    state_dir: str | os.PathLike[str] | None = None,
    jobs: int = 1,
    timeout: Duration = None,
    step_timeouts: Sequence[str] = (),
    grace: Duration = None,
    keep_going: bool = False,
    max_failures: int | None = None,
    step_artifacts: Sequence[str] = (),
    retries: int | None = None,
    backoff: Duration = None,
    step_logs: Sequence[str] = (),
    logs_dir: str | os.PathLike[str] | None = None,
    dry_run: bool = False,
    explain: str | None = None,
    force: bool = False,
    reset: bool = False,
    status: bool = False,
    quiet: bool = False,
) -> int:
    """Run a job as `resumable run` does and return its exit code (0 done, 1 a step failed,
    2 refused, 130 interrupted). Bad input raises the same errors the command reports."""
    from resumable.cli.run import main
    from resumable.errors import UsageError

    if jobs < 0:
        raise UsageError("jobs must be >= 0 (0 = one per CPU)")
    if retries is not None and retries < 0:
        raise UsageError("retries must be >= 0")
    if max_failures is not None and max_failures < 1:
        raise UsageError("max_failures must be >= 1")
    path = os.fspath(jobfile) if jobfile is not None else None
    sdir = os.fspath(state_dir) if state_dir is not None else None
    ldir = os.fspath(logs_dir) if logs_dir is not None else None
    raw = _argv(path, [
        ("--job", job), ("--step", tuple(steps)), ("--state-dir", sdir), ("-j", jobs if jobs != 1 else None),
        ("--timeout", timeout), ("--step-timeout", tuple(step_timeouts)), ("--grace", grace),
        ("--keep-going", keep_going), ("--max-failures", max_failures),
        ("--step-artifact", tuple(step_artifacts)), ("--retry", retries), ("--backoff", backoff),
        ("--step-log", tuple(step_logs)), ("--logs-dir", ldir), ("--force", force),
        ("--quiet", quiet),
    ])

    def duration(value: Duration, flag: str) -> float | None:
        return None if value is None else parse_duration(value, flag)

    return main(
        raw,
        jobfile=path,
        job_name=job,
        steps=tuple(steps),
        state_dir=sdir,
        jobs=jobs,
        timeout=duration(timeout, "timeout"),
        step_timeouts=tuple(step_timeouts),
        grace=duration(grace, "grace"),
        keep_going=keep_going,
        max_failures=max_failures,
        step_artifacts=tuple(step_artifacts),
        retries=retries,
        backoff=duration(backoff, "backoff"),
        step_logs=tuple(step_logs),
        logs_dir=ldir,
        dry_run=dry_run,
        explain_step=explain,
        force=force,
        reset=reset,
        show_status=status,
        quiet=quiet,
    )
