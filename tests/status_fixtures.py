"""Hand-built seed-format run documents for the status and report tests.

A seed snapshot without a journal is a valid run, so these are written as plain pretty JSON files.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

T0 = 1_795_939_200  # 2026-11-29T08:00:00Z


def ts(offset: float) -> str:
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(T0 + offset))


def unit(status: str, **extra: Any) -> dict[str, Any]:
    u: dict[str, Any] = {"status": status, "dependsOn": [], "note": "", "createdAt": ts(0),
                         "updatedAt": ts(60)}
    u.update(extra)
    return u


def base_doc(run_id: str = "run-a", **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schemaVersion": 2,
        "id": run_id,
        "task": "build the thing",
        "status": "running",
        "createdAt": ts(0),
        "updatedAt": ts(600),
        "phases": {},
        "units": {},
        "openItems": [],
        "resolvedItems": [],
        "result": None,
    }
    doc.update(extra)
    return doc


def rich_doc(run_id: str = "run-rich") -> dict[str, Any]:
    """A run with something of every kind: phases, attempts, retries, failures, findings."""
    units: dict[str, Any] = {
        "fetch": unit("done", startedAt=ts(0), finishedAt=ts(30), attempts=[
            {"n": 1, "status": "done", "startedAt": ts(0), "finishedAt": ts(30), "exitCode": 0,
             "duration": 30.0, "log": "logs/fetch.1.log"}]),
        "compile": unit("failed", dependsOn=["fetch"], note="compiler crashed",
                        startedAt=ts(30), finishedAt=ts(90), attempts=[
            {"n": 1, "status": "failed", "startedAt": ts(30), "finishedAt": ts(50),
             "exitCode": 2, "duration": 20.0},
            {"n": 2, "status": "failed", "startedAt": ts(55), "finishedAt": ts(90),
             "exitCode": 2, "duration": 35.0, "log": "logs/compile.2.log"}]),
        "lint": unit("timeout", dependsOn=["fetch"], startedAt=ts(30), attempts=[
            {"n": 1, "status": "timeout", "startedAt": ts(30), "finishedAt": ts(330),
             "exitCode": -15, "duration": 300.0}]),
        "test": unit("dep_blocked", dependsOn=["compile"]),
        "docs": unit("in_progress", startedAt=ts(500), attempts=[
            {"n": 1, "status": "running", "startedAt": ts(500)}]),
        "merge-1": unit("done", note="reconciled-from-trailer:abc123def", startedAt=ts(10),
                        finishedAt=ts(20)),
        "package": unit("pending", dependsOn=["test"]),
        "review": unit("blocked", note="waiting for a human"),
        "broken": None,
        "stringy": "not an object",
    }
    return base_doc(
        run_id,
        phases={
            "review": {"status": "pending", "updatedAt": ts(0)},
            "build": {"status": "done", "updatedAt": ts(100), "startedAt": ts(0),
                      "finishedAt": ts(100)},
            "test": {"status": "running", "updatedAt": ts(200), "startedAt": ts(100)},
        },
        currentPhase="test",
        units=units,
        openItems=[
            {"at": ts(100), "id": "f1", "severity": "blocker", "issue": "compile fails on arm64"},
            {"at": ts(110), "id": "f2", "title": "flaky lint"},
            "a bare string finding",
        ],
        resolvedItems=[{"at": ts(5), "id": "f0", "issue": "old", "resolvedAt": ts(9)}],
        finalValidation={"status": "red", "at": ts(590), "note": "2 tests red"},
        launch={"kind": "resumable", "argv": ["resumable", "run", "job.toml", "--id", run_id],
                "cwd": "/srv/project dir"},
    )


def write_doc(runs_dir: Path, doc: Any, name: str | None = None) -> Path:
    runs_dir.mkdir(parents=True, exist_ok=True)
    if name is None:
        name = f"{doc['id']}.json"
    path = runs_dir / name
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return path


def tree_state(root: Path) -> dict[str, tuple[str, int, int]]:
    """Every file under root: (sha256, size, mtime_ns), plus directories' mtimes."""
    out: dict[str, tuple[str, int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        d = Path(dirpath)
        st = d.stat()
        out[str(d.relative_to(root)) + "/"] = ("dir", len(dirnames) + len(filenames),
                                              st.st_mtime_ns)
        for f in filenames:
            p = d / f
            st = p.stat()
            out[str(p.relative_to(root))] = (hashlib.sha256(p.read_bytes()).hexdigest(),
                                             st.st_size, st.st_mtime_ns)
    return out


def big_doc(n: int, run_id: str = "run-big") -> dict[str, Any]:
    """n units: mostly done, some failed / pending / dep_blocked, a few with retries."""
    units: dict[str, Any] = {}
    for i in range(n):
        r = i % 100
        if r < 80:
            st = "done"
        elif r < 85:
            st = "failed"
        elif r < 95:
            st = "pending"
        else:
            st = "dep_blocked"
        u: dict[str, Any] = {"status": st, "dependsOn": [f"u{i - 1}"] if st == "dep_blocked"
                             else [], "note": "", "createdAt": ts(0), "updatedAt": ts(1)}
        if st in ("done", "failed"):
            start = (i % 1000) * 3.0
            u["startedAt"] = ts(start)
            u["finishedAt"] = ts(start + 2)
            u["attempts"] = [{"n": 1, "status": st, "startedAt": ts(start),
                              "finishedAt": ts(start + 2), "exitCode": 0 if st == "done" else 1,
                              "duration": 2.0}]
        units[f"u{i}"] = u
    return base_doc(run_id, units=units)


def sample_run(run_id: str = "release-2026-11-29") -> dict[str, Any]:
    """A realistic finished run for the report screenshot and the browser test: 36 units on four
    workers, a few retried steps, one step that failed three times, one timeout, and the steps
    stuck behind them."""
    import random

    rng = random.Random(7)
    names = (
        ["fetch-deps", "codegen", "lint"]
        + [f"compile:{m}" for m in ("core", "api", "cli", "store", "runner", "web")]
        + [f"test:{m}" for m in ("core", "api", "cli", "store", "runner", "web", "e2e")]
        + [f"bench:{m}" for m in ("write", "read", "replay")]
        + [f"docs:{p}" for p in ("guide", "api", "cli", "faq")]
        + [f"package:{t}" for t in ("wheel", "sdist", "deb", "rpm", "docker")]
        + ["sign", "checksums", "smoke-install", "changelog", "upload", "announce", "tag"]
    )
    deps: dict[str, list[str]] = {n: [] for n in names}
    for n in names:
        if n.startswith("compile:"):
            deps[n] = ["fetch-deps", "codegen"]
        elif n.startswith("test:"):
            m = n.split(":")[1]
            deps[n] = [f"compile:{m}"] if m != "e2e" else ["compile:api", "compile:web"]
        elif n.startswith("bench:"):
            deps[n] = ["compile:store"]
        elif n.startswith("package:"):
            deps[n] = ["test:core", "test:cli"]
        elif n in ("sign", "checksums"):
            deps[n] = ["package:wheel", "package:sdist"]
        elif n in ("smoke-install", "upload"):
            deps[n] = ["sign", "checksums", "test:e2e"]
        elif n in ("announce", "tag"):
            deps[n] = ["upload"]
    retry = {"test:api": 2, "compile:web": 2, "bench:replay": 3, "docs:api": 2}
    fail = {"test:e2e"}
    timeout = {"bench:read"}
    workers = [0.0] * 4
    finish: dict[str, float] = {}
    state: dict[str, str] = {}
    units: dict[str, Any] = {}
    for n in names:
        if any(state.get(d) != "done" for d in deps[n]):
            state[n] = "dep_blocked" if any(state.get(d) in ("failed", "timeout", "dep_blocked")
                                            for d in deps[n]) else "pending"
            units[n] = unit(state[n], dependsOn=deps[n])
            continue
        ready = max([finish[d] for d in deps[n]], default=0.0)
        attempts = []
        tries = 3 if n in fail else retry.get(n, 1)
        w = min(range(4), key=lambda i: workers[i])
        t = max(workers[w], ready)
        for k in range(1, tries + 1):
            dur = rng.uniform(20, 140) if not n.startswith("bench") else rng.uniform(90, 200)
            if n in timeout:
                dur, st, code = 300.0, "timeout", -15
            elif n in fail or k < tries:
                st, code = "failed", 1
            else:
                st, code = "done", 0
            attempts.append({"n": k, "status": st, "startedAt": ts(t), "finishedAt": ts(t + dur),
                             "exitCode": code, "duration": round(dur, 1),
                             "log": f".resumable/runs/{run_id}/logs/{n}.{k}.log"})
            t += dur + (4 * k if k < tries else 0)
        workers[w] = t
        finish[n] = t
        state[n] = attempts[-1]["status"]
        units[n] = unit(state[n], dependsOn=deps[n], startedAt=attempts[0]["startedAt"],
                        finishedAt=attempts[-1]["finishedAt"], attempts=attempts,
                        note="e2e: checkout flow asserts on a stale price" if n in fail else "")
    end = max(finish.values())
    return base_doc(
        run_id,
        task="Release 2.4: build, test, package and publish",
        status="needs_attention",
        updatedAt=ts(end),
        finishedAt=ts(end),
        phases={"build": {"status": "done", "updatedAt": ts(600)},
                "test": {"status": "blocked", "updatedAt": ts(end)},
                "ship_prep": {"status": "pending", "updatedAt": ts(0)}},
        currentPhase="test",
        units=units,
        openItems=[
            {"at": ts(end), "id": "e2e-stale-price", "severity": "blocker",
             "issue": "test:e2e fails 3/3: checkout flow asserts on a stale price"},
            {"at": ts(end), "id": "bench-read-timeout", "severity": "high",
             "issue": "bench:read exceeded its 300 s timeout"},
            {"at": ts(end), "id": "flaky-test-api", "severity": "low",
             "issue": "test:api passed on retry 2; flaky fixture?"},
        ],
        resolvedItems=[{"at": ts(10), "id": "lockfile-drift", "issue": "lockfile drift",
                        "resolvedAt": ts(200)}],
        finalValidation={"status": "red", "at": ts(end), "note": "e2e red"},
        launch={"kind": "resumable", "argv": ["resumable", "run", "release.toml"],
                "cwd": "/srv/release"},
    )


def attempt_count(doc: dict[str, Any]) -> int:
    """Bars the report must draw: one per attempt, or one per started unit without attempts."""
    n = 0
    for u in doc["units"].values():
        if not isinstance(u, dict):
            continue
        atts = u.get("attempts")
        if isinstance(atts, list) and atts:
            n += sum(1 for a in atts if isinstance(a, dict) and a.get("startedAt"))
        elif u.get("startedAt"):
            n += 1
    return n


if __name__ == "__main__":  # python tests/status_fixtures.py report.png (the docs picture: scripts/docs-pictures)
    import subprocess
    import sys
    import tempfile
    import time as _time

    from resumable.view.report import build_html

    out = Path(sys.argv[1])
    doc = sample_run()
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "report.html"
        page.write_text(build_html(doc, now=_time.time(), file=f"/srv/release/.resumable/runs/"
                                   f"{doc['id']}.json"), encoding="utf-8")
        subprocess.run(
            ["/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={tmp}/ud", "--hide-scrollbars",
             f"--screenshot={out.resolve()}", "--window-size=1200,800", page.as_uri()],
            check=True, capture_output=True,
        )
    print(out)
