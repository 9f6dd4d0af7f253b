"""``resumable doctor``: what a user runs when something is odd.

It looks at the installation (version, Python, git), the store in use (the runs directory and how
it was found, or the PostgreSQL database and whether it answers), the file system under the runs
directory (does fsync reach the disk, do runs survive a reboot, does flock work), leftovers (temp
files of killed writers, processes a dead runner left running) and the runs that need someone.
Each finding is one line; a problem says what to do. Exit 0 when nothing needs doing, 1 otherwise:
a problem is what needs someone (a broken store, leftovers, a runner that is gone); what the runs'
own steps did is a warning at most, so `doctor` stays a health check a CI job can run.

Read-only, as ``status`` is: it never writes, creates or signals anything, takes no lock (whether a
runner holds a run is read from the kernel's lock table, ``store.files.survey``), and spawns nothing
but ``git --version`` (what it reads from the machine: ``cli.hostinfo``). A database is
only connected to; its runs are listed only when its schema is current, because the first real
use of an older schema upgrades it.
"""

from __future__ import annotations

import os
import stat
import sys
from typing import TYPE_CHECKING, Any

import click

from resumable import __version__, store
from resumable.cli.durations import at_least
from resumable.cli.errors import command_class
from resumable.cli.hostinfo import carriers, mount_of
from resumable.core import recipe
from resumable.core.text import escape_controls
from resumable.errors import ResumableError
from resumable.procfs import start_time
from resumable.store.backend import LeaseState, LeaseSurvey
from resumable.store.values import LEASE_FORMAT
from resumable.view import discovery, liveness

if TYPE_CHECKING:
    from collections.abc import Mapping

    from resumable.store.backend import Backend

OK, INFO, WARNING, PROBLEM = "ok", "info", "warning", "problem"
MEMORY_FS = frozenset({"tmpfs", "ramfs", "devtmpfs"})
NETWORK_FS = frozenset({"nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "ceph", "glusterfs", "lustre", "gpfs",
                        "afs", "beegfs", "davfs", "virtiofs"})
# Until resumable-runs is on the package index, it is installed from a checkout: so are its fixes.
UPGRADE = "pip install -U . (or pipx install --force .) in a checkout of a newer release"
_MAX_LINES = 20  # runs listed one per line before "... and N more"


class Finding:
    __slots__ = ("check", "fix", "level", "message")

    def __init__(self, check: str, level: str, message: str, fix: str = "") -> None:
        self.check = check
        self.level = level
        self.message = message
        self.fix = fix

    def to_json(self) -> dict[str, str]:
        out = {"check": self.check, "level": self.level, "message": self.message}
        return {**out, "fix": self.fix} if self.fix else out


@click.command("doctor", cls=command_class(), short_help="Check the installation, the store and the runs.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: {version, healthy, checks: [...]}.")
@click.option("--dir", "runs_dir", metavar="DIR", default=None,
              help="The runs directory (default: RESUMABLE_DIR, else the nearest .resumable/runs).")
@click.option("--store", "store_url", metavar="URL", default=None,
              help="A PostgreSQL store (default: RESUMABLE_STORE, else the runs directory).")
@click.option("--timeout", callback=at_least(0.1), default="3", show_default=True, metavar="DURATION",
              help="How long to wait for the database to answer.")
@click.pass_context
def doctor_command(ctx: click.Context, as_json: bool, runs_dir: str | None, store_url: str | None,
                   timeout: float) -> None:
    """Check the installation, the store and the runs; say what needs doing. Read-only: writes,
    locks and signals nothing. Exit 0 when healthy, 1 when a line marked "problem" needs doing."""
    findings = [*installation(), *environment()]
    try:
        url = None if runs_dir is not None else store.store_url(store_url)
    except ResumableError as exc:
        findings.append(Finding("store", PROBLEM, str(exc)))
    else:
        findings += database(url, timeout) if url is not None else runs_directory(runs_dir)
    healthy = not any(f.level == PROBLEM for f in findings)
    if as_json:
        from resumable.core.jsonio import dumps_pretty

        click.echo(dumps_pretty({"version": __version__, "healthy": healthy,
                                 "checks": [f.to_json() for f in findings]}).decode())
    else:
        width = max(len(f.check) for f in findings)
        for f in findings:
            text = f"{f.message} — {f.fix}" if f.fix else f.message
            click.echo(escape_controls(f"{f.level:<8} {f.check:<{width}}  {text}"))
        problems = sum(f.level == PROBLEM for f in findings)
        click.echo("healthy: nothing needs doing" if healthy else
                   f"{problems} problem{'s' if problems != 1 else ''}: each line marked \"problem\" says what to do")
    ctx.exit(0 if healthy else 1)


# --- the installation and the environment -------------------------------------------------------


def installation() -> list[Finding]:
    out = [Finding("version", OK, f"resumable {__version__}, Python {sys.version.split()[0]} ({sys.executable})")]
    from importlib import metadata

    try:
        installed = metadata.version("resumable-runs")
    except metadata.PackageNotFoundError:
        installed = None
    if installed is not None and installed != __version__:
        out.append(Finding("version", WARNING, f"the installed metadata says {installed}, the code {__version__}",
                           "reinstall from the checkout: pip install --force-reinstall ."))
    out.append(git())
    return out


def git() -> Finding:
    import shutil
    import subprocess

    path = shutil.which("git")
    if path is None:
        return Finding("git", WARNING, "git not found on PATH", "install git: `resumable reconcile` needs it")
    try:
        proc = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10, check=False,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        return Finding("git", WARNING, f"{path} --version failed: {exc}", "check the git installation")
    if proc.returncode != 0:
        return Finding("git", WARNING, f"{path} --version exited {proc.returncode}", "check the git installation")
    return Finding("git", OK, f"{proc.stdout.strip()} ({path})")


def environment() -> list[Finding]:
    out = []
    if os.environ.get("RESUMABLE_DEBUG"):
        out.append(Finding("environment", INFO, "RESUMABLE_DEBUG is set: internal errors show tracebacks"))
    return out


# --- PostgreSQL ----------------------------------------------------------------------------------


def redact(url: str) -> str:
    """The URL without its password (in the authority or as a ``password=`` parameter)."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if parts.password is not None:
            netloc = f"{parts.username or ''}:***@{netloc.rsplit('@', 1)[1]}"
        query = urlencode([(k, "***" if k == "password" else v) for k, v in parse_qsl(parts.query)], safe="*")
        return urlunsplit(parts._replace(netloc=netloc, query=query))
    except ValueError:
        return "the database URL (unparsable)"


def database(url: str, timeout: float) -> list[Finding]:
    shown = redact(url)
    out = [Finding("store", OK, f"PostgreSQL database {shown} (from --store or RESUMABLE_STORE)")]
    import importlib

    try:
        psycopg: Any = importlib.import_module("psycopg")  # the optional extra (Any: it may be absent)
    except ImportError:
        return [*out, Finding("store", PROBLEM, "the PostgreSQL extra is not installed (no psycopg)",
                              "install it from the checkout: pip install '.[postgres]'")]
    try:
        # Connecting says whether the server answers and lets us in; no statement is sent.
        with psycopg.connect(url, connect_timeout=max(1, round(timeout)), application_name="resumable doctor") as conn:
            version = conn.info.server_version
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return [*out, Finding("store", PROBLEM, f"{shown} does not answer: {first}",
                              "is the server running? check --store / RESUMABLE_STORE")]
    out.append(Finding("store", OK, f"the server answers (PostgreSQL {version // 10000}.{version % 10000})"))
    try:
        backend = store.open_backend(url=url)
    except ResumableError as exc:
        return [*out, Finding("store", PROBLEM, str(exc))]
    try:
        found, current = schema(backend)
        out += found
        if current:
            out += runs(backend)
    finally:
        backend.close()
    return out


def schema(backend: Any) -> tuple[list[Finding], bool]:
    """(findings, whether the schema is the one this resumable writes). Read with the store's own
    ``schema_version`` / ``schema_latest``, which apply nothing."""
    current, latest = getattr(backend, "schema_version", None), getattr(backend, "schema_latest", None)
    if current is None or latest is None:
        return [], False
    try:
        have, want = current(), latest()
    except ResumableError as exc:
        return [Finding("schema", PROBLEM, str(exc))], False
    if have is None:
        return [Finding("schema", INFO, f"resumable has not used this database yet (schema {want} is created"
                        " on first use, or by `resumable db upgrade`)")], False
    if have > want:
        return [Finding("schema", PROBLEM, f"schema version {have} is newer than this resumable knows ({want})",
                        UPGRADE)], False
    if have < want:
        return [Finding("schema", INFO, f"schema version {have}; this resumable upgrades it to {want} on first"
                        " use (or run `resumable db upgrade`)")], False
    return [Finding("schema", OK, f"schema version {have}")], True


# --- the runs directory --------------------------------------------------------------------------


def runs_directory(runs_dir: str | None) -> list[Finding]:
    try:
        backend = store.open_backend(runs_dir)
    except ResumableError as exc:
        return [Finding("store", PROBLEM, str(exc))]
    root = backend.root
    out = [Finding("store", OK, backend.description)]
    try:
        st = os.stat(root)
    except FileNotFoundError:
        out.append(Finding("store", INFO, "the runs directory does not exist yet: the first run creates it"))
        return [*out, *filesystem(root)]
    except OSError as exc:
        return [*out, Finding("store", PROBLEM, f"cannot use {root}: {exc.strerror}", "check its permissions")]
    if not stat.S_ISDIR(st.st_mode):
        return [*out, Finding("store", PROBLEM, f"{root} is not a directory", "move it away, or use --dir")]
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        out.append(Finding("store", PROBLEM, f"{root} is writable by other users (mode {stat.S_IMODE(st.st_mode):o});"
                           " `resumable run` refuses it", f"chmod go-w {root}"))
    out += filesystem(root)
    try:
        leases = backend.runner_leases() if isinstance(backend, LeaseSurvey) else []
        out += leftovers(root, leases)
    except (ResumableError, OSError) as exc:
        return [*out, Finding("store", PROBLEM, str(exc) if isinstance(exc, ResumableError) else
                              f"cannot list {root}: {exc.strerror or exc}", "check its permissions")]
    out += runs(backend)
    return out


def filesystem(root: str) -> list[Finding]:
    found = mount_of(root)
    if found is None:
        return [Finding("filesystem", INFO, "unknown (no /proc/self/mounts): check that fsync reaches the disk")]
    fstype, dev, mnt, options = found
    where = f"{fstype} ({dev} on {mnt})"
    out = []
    if fstype in MEMORY_FS:
        out.append(Finding("filesystem", WARNING, f"{where} is memory: fsync is a no-op and runs do not survive"
                           " a reboot", "for durable runs, use a runs directory on a disk (--dir / RESUMABLE_DIR)"))
    elif fstype in NETWORK_FS or fstype.startswith("fuse"):
        out.append(Finding("filesystem", WARNING, f"{where} is a network or FUSE file system: flock may not"
                           " exclude writers on other hosts and fsync may stop at the client",
                           "run a run's writers on one host, or use the PostgreSQL store"))
    if {"nobarrier", "barrier=0"} & options:
        out.append(Finding("filesystem", WARNING, f"{where} is mounted nobarrier: fsync does not flush the"
                           " drive's cache, a power cut can lose acknowledged writes", "remount with barriers"))
    if "ro" in options:
        out.append(Finding("filesystem", PROBLEM, f"{where} is mounted read-only: runs cannot be written",
                           "use a writable runs directory"))
    if not out:
        out.append(Finding("filesystem", OK, f"{where}: fsync reaches the disk"))
    try:
        vfs = os.statvfs(root if os.path.exists(root) else mnt)
    except OSError:
        return out
    free = vfs.f_bavail * vfs.f_frsize
    if free < 100 << 20:
        out.append(Finding("filesystem", WARNING, f"{free >> 20} MiB free under {mnt}",
                           "free some space: a write that finds the disk full is refused"))
    return out


# --- leftovers: processes of dead runners, temp files ---------------------------------------------


def leftovers(root: str, leases: list[LeaseState]) -> list[Finding]:
    out = []
    for lease in leases:
        if lease.newer is not None:
            # `resumable run` refuses it; what it says dead runners left is in a format not ours.
            out.append(Finding("leftovers", PROBLEM, f"run {lease.run_id}: its runner lease {lease.where} was"
                               f" written by a newer resumable (format {lease.newer}, this one reads up to"
                               f" {LEASE_FORMAT})", UPGRADE))
    dead = {s: lease for lease in leases if lease.held is False and lease.newer is None for s in lease.secrets}
    for secret, pids in sorted(carriers(set(dead)).items(), key=lambda kv: dead[kv[0]].run_id):
        run_id = dead[secret].run_id
        out.append(Finding("leftovers", PROBLEM, f"run {run_id}: {len(pids)} process(es) started by a runner that is"
                           f" gone still run (pids {', '.join(map(str, sorted(pids)[:10]))})",
                           "the next `resumable run` of that job stops them first; or stop them yourself"))
    stale = []
    with os.scandir(root) as entries:
        for e in entries:
            # A killed writer's temp file: .<run>.json.tmp.<pid> (its pid no longer alive).
            if e.name.startswith(".") and ".tmp." in e.name:
                pid = e.name.rsplit(".", 1)[1]
                if not (pid.isdigit() and start_time(int(pid)) is not None):
                    stale.append(e.name)
    if stale:
        out.append(Finding("leftovers", WARNING, f"{len(stale)} temp file(s) left by killed writers in {root}"
                           f" ({', '.join(sorted(stale)[:3])}{' …' if len(stale) > 3 else ''})",
                           "harmless: the next write to that run removes them"))
    if not out:
        out.append(Finding("leftovers", OK, "no temp files or processes left behind"))
    return out


# --- runs that need someone ------------------------------------------------------------------------


def runs(backend: Backend) -> list[Finding]:
    """The runs that need someone (a problem) and those whose outcome is worth a look (a warning): a
    failed step is the job's news, not the installation's, so `doctor` stays a health check a CI job
    can run. What is said about a live run is what `status` says (``view.liveness``)."""
    try:
        entries = backend.list_runs()
    except ResumableError as exc:
        return [Finding("runs", PROBLEM, str(exc))]
    option = discovery.store_option(backend)
    out = []
    running = 0
    for entry in entries:
        doc = entry.doc
        rid = entry.run_id
        if doc is None and entry.newer:
            # Written by a newer resumable (its document or its journal records): refused, not damaged.
            out.append(Finding("runs", PROBLEM, str(entry.error), UPGRADE))
            continue
        if doc is None:
            out.append(Finding("runs", PROBLEM, f"{entry.location} cannot be read: {entry.error}",
                               f"see the error; `{_status(rid, option)}` shows the file"))
            continue
        status = doc.get("status")
        if status == "needs_attention":
            out.append(Finding("runs", WARNING, f"run {rid} needs attention",
                               f"`{_status(rid, option)}` says what failed; `{_status(rid, option, '--resume')}`"
                               " how to resume"))
        elif status in ("running", "initializing"):
            verdict = liveness.judge(doc, discovery.lease_of(backend, entry))
            if verdict is None or verdict.live:
                running += 1
            else:
                out.append(_not_worked_on(verdict, doc, entry.location, option))
    if len(out) > _MAX_LINES:
        more = len(out) - _MAX_LINES
        out = [*out[:_MAX_LINES], Finding("runs", INFO, f"… and {more} more",
                                          f"`{recipe.command(['resumable', 'status', '--list', *(option or ())])}`")]
    summary = f"{len(entries)} run{'s' if len(entries) != 1 else ''}, {running} running"
    return [Finding("runs", OK if not out else INFO, summary), *out]


def _status(run_id: str, option: tuple[str, str] | None, *extra: str) -> str:
    return recipe.command(["resumable", "status", run_id, *extra, *(option or ())])


def _not_worked_on(verdict: liveness.Verdict, doc: Mapping[str, Any], location: str,
                   option: tuple[str, str] | None) -> Finding:
    """A live run nothing works on: a runner that is gone needs someone (a problem); a script that
    ended without finishing, or a submitted run waiting for workers, is worth a look (a warning)."""
    rid, status = str(doc.get("id")), doc.get("status")
    step = liveness.next_step(verdict, doc, file=location, store=option)
    if verdict.state == liveness.STOPPED:
        return Finding("runs", PROBLEM, f"run {rid} is {status} but its runner is gone (stopped)",
                       f"resume it: `{_status(rid, option, '--resume')}` prints the command")
    why = "the script ended without run.finish()" if verdict.state == liveness.UNFINISHED else \
        "no worker holds a step of it"
    return Finding("runs", WARNING, f"run {rid} is {status} but {why}",
                   f"{step[0]}: {step[1]}" if step is not None else "")
