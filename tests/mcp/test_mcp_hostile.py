"""Hostile arguments are refused as one-line tool errors, without a traceback (in the answer or on the
server's stderr), and nothing is read or written outside the store the server was started on."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mcphelpers import Store, failed_job, run_async, served

RUN_IDS = ["../x", "../../etc/passwd", "/etc/passwd", "nightly.json", "a/b", "..", ".hidden", "x" * 5000, "",
           "a\x00b", "\x1b[31mred", "~root"]
LIMITS = [0, -1, 10**12, 2**63, 1001]


def _refused(text: str) -> None:
    assert "Traceback" not in text and "File \"" not in text, text
    assert "\n" not in text.strip() or "validation error" in text, text  # pydantic lists its fields on lines


def test_hostile_arguments_are_refused_without_a_traceback(store: Store, tmp_path: Path) -> None:
    failed_job(store)
    errlog = tmp_path / "server.stderr"
    secret = tmp_path / "secret.log"
    secret.write_text("TOP SECRET\n")
    before = store.cli("get", "nightly").stdout

    async def go() -> None:
        async with served(store, "--allow-writes", errlog=errlog) as s:
            calls: list[tuple[str, dict[str, Any]]] = []
            for rid in RUN_IDS:
                calls += [("run_summary", {"run": rid}), ("list_units", {"run": rid}), ("history", {"run": rid}),
                          ("tail_log", {"run": rid, "step": "build"}), ("resume_set", {"run": rid}),
                          ("unit", {"run": rid, "unit": "a", "state": "done"}), ("init", {"task": "t", "run": rid})]
            for limit in LIMITS:
                calls += [("list_units", {"run": "nightly", "limit": limit}), ("list_runs", {"limit": limit}),
                          ("history", {"run": "nightly", "limit": limit}), ("explain", {"limit": limit}),
                          ("resume_set", {"run": "nightly", "limit": limit})]
            calls += [
                ("history", {"run": "nightly", "since": -1}),
                ("list_units", {"run": "nightly", "limit": "many"}),
                ("list_units", {"run": "nightly", "state": "exploded"}),
                ("list_units", {"run": "nightly", "state": "../done"}),
                ("list_units", {"run": "nightly", "cursor": "not-a-cursor"}),
                ("list_units", {"run": "nightly", "cursor": "eyJxIjoiYWJjIn0"}),  # {"q":"abc"}: another query's
                ("list_units", {"run": "nightly", "cursor": "A" * 100_000}),
                ("tail_log", {"run": "nightly", "step": "../../secret"}),
                ("tail_log", {"run": "nightly", "step": "build", "attempt": -5}),
                ("tail_log", {"run": "nightly", "step": "nosuch"}),
                ("unit", {"run": "nightly", "unit": "a b", "state": "done"}),
                ("unit", {"run": "nightly", "unit": "build", "state": "exploded"}),
                ("watch_run", {"run": "nightly", "timeout": 10**9}),
                ("item", {"run": "nightly", "items": [{"n": i} for i in range(10_001)]}),
                ("run_job", {"jobs": -3}),
                ("finalize", {"run": "nightly", "status": "maybe"}),
            ]
            for tool, args in calls:
                got = await s.call(tool, **args)
                assert got.error, (tool, args, got)
                _refused(got.text)
            # A unit's recorded log path is data: a document edited to point elsewhere is not followed.
            assert (await s.ok("run_summary", run="nightly"))["id"] == "nightly"  # still serving

    run_async(go)
    assert "Traceback" not in errlog.read_text()
    assert store.cli("get", "nightly").stdout == before
    assert not (tmp_path / "x").exists()


def test_a_log_path_pointing_outside_the_store_is_not_read(tmp_path: Path) -> None:
    """A hand-edited document whose unit names a log outside the run's log directory (or a link planted
    in the log directory) gets the path named, never its content."""
    project = tmp_path / "project"
    project.mkdir()
    runs = project / ".resumable" / "runs"
    store = Store("files", project, ["--dir", str(runs)], {**os.environ, "HOME": str(tmp_path)})
    failed_job(store)
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET\n")
    logs = runs / "nightly" / "logs"
    (logs / "build.1.log").unlink()
    (logs / "build.1.log").symlink_to(secret)
    fifo = logs / "fetch.1.log"
    fifo.unlink()
    os.mkfifo(fifo)
    snapshot = runs / "nightly.json"
    doc = json.loads(snapshot.read_text())
    doc["units"]["publish"]["log"] = str(secret)
    doc["units"]["publish"]["status"] = "failed"
    snapshot.write_text(json.dumps(doc))  # an external edit: adopted as the new base

    async def go() -> None:
        async with served(store) as s:
            for step in ("build", "fetch", "publish"):
                got = await s.call("tail_log", run="nightly", step=step)
                assert "TOP SECRET" not in got.text, (step, got)
                _refused(got.text)
            summary = await s.call("run_summary", run="nightly")
            assert not summary.error and "TOP SECRET" not in summary.text

    run_async(go)
