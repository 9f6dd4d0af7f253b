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
nothing to do: the wall time of the whole command, the first re-run after the run (the answer
the run kept, ``runner.verdict``) and a second one.

Checks:
  - reading and planning the family <= 1.5 x the same steps written out, at every size;
  - the family's cost per step at the largest size <= 1.3 x at the smallest (nothing grows faster
    than the steps);
  - a re-run with nothing to do < 1 s at 100,000 steps (the whole command), and its cost per step
    does not grow with N (<= 1.3 x the smallest size's, with 50 ms for starting the command).
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
START_ALLOWANCE = 0.05  # seconds: starting the command, which no step pays for


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


def wall(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    p = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, check=False)
    seconds = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"benchmark: {' '.join(argv)} failed: {p.stderr.decode()[-500:]}")
    return seconds


def rerun_costs(work: Path, n: int) -> tuple[float, float, float]:
    """(the first run, the first re-run, a second re-run) of the family job, wall seconds."""
    env = dict(os.environ, RESUMABLE_DIR=str(work / "runs"))
    job = str(work / "family.toml")
    first = wall([*RESUMABLE, "run", job, "-j", "2", "-q"], work, env)
    again = wall([*RESUMABLE, "run", job, "-j", "2", "-q"], work, env)
    third = wall([*RESUMABLE, "run", job, "-j", "2", "-q"], work, env)
    return first, again, third


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
                first, again, third = rerun_costs(size_dir, n)
                reruns[n] = again
                print(f"{n:>7} steps: first run {first:.1f} s; nothing to do {again:.3f} s (first re-run),"
                      f" {third:.3f} s (second)", flush=True)
                if n >= 100_000:
                    checks.append((f"{n} steps: nothing to do < 1 s ({again:.3f} s)", again < 1.0))
    small, large = min(per_step), max(per_step)
    if large > small:
        growth = per_step[large] / per_step[small]
        checks.append((f"family cost per step at {large} <= 1.3 x at {small} ({growth:.2f} x)", growth <= 1.3))
    if len(reruns) > 1:
        lo, hi = min(reruns), max(reruns)
        growth = max(reruns[hi] - START_ALLOWANCE, 0.0) / hi / max(reruns[lo] / lo, 1e-12)
        checks.append((f"nothing to do per step at {hi} <= 1.3 x at {lo} ({growth:.2f} x)", growth <= 1.3))
    for text, ok in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {text}")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
