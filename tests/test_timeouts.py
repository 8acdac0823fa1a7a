"""Reads with a time budget: a progress handler on SQLite, ``statement_timeout`` on PostgreSQL, each stopped read a
``QueryTimeoutError`` that says what to do (a server's requests could otherwise hold a thread for ever: a search
against a server that held a lock hung for as long as the lock was held)."""

from __future__ import annotations

import time

import pytest

from retrieval import RetrievalClient
from retrieval.errors import QueryTimeoutError

LONG_QUERY = " ".join(["computer program language system data structure algorithm time sharing"] * 3)


def test_a_sqlite_read_past_its_budget_is_stopped_with_a_message(cacm_db):
    db, _ = cacm_db
    with RetrievalClient(db) as client:  # the default budget: ample
        expected = [r.paper.id for r in client.search(LONG_QUERY).ranked]
    assert expected
    with RetrievalClient(db, timeout=1e-6) as client, pytest.raises(QueryTimeoutError) as stopped:
        client.search(LONG_QUERY)
    assert "budget" in str(stopped.value) and "--query-timeout" in str(stopped.value)
    with RetrievalClient(db, timeout=None) as client:  # no budget at all
        assert [r.paper.id for r in client.search(LONG_QUERY).ranked] == expected


def _lock_every_table(url: str):
    import psycopg

    conn = psycopg.connect(url)
    tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'retrieval'")]
    conn.execute("LOCK TABLE " + ", ".join(f"retrieval.{t}" for t in tables) + " IN ACCESS EXCLUSIVE MODE")
    return conn


def test_a_postgresql_read_past_its_statement_timeout_is_stopped_and_the_client_goes_on(demo_pg):
    with RetrievalClient(demo_pg, timeout=0.5) as client:
        expected = [r.paper.id for r in client.search("attention sparsity").ranked]
        held = _lock_every_table(demo_pg)
        try:
            began = time.monotonic()
            with pytest.raises(QueryTimeoutError) as stopped:
                client.search("attention sparsity")
            assert time.monotonic() - began < 5
        finally:
            held.close()
        assert "0.5 s budget" in str(stopped.value) and "postgres@" in str(stopped.value)
        assert [r.paper.id for r in client.search("attention sparsity").ranked] == expected
