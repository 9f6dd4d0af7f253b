"""``python faultcli.py <resumable args>``: the CLI with a fault plan, for reliability goal R5.

Environment: ``PROOF_FAULT=k:ERRNO[:persist]`` makes the k-th hooked I/O call (and with
``persist`` every later one) raise ``OSError(ERRNO)``; ``PROOF_FAULT_LOG=path`` appends one line
``op ok|fail path`` per hooked call, so the test can check that no fsync is ever retried after a
failed one.

A failed fsync is modelled as Linux behaves after a writeback error: the dirty pages are marked
clean and may be dropped, so the bytes written since the file's last successful fsync vanish
(the file goes back to its content at its last successful fsync: appended bytes are cut off,
bytes written over the journal's padding turn back into zeros). A failed directory fsync is modelled the same
way: the directory's entry changes since its last successful fsync (replace, link, unlink) are
dropped, i.e. undone. A failed write raises before writing.
"""

from __future__ import annotations

import errno
import os
import sys


def main() -> int:
    from resumable import fsio
    from resumable.cli.main import main as cli_main

    spec = os.environ.get("PROOF_FAULT", "")
    log_path = os.environ.get("PROOF_FAULT_LOG")
    log = open(log_path, "a") if log_path else None  # noqa: SIM115 - lives as long as the process
    parts = spec.split(":") if spec else []
    k = int(parts[0]) if parts else 0
    code = getattr(errno, parts[1]) if len(parts) > 1 else errno.EIO
    persist = len(parts) > 2 and parts[2] == "persist"
    n = 0
    synced: dict[str, bytes] = {}  # content at the last successful fsync (or first touch)
    # Per directory: undo actions for entry changes not yet covered by a successful fsync_dir.
    undo: dict[str, list[tuple[str, str, str | None]]] = {}
    save_dir = os.path.join(os.environ.get("PROOF_FAULT_SAVE", "/nonexistent"), str(os.getpid()))
    saved = 0

    def save(path: str) -> str | None:
        """Keep the inode currently at ``path`` reachable (hard link), to put it back later."""
        nonlocal saved
        if not os.path.lexists(path):
            return None
        os.makedirs(save_dir, exist_ok=True)
        saved += 1
        keep = os.path.join(save_dir, str(saved))
        os.link(path, keep)
        return keep

    def drop_unsynced_entries(d: str) -> None:
        for op, path, keep in reversed(undo.pop(d, [])):
            if op in ("replace", "unlink") and keep is not None:
                os.replace(keep, path)
            elif op in ("replace", "link") and keep is None and os.path.lexists(path):
                os.unlink(path)

    def hook(op: str, path: str) -> None:
        nonlocal n
        n += 1
        if path not in synced:
            synced[path] = _content(path)
        fail = k > 0 and (n == k or (persist and n > k))
        if log is not None:
            log.write(f"{op} {'fail' if fail else 'ok'} {path}\n")
            log.flush()
        if fail:
            if op == "fsync_dir":
                drop_unsynced_entries(os.path.realpath(path))
            if op == "fsync":
                # The kernel may drop the unsynced pages after a failed fsync: model the worst
                # case for the caller, the bytes since the last good fsync are gone.
                try:
                    with open(path, "r+b") as fh:
                        fh.write(synced[path])
                        fh.truncate()
                except OSError:
                    pass
            raise OSError(code, os.strerror(code), path)
        if op == "fsync":
            # Runs before the real fsync; it does not fail here, so this size becomes durable.
            synced[path] = _content(path)
        elif op == "open":
            synced.pop(path, None)
        elif op == "fsync_dir":
            undo.pop(os.path.realpath(path), None)
        elif op in ("replace", "link", "unlink") and os.environ.get("PROOF_FAULT_SAVE"):
            d = os.path.realpath(os.path.dirname(path))
            undo.setdefault(d, []).append((op, path, save(path)))

    fsio.set_fault_hook(hook)
    return cli_main(sys.argv[1:])


def _content(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return b""


if __name__ == "__main__":
    sys.exit(main())
