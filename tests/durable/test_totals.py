"""True totals: ``run.map`` records how many units its step will have once it ends (one record per
map), so ``status``, ``status --watch`` and the report show 191/400 and an ETA for a map stopped
half way, and a later map of another size updates it."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

import resumable
from resumable.core import verbs
from resumable.core.events import apply
from resumable.core.stamps import stamp
from resumable.errors import InvalidInputError
from resumable.view.report import summary_numbers
from resumable.view.status import plain, render_status
from resumable.view.units import tally

from .helpers import SRC, journal, python, read_doc

SCRIPT = textwrap.dedent("""
    import os, signal, sys
    import resumable

    runs, n, stop_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    run = resumable.open_run("m", runs_dir=runs, task="map")

    @run.step
    def work(i: int) -> int:
        if i == stop_at:
            os.kill(os.getpid(), signal.SIGKILL)  # the machine died here
        return i * i

    run.map(work, range(n), jobs=1, progress=False)
    print(run.finish())
""")


def script(tmp_path: Path, n: int, stop_at: int = -1) -> subprocess.Popen[str]:
    path = tmp_path / "map.py"
    path.write_text(SCRIPT)
    return python([str(path), str(tmp_path / "runs"), str(n), str(stop_at)], tmp_path)


def status(tmp_path: Path) -> str:
    proc = subprocess.run([sys.executable, "-m", "resumable", "status", "m", "--dir", str(tmp_path / "runs")],
                          capture_output=True, text=True, env={"PYTHONPATH": str(SRC), "NO_COLOR": "1"}, check=False)
    return proc.stdout


def test_status_shows_the_true_total_of_an_interrupted_map(tmp_path: Path) -> None:
    killed = script(tmp_path, 400, stop_at=191)
    killed.communicate(timeout=120)
    assert killed.returncode == -signal.SIGKILL
    shown = status(tmp_path)
    assert "191/400 done (47%)" in shown and "pending 209" in shown
    assert "→ run the script again: " in shown and "209 item(s) of a map not run yet" in shown

    again = script(tmp_path, 400)
    out, err = again.communicate(timeout=120)
    assert (again.returncode, out.strip()) == (0, "done"), err
    assert "400/400 done (100%)" in status(tmp_path)
    maps = [r for r in journal(tmp_path / "runs", "m") if r["t"] == "map"]
    assert [(r["step"], r["units"], r["done"]) for r in maps] == [("work", 400, 0), ("work", 400, 191)]

    # A later map of another size updates the total.
    bigger = script(tmp_path, 450)
    assert bigger.communicate(timeout=120)[0].strip() == "done"
    assert "450/450 done" in status(tmp_path)
    assert read_doc(tmp_path / "runs", "m")["maps"]["work"]["units"] == 450


def test_one_record_per_map_whatever_its_size(runs: Path) -> None:
    run = resumable.open_run("r", runs_dir=runs, task="t")
    step = run.step(lambda i: i, name="ident")
    assert run.map(step, range(3000), progress=False) == list(range(3000))
    assert sum(r["t"] == "map" for r in journal(runs, "r")) == 1
    records = len(journal(runs, "r"))
    assert run.map(step, range(3000), progress=False) == list(range(3000))  # all recorded: writes nothing
    assert len(journal(runs, "r")) == records


def test_finish_leaves_a_stopped_map_needing_attention(runs: Path) -> None:
    run = resumable.open_run("r", runs_dir=runs, task="t")
    step = run.step(lambda i: i, name="ident")
    run.map(step, range(5), progress=False)
    run.handle.commit([verbs.map_started("ident", 8, 5)])  # as a map of 8 stopped after 5 would leave it
    assert run.finish() == "needs_attention"
    assert read_doc(runs, "r")["result"] == "5 step(s) done, 3 item(s) of a map not run yet"
    run.map(step, range(8), progress=False)
    assert run.finish() == "done"


def doc_with(units: dict[str, Any], maps: Any) -> dict[str, Any]:
    doc, _ = apply(None, {**verbs.init("r", "t"), "at": "2026-01-01T00:00:00Z"})
    doc["units"] = units
    doc["maps"] = maps
    return doc


def test_the_count_of_each_mapped_step_and_what_it_has_not_reached() -> None:
    units = {f"embed:{i}": {"status": "done"} for i in range(3)}
    units |= {"embed:x": {"status": "failed"}, "a:b:1": {"status": "done"}, "other": {"status": "pending"}}
    t = tally(doc_with(units, {"embed": {"units": 10}, "a:b": {"units": 4}, "gone": {"units": 2}}))
    assert t.per_step == {"embed": [4, 3], "a:b": [1, 1], "gone": [0, 0]}
    assert (t.unreached, t.total, t.done, t.counts["pending"]) == (6 + 3 + 2, 6 + 11, 4, 1 + 11)


@pytest.mark.parametrize("maps", [5, [1], {"embed": 3}, {"embed": {"units": "9"}}, {"embed": {"units": True}},
                                  {"embed": {}}, {1: {"units": 3}}])
def test_a_hand_edited_maps_entry_is_ignored_not_crashed_on(maps: Any) -> None:
    t = tally(doc_with({"embed:1": {"status": "done"}}, maps))
    assert (t.total, t.unreached) == (1, 0)


def test_the_live_view_shows_an_eta_and_the_rate_that_paces_the_map() -> None:
    now = float(int(time.time()))  # stamps are to the second
    units = {f"work:{i}": {"status": "done"} for i in range(191)}
    doc = doc_with(units, {"work": {"units": 400, "done": 91, "startedAt": stamp(now - 100), "rate": "60/min",
                                    "interval": 1.0}})
    doc["status"] = "running"
    lines = [plain(line) for line in render_status(doc, file="/x/m.json", now=now, show_eta=True)]
    text = "\n".join(lines)
    assert "191/400 done" in text
    # 100 done in 100 s since the map began: 209 left at one a second (its rate allows one a second too).
    assert "ETA ≈ 3m 29s" in text
    assert "rate     work: at most 60/min, starts wait for it (one every 1.0s)" in text
    cards = dict((label, value) for label, value, _ in summary_numbers(doc, {"bars": []}, now))  # type: ignore[typeddict-item]
    assert cards["units"] == "400" and cards["pending"] == "209"


@pytest.mark.parametrize("event", [
    {"t": "map", "units": 3},
    {"t": "map", "step": "", "units": 3},
    {"t": "map", "step": "s", "units": -1},
    {"t": "map", "step": "s", "units": True},
    {"t": "map", "step": "s", "units": 3, "done": "1"},
    {"t": "map", "step": "s", "units": 3, "rate": "1/s", "interval": 0},
    {"t": "map", "step": "s", "units": 3, "rate": 5, "interval": 1.0},
])
def test_a_malformed_map_event_is_refused(event: dict[str, Any]) -> None:
    doc, _ = apply(None, {**verbs.init("r", "t"), "at": "2026-01-01T00:00:00Z"})
    with pytest.raises(InvalidInputError):
        apply(doc, {**event, "at": "2026-01-01T00:00:01Z"})  # type: ignore[typeddict-item]
    assert "maps" not in doc


def test_a_run_written_before_totals_existed_still_loads_and_counts(runs: Path) -> None:
    run = resumable.open_run("old", runs_dir=runs)
    run.init("t", units=["a", "b"])
    run.unit("a", "done")
    doc = read_doc(runs, "old")
    assert "maps" not in doc and tally(doc).total == 2
