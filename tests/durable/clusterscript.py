"""A script that maps a step over N items on a Dask cluster it connects to (the caller-kill test).

    python clusterscript.py SCHEDULER RUNS_DIR RUN N SUBMIT_LOG EXEC_LOG [finish]

Submissions are counted by ``counting.Counting`` into SUBMIT_LOG (with ``EXECUTOR=client``, the map
is given the cluster's own executor, and the test counts what reaches the scheduler instead); every
execution of the step appends "<pid> <item> <time>" to EXEC_LOG (items.log_execution).
"""

from __future__ import annotations

import os
import sys
import time

from counting import Counting  # type: ignore[import-not-found]  # the script's own directory
from items import compute, log_execution  # type: ignore[import-not-found]

import resumable

SCHEDULER, RUNS, RUN_ID, N, SUBMIT_LOG, EXEC_LOG = sys.argv[1:7]
run = resumable.open_run(RUN_ID, runs_dir=RUNS, task="map on a cluster")


@run.step
def work(i: int) -> dict[str, object]:
    time.sleep(float(os.environ.get("ITEM_SLEEP", "0.01")))
    log_execution(EXEC_LOG, i)
    result: dict[str, object] = compute(i)
    return result


if __name__ == "__main__":
    import cloudpickle  # type: ignore[import-untyped,unused-ignore]
    import items  # type: ignore[import-not-found]
    from distributed import Client

    cloudpickle.register_pickle_by_value(items)  # the cluster's workers do not have this directory
    with Client(SCHEDULER, timeout=30) as client:
        executor = client.get_executor()
        if os.environ.get("EXECUTOR") != "client":
            executor = Counting(executor, SUBMIT_LOG)
        results = run.map(work, range(int(N)), executor=executor, progress=False)
    assert results == [compute(i) for i in range(int(N))], "a result differs from a fresh computation"
    if sys.argv[7:] == ["finish"]:
        print(run.finish())
