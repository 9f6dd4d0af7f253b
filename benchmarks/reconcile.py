"""How long ``resumable reconcile`` takes on a long history (the bound: 10,000 commits in under 2 s).

    python -m benchmarks.reconcile [--commits N] [--units N] [--runs N] [--dir DIR]

Builds a repository of N commits (each with a Task-Id trailer) with ``git fast-import``, a run
document of N units (half done, plus one done unit whose commit is lost), then times, median of
``--runs``:

- baseline: ``git log --format=%H main``, git walking the same history and printing nothing else;
- reconcile: ``resumable.git.reconcile.reconcile`` (resolve the ref, read every message, parse the
  trailers, plan the table), i.e. everything ``resumable reconcile --dry-run`` does besides I/O on
  the run itself.

Prints both and their ratio. Informational; exit status 0.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from resumable.git.reconcile import ReconcilePlan, reconcile

ENV = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}


def build(repo: Path, n: int) -> None:
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True, env=ENV)
    parts: list[bytes] = []
    for i in range(1, n + 1):
        data = f"integrate t{i}\n\nRun-Id: r1\nTask-Id: t{i}\nPlan-Id: p1\n".encode()
        parts.append(f"commit refs/heads/main\nmark :{i}\ncommitter B <b@example.com> {1_700_000_000 + i} +0000\n"
                     f"data {len(data)}\n".encode() + data + (f"from :{i - 1}\n".encode() if i > 1 else b"") + b"\n")
    subprocess.run(["git", "-C", str(repo), "fast-import", "--quiet"], input=b"".join(parts), check=True, env=ENV)


def median_time(fn: Callable[[], None], runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    p.add_argument("--commits", type=int, default=10_000)
    p.add_argument("--units", type=int, default=None, help="units in the run (default: --commits)")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--dir", default=None, help="build the repository under DIR (default: the temp dir)")
    args = p.parse_args()
    n_units = args.commits if args.units is None else args.units
    work = Path(tempfile.mkdtemp(prefix="reconcile-bench-", dir=args.dir))
    try:
        repo = work / "repo"
        t = time.perf_counter()
        build(repo, args.commits)
        version = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
        print(f"python {sys.version.split()[0]}; {version}")
        print(f"built {args.commits} commits with fast-import in {time.perf_counter() - t:.2f}s")
        units = {f"t{i}": {"status": "done" if i % 2 else "pending"} for i in range(1, n_units + 1)}
        units["lost"] = {"status": "done"}
        doc = {"units": units, "openItems": []}

        def baseline() -> None:
            subprocess.run(["git", "-C", str(repo), "log", "--format=%H", "main"], check=True,
                           capture_output=True, env=ENV)

        result: dict[str, ReconcilePlan] = {}

        def measured() -> None:
            result["plan"] = reconcile(doc, repo, "main", run_id="r1")

        base = median_time(baseline, args.runs)
        took = median_time(measured, args.runs)
        plan = result["plan"]
        print(f"git log --format=%H (baseline): {base * 1000:8.1f} ms")
        print(f"reconcile (read + plan):        {took * 1000:8.1f} ms   ({took / base:.1f}x baseline)")
        print(f"  integrated {len(plan.integrated)}, reconciled {len(plan.reconciled)}, "
              f"staleDone {len(plan.stale_done)}, runnable {len(plan.runnable)}")
        print(f"under 2 s for {args.commits} commits: {'yes' if took < 2 else 'NO'}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
