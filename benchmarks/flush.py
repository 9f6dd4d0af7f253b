"""What one journal write costs, by how it meets the disk.

    python -m benchmarks.flush [--dir DIR] [--allow-tmpfs] [--samples N]

Prints, measured in one run on the same disk, the median of write(100 bytes) + fdatasync for:

- append: the file grows with every write (the fdatasync must also commit the new size); what the
  journal does, so that it stays a plain JSON Lines file that `tail -f` and `jq` follow;
- over padding: the write lands on zero bytes written and fsynced ahead (what resumable 0.1.0 did,
  given up for a plain file: the price of that choice);
- over padding after stat(): the same, with the file's timestamps asked for before each write,
  which on Linux 6.13+ (multigrain timestamps) makes the write stamp a fine-grained mtime and the
  fdatasync commit the filesystem journal after all (why writers never stat() the journal).

Each as a ratio to the append. Informational: no floor, exit status 0.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from pathlib import Path

from benchmarks._common import parser, scratch

LINE = b"x" * 99 + b"\n"


def _median_write(path: Path, *, padded: bool, stat_first: bool, samples: int) -> float:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        if padded:
            os.write(fd, bytes(samples * len(LINE) + 4096))
            os.fsync(fd)
        offset = 0
        times = []
        for _ in range(samples):
            if stat_first:
                os.stat(path)
            if padded:
                os.lseek(fd, offset, os.SEEK_SET)
                offset += len(LINE)
            else:
                os.lseek(fd, 0, os.SEEK_END)
            t = time.perf_counter()
            os.write(fd, LINE)
            os.fdatasync(fd)
            times.append(time.perf_counter() - t)
        return statistics.median(times)
    finally:
        os.close(fd)
        path.unlink()


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=1000, help="writes per case (default 1000)")
    args = p.parse_args(argv)
    with scratch(args.dir, args.allow_tmpfs) as (work, _fs):
        print(f"kernel: {platform.release()}")
        cases = [("append", False, False), ("over padding", True, False),
                 ("over padding after stat()", True, True)]
        # Two rounds, interleaved, best median of each: the disk's load drifts between cases.
        best: dict[str, float] = {}
        for _ in range(2):
            for name, padded, stat_first in cases:
                m = _median_write(work / "f", padded=padded, stat_first=stat_first,
                                  samples=args.samples)
                best[name] = min(best.get(name, m), m)
        base = best["append"]
        for name, _padded, _stat in cases:
            print(f"{name:28s} median {best[name] * 1e3:6.3f} ms   = {best[name] / base:4.2f} x append")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
