"""Stage 2, the evidence graph: the seeds' 1.5-hop citation neighbourhood, built in SQL.

- V = the seeds, the papers they cite (references) and the papers that cite them (citing papers). Only papers
  of the index count: a ``citations`` row whose other end is not in ``papers`` (a dangling reference, or a citing
  paper known only from the cited paper's record) brings nothing in.
- E = every citation edge u -> v (u cites v) with both ends in V, not only the edges touching a seed: a
  reference of one seed that cites a reference of another is an edge too.

Each node records the seeds that brought it in and how (``reference`` of a seed, ``citing`` a seed, or
``seed``). The size (|V|, |E|) is known before any edge is scored.

**Cap.** With ``max_nodes`` set and |V| above it, ``cap_policy="refuse"`` raises ``ConfigError`` (nothing is
scored), and ``"trim"`` keeps the seeds and then the non-seed papers linked to the most seeds, ties by the newest
year (papers without a year last), then id, up to ``max_nodes`` papers; E is then the edges among the papers kept.
Both sizes, found and kept, are reported. Seeds are never trimmed: a cap below the number of seeds is refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..errors import ConfigError
from ..search.papers import checked_years
from ..store.sql.dialect import DIALECTS, POSTGRESQL, SQLITE, Dialect, citations_by, register_sharded, statement
from ..store.sql.executor import Snapshot
from .config import EvidenceConfig


# CROSS JOIN fixes SQLite's join order: out from the few seeds along the citation indexes. With a plain JOIN the
# planner may start from ``papers`` and scan all of them, since it cannot know how few seeds there are.
def _neighbourhood(d: Dialect) -> str:
    return f"""\
WITH seeds(paper_id) AS (
    SELECT DISTINCT p.id
    FROM {d.rows("seed_ids", "j")}
    JOIN papers AS p ON p.id = j.value
),
links(paper_id, seed_id, relation) AS (
    SELECT s.paper_id, s.paper_id, 'seed'
    FROM seeds AS s
    UNION ALL
    SELECT c.cited_id, s.paper_id, 'reference'
    FROM seeds AS s
    {d.cross_join} citations AS c ON c.citing_id = s.paper_id
    {d.cross_join} papers AS p ON p.id = c.cited_id
    UNION ALL
    SELECT c.citing_id, s.paper_id, 'citing'
    FROM seeds AS s
    {d.cross_join} citations AS c ON c.cited_id = s.paper_id
    {d.cross_join} papers AS p ON p.id = c.citing_id
)"""


#: V in the order the cap keeps it: seeds, then most seeds linked, newest, id. ``links`` is a JSON list of
#: ``[seed id, relation]`` pairs (empty for a seed that nothing else links to).
_NODES_SQL = f"""\
{_neighbourhood(DIALECTS[SQLITE])}
SELECT l.paper_id,
       max(l.relation = 'seed') AS is_seed,
       count(DISTINCT l.seed_id) FILTER (WHERE l.relation <> 'seed') AS seed_links,
       p.year,
       json_group_array(json_array(l.seed_id, l.relation)) FILTER (WHERE l.relation <> 'seed') AS links
FROM links AS l
JOIN papers AS p ON p.id = l.paper_id
GROUP BY l.paper_id
ORDER BY is_seed DESC,
         seed_links DESC,
         p.year IS NULL,
         p.year DESC,
         l.paper_id"""

# PostgreSQL, its own text (the plan differs): bool_or for SQLite's max over 0/1 (cast back to 0/1), json_agg
# for json_group_array (as text: the caller decodes it), ids ordered byte-wise.
# The year is read per node after the grouping (every node is a paper): joined before it, the planner, which
# cannot know how few links there are, hashed the whole papers table.
_NODES_SQL_POSTGRESQL = f"""\
{_neighbourhood(DIALECTS[POSTGRESQL])},
nodes AS (
    SELECT l.paper_id,
           CAST(bool_or(l.relation = 'seed') AS integer) AS is_seed,
           count(DISTINCT l.seed_id) FILTER (WHERE l.relation <> 'seed') AS seed_links,
           CAST(json_agg(json_build_array(l.seed_id, l.relation)) FILTER (WHERE l.relation <> 'seed') AS text)
               AS links
    FROM links AS l
    GROUP BY l.paper_id
),
dated AS (
    SELECT n.paper_id,
           n.is_seed,
           n.seed_links,
           (SELECT p.year FROM papers AS p WHERE p.id = n.paper_id) AS year,
           n.links
    FROM nodes AS n
)
SELECT paper_id,
       is_seed,
       seed_links,
       year,
       links
FROM dated
ORDER BY is_seed DESC,
         seed_links DESC,
         year IS NULL,
         year DESC,
         paper_id COLLATE "C\""""
NODES_SQL = statement(_NODES_SQL, postgresql=_NODES_SQL_POSTGRESQL)

# A sharded coordinator's text: the seeds' references and citing papers read by one key array each
# (``citations_by``), which of them are papers and their years by one more (a lookup per link or per node is a
# round trip to each shard).
_SEEDS_IDS = "SELECT value FROM jsonb_array_elements_text(CAST(:seed_ids AS jsonb))"
_NEIGHBOURHOOD_SHARDED = f"""\
WITH seeds AS MATERIALIZED (
    SELECT p.id AS paper_id
    FROM papers AS p
    WHERE p.id = ANY (ARRAY({_SEEDS_IDS}))
),
refs AS MATERIALIZED (
    SELECT c.citing_id AS seed_id,
           c.cited_id AS paper_id
    FROM {citations_by("citing", "SELECT paper_id FROM seeds")}
),
citers AS MATERIALIZED (
    SELECT c.cited_id AS seed_id,
           c.citing_id AS paper_id
    FROM {citations_by("cited", "SELECT paper_id FROM seeds")}
),
live AS MATERIALIZED (
    SELECT p.id,
           p.year
    FROM papers AS p
    WHERE p.id = ANY (ARRAY(
        SELECT paper_id FROM refs
        UNION
        SELECT paper_id FROM citers
        UNION
        SELECT paper_id FROM seeds
    ))
),
links(paper_id, seed_id, relation) AS (
    SELECT s.paper_id, s.paper_id, 'seed'
    FROM seeds AS s
    UNION ALL
    SELECT r.paper_id, r.seed_id, 'reference'
    FROM refs AS r
    JOIN live AS l ON l.id = r.paper_id
    UNION ALL
    SELECT c.paper_id, c.seed_id, 'citing'
    FROM citers AS c
    JOIN live AS l ON l.id = c.paper_id
)"""
_NODES_TAIL = _NODES_SQL_POSTGRESQL[len(_neighbourhood(DIALECTS[POSTGRESQL])) :]
_YEAR_PER_NODE = """           (SELECT p.year FROM papers AS p WHERE p.id = n.paper_id) AS year,
           n.links
    FROM nodes AS n"""
_YEAR_OF_LIVE = """           y.year,
           n.links
    FROM nodes AS n
    LEFT JOIN live AS y ON y.id = n.paper_id"""
register_sharded(NODES_SQL, _NEIGHBOURHOOD_SHARDED + _NODES_TAIL.replace(_YEAR_PER_NODE, _YEAR_OF_LIVE))

#: E: every citation between two papers of V (both ends are papers, since V holds only papers). The citing end is
#: looked up (the index on ``citations``), the cited end tested against V. On PostgreSQL with hash joins allowed
#: (``hash_joins=True``): a graph at its cap (2,000 papers) cites some 60,000 papers, and the read sessions'
#: lookups-only planner tested each against every paper of V in a nested loop (1.2e8 comparisons: 4 s on hepth, 10 s
#: for the count of the untrimmed graph of 2,700 papers); the hash of V takes 30 ms.
EDGES_SQL = statement(
    lambda d: (
        f"""\
SELECT c.citing_id,
       c.cited_id
FROM citations AS c
WHERE c.citing_id {d.any_of("node_ids")}
  AND c.cited_id IN ({d.values("node_ids")})
ORDER BY c.citing_id{d.bytes_order}, c.cited_id{d.bytes_order}"""
    ),
    hash_joins=True,
)

EDGE_COUNT_SQL = statement(
    lambda d: (
        f"""\
SELECT count(*)
FROM citations AS c
WHERE c.citing_id {d.any_of("node_ids")}
  AND c.cited_id IN ({d.values("node_ids")})"""
    ),
    hash_joins=True,  # as EDGES_SQL's, of the graph before the cap trimmed it
)

# A sharded coordinator's texts: the nodes' references read by one key array (``citations_by``); through the
# view, a round trip to each shard per node.
_NODE_IDS = "SELECT value FROM jsonb_array_elements_text(CAST(:node_ids AS jsonb))"
register_sharded(
    EDGES_SQL,
    f"""\
SELECT c.citing_id,
       c.cited_id
FROM {citations_by("citing", _NODE_IDS)}
WHERE c.cited_id IN ({_NODE_IDS})
ORDER BY c.citing_id COLLATE "C", c.cited_id COLLATE "C\"""",
)
register_sharded(
    EDGE_COUNT_SQL,
    f"""\
SELECT count(*)
FROM {citations_by("citing", _NODE_IDS)}
WHERE c.cited_id IN ({_NODE_IDS})""",
)


@dataclass
class EvidenceGraph:
    """V and E of a run, with how each node was reached, and the sizes before and after the cap."""

    seeds: list[str]
    nodes: list[str]  # sorted by id
    years: dict[str, int | None]
    links: dict[str, list[tuple[str, str]]]  # node -> sorted (seed id, "reference" | "citing")
    edges: list[tuple[str, str]]  # (citing, cited), sorted
    found_nodes: int
    found_edges: int
    trimmed: list[str] = field(default_factory=list)  # papers left out by the cap, in the order they were cut

    @property
    def size(self) -> tuple[int, int]:
        return len(self.nodes), len(self.edges)


def build_graph(snap: Snapshot, seed_ids: list[str], config: EvidenceConfig) -> EvidenceGraph:
    """V and E around ``seed_ids`` (see the module docstring); raises ``ConfigError`` on a refused cap."""
    rows = snap.rows("evidence: nodes", NODES_SQL, {"seed_ids": json.dumps(seed_ids)})
    kept, trimmed = rows, []
    cap = config.max_nodes
    if cap is not None and len(rows) > cap:
        n_seeds = sum(1 for row in rows if row[1])
        if n_seeds > cap:  # trimming never drops a seed: the graph could not be the seeds' neighbourhood
            raise ConfigError(
                f"the {n_seeds} seeds alone exceed the cap of {cap:,} papers: raise max_nodes (--max-nodes) "
                "above the number of seeds, or take fewer seeds per sub-query (--seeds)"
            )
        if config.cap_policy == "refuse":
            found_edges = _count_edges(snap, [row[0] for row in rows])
            raise ConfigError(
                f"the evidence graph has {len(rows):,} papers and {found_edges:,} edges, above the cap of "
                f"{cap:,} papers: narrow the query or its sub-queries, take fewer seeds, raise max_nodes "
                "(--max-nodes), or let the cap trim the graph (--cap trim)"
            )
        kept, trimmed = rows[:cap], [row[0] for row in rows[cap:]]
    seeds = [row[0] for row in kept if row[1]]
    nodes = sorted(row[0] for row in kept)
    edges = [tuple(row) for row in snap.rows("evidence: edges", EDGES_SQL, {"node_ids": json.dumps(nodes)})]
    found_edges = _count_edges(snap, [row[0] for row in rows]) if trimmed else len(edges)
    return EvidenceGraph(
        seeds=sorted(seeds),
        nodes=nodes,
        years=checked_years(snap, {row[0]: row[3] for row in kept}),
        links={row[0]: sorted(tuple(link) for link in json.loads(row[4] or "[]")) for row in kept},
        edges=edges,
        found_nodes=len(rows),
        found_edges=found_edges,
        trimmed=trimmed,
    )


def _count_edges(snap: Snapshot, node_ids: list[str]) -> int:
    return snap.one("evidence: edges before trimming", EDGE_COUNT_SQL, {"node_ids": json.dumps(node_ids)})[0]
