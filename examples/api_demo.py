"""Drive a run through the Python API: init, units, phases, findings, validation, finalize.

    python examples/api_demo.py [RUNS_DIR]

Run it twice: the second time it finds the finished run, archives it, and starts afresh; kill it
half way (Ctrl-C) and run it again: it resumes, skipping the units already done.
"""

from __future__ import annotations

import itertools
import sys
import time

import resumable

UNITS = ["extract", "transform", "load", "verify"]


def main(runs_dir: str | None) -> int:
    run = resumable.open_run("api-demo", runs_dir=runs_dir)
    if not run.exists() or run.doc.get("status") in ("done", "aborted"):
        run.init("copy the users table", units=UNITS, required_phases=["build"], require_validation=True)
        # Each unit needs the one before it; resume reports a blocked unit's chain root.
        for before, unit in itertools.pairwise(UNITS):
            run.unit(unit, "pending", deps=[before])
    run.phase("build", "running")
    plan = run.resume_set()
    print(f"skip {plan['skip']}, eligible {plan['eligible']}, blocked {plan['dep_blocked']}")
    for unit in UNITS:
        if run.doc["units"][unit]["status"] == "done":
            continue
        run.unit(unit, "in_progress")
        time.sleep(0.1)  # the real work would go here
        run.unit(unit, "done", note=f"{unit} finished")
    # A finding blocks `finalize done` until it is resolved.
    (finding,) = run.item({"phase": "build", "issue": "3 rows had no email"})
    run.resolve([finding])
    run.phase("build", "done")
    run.validation("green", note="row counts match")
    run.finalize("done", result="4 units done")
    print(f"{run.doc['id']}: {run.doc['status']} ({run.path})")
    run.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else None))
