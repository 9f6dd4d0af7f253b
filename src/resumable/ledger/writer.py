"""Writing a checkpoint: append-only, crash-safe, and with attempts that never collide.

A write makes a temp file ``.ckpt_<pid>_<random>.tmp`` in the run directory, writes the YAML,
fsyncs it, then hard-links it to its final name (link never replaces an existing name, so an
existing attempt is never overwritten), unlinks the temp name and fsyncs the directory (OmniNode's did
not, so a power cut could lose an acknowledged checkpoint).

Attempt numbers: when the caller gives none, the writer takes the next free number, counting every
file with the phase's name, corrupt or not, and if another writer links that number first (EEXIST)
it rewrites its temp file with the next number and tries again. No list-then-write window: the link
is the claim. (OmniNode's callers counted valid checkpoints from ``list`` and passed count+1: one
corrupt file made every later write pick a taken number and fail, silently, forever.) A number the
caller gives that is taken is refused.

Temp files: the writer holds an flock on its temp file from creation to unlink. A write sweeps the
run directory of temp files older than ``SWEEP_AGE_S`` whose lock it can take (their writer is
gone); a live writer's temp is never touched. On a filesystem without hard links the final file is
created with O_EXCL and written in place (still never clobbers; a crash mid-write leaves a corrupt
attempt that readers skip and the next attempt number steps over).
"""

from __future__ import annotations

import errno
import fcntl
import os

from resumable import fsio
from resumable.errors import InvalidInputError, RefusedError, StoreError
from resumable.ledger import dirs, layout, yamlfmt
from resumable.ledger.model import Checkpoint, Schema, to_dict
from resumable.ledger.store import Entry, parse_file, scan

SWEEP_AGE_S = 600
_MAX_TRIES = 10_000
_NO_HARD_LINKS = (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK)


def write(base: str, checkpoint: Checkpoint, schema: Schema, *, assign_attempt: bool) -> tuple[str, int]:
    """Write ``checkpoint``; returns (path relative to ``base``, attempt number used)."""
    import msgspec

    ordinal = schema.ordinal(checkpoint.phase)
    if ordinal is None:
        raise InvalidInputError(schema.phases.invalid_phase(checkpoint.phase))
    ticket, run = checkpoint.ticket_id, str(checkpoint.run_id)
    where = f"{base}/{ticket}/{run}"
    prefix = layout.phase_prefix(ordinal, checkpoint.phase)
    # Checked before anything is created (a refused write changes nothing on disk); the attempt
    # number the loop below may change is an integer, which reads back whatever its value.
    as_given = yamlfmt.dump(to_dict(checkpoint))
    _refuse_unless_it_reads_back(as_given, checkpoint, schema)
    fds: list[int] = []
    try:
        base_fd = dirs.open_base(base, create=True)
        assert base_fd is not None
        fds.append(base_fd)
        ticket_fd = dirs.open_child(base_fd, ticket, f"{base}/{ticket}", create=True)
        assert ticket_fd is not None
        fds.append(ticket_fd)
        run_fd = dirs.open_child(ticket_fd, run, where, create=True)
        assert run_fd is not None
        fds.append(run_fd)

        entries, temps = scan(run_fd, where, prefix)
        sweep(run_fd, temps)
        attempt = _next_attempt(entries, checkpoint.phase, 0) if assign_attempt else checkpoint.attempt_number
        tmp_name, tmp_fd = _create_temp(run_fd, where)
        try:
            for _ in range(_MAX_TRIES):
                if attempt == checkpoint.attempt_number:
                    data = as_given
                else:
                    data = yamlfmt.dump(to_dict(msgspec.structs.replace(checkpoint, attempt_number=attempt)))
                name = layout.file_name(ordinal, checkpoint.phase, attempt)
                if _publish(run_fd, tmp_fd, tmp_name, name, data, where):
                    break
                if not assign_attempt:
                    raise RefusedError(f"Checkpoint already exists: {name} — increment attempt_number to "
                                       "create a new checkpoint")
                entries, _ = scan(run_fd, where, prefix)
                attempt = _next_attempt(entries, checkpoint.phase, attempt)
            else:
                raise StoreError(f"could not claim an attempt number in {where} after {_MAX_TRIES} tries")
        finally:
            _discard_temp(run_fd, tmp_fd, tmp_name)
        try:
            os.fsync(run_fd)
        except OSError as exc:
            raise dirs.translate(exc, f"cannot make {where}/{name} durable") from exc
        return f"{ticket}/{run}/{name}", attempt
    finally:
        for fd in reversed(fds):
            os.close(fd)


def _refuse_unless_it_reads_back(data: bytes, checkpoint: Checkpoint, schema: Schema) -> None:
    """A write is acknowledged only for bytes that readers will take for ``checkpoint``: parsed as
    a reader parses them, they must come back equal to it (or, for a float NaN, which equals
    nothing, written out again, as the same bytes). A string YAML cannot carry would otherwise be
    acknowledged, then skipped as corrupt by every reader."""
    read_back, problem = parse_file(data, schema)
    if read_back is None:
        raise InvalidInputError(f"Invalid checkpoint: it would not read back ({problem}); nothing was written")
    if read_back != checkpoint and yamlfmt.dump(to_dict(read_back)) != data:
        raise InvalidInputError("Invalid checkpoint: it would read back different from what was given; "
                                "nothing was written")


def _next_attempt(entries: list[Entry], phase: str, at_least: int) -> int:
    taken = [e.attempt for e in entries if e.phase == phase]
    return max(max(taken, default=0), at_least) + 1


def _create_temp(run_fd: int, where: str) -> tuple[str, int]:
    for _ in range(100):
        name = f"{layout.TEMP_PREFIX}{os.getpid()}_{os.urandom(4).hex()}{layout.TEMP_SUFFIX}"
        try:
            fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                         dir_fd=run_fd)
        except FileExistsError:
            continue
        except OSError as exc:
            raise dirs.translate(exc, f"cannot create a temp file in {where}") from exc
        # Held until the temp name is gone: a sweeper that can take this lock knows the writer died.
        fcntl.flock(fd, fcntl.LOCK_EX)
        return name, fd
    raise StoreError(f"cannot create a temp file in {where}")


def _fill(fd: int, data: bytes, path: str) -> None:
    os.lseek(fd, 0, os.SEEK_SET)
    os.ftruncate(fd, 0)
    fsio.write_all(fd, data, path)
    fsio.fsync(fd, path)


def _publish(run_fd: int, tmp_fd: int, tmp_name: str, name: str, data: bytes, where: str) -> bool:
    """Give the written data its final name; False when the name is taken."""
    try:
        _fill(tmp_fd, data, f"{where}/{tmp_name}")
    except OSError as exc:
        raise dirs.translate(exc, f"cannot write {where}/{name}") from exc
    try:
        os.link(tmp_name, name, src_dir_fd=run_fd, dst_dir_fd=run_fd, follow_symlinks=False)
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise dirs.translate(exc, f"cannot write {where}/{name}") from exc
        return _create_in_place(run_fd, name, data, where)
    return True


def _create_in_place(run_fd: int, name: str, data: bytes, where: str) -> bool:
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                     dir_fd=run_fd)
    except FileExistsError:
        return False
    except OSError as exc:
        raise dirs.translate(exc, f"cannot write {where}/{name}") from exc
    try:
        fsio.write_all(fd, data, f"{where}/{name}")
        fsio.fsync(fd, f"{where}/{name}")
    except OSError as exc:
        raise dirs.translate(exc, f"cannot write {where}/{name}") from exc
    finally:
        os.close(fd)
    return True


def _discard_temp(run_fd: int, tmp_fd: int, tmp_name: str) -> None:
    try:
        os.unlink(tmp_name, dir_fd=run_fd)
    except OSError:
        pass  # a sweep can only have taken it if we had died; nothing else removes it
    finally:
        os.close(tmp_fd)


def sweep(run_fd: int, temps: list[str], age_s: float = SWEEP_AGE_S) -> list[str]:
    """Remove orphaned temp files: regular, older than ``age_s``, and not locked by a live writer.
    Best effort: a write never fails because of the sweep. Returns the names removed."""
    import time

    removed = []
    cutoff = time.time_ns() - int(age_s * 1e9)
    for name in temps:
        try:
            st = os.stat(name, dir_fd=run_fd, follow_symlinks=False)
            if not (st.st_mode & 0o170000 == 0o100000 and st.st_mtime_ns < cutoff):
                continue
            fd = os.open(name, dirs.FILE_FLAGS, dir_fd=run_fd)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if os.fstat(fd).st_ino == os.stat(name, dir_fd=run_fd, follow_symlinks=False).st_ino:
                os.unlink(name, dir_fd=run_fd)
                removed.append(name)
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed
