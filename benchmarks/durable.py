"""Durable Python functions: what a step call costs, against the baselines measured in the same run.

    python -m benchmarks.durable [--dir DIR] [--allow-tmpfs] [--quick] [--cluster | --no-cluster]

Prints, on the same disk and in one run:

- L, one append of a 100-byte line + fsync (sampled alternately with the misses below);
- a cache hit (a call whose result is recorded) against the same plain function call: floor, at
  most 20 us more;
- a miss (the step runs and its result, under 1 KiB, is recorded) against L: floor 1.5 x L;
- ``run.map`` of 10,000 trivial calls on 8 threads against the same 10,000 calls made one at a time:
  floor 3 x faster (group commit: the items that end together share one fsync);
- joblib ``Memory`` on the same calls (miss and hit), for comparison (no floor; needs the ``bench``
  extra: ``pip install '.[bench]'``);
- on a Dask LocalCluster (2 worker processes, 4 threads each; needs ``distributed``, in the ``test``
  and ``dask`` extras; ``benchmarks/durable_cluster.py``): ``run.map`` of 2,000 items of a 5 ms step
  on ``client.get_executor()`` against the bare ``list(client.get_executor().map(f, items))`` (floor
  1.25 x), a second map of the same items (floor: submits nothing, under 0.2 s), and maps of
  1,000, 10,000 and 100,000 recorded items in a fresh process (floors at 100,000: under 3 s, under
  300 MB peak RSS, a cost per item at most 1.2 x that at 1,000).
  ``--cluster`` measures only these, ``--no-cluster`` skips them.

Exit status 1 if a floor is missed.
"""

from __future__ import annotations

import gc
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import resumable
from benchmarks._common import parser, scratch
from benchmarks.measure import pct


def trivial(i: int) -> dict[str, Any]:
    return {"i": i, "sq": i * i, "label": f"item-{i}", "tags": ["a", "b"]}


def per_call(fn: Any, args: list[Any], rounds: int = 7) -> float:
    """Median over rounds of the mean seconds per call of ``fn(a)`` for a in args."""
    out = []
    for _ in range(rounds):
        gc.disable()
        t = time.perf_counter()
        for a in args:
            fn(a)
        out.append((time.perf_counter() - t) / len(args))
        gc.enable()
    return statistics.median(out)


def hits(runs: Path, n: int) -> tuple[float, float]:
    """(seconds per plain call, seconds per cache hit)."""
    run = resumable.open_run("hits", runs_dir=runs, task="cache hits")
    step = run.step(trivial)
    keys = list(range(n))
    run.map(step, keys, progress=False)
    for k in keys:  # warm: every call below is a hit
        step(k)
    plain = per_call(trivial, keys)
    hit = per_call(step, keys)
    run.finish()
    return plain, hit


def misses(runs: Path, n: int) -> tuple[list[float], list[float], list[float]]:
    """(raw append+fsync samples, miss samples, samples of the store's commit of the same record
    alone), taken in turn on the same disk: the difference between the last two is the steps' own
    cost (key, look-up, claim, encoding, bookkeeping)."""
    from resumable.core import verbs
    from resumable.durable.opening import engine_of

    run = resumable.open_run("misses", runs_dir=runs, task="cache misses")
    step = run.step(trivial)
    step(-1)  # the session starts (lease, begin) before the samples
    handle = engine_of(run).records.handle
    fd = os.open(runs / "raw.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    line = b"x" * 99 + b"\n"
    raw, miss, store = [], [], []
    gc.disable()
    try:
        for i in range(n):
            t = time.perf_counter()
            os.write(fd, line)
            os.fsync(fd)
            raw.append(time.perf_counter() - t)
            t = time.perf_counter()
            step(i)
            miss.append(time.perf_counter() - t)
            event = verbs.unit(f"direct:{i}", "done", note="", attempt={"n": 1, "status": "done"},
                               fields={"kind": "step", "step": "direct", "result": {"codec": "json",
                                                                                     "value": trivial(i)}})
            t = time.perf_counter()
            handle.commit([event], lazy_view=True)
            store.append(time.perf_counter() - t)
    finally:
        gc.enable()
        os.close(fd)
    run.finish()
    return raw, miss, store


def sequential_vs_map(runs: Path, n: int, jobs: int) -> tuple[float, float, int]:
    """(seconds for n calls one at a time, seconds for run.map of n calls, commits the map made)."""
    one = resumable.open_run("one-at-a-time", runs_dir=runs, task="sequential")
    step = one.step(trivial)
    step(-1)
    t = time.perf_counter()
    for i in range(n):
        step(i)
    seq = time.perf_counter() - t
    one.finish()
    pooled = resumable.open_run("mapped", runs_dir=runs, task="map")
    step = pooled.step(trivial)
    step(-1)
    from resumable.durable.opening import engine_of

    before = engine_of(pooled).records.commits
    t = time.perf_counter()
    results = pooled.map(step, range(n), jobs=jobs, progress=False)
    mapped = time.perf_counter() - t
    commits = engine_of(pooled).records.commits - before
    assert results[n - 1] == trivial(n - 1)
    pooled.finish()
    return seq, mapped, commits


def joblib_memory(work: Path, n: int) -> tuple[float, float] | None:
    """(seconds per miss, seconds per hit) of joblib.Memory on the same function, or None."""
    try:
        import joblib  # type: ignore[import-untyped]
    except ImportError:
        return None
    memory = joblib.Memory(str(work / "joblib"), verbose=0)
    cached = memory.cache(trivial)
    t = time.perf_counter()
    for i in range(n):
        cached(i)
    miss = (time.perf_counter() - t) / n
    hit = per_call(cached, list(range(n)), rounds=3)
    return miss, hit


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer samples")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--cluster", action="store_true", help="only the figures on a Dask cluster")
    which.add_argument("--no-cluster", action="store_true", help="skip the figures on a Dask cluster")
    args = p.parse_args(argv)
    if args.cluster:
        from benchmarks.durable_cluster import main as cluster_main

        return cluster_main(args)
    n_hits, n_miss, n_map, n_joblib = (2000, 300, 2000, 300) if args.quick else (10_000, 1000, 10_000, 1000)
    ok = True
    with scratch(args.dir, args.allow_tmpfs) as (work, _fs):
        runs = work / "runs"
        runs.mkdir()
        raw, miss, store = misses(runs, n_miss)
        L = statistics.median(raw)
        m = statistics.median(miss)
        c = statistics.median(store)
        print(f"L  (one append + fsync, 100 B)        median {L * 1e3:8.3f} ms   p99 {pct(raw, 99) * 1e3:7.3f} ms")
        print(f"miss (step runs, result recorded)     median {m * 1e3:8.3f} ms   = {m / L:5.2f} x L"
              f"   p99 {pct(miss, 99) * 1e3:7.3f} ms")
        print(f"  of which the store's commit         median {c * 1e3:8.3f} ms   = {c / L:5.2f} x L"
              f"   (steps' own cost: {(m - c) * 1e6:.0f} us)")
        plain, hit = hits(runs, n_hits)
        print(f"plain call                            {plain * 1e6:8.2f} us")
        print(f"cache hit                             {hit * 1e6:8.2f} us   = plain + {(hit - plain) * 1e6:.2f} us")
        seq, mapped, commits = sequential_vs_map(runs, n_map, 8)
        print(f"{n_map:,} calls one at a time            {seq:8.3f} s   ({seq / n_map * 1e3:.3f} ms per call)")
        print(f"run.map of {n_map:,} calls, 8 threads    {mapped:8.3f} s   = {seq / mapped:5.2f} x faster"
              f" ({commits:,} commits: {n_map / max(commits, 1):.1f} records per fsync)")
        jl = joblib_memory(work, n_joblib)
        if jl is None:
            print("joblib.Memory: not installed (pip install '.[bench]')")
        else:
            print(f"joblib.Memory miss                    {jl[0] * 1e3:8.3f} ms   (= {jl[0] / L:5.2f} x L; writes"
                  " files without fsync: not durable)")
            print(f"joblib.Memory hit                     {jl[1] * 1e6:8.2f} us   (reads its cache files per call)")
        checks = [
            ("cache hit - plain call <= 20 us", (hit - plain) * 1e6, 20.0, False),
            ("miss <= 1.5 x L", m / L, 1.5, False),
            ("run.map(8 threads) >= 3 x one at a time", seq / mapped, 3.0, True),
        ]
        for name, value, limit, at_least in checks:
            good = value >= limit if at_least else value <= limit
            ok &= good
            print(f"{'PASS' if good else 'FAIL'}  {name}: {value:.2f}")
    if not args.no_cluster:
        from benchmarks.durable_cluster import main as cluster_main

        ok &= cluster_main(args) == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
