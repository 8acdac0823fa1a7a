"""Stage 1, seeds: each sub-query's top m papers by a blend of lexical relevance and recency; their union.

Rule (Crase prefers seeds that rank high both by relevance and by recency). For each sub-query q:

1. take its BM25 list ``seed_pool`` deep (default 30: three times m, deep enough for recency to lift a recent
   paper from the lower part of the list, shallow enough that every pick is still a strong lexical match);
2. give each paper ``blend = (1 - lam) * bm25 / bm25_max(q) + lam * age^-beta``, with ``lam`` =
   ``seed_recency_weight`` (0 by default, which makes this the BM25 order; see ``config``), ``bm25_max(q)``
   the best score in the list (so the first term lies in (0, 1]), and ``age^-beta`` the same recency factor
   as the edge weights (1 for a paper of the reference year);
3. keep the top m = ``seeds_per_subquery`` (10) by blend, ties by BM25 rank (that is, by score, then id).

The seed set is the union over sub-queries, in order of first appearance (sub-query, then blend rank); each seed
lists every sub-query that picked it, with its rank, BM25 score and blend there.

Each seed also gets a **relevance**: its BM25 score over the best score any paper reaches for the same sub-query
(the best over the sub-queries that picked it). A lexical seed has relevance at least that of the m-th paper of
its pool; a seed given by hand (``explicit``) is scored against every sub-query, and one whose relevance stays below
``off_topic_ratio`` (0.1) is reported as off-topic.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..bm25 import SCORE_DECIMALS
from ..search import lexical
from ..search.memo import QueryMemo
from ..search.papers import checked_years
from ..search.query import Query
from ..store.sql.dialect import statement
from ..store.sql.executor import Snapshot
from .config import EvidenceConfig, age

YEARS_SQL = statement(
    lambda d: (
        f"""\
SELECT p.id,
       p.year
FROM papers AS p
WHERE p.id {d.any_of("paper_ids")}"""
    )
)


@dataclass(frozen=True)
class SeedHit:
    """One sub-query's pick of a seed: where it stood and why."""

    subquery: int
    rank: int  # 1-based position in that sub-query's seed list (by blend)
    bm25: float
    bm25_norm: float
    recency: float  # age^-beta
    blend: float

    def to_dict(self) -> dict:
        return {
            "subquery": self.subquery,
            "rank": self.rank,
            "bm25": self.bm25,
            "bm25_norm": self.bm25_norm,
            "recency": self.recency,
            "blend": self.blend,
        }


@dataclass(frozen=True)
class Seed:
    """A seed paper, the sub-queries that picked it (none for a seed given by hand), and its relevance."""

    paper_id: str
    year: int | None
    hits: tuple[SeedHit, ...]
    relevance: float
    explicit: bool = False

    @property
    def subqueries(self) -> tuple[int, ...]:
        return tuple(hit.subquery for hit in self.hits)

    def to_dict(self) -> dict:
        return {
            "paper_id": self.paper_id,
            "year": self.year,
            "subqueries": list(self.subqueries),
            "hits": [hit.to_dict() for hit in self.hits],
            "relevance": self.relevance,
            "explicit": self.explicit,
        }


def read_years(snap: Snapshot, paper_ids: list[str]) -> dict[str, int | None]:
    """``paper id -> year`` for the ids that are papers of the index (others are left out)."""
    if not paper_ids:
        return {}
    return checked_years(snap, dict(snap.rows("evidence: seed years", YEARS_SQL, {"paper_ids": json.dumps(paper_ids)})))


def pick_for_subquery(
    index: int,
    hits: list[tuple[str, float]],
    years: dict[str, int | None],
    config: EvidenceConfig,
    reference_year: int | None,
    earliest_year: int | None,
    m: int | None = None,
) -> list[tuple[str, SeedHit]]:
    """The top m (default ``seeds_per_subquery``) of one sub-query's BM25 list (best first) re-ranked by the
    blend of the module docstring."""
    pool = hits[: config.seed_pool]
    if not pool:
        return []
    best = pool[0][1]
    lam = config.seed_recency_weight
    scored = []
    for position, (pid, bm25) in enumerate(pool):
        norm = bm25 / best if best > 0 else 0.0
        recency = age(years.get(pid), reference_year, earliest_year) ** -config.beta
        blended = (1.0 - lam) * norm + lam * recency
        scored.append((-round(blended, SCORE_DECIMALS), position, pid, bm25, norm, recency, blended))
    # by blend descending (rounded as every score is, so equal scores computed in another order still tie), then
    # BM25 position (which already breaks score ties by id)
    scored.sort()
    return [
        (pid, SeedHit(index, rank, bm25, norm, recency, blended))
        for rank, (_, _, pid, bm25, norm, recency, blended) in enumerate(scored[: m or config.seeds_per_subquery], 1)
    ]


def select_seeds(
    snap: Snapshot,
    subqueries: list[Query],
    config: EvidenceConfig,
    reference_year: int | None,
    earliest_year: int | None,
    first_hits: list[tuple[str, float]] | None = None,
    per_subquery: list[int] | None = None,
    memo: QueryMemo | None = None,
) -> list[Seed]:
    """The union of every sub-query's picks. ``first_hits`` may carry sub-query 0's BM25 list when the caller
    already has it at least ``seed_pool`` deep (an evaluation shares one list between modes); ``per_subquery``
    gives each sub-query's m (default ``seeds_per_subquery`` for all); ``memo`` (one query against an unchanging
    index) shares the sub-queries' BM25 lists between runs."""
    lists = []
    for index, query in enumerate(subqueries):
        if index == 0 and first_hits is not None:
            lists.append(list(first_hits[: config.seed_pool]))
            continue

        def search(query: Query = query) -> list[tuple[str, float]]:
            return lexical.top_papers(snap, lexical.weigh(snap, query), config.seed_pool)[0]

        lists.append(list(memo.shared(("seed pool", query.text, config.seed_pool), search) if memo else search()))
    years = read_years(snap, sorted({pid for hits in lists for pid, _ in hits}))
    picked: dict[str, list[SeedHit]] = {}
    for index, hits in enumerate(lists):
        m = per_subquery[index] if per_subquery is not None else None
        for pid, hit in pick_for_subquery(index, hits, years, config, reference_year, earliest_year, m):
            picked.setdefault(pid, []).append(hit)
    return [Seed(pid, years.get(pid), tuple(hits), max(hit.bm25_norm for hit in hits)) for pid, hits in picked.items()]


def given_seeds(snap: Snapshot, subqueries: list[Query], paper_ids: list[str]) -> list[Seed]:
    """Seeds given by hand (an ablation, or a caller with its own retriever), with their relevance to the
    sub-queries measured as for lexical seeds. Ids that are not papers of the index are left out."""
    ids = list(dict.fromkeys(paper_ids))
    years = read_years(snap, ids)
    present = [pid for pid in ids if pid in years]
    relevance = dict.fromkeys(present, 0.0)
    for query in subqueries:
        wq = lexical.weigh(snap, query)
        top, _ = lexical.top_papers(snap, wq, 1)
        if not top or top[0][1] <= 0:
            continue
        for pid, score in lexical.scores_for(snap, wq, present).items():
            relevance[pid] = max(relevance[pid], score / top[0][1])
    return [Seed(pid, years[pid], (), relevance[pid], explicit=True) for pid in present]
