"""The fuzz suite's quick tier (R11): hostile arguments and corrupted run files over every verb,
in process. The full tier (``python -m benchmarks.proof --tier full``) makes thousands more calls
and a pass of real processes; see ``tests/reliability/fuzz.py`` for what each call must satisfy."""

from __future__ import annotations

import os
from pathlib import Path

from reliability import fuzz

EXAMPLES = int(os.environ.get("RESUMABLE_FUZZ_EXAMPLES", "500"))


def test_every_verb_under_hostile_input(tmp_path: Path) -> None:
    tally = fuzz.fuzz(tmp_path, examples=EXAMPLES)
    assert not tally.failures, f"{len(tally.failures)} bad calls of {tally.calls}:\n" + "\n".join(tally.failures[:20])
    assert tally.calls >= EXAMPLES  # every example made at least one call
    assert set(tally.codes) > {0, 1}  # successes and refusals both exercised
