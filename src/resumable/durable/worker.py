"""What a pool's worker runs for one item: the step's function with its retries, unrecorded.

The worker sends back the attempts and the value; the calling process, which holds the run's lease,
records them. The step arrives as ``shipping`` made it (by reference or by value), loaded once per
worker process.

**Workers of ``executor="process"`` die with the process that started them.** The caller's lease
ends when it dies; a worker that went on would run items while the next process, holding the
lease by then, runs the same ones. So each worker asks the kernel for SIGKILL when its parent dies
(``PR_SET_PDEATHSIG``, Linux), and, where that is not available, checks before each item that its
parent is still the process that started it.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from resumable.durable.attempts import Outcome, run_sync
from resumable.durable.codec import error_record
from resumable.durable.shipping import Work, load
from resumable.durable.steps import IN_WORKER

_LOADED: dict[bytes, Work] = {}  # payloads this process has loaded (one per map, usually)
_PARENT: list[int] = []  # the pid of the process that started this worker, when it must die with it
_PR_SET_PDEATHSIG = 1


def run_item(payload: bytes | Work, args: tuple[Any, ...], kwargs: dict[str, Any], first_n: int) -> Outcome:
    if _PARENT and os.getppid() != _PARENT[0]:
        os._exit(1)  # orphaned: the next process runs this item
    here = isinstance(payload, Work)
    work = payload if isinstance(payload, Work) else _LOADED.get(payload)
    if work is None:
        assert isinstance(payload, bytes)
        if len(_LOADED) > 8:
            _LOADED.clear()
        work = _LOADED[payload] = load(payload)
    token = IN_WORKER.set(True)
    try:
        out = run_sync(work.fn, args, kwargs, work.policy, first_n)
    finally:
        IN_WORKER.reset(token)
    if not here:
        out.exc = None  # not every exception pickles; its record (type, message, traceback) does
        if out.ok:
            pack(out)
    return out


def pack(out: Outcome) -> None:
    """Pickle the value here, so that a value that cannot travel back is this item's failure, said
    in one line, rather than an error of the executor's that would stop the whole map (Dask raises
    it from ``gather``). cloudpickle when installed, as the executors themselves use."""
    import pickle

    try:
        try:
            import cloudpickle  # type: ignore[import-untyped,unused-ignore]
        except ImportError:
            out.packed = pickle.dumps(out.value, protocol=5)
        else:
            out.packed = cloudpickle.dumps(out.value, protocol=5)
    except Exception as exc:
        message = " ".join(str(exc).split())[:200]
        cause = TypeError(f"its result, a {type(out.value).__module__}.{type(out.value).__qualname__}, cannot be"
                          f" sent back from the executor's worker ({type(exc).__name__}: {message}): return"
                          " plain data, arrays or dataclasses, or use executor='thread'")
        out.ok, out.value = False, None
        out.attempts[-1]["status"] = "failed"
        out.attempts[-1]["error"] = error_record(cause)
        return
    out.value = None


def die_with_parent(parent: int) -> None:
    """A ``ProcessPoolExecutor`` initializer: this worker ends when ``parent`` does."""
    _PARENT[:] = [parent]
    # Ctrl-C reaches the whole foreground process group: the caller stops the map and records what
    # ended; a worker that raised KeyboardInterrupt too would only print a traceback of its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the check before each item still holds
    if os.getppid() != parent:  # it died before the request took effect
        os._exit(1)
