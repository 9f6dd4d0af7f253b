"""The guard's state file, ``<state-dir>/<NAME>-state.yaml``: cron-closeout's keys, in its
format, so that its ``grep '^key:' FILE | awk '{print $2}'`` reader keeps working::

    schema_version: "1.0.0"
    pass_count: 5
    last_status: success            # success | noop | failure | halt | unknown
    last_run_at: 2026-03-28T22:00:00Z
    consecutive_failures: 0
    dry_run: false
    last_exit_code: 0               # added: the command's exit status
    breaker_tripped_at: never       # added: when the breaker last refused a pass (cron-closeout kept no trace)
    pass_started_at: none           # added: when the pass counted in pass_count started, while it runs

A pass is counted when it starts, before its command is launched (``after_start``), so a guard
killed mid-pass never loses the pass and ``--max-passes`` is never overrun; ``pass_started_at``
says the outcome is still to come. Found set by an invocation holding the lock (so the pass's
command is gone), it is a pass whose guard was killed: recorded then as a failure.

Parsing follows cron-closeout's reader (first ``key:`` line, first word after it, quotes stripped;
unknown keys ignored) but refuses values cron-closeout would have fed to shell arithmetic, and a file
holding none of the keys (read as a fresh state, it would silently reset the counts). Writing is
atomic: temp file + fsync + rename + fsync of the directory (cron-closeout used ``cat >``, which a crash
or a full disk leaves empty or half-written).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, replace

from resumable.errors import InvalidInputError, StoreError
from resumable.guard.outcome import counts_as_failure

SCHEMA_VERSION = "1.0.0"
_MAX_BYTES = 1 << 16


@dataclass(frozen=True)
class GuardState:
    pass_count: int = 0
    last_status: str = "none"
    last_run_at: str = "never"
    consecutive_failures: int = 0
    dry_run: bool = False
    last_exit_code: int | None = None
    breaker_tripped_at: str = "never"
    schema_version: str = SCHEMA_VERSION
    pass_started_at: str = "none"

    @property
    def unfinished(self) -> bool:
        """Whether the last pass counted has not recorded its outcome."""
        return self.pass_started_at != "none"


KEYS = ("schema_version", "pass_count", "last_status", "last_run_at", "consecutive_failures", "dry_run",
        "last_exit_code", "breaker_tripped_at", "pass_started_at")


def reset_command(name: str, state_dir: str, *, everything: bool = False) -> str:
    """The ``guard reset`` line to paste, with the state directory it needs to find NAME."""
    import shlex

    return f"resumable guard reset {name}{' --all' if everything else ''} --state-dir {shlex.quote(state_dir)}"


def parse(text: str, path: str, name: str) -> GuardState:
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        if sep and key and key == key.strip() and not key.startswith("#") and key not in values:
            words = rest.split()
            values[key] = words[0].strip("\"'") if words else ""
    fix = f"fix {path} or run `{reset_command(name, os.path.dirname(path), everything=True)}`"
    if not any(key in values for key in KEYS):
        raise InvalidInputError(f"{path} holds none of a guard state's keys ({', '.join(KEYS[1:5])}, ...); {fix}")

    def whole(key: str, default: int) -> int:
        raw = values.get(key)
        if raw is None:
            return default
        if not (raw.isascii() and raw.isdigit()):
            raise InvalidInputError(f"{path}: {key} is {raw!r}, not a whole number; {fix}")
        return int(raw)

    version = values.get("schema_version", SCHEMA_VERSION)
    major = version.split(".")[0]
    if major.isdigit() and int(major) > int(SCHEMA_VERSION.split(".")[0]):
        raise InvalidInputError(f"{path}: schema_version {version} was written by a newer resumable; upgrade")
    code = values.get("last_exit_code")
    exit_code = int(code) if code is not None and code.lstrip("-").isdigit() and code.isascii() else None
    return GuardState(pass_count=whole("pass_count", 0), last_status=values.get("last_status") or "none",
                      last_run_at=values.get("last_run_at") or "never",
                      consecutive_failures=whole("consecutive_failures", 0),
                      dry_run=values.get("dry_run") == "true", last_exit_code=exit_code,
                      breaker_tripped_at=values.get("breaker_tripped_at") or "never", schema_version=version,
                      pass_started_at=values.get("pass_started_at") or "none")


def render(state: GuardState, name: str, state_dir: str) -> bytes:
    code = "none" if state.last_exit_code is None else str(state.last_exit_code)
    return (
        f"# resumable guard state of {name}; written by `resumable guard`, atomically.\n"
        f"# Reset the breaker with `{reset_command(name, state_dir)}` (or set consecutive_failures to 0).\n"
        f'schema_version: "{SCHEMA_VERSION}"\n'
        f"pass_count: {state.pass_count}\n"
        f"last_status: {state.last_status}\n"
        f"last_run_at: {state.last_run_at}\n"
        f"consecutive_failures: {state.consecutive_failures}\n"
        f"dry_run: {'true' if state.dry_run else 'false'}\n"
        f"last_exit_code: {code}\n"
        f"breaker_tripped_at: {state.breaker_tripped_at}\n"
        f"pass_started_at: {state.pass_started_at}\n"
    ).encode()


def after_start(state: GuardState, now: str) -> GuardState:
    """A pass is about to launch its command: counted now (cron-closeout's count goes up on every pass)."""
    return replace(state, pass_count=state.pass_count + 1, pass_started_at=now, dry_run=False,
                   schema_version=SCHEMA_VERSION)


def after_pass(state: GuardState, status: str, exit_code: int | None, now: str) -> GuardState:
    """The pass counted by ``after_start`` ended: cron-closeout's counting, except that ``unknown``
    leaves the failure count alone. ``exit_code`` None: unknown (its guard was killed)."""
    failed = counts_as_failure(status)
    failures = state.consecutive_failures + 1 if failed else (0 if failed is False else state.consecutive_failures)
    return replace(state, last_status=status, last_run_at=now, consecutive_failures=failures, dry_run=False,
                   last_exit_code=exit_code, breaker_tripped_at="never", pass_started_at="none",
                   schema_version=SCHEMA_VERSION)


def after_dry_run(state: GuardState) -> GuardState:
    """A dry run is recorded as cron-closeout's ``dry_run`` says ("whether the last pass used
    --dry-run"), and changes nothing else: no pass counted, no outcome, the breaker as it was."""
    return replace(state, dry_run=True)


def after_halt(state: GuardState, now: str) -> GuardState:
    return replace(state, breaker_tripped_at=now, schema_version=SCHEMA_VERSION)


def read(path: str, name: str) -> GuardState | None:
    """The state at ``path`` (None when there is none); a planted link, FIFO or other non-file is
    refused without blocking."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise refuse_or_translate(exc, path) from exc
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise refused(path, mode)
        data = os.read(fd, _MAX_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > _MAX_BYTES:
        raise InvalidInputError(f"{path} is too large to be a guard state file; remove it")
    return parse(data.decode("utf-8", "replace"), path, name)


def write(path: str, state: GuardState, name: str) -> None:
    from resumable import fsio

    try:
        fsio.atomic_write(path, render(state, name, os.path.dirname(path)))
    except OSError as exc:
        raise refuse_or_translate(exc, path) from exc


def refused(path: str, mode: int) -> StoreError:
    kind = ("a symbolic link" if stat.S_ISLNK(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a directory" if stat.S_ISDIR(mode) else "not a regular file")
    return StoreError(f"refused: {path} is {kind}; resumable does not follow or read what it did not write "
                      "(remove it)")


def refuse_or_translate(exc: OSError, path: str) -> StoreError:
    import errno

    if exc.errno == errno.ELOOP:
        return refused(path, stat.S_IFLNK)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        from resumable.errors import DiskFullError

        return DiskFullError(f"{path}: no space left on device; free some space")
    return StoreError(f"{path}: {exc.strerror or exc}")
