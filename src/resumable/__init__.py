"""resumable: make long multi-step work durable and resumable.

The API in one look (see ``resumable.api``)::

    run = resumable.open_run("nightly")          # by id, or a path ending in .json
    run.init("migrate users", units=["extract", "load"])
    run.unit("extract", "done")
    run.resume_set()   # {"skip": ["extract"], "eligible": ["load"], "dep_blocked": {}}
"""

from resumable.api import Run, find_runs_dir, gc, open_run, read_doc
from resumable.errors import (
    CorruptRunError,
    InvalidInputError,
    NoRunError,
    RefusedError,
    ResumableError,
    StoreError,
)

__version__ = "0.1.0"

__all__ = [
    "CorruptRunError",
    "InvalidInputError",
    "NoRunError",
    "RefusedError",
    "ResumableError",
    "Run",
    "StoreError",
    "__version__",
    "find_runs_dir",
    "gc",
    "open_run",
    "read_doc",
]
