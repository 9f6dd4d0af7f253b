"""``run.map`` on a Dask cluster: the figures of ``python -m benchmarks.durable`` (``--cluster`` for
only these). On a LocalCluster of 2 worker processes with 4 threads each, in one run:

- overhead: 2,000 items of a step that sleeps 5 ms, ``run.map(..., executor=client.get_executor())``
  against ``list(client.get_executor().map(f, items))`` on the same cluster, interleaved (fresh
  items each round: Dask would otherwise reuse results it still holds); floor 1.25 x;
- re-run: a second ``run.map`` of the same 2,000 recorded items: it submits nothing, floor 0.2 s;
- scale: a fresh process opens a run of 1,000, 10,000 and 100,000 recorded items and maps the step
  over all of them on the cluster's executor: at 100,000, floors 3 s of CPU (its wall time is
  printed too) and 300 MB peak RSS (the runner's floor at 100,000 steps), and a CPU cost per item
  at most 1.2 x the cost at 1,000.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import Any

import resumable
from benchmarks._common import REPO, scratch

ITEMS = 2000
SCALES = (1000, 10_000, 100_000)


def sleepy(i: int) -> int:
    time.sleep(0.005)
    return i


def trivial(i: int) -> dict[str, Any]:
    return {"i": i, "sq": i * i, "label": f"item-{i}", "tags": ["a", "b"]}


class CountingExecutor(Executor):
    """Counts what ``run.map`` submits, so that "submits nothing" is a measured figure."""

    def __init__(self, inner: Executor) -> None:
        self.inner = inner
        self.submitted = 0

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.submitted += 1
        return self.inner.submit(fn, *args, **kwargs)


def overhead(client: Any, runs: Path, rounds: int) -> tuple[list[float], list[float], float, int]:
    """(bare seconds per round, run.map seconds per round, re-run seconds, re-run submissions)."""
    bare: list[float] = []
    mapped: list[float] = []
    counting = CountingExecutor(client.get_executor())
    rerun, resubmitted = 0.0, -1
    for k in range(rounds):
        items = list(range(2 * k * ITEMS, (2 * k + 1) * ITEMS))
        t = time.perf_counter()
        assert list(client.get_executor().map(sleepy, items)) == items
        bare.append(time.perf_counter() - t)
        run = resumable.open_run(f"cluster-{k}", runs_dir=runs, task="run.map on a Dask cluster")
        step = run.step(sleepy)
        items = [i + ITEMS for i in items]
        t = time.perf_counter()
        assert run.map(step, items, executor=client.get_executor(), progress=False) == items
        mapped.append(time.perf_counter() - t)
        before = counting.submitted
        t = time.perf_counter()
        assert run.map(step, items, executor=counting, progress=False) == items
        rerun = max(rerun, time.perf_counter() - t)
        resubmitted = max(resubmitted, counting.submitted - before)
        run.finish()
    return bare, mapped, rerun, resubmitted


# The peak RSS is the process's own high-water mark (VmHWM): getrusage's ru_maxrss carries over,
# across exec, the peak of the process that forked it (this benchmark's, which holds a large run).
# Its CPU time is the figure that holds on a shared machine (the wall time is printed beside it).
ANSWER = """
import sys, time
import resumable
from distributed import Client
from benchmarks.durable_cluster import CountingExecutor, trivial
runs, scheduler, n, run_id = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
with Client(scheduler) as client:
    executor = CountingExecutor(client.get_executor())
    start, cpu = time.perf_counter(), time.process_time()
    run = resumable.open_run(run_id, runs_dir=runs, task=f"{n:,} recorded items")
    results = run.map(run.step(trivial), range(n), executor=executor, progress=False)
    took, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert results[n - 1] == trivial(n - 1)
    with open("/proc/self/status") as f:
        peak = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    print(took, cpu, executor.submitted, peak)
"""


def scale(client: Any, runs: Path, n: int) -> tuple[float, float, int, float]:
    """(seconds to open the run and answer the map, the CPU seconds of it, submissions, peak RSS in
    MB) in a fresh process."""
    run_id = f"scale-{n}"
    run = resumable.open_run(run_id, runs_dir=runs, task=f"{n:,} recorded items")
    run.map(run.step(trivial), range(n), progress=False)  # recorded on this process's threads
    run.finish()
    proc = subprocess.run([sys.executable, "-c", ANSWER, str(runs), client.scheduler.address, str(n), run_id],
                          cwd=REPO, capture_output=True, text=True, check=False, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"the answering process failed: {proc.stderr.strip()[-2000:]}")
    took, cpu, submitted, rss_kb = proc.stdout.split()
    return float(took), float(cpu), int(submitted), int(rss_kb) / 1024


def main(args: argparse.Namespace) -> int:
    try:
        import distributed
    except ImportError:
        print("Dask cluster figures: distributed is not installed (pip install '.[dask]' or '.[test]')")
        return 0
    rounds = 1 if args.quick else 2
    with scratch(args.dir, args.allow_tmpfs) as (work, _fs), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=4, processes=True, dashboard_address=None,
                                     silence_logs=40) as cluster, distributed.Client(cluster) as client:
        runs = work / "runs"
        runs.mkdir()
        with open("/proc/loadavg") as f:
            print(f"Dask LocalCluster: 2 workers x 4 threads; load average {f.read().split()[0]}")
        bare, mapped, rerun, resubmitted = overhead(client, runs, rounds)
        b, m = statistics.median(bare), statistics.median(mapped)
        print(f"{ITEMS:,} items of a 5 ms step, bare executor.map   {b:8.3f} s   (rounds: "
              f"{', '.join(f'{x:.2f}' for x in bare)})")
        print(f"{ITEMS:,} items, run.map on client.get_executor() {m:8.3f} s   = {m / b:5.2f} x bare (rounds: "
              f"{', '.join(f'{x:.2f}' for x in mapped)})")
        print(f"re-run of the {ITEMS:,} recorded items           {rerun:8.3f} s   ({resubmitted} submitted)")
        scaled = {}
        for n in SCALES:
            took, cpu, submitted, rss = scaled[n] = scale(client, runs, n)
            print(f"{n:>7,} recorded items, fresh process      CPU {cpu:6.3f} s ({cpu / n * 1e6:5.1f} us per item)"
                  f"   wall {took:6.3f} s   peak RSS {rss:4.0f} MB ({submitted} submitted)")
        took, cpu, submitted, rss = scaled[SCALES[-1]]
        per_item = (cpu / SCALES[-1]) / (scaled[SCALES[0]][1] / SCALES[0])
    checks = [
        ("run.map on Dask <= 1.25 x bare executor.map", m / b, 1.25),
        ("re-run of 2,000 recorded items < 0.2 s", rerun, 0.2),
        ("re-run submits nothing", float(resubmitted), 0.0),
        ("100,000 recorded items answered < 3 s (CPU)", cpu, 3.0),
        ("100,000 recorded items: peak RSS < 300 MB", rss, 300.0),
        ("100,000 recorded items: nothing submitted", float(sum(x[2] for x in scaled.values())), 0.0),
        ("cost per recorded item at 100,000 <= 1.2 x at 1,000", per_item, 1.2),
    ]
    ok = True
    for name, value, limit in checks:
        good = value <= limit
        ok &= good
        print(f"{'PASS' if good else 'FAIL'}  {name}: {value:.2f}")
    return 0 if ok else 1
