"""A script that maps a step over N items (used by the kill and process-pool tests).

    python mapscript.py RUNS_DIR RUN N JOBS EXECUTOR EXEC_LOG [finish]

EXECUTOR: thread, process, or an executor object made here: ProcessPoolExecutor (JOBS workers,
spawn) or loky. Every execution of the step appends "<pid> <item> <time>" to EXEC_LOG before it
returns (O_APPEND: a whole line or nothing), so a test can tell which process ran which item, when.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from items import compute, log_execution  # type: ignore[import-not-found]  # the script's own directory

import resumable

RUNS, RUN_ID, N, JOBS, EXECUTOR, EXEC_LOG = sys.argv[1:7]
run = resumable.open_run(RUN_ID, runs_dir=RUNS, task="map over items")


@run.step(key=lambda i: f"item-{i}")
def work(i: int) -> dict[str, object]:
    time.sleep(float(os.environ.get("ITEM_SLEEP", "0.002")))
    log_execution(EXEC_LOG, i)
    result: dict[str, object] = compute(i)
    return result


def executor() -> Any:
    if EXECUTOR == "ProcessPoolExecutor":
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        return ProcessPoolExecutor(int(JOBS), mp_context=multiprocessing.get_context("spawn"))
    if EXECUTOR == "loky":
        import loky  # type: ignore[import-untyped,unused-ignore]

        return loky.get_reusable_executor(max_workers=int(JOBS))
    return EXECUTOR


if __name__ == "__main__":
    results = run.map(work, range(int(N)), jobs=int(JOBS), executor=executor(), progress=False)
    assert results == [compute(i) for i in range(int(N))], "a result differs from a fresh computation"
    if sys.argv[7:] == ["finish"]:
        print(run.finish())
