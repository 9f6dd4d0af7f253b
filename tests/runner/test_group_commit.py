"""Group commit keeps the contract: a step's in_progress record is in the journal before its process
starts, and a step's outcome before a step that needs it starts (checked by the steps themselves,
reading the journal, with parallel slots: launcher and flusher threads)."""

from __future__ import annotations

from pathlib import Path

from runnerhelpers import run_cli, status_of, write


def _has(run: str, unit: str, state: str) -> str:
    return f"grep -qF '\"unit\":\"{unit}\",\"state\":\"{state}\"' runs/{run}.journal.jsonl"


def test_records_are_in_the_journal_before_they_are_acted_on(work: Path) -> None:
    steps = []
    for i in range(12):
        # Each step finds its own start recorded; each second step needs the one before it and
        # finds that one's outcome recorded.
        check = _has("g", f"s{i}", "in_progress")
        if i % 2:
            check += " && " + _has("g", f"s{i - 1}", "done")
        needs = f'\nneeds = ["s{i - 1}"]' if i % 2 else ""
        steps.append(f'[steps.s{i}]\nrun = "{check.replace(chr(34), chr(92) + chr(34))}"{needs}\n')
    write(work / "g.toml", "".join(steps))
    r = run_cli(["g.toml", "-j", "3"])
    assert r.exit_code == 0, r.output
    assert set(status_of(work, "g").values()) == {"done"}
    assert r.output.count("done   s") == 12
