"""The runner at 1,000, 10,000 and 100,000 steps, against make -j2 and doit -n 2 on the same job.

    python -m benchmarks.runner [--sizes 1000,10000,100000] [--repeat 3] [--dir DIR] [--allow-tmpfs]
                                [--doit-up-to 10000] [--large-repeat 1]

Every step is ``touch out/s<i>``; every tool runs two at a time. Each figure is the median of
``--repeat`` runs (``--large-repeat`` for 100,000 steps and more, where a first run takes minutes),
all measured in this one run, on this disk, under this machine's load: the checks are ratios to
make measured alongside, or the bounds set below. doit (``pip install -e '.[bench]'``) is
measured up to ``--doit-up-to`` steps (it takes tens of minutes beyond). ``xargs -P 2`` running the
same commands is the steps' own cost: what the runner adds beyond it is its per-step overhead.

Checks:
  - per-step cost of a first run at the largest size <= 1.3 x at the smallest (no super-linear part);
  - first run of 10,000 steps <= 1.5 x make -j2 (xargs, make and resumable take turns, one round
    after another, and the ratio is the median of the rounds' ratios: a load that comes and goes
    falls on both sides of it);
  - nothing to do: 10,000 steps < 0.5 s, 100,000 steps < 3 s (the whole command);
  - --dry-run and status on 100,000 steps < 3 s;
  - peak memory of a 100,000-step run <= 300 MB (ru_maxrss of the runner process).

Checks (at 100,000 steps): nothing to do and --dry-run <= 1.0 s (the first re-run and the
first dry run after the first run, answered from the answer that run kept, ``runner.verdict``;
neither writes to the run, which is checked; the later re-runs are printed beside), status <= 0.5 s
and <= 150 MB peak, the first run's peak memory <= 300 MB.

Checks (``benchmarks.runner_cpu``, at the same sizes; ``--no-cpu`` skips them): the
runner's CPU per step beyond its steps' own processes <= 0.5 ms at 10,000 steps and <= 1.2 x at the
largest size what it is at the smallest; nothing to do and --dry-run on 100,000 steps <= 1.0 s.

Check (``benchmarks.runner_inputs``, ``--inputs-steps``; 0 skips it): inputs checked by
size, mtime and inode add at most 5 % to a no-op re-run of 10,000 steps with one 10 MB input each.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks._common import REPO, precompile, scratch

# The installed command (a script, as a user runs it), else the module.
_SCRIPT = Path(sys.executable).parent / "resumable"
RESUMABLE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "resumable"]
MB = 1024 * 1024


def write_job(work: Path, n: int) -> None:
    """The same n steps for every tool."""
    steps = "".join(f'[steps.s{i}]\nrun = ["touch", "out/s{i}"]\n' for i in range(n))
    (work / "resumable.toml").write_text('[job]\nname = "bench"\n' + steps)
    targets = " ".join(f"out/s{i}" for i in range(n))
    (work / "Makefile").write_text(f"all: {targets}\n" + "".join(f"out/s{i}:\n\ttouch out/s{i}\n"
                                                                   for i in range(n)))
    (work / "dodo.py").write_text(
        "def task_s():\n"
        f"    for i in range({n}):\n"
        "        yield {'name': f's{i}', 'actions': [['touch', f'out/s{i}']],\n"
        "               'targets': [f'out/s{i}'], 'uptodate': [True]}\n")
    (work / "files").write_text("".join(f"out/s{i}\n" for i in range(n)))


def run(argv: list[str], cwd: Path, env: dict[str, str] | None = None,
        stdin: Path | None = None) -> tuple[float, int]:
    """(wall seconds, peak resident bytes of the process) of one command, which must succeed."""
    t0 = time.perf_counter()
    with open(stdin or os.devnull, "rb") as inp:
        p = subprocess.Popen(argv, cwd=cwd, env=env, stdin=inp, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
        assert p.stderr is not None
        err = p.stderr.read()
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"benchmark: {' '.join(argv[:4])} failed ({p.returncode}): {err.decode()[-500:]}")
    return elapsed, usage.ru_maxrss * 1024


def median_of(repeat: int, prepare: Callable[[], None], measure: Callable[[], tuple[float, int]]
              ) -> tuple[float, int]:
    samples = []
    for _ in range(repeat):
        prepare()
        samples.append(measure())
    return statistics.median(s[0] for s in samples), max(s[1] for s in samples)


class Size:
    """Every figure for one job size."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.figures: dict[str, tuple[float, int]] = {}
        self.make_ratio = 0.0  # the first run's wall time over make's, the median of the rounds'

    def per_step_ms(self, key: str) -> float:
        return self.figures[key][0] / self.n * 1000


def measure(work: Path, n: int, repeat: int, with_doit: bool) -> Size:
    write_job(work, n)
    env = dict(os.environ, RESUMABLE_DIR=str(work / "runs"))
    out, runs = work / "out", work / "runs"
    aside = work / f"aside{n}"
    aside.mkdir()

    def move_aside(path: Path) -> None:
        # Never deleted before the benchmark ends: deleting thousands of files makes the next
        # creations many times dearer for minutes (ext4 without a journal here), which would charge
        # the measured command for the cleanup of the one before (see benchmarks.fscreate).
        if path.exists():
            path.rename(aside / f"{path.name}{len(list(aside.iterdir()))}")

    def fresh_out() -> None:
        move_aside(out)
        out.mkdir()

    def fresh_all() -> None:
        fresh_out()
        move_aside(runs)
        for db in work.glob(".doit.db*"):
            db.unlink()

    def nothing() -> None:
        pass

    size = Size(n)
    f = size.figures
    cmd = [*RESUMABLE, "run", "-j", "2", "--quiet"]
    # The first runs in rounds, each round xargs, make and resumable one after the other: on a
    # machine whose load changes, a ratio of figures taken minutes apart measures the load. The
    # ratio to make is the median of the rounds' ratios (``Size.make_ratio``).
    rounds: dict[str, list[tuple[float, int]]] = {"xargs": [], "make first": [], "resumable first": []}
    for _ in range(repeat):
        fresh_out()
        rounds["xargs"].append(run(["xargs", "-P", "2", "-n", "1", "touch"], work, stdin=work / "files"))
        fresh_out()
        rounds["make first"].append(run(["make", "-s", "-j2"], work))
        fresh_all()
        rounds["resumable first"].append(run(cmd, work, env))
    for key, samples in rounds.items():
        f[key] = statistics.median(x[0] for x in samples), max(x[1] for x in samples)
    size.make_ratio = statistics.median(r[0] / m[0] for r, m in zip(rounds["resumable first"],
                                                                     rounds["make first"], strict=True))
    # make's no-op on the last round's outputs (made by resumable: every target exists).
    f["make again"] = median_of(repeat, nothing, lambda: run(["make", "-s", "-j2"], work))
    # The run kept its re-run's answer (runner.verdict): the figures are the first re-run and the
    # first dry run after it, the ones users hit; neither writes to the run. The later ones beside.
    from benchmarks.runner_cpu import run_state

    written = run_state(runs)
    f["resumable again"] = median_of(1, nothing, lambda: run(cmd, work, env))
    f["resumable --dry-run"] = median_of(1, nothing, lambda: run([*cmd, "--dry-run"], work, env))
    if run_state(runs) != written:
        raise SystemExit(f"the re-runs after the run wrote to it ({runs}): the figures are not of a first re-run")
    f["resumable again, later"] = median_of(repeat, nothing, lambda: run(cmd, work, env))
    f["resumable --dry-run, later"] = median_of(repeat, nothing, lambda: run([*cmd, "--dry-run"], work, env))
    f["resumable status"] = median_of(repeat, nothing, lambda: run([*RESUMABLE, "status", "bench"], work, env))
    if with_doit:
        doit = [sys.executable, "-m", "doit", "-n", "2"]
        f["doit first"] = median_of(repeat, fresh_all, lambda: run(doit, work))
        f["doit again"] = median_of(repeat, nothing, lambda: run(doit, work))
    for p in ("resumable.toml", "Makefile", "dodo.py", "files"):
        (work / p).unlink()
    fresh_all()
    return size


def report(sizes: list[Size]) -> list[tuple[str, bool]]:
    print()
    print(f"{'':24}" + "".join(f"{s.n:>24,}" for s in sizes))
    keys = list(dict.fromkeys(k for s in sizes for k in s.figures))
    for key in keys:
        row = f"{key:24}"
        for s in sizes:
            if key in s.figures:
                secs = s.figures[key][0]
                row += f"{secs:10.3f} s {s.per_step_ms(key):7.3f} ms/st"
            else:
                row += f"{'-':>24}"
        print(row)
    print()
    for s in sizes:
        first, rss = s.figures["resumable first"]
        overhead = (first - s.figures["xargs"][0]) / s.n * 1000
        ratio = s.make_ratio
        doit = (f", doit {s.figures['doit first'][0] / s.figures['make first'][0]:.2f} x make"
                if "doit first" in s.figures else "")
        print(f"{s.n:>7,} steps: first run {s.per_step_ms('resumable first'):.3f} ms/step,"
              f" {ratio:.2f} x make{doit}; overhead beyond the steps' own processes (xargs -P 2)"
              f" {overhead:.3f} ms/step; peak memory {rss / MB:.0f} MB;"
              f" nothing to do {s.figures['resumable again'][0]:.3f} s (the first re-run after the run;"
              f" later ones {s.figures['resumable again, later'][0]:.3f} s);"
              f" status {s.figures['resumable status'][0]:.3f} s,"
              f" {s.figures['resumable status'][1] / MB:.0f} MB")
    checks: list[tuple[str, bool]] = []
    small, large = sizes[0], sizes[-1]
    if large.n > small.n:
        growth = large.per_step_ms("resumable first") / small.per_step_ms("resumable first")
        checks.append((f"per-step cost at {large.n:,} <= 1.3 x at {small.n:,}: {growth:.2f} x", growth <= 1.3))
    by_n = {s.n: s for s in sizes}
    if 10_000 in by_n:
        s = by_n[10_000]
        ratio = s.make_ratio
        checks.append((f"first run of 10,000 steps <= 1.5 x make -j2: {ratio:.2f} x", ratio <= 1.5))
        again = s.figures["resumable again"][0]
        checks.append((f"nothing to do, 10,000 steps < 0.5 s: {again:.3f} s", again < 0.5))
    if 100_000 in by_n:
        s = by_n[100_000]
        for key in ("resumable again", "resumable --dry-run", "resumable status"):
            secs = s.figures[key][0]
            checks.append((f"{key.removeprefix('resumable ')}, 100,000 steps < 3 s: {secs:.3f} s", secs < 3))
        peak = max(s.figures[k][1] for k in s.figures if k.startswith("resumable"))
        checks.append((f"peak memory, 100,000 steps <= 300 MB: {peak / MB:.0f} MB", peak <= 300 * MB))
        checks += large_run_checks(s)
    print()
    for text, ok in checks:
        print(f"  {'PASS' if ok else 'FAIL'}  {text}")
    return checks


def large_run_checks(s: Size) -> list[tuple[str, bool]]:
    """At 100,000 steps: nothing to do and --dry-run <= 1.0 s, status <= 0.5 s and <= 150 MB, the
    first run's peak memory <= 300 MB."""
    out: list[tuple[str, bool]] = []
    for key in ("resumable again", "resumable --dry-run"):
        secs = s.figures[key][0]
        out.append((f"{key.removeprefix('resumable ')}, {s.n:,} steps <= 1.0 s: {secs:.3f} s", secs <= 1.0))
    secs, rss = s.figures["resumable status"]
    out.append((f"status, {s.n:,} steps <= 0.5 s: {secs:.3f} s", secs <= 0.5))
    out.append((f"status peak memory, {s.n:,} steps <= 150 MB: {rss / MB:.0f} MB", rss <= 150 * MB))
    rss = s.figures["resumable first"][1]
    out.append((f"first run peak memory, {s.n:,} steps <= 300 MB: {rss / MB:.0f} MB", rss <= 300 * MB))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--large-repeat", type=int, default=1, help="repeats at 100,000 steps and more")
    ap.add_argument("--doit-up-to", type=int, default=10_000)
    ap.add_argument("--dir", default=str(REPO))
    ap.add_argument("--allow-tmpfs", action="store_true")
    ap.add_argument("--no-cpu", dest="cpu", action="store_false",
                    help="skip the runner's CPU per step and its re-runs (benchmarks.runner_cpu)")
    ap.add_argument("--inputs-steps", type=int, default=10_000, help="steps of the inputs figure (0: skip it)")
    args = ap.parse_args()
    sizes = sorted(int(x) for x in args.sizes.split(","))
    if not shutil.which("make") or not shutil.which("xargs"):
        print("benchmark: needs make and xargs on PATH", file=sys.stderr)
        return 2
    try:
        import doit  # noqa: F401
        have_doit = True
    except ImportError:
        print("benchmark: doit is not installed (pip install -e '.[bench]'): measuring without it",
              file=sys.stderr)
        have_doit = False
    precompile()
    results = []
    with scratch(args.dir, args.allow_tmpfs, settle=True) as (work, _fs):
        print(f"cpus {os.cpu_count()}; load average {os.getloadavg()[0]:.2f}; steps `touch out/s<i>`,"
              " two at a time", flush=True)
        for n in sizes:
            t0 = time.perf_counter()
            repeat = args.large_repeat if n >= 100_000 else args.repeat
            results.append(measure(work, n, repeat, have_doit and n <= args.doit_up_to))
            print(f"  measured {n:,} steps ({repeat} x) in {time.perf_counter() - t0:.0f} s", flush=True)
    checks = report(results)
    if args.inputs_steps:
        from benchmarks import runner_inputs

        with scratch(args.dir, args.allow_tmpfs, settle=True) as (work, _fs):
            plain, with_inputs = runner_inputs.measure(work, args.inputs_steps, max(args.repeat, 3))
            floor = runner_inputs.stat_floor(work, args.inputs_steps, args.repeat)
        checks.append(runner_inputs.check(args.inputs_steps, plain, with_inputs, floor))
        print(f"  {'PASS' if checks[-1][1] else 'FAIL'}  {checks[-1][0]}")
    if args.cpu:
        from benchmarks import runner_cpu

        checks += runner_cpu.run(args.dir, args.allow_tmpfs, sizes, args.repeat, args.large_repeat)
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
