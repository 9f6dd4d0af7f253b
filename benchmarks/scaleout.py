"""Scale-out: many workers on one run through a PostgreSQL store, against the same workers on
two runs and against the local file-store runner, all measured in this one run; workers "on other
hosts" through a latency proxy (1 ms each way); lock waits sampled from pg_stat_activity; what a
transition through the API costs against one local commit; how long after a worker's SIGKILL its
steps are taken back.

    python -m benchmarks.scaleout [--steps 2000] [--store URL] [--dir DIR] [--allow-tmpfs]

``--store`` is an admin URL of the server (default ``RESUMABLE_TEST_PG``, else
``postgresql://root@127.0.0.1:5432/postgres``): a scratch database is created there and dropped.
Everything else is written in a temporary directory.

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


def workers(n: int, url: str, jobs: list[Path], cwd: Path, env: dict[str, str], *, slots: int = 2,
            sample: bool = False) -> tuple[float, int, list[int]]:
    """(seconds from the workers' start to the runs' end, claims made, lock waiters per sample):
    ``n`` workers split evenly over the runs of ``jobs`` (submitted first)."""
    clean(url)
    names = []
    for job in jobs:
        run([*RESUMABLE, "submit", str(job), "-q"], cwd, env)
        names.append(job.stem)
    sampler = LockSampler(url) if sample else None
    t0 = time.perf_counter()
    procs = [subprocess.Popen([*RESUMABLE, "worker", "--run", names[i % len(names)], "-j", str(slots), "-q"],
                              cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for i in range(n)]
    for p in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            sys.exit(f"benchmark: a worker failed ({p.returncode}): {err[-500:]}")
    elapsed = time.perf_counter() - t0
    waits = sampler.stop() if sampler is not None else []
    (claims,) = sql(url, "SELECT count(*) FROM resumable_attempts")[0]
    for name in names:
        (status,) = sql(url, "SELECT status FROM resumable_runs WHERE id = %s AND archived_at IS NULL", (name,))[0]
        if status != "done":
            sys.exit(f"benchmark: run {name} ended {status}")
    return elapsed, int(claims), waits


class LockSampler:
    """Every 50 ms, how many backends of the database wait on a lock (``pg_stat_activity``)."""

    def __init__(self, url: str) -> None:
        import threading

        self.url = url
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self._stop.wait(0.05):
                (waiting,) = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()").fetchone() or (0,)
                self.samples.append(int(waiting))

    def stop(self) -> list[int]:
        self._stop.set()
        self._thread.join()
        return self.samples


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
    best_one = best_two = float("inf")
    samples: list[int] = []
    for _ in range(2):
        elapsed, _, waits = workers(4, url, one, work, env, sample=True)
        best_one = min(best_one, elapsed)
        samples += waits
        elapsed, _, _ = workers(4, url, two, work, env)
        best_two = min(best_two, elapsed)
    print(f"  4 workers x -j 2, one run          {n / best_one:8.0f} steps/s", flush=True)
    print(f"  4 workers x -j 2, two runs (2 each) {n / best_two:7.0f} steps/s", flush=True)
    ratio = best_two / best_one
    waited = sum(1 for s in samples if s) / max(len(samples), 1)
    print(f"  lock waits: {waited:.1%} of {len(samples)} samples (mean {statistics.fmean(samples or [0]):.2f}"
          " backends waiting)", flush=True)
    return [("one run against two runs, 4 workers", ratio >= 0.9, f"{ratio:.2f} x (floor 0.9)"),
            ("samples with a backend waiting on a lock", waited < 0.10, f"{waited:.1%} (floor < 10 %)")]


def one_worker_against_local(url: str, work: Path, env: dict[str, str], pg_env: dict[str, str],
                             n: int) -> list[tuple[str, bool, str]]:
    """1 worker -j 2 against the local runner -j 2, the same job, interleaved rounds, best of each.
    Reading the job file is the same work for both; the local runner's time leaves it out (the
    worker starts after the submit that read it)."""
    job = job_file(work / "bench.toml", "bench", n)
    t_parse = run([sys.executable, "-c", "import sys; from resumable.runner.jobfile import load_job_file;"
                   " load_job_file(sys.argv[1])", str(job)], work, env)
    best_local = best_worker = float("inf")
    for i in range(2):
        local_env = dict(env, RESUMABLE_DIR=str(work / f"runs{i}"))
        local = run([*RESUMABLE, "run", str(job), "-j", "2", "--quiet"], work, local_env) - t_parse
        best_local = min(best_local, local)
        best_worker = min(best_worker, workers(1, url, [job], work, pg_env)[0])
    print(f"  local runner (files) -j 2          {n / best_local:8.0f} steps/s (job file reading,"
          f" {t_parse:.2f} s, left out)", flush=True)
    print(f"  1 worker x -j 2                    {n / best_worker:8.0f} steps/s", flush=True)
    ratio = best_local / best_worker
    return [("1 worker against the local runner", ratio >= 0.7, f"{ratio:.2f} x (floor 0.7)")]


def remote_workers(url: str, work: Path, env: dict[str, str], n: int) -> list[tuple[str, bool, str]]:
    """8 workers -j 4 through the latency proxy (1 ms each way) on N steps of `sleep 0.1`."""
    from benchmarks.latency_proxy import LatencyProxy, round_trip

    parts = urlsplit(url)
    job = job_file(work / "remote.toml", "remote", n, '"sleep 0.1"')
    with LatencyProxy((parts.hostname or "127.0.0.1", parts.port or 5432), delay=0.001) as proxy:
        far = proxy.url(url)
        rtt = round_trip(far)
        elapsed, _, _ = workers(8, far, [job], work, dict(env, RESUMABLE_STORE=far), slots=4)
    ideal = n * 0.1 / 32
    ratio = elapsed / ideal
    print(f"  8 workers x -j 4 through the proxy ({rtt * 1e3:.1f} ms a round trip): {elapsed:.2f} s"
          f" ({ideal:.2f} s ideal)", flush=True)
    return [("remote workers against the ideal time", ratio <= 1.4, f"{ratio:.2f} x (floor 1.4)")]


if __name__ == "__main__":
    raise SystemExit(main())
