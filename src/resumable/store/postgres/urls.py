"""The store URL: its password kept out of messages, and refused up front when it names no database.

Imports nothing from the driver, so a URL is checked (and a missing psycopg reported) before any
connection is tried.
"""

from __future__ import annotations

from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit, urlunsplit

from resumable.errors import UsageError


def redact(url: str) -> str:
    """The URL without its password (in the authority, or as a ``password=`` parameter), for
    messages and listings."""
    try:
        parts = urlsplit(url)
        netloc, query = parts.netloc, parts.query
        if parts.password is not None:
            netloc = f"{parts.username or ''}:***@{netloc.rsplit('@', 1)[1]}"
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(k == "password" for k, _ in pairs):
            query = urlencode([(k, "***" if k == "password" else v) for k, v in pairs], safe="*")
        if (netloc, query) == (parts.netloc, parts.query):
            return url  # nothing to hide: shown as given
        return urlunsplit(parts._replace(netloc=netloc, query=query))
    except ValueError:
        return "the database"


def check_url(url: str) -> str:
    """``url``, or a one-line UsageError when it names no database: libpq would fall back to a
    default one (the user's name), and resumable would read or write a database nobody chose."""
    try:
        parts = urlsplit(url)
        named = parts.path.lstrip("/") or parse_qs(parts.query).get("dbname", [""])[0]
    except ValueError:
        raise UsageError(f"not a database URL: {redact(url)!r} — give postgresql://user@host/DBNAME") from None
    if not named:
        raise UsageError(f"{redact(url)} names no database: give one, as in postgresql://user@host/DBNAME")
    return url
