"""The PostgreSQL store (optional extra: ``pip install 'resumable[postgres]'``)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from resumable.store.backend import Backend


def connect_backend(url: str) -> Backend:
    from resumable.errors import UsageError

    raise UsageError("the PostgreSQL store is not available in this version; use the runs directory")
