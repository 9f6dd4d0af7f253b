"""The data script of the issue, end to end: numpy arrays and a dataclass configuration in, arrays and
dataclasses out, a method step, no ``key=`` or serializer option; SIGKILLed while it runs, run again
to the end, then run a third time with zero executions and the same results, element by element."""

from __future__ import annotations

import pickle
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np

from .helpers import HERE, python, read_doc, step_units

N = 40


def executions(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def wait_for_executions(log: Path, count: int, proc: Any, timeout: float = 120) -> None:
    """Until ``count`` executions are logged (the script's own event), or the script ended."""
    deadline = time.monotonic() + timeout
    while len(executions(log)) < count:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the script made no progress"
        time.sleep(0.01)


def load(path: Path) -> dict[str, Any]:
    with path.open("rb") as f:
        loaded: dict[str, Any] = pickle.load(f)
        return loaded


def expected(i: int) -> np.ndarray:
    x = np.random.default_rng(i).normal(size=(8, 3))
    return np.clip((x - x.mean(axis=0)) * 2.0, -3.0, 3.0)


def same(a: Any, b: Any) -> bool:
    """Equal element by element, with the same types, dtypes and shapes."""
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def test_a_data_script_survives_kill_9_and_reruns_with_zero_executions(tmp_path: Path) -> None:
    runs, log = tmp_path / "runs", tmp_path / "exec.log"
    script = [str(HERE / "datascript.py"), str(runs), str(log)]

    first = python([*script, str(tmp_path / "first.pkl"), str(N)], tmp_path, {"ITEM_SLEEP": "0.05"})
    wait_for_executions(log, N // 2, first)
    first.send_signal(signal.SIGKILL)
    first.communicate()
    assert first.returncode == -signal.SIGKILL
    killed_at = len(executions(log))
    recorded = step_units(read_doc(runs, "data"))
    assert 0 < sum(u["status"] == "done" for u in recorded.values()) < 3 * N

    second = python([*script, str(tmp_path / "second.pkl"), str(N)], tmp_path, {"ITEM_SLEEP": "0"})
    out, err = second.communicate(timeout=300)
    assert (second.returncode, out.strip()) == (0, "done"), err
    ran_again = len(executions(log)) - killed_at
    assert ran_again < 3 * N  # what was recorded before the kill did not run again

    before = len(executions(log))
    third = python([*script, str(tmp_path / "third.pkl"), str(N)], tmp_path, {"ITEM_SLEEP": "0"})
    out, err = third.communicate(timeout=300)
    assert (third.returncode, out.strip()) == (0, "done"), err
    assert len(executions(log)) == before, "a finished script ran a step again"

    second_results, third_results = load(tmp_path / "second.pkl"), load(tmp_path / "third.pkl")
    assert same(second_results, third_results)
    assert second_results["types"] == ["Summary/Config"]  # dataclasses came back as dataclasses
    for i, x in enumerate(third_results["normalised"]):
        assert same(x, expected(i))
    for x, p in zip(third_results["normalised"], third_results["predictions"], strict=True):
        assert same(p, x @ np.linspace(-1.0, 1.0, 3) + 0.25)

    units = step_units(read_doc(runs, "data"))
    assert len(units) == 3 * N and all(u["status"] == "done" for u in units.values())
    codecs = {uid.partition(":")[0]: u["result"]["codec"] for uid, u in units.items()}
    assert codecs == {"normalise": "npy", "summarise": "tree", "Model.predict": "npy"}
