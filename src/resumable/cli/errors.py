"""The one place where errors become exit codes and messages, for every command.

``report(exc)`` prints one line, ``resumable: <what is wrong — what to do>``, with control characters
escaped, and returns the exit code from ``resumable.errors.EXIT_CODES``. Errors of the tree carry
their message; foreign exceptions that still reach a command (an OSError the store did not expect,
a click usage error, Ctrl-C, a closed pipe) are translated here; anything else is a bug, reported as
one line too (``RESUMABLE_DEBUG=1`` shows the traceback).

Low-level verbs call ``report`` directly (they do not import click); click commands derive from
``Command``, which routes every failure through it.
"""

from __future__ import annotations

import os
import sys

from resumable.core.text import one_line
from resumable.errors import ResumableError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any


def describe(exc: BaseException) -> tuple[str | None, int]:
    """(message or None for silence, exit code) for an exception that reached a command."""
    if isinstance(exc, ResumableError):
        return str(exc), exc.exit_code
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", 130
    if isinstance(exc, BrokenPipeError):
        return None, 1  # the reader went away (`| head`): nothing to tell it
    if isinstance(exc, OSError):
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror or exc}{where}", 1
    click = sys.modules.get("click")
    if click is not None:
        if isinstance(exc, click.exceptions.UsageError):
            # click exits 2 for usage errors; here 2 means "refused", so a usage error is 1.
            ctx = exc.ctx
            hint = f" (resumable {ctx.command_path.split(' ', 1)[-1]} --help)" if ctx is not None else ""
            return f"{exc.format_message()}{hint}", 1
        if isinstance(exc, click.exceptions.Abort):
            return "interrupted", 130
        if isinstance(exc, click.exceptions.ClickException):
            return exc.format_message(), exc.exit_code if exc.exit_code else 1
    if os.environ.get("RESUMABLE_DEBUG"):
        raise exc
    text = " ".join(str(exc).split())[:300]
    return (f"internal error ({type(exc).__name__}: {text}) — please report it;"
            " RESUMABLE_DEBUG=1 shows the traceback"), 1


def report(exc: BaseException, err: IO[str] | None = None) -> int:
    """Print ``exc`` as one line on stderr and return its exit code."""
    message, code = describe(exc)
    if message is not None:
        stream = err if err is not None else sys.stderr
        try:
            stream.write(f"resumable: {one_line(message)}\n")
            stream.flush()
        except (OSError, ValueError):
            pass
    return code


def warn(message: str, err: IO[str] | None = None) -> None:
    """A one-line warning that does not change the exit code."""
    stream = err if err is not None else sys.stderr
    stream.write(f"resumable: warning: {one_line(message)}\n")


def command_class() -> Any:
    """The click Command class every click command of ours uses (built on first use: importing
    click costs more than a whole low-level verb, which never needs it)."""
    global _COMMAND
    if _COMMAND is None:
        _COMMAND = _build()
    return _COMMAND


_COMMAND: Any = None


def _build() -> Any:
    import click

    class Command(click.Command):
        """Every failure of the command, from parsing its arguments to running it, ends through
        ``report``: one line and the table's exit code, never click's usage block or exit 2."""

        def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
            try:
                return super().parse_args(ctx, args)
            except click.exceptions.UsageError as exc:
                if exc.ctx is None:
                    exc.ctx = ctx
                ctx.exit(report(exc))

        def invoke(self, ctx: click.Context) -> Any:
            try:
                return super().invoke(ctx)
            except (click.exceptions.Exit, SystemExit):
                raise
            except Exception as exc:
                ctx.exit(report(exc))
            except KeyboardInterrupt as exc:
                ctx.exit(report(exc))

    return Command
