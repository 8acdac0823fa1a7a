"""The merge: one ranked, deduplicated list from the lexical and graph passes, each entry explained.

``final_score = w_bm25 * bm25_norm + w_graph * graph_score + w_recency * recency_score``

- ``bm25_norm``: the paper's BM25 score for the query over the highest score among the lexical top-k. A paper
  reached only through the graph keeps its own BM25 score (0 when it shares no term with the query).
- ``graph_score``: with ``ranking="evidence"``, the evidence the policy-driven expansion gathered for the paper
  (``retrieval.search.expansion``); with ``ranking="blend"`` (the lesson's), 1.0, 0.6, 0.3 at distance 0 (a
  seed), 1, 2 of the recursive-CTE walk, and 0 otherwise.
- ``recency_score``: a linear ramp from 0 at the corpus's earliest year to 1 at its latest. A paper with no
  year gets 0; in a corpus whose papers all share one year, every dated paper gets 1.

Order: final score descending, then paper id, so equal scores always come out in the same order.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..config import GRAPH_SCORES, RetrievalConfig, resolve_db_path
from ..corpus.mock import ArxivMockClient, SemanticScholarMockClient, merge_clients
from ..corpus.paper import Paper
from ..store.database import IndexStats, check_index, connect, read_snapshot, read_stats
from ..store.writer import build_index
from ..text import tokenise
from . import expansion
from .expansion import Reach
from .graph import CitationGraph
from .lexical import BM25Index

# What the blend needs of every candidate; the abstract and the rest are loaded for returned entries only.
CANDIDATES_SQL = """\
SELECT p.id, p.title, p.year
FROM json_each(:paper_ids) AS j
JOIN papers AS p ON p.id = j.value"""

PAPERS_SQL = """\
SELECT p.id, p.title, p.abstract, p.year
FROM json_each(:paper_ids) AS j
JOIN papers AS p ON p.id = j.value"""

AUTHORS_SQL = """\
SELECT a.paper_id, a.name
FROM json_each(:paper_ids) AS j
JOIN paper_authors AS a ON a.paper_id = j.value
ORDER BY a.paper_id, a.position"""

REFERENCES_SQL = """\
SELECT c.citing_id, c.cited_id
FROM json_each(:paper_ids) AS j
JOIN citations AS c ON c.citing_id = j.value
ORDER BY c.citing_id, c.cited_id"""

CITED_BY_SQL = """\
SELECT c.cited_id, c.citing_id
FROM json_each(:paper_ids) AS j
JOIN citations AS c ON c.cited_id = j.value
JOIN papers AS p ON p.id = c.citing_id
ORDER BY c.cited_id, c.citing_id"""


@dataclass
class RankedPaper:
    """One entry of a result, with every number that explains its place."""

    paper: Paper
    bm25_score: float
    graph_distance: int | None
    recency_score: float
    final_score: float
    bm25_norm: float = 0.0
    graph_score: float = 0.0
    reached: list[Reach] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "id": self.paper.id,
            "title": self.paper.title,
            "year": self.paper.year,
            "bm25_score": self.bm25_score,
            "graph_distance": self.graph_distance,
            "recency_score": self.recency_score,
            "final_score": self.final_score,
            "graph_score": self.graph_score,
            "reached": [r.to_dict() for r in self.reached],
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

    def why(self, config: RetrievalConfig) -> str:
        """A one-line account of the score: each term of the blend and what it came from."""
        return (
            f"{config.w_bm25:g}*bm25 {self.bm25_norm:.3f} + {config.w_graph:g}*graph {self.graph_score:.3f} "
            f"({self.how()}) + {config.w_recency:g}*recency {self.recency_score:.3f} = {self.final_score:.4f}"
        )


@dataclass
class RetrievalResult:
    """A ranked list and the query's metrics (hit count, average and top final score, wall time)."""

    query: str
    ranked: list[RankedPaper]
    hit_count: int
    average_score: float
    top_score: float
    wall_time_ms: float
    config: RetrievalConfig = field(default_factory=RetrievalConfig)
    expansion: dict = field(default_factory=dict)

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
        return {
            "query": self.query,
            "results": [r.to_dict() for r in ranked],
            "metrics": self.metrics,
            "expansion": self.expansion,
        }


class RetrievalClient:
    """Searches an index file: BM25 seeds, a citation walk from them, and the blended ranking.

    As in the lesson it takes the two mock API clients; when ``db`` does not exist yet and clients are given,
    the index is built from their merged records first. Every later process opens the same file.
    """

    def __init__(
        self,
        arxiv: ArxivMockClient | None = None,
        s2: SemanticScholarMockClient | None = None,
        config: RetrievalConfig | None = None,
        *,
        db: str | Path | None = None,
    ) -> None:
        self.path = resolve_db_path(db)
        self.config = config or RetrievalConfig()
        self._arxiv, self._s2 = arxiv, s2
        if not self.path.exists() and arxiv is not None and s2 is not None:
            build_index(merge_clients(arxiv, s2), self.path, source="mock clients")
        check_index(self.path)
        self._conn = connect(self.path, readonly=True)
        self.lexical = BM25Index(self._conn)
        self.graph = CitationGraph(self._conn)

    @property
    def stats(self) -> IndexStats:
        """The index's statistics now (another process may have added papers since this client opened)."""
        with read_snapshot(self._conn) as conn:
            return read_stats(conn)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> RetrievalClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the parts of the blend -------------------------------------------------------------------------
    def recency(self, year: int | None, stats: IndexStats | None = None) -> float:
        """0 at the corpus's earliest year, 1 at its latest; 0 for no year; 1 when all share one year."""
        stats = stats or self.stats
        lo, hi = stats.min_year, stats.max_year
        if year is None or lo is None or hi is None:
            return 0.0
        if hi == lo:
            return 1.0
        return min(1.0, max(0.0, (year - lo) / (hi - lo)))

    # -- papers, one call away ----------------------------------------------------------------------------
    def papers(self, paper_ids: list[str], full: bool = True) -> dict[str, Paper]:
        """The papers with these ids (missing ids are left out), with authors, references and citing papers
        when ``full``. A fixed number of queries whatever the number of ids."""
        ids = json.dumps(list(paper_ids))
        out: dict[str, Paper] = {}
        with read_snapshot(self._conn) as conn:
            for pid, title, abstract, year in conn.execute(PAPERS_SQL, {"paper_ids": ids}):
                out[pid] = Paper(pid, title, abstract, year, source="merged")
            if full and out:
                for pid, name in conn.execute(AUTHORS_SQL, {"paper_ids": ids}):
                    out[pid].authors.append(name)
                for pid, ref in conn.execute(REFERENCES_SQL, {"paper_ids": ids}):
                    out[pid].references.append(ref)
                for pid, citer in conn.execute(CITED_BY_SQL, {"paper_ids": ids}):
                    out[pid].citations.append(citer)
        return out

    def paper(self, paper_id: str) -> Paper | None:
        """One paper by id (with authors, references and citing papers), or None."""
        return self.papers([paper_id]).get(paper_id)

    # -- search ---------------------------------------------------------------------------------------------
    def search_sql(self, query: str, config: RetrievalConfig | None = None) -> list[tuple[str, str, dict]]:
        """``(name, statement, parameters)`` of each query a search runs, in order (seed ids as placeholders)."""
        cfg = config or self.config
        depth = max(cfg.top_k_lexical, cfg.lexical_depth) if cfg.ranking == "evidence" else cfg.top_k_lexical
        statements = self.lexical.statements(query, depth)
        if cfg.expand != "never":
            stats = self.stats
            terms = json.dumps(tokenise(query))
            mass = {"query_terms": terms, "n_papers": stats.n_papers, "k1": stats.k1}
            statements.append(("gate: the query's attainable score", expansion.QUERY_MASS_SQL, mass))
        if cfg.ranking == "blend":
            statements.append(("citation walk", *self.graph.expand_sql(["<seed ids>"], cfg.max_hops)))
        elif cfg.expand != "never":
            statements.append(("degrees of the sources", expansion.DEGREE_SQL, {"sources": "<source ids>"}))
            caps = {"sources": "<source ids>", "fanout": cfg.fanout, "max_neighbours": cfg.max_neighbours or -1}
            statements += [(f"expansion: {r}", expansion.relation_sql(r), caps) for r in cfg.relations]
        return [
            *statements,
            ("bm25 of the papers the graph added", *self.lexical.scores_sql(query, ["<added ids>"])),
            ("candidates", CANDIDATES_SQL, {"paper_ids": "<candidate ids>"}),
            ("papers", PAPERS_SQL, {"paper_ids": "<returned ids>"}),
        ]

    def search(
        self, query: str, config: RetrievalConfig | None = None, limit: int | None = None, full: bool = True
    ) -> RetrievalResult:
        """Rank papers for ``query``: BM25 top-k seeds, a walk of up to ``max_hops``, the blend.

        ``limit`` keeps only the first entries (the metrics still describe the whole merged list); ``full``
        also loads the returned papers' abstracts, authors, references and citing papers (without it, entries
        carry id, title and year).
        """
        cfg = config or self.config
        start = time.perf_counter()
        if not tokenise(query):
            return RetrievalResult(query, [], 0, 0.0, 0.0, (time.perf_counter() - start) * 1000.0, cfg)
        depth = max(cfg.top_k_lexical, cfg.lexical_depth) if cfg.ranking == "evidence" else cfg.top_k_lexical
        with read_snapshot(self._conn):  # one state of the file, even while another process adds papers
            lexical = self.lexical.search(query, depth)
            return self.rank(query, lexical, cfg, limit=limit, full=full, started=start)

    def rank(
        self,
        query: str,
        lexical: list[tuple[str, float]],
        config: RetrievalConfig | None = None,
        limit: int | None = None,
        full: bool = True,
        started: float | None = None,
    ) -> RetrievalResult:
        """The graph pass and the merge for a BM25 list already computed (``(id, bm25)``, best first).

        Its first ``top_k_lexical`` entries are the seeds; the evidence ranking also ranks its first
        ``lexical_depth``. ``search`` is ``rank(query, lexical.search(query, depth))``; an evaluation computes the
        list once and passes it to every mode.
        """
        cfg = config or self.config
        start = time.perf_counter() if started is None else started
        with read_snapshot(self._conn) as conn:
            return self._rank(query, lexical, cfg, limit, full, start, read_stats(conn))

    def _candidates(self, query: str, lexical: list[tuple[str, float]], cfg: RetrievalConfig, stats):
        """Each candidate's graph distance and graph score, its reaches, and the expansion's report."""
        seeds = lexical[: cfg.top_k_lexical]
        gate = expansion.decide(self._conn, tokenise(query), seeds, cfg, stats)
        if cfg.ranking == "blend":
            walk = self.graph.expand([pid for pid, _ in seeds], cfg.max_hops if gate.fired else 0) if seeds else {}
            scores = {pid: GRAPH_SCORES.get(d, 0.0) for pid, d in walk.items()}
            counts = Counter(walk.values())
            report = {"gate": gate.to_dict(), "candidates_added": len(walk) - len(seeds),
                      "new_per_hop": {str(h): n for h, n in sorted(counts.items()) if h > 0}}  # fmt: skip
            return walk, scores, {}, report
        grown = expansion.expand(self._conn, seeds, cfg, gate)
        distances: dict[str, int | None] = dict.fromkeys((pid for pid, _ in lexical[: cfg.lexical_depth]), None)
        distances.update((pid, 0) for pid, _ in seeds)
        listed = len(distances)
        for pid, hop in grown.distance.items():
            distances.setdefault(pid, hop)
            if distances[pid] is None:
                distances[pid] = hop
        report = grown.to_dict()
        report["candidates_added"] = len(distances) - listed  # beyond the BM25 list
        return distances, grown.evidence, grown.reaches, report

    def _rank(self, query, lexical, cfg, limit, full, start, stats) -> RetrievalResult:
        seeds = lexical[: cfg.top_k_lexical]
        distances, graph_scores, reaches, report = self._candidates(query, lexical, cfg, stats)
        known = dict(lexical)
        bm25 = {**self.lexical.scores(query, [pid for pid in distances if pid not in known]), **known}
        max_bm25 = seeds[0][1] if seeds else 0.0
        papers = {
            pid: Paper(pid, title, year=year, source="merged")
            for pid, title, year in self._conn.execute(CANDIDATES_SQL, {"paper_ids": json.dumps(list(distances))})
        }
        ranked: list[RankedPaper] = []
        for pid, distance in distances.items():
            paper = papers[pid]
            bm25_norm = bm25[pid] / max_bm25 if max_bm25 > 0 else 0.0
            graph_score = graph_scores.get(pid, 0.0)
            recency = self.recency(paper.year, stats)
            final = cfg.w_bm25 * bm25_norm + cfg.w_graph * graph_score + cfg.w_recency * recency
            entry = RankedPaper(paper, bm25[pid], distance, recency, final, bm25_norm, graph_score)
            entry.reached = list(reaches.get(pid, ()))[:3]
            ranked.append(entry)
        ranked.sort(key=lambda r: (-r.final_score, r.paper.id))
        scores = [r.final_score for r in ranked]
        hit_count, average, top = len(ranked), (sum(scores) / len(scores) if scores else 0.0), max(scores, default=0.0)
        if limit is not None:
            ranked = ranked[:limit]
        if full and ranked:
            detail = self.papers([r.paper.id for r in ranked], full=True)
            for r in ranked:
                r.paper = detail[r.paper.id]
        wall_ms = (time.perf_counter() - start) * 1000.0
        report["candidates_scored"] = hit_count
        return RetrievalResult(query, ranked, hit_count, average, top, wall_ms, cfg, report)


def build_client(config: RetrievalConfig | None = None, db: str | Path | None = None) -> RetrievalClient:
    """A client over the built-in demo corpus, building its index at ``db`` on first use."""
    from ..corpus.mock import build_corpus

    corpus = build_corpus()
    return RetrievalClient(ArxivMockClient(corpus), SemanticScholarMockClient(corpus), config, db=db)


__all__ = ["RankedPaper", "RetrievalClient", "RetrievalResult", "build_client"]
