"""The proof suite: every reliability (R1-R11) and performance (P1-P7) goal, one PASS/FAIL line
each with its figure.

    python -m benchmarks.proof --tier full     # the documented proof (several minutes)
    python -m benchmarks.proof --tier quick    # the same checks with fewer trials
    python -m benchmarks.proof --only R2,P1    # a subset

Reliability goals live in ``tests/reliability`` (their quick tier runs in pytest, in CI);
performance goals only here, because a timing assertion in CI would flake on a loaded machine.
Every performance goal is a ratio to a baseline measured in this run, on this disk; the suite
refuses tmpfs (free fsync) unless ``--allow-tmpfs``. Exit status 0 iff every goal passed.
"""

from __future__ import annotations

import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from benchmarks import measure as m
from benchmarks._common import REPO, parser, scratch

sys.path.insert(0, str(REPO))  # tests.reliability is imported from the source tree

from tests.reliability import fuzz
from tests.reliability import goals as g
from tests.reliability import runner_goals as rg

SIZES = {
    "quick": dict(r1=60, r4=150, r5=("unit",), r6=(4, 100, 100), r9=1500, r8=5, r7=3, r10=3, r10_rounds=6,
                  r11=(300, 20), flips=1, samples=300, p3=2000, p4=(16, 50), p5=10_000, p6=15, p2_big=100_000),
    "full": dict(r1=1000, r4=1000, r5=None, r6=(16, 1000, 200), r9=10_000, r8=100, r7=20, r10=20, r10_rounds=100,
                 r11=(2000, 150), flips=3, samples=2000, p3=10_000, p4=(16, 300), p5=30_000, p6=40,
                 p2_big=100_000),
}


class Suite:
    def __init__(self, work: Path, tier: str, only: set[str] | None) -> None:
        self.work = work
        self.size = SIZES[tier]
        self.only = only
        self.lines: list[tuple[str, bool, str, float]] = []
        self._L: list[float] | None = None

    def wanted(self, goal: str) -> bool:
        return self.only is None or goal in self.only

    def report(self, goal: str, ok: bool, figure: str, seconds: float, details: list[str] = ()) -> None:  # type: ignore[assignment]
        self.lines.append((goal, ok, figure, seconds))
        print(f"{'PASS' if ok else 'FAIL'}  {goal:<4} {figure}   [{seconds:.1f} s]", flush=True)
        for d in list(details)[:5]:
            print(f"        {d}", flush=True)

    def run(self, goal: str, fn: Callable[[Path], tuple[bool, str, list[str]]]) -> None:
        if not self.wanted(goal):
            return
        d = self.work / goal
        d.mkdir()
        t = time.perf_counter()
        try:
            ok, figure, details = fn(d)
        except Exception as exc:  # a goal that cannot even run is a failure, with its cause
            ok, figure, details = False, f"could not run: {type(exc).__name__}: {exc}", [
                traceback.format_exc().splitlines()[-3]]
        self.report(goal, ok, figure, time.perf_counter() - t, details)

    @property
    def L(self) -> list[float]:
        if self._L is None:
            self._L = m.baseline_append_fsync(self.work, self.size["samples"] * 2)
            med, p99 = statistics.median(self._L), m.pct(self._L, 99)
            print(f"      baseline L = one 100-byte append + fsync: median {med * 1e3:.3f} ms,"
                  f" p99 {p99 * 1e3:.3f} ms", flush=True)
        return self._L


def from_result(r: g.Result) -> tuple[bool, str, list[str]]:
    return r.ok, r.figure, r.failures


def main(argv: list[str] | None = None) -> int:
    p = parser("resumable's proof suite: reliability and performance goals")
    p.add_argument("--tier", choices=("quick", "full"), default="full")
    p.add_argument("--only", help="comma-separated goals, e.g. R2,P1")
    p.add_argument("--markdown", metavar="FILE", help="also write the results as a Markdown table")
    args = p.parse_args(argv)
    only = {x.strip().upper() for x in args.only.split(",")} if args.only else None
    started = time.perf_counter()
    with scratch(args.dir, args.allow_tmpfs) as (work, _fs):
        s = Suite(work, args.tier, only)
        z = s.size
        print(f"tier: {args.tier}", flush=True)
        s.run("R1", lambda d: from_result(g.r1_sigkill(d, trials=z["r1"])))
        s.run("R2", lambda d: from_result(g.r2_crash_every_call(d)))
        s.run("R3", lambda d: from_result(g.r3_torn_and_flipped(d, flip_records=z["flips"])))
        s.run("R4", lambda d: from_result(g.r4_power_loss(d, trials=z["r4"])))
        s.run("R5", lambda d: from_result(g.r5_enospc_eio(d, commands=z["r5"])))
        w, e, c = z["r6"]
        s.run("R6", lambda d: from_result(g.r6_with_control(d, w, e, c)))
        s.run("R7", lambda d: from_result(rg.r7_runner_lock(d, trials=z["r7"], timing=True)))
        s.run("R8", lambda d: from_result(rg.r8_timeouts(d, trials=z["r8"], timing=True)))
        s.run("R9", lambda d: from_result(g.r9_malformed(d, n=z["r9"])))

        def r10(d: Path) -> tuple[bool, str, list[str]]:
            # SIGKILLed mid-step, then the kill loop: runners killed mid-step, while reaping, just
            # after starting the step.
            a = rg.r10_resume_reaps(d / "reaps", trials=z["r10"], timing=True)
            b = rg.r10_kill_loop(d / "loop", rounds=z["r10_rounds"])
            return a.ok and b.ok, f"{a.figure}; {b.figure}", [*a.failures, *b.failures]

        s.run("R10", r10)
        examples, real = z["r11"]
        s.run("R11", lambda d: from_result(fuzz.r11_fuzz(d, examples=examples, real_processes=real)))

        def p1(d: Path) -> tuple[bool, str, list[str]]:
            L, t = m.interleaved(d, 10_000, z["samples"])
            med, p99 = statistics.median(t), m.pct(t, 99)
            lm, lp = statistics.median(L), m.pct(L, 99)
            ok = med <= 1.5 * lm and p99 <= 3 * lp
            return ok, (f"10,000-unit run, sampled alternately with raw appends: median {med * 1e3:.3f} ms"
                        f" = {med / lm:.2f} x L (<= 1.5),"
                        f" p99 {p99 * 1e3:.3f} ms = {p99 / lp:.2f} x raw p99 (<= 3)"), []

        def p2(d: Path) -> tuple[bool, str, list[str]]:
            small = statistics.median(m.api_transitions(d / "s", 10, z["samples"]))
            big = statistics.median(m.api_transitions(d / "b", z["p2_big"], z["samples"]))
            return big / small <= 1.5, (f"cost at {z['p2_big']:,} units {big * 1e3:.3f} ms / at 10 units"
                                        f" {small * 1e3:.3f} ms = {big / small:.2f} (<= 1.5)"), []

        p7_figures: dict[str, tuple[int, int]] = {}

        def p3(d: Path) -> tuple[bool, str, list[str]]:
            lm = statistics.median(s.L)
            n = z["p3"]
            secs, snap_bytes, jbytes = m.whole_run(d, n)
            p7_figures["run"] = (snap_bytes, jbytes)
            budget = 1.5 * 3 * n * lm
            return secs <= budget, (f"{n:,} units x 3 transitions: {secs:.2f} s = "
                                    f"{secs / (3 * n * lm):.2f} x ({3 * n:,} x L) (<= 1.5)"), []

        def p4(d: Path) -> tuple[bool, str, list[str]]:
            lm = statistics.median(s.L)
            writers, each = z["p4"]
            tps = m.concurrent_throughput(d / "big", writers, each, 10_000)
            small = m.concurrent_throughput(d / "small", writers, max(20, each // 5), writers)
            return tps >= 0.6 / lm, (f"{writers} writers on a 10,000-unit run: {tps:,.0f} transitions/s"
                                     f" = {tps * lm:.2f} / L (>= 0.6 / L = {0.6 / lm:,.0f}/s); [on a"
                                     f" {writers}-unit run, exact snapshot per write: {small * lm:.2f} / L]"), []

        def p5(d: Path) -> tuple[bool, str, list[str]]:
            per = m.tail_load(d, 1000, z["p5"])
            return per <= 10e-6, f"{z['p5']:,}-record journal tail: {per * 1e6:.2f} us per record (<= 10)", []

        def p6(d: Path) -> tuple[bool, str, list[str]]:
            lm = statistics.median(s.L)
            spawn = m.spawn_time()
            over = m.runner_overhead(d, z["p6"])
            budget = spawn + 3 * lm + 1e-3
            return over <= budget, (f"runner overhead {over * 1e3:.2f} ms per shell step vs spawn"
                                    f" {spawn * 1e3:.2f} + 3 L {3 * lm * 1e3:.2f} + 1 ms ="
                                    f" {budget * 1e3:.2f} ms"), []

        def p7(d: Path) -> tuple[bool, str, list[str]]:
            if "run" not in p7_figures:
                _secs, snap_bytes, jbytes = m.whole_run(d, z["p3"])
                p7_figures["run"] = (snap_bytes, jbytes)
            snap_bytes, jbytes = p7_figures["run"]
            small_secs, small_snap, small_j = m.whole_run(d / "small", 300)
            _ = small_secs
            ratio = snap_bytes / jbytes
            return ratio <= 2, (f"{z['p3']:,}-unit run: snapshot bytes {snap_bytes:,} / journal bytes"
                                f" {jbytes:,} = {ratio:.2f} (<= 2); [a 300-unit run, exact snapshot"
                                f" per write below 64 KiB: {small_snap / small_j:.1f}]"), []

        s.run("P1", p1)
        s.run("P2", p2)
        s.run("P3", p3)
        s.run("P4", p4)
        s.run("P5", p5)
        s.run("P6", p6)
        s.run("P7", p7)
        failed = [goal for goal, ok, _f, _t in s.lines if not ok]
        if args.markdown:
            rows = ["| goal | result | figure |", "|---|---|---|"]
            rows += [f"| {goal} | {'PASS' if ok else 'FAIL'} | {fig.replace('|', '/')} |"
                     for goal, ok, fig, _t in s.lines]
            Path(args.markdown).write_text("\n".join(rows) + "\n", encoding="utf-8")
        print(f"{len(s.lines) - len(failed)}/{len(s.lines)} goals PASS"
              f"{' (FAIL: ' + ', '.join(failed) + ')' if failed else ''}"
              f" in {time.perf_counter() - started:.0f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
