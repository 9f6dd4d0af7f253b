"""Helpers for the worker tests: job files, worker processes, and the exactly-once checks over what
the database recorded (the run's history, the documents' attempts, the workers' attempts table)."""

from __future__ import annotations

import itertools
import json
import random
import signal
import subprocess
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from pgtests import RESUMABLE, sql


def dag_job(path: Path, name: str, n: int, *, seed: int = 1, sleep_every: int = 7, sleep: float = 0.05) -> Path:
    """A job of ``n`` steps, each needing up to two earlier ones; some steps sleep a little, so a
    kill often lands while a step runs."""
    rng = random.Random(seed)
    lines = [f'[job]\nname = "{name}"\n']
    for i in range(n):
        cmd = f"sleep {sleep:g}" if i % sleep_every == 0 else "true"
        needs = sorted({f"s{rng.randrange(i)}" for _ in range(rng.randint(0, 2))}) if i else []
        lines.append(f'[steps.s{i}]\nrun = "{cmd}"\n' + (f"needs = {json.dumps(needs)}\n" if needs else ""))
    path.write_text("\n".join(lines))
    return path


def start_worker(env: dict[str, str], cwd: Path, run: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([RESUMABLE, "worker", "--run", run, "-q", *extra], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(procs: list[subprocess.Popen[str]], timeout: float) -> list[tuple[int, str, str]]:
    deadline = time.monotonic() + timeout
    out = []
    for p in procs:
        try:
            stdout, stderr = p.communicate(timeout=max(deadline - time.monotonic(), 1))
        except subprocess.TimeoutExpired:
            for q in procs:
                if q.poll() is None:
                    q.send_signal(signal.SIGKILL)
            raise
        out.append((p.returncode, stdout, stderr))
    return out


def attempts(url: str, run: str) -> list[dict[str, Any]]:
    keys = ("step", "n", "epoch", "status", "started", "finished", "stale", "worker")
    rows = sql(url, "SELECT a.step, a.n, a.epoch, a.status, a.started_at, a.finished_at, a.stale, a.worker"
                    " FROM resumable_attempts a JOIN resumable_runs r ON r.pk = a.run_pk"
                    " WHERE r.id = %s AND r.archived_at IS NULL ORDER BY a.step, a.n", (run,))
    return [dict(zip(keys, r, strict=True)) for r in rows]


def check_exactly_once(url: str, run: str, steps: int, doc: dict[str, Any],
                       history: list[dict[str, Any]]) -> dict[str, int]:
    """Every step done exactly once; every attempt on record, in the document and the attempts
    table alike, numbered 1..k; a step's attempts never overlap in time unless the earlier one was
    fenced off (its lease expired and the step was taken back). Returns counts for the message."""
    assert doc["status"] == "done", doc.get("result")
    assert len(doc["units"]) == steps
    done_events: dict[str, int] = {}
    for e in history:
        if e["t"] == "unit" and e["state"] == "done":
            done_events[e["unit"]] = done_events.get(e["unit"], 0) + 1
    assert done_events == {f"s{i}": 1 for i in range(steps)}
    table = attempts(url, run)
    by_step: dict[str, list[dict[str, Any]]] = {}
    for a in table:
        by_step.setdefault(a["step"], []).append(a)
    expired = stale = 0
    for sid, unit in doc["units"].items():
        assert unit["status"] == "done"
        mine = by_step.get(sid, [])
        in_doc = sorted(a["n"] for a in unit.get("attempts", []))
        assert [a["n"] for a in mine] == in_doc == list(range(1, len(mine) + 1)), (sid, mine, in_doc)
        assert [a["status"] for a in mine].count("done") == 1, (sid, mine)
        assert mine[-1]["status"] == "done"
        for a in mine:
            assert a["status"] in ("done", "failed", "interrupted", "expired"), a  # none left running
            assert a["finished"] is not None
            expired += a["status"] == "expired"
            stale += a["stale"] is not None
            assert a["stale"] is None or a["status"] == "expired", a  # only a fenced attempt can be stale
        for earlier, later in itertools.pairwise(mine):
            assert later["epoch"] > earlier["epoch"]
            if earlier["status"] != "expired":
                assert _at(later["started"]) >= _at(earlier["finished"]), (earlier, later)
    return {"attempts": len(table), "expired": expired, "stale": stale}


def _at(value: datetime) -> float:
    return value.timestamp()
