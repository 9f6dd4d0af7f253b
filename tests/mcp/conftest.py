"""The MCP server's tests: each runs against a runs directory and against a PostgreSQL database of
the test server (a fresh one per test, dropped afterwards)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from mcphelpers import Store, base_env, drop_database, pg_database


@pytest.fixture(params=["files", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    project = tmp_path / "project"
    project.mkdir()
    env = base_env(tmp_path)
    if request.param == "files":
        yield Store("files", project, ["--dir", str(project / ".resumable" / "runs")], env)
        return
    url = pg_database(request.node.name)
    try:
        yield Store("postgres", project, ["--store", url], env)
    finally:
        drop_database(url)
