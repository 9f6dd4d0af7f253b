"""A job built in Python (runner.jobpython, resumable.Job): `resumable run pipeline.py` runs the job a
file builds, with the checks, families and kept answers of a TOML job; its errors are one line with
the file and the line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from runnerhelpers import run_cli, status_of, units, write

import resumable
from corehelpers import RESUMABLE
from resumable.runner import explain, session, verdict
from resumable.store.files.backend import FileRunHandle

PIPELINE = '''import os
import resumable
from helper import SPLITS          # a module next to the file: its directory is on sys.path

job = resumable.Job("py", timeout="1m")
job.step("prepare", run="echo data > data.txt", artifacts=["data.txt"])
for split in SPLITS:
    job.step(f"eval-{split}", run=f"cat data.txt > eval-{split}.txt && echo {split} >> trace",
             needs=["prepare"], artifacts=[f"eval-{split}.txt"])
job.step("sq", params={"n": range(1, 4)}, run="echo $(({n}*{n})) > sq{n}.txt", artifacts=["sq{n}.txt"])
job.step("report", run="cat {sq.artifacts} > report.txt", needs=[f"eval-{s}" for s in SPLITS])
LISTED = sorted(os.listdir("."))   # runs in its own directory

if __name__ == "__main__":
    raise SystemExit("not run by resumable run")
'''


@pytest.fixture
def pipeline(work: Path) -> Path:
    write(work / "helper.py", 'SPLITS = ["val", "test"]\n')
    return write(work / "pipeline.py", PIPELINE)


def test_resumable_run_runs_the_job_a_python_file_builds(pipeline: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verdict, "_RACY_NS", 0)
    elsewhere = pipeline.parent / "sub"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # started from elsewhere: the file runs in its own directory
    r = run_cli(["../pipeline.py", "-j", "2"])
    assert r.exit_code == 0, r.output
    assert sorted(status_of(pipeline.parent, "py")) == ["eval-test", "eval-val", "prepare", "report", "sq+1", "sq+2",
                                                        "sq+3"]
    assert (pipeline.parent / "report.txt").read_text().split() == ["1", "4", "9"]
    assert units(pipeline.parent, "py")["prepare"]["command"] == "echo data > data.txt"
    # Nothing changed: the kept answer (the file still runs: what it builds is part of the key).
    with pytest.MonkeyPatch.context() as mp:
        for target, name in ((explain, "plan"), (session, "load_job"), (FileRunHandle, "load")):
            mp.setattr(target, name, _refuse)
        assert run_cli(["../pipeline.py", "-j", "2"]).output.endswith("py: done (7 skipped)\n")


def _refuse(*_a: object, **_k: object) -> None:
    raise AssertionError("took the long way")


def test_what_the_file_builds_is_what_is_fingerprinted(pipeline: Path) -> None:
    r = run_cli(["pipeline.py"])
    assert r.exit_code == 0, r.output
    (pipeline.parent / "trace").unlink()
    # An edit that builds the same job: nothing runs.
    write(pipeline, PIPELINE + "\n# a comment\n")
    assert run_cli(["pipeline.py"]).output.endswith("py: done (7 skipped)\n")
    # A change in what it builds (here: what a module it imports says): that step, and what needs it.
    write(pipeline.parent / "helper.py", 'SPLITS = ["val", "test", "extra"]\n')
    r = run_cli(["pipeline.py"])
    assert r.exit_code == 0, r.output
    assert (pipeline.parent / "trace").read_text().split() == ["extra"]
    assert "rerun  report (command changed)" not in r.output  # its needs changed, not its command
    assert status_of(pipeline.parent, "py")["eval-extra"] == "done"


def test_targets_dry_run_and_explain(pipeline: Path) -> None:
    assert run_cli(["pipeline.py", "sq"]).exit_code == 0
    assert sorted(k for k, v in status_of(pipeline.parent, "py").items() if v == "done") == ["sq+1", "sq+2", "sq+3"]
    out = run_cli(["pipeline.py", "--dry-run"]).output.splitlines()
    assert out[0] == "run   prepare: never ran" and "skip  sq: 3 instances (done)" in out
    assert run_cli(["pipeline.py", "--explain", "sq+2"]).output == "skip  sq+2: done\n"


def _error(work: Path, source: str, name: str = "bad.py") -> str:
    write(work / name, source)
    r = run_cli([name])
    assert r.exit_code == 1
    assert "Traceback" not in r.output
    return r.output.strip()


def test_errors_are_one_line_with_the_file_and_line(work: Path) -> None:
    assert _error(work, "import resumable\nx = 1\ny = undefined_name\n") == \
        "resumable: bad.py:3: NameError: name 'undefined_name' is not defined"
    assert _error(work, "def f():\n    raise ValueError('no\\nway')\n\nf()\n") == \
        "resumable: bad.py:2: ValueError: no way"
    assert _error(work, "import sys\nsys.exit(3)\n") == "resumable: bad.py:2: SystemExit: 3"
    assert _error(work, "x = (\n") == "resumable: bad.py:1: SyntaxError: '(' was never closed"
    assert _error(work, "x = 1\n") == ('resumable: bad.py: builds no resumable.Job; make one, like: job = '
                                       'resumable.Job("name"); job.step("hello", run="echo hello")')
    assert _error(work, "import resumable\na = resumable.Job('a')\nb = resumable.Job('b')\n") == \
        "resumable: bad.py: builds 2 jobs ('a', 'b'); name the one to run `job`"
    assert _error(work, "import resumable\nimport no_such_module\n") == \
        "resumable: bad.py:2: ModuleNotFoundError: No module named 'no_such_module'"
    r = run_cli(["missing.py"])
    assert r.exit_code == 1 and "no job file 'missing.py'" in r.output


def test_the_jobs_problems_at_the_lines_of_the_calls(work: Path) -> None:
    out = _error(work, """import resumable
job = resumable.Job("bad")
job.step("a", run="x", timeuot=5)
job.step("b", run="y", needs=["zz"])
job.step("c", run="x {nope}", params={"n": [1]})
job.step("a", run="again")
""")
    assert out.splitlines() == [
        "resumable: bad.py:3: step 'a' timeuot: unknown key 'timeuot' (did you mean 'timeout'?); known: artifacts,"
        " backoff, cwd, env, exclude, files, grace, include, inputs, jitter, log, needs, params, retries, run, shell,"
        " timeout",
        "resumable: bad.py:3: step 'a': a second step 'a' (at line 6); step ids are unique",
        "resumable: bad.py:4: step 'b' needs: unknown step 'zz' in needs",
        "resumable: bad.py:5: step 'c' run: unknown parameter {nope}; the step's parameters: n (write {{ and }} for"
        " literal braces)",
        "resumable: bad.py: 4 problems in the job file; fix them and run again",
    ]


def test_job_run_runs_it_from_the_program_that_made_it(work: Path) -> None:
    write(work / "prog.py", """import sys
import resumable

job = resumable.Job("prog")
job.step("hello", run="echo hello > hello.txt", artifacts=["hello.txt"])
if __name__ == "__main__":
    sys.exit(job.run(quiet=True))
""")
    env_runs = str(work / "runs")
    proc = subprocess.run([str(Path(RESUMABLE).parent / "python"), "prog.py"], cwd=work, capture_output=True, text=True,
                          env={"RESUMABLE_DIR": env_runs, "PATH": "/usr/bin:/bin"}, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert (work / "hello.txt").read_text() == "hello\n" and "prog: done (1 done)" in proc.stdout
    # The same job, from the command line: done already (the file is run; its __main__ block is not).
    r = run_cli(["prog.py"])
    assert r.exit_code == 0 and r.output.endswith("prog: done (1 skipped)\n"), r.output


def test_run_job_takes_a_python_file(pipeline: Path) -> None:
    assert resumable.run_job(pipeline, targets=["prepare"], quiet=True) == 0
    assert [k for k, v in status_of(pipeline.parent, "py").items() if v == "done"] == ["prepare"]


def test_job_run_refuses_a_job_made_outside_a_file() -> None:
    job = resumable.Job("x")
    job.site = ("<stdin>", 1)
    with pytest.raises(resumable.InvalidInputError, match=r"runs a job made in a \.py file"):
        job.run()
