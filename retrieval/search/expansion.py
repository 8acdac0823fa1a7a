"""Graph expansion under a policy: whether to expand (the gate), along which relations, and how far a hub reaches.

The gate. A seed's *match* is its BM25 score over the query's attainable score, sum over the query's tokens of
idf(t) * (k1 + 1) (what a paper would score if every token saturated its term-frequency factor), so it is
comparable across queries of any length. Seeds whose match reaches ``gate_threshold`` survive; ``expand="auto"``
expands only when fewer than ``gate_min_survivors`` survive, i.e. when the lexical pass found few strong hits.

Relations, from each source paper (a seed, or a paper reached at the previous hop):

- ``references``: the papers it cites (older work it builds on); weight 1;
- ``citing``: the papers that cite it (newer work); weight 1;
- ``cocitation``: papers cited together with it by the same papers; weight = how many papers cite both;
- ``coupling`` (bibliographic coupling): papers that cite what it cites; weight = how many references they share.

Co-citation and coupling look through at most ``fanout`` intermediate citing papers per source (co-citation)
or per shared reference (coupling), the first by id, so a hub cannot turn one query into a scan of the
citation table.

Hubs. Each source keeps at most ``max_neighbours`` neighbours per relation: the strongest by weight, then the
most cited (in-degree), then by id. A source's contribution is divided by ln(e + its degree) (as Adamic/Adar
down-weights common neighbours by degree), so a hub seed spreads less per neighbour. After all hops the papers the
expansion adds are capped at ``max_candidates``, keeping the highest evidence (then id).

Evidence. ``evidence(x) = sum over (source s, relation r) reaching x of strength(s) * weight_r(s, x) *
relation_weight[r] / ln(e + degree(s))``, where strength is a seed's normalised BM25 score (its score over the
best seed's) and, at hop 2, half the evidence of the hop-1 paper it is reached from.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict, namedtuple

from ..bm25 import SCORE_DECIMALS
from ..config import RELATIONS, RetrievalConfig
from ..store.sql.dialect import DIALECTS, POSTGRESQL, Dialect, citations_by, register_sharded, statement
from ..store.sql.executor import Snapshot
from .adjacency import GRAPHS
from .query import WeightedQuery

#: Multiplier of each relation's weight in the evidence sum (direct citations count fully).
RELATION_WEIGHTS = {"references": 1.0, "citing": 1.0, "cocitation": 0.25, "coupling": 0.25}
#: The relations the kept citation graph answers (``adjacency``): a paper's own references and citing papers.
DIRECT = ("references", "citing")
#: A hop-2 source passes on this share of its own evidence.
HOP_DECAY = 0.5
#: The most papers a hop starts from (the strongest; the defaults start hop 2 from at most 20 x 30 x 2 = 1,200).
MAX_SOURCES = 1_500


def _sources(d: Dialect) -> str:
    return f"""\
WITH sources AS (
    SELECT value AS source
    FROM {d.rows("sources")}
)"""


def _relation_edges(d: Dialect, relation: str) -> str:
    """One CTE ``edges(source, paper_id, weight)`` of ``relation`` over live edges only (both ends are papers).
    Every ordering of ids is by their bytes, since which ``fanout`` citing papers are looked through and which
    neighbours a cap keeps depend on it."""
    if relation == "references":
        return """\
edges AS (
    SELECT s.source, c.cited_id AS paper_id, 1 AS weight
    FROM sources AS s
    JOIN citations AS c ON c.citing_id = s.source
    JOIN papers AS p ON p.id = c.cited_id
)"""
    if relation == "citing":
        return """\
edges AS (
    SELECT s.source, c.citing_id AS paper_id, 1 AS weight
    FROM sources AS s
    JOIN citations AS c ON c.cited_id = s.source
    JOIN papers AS p ON p.id = c.citing_id
)"""
    if relation == "cocitation":
        return f"""\
citers AS (
    SELECT s.source,
           c.citing_id AS citer,
           row_number() OVER (PARTITION BY s.source ORDER BY c.citing_id{d.bytes_order}) AS position
    FROM sources AS s
    JOIN citations AS c ON c.cited_id = s.source
),
edges AS (
    SELECT ct.source, c.cited_id AS paper_id, count(*) AS weight
    FROM citers AS ct
    JOIN citations AS c ON c.citing_id = ct.citer
    JOIN papers AS p ON p.id = c.cited_id
    WHERE ct.position <= :fanout
      AND c.cited_id <> ct.source
    GROUP BY ct.source, c.cited_id
)"""
    # The sources, then their references, drive (SQLite's CROSS JOIN keeps that order): left to the planner, SQLite
    # scanned every citation for the DISTINCT and the window.
    return f"""\
refs AS (
    SELECT DISTINCT c.cited_id AS ref
    FROM sources AS s
    {d.cross_join} citations AS c ON c.citing_id = s.source
),
ref_citers AS (
    SELECT c.cited_id AS ref,
           c.citing_id AS citer,
           row_number() OVER (PARTITION BY c.cited_id ORDER BY c.citing_id{d.bytes_order}) AS position
    FROM refs AS r
    {d.cross_join} citations AS c ON c.cited_id = r.ref
),
edges AS (
    SELECT s.source, rc.citer AS paper_id, count(*) AS weight
    FROM sources AS s
    JOIN citations AS c ON c.citing_id = s.source
    JOIN ref_citers AS rc ON rc.ref = c.cited_id
    JOIN papers AS p ON p.id = rc.citer
    WHERE rc.position <= :fanout
      AND rc.citer <> s.source
    GROUP BY s.source, rc.citer
)"""


def _capped(d: Dialect) -> str:
    """The shared tail: keep each source's strongest neighbours (weight, then citation count, then id)."""
    return f"""\
ranked AS (
    SELECT e.source,
           e.paper_id,
           e.weight,
           row_number() OVER (
               PARTITION BY e.source
               ORDER BY e.weight DESC,
                        coalesce((SELECT n.cited_by FROM cited_counts AS n WHERE n.paper_id = e.paper_id), 0) DESC,
                        e.paper_id{d.bytes_order}
           ) AS position
    FROM edges AS e
)
SELECT source, paper_id, weight
FROM ranked
WHERE :max_neighbours < 0 OR position <= :max_neighbours
ORDER BY source{d.bytes_order}, position"""


def _degree(d: Dialect) -> str:
    return f"""\
SELECT s.value AS paper_id,
       (SELECT count(*) FROM citations AS c JOIN papers AS p ON p.id = c.cited_id WHERE c.citing_id = s.value)
     + (SELECT count(*) FROM citations AS c JOIN papers AS p ON p.id = c.citing_id WHERE c.cited_id = s.value)
       AS degree
FROM {d.rows("sources", "s")}"""


DEGREE_SQL = statement(_degree)
DEGREE_SQL_SHARDED = f"""\
WITH s AS MATERIALIZED (
    SELECT value,
           position
    FROM jsonb_array_elements_text(CAST(:sources AS jsonb)) WITH ORDINALITY AS s (value, position)
),
touching AS MATERIALIZED (
    SELECT c.citing_id AS paper_id,
           c.cited_id AS other
    FROM {citations_by("citing", "SELECT value FROM s")}
    UNION ALL
    SELECT c.cited_id AS paper_id,
           c.citing_id AS other
    FROM {citations_by("cited", "SELECT value FROM s")}
),
live AS MATERIALIZED (
    SELECT p.id
    FROM papers AS p
    WHERE p.id = ANY (ARRAY(SELECT DISTINCT other FROM touching))
),
degrees AS (
    SELECT t.paper_id,
           count(*) AS degree
    FROM touching AS t
    JOIN live AS l ON l.id = t.other
    GROUP BY t.paper_id
)
SELECT s.value AS paper_id,
       coalesce(d.degree, 0) AS degree
FROM s
LEFT JOIN degrees AS d ON d.paper_id = s.value
ORDER BY s.position"""
register_sharded(DEGREE_SQL, DEGREE_SQL_SHARDED)

#: Co-citation and coupling join every citer of the sources (or of their references) to its references:
#: thousands of rows to thousands, which a single server hash-joins (0.3 s for coupling on hepth, 5.4 s by lookups).
HASHED = ("cocitation", "coupling")
#: ``relation_sql``'s statements, one per relation.
RELATION_SQL = {
    r: statement(lambda d, r=r: f"{_sources(d)},\n{_relation_edges(d, r)},\n{_capped(d)}", hash_joins=r in HASHED)
    for r in RELATIONS
}


def relation_sql(relation: str) -> str:
    """The statement that lists ``(source, neighbour, weight)`` for ``relation``, capped per source."""
    return RELATION_SQL[relation]


# A sharded index's coordinator (retrieval.store.postgres.shards): each foreign table read once per statement, by a key
# array sent to the shards, instead of one lookup per source and per edge (a round trip each there). Each relation
# gives ``pairs(source, paper_id, weight)``, kept where the neighbour is a paper, then capped as above.
_PAIRS_SHARDED = {
    "references": f"""\
pairs AS MATERIALIZED (
    SELECT c.citing_id AS source,
           c.cited_id AS paper_id,
           1 AS weight
    FROM {citations_by("citing", "SELECT source FROM sources")}
)""",
    "citing": f"""\
pairs AS MATERIALIZED (
    SELECT c.cited_id AS source,
           c.citing_id AS paper_id,
           1 AS weight
    FROM {citations_by("cited", "SELECT source FROM sources")}
)""",
    "cocitation": f"""\
citers AS MATERIALIZED (
    SELECT c.cited_id AS source,
           c.citing_id AS citer,
           row_number() OVER (PARTITION BY c.cited_id ORDER BY c.citing_id COLLATE "C") AS position
    FROM {citations_by("cited", "SELECT source FROM sources")}
),
kept AS MATERIALIZED (
    SELECT source,
           citer
    FROM citers
    WHERE position <= :fanout
),
theirs AS MATERIALIZED (
    SELECT c.citing_id AS citer,
           c.cited_id
    FROM {citations_by("citing", "SELECT DISTINCT citer FROM kept")}
),
pairs AS MATERIALIZED (
    SELECT k.source,
           t.cited_id AS paper_id,
           count(*) AS weight
    FROM kept AS k
    JOIN theirs AS t ON t.citer = k.citer
    WHERE t.cited_id <> k.source
    GROUP BY k.source, t.cited_id
)""",
    "coupling": f"""\
mine AS MATERIALIZED (
    SELECT c.citing_id AS source,
           c.cited_id AS ref
    FROM {citations_by("citing", "SELECT source FROM sources")}
),
ref_citers AS MATERIALIZED (
    SELECT c.cited_id AS ref,
           c.citing_id AS citer,
           row_number() OVER (PARTITION BY c.cited_id ORDER BY c.citing_id COLLATE "C") AS position
    FROM {citations_by("cited", "SELECT DISTINCT ref FROM mine")}
),
pairs AS MATERIALIZED (
    SELECT m.source,
           rc.citer AS paper_id,
           count(*) AS weight
    FROM mine AS m
    JOIN ref_citers AS rc ON rc.ref = m.ref
    WHERE rc.position <= :fanout
      AND rc.citer <> m.source
    GROUP BY m.source, rc.citer
)""",
}
_CAPPED_SHARDED = """\
live AS MATERIALIZED (
    SELECT p.id
    FROM papers AS p
    WHERE p.id = ANY (ARRAY(SELECT DISTINCT paper_id FROM pairs))
),
counts AS MATERIALIZED (
    SELECT n.paper_id,
           n.cited_by
    FROM cited_counts AS n
    WHERE n.paper_id = ANY (ARRAY(SELECT id FROM live))
),
ranked AS (
    SELECT e.source,
           e.paper_id,
           e.weight,
           row_number() OVER (
               PARTITION BY e.source
               ORDER BY e.weight DESC,
                        coalesce(n.cited_by, 0) DESC,
                        e.paper_id COLLATE "C"
           ) AS position
    FROM pairs AS e
    JOIN live AS l ON l.id = e.paper_id
    LEFT JOIN counts AS n ON n.paper_id = e.paper_id
)
SELECT source, paper_id, weight
FROM ranked
WHERE :max_neighbours < 0 OR position <= :max_neighbours
ORDER BY source COLLATE "C", position"""
_SOURCES_SHARDED = _sources(DIALECTS[POSTGRESQL]).replace("WITH sources AS (", "WITH sources AS MATERIALIZED (")
for _relation, _pairs in _PAIRS_SHARDED.items():
    register_sharded(relation_sql(_relation), f"{_SOURCES_SHARDED},\n{_pairs},\n{_CAPPED_SHARDED}")
del _relation, _pairs


# A per-query exclusion (``retrieval.search.cutoff``): the same statements over ``live``, the citations with neither
# end excluded, so an excluded paper is no neighbour, no co-citation or coupling intermediate and adds no degree.
# Only used when something is excluded: the statements above stay those of every other search.
def excluded(d: Dialect) -> str:
    """The CTEs ``excluded`` (the ids of ``:excluded``) and ``live`` (the citations with neither end excluded)."""
    return f"""\
excluded AS MATERIALIZED (
    SELECT value AS paper_id
    FROM {d.rows("excluded")}
),
live AS NOT MATERIALIZED (
    SELECT c.citing_id, c.cited_id
    FROM citations AS c
    WHERE c.citing_id NOT IN (SELECT paper_id FROM excluded)
      AND c.cited_id NOT IN (SELECT paper_id FROM excluded)
)"""


def live(sql: str) -> str:
    """``sql`` reading the ``live`` citations of ``excluded`` instead of every citation."""
    return sql.replace("JOIN citations AS c", "JOIN live AS c").replace("FROM citations AS c", "FROM live AS c")


#: ``relation_sql_excluding``'s statements, one per relation.
RELATION_SQL_EXCLUDING = {
    r: statement(
        lambda d, r=r: f"{_sources(d)},\n{excluded(d)},\n{live(_relation_edges(d, r))},\n{_capped(d)}",
        hash_joins=r in HASHED,
    )
    for r in RELATIONS
}


def relation_sql_excluding(relation: str) -> str:
    """``relation_sql`` without the citations of the papers in ``:excluded`` (a JSON list of ids)."""
    return RELATION_SQL_EXCLUDING[relation]


DEGREE_SQL_EXCLUDING = statement(lambda d: f"WITH {excluded(d)}\n{live(_degree(d))}")


class Gate(namedtuple("Gate", "mode fired survivors threshold min_survivors reason")):
    """The expansion decision for one query, and why."""

    __slots__ = ()

    def to_dict(self) -> dict:
        return dict(self._asdict())


class Reach(namedtuple("Reach", "source relation hop contribution")):
    """One way a paper was reached: from ``source`` (a seed at hop 1), along ``relation``, at ``hop``."""

    __slots__ = ()

    def to_dict(self) -> dict:
        return dict(self._asdict())


class Expansion:
    """What the expansion added: each paper's evidence, minimum hop and reaches, and the counts per hop and
    per relation (edges followed, and papers first reached)."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate
        self.evidence: dict[str, float] = {}
        self.distance: dict[str, int] = {}
        self.reaches: dict[str, list[Reach]] = defaultdict(list)
        self.new_per_hop: Counter = Counter()
        self.new_per_relation: Counter = Counter()
        self.edges_per_relation: Counter = Counter()
        self.capped = 0

    def to_dict(self) -> dict:
        return {
            "gate": self.gate.to_dict(),
            "papers_reached": len(self.evidence),
            "new_per_hop": {str(k): v for k, v in sorted(self.new_per_hop.items())},
            "new_per_relation": dict(sorted(self.new_per_relation.items())),
            "edges_per_relation": dict(sorted(self.edges_per_relation.items())),
            "dropped_by_candidate_cap": self.capped,
        }


def decide(wq: WeightedQuery, seeds: list[tuple[str, float]], cfg: RetrievalConfig) -> Gate:
    """The gate: whether this query's seeds are thin enough to expand (see the module's docstring). Reads
    nothing: the query's attainable score comes with its weights."""
    common = {"threshold": cfg.gate_threshold, "min_survivors": cfg.gate_min_survivors, "mode": cfg.expand}
    if cfg.expand == "never" or cfg.max_hops == 0 or not seeds:
        why = "no seeds" if not seeds else ("max_hops is 0" if cfg.max_hops == 0 else "expansion is off")
        return Gate(fired=False, survivors=0, reason=why, **common)
    mass = wq.attainable
    survivors = sum(1 for _, score in seeds if mass > 0 and score / mass >= cfg.gate_threshold)
    if cfg.expand == "always":
        return Gate(fired=True, survivors=survivors, reason="expansion is always on", **common)
    if survivors < cfg.gate_min_survivors:
        needed = cfg.gate_min_survivors
        reason = f"{survivors} seed(s) match >= {cfg.gate_threshold:g} of the query; fewer than {needed}"
        return Gate(fired=True, survivors=survivors, reason=reason, **common)
    reason = f"{survivors} seeds match >= {cfg.gate_threshold:g} of the query: the lexical hits suffice"
    return Gate(fired=False, survivors=survivors, reason=reason, **common)


def strongest(values: dict[str, float], n: int) -> list[str]:
    """The ``n`` ids of largest value, the value rounded to ``SCORE_DECIMALS`` places, then by id: values equal but
    for the order their parts were summed in tie, and the tie breaks on the id."""
    return sorted(values, key=lambda pid: (-round(values[pid], SCORE_DECIMALS), pid))[:n]


def expand(
    snap: Snapshot,
    seeds: list[tuple[str, float]],
    cfg: RetrievalConfig,
    gate: Gate,
    excluded: frozenset[str] = frozenset(),
) -> Expansion:
    """Follow ``cfg.relations`` from the seeds for ``cfg.max_hops`` hops under the caps; see the module.
    ``excluded``: papers the walk treats as absent (``retrieval.search.cutoff``): neither reached, nor walked
    through, nor counted in a degree."""
    out = Expansion(gate=gate)
    extra = {"excluded": json.dumps(sorted(excluded))} if excluded else {}
    degree_sql = DEGREE_SQL_EXCLUDING if excluded else DEGREE_SQL
    edges_sql = relation_sql_excluding if excluded else relation_sql
    if not gate.fired:
        return out
    top = seeds[0][1] if seeds and seeds[0][1] > 0 else 1.0
    seed_ids = {pid for pid, _ in seeds}
    strength = {pid: score / top for pid, score in seeds}
    graph = GRAPHS.of(snap, excluded)  # the kept citation graph answers the direct relations
    read = 0  # citation rows read by statements, toward the graph's rent
    for hop in range(1, cfg.max_hops + 1):
        if not strength:
            break
        sources = sorted(strength)
        if graph is not None:
            degrees = graph.live_degrees(sources)
        else:
            named = f"expansion: degrees of the hop-{hop} sources"
            degrees = dict(snap.rows(named, degree_sql, {"sources": json.dumps(sources), **extra}))
        params = {
            "sources": json.dumps(sources),
            "fanout": cfg.fanout,
            "max_neighbours": -1 if cfg.max_neighbours is None else cfg.max_neighbours,
            **extra,
        }
        gained: dict[str, float] = defaultdict(float)
        for relation in cfg.relations:
            if graph is not None and relation in DIRECT:
                rows = graph.live_neighbours(relation, sources, cfg.max_neighbours)
            else:
                rows = snap.rows(f"expansion: {relation}, hop {hop}", edges_sql(relation), params)
                read += len(rows)
            for source, paper_id, weight in rows:
                out.edges_per_relation[relation] += 1
                if paper_id in seed_ids and hop > 1:
                    continue
                hub = 1.0 / math.log(math.e + degrees.get(source, 0)) if cfg.hub_weighting else 1.0
                contribution = strength[source] * weight * RELATION_WEIGHTS[relation] * hub
                gained[paper_id] += contribution
                out.reaches[paper_id].append(Reach(source, relation, hop, contribution))
                if paper_id not in out.distance and paper_id not in seed_ids:
                    out.distance[paper_id] = hop
                    out.new_per_hop[hop] += 1
                    out.new_per_relation[relation] += 1
        for paper_id, value in gained.items():
            out.evidence[paper_id] = out.evidence.get(paper_id, 0.0) + value
        # The papers first reached at this hop are the next hop's sources.
        strength = {
            pid: HOP_DECAY * value for pid, value in gained.items() if pid not in seed_ids and out.distance[pid] == hop
        }
        if len(strength) > MAX_SOURCES:  # the strongest only: bounds a hop's work whatever the settings
            kept = strongest(strength, MAX_SOURCES)
            strength = {pid: strength[pid] for pid in kept}
    if cfg.max_candidates is not None:
        added = [pid for pid in out.evidence if pid not in seed_ids]
        if len(added) > cfg.max_candidates:
            keep = set(strongest({pid: out.evidence[pid] for pid in added}, cfg.max_candidates))
            for pid in added:
                if pid not in keep:
                    del out.evidence[pid]
                    out.distance.pop(pid, None)
                    out.reaches.pop(pid, None)
                    out.capped += 1
    for reaches in out.reaches.values():
        reaches.sort(key=lambda r: (-r.contribution, r.hop, r.source, r.relation))
    GRAPHS.paid(snap, read, excluded)
    return out
