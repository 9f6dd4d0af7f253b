"""A 100,000-unit run: every answer stays under 20 KB (``Session.call`` checks each), and paging
through its units, or its resume set, returns each unit exactly once."""

from __future__ import annotations

import time

from mcphelpers import Session, Store, run_async, served

import resumable
from resumable.core import verbs

N = 100_000


def big_run(store: Store) -> None:
    """``big``: every even unit done, every 200th one failed with a long note, the rest pending (each
    pending unit after a failed one needs it: dep-blocked)."""
    where = store.option[1]
    files = store.kind == "files"
    run = resumable.open_run("big", runs_dir=where if files else None, store_url=None if files else where)
    try:
        run.init("a run of a hundred thousand units", units=[f"u{i:06d}" for i in range(N)])
        events = [verbs.unit(f"u{i:06d}", "done") for i in range(0, N, 2)]
        events += [verbs.unit(f"u{i:06d}", "failed", note="boom " * 200) for i in range(1, N, 200)]
        events += [verbs.unit(f"u{i:06d}", "pending", deps=[f"u{i - 2:06d}"]) for i in range(3, N, 200)]
        run.handle.commit(events)
        run.flush()
    finally:
        run.close()


async def page_all(s: Session, tool: str, key: str, **args: object) -> list[str]:
    got: list[str] = []
    cursor = None
    while True:
        answer = await s.ok(tool, **args, **({"cursor": cursor} if cursor else {}))
        got += [u[key] for u in answer["units"]]
        cursor = answer.get("next_cursor")
        if cursor is None:
            return got


def test_a_hundred_thousand_units_in_bounded_answers(store: Store) -> None:
    big_run(store)

    async def go() -> None:
        async with served(store) as s:
            runs = await s.ok("list_runs")
            assert runs["runs"][0]["total"] == N
            summary = await s.ok("run_summary", run="big")
            assert summary["total"] == N and summary["by_state"]["failed"] == N // 200
            assert len(summary["failed"]) == 5 and "failed_more" in summary
            assert all(len(f["note"]) <= 200 for f in summary["failed"])

            started = time.monotonic()
            ids = await page_all(s, "list_units", "id", run="big", limit=1000)
            assert len(ids) == N and len(set(ids)) == N, "each unit exactly once"
            assert ids == [f"u{i:06d}" for i in range(N)], "in the run's order"
            paging = time.monotonic() - started

            failed = await page_all(s, "list_units", "id", run="big", state="failed", detail=True)
            assert failed == [f"u{i:06d}" for i in range(1, N, 200)]
            done = await s.ok("list_units", run="big", state="done", limit=5)
            assert done["matching"] == N // 2 and len(done["units"]) == 5

            rs = await s.ok("resume_set", run="big")
            assert rs["skip"] == N // 2 and rs["eligible"] + rs["dep_blocked"] == N // 2
            listed = await page_all(s, "resume_set", "unit", run="big", limit=1000)
            assert len(listed) == N // 2 and len(set(listed)) == N // 2

            history = await s.ok("history", run="big", limit=1000)
            assert history["events"][0]["t"] == "init" and "next_since" in history
            log = await s.ok("tail_log", run="big", step="u000001")
            assert "note" in log  # no log was recorded for it: said, not an error
            doc = await s.client.read_resource("resumable://runs/big")
            assert len(doc.contents[0].text.encode()) < 20_000
            print(f"\n{store.kind}: paged {N} units in {s.calls} calls, {paging:.1f}s")

    run_async(go)
