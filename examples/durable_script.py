"""Durable Python functions: a script whose steps survive a crash.

    python examples/durable_script.py [RUNS_DIR]

It "embeds" 200 documents on 8 threads, each step's result recorded as it ends. Interrupt it
(Ctrl-C, kill -9, a reboot) and run it again: recorded documents are answered from the run and only
the rest are computed. Run it once more after it finished: nothing runs and nothing is written.
`resumable status durable-demo` shows where it stands; `resumable rerun durable-demo embed:doc-7`
makes one document run again.
"""

from __future__ import annotations

import hashlib
import sys
import time

import resumable

RUNS_DIR = sys.argv[1] if len(sys.argv) > 1 else None
run = resumable.open_run("durable-demo", runs_dir=RUNS_DIR, task="embed every document")


@run.step(key=lambda doc_id: doc_id, retries=2, backoff=0.1)
def embed(doc_id: str) -> list[float]:
    """A stand-in for a slow, flaky API call."""
    time.sleep(0.01)
    digest = hashlib.sha256(doc_id.encode()).digest()
    return [round(b / 255, 3) for b in digest[:4]]


@run.step
def summarize(vectors: list[list[float]]) -> dict[str, float]:
    flat = [x for v in vectors for x in v]
    return {"count": len(vectors), "mean": round(sum(flat) / len(flat), 6)}


def main() -> int:
    ids = [f"doc-{i}" for i in range(200)]
    vectors = run.map(embed, ids, jobs=8)
    failed = [v for v in vectors if isinstance(v, Exception)]
    if not failed:
        print(summarize(vectors))
    status = run.finish()
    print(f"{len(ids) - len(failed)} embedded, {len(failed)} failed: run {status}")
    return 0 if status == "done" else 1


if __name__ == "__main__":
    sys.exit(main())
