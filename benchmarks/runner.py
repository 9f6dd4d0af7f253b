"""Runner overhead: 1,000 steps of `true` with `resumable run -j 2`, against the same 1,000
commands run by `xargs -P 2` and by `make -j2` (phony targets), all measured in this one run.

    python -m benchmarks.runner [--steps 1000] [--dir DIR] [--allow-tmpfs]

Floor (the check this prints): runner overhead per step, i.e. (runner wall time - best baseline
wall time) / steps, is at most one process spawn + 3 journal appends with fsync + 1 ms, each
measured here on the same disk. tmpfs is refused unless --allow-tmpfs: fsync is free there and the
figure would flatter the store.
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
from pathlib import Path

from benchmarks.measure import baseline_append_fsync


def fs_type(path: Path) -> str:
    """The filesystem type of ``path``, from the longest matching mount point in /proc/mounts."""
    best, kind = "", "?"
    target = str(path.resolve())
    try:
        with open("/proc/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3:
                    mnt = parts[1]
                    if (target == mnt or target.startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best):
                        best, kind = mnt, parts[2]
    except OSError:
        pass
    return kind


def timed(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"benchmark: {argv[0]} failed ({r.returncode}): {r.stderr.decode()[-500:]}")
    return elapsed


def spawn_cost(n: int = 200) -> float:
    """Median seconds to start `true` and wait for it, as the runner does (subprocess)."""
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(["true"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--dir", default=".", help="where to put the scratch directory (default: .)")
    ap.add_argument("--allow-tmpfs", action="store_true")
    args = ap.parse_args()
    n = args.steps
    base = Path(args.dir).resolve()
    kind = fs_type(base)
    if kind in ("tmpfs", "ramfs") and not args.allow_tmpfs:
        print(f"benchmark: {base} is on {kind}; fsync costs nothing there. Use --dir on a real disk "
              "or pass --allow-tmpfs.", file=sys.stderr)
        return 2
    if not shutil.which("make") or not shutil.which("xargs"):
        print("benchmark: needs make and xargs on PATH", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="resumable-bench-", dir=base))
    try:
        job = ["[job]", 'name = "bench"']
        for i in range(n):
            job += [f"[steps.s{i}]", 'run = ["true"]']
        (work / "resumable.toml").write_text("\n".join(job) + "\n")
        targets = " ".join(f"t{i}" for i in range(n))
        (work / "Makefile").write_text(
            f".PHONY: all {targets}\nall: {targets}\n" + "".join(f"t{i}:\n\ttrue\n" for i in range(n))
        )
        (work / "cmds").write_text("true\n" * n)
        env = dict(os.environ, RESUMABLE_DIR=str(work / "runs"))

        t_xargs = timed(["sh", "-c", "xargs -P 2 -n 1 < cmds"], work)
        t_make = timed(["make", "-s", "-j2", "all"], work)
        t_run = timed([sys.executable, "-m", "resumable", "run", "-j", "2", "--quiet"], work, env)
        t_skip = timed([sys.executable, "-m", "resumable", "run", "-j", "2", "--quiet"], work, env)
        t_startup = timed([sys.executable, "-c", "import resumable.cli.run"], work)
        spawn = spawn_cost()
        # L, the one baseline every benchmark here shares: a 100-byte append + fsync.
        append = statistics.median(baseline_append_fsync(work, n=200))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    baseline = min(t_xargs, t_make)
    overhead = (t_run - baseline) / n
    floor = spawn + 3 * append + 0.001
    ms = 1000.0
    print(f"filesystem: {kind} ({base}); {n} steps of `true`, parallelism 2; cpus {os.cpu_count()}")
    print(f"  xargs -P 2            {t_xargs:8.3f} s   {t_xargs / n * ms:7.3f} ms/step")
    print(f"  make -j2 (phony)      {t_make:8.3f} s   {t_make / n * ms:7.3f} ms/step")
    print(f"  resumable run -j 2    {t_run:8.3f} s   {t_run / n * ms:7.3f} ms/step"
          f"   (incl. {t_startup:.3f} s interpreter start)")
    print(f"  resumable run again   {t_skip:8.3f} s   (all {n} steps skipped)")
    print(f"  one spawn {spawn * ms:.3f} ms; one append+fsync {append * ms:.3f} ms")
    print(f"runner overhead per step: {overhead * ms:.3f} ms "
          f"(vs best baseline); floor {floor * ms:.3f} ms = spawn + 3 x append+fsync + 1 ms")
    ok = overhead <= floor
    print("floor check:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
