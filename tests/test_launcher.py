"""The installed `resumable` command: a script of our own (not pip's entry-point wrapper, which
imports `re`), and what a seed verb loads through it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from corehelpers import RESUMABLE, cli, ok
from resumable import __version__
from resumable.cli.startup import LOW_LEVEL_VERB_MUST_NOT_IMPORT

ROOT = Path(__file__).resolve().parent.parent

# The start-up rule, written once in the package (cli/startup.py).
HEAVY = LOW_LEVEL_VERB_MUST_NOT_IMPORT


def _imported(*args: str, runs: Path) -> set[str]:
    """Modules imported by `resumable <args>`, through the installed script, beyond what the bare
    interpreter imports at start-up."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    env["RESUMABLE_DIR"] = str(runs)

    def modules(*command: str) -> set[str]:
        proc = subprocess.run([sys.executable, "-X", "importtime", *command], capture_output=True, text=True,
                              env=env, check=True)
        return {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:") and "|" in line} - {"imported package"}

    return modules(RESUMABLE, *args) - modules("-c", "pass")


def test_the_command_is_our_script() -> None:
    text = Path(RESUMABLE).read_text()
    assert text.startswith("#!") and "python" in text.splitlines()[0]
    assert "from resumable.cli.main import" in text
    code = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert "import re" not in code  # pip's console-script wrapper's first import
    assert text.split("\n", 1)[1] == (ROOT / "scripts" / "resumable").read_text().split("\n", 1)[1]


def test_a_transition_imports_nothing_heavy(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    ok(cli("init", "r", "--task", "t", "--units", "a,b", runs=runs))
    extra = _imported("unit", "r", "a", "in_progress", runs=runs)
    assert not extra & HEAVY, sorted(extra & HEAVY)
    assert "resumable.store.files.writer" in extra  # the measurement does see the verb's imports


def test_get_of_a_small_run_does_not_load_orjson(tmp_path: Path) -> None:
    """orjson's import costs more than printing a small document with the standard encoder."""
    runs = tmp_path / "runs"
    ok(cli("init", "r", "--task", "t", "--units", "a,b", runs=runs))
    for args in (("get", "r"), ("get", "r", "--summary")):
        extra = _imported(*args, runs=runs)
        assert "orjson" not in extra and "resumable.cli.lowlevel" in extra


def test_help_version_and_python_dash_m(tmp_path: Path) -> None:
    assert ok(cli("--version")) == f"resumable, version {__version__}\n"
    assert "Usage: resumable" in ok(cli("--help"))
    assert "Set a unit's state" in ok(cli("unit", "--help"))
    proc = subprocess.run([sys.executable, "-m", "resumable", "--version"], capture_output=True, text=True,
                          check=True)
    assert proc.stdout == f"resumable, version {__version__}\n"


# --- ending a seed verb without the interpreter's shutdown -------------------------------------

LAUNCH = """
import atexit, os, sys
class Teardown:
    def __del__(self):
        os.write(1, b"[teardown]\\n")
witness = Teardown()  # finalized by the interpreter's shutdown, not by os._exit
if os.environ.get("WITH_ATEXIT"):
    atexit.register(lambda: os.write(1, b"[atexit]\\n"))
if os.environ.get("WITH_THREAD"):
    import threading, time
    def until_shutdown():  # alive when the verb ends, however slow the machine; ends at shutdown
        while threading.main_thread().is_alive():
            time.sleep(0.005)
    threading.Thread(target=until_shutdown).start()
sys.argv = ["resumable", *sys.argv[1:]]
from resumable.cli.main import launch
launch()
"""


def _launch(runs: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_") and k != "PYTHONUNBUFFERED"}
    full_env.update(env, RESUMABLE_DIR=str(runs))
    return subprocess.run([sys.executable, "-c", LAUNCH, *args], capture_output=True, text=True, env=full_env,
                          check=False)


def test_seed_verbs_skip_the_shutdown_and_lose_no_output(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    # init prints through sys.stdout, block-buffered on a pipe: the flush before exiting writes it.
    proc = _launch(runs, "init", "r", "--task", "t", "--units", "a,b")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "r\n", "")
    proc = _launch(runs, "resume", "r")
    assert proc.returncode == 0 and json.loads(proc.stdout) == {"skip": [], "eligible": ["a", "b"], "dep_blocked": {}}
    proc = _launch(runs, "unit", "r", "a", "done")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    proc = _launch(runs, "unit", "r", "a", "pending")  # refused: the exit status survives
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.startswith("resumable: ") and "[teardown]" not in proc.stdout


def test_the_normal_exit_runs_when_something_needs_it(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    ok(cli("init", "r", "--task", "t", "--units", "a", runs=runs))
    # An exit handler (coverage, a profiler) must run; so must the shutdown's wait for threads.
    proc = _launch(runs, "unit", "r", "a", "in_progress", WITH_ATEXIT="1")
    assert proc.returncode == 0 and "[atexit]" in proc.stdout and "[teardown]" in proc.stdout
    proc = _launch(runs, "unit", "r", "a", "in_progress", WITH_THREAD="1")
    assert proc.returncode == 0 and "[teardown]" in proc.stdout
    # Everything but the seed verbs ends as Python programs do.
    proc = _launch(runs, "--version")
    assert sorted(proc.stdout.splitlines()) == ["[teardown]", f"resumable, version {__version__}"]


def test_a_closed_stdout_is_reported_as_before(tmp_path: Path) -> None:
    """If the final flush fails, the normal exit runs and reports it, as it did before."""
    runs = tmp_path / "runs"
    read, write = os.pipe()
    os.close(read)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_") and k != "PYTHONUNBUFFERED"}
    env["RESUMABLE_DIR"] = str(runs)
    try:
        proc = subprocess.run([RESUMABLE, "init", "r", "--task", "t"], stdout=write, stderr=subprocess.PIPE,
                              text=True, env=env, check=False)
    finally:
        os.close(write)
    assert proc.returncode == 120  # the interpreter's own status for a failed flush at exit
    assert "BrokenPipeError" in proc.stderr
    assert (runs / "r.journal.jsonl").exists()
