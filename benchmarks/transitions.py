"""The transition benchmark: the cost of one unit transition, against one append + fsync.

    python -m benchmarks.transitions [--dir DIR] [--allow-tmpfs] [--quick]

Prints, measured in one run on the same disk: the baseline L (one append + fsync of a 100-byte
line); the median cost of one transition through the API at N = 10, 10,000 and 100,000 units; the
same for the seed's approach (rewrite the whole pretty snapshot + fsync per transition); the time
to load a 100,000-unit run; and the `resumable unit` CLI wall time against `python -c pass` with
the same interpreter. Floors: N=10,000 transition <= 1.5 x L; cost(100,000)/cost(10) <= 1.5;
load(100,000) < 1 s; CLI <= 1.6 x python -c pass. Exit status 1 if a floor is missed.
"""

from __future__ import annotations

import statistics
import sys

from benchmarks import measure as m
from benchmarks._common import parser, scratch


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer samples")
    args = p.parse_args(argv)
    n_samples = 300 if args.quick else 1000
    ok = True
    with scratch(args.dir, args.allow_tmpfs) as (work, _fs):
        # L and the 10,000-unit cost are sampled alternately, so both see the same disk load.
        base, s10k = m.interleaved(work / "api10000", 10_000, n_samples)
        L = statistics.median(base)
        print(f"L  (one append + fsync, 100 B)         median {L * 1e3:8.3f} ms   p99 {m.pct(base, 99) * 1e3:7.3f} ms")
        api = {}
        for n in (10, 10_000, 100_000):
            s = s10k if n == 10_000 else m.api_transitions(work / f"api{n}", n, n_samples)
            api[n] = statistics.median(s)
            print(f"API transition, N={n:>7,}             median {api[n] * 1e3:8.3f} ms   = {api[n] / L:5.2f} x L")
        for n, k in ((10, n_samples), (10_000, 30), (100_000, 5)):
            s = m.seed_transitions(work / f"seed{n}", n, k)
            med = statistics.median(s)
            print(f"seed approach (rewrite+fsync), N={n:>7,} median {med * 1e3:8.3f} ms   = {med / L:7.1f} x L")
        load = m.load_time(work / "api100000" / "t100000.json")
        print(f"load a 100,000-unit run                       {load * 1e3:8.1f} ms")
        cli, py, ratio = m.cli_ratio(work)
        print(f"`resumable unit` CLI {cli * 1e3:.1f} ms vs `python -c pass` {py * 1e3:.1f} ms   = {ratio:.2f} x")
        checks = [
            ("N=10,000 transition <= 1.5 x L", api[10_000] / L, 1.5),
            ("cost(100,000) / cost(10) <= 1.5", api[100_000] / api[10], 1.5),
            ("load(100,000 units) < 1 s", load, 1.0),
            ("CLI / python -c pass <= 1.6", ratio, 1.6),
        ]
        for name, value, limit in checks:
            good = value <= limit
            ok &= good
            print(f"{'PASS' if good else 'FAIL'}  {name}: {value:.3f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
