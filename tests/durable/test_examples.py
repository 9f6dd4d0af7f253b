"""The examples work: the script as a real process (twice, and after a kill), the notebook's code
cells executed in order without Jupyter (twice: the second pass is answered from the run)."""

from __future__ import annotations

import contextlib
import io
import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from .helpers import HERE, python, read_doc, step_units

EXAMPLES = HERE.parent.parent / "examples"


def test_script_runs_resumes_and_reruns_nothing(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    script = str(EXAMPLES / "durable_script.py")
    first = python([script, str(runs)], tmp_path)
    time.sleep(0.45)  # while it works (or starts): either way the next run finishes it
    first.send_signal(signal.SIGKILL)
    first.communicate()
    second = python([script, str(runs)], tmp_path)
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert out.splitlines()[-1] == "200 embedded, 0 failed: run done"
    size = (runs / "durable-demo.journal.jsonl").stat().st_size
    third = python([script, str(runs)], tmp_path)
    out, err = third.communicate(timeout=120)
    assert third.returncode == 0, err
    assert (runs / "durable-demo.journal.jsonl").stat().st_size == size  # nothing ran, nothing written
    units = step_units(read_doc(runs, "durable-demo"))
    assert len(units) == 201 and all(u["status"] == "done" for u in units.values())


def notebook_cells() -> list[str]:
    nb = json.loads((EXAMPLES / "durable_notebook.ipynb").read_text())
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def run_notebook(namespace: dict[str, Any]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for i, source in enumerate(notebook_cells()):
            exec(compile(source, f"<cell {i}>", "exec"), namespace)
    return out.getvalue()


def test_notebook_cells_run_and_run_again(runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = run_notebook({"__name__": "__notebook__"})
    assert "50 scored now;" in first and "0 scored now; same results: True" in first
    assert first.splitlines()[-1] == "done"
    from resumable.durable import engine as engine_module

    engine_module._close_all()
    second = run_notebook({"__name__": "__notebook__"})
    assert "0 scored now;" in second.splitlines()[0]
    assert second.splitlines()[-1] == "done"
    assert len(step_units(read_doc(runs, "notebook-demo"))) == 50
