"""The evidence pipeline (the Crase method) on real index files built from small generated corpora.

Each stage is checked against an independent computation: the graph against plain Python over the papers'
reference lists, the scorer calls against the announced bound, PageRank and SALSA against networkx, the seeds
against the documented blend; then pruning, the robustness ablations, the saved audit trail and the exports.
"""

from __future__ import annotations

import json
import math
import random
import sqlite3
from collections import Counter
from dataclasses import replace

import networkx as nx
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import MetaData, Table, create_engine

from retrieval import RetrievalClient
from retrieval.corpus.paper import Paper
from retrieval.errors import ConfigError, InputError
from retrieval.eval.evidence_modes import evidence_modes
from retrieval.eval.records import LexicalPass
from retrieval.evidence import (
    EvidenceConfig,
    collect_subqueries,
    explain,
    personalised_pagerank,
    personalised_salsa,
    read_plan,
    to_dot,
    write_dot,
    write_graphml,
)
from retrieval.evidence.config import age
from retrieval.evidence.graph import build_graph
from retrieval.evidence.support import TfidfCosineScorer, claims_of
from retrieval.interfaces.cli import main
from retrieval.search.query import Query
from retrieval.store.schema import models
from retrieval.store.sqlite.build import build_index
from tests.reference import analysed

# -- a small corpus of four topics ------------------------------------------------------------------------------

_TOPIC_WORDS = {
    "plasma": "quark gluon plasma viscosity hadron collision thermal jet quenching lattice",
    "cosmo": "inflation inflaton curvature perturbation spectrum horizon reheating slow roll microwave",
    "string": "brane compactification moduli calabi yau flux duality orientifold tadpole axion",
    "graphs": "vertex matching planar colouring chromatic clique bipartite spanning tree cut",
}
TOPICS = {topic: words.split() for topic, words in _TOPIC_WORDS.items()}
FILLER = ["we", "the", "of", "and", "study", "show", "that", "in", "this", "paper"]
QUERY = "quark gluon plasma viscosity"


def _sentence(rng: random.Random, words: list[str]) -> str:
    chosen = rng.sample(words, 5) + rng.sample(FILLER, 3)
    rng.shuffle(chosen)
    return " ".join(chosen).capitalize() + "."


def topic_corpus(seed: int = 7, per_topic: int = 12) -> list[Paper]:
    """Papers that cite earlier papers of their own topic (sometimes another topic's, sometimes a paper outside
    the corpus), three on-topic plasma papers with no edge at all, and a distractor: a paper whose text is all
    about the query but whose references are all graph theory."""
    rng = random.Random(seed)
    papers: list[Paper] = []
    by_topic: dict[str, list[str]] = {}
    for topic, words in TOPICS.items():
        ids = by_topic[topic] = []
        for i in range(per_topic):
            pid = f"{topic}-{i:02d}"
            earlier = ids[:]
            refs = rng.sample(earlier, min(len(earlier), rng.randint(2, 4)))
            if rng.random() < 0.15 and papers:
                refs.append(rng.choice(papers).id)  # a citation across topics
            if rng.random() < 0.2:
                refs.append(f"ghost-{pid}")  # a dangling reference
            abstract = " ".join(_sentence(rng, words) for _ in range(rng.randint(2, 4)))
            title = " ".join(rng.sample(words, 4)).title()
            papers.append(Paper(pid, title, abstract, 1990 + i, references=refs))
            ids.append(pid)
    for i in range(3):
        abstract = " ".join(_sentence(rng, TOPICS["plasma"]) for _ in range(3))
        papers.append(Paper(f"island-{i}", "Quark gluon plasma viscosity", abstract, 2001))
    distractor_text = " ".join(_sentence(rng, TOPICS["plasma"][:4] + ["viscosity"] * 2) for _ in range(3))
    papers.append(
        Paper(
            "distractor",
            "Quark gluon plasma viscosity quark gluon",
            distractor_text,
            2002,
            references=by_topic["graphs"][-4:],
        )
    )
    return papers


@pytest.fixture(scope="module")
def corpus() -> list[Paper]:
    return topic_corpus()


@pytest.fixture(scope="module")
def topic_db(tmp_path_factory, corpus):
    path = tmp_path_factory.mktemp("evidence") / "topics.db"
    build_index(corpus, path)
    return path


@pytest.fixture()
def client(topic_db):
    with RetrievalClient(db=topic_db) as c:
        yield c


# -- plain-Python references -------------------------------------------------------------------------------------


def citation_pairs(papers: list[Paper]) -> set[tuple[str, str]]:
    """(citing, cited) between papers of the corpus, from reference lists and from citing-paper lists alike."""
    ids = {p.id for p in papers}
    pairs = {(p.id, r) for p in papers for r in p.references} | {(c, p.id) for p in papers for c in p.citations}
    return {(u, v) for u, v in pairs if u != v and u in ids and v in ids}


def plain_graph(papers: list[Paper], seeds: list[str]) -> tuple[set[str], set[tuple[str, str]]]:
    """V = seeds + their in-corpus references + their citing papers; E = every citation among V."""
    pairs = citation_pairs(papers)
    seed_set = set(seeds) & {p.id for p in papers}
    nodes = seed_set | {v for u, v in pairs if u in seed_set} | {u for u, v in pairs if v in seed_set}
    return nodes, {(u, v) for u, v in pairs if u in nodes and v in nodes}


def nx_graph(nodes, edges) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(nodes)
    g.add_weighted_edges_from(edges)
    return g


def nx_salsa_chain(nodes, edges) -> nx.DiGraph:
    """SALSA's authority chain built with networkx: a -> (back along an in-edge) h -> (forward) a'."""
    g = nx_graph(nodes, edges)
    chain = nx.DiGraph()
    chain.add_nodes_from(nodes)
    for a in g:
        w_in = sum(d["weight"] for _, _, d in g.in_edges(a, data=True))
        if w_in <= 0:
            continue
        for h in g.predecessors(a):
            w_out = sum(d["weight"] for _, _, d in g.out_edges(h, data=True))
            back = g[h][a]["weight"] / w_in
            if back <= 0:  # a walker never goes back along an edge of weight 0
                continue
            for target in g.successors(h):
                step = back * g[h][target]["weight"] / w_out
                if step > 0:
                    old = chain.get_edge_data(a, target, {"weight": 0.0})["weight"]
                    chain.add_edge(a, target, weight=old + step)
    return chain


def random_weighted_graph(rng: random.Random, n: int) -> tuple[list[str], list[tuple[str, str, float]]]:
    nodes = [f"n{i:02d}" for i in range(n)]
    edges = []
    for u in nodes:
        for v in rng.sample(nodes, rng.randint(0, 4)):
            if u != v:
                # Some zero weights: an edge the support scorer gave nothing to.
                edges.append((u, v, 0.0 if rng.random() < 0.15 else rng.uniform(0.05, 1.0)))
    return nodes, edges


# -- stage 1: sub-queries and seeds --------------------------------------------------------------------------


def test_plan_files_json_text_and_planner(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(["cosmic inflation", "reheating"]))
    (tmp_path / "b.json").write_text(json.dumps({"subqueries": ["brane moduli"], "note": "from a planner"}))
    (tmp_path / "c.txt").write_text("# sub-queries\nlattice jets\n\n  thermal hadrons  \n")
    assert read_plan(tmp_path / "a.json") == ["cosmic inflation", "reheating"]
    assert read_plan(tmp_path / "b.json") == ["brane moduli"]
    assert read_plan(tmp_path / "c.txt") == ["lattice jets", "thermal hadrons"]
    subs = collect_subqueries(
        "quark plasma", ["Quark  PLASMA", "jets"], tmp_path / "c.txt", planner=lambda q: [f"{q} viscosity", "jets"]
    )
    assert subs == ["quark plasma", "jets", "lattice jets", "thermal hadrons", "quark plasma viscosity"]
    (tmp_path / "bad.json").write_text('{"subqueries": [1, 2]}')
    with pytest.raises(InputError, match="JSON list of strings"):
        read_plan(tmp_path / "bad.json")
    with pytest.raises(InputError, match="no plan file"):
        read_plan(tmp_path / "missing.txt")
    # A byte order mark made a JSON plan one sub-query of JSON text; deep nesting and a number of 5,000 digits
    # were Python tracebacks.
    (tmp_path / "marked.json").write_bytes(b"\xef\xbb\xbf" + json.dumps(["zeta quoted", "zeta tab"]).encode())
    assert read_plan(tmp_path / "marked.json") == ["zeta quoted", "zeta tab"]
    for text, said in (("[" * 100_000 + "]" * 100_000, "nested too deeply"), ("[" + "9" * 5000 + "]", "digits")):
        (tmp_path / "odd.json").write_text(text)
        with pytest.raises(InputError, match=f"odd.json: cannot read it as JSON .*{said}"):
            read_plan(tmp_path / "odd.json")


def test_seeds_follow_the_documented_blend(client):
    cfg = EvidenceConfig(seeds_per_subquery=5, seed_pool=12, seed_recency_weight=0.2, beta=0.5)
    run = explain(client, QUERY, config=cfg)
    hits = client.lexical.search(QUERY, 12)
    years = {p.id: p.year for p in client.papers([pid for pid, _ in hits], full=False).values()}
    ref = client.stats.max_year
    blend = {pid: 0.8 * score / hits[0][1] + 0.2 * max(1, ref - years[pid] + 1) ** -0.5 for pid, score in hits}
    position = {pid: i for i, (pid, _) in enumerate(hits)}
    expected = sorted(blend, key=lambda pid: (-blend[pid], position[pid]))[:5]
    assert [s.paper_id for s in run.seeds] == expected
    assert [s.hits[0].rank for s in run.seeds] == [1, 2, 3, 4, 5]
    assert all(s.hits[0].blend == pytest.approx(blend[s.paper_id], rel=1e-12) for s in run.seeds)


def test_seed_set_is_the_union_with_the_subqueries_that_brought_each(client):
    cfg = EvidenceConfig(seeds_per_subquery=4)
    run = explain(client, QUERY, subqueries=["inflation inflaton reheating"], config=cfg)
    assert run.subqueries == [QUERY, "inflation inflaton reheating"]
    from_query = {s.paper_id for s in explain(client, QUERY, config=cfg).seeds}
    from_sub = {s.paper_id for s in explain(client, "inflation inflaton reheating", config=cfg).seeds}
    assert {s.paper_id for s in run.seeds} == from_query | from_sub
    for seed in run.seeds:
        expected = {index for index, picked in enumerate((from_query, from_sub)) if seed.paper_id in picked}
        assert set(seed.subqueries) == expected


# -- stage 2: the evidence graph -----------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_graph_matches_plain_python(tmp_path, seed):
    rng = random.Random(seed)
    ids = [f"p{i:02d}" for i in range(rng.randint(15, 40))]
    papers = [
        Paper(
            pid,
            f"paper {pid}",
            "",
            2000 + i % 5,
            references=rng.sample(ids + ["ghost-a", "ghost-b"], rng.randint(0, 5)),
            # A source such as Semantic Scholar may list citing papers, some of them outside the corpus.
            citations=rng.sample(ids + ["ghost-citer"], rng.randint(0, 2)),
        )
        for i, pid in enumerate(ids)
    ]
    build_index(papers, tmp_path / "g.db")
    with RetrievalClient(db=tmp_path / "g.db") as c:
        for _ in range(8):
            seeds = rng.sample(ids, rng.randint(1, 4)) + ["not-a-paper"]
            with c.snapshot() as snap:
                graph = build_graph(snap, seeds, EvidenceConfig(max_nodes=None))
            nodes, edges = plain_graph(papers, seeds)
            assert set(graph.nodes) == nodes and graph.nodes == sorted(nodes)
            assert set(graph.edges) == edges and len(graph.edges) == len(edges)
            assert (graph.found_nodes, graph.found_edges) == (len(nodes), len(edges))
            pairs = citation_pairs(papers)
            for pid, links in graph.links.items():
                expected = {(s, "reference") for s in graph.seeds if (s, pid) in pairs}
                expected |= {(s, "citing") for s in graph.seeds if (pid, s) in pairs}
                assert set(links) == expected


def test_size_is_reported_and_the_cap_trims_or_refuses(client, corpus):
    run = explain(client, QUERY, config=EvidenceConfig(max_nodes=None))
    nodes, edges = plain_graph(corpus, [s.paper_id for s in run.seeds])
    assert (run.size.nodes, run.size.edges) == (len(nodes), len(edges))
    cap = len(run.seeds) + 3
    trimmed = explain(client, QUERY, config=EvidenceConfig(max_nodes=cap))
    assert trimmed.size.nodes == cap and trimmed.size.trimmed == len(nodes) - cap
    assert (trimmed.size.found_nodes, trimmed.size.found_edges) == (len(nodes), len(edges))
    assert {s.paper_id for s in run.seeds} <= set(trimmed.nodes)
    # The papers kept beyond the seeds are those linked to the most seeds.
    links = {pid: len({s for s, _ in node.links}) for pid, node in run.nodes.items() if node.seed is None}
    kept = [pid for pid in trimmed.nodes if trimmed.nodes[pid].seed is None]
    assert min(links[pid] for pid in kept) >= max(links[pid] for pid in links if pid not in trimmed.nodes)
    assert any("trimmed" in w for w in trimmed.health.warnings)
    with pytest.raises(ConfigError, match="above the cap"):
        explain(client, QUERY, config=EvidenceConfig(max_nodes=cap, cap_policy="refuse"))
    with pytest.raises(ConfigError, match="seeds alone"):
        explain(client, QUERY, config=EvidenceConfig(max_nodes=len(run.seeds) - 1))


# -- stage 3: support, scorer calls, pruning ------------------------------------------------------------------


class RecordingScorer:
    """A scorer that keeps its own count of the claim pairs it scored (word overlap, for something to return)."""

    name = "recording"

    def __init__(self) -> None:
        self.pairs = 0
        self.prepared = 0

    def prepare(self, claims):
        self.prepared += len(claims)

    def support(self, hypotheses, premises):
        self.pairs += len(hypotheses) * len(premises)
        return [[len(set(h.split()) & set(p.split())) / len(set(h.split())) for p in premises] for h in hypotheses]


def test_scorer_calls_equal_the_announced_bound(client, corpus):
    by_id = {p.id: p for p in corpus}
    scorer = RecordingScorer()
    run = explain(client, QUERY, subqueries=["brane flux compactification"], scorer=scorer)
    claims = {pid: claims_of(by_id[pid].title, by_id[pid].abstract, 3) for pid in run.nodes}
    bound = sum(len(claims[u]) * len(claims[v]) for u, v in run.edges)
    assert bound > 0
    assert run.size.scorer_bound == bound == scorer.pairs == run.scorer_calls
    assert run.scorer == "recording"
    default = explain(client, QUERY, subqueries=["brane flux compactification"])
    assert default.scorer == "tfidf-cosine" and default.scorer_calls == default.size.scorer_bound == bound


def test_a_scorer_that_breaks_its_contract_is_refused(client):
    class Wrong(RecordingScorer):
        def support(self, hypotheses, premises):
            return [[2.0] * len(premises) for _ in hypotheses]

    with pytest.raises(InputError, match="outside"):
        explain(client, QUERY, scorer=Wrong())


def test_tfidf_scorer_is_the_cosine_of_index_idf_vectors(client):
    n = client.stats.n_papers
    with sqlite3.connect(client.path) as conn:
        df = dict(conn.execute("SELECT term, df FROM doc_freq"))

    def unit_vector(text):
        v = {
            t: (1 + math.log(c)) * math.log(1 + (n - df.get(t, 0) + 0.5) / (df.get(t, 0) + 0.5))
            for t, c in Counter(analysed(text)).items()
        }
        norm = math.sqrt(sum(x * x for x in v.values()))
        return {t: x / norm for t, x in v.items()}

    claims = ["Quark gluon plasma.", "The plasma of quark matter.", "Brane flux."]
    with client.snapshot() as snap:
        scorer = TfidfCosineScorer(snap)
        scorer.prepare(claims)
    a, b = unit_vector(claims[0]), unit_vector(claims[1])
    m = scorer.support(claims[:1], claims[1:])
    assert m[0][0] == pytest.approx(sum(a[t] * b.get(t, 0) for t in a), rel=1e-12)
    assert m[0][1] == 0.0
    assert scorer.support(claims[:1], claims[:1])[0][0] == pytest.approx(1.0)


@pytest.fixture(scope="module")
def stemmed_db(tmp_path_factory, corpus):
    path = tmp_path_factory.mktemp("evidence") / "stemmed.db"
    build_index(corpus, path, stem="english", stopwords="english")
    return path


def test_tfidf_scorer_uses_the_terms_of_a_stemmed_index(stemmed_db):
    """On an index built with a stemmer and stop words the claims are analysed as the index analyses text: each
    term is one ``doc_freq`` holds (a word as written, "plasmas", or a stop word, "the", would be read as in no
    paper and weigh the most)."""
    with sqlite3.connect(stemmed_db) as conn:
        df = dict(conn.execute("SELECT term, df FROM doc_freq"))
    claims = ["Quark gluon plasmas.", "The plasma of quark gluons.", "Brane fluxes."]
    with RetrievalClient(db=stemmed_db) as client:
        n = client.stats.n_papers

        def unit_vector(text):
            terms = analysed(text, "english", "english")
            assert all(t in df for t in terms), text
            v = {
                t: (1 + math.log(c)) * math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                for t, c in Counter(terms).items()
            }
            norm = math.sqrt(sum(x * x for x in v.values()))
            return {t: x / norm for t, x in v.items()}

        with client.snapshot() as snap:
            scorer = TfidfCosineScorer(snap)
            scorer.prepare(claims)
        a, b = unit_vector(claims[0]), unit_vector(claims[1])
        m = scorer.support(claims[:1], claims[1:])
        assert m[0][0] == pytest.approx(sum(a[t] * b.get(t, 0) for t in a), rel=1e-12) and m[0][0] > 0.5
        assert m[0][1] == 0.0
        # the whole run: edges across topics are still the ones the coverage rule prunes
        run = explain(client, QUERY, subqueries=["graph vertex colouring"], config=EvidenceConfig.crase())
        assert run.pruned_edges and all(e.kept == (e.delta >= run.config.tau) for e in run.edges.values())


def test_pruning_removes_unsupported_edges_and_stranded_papers(client):
    # The hard coverage rule (the earlier default, now EvidenceConfig.crase()); the soft rule has its own tests.
    run = explain(client, QUERY, subqueries=["graph vertex colouring"], config=EvidenceConfig.crase())
    cfg = run.config
    assert run.pruned_edges, "the corpus has unsupported edges (across topics)"
    for edge in run.edges.values():
        assert edge.kept == (edge.delta >= cfg.tau)
        covered = sum(1 for b in edge.support.best if b >= cfg.theta)
        assert edge.delta == (covered / len(edge.support.best) if edge.support.best and edge.claims_cited else 0.0)
        if not edge.kept:
            assert edge.weight == 0.0 and edge.reason.startswith(f"Delta {edge.delta:.3f} < tau")
    touched = {end for e in run.kept_edges for end in (e.citing, e.cited)}
    for pid, node in run.nodes.items():
        assert node.kept == (node.seed is not None or pid in touched)
        if not node.kept:
            assert node.reason == "no edge left after pruning" and node.score == 0.0 and node.rank is None
    unpruned = explain(client, QUERY, subqueries=["graph vertex colouring"], config=replace(cfg, prune=False))
    assert not unpruned.pruned_edges and all(n.kept for n in unpruned.nodes.values())
    assert {k: e.delta for k, e in unpruned.edges.items()} == {k: e.delta for k, e in run.edges.items()}
    strict = explain(client, QUERY, config=EvidenceConfig.crase(theta=1.0, tau=1.0))
    assert strict.health.status == "all-pruned" and not strict.kept_edges
    assert {pid for pid, _ in strict.ranking} == {s.paper_id for s in strict.seeds}


# -- stage 4: weights, PageRank and SALSA against networkx ------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_personalised_pagerank_matches_networkx(seed):
    rng = random.Random(seed)
    nodes, edges = random_weighted_graph(rng, rng.randint(5, 40))
    teleport = {pid: rng.uniform(0.5, 2.0) for pid in rng.sample(nodes, rng.randint(1, 4))}
    ours = personalised_pagerank(nodes, edges, teleport, alpha=0.15, tolerance=1e-12)
    theirs = nx.pagerank(
        nx_graph(nodes, edges), alpha=0.85, personalization=teleport, weight="weight", tol=1e-13, max_iter=10_000
    )
    assert sum(ours.scores.values()) == pytest.approx(1.0, abs=1e-9)
    for pid in nodes:
        assert ours.scores[pid] == pytest.approx(theirs[pid], abs=1e-6)


@pytest.mark.parametrize("seed", range(5))
def test_personalised_salsa_matches_networkx_on_the_authority_chain(seed):
    rng = random.Random(100 + seed)
    nodes, edges = random_weighted_graph(rng, rng.randint(5, 40))
    teleport = {pid: rng.uniform(0.5, 2.0) for pid in rng.sample(nodes, rng.randint(1, 4))}
    ours = personalised_salsa(nodes, edges, teleport, alpha=0.15, tolerance=1e-12)
    chain = nx_salsa_chain(nodes, edges)
    theirs = nx.pagerank(chain, alpha=0.85, personalization=teleport, weight="weight", tol=1e-13, max_iter=10_000)
    for pid in nodes:
        assert ours.scores[pid] == pytest.approx(theirs[pid], abs=1e-6)


@pytest.mark.parametrize("ranker", ["ppr", "salsa"])
def test_a_run_ranks_its_kept_graph_as_networkx_does(client, ranker):
    run = explain(client, QUERY, subqueries=["brane flux"], config=EvidenceConfig(ranker=ranker, top_k=5))
    kept = [pid for pid, n in run.nodes.items() if n.kept]
    weighted = [(e.citing, e.cited, e.weight) for e in run.kept_edges]
    teleport = {s.paper_id: sum(h.blend for h in s.hits) for s in run.seeds}
    graph = nx_graph(kept, weighted) if ranker == "ppr" else nx_salsa_chain(kept, weighted)
    theirs = nx.pagerank(graph, alpha=0.85, personalization=teleport, weight="weight", tol=1e-13, max_iter=10_000)
    for pid in kept:
        assert run.nodes[pid].score == pytest.approx(theirs[pid], abs=1e-6)
    assert run.top == run.ranking[:5]
    assert run.ranking == sorted(run.ranking, key=lambda item: (-item[1], item[0]))


def test_weights_are_delta_times_age_discount(client):
    for recency, year in (("corpus", None), ("query-year", 1998)):
        run = explain(client, QUERY, config=EvidenceConfig.crase(recency=recency, query_year=year, beta=0.5))
        ref = client.stats.max_year if year is None else year
        assert run.reference_year == ref
        for (_, v), edge in run.edges.items():
            node_age = age(run.nodes[v].year, ref, client.stats.min_year)
            assert run.nodes[v].age == node_age == max(1, ref - run.nodes[v].year + 1)
            assert edge.age_weight == pytest.approx(node_age**-0.5)
            assert edge.weight == pytest.approx(edge.delta * edge.age_weight if edge.kept else 0.0)


# -- robustness: the paper's own ablation ------------------------------------------------------------------------


def test_random_seeds_are_reported_as_off_topic(client, corpus):
    rng = random.Random(5)
    others = [p.id for p in corpus if not p.id.startswith(("plasma", "island", "distractor"))]
    seeds = rng.sample(others, 5)
    run = explain(client, QUERY, seeds=seeds)
    assert run.health.status == "off-topic"
    assert all(s.relevance < run.config.off_topic_ratio and s.explicit for s in run.seeds)
    assert "5 of 5 seeds are off-topic" in run.health.warnings[0]
    lexical = explain(client, QUERY)
    assert lexical.health.status == "ok" and all(s.relevance >= 0.1 for s in lexical.seeds)


def test_seeds_without_edges_give_an_empty_graph_reported_as_such(client):
    run = explain(client, QUERY, seeds=["island-0", "island-1", "nobody"])
    assert [s.paper_id for s in run.seeds] == ["island-0", "island-1"]
    assert run.health.status == "empty-graph" and run.size.edges == 0
    assert [pid for pid, _ in run.ranking] == ["island-0", "island-1"]
    assert explain(client, QUERY, seeds=["nobody"]).health.status == "no-seeds"
    assert explain(client, "zzz unknown words").health.status == "no-seeds"


def test_the_search_syntax_is_not_applied_silently(client):
    """``explain`` searched "-viscosity" as the word viscosity (the opposite of what it asks) and dropped
    ``author:`` and phrases without a word: a left-out word is now not searched for, and a warning names what
    filters nothing here."""
    words = explain(client, "quark gluon plasma")
    asked = explain(client, 'quark gluon plasma -viscosity "gluon plasma" author:Nobody year:1999')
    assert asked.query == "quark gluon plasma gluon plasma"  # the words searched, not the filters
    assert {s.paper_id for s in asked.seeds} == {s.paper_id for s in explain(client, asked.query).seeds}
    said = asked.health.warnings[0]
    assert said.startswith("the evidence graph has no filters, so '-viscosity', '\"gluon plasma\"', ")
    assert "'author:Nobody', 'year:1999' filter nothing here" in said
    assert not any("no filters" in w for w in words.health.warnings)


def test_a_lexically_similar_distractor_has_its_unsupported_edges_pruned(client):
    # Under the Crase walk's hard rule; under the default soft rule see test_soft_delta_ranks_the_distractor_low.
    run = explain(client, QUERY, config=EvidenceConfig.crase())
    assert "distractor" in {s.paper_id for s in run.seeds}, "the distractor is a strong lexical match"
    distractor_edges = [e for e in run.edges.values() if "distractor" in (e.citing, e.cited)]
    assert distractor_edges and all(not e.kept for e in distractor_edges)
    assert all("< tau" in e.reason for e in distractor_edges)
    ranked = {pid for pid, _ in run.ranking}
    assert not any(pid.startswith("graphs") for pid in ranked), "no graph-theory paper gains mass through it"
    explanation = run.explain("distractor")
    assert explanation.node.kept and explanation.node.seed is not None and not explanation.out_edges


# -- audit trail: save, exports, CLI, eval modes ---------------------------------------------------------------


@pytest.fixture()
def writable_db(tmp_path, corpus):
    path = tmp_path / "saved.db"
    build_index(corpus, path)
    return path


def test_save_stores_the_run_queryable_with_sqlite3(writable_db):
    with RetrievalClient(db=writable_db) as c:
        run = explain(c, QUERY, subqueries=["graph vertex colouring"], save=True)
        second = explain(c, QUERY, config=EvidenceConfig(ranker="salsa"), save=True)
    assert run.config.ranker == "vote"  # the default ranker
    assert (run.run_id, second.run_id) == (1, 2)
    conn = sqlite3.connect(writable_db)
    try:
        row = conn.execute(
            "SELECT query, subqueries, ranker, nodes, edges, kept_edges, scorer_calls, scorer_bound, status "
            "FROM evidence_runs WHERE id = ?",
            (run.run_id,),
        ).fetchone()
        assert row == (
            QUERY,
            json.dumps(run.subqueries),
            "vote",
            run.size.nodes,
            run.size.edges,
            len(run.kept_edges),
            run.scorer_calls,
            run.size.scorer_bound,
            "ok",
        )
        nodes = conn.execute(
            "SELECT paper_id, role, kept, reason, score, rank FROM evidence_run_nodes WHERE run_id = ?", (run.run_id,)
        ).fetchall()
        assert {n[0]: (n[1], bool(n[2]), n[3], n[5]) for n in nodes} == {
            pid: (node.role, node.kept, node.reason, node.rank) for pid, node in run.nodes.items()
        }
        pruned = conn.execute(
            "SELECT citing_id, cited_id, delta, reason FROM evidence_run_edges WHERE run_id = ? AND NOT kept",
            (run.run_id,),
        ).fetchall()
        assert {(a, b) for a, b, _, _ in pruned} == {(e.citing, e.cited) for e in run.pruned_edges}
        # "Why was the top paper kept?": the kept edges into it, strongest first.
        top = run.top[0][0]
        why = conn.execute(
            "SELECT e.citing_id, e.delta, e.weight, n.role "
            "FROM evidence_run_edges AS e "
            "JOIN evidence_run_nodes AS n ON n.run_id = e.run_id AND n.paper_id = e.citing_id "
            "WHERE e.run_id = ? AND e.cited_id = ? AND e.kept "
            "ORDER BY e.weight DESC, e.citing_id",
            (run.run_id, top),
        ).fetchall()
        assert [w[0] for w in why] == [
            e.citing for e in sorted(run.explain(top).in_edges, key=lambda e: (-e.weight, e.citing))
        ]
        assert (
            conn.execute("SELECT count(*) FROM evidence_run_nodes WHERE run_id = 2").fetchone()[0] == second.size.nodes
        )
    finally:
        conn.close()


def test_audit_migration_matches_the_models(writable_db):
    ours = MetaData()
    for table in (models.EvidenceRunRow, models.EvidenceRunNodeRow, models.EvidenceRunEdgeRow):
        table.__table__.to_metadata(ours)
    engine = create_engine(f"sqlite:///{writable_db}")
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), ours)
    engine.dispose()
    # The other revisions' tables and indexes are not in ``ours`` and show up as removals; ours must not differ.
    assert diff, "the comparison sees the file's other tables"
    assert [d for d in diff if _table_of(d) in ours.tables] == []


def _table_of(diff) -> str:
    """The table an Alembic autogenerate difference is about."""
    entry = diff[0] if isinstance(diff, list) else diff  # modify_* differences come as lists
    obj = entry[1]
    if isinstance(obj, Table):
        return obj.name
    if hasattr(obj, "table"):  # an index or a constraint
        return obj.table.name
    return entry[2]  # (operation, schema, table name, ...)


def test_graphml_round_trips_through_networkx(client, tmp_path):
    run = explain(client, QUERY, subqueries=["graph vertex colouring"])
    graph = nx.read_graphml(write_graphml(run, tmp_path / "run.graphml"))
    assert isinstance(graph, nx.DiGraph)
    assert set(graph.nodes) == set(run.nodes) and set(graph.edges) == set(run.edges)
    assert graph.graph["query"] == QUERY and graph.graph["status"] == run.health.status
    for (u, v), edge in run.edges.items():
        data = graph.edges[u, v]
        assert (data["delta"], data["weight"], data["kept"]) == (edge.delta, edge.weight, edge.kept)
        assert data.get("reason") == edge.reason
    for pid, node in run.nodes.items():
        data = graph.nodes[pid]
        assert (data["seed"], data["kept"], data["score"], data.get("rank")) == (
            node.seed is not None,
            node.kept,
            node.score,
            node.rank,
        )


def test_a_graph_file_past_the_room_the_disk_allows_leaves_the_previous_one(client, tmp_path):
    """``explain --graphml``/``--dot`` wrote in place: a write that ran out of room (a full disk; here the process's
    file size limit, which fails the same way) left a truncated, unreadable file where the previous one was."""
    import resource
    import signal

    run = explain(client, QUERY, subqueries=["graph vertex colouring"])
    for write in (write_graphml, write_dot):
        path = tmp_path / f"run.{write.__name__}"
        path.write_text("the previous run\n")
        limit = resource.getrlimit(resource.RLIMIT_FSIZE)
        ignored = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails (EFBIG) instead of the process
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, limit[1]))
        try:
            with pytest.raises(OSError) as failed:
                write(run, path)
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, limit)
            signal.signal(signal.SIGXFSZ, ignored)
        assert failed.value.filename == str(path)
        assert path.read_text() == "the previous run\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.write_dot", "run.write_graphml"]
    assert len(write_graphml(run, tmp_path / "run.write_graphml").read_text()) > 1024  # the limit was reachable


def test_graphml_of_a_query_with_control_characters_is_still_xml(client, tmp_path):
    run = explain(client, QUERY + " \x07\x1b[0m")  # a pasted terminal bell and colour code
    graph = nx.read_graphml(write_graphml(run, tmp_path / "run.graphml"))  # refused the whole file before
    assert graph.graph["query"] == QUERY + " \ufffd\ufffd[0m"
    assert set(graph.nodes) == set(run.nodes)


def test_dot_export_lists_every_paper_and_edge(client):
    run = explain(client, QUERY)
    dot = to_dot(run)
    assert dot.startswith("digraph evidence {") and dot.rstrip().endswith("}")
    assert sum(1 for line in dot.splitlines() if " -> " in line) == len(run.edges)
    assert sum(1 for line in dot.splitlines() if "peripheries=2" in line) == len(run.seeds)


def _cli(argv):
    return main(argv)


@pytest.mark.parametrize("beta", ["-1", "11", "nan"])
def test_a_beta_out_of_its_range_is_a_usage_error_on_both_sides(writable_db, capsys, beta):
    with pytest.raises(SystemExit) as exit_:
        _cli(["explain", QUERY, "--db", str(writable_db), "--beta", beta])
    assert exit_.value.code == 2
    assert "--beta: expected a number from 0 to 10" in capsys.readouterr().err
    assert _cli(["explain", QUERY, "--db", str(writable_db), "--beta", "10", "--top-k", "1"]) == 0


def test_a_saved_run_is_in_the_index_file_itself_not_only_in_its_write_ahead_log(writable_db, tmp_path):
    # The search's read-only connection is open while the run is saved, so closing the writer's connection does not
    # move the run into the file, and the reader cannot at its own close: a copy of the file alone lost it.
    with RetrievalClient(db=writable_db) as c:
        run = explain(c, QUERY, save=True)
    copy = tmp_path / "copied.db"
    copy.write_bytes(writable_db.read_bytes())  # the file alone, as a user copies an index
    conn = sqlite3.connect(copy)
    try:
        assert conn.execute("SELECT count(*) FROM evidence_runs WHERE id = ?", (run.run_id,)).fetchone() == (1,)
        saved = conn.execute("SELECT count(*) FROM evidence_run_nodes WHERE run_id = ?", (run.run_id,)).fetchone()
        assert saved == (len(run.nodes),)
    finally:
        conn.close()


def test_cli_prints_json_and_text_and_saves(writable_db, tmp_path, capsys):
    plan = tmp_path / "plan.txt"
    plan.write_text("graph vertex colouring\n")
    assert _cli(["explain", QUERY, "--db", str(writable_db), "--plan", str(plan), "--top-k", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["subqueries"] == [QUERY, "graph vertex colouring"] and len(out["results"]) == 3
    assert out["scorer"]["calls"] == out["scorer"]["bound"]
    argv = ["explain", QUERY, "--db", str(writable_db), "--ranker", "salsa", "--no-prune", "--save"]
    assert _cli(argv + ["--dot", str(tmp_path / "g.dot"), "--query-year", "1999"]) == 0
    text = capsys.readouterr().out
    assert "|V| =" in text and "saved as run 1" in text and "reference year 1999 (query-year)" in text
    assert (tmp_path / "g.dot").read_text().startswith("digraph")
    assert _cli(["explain", QUERY, "--db", str(writable_db), "--recency", "corpus", "--query-year", "1999"]) == 1
    assert "--query-year applies to --recency query-year" in capsys.readouterr().err


def test_eval_modes_answer_with_backfill_and_distances(client):
    modes = evidence_modes()
    assert len(modes) == 16
    assert {"evidence-ppr", "evidence-salsa", "evidence-ppr-noprune-qyear", "evidence-salsa-qyear"} <= set(modes)
    assert {"evidence-ppr-hard", "evidence-vote", "evidence-vote-noprune", "evidence-vote-nosplit"} <= set(modes)
    assert modes["evidence-vote"].settings == EvidenceConfig() and modes["evidence-vote"].ranker == "vote"
    bm25 = client.lexical.search(QUERY, 100)
    query = LexicalPass(Query.parse(QUERY), bm25, len(bm25))
    run = explain(client, QUERY, config=EvidenceConfig.crase(theta=0.2, top_k=60), lexical=bm25)
    mode = replace(modes["evidence-ppr"], settings=EvidenceConfig.crase(theta=0.2))
    out = mode.run(client, query, None, 60)
    walked = [pid for pid, _ in run.ranking]
    unranked = [pid for pid in run.nodes if pid not in walked]
    assert unranked, "some papers of the graph get no mass (reached only through pruned edges)"
    links = {pid: len({seed for seed, _ in node.links}) for pid, node in run.nodes.items()}
    place = {pid: i for i, (pid, _) in enumerate(bm25)}
    unranked.sort(key=lambda pid: (-links[pid], place.get(pid, len(place)), pid))
    lexical_rest = [pid for pid, _ in bm25 if pid not in set(walked) | set(unranked)]
    assert out.ranking == (walked + unranked + lexical_rest)[:60]
    assert out.candidates == run.size.nodes
    assert {pid for pid, d in out.distances.items() if d == 0} == {s.paper_id for s in run.seeds}
    assert set(out.distances) == set(run.nodes)
    assert mode.cost_summary()["scorer_calls_mean"] == run.scorer_calls
    only_bm25 = replace(mode, backfill="bm25", costs=[]).run(client, query, None, 60)
    assert only_bm25.ranking == (walked + [pid for pid, _ in bm25 if pid not in walked])[:60]
    assert replace(mode, backfill="none", costs=[]).run(client, query, None, 60).ranking == walked[:60]
    fallback = modes["evidence-ppr-qyear"]
    fallback.run(client, query, None, 30)
    assert fallback.cost_summary()["query_year_fallbacks"] == 1


def test_settings_are_checked():
    with pytest.raises(ConfigError, match="ranker"):
        EvidenceConfig(ranker="hits")
    with pytest.raises(ConfigError, match="alpha"):
        EvidenceConfig(alpha=1.0)
    with pytest.raises(ConfigError, match="tau"):
        EvidenceConfig(tau=1.5)
    with pytest.raises(ConfigError, match="seeds_per_subquery"):
        EvidenceConfig(seeds_per_subquery=0)
    # the query's year as `--query-year` takes it (the years a record may have); the library took 0 to 9999
    for bad in (999, 2101, 0, 9999):
        with pytest.raises(ConfigError, match="query_year"):
            EvidenceConfig(query_year=bad)
    assert EvidenceConfig(query_year=1000).query_year == 1000 and EvidenceConfig(query_year=2100).query_year == 2100
    assert age(None, 2003, 1990) == 14 and age(2005, 2003, 1990) == 1 and age(2003, None, None) == 1


def test_every_evidence_mode_keeps_its_whole_record_when_runs_share_a_memo(client):
    # Runs of one query share the papers' claims, Delta and the weighed edges through the memo: each run's whole
    # record (results, pruned edges with their reasons, dropped papers) is what it is alone, and a later run
    # sharing the memo leaves an earlier run's record as it was.
    from retrieval.search.memo import QueryMemo

    bm25 = client.lexical.search(QUERY, 100)
    memo = QueryMemo()
    configs = [mode.config_for(LexicalPass(Query.parse(QUERY), bm25, len(bm25), 2004), 60)[0]
               for mode in evidence_modes().values()]  # fmt: skip
    # and smaller graphs, whose edges the larger ones hold (seeded by fewer papers)
    configs += [EvidenceConfig(seeds_per_subquery=m, split="none", ranker=r) for m, r in ((1, "vote"), (2, "ppr"))]
    shared = [explain(client, QUERY, config=cfg, lexical=bm25, memo=memo) for cfg in configs]
    first = [run.to_dict() for run in shared]
    for cfg, run, record in zip(configs, shared, first, strict=True):
        fresh = explain(client, QUERY, config=cfg, lexical=bm25).to_dict()
        for got in (record, run.to_dict()):  # as first returned, and after every later run
            assert {k: v for k, v in got.items() if k != "timings_ms"} == {
                k: v for k, v in fresh.items() if k != "timings_ms"
            }
    assert any(run.pruned_edges for run in shared) and any(not run.pruned_edges for run in shared)
    # graphs of several shapes, and every edge of any of them scored once
    assert len({tuple(run.edges) for run in shared}) > 1
    claims = {cfg.max_claims for cfg in configs}
    assert sum(memo.held(("best supports", m)) for m in claims) == len({(e, m) for run, m in
                                                                        ((r, r.config.max_claims) for r in shared)
                                                                        for e in run.edges})  # fmt: skip
    assert memo.take_charge() > 0


def test_evidence_modes_sharing_a_memo_answer_as_they_do_alone(client):
    # The eight evidence modes of one query share its edge support through a memo: each answers exactly as it
    # does alone, and a mode that reuses support is charged the seconds the first one spent on it.
    from retrieval.search.memo import QueryMemo

    bm25 = client.lexical.search(QUERY, 100)
    alone = LexicalPass(Query.parse(QUERY), bm25, len(bm25))
    shared = LexicalPass(Query.parse(QUERY), bm25, len(bm25), memo=QueryMemo())
    modes = evidence_modes()
    for name in ("evidence-ppr", "evidence-salsa", "evidence-ppr-noprune", "evidence-salsa-noprune-qyear"):
        mode = replace(modes[name], settings=EvidenceConfig(theta=0.2), costs=[])
        expected = mode.run(client, alone, None, 60)
        got = replace(mode, costs=[]).run(client, shared, None, 60)
        assert (got.ranking, got.candidates, got.distances) == (
            expected.ranking,
            expected.candidates,
            expected.distances,
        )
        charged = shared.memo.take_charge()
        assert (charged > 0) == (name != "evidence-ppr"), name  # only the first computed the support
    run = explain(client, QUERY, config=EvidenceConfig(theta=0.2, ranker="salsa"), lexical=bm25, memo=shared.memo)
    fresh = explain(client, QUERY, config=EvidenceConfig(theta=0.2, ranker="salsa"), lexical=bm25)
    assert run.ranking == fresh.ranking and run.scorer_calls == fresh.scorer_calls == run.size.scorer_bound
    assert {k: e.weight for k, e in run.edges.items()} == {k: e.weight for k, e in fresh.edges.items()}
    assert (
        shared.memo.held(("best supports", EvidenceConfig(theta=0.2).max_claims)) == run.size.edges > 0
    )  # one graph, each edge scored once
