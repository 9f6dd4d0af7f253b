"""The runner's own CPU per step, and re-runs that do not grow with the job (run by
``benchmarks.runner``).

    python -m benchmarks.runner_cpu [--sizes 1000,10000,100000] [--repeat 3] [--large-repeat 1]
                                    [--dir DIR] [--allow-tmpfs]

Every step is ``touch out/s<i>``, two at a time. The runner's cost per step is CPU time, which holds
steady on a busy machine where wall time does not: ``getrusage(RUSAGE_CHILDREN)`` over a whole
``resumable run -j 2`` (the runner and every step it started and reaped), minus the same over
``xargs -P 2`` running the same commands (the steps' own processes), divided by the steps. Each
figure is the median of ``--repeat`` runs (``--large-repeat`` at 100,000 steps and more), all in
this one run, printed with the machine's load average.

Checks:
  - the runner's CPU per step at 10,000 steps <= 0.5 ms;
  - its CPU per step at the largest size <= 1.2 x at the smallest;
  - at 100,000 steps: a re-run with nothing to do <= 1.0 s, --dry-run <= 1.0 s (wall, the whole
    command; their CPU is printed beside). Both are the first of their kind after the last first
    run (the re-run first, then the dry run; neither writes to the run, which is checked): the
    re-run users hit, answered from what the run kept (``runner.verdict``). The later re-runs are
    printed beside.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks._common import parser, scratch

_SCRIPT = Path(sys.executable).parent / "resumable"
RESUMABLE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "resumable"]
CPU_PER_STEP_MS = 0.5
GROWTH = 1.2
NOTHING_TO_DO_S = 1.0


def write_job(work: Path, n: int) -> None:
    steps = "".join(f'[steps.s{i}]\nrun = ["touch", "out/s{i}"]\n' for i in range(n))
    (work / "resumable.toml").write_text('[job]\nname = "cpu"\n' + steps)
    (work / "files").write_text("".join(f"out/s{i}\n" for i in range(n)))


def measured(argv: list[str], cwd: Path, env: dict[str, str] | None = None,
             stdin: Path | None = None) -> tuple[float, float]:
    """(CPU seconds of the command and every process it waited for, wall seconds); it must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with open(stdin or os.devnull, "rb") as inp:
        p = subprocess.run(argv, cwd=cwd, env=env, stdin=inp, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit(f"benchmark: {' '.join(argv[:4])} failed ({p.returncode}): {p.stderr.decode()[-500:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


class Figures:
    def __init__(self, n: int) -> None:
        self.n = n
        self.xargs = self.first = (0.0, 0.0)
        self.again: tuple[float, float] | None = None
        self.dry: tuple[float, float] | None = None
        self.later: tuple[float, float] | None = None  # the re-runs after the first one
        self.later_dry: tuple[float, float] | None = None

    @property
    def overhead_ms(self) -> float:
        """The runner's CPU per step beyond its steps' own processes."""
        return (self.first[0] - self.xargs[0]) / self.n * 1000


def _median(samples: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)


def fresh_out(work: Path, i: int, who: str) -> None:
    """An empty ``out`` for round ``i``, the last one moved aside. Nothing is deleted until the
    benchmark ends: deleting thousands of files makes the next creations many times dearer for
    minutes (``benchmarks.fscreate``), which would charge what is measured next for the cleanup."""
    out = work / "out"
    if out.exists():
        out.rename(work / f"out-{who}{i}")
    out.mkdir()


def measure(work: Path, n: int, repeat: int) -> Figures:
    work = work / f"steps{n}"
    work.mkdir()
    write_job(work, n)
    fig = Figures(n)
    xargs, first = [], []
    for i in range(repeat):
        env = dict(os.environ, RESUMABLE_DIR=str(work / f"runs{i}"))  # a fresh runs directory per round
        fresh_out(work, i, "runner")
        xargs.append(measured(["xargs", "-P", "2", "-n", "1", "touch"], work, stdin=work / "files"))
        fresh_out(work, i, "xargs")
        first.append(measured([*RESUMABLE, "run", "-j", "2", "--quiet"], work, env))
    fig.xargs, fig.first = _median(xargs), _median(first)
    runs = work / f"runs{repeat - 1}"  # the last first run's, whose steps made ``out``
    env = dict(os.environ, RESUMABLE_DIR=str(runs))
    cmd = [*RESUMABLE, "run", "-j", "2", "--quiet"]
    written = run_state(runs)
    fig.again = measured(cmd, work, env)  # the first re-run after the run: no warm-up discarded
    fig.dry = measured([*cmd, "--dry-run"], work, env)
    if run_state(runs) != written:
        raise SystemExit(f"the re-runs after the run wrote to it ({runs}): the figures are not of a first re-run"
                         f" ({sorted(set(run_state(runs)) ^ set(written))})")
    fig.later = _median([measured(cmd, work, env) for _ in range(2)])
    fig.later_dry = _median([measured([*cmd, "--dry-run"], work, env) for _ in range(2)])
    return fig


def run_state(runs: Path) -> list[tuple[str, int, int, int]]:
    """(name, inode, size, mtime_ns) of every run's snapshot and journal, and of the kept answers and
    parsed jobs (the long way would keep its answer again; the runner lease's own cache of a clean
    log directory is not the run's)."""
    out = []
    for d in (runs, runs / ".cache"):
        for p in sorted(d.iterdir()) if d.is_dir() else ():
            if p.is_file() and p.name.startswith(("verdict.", "job.") if d.name == ".cache" else "") \
                    and (d.name == ".cache" or p.name.endswith((".json", ".jsonl"))):
                st = p.stat()
                out.append((str(p), st.st_ino, st.st_size, st.st_mtime_ns))
    return out


def report(figs: list[Figures]) -> list[tuple[str, bool]]:
    print()
    for f in figs:
        line = (f"{f.n:>7,} steps: runner CPU {f.overhead_ms:.3f} ms/step beyond its steps (resumable run"
                f" {f.first[0]:.2f} s CPU / {f.first[1]:.2f} s wall, xargs -P 2 {f.xargs[0]:.2f} s CPU /"
                f" {f.xargs[1]:.2f} s wall)")
        if f.again is not None and f.dry is not None:
            line += (f"; the first re-run after the run: nothing to do {f.again[1]:.3f} s wall"
                     f" ({f.again[0]:.3f} s CPU), --dry-run {f.dry[1]:.3f} s wall ({f.dry[0]:.3f} s CPU)")
        if f.later is not None and f.later_dry is not None:
            line += (f"; later re-runs {f.later[1]:.3f} s wall ({f.later[0]:.3f} s CPU), --dry-run"
                     f" {f.later_dry[1]:.3f} s wall ({f.later_dry[0]:.3f} s CPU)")
        print(line)
    checks: list[tuple[str, bool]] = []
    by_n = {f.n: f for f in figs}
    if 10_000 in by_n:
        ms = by_n[10_000].overhead_ms
        checks.append((f"runner CPU per step at 10,000 steps <= {CPU_PER_STEP_MS} ms: {ms:.3f} ms",
                       ms <= CPU_PER_STEP_MS))
    small, large = figs[0], figs[-1]
    if large.n > small.n:
        growth = large.overhead_ms / small.overhead_ms if small.overhead_ms > 0 else float("inf")
        checks.append((f"runner CPU per step at {large.n:,} <= {GROWTH} x at {small.n:,}: {growth:.2f} x",
                       growth <= GROWTH))
    for f in figs:
        if f.n >= 100_000 and f.again is not None and f.dry is not None:
            checks.append((f"nothing to do, {f.n:,} steps <= {NOTHING_TO_DO_S} s: {f.again[1]:.3f} s",
                           f.again[1] <= NOTHING_TO_DO_S))
            checks.append((f"--dry-run, {f.n:,} steps <= {NOTHING_TO_DO_S} s: {f.dry[1]:.3f} s",
                           f.dry[1] <= NOTHING_TO_DO_S))
    print()
    for text, ok in checks:
        print(f"  {'PASS' if ok else 'FAIL'}  {text}")
    return checks


def run(base: str, allow_tmpfs: bool, sizes: list[int], repeat: int, large_repeat: int) -> list[tuple[str, bool]]:
    from benchmarks._common import precompile

    precompile()  # as installed: no command compiles its modules anew
    figs = []
    with scratch(base, allow_tmpfs, settle=True) as (work, _fs):
        print(f"cpus {os.cpu_count()}; load average {os.getloadavg()[0]:.2f}; steps `touch out/s<i>`,"
              " two at a time; CPU time of the runner and its steps, minus xargs -P 2's", flush=True)
        for n in sorted(sizes):
            t0 = time.perf_counter()
            figs.append(measure(work, n, large_repeat if n >= 100_000 else repeat))
            print(f"  measured {n:,} steps in {time.perf_counter() - t0:.0f} s (load average"
                  f" {os.getloadavg()[0]:.2f})", flush=True)
    return report(figs)


def main() -> int:
    ap = parser(__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--large-repeat", type=int, default=1)
    args = ap.parse_args()
    if not shutil.which("xargs"):
        print("benchmark: needs xargs on PATH", file=sys.stderr)
        return 2
    checks = run(args.dir, args.allow_tmpfs, [int(x) for x in args.sizes.split(",")], args.repeat,
                 args.large_repeat)
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
