"""What a runs directory trusts and what it refuses (docs/security.md, "Security model").

Nothing planted is obeyed: a link in place of any file or directory resumable writes under a runs
directory is a one-line error and its target is never touched; a FIFO (or any non-regular file) is
never waited on; a forged runner lock cannot make the runner signal a process; a runs directory
other users may write to is refused by the runner; ``report -o`` writes only a regular file.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import resumable
from corehelpers import assert_error, cli, ok
from reliability.inproc import Called, call, clean_env

VICTIM = b"precious: must never change\n"


@contextlib.contextmanager
def deadline(seconds: float = 10) -> Iterator[None]:
    """Fail instead of hanging: an open() that blocks on a FIFO is ended by SIGALRM."""
    def alarm(signum: int, frame: object) -> None:
        raise TimeoutError(f"blocked for {seconds} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _victim(tmp_path: Path) -> Path:
    v = tmp_path / "victim"
    v.write_bytes(VICTIM)
    return v


def _untouched(victim: Path) -> None:
    assert victim.read_bytes() == VICTIM


def one_line(r: Called, code: int, *fragments: str) -> str:
    """Exit ``code``, exactly one `resumable: ` line on stderr, no traceback, no internal error."""
    assert r.code == code, (r.code, r.out, r.err)
    lines = r.err_lines
    assert len(lines) == 1 and lines[0].startswith("resumable: "), r.err
    assert "internal error" not in lines[0] and "Traceback" not in r.err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    d = tmp_path / "runs"
    d.mkdir(mode=0o755)
    return d


def seed(runs: Path, *args: str) -> Called:
    return call([*args, "--dir", str(runs)])


def _made(runs: Path, run_id: str = "r") -> None:
    assert seed(runs, "init", run_id, "--task", "t", "--units", "a,b").code == 0


def _snapshot(path: Path) -> dict[str, tuple[str, bytes | str]]:
    out: dict[str, tuple[str, bytes | str]] = {}
    for dirpath, dirnames, files in os.walk(path):
        for name in (*dirnames, *files):
            p = Path(dirpath) / name
            if p.is_symlink():
                out[str(p.relative_to(path))] = ("link", os.readlink(p))
            elif p.is_file():
                out[str(p.relative_to(path))] = ("file", p.read_bytes())
            elif p.is_dir():
                out[str(p.relative_to(path))] = ("dir", b"")
            else:
                out[str(p.relative_to(path))] = ("other", b"")
    return out


# --- planted links: the store's own files ---------------------------------------------------------


@pytest.mark.parametrize("name", ["r.json", "r.journal.jsonl", "r.lock"])
def test_a_link_in_place_of_a_runs_file_is_refused(runs: Path, tmp_path: Path, name: str) -> None:
    _made(runs)
    victim = _victim(tmp_path)
    (runs / name).unlink()
    (runs / name).symlink_to(victim)
    before = _snapshot(tmp_path)
    line = one_line(seed(runs, "unit", "r", "a", "done"), 1, "symbolic link")
    assert str(runs / name) in line
    if name != "r.lock":  # readers open no lock
        one_line(seed(runs, "get", "r"), 1, "symbolic link")
        one_line(call(["status", "r", "--dir", str(runs)]), 1, "symbolic link")
    assert _snapshot(tmp_path) == before
    _untouched(victim)


def test_a_planted_temp_file_is_never_written_through(runs: Path, tmp_path: Path) -> None:
    """The snapshot's temp name is predictable (pid): a link or a FIFO planted there is replaced,
    never followed or waited on."""
    run = resumable.open_run("r", runs_dir=runs)
    run.init("t", units=["a"])
    victim = _victim(tmp_path)
    tmp = runs / f".r.json.tmp.{os.getpid()}"
    for fifo in (False, True):
        if fifo:
            os.mkfifo(tmp)
        else:
            tmp.symlink_to(victim)
        with deadline():
            run.unit("a", "in_progress")
        assert not tmp.exists() and not tmp.is_symlink()
        _untouched(victim)
    assert resumable.read_doc(runs / "r.json")["units"]["a"]["status"] == "in_progress"


def test_readers_never_follow_a_planted_link_out_of_the_runs_directory(runs: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"id": "secret-run", "task": "SECRET", "status": "running", "units": {}}))
    (runs / "x.json").symlink_to(outside)
    listed = call(["status", "--list", "--dir", str(runs)])
    assert listed.code == 0 and b"SECRET" not in listed.out and b"secret-run" not in listed.out
    listed = call(["status", "--list", "--json", "--dir", str(runs)])
    assert listed.code == 0 and b"SECRET" not in listed.out
    for args in (["status", "x"], ["status", "x", "--json"], ["get", "x"], ["report", "x", "-o", "-"]):
        r = call([*args, "--dir", str(runs)])
        assert r.code != 0 and b"SECRET" not in r.out, args
        assert len(r.err_lines) == 1 and "internal error" not in r.err, r.err


# --- planted links: directories and logs ----------------------------------------------------------


JOB = '[job]\nname = "j"\n[steps.a]\nrun = "echo output-of-a"\n'


def _job(tmp_path: Path) -> tuple[Path, Path]:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "resumable.toml").write_text(JOB)
    runs = proj / ".resumable" / "runs"
    runs.mkdir(parents=True, mode=0o755)
    return proj, runs


def _run(proj: Path, *args: str) -> Called:
    return call(["run", "-q", *args], cwd=str(proj))


@pytest.mark.parametrize("where", ["data-dir", "logs-dir", "log-file"])
def test_a_planted_link_for_step_output_is_refused_before_any_step(tmp_path: Path, where: str) -> None:
    proj, runs = _job(tmp_path)
    assert _run(proj).code == 0
    victim = _victim(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if where == "data-dir":
        os.rename(runs / "j", tmp_path / "old")
        (runs / "j").symlink_to(elsewhere)
    elif where == "logs-dir":
        os.rename(runs / "j" / "logs", tmp_path / "old")
        (runs / "j" / "logs").symlink_to(elsewhere)
    else:
        (runs / "j" / "logs" / "a.2.log").symlink_to(victim)
    journal = (runs / "j.journal.jsonl").read_bytes()
    r = _run(proj, "--force")
    one_line(r, 1, "symbolic link", "resumable does not follow links")
    _untouched(victim)
    assert list(elsewhere.iterdir()) == []
    assert (runs / "j.journal.jsonl").read_bytes() == journal  # refused before the runner wrote anything


def test_a_step_log_is_never_opened_through_a_link(tmp_path: Path) -> None:
    """Even a log path of the user's choosing: truncating through a link destroys its target."""
    from resumable.runner.process import open_log

    victim = _victim(tmp_path)
    link = tmp_path / "step.log"
    link.symlink_to(victim)
    with pytest.raises(OSError) as info:
        open_log(str(link))
    assert "symbolic link" in str(info.value) or info.value.errno == 40  # ELOOP
    _untouched(victim)
    fifo = tmp_path / "fifo.log"
    os.mkfifo(fifo)
    with deadline(), pytest.raises(OSError, match="not a regular file"):
        open_log(str(fifo))  # never blocks waiting for a reader


def test_a_planted_archive_link_keeps_runs_in_the_runs_directory(runs: Path, tmp_path: Path) -> None:
    """gc and init over a finished run move files into runs/archive: a link there would carry
    them out of the runs directory."""
    _made(runs)
    assert seed(runs, "finalize", "r", "aborted").code == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (runs / "archive").symlink_to(elsewhere)
    before = _snapshot(tmp_path)
    one_line(call(["gc", str(runs), "--keep-days", "0"]), 1, "symbolic link")
    one_line(seed(runs, "init", "r", "--task", "again"), 1, "symbolic link")
    assert _snapshot(tmp_path) == before and list(elsewhere.iterdir()) == []
    (runs / "archive").unlink()
    (runs / "archive").write_text("not a directory")
    one_line(call(["gc", str(runs), "--keep-days", "0"]), 1, "not a directory")


def test_a_planted_run_id_never_names_the_report_file(tmp_path: Path) -> None:
    """A run document's id is data: "../../x" must not make `report` write outside its directory."""
    work = tmp_path / "a" / "b" / "work"
    work.mkdir(parents=True)
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "x.json").write_text(json.dumps({"id": "../../escaped", "task": "t", "status": "running", "units": {}}))
    r = call(["report", "x", "--dir", str(runs)], cwd=str(work))
    assert r.code == 0 and r.out.decode().strip() == "x.report.html", r.err
    assert (work / "x.report.html").exists() and not list(tmp_path.rglob("escaped*"))


def test_blobs_are_never_written_through_a_link(runs: Path, tmp_path: Path) -> None:
    from resumable.errors import StoreError

    run = resumable.open_run("r", runs_dir=runs)
    run.init("t")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (runs / "r").mkdir()
    (runs / "r" / "blobs").symlink_to(elsewhere)
    with pytest.raises(StoreError, match="symbolic link"):
        run.handle.put_blob(b"x" * 100)
    assert list(elsewhere.iterdir()) == []
    (runs / "r" / "blobs").unlink()
    ref = run.handle.put_blob(b"y" * 100)
    assert run.handle.get_blob(ref) == b"y" * 100


# --- the runner lock: planted, forged -------------------------------------------------------------


def test_a_link_at_the_runner_lock_is_refused(tmp_path: Path) -> None:
    proj, runs = _job(tmp_path)
    victim = _victim(tmp_path)
    (runs / "j.runner.lock").symlink_to(victim)
    one_line(_run(proj), 1, "symbolic link", "j.runner.lock")
    _untouched(victim)
    assert not (runs / "j.json").exists()


INNOCENT = """
import os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: open(sys.argv[1], "a").write("TERM\\n"))
open(sys.argv[1] + ".ready", "w").close()
while True:
    time.sleep(0.05)
"""


def _start_time(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[19]


@pytest.mark.parametrize("form", ["v2-group", "v2-whole-runner", "v2-dead-secret", "v1-token"])
def test_a_forged_runner_lock_never_gets_an_innocent_process_signalled(tmp_path: Path, form: str) -> None:
    """The lock file names an innocent process group with its real start time (anyone can read
    both from /proc): the innocent does not carry the secret, so it is never signalled."""
    proj, runs = _job(tmp_path)
    log = tmp_path / "innocent.log"
    (tmp_path / "innocent.py").write_text(INNOCENT)
    innocent = subprocess.Popen([sys.executable, str(tmp_path / "innocent.py"), str(log)], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while not Path(str(log) + ".ready").exists():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        pid, start = innocent.pid, _start_time(innocent.pid)
        base = {"pid": pid, "host": os.uname().nodename, "startedAt": "2026-01-01T00:00:00Z"}
        forged = {
            "v2-group": {**base, "v": 2, "leftovers": [{"pgid": pid, "start": start, "secret": "0" * 32}]},
            "v2-whole-runner": {**base, "v": 2, "leftovers": [{"pgid": 0, "start": None, "secret": "1" * 32}]},
            "v2-dead-secret": {**base, "v": 2, "secret": "2" * 32, "groups": [{"pgid": pid, "start": start,
                                                                              "secret": "2" * 32}]},
            "v1-token": {**base, "v": 1, "startToken": start, "token": f"{pid}-{start}",
                         "groups": [{"pgid": pid, "startToken": start}]},
        }[form]
        (runs / "j.runner.lock").write_text(json.dumps(forged))
        r = _run(proj)
        assert r.code == 0, r.err
        time.sleep(0.1)
        assert innocent.poll() is None and not log.exists(), "the innocent process was signalled"
        info = json.loads((runs / "j.runner.lock").read_text())
        assert "secret" not in info  # released
        # The forged entries proven gone (nothing carries their secrets) and dropped; what is left
        # is the last runner's own secret, for the next runner to check.
        assert [(g["pgid"], g["start"]) for g in info["leftovers"]] == [(0, None)]
        assert info["leftovers"][0]["secret"] not in json.dumps(forged)
    finally:
        innocent.kill()
        innocent.wait()


def test_a_garbage_runner_lock_is_information_only(tmp_path: Path) -> None:
    proj, runs = _job(tmp_path)
    for content in (b"\x00\xff garbage", b"[1, 2]", b'{"leftovers": "x", "groups": [null, 7]}', b"{" * 5000):
        (runs / "j.runner.lock").write_bytes(content)
        r = _run(proj, "--force")
        assert r.code == 0, (content, r.err)


# --- loose permissions ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757, 0o1777])
def test_the_runner_refuses_a_runs_directory_others_may_write(tmp_path: Path, mode: int) -> None:
    proj, runs = _job(tmp_path)
    runs.chmod(mode)
    before = _snapshot(proj)
    one_line(_run(proj), 2, "writable by other users", "chmod go-w")
    one_line(_run(proj, "--reset"), 2, "writable by other users")
    assert _snapshot(proj) == before
    runs.chmod(0o755)
    assert _run(proj).code == 0


def test_the_seed_verbs_accept_a_group_writable_runs_directory(runs: Path) -> None:
    """Decision: only the runner refuses (it signals processes and runs the job's commands); the
    seed verbs open nothing planted anyway (no links, no FIFOs), and shared group-writable project
    directories are common where scripts call them."""
    runs.chmod(0o775)
    _made(runs)
    assert seed(runs, "unit", "r", "a", "done").code == 0


# --- report -o -------------------------------------------------------------------------------------


def _report(runs: Path, *args: str) -> Called:
    return call(["report", "r", "--dir", str(runs), *args])


def test_report_o_writes_only_a_regular_file(runs: Path, tmp_path: Path) -> None:
    _made(runs)
    victim = _victim(tmp_path)
    link = tmp_path / "link.html"
    link.symlink_to(victim)
    one_line(_report(runs, "-o", str(link)), 1, "not a regular file")
    assert link.is_symlink() and os.readlink(link) == str(victim)
    _untouched(victim)
    one_line(_report(runs, "-o", str(tmp_path)), 1, "not a regular file")
    one_line(_report(runs, "-o", str(tmp_path / "no" / "such" / "x.html")), 1, "no such directory")
    assert not (tmp_path / "no").exists()
    fifo = tmp_path / "fifo.html"
    os.mkfifo(fifo)
    with deadline():
        one_line(_report(runs, "-o", str(fifo)), 1, "not a regular file")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    r = _report(runs, "-o", "-")
    assert r.code == 0 and r.out.startswith(b"<!doctype html>") and r.err == ""
    target = tmp_path / "ok.html"
    target.write_text("old")
    r = _report(runs, "-o", str(target))
    assert r.code == 0 and target.read_bytes().startswith(b"<!doctype html>")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temp left


def test_report_o_dev_full_is_refused_and_untouched(runs: Path) -> None:
    _made(runs)
    before = os.stat("/dev/full")
    one_line(_report(runs, "-o", "/dev/full"), 1, "not a regular file")
    after = os.stat("/dev/full")
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev, after.st_mode) == (
        before.st_ino, before.st_rdev, before.st_mode)


# --- FIFOs and other non-regular files: never waited on -------------------------------------------


@pytest.mark.parametrize("name", ["r.json", "r.journal.jsonl"])
def test_a_fifo_in_place_of_a_runs_file_hangs_nothing(tmp_path: Path, name: str) -> None:
    """Real processes with a timeout each: a blocked open would hang the test, not fail it."""
    runs = tmp_path / "runs"
    runs.mkdir()
    for rid in ("r", "s"):
        ok(cli("init", rid, "--task", "t", "--units", "a", runs=runs))
    (runs / name).unlink()
    os.mkfifo(runs / name)
    for args in (("get", "r"), ("unit", "r", "a", "done"), ("status", "r"), ("resume", "r"),
                 ("report", "r", "-o", "-")):
        assert_error(cli(*args, runs=runs, timeout=10), 1, "not a regular file")
    p = cli("status", "r", "--json", runs=runs, timeout=10)  # the JSON error document, and one line
    assert p.returncode == 1 and "not a regular file" in json.loads(p.stdout)["error"]
    assert p.stderr.count("\n") == 1 and "not a regular file" in p.stderr
    for more in (("status", "--list"), ("status",), ("gc", str(runs)), ("get", "s")):
        p = cli(*more, runs=runs, timeout=10)
        assert p.returncode == 0 and "Traceback" not in p.stderr, (more, p.stderr)
    assert stat.S_ISFIFO((runs / name).lstat().st_mode)


def test_a_fifo_at_a_lock_or_a_log_hangs_nothing(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    ok(cli("init", "r", "--task", "t", "--units", "a", runs=runs))
    (runs / "r.lock").unlink()
    os.mkfifo(runs / "r.lock")
    assert_error(cli("unit", "r", "a", "done", runs=runs, timeout=10), 1, "not a regular file")
    proj, pruns = _job(tmp_path)
    os.mkfifo(proj / "fifo.toml")
    p = subprocess.run([sys.executable, "-m", "resumable", "run", "fifo.toml"], cwd=proj, env=clean_env(),
                       capture_output=True, text=True, timeout=20)
    assert_error(p, 1, "not a regular file")
    os.mkfifo(pruns / "j.runner.lock")
    p = subprocess.run([sys.executable, "-m", "resumable", "run"], cwd=proj, env=clean_env(), capture_output=True,
                       text=True, timeout=20)
    assert_error(p, 1, "not a regular file")

