"""``explain``: the evidence-graph ranking (the Crase method) as one bounded, inspectable run.

1. seeds from the query, its given sub-queries and, for a long query, one automatic sub-query per sentence
   (``split``; ``seeds``);
2. the seeds' 1.5-hop citation graph in SQL, its size and the scorer bound fixed before any scoring (``graph``);
3. edge support, pruning of edges with Delta below tau and of papers left without an edge (``support``);
4. the seeds' vote (the default), or recency-aware personalised PageRank or SALSA, over what remains (``rank``).

Stages 1 and 2 read the index in one read transaction, so a paper added meanwhile by another process is either
wholly in the run or wholly out of it. The returned ``EvidenceRun`` holds every number; ``save=True`` stores it in
the index file (``retrieval.evidence.save``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence

from ..errors import ConfigError, RetrievalError
from ..search.client import RetrievalClient
from ..search.memo import QueryMemo
from ..search.query import Query
from ..search.split import split_query
from ..search.syntax import parse as syntax_parse
from ..store.querylog import record_if_enabled
from ..validate import LIMITS, paper_id_list, quoted_list, text_list
from .config import EvidenceConfig, age
from .graph import EvidenceGraph, build_graph
from .plan import Planner, collect_subqueries
from .rank import WALKS
from .records import STATUSES, EdgeRecord, EvidenceRun, GraphSize, Health, NodeRecord
from .seeds import Seed, given_seeds, select_seeds
from .support import (
    CountingScorer,
    EdgeSupport,
    SupportScorer,
    TfidfCosineScorer,
    best_supports,
    claims_of,
    edge_supports,
    scorer_bound,
)


def explain(
    client: RetrievalClient,
    query: str,
    *,
    subqueries: Iterable[str] | None = None,
    plan: str | os.PathLike[str] | None = None,
    planner: Planner | None = None,
    seeds: Sequence[str] | None = None,
    config: EvidenceConfig | None = None,
    scorer: SupportScorer | None = None,
    lexical: list[tuple[str, float]] | None = None,
    save: bool = False,
    memo: QueryMemo | None = None,
) -> EvidenceRun:
    """Rank papers for ``query`` by the evidence graph of its seeds, and say why each paper is where it is.

    ``subqueries``, ``plan`` (a file) and ``planner`` (``Callable[[str], list[str]]``) add sub-queries after the
    query itself; ``seeds`` replaces the lexical seeds by the given paper ids (an ablation); ``scorer`` replaces
    the offline TF-IDF scorer; ``lexical`` is the query's BM25 list when the caller already has it at least
    ``seed_pool`` deep. ``save`` stores the run in the index file and sets ``run_id``. ``memo``
    (``retrieval.search.memo``, one query against an unchanging index) shares the edge support between runs
    whose graphs, claims and theta are the same (an evaluation's evidence modes), with the default scorer only.
    """
    if not isinstance(query, str):
        raise ConfigError(f"a query is a string, got {type(query).__name__}")
    if config is not None and not isinstance(config, EvidenceConfig):
        raise ConfigError(f"config must be an EvidenceConfig, got {type(config).__name__}: EvidenceConfig(**settings)")
    cfg = config or EvidenceConfig()
    clock = _Clock()
    subqueries = None if subqueries is None else text_list(subqueries, "subqueries")
    seeds = None if seeds is None else paper_id_list(seeds, "seeds")
    query, ignored = _words_only(query)
    given = collect_subqueries(query, subqueries, plan, planner)
    if len(given) - 1 > LIMITS["subqueries"]:  # each seeds the graph: 400 took 18 s and 970 MB on hep-th
        raise ConfigError(
            f"an evidence run takes at most {LIMITS['subqueries']} sub-queries (given, from a plan and a planner, "
            f"repeats aside), got {len(given) - 1:,}"
        )
    if cfg.split == "sentences":  # automatic sentence sub-queries after the given ones (``split``)
        parts = split_query(query, cfg.split_min_tokens, cfg.split_max)
        texts = collect_subqueries(query, [*given[1:], *parts]) if parts else given
    else:
        texts = given
    analyser = client.stats.analyser  # terms counted (and refused past the limit) as the index analyses text
    queries = [Query.parse(text, analyser) for text in texts]
    texts = [q.text for q in queries]  # valid Unicode, as stored by --save and printed
    # Seeds per sub-query: m for the query and the given sub-queries, ``split_seeds`` for the automatic ones.
    per_subquery = [cfg.seeds_per_subquery] * len(given) + [cfg.split_seeds] * (len(texts) - len(given))
    with client.snapshot() as snap:
        stats = snap.stats
        reference_year = cfg.reference_year(stats.max_year)
        if seeds is not None:
            seed_list = given_seeds(snap, queries, list(seeds))
        else:
            seed_list = select_seeds(snap, queries, cfg, reference_year, stats.min_year, lexical, per_subquery, memo)
        clock.lap("seeds")

        graph = build_graph(snap, [seed.paper_id for seed in seed_list], cfg)

        edge_keys = tuple(graph.edges)

        def papers_and_claims(ids: list[str]) -> dict[str, tuple]:
            found = client.papers(ids, full=False)
            return {pid: (p, claims_of(p.title, p.abstract, cfg.max_claims)) for pid, p in found.items()}

        if memo is not None:  # runs whose graphs share papers read and split each once
            read = memo.each(("claims", cfg.max_claims), list(graph.nodes), papers_and_claims)
        else:
            read = papers_and_claims(list(graph.nodes))
        papers = {pid: paper for pid, (paper, _) in read.items()}
        claims = {pid: split for pid, (_, split) in read.items()}
        size = GraphSize(
            found_nodes=graph.found_nodes,
            found_edges=graph.found_edges,
            nodes=len(graph.nodes),
            edges=len(graph.edges),
            trimmed=len(graph.trimmed),
            claims=sum(len(c) for c in claims.values()),
            scorer_bound=scorer_bound(edge_keys, claims),
            cap=cfg.max_nodes,
            cap_policy=cfg.cap_policy,
        )
        clock.lap("graph")

        counting = CountingScorer(scorer or TfidfCosineScorer(snap))

        scored: list[tuple[str, str]] = []  # the edges this run scores itself

        def score(edges: list[tuple[str, str]]) -> dict[tuple[str, str], tuple[tuple[float, ...], int]]:
            scored.extend(edges)
            counting.prepare(sorted({claim for edge in edges for pid in edge for claim in claims[pid]}))
            return best_supports(edges, claims, counting)

        # An edge's best supports depend only on its two papers' claims (and the index's statistics): runs that
        # share edges (an evaluation's evidence modes, whose graphs overlap) score each once; only Delta depends on
        # theta and the coverage rule. A custom scorer is never shared. ``key`` names the whole graph (papers
        # with no edge too), for what is shared only between runs of the same graph.
        key = (tuple(graph.nodes), edge_keys, cfg.max_claims) if memo is not None and scorer is None else None
        if key is not None:
            best = memo.each(("best supports", cfg.max_claims), list(edge_keys), score)
            # the scorer's calls for the edges scored here, and the announced count for those scored before
            calls = counting.calls + size.scorer_bound - scorer_bound(scored, claims)
        else:
            best = score(list(edge_keys))
            calls = counting.calls
    if key is not None:  # and runs of the same graph under the same coverage rule share Delta too
        rule = (cfg.theta, cfg.coverage, cfg.support_floor)
        support = memo.shared(("delta", key, rule), lambda: edge_supports(best, *rule))
    else:
        support = edge_supports(best, cfg.theta, cfg.coverage, cfg.support_floor)
    if calls != size.scorer_bound:
        raise RetrievalError(
            f"the scorer was called {calls:,} times, not the announced {size.scorer_bound:,}: "
            "this is a bug in the evidence pipeline, please report it"
        )
    clock.lap("support")

    seeds_by_id = {seed.paper_id: seed for seed in seed_list}

    def weighed() -> tuple[dict[tuple[str, str], EdgeRecord], set[str], dict[str, float]]:
        return _weigh(graph, support, cfg, reference_year, stats.min_year)

    if key is not None:  # runs that differ only in the walk (PPR or SALSA) weigh and prune the same edges alike
        weighing = (cfg.theta, cfg.coverage, cfg.support_floor, cfg.prune, cfg.tau, cfg.beta, cfg.support_power)
        shared_edges, touched, ages = memo.shared(("weighed", key, weighing, reference_year, stats.min_year), weighed)
        edges = dict(shared_edges)  # each run's own record; the EdgeRecords themselves are never changed
    else:
        edges, touched, ages = weighed()
    nodes = _nodes(graph, papers, support, seeds_by_id, touched, ages)
    ranker = WALKS[cfg.ranker]
    kept_nodes = [pid for pid, node in nodes.items() if node.kept]
    weighted = [(e.citing, e.cited, e.weight) for e in edges.values() if e.kept]
    teleport = {seed.paper_id: teleport_mass(seed, cfg.teleport) for seed in seed_list}
    if not seed_list:
        walk = None
    elif cfg.ranker == "vote":
        walk = ranker(kept_nodes, weighted, teleport, cfg.vote_citing, cfg.vote_self)
    else:
        walk = ranker(kept_nodes, weighted, teleport, cfg.alpha, cfg.tolerance, cfg.max_iterations)
    ranking = walk.ranking() if walk else []
    for rank, (pid, score) in enumerate(ranking, start=1):
        nodes[pid].score, nodes[pid].rank = score, rank
    clock.lap("rank")

    run = EvidenceRun(
        query=texts[0],
        subqueries=texts,
        config=cfg,
        reference_year=reference_year,
        seeds=seed_list,
        size=size,
        nodes=nodes,
        edges=edges,
        ranking=ranking,
        scorer=counting.name,
        scorer_calls=calls,
        iterations=walk.iterations if walk else 0,
        health=_health(seed_list, graph, edges, cfg, queries if seeds is None else (), ignored),
        timings_ms=clock.laps,
    )
    if save:
        from .save import save_run

        run.run_id = save_run(client.path, run)
    return run


def explain_index(query: str, db: str | os.PathLike[str] | None = None, **kwargs) -> EvidenceRun:
    """``explain`` on the index at ``db`` (resolved as everywhere: ``--db``, ``$RETRIEVAL_DB``, ``./retrieval.db``)."""
    with RetrievalClient(db=db) as client:
        run = explain(client, query, **kwargs)
    info = client.last_stats.info if client.last_stats else None  # the snapshot's index_info: no second read
    record_if_enabled(client.path, "explain", run.query, run.config, run, info)  # the query log; never raises
    return run


def _words_only(query: str) -> tuple[str, list[str]]:
    """The query's words, and what of the search syntax it wrote (``-word``, ``"phrase"``, ``author:``,
    ``year:``), which an evidence run does not apply: a left-out word is not searched for (as ``search`` leaves
    it out), a phrase's words are searched as words, a field is dropped; the warning names each."""
    asked = syntax_parse(query)
    ignored = [f"-{word}" for word in asked.exclude] + [f'-"{p}"' for p in asked.exclude_phrases]
    ignored += [f'"{p}"' for p in asked.phrases] + [f"author:{name}" for name in asked.authors]
    ignored += [f"year:{asked.year}"] if asked.year is not None else []
    if not ignored:
        return query, []
    return asked.text, [
        f"the evidence graph has no filters, so {quoted_list(ignored)} "
        f"{'filters' if len(ignored) == 1 else 'filter'} nothing here: a left-out word is only not searched for, a "
        "phrase's words are searched as words, author: and year: are dropped (`search` applies them)"
    ]


def teleport_mass(seed: Seed, kind: str) -> float:
    """A seed's unnormalised teleport mass: the sum of its blend scores over the sub-queries that picked it
    (``"blend"``), or the number of those sub-queries (``"uniform"``); 1 for a seed given by hand."""
    if not seed.hits:
        return 1.0
    if kind == "uniform":
        return float(len(seed.hits))
    return sum(hit.blend for hit in seed.hits)


def _weigh(
    graph: EvidenceGraph,
    support: dict[tuple[str, str], EdgeSupport],
    cfg: EvidenceConfig,
    reference_year: int | None,
    earliest_year: int | None,
) -> tuple[dict[tuple[str, str], EdgeRecord], set[str], dict[str, float]]:
    """Edge weights and pruned edges (Delta < tau) with reasons, the papers a kept edge touches, and every
    paper's age."""
    ages = {pid: age(graph.years.get(pid), reference_year, earliest_year) for pid in graph.nodes}
    edges: dict[tuple[str, str], EdgeRecord] = {}
    touched: set[str] = set()
    for (u, v), edge_support in support.items():
        age_weight = ages[v] ** -cfg.beta
        kept = not cfg.prune or edge_support.delta >= cfg.tau
        reason = None if kept else _pruned_because(edge_support, cfg)
        weight = edge_support.delta**cfg.support_power * age_weight if kept else 0.0
        edges[(u, v)] = EdgeRecord(u, v, edge_support, age_weight, weight, kept, reason)
        if kept:
            touched.update((u, v))
    return edges, touched, ages


def _nodes(
    graph: EvidenceGraph,
    papers: dict,
    support: dict[tuple[str, str], EdgeSupport],
    seeds: dict[str, Seed],
    touched: set[str],
    ages: dict[str, float],
) -> dict[str, NodeRecord]:
    """The graph's papers, a paper dropped (with the reason) when no kept edge touches it and it is no seed."""
    with_edges = {end for key in support for end in key}
    nodes: dict[str, NodeRecord] = {}
    for pid in graph.nodes:
        paper = papers[pid]
        seed = seeds.get(pid)
        kept = seed is not None or pid in touched
        reason = None
        if not kept:
            reason = "no edge left after pruning" if pid in with_edges else "no edge in the graph"
        nodes[pid] = NodeRecord(pid, paper.title, paper.year, ages[pid], seed, graph.links.get(pid, []), kept, reason)
    return nodes


def _pruned_because(edge_support: EdgeSupport, cfg: EvidenceConfig) -> str:
    if not edge_support.best:
        return "the citing paper has no claim (no abstract, no title)"
    if not edge_support.premises:
        return "the cited paper has no claim (no abstract, no title)"
    if cfg.coverage == "soft":
        mean = sum(edge_support.best) / len(edge_support.best)
        return (
            f"Delta {edge_support.delta:.3f} < tau {cfg.tau:g}: the citing paper's {len(edge_support.best)} claims "
            f"have mean best support {mean:.3f} against theta {cfg.theta:g} ({edge_support.covered} reach it; "
            f"best {max(edge_support.best):.3f})"
        )
    return (
        f"Delta {edge_support.delta:.3f} < tau {cfg.tau:g}: {edge_support.covered} of {len(edge_support.best)} "
        f"claims of the citing paper supported at theta {cfg.theta:g} (best support "
        f"{max(edge_support.best):.3f})"
    )


def _health(
    seeds: list[Seed],
    graph: EvidenceGraph,
    edges: dict[tuple[str, str], EdgeRecord],
    cfg: EvidenceConfig,
    queries: Sequence[Query] = (),
    said: Sequence[str] = (),
) -> Health:
    """The run's status (the first of ``STATUSES`` that applies) and every warning; ``queries``: the query and
    its sub-queries as analysed, when they chose the seeds; ``said``: warnings about the query, first."""
    found: set[str] = set()
    warnings: list[str] = list(said)
    if not seeds:
        found.add("no-seeds")
        stopped = list(dict.fromkeys(word for q in queries for word in q.stopped))
        if stopped and not any(q.tokens for q in queries):
            warnings.append(
                f"no seed: the query has only stop words ({quoted_list(stopped)}), which this index does not "
                "search: add words that say what the papers are about"
            )
        else:
            warnings.append("no seed: neither the query nor a sub-query matches a paper (or no given seed is a paper)")
    off_topic = [seed.paper_id for seed in seeds if seed.relevance < cfg.off_topic_ratio]
    if off_topic:
        listed = ", ".join(off_topic[:5]) + (", ..." if len(off_topic) > 5 else "")
        warnings.append(
            f"{len(off_topic)} of {len(seeds)} seeds are off-topic (BM25 below {cfg.off_topic_ratio:.0%} of the best "
            f"match of every sub-query): {listed}"
        )
        if 2 * len(off_topic) > len(seeds):
            found.add("off-topic")
    if seeds and not graph.edges:
        found.add("empty-graph")
        warnings.append("the seeds have no citation edge in the index: the evidence graph is the seeds alone")
    elif graph.edges and not any(edge.kept for edge in edges.values()):
        found.add("all-pruned")
        warnings.append(f"every edge was pruned (Delta < tau {cfg.tau:g}): only the seeds are ranked")
    if graph.trimmed:
        warnings.append(
            f"the graph had {graph.found_nodes:,} papers; the cap kept {len(graph.nodes):,} "
            f"({len(graph.trimmed):,} trimmed)"
        )
    status = next((s for s in STATUSES if s in found), "ok")
    return Health(status, tuple(warnings))


class _Clock:
    """Milliseconds spent in each stage, and in total."""

    def __init__(self) -> None:
        self.started = self.last = time.perf_counter()
        self.laps: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = (now - self.last) * 1000.0
        self.laps["total"] = (now - self.started) * 1000.0
        self.last = now
