"""Helpers for the seed-compatibility tests: real git repositories and a seed event-log writer."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

GIT_ENV = {
    "GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
}


def git(repo: Path, *args: str, stdin: bytes | None = None) -> str:
    env = {**os.environ, **GIT_ENV}
    for k in list(env):
        if k in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
            del env[k]
    done = subprocess.run(["git", "-C", str(repo), *args], input=stdin, capture_output=True, env=env, check=True)
    return done.stdout.decode().strip()


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    return path


def commit(repo: Path, subject: str, *, task: str | None = None, run: str | None = None,
           body: str = "") -> str:
    msg = subject + "\n\n" + body
    trailers = []
    if run is not None:
        trailers.append(f"Run-Id: {run}")
    if task is not None:
        trailers.append(f"Task-Id: {task}")
    if trailers:
        msg += ("\n" if body else "") + "\n".join([*trailers, "Plan-Id: p1"]) + "\n"
    git(repo, "commit", "-q", "--allow-empty", "-m", msg)
    return git(repo, "rev-parse", "HEAD")


def fast_import_history(repo: Path, n: int, *, every: int = 1, branch: str = "main") -> None:
    """``n`` commits on ``branch`` in one ``git fast-import``; every ``every``-th carries Task-Id t<i>."""
    parts: list[bytes] = []
    for i in range(1, n + 1):
        msg = f"commit {i}\n\n" + (f"Run-Id: r1\nTask-Id: t{i}\nPlan-Id: p1\n" if i % every == 0 else "")
        data = msg.encode()
        parts.append(f"commit refs/heads/{branch}\nmark :{i}\ncommitter T <t@example.com> {1_700_000_000 + i} +0000\n"
                     f"data {len(data)}\n".encode() + data)
        if i > 1:
            parts.append(f"from :{i - 1}\n".encode())
        parts.append(b"\n")
    git(repo, "fast-import", "--quiet", stdin=b"".join(parts))


# ---- a seed event-log writer, independent of the module under test -------------------------------
# Only for documents where Python's json prints exactly what JSON.stringify prints (no floats, no
# array-index keys, no lone surrogates): the golden tests cover the rest.

def js_digest(doc: Any) -> str:
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def seed_apply(doc: dict[str, Any], op: str, path: list[str], value: Any = None) -> dict[str, Any]:
    nxt: dict[str, Any] = json.loads(json.dumps(doc))
    parent = nxt
    for key in path[:-1]:
        if not isinstance(parent.get(key), dict):
            parent[key] = {}
        parent = parent[key]
    if op == "delete":
        parent.pop(path[-1], None)
    elif op == "set":
        parent[path[-1]] = json.loads(json.dumps(value))
    else:
        prior = parent.get(path[-1])
        parent[path[-1]] = {**(prior if isinstance(prior, dict) else {}), **value}
    return nxt


class SeedWriter:
    """What the seed's initializeEventLog/appendTransition write (log first, then the snapshot)."""

    def __init__(self, snapshot: Path) -> None:
        self.snapshot = snapshot
        name = str(snapshot)
        self.log = Path(name[:-5] + ".events.jsonl" if name.endswith(".json") else name + ".events.jsonl")
        self.doc: dict[str, Any] = {}

    def _append(self, record: dict[str, Any]) -> None:
        with open(self.log, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")

    def write_snapshot(self) -> None:
        self.snapshot.write_text(json.dumps(self.doc, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")

    def init(self, doc: dict[str, Any], *, snapshot: bool = True) -> None:
        self.doc = json.loads(json.dumps(doc))
        self._append({"v": 1, "op": "init", "doc": self.doc, "afterHash": js_digest(self.doc)})
        if snapshot:
            self.write_snapshot()

    def transition(self, op: str, path: list[str], value: Any = None, *, snapshot: bool = True) -> None:
        nxt = seed_apply(self.doc, op, path, value)
        rec: dict[str, Any] = {"v": 1, "op": op, "path": path}
        if op != "delete":
            rec["value"] = value
        rec["beforeHash"] = js_digest(self.doc)
        rec["afterHash"] = js_digest(nxt)
        self._append(rec)
        self.doc = nxt
        if snapshot:
            self.write_snapshot()
