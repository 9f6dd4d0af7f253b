"""Scale-out: many workers on one run through a PostgreSQL store, against the same workers on
two runs and against the local file-store runner, all measured in this one run; workers "on other
hosts" through a latency proxy (1 ms each way); lock waits sampled from pg_stat_activity; what a
transition through the API costs against one local commit; how long after a worker's SIGKILL its
steps are taken back.

    python -m benchmarks.scaleout [--steps 2000] [--store URL] [--dir DIR] [--allow-tmpfs]

``--store`` is an admin URL of the server (default ``RESUMABLE_TEST_PG``, else
``postgresql://root@127.0.0.1:5432/postgres``): a scratch database is created there and dropped.
Everything else is written in a temporary directory.

What is timed: workers are started first and wait for their run (``worker --wait``); each
phase is timed from the end of the (first) submit, when its steps can be claimed, to the last
worker's exit, so the workers' interpreter start-up and the submit are left out and their work,
the run's conclusion and their exit are in. The local runner's time leaves out its interpreter's start-up
and the job file's reading (a process doing only that, timed alike). Each phase also prints the
CPU per step of the processes it started (workers or the local runner, their steps included), of
the server's backends for the scratch database (read from /proc: the server on this host), and
the transactions per step the server counted; the remote phase the round trips per step (the
requests the proxy forwarded). The remote steps are the argv ``["sleep", "0.1"]`` (no shell).

Floors (PASS/FAIL lines; exit 0 only if all pass):
- no per-run ceiling: 4 workers (-j 2) on one run of N `true` steps reach >= 0.9 x the steps/s of
  the same 4 workers on two runs of N/2 steps, 2 workers each;
- lock waits: sampled every 50 ms during the 4-worker run, < 10 % of the samples show a backend
  of the database waiting on a lock;
- remote workers: through the latency proxy (1 ms each way), 8 workers -j 4 finish N steps of
  `sleep 0.1` within 1.4 x the ideal N x 0.1 s / 32 slots;
- one worker -j 2 reaches >= 0.7 x the local runner's (-j 2) steps/s on the same N `true` steps;
- a transition through the API (``Run.unit``) costs at most 3 x one local PostgreSQL commit (an
  INSERT + COMMIT on the same server, sampled alternately with the transitions);
- a SIGKILLed worker's steps are claimed by another worker within the lease TTL + 1 s.
"""

from __future__ import annotations

import os
import secrets
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from benchmarks._common import parser, scratch

ADMIN = os.environ.get("RESUMABLE_TEST_PG", "postgresql://root@127.0.0.1:5432/postgres")
RESUMABLE = [sys.executable, "-m", "resumable"]
TTL = 2.0


def sql(url: str, query: str, params: Any = None) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(query, params)
        return list(cur.fetchall()) if cur.description else []


def clean(url: str) -> None:
    have = [t for (t,) in sql(url, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                                   " AND tablename LIKE 'resumable%%' AND tablename <> 'resumable_schema'")]
    if have:
        sql(url, "TRUNCATE " + ", ".join(have) + " CASCADE")


def job_file(path: Path, name: str, steps: int, command: str = '["true"]') -> Path:
    lines = ["[job]", f'name = "{name}"']
    for i in range(steps):
        lines += [f"[steps.s{i}]", f"run = {command}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def run(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(f"benchmark: {' '.join(argv[2:5])} failed ({proc.returncode}): {proc.stderr[-500:]}")
    return time.perf_counter() - t0


def children_cpu() -> float:
    """CPU seconds of the children waited for so far (and of theirs: the workers' steps)."""
    import resource

    got = resource.getrusage(resource.RUSAGE_CHILDREN)
    return got.ru_utime + got.ru_stime


def transactions(url: str) -> int:
    (n,) = sql(url, "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()")[0]
    return int(n)


class Phase:
    """What one measured phase cost: seconds, and per step the CPU of the processes it started
    (workers or the local runner, with their steps), of the server's backends for the database,
    and the transactions the server counted (the benchmark's own queries left out)."""

    def __init__(self, steps: int, seconds: float, cpu: float, server: float | None, txns: int | None) -> None:
        self.steps, self.seconds, self.cpu, self.server, self.txns = steps, seconds, cpu, server, txns

    @property
    def rate(self) -> float:
        return self.steps / self.seconds

    def costs(self) -> str:
        out = f"CPU {self.cpu / self.steps * 1e3:.2f} ms/step"
        if self.server is not None:
            out += f", server {self.server / self.steps * 1e3:.2f} ms/step"
        if self.txns is not None:
            out += f", {self.txns / self.steps:.2f} transactions/step"
        return out


def workers(n: int, url: str, jobs: list[Path], cwd: Path, env: dict[str, str], *,
            slots: int = 2) -> tuple[Phase, list[int]]:
    """``n`` workers split evenly over the runs of ``jobs``: started first, each waiting for its
    run (``--wait``), then the runs are submitted, one after the other. Timed from the end of the
    first submit (its steps are claimable) to the last worker's exit: the workers' interpreter
    start-up is not timed, their work, the runs' conclusion and their exit are (and the later
    submits, which go on meanwhile). Also the lock waiters per sample."""
    clean(url)
    names = [job.stem for job in jobs]
    cpu0 = children_cpu()
    procs = [subprocess.Popen([*RESUMABLE, "worker", "--run", names[i % len(names)], "-j", str(slots), "-q",
                               "--wait", "120s"], cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)
             for i in range(n)]
    while waiting_workers(url) < n:  # every worker has started and waits for its run
        if any(p.poll() is not None for p in procs):
            sys.exit("benchmark: a worker ended before its run was submitted: "
                     + next(p.communicate()[1] for p in procs if p.poll() is not None)[-500:])
        time.sleep(0.05)
    sampler = LockSampler(url)
    txns0 = transactions(url)
    start = 0.0
    for job in jobs:
        run([*RESUMABLE, "submit", str(job), "-q"], cwd, env)
        start = start or time.perf_counter()
    for p in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            sys.exit(f"benchmark: a worker failed ({p.returncode}): {err[-500:]}")
    end = time.perf_counter()
    waits, server = sampler.stop()
    txns = transactions(url) - txns0 - sampler.queries
    cpu = children_cpu() - cpu0
    (claims,) = sql(url, "SELECT count(*) FROM resumable_attempts")[0]
    for name in names:
        (status,) = sql(url, "SELECT status FROM resumable_runs WHERE id = %s AND archived_at IS NULL", (name,))[0]
        if status != "done":
            sys.exit(f"benchmark: run {name} ended {status}")
    return Phase(int(claims), end - start, cpu, server, txns), waits


def waiting_workers(url: str) -> int:
    import psycopg

    try:
        return int(sql(url, "SELECT count(*) FROM resumable_workers WHERE stopped_at IS NULL")[0][0])
    except psycopg.errors.UndefinedTable:
        return 0  # the first worker has not brought the schema yet


class LockSampler:
    """Every 50 ms: how many backends of the database wait on a lock (``pg_stat_activity``), and
    the CPU time of each backend of the database (``/proc``, when the server is on this host), so
    the server's CPU per step can be told."""

    def __init__(self, url: str) -> None:
        import threading

        self.url = url
        self.samples: list[int] = []
        self.cpu: dict[int, float] = {}
        self.queries = 0
        self.readable = True
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psycopg

        try:
            self._sample(psycopg.connect(self.url, autocommit=True))
        except psycopg.Error:
            self.readable = False  # the database went away (the benchmark is ending)

    def _sample(self, conn: Any) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        with conn:
            while not self._stop.wait(0.05):
                rows = conn.execute(
                    "SELECT pid, wait_event_type = 'Lock' FROM pg_stat_activity WHERE datname = current_database()"
                    " AND pid <> pg_backend_pid()").fetchall()
                self.queries += 1
                self.samples.append(sum(1 for _, waiting in rows if waiting))
                for pid, _ in rows:
                    try:
                        with open(f"/proc/{pid}/stat") as f:
                            fields = f.read().rsplit(")", 1)[1].split()
                        self.cpu[pid] = (int(fields[11]) + int(fields[12])) / tick
                    except FileNotFoundError:
                        pass  # the backend ended since the query: its CPU until the last sample is kept
                    except (OSError, IndexError, ValueError):
                        self.readable = False

    def stop(self) -> tuple[list[int], float | None]:
        self._stop.set()
        self._thread.join()
        return self.samples, (sum(self.cpu.values()) if self.readable and self.cpu else None)


def transition_vs_commit(url: str, n: int = 400) -> tuple[float, float]:
    """Medians (seconds) of one ``Run.unit`` through the API and one INSERT + COMMIT, sampled
    alternately so both see the same background load."""
    import psycopg

    import resumable

    clean(url)
    api = resumable.open_run("api", store_url=url)
    api.init("transitions", units=[f"u{i}" for i in range(100)])
    conn = psycopg.connect(url)
    conn.execute("CREATE TABLE IF NOT EXISTS bench_commit (x integer)")
    conn.commit()
    commits, transitions = [], []
    for i in range(n):
        t0 = time.perf_counter()
        conn.execute("INSERT INTO bench_commit VALUES (%s)", (i,))
        conn.commit()
        commits.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        api.unit(f"u{i % 100}", "in_progress" if i % 2 else "pending")
        transitions.append(time.perf_counter() - t0)
    conn.close()
    api.close()
    return statistics.median(transitions), statistics.median(commits)


def reclaim_after_kill(url: str, cwd: Path, env: dict[str, str], trials: int = 3) -> list[float]:
    """Seconds from SIGKILL of a worker holding claims to another worker holding them again."""
    out = []
    job = job_file(cwd / "reclaim.toml", "reclaim", 4, '"sleep 60"')
    for _ in range(trials):
        clean(url)
        run([*RESUMABLE, "submit", str(job), "-q"], cwd, env)
        lease = ("--lease", f"{TTL:g}s", "-q", "--run", "reclaim")
        a = subprocess.Popen([*RESUMABLE, "worker", "-j", "4", *lease], cwd=cwd, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while sql(url, "SELECT count(*) FROM resumable_attempts WHERE status = 'running'")[0][0] < 4:
            time.sleep(0.02)
        b = subprocess.Popen([*RESUMABLE, "worker", "-j", "4", *lease], cwd=cwd, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(TTL)  # B is up and idle, waiting for work
        t0 = time.perf_counter()
        a.send_signal(signal.SIGKILL)
        a.wait()
        while sql(url, "SELECT count(*) FROM resumable_attempts WHERE n = 2 AND status = 'running'")[0][0] < 4:
            time.sleep(0.01)
        out.append(time.perf_counter() - t0)
        b.send_signal(signal.SIGKILL)
        b.wait()
        _kill_steps()
    return out


def _kill_steps() -> None:
    """The SIGKILLed workers' steps (in sessions of their own) still sleep: stop them, found by the
    run id in their environment."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if b"RESUMABLE_RUN=reclaim" in f.read().split(b"\0"):
                    os.kill(int(name), signal.SIGKILL)
        except OSError:
            pass


def main() -> int:
    ap = parser(__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--store", default=ADMIN, help="an admin URL of the PostgreSQL server to measure on")
    args = ap.parse_args()
    n = args.steps
    name = f"rbench_{os.getpid()}_{secrets.token_hex(2)}"
    sql(args.store, f'CREATE DATABASE "{name}"')
    url = urlunsplit(urlsplit(args.store)._replace(path=f"/{name}"))
    results: list[tuple[str, bool, str]] = []
    try:
        with scratch(args.dir, args.allow_tmpfs) as (work, _fs):
            env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
            env["XDG_STATE_HOME"] = str(work / "state")
            pg_env = dict(env, RESUMABLE_STORE=url)
            print(f"{n} steps; cpus {os.cpu_count()}; load {_load()}; server {args.store}", flush=True)
            results += one_run_against_two(url, work, pg_env, n)
            results += one_worker_against_local(url, work, env, pg_env, n)
            results += remote_workers(url, work, env, n)
            t_api, t_commit = transition_vs_commit(url)
            r = t_api / t_commit
            print(f"  API transition {t_api * 1e3:.3f} ms; one INSERT + COMMIT {t_commit * 1e3:.3f} ms", flush=True)
            results.append(("API transition vs one commit", r <= 3.0, f"{r:.2f} x (floor 3)"))
            reclaims = reclaim_after_kill(url, work, pg_env)
            worst = max(reclaims)
            print(f"  reclaim after SIGKILL (lease {TTL:g} s): " + ", ".join(f"{x:.2f} s" for x in reclaims),
                  flush=True)
            results.append(("reclaim after SIGKILL", worst <= TTL + 1.0, f"{worst:.2f} s (floor {TTL + 1:g} s)"))
    finally:
        sql(args.store, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    print(f"load {_load()}")
    for what, ok, figure in results:
        print(f"{'PASS' if ok else 'FAIL'}  {what}: {figure}")
    return 0 if all(ok for _, ok, _ in results) else 1


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def one_run_against_two(url: str, work: Path, env: dict[str, str], n: int) -> list[tuple[str, bool, str]]:
    """4 workers on one run against the same 4 on two runs of half the steps (2 each), interleaved
    rounds, best of each; lock waits sampled during the one-run rounds."""
    one = [job_file(work / "bench.toml", "bench", n)]
    two = [job_file(work / "half1.toml", "half1", n // 2), job_file(work / "half2.toml", "half2", n - n // 2)]
    best_one = best_two = None
    samples: list[int] = []
    for _ in range(2):
        got, waits = workers(4, url, one, work, env)
        best_one = got if best_one is None or got.seconds < best_one.seconds else best_one
        samples += waits
        got, _ = workers(4, url, two, work, env)
        best_two = got if best_two is None or got.seconds < best_two.seconds else best_two
    assert best_one is not None and best_two is not None
    print(f"  4 workers x -j 2, one run           {best_one.rate:7.0f} steps/s; {best_one.costs()}", flush=True)
    print(f"  4 workers x -j 2, two runs (2 each) {best_two.rate:7.0f} steps/s; {best_two.costs()}", flush=True)
    ratio = best_two.seconds / best_one.seconds
    waited = sum(1 for s in samples if s) / max(len(samples), 1)
    print(f"  lock waits: {waited:.1%} of {len(samples)} samples (mean {statistics.fmean(samples or [0]):.2f}"
          " backends waiting)", flush=True)
    return [("one run against two runs, 4 workers", ratio >= 0.9, f"{ratio:.2f} x (floor 0.9)"),
            ("samples with a backend waiting on a lock", waited < 0.10, f"{waited:.1%} (floor < 10 %)")]


def one_worker_against_local(url: str, work: Path, env: dict[str, str], pg_env: dict[str, str],
                             n: int) -> list[tuple[str, bool, str]]:
    """1 worker -j 2 against the local runner -j 2, the same job, interleaved rounds, best of each.
    The local runner's time leaves out its interpreter's start-up and the job file's reading (a
    process that only starts and reads it, timed alike); the worker's leaves out its start-up (see
    ``workers``)."""
    job = job_file(work / "bench.toml", "bench", n)
    t_parse = run([sys.executable, "-c", "import sys; from resumable.runner.jobfile import load_job_file;"
                   " load_job_file(sys.argv[1])", str(job)], work, env)
    best_local: Phase | None = None
    best_worker: Phase | None = None
    for i in range(2):
        local_env = dict(env, RESUMABLE_DIR=str(work / f"runs{i}"))
        cpu0 = children_cpu()
        local = run([*RESUMABLE, "run", str(job), "-j", "2", "--quiet"], work, local_env) - t_parse
        got = Phase(n, local, children_cpu() - cpu0, None, None)
        best_local = got if best_local is None or got.seconds < best_local.seconds else best_local
        got, _ = workers(1, url, [job], work, pg_env)
        best_worker = got if best_worker is None or got.seconds < best_worker.seconds else best_worker
    assert best_local is not None and best_worker is not None
    print(f"  local runner (files) -j 2           {best_local.rate:7.0f} steps/s (job file reading,"
          f" {t_parse:.2f} s, left out); {best_local.costs()}", flush=True)
    print(f"  1 worker x -j 2                     {best_worker.rate:7.0f} steps/s; {best_worker.costs()}", flush=True)
    ratio = best_local.seconds / best_worker.seconds
    return [("1 worker against the local runner", ratio >= 0.7, f"{ratio:.2f} x (floor 0.7)")]


def remote_workers(url: str, work: Path, env: dict[str, str], n: int) -> list[tuple[str, bool, str]]:
    """8 workers -j 4 through the latency proxy (1 ms each way) on N steps of ``sleep 0.1`` (the
    argv ["sleep", "0.1"], no shell); round trips counted by the proxy (client writes it forwarded)."""
    from benchmarks.latency_proxy import LatencyProxy, round_trip

    parts = urlsplit(url)
    job = job_file(work / "remote.toml", "remote", n, '["sleep", "0.1"]')
    with LatencyProxy((parts.hostname or "127.0.0.1", parts.port or 5432), delay=0.001) as proxy:
        far = proxy.url(url)
        rtt = round_trip(far)
        before = proxy.requests()
        got, _ = workers(8, far, [job], work, dict(env, RESUMABLE_STORE=far), slots=4)
        trips = proxy.requests() - before
    ideal = n * 0.1 / 32
    ratio = got.seconds / ideal
    print(f"  8 workers x -j 4 through the proxy ({rtt * 1e3:.1f} ms a round trip), {n} steps of"
          f" [\"sleep\", \"0.1\"]: {got.seconds:.2f} s ({ideal:.2f} s ideal); {got.costs()};"
          f" {trips / n:.1f} round trips/step", flush=True)
    return [("remote workers against the ideal time", ratio <= 1.4, f"{ratio:.2f} x (floor 1.4)")]


if __name__ == "__main__":
    raise SystemExit(main())
