"""Durable steps on numpy data: keying a large array and recording an array result, against joblib
measured in the same run.

    python -m benchmarks.durable_data [--dir DIR] [--allow-tmpfs] [--quick]

Prints, on the same disk and in one run (needs numpy and the ``bench`` extra's joblib):

- keying a 100 MB float64 array (what a step call with it as its argument computes before it can
  look its result up) against ``joblib.hash`` of the same array, in CPU time, rounds alternated:
  floor, at most 1.0 x;
- a recorded miss whose result is a 1 MB array (the step runs, its result is written as .npy to a
  blob beside the run, fsynced, and its record committed) against a miss of ``joblib.Memory`` on the
  same function (a pickle file written, not fsynced), CPU time and wall time: reported.

Exit status 1 if a floor is missed.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks._common import parser, scratch

MB = 1024 * 1024


def cpu(fn: Callable[[], Any]) -> float:
    t = time.process_time()
    fn()
    return time.process_time() - t


def keying(rounds: int) -> tuple[float, float]:
    """(CPU seconds to key the 100 MB array, CPU seconds of joblib.hash on it): medians, alternated."""
    import joblib  # type: ignore[import-untyped]
    import numpy as np

    from resumable.durable.content import call_key

    array = np.random.default_rng(0).random(100 * MB // 8)
    ours, theirs = [], []
    for _ in range(rounds):
        ours.append(cpu(lambda: call_key({"x": array}, "step")))
        theirs.append(cpu(lambda: joblib.hash(array)))
    return statistics.median(ours), statistics.median(theirs)


def result(i: int) -> Any:
    import numpy as np

    return np.full(MB // 8, float(i))  # 1 MB


def misses(work: Path, n: int) -> tuple[tuple[float, float], tuple[float, float]]:
    """((CPU, wall) seconds per recorded miss, the same for joblib.Memory), means over ``n`` calls."""
    import joblib

    import resumable

    run = resumable.open_run("arrays", runs_dir=work / "runs", task="array results")
    step = run.step(result, name="result")
    step(-1)  # the session (lease, begin record) and the blob directories: not part of a miss
    cached = joblib.Memory(str(work / "joblib"), verbose=0).cache(result)
    cached(-1)

    def timed(fn: Callable[[int], Any], offset: int) -> tuple[float, float]:
        c, t = time.process_time(), time.perf_counter()
        for i in range(n):
            fn(offset + i)
        return (time.process_time() - c) / n, (time.perf_counter() - t) / n

    ours, theirs = [], []
    for k in range(3):  # alternated rounds, each on new arguments: every call a miss
        ours.append(timed(step, k * n))
        theirs.append(timed(cached, k * n))
    run.finish()
    return ((statistics.median(c for c, _ in ours), statistics.median(w for _, w in ours)),
            (statistics.median(c for c, _ in theirs), statistics.median(w for _, w in theirs)))


def main(argv: list[str] | None = None) -> int:
    p = parser("Durable steps on numpy data against joblib")
    p.add_argument("--quick", action="store_true", help="fewer rounds")
    args = p.parse_args(argv)
    try:
        import joblib  # noqa: F401
        import numpy  # noqa: F401
    except ImportError as missing:
        print(f"needs numpy and joblib ({missing.name}): pip install numpy '.[bench]'", file=sys.stderr)
        return 1
    ok = True
    with scratch(args.dir, args.allow_tmpfs) as (work, _):
        ours, theirs = keying(3 if args.quick else 7)
        ratio = ours / theirs
        ok &= ratio <= 1.0
        print(f"keying a 100 MB array: {ours * 1000:.1f} ms CPU against joblib.hash {theirs * 1000:.1f} ms"
              f" = {ratio:.2f} x (floor: at most 1.0 x) {'pass' if ratio <= 1.0 else 'FAIL'}")
        (c, w), (jc, jw) = misses(work, 10 if args.quick else 30)
        print(f"a recorded miss with a 1 MB array result: {c * 1000:.2f} ms CPU, {w * 1000:.2f} ms wall;"
              f" joblib.Memory {jc * 1000:.2f} ms CPU, {jw * 1000:.2f} ms wall"
              f" = {c / jc:.2f} x CPU, {w / jw:.2f} x wall (reported; joblib does not fsync)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
