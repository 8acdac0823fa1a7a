"""The evidence path's soft edge support, the seeds' vote and the automatic sentence sub-queries.

Checked on a real index file built from the small four-topic corpus of ``test_evidence``, each against an
independent plain-Python computation: Delta under the soft coverage rule from TF-IDF vectors built here, pruning
that removes edges which weigh something unpruned (and says why), the vote against its formula, and the splitter's
documented rules (with hypothesis).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval import RetrievalClient
from retrieval.bm25 import SCORE_DECIMALS
from retrieval.errors import ConfigError
from retrieval.eval.evidence_modes import evidence_modes
from retrieval.eval.records import LexicalPass
from retrieval.evidence import EvidenceConfig, explain
from retrieval.evidence.rank import WalkResult, seed_vote
from retrieval.evidence.support import (
    CountingScorer,
    TfidfCosineScorer,
    best_supports,
    coverage_delta,
    score_edges,
    scorer_bound,
)
from retrieval.search.memo import QueryMemo
from retrieval.search.query import Query
from retrieval.search.split import MIN_PART, split_query
from retrieval.store.sqlite.build import build_index
from retrieval.text import sentences, tokenise
from tests.reference import analysed

from .test_evidence import QUERY, topic_corpus


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    path = tmp_path_factory.mktemp("support") / "topics.db"
    build_index(topic_corpus(), path)
    with RetrievalClient(db=path) as c:
        yield c


def _unit_vectors(client, texts: list[str]) -> dict[str, dict[str, float]]:
    """TF-IDF unit vectors (tf = 1 + ln count, BM25 idf from the index's document frequencies), by hand."""
    n = client.stats.n_papers
    df: Counter = Counter()
    for paper in client.papers([p.id for p in topic_corpus()], full=True).values():
        df.update(set(analysed(f"{paper.title} {paper.abstract or ''}")))
    out = {}
    for text in texts:
        v = {
            t: (1 + math.log(c)) * math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
            for t, c in Counter(analysed(text)).items()
        }
        norm = math.sqrt(sum(x * x for x in v.values()))
        out[text] = {t: x / norm for t, x in v.items()} if norm else {}
    return out


def _reference_delta(hyps: list[str], prems: list[str], vectors, theta: float, floor: float) -> float:
    best = [max(min(1.0, sum(w * vectors[p].get(t, 0.0) for t, w in vectors[h].items())) for p in prems) for h in hyps]
    return floor + (1 - floor) * sum(min(1.0, b / theta) for b in best) / len(best)


# -- the soft coverage rule --------------------------------------------------------------------------------------


def test_coverage_delta_follows_its_formula_and_bounds():
    assert coverage_delta([], 0.1, "soft", 0.05) == 0.0
    assert coverage_delta([0.0, 0.0], 0.1, "soft", 0.05) == pytest.approx(0.05)  # unrelated: the floor, not 0
    assert coverage_delta([0.2, 0.3], 0.1, "soft", 0.05) == pytest.approx(1.0)
    assert coverage_delta([0.05, 0.0, 0.1], 0.1, "soft", 0.05) == pytest.approx(0.05 + 0.95 * 0.5)
    assert coverage_delta([0.05, 0.0, 0.1], 0.1, "hard") == pytest.approx(1 / 3)
    assert coverage_delta([0.0], 0.0, "soft", 0.05) == pytest.approx(1.0)  # theta 0 covers every claim
    rng = random.Random(3)
    for _ in range(200):
        best = [rng.random() * 0.3 for _ in range(rng.randint(1, 5))]
        floor, theta = rng.random() * 0.2, 0.01 + rng.random() * 0.3
        soft = coverage_delta(best, theta, "soft", floor)
        assert floor - 1e-12 <= soft <= 1.0 + 1e-12
        # soft coverage credits every covered claim in full, so it is never below the hard share's floor-scaled
        assert soft >= floor + (1 - floor) * coverage_delta(best, theta, "hard") - 1e-12
        assert coverage_delta([b + 0.01 for b in best], theta, "soft", floor) >= soft  # monotone in support


def test_unrelated_claims_get_lower_soft_delta_than_related_ones(client):
    related_u = ["Quark gluon plasma viscosity in hadron collision.", "Thermal jet quenching on the lattice."]
    related_v = ["The viscosity of a quark gluon plasma.", "Jet quenching in a thermal hadron gas."]
    unrelated_v = ["Planar graph colouring and chromatic number.", "Spanning tree of a bipartite vertex cut."]
    texts = related_u + related_v + unrelated_v
    vectors = _unit_vectors(client, texts)
    with client.snapshot() as snap:
        scorer = CountingScorer(TfidfCosineScorer(snap))
        scorer.prepare(texts)
        claims = {"u": related_u, "v": related_v, "w": unrelated_v}
        first = score_edges([("u", "v"), ("u", "w")], claims, scorer, 0.1, "soft", 0.05)
        second = score_edges([("u", "v"), ("u", "w")], claims, scorer, 0.1, "soft", 0.05)
    assert first == second  # deterministic
    related, unrelated = first[("u", "v")].delta, first[("u", "w")].delta
    assert related == pytest.approx(_reference_delta(related_u, related_v, vectors, 0.1, 0.05), rel=1e-9)
    assert unrelated == pytest.approx(_reference_delta(related_u, unrelated_v, vectors, 0.1, 0.05), rel=1e-9)
    assert 0.05 <= unrelated < 0.2 < related <= 1.0
    assert unrelated == pytest.approx(0.05)  # no shared term at all: exactly the floor, low but not zero


def test_run_deltas_match_the_plain_python_computation(client):
    run = explain(client, QUERY, config=EvidenceConfig(split="none"))
    ids = {pid for edge in run.edges for pid in edge}
    papers = client.papers(sorted(ids), full=True)
    claims = {pid: sentences(p.abstract or "", 3) or [p.title] for pid, p in papers.items()}
    vectors = _unit_vectors(client, sorted({c for cs in claims.values() for c in cs}))
    assert run.edges
    for (u, v), edge in run.edges.items():
        expected = _reference_delta(claims[u], claims[v], vectors, 0.1, 0.05)
        assert edge.delta == pytest.approx(expected, rel=1e-9, abs=1e-12), (u, v)
        assert edge.support.covered == sum(1 for b in edge.support.best if b >= 0.1)


def test_soft_delta_ranks_the_distractor_low(client):
    # The distractor's text is the query's, its references graph theory: its edges get the lowest Delta.
    run = explain(client, QUERY, config=EvidenceConfig(prune=False, split="none"))
    distractor = [e.delta for e in run.edges.values() if e.citing == "distractor"]
    on_topic = [e.delta for e in run.edges.values() if e.citing.split("-")[0] == e.cited.split("-")[0] == "plasma"]
    assert distractor and on_topic
    assert max(distractor) < min(on_topic)
    assert all(d > 0 for d in distractor)  # low, not zero: pruning them changes weights


# -- pruning that changes results -------------------------------------------------------------------------------


@pytest.mark.parametrize("ranker", ["vote", "ppr"])
def test_soft_pruning_removes_edges_that_weigh_something_unpruned(client, ranker):
    cfg = EvidenceConfig(ranker=ranker, tau=0.3, split="none", top_k=60)
    pruned = explain(client, QUERY, subqueries=["graph vertex colouring"], config=cfg)
    unpruned = explain(client, QUERY, subqueries=["graph vertex colouring"], config=replace(cfg, prune=False))
    removed = [key for key, e in pruned.edges.items() if not e.kept]
    assert removed, "tau 0.3 prunes the corpus's unrelated edges"
    for key in removed:
        edge = pruned.edges[key]
        assert edge.delta < 0.3 and edge.weight == 0.0
        assert unpruned.edges[key].kept and unpruned.edges[key].weight > 0.0  # it carried weight unpruned
        assert edge.reason.startswith(f"Delta {edge.delta:.3f} < tau 0.3")
        assert "mean best support" in edge.reason
    assert {k: e.delta for k, e in pruned.edges.items()} == {k: e.delta for k, e in unpruned.edges.items()}
    assert pruned.ranking != unpruned.ranking  # pruning now changes the ranking


def test_hard_rule_pruned_edges_weigh_nothing_unpruned(client):
    # The earlier rule, for contrast: what it prunes has Delta 0 and weighs 0 without pruning too.
    cfg = EvidenceConfig.crase(top_k=60)
    pruned = explain(client, QUERY, subqueries=["graph vertex colouring"], config=cfg)
    unpruned = explain(client, QUERY, subqueries=["graph vertex colouring"], config=replace(cfg, prune=False))
    removed = [key for key, e in pruned.edges.items() if not e.kept]
    assert removed and all(unpruned.edges[key].weight == 0.0 for key in removed)
    assert pruned.ranking == unpruned.ranking


def test_the_memo_shares_best_supports_across_coverage_rules(client):
    bm25 = client.lexical.search(QUERY, 100)
    shared = LexicalPass(Query.parse(QUERY), bm25, len(bm25), memo=QueryMemo())
    for cfg in (EvidenceConfig(split="none"), EvidenceConfig(split="none", coverage="hard", tau=0.3)):
        with_memo = explain(client, QUERY, config=cfg, lexical=bm25, memo=shared.memo)
        fresh = explain(client, QUERY, config=cfg, lexical=bm25)
        assert with_memo.ranking == fresh.ranking
        assert {k: e.delta for k, e in with_memo.edges.items()} == {k: e.delta for k, e in fresh.edges.items()}
        assert with_memo.scorer_calls == fresh.scorer_calls == fresh.size.scorer_bound
    # one graph: each of its edges scored once, for both rules
    assert shared.memo.held(("best supports", EvidenceConfig().max_claims)) == with_memo.size.edges > 0


# -- the seeds' vote --------------------------------------------------------------------------------------------


def _reference_vote(nodes, edges, teleport, citing, own):
    total = sum(m for pid, m in teleport.items() if pid in nodes)
    p = {pid: teleport.get(pid, 0.0) / total for pid in nodes}
    score = {pid: own * p[pid] for pid in nodes}
    for u, v, w in edges:
        score[v] += p[u] * w
        score[u] += citing * p[v] * w
    s = sum(score.values())
    return {pid: x / s for pid, x in score.items()}


@pytest.mark.parametrize("seed", range(5))
def test_seed_vote_matches_its_formula(seed):
    rng = random.Random(seed)
    nodes = [f"n{i:02d}" for i in range(rng.randint(4, 30))]
    edges = [
        (u, v, rng.choice([0.0, 0.5, 1.0, rng.random()]))
        for u in nodes
        for v in nodes
        if u != v and rng.random() < 0.15
    ]
    teleport = {pid: rng.uniform(0.2, 2.0) for pid in rng.sample(nodes, rng.randint(1, 4))}
    citing, own = rng.choice([0.0, 0.3, 1.0]), rng.choice([0.0, 1.0, 2.0])
    ours = seed_vote(nodes, edges, teleport, citing, own)
    expected = _reference_vote(nodes, edges, teleport, citing, own)
    if sum(_reference_vote(nodes, edges, teleport, citing, 1.0).values()) and any(expected.values()):
        for pid in nodes:
            assert ours.scores[pid] == pytest.approx(expected[pid], abs=1e-12)
    assert ours.ranking() == sorted(ours.ranking(), key=lambda item: (-round(item[1], SCORE_DECIMALS), item[0]))
    assert seed_vote(nodes, edges, teleport, citing, own) == ours  # deterministic


def test_papers_whose_evidence_is_equal_but_summed_in_another_order_tie_and_rank_by_id():
    """z is cited by two seeds with weights 0.1 and 0.2, a by a third with 0.3: the same vote, whose float sums
    differ in the last bit (0.1 + 0.2 is not 0.3). z ranked first; a comes first now, by id, as in every walk's
    ranking (``WalkResult.ranking``)."""
    edges = [("s1", "z", 0.1), ("s2", "z", 0.2), ("s3", "a", 0.3)]
    result = seed_vote(["s1", "s2", "s3", "a", "z"], edges, {"s1": 1.0, "s2": 1.0, "s3": 1.0})
    assert result.scores["z"] != result.scores["a"]  # the last bit that decided before
    assert [pid for pid, _ in result.ranking()] == ["s1", "s2", "s3", "a", "z"]
    walk = WalkResult({"b": 0.1 + 0.2, "a": 0.3, "c": 0.3 + 1e-9, "d": 0.0}, 1)
    assert [pid for pid, _ in walk.ranking()] == ["c", "a", "b"]  # a real difference still counts; 0 is left out


def test_a_default_run_ranks_by_the_vote(client):
    run = explain(client, QUERY, config=EvidenceConfig(top_k=40))
    assert run.config.ranker == "vote" and run.iterations == 1
    kept = [pid for pid, n in run.nodes.items() if n.kept]
    weighted = [(e.citing, e.cited, e.weight) for e in run.kept_edges]
    assert all(e.weight == 1.0 for e in run.kept_edges)  # support_power 0, beta 0: every kept edge weighs 1
    teleport = {s.paper_id: sum(h.blend for h in s.hits) for s in run.seeds}
    expected = _reference_vote(kept, weighted, teleport, 0.3, 1.0)
    for pid in kept:
        assert run.nodes[pid].score == pytest.approx(expected[pid], abs=1e-12)
    assert run.ranking == sorted(run.ranking, key=lambda item: (-item[1], item[0]))


def test_new_settings_are_checked():
    for bad in ({"coverage": "fuzzy"}, {"split": "words"}, {"support_floor": 1.5}, {"vote_citing": -0.1}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            EvidenceConfig(**bad)
    with pytest.raises(ConfigError, match="split_seeds"):
        EvidenceConfig(split_seeds=0)
    crase = EvidenceConfig.crase()
    assert (crase.ranker, crase.coverage, crase.tau, crase.beta, crase.support_power) == ("ppr", "hard", 0.3, 0.5, 1.0)


# -- automatic sentence sub-queries -----------------------------------------------------------------------------


def test_split_query_follows_the_documented_rules():
    short = "Quark gluon plasma. Viscosity of hadrons."
    assert split_query(short) == []  # fewer than 40 tokens
    title = "Dark energy."
    body = " ".join(f"Sentence {i} says something about dark energy and cosmology here." for i in range(3))
    parts = split_query(f"{title} {body}", min_tokens=10)
    assert parts[0].startswith("Dark energy. Sentence 0")  # a two-token title joins the next sentence
    assert len(parts) == 3
    assert split_query("one two three four five six seven eight nine ten eleven", min_tokens=5) == []  # 1 sentence
    many = " ".join(f"Part {i} " + "word " * (3 + i) + "end." for i in range(12))
    kept = split_query(many, min_tokens=5, max_parts=4)
    assert len(kept) == 4 and kept == [p for p in split_query(many, min_tokens=5, max_parts=12) if p in kept]
    assert [p.split()[1] for p in kept] == ["8", "9", "10", "11"]  # the longest, in order


_words = st.sampled_from(["plasma", "quark", "dark", "energy", "brane", "graph", "the", "of", "a", "x1"])
_sentence = st.lists(_words, min_size=1, max_size=12).map(lambda ws: " ".join(ws) + ".")


@settings(max_examples=150, deadline=None)
@given(st.lists(_sentence, min_size=1, max_size=15), st.integers(1, 30), st.integers(1, 10))
def test_split_query_properties(parts, min_tokens, max_parts):
    text = " ".join(parts)
    out = split_query(text, min_tokens=min_tokens, max_parts=max_parts)
    if len(tokenise(text)) < min_tokens:
        assert out == []
        return
    assert len(out) <= max_parts and (len(out) != 1 or max_parts == 1)
    for part in out:
        assert len(tokenise(part)) >= MIN_PART
    if out and len(out) < max_parts:  # nothing dropped: the parts are the text's sentences, in order, whole
        assert tokenise(" ".join(out)) == tokenise(text)
    assert split_query(text, min_tokens=min_tokens, max_parts=max_parts) == out


def test_a_long_query_seeds_from_its_sentences(client):
    long_query = (
        "Quark gluon plasma viscosity in heavy ion collision. "
        "We study the inflation of curvature perturbation spectrum and reheating after slow roll. "
        "Brane compactification on calabi yau with flux and orientifold tadpole. "
        "Planar graph colouring bounds the chromatic number of a bipartite vertex cut."
    )
    run = explain(client, long_query, config=EvidenceConfig(split_min_tokens=20))
    assert run.subqueries[0] == long_query and run.subqueries[1:] == split_query(long_query, 20)
    assert len(run.subqueries) == 5
    for seed in run.seeds:
        for hit in seed.hits:
            assert hit.rank <= (15 if hit.subquery == 0 else 3)
    per_subquery = Counter(hit.subquery for s in run.seeds for hit in s.hits)
    assert all(per_subquery[i] == 3 for i in range(1, 5))
    topics = {s.paper_id.split("-")[0] for s in run.seeds if any(h.subquery > 0 for h in s.hits)}
    assert {"cosmo", "string", "graphs"} <= topics  # each sentence brings its own topic's papers
    plain = explain(client, long_query, config=EvidenceConfig(split="none"))
    assert plain.subqueries == [long_query]


def test_the_vote_modes_answer_through_the_pipeline(client):
    bm25 = client.lexical.search(QUERY, 100)
    query = LexicalPass(Query.parse(QUERY), bm25, len(bm25))
    modes = evidence_modes()
    out = modes["evidence-vote"].run(client, query, None, 30)
    run = explain(client, QUERY, config=EvidenceConfig(top_k=30), lexical=bm25)
    assert out.ranking[: len(run.ranking)] == [pid for pid, _ in run.ranking][:30]
    hard = modes["evidence-ppr-hard"].run(client, query, None, 30)
    old = explain(client, QUERY, config=EvidenceConfig.crase(top_k=30), lexical=bm25)
    assert hard.ranking[: len(old.ranking)] == [pid for pid, _ in old.ranking][:30]


def test_cli_takes_the_coverage_rule_and_turns_the_split_off(tmp_path, capsys):
    import json

    from retrieval.interfaces.cli import main

    db = tmp_path / "cli.db"
    build_index(topic_corpus(), db)
    long_query = " ".join(["Quark gluon plasma viscosity in heavy ion collision."] * 2 + ["Brane flux duality."] * 8)
    assert main(["explain", long_query, "--db", str(db), "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    assert run["config"]["split"] == "sentences" and len(run["subqueries"]) > 1
    assert main(["explain", long_query, "--db", str(db), "--json", "--no-split", "--coverage", "hard"]) == 0
    run = json.loads(capsys.readouterr().out)
    assert (run["config"]["split"], run["config"]["coverage"], run["subqueries"]) == ("none", "hard", [long_query])
    assert main(["explain", "quark gluon", "--db", str(db)]) == 0
    assert "ranker vote: citing 0.3, own 1" in capsys.readouterr().out


WORDS = ["quark", "gluon", "plasma", "jet", "graph", "colouring", "lattice", "the", "of", "thermal", "vertex"]


@settings(max_examples=40, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from([f"p{i}" for i in range(8)]),
        st.lists(st.lists(st.sampled_from(WORDS + ["unindexed"]), max_size=9).map(" ".join), max_size=4),
        min_size=1,
    ),
    st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=25, unique=True),
)
def test_every_edge_at_once_equals_the_support_of_each_pair(client, claims, pairs):
    # The batch (NumPy) path and the per-pair reference: the same best supports, the same call count.
    papers = sorted(claims)
    edges = [(papers[a % len(papers)], papers[b % len(papers)]) for a, b in pairs]
    edges = list(dict.fromkeys(edges))
    with client.snapshot() as snap:
        every = sorted({c for cs in claims.values() for c in cs})
        fast = CountingScorer(TfidfCosineScorer(snap))
        fast.prepare(every)
        plain = TfidfCosineScorer(snap)
        plain.prepare(every)
        got = best_supports(edges, claims, fast)
        reference = CountingScorer(plain)
        reference.scorer = _PerPair(plain)  # the same scorer without its batch method
        expected = best_supports(edges, claims, reference)
    assert list(got) == edges and fast.calls == reference.calls == scorer_bound(edges, claims)
    for edge in edges:
        assert got[edge][1] == expected[edge][1]
        assert got[edge][0] == pytest.approx(expected[edge][0], rel=1e-12, abs=1e-12), edge


class _PerPair:
    """A scorer's ``support`` alone (no ``best_supports``): ``best_supports`` then asks it edge by edge."""

    def __init__(self, scorer: TfidfCosineScorer) -> None:
        self.name = scorer.name
        self.support = scorer.support
