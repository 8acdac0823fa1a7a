"""The seeds' vote as the learned ranking computes it (``retrieval.search.vote``): its tally against the evidence
graph's ``seed_vote`` on any graph (hypothesis), the whole vote on a real index against a plain-Python reference
and against ``explain`` without pruning, the sentence sub-queries' features, exclusions, and the learned ranking
that uses it."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval import Paper, RetrievalClient, RetrievalConfig, Trace
from retrieval.evidence.config import EvidenceConfig
from retrieval.evidence.pipeline import explain
from retrieval.evidence.rank import seed_vote
from retrieval.search import lexical, vote
from retrieval.search.learned import CANDIDATE_FEATURES, FEATURES, RankerModel
from retrieval.search.query import Query
from retrieval.search.split import split_query
from retrieval.store.sqlite.build import build_index
from tests.reference import ReferenceBM25
from tests.test_learned import TOPICS as LEARNED_TOPICS

TOPICS = LEARNED_TOPICS[:5]  # the learned ranking's test topics, but the last


def corpus() -> list[Paper]:
    """Five topics of ten papers; paper i of a topic cites papers i-1 and i-2 of its topic and paper i of the next
    topic, so seeds of every topic vote, and cited papers are cited by several seeds."""
    out = []
    for t, words in enumerate(TOPICS):
        for i in range(10):
            refs = [f"t{t}p{j}" for j in (i - 1, i - 2) if j >= 0] + [f"t{(t + 1) % len(TOPICS)}p{i}"]
            first = words.split()
            text = f"We measure {words} again. The {first[i % len(first)]} result number {i} holds."
            out.append(Paper(f"t{t}p{i}", f"{words.title()} {i}", text, 1990 + i, references=refs))
    return out


LONG = (
    "Quark gluon plasma viscosity at strong coupling. Neural network pruning keeps the sparsity pattern. "
    "Black hole entropy counting from microstates. The citation graph random walk ranks the papers we want. "
    "Protein folding energy landscape funnels guide the chain to its native state at last."
)


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    db = tmp_path_factory.mktemp("vote") / "vote.db"
    papers = corpus()
    build_index(papers, db, source="vote")
    return db, papers


def reference_vote(papers: list[Paper], text: str) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """The vote of the module docstring from the papers alone: BM25 lists by ``ReferenceBM25``, seeds, every
    citation between papers of the corpus, each paper's vote over the highest, and the sub-query features."""
    bm25 = ReferenceBM25({p.id: f"{p.title} {p.abstract}" for p in papers})
    parts = split_query(text)
    lists = [bm25.top(text, 30)] + [bm25.top(part, 30) for part in parts]
    mass: dict[str, float] = {}
    for i, hits in enumerate(lists):
        for pid, score in hits[: 15 if i == 0 else 3]:
            mass[pid] = mass.get(pid, 0.0) + score / hits[0][1]
    total = sum(mass.values())
    p = {pid: m / total for pid, m in mass.items()}
    ids = {paper.id for paper in papers}
    scores = dict(p)
    for paper in papers:
        for cited in paper.references:
            if cited not in ids:
                continue
            if paper.id in p:
                scores[cited] = scores.get(cited, 0.0) + p[paper.id]
            if cited in p:
                scores[paper.id] = scores.get(paper.id, 0.0) + 0.3 * p[cited]
    top = max(scores.values())
    best: dict[str, float] = {}
    share: dict[str, float] = {}
    for hits in lists[1:]:
        for pid, score in hits:
            best[pid] = max(best.get(pid, 0.0), score / hits[0][1])
            share[pid] = share.get(pid, 0.0) + 1 / len(parts)
    return {pid: s / top for pid, s in scores.items()}, best, share


# -- the tally against the evidence graph's vote ------------------------------------------------------------------


@st.composite
def graphs(draw):
    n = draw(st.integers(2, 9))
    nodes = [f"n{i}" for i in range(n)]
    pairs = [(a, b) for a in nodes for b in nodes if a != b]
    edges = sorted(draw(st.sets(st.sampled_from(pairs), max_size=20)))
    seeds = draw(st.lists(st.sampled_from(nodes), min_size=1, max_size=n, unique=True))
    masses = draw(st.lists(st.floats(0.01, 5.0), min_size=len(seeds), max_size=len(seeds)))
    total = sum(masses)
    return nodes, edges, {s: m / total for s, m in zip(seeds, masses, strict=True)}


@settings(max_examples=150, deadline=None)
@given(graphs())
def test_the_tally_is_the_evidence_graphs_seed_vote(graph):
    nodes, edges, p = graph
    scores, voters = vote.tally(p, edges)
    walked = seed_vote(nodes, [(a, b, 1.0) for a, b in edges], p).scores
    total = sum(scores.values())
    for node in nodes:
        assert scores.get(node, 0.0) / total == pytest.approx(walked.get(node, 0.0), abs=1e-12)
    for node, count in voters.items():  # voters: the seeds at the other end of its edges
        expected = sum(1 for a, b in edges if (b == node and a in p) or (a == node and b in p))
        assert count == expected


def test_seed_masses_add_over_the_lists_that_pick_a_paper():
    lists = [[("a", 4.0), ("b", 2.0), ("c", 1.0)], [("c", 3.0), ("a", 1.5)]]
    p = vote.seed_masses(lists, first=2, each=1)
    # a: 4/4 from the query; b: 2/4; c: 3/3 from the sentence (the query's top 2 leave it out)
    assert p == pytest.approx({"a": 1.0 / 2.5, "b": 0.5 / 2.5, "c": 1.0 / 2.5})
    assert vote.seed_masses([[]], 15, 3) == {} and vote.seed_masses([[("a", 0.0)]], 15, 3) == {}


# -- on an index ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [LONG, "black hole entropy", "pruning sparsity"])
def test_the_vote_on_an_index_is_the_plain_reference(index, text):
    db, papers = index
    expected, best, share = reference_vote(papers, text)
    with RetrievalClient(db) as client, client.snapshot() as snap:
        query = Query.parse(text)
        hits = client.lexical.search(query, 100)
        got = vote.compute(snap, query, hits)
    assert got.subqueries == len(split_query(text)) and (got.subqueries > 0) == (text == LONG)
    assert got.scores.keys() == expected.keys()
    for pid, value in expected.items():
        assert got.scores[pid] == pytest.approx(value, rel=1e-9)
    assert got.sub_best == pytest.approx(best, rel=1e-9) and got.sub_share == pytest.approx(share, rel=1e-9)
    assert max(got.scores.values()) == 1.0
    feats = got.features(max(expected, key=expected.get))
    assert feats["vote"] == pytest.approx(1.0) and feats["voters"] >= math.log(2)


def test_the_vote_ranks_as_explain_does_without_pruning(index):
    db, _ = index
    cfg = EvidenceConfig(prune=False, max_nodes=None)
    with RetrievalClient(db) as client:
        run = explain(client, LONG, config=cfg)
        with client.snapshot() as snap:
            query = Query.parse(LONG)
            got = vote.compute(snap, query, client.lexical.search(query, 100))
    assert set(got.seeds) == {node.paper_id for node in run.nodes.values() if node.seed is not None}
    walked = dict(run.ranking)
    assert walked.keys() == got.scores.keys()
    ratio = max(walked.values())  # the evidence graph normalises to sum 1, the vote to its highest
    for pid, value in got.scores.items():
        assert value * ratio == pytest.approx(walked[pid], rel=1e-9)


def test_excluded_papers_neither_seed_nor_receive_a_vote(index):
    db, _ = index
    with RetrievalClient(db) as client, client.snapshot() as snap:
        query = Query.parse(LONG)
        hits = client.lexical.search(query, 100)
        every = vote.compute(snap, query, hits)
        gone = frozenset(sorted(every.scores, key=lambda pid: (-every.scores[pid], pid))[:6])
        kept = [(pid, score) for pid, score in hits if pid not in gone]
        without = vote.compute(snap, query, kept, excluded=gone)
    assert not (gone & without.scores.keys()) and not (gone & without.seeds.keys())
    assert not (gone & without.sub_best.keys()) and without.scores


def test_the_sentences_are_weighed_from_the_whole_querys_terms_without_a_statement_each(index):
    """Given the query weighed, its sentences take their terms' rows from it: the same vote, and no terms statement
    per sentence; a part with a word the whole never asked about is weighed by its own statement."""
    db, _ = index
    trace = Trace()
    with RetrievalClient(db, tracer=trace) as client, client.snapshot() as snap:
        query = Query.parse(LONG)
        hits = client.lexical.search(query, 100)
        wq = lexical.weigh(snap, query)
        for part in split_query(LONG) + ["black hole entropy", "protein folding"]:
            alone, within = lexical.weigh(snap, Query.parse(part)), lexical.weigh(snap, Query.parse(part), within=wq)
            assert within.terms == alone.terms and within.terms, part
        trace.statements.clear()
        by_rows = vote.compute(snap, wq, hits)
        from_rows = [s.name for s in trace.statements]
        trace.statements.clear()
        lexical._TERMS.clear()  # the sentences' terms, read above, forgotten by the process
        by_statements = vote.compute(snap, query, hits)
        asked = [s.name for s in trace.statements]
        outside = lexical.weigh(snap, Query.parse("black hole microstates landscape zebra"), within=wq)
        assert trace.statements[-1].name == lexical.TERMS_NAME  # "zebra": not among the whole's words
        assert outside.terms == lexical.weigh(snap, Query.parse("black hole microstates landscape zebra")).terms
    assert by_rows.subqueries == by_statements.subqueries == len(split_query(LONG)) > 1
    assert (by_rows.scores, by_rows.sub_best, by_rows.sub_share) == (
        by_statements.scores, by_statements.sub_best, by_statements.sub_share
    )  # fmt: skip
    assert asked.count(lexical.TERMS_NAME) == by_rows.subqueries and lexical.TERMS_NAME not in from_rows


# -- in the learned ranking -----------------------------------------------------------------------------------


def _model(**weights: float) -> RankerModel:
    return RankerModel(FEATURES, [weights.get(f, 0.0) for f in FEATURES], [1.0] * len(FEATURES), name="voting")


def test_a_learned_model_over_the_vote_ranks_by_it_and_says_so(index):
    db, papers = index
    expected, _, _ = reference_vote(papers, LONG)
    with RetrievalClient(db) as client:
        result = client.search(LONG, RetrievalConfig(ranking="learned", model=_model(vote=1.0)), limit=10)
        plain = client.search(LONG, RetrievalConfig(ranking="learned", model=_model(bm25_norm=1.0)), limit=10)
    order = sorted(expected, key=lambda pid: (-round(expected[pid], 10), pid))[:10]
    assert [e.paper.id for e in result.ranked] == order
    assert result.expansion["vote"]["subqueries"] == len(split_query(LONG))
    assert result.ranked[0].why().startswith("voting: vote +1.000")
    short = [e.features["short"] for e in result.ranked]
    assert short == [0.0] * len(short)  # a long query
    assert [e.paper.id for e in plain.ranked] != order  # BM25 alone ranks otherwise


def test_a_model_without_vote_features_does_not_compute_the_vote(index):
    db, _ = index
    n = len(CANDIDATE_FEATURES)
    v2 = RankerModel(CANDIDATE_FEATURES, [1.0] + [0.0] * (n - 1), [1.0] * n, name="no-vote")
    assert not v2.uses_vote and _model(vote=1.0).uses_vote
    with RetrievalClient(db) as client:
        result = client.search("black hole entropy", RetrievalConfig(ranking="learned", model=v2))
        voting = client.search("black hole entropy", RetrievalConfig(ranking="learned", model=_model(vote=1.0)))
    assert "vote" not in result.expansion and voting.expansion["vote"]["subqueries"] == 0
    assert all(e.features["short"] == 1.0 for e in voting.ranked)
    for entry in voting.ranked:
        assert entry.features["vote_x_short"] == entry.features["vote"]
        assert entry.features["bm25_norm_x_short"] == entry.features["bm25_norm"]


def test_the_votes_candidates_break_ties_on_the_id_whatever_the_order_of_the_sums():
    ballot = vote.Vote(seeds={"s": 1.0}, scores={"s": 1.0, "b": 0.1 + 0.2, "a": 0.3, "c": 0.2})
    assert ballot.candidates(1) == ["s", "a"]
    assert ballot.candidates(3) == ["s", "a", "b", "c"]
