"""Which filesystem a benchmark measures on, and the refusal to measure fsync on tmpfs (where it
is free, so every ratio to "one append + fsync" would be meaningless)."""

from __future__ import annotations

import os
import sys

MEMORY_FS = {"tmpfs", "ramfs", "devtmpfs"}


def filesystem(path: str) -> tuple[str, str, str]:
    """(fstype, device, mount point) of the filesystem holding ``path``."""
    real = os.path.realpath(path)
    best = ("?", "?", "/")
    with open("/proc/self/mounts", encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) < 3:
                continue
            dev, mnt, fstype = parts[0], parts[1].replace("\\040", " "), parts[2]
            if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best[2]):
                best = (fstype, dev, mnt)
    return best


def describe_or_refuse(path: str, allow_tmpfs: bool) -> str:
    fstype, dev, mnt = filesystem(path)
    text = f"{fstype} ({dev} on {mnt}), directory {path}"
    if fstype in MEMORY_FS and not allow_tmpfs:
        sys.stderr.write(
            f"refusing to measure on {fstype}: fsync is free there, so the ratios would mean"
            " nothing; use --dir on a real disk, or --allow-tmpfs to measure anyway\n"
        )
        raise SystemExit(2)
    return text
