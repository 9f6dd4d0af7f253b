"""Concurrent writers on one PostgreSQL-stored run lose nothing and break no rule: 16 writer
processes x N transitions through the API (N = 1,000 in the slow tier), and processes racing to
demote done units and to finalize while others still work."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest
from pgtests import base_env

import resumable

WRITER = textwrap.dedent(
    """
    import sys, resumable
    name, count, url = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    run = resumable.open_run("r", store_url=url)
    for i in range(count):
        run.unit(f"{name}-{i}", "in_progress" if i % 3 else "done", note=str(i))
        if i % 10 == 5:
            run.phase(name, "running")
    run.close()
    """
)


def writers(url: str, n: int, count: int) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, f"w{k}", str(count), url], env=base_env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for k in range(n)]
    errors = [(p.wait(600), p.communicate()[1]) for p in procs]
    assert all(code == 0 for code, _ in errors), errors


def check(url: str, n: int, count: int) -> None:
    run = resumable.open_run("r", store_url=url)
    history = run.history()
    per_writer = count + len([i for i in range(count) if i % 10 == 5])
    assert [e["seq"] for e in history] == list(range(1, 2 + n * per_writer))  # gap-free, nothing extra
    doc = run.doc
    seen: dict[str, list[str]] = {}
    for e in history:
        if e["t"] == "unit":
            seen.setdefault(e["unit"].split("-")[0], []).append(e["unit"])
    for k in range(n):
        assert seen[f"w{k}"] == [f"w{k}-{i}" for i in range(count)]  # each exactly once, in its writer's order
        for i in range(count):
            assert doc["units"][f"w{k}-{i}"]["status"] == ("in_progress" if i % 3 else "done")
        assert doc["phases"][f"w{k}"]["status"] == "running"
    run.close()


def fresh(url: str) -> None:
    from storecase import clean

    run = resumable.open_run("r", store_url=url)
    if run.exists():
        clean(url)
    run.init("t")  # the first init on the module's database creates the schema
    run.close()


def test_sixteen_writers_lose_nothing(pg_url: str) -> None:
    fresh(pg_url)
    writers(pg_url, 16, 60)
    check(pg_url, 16, 60)


@pytest.mark.slow
def test_sixteen_writers_a_thousand_transitions_each(pg_url: str) -> None:
    fresh(pg_url)
    writers(pg_url, 16, 1000)
    check(pg_url, 16, 1000)


RACER = textwrap.dedent(
    """
    import sys, resumable
    from resumable.errors import RefusedError
    k, n, url = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    run = resumable.open_run("race", store_url=url)
    refused = 0
    for rnd in range(5):
        for other in range(n):
            try:
                run.unit(f"u{other}", "pending")  # refused once that unit is done
            except RefusedError:
                refused += 1
        if rnd == 2:
            run.unit(f"u{k}", "done")
        try:
            run.finalize("done")
        except RefusedError:
            refused += 1
    print(refused)
    """
)


def test_checkpoint_rules_hold_under_racing_writers(pg_url: str) -> None:
    """Every event in the history was accepted against the document every earlier event made:
    replaying it through `apply` (which refuses a demotion of done, or finalize done while a unit
    is not done) accepts all of it, and the run ends done with every unit done."""
    from resumable.core.events import apply

    n = 8
    run = resumable.open_run("race", store_url=pg_url)
    run.init("race", units=[f"u{i}" for i in range(n)])
    procs = [subprocess.Popen([sys.executable, "-c", RACER, str(k), str(n), pg_url], env=base_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in range(n)]
    outs = [(p.wait(300), *p.communicate()) for p in procs]
    assert all(code == 0 for code, _, _ in outs), outs
    assert sum(int(out) for _, out, _ in outs) > 0  # the race did produce refusals
    doc: dict[str, Any] | None = None
    done: set[str] = set()
    for event in run.history():
        event = {k: v for k, v in event.items() if k != "seq"}
        if event["t"] == "unit" and event["unit"] in done:
            assert event["state"] == "done", event
        if event["t"] == "finalize" and event["status"] == "done":
            assert len(done) == n
        doc, _ = apply(doc, event)
        if event["t"] == "unit" and event["state"] == "done":
            done.add(event["unit"])
    assert doc == run.doc and doc["status"] == "done"
    run.close()
