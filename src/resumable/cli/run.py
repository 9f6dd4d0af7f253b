"""``resumable run``: parse the options into ``RunOptions`` and hand them to the runner session."""

from __future__ import annotations

from typing import Any

import click

from resumable.cli.completion import complete_step, complete_target
from resumable.cli.durations import duration
from resumable.cli.errors import command_class
from resumable.errors import InvalidInputError, ResumableError
from resumable.runner.jobfile import DEFAULT_GRACE
from resumable.runner.options import RunOptions


@click.command("run", cls=command_class())
@click.argument("args", nargs=-1, metavar="[JOBFILE] [STEP]...", shell_complete=complete_target)
@click.option("--job", metavar="NAME",
              help="Job name = run id (default: [job] name, else the job file's name without .toml; "
                   "for resumable.toml its directory's name).")
@click.option("--step", "steps", metavar="ID:COMMAND", multiple=True,
              help="A step, repeatable, run in the order given (instead of a job file).")
@click.option("--state-dir", "--dir", "state_dir", metavar="DIR",
              help="The runs directory (default: RESUMABLE_DIR, else the nearest .resumable/runs "
                   "walking up from the job file's directory).")
@click.option("--store", metavar="URL", help="A PostgreSQL store (default: RESUMABLE_STORE).")
@click.option("-j", "--jobs", type=click.IntRange(min=0), default=1, show_default=True,
              help="Steps run in parallel; 0 = one per CPU.")
@click.option("--timeout", metavar="DURATION", callback=duration,
              help="Default per-step time budget: 90, 90s, 10m, 2h.")
@click.option("--step-timeout", "step_timeouts", metavar="ID:DURATION", multiple=True,
              help="Per-step time budget (repeatable).")
@click.option("--grace", metavar="DURATION", callback=duration,
              help=f"Wait between SIGTERM and SIGKILL (default {DEFAULT_GRACE:g}s).")
@click.option("--continue-on-error", "--keep-going", "-k", "keep_going", is_flag=True,
              help="Run every step that does not depend on a failed one.")
@click.option("--max-failures", type=click.IntRange(min=1), metavar="N",
              help="With --keep-going: stop after N failed steps.")
@click.option("--step-artifact", "step_artifacts", metavar="ID:PATH", multiple=True,
              help="A file the step must produce (repeatable; all are required).")
@click.option("--retry", "retries", type=click.IntRange(min=0), metavar="N",
              help="Extra attempts for a failing step (default 0).")
@click.option("--backoff", metavar="SECONDS", callback=duration,
              help="Wait BASE * 2^(k-1) (+ jitter) before retry k (default 1).")
@click.option("--step-log", "step_logs", metavar="ID:PATH", multiple=True,
              help="Write that step's output to PATH (truncated per attempt).")
@click.option("--logs-dir", metavar="DIR",
              help="Write each attempt's log to DIR/<step>.<attempt>.log; DIR/<step>.log is the latest one.")
@click.option("--dry-run", is_flag=True, help="Print what would run or skip, and why; write nothing.")
@click.option("--explain", metavar="STEP", help="Why STEP would run or skip.", shell_complete=complete_step)
@click.option("--force", is_flag=True, help="Re-run every step (history kept).")
@click.option("--reset", is_flag=True, help="Delete the run's state (refused while it runs).")
@click.option("--status", is_flag=True, help="Show the run as `resumable status` does.")
@click.option("-q", "--quiet", is_flag=True, help="Print only errors and the final summary.")
@click.option("--stream", is_flag=True,
              help="Print each running step's output lines as they come, prefixed with its id (logs unchanged).")
@click.option("-v", "--verbose", is_flag=True, help="--stream, and a line for every skipped step.")
@click.pass_context
def run_command(ctx: click.Context, /, **kw: Any) -> None:
    """Run a job as a resumable DAG of steps; re-run the same command to finish what is left.

    JOBFILE is a TOML job file (a name ending in .toml, or a path; default: resumable.toml here or
    in a parent directory), or a Python file (.py) that builds a resumable.Job; or describe the
    steps with --step. STEP...: run only these steps and everything they need (as `make
    combine`); the other steps keep their state. A family of steps (params, files) is a STEP too:
    every instance of it.
    """
    from resumable.runner.joblocate import JobFileError
    from resumable.runner.session import run

    opts = options_of(kw)
    from resumable.runner.process import seal_inherited_fds

    seal_inherited_fds()  # what the shell left open is not the steps' to inherit
    try:
        code = run(opts)
    except JobFileError as exc:
        if exc.count < 2:
            raise
        # Every problem on its own line, as a compiler lists them; the last line sums up.
        from resumable.cli.errors import report

        for problem in exc.problems:
            report(InvalidInputError(problem))
        raise InvalidInputError(exc.summary()) from None
    ctx.exit(code)


def options_of(kw: dict[str, Any]) -> RunOptions:
    """The command's parameters (click's) as the runner's options."""
    kw = dict(kw)
    for name in ("steps", "step_timeouts", "step_artifacts", "step_logs"):
        kw[name] = tuple(kw[name])
    kw["jobfile"], kw["targets"] = RunOptions.split_args(tuple(kw.pop("args")), bool(kw["steps"]))
    return RunOptions(**kw)


def launch_options(verb: str, args: list[str]) -> RunOptions | None:
    """The options of a launch's ``resumable run ...`` or ``resumable submit ...`` (as stored in a
    run, to resume it), parsed as those commands parse them; None when they do not parse."""
    from resumable.cli.submit import submit_command

    command = run_command if verb == "run" else submit_command if verb == "submit" else None
    if command is None:
        return None
    try:
        ctx = command.make_context(verb, list(args))
    except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
        return None
    params = dict(ctx.params)
    try:
        if verb == "run":
            return options_of(params)
        params.pop("quiet", None)
        params["steps"] = tuple(params["steps"])
        return RunOptions(**params)
    except (TypeError, ValueError, ResumableError):
        return None
