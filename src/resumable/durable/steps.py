"""``@run.step``: a function whose calls are units of the run, executed once and then remembered.

A call's unit id is ``<name>:<key>`` (``keys``). Calling a step:

1. looks its unit up in the document this process holds (``records``): ``done`` (with the step's
   ``version`` and a result it can read) returns the recorded result, and nothing else happens;
2. otherwise claims the unit in this process (a second thread with the same call waits for the
   first), takes the run's lease if this process does not hold it yet (``engine``), runs the function
   (with its retries), and commits one record with the outcome: ``done`` with the result, or
   ``failed`` with the exception's type, message and traceback; then returns or raises.

A failure recorded by an earlier run makes the next call run the step again, unless the step says
``retry_failed=False``: then the call raises ``StepFailed`` with what was recorded. A call stopped by
KeyboardInterrupt, SystemExit or cancellation is recorded ``interrupted`` and runs again next time.
Steps called while another step runs are recorded with it as their ``parent``.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import threading
from collections.abc import Callable, Container, Mapping
from typing import Any

from resumable.core import verbs
from resumable.core.durations import MAX_DAYS, MAX_SECONDS
from resumable.core.model import MAX_NESTING, MAX_UNIT_ID, check_unit_id

# Settled is a run-time alias, so Event is imported at run time here (typing is loaded anyway).
from resumable.core.types import Attempt, Event
from resumable.durable import codec
from resumable.durable.attempts import NotStarted, Outcome, Policy, StepFailed, attempt_record, run_async, run_sync
from resumable.durable.content import PATH_MODES, call_key, custom_key
from resumable.durable.digest import Recorded, recorded_error
from resumable.durable.engine import Call, Engine
from resumable.durable.keys import Binder, arguments_key, check_step_name, readable_key, unit_id
from resumable.durable.rate import Gate, Limiter
from resumable.errors import InvalidInputError

Settled = tuple[list[Event], Any, BaseException | None]  # (records to commit, value, exception to raise)

_STACK: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("resumable_steps", default=())
# Set while a pool's worker runs an item: a step called inside the item's step is then served from
# the run when recorded, else run as a plain call (a worker holds no lease; the caller records the item).
IN_WORKER: contextvars.ContextVar[bool] = contextvars.ContextVar("resumable_in_worker", default=False)


def default_name(fn: Any) -> str:
    qualname = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
    # A function defined inside another is named as it reads ("embed", not "main.<locals>.embed");
    # two of one name in one run are refused when the second is decorated.
    return str(qualname).rpartition("<locals>.")[2]


def next_attempt(unit: object) -> int:
    attempts = unit.get("attempts") if isinstance(unit, dict) else None
    ns = [a["n"] for a in attempts if isinstance(a, dict) and isinstance(a.get("n"), int)] \
        if isinstance(attempts, list) else []
    return max(ns, default=0) + 1


class Step:
    def __init__(self, engine: Engine, fn: Any, *, name: str | None, key: Any, version: Any, serializer: Any,
                 retries: int, backoff: float, retry_on: Any, retry_failed: bool, paths: str = "name",
                 allow_pickle: bool = False, rate: object = None) -> None:
        if not callable(fn):
            raise InvalidInputError(f"@run.step decorates a function, not a {type(fn).__name__}")
        if inspect.ismethod(fn):
            raise InvalidInputError(
                f"{default_name(fn)} is a method of one instance: decorate the function in its class body"
                f" (@run.step above def {getattr(fn, '__name__', 'method')}), so that each instance is part of"
                " the calls' keys")
        if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
            raise InvalidInputError(
                f"{default_name(fn)} is a generator function: its values are made only as they are read, so"
                " no result could be recorded; decorate a function that returns them as a list")
        if paths not in PATH_MODES:
            raise InvalidInputError(f"paths={paths!r}: use 'name' (a Path argument keyed by its text) or 'content'"
                                    " (by the bytes of the file it names)")
        if key is not None and not callable(key):
            raise InvalidInputError("key= takes a function of the step's arguments (key=lambda doc_id: doc_id)")
        if version is not None and (isinstance(version, bool) or not isinstance(version, str | int)):
            raise InvalidInputError("version= takes a string or an integer")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise InvalidInputError("retries= takes an integer >= 0")
        if isinstance(backoff, bool) or not isinstance(backoff, int | float) or not 0 <= backoff <= MAX_SECONDS:
            raise InvalidInputError(f"backoff= takes a number of seconds >= 0 and at most {MAX_DAYS} days")
        self.engine = engine
        self.fn = fn
        self.name = check_step_name(name if name is not None else default_name(fn))
        self.key = key
        self.version = version
        self.serializer = codec.serializer_of(serializer)
        self.allow_pickle = bool(allow_pickle)
        self.paths = paths
        self.limiter = Limiter.of(rate)
        self.policy = Policy(retries, float(backoff), retry_on)
        self.retry_failed = bool(retry_failed)
        self.is_async = inspect.iscoroutinefunction(fn)
        self.binder = Binder(fn)
        origin = (str(getattr(fn, "__module__", "")), str(getattr(fn, "__qualname__", "")))
        known = engine.steps.get(self.name)
        if known is not None and known != origin:
            raise InvalidInputError(
                f"two functions are named step {self.name!r} in run {engine.location}"
                f" ({known[0]}.{known[1]} and {origin[0]}.{origin[1]}): give one of them name='...'")
        # The same function defined again (a notebook cell run twice) replaces the old definition.
        engine.steps[self.name] = origin

    # -- identity and lookups --
    def unit_id(self, args: tuple[Any, ...], kwargs: dict[str, Any], units: Container[str] | None = None) -> str:
        """The call's unit id. ``units``: the run's units (or a digest's), which the caller holds."""
        if self.key is not None:
            return unit_id(self.name, custom_key(self.key(*args, **kwargs), self.name, self.paths))
        bound = self.binder.bind(args, kwargs)
        uid = self.readable_id(bound)
        if uid is None:
            return f"{self.name}:{call_key(bound, self.name, self.paths)}"
        if units is not None:
            return uid if uid in units else self.legacy_or(uid, bound, units)
        records = self.engine.records
        with records.lock:
            digest = records.standing_digest()
            units = digest.units if digest is not None else records.units()
            if uid in units:
                return uid
            return self.legacy_or(uid, bound, units)

    def legacy_or(self, uid: str, bound: dict[str, Any], units: Container[str]) -> str:
        # A run recorded before readable keys holds this call under its hashed id: that unit
        # stays the call's, whatever its state, so its result is used and it is never orphaned.
        legacy = f"{self.name}:{arguments_key(bound, self.name)}"
        return legacy if legacy in units else uid

    def readable_id(self, bound: dict[str, Any]) -> str | None:
        """``<name>:<value>`` for a call whose only argument, its first parameter, reads as a key."""
        first = self.binder.first
        if len(bound) != 1 or first not in bound:
            return None
        key = readable_key(bound[first])
        if key is None or len(self.name) + 1 + len(key) > MAX_UNIT_ID:
            return None
        return f"{self.name}:{key}"

    def lookup(self, uid: str) -> tuple[bool, Any]:
        """(True, the recorded result) for a usable done unit; (False, None) when the step must run.
        Raises StepFailed for a recorded failure when the step does not retry failures."""
        records = self.engine.records
        with records.lock:
            digest = records.standing_digest()
            if digest is not None:  # a run not loaded yet: its calls are answered without loading it
                return self.answer_recorded(uid, digest.units.get(uid), copy=True)
            return self.answer(uid, records.units().get(uid))

    def answer(self, uid: str, unit: object) -> tuple[bool, Any]:
        """``lookup`` of a unit already found (the records' lock held)."""
        if not isinstance(unit, dict):
            return False, None
        status = unit.get("status")
        if status == "done":
            return self.answer_done(uid, unit.get("version"), unit.get("result"), copy=True)
        if status == "failed" and not self.retry_failed:
            raise StepFailed(uid, recorded_error(unit))
        return False, None

    def answer_recorded(self, uid: str, unit: Recorded | None, *, copy: bool) -> tuple[bool, Any]:
        """``answer`` from a digest's entry; ``copy=False``: its result is handed out as it is."""
        if unit is None:
            return False, None
        if unit.status == "done":
            return self.answer_done(uid, unit.version, unit.result, copy=copy)
        if unit.status == "failed" and not self.retry_failed:
            raise StepFailed(uid, unit.error or {})
        return False, None

    def answer_done(self, uid: str, version: Any, field: Any, *, copy: bool) -> tuple[bool, Any]:
        if version != self.version or not codec.decodable(field, self.serializer, self.allow_pickle):
            return False, None
        assert isinstance(field, dict)
        return True, codec.decode(field, self.serializer, self.engine.records, f"unit {uid}", copy=copy)

    def acquire(self, uid: str) -> tuple[bool, Any]:
        """A hit, or (False, None) with this thread holding the unit's claim."""
        if uid in _STACK.get():
            raise InvalidInputError(f"step {uid} calls itself with the same arguments (it would wait for"
                                    " itself forever)")
        records = self.engine.records
        while True:
            seen = records.generation
            found, value = self.lookup(uid)
            if found:
                return True, value
            held = self.engine.claim(uid)
            if held is None:
                if records.generation == seen:
                    return False, None  # the document has not changed since the look: still a miss
                try:
                    found, value = self.lookup(uid)  # it may have ended between the look and the claim
                except BaseException:
                    self.engine.release(uid)
                    raise
                if found:
                    self.engine.release(uid)
                    return True, value
                return False, None
            held.wait()

    async def aacquire(self, uid: str) -> tuple[bool, Any]:
        import asyncio

        if uid in _STACK.get():
            raise InvalidInputError(f"step {uid} calls itself with the same arguments")
        while True:
            found, value = self.lookup(uid)
            if found:
                return True, value
            held = self.engine.claim(uid)
            if held is None:
                found, value = self.lookup(uid)
                if found:
                    self.engine.release(uid)
                    return True, value
                return False, None
            while not held.is_set():
                await asyncio.sleep(0.005)

    # -- executing --
    def begin_call(self, uid: str) -> Call:
        records = self.engine.records
        with records.lock:
            unit = records.units().get(uid)
            pre: list[Event] = []
            if isinstance(unit, dict) and unit.get("status") == "done":
                old = unit.get("version")
                reason = (f"step version changed: {old!r} -> {self.version!r}" if old != self.version else
                          "its recorded result was written by another serializer")
                pre.append(verbs.invalidate(uid, reason))
            return Call(uid, self.name, next_attempt(unit), pre)

    def fields(self) -> dict[str, object]:
        out: dict[str, object] = {"kind": "step", "step": self.name}
        stack = _STACK.get()
        if stack:
            out["parent"] = stack[-1]
        return out

    def on_failed(self, call: Call) -> Callable[[Attempt], None]:
        def record(attempt: Attempt) -> None:
            error: Mapping[str, Any] = attempt.get("error") or {}
            self.engine.add_pre(call, [verbs.unit(call.uid, "failed", attempt=attempt, fields=self.fields(),
                                                  note=codec.error_line(error))])
            call.n += 1
        return record

    def settle(self, call: Call, out: Outcome, *, earlier: bool = False) -> Settled:
        """(records to commit, value to return, exception to raise) for a finished call. ``earlier``:
        the failed attempts before the last are not recorded yet (they ran in a worker process)."""
        fields = self.fields()
        value: Any = None
        depth = MAX_NESTING
        if out.ok:
            try:
                field, value, depth = codec.encode(out.value, self.serializer, self.engine.records, self.name,
                                                   allow_pickle=self.allow_pickle)
            except InvalidInputError as unstorable:
                out.attempts[-1]["status"] = "failed"
                out.attempts[-1]["error"] = codec.error_record(unstorable)
                out.ok, out.exc = False, unstorable
        events: list[Event] = []
        if earlier:
            events += [verbs.unit(call.uid, "failed", attempt=a, fields=fields,
                                  note=codec.error_line(a.get("error") or {})) for a in out.attempts[:-1]]
        last = out.attempts[-1]
        final: Event
        if out.ok:
            done = {**fields, "version": self.version, "result": field}
            if depth + 2 <= MAX_NESTING:
                # What verbs.unit makes, without walking the result again to bound its nesting:
                # the record nests 2 levels above the field, the attempt is flat, the id is checked.
                final = {"t": "unit", "unit": check_unit_id(call.uid), "state": "done", "note": "",
                         "attempt": last, "fields": done}
            else:
                final = verbs.unit(call.uid, "done", note="", attempt=last, fields=done)
        else:
            final = verbs.unit(call.uid, "failed", attempt=last, fields=fields,
                               note=codec.error_line(out.error() or {}))
        error = out.exc
        if error is None and not out.ok:
            error = StepFailed(call.uid, out.error() or {})
        return self.engine.take_pre(call, [*events, final]), value, error

    def interrupted(self, call: Call, exc: BaseException, started_wall: float, started: float) -> None:
        attempt = attempt_record(call.n, "interrupted", started_wall, started)
        events = self.engine.take_pre(call, [verbs.unit(call.uid, "interrupted", attempt=attempt, fields=self.fields(),
                                                        note=f"interrupted ({type(exc).__name__})")])
        try:
            self.engine.records.commit(events)
        except Exception:
            pass  # best effort: the call is being interrupted; a unit left in_progress is recovered later

    def run(self, uid: str, args: tuple[Any, ...], kwargs: dict[str, Any], gate: Gate | None = None) -> Settled:
        """Execute (this thread holds the claim); the records are not committed yet."""
        self.engine.ensure_session()
        return self.execute(self.begin_call(uid), args, kwargs, gate)

    def gate(self, *more: Limiter | None, cancel: threading.Event | None = None) -> Gate | None:
        """What each attempt of this step's calls waits for: its rate limit, and ``more`` (a map's)."""
        limiters = [lim for lim in (self.limiter, *more) if lim is not None]
        return Gate(limiters, cancel) if limiters else None

    def execute(self, call: Call, args: tuple[Any, ...], kwargs: dict[str, Any], gate: Gate | None = None) -> Settled:
        """``run`` for a call already begun (this thread holds the claim and the session is on)."""
        self.engine.track(call)
        token = _STACK.set((*_STACK.get(), call.uid))
        try:
            out = run_sync(self.fn, args, kwargs, self.policy, call.n, self.on_failed(call),
                           gate if gate is not None else self.gate())
        except NotStarted:
            self.engine.take_pre(call, [])
            raise
        except BaseException as exc:
            self.interrupted(call, exc, call.started_wall, call.started)
            raise
        finally:
            _STACK.reset(token)
        return self.settle(call, out)

    def call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        uid = self.unit_id(args, kwargs)
        found, value = self.acquire(uid)
        if found:
            return value
        try:
            if IN_WORKER.get():
                return self.fn(*args, **kwargs)
            events, value, exc = self.run(uid, args, kwargs)
            self.engine.records.commit(events)
        finally:
            self.engine.release(uid)
        if exc is not None:
            raise exc
        return value

    async def acall(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        import asyncio

        uid = self.unit_id(args, kwargs)
        found, value = await self.aacquire(uid)
        if found:
            return value
        try:
            if IN_WORKER.get():
                return await self.fn(*args, **kwargs)
            self.engine.ensure_session()
            call = self.begin_call(uid)
            self.engine.track(call)
            token = _STACK.set((*_STACK.get(), uid))
            try:
                out = await run_async(self.fn, args, kwargs, self.policy, call.n, self.on_failed(call), self.gate())
            except BaseException as exc:
                self.interrupted(call, exc, call.started_wall, call.started)
                raise
            finally:
                _STACK.reset(token)
            events, value, error = self.settle(call, out)
            # In a thread, so that the event loop goes on and concurrent tasks share a commit.
            await asyncio.to_thread(self.engine.records.commit, events)
        finally:
            self.engine.release(uid)
        if error is not None:
            raise error
        return value


def decorate(engine: Engine, fn: Any = None, /, *, name: str | None = None, key: Any = None, version: Any = None,
             serializer: Any = "json", retries: int = 0, backoff: float = 1.0,
             retry_on: Any = Exception, retry_failed: bool = True, paths: str = "name",
             allow_pickle: bool = False, rate: object = None) -> Any:
    """``@run.step`` and ``@run.step(...)``: see ``Run.step``."""

    def wrap(f: Any) -> Any:
        step = Step(engine, f, name=name, key=key, version=version, serializer=serializer, retries=retries,
                    backoff=backoff, retry_on=retry_on, retry_failed=retry_failed, paths=paths,
                    allow_pickle=allow_pickle, rate=rate)
        if step.is_async:
            @functools.wraps(f)
            async def awrapper(*args: Any, **kwargs: Any) -> Any:
                return await step.acall(args, kwargs)

            awrapper.step = step  # type: ignore[attr-defined]
            return awrapper

        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return step.call(args, kwargs)

        wrapper.step = step  # type: ignore[attr-defined]
        return wrapper

    return wrap if fn is None else wrap(fn)


def step_of(obj: Any) -> Step | None:
    found = getattr(obj, "step", None)
    return found if isinstance(found, Step) else None
