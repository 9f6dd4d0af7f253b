"""A family of steps against the same steps written out: what reading and planning a job of N
similar steps costs when one table says them, at 1,000, 10,000 and 100,000 steps.

    python -m benchmarks.families [--sizes 1000,10000,100000] [--repeat 5] [--run-up-to 100000]
                                  [--dir DIR] [--allow-tmpfs]

Two job files per size, the same N steps: ``written.toml`` has a ``[steps.s-<i>]`` table per step,
``family.toml`` one table, ``params = { i = { from = 0, to = N - 1 } }``; every step is
``touch out/s<i>`` with ``out/s<i>`` as its artifact. The figure is the CPU time of reading the job
file (parse, validate, expand the family, look its inputs and artifacts up) and planning it against an
empty run (``explain.plan``), in this process, garbage collection off as ``resumable run`` has it,
the median of ``--repeat``; both files are measured in the same rounds, alternately, so a load that
comes and goes falls on both.

Then, up to ``--run-up-to`` steps, the family job is run (``resumable run -j 2 -q``) and re-run with
nothing to do: the CPU and wall time of the whole command, the first re-run after the run (the
answer the run kept, ``runner.verdict``) and a second one.

Checks:
  - reading and planning the family <= 1.5 x the same steps written out, at every size;
  - the family's cost per step at the largest size <= 1.3 x at the smallest (nothing grows faster
    than the steps);
  - a re-run with nothing to do < 1 s at 100,000 steps (the CPU time of the whole command: on a
    shared machine its wall time is mostly waiting for a CPU, which is printed beside), and with
    three sizes run, what each step adds to it between the two largest sizes <= 1.3 x what it adds
    between the two smallest (the command's start-up drops out).
"""

from __future__ import annotations

import gc
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks._common import parser, precompile, scratch

_SCRIPT = Path(sys.executable).parent / "resumable"
RESUMABLE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "resumable"]


def write_jobs(work: Path, n: int) -> tuple[Path, Path]:
    """(the steps written out, the same steps as a family)."""
    written = work / "written.toml"
    written.write_text('[job]\nname = "written"\n' + "".join(
        f'[steps.s-{i}]\nrun = ["touch", "out/s{i}"]\nartifacts = ["out/s{i}"]\n' for i in range(n)))
    family = work / "family.toml"
    family.write_text(f'[job]\nname = "family"\n[steps.s]\nparams = {{ i = {{ from = 0, to = {n - 1} }} }}\n'
                      'run = ["touch", "out/s{i}"]\nartifacts = ["out/s{i}"]\n')
    (work / "out").mkdir(exist_ok=True)
    return written, family


def read_and_plan(path: Path) -> float:
    """CPU seconds of reading the job file and planning it against an empty run."""
    from resumable.runner import explain
    from resumable.runner.jobfile import load_job_file

    enabled = gc.isenabled()
    gc.disable()
    try:
        t0 = time.process_time()
        job = load_job_file(path)
        decisions = explain.plan(job, {}, force=False)
        cpu = time.process_time() - t0
    finally:
        del job, decisions
        if enabled:
            gc.enable()
        gc.collect()
    return cpu


def parse_costs(work: Path, n: int, repeat: int) -> tuple[float, float]:
    """(written out, family): median CPU seconds of read + plan, measured alternately."""
    written, family = write_jobs(work, n)
    a: list[float] = []
    b: list[float] = []
    for _ in range(repeat):
        a.append(read_and_plan(written))
        b.append(read_and_plan(family))
    return statistics.median(a), statistics.median(b)


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one command, which must succeed."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    assert p.stderr is not None
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    seconds = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"benchmark: {' '.join(argv)} failed: {err.decode()[-500:]}")
    return seconds, usage.ru_utime + usage.ru_stime


def rerun_costs(work: Path, n: int) -> tuple[float, tuple[float, float], tuple[float, float]]:
    """(the first run's wall seconds, then (wall, CPU) of the first re-run and of a second one)."""
    env = dict(os.environ, RESUMABLE_DIR=str(work / "runs"))
    argv = [*RESUMABLE, "run", str(work / "family.toml"), "-j", "2", "-q"]
    first, _ = timed(argv, work, env)
    return first, timed(argv, work, env), timed(argv, work, env)


def main() -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1000,10000,100000")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--run-up-to", type=int, default=100_000,
                   help="run and re-run the family job up to this many steps (0: never)")
    args = p.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    precompile()
    checks: list[tuple[str, bool]] = []
    per_step: dict[int, float] = {}
    reruns: dict[int, float] = {}
    with scratch(args.dir, args.allow_tmpfs, settle=args.run_up_to > 0) as (work, _fs):
        for n in sizes:
            size_dir = work / str(n)
            size_dir.mkdir()
            written, family = parse_costs(size_dir, n, args.repeat)
            per_step[n] = family / n
            print(f"{n:>7} steps: read + plan written out {written:.3f} s, family {family:.3f} s"
                  f" ({family / written:.2f} x; {family / n * 1e6:.1f} us a step)", flush=True)
            checks.append((f"{n} steps: family <= 1.5 x written out ({family / written:.2f} x)",
                           family <= 1.5 * written))
            if n <= args.run_up_to:
                first, (wall1, cpu1), (wall2, cpu2) = rerun_costs(size_dir, n)
                reruns[n] = cpu1
                print(f"{n:>7} steps: first run {first:.1f} s; nothing to do {wall1:.3f} s wall, {cpu1:.3f} s CPU"
                      f" (first re-run), {wall2:.3f} s wall, {cpu2:.3f} s CPU (second); load {os.getloadavg()[0]:.1f}",
                      flush=True)
                if n >= 100_000:
                    checks.append((f"{n} steps: nothing to do < 1 s of CPU ({cpu1:.3f} s; {wall1:.3f} s wall)",
                                   cpu1 < 1.0))
    small, large = min(per_step), max(per_step)
    if large > small:
        growth = per_step[large] / per_step[small]
        checks.append((f"family cost per step at {large} <= 1.3 x at {small} ({growth:.2f} x)", growth <= 1.3))
    if len(reruns) > 2:
        # The cost each step adds: the slope between the two largest sizes against the slope
        # between the two smallest (the command's start-up, the same at every size, drops out).
        a, b, *_, c, d = sorted(reruns)
        low = (reruns[b] - reruns[a]) / (b - a)
        high = (reruns[d] - reruns[c]) / (d - c)
        growth = high / max(low, 1e-9)
        print(f"nothing to do: {low * 1e6:.1f} us a step from {a} to {b}, {high * 1e6:.1f} us from {c} to {d}")
        checks.append((f"nothing to do, each step's cost from {c} to {d} <= 1.3 x from {a} to {b} ({growth:.2f} x)",
                       growth <= 1.3))
    for text, ok in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {text}")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
