"""One error tree for the whole package; each error knows its exit code.

    ResumableError                 exit 1   base; never raised itself
    ├── UsageError                 exit 1   bad arguments, unknown verb, missing option value
    ├── InvalidInputError          exit 1   bad ids, states, JSON, job files
    ├── StoreError                 exit 1   the store could not read or write (I/O, permissions)
    │   ├── CorruptRunError        exit 1   a complete journal record or snapshot is damaged
    │   └── DiskFullError          exit 1   ENOSPC / EDQUOT while writing
    ├── RefusedError               exit 2   the operation would break the checkpoint contract
    ├── NoRunError                 exit 3   no run matches the id given
    └── Interrupted                exit 130 SIGINT/SIGTERM; state saved, resumable

Foreign exceptions (OSError, JSONDecodeError, ...) are translated at the I/O boundary with
``raise ... from exc`` so that the CLI, the only place errors become exit codes, sees just these.
Messages are one line and say what to do.
"""

from __future__ import annotations


class ResumableError(Exception):
    """Base of every error the package raises on purpose."""

    exit_code: int = 1

    def __init__(self, message: str) -> None:
        # One line, always: a multi-line message would break `2>&1 | tail -1` style scripts.
        super().__init__(" ".join(message.split("\n")))

    @property
    def message(self) -> str:
        return str(self)


class UsageError(ResumableError):
    exit_code = 1


class InvalidInputError(ResumableError):
    exit_code = 1


class StoreError(ResumableError):
    exit_code = 1


class CorruptRunError(StoreError):
    exit_code = 1


class DiskFullError(StoreError):
    exit_code = 1


class RefusedError(ResumableError):
    exit_code = 2


class NoRunError(ResumableError):
    exit_code = 3


class Interrupted(ResumableError):
    exit_code = 130
