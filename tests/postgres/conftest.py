"""The PostgreSQL store's tests run against a real server (never a mock): each test module gets a
database of its own, created at the start and dropped at the end.

The server is ``RESUMABLE_TEST_PG`` (an admin URL, default ``postgresql://root@127.0.0.1:5432/postgres``).
Without one these tests are skipped, all for the same one-line reason; with ``CI=true`` a missing
server (or a missing psycopg) is a failure, never a skip.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pgtests import ADMIN_URL, create_database, drop_database, server_problem
from storecase import STORES, StoreCase

_PROBLEM: list[str | None] = [server_problem()]
_CI = os.environ.get("CI", "").lower() == "true"
if _PROBLEM[0] is not None and not _CI:
    # Nothing here can run: say so once (below), rather than once per test.
    collect_ignore_glob = ["test_*.py"]


def _problem() -> str | None:
    return _PROBLEM[0]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _PROBLEM[0] is not None and not _CI:
        terminalreporter.write_line(f"tests/postgres skipped: no PostgreSQL server ({_PROBLEM[0]}); set"
                                    " RESUMABLE_TEST_PG to an admin URL to run them")


@pytest.fixture(autouse=True)
def _full_size_only_when_asked(request: pytest.FixtureRequest) -> None:
    """The full-size variants (16 x 1,000 writers, 2,000 steps under 100 kills) are marked slow and
    run when asked for (`-m slow`, or RESUMABLE_SLOW=1); CI runs their quicker variants."""
    if request.node.get_closest_marker("slow") is None:
        return
    if "slow" in (request.config.getoption("markexpr") or "") or os.environ.get("RESUMABLE_SLOW"):
        return
    pytest.skip("full-size variant: run with -m slow (or RESUMABLE_SLOW=1)")


@pytest.fixture(autouse=True)
def _needs_server(request: pytest.FixtureRequest) -> None:
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("store") == "files":
        return  # the runs-directory variant of a test run against both stores
    problem = _problem()
    if problem is None:
        return
    if _CI:
        pytest.fail(f"CI=true and no PostgreSQL server for the PostgreSQL store's tests: {problem}", pytrace=False)
    pytest.skip(f"no PostgreSQL server ({problem}); set RESUMABLE_TEST_PG to an admin URL to run these")


@pytest.fixture(scope="module")
def pg_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh database for this test module (dropped afterwards), as a URL for ``--store``."""
    if _problem() is not None:
        yield ""  # _needs_server skips or fails each test before it uses this
        return
    name = request.module.__name__.rsplit(".", 1)[-1]
    url = create_database(name)
    try:
        yield url
    finally:
        drop_database(url)


@pytest.fixture
def pg_env(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """An environment for subprocesses: the test database as the store, logs under a temp dir."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    env["RESUMABLE_STORE"] = pg_url
    env["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("state"))
    return env


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreCase:
    """The store under test: a runs directory, then a PostgreSQL database (emptied first)."""
    url = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    return StoreCase(request.param, tmp_path, url)


__all__ = ["ADMIN_URL"]
