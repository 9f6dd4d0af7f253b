"""Helpers for the MCP server's tests: a real `resumable mcp` process spoken to with the SDK's own
stdio client, a store of either kind (a runs directory, or a PostgreSQL database of the test
server), and the runs the tests ask about."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.stdio import StdioServerParameters, stdio_client

from mcp import Client

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
RESUMABLE = str(BIN / "resumable")
CI = os.environ.get("CI", "").lower() == "true"
# Every answer of the server stays under this (the bound for a 100,000-unit run).
ANSWER_BOUND = 20_000


def _pgtests() -> Any:
    sys.path.insert(0, str(HERE.parent / "postgres"))
    try:
        import pgtests
    finally:
        sys.path.remove(str(HERE.parent / "postgres"))
    return pgtests


def pg_database(label: str) -> str:
    """A fresh database on the test server, or skip (fail under CI)."""
    pgtests = _pgtests()
    problem = pgtests.server_problem()
    if problem is not None:
        if CI:
            pytest.fail(f"CI=true and no PostgreSQL server: {problem}", pytrace=False)
        pytest.skip(f"no PostgreSQL server ({problem})")
    url: str = pgtests.create_database(label)
    return url


def drop_database(url: str) -> None:
    _pgtests().drop_database(url)


@dataclass
class Store:
    """Where the runs live, as the CLI and the server are told: ``--dir DIR`` or ``--store URL``."""

    kind: str  # "files" or "postgres"
    project: Path  # the directory the server and the CLI run in
    option: list[str]
    env: dict[str, str] = field(default_factory=dict)

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([RESUMABLE, *args, *self.option], cwd=self.project, env=self.env,
                              capture_output=True, text=True, timeout=300, check=False)
        if check:
            assert proc.returncode == 0, (args, proc.returncode, proc.stdout, proc.stderr)
        return proc

    def run_job(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([RESUMABLE, "run", *args, *self.option], cwd=self.project, env=self.env,
                              capture_output=True, text=True, timeout=300, check=False)


def base_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    env["HOME"] = str(tmp / "home")
    env["XDG_STATE_HOME"] = str(tmp / "state")
    return env


class Answer:
    """One tool call's result: whether it is an error, its text, and the text's JSON when it has one."""

    def __init__(self, result: Any) -> None:
        self.error: bool = bool(result.is_error)
        texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
        self.text = "\n".join(texts)
        self.size = len(self.text.encode("utf-8"))
        try:
            self.json: Any = json.loads(self.text)
        except ValueError:
            self.json = None

    def __repr__(self) -> str:
        return f"Answer(error={self.error}, {self.text[:500]!r})"


class Session:
    def __init__(self, client: Client) -> None:
        self.client = client
        self.calls = 0

    async def call(self, tool: str, **args: Any) -> Answer:
        self.calls += 1
        got = Answer(await self.client.call_tool(tool, args))
        assert got.size < ANSWER_BOUND, (tool, args, got.size)
        return got

    async def ok(self, tool: str, **args: Any) -> Any:
        got = await self.call(tool, **args)
        assert not got.error, (tool, args, got.text)
        assert got.json is not None, got.text
        return got.json

    async def tools(self) -> list[str]:
        return [t.name for t in (await self.client.list_tools()).tools]


@asynccontextmanager
async def served(store: Store, *extra: str, errlog: Path | None = None) -> AsyncIterator[Session]:
    """A `resumable mcp` process on ``store``, and a client session with it. Its stderr goes to
    ``errlog`` (for the tests that check it holds no traceback)."""
    params = StdioServerParameters(command=RESUMABLE, args=["mcp", *store.option, *extra], cwd=str(store.project),
                                   env=store.env)
    log = open(errlog if errlog is not None else os.devnull, "w")  # noqa: SIM115 (closed below)
    try:
        async with Client(stdio_client(params, errlog=log), read_timeout_seconds=300) as client:
            yield Session(client)
    finally:
        log.close()


def run_async(fn: Callable[[], Awaitable[None]]) -> None:
    anyio.run(fn)


FAILING_JOB = """\
[job]
name = "nightly"

[steps.fetch]
run = "echo fetched"

[steps.build]
run = "echo 'compiling'; echo 'error: missing totals.txt' >&2; test -f totals.txt"
needs = ["fetch"]

[steps.publish]
run = "echo published"
needs = ["build"]
"""


def failed_job(store: Store) -> None:
    """The job ``nightly`` run once: fetch done, build failed (exit 1, its log saying why), publish
    never ran."""
    (store.project / "resumable.toml").write_text(FAILING_JOB)
    proc = store.run_job()
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
