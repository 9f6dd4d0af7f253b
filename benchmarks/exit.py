"""What ending a low-level verb at once (``cli.main._exit_at_once``) buys: CPU time per call.

    python -m benchmarks.exit [--dir DIR] [--allow-tmpfs] [--repeat N]

Runs ``resumable unit`` on a 10-unit run, interleaved: once ending at once (``os._exit`` after the
verb, as the installed command does), once through the interpreter's normal shutdown, and
``python -c pass`` as the baseline. Both CLI variants start the same way (``python -c``), so the
difference is the shutdown alone. Prints the median CPU time (user + system, of the child) of each
and the ratios against ``python -c pass``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys

from benchmarks import measure as m
from benchmarks._common import parser, precompile, scratch

AT_ONCE = "from resumable.cli.main import launch; launch()"
NORMAL = "import sys; from resumable.cli.main import main; sys.exit(main(sys.argv[1:]))"


def cpu_of(cmd: list[str], env: dict[str, str]) -> float:
    """CPU seconds (user + system) the child spent, from its own rusage (os.times() counts in
    clock ticks, too coarse for a 20 ms call)."""
    proc = subprocess.Popen(cmd, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[:3]} exited {proc.returncode}")
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=200, help="calls of each kind (default 200)")
    args = p.parse_args(argv)
    precompile()  # as installed: no call compiles its modules anew
    with scratch(args.dir, args.allow_tmpfs) as (work, _fs):
        runs = work / "exit"
        m.make_run(runs, 10, "exit").close()
        env = dict(os.environ, RESUMABLE_DIR=str(runs))
        at_once, normal, bare = [], [], []
        for i in range(args.repeat):
            verb = ["unit", "exit", f"u{i % 10}", "in_progress" if i % 2 == 0 else "blocked"]
            at_once.append(cpu_of([sys.executable, "-c", AT_ONCE, *verb], env))
            normal.append(cpu_of([sys.executable, "-c", NORMAL, *verb], env))
            bare.append(cpu_of([sys.executable, "-c", "pass"], env))
        a, n, b = (statistics.median(s) for s in (at_once, normal, bare))
        print(f"python -c pass                      CPU {b * 1e3:6.2f} ms")
        print(f"resumable unit, ending at once       CPU {a * 1e3:6.2f} ms   = {a / b:.2f} x python -c pass")
        print(f"resumable unit, normal shutdown      CPU {n * 1e3:6.2f} ms   = {n / b:.2f} x python -c pass")
        print(f"ending at once saves                     {(n - a) * 1e3:6.2f} ms a call ({(n - a) / n:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
