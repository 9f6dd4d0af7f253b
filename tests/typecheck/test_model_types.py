"""mypy checks the run model: a misspelt event key or a state that does not exist is a type error.

The positive cases live in ``model_usage.py`` (also in mypy's ``files``, so ``scripts/check`` checks
them); the negative ones below are each a line that must be refused, with mypy's reason.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mypy import api

HERE = Path(__file__).parent
ROOT = HERE.parent.parent

# Each line is its own mistake; mypy must report every one (by line) with the error code given.
WRONG = '''\
from resumable.core.types import Event, PhaseEvent, RunDocument, UnitEvent

a: UnitEvent = {"t": "unit", "unit": "build", "stat": "done"}
b: UnitEvent = {"t": "unit", "unit": "build", "state": "finished"}
c: PhaseEvent = {"t": "phase", "phase": "test", "state": "in_progress"}
d: Event = {"t": "unti", "unit": "build", "state": "done"}


def f(event: Event, doc: RunDocument) -> object:
    if event["t"] == "unit":
        return event["reason"]
    doc["status"] = "finished"
    return doc["unitz"]


def g() -> object:
    from resumable.store import open_path

    return open_path("x.json").read()["stauts"]
'''
EXPECTED = {
    3: "typeddict-unknown-key",  # "stat" for "state"
    4: "typeddict-item",  # a unit state that does not exist
    5: "typeddict-item",  # a unit's state where a phase's belongs
    6: "typeddict-item",  # no event kind "unti"
    11: "typeddict-item",  # a unit event has no "reason" (an invalidation has)
    12: "typeddict-item",  # no run state "finished"
    13: "typeddict-item",  # no "unitz" in a document
    19: "typeddict-item",  # what a store reads is a RunDocument: no "stauts" in it
}


def _mypy(tmp_path: Path, *files: Path) -> tuple[str, int]:
    args = ["--strict", "--no-error-summary", "--show-error-codes", "--cache-dir", str(tmp_path / "cache"),
            "--python-version", "3.11", *map(str, files)]
    cwd = os.getcwd()
    os.chdir(ROOT)  # mypy finds resumable through src/ from the project root (mypy_path)
    try:
        out, err, code = api.run(args)
    finally:
        os.chdir(cwd)
    return out + err, code


@pytest.mark.slow
def test_mistakes_in_the_model_are_type_errors_and_correct_code_is_not(tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.py"
    wrong.write_text(WRONG)
    out, code = _mypy(tmp_path, wrong, HERE / "model_usage.py")
    assert code == 1, out
    found: dict[int, list[str]] = {}
    for line in out.splitlines():
        path, _, rest = line.partition(":")
        if not rest or "error:" not in rest:
            continue
        assert Path(path).name == "wrong.py", f"the correct code was refused: {line}"
        found.setdefault(int(rest.split(":", 1)[0]), []).append(rest)
    for lineno, code_name in EXPECTED.items():
        assert any(f"[{code_name}]" in e for e in found.get(lineno, [])), (lineno, code_name, out)
    assert set(found) == set(EXPECTED), out
