"""``RetrievalClient``: a read-only handle on an index, and the search that runs the passes in one snapshot.

A search turns its text into a ``Query`` once, opens one read snapshot (one set of statistics), weighs the query
there, and hands those objects to the lexical pass, the gate, the graph pass and the blend. Every statement runs
through the client's executor, so a tracer given to the client sees exactly what ran.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter

from ..config import GRAPH_SCORES, RetrievalConfig, resolve_db_path
from ..corpus.paper import Paper
from ..store.database import IndexStats, check_index, connect
from ..store.executor import Executor, Snapshot, StatementCache, Tracer
from . import expansion, lexical
from .blend import RetrievalResult, blend
from .graph import CitationGraph, walk
from .lexical import BM25Index
from .query import Query, WeightedQuery

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a query process starts faster)
if TYPE_CHECKING:
    from .memo import QueryMemo

# What the blend needs of every candidate; the rest is loaded for the returned entries only.
CANDIDATES_SQL = """\
SELECT p.id,
       p.title,
       p.year
FROM json_each(:paper_ids) AS j
JOIN papers AS p ON p.id = j.value"""

PAPERS_SQL = """\
SELECT p.id,
       p.title,
       p.abstract,
       p.year
FROM json_each(:paper_ids) AS j
JOIN papers AS p ON p.id = j.value"""

ABSTRACTS_SQL = """\
SELECT p.id,
       p.abstract
FROM json_each(:paper_ids) AS j
JOIN papers AS p ON p.id = j.value"""

AUTHORS_SQL = """\
SELECT a.paper_id,
       a.name
FROM json_each(:paper_ids) AS j
JOIN paper_authors AS a ON a.paper_id = j.value
ORDER BY a.paper_id, a.position"""

REFERENCES_SQL = """\
SELECT c.citing_id,
       c.cited_id
FROM json_each(:paper_ids) AS j
JOIN citations AS c ON c.citing_id = j.value
ORDER BY c.citing_id, c.cited_id"""

CITED_BY_SQL = """\
SELECT c.cited_id,
       c.citing_id
FROM json_each(:paper_ids) AS j
JOIN citations AS c ON c.cited_id = j.value
JOIN papers AS p ON p.id = c.citing_id
ORDER BY c.cited_id, c.citing_id"""


def lexical_depth(cfg: RetrievalConfig) -> int:
    """How deep the BM25 list of a search is: the expansion ranking also ranks its first ``lexical_depth``."""
    return max(cfg.top_k_lexical, cfg.lexical_depth) if cfg.ranking == "expansion" else cfg.top_k_lexical


class RetrievalClient:
    """Searches an index: BM25 seeds, a citation walk from them, and the blended ranking. Only reads.

    ``db`` is resolved as everywhere (``--db``, ``$RETRIEVAL_DB``, ``./retrieval.db``); ``tracer`` is called with
    every statement the client runs (``retrieval.store.executor.Trace`` keeps them).
    """

    def __init__(
        self,
        db: str | os.PathLike[str] | None = None,
        config: RetrievalConfig | None = None,
        *,
        tracer: Tracer | None = None,
    ) -> None:
        self.path = resolve_db_path(db)
        self.config = config or RetrievalConfig()
        if not self.path.exists():
            check_index(self.path)  # the message that says how to build one
        self._executor = Executor(connect(self.path, readonly=True), tracer, self.path)
        try:
            check_index(self.path, self._executor.rows)
        except BaseException:
            self.close()
            raise
        self.lexical = BM25Index(self._executor)
        self.graph = CitationGraph(self._executor)

    def snapshot(self):
        """``with client.snapshot() as snap``: one read transaction with the statistics as it sees them
        (``retrieval.store.executor.Snapshot``); nested calls join it."""
        return self._executor.snapshot()

    @property
    def stats(self) -> IndexStats:
        """The index's statistics now (another process may have added papers since this client opened)."""
        with self.snapshot() as snap:
            return snap.stats

    def close(self) -> None:
        self._executor.conn.close()

    def __enter__(self) -> RetrievalClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- papers, one call away ----------------------------------------------------------------------------
    def papers(self, paper_ids: list[str], full: bool = True) -> dict[str, Paper]:
        """The papers with these ids (missing ids are left out), with authors, references and citing papers
        when ``full``. A fixed number of statements whatever the number of ids."""
        with self.snapshot() as snap:
            rows = snap.rows("papers", PAPERS_SQL, {"paper_ids": json.dumps(list(paper_ids))})
            out = {pid: Paper(pid, title, abstract, year, source="merged") for pid, title, abstract, year in rows}
            if full:
                _add_links(snap, out)
        return out

    def paper(self, paper_id: str) -> Paper | None:
        """One paper by id (with authors, references and citing papers), or None."""
        return self.papers([paper_id]).get(paper_id)

    # -- search ---------------------------------------------------------------------------------------------
    def search(
        self, query: str | Query, config: RetrievalConfig | None = None, limit: int | None = None, full: bool = True
    ) -> RetrievalResult:
        """Rank papers for ``query``: BM25 top-k seeds, the gate, a walk of up to ``max_hops``, the blend.

        ``limit`` keeps only the first entries (the metrics still describe the whole merged list); ``full``
        also loads the returned papers' abstracts, authors, references and citing papers (without it, entries
        carry id, title and year).
        """
        cfg = config or self.config
        start = time.perf_counter()
        parsed = Query.parse(query)
        if not parsed:
            return RetrievalResult(parsed.text, [], 0, 0.0, 0.0, (time.perf_counter() - start) * 1000.0, cfg)
        with self.snapshot() as snap:  # one state of the file, even while another process adds papers
            wq = lexical.weigh(snap, parsed)
            hits, _ = lexical.top_papers(snap, wq, lexical_depth(cfg))
            return self._rank(snap, wq, hits, cfg, limit, full, start)

    def cache_statements(self, cache: StatementCache | None) -> None:
        """Answer read statements run before from ``cache`` (``None``: stop). Only for an index that does not
        change while the cache is in use: an evaluation sets one per query (``retrieval.search.memo``)."""
        self._executor.cache = cache

    def rank(
        self,
        query: str | Query,
        hits: list[tuple[str, float]],
        config: RetrievalConfig | None = None,
        limit: int | None = None,
        full: bool = True,
        memo: QueryMemo | None = None,
    ) -> RetrievalResult:
        """The gate, the graph pass and the blend for a BM25 list already computed (``(id, bm25)``, best first).

        Its first ``top_k_lexical`` entries are the seeds; the expansion ranking also ranks its first
        ``lexical_depth``. An evaluation computes the list once and passes it to every mode, with a ``memo``
        (``retrieval.search.memo``) that keeps the candidates' BM25 scores for the next mode of the same query.
        """
        cfg = config or self.config
        start = time.perf_counter()
        with self.snapshot() as snap:
            wq = lexical.weigh(snap, Query.parse(query))
            return self._rank(snap, wq, hits, cfg, limit, full, start, memo)

    def _candidates(self, snap: Snapshot, wq: WeightedQuery, hits: list[tuple[str, float]], cfg: RetrievalConfig):
        """Each candidate's graph distance and graph score, its reaches, and the expansion's report."""
        seeds = hits[: cfg.top_k_lexical]
        gate = expansion.decide(wq, seeds, cfg)
        if cfg.ranking == "hops":
            walked = walk(snap, [pid for pid, _ in seeds], cfg.max_hops if gate.fired else 0) if seeds else {}
            scores = {pid: GRAPH_SCORES.get(d, 0.0) for pid, d in walked.items()}
            counts = Counter(walked.values())
            report = {"gate": gate.to_dict(), "candidates_added": len(walked) - len(seeds),
                      "new_per_hop": {str(h): n for h, n in sorted(counts.items()) if h > 0}}  # fmt: skip
            return walked, scores, {}, report
        grown = expansion.expand(snap, seeds, cfg, gate)
        distances: dict[str, int | None] = dict.fromkeys((pid for pid, _ in hits[: cfg.lexical_depth]), None)
        distances.update((pid, 0) for pid, _ in seeds)
        listed = len(distances)
        for pid, hop in grown.distance.items():
            distances.setdefault(pid, hop)
            if distances[pid] is None:
                distances[pid] = hop
        report = grown.to_dict()
        report["candidates_added"] = len(distances) - listed  # beyond the BM25 list
        return distances, grown.evidence, grown.reaches, report

    def _rank(self, snap, wq, hits, cfg, limit, full, start, memo: QueryMemo | None = None) -> RetrievalResult:
        distances, graph_scores, reaches, report = self._candidates(snap, wq, hits, cfg)
        known = dict(hits)
        missing = [pid for pid in distances if pid not in known]
        if memo is None:
            bm25 = {**lexical.scores_for(snap, wq, missing), **known}
        else:
            todo = [pid for pid in missing if pid not in memo.bm25]
            began = time.perf_counter()
            memo.scored(lexical.scores_for(snap, wq, todo), time.perf_counter() - began)
            memo.reused_bm25(len(missing) - len(todo))
            bm25 = {**{pid: memo.bm25[pid] for pid in missing}, **known}
        rows = snap.rows(
            "blend: the candidates' titles and years", CANDIDATES_SQL, {"paper_ids": json.dumps(list(distances))}
        )
        papers = {pid: Paper(pid, title, year=year, source="merged") for pid, title, year in rows}
        seeds = hits[: cfg.top_k_lexical]
        best = seeds[0][1] if seeds else 0.0
        years = (snap.stats.min_year, snap.stats.max_year)
        ranked = blend(cfg, papers, distances, bm25, best, graph_scores, reaches, years)
        scores = [r.final_score for r in ranked]
        hit_count, average, top = len(ranked), (sum(scores) / len(scores) if scores else 0.0), max(scores, default=0.0)
        if limit is not None:
            ranked = ranked[:limit]
        if full and ranked:
            shown = {r.paper.id: r.paper for r in ranked}
            for pid, abstract in snap.rows(
                "returned papers: abstracts", ABSTRACTS_SQL, {"paper_ids": json.dumps(list(shown))}
            ):
                shown[pid].abstract = abstract
            _add_links(snap, shown)
        wall_ms = (time.perf_counter() - start) * 1000.0
        report["candidates_scored"] = hit_count
        return RetrievalResult(wq.text, ranked, hit_count, average, top, wall_ms, cfg, report)


def _add_links(snap: Snapshot, papers: dict[str, Paper]) -> None:
    """Fill in the authors, references and citing papers of ``papers`` (three statements)."""
    if not papers:
        return
    ids = {"paper_ids": json.dumps(list(papers))}
    for pid, name in snap.rows("papers: authors", AUTHORS_SQL, ids):
        papers[pid].authors.append(name)
    for pid, ref in snap.rows("papers: references", REFERENCES_SQL, ids):
        papers[pid].references.append(ref)
    for pid, citer in snap.rows("papers: citing papers", CITED_BY_SQL, ids):
        papers[pid].citations.append(citer)


__all__ = ["RetrievalClient", "lexical_depth"]
