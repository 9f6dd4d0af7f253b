"""The PostgreSQL store (optional extra: ``pip install 'resumable-runs[postgres]'``).

Runs live in a database (``--store postgresql://user@host/db`` or ``RESUMABLE_STORE``): their
history as rows of events, their documents rebuilt from it, and the steps of submitted jobs as a
work queue that workers on any number of hosts claim under leases with fencing tokens. psycopg is
imported only here, when a PostgreSQL URL is used: the runs directory never needs it.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from resumable.store.postgres.backend import PgBackend


def connect_backend(url: str) -> PgBackend:
    """The store at ``url``. Connecting waits for the first use, which also checks the schema."""
    from resumable.store.postgres.urls import check_url

    check_url(url)
    try:
        import psycopg  # noqa: F401
    except ImportError:
        from resumable.errors import UsageError

        raise UsageError("the PostgreSQL store needs psycopg, which is not installed: pip install"
                         " 'resumable-runs[postgres]' (from a checkout: pip install '.[postgres]')") from None
    from resumable.store.postgres.backend import PgBackend

    return PgBackend(url)
