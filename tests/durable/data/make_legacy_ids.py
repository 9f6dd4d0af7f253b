"""How ``legacy-ids/`` was made: this script, run by resumable 419efbc (the last version whose unit ids
were all ``<step>:<20 hex of the arguments' hash>``), with a runs directory as its argument; the
journal and snapshot it wrote were copied here. Kept to document the fixture, not run by the tests.

    git archive 419efbc src | tar -x -C OLD && PYTHONPATH=OLD/src python make_legacy_ids.py RUNS
"""

import sys
from typing import Any

import resumable

run = resumable.open_run("legacy", runs_dir=sys.argv[1], task="a run recorded with hashed unit ids")


@run.step
def train(epoch: int) -> dict[str, Any]:
    if epoch == 3:
        raise ValueError("epoch 3 diverged")
    return {"epoch": epoch, "loss": 1.0 / (epoch + 1)}


@run.step
def embed(doc_id: str) -> list[Any]:
    return [len(doc_id), doc_id]


for e in range(5):
    try:
        train(e)
    except ValueError:
        pass
embed("doc-1")
embed("doc-2")
print(run.finish())
