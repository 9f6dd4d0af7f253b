"""What a pool's worker process runs for one item: the step's function with its retries, unrecorded.

The worker sends back the attempts and the value; the parent process, which holds the run's lease,
records them. The step travels by reference (its module and name), so it must be importable: a
function at the top level of a module or of the script (a notebook's functions are not importable by
a fresh process: use threads there, or move the function into a module).
"""

from __future__ import annotations

import sys
from typing import Any

from resumable.durable.attempts import Outcome, run_sync
from resumable.durable.steps import IN_WORKER, step_of
from resumable.errors import InvalidInputError


def call(wrapper: Any, args: tuple[Any, ...], kwargs: dict[str, Any], first_n: int) -> Outcome:
    IN_WORKER[0] = True
    step = step_of(wrapper)
    assert step is not None
    out = run_sync(step.fn, args, kwargs, step.policy, first_n)
    out.exc = None  # not every exception pickles; its record (type, message, traceback) does
    return out


def check_importable(wrapper: Any, name: str) -> None:
    """Refuse, before any item runs, a step a worker process could not import."""
    module = getattr(wrapper, "__module__", None)
    qualname = getattr(wrapper, "__qualname__", "")
    main = sys.modules.get("__main__")
    found: Any = sys.modules.get(module) if isinstance(module, str) else None
    for part in qualname.split("."):
        found = getattr(found, part, None)
    local = "<locals>" in qualname or "<lambda>" in qualname
    no_file = module == "__main__" and getattr(main, "__file__", None) is None
    if found is not wrapper or local or no_file:
        raise InvalidInputError(
            f"executor='process' needs step {name} at the top level of a module or script file, where"
            " a worker process can import it (not nested, not a lambda, not defined in a notebook):"
            " move it there, or use executor='thread'")
