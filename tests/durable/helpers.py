"""Helpers of the durable-step tests: read a run back, and run scripts as real processes (for kills,
leases and process pools)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
SRC = HERE.parent.parent / "src"


def read_doc(runs: Path, run_id: str) -> dict[str, Any]:
    """The run's current document, read by a fresh handle (what another process would see)."""
    from resumable import store

    doc = store.open_backend(runs).open(run_id).load()
    assert doc is not None
    return doc


def journal(runs: Path, run_id: str) -> list[dict[str, Any]]:
    lines = (runs / f"{run_id}.journal.jsonl").read_bytes().split(b"\n")
    return [json.loads(line) for line in lines if line.strip(b"\0").strip()]


def step_units(doc: dict[str, Any]) -> dict[str, Any]:
    return {uid: u for uid, u in doc["units"].items() if isinstance(u, dict) and u.get("kind") == "step"}


def python(args: list[str], cwd: Path, env: dict[str, str] | None = None, **kw: Any) -> subprocess.Popen[str]:
    full = dict(os.environ)
    full["PYTHONPATH"] = os.pathsep.join([str(HERE), str(SRC), full.get("PYTHONPATH", "")])
    if env:
        full.update(env)
    return subprocess.Popen([sys.executable, *args], cwd=cwd, env=full, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def pg_database(label: str) -> str:
    """A fresh database on the test server (tests/postgres/pgtests.py), or skip (fail under CI)."""
    sys.path.insert(0, str(HERE.parent / "postgres"))
    try:
        import pgtests  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(HERE.parent / "postgres"))
    problem = pgtests.server_problem()
    if problem is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and no PostgreSQL server: {problem}", pytrace=False)
        pytest.skip(f"no PostgreSQL server ({problem})")
    url: str = pgtests.create_database(label)
    return url


def drop_pg_database(url: str) -> None:
    sys.path.insert(0, str(HERE.parent / "postgres"))
    try:
        import pgtests
    finally:
        sys.path.remove(str(HERE.parent / "postgres"))
    pgtests.drop_database(url)
