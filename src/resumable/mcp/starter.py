"""Starting `resumable run` for a job in the background (``--allow-writes`` only): the tool returns at
once with the run's id, and the runner goes on after the agent's session ends.

The runner is the ordinary command, started in the server's directory with the server's store named
explicitly (``--dir`` or ``--store``), so the run records the same launch descriptor, and the same
resume command, as if a person had typed it. Its own output (the runner's lines, not the steps' logs,
which the store keeps) goes to a file in a private directory of this server; ``tail_log`` without a
step reads it. A job whose run a live runner holds is refused before anything starts.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from typing import Any

from resumable import fsio
from resumable.core import recipe
from resumable.errors import InvalidInputError, RefusedError
from resumable.mcp import answers
from resumable.mcp.answers import clip
from resumable.mcp.bound import BoundStore, bounded
from resumable.mcp.explain import load, targets_of

OUTPUT_CHUNK = 10_000


class Started:
    """A runner this server started: its process, the command, and where its output goes."""

    def __init__(self, run_id: str, argv: list[str], proc: subprocess.Popen[bytes], output: str) -> None:
        self.run_id = run_id
        self.argv = argv
        self.proc = proc
        self.output = output
        self.at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    def describe(self) -> dict[str, Any]:
        code = self.proc.poll()  # also reaps it, so a finished runner leaves no zombie
        out: dict[str, Any] = {"pid": self.proc.pid, "startedAt": self.at, "command": recipe.command(self.argv),
                               "running": code is None}
        if code is not None:
            out["exitCode"] = code
        return out

    def output_tail(self, cursor: str | None) -> dict[str, Any]:
        """The end of the runner's output (``next_cursor``: the part before)."""
        from resumable.mcp.logs import fitted, whole_lines

        query = answers.query_key("runner_output", run=self.run_id, pid=self.proc.pid)
        state = answers.read_cursor(cursor, query)
        end = answers.cursor_int(state, "end") if state else None
        fd = fsio.open_regular(self.output, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            stop = size if end is None else min(end, size)
            start = max(0, stop - OUTPUT_CHUNK)
            data = os.pread(fd, stop - start, start)
        finally:
            os.close(fd)
        data, start = whole_lines(data, start)
        text = fitted(data.decode("utf-8", "replace"), OUTPUT_CHUNK)
        start += len(data) - len(text.encode("utf-8", "replace"))
        out: dict[str, Any] = {"id": self.run_id, "runner": self.describe(), "size": size, "from": max(start, 0),
                               "text": text}
        if start > 0:
            out["next_cursor"] = answers.make_cursor(query, {"end": start})
        return out


_OUTPUT_DIR: list[str] = []


def output_dir() -> str:
    """This server's private directory (mode 0700) for the output of the runners it starts."""
    if not _OUTPUT_DIR:
        _OUTPUT_DIR.append(tempfile.mkdtemp(prefix="resumable-mcp-"))
    return _OUTPUT_DIR[0]


def run_job(bound: BoundStore, jobfile: str | None = None, targets: list[str] | None = None, jobs: int = 1,
            keep_going: bool = False) -> dict[str, Any]:
    """Start `resumable run` for a job file in the background; returns at once with the run's id."""
    jobs = bounded(jobs, "jobs", 0, 256)
    if not isinstance(keep_going, bool):
        raise InvalidInputError("keep_going must be true or false")
    chosen = targets_of(targets)
    with bound.lock:
        job, _ = load(bound, jobfile, chosen)
        holder = bound.backend.lease(job.name).holder()
        if holder is not None:
            raise RefusedError(f"run {job.name!r} is held by a live runner (pid {holder.get('pid', '?')} on"
                               f" {holder.get('host', '?')}): wait for it to finish (watch_run), or stop it")
        before = bound.started.get(job.name)
        if before is not None and before.proc.poll() is None:
            raise RefusedError(f"this server already started a runner for {job.name!r} (pid {before.proc.pid}),"
                               " and it is still running")
        rel = os.path.relpath(job.source, bound.root)
        args = ["run", rel, *chosen, *bound.option]
        if jobs != 1:
            args += ["-j", str(jobs)]
        if keep_going:
            args.append("--keep-going")
        output = os.path.join(output_dir(), f"{job.name}.{time.time_ns()}.log")
        fd = fsio.open_regular(output, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            proc = subprocess.Popen([sys.executable, "-m", "resumable", *args], cwd=bound.root,
                                    stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, start_new_session=True,
                                    close_fds=True)
        finally:
            os.close(fd)
        started = Started(job.name, ["resumable", *args], proc, output)
        bound.started[job.name] = started
    return {"id": job.name, "runner": started.describe(), "steps": len(job.steps),
            "next": clip("the runner works in the background: ask run_summary (or watch_run) for its progress,"
                         " tail_log without a step for its output")}
