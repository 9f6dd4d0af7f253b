"""resumable: make long multi-step work durable and resumable.

The API in one look (see ``resumable.api``)::

    run = resumable.open_run("nightly")          # by id, or a path ending in .json
    run.init("migrate users", units=["extract", "load"])
    run.unit("extract", "done")
    run.resume_set()   # {"skip": ["extract"], "eligible": ["load"], "dep_blocked": {}}

Names are imported on first use so that the command line, which imports only what a verb needs,
starts fast.
"""

from __future__ import annotations

__version__ = "0.2.0"

_EXPORTS = {
    "Job": "resumable.api",
    "Run": "resumable.api",
    "find_runs_dir": "resumable.api",
    "gc": "resumable.api",
    "open_run": "resumable.api",
    "read_doc": "resumable.api",
    "run_job": "resumable.api",
    "CorruptRunError": "resumable.errors",
    "InvalidInputError": "resumable.errors",
    "NoRunError": "resumable.errors",
    "RefusedError": "resumable.errors",
    "ResumableError": "resumable.errors",
    "StoreError": "resumable.errors",
}

__all__ = [*sorted(_EXPORTS), "__version__"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from resumable.api import Job as Job
    from resumable.api import Run as Run
    from resumable.api import find_runs_dir as find_runs_dir
    from resumable.api import gc as gc
    from resumable.api import open_run as open_run
    from resumable.api import read_doc as read_doc
    from resumable.api import run_job as run_job
    from resumable.errors import CorruptRunError as CorruptRunError
    from resumable.errors import InvalidInputError as InvalidInputError
    from resumable.errors import NoRunError as NoRunError
    from resumable.errors import RefusedError as RefusedError
    from resumable.errors import ResumableError as ResumableError
    from resumable.errors import StoreError as StoreError


def __dir__() -> list[str]:
    """What ``dir()``, ``help()`` and an editor's completion list: the names loaded so far and the
    ones that load on first use, without loading them."""
    return sorted({*globals(), *_EXPORTS})


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'resumable' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
