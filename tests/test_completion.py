"""Shell completion: `resumable completion SHELL` prints click's script, and the installed command
answers click's completion protocol (``_RESUMABLE_COMPLETE`` with ``COMP_WORDS`` / ``COMP_CWORD``)
with commands, run ids from the runs directory, seed verbs' states and job steps."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from corehelpers import RESUMABLE, assert_error, cli, needs, ok, tree
from resumable.cli.main import LAZY_COMMANDS
from resumable.cli.startup import LOW_LEVEL_VERBS

JOB = """
[job]
name = "nightly"
[steps.fetch]
run = "true"
[steps.load]
run = "true"
needs = ["fetch"]
[steps."load.more"]
run = "true"
"""


def complete(line: str, *, cwd: Path, shell: str = "bash", env: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """What the installed command offers for the last word of ``line`` (a trailing space: a new,
    empty word), as (type, value) pairs, driven exactly as the bash/zsh/fish scripts drive it."""
    words = line.split()
    if line.endswith(" "):
        words.append("")
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("RESUMABLE_", "_RESUMABLE"))}
    full_env.update(env or {})
    full_env["_RESUMABLE_COMPLETE"] = f"{shell}_complete"
    if shell == "fish":  # fish passes the line up to the cursor, and the incomplete word itself
        full_env.update(COMP_WORDS=line, COMP_CWORD=words[-1])
    else:
        full_env.update(COMP_WORDS=line, COMP_CWORD=str(len(words) - 1))
    proc = subprocess.run([RESUMABLE], capture_output=True, text=True, cwd=cwd, env=full_env, timeout=30,
                          check=False)
    assert (proc.returncode, proc.stderr) == (0, ""), (proc.returncode, proc.stderr)
    lines = [x for x in proc.stdout.splitlines() if x]
    if shell == "zsh":  # type, value, help: three lines each
        return [(lines[i], lines[i + 1]) for i in range(0, len(lines) - 2, 3)]
    if shell == "fish":
        return [("plain" if "," not in x else x.split(",", 1)[0], x.split(",", 1)[-1].split("\t")[0])
                for x in lines]
    return [tuple(x.split(",", 1)) for x in lines]  # type: ignore[misc]


def values(line: str, *, cwd: Path, **kw: object) -> list[str]:
    return [v for _, v in complete(line, cwd=cwd, **kw)]  # type: ignore[arg-type]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project whose runs directory holds runs `nightly`, `nightly-2` and `other`, plus files
    that are not runs: journals, locks, an archive, a temp file, a link and a damaged run."""
    runs = tmp_path / ".resumable" / "runs"
    for rid in ("nightly", "nightly-2", "other"):
        ok(cli("init", rid, "--task", "t", "--units", "a", runs=runs))
    (runs / "archive").mkdir()
    (runs / "archive" / "old.json").write_text("{}")
    (runs / ".other.json.tmp.99999").write_text("")
    (runs / "damaged.json").write_text("not json at all")  # named, never read: it completes too
    (runs / "elsewhere.json").symlink_to(tmp_path / "outside.json")
    (tmp_path / "resumable.toml").write_text(JOB)
    return tmp_path


def test_commands_complete(project: Path) -> None:
    offered = values("resumable ", cwd=project)
    assert set(offered) == {*LOW_LEVEL_VERBS, *LAZY_COMMANDS}
    assert values("resumable st", cwd=project) == ["status"]
    assert values("resumable re", cwd=project) == ["report", "rerun", "reconcile", "resume", "resolve"]  # as --help


@pytest.mark.parametrize("command", ["status", "report", "log", "reconcile", "rerun"])
def test_run_ids_complete_for_every_click_command_taking_a_run(command: str, project: Path) -> None:
    assert values(f"resumable {command} ", cwd=project) == ["damaged", "nightly", "nightly-2", "other"]
    assert values(f"resumable {command} ni", cwd=project) == ["nightly", "nightly-2"]


def test_run_ids_complete_for_the_seed_verbs(project: Path) -> None:
    for verb in ("init", "unit", "phase", "get", "resume", "item", "resolve", "validation", "finalize"):
        assert values(f"resumable {verb} o", cwd=project) == ["other"], verb
    # options and their values do not count as the run argument
    assert values("resumable get --summary n", cwd=project) == ["nightly", "nightly-2"]
    assert values("resumable unit --note x n", cwd=project) == ["nightly", "nightly-2"]


def test_seed_verbs_complete_their_state_words(project: Path) -> None:
    assert values("resumable unit nightly a ", cwd=project) == [
        "pending", "in_progress", "done", "blocked", "dep_blocked", "failed", "timeout", "interrupted"]
    assert values("resumable unit nightly a d", cwd=project) == ["done", "dep_blocked"]
    assert values("resumable unit nightly ", cwd=project) == []  # a unit id: free text
    assert values("resumable phase nightly build ", cwd=project) == ["pending", "running", "done", "blocked",
                                                                     "skipped"]
    assert values("resumable finalize nightly ", cwd=project) == ["done", "needs_attention", "aborted"]
    assert values("resumable validation nightly ", cwd=project) == ["green", "red", "pass", "ok", "fail"]
    assert values("resumable unit --n", cwd=project) == ["--note"]
    assert complete("resumable gc ", cwd=project) == [("dir", "")]
    assert complete("resumable init x --dir ", cwd=project) == [("dir", "")]


def test_dir_typed_earlier_on_the_line_is_the_runs_directory(project: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    ok(cli("init", "far", "--task", "t", runs=elsewhere))
    assert values(f"resumable status --dir {elsewhere} ", cwd=project) == ["far"]
    assert values(f"resumable get --dir {elsewhere} ", cwd=project) == ["far"]
    # and RESUMABLE_DIR, as for every command
    assert values("resumable log ", cwd=project, env={"RESUMABLE_DIR": str(elsewhere)}) == ["far"]


def test_a_path_is_left_to_the_shell(project: Path) -> None:
    assert complete("resumable status ./run", cwd=project) == [("file", "./run")]
    assert complete("resumable get sub/x", cwd=project) == [("file", "sub/x")]


def test_completing_reads_names_only_and_changes_nothing(project: Path, tmp_path: Path) -> None:
    runs = project / ".resumable" / "runs"
    before = tree(runs)
    stamps = {p: p.stat().st_mtime_ns for p in runs.rglob("*") if not p.is_symlink()}
    values("resumable status ", cwd=project)
    values("resumable unit nightly a ", cwd=project)
    assert tree(runs) == before
    assert {p: p.stat().st_mtime_ns for p in runs.rglob("*") if not p.is_symlink()} == stamps
    # No runs directory: nothing offered, nothing created.
    empty = tmp_path / "empty"
    empty.mkdir()
    assert values("resumable status ", cwd=empty, env={"RESUMABLE_DIR": str(empty / "runs")}) == []
    assert list(empty.iterdir()) == []


def test_a_postgresql_store_offers_no_run_ids_and_connects_to_nothing(project: Path) -> None:
    # Port 9 (discard) on loopback: were a connection tried, psycopg would fail or wait; it is not.
    env = {"RESUMABLE_STORE": "postgresql://nobody@127.0.0.1:9/none"}
    assert values("resumable status ", cwd=project, env=env) == []
    assert values("resumable unit ", cwd=project, env=env) == []


def test_step_ids_complete_for_explain(project: Path, tmp_path: Path) -> None:
    assert values("resumable run --explain ", cwd=project) == ["fetch", "load", "load.more"]
    assert values("resumable run --explain lo", cwd=project) == ["load", "load.more"]
    other = tmp_path / "other.toml"
    other.write_text('[steps.only]\nrun = "true"\n')
    assert values(f"resumable run {other} --explain ", cwd=project) == ["only"]
    assert values("resumable run --step a:true --step b:false --explain ", cwd=project) == ["a", "b"]


def test_step_ids_complete_as_targets(project: Path, tmp_path: Path) -> None:
    assert values("resumable run ", cwd=project) == ["fetch", "load", "load.more"]
    assert values("resumable run load ", cwd=project) == ["fetch", "load", "load.more"]
    assert values("resumable run -j 2 fe", cwd=project) == ["fetch"]
    other = tmp_path / "other.toml"
    other.write_text('[steps.only]\nrun = "true"\n')
    assert values(f"resumable run {other} ", cwd=project) == ["only"]
    assert complete("resumable run ./oth", cwd=project) == [("file", "./oth")]
    deep = project / "sub" / "deeper"
    deep.mkdir(parents=True)
    assert values("resumable run lo", cwd=deep) == ["load", "load.more"]  # the job file found walking up


def test_a_bad_job_file_offers_nothing_and_says_nothing(tmp_path: Path) -> None:
    assert values("resumable run --explain ", cwd=tmp_path) == []  # no job file
    (tmp_path / "resumable.toml").write_text("[steps\n")
    assert values("resumable run --explain ", cwd=tmp_path) == []
    (tmp_path / "resumable.toml").unlink()
    os.mkfifo(tmp_path / "resumable.toml")  # never waited on
    assert values("resumable run --explain ", cwd=tmp_path) == []


def test_zsh_and_fish_get_the_same_candidates(project: Path) -> None:
    assert values("resumable status ni", cwd=project, shell="zsh") == ["nightly", "nightly-2"]
    assert values("resumable status ni", cwd=project, shell="fish") == ["nightly", "nightly-2"]
    assert values("resumable unit nightly a do", cwd=project, shell="fish") == ["done"]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_the_script(shell: str, tmp_path: Path) -> None:
    out = ok(cli("completion", shell, cwd=tmp_path))
    assert f"_RESUMABLE_COMPLETE={shell}_complete" in out
    assert "resumable" in out and "_resumable_completion" in out
    assert list(tmp_path.iterdir()) == []


def test_completion_of_an_unknown_shell(tmp_path: Path) -> None:
    assert_error(cli("completion", "tcsh", cwd=tmp_path), 1, "'tcsh' is not one of")
    assert_error(cli("completion", cwd=tmp_path), 1, "Missing argument")


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_bash_loads_the_script_and_completes(project: Path) -> None:
    """The script as a user loads it (`eval "$(resumable completion bash)"`), driven as bash's
    programmable completion drives it."""
    script = f"""
    eval "$({RESUMABLE} completion bash)"
    complete -p resumable
    COMP_WORDS=(resumable status ni); COMP_CWORD=2; COMPREPLY=()
    _resumable_completion resumable; echo "status: ${{COMPREPLY[*]}}"
    COMP_WORDS=(resumable finalize nightly ""); COMP_CWORD=3; COMPREPLY=()
    _resumable_completion resumable; echo "finalize: ${{COMPREPLY[*]}}"
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    env["PATH"] = f"{Path(RESUMABLE).parent}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.run(["bash", "--norc", "-c", script], capture_output=True, text=True, cwd=project, env=env,
                          timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("complete ") and lines[0].endswith(" resumable")
    assert lines[1:] == ["status: nightly nightly-2", "finalize: done needs_attention aborted"]


def _shell_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    env["PATH"] = f"{Path(RESUMABLE).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


@needs("fish", "apt-get install -y fish")
def test_fish_loads_the_script_and_completes(project: Path) -> None:
    """fish completes a command line non-interactively (`complete -C`), through the script."""
    script = 'resumable completion fish | source; complete -C "resumable status ni"; echo ---;' \
             ' complete -C "resumable unit nightly a d"'
    proc = subprocess.run(["fish", "--no-config", "-c", script], capture_output=True, text=True, cwd=project,
                          env=_shell_env(), timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["nightly", "nightly-2", "---", "dep_blocked", "done"]


@needs("zsh", "apt-get install -y zsh")
def test_zsh_loads_the_script(project: Path) -> None:
    script = 'autoload -U compinit; compinit -u; eval "$(resumable completion zsh)"; whence -w _resumable_completion'
    proc = subprocess.run(["zsh", "-f", "-c", script], capture_output=True, text=True, cwd=project,
                          env=_shell_env(), timeout=30, check=False)
    assert (proc.returncode, proc.stdout.strip()) == (0, "_resumable_completion: function"), proc.stderr


FAMILY_JOB = """
[job]
name = "shards"
[steps.clean]
files = "raw/{shard}.csv"
run = "true"
[steps.train]
params = { lr = ["0.1", "0.01"], seed = { from = 1, to = 2 } }
run = "true"
[steps.report]
run = "true"
needs = ["clean"]
"""


@pytest.fixture
def families(tmp_path: Path) -> Path:
    (tmp_path / "raw").mkdir()
    for shard in ("01", "02"):
        (tmp_path / "raw" / f"{shard}.csv").write_text(shard)
    (tmp_path / "resumable.toml").write_text(FAMILY_JOB)
    return tmp_path


def test_families_and_their_instances_complete_as_targets(families: Path) -> None:
    every = ["clean", "train", "clean+01", "clean+02", "report", "train+0.01+1", "train+0.01+2", "train+0.1+1",
             "train+0.1+2"]
    assert values("resumable run ", cwd=families) == every
    assert values("resumable run cl", cwd=families) == ["clean", "clean+01", "clean+02"]
    assert values("resumable run clean+", cwd=families) == ["clean+01", "clean+02"]
    assert values("resumable run train+0.1", cwd=families) == ["train+0.1+1", "train+0.1+2"]
    assert values("resumable run --explain tr", cwd=families) == ["train", *every[-4:]]
    for shell in ("zsh", "fish"):
        assert values("resumable run clean+", cwd=families, shell=shell) == ["clean+01", "clean+02"]
    (families / "raw" / "03.csv").write_text("03")  # a new file is a new instance at once
    assert values("resumable run clean+", cwd=families) == ["clean+01", "clean+02", "clean+03"]


def test_a_python_job_file_completes_its_steps(tmp_path: Path) -> None:
    (tmp_path / "pipeline.py").write_text(
        'import resumable\njob = resumable.Job("p")\njob.step("fit", params={"k": [1, 2]}, run="true")\n'
        'job.step("plot", run="true", needs=["fit"])\n')
    assert values("resumable run pipeline.py ", cwd=tmp_path) == ["fit", "fit+1", "fit+2", "plot"]
    assert values("resumable run pipeline.py --explain fit+", cwd=tmp_path) == ["fit+1", "fit+2"]
    (tmp_path / "broken.py").write_text("raise SystemExit(3)\n")
    assert values("resumable run broken.py ", cwd=tmp_path) == []  # says nothing, offers nothing


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_bash_completes_an_instance_as_one_word(families: Path) -> None:
    """bash splits words at COMP_WORDBREAKS (":", "=" and "@" among them, hence no doit-style
    clean:01); "+" is not one, so an instance completes whole."""
    script = f"""
    eval "$({RESUMABLE} completion bash)"
    COMP_WORDS=(resumable run clean+0); COMP_CWORD=2; COMPREPLY=()
    _resumable_completion resumable; echo "run: ${{COMPREPLY[*]}}"
    case "$COMP_WORDBREAKS" in *+*) echo "+ breaks words";; *) echo "+ does not break words";; esac
    """
    proc = subprocess.run(["bash", "--norc", "-c", script], capture_output=True, text=True, cwd=families,
                          env=_shell_env(), timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["run: clean+01 clean+02", "+ does not break words"]


@needs("fish", "apt-get install -y fish")
def test_fish_completes_instances(families: Path) -> None:
    script = 'resumable completion fish | source; complete -C "resumable run clean+"'
    proc = subprocess.run(["fish", "--no-config", "-c", script],
                          capture_output=True, text=True, cwd=families, env=_shell_env(), timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["clean+01", "clean+02"]
