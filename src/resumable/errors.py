"""One error tree for the whole package, and the one table that maps it to exit codes.

    ResumableError                 exit 1   base; never raised itself
    ├── UsageError                 exit 1   bad arguments, unknown verb, missing option value
    ├── InvalidInputError          exit 1   bad ids, states, JSON, job files
    ├── StoreError                 exit 1   the store could not read or write (I/O, permissions)
    │   ├── CorruptRunError        exit 1   a complete journal record or snapshot is damaged
    │   ├── NewerFormatError       exit 1   written by a newer resumable: refused, never misread
    │   └── DiskFullError          exit 1   ENOSPC / EDQUOT while writing
    ├── RefusedError               exit 2   the operation would break the checkpoint contract
    ├── NoRunError                 exit 3   no run matches the id given
    └── Interrupted                exit 130 SIGINT/SIGTERM; state saved, resumable

Foreign exceptions (OSError, JSONDecodeError, ...) are translated at the I/O boundary with
``raise ... from exc``; whatever still reaches a command is turned into one line by
``resumable.cli.errors``, the only place where errors become exit codes and messages.
Messages are one line and say what to do.
"""

from __future__ import annotations


class ResumableError(Exception):
    """Base of every error the package raises on purpose."""

    def __init__(self, message: str) -> None:
        # One line, always: a multi-line message would break `2>&1 | tail -1` style scripts.
        super().__init__(" ".join(message.split("\n")))

    @property
    def message(self) -> str:
        return str(self)

    @property
    def exit_code(self) -> int:
        """The process exit code this error ends a command with (``EXIT_CODES``)."""
        return exit_code_of(type(self))


class UsageError(ResumableError):
    pass


class InvalidInputError(ResumableError):
    pass


class StoreError(ResumableError):
    pass


class CorruptRunError(StoreError):
    pass


class NewerFormatError(StoreError):
    pass


class DiskFullError(StoreError):
    pass


class RefusedError(ResumableError):
    pass


class NoRunError(ResumableError):
    pass


class Interrupted(ResumableError):
    pass


# The one table from the error tree to exit codes (docs/reference/exit-codes.md). A class not listed takes
# its nearest listed base's code; a test checks that every class of the tree is listed.
EXIT_CODES: dict[type[ResumableError], int] = {
    ResumableError: 1,
    UsageError: 1,
    InvalidInputError: 1,
    StoreError: 1,
    CorruptRunError: 1,
    NewerFormatError: 1,
    DiskFullError: 1,
    RefusedError: 2,
    NoRunError: 3,
    Interrupted: 130,
}


def exit_code_of(kind: type[BaseException]) -> int:
    for cls in kind.__mro__:
        code = EXIT_CODES.get(cls)
        if code is not None:
            return code
    return 1
