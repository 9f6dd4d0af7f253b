"""What a pool's workers are sent for one ``run.map``: the step's function, pickled once, before any
item is submitted, so that a step no worker could run is refused in one line and nothing is submitted.

**By reference** when the step can be imported where it is defined: a function at the top level of
a module (``mypkg.embed``), or of the script when the workers are a local process pool, whose
workers import the script as multiprocessing does. The worker imports it, so it needs the same
code (as every Dask or process-pool worker does).

**By value** otherwise: a function of the script (``__main__``) sent to a cluster's workers, or one
defined in a notebook, inside another function, or a lambda. This needs ``cloudpickle`` (which Dask
and loky bring; ``pip install cloudpickle`` otherwise), which sends its code and the globals it
uses. A step it calls is sent as its plain function: on such a worker it runs as a plain call.

The payload is bytes, loaded once per worker process (``worker.run_item``); the calling process
keeps everything else: the run, its lease, the records.
"""

from __future__ import annotations

import io
import pickle
import sys
import types
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

from resumable.durable.attempts import Policy
from resumable.durable.steps import Step, step_of
from resumable.errors import InvalidInputError


class Work:
    """What a worker runs for each item: the function and its retry policy."""

    __slots__ = ("fn", "name", "policy")

    def __init__(self, fn: Any, policy: Policy, name: str) -> None:
        self.fn = fn
        self.policy = policy
        self.name = name


def reference(wrapper: Any, fn: Any) -> tuple[str, str] | None:
    """(module, qualified name) where the step can be found by importing, or None."""
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", "")
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        return None  # nested ("<locals>") or a lambda
    if module == "__main__" and getattr(sys.modules.get("__main__"), "__file__", None) is None:
        return None  # a notebook or an interactive session: no file a worker could import
    found: Any = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return (module, qualname) if found is wrapper or found is fn else None


def resolve(module: str, qualname: str) -> Any:
    """The plain function behind a step found by reference (in a worker)."""
    import importlib

    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    step = step_of(found)
    return step.fn if step is not None else found


def plain(fn: Any) -> Any:
    return fn


def _cloudpickle() -> Any:
    try:
        import cloudpickle  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        return None
    return cloudpickle


def _by_value(payload: tuple[Any, ...], cloudpickle: Any) -> bytes:
    class StepsAsPlain(cloudpickle.Pickler):  # type: ignore[misc]
        def reducer_override(self, obj: Any) -> Any:
            # A step the function calls travels as its plain function: its wrapper holds the run.
            if type(obj) is types.FunctionType and isinstance(obj.__dict__.get("step"), Step):
                return plain, (obj.__dict__["step"].fn,)
            return super().reducer_override(obj)

    out = io.BytesIO()
    StepsAsPlain(out, protocol=pickle.DEFAULT_PROTOCOL).dump(payload)
    return out.getvalue()


def ship(step: Step, wrapper: Any, executor: str | Executor, *, one_attempt: bool = False) -> bytes | Work:
    """The payload of every item of a map of ``step`` on ``executor`` ("process" or an Executor);
    InvalidInputError (one line) when its workers could not be given the step. ``one_attempt``: the
    workers make a single attempt (the caller runs the retries, through a rate limit)."""
    policy = Policy(0, step.policy.backoff, step.policy.retry_on) if one_attempt else step.policy
    if isinstance(executor, ThreadPoolExecutor):
        return Work(step.fn, policy, step.name)  # the same process: nothing travels
    where = reference(wrapper, step.fn)
    # Its workers import the script, as multiprocessing's do.
    local_pool = executor == "process" or isinstance(executor, ProcessPoolExecutor)
    cloudpickle = _cloudpickle()
    what = f"step {step.name} cannot be sent to the executor's workers"
    try:
        if where is not None and (where[0] != "__main__" or local_pool):
            payload: tuple[Any, ...] = ("ref", *where, policy, step.name)
            return cloudpickle.dumps(payload) if cloudpickle is not None else pickle.dumps(payload)
        if cloudpickle is None:
            place = "in the script" if where is not None else "in a notebook, inside a function, or as a lambda"
            raise InvalidInputError(f"{what}: it is defined {place}, so it must travel by value, which needs"
                                    " cloudpickle (pip install cloudpickle); or define it at the top level of a"
                                    " module the workers can import")
        return _by_value(("value", step.fn, policy, step.name), cloudpickle)
    except InvalidInputError:
        raise
    except Exception as exc:
        message = " ".join(str(exc).split())[:200]
        raise InvalidInputError(f"{what}: {type(exc).__name__}: {message} (a value it uses does not pickle:"
                                " create such objects inside the step, or use executor='thread')") from exc


class Unloadable(Exception):
    """A worker could not load the step it was sent (a module it imports is missing there): no item
    can run on it, so the map stops, rather than recording every item failed for it."""


def load(payload: bytes) -> Work:
    """The worker's side of ``ship``; Unloadable when this process cannot load the step."""
    try:
        return _load(payload)
    except Exception as exc:
        raise Unloadable(f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}") from None


def _load(payload: bytes) -> Work:
    shipped = pickle.loads(payload)
    if shipped[0] == "ref":
        _, module, qualname, policy, name = shipped
        return Work(resolve(module, qualname), policy, name)
    _, fn, policy, name = shipped
    return Work(fn, policy, name)
