"""Stored runs. ``store.backend`` is the seam (the protocols everything above uses); ``open_backend``
picks the store: the runs directory (``store.files``, the embedded default) unless a PostgreSQL URL
is given with ``--store`` or ``RESUMABLE_STORE``.
"""

from __future__ import annotations

import os

from resumable.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from resumable.store.backend import Backend, RunHandle

URL_SCHEMES = ("postgresql://", "postgres://")


def store_url(url: str | None) -> str | None:
    """The store URL in effect: ``url`` (``--store``), else ``$RESUMABLE_STORE``; None for the
    runs directory."""
    chosen = url if url is not None else os.environ.get("RESUMABLE_STORE") or None
    if chosen is not None and not chosen.startswith(URL_SCHEMES):
        raise UsageError(f"unknown store {chosen!r}: give a postgresql://user@host/db URL, or leave"
                         " --store and RESUMABLE_STORE unset to use the runs directory")
    return chosen


def open_backend(runs_dir: str | os.PathLike[str] | None = None, *, url: str | None = None,
                 start: str | None = None) -> Backend:
    """The store runs are kept in. ``runs_dir`` (``--dir``) and ``start`` (where to look for a runs
    directory, walking up: the current directory, or a job file's) apply to the runs directory."""
    if url is not None and runs_dir is not None:
        raise UsageError("give --dir (a runs directory) or --store (a database), not both")
    chosen = None if runs_dir is not None else store_url(url)
    if chosen is not None:
        from resumable.store.postgres import connect_backend

        return connect_backend(chosen)
    from resumable.store.files.backend import FileBackend
    from resumable.store.files.layout import find_runs_dir

    return FileBackend(find_runs_dir(runs_dir, start=start))


def open_path(path: str | os.PathLike[str]) -> RunHandle:
    """A run of the file store by the path of its ``.json`` status file (the form ulpi's checkpoint.mjs writes)."""
    from resumable.store.files.backend import FileRunHandle
    from resumable.store.files.layout import check_status_path, files_for

    return FileRunHandle(files_for(check_status_path(os.fspath(path))))
