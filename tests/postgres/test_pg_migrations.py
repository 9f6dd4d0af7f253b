"""Migrations 0002 and on move a database of schema 1 forward: an upgraded database and a fresh one have
the same schema (compared in the server's own catalogs), and what schema 1 held reads the same."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pgtests import base_env, cli, create_database, drop_database, ok, sql

from resumable.store.postgres import schema


@pytest.fixture
def two_dbs() -> Iterator[tuple[str, str]]:
    urls = create_database("upgraded"), create_database("fresh")
    yield urls
    for url in urls:
        drop_database(url)


def catalog(url: str) -> dict[str, Any]:
    """The schema as the catalogs describe it: columns, constraints, indexes (names included)."""
    columns = sql(url, "SELECT table_name, column_name, ordinal_position, data_type, is_nullable, column_default"
                       " FROM information_schema.columns WHERE table_schema = 'public' ORDER BY 1, 3")
    constraints = sql(url, "SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid)"
                           " FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace"
                           " WHERE n.nspname = 'public' ORDER BY 1, 2")
    indexes = sql(url, "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'"
                       " ORDER BY 1, 2")
    functions = sql(url, "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
                         " WHERE n.nspname = 'public' ORDER BY 1")
    return {"columns": columns, "constraints": constraints, "indexes": indexes, "functions": functions}


def schema_one(url: str) -> None:
    """The database as a resumable of schema version 1 left it, with a run, a step and a lease."""
    import psycopg

    version, name, text = schema.migrations()[0]
    assert version == 1
    with psycopg.connect(url) as conn:
        conn.execute("CREATE TABLE resumable_schema (version integer PRIMARY KEY, name text NOT NULL,"
                     " applied_at timestamptz NOT NULL DEFAULT now())")
        conn.execute(text.encode())
        conn.execute("INSERT INTO resumable_schema (version, name) VALUES (1, %s)", (name,))
        conn.execute("INSERT INTO resumable_runs (id, seq, status, updated_at) VALUES"
                     " ('old', 0, 'running', '2026-11-30T10:00:00Z'), ('odd', 0, 'running', 'not a time')")
        conn.execute("INSERT INTO resumable_steps (run_pk, step, ord, spec, needs, remaining, state)"
                     " SELECT pk, 'a', 0, '{}', '{}', 0, 'pending' FROM resumable_runs WHERE id = 'old'")
        conn.execute("INSERT INTO resumable_runner_leases VALUES ('old', 1, 'h', '2026-11-30T10:00:01Z')")


def test_an_upgraded_database_has_the_schema_of_a_fresh_one(two_dbs: tuple[str, str]) -> None:
    upgraded, fresh = two_dbs
    schema_one(upgraded)
    v = schema.latest()
    assert ok(cli("db", "upgrade", env=base_env(RESUMABLE_STORE=upgraded))).endswith(f": schema version 1 -> {v}\n")
    assert ok(cli("db", "upgrade", env=base_env(RESUMABLE_STORE=fresh))).endswith(f": schema version 0 -> {v}\n")
    assert catalog(upgraded) == catalog(fresh)
    assert catalog(fresh)["constraints"]  # the comparison saw something
    times = dict(sql(upgraded, "SELECT id, extract(epoch FROM updated_at) FROM resumable_runs"))
    assert times["old"] == 1796032800 and times["odd"] is None
    (started,) = sql(upgraded, "SELECT extract(epoch FROM started_at) FROM resumable_runner_leases")[0]
    assert started == 1796032801


def test_step_and_attempt_states_are_constrained(two_dbs: tuple[str, str]) -> None:
    import psycopg

    _, fresh = two_dbs
    ok(cli("db", "upgrade", env=base_env(RESUMABLE_STORE=fresh)))
    sql(fresh, "INSERT INTO resumable_runs (id) VALUES ('r')")
    for state in ("finished", "running"):  # not a state; running without a lease
        with pytest.raises(psycopg.errors.CheckViolation):
            sql(fresh, "INSERT INTO resumable_steps (run_pk, step, ord, spec, needs, remaining, state)"
                       " SELECT pk, 'a', 0, '{}', '{}', 0, %s FROM resumable_runs", (state,))
    with pytest.raises(psycopg.errors.CheckViolation):
        sql(fresh, "INSERT INTO resumable_attempts (run_pk, step, n, epoch, worker, host, pid, started_at, status)"
                   " SELECT pk, 'a', 1, 1, 'w', 'h', 1, now(), 'lost' FROM resumable_runs")


def test_every_named_query_is_valid_sql(two_dbs: tuple[str, str]) -> None:
    """Each statement of queries.sql is prepared by the server (names, types, parameters)."""
    import re

    import psycopg

    from resumable.store.postgres.queries import Q

    _, fresh = two_dbs
    ok(cli("db", "upgrade", env=base_env(RESUMABLE_STORE=fresh)))
    with psycopg.connect(fresh) as conn:
        for name, text in vars(Q).items():
            # Every parameter as an untyped NULL: the statement's own casts give each its type.
            statement = re.sub(r"%\(\w+\)[sb]|%s", "NULL", text)
            conn.execute(f"PREPARE q_{name} AS {statement}".encode())
        conn.rollback()
