"""Real processes racing for attempt numbers: no list-then-write window, no lost checkpoint."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from ledgerhelpers import PAYLOADS, RESUMABLE, RUN, run_dir

from resumable import ledger

WRITERS = 20


def test_concurrent_writes_without_attempt_get_distinct_attempts(base: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    go.write_text("")
    # Each process waits for the same starting gun (a FIFO-free barrier: poll for a file), so the
    # writes really overlap instead of running one after the other as the processes start.
    script = (
        "import os, sys, time\n"
        "from resumable.cli.main import main\n"
        "import resumable.ledger.api, resumable.cli.checkpoint, click\n"  # imports done before the gun
        f"while os.path.exists({str(go)!r}): time.sleep(0.001)\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    args = ["checkpoint", "write", "--base-dir", str(base), "--ticket-id", "OMN-2143", "--run-id", "a1b2c3d4",
            "--phase", "implement", "--payload", json.dumps(PAYLOADS["implement"]), "--strict"]
    python = str(Path(RESUMABLE).parent / "python")
    procs = [subprocess.Popen([python, "-c", script, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(WRITERS)]
    import time

    time.sleep(1.5)  # let every interpreter start and reach the barrier
    go.unlink()
    results = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0] * WRITERS, results
    outputs = [json.loads(out) for out, _ in results]
    assert all(o["success"] for o in outputs) and all(err == "" for _, err in results)
    attempts = sorted(int(o["checkpoint_path"].rsplit("_a", 1)[1].split(".")[0]) for o in outputs)
    assert attempts == list(range(1, WRITERS + 1))
    names = sorted(p.name for p in run_dir(base).iterdir())
    assert names == sorted(f"phase_1_implement_a{n}.yaml" for n in range(1, WRITERS + 1))  # no temp left
    stored = ledger.list_checkpoints("OMN-2143", RUN, base_dir=base)
    assert [c.attempt_number for c in stored.checkpoints] == list(range(1, WRITERS + 1)) and not stored.warnings
