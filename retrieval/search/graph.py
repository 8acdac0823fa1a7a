"""The graph pass: a breadth-first walk of the citation graph in both directions, as a recursive CTE.

From each seed the walk follows references (papers it cites) and citing papers, at most ``max_hops`` (<= 2)
steps, and returns every paper reached once with its minimum hop distance. A citation with an end outside the
corpus (a dangling reference, or a citing paper known only from the cited paper's record) is not an edge, so the
walk never passes through one.
"""

from __future__ import annotations

import json

from ..config import MAX_HOPS
from ..errors import ConfigError
from ..store.sql.dialect import statement
from ..store.sql.executor import Executor, Snapshot
from ..validate import paper_id_list

WALK_SQL = """\
WITH RECURSIVE
seeds(paper_id) AS (
    SELECT value
    FROM json_each(:seed_ids)
    JOIN papers ON papers.id = value
),
walk(paper_id, hops) AS (
    SELECT paper_id, 0
    FROM seeds
    UNION
    SELECT c.cited_id, w.hops + 1
    FROM walk AS w
    JOIN citations AS c ON c.citing_id = w.paper_id
    JOIN papers AS p ON p.id = c.cited_id
    WHERE w.hops < :max_hops
    UNION
    SELECT c.citing_id, w.hops + 1
    FROM walk AS w
    JOIN citations AS c ON c.cited_id = w.paper_id
    JOIN papers AS p ON p.id = c.citing_id
    WHERE w.hops < :max_hops
)
SELECT paper_id,
       min(hops) AS distance
FROM walk
GROUP BY paper_id
ORDER BY distance, paper_id"""

# PostgreSQL allows one reference to the recursive CTE in its recursive term: both directions are one lateral
# union there (the same rows: UNION still drops a (paper, hops) pair already reached). Its own text: the plan
# differs.
_WALK_SQL_POSTGRESQL = """\
WITH RECURSIVE
seeds(paper_id) AS (
    SELECT j.value
    FROM jsonb_array_elements_text(CAST(:seed_ids AS jsonb)) AS j (value)
    JOIN papers ON papers.id = j.value
),
walk(paper_id, hops) AS (
    SELECT paper_id, 0
    FROM seeds
    UNION
    SELECT n.paper_id, w.hops + 1
    FROM walk AS w
    CROSS JOIN LATERAL (
        SELECT c.cited_id AS paper_id
        FROM citations AS c
        JOIN papers AS p ON p.id = c.cited_id
        WHERE c.citing_id = w.paper_id
        UNION ALL
        SELECT c.citing_id
        FROM citations AS c
        JOIN papers AS p ON p.id = c.citing_id
        WHERE c.cited_id = w.paper_id
    ) AS n
    WHERE w.hops < :max_hops
)
SELECT paper_id,
       min(hops) AS distance
FROM walk
GROUP BY paper_id
ORDER BY distance, paper_id COLLATE "C\""""
statement(WALK_SQL, postgresql=_WALK_SQL_POSTGRESQL)


def clamp_hops(max_hops: int) -> int:
    """``max_hops`` clamped to the walk's ceiling of 2; a negative value is an error."""
    if max_hops < 0:
        raise ConfigError(f"max_hops must be 0, 1 or 2 (larger values are clamped to 2), got {max_hops}")
    return min(max_hops, MAX_HOPS)


def walk(snap: Snapshot, seeds: list[str], max_hops: int = MAX_HOPS) -> dict[str, int]:
    """Map every paper within ``max_hops`` of a seed (seeds included, at 0) to its minimum distance.

    Seeds that are not papers of the index are ignored. Ordered by distance, then id.
    """
    if not seeds:
        return {}
    params = {"seed_ids": json.dumps(list(seeds)), "max_hops": clamp_hops(max_hops)}
    return dict(snap.rows("citation walk (recursive CTE)", WALK_SQL, params))


class CitationGraph:
    """The directed citation graph of an index, walked in SQL (each call reads one snapshot)."""

    def __init__(self, executor: Executor) -> None:
        self._executor = executor

    def expand(self, seeds: list[str], max_hops: int = MAX_HOPS) -> dict[str, int]:
        """``walk`` from ``seeds`` (one id, or a list): every paper within ``max_hops`` and its minimum distance."""
        seeds = paper_id_list(seeds, "seeds")
        clamp_hops(max_hops)
        with self._executor.snapshot() as snap:
            return walk(snap, seeds, max_hops)
