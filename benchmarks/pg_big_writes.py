"""Large PostgreSQL writes: an init of N units and an import of 2N events, at N = 1,000 / 10,000 /
100,000, each as resumable sends it (statements pipelined, the output drained before the COMMIT)
against the same transaction sent without the pipeline (one round trip per statement), measured
alternately in this one run.

    python -m benchmarks.pg_big_writes [--store ADMIN_URL] [--rounds 3]

``--store`` is an admin URL of the server (default ``RESUMABLE_TEST_PG``, else
``postgresql://root@127.0.0.1:5432/postgres``): a scratch database is created there and dropped.

Prints the median wall and CPU time (this process: the client's share) of each, and the ratio
pipelined / unpipelined. Floor (exit 1 if missed): at 100,000 units the pipelined init costs at
most 1.3 x the unpipelined one in CPU time (the drain must not cost what it saves).
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from resumable import api, store
from resumable.store.postgres import db as pgdb
from resumable.store.transfer import Export, import_run

ADMIN = os.environ.get("RESUMABLE_TEST_PG", "postgresql://root@127.0.0.1:5432/postgres")
SIZES = (1_000, 10_000, 100_000)
_AT = "2026-01-01T00:00:00Z"


@contextmanager
def scratch_db(admin: str) -> Iterator[str]:
    import psycopg

    name = f"rbench_big_{secrets.token_hex(3)}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(urlsplit(admin)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def pipelined(on: bool) -> Iterator[None]:
    """The baseline: every transaction sent without the pipeline, statement by statement."""
    real = pgdb.Db.transact
    if on:
        yield
        return

    def plain(self: pgdb.Db, fn: Callable[[pgdb.Connection], Any], **kw: Any) -> Any:
        kw["pipeline"] = False
        return real(self, fn, **kw)

    pgdb.Db.transact = plain  # type: ignore[method-assign]
    try:
        yield
    finally:
        pgdb.Db.transact = real  # type: ignore[method-assign]


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def init(url: str, n: int) -> Callable[[], object]:
    run_id = f"i{secrets.token_hex(4)}"
    units = [f"u{i}" for i in range(n)]

    def go() -> None:
        run = api.open_run(run_id, store_url=url)
        try:
            run.init("bench", units=units)
        finally:
            run.close()

    return go


def importing(url: str, n: int) -> Callable[[], object]:
    run_id = f"m{secrets.token_hex(4)}"
    history: list[Any] = [{"t": "init", "id": run_id, "task": "bench", "units": [f"u{i}" for i in range(n)],
                           "at": _AT}]
    for i in range(n):
        history += [{"t": "unit", "unit": f"u{i}", "state": "in_progress", "at": _AT},
                    {"t": "unit", "unit": f"u{i}", "state": "done", "at": _AT}]
    export = Export(run_id, {}, history, {})

    def go() -> None:
        backend = store.open_backend(url=url)
        try:
            import_run(backend, export, source="benchmark")
        finally:
            backend.close()

    return go


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--store", default=ADMIN, help="an admin URL of the server (a scratch database is made there)")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    ok = True
    with scratch_db(args.store) as url:
        store.open_backend(url=url).upgrade()  # type: ignore[attr-defined]
        for label, make in (("init", init), ("import", importing)):
            for n in SIZES:
                got: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
                for _ in range(args.rounds):
                    for on in (True, False):  # alternately: the machine's load hits both alike
                        with pipelined(on):
                            got[on].append(timed(make(url, n)))
                wall = {on: statistics.median(w for w, _ in got[on]) for on in got}
                cpu = {on: statistics.median(c for _, c in got[on]) for on in got}
                ratio = cpu[True] / cpu[False] if cpu[False] else float("nan")
                print(f"{label:<6} {n:>7,}: pipelined {wall[True]:6.3f}s wall {cpu[True]:6.3f}s cpu;"
                      f" unpipelined {wall[False]:6.3f}s wall {cpu[False]:6.3f}s cpu; cpu ratio {ratio:.2f}")
                if label == "init" and n == SIZES[-1]:
                    passed = ratio <= 1.3
                    ok = ok and passed
                    print(f"{'PASS' if passed else 'FAIL'}: pipelined init of {n:,} units costs {ratio:.2f} x"
                          " the unpipelined one in CPU (floor 1.3)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
