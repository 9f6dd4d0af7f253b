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
