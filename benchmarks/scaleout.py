"""Scale-out: a job of trivial steps run by 1, 2 and 4 workers through a PostgreSQL store, against
the local file-store runner on the same job, all measured in this one run; plus claims per second,
what a transition through the API costs against one local PostgreSQL commit, and how long after a
worker's SIGKILL its steps are taken back.

    python -m benchmarks.scaleout [--steps 10000] [--store URL] [--dir DIR] [--allow-tmpfs]

``--store`` is an admin URL of the server (default ``RESUMABLE_TEST_PG``, else
``postgresql://root@127.0.0.1:5432/postgres``): a scratch database is created there and dropped.

Floors (PASS/FAIL lines; exit 0 only if all pass):
- 4 workers (each -j 2) finish within 2 x the local runner's (-j 2) wall time;
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


def workers(n: int, url: str, job: Path, cwd: Path, env: dict[str, str]) -> tuple[float, float, int]:
    """(submit seconds, seconds from the workers' start to the run's end, claims made)."""
    clean(url)
    t_submit = run([*RESUMABLE, "submit", str(job), "-q"], cwd, env)
    t0 = time.perf_counter()
    procs = [subprocess.Popen([*RESUMABLE, "worker", "--run", "bench", "-j", "2", "-q"], cwd=cwd, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(n)]
    for p in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            sys.exit(f"benchmark: a worker failed ({p.returncode}): {err[-500:]}")
    elapsed = time.perf_counter() - t0
    (claims,) = sql(url, "SELECT count(*) FROM resumable_attempts")[0]
    (status,) = sql(url, "SELECT status FROM resumable_runs WHERE id = 'bench' AND archived_at IS NULL")[0]
    if status != "done":
        sys.exit(f"benchmark: the run ended {status}")
    return t_submit, elapsed, int(claims)


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
    ap.add_argument("--steps", type=int, default=10000)
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
            job = job_file(work / "bench.toml", "bench", n)
            local_env = dict(env, RESUMABLE_DIR=str(work / "runs"))
            pg_env = dict(env, RESUMABLE_STORE=url)
            print(f"{n} steps of `true`; cpus {os.cpu_count()}; server {args.store}", flush=True)
            # Reading the job file is the same work for the local runner and for a submit; it is
            # timed apart and left out of both sides of the ratio (the workers start after it).
            t_parse = run([sys.executable, "-c", "import sys; from resumable.runner.jobfile import load_job_file;"
                           " load_job_file(sys.argv[1])", str(job)], work, env)
            t_local = run([*RESUMABLE, "run", str(job), "-j", "2", "--quiet"], work, local_env)
            print(f"  reading the job file              {t_parse:8.2f} s", flush=True)
            print(f"  local runner (files) -j 2        {t_local:8.2f} s  {t_local / n * 1e3:6.2f} ms/step"
                  f"  ({t_local - t_parse:.2f} s without reading the job file)", flush=True)
            clean(url)
            t_run = run([*RESUMABLE, "run", str(job), "-j", "2", "--quiet"], work, pg_env)
            print(f"  run --store (submit + 1 worker)  {t_run:8.2f} s  {t_run / n * 1e3:6.2f} ms/step", flush=True)
            times = {}
            for k in (1, 2, 4):
                t_submit, elapsed, claims = workers(k, url, job, work, pg_env)
                times[k] = elapsed
                print(f"  {k} worker(s) x -j 2               {elapsed:8.2f} s  {elapsed / n * 1e3:6.2f} ms/step"
                      f"  ({claims / elapsed:,.0f} claims/s; submit {t_submit:.2f} s;"
                      f" {elapsed / max(t_local - t_parse, 1e-9):.2f} x local)", flush=True)
            ratio = times[4] / max(t_local - t_parse, 1e-9)
            results.append(("4 workers vs local runner (job file reading left out)", ratio <= 2.0,
                            f"{ratio:.2f} x (floor 2)"))
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
    for what, ok, figure in results:
        print(f"{'PASS' if ok else 'FAIL'}  {what}: {figure}")
    return 0 if all(ok for _, ok, _ in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
