"""``RetrievalClient``: a read-only handle on an index, and the search that runs the passes in one snapshot.

A search turns its text into a ``Query`` once, opens one read snapshot (one set of statistics), weighs the query
there, and hands those objects to the lexical pass, the gate, the graph pass and the blend. Every statement runs
through the client's executor, so a tracer given to the client sees exactly what ran.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import Counter

from ..config import GRAPH_SCORES, QUERY_TIMEOUT, RetrievalConfig
from ..corpus.paper import Paper
from ..errors import ConfigError, InputError, NotAnIndexError
from ..store.backend import backend_of
from ..store.database import IndexStats, check_index
from ..store.sql.executor import Executor, Snapshot, StatementCache, Tracer
from ..validate import (
    LIMITS,
    check_choice,
    check_int,
    check_number,
    paper_id_list,
    paper_id_of,
    quoted,
    quoted_list,
    shown_value,
)
from . import cocited, expansion, learned, lexical, prf, semantic, vote
from .adjacency import GRAPHS
from .blend import SORTS, BeyondPaper, RetrievalResult, blend, reorder
from .filters import Filters, author_names, author_papers, failing, none_pass, passing
from .graph import CitationGraph, walk
from .lexical import BM25Index
from .papers import (
    PAPERS_SQL,
    PaperPage,
    add_abstracts,
    add_links,
    candidate_papers,
    check_links,
    link_page,
    not_found,
    resolve_ids,
)
from .query import Query, WeightedQuery
from .similar import SimilarResult
from .similar import similar as find_similar
from .syntax import parse as syntax_parse

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a query process starts faster)
if TYPE_CHECKING:
    from .cutoff import Exclusion
    from .memo import QueryMemo


#: How often a read of a sharded index that saw a write half committed is begun again, and the pause before each.
SHARD_READ_RETRIES = (0.05, 0.2, 0.5)


def _read_again_if_half_written(method):
    """A read of a sharded index sees the shards' rows in snapshots of their own, begun after the coordinator's:
    an add or remove that commits in between (its shards commit first, then the coordinator) shows rows the
    coordinator's statistics do not know yet, which the checks of a search take for damage. Such a read is begun
    again in a new snapshot, a few times, and damage that stays is said. Not inside a snapshot the caller holds
    (which only that caller can begin again), and never on one server, where one snapshot sees everything."""
    import functools

    @functools.wraps(method)
    def read(self, *args, **kwargs):
        for pause in (*SHARD_READ_RETRIES, None):
            try:
                return method(self, *args, **kwargs)
            except NotAnIndexError:
                executor = self._executor
                sharded = executor.last_stats is not None and "shards" in executor.last_stats.info
                if pause is None or not sharded or executor._snapshot is not None:
                    raise
                time.sleep(pause)
        raise AssertionError("unreachable")  # pragma: no cover

    return read


def lexical_depth(cfg: RetrievalConfig) -> int:
    """How deep the BM25 list of a search is: the expansion ranking also ranks its first ``lexical_depth``."""
    if cfg.ranking == "learned" or (cfg.ranking == "auto" and not cfg.sets_policy()):  # at least the model's 100
        return max(cfg.top_k_lexical, cfg.lexical_depth, learned.DEFAULT_CANDIDATES["lexical_depth"])
    return max(cfg.top_k_lexical, cfg.lexical_depth) if cfg.ranking in ("expansion", "auto") else cfg.top_k_lexical


class RetrievalClient:
    """Searches an index: BM25 seeds, a citation walk from them, and the blended ranking. Only reads.

    ``db`` is resolved as everywhere (``--db``, ``$RETRIEVAL_DB``, ``./retrieval.db``; a ``postgresql://`` URL is an
    index on PostgreSQL, read by the same statements in its dialect's text); ``tracer`` is called with
    every statement the client runs (``retrieval.store.sql.executor.Trace`` keeps them). ``timeout``: seconds one
    read may take before it is stopped with a ``QueryTimeoutError`` (a search's whole snapshot on SQLite, each
    statement on PostgreSQL); None for no budget.
    """

    def __init__(
        self,
        db: str | os.PathLike[str] | None = None,
        config: RetrievalConfig | None = None,
        *,
        tracer: Tracer | None = None,
        timeout: float | None = QUERY_TIMEOUT,
    ) -> None:
        if timeout is not None:  # a budget of 0 or less stopped every read; NaN was none; text failed at a search
            check_number("timeout", timeout, 0.0)
            if timeout == 0:
                raise ConfigError("timeout must be more than 0 seconds (None for no budget), got 0")
        self.backend = backend_of(db)  # a file, or a schema on PostgreSQL: decided once
        self.path = self.backend.location
        self.config = RetrievalConfig.of(config)
        self.timeout = timeout
        self._file = self.backend.identity()  # taken before opening it: a file put in place after is seen
        conn = self.backend.connect(timeout)  # a missing index says how to build one
        follow = self._follow_file if self._file is not None else None
        self._executor = Executor(conn, tracer, self.path, timeout, before_snapshot=follow)
        try:
            check_index(self.path, self._executor.rows)
        except BaseException:
            self.close()
            raise
        self.lexical = BM25Index(self._executor)
        self.graph = CitationGraph(self._executor)

    def _follow_file(self) -> None:
        """Before each read of an index file: the file now at the index's path, if it is another than the one open
        (a rebuild moved into place, a copy renamed over it, the file removed and built again), is opened instead,
        and a path with no file says so, rather than answering from the file that was there."""
        now = self.backend.identity()
        if now == self._file:
            return
        executor = self._executor
        conn = self.backend.connect(self.timeout)  # no file there: the message that says how to build one
        old, executor.conn = executor.conn, conn
        self._file = now
        old.close()
        check_index(self.path, executor.rows)  # another revision or not an index: said now, as at opening

    def snapshot(self):
        """``with client.snapshot() as snap``: one read transaction with the statistics as it sees them
        (``retrieval.store.sql.executor.Snapshot``); nested calls join it."""
        return self._executor.snapshot()

    @property
    @_read_again_if_half_written
    def stats(self) -> IndexStats:
        """The index's statistics now (another process may have added papers since this client opened)."""
        with self.snapshot() as snap:
            return snap.stats

    @property
    def last_stats(self) -> IndexStats | None:
        """The statistics the client's latest snapshot read (None before the first), ``index_info`` included."""
        return self._executor.last_stats

    def interrupt(self) -> None:
        """Stop the read this client runs now, from another thread: it raises there; the client stays usable."""
        self._executor.interrupt()

    def close(self) -> None:
        self._executor.close_shards()  # a sharded index's shard connections (none otherwise)
        self._executor.conn.close()
        self._executor.closed = True

    def __enter__(self) -> RetrievalClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- papers, one call away ----------------------------------------------------------------------------
    @_read_again_if_half_written
    def papers(self, paper_ids: list[str], full: bool = True) -> dict[str, Paper]:
        """The papers with these ids (missing ids are left out), with authors, references and citing papers
        when ``full``. A fixed number of statements whatever the number of ids (one id may be given as a string)."""
        paper_ids = paper_id_list(paper_ids, "paper_ids")
        with self.snapshot() as snap:
            rows = snap.rows("papers", PAPERS_SQL, {"paper_ids": json.dumps(paper_ids)})
            out = {pid: Paper(pid, title, abstract, year, source=source) for pid, title, abstract, year, source in rows}
            if full:
                add_links(snap, out)
        return out

    @_read_again_if_half_written
    def paper(self, paper_id: str) -> Paper | None:
        """One paper by id (with authors, references and citing papers), or None. The id may be given as people
        write it (``arXiv:hep-th/9711200``, an arxiv.org address, a DOI: ``resolve``)."""
        paper_id_of(paper_id, "paper_id")
        with self.snapshot() as snap:
            found = resolve_ids(snap, [paper_id])[paper_id]
            return None if found is None else self.papers([found]).get(found)

    @_read_again_if_half_written
    def resolve(self, paper_ids: str | list[str]) -> list[str]:
        """The index's ids of the papers ``paper_ids`` name, in order (``retrieval.search.papers.id_forms``: an id as
        ``search`` shows it, ``arXiv:ID``, an arxiv.org abstract or PDF address with or without a version, a DOI or
        a doi.org address where the index has it as an id, arXiv's DOI ``10.48550/arXiv.ID``). An id that names no
        paper is a ``PaperNotFoundError`` naming it."""
        texts = paper_id_list(paper_ids, "paper_ids")
        with self.snapshot() as snap:
            found = resolve_ids(snap, texts)
        missing = [text for text in texts if found[text] is None]
        if missing:
            raise not_found(missing)
        return [found[text] for text in texts]

    # -- search ---------------------------------------------------------------------------------------------
    @_read_again_if_half_written
    def search(
        self,
        query: str | Query,
        config: RetrievalConfig | None = None,
        limit: int | None = None,
        full: bool = True,
        *,
        offset: int = 0,
        year: str | tuple[int | None, int | None] | None = None,
        authors: str | list[str] | tuple[str, ...] = (),
        syntax: bool = True,
        links: bool = False,
        sort: str | None = None,
    ) -> RetrievalResult:
        """Rank papers for ``query`` by the configuration's ``ranking``: by default (``auto``) the BM25 list
        expanded one hop over the citation graph and ranked by the learned model ranker-v3 (the hand-weighted
        policy where the query's BM25 hits are rarely cited), then re-ranked by co-citation with its top 10;
        ``learned`` is the model alone, ``expansion`` the hand-weighted policy's blend, ``hops`` the lesson's
        score by hop distance (``RetrievalConfig.lesson()``).

        ``limit`` entries are returned from ``offset`` on (None: the whole ranking; the metrics still describe the
        whole merged list, and
        ``matched`` counts every paper that contains a query term and passes the filters); ``full`` also loads
        the returned papers' abstracts and authors, and with ``links`` their references and citing papers
        (without ``full``, entries carry id, title and year). Links are off by default, as in the CLI, the API
        and the agent tools: the learned ranking puts much-cited papers first, whose citing papers number
        thousands each (``show`` gives one paper's).

        Filters apply before the top k (``retrieval.search.filters``): ``year`` (``"1998-2001"``, ``"1998-"``,
        ``"-2001"`` or ``(first, last)``), ``authors`` (papers by all of them), and what the query's text asks
        (``"phrase"``, ``-word``, ``author:`` and ``year:``; see ``retrieval.search.syntax``; ``syntax=False``
        reads the text as plain words). Anything unusual about the query is in ``result.warnings``.

        ``sort``: ``relevance`` (the default), ``citations`` (most cited first) or ``year`` (newest first), over
        the ranked papers, ties in the ranking's order; a page past them continues in BM25 order. Each returned
        entry carries its citation count (``entry.citations``: the citations the index records of it, ``cited_counts``).
        """
        cfg = self.config if config is None else RetrievalConfig.of(config)
        sort = sort or "relevance"  # an empty value (a form's, a URL's `sort=`) is the default, not another order
        check_choice("sort", sort, SORTS)
        check_int("limit", limit, 1, LIMITS["limit"], allow_none=True)
        check_int("offset", offset, 0, LIMITS["offset"])
        start = time.perf_counter()
        if isinstance(query, Query):
            asked = syntax_parse(query.text, syntax=False)
        else:
            if not isinstance(query, str):
                raise ConfigError(f"a query is a string, got {type(query).__name__}")
            asked = syntax_parse(query, syntax)
        warnings = list(asked.warnings)
        if year is not None and asked.year is not None and str(year).strip() != str(asked.year).strip():
            warnings.append(
                f"the query's year:{asked.year} and the year filter ({year}) both ask for years: the filter's, "
                f"{year}, is used"
            )
        depth = lexical_depth(cfg) if limit is None else max(lexical_depth(cfg), offset + limit)
        ahead = lexical.TermsAhead(query if isinstance(query, Query) else asked.text)
        with self._executor.snapshot(ahead) as snap:  # one state of the file, even while another process adds papers
            # The query and its filter words analysed once, as this index analyses text (stems, stop words).
            analyser = snap.stats.analyser
            parsed = ahead.query(analyser)
            # A -word the analyser splits (``-N=4``, ``-D-brane``) leaves out the papers holding its pieces in
            # that order, as -"N=4" would: not those holding any one of them.
            excluded = [analyser.analyse(word) for word in asked.exclude]
            # A -word or a phrase made only of stop words has no terms to filter by: said, not silently dropped.
            stopped = [f"-{word}" for word, terms in zip(asked.exclude, excluded, strict=True) if not terms]
            stopped += [f'-"{p}"' for p in asked.exclude_phrases if not analyser.analyse(p)]
            stopped += [f'"{p}"' for p in asked.phrases if not analyser.analyse(p)]
            if stopped:
                warnings.append(
                    f"{', '.join(stopped)}: only stop words, which this index does not search, so "
                    f"{'it filters' if len(stopped) == 1 else 'they filter'} nothing"
                )
            filters = Filters.make(
                year=year if year is not None else asked.year,
                authors=author_names(authors) + asked.authors,
                exclude=[terms[0] for terms in excluded if len(terms) == 1],
                phrases=[analyser.analyse(p) for p in asked.phrases],
                exclude_phrases=[analyser.analyse(p) for p in asked.exclude_phrases]
                + [terms for terms in excluded if len(terms) > 1],
                typed=(  # shown as written, in the lists the words filter as; stop words alone filter nothing
                    [word for word, terms in zip(asked.exclude, excluded, strict=True) if len(terms) == 1],
                    [p for p in asked.phrases if analyser.analyse(p)],
                    [p for p in asked.exclude_phrases if analyser.analyse(p)]
                    + [word for word, terms in zip(asked.exclude, excluded, strict=True) if len(terms) > 1],
                ),
            )
            wq = lexical.weigh(snap, parsed)
            warnings += _term_warnings(snap, parsed, wq, filters)
            if cfg.prf != "none" and wq.terms:  # pseudo-relevance feedback: every pass uses the expanded query
                wq = prf.expand_query(snap, wq, cfg.prf)
            if not wq.terms:
                wall = (time.perf_counter() - start) * 1000.0
                return RetrievalResult(
                    parsed.text, [], 0, 0.0, 0.0, wall, cfg, warnings=warnings, filters=filters, matched=0
                )
            if filters:
                allowed = passing(snap, filters)
                if allowed.count == 0:  # said, not left to read as a query no paper matches
                    warnings.append(none_pass(snap, filters))
                hits, found = lexical.filtered_top_papers(snap, wq, depth, allowed)
            else:
                allowed = None
                hits, _ = lexical.top_papers(snap, wq, depth)
                found = lexical.matched(snap, wq)
            result = self._rank(
                snap, wq, hits, cfg, limit, full, start, offset=offset, allowed=allowed, links=links, sort=sort
            )
        result.matched, result.matched_exact = found
        said = result.expansion.get("semantic", {}).get("warning")
        result.warnings, result.filters = warnings + ([said] if said else []), filters
        self._keep_graph()
        return result

    @_read_again_if_half_written
    def similar(
        self,
        paper_ids: str | list[str],
        limit: int = 10,
        *,
        offset: int = 0,
        exclude: list[str] | set[str] | tuple[str, ...] = (),
        year: str | tuple[int | None, int | None] | None = None,
        authors: str | list[str] | tuple[str, ...] = (),
        sort: str | None = None,
    ) -> SimilarResult:
        """Papers like ``paper_ids`` (one id or a reading list): co-citation, bibliographic coupling and text
        similarity (``retrieval.search.similar``), without the seeds and ``exclude``, ``limit`` from ``offset``
        on, filtered by ``year`` and ``authors`` as ``search`` is, in the order ``sort`` asks (relevance, citations
        or year, as ``search``); each entry says why (``entry.why()``) and how often it is cited."""
        seeds = paper_id_list(paper_ids, "paper_ids")
        exclude = list(dict.fromkeys(paper_id_list(exclude or (), "exclude")))  # a set: a repeat counts once
        if len(exclude) > LIMITS["exclude"]:  # each is looked up: a million took 5 s and 355 MB
            raise ConfigError(f"similar leaves out at most {LIMITS['exclude']:,} paper ids, got {len(exclude):,}")
        check_int("limit", limit, 1, LIMITS["limit"])
        check_int("offset", offset, 0, LIMITS["offset"])
        sort = sort or "relevance"  # an empty value (a form's, a URL's `sort=`) is the default, not another order
        check_choice("sort", sort, SORTS)
        if not seeds:
            raise ConfigError("similar needs at least one paper id")
        if len(seeds) > LIMITS["similar_seeds"]:
            raise ConfigError(f"similar takes at most {LIMITS['similar_seeds']:,} paper ids, got {len(seeds):,}")
        filters = Filters.make(year=year, authors=authors)
        with self.snapshot() as snap:
            named = resolve_ids(snap, [*seeds, *exclude])  # ids as people write them (``resolve``)
            missing = [pid for pid in dict.fromkeys(seeds) if named[pid] is None]
            if missing:
                raise not_found(missing)
            seeds = [named[pid] for pid in seeds]
            exclude = {named[pid] for pid in exclude if named[pid]}  # an id of no paper leaves nothing out
            result = find_similar(snap, seeds, limit, offset, exclude, filters if filters else None, sort)
            shown = {e.paper.id: e.paper for e in result.ranked}
            add_abstracts(snap, shown)  # what an export of the page carries, as a search's does
            add_links(snap, shown, links=False)  # authors: what it shows
        self._keep_graph()
        return result

    def _keep_graph(self) -> None:
        """Read and keep the citation graph, in a snapshot of its own, once this process's statements have read
        about as many of its rows at an index state (``adjacency``)."""
        if GRAPHS.due:
            with self.snapshot() as snap:
                GRAPHS.keep(snap)

    @_read_again_if_half_written
    def show(
        self,
        paper_id: str,
        *,
        limit: int | None = None,
        sort: str | None = "citations",
        references_offset: int = 0,
        citations_offset: int = 0,
    ) -> PaperPage:
        """One paper with its authors and a page of its references and of its citing papers: ``limit`` of each
        (None: all) from ``references_offset`` and ``citations_offset`` on, ordered by ``sort`` (``citations``: the
        most cited first; ``year``: the newest first; ``id``), with the titles, years, authors and citation counts
        of those in the corpus, and the totals the pages are out of (``PaperPage``). The id may be given as people
        write it (``resolve``); one that names no paper is a ``PaperNotFoundError``."""
        paper_id_of(paper_id, "paper_id")
        sort = sort or "citations"  # an empty value (a form's, a URL's `sort=`) is the default, as for search
        check_links(limit, sort, references_offset, citations_offset)
        with self.snapshot() as snap:
            pid = resolve_ids(snap, [paper_id])[paper_id]
            rows = [] if pid is None else snap.rows("show: the paper", PAPERS_SQL, {"paper_ids": json.dumps([pid])})
            if not rows:
                raise not_found([paper_id])
            [(pid, title, abstract, year, source)] = rows
            paper = Paper(pid, title, abstract, year, source=source)
            add_links(snap, {pid: paper}, links=False)
            return link_page(snap, paper, limit, sort, references_offset, citations_offset)

    def cache_statements(self, cache: StatementCache | None) -> None:
        """Answer read statements run before from ``cache`` (``None``: stop). Only for an index that does not
        change while the cache is in use: an evaluation sets one per query (``retrieval.search.memo``)."""
        self._executor.cache = cache

    @_read_again_if_half_written
    def rank(
        self,
        query: str | Query | WeightedQuery,
        hits: list[tuple[str, float]],
        config: RetrievalConfig | None = None,
        limit: int | None = None,
        full: bool = True,
        memo: QueryMemo | None = None,
        exclude: Exclusion | None = None,
    ) -> RetrievalResult:
        """The gate, the graph pass and the blend for a BM25 list already computed (``(id, bm25)``, best first).

        Its first ``top_k_lexical`` entries are the seeds; the expansion ranking also ranks its first
        ``lexical_depth``. An evaluation computes the list once and passes it to every mode, with a ``memo``
        (``retrieval.search.memo``) that keeps the candidates' BM25 scores for the next mode of the same query.
        ``query`` may be a ``WeightedQuery`` weighed before (an RM3-expanded one, whose weights then score the
        candidates too); ``config.prf`` is not applied here, since ``hits`` are given. ``exclude``
        (``retrieval.search.cutoff``): papers treated as absent by the walk and the blend (``hits`` must already
        be without them; the lesson's ``hops`` walk does not support it).
        """
        cfg = self.config if config is None else RetrievalConfig.of(config)
        if not isinstance(hits, (list, tuple)) or not all(
            isinstance(hit, (list, tuple)) and len(hit) == 2 and isinstance(hit[0], str) for hit in hits
        ):
            raise ConfigError(f"hits must be a list of (paper id, BM25 score) pairs, got {shown_value(hits)}")
        start = time.perf_counter()
        try:
            with self.snapshot() as snap:
                wq = query if isinstance(query, WeightedQuery) else lexical.weigh(snap, Query.parse(query))
                if not exclude:
                    result = self._rank(snap, wq, hits, cfg, limit, full, start, memo)
                elif cfg.ranking == "hops":
                    raise ConfigError(
                        "an exclusion needs the expansion ranking: the lesson's hop walk does not support it"
                    )
                else:
                    result = self._rank(
                        snap, wq, hits, cfg, limit, full, start, memo, allowed=exclude.passing,
                        excluded=exclude.paper_ids,
                    )  # fmt: skip
        except NotAnIndexError as exc:  # an id of the hits given that the index lacks: the caller's, not damage
            missing = getattr(exc, "missing", None)
            if missing and set(missing) <= {pid for pid, _ in hits}:
                raise InputError(
                    f"the hits given name the paper {quoted(missing[0])}, which the index lacks: give ids of its "
                    "papers, as its lexical search returns them"
                ) from None
            raise
        self._keep_graph()
        return result

    def _candidates(
        self,
        snap: Snapshot,
        wq: WeightedQuery,
        hits: list[tuple[str, float]],
        cfg: RetrievalConfig,
        excluded: frozenset[str] = frozenset(),
    ):
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
        grown = expansion.expand(snap, seeds, cfg, gate, excluded)
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

    def _rank(
        self,
        snap,
        wq,
        hits,
        cfg,
        limit,
        full,
        start,
        memo: QueryMemo | None = None,
        offset: int = 0,
        allowed=None,
        links: bool = False,
        excluded: frozenset[str] = frozenset(),
        sort: str | None = None,
    ) -> RetrievalResult:
        choice = None
        # The default's second look at its top (``cocited``); not for a ranking asked for by name or by its settings.
        feedback = cfg.w_cocited if cfg.ranking == "auto" and not cfg.sets_policy() else 0.0
        if cfg.ranking == "auto" and cfg.sets_policy():  # a policy asked for by its settings
            cfg = cfg.replace(ranking="expansion")
        elif cfg.ranking == "auto":  # per query: the learned ranking where the matching papers are cited enough
            choice = learned.choose(snap, hits[: lexical_depth(cfg)], excluded)
            cfg = cfg.replace(ranking=choice["ranking"])
        model = learned.resolve_model(cfg, self.path) if cfg.ranking == "learned" else None
        shown_cfg, cfg = cfg, (model.candidate_config(cfg) if model is not None else cfg)
        distances, graph_scores, reaches, report = self._candidates(snap, wq, hits, cfg, excluded)
        if choice is not None:
            report["auto"] = choice
        voted = None
        if model is not None and model.uses_vote:
            voted = vote.compute(snap, wq, hits, allowed, excluded)
            for pid in voted.candidates():
                distances.setdefault(pid, 0 if pid in voted.seeds else 1)
            report["vote"] = voted.to_dict()
        if allowed is not None:  # the walk may pass through papers the filter rejects, but never ranks them
            known = {pid for pid, _ in hits}
            for pid in failing(snap, [pid for pid in distances if pid not in known], allowed):
                del distances[pid]
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
        papers = candidate_papers(snap, list(distances), "blend: the candidates' titles and years")
        seeds = hits[: cfg.top_k_lexical]
        best = seeds[0][1] if seeds else 0.0
        years = (snap.stats.min_year, snap.stats.max_year)
        degrees: dict[str, int] = {}

        def citations(ids: list[str]) -> dict[str, int]:
            """In-degrees as ``learned.in_degrees`` gives them; the learned ranking's are read already for every
            candidate (one never cited is left out of them)."""
            if model is None:
                return learned.in_degrees(snap, ids, excluded)
            read = {pid: degrees[pid] for pid in ids if pid in degrees}
            return read | learned.in_degrees(snap, [pid for pid in ids if pid not in distances], excluded)

        if model is not None:
            degrees = learned.in_degrees(snap, list(distances), excluded)
            short = learned.is_short(wq.query.text)
            ranked = learned.rank(model, cfg, papers, distances, bm25, hits, wq.attainable, reaches, degrees, years,
                                  voted, short)  # fmt: skip
            report["model"] = learned.describe(model)
            cfg = shown_cfg
        else:
            similar = None
            if cfg.ranking == "expansion" and cfg.w_semantic:  # the lesson's blend stays the lesson's
                similar = semantic.scores(snap, wq.text, list(distances), report)
            ranked = blend(cfg, papers, distances, bm25, best, graph_scores, reaches, years, similar)
        if feedback:
            ranked = cocited.rerank(snap, ranked, feedback, citations, excluded, report)
        scores = [r.final_score for r in ranked]
        hit_count, average, top = len(ranked), (sum(scores) / len(scores) if scores else 0.0), max(scores, default=0.0)
        cited: dict[str, int] = {}
        if sort == "citations":
            cited = citations([r.paper.id for r in ranked])
        ranked = reorder(ranked, sort, cited)
        # Past the ranked candidates, the rest of the BM25 list (as deep as offset + limit asked) in BM25 order:
        # every page is then a slice of one longer ranking, however deep it goes. (Without a limit, the ranking
        # alone: what the evaluation and the modes rank; the lesson's ranking is its seeds and their walk.)
        deep = limit is not None and cfg.ranking != "hops"
        past = [(pid, s) for pid, s in hits if pid not in distances and pid not in excluded] if deep else []
        shown_past = past[max(0, offset - hit_count) : max(0, offset + (limit or 0) - hit_count)]
        ranked = ranked[offset:] if limit is None else ranked[offset : offset + limit]
        if shown_past:
            tail = candidate_papers(snap, [pid for pid, _ in shown_past], "past the ranking: titles and years")
            ranked += [BeyondPaper(tail[pid], score, hit_count) for pid, score in shown_past]
        length = hit_count + len(past)  # the ranking as deep as this page asked: all of it once a page is past it
        if full and ranked:  # each returned entry's citation count (those sorted on are read already)
            missing = [r.paper.id for r in ranked if r.paper.id not in cited]
            cited.update(citations(missing) if missing else {})
            for r in ranked:
                r.citations = cited.get(r.paper.id, 0)
        if full and ranked:
            shown = {r.paper.id: r.paper for r in ranked}
            add_abstracts(snap, shown)
            add_links(snap, shown, links)
        wall_ms = (time.perf_counter() - start) * 1000.0
        report["candidates_scored"] = hit_count
        return RetrievalResult(
            wq.text, ranked, hit_count, average, top, wall_ms, cfg, report, offset=offset, length=length
        )


#: Queries of at most this many words are checked for words that are authors' surnames (a hint to use --author).
AUTHOR_HINT_MAX_WORDS = 4
#: The most words a query may have for a warning to list the ones in no paper.
SHORT_WORDS = 20
#: Words joined by hyphens: ``Calabi-Yau``. Each match begins where a word does: tried inside one long word, every
#: position would backtrack over the rest of it (time quadratic in the word's length).
_HYPHENATED = re.compile(r"(?<![^\W_])[^\W_]+(?:-[^\W_]+)+")


def _term_warnings(snap: Snapshot, query: Query, wq: WeightedQuery, filters: Filters) -> list[str]:
    """What the user should know about the query's words: none searchable, some in no paper, or a surname.

    ``query`` holds the user's words (the tokeniser alone: the surname hint looks them up as written); what the
    index searches is ``wq.query``, analysed as the index was (stems, stop words), so a word counts as found when
    its analysed terms are, and a stop word is neither found nor missing."""
    analysed = wq.query
    if not analysed.tokens:
        if analysed.stopped:
            return [f"the query has only stop words ({quoted_list(list(analysed.stopped))}), which this index does not "
                    "search: nothing to rank"]  # fmt: skip
        if filters.years or filters.authors or filters.exclude or filters.exclude_phrases:
            given = [*(["a year"] if filters.years else []), *(["an author"] if filters.authors else []),
                     *(["exclusions"] if filters.exclude or filters.exclude_phrases else [])]  # fmt: skip
            return [f"the query has no words to rank by, only filters ({', '.join(given)}): add words, such as "
                    "'black hole author:Maldacena' (filters choose among the papers that words find)"]  # fmt: skip
        if not query.text.strip():
            return ["the query is empty: nothing to rank"]
        return ["the query has no words to search (only punctuation): nothing to rank"]
    found = {t.term for t in wq.terms}
    if not query.analyser.plain and len(query.tokens) <= SHORT_WORDS:
        # The user's words as written ("hawking", not its stem "hawk"), for the messages of a short query, where
        # they name words. A short query's words are few (its terms, and stop words), so never too many to parse.
        query = Query.parse(query.text)
    if analysed.analyser == query.analyser:  # the words are the terms: nothing to analyse again
        absent = [token for token in query.qtf if token not in found]
    else:  # the user's words, each as the index analyses it (a stem, or nothing for a stop word)
        absent = [
            token
            for token in query.qtf
            if (terms := analysed.analyser.analyse(token)) and not any(term in found for term in terms)
        ]
    out = []
    if not found:
        out.append(f"no paper contains any of the query's words ({quoted_list(absent)}): nothing to rank")
    elif absent and len(query.qtf) <= SHORT_WORDS:
        out.append(f"no paper contains {quoted_list(absent)}: ranked on the other words")
    if not filters.authors and len(query.tokens) <= AUTHOR_HINT_MAX_WORDS:
        # A word hyphenated to another names a thing after people (Calabi-Yau, Bekenstein-Hawking), not an author.
        joined = {t for part in _HYPHENATED.findall(query.text) for t in Query.parse(part).tokens}
        for token in query.qtf:
            if token.isalpha() and len(token) > 2 and token not in joined:
                count = author_papers(snap, token)
                if count:
                    out.append(
                        f"{token!r} is also the surname of authors of {count:,} paper{'' if count == 1 else 's'}: "
                        f"add --author {token} (or author:{token}) to rank their papers"
                    )
    return out


__all__ = ["PaperPage", "RetrievalClient", "lexical_depth"]
