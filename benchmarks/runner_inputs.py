"""What declared inputs cost a re-run with nothing to do (run by ``benchmarks.runner``).

    python -m benchmarks.runner_inputs [--steps 10000] [--repeat 5] [--dir DIR] [--allow-tmpfs]

Two jobs of the same steps (``true``), measured in this one run: one without inputs, one where
every step has one 10 MB input of its own. Each input is its own path (its own directory entry to
stat) and all are hard links to one 10 MB file, so the first run hashes 10 MB once (the hash of a
file whose device, inode, size and mtime were already hashed in this process is reused), not
100 GB. A re-run with nothing to do stats every input and re-hashes none: size, mtime_ns and inode
are unchanged since the recorded run. The figure is the CPU time (user + system) of the whole
``resumable run`` process, the median of ``--repeat`` runs.

Check: inputs checked by size, mtime and inode add at most 5 % to a no-op re-run of
10,000 steps, against the same job without inputs.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks._common import parser, scratch

_SCRIPT = Path(sys.executable).parent / "resumable"
RESUMABLE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "resumable"]
MB = 1024 * 1024


def write_jobs(work: Path, n: int) -> None:
    data = work / "data"
    data.mkdir()
    first = data / "in0.bin"
    with open(first, "wb") as f:
        f.write(os.urandom(10 * MB))
    for i in range(1, n):
        os.link(first, data / f"in{i}.bin")
    plain = "".join(f'[steps.s{i}]\nrun = "true"\n' for i in range(n))
    (work / "plain.toml").write_text('[job]\nname = "plain"\n' + plain)
    inputs = "".join(f'[steps.s{i}]\nrun = "true"\ninputs = ["data/in{i}.bin"]\n' for i in range(n))
    (work / "inputs.toml").write_text('[job]\nname = "inputs"\n' + inputs)


def cpu_seconds(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    """User + system CPU seconds of one command, which must succeed."""
    p = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    assert p.stderr is not None
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"benchmark: {' '.join(argv)} failed: {err.decode()[-500:]}")
    return usage.ru_utime + usage.ru_stime


def stat_floor(work: Path, n: int, repeat: int) -> float:
    """CPU seconds of one bare ``os.stat`` of every input, in this process (median): what checking
    the inputs cannot go below, a system call per file."""
    import time

    paths = [str(work / "data" / f"in{i}.bin") for i in range(n)]
    samples = []
    for _ in range(max(repeat, 3)):
        t0 = time.process_time()
        for p in paths:
            os.stat(p)
        samples.append(time.process_time() - t0)
    return statistics.median(samples)


def measure(work: Path, n: int, repeat: int) -> tuple[float, float]:
    """(median CPU seconds of a no-op re-run without inputs, with inputs), interleaved so that a
    change of the machine's load falls on both alike."""
    write_jobs(work, n)
    env = dict(os.environ, RESUMABLE_DIR=str(work / "runs"))
    plain = [*RESUMABLE, "run", "plain.toml", "-j", "2", "--quiet"]
    inputs = [*RESUMABLE, "run", "inputs.toml", "-j", "2", "--quiet"]
    cpu_seconds(plain, work, env)  # the first runs: every step runs, every input is recorded
    cpu_seconds(inputs, work, env)
    a: list[float] = []
    b: list[float] = []
    for _ in range(repeat):
        a.append(cpu_seconds(plain, work, env))
        b.append(cpu_seconds(inputs, work, env))
    return statistics.median(a), statistics.median(b)


def check(n: int, plain: float, inputs: float, floor: float | None = None) -> tuple[str, bool]:
    extra = inputs / plain - 1
    print(f"no-op re-run of {n:,} steps: without inputs {plain:.3f} s CPU, with one 10 MB input each"
          f" {inputs:.3f} s CPU (+{extra * 100:.1f} %)")
    if floor is not None:
        # The inputs' cost against the system calls it is made of: the ratio above is that cost
        # over a no-op re-run, which is the smaller the faster the re-run.
        print(f"  the inputs' cost {(inputs - plain) / n * 1e6:.2f} us each; a bare os.stat {floor / n * 1e6:.2f} us"
              f" ({(inputs - plain) / floor if floor > 0 else float('inf'):.2f} x)")
    return f"inputs add <= 5 % to a no-op re-run of {n:,} steps: +{extra * 100:.1f} %", extra <= 0.05


def main() -> int:
    ap = parser(__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    from benchmarks._common import precompile

    precompile()
    with scratch(args.dir, args.allow_tmpfs, settle=True) as (work, _fs):
        print(f"load average {os.getloadavg()[0]:.2f}", flush=True)
        plain, inputs = measure(work, args.steps, args.repeat)
        floor = stat_floor(work, args.steps, args.repeat)
    text, ok = check(args.steps, plain, inputs, floor)
    print(f"  {'PASS' if ok else 'FAIL'}  {text}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
