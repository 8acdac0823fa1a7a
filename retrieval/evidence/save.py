"""Storing an evidence run in the index file (the tables ``evidence_runs``, ``evidence_run_nodes`` and
``evidence_run_edges`` of ``retrieval.store.schema.models``, created by migration 0003).

One write transaction per run, on a connection of its own (the search connection is read-only). The saved rows
answer questions such as, for the latest run::

    SELECT paper_id, role, kept, reason, score, rank
    FROM evidence_run_nodes
    WHERE run_id = (SELECT max(id) FROM evidence_runs)
    ORDER BY rank IS NULL, rank;

    SELECT citing_id, cited_id, delta, weight, kept, reason
    FROM evidence_run_edges
    WHERE run_id = 1
      AND cited_id = 'hep-th/9711200';
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone

from ..store.backend import file_only
from ..store.database import check_index
from ..store.sqlite.files import write_transaction
from .records import EdgeRecord, EvidenceRun, NodeRecord

#: How long a save waits for another writer (an ``add`` in progress) before giving up.
BUSY_TIMEOUT_MS = 10_000

INSERT_RUN_SQL = """\
INSERT INTO evidence_runs (
    created_at, query, subqueries, ranker, recency, reference_year, settings, seeds,
    found_nodes, found_edges, nodes, edges, kept_nodes, kept_edges,
    scorer, scorer_bound, scorer_calls, iterations, status, warnings, wall_ms
)
VALUES (
    :created_at, :query, :subqueries, :ranker, :recency, :reference_year, :settings, :seeds,
    :found_nodes, :found_edges, :nodes, :edges, :kept_nodes, :kept_edges,
    :scorer, :scorer_bound, :scorer_calls, :iterations, :status, :warnings, :wall_ms
)"""

INSERT_NODE_SQL = """\
INSERT INTO evidence_run_nodes (
    run_id, paper_id, title, year, age, role, seed_subqueries, seed_relevance, kept, reason, score, rank
)
VALUES (
    :run_id, :paper_id, :title, :year, :age, :role, :seed_subqueries, :seed_relevance, :kept, :reason, :score, :rank
)"""

INSERT_EDGE_SQL = """\
INSERT INTO evidence_run_edges (
    run_id, citing_id, cited_id, claims_citing, claims_cited, covered_claims,
    delta, age_weight, weight, kept, reason
)
VALUES (
    :run_id, :citing_id, :cited_id, :claims_citing, :claims_cited, :covered_claims,
    :delta, :age_weight, :weight, :kept, :reason
)"""


def save_run(path: str | os.PathLike[str], run: EvidenceRun) -> int:
    """Store ``run`` in the index at ``path`` and return its id in ``evidence_runs`` (one transaction, under the
    writers' lock, so a rebuild never swaps in over it unseen)."""
    path = file_only(path, "explain --save (runs are stored in an index file)")
    check_index(path)  # the head revision and its audit tables (an older index is refused: upgrade it)
    with write_transaction(path, BUSY_TIMEOUT_MS, "save the run in") as conn:
        run_id = conn.execute(INSERT_RUN_SQL, _run_row(run)).lastrowid
        conn.executemany(INSERT_NODE_SQL, (_node_row(run_id, node) for node in run.nodes.values()))
        conn.executemany(INSERT_EDGE_SQL, (_edge_row(run_id, edge) for edge in run.edges.values()))
    return run_id


def _run_row(run: EvidenceRun) -> dict:
    return {
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "query": run.query,
        "subqueries": json.dumps(run.subqueries, ensure_ascii=False),
        "ranker": run.config.ranker,
        "recency": run.config.recency,
        "reference_year": run.reference_year,
        "settings": json.dumps(run.config.to_dict(), sort_keys=True),
        "seeds": len(run.seeds),
        "found_nodes": run.size.found_nodes,
        "found_edges": run.size.found_edges,
        "nodes": run.size.nodes,
        "edges": run.size.edges,
        "kept_nodes": sum(1 for node in run.nodes.values() if node.kept),
        "kept_edges": len(run.kept_edges),
        "scorer": run.scorer,
        "scorer_bound": run.size.scorer_bound,
        "scorer_calls": run.scorer_calls,
        "iterations": run.iterations,
        "status": run.health.status,
        "warnings": json.dumps(list(run.health.warnings), ensure_ascii=False),
        "wall_ms": run.timings_ms.get("total", 0.0),
    }


def _node_row(run_id: int, node: NodeRecord) -> dict:
    seed = node.seed
    return {
        "run_id": run_id,
        "paper_id": node.paper_id,
        "title": node.title,
        "year": node.year,
        "age": node.age,
        "role": node.role,
        "seed_subqueries": json.dumps(list(seed.subqueries)) if seed else None,
        "seed_relevance": seed.relevance if seed else None,
        "kept": node.kept,
        "reason": node.reason,
        "score": node.score,
        "rank": node.rank,
    }


def _edge_row(run_id: int, edge: EdgeRecord) -> dict:
    return {
        "run_id": run_id,
        "citing_id": edge.citing,
        "cited_id": edge.cited,
        "claims_citing": edge.claims_citing,
        "claims_cited": edge.claims_cited,
        "covered_claims": edge.support.covered,
        "delta": edge.delta,
        "age_weight": edge.age_weight,
        "weight": edge.weight,
        "kept": edge.kept,
        "reason": edge.reason,
    }
