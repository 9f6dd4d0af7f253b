"""A job built in Python: ``resumable run pipeline.py`` runs the file (as doit runs ``dodo.py``)
and runs the job it builds, for shapes a table cannot say.

    import resumable

    job = resumable.Job("shards", timeout="1h")          # [job] keys as keywords
    for name in ("val", "test"):
        job.step(f"evaluate-{name}", run=f"python eval.py {name}", needs=["train"])

``Job.step`` takes the job file's step keys as keywords (``run``, ``needs``, ``inputs``,
``params``, ``files``...), and the job they make is read by the very code that reads a TOML job
file (``runner.jobfile``): the same checks, each problem at the line of the call that made it, the
same families, the same kept answers.

The file runs once per invocation, with its own directory as the current directory and first on
``sys.path`` (so its local imports work), as a module named after it (so an ``if __name__ ==
"__main__":`` block is left alone). It must make one job (``job`` is taken when it makes several).
What is fingerprinted, and what the kept answers are keyed by, is the file's bytes and the job it
built: editing the file, or a change in what it builds (a file it lists), is another key.

An exception in the file, or a file that makes no job, is one line with the file and the line,
never a traceback.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from resumable.errors import InvalidInputError
from resumable.runner.joblocate import Locator

PYTHON_SUFFIX = ".py"
_STEP_TABLE = "steps."


def is_python(path: str | os.PathLike[str]) -> bool:
    return os.fspath(path).endswith(PYTHON_SUFFIX)


class JobLike(Protocol):
    """What a job made in Python gives (``runner.jobbuild.Job``)."""

    site: tuple[str, int]  # where it was made
    sites: dict[str, tuple[str, int]]  # where each step was added
    twice: list[tuple[str, str, int]]  # a step id added again: (id, file, line)

    @property
    def name(self) -> str | None: ...

    def mapping(self) -> dict[str, Any]: ...


# Every job made while a job file runs (the one it makes is found so): ``jobbuild.Job`` adds itself
# (``made``), and only then: a program that makes jobs itself holds no list of them here.
MADE: list[JobLike] = []
_RUNNING: list[bool] = [False]


def made(job: JobLike) -> None:
    if _RUNNING[0]:
        MADE.append(job)


class CallSites(Locator):
    """Lines of the ``job.step(...)`` calls, as a job file's lines are found (``joblocate``)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, "")
        self.lines: dict[str, int] = {}

    def line_of(self, table: str, key: str | None = None) -> int | None:
        return self.lines.get(table) or None

    def where(self, table: str, key: str | None = None, line: int | None = None) -> str:
        if line is None:
            line = self.line_of(table, key)
        loc = f"{self.path}:{line}" if line else str(self.path)
        what = f"step {table[len(_STEP_TABLE):]!r}" if table.startswith(_STEP_TABLE) else "the job"
        return f"{loc}: {what}" + (f" {key}" if key else "")


class Built:
    """What a Python job file built: the document, the lines of its calls, and the bytes the caches
    key it by."""

    __slots__ = ("document", "key", "sites", "twice")

    def __init__(self, document: Mapping[str, Any], sites: CallSites, key: bytes,
                 twice: list[tuple[str, int]]) -> None:
        self.document = document
        self.sites = sites
        self.key = key
        self.twice = twice


# Built once per invocation (``forget`` starts another): the caches' key and the job are read
# from the same run of the file.
_BUILT: dict[str, Built | InvalidInputError] = {}


def forget() -> None:
    _BUILT.clear()


@contextmanager
def preset(path: str, job: JobLike) -> Iterator[None]:
    """Within the block, the job of the file ``path`` is ``job`` (``Job.run``: the file that made it
    is not run again)."""
    from resumable import fsio

    key = os.path.realpath(path)
    # Keyed as a run of the file would key it: the same answers, whichever way it is run.
    _BUILT[key] = _built_of(job, Path(path), fsio.read_bytes(path, follow=True))
    try:
        yield
    finally:
        _BUILT.pop(key, None)


def build(path: Path) -> Built:
    """The job the file at ``path`` builds (run once per invocation); InvalidInputError, one line,
    when it raises or builds none."""
    key = os.path.realpath(path)
    got = _BUILT.get(key)
    if got is None:
        try:
            got = _run_file(path)
        except InvalidInputError as exc:
            got = exc
        _BUILT[key] = got
    if isinstance(got, InvalidInputError):
        raise got
    return got


def _run_file(path: Path) -> Built:
    from resumable import fsio

    try:
        source = fsio.read_bytes(str(path), follow=True)
    except FileNotFoundError:
        from resumable.errors import UsageError

        raise UsageError(f"no job file {str(path)!r}") from None
    except OSError as exc:
        raise InvalidInputError(f"{path}: cannot read job file: {exc}") from exc
    try:
        code = compile(source, str(path.resolve()), "exec")
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None)
        raise InvalidInputError(f"{path}:{line or 0}: {type(exc).__name__}: {getattr(exc, 'msg', exc)}") from None
    made = _execute(code, path)
    return _built_of(made, path, source)


def _execute(code: Any, path: Path) -> JobLike:
    """Run the file's code in its directory; the job it made."""
    folder = str(path.resolve().parent)
    env: dict[str, Any] = {"__name__": path.stem, "__file__": str(path.resolve()), "__builtins__": __builtins__}
    MADE.clear()
    _RUNNING[0] = True
    here = os.getcwd()
    before = set(sys.modules)
    sys.path.insert(0, folder)
    try:
        os.chdir(folder)
        exec(code, env)  # running the user's job file is what `resumable run x.py` is for
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # SystemExit too: the file's error, told in one line
        raise InvalidInputError(_where(exc, path)) from None
    finally:
        _RUNNING[0] = False
        os.chdir(here)
        if folder in sys.path:
            sys.path.remove(folder)
        _forget_modules(before, folder)
    made = list(MADE)
    MADE.clear()
    named = env.get("job")
    chosen = [i for i, j in enumerate(made) if j is named]
    if chosen:
        return made[chosen[0]]
    if len(made) == 1:
        return made[0]
    if not made:
        raise InvalidInputError(f"{path}: builds no resumable.Job; make one, like: job = resumable.Job(\"name\");"
                                " job.step(\"hello\", run=\"echo hello\")")
    names = ", ".join(repr(j.name) for j in made[:5])
    raise InvalidInputError(f"{path}: builds {len(made)} jobs ({names}); name the one to run `job`")


def _forget_modules(before: set[str], folder: str) -> None:
    """The job file's own modules (imported from its directory by this run of it) are forgotten:
    the next run of the file in this process (``run_job`` in a long-lived program) imports them
    anew, as a new ``resumable run`` would."""
    inside = folder.rstrip(os.sep) + os.sep
    for name in set(sys.modules) - before:
        file = getattr(sys.modules[name], "__file__", None)
        if isinstance(file, str) and os.path.realpath(file).startswith(inside):
            del sys.modules[name]


def _where(exc: BaseException, path: Path) -> str:
    """``file:line: Error: message`` at the last line of the job file the exception went through."""
    line = 0
    target = os.path.realpath(path)
    tb = exc.__traceback__
    while tb is not None:
        if os.path.realpath(tb.tb_frame.f_code.co_filename) == target:
            line = tb.tb_lineno
        tb = tb.tb_next
    text = " ".join(str(exc).split())
    return f"{path}:{line}: {type(exc).__name__}" + (f": {text}" if text else "")


def _locator(job: JobLike, path: Path) -> CallSites:
    """The lines of the calls made in the file at ``path`` (a call made elsewhere has none)."""
    target = os.path.realpath(path)
    sites = CallSites(path)

    def line(site: tuple[str, int]) -> int:
        return site[1] if site[0] and os.path.realpath(site[0]) == target else 0

    sites.lines["job"] = line(job.site)
    for sid, site in job.sites.items():
        sites.lines[_STEP_TABLE + sid] = line(site)
    return sites


def _built_of(job: JobLike, path: Path, source: bytes) -> Built:
    import json

    document = job.mapping()
    encoded = json.dumps(document, default=repr, separators=(",", ":")).encode("utf-8", "surrogateescape")
    key = hashlib.sha256(source).hexdigest().encode() + b"\n" + encoded
    twice = [(sid, line) for sid, file, line in job.twice if os.path.realpath(file) == os.path.realpath(path)]
    return Built(document, _locator(job, path), key, twice)
