"""``resumable guard``: parse, call ``resumable.guard.protocol``, exit with its code.

    resumable guard NAME [--max-passes N] [--breaker N] [--state-dir DIR] [--dry-run]
                         [--outcome-from-output] -- CMD [ARGS...]
    resumable guard status NAME [--history]
    resumable guard reset NAME [--all]

``guard NAME ...`` is short for ``guard run NAME ...``: anything that is not a subcommand name is a
job name. A job called ``run``, ``status`` or ``reset`` is reached through the explicit form,
``resumable guard run status -- CMD``.
"""

from __future__ import annotations

import click

_STATE_DIR_HELP = ("Where state, lock and logs live (default: $ONEX_STATE_DIR/pipeline_checkpoints, else "
                   "$XDG_STATE_HOME/resumable/guard, else ~/.local/state/resumable/guard).")


class _GuardGroup(click.Group):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


@click.group("guard", cls=_GuardGroup, context_settings={"help_option_names": ["-h", "--help"]},
             invoke_without_command=True, no_args_is_help=False)
@click.pass_context
def guard_command(ctx: click.Context) -> None:
    """Run one pass of a recurring job: one at a time, with a pass cap and a circuit breaker.

    resumable guard NAME [options] -- CMD [ARGS...] runs CMD unless another pass of NAME is
    running (SKIP, exit 0), --max-passes is reached (SKIP, exit 0) or the breaker has tripped
    (HALT, exit 1). A pass exits with CMD's exit status; its output goes to a per-pass log. State:
    <state-dir>/NAME-state.yaml (OmniNode's cron-closeout format). A job named run, status or
    reset: resumable guard run NAME -- CMD.
    """
    if ctx.invoked_subcommand is None:  # bare `resumable guard`: the help, not a usage error
        click.echo(ctx.get_help())


@guard_command.command("run", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("name")
@click.argument("command", nargs=-1, required=True)
@click.option("--max-passes", type=click.IntRange(min=0), default=0, show_default=True,
              help="Skip once NAME has run this many passes (0: no cap).")
@click.option("--breaker", type=click.IntRange(min=0), default=3, show_default=True,
              help="Refuse (HALT, exit 1) after this many consecutive failure/halt outcomes (0: off).")
@click.option("--state-dir", metavar="DIR", help=_STATE_DIR_HELP)
@click.option("--dry-run", is_flag=True, help="Check lock, cap and breaker; say what would run; run nothing and record "
                                                "only dry_run: true (no pass counted).")
@click.option("--outcome-from-output", is_flag=True,
              help="On exit 0, take the outcome from the last whole word success|noop|failure|halt in the output "
                   "(none: unknown, which neither counts as a failure nor resets the count).")
def run_command(name: str, command: tuple[str, ...], max_passes: int, breaker: int, state_dir: str | None,
                dry_run: bool, outcome_from_output: bool) -> None:
    """Run one pass of NAME: resumable guard [run] NAME [options] -- CMD [ARGS...]"""
    from resumable.guard.protocol import Options, run_guarded

    raise SystemExit(run_guarded(Options(name, command, state_dir, max_passes, breaker, dry_run,
                                         outcome_from_output)))


@guard_command.command("status", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("name")
@click.option("--history", "with_history", is_flag=True, help="Also list every pass, halt and reset.")
@click.option("--state-dir", metavar="DIR", help=_STATE_DIR_HELP)
def status_command(name: str, with_history: bool, state_dir: str | None) -> None:
    """Show NAME's passes, last outcome, breaker and whether a pass is running (exit 3: unknown NAME)."""
    import sys

    from resumable.guard.status import status_text

    sys.stdout.write(status_text(name, state_dir, with_history))


@guard_command.command("reset", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("name")
@click.option("--all", "everything", is_flag=True, help="Start over: also zero the pass count and last status.")
@click.option("--state-dir", metavar="DIR", help=_STATE_DIR_HELP)
def reset_command(name: str, everything: bool, state_dir: str | None) -> None:
    """Reset NAME's circuit breaker (refused, exit 2, while a pass is running)."""
    from resumable.guard.protocol import reset

    raise SystemExit(reset(name, state_dir, everything))
