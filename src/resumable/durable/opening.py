"""``open_run(run, task=...)``: open a run for durable steps, creating it when it is missing, and the
engine behind a ``Run``'s steps.

What ``task=`` does with the run it finds:

- missing: created (``init`` with the task and this process's launch descriptor);
- live (running, initializing, needs_attention): used as it is;
- ``done``: used as it is, so running a finished script again returns every recorded result and
  writes nothing; a call that has to run a step (a new argument, a ``resumable rerun``) reopens it
  (status running) and the next ``run.finish()`` finalizes it again;
- ``aborted`` (given up on): archived and created afresh, as ``resumable init`` does.

The launch descriptor records how to run this script again (``status --resume`` prints it): the
interpreter and its original arguments (``sys.orig_argv``) and the working directory. Interactive
sessions and notebooks record none: there is no command that would replay them.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from resumable import store
from resumable.durable.engine import Engine, engine_for
from resumable.errors import RefusedError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from resumable.core.types import Launch
    from resumable.store.backend import Backend, RunnerLease


def launch_descriptor() -> Launch | None:
    main = sys.modules.get("__main__")
    interactive = hasattr(sys, "ps1") or bool(sys.flags.interactive) or "ipykernel" in sys.modules
    if interactive or getattr(main, "__file__", None) is None or not getattr(sys, "orig_argv", None):
        return None
    return {"kind": "resumable", "argv": [sys.executable, *sys.orig_argv[1:]], "cwd": os.getcwd()}


def open_with_task(run: Any, task: str) -> None:
    """Create the run behind ``run`` (an ``api.Run``) when it is missing or aborted."""
    # Read through the engine's handle, which the steps use next: a big run is read once, as a
    # digest when the store can (what a map of recorded items answers from).
    records = engine_of(run).records
    doc = records.head()
    status = doc.get("status") if isinstance(doc, dict) else None
    if doc is not None and status != "aborted":
        return
    try:
        run.init(task, launch=launch_descriptor())
    except RefusedError:
        # Another process created it between our look and our write: it is live, use it.
        again = records.doc()
        if again is None or again.get("status") == "aborted":
            raise
    records.refresh()


def engine_of(run: Any) -> Engine:
    """The engine of an ``api.Run`` (one per run per process, shared by every ``Run`` object on it)."""
    engine: Engine | None = run.__dict__.get("_durable_engine")
    if engine is not None:
        return engine
    handle = run.handle
    location: str = handle.location
    backend: Backend | None = run.backend

    def make() -> Engine:
        if backend is not None:
            run_id = handle.run_id
            own = backend.open(run_id)

            def lease() -> RunnerLease:
                return backend.lease(run_id)
        else:
            own = store.open_path(location)
            stem = os.path.basename(location)[: -len(".json")]

            def lease() -> RunnerLease:
                return store.open_backend(os.path.dirname(os.path.abspath(location))).lease(stem)
        return Engine(location, own, lease, launch_descriptor())

    engine = engine_for(location, make)
    run.__dict__["_durable_engine"] = engine
    return engine
