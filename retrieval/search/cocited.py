"""Co-citation feedback: the default ranking (``ranking="auto"``) takes a second look at its own top.

The papers a query should find tend to be cited together, so the first ranking's best papers vouch for the
papers cited beside them. After the ranking (the learned model's or the policy's), each of its top ``DEPTH`` (100)
papers gets

``cocited = sum over the top FEEDBACK (10) papers f of weight(f) * together(f, p) / sqrt(in(f) * in(p))``

where ``together(f, p)`` counts the papers citing both f and p, ``in(x)`` is how many papers cite x (at least 1),
and ``weight(f)`` is f's score min-max scaled over the top ``DEPTH`` (1 for the first, 0 for the last). The
ranking adds ``w_cocited * (first score - last score) * cocited / max cocited`` to each score of the top
``DEPTH`` and sorts them again (score rounded to ``SCORE_DECIMALS``, then paper id): the papers below keep
their places, since a score only grows. ``w_cocited`` (0.3) and the depths were chosen on the development sets'
abstract and title queries, where the gain was alike (docs/eval/learned.md); a set whose top papers share no
citing paper (CACM's, mostly) ranks as before. Each entry says what the feedback added (``RankedPaper.cocited``).

A paper cited by more than ``MAX_CITED`` (2,500) papers neither vouches nor is re-scored: its counts cost the
most to read (a search's counts read each paper's citing papers) and say least, since it is cited beside
everything. The cap bounds a search's reads at 110 x 2,500 citation rows, where a corpus whose best papers are
cited tens of thousands of times would read millions (seconds a search); no paper of the development sets is
cited that often (hep-th's most cited: 2,414), and a cap of 1,000 or 500 moved their figures by at most 0.004.

The counts are one statement (``COCITATIONS_SQL``), or the kept citation graph's arrays
(``retrieval.search.adjacency``), the same counts; under an exclusion (``retrieval.search.cutoff``) a citing
paper left out counts for nothing.
"""

from __future__ import annotations

import json
import math

from ..bm25 import SCORE_DECIMALS
from ..store.sql.dialect import register_sharded, statement
from .adjacency import GRAPHS

#: The ranking's papers that vouch (its best), and the papers they re-rank (its top).
FEEDBACK = 10
DEPTH = 100
#: Papers cited more often take no part (see the module).
MAX_CITED = 2_500


def _cocitations(d, excluding: bool) -> str:
    # The sources' citing papers (a few thousand rows at most) are kept aside; each candidate's citing papers are
    # read by the cited_id index and looked up among them. The rows read are the sources' and the candidates'
    # in-degrees (``rerank`` pays them as such). Keeping the candidates' side aside too, and joining the two, does
    # the same reads and sorts the larger side besides; following each source's citing papers to all their
    # references reads every reference of a much-cited source's citers. An excluded citing paper is left out of
    # the sources' side, so no candidate's row meets it.
    live = "\n      AND a.citing_id NOT IN (SELECT paper_id FROM excluded)" if excluding else ""
    return f"""\
vouching AS MATERIALIZED (
    SELECT a.cited_id AS source,
           a.citing_id
    FROM {d.rows("sources", "s")}
    JOIN citations AS a ON a.cited_id = s.value{live}
)
SELECT v.source,
       b.cited_id AS paper_id,
       count(*) AS together
FROM {d.rows("candidates", "k")}
JOIN citations AS b ON b.cited_id = k.value
JOIN vouching AS v ON v.citing_id = b.citing_id
WHERE b.cited_id <> v.source
GROUP BY v.source,
         b.cited_id"""


#: Per source and candidate, the papers citing both.
# A hash join on the sources' side (PostgreSQL's read sessions plan joins as lookups, which would compare every
# pair).
COCITATIONS_SQL = statement(lambda d: f"WITH {_cocitations(d, False)}", hash_joins=True)
COCITATIONS_SQL_EXCLUDING = statement(
    lambda d: (
        f"""\
WITH excluded AS MATERIALIZED (
    SELECT value AS paper_id
    FROM {d.rows("excluded")}
),
{_cocitations(d, True)}"""
    ),
    hash_joins=True,
)
COCITATIONS_STATEMENT = "co-citation feedback: the top papers cited beside the best"


def _cocitations_sharded(excluding: bool) -> str:
    # A sharded coordinator: the pairs counted by the citations' numbers, each side's links read from the shards by
    # one key array (the candidates' only where a vouching paper cites them too), and only the counted pairs named.
    # Through the view, every citation came through the foreign tables; named first, the planner joined the two
    # sides by nested loop on its estimates. A citing number ``paper_keys`` lacks is left out, as the view leaves
    # its row out.
    live = (
        "\n      AND link.citing_key <> ALL (ARRAY(SELECT k.key FROM paper_keys AS k WHERE k.paper_id = ANY (ARRAY("
        "SELECT value FROM jsonb_array_elements_text(CAST(:excluded AS jsonb))))))"
        if excluding
        else ""
    )
    return f"""\
WITH source AS MATERIALIZED (
    SELECT k.key,
           k.paper_id
    FROM paper_keys AS k
    WHERE k.paper_id = ANY (ARRAY(SELECT value FROM jsonb_array_elements_text(CAST(:sources AS jsonb))))
),
candidate AS MATERIALIZED (
    SELECT k.key,
           k.paper_id
    FROM paper_keys AS k
    WHERE k.paper_id = ANY (ARRAY(SELECT value FROM jsonb_array_elements_text(CAST(:candidates AS jsonb))))
),
vouching AS MATERIALIZED (
    SELECT link.cited_key AS source,
           link.citing_key
    FROM citation_links AS link
    WHERE link.cited_key = ANY (ARRAY(SELECT key FROM source)){live}
),
cited AS MATERIALIZED (
    SELECT link.cited_key,
           link.citing_key
    FROM citation_links AS link
    WHERE link.cited_key = ANY (ARRAY(SELECT key FROM candidate))
      AND link.citing_key = ANY (ARRAY(SELECT DISTINCT citing_key FROM vouching))
),
pairs AS MATERIALIZED (
    SELECT v.source,
           b.cited_key,
           count(*) AS together
    FROM cited AS b
    JOIN vouching AS v ON v.citing_key = b.citing_key
    JOIN paper_keys AS k ON k.key = b.citing_key
    WHERE b.cited_key <> v.source
    GROUP BY v.source,
             b.cited_key
)
SELECT s.paper_id AS source,
       c.paper_id,
       p.together
FROM pairs AS p
JOIN source AS s ON s.key = p.source
JOIN candidate AS c ON c.key = p.cited_key"""


register_sharded(COCITATIONS_SQL, _cocitations_sharded(False))
register_sharded(COCITATIONS_SQL_EXCLUDING, _cocitations_sharded(True))


def cocitations(
    snap, sources: list[str], candidates: list[str], excluded: frozenset[str] = frozenset()
) -> dict[tuple[str, str], int]:
    """How many papers (not ``excluded``) cite both a source and a candidate, per pair that has any."""
    if not sources or not candidates:
        return {}
    graph = GRAPHS.of(snap, excluded)
    if graph is not None:
        return graph.cocitations(sources, candidates)
    params = {"sources": json.dumps(sources), "candidates": json.dumps(candidates)}
    if excluded:
        params["excluded"] = json.dumps(sorted(excluded))
        rows = snap.rows(COCITATIONS_STATEMENT, COCITATIONS_SQL_EXCLUDING, params)
    else:
        rows = snap.rows(COCITATIONS_STATEMENT, COCITATIONS_SQL, params)
    return {(source, pid): int(n) for source, pid, n in rows}


def scores(ranked: list, together: dict[tuple[str, str], int], cited: dict[str, int]) -> tuple[dict[str, float], float]:
    """Each top paper's ``cocited`` sum (those with any) and the spread of the top's scores, from the ranking's
    entries (best first), the pairs' counts and the in-degrees ``cited``."""
    top = ranked[:DEPTH]
    if len(top) < 2:
        return {}, 0.0
    last = top[-1].final_score
    spread = top[0].final_score - last
    if spread <= 0:
        return {}, 0.0
    ids = sorted(e.paper.id for e in top)
    sums: dict[str, float] = {}
    for entry in top[:FEEDBACK]:
        source = entry.paper.id
        weight = (entry.final_score - last) / spread
        if weight <= 0:
            continue
        own = max(1, cited.get(source, 0))
        for pid in ids:
            n = together.get((source, pid))
            if n:
                sums[pid] = sums.get(pid, 0.0) + weight * n / math.sqrt(own * max(1, cited.get(pid, 0)))
    return sums, spread


def rerank(
    snap, ranked: list, weight: float, cited_of, excluded: frozenset[str] = frozenset(), report: dict | None = None
) -> list:
    """``ranked`` (best first) with its top ``DEPTH`` re-scored by co-citation with its top ``FEEDBACK`` and
    sorted again (``apply``); ``cited_of(ids)`` gives in-degrees (``learned.in_degrees``'s)."""
    top = ranked[:DEPTH]
    if not weight or len(top) < 2:
        return ranked
    cited = cited_of([e.paper.id for e in top])
    taking = [e.paper.id for e in top if cited.get(e.paper.id, 0) <= MAX_CITED]  # the hubs take no part
    best = {e.paper.id for e in top[:FEEDBACK]}
    sources = [pid for pid in taking if pid in best]
    kept = GRAPHS.of(snap, excluded) is not None
    together = cocitations(snap, sources, taking, excluded)
    if not kept:  # the statement read each source's and each candidate's citation rows: rent toward the graph
        GRAPHS.paid(snap, sum(cited.get(pid, 0) for pid in sources + taking), excluded)
    ranked, raised = apply(ranked, together, cited, weight)
    if report is not None:
        report["cocited"] = {
            "feedback": len(sources),
            "depth": len(top),
            "weight": weight,
            "raised": raised,
            "left_out": len(top) - len(taking),  # cited more than max_cited times
            "max_cited": MAX_CITED,
        }
    return ranked


def apply(ranked: list, together: dict[tuple[str, str], int], cited: dict[str, int], weight: float) -> tuple[list, int]:
    """The re-ranking itself, from the pairs' counts and the in-degrees: ``ranked`` with ``w * spread * cocited /
    max cocited`` added to each score of its top ``DEPTH``, which is sorted again (rounded score, then id), and
    how many papers were raised. Where some paper is, each entry of the top's ``cocited`` is what was added to it
    (0 for none); where none is, the entries are left as they were."""
    sums, spread = scores(ranked, together, cited)
    best = max(sums.values(), default=0.0)
    if best <= 0:
        return ranked, 0
    top = ranked[:DEPTH]
    for entry in top:
        added = weight * spread * sums.get(entry.paper.id, 0.0) / best
        entry.cocited = added
        entry.final_score += added
    top.sort(key=lambda e: (-round(e.final_score, SCORE_DECIMALS), e.paper.id))
    return top + ranked[DEPTH:], len(sums)


__all__ = ["COCITATIONS_SQL", "DEPTH", "FEEDBACK", "MAX_CITED", "apply", "cocitations", "rerank", "scores"]
