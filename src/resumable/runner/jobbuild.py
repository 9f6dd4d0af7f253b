"""``resumable.Job``: a job built in Python, a step at a time, with the job file's keys; the
file that builds it runs with ``resumable run FILE.py`` (``runner.jobpython``), or the program that
built it runs it with ``Job.run()``. Nothing here is read until a job is made: the low-level verbs
import ``resumable.api`` and must not pay for the job file's reader."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from resumable.errors import InvalidInputError
from resumable.runner.jobpython import PYTHON_SUFFIX, made, preset


class Job:
    """A job built in Python (``resumable.Job``): ``step(id, **keys)`` adds a step with the job
    file's keys; ``resumable run FILE.py`` runs the job a file makes, ``run()`` runs it from the
    program that made it.

        job = resumable.Job("shards", timeout="1h")      # [job] keys as keywords
        job.step("download", files="raw/{shard}.csv", run="sh dl.sh {shard}",
                 artifacts=["data/{shard}.csv"])
        job.step("merge", needs=["download"], run="cat {download.artifacts} > all.csv")"""

    def __init__(self, name: str | None = None, **job: Any) -> None:
        self._job: dict[str, Any] = {k: _plain(v) for k, v in job.items()}
        if name is not None:
            self._job["name"] = name
        self._steps: dict[str, dict[str, Any]] = {}
        self.sites: dict[str, tuple[str, int]] = {}
        self.twice: list[tuple[str, str, int]] = []
        self.site = _caller()
        made(self)

    @property
    def name(self) -> str | None:
        name = self._job.get("name")
        return name if isinstance(name, str) else None

    def step(self, step_id: str, /, **keys: Any) -> str:
        """Add a step (keys as in a job file's ``[steps.<id>]``: ``run`` is required); returns its id,
        for ``needs``. A step with ``params`` or ``files`` is a family (``runner.families``)."""
        site = _caller()
        if step_id in self._steps:
            self.twice.append((step_id, *site))  # the first stays: the second is reported
            return step_id
        self._steps[step_id] = {k: _plain(v) for k, v in keys.items()}
        self.sites[step_id] = site
        return step_id

    def run(self, **options: Any) -> int:
        """Run this job as ``resumable run FILE.py`` would, FILE being the file that made it (not
        run again), and return the exit code; options as ``resumable.run_job``'s (``jobs=2``,
        ``targets=["clean"]``, ``dry_run=True``...)."""
        from resumable.runner.options import RunOptions
        from resumable.runner.session import run

        file = self.site[0]
        if not file.endswith(PYTHON_SUFFIX) or not os.path.isfile(file):
            raise InvalidInputError("Job.run() runs a job made in a .py file: make it in one (or run that"
                                    " file with `resumable run FILE.py`)")
        opts = RunOptions.from_api(file, **options)
        with preset(file, self):
            return run(opts, keep_built=True)

    def mapping(self) -> dict[str, Any]:
        """The job as the document a TOML job file parses to."""
        out: dict[str, Any] = {"steps": dict(self._steps)}
        if self._job:
            out["job"] = dict(self._job)
        return out


def _plain(value: Any) -> Any:
    """Python values as the TOML document would hold them: tuples, ranges and other sequences as
    lists, sets sorted, paths as strings."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (str, bytes, int, float, bool)) or value is None:
        return value
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return [_plain(v) for v in sorted(value, key=repr)]  # an order that is the same every run
    if isinstance(value, Iterable):
        return [_plain(v) for v in value]
    return value


def _caller() -> tuple[str, int]:
    """(file, line) of the call into the API: where a problem of the step is reported."""
    import inspect

    frame = inspect.currentframe()
    here = __file__
    while frame is not None and (frame.f_code.co_filename == here or frame.f_code.co_filename.endswith(
            os.path.join("resumable", "api.py"))):
        frame = frame.f_back
    return (frame.f_code.co_filename, frame.f_lineno) if frame is not None else ("", 0)
