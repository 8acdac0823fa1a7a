"""The evidence pipeline's statements on PostgreSQL, against a real server: how they are planned, and that the run
is SQLite's. Needs ``$RETRIEVAL_TEST_POSTGRES`` (the fixtures in ``tests/conftest.py``); no mocks."""

from __future__ import annotations

import json

import pytest

from retrieval.config import resolve_db
from retrieval.evidence.config import EvidenceConfig
from retrieval.evidence.graph import EDGE_COUNT_SQL, EDGES_SQL, NODES_SQL
from retrieval.evidence.pipeline import explain
from retrieval.search.client import RetrievalClient
from retrieval.store.postgres.connection import connect
from retrieval.store.sql.dialect import HASH_JOINS, HASH_JOINS_ON_SQL, POSTGRESQL, text_for
from retrieval.store.sql.executor import Trace
from tests.test_postgres_read import same_data

pytest.importorskip("psycopg")

HASH_ON = "planner: hash joins for the next statement"


def test_the_evidence_graphs_edges_alone_are_hash_joined_and_the_run_is_the_same(demo_db, demo_pg):
    """The evidence graph's edges (and their count before the cap trims V) test the cited end of every citation of
    V against V. Planned as lookups only (the read sessions), that was a nested loop over V per citation: 4 s and
    10 s on hepth at the default cap, where hashing V takes 30 ms. Those two statements are allowed hash joins (the
    nodes statement is not), the planner then hashes V, and the run is SQLite's."""
    assert {EDGES_SQL, EDGE_COUNT_SQL} <= HASH_JOINS and NODES_SQL not in HASH_JOINS
    cfg = EvidenceConfig(max_nodes=20, cap_policy="trim")  # trimmed: the count before trimming runs too
    trace = Trace()
    with RetrievalClient(demo_db) as lite, RetrievalClient(demo_pg, tracer=trace) as pg:
        run = explain(pg, "attention sparsity", config=cfg)
        same_data(explain(lite, "attention sparsity", config=cfg).to_dict(), run.to_dict())
    assert run.size.found_nodes > run.size.nodes
    names = [s.name for s in trace.statements]
    hashed = [i for i, n in enumerate(names) if n in ("evidence: edges", "evidence: edges before trimming")]
    assert len(hashed) == 2
    for i in hashed:
        assert names[i - 1] == HASH_ON and names[i + 1] == "planner: lookups again"
    assert names[names.index("evidence: nodes") - 1] != HASH_ON


@pytest.mark.parametrize("sql", [EDGES_SQL, EDGE_COUNT_SQL], ids=["edges", "edges before trimming"])
def test_the_evidence_graphs_edges_hash_the_nodes_rather_than_test_each_citation_against_all(demo_pg, sql):
    """In a read session with hash joins allowed for the statement (as the executor runs it), a V at the default
    cap (2,000 ids) is hashed once, not compared with every citation of V in a nested loop's join filter."""
    conn = connect(resolve_db(demo_pg))  # a read session: lookups only, but for the statements marked
    try:
        conn.execute(text_for("BEGIN", POSTGRESQL))
        conn.execute(text_for(HASH_JOINS_ON_SQL, POSTGRESQL))
        node_ids = json.dumps([f"x{i}" for i in range(2000)])
        plan = "\n".join(row[0] for row in conn.execute(f"EXPLAIN {text_for(sql, POSTGRESQL)}", {"node_ids": node_ids}))
    finally:
        conn.close()
    assert "Hash Semi Join" in plan and "Join Filter" not in plan, plan
