"""Job files through the CLI: DAG order, -j parallelism, skip reasons, keep-going."""

from __future__ import annotations

import time
from pathlib import Path

from runnerhelpers import run_cli, status_of, units, write


def test_dag_parallel_with_j2(work: Path) -> None:
    write(work / "resumable.toml", """
[job]
name = "dag"
[steps.a]
run = "echo a >> trace"
[steps.b]
run = "sleep 0.4; echo b >> trace"
needs = ["a"]
[steps.c]
run = "sleep 0.4; echo c >> trace"
needs = ["a"]
[steps.d]
run = "echo d >> trace"
needs = ["b", "c"]
""")
    t0 = time.monotonic()
    r = run_cli(["-j", "2"])
    elapsed = time.monotonic() - t0
    assert r.exit_code == 0, r.output
    lines = (work / "trace").read_text().split()
    assert lines[0] == "a" and set(lines[1:3]) == {"b", "c"} and lines[3] == "d"
    assert elapsed < 0.75  # b and c overlapped
    assert units(work, "dag")["d"]["dependsOn"] == ["b", "c"]


def test_skip_reasons_input_and_upstream(work: Path) -> None:
    write(work / "in.txt", "1")
    write(work / "resumable.toml", """
[job]
name = "s"
[steps.a]
run = "cat in.txt > a.out; echo a >> trace"
inputs = ["in.txt"]
artifacts = ["a.out"]
[steps.b]
run = "echo b >> trace"
needs = ["a"]
""")
    assert run_cli([]).exit_code == 0
    r = run_cli(["--dry-run"])
    assert "skip  a: done" in r.output and "skip  b: done" in r.output
    write(work / "in.txt", "2")
    r = run_cli(["--dry-run"])
    assert "run   a: input changed: in.txt" in r.output
    assert "run   b: upstream re-runs: a" in r.output
    assert run_cli([]).exit_code == 0
    assert (work / "trace").read_text().split() == ["a", "b", "a", "b"]


def test_keep_going_via_cli_marks_dependents_dep_blocked(work: Path) -> None:
    write(work / "resumable.toml", """
[job]
name = "k"
[steps.bad]
run = "exit 5"
[steps.child]
run = "true"
needs = ["bad"]
[steps.other]
run = "true"
""")
    r = run_cli(["--keep-going"])
    assert r.exit_code == 1
    assert status_of(work, "k") == {"bad": "failed", "child": "dep_blocked", "other": "done"}
    assert units(work, "k")["child"]["blockedBy"] == "bad"
    r = run_cli([])  # without keep-going: stops at the first failure again
    assert status_of(work, "k")["other"] == "done"


def test_bad_job_file_is_one_line(work: Path) -> None:
    write(work / "resumable.toml", '[job]\nname = "x"\n[steps.a]\nrun = "true"\nneeds = ["nope"]\n')
    r = run_cli([])
    assert r.exit_code == 1 and r.output.count("\n") == 1
    assert "resumable.toml:5" in r.output and "nope" in r.output


def test_example_job_finishes_done_twice(work: Path) -> None:
    import shutil

    example = Path(__file__).resolve().parents[2] / "examples" / "resumable.toml"
    shutil.copy(example, work / "resumable.toml")
    r = run_cli(["-j", "2"])
    assert r.exit_code == 0, r.output
    r = run_cli(["-j", "2"])
    assert r.exit_code == 0, r.output
    assert "(" in r.output and all(v == "done" for v in status_of(work, "example").values())
    assert "start" not in r.output  # everything skipped


def test_quiet_and_j0(work: Path) -> None:
    write(work / "resumable.toml", '[job]\nname = "q"\n[steps.a]\nrun = "echo hi"\n'
                                   '[steps.b]\nrun = "true"\n')
    r = run_cli(["-j", "0", "--quiet"])
    assert r.exit_code == 0 and r.output == "q: done (2 done)\n"


def test_removed_step_keeps_run_needs_attention(work: Path) -> None:
    write(work / "resumable.toml", '[job]\nname = "r"\n[steps.a]\nrun = "true"\n'
                                   '[steps.b]\nrun = "false"\n')
    assert run_cli([]).exit_code == 1
    write(work / "resumable.toml", '[job]\nname = "r"\n[steps.a]\nrun = "true"\n')
    r = run_cli([])
    assert r.exit_code == 1 and "no longer has" in r.output
    from runnerhelpers import doc

    assert doc(work, "r")["status"] == "needs_attention"


def test_explain_and_dry_run_list_reasons(work: Path) -> None:
    write(work / "resumable.toml", '[job]\nname = "e"\n[steps.a]\nrun = "true"\n'
                                   '[steps.b]\nrun = "true"\nneeds = ["a"]\n')
    assert run_cli(["--explain", "b"]).output == "run   b: never ran\n"
    run_cli([])
    assert run_cli(["--explain", "b"]).output == "skip  b: done\n"
    assert run_cli(["--explain", "b", "--force"]).output == "run   b: forced\n"
    r = run_cli(["--explain", "zz"])
    assert r.exit_code == 1 and "no step 'zz'" in r.output


def test_every_job_file_problem_on_its_own_line(work: Path) -> None:
    write(work / "resumable.toml", '[steps.a]\nrun = "true"\nneeds = ["nope"]\n[steps.b]\nrun = 5\n')
    r = run_cli([])
    assert r.exit_code == 1
    lines = r.stderr.splitlines()
    assert lines == [
        "resumable: resumable.toml:3: [steps.a] needs: unknown step 'nope' in needs",
        "resumable: resumable.toml:5: [steps.b] run: expected a command string or a non-empty list of strings",
        "resumable: resumable.toml: 2 problems in the job file; fix them and run again",
    ]
    assert not (work / "runs").exists()  # nothing written


def test_job_name_defaults_to_the_directory_and_k_keeps_going(work: Path) -> None:
    write(work / "resumable.toml", '[steps.bad]\nrun = "exit 3"\n[steps.other]\nrun = "true"\n')
    r = run_cli(["-k"])
    assert r.exit_code == 1
    assert status_of(work, work.name) == {"bad": "failed", "other": "done"}


def test_dry_run_escapes_file_names_in_reasons(work: Path) -> None:
    write(work / "in\x1b[2Jput", "1")
    write(work / "resumable.toml", '[steps.a]\nrun = "true"\ninputs = ["in\\u001b[2Jput"]\n')
    assert run_cli([]).exit_code == 0
    write(work / "in\x1b[2Jput", "2")
    r = run_cli(["--dry-run"])
    assert r.exit_code == 0 and "\x1b" not in r.output
    assert r.output.splitlines() == ["run   a: input changed: in\\x1b[2Jput",
                                     "1 to run, 0 to skip (dry run: nothing executed or written)"]
