"""RM3 pseudo-relevance feedback (``retrieval.search.prf``) as evaluation modes, behind the ``Mode`` protocol of
``retrieval.eval.modes``:

- ``rm3``: BM25 of the RM3-expanded query (10 feedback papers, 10 terms, original weight 0.5), exact, through
  the lexical path; its candidates are the papers matching a term of the expanded query.
- ``policy-rm3``: the shipped policy (``RetrievalConfig()``) seeded from the ``rm3`` list: the gate, the
  expansion and the blend all weigh papers with the expanded query.

Both honour a per-query exclusion (the time-honest protocol): the feedback papers, the list and the walk leave
the excluded papers out. Each mode computes its own RM3 expansion (a few milliseconds), so its latency is its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import RetrievalConfig
from ..search import lexical, prf
from ..search.client import RetrievalClient
from .records import LexicalPass, ModeOutput


def _expanded(client: RetrievalClient, query: LexicalPass, depth: int):
    allowed = query.exclusion.passing if query.exclusion else None
    with client.snapshot() as snap:
        feedback = prf.rm3(snap, lexical.weigh(snap, query.query), allowed=allowed)
        hits = prf.top(snap, feedback.query, depth, allowed)
        matching = lexical.matched(snap, feedback.query).count
    return feedback, hits, matching


@dataclass(frozen=True)
class Rm3Mode:
    """BM25 of the RM3-expanded query."""

    name: str = "rm3"
    description: str = "BM25 of the RM3-expanded query (10 feedback papers, 10 terms, original weight 0.5)"
    hops: int | None = None
    honours_exclusion: bool = True

    def run(self, client: RetrievalClient, query: LexicalPass, config: RetrievalConfig, depth: int) -> ModeOutput:
        _, hits, matching = _expanded(client, query, depth)
        return ModeOutput([pid for pid, _ in hits], matching)


@dataclass(frozen=True)
class PolicyRm3Mode:
    """The shipped policy over the RM3 list, the expanded query weighing every candidate."""

    name: str = "policy-rm3"
    description: str = "the default policy seeded from the rm3 list (expanded query throughout)"
    hops: int | None = 1
    honours_exclusion: bool = True

    def run(self, client: RetrievalClient, query: LexicalPass, config: RetrievalConfig, depth: int) -> ModeOutput:
        cfg = RetrievalConfig(ranking="expansion", prf="rm3")
        feedback, hits, _ = _expanded(client, query, max(depth, cfg.lexical_depth, cfg.top_k_lexical))
        result = client.rank(feedback.query, hits, cfg, limit=None, full=False, exclude=query.exclusion)
        ranking = [r.paper.id for r in result.ranked[:depth]]
        distances = {r.paper.id: r.graph_distance for r in result.ranked if r.graph_distance is not None}
        gate = result.expansion.get("gate", {})
        return ModeOutput(
            ranking, result.hit_count, distances, result.expansion.get("candidates_added"), gate.get("fired")
        )


def prf_modes() -> dict:
    """The modes of this module by name, for ``retrieval.eval.modes.MODES``."""
    return {m.name: m for m in (Rm3Mode(), PolicyRm3Mode())}
