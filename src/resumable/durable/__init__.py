"""Durable Python functions: steps whose results survive a crash, in plain Python code.

    run = resumable.open_run("ingest", task="embed every document")   # opens or resumes

    @run.step                                   # or @run.step(key=lambda doc_id: doc_id, retries=3)
    def embed(doc_id: str) -> list[float]: ...

    embed("doc-1")                              # runs once, is recorded; later calls return the record
    results = run.map(embed, ids, jobs=8)       # a pool; failures recorded, the rest go on
    run.finish()                                # done, or needs_attention with what failed

Everything is built on the storage seam (``RunHandle.commit``, ``put_blob``/``get_blob``, ``load`` and
the runner lease; ``UnitDigest`` where the store has it), so it works on any store. The modules, by concept:

    keys       a call's identity: <step name>:<its one short argument, or a hash of all of them>
    content    keys of arguments JSON cannot hold: arrays, frames, dataclasses, paths, self
    codec      results as stored (JSON first, then formats, then pickle if allowed) and failures
    formats    .npy, Parquet and trees of those and dataclass fields, each read back exactly
    rate       rate limits: at most N starts per period, spread evenly
    records    the run as steps see it: the document in memory, group commit
    digest     a run not loaded yet, cut down to what answering a call needs (a map of recorded items)
    engine     claims, the session (runner lease, begin, leftovers), start records of long calls
    attempts   running the function: attempts, retries, backoff; StepFailed
    steps      @run.step: look up, claim, run, record
    mapping    one run.map call: its items, their places, the look-up of recorded ones, its total
    pool       run.map over threads, and its entry point (records the map's true total)
    executors  run.map on a concurrent.futures.Executor (a Dask cluster, loky, executor="process")
    dask_client  run.map on a Dask cluster's own executor: through its client, in batches
    shipping   what the workers are sent: the step, by reference or by value, checked before submitting
    worker     what a pool's worker process runs
    progress   run.map's progress bar (rich, on a terminal)
    opening    open_run(task=...) and the engine behind a Run
    interrupts Ctrl-C under ``with open_run(...)``: one line, exit 130
    finish     run.finish() and rerun (explicit invalidation)
"""

from __future__ import annotations

from resumable.durable.attempts import StepFailed
from resumable.durable.keys import UnkeyableArguments

__all__ = ["StepFailed", "UnkeyableArguments"]
