"""What Linux's /proc says about a process: the one reader of ``/proc/<pid>/stat``.

The runner, its lease and `doctor` tell a live process from a reused pid by its start time
(field 22), and a process group's members by their group (field 5); a zombie counts as gone."""

from __future__ import annotations


def stat_of(pid: int) -> tuple[str, int, str] | None:
    """(state, process group, start time) of ``pid``, or None when it is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode("ascii", "replace")
    except OSError:
        return None
    # The command name (field 2) may contain spaces and ')': split after the last ')'.
    rest = data[data.rfind(")") + 2:].split()
    try:
        return rest[0], int(rest[2]), rest[19]
    except (IndexError, ValueError):
        return None


def start_time(pid: object) -> str | None:
    """The kernel's start time of a live (not zombie) process ``pid``, or None."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None
    st = stat_of(pid)
    return st[2] if st is not None and st[0] not in ("Z", "X") else None
