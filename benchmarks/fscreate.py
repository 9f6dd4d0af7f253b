"""What creating a file costs right now, and the wait until it is back to normal.

ext4 without a journal (as on the machines these figures come from) skips, for every new inode, the
inodes freed in the last minute or two (``recently_deleted`` in the kernel's ``fs/ext4/ialloc.c``),
reading each one's inode table block on the way. After a few thousand deletions a create costs
0.1-0.7 ms of CPU instead of 0.02-0.03 ms, for one to three minutes. The runner creates a log per
step and each step creates its output: measured in that spell, a figure would charge the runner for
whatever was deleted last, most often the previous benchmark's scratch directory. The benchmarks
that create a file per step wait for the spell to pass, and print what they found.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

# CPU per create at most, once settled: 0.02-0.03 ms on a quiet ext4 here, and 0.1-0.7 ms in the
# spell; a probe of 500 creates in a new directory may still miss a spell in another block group.
SETTLED_US = 40.0
MAX_WAIT_S = 300.0
PROBE_FILES = 500


def create_cost_us(where: Path) -> float:
    """CPU microseconds per file of creating PROBE_FILES empty files in a new directory under
    ``where`` (left there: deleting them would start a spell of its own)."""
    d = tempfile.mkdtemp(prefix="create-probe-", dir=where)
    t0 = time.process_time()
    for i in range(PROBE_FILES):
        os.close(os.open(os.path.join(d, f"f{i}"), os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))
    return (time.process_time() - t0) / PROBE_FILES * 1e6


def settle(where: Path, max_wait: float = MAX_WAIT_S) -> str:
    """Wait, at most ``max_wait`` seconds, until a create costs at most SETTLED_US of CPU; the line
    to print about it."""
    t0 = time.monotonic()
    first = cost = create_cost_us(where)
    while cost > SETTLED_US and time.monotonic() - t0 < max_wait:
        time.sleep(10)
        cost = create_cost_us(where)
    line = f"file creation: {cost:.0f} us of CPU a file"
    if first > SETTLED_US:
        line += f" ({first:.0f} us at first; waited {time.monotonic() - t0:.0f} s)"
    if cost > SETTLED_US:
        line += f": still above the settled {SETTLED_US:.0f} us, the figures below include recent deletions' cost"
    return line
