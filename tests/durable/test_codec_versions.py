"""A step result written by a newer resumable is refused, never re-run over."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import resumable
from resumable.durable.codec import RESULT_FORMAT

SCRIPT = textwrap.dedent("""
    import sys, resumable
    from resumable.errors import NewerFormatError

    def double(x):
        return 2 * x

    step = resumable.open_run("r", runs_dir=sys.argv[1], task="t").step(double)
    try:
        print(step(2))
    except NewerFormatError as exc:
        print("refused:", exc)
""")


def test_a_newer_result_format_is_refused_not_overwritten(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    first = subprocess.run([sys.executable, "-c", SCRIPT, str(runs)], capture_output=True, text=True, check=True)
    assert first.stdout == "4\n"
    run = resumable.open_run("r", runs_dir=runs)
    uid = next(u for u in run.doc["units"] if u.startswith("double:"))
    result = {**run.doc["units"][uid]["result"], "v": RESULT_FORMAT + 1, "codec": "future"}
    run.handle.commit([{"t": "unit", "unit": uid, "state": "done", "fields": {"result": result}}])
    run.close()
    again = subprocess.run([sys.executable, "-c", SCRIPT, str(runs)], capture_output=True, text=True, check=True)
    assert again.stdout.startswith("refused:") and "newer resumable" in again.stdout
    assert resumable.open_run("r", runs_dir=runs).doc["units"][uid]["result"]["v"] == RESULT_FORMAT + 1
