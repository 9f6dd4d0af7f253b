"""The low-level verbs and the readers at 1,000 / 10,000 / 100,000 units: flat in the run's size.

    python -m benchmarks.store_scale [--dir DIR] [--allow-tmpfs] [--quick]

Prints, measured in one run on the same disk, with the machine's load average:

- ``resumable unit RUN ID STATE`` on runs of 1,000, 10,000 and 100,000 units, each call interleaved
  with ``python3 -c pass`` (the same interpreter): the median wall time and CPU time (user + system of
  the process, from ``wait4``) of each, and their ratios;
- the per-unit cost (the CPU time of one such call: one unit written) at each size, and
  cost(100,000) / cost(1,000);
- ``get RUN --summary`` and ``resume RUN`` on 100,000 units, and ``status RUN`` on a run of 100,000
  steps as the runner records them (attempts, commands, fingerprints; a tenth failed), with the
  status call's peak resident memory.

Floors (exit status 1 if one is missed): ``unit`` at 10,000 units at most 2 x ``python -c pass``
(wall, interleaved; the sizes take turns call by call), at 100,000 at most 2.5 x; cost(100,000) /
cost(1,000) at most 1.2; ``get
--summary`` and ``resume`` at most 0.3 s, ``status`` at most 0.5 s (CPU time: the wall time of one
call is printed too, but on a loaded machine it measures the other users) and 150 MB.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks._common import REPO, parser, precompile, scratch
from resumable import api

SIZES = (1_000, 10_000, 100_000)


def cli_command() -> list[str]:
    """The CLI as installed, its bytecode compiled (as pip does at install time)."""
    import compileall

    import resumable

    compileall.compile_dir(str(Path(resumable.__file__).parent), quiet=1)
    exe = Path(sys.executable).with_name("resumable")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "resumable"]


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, peak RSS in KiB) of one process run to its end."""
    t = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read() if proc.stderr else b""
    if proc.stderr:
        proc.stderr.close()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[-4:])} exited {proc.returncode}: {err.decode()[-300:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def make_seed_run(runs: Path, n: int) -> str:
    run_id = f"u{n}"
    run = api.open_run(run_id, runs_dir=runs)
    run.init("store scale", units=[f"u{i}" for i in range(n)])
    run.close()
    return run_id


def make_step_run(runs: Path, n: int) -> str:
    """A run of ``n`` steps as the runner records them, written in batches (one fsync each)."""
    run_id = f"steps{n}"
    run = api.open_run(run_id, runs_dir=runs)
    run.init("store scale: steps", units=[f"s{i}" for i in range(n)])
    stamp = "2026-12-01T12:00:00"
    fp = {"v": 1, "command": "f1" * 32, "env": "4f" * 32, "cwd": str(runs)}
    batch: list[Any] = []
    for i in range(n):
        failed = i % 10 == 0
        attempt = {"n": 1, "status": "failed" if failed else "done", "startedAt": f"{stamp}.100Z",
                   "finishedAt": f"{stamp}.200Z", "exitCode": 3 if failed else 0, "duration": 0.1,
                   "log": f"{runs}/{run_id}/logs/s{i}.1.log"}
        fields: dict[str, Any] = {"command": f"touch out/s{i}", "fingerprint": fp}
        if failed:
            fields.update(lastExitCode=3, log=attempt["log"])
        batch.append({"t": "unit", "unit": f"s{i}", "state": "failed" if failed else "done",
                      "note": "failed (exit 3)" if failed else "", "attempt": attempt, "fields": fields,
                      "at": f"{stamp}Z"})
        if len(batch) == 2000:
            run.handle.commit(batch)
            batch = []
    if batch:
        run.handle.commit(batch)
    run.close()
    return run_id


def unit_calls(cmd: list[str], env: dict[str, str], ids: dict[int, str], k: int
               ) -> dict[int, tuple[list[tuple[float, float, int]], list[tuple[float, float, int]]]]:
    """k ``unit`` calls per size on units spread over each run, each followed by a ``python -c
    pass``; the sizes take turns call by call, so a machine that drifts during the measurement
    (these are shared VMs) shifts every size alike instead of showing up as growth with N."""
    out: dict[int, tuple[list[tuple[float, float, int]], list[tuple[float, float, int]]]] = {
        n: ([], []) for n in ids}
    for i in range(k):
        for n, run_id in ids.items():
            uid = f"u{(i * 7919) % n}"
            ours, base = out[n]
            ours.append(timed([*cmd, "unit", run_id, uid, "in_progress" if i % 2 == 0 else "blocked"], env))
            base.append(timed([sys.executable, "-c", "pass"], env))
    return out


def med(samples: list[tuple[float, float, int]], i: int) -> float:
    return statistics.median(s[i] for s in samples)


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer samples")
    p.add_argument("--build", metavar="RUNS", help="only build the runs measured, in RUNS")
    args = p.parse_args(argv)
    if args.build:
        for n in SIZES:
            make_seed_run(Path(args.build), n)
        make_step_run(Path(args.build), SIZES[-1])
        return 0
    k = 15 if args.quick else 41
    checks: list[tuple[str, float, float]] = []
    precompile()  # as installed: no call compiles its modules anew
    with scratch(args.dir, args.allow_tmpfs, settle=True) as (work, _fs):
        runs = work / "runs"
        cmd = cli_command()
        env = {k_: v for k_, v in os.environ.items() if not k_.startswith("RESUMABLE_")}
        env["RESUMABLE_DIR"] = str(runs)
        # Built by another process: a child forked from one that held 100,000 units would count
        # that memory in its own peak (fork copies the accounting), whatever it used after exec.
        subprocess.run([sys.executable, "-m", "benchmarks.store_scale", "--build", str(runs)], check=True,
                       cwd=REPO)
        ids = {n: f"u{n}" for n in SIZES}
        steps = f"steps{SIZES[-1]}"
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
        cost: dict[int, float] = {}
        samples_by_size = unit_calls(cmd, env, ids, k)
        for n in SIZES:
            ours, base = samples_by_size[n]
            wall, cpu, pwall, pcpu = med(ours, 0), med(ours, 1), med(base, 0), med(base, 1)
            cost[n] = cpu
            print(f"unit, N={n:>7,}: wall {wall * 1e3:6.1f} ms = {wall / pwall:4.2f} x python -c pass"
                  f" ({pwall * 1e3:5.1f} ms); CPU {cpu * 1e3:6.1f} ms = {cpu / pcpu:4.2f} x ({pcpu * 1e3:4.1f} ms)"
                  f"; per unit {cpu * 1e3:.2f} ms CPU", flush=True)
            if n == 10_000:
                checks.append(("unit at 10,000 units <= 2 x python -c pass (wall)", wall / pwall, 2.0))
            if n == 100_000:
                checks.append(("unit at 100,000 units <= 2.5 x python -c pass (wall)", wall / pwall, 2.5))
        ratio = cost[SIZES[-1]] / cost[SIZES[0]]
        print(f"per-unit cost (CPU): 1,000 {cost[1_000] * 1e3:.2f} ms · 10,000 {cost[10_000] * 1e3:.2f} ms ·"
              f" 100,000 {cost[100_000] * 1e3:.2f} ms; 100,000 / 1,000 = {ratio:.2f}")
        checks.append(("per-unit cost(100,000) / cost(1,000) <= 1.2", ratio, 1.2))
        readers = [("get --summary", [*cmd, "get", ids[100_000], "--summary"], 0.3),
                   ("resume", [*cmd, "resume", ids[100_000]], 0.3),
                   ("status (100,000 steps)", [*cmd, "status", steps, "--no-color"], 0.5)]
        for name, argv_, limit in readers:
            samples = [timed(argv_, env) for _ in range(3 if args.quick else 7)]
            wall, cpu, rss = med(samples, 0), med(samples, 1), max(s[2] for s in samples)
            print(f"{name:<24} wall {wall:5.3f} s  CPU {cpu:5.3f} s  peak RSS {rss / 1024:5.1f} MB")
            # CPU time: on a machine others load, a wall time measures them as much as the call.
            checks.append((f"{name} <= {limit} s (CPU)", cpu, limit))
            if name.startswith("status"):
                checks.append(("status peak RSS <= 150 MB", rss / 1024, 150.0))
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    ok = True
    for name, value, limit in checks:
        good = value <= limit
        ok &= good
        print(f"{'PASS' if good else 'FAIL'}  {name}: {value:.3f} (margin {limit / value if value else 0:.2f} x)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
