"""The seeds' vote and the sentence sub-queries, as features of the learned ranking (``retrieval.search.learned``).

The evidence graph's default ranking (``retrieval explain``; ``retrieval.evidence.rank.seed_vote``) computed in
the search pass, without the evidence graph's claims, support and pruning, whose pruning earns nothing on
citation recommendation (docs/eval): only the edges that touch a seed count in a vote, so it needs one statement
per direction, not the 1.5-hop graph.

Seeds. The query's BM25 list, ``SEED_POOL`` (30) deep, gives its top ``QUERY_SEEDS`` (15); a query of at least 40
tokens is also split into sentences (``retrieval.search.split``, at most 8), and each sentence's own BM25 list
gives its top ``SUBQUERY_SEEDS`` (3). A seed's mass is the sum, over the lists that picked it, of its BM25
score over that list's best; masses are normalised to sum 1 (``p``).

Vote. With every citation edge u -> v between papers of the index that touches a seed: v gets ``p(u)`` (a seed
cites it: a candidate reference), u gets ``CITING_WEIGHT`` (0.3) x ``p(v)`` (it cites a seed: follow-up work),
and a seed keeps ``SELF_WEIGHT`` (1) x its own ``p``. Divided by the query's highest vote, so the best-voted
paper has 1. This is exactly ``seed_vote`` of the unpruned evidence graph with the same seeds, up to that
normalisation (``tests/test_vote.py`` holds the two to each other).

Features of a candidate (``Vote.features``): ``vote``; ``voters``, ln(1 + how many seeds vote for it);
``sub_best``, its best BM25 over the best of a sentence's list, over the sentences whose list (30 deep) holds
it; ``sub_share``, the share of the sentences whose list holds it (both 0 for a query that is not split).

Candidates. Every seed, and the ``VOTE_DEPTH`` (200) papers of highest vote that are not seeds (ties by id),
join the learned ranking's candidates.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..store.sql.executor import Snapshot
from . import lexical
from .adjacency import GRAPHS
from .expansion import relation_sql, relation_sql_excluding, strongest
from .filters import Passing
from .query import Query, WeightedQuery
from .split import split_query

SEED_POOL = 30
QUERY_SEEDS = 15
SUBQUERY_SEEDS = 3
CITING_WEIGHT = 0.3
SELF_WEIGHT = 1.0
VOTE_DEPTH = 200
#: The features a vote gives each candidate, in this order.
FEATURES = ("vote", "voters", "sub_best", "sub_share")


@dataclass
class Vote:
    """One query's vote: each paper's vote (over the highest), its voters, and its sub-query features."""

    seeds: dict[str, float] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)
    voters: dict[str, int] = field(default_factory=dict)
    sub_best: dict[str, float] = field(default_factory=dict)
    sub_share: dict[str, float] = field(default_factory=dict)
    subqueries: int = 0

    def candidates(self, depth: int = VOTE_DEPTH) -> list[str]:
        """The seeds, then the ``depth`` non-seed papers of highest vote (rounded to ``SCORE_DECIMALS`` places,
        ties by id)."""
        others = strongest({pid: vote for pid, vote in self.scores.items() if pid not in self.seeds}, depth)
        return [*sorted(self.seeds), *others]

    def features(self, pid: str) -> dict[str, float]:
        return {
            "vote": self.scores.get(pid, 0.0),
            "voters": math.log1p(self.voters.get(pid, 0)),
            "sub_best": self.sub_best.get(pid, 0.0),
            "sub_share": self.sub_share.get(pid, 0.0),
        }

    def to_dict(self) -> dict:
        return {"seeds": len(self.seeds), "subqueries": self.subqueries, "voted": len(self.scores)}


def seed_masses(lists: Sequence[Sequence[tuple[str, float]]], first: int, each: int) -> dict[str, float]:
    """``paper id -> p``: the first list's top ``first`` and every other list's top ``each``, each adding its
    BM25 over its list's best; normalised to sum 1."""
    mass: dict[str, float] = {}
    for index, hits in enumerate(lists):
        pool = list(hits[:SEED_POOL])
        if not pool or pool[0][1] <= 0:
            continue
        best = pool[0][1]
        for pid, score in pool[: first if index == 0 else each]:
            mass[pid] = mass.get(pid, 0.0) + score / best
    total = sum(mass.values())
    return {pid: m / total for pid, m in mass.items()} if total > 0 else {}


def tally(
    p: Mapping[str, float],
    edges: Sequence[tuple[str, str]],
    citing_weight: float = CITING_WEIGHT,
    self_weight: float = SELF_WEIGHT,
) -> tuple[dict[str, float], dict[str, int]]:
    """The vote of every paper on the distinct edges ``(citing, cited)`` (see the module), unnormalised, and
    how many seeds vote for each (its own seed mass aside)."""
    scores = {pid: self_weight * mass for pid, mass in p.items()}
    voters: dict[str, int] = {}
    for citing, cited in edges:
        if citing in p:
            scores[cited] = scores.get(cited, 0.0) + p[citing]
            voters[cited] = voters.get(cited, 0) + 1
        if cited in p:
            scores[citing] = scores.get(citing, 0.0) + citing_weight * p[cited]
            voters[citing] = voters.get(citing, 0) + 1
    return scores, voters


def compute(
    snap: Snapshot,
    query: Query | WeightedQuery,
    hits: Sequence[tuple[str, float]],
    allowed: Passing | None = None,
    excluded: frozenset[str] = frozenset(),
) -> Vote:
    """The vote of ``query`` whose BM25 list ``hits`` (best first, at least ``SEED_POOL`` deep where the index
    has as many) is given. ``allowed`` restricts the sentences' lists as ``hits`` was; ``excluded`` papers are
    neither seeds nor voted for (``retrieval.search.cutoff``). Given weighed (in this snapshot), the query's terms
    weigh its sentences without a statement each."""
    whole = query if isinstance(query, WeightedQuery) else None  # its terms' rows weigh the sentences
    parts = split_query(query.text)
    lists = [list(hits[:SEED_POOL])]
    for part in parts:
        wq = lexical.weigh(snap, Query.parse(part), within=whole)
        if allowed is None:
            found, _ = lexical.top_papers(snap, wq, SEED_POOL)
        else:
            found, _ = lexical.filtered_top_papers(snap, wq, SEED_POOL, allowed)
        lists.append([(pid, score) for pid, score in found if pid not in excluded])
    p = seed_masses(lists, QUERY_SEEDS, SUBQUERY_SEEDS)
    out = Vote(seeds=p, subqueries=len(parts))
    if not p:
        return out
    graph = GRAPHS.of(snap, excluded)  # the kept citation graph (``adjacency``), where there is one
    if graph is not None:
        cite = graph.live_neighbours("references", sorted(p), None)
        cited_by = graph.live_neighbours("citing", sorted(p), None)
    else:
        params = {"sources": json.dumps(sorted(p)), "fanout": 0, "max_neighbours": -1}
        if excluded:
            params["excluded"] = json.dumps(sorted(excluded))
        statement = relation_sql_excluding if excluded else relation_sql
        cite = snap.rows("vote: what the seeds cite", statement("references"), params)
        cited_by = snap.rows("vote: what cites the seeds", statement("citing"), params)
        GRAPHS.paid(snap, len(cite) + len(cited_by), excluded)
    edges = {(seed, cited) for seed, cited, _ in cite} | {(citing, seed) for seed, citing, _ in cited_by}
    scores, out.voters = tally(p, sorted(edges))
    top = max(scores.values(), default=0.0)
    out.scores = {pid: s / top for pid, s in scores.items()} if top > 0 else {}
    for hits_of_part in lists[1:]:
        if not hits_of_part or hits_of_part[0][1] <= 0:
            continue
        best = hits_of_part[0][1]
        for pid, score in hits_of_part:
            out.sub_best[pid] = max(out.sub_best.get(pid, 0.0), score / best)
            out.sub_share[pid] = out.sub_share.get(pid, 0.0) + 1.0 / len(parts)
    return out


__all__ = ["FEATURES", "Vote", "compute", "seed_masses", "tally"]
