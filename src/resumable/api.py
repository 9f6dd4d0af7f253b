"""The Python API: everything the CLI can do, as methods of a ``Run`` and a few functions.

    >>> import resumable
    >>> run = resumable.open_run("nightly", runs_dir="/tmp/runs")
    >>> run.init("migrate the users table", units=["extract", "load"])
    'nightly'
    >>> run.unit("extract", "done")
    >>> run.resume_set()["eligible"]
    ['load']

Every write is an event committed to the run's store and durable before the method returns.
Refusals raise ``RefusedError`` (exit 2 in the CLI), bad input ``InvalidInputError``.
"""

from __future__ import annotations

import os

from resumable import store
from resumable.core import verbs
from resumable.core.model import check_run_id, default_run_id, summary
from resumable.errors import InvalidInputError, NewerFormatError, NoRunError, RefusedError, ResumableError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from pathlib import Path
    from types import TracebackType
    from typing import Any, ParamSpec, TypeVar, overload

    from resumable.core.types import Event, ResumeRecipe, ResumeSet, RunDocument, Summary
    from resumable.durable.attempts import StepFailed
    from resumable.durable.codec import Serializer
    from resumable.runner.jobbuild import Job as Job
    from resumable.runner.options import RunOptions
    from resumable.store.backend import Backend, RunHandle

    P = ParamSpec("P")
    R = TypeVar("R")

__all__ = ["Job", "Run", "find_runs_dir", "gc", "open_run", "read_doc", "run_job"]

validate_launch = verbs.validate_launch

# runner.process.TOKEN_ENV (not imported: it would load subprocess on every low-level verb): the
# runner's secret, in the environment of every step it starts.
RUNNER_TOKEN_ENV = "RESUMABLE_RUNNER_TOKEN"


def find_runs_dir(explicit: str | os.PathLike[str] | None = None, *, create: bool = False) -> Path:
    """``explicit`` (``--dir``), else ``$RESUMABLE_DIR``, else the nearest ``.resumable/runs`` (or
    ulpi's ``.ulpi/runs``) walking up from the current directory, as git finds ``.git``, else
    ``./.resumable/runs``."""
    from pathlib import Path

    found = Path(store.open_backend(explicit).root)
    if create:
        found.mkdir(parents=True, exist_ok=True)
    return found


class Run:
    """One run, with a method per verb. Not thread-safe: one per thread (any number of processes
    and threads may hold a Run on the same run at once)."""

    def __init__(self, handle: RunHandle, backend: Backend | None = None, *, by_path: bool = False) -> None:
        self.handle = handle
        self.backend = backend
        self._by_path = by_path  # opened by a .json path (ulpi's form), not by run id
        self._allow_pickle = False  # open_run(..., allow_pickle=True): the default of its steps
        self._durable = False  # opened with task=: Ctrl-C under ``with`` is one line and exit 130
        self._interrupted = False  # Ctrl-C came while open_run opened it (durable.interrupts)

    @property
    def run_id(self) -> str:
        return self.handle.run_id

    @property
    def location(self) -> str:
        """Where the run lives: its snapshot file's path in a runs directory."""
        return self.handle.location

    @property
    def path(self) -> Path:
        from pathlib import Path

        return Path(self.handle.location)

    @property
    def snapshot_error(self) -> str | None:
        """Set when the last write was durable but the snapshot view could not be refreshed."""
        return self.handle.warning

    def exists(self) -> bool:
        return self.handle.exists()

    # -- reads --
    @property
    def doc(self) -> RunDocument:
        """The current document (treat it as read-only; it changes as you write)."""
        return self.handle.read()

    def refresh(self) -> RunDocument:
        return self.handle.read()

    def summary(self) -> Summary:
        return summary(self.handle.read())

    def resume_set(self) -> ResumeSet:
        from resumable.core.plan import resume_set

        return resume_set(self.handle.read())

    def status_text(self, *, width: int = 100) -> str:
        """The default view of ``resumable status`` for this run, as plain text."""
        import time

        from resumable.view.status import plain, render_status

        lines = render_status(self.handle.read(), file=self.location, now=time.time(), width=width)
        return "\n".join(plain(line) for line in lines)

    def resume_recipe(self) -> ResumeRecipe:
        """How to resume this run: ``resumable status --resume --json``'s descriptor."""
        from resumable.core.recipe import classify

        return classify(self.handle.read(), self.location, here=os.getcwd())

    def report_html(self) -> str:
        """``resumable report``'s self-contained HTML page for this run."""
        from resumable.view.report import build_html

        return build_html(self.handle.read(), file=self.location)

    def history(self, since: int = 0) -> list[dict[str, Any]]:
        """Every recorded event after sequence number ``since``, oldest first (``resumable log``)."""
        return [{"seq": r.seq, **r.event} for r in self.handle.history(since)]

    # -- writes --
    def _commit(self, event: Event, *, lazy_view: bool = False) -> Any:
        return self.handle.commit([event], lazy_view=lazy_view)[0]

    def _refuse_under_a_runner(self, verb: str) -> None:
        """A live runner owns its run's units and outcome: a unit state, a finalize or an init
        written by another process would be silently overwritten by the runner's next write (or
        would pull the run from under it), so it is refused (exit 2) naming the runner. Its own
        steps are let through: they carry the runner's secret in their environment. Findings,
        phases and validation never conflict with the runner and stay open to everyone."""
        probe = getattr(self.handle, "runner_holder", None)
        holder = probe() if probe is not None else None
        if holder is None:
            return
        secret = holder.get("secret")
        if isinstance(secret, str) and secret and os.environ.get(RUNNER_TOKEN_ENV) == secret:
            return
        if holder.get("pid") == os.getpid():
            return  # this process holds the lease itself (durable functions' session)
        raise RefusedError(
            f"run {self.run_id!r} is held by a live runner (pid {holder.get('pid', '?')} on"
            f" {holder.get('host', '?')}, started {holder.get('startedAt', '?')}): a {verb} written now"
            " would be overwritten by the runner; wait for it to finish or stop it (Ctrl-C / kill"
            " that pid)")

    def init(
        self,
        task: str,
        *,
        units: Sequence[str] = (),
        run_id: str | None = None,
        launch: Mapping[str, Any] | None = None,
        required_phases: Sequence[str] = (),
        require_validation: bool = False,
    ) -> str:
        """Start the run (refused, exit 2, while a live run has this id; a finished run is
        archived first). Returns the run id."""
        if not isinstance(task, str) or not task.strip():
            raise InvalidInputError('init requires a task description (--task "<desc>")')
        own = self.handle.run_id
        if not self._by_path:
            if run_id is not None and run_id != own:
                raise InvalidInputError(
                    f"--id {run_id} does not match the run named {own}; give one or the other")
            run_id = own
        run_id = check_run_id(run_id) if run_id is not None else default_run_id()
        event = verbs.init(task, run_id, units=units, launch=launch, required_phases=required_phases,
                           require_validation=require_validation)
        self._refuse_under_a_runner("init")
        self._refuse_newer_run()
        self._commit(event)
        return run_id

    def _refuse_newer_run(self) -> None:
        """NewerFormatError when the run in place was written by a newer resumable: an init would
        archive it on the strength of a status this version cannot vouch it understands."""
        try:
            if self.handle.exists():
                self.handle.load()  # the store's handles refuse a newer run on load
        except NewerFormatError:
            raise
        except ResumableError:
            pass  # a damaged run in place is the store's to judge, under the run's lock

    def begin(self, launch: Mapping[str, Any] | None = None) -> None:
        """(Re)open the run for a new working session: status running, launch recorded."""
        self._commit(verbs.begin(launch))

    def unit(
        self,
        unit_id: str,
        state: str,
        *,
        note: str | None = None,
        deps: Sequence[str] | None = None,
        attempt: Mapping[str, Any] | None = None,
        fields: dict[str, Any] | None = None,
        lazy_view: bool = False,
    ) -> None:
        """Set a unit's state. ``lazy_view=True`` skips rewriting a small run's snapshot file for
        this write (it is durable in the journal and every resumable reader sees it)."""
        event = verbs.unit(unit_id, state, note=note, deps=deps, attempt=attempt, fields=fields)
        self._refuse_under_a_runner("unit state")
        self.handle.commit([event], lazy_view=lazy_view)  # the commonest write: one call fewer

    def invalidate(self, unit_id: str, reason: str) -> None:
        """Send a unit (typically done) back to pending, recording why: the only way a done unit
        is ever re-run."""
        event = verbs.invalidate(unit_id, reason)
        self._refuse_under_a_runner("invalidation")
        self._commit(event)

    def phase(self, name: str, state: str) -> None:
        self._commit(verbs.phase(name, state))

    def item(self, items: object) -> list[str]:
        """Record open findings; returns their stable ids (an object or an array of them)."""
        out: list[str] = self._commit(verbs.item(items))
        return out

    def resolve(self, ids: Sequence[str]) -> list[str]:
        """Move open findings to resolvedItems; returns the ids actually moved."""
        out: list[str] = self._commit(verbs.resolve(ids))
        return out

    def validation(self, status: str, note: str | None = None) -> None:
        self._commit(verbs.validation(status, note))

    def finalize(self, status: str, result: str | None = None) -> None:
        event = verbs.finalize(status, result)
        self._refuse_under_a_runner("finalize")
        self._commit(event)

    def reconcile(
        self,
        repo: str | os.PathLike[str] = ".",
        ref: str | None = None,
        *,
        units: Sequence[str] | None = None,
        all_units: bool = False,
        dry_run: bool = False,
    ) -> dict[str, list[str]]:
        """Trust git over the checkpoint (ulpi's autonomous-pipeline Task-Id reconciliation): every selected
        unit (default all) whose ``Task-Id:`` trailer is on a commit reachable from ``ref`` (default
        the run's ``pipeline.integrationRef``, else HEAD) becomes done with the note
        ``reconciled-from-trailer:<sha>``; a done unit with no such commit gets an open blocker
        ``stale-done:<id>`` (it stays done: a done unit is never demoted). Commits whose ``Run-Id:``
        names another run are ignored. Returns ``{integrated, reconciled, staleDone, runnable}``
        plus ``warnings``; all writes are one atomic commit."""
        from resumable.git.reconcile import reconcile

        doc = self.handle.read()
        if ref is None:
            pipeline = doc.get("pipeline")
            given = pipeline.get("integrationRef") if isinstance(pipeline, dict) else None
            ref = given if isinstance(given, str) and given.strip() else "HEAD"
        run_id = doc.get("id") if isinstance(doc.get("id"), str) else None
        plan = reconcile(doc, repo, ref, units, all_units=all_units, run_id=run_id)
        events = [verbs.unit(uid, "done", note=payload) if kind == "unit" else verbs.item(payload)
                  for kind, uid, payload in plan.writes]
        if events and not dry_run:
            self.handle.commit(events)
        return {**plan.summary(), "warnings": list(plan.warnings)}

    # -- durable steps (resumable.durable) --
    if TYPE_CHECKING:  # the overloads are for type checkers: typing is not imported at run time (start-up)
        @overload
        def step(self, fn: Callable[P, R], /, *, name: str | None = None,
                 key: Callable[..., object] | None = None, version: str | int | None = None,
                 serializer: str | Serializer = "json", retries: int = 0, backoff: float = 1.0,
                 retry_on: type[BaseException] | tuple[type[BaseException], ...] = Exception,
                 retry_failed: bool = True, paths: str = "name", allow_pickle: bool | None = None,
                 rate: str | None = None) -> Callable[P, R]: ...

        @overload
        def step(self, fn: None = None, /, *, name: str | None = None,
                 key: Callable[..., object] | None = None, version: str | int | None = None,
                 serializer: str | Serializer = "json", retries: int = 0, backoff: float = 1.0,
                 retry_on: type[BaseException] | tuple[type[BaseException], ...] = Exception,
                 retry_failed: bool = True, paths: str = "name", allow_pickle: bool | None = None,
                 rate: str | None = None) -> Callable[[Callable[P, R]], Callable[P, R]]: ...

    def step(self, fn: Any = None, /, *, name: str | None = None, key: Any = None,
             version: Any = None,
             serializer: Any = "json", retries: int = 0, backoff: float = 1.0, retry_on: Any = Exception,
             retry_failed: bool = True, paths: str = "name", allow_pickle: bool | None = None,
             rate: str | None = None) -> Any:
        """Decorate a function (``def`` or ``async def``, or a method in a class body) so that each
        call is a unit of this run, executed once and then answered from the record: ``@run.step``
        or ``@run.step(...)``.

        ``key``: a function of the call's arguments giving its key (a str or int is used as it is,
        anything else is hashed); by default a hash of the arguments: plain JSON by its canonical
        text, numpy arrays, pandas objects, dataclasses, attrs and pydantic models, bytes, paths and
        ``self`` by their content (docs/durable.md has the rules). ``paths="content"``: a ``Path``
        argument is keyed by the bytes of the file (or tree) it names, not by its text.
        ``version``: change it to stop reusing results recorded with another version (changing the
        code alone does not). Results are stored as JSON, .npy, Parquet or a tree of those and
        dataclass fields, whichever holds them exactly; ``allow_pickle=True`` (default: the run's,
        ``open_run(..., allow_pickle=)``) pickles what none holds, read back only from a store only
        you can write to; ``serializer``: "pickle" or an object with name, dumps, loads, for every
        result. ``retries``/``backoff``/``retry_on``: attempts after an exception, waiting
        backoff * 2^(k-1). ``retry_failed=False``: a failure recorded by an earlier run is raised
        (StepFailed) instead of running the step again. ``rate="50/min"``: at most that many
        starts (retries included) per period in this process, spread evenly. ``name``: the units'
        id prefix (default: the function's name; ``Class.method`` for a method)."""
        from resumable.durable.opening import engine_of
        from resumable.durable.steps import decorate

        self._check_interrupted()
        return decorate(engine_of(self), fn, name=name, key=key, version=version, serializer=serializer,
                        retries=retries, backoff=backoff, retry_on=retry_on, retry_failed=retry_failed,
                        paths=paths, allow_pickle=self._allow_pickle if allow_pickle is None else allow_pickle,
                        rate=rate)

    def map(self, step: Callable[..., R], *iterables: Iterable[Any], jobs: int | None = None,
            executor: str = "thread", progress: bool | None = None, on_error: str = "return",
            rate: str | None = None) -> list[R | StepFailed]:
        """``step`` (a step of this run, a method step of an instance, or a plain function, made one)
        over the items, on ``jobs`` threads (default 8) or processes (``executor="process"``); each
        item is recorded as it ends, and the map records its true total first (``status`` shows
        191/400). Returns the results in order; a failed item's place holds a ``StepFailed``
        (``on_error="raise"`` raises the first). ``rate="50/min"``: at most that many starts per
        period in this process, retries included, spread evenly. ``progress``: a bar on stderr
        (default: on a terminal)."""
        import inspect

        from resumable.durable.opening import engine_of
        from resumable.durable.pool import run_map
        from resumable.durable.steps import decorate, step_of

        self._check_interrupted()
        bound: tuple[Any, ...] = ()
        target: Any = step
        if inspect.ismethod(step) and step_of(step.__func__) is not None:
            bound, target = (step.__self__,), step.__func__  # an instance's method step: self leads each item
        wrapper = target if step_of(target) is not None else decorate(engine_of(self), target)
        found = step_of(wrapper)
        assert found is not None
        out: list[R | StepFailed] = run_map(found, wrapper, iterables, jobs=jobs, executor=executor,
                                            progress=progress, on_error=on_error, rate=rate, bound=bound)
        return out

    def finish(self, result: str | None = None) -> str:
        """Finalize ``done`` if every unit is done, else ``needs_attention`` with a finding per step
        that is not; returns the status. Hands back the lease the steps took."""
        from resumable.durable.finish import finish
        from resumable.durable.opening import engine_of

        return finish(engine_of(self), result)

    def rerun(self, unit_ids: Sequence[str], reason: str | None = None) -> list[str]:
        """Mark units (done or not) to run again, with an invalidation record: ``resumable rerun``."""
        from resumable.durable.finish import rerun

        return rerun(self.handle, unit_ids, reason)

    # -- lifetime --
    def flush(self) -> None:
        """Bring the snapshot file up to date (large runs refresh it on a budget)."""
        self.handle.flush()

    def close(self) -> None:
        self.handle.close()

    def __enter__(self) -> Run:
        if self._interrupted:  # Ctrl-C while open_run opened it: nothing ran yet
            from resumable.durable import interrupts

            self.close()
            interrupts.exit_interrupted(0)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt) and self._durable:
            from resumable.durable import interrupts

            # Every call that ended is recorded (each records itself; a map lets its running items end).
            engine = self.__dict__.get("_durable_engine")
            recorded = engine.recorded() if engine is not None else 0
            self.close()
            interrupts.exit_interrupted(recorded)
        self.close()

    def _check_interrupted(self) -> None:
        if self._interrupted:
            self._interrupted = False
            raise KeyboardInterrupt


def open_run(
    run: str | os.PathLike[str], *, runs_dir: str | os.PathLike[str] | None = None, store_url: str | None = None,
    task: str | None = None, allow_pickle: bool = False,
) -> Run:
    """A run by id, or by the path of its ``.json`` status file. Without ``task``, opening does not
    touch the store; the first write of ``init`` creates the run. With ``task`` (for durable steps),
    the run is created when missing (or aborted), and resumed otherwise, a done one included (see
    ``resumable.durable.opening``); under ``with``, Ctrl-C then records what finished, prints one
    line and exits 130. ``store_url`` (or ``RESUMABLE_STORE``) selects a PostgreSQL store instead
    of the runs directory. ``allow_pickle``: the run's steps may pickle results no other format
    holds (``Run.step``)."""
    if task is None:
        opened = _open(run, runs_dir, store_url)
    else:
        from resumable.durable import interrupts
        from resumable.durable.opening import open_with_task

        with interrupts.held() as held:
            opened = _open(run, runs_dir, store_url)
            opened._durable = True
            open_with_task(opened, task)
        opened._interrupted = held.caught
    opened._allow_pickle = bool(allow_pickle)
    return opened


def _open(run: str | os.PathLike[str], runs_dir: str | os.PathLike[str] | None, store_url: str | None) -> Run:
    text = os.fspath(run)
    if text.endswith(".json"):
        return Run(store.open_path(text), by_path=True)
    backend = store.open_backend(runs_dir, url=store_url)
    return Run(backend.open(text), backend)


def read_doc(path: str | os.PathLike[str]) -> RunDocument:
    """The current document of the run whose status file is ``path``; never writes. Raises
    NoRunError / StoreError when it does not exist, CorruptRunError when it cannot be read."""
    doc = store.open_path(path).load()
    if doc is None:
        raise NoRunError(f"no run at {os.fspath(path)}")
    return doc


def gc(runs_dir: str | os.PathLike[str] | None = None, keep_days: float = 7, *,
       store_url: str | None = None) -> tuple[int, str]:
    """Archive done/aborted runs older than ``keep_days``; returns (count, archive dir), count -1
    when there is no runs directory."""
    from resumable.core.durations import MAX_DAYS

    if not 0 <= keep_days <= MAX_DAYS:  # NaN fails both; a cutoff past the bound overflows timestamps
        raise InvalidInputError(f"--keep-days must be a non-negative number, at most {MAX_DAYS}")
    result = store.open_backend(runs_dir, url=store_url).gc(keep_days)
    return result.moved, result.archive


def run_job(jobfile: str | os.PathLike[str] | None = None, **options: Any) -> int:
    """Run a job as ``resumable run`` does and return its exit code (0 done, 1 a step failed,
    2 refused, 130 interrupted). Options are ``RunOptions``' fields (``jobs=2``,
    ``keep_going=True``, ``steps=["id:command", ...]``, ...); bad input raises the same errors the
    command reports."""
    from resumable.runner.options import RunOptions
    from resumable.runner.session import run

    opts: RunOptions = RunOptions.from_api(jobfile, **options)
    return run(opts)



def __getattr__(name: str) -> Any:
    # ``Job`` (``runner.jobbuild``) is loaded on first use: a low-level verb, which imports this
    # module, must not pay for the job file's reader.
    if name == "Job":
        from resumable.runner.jobbuild import Job

        return Job
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
