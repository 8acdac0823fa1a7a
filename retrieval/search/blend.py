"""The blend: one ranked, deduplicated list from the lexical and graph passes, each entry explained.

``final_score = w_bm25 * bm25_norm + w_graph * graph_score + w_recency * recency_score``
(``+ w_semantic * semantic_norm`` on an index built with ``--semantic``)

- ``bm25_norm``: the paper's BM25 score for the query over the highest score among the lexical top-k. A paper
  reached only through the graph keeps its own BM25 score (0 when it shares no term with the query).
- ``graph_score``: with ``ranking="expansion"`` (the default), the evidence the policy-driven expansion gathered
  for the paper (``retrieval.search.expansion``); with ``ranking="hops"`` (the lesson's), 1.0, 0.6, 0.3 at
  distance 0 (a seed), 1, 2 of the recursive-CTE walk, and 0 otherwise.
- ``semantic_norm``: the cosine of the paper's text vector and the query's over the best among the candidates
  (``retrieval.search.semantic``); only on an index that keeps vectors, else the term is absent.
- ``recency_score``: a linear ramp from 0 at the corpus's earliest year to 1 at its latest. A paper with no
  year gets 0; in a corpus whose papers all share one year, every dated paper gets 1.

Order: final score (rounded to ``SCORE_DECIMALS``, 10, places) descending, then paper id, so equal scores always
come out in the same order, whatever order their terms were added in. ``blend`` is a pure function of the
numbers the passes computed; it reads nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..bm25 import SCORE_DECIMALS
from ..config import RetrievalConfig
from ..corpus.paper import Paper
from .expansion import Reach

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .filters import Filters


def recency(year: int | None, min_year: int | None, max_year: int | None) -> float:
    """0 at the corpus's earliest year, 1 at its latest; 0 for no year; 1 when all share one year."""
    if year is None or min_year is None or max_year is None:
        return 0.0
    if max_year == min_year:
        return 1.0
    return min(1.0, max(0.0, (year - min_year) / (max_year - min_year)))


class RankedPaper:
    """One entry of a result, with every number that explains its place."""

    __slots__ = (
        "paper", "bm25_score", "graph_distance", "recency_score", "final_score", "bm25_norm", "graph_score", "reached",
        "config", "citations", "semantic_norm", "cocited",
    )  # fmt: skip

    def __init__(
        self,
        paper: Paper,
        bm25_score: float,
        graph_distance: int | None,
        recency_score: float,
        final_score: float,
        bm25_norm: float = 0.0,
        graph_score: float = 0.0,
        reached: list[Reach] | None = None,
        config: RetrievalConfig | None = None,
    ) -> None:
        self.paper = paper
        self.bm25_score = bm25_score
        self.graph_distance = graph_distance
        self.recency_score = recency_score
        self.final_score = final_score
        self.bm25_norm = bm25_norm
        self.graph_score = graph_score
        self.reached = [] if reached is None else reached
        self.config = config  # what it was ranked under (``why()`` reads its weights)
        self.citations: int | None = None  # the citations the index records of it (set for the entries returned)
        self.semantic_norm: float | None = None  # the semantic signal, where the blend had one
        self.cocited: float | None = None  # what the co-citation feedback added (``retrieval.search.cocited``)

    def __repr__(self) -> str:
        return f"RankedPaper({self.paper.id!r}, final_score={self.final_score:.4f})"

    def to_dict(self) -> dict:
        return {
            "id": self.paper.id,
            "title": self.paper.title,
            "year": self.paper.year,
            "authors": list(self.paper.authors),
            "bm25_score": self.bm25_score,
            "graph_distance": self.graph_distance,
            "recency_score": self.recency_score,
            "final_score": self.final_score,
            "graph_score": self.graph_score,
            **({} if self.semantic_norm is None else {"semantic_norm": self.semantic_norm}),
            **({} if self.cocited is None else {"cocited": self.cocited}),
            "reached": [r.to_dict() for r in self.reached],
            "citations": self.citations,
            "why": self.why(),
        }

    def how(self) -> str:
        """How the paper got into the list, briefly: a seed, a lexical hit, or the strongest graph reach."""
        if self.graph_distance == 0:
            return "seed"
        if self.reached:
            first = self.reached[0]
            more = f" +{len(self.reached) - 1}" if len(self.reached) > 1 else ""
            return f"{first.relation} of {first.source}{more}"
        if self.graph_distance is not None:
            return f"{self.graph_distance} hop(s)"
        return "lexical"

    def why(self, config: RetrievalConfig | None = None) -> str:
        """A one-line account of the score: each term of the blend and what it came from (under ``config``, by
        default the configuration the entry was ranked under)."""
        config = config or self.config or RetrievalConfig()
        semantic = "" if self.semantic_norm is None else f" + {config.w_semantic:g}*semantic {self.semantic_norm:.3f}"
        cocited = "" if self.cocited is None else f" + cocited {self.cocited:.3f}"
        return (
            f"{config.w_bm25:g}*bm25 {self.bm25_norm:.3f} + {config.w_graph:g}*graph {self.graph_score:.3f} "
            f"({self.how()}){semantic} + {config.w_recency:g}*recency {self.recency_score:.3f}{cocited} "
            f"= {self.final_score:.4f}"
        )


#: The orders a result list can be asked in: the ranking's own (relevance), most cited first, newest first.
SORTS = ("relevance", "citations", "year")


def reorder(entries: list, sort: str | None, cited: Mapping[str, int]) -> list:
    """``entries`` (best first) in the order ``sort`` asks: ``relevance`` (or None) leaves them; ``citations``
    puts the most cited first (``cited``: paper id -> citing papers), ``year`` the newest first (no year last);
    ties keep the ranking's order, so the order is exact and the same on every page."""
    if sort in (None, "relevance"):
        return entries
    if sort == "citations":
        return sorted(entries, key=lambda e: -cited.get(e.paper.id, 0))
    if sort == "year":
        return sorted(entries, key=lambda e: -(e.paper.year if e.paper.year is not None else -(10**6)))
    raise ValueError(f"unknown sort {sort!r}")  # the callers check it: a new order must be added here


class BeyondPaper(RankedPaper):
    """An entry past the ranked candidates: a page deeper than the ranking (``offset + limit`` beyond it) continues
    with the rest of the BM25 list, in BM25 order (ties by id), so every page is a slice of one longer ranking."""

    __slots__ = ("ranked",)

    def __init__(self, paper: Paper, bm25_score: float, ranked: int) -> None:
        super().__init__(paper, bm25_score, None, 0.0, 0.0)
        self.ranked = ranked  # how many candidates the ranking scored before it

    def why(self, config: RetrievalConfig | None = None) -> str:
        return f"past the {self.ranked:,} ranked papers: in BM25 order, bm25 {self.bm25_score:.3f}"

    def how(self) -> str:
        return "lexical, past the ranking"

    def to_dict(self) -> dict:
        out = super().to_dict()
        out["past_ranking"] = True
        return out


class RetrievalResult:
    """A ranked list and the query's metrics (hit count, average and top final score, wall time), with the
    configuration it was ranked under and the expansion's report."""

    def __init__(
        self,
        query: str,
        ranked: list[RankedPaper],
        hit_count: int,
        average_score: float,
        top_score: float,
        wall_time_ms: float,
        config: RetrievalConfig | None = None,
        expansion: dict | None = None,
        *,
        offset: int = 0,
        warnings: list[str] | None = None,
        filters: Filters | None = None,
        matched: int | None = None,
        matched_exact: bool = True,
        length: int | None = None,
    ) -> None:
        self.query = query
        self.ranked = ranked
        self.hit_count = hit_count
        self.average_score = average_score
        self.top_score = top_score
        self.wall_time_ms = wall_time_ms
        self.config = RetrievalConfig() if config is None else config
        self.expansion = {} if expansion is None else expansion
        self.offset = offset  # entries skipped before ``ranked`` (paging)
        self.warnings = [] if warnings is None else warnings
        self.filters = filters
        # Papers containing a query term and passing the filters (None: not counted); an estimate unless exact.
        self.matched = matched
        self.matched_exact = matched_exact
        # How long the ranking is, as deep as the page asked (the ranked candidates, then the BM25 list past
        # them): its whole length once a page starts past its end.
        self.length = hit_count if length is None else length

    def __repr__(self) -> str:
        shown = "" if len(self.query) <= 40 else "..."
        return f"RetrievalResult({self.query[:40] + shown!r}, {len(self.ranked)} of {self.hit_count} ranked)"

    @property
    def metrics(self) -> dict:
        return {
            "hit_count": self.hit_count,
            "avg_score": self.average_score,
            "top_score": self.top_score,
            "wall_time_ms": self.wall_time_ms,
        }

    def to_dict(self, limit: int | None = None) -> dict:
        ranked = self.ranked if limit is None else self.ranked[:limit]
        results = []
        for rank, entry in enumerate(ranked, start=self.offset + 1):
            results.append({"rank": rank, **entry.to_dict()})
        return {
            "query": self.query,
            "results": results,
            "offset": self.offset,
            "matched": self.matched,
            "matched_exact": self.matched_exact,
            "length": self.length,  # how far the ranking goes, as deep as the page asked (see ``length``)
            "filters": None if not self.filters else self.filters.to_dict(),
            "warnings": list(self.warnings),
            "metrics": self.metrics,
            "expansion": self.expansion,
        }


def blend(
    cfg: RetrievalConfig,
    papers: Mapping[str, Paper],
    distances: Mapping[str, int | None],
    bm25: Mapping[str, float],
    best_bm25: float,
    graph_scores: Mapping[str, float],
    reaches: Mapping[str, list[Reach]],
    years: tuple[int | None, int | None],
    semantic: Mapping[str, float] | None = None,
) -> list[RankedPaper]:
    """Every candidate of ``distances`` (its graph distance, None for a lexical-only hit) scored by the formula
    of the module docstring and sorted by final score, then id. ``years`` is the corpus's (earliest, latest);
    ``semantic`` each candidate's ``semantic_norm`` (None or empty: no semantic term; a candidate without a
    vector gets 0)."""
    ranked: list[RankedPaper] = []
    for pid, distance in distances.items():
        paper = papers[pid]
        bm25_norm = bm25[pid] / best_bm25 if best_bm25 > 0 else 0.0
        graph_score = graph_scores.get(pid, 0.0)
        recency_score = recency(paper.year, *years)
        final = cfg.w_bm25 * bm25_norm + cfg.w_graph * graph_score + cfg.w_recency * recency_score
        similar = semantic.get(pid, 0.0) if semantic else None
        if similar is not None:
            final += cfg.w_semantic * similar
        entry = RankedPaper(paper, bm25[pid], distance, recency_score, final, bm25_norm, graph_score, config=cfg)
        entry.semantic_norm = similar
        entry.reached = list(reaches.get(pid, ()))[:3]
        ranked.append(entry)
    # Ranked on the score rounded as the lexical pass rounds its own (SCORE_DECIMALS): sums of the same terms in
    # another order (another plan, another backend) differ in the last bit, and must still tie on paper id.
    ranked.sort(key=lambda r: (-round(r.final_score, SCORE_DECIMALS), r.paper.id))
    return ranked
