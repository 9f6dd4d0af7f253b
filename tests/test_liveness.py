"""The one verdict on a live run (view.liveness) and what each view says with it: who works on it,
or why nothing does and the command that helps, naming the store. Leases here are stand-ins with the
store's answers; tests/postgres/test_pg_liveness.py asks both real stores with real processes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from typing import Any

import pytest

from resumable.core import recipe
from resumable.errors import StoreError
from resumable.view import liveness
from resumable.view import status as view
from resumable.view.liveness import RUNNING, STOPPED, UNFINISHED, WAITING, judge
from status_fixtures import T0, base_doc, unit

NOW = T0 + 3600.0
HOST = socket.gethostname()


class Lease:
    """A RunnerLease as status sees it: who holds the run, who holds its steps."""

    def __init__(self, holder: dict[str, Any] | None = None, workers: list[dict[str, Any]] | None = None,
                 fail: bool = False) -> None:
        self._holder = holder
        self._workers = workers
        self.fail = fail

    def holder(self) -> dict[str, Any] | None:
        if self.fail:
            raise StoreError("the server went away")
        return self._holder

    def workers(self) -> list[dict[str, Any]] | None:
        if self.fail:
            raise StoreError("the server went away")
        return self._workers


def dead_pid() -> int:
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True).stdout)


def run_doc(argv: list[str] | None, **extra: Any) -> dict[str, Any]:
    doc = base_doc("r", units={"a": unit("in_progress"), "b": unit("pending")}, **extra)
    if argv is not None:
        doc["launch"] = {"kind": "resumable", "argv": argv, "cwd": "/w"}
    return doc


RUNNER = ["resumable", "run", "job.toml"]
SUBMIT = ["resumable", "submit", "job.toml"]
SCRIPT = ["/usr/bin/python3", "train.py"]


def text(doc: dict[str, Any], verdict: liveness.Verdict | None, store: tuple[str, str] | None = None) -> str:
    lines = view.render_status(doc, file="/runs/r.json", now=NOW, here="/w", verdict=verdict, store=store)
    return "\n".join(view.plain(line) for line in lines)


def test_launched_by() -> None:
    assert recipe.launched_by(run_doc(RUNNER)) == "runner"
    assert recipe.launched_by(run_doc(["/opt/bin/resumable", "run"])) == "runner"
    assert recipe.launched_by(run_doc(SUBMIT)) == "submit"
    assert recipe.launched_by(run_doc(SCRIPT)) == "script"
    assert recipe.launched_by(run_doc(None, sessionStartedAt="2026-01-01T00:00:00Z")) == "script"  # interactive
    assert recipe.launched_by(run_doc(None)) is None  # the seed verbs, an agent: no lease to ask
    assert recipe.launched_by(base_doc(launch={"scriptPath": "pipeline-workflow.js"})) is None
    assert recipe.launched_by(base_doc(launch={"kind": "resumable", "argv": "x"})) is None


def test_judge_a_file_store_runner() -> None:
    doc = run_doc(RUNNER)
    live = judge(doc, Lease(holder={"pid": 42, "host": "h1", "startedAt": "s"}))
    assert live is not None and live.state == RUNNING and live.live
    assert [(h.role, h.host, h.pid, h.steps) for h in live.holders] == [("runner", "h1", 42, ("a",))]
    assert judge(doc, Lease()) == liveness.Verdict(STOPPED, "runner")
    assert judge({**doc, "status": "done"}, Lease()) is None  # only a live run is judged
    assert judge(run_doc(None), Lease()) is None
    assert judge(doc, None) is None
    assert judge(doc, Lease(fail=True)) is None  # a store that cannot answer: no verdict, not a guess


def test_judge_a_script() -> None:
    doc = run_doc(SCRIPT)
    assert judge(doc, Lease()) == liveness.Verdict(UNFINISHED, "script")
    held = judge(doc, Lease(holder={"pid": 7, "host": "h"}))
    assert held is not None and held.state == RUNNING and held.holders[0].role == "script"


def test_judge_workers() -> None:
    claims = [{"worker": "w1", "host": "h1", "pid": 11, "steps": ["a"], "expiresIn": 20.0},
              {"worker": "w2", "host": "h2", "pid": 12, "steps": ["b", "c"], "expiresIn": 25.0}]
    for argv in (SUBMIT, RUNNER):  # `resumable run --store` is a submit and a worker
        verdict = judge(run_doc(argv), Lease(workers=claims))
        assert verdict is not None and verdict.state == RUNNING and verdict.launched_by == "submit"
        assert [(h.host, h.pid, h.steps) for h in verdict.holders] == [("h1", 11, ("a",)), ("h2", 12, ("b", "c"))]
        assert verdict.summary() == "2 workers"
    assert judge(run_doc(SUBMIT), Lease(workers=[])) == liveness.Verdict(WAITING, "submit")
    # A worker of this host whose process is gone is not live, whatever its lease says.
    gone = [{"worker": "w", "host": HOST, "pid": dead_pid(), "steps": ["a"], "expiresIn": 28.0}]
    verdict = judge(run_doc(SUBMIT), Lease(workers=gone))
    assert verdict is not None and verdict.state == WAITING and verdict.holders[0].steps == ("a",)
    mine = [{"worker": "w", "host": HOST, "pid": os.getpid(), "steps": ["a"], "expiresIn": 28.0}]
    assert judge(run_doc(SUBMIT), Lease(workers=mine)).state == RUNNING  # type: ignore[union-attr]
    # A worker that holds nothing now (a retry's backoff) is live only where it can be seen alive.
    idle = [{"worker": "w", "host": HOST, "pid": os.getpid(), "steps": [], "expiresIn": None}]
    verdict = judge(run_doc(RUNNER), Lease(workers=idle))
    assert verdict is not None and verdict.state == RUNNING
    assert liveness.holders_line(verdict) == f"1 worker: pid {os.getpid()} on {HOST} (waiting for its next step)"
    for unseen in ({"host": "elsewhere", "pid": 5}, {"host": HOST, "pid": dead_pid()}):
        verdict = judge(run_doc(RUNNER), Lease(workers=[{"worker": "w", "steps": [], **unseen}]))
        assert verdict is not None and verdict.state == WAITING and verdict.holders == ()


def test_the_view_of_a_live_runner() -> None:
    doc = run_doc(RUNNER)
    out = text(doc, judge(doc, Lease(holder={"pid": 42, "host": "h1"})))
    assert out.splitlines()[0].startswith("● RUNNING")
    assert "held by  runner pid 42 on h1 (a)" in out
    assert "→ running; once it stops, resume: resumable run job.toml" in out


def test_the_view_of_a_stopped_runner_names_the_store() -> None:
    doc = run_doc(RUNNER, sessionStartedAt="2026-11-29T08:00:00Z")
    out = text(doc, judge(doc, Lease()), store=("--dir", "/srv/runs"))
    assert out.splitlines()[0].startswith("↯ STOPPED")
    assert "its runner is not running" in out
    assert "running for" not in out and " · ran 10m" in out  # up to its last write, not up to now
    assert "→ resume: resumable run job.toml --dir /srv/runs" in out


def test_the_view_of_a_script_that_ended_without_finish() -> None:
    doc = run_doc(SCRIPT)
    out = text(doc, judge(doc, Lease()))
    assert "the script ended without run.finish()" in out
    finish = ("→ finish it: /usr/bin/python3 -c 'import resumable;"
              " print(resumable.open_run(\"/runs/r.json\").finish())'")
    assert finish in out
    assert "  or run the script again: /usr/bin/python3 train.py" in out
    on_pg = text(doc, judge(doc, Lease(workers=[])), store=("--store", "postgresql://u@h/db"))
    assert "open_run(\"r\", store_url=\"postgresql://u@h/db\").finish()" in on_pg


def test_the_view_of_a_run_waiting_for_workers() -> None:
    url = ("--store", "postgresql://u@h/db")
    doc = run_doc(SUBMIT)
    out = text(doc, judge(doc, Lease(workers=[])), store=url)
    assert out.splitlines()[0].startswith("◌ WAITING") and "no worker holds a step of it" in out
    assert "→ start a worker: resumable worker --run r --store postgresql://u@h/db" in out
    assert "or re-run" not in out  # submitting again would change nothing
    ran = run_doc(["resumable", "run", "job.toml", "--store", "postgresql://u@h/db"])
    out = text(ran, judge(ran, Lease(workers=[])), store=url)
    assert "  or re-run: resumable run job.toml --store postgresql://u@h/db" in out
    gone = [{"worker": "w", "host": HOST, "pid": dead_pid(), "steps": ["a"], "expiresIn": 28.0}]
    out = text(doc, judge(doc, Lease(workers=gone)), store=url)
    assert "is gone; its lease expires in 28s, then another worker takes its steps back" in out


def test_list_lines_carry_the_verdict() -> None:
    doc = run_doc(SCRIPT)
    line = view.plain(view.list_line("r.json", doc, None, NOW, judge(doc, Lease())))
    assert line.startswith("↯ r ") and line.endswith("(the script ended without run.finish())")
    line = view.plain(view.list_line("r.json", doc, None, NOW, judge(doc, Lease(holder={"pid": 1, "host": "h"}))))
    assert line.startswith("● r ") and line.endswith("(script pid 1 on h (a))")
    assert view.plain(view.list_line("r.json", doc, None, NOW)).startswith("● r ")  # not judged: as recorded


@pytest.mark.parametrize(("lease", "expected"), [
    (Lease(), ["# run r is marked running, but its runner is gone"]),
    (Lease(holder={"pid": 42, "host": "h1"}),
     ["# run r is running (runner pid 42 on h1 (a)): resume only once it has stopped"]),
])
def test_resume_text_follows_the_verdict(lease: Lease, expected: list[str]) -> None:
    doc = run_doc(RUNNER)
    verdict = judge(doc, lease)
    assert verdict is not None
    notes = liveness.resume_notes(verdict, doc, file="/runs/r.json", store=None)
    assert notes == expected
    lines = recipe.render_text(recipe.classify(doc, "/runs/r.json", here="/w"), doc, "/runs/r.json", notes=notes)
    assert lines[0] == expected[0] and "resumable run job.toml" in lines
    assert not any("resume only once its runner has stopped" in line for line in lines)


def test_with_store() -> None:
    assert recipe.with_store(["resumable", "run", "j.toml"], ("--dir", "/r")) == ["resumable", "run", "j.toml",
                                                                                 "--dir", "/r"]
    for named in (["resumable", "run", "--dir", "x"], ["resumable", "run", "--state-dir=x"],
                  ["resumable", "submit", "--store", "postgresql://h/d"]):
        assert recipe.with_store(named, ("--dir", "/r")) == named  # it names its store already
    assert recipe.with_store(["python3", "x.py"], ("--dir", "/r")) == ["python3", "x.py"]
    assert recipe.with_store(["resumable", "run"], None) == ["resumable", "run"]
    assert recipe.worker_line("a b", ("--store", "postgresql://h/d")) == \
        "resumable worker --run 'a b' --store postgresql://h/d"
