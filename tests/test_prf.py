"""RM3 pseudo-relevance feedback (retrieval.search.prf) against a plain-Python computation on a generated corpus:
the relevance model, the interpolated weights, and the expanded query's exact BM25 scores."""

import math
import random
from collections import Counter

import pytest

from retrieval import RetrievalClient, RetrievalConfig
from retrieval.commands import build
from retrieval.search import lexical, prf
from retrieval.search.query import Query
from tests.helpers import BACKENDS, paper, write_jsonl
from tests.reference import K1, B, ReferenceBM25, analysed, close

VOCABULARY = [f"w{i:03d}" for i in range(300)] + ["graph", "routing", "sparse", "network"]


def _corpus(n: int = 80, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = [rng.choice(VOCABULARY) for _ in range(rng.randint(8, 30))]
        if i % 5 == 0:
            words += ["graph", "routing"] * rng.randint(1, 3)
        out.append(paper(f"p{i:03d}", title=" ".join(words[:4]), abstract=" ".join(words[4:])))
    return out


@pytest.fixture(scope="module", params=BACKENDS)
def corpus(request, tmp_path_factory):
    """The generated corpus indexed on each backend in turn: (index, {id: text})."""
    tmp = tmp_path_factory.mktemp("prf")
    records = _corpus()
    source = write_jsonl(tmp / "prf.jsonl", records)
    db = tmp / "prf.db" if request.param == "sqlite" else request.getfixturevalue("pg_database")("prf")
    build(db=db, source=source, semantic="none")  # the reference is BM25's: no text vectors in the blend
    return db, {r["id"]: f"{r['title']} {r['abstract']}" for r in records}


def reference_rm3(docs: dict[str, str], query: str, fb_docs=10, fb_terms=10, alpha=0.5):
    """RM3 from its definition: feedback docs by plain BM25, p(t|D) over terms of >= 2 chars in <= 10% of docs,
    rm(t) = sum_D p(t|D) * score(D), top fb_terms, L1-normalised, interpolated with qtf / |q|."""
    ref = ReferenceBM25(docs)
    feedback = ref.top(query, fb_docs)
    keep = {t for t, df in ref.df.items() if df <= 0.1 * ref.n and len(t) >= 2}
    model: Counter = Counter()
    for pid, score in feedback:
        counts = Counter(t for t in analysed(docs[pid]) if t in keep)
        length = sum(counts.values())
        for t, c in counts.items():
            model[t] += c / length * score
    top = sorted(model.items(), key=lambda kv: (-kv[1], kv[0]))[:fb_terms]
    total = sum(v for _, v in top)
    rm = {t: v / total for t, v in top}
    qtf = Counter(t for t in analysed(query) if t in ref.df)
    qn = sum(qtf.values())
    weights = {t: alpha * qtf.get(t, 0) / qn + (1 - alpha) * rm.get(t, 0.0) for t in set(qtf) | set(rm)}
    return ref, [pid for pid, _ in feedback], rm, weights


def reference_scores(ref: ReferenceBM25, weights: dict[str, float]) -> dict[str, float]:
    out = {}
    for pid, counts in ref.tf.items():
        total = 0.0
        for t, w in weights.items():
            f = counts.get(t, 0)
            if f:
                total += w * ref.idf(t) * f * (K1 + 1) / (f + K1 * (1 - B + B * ref.dl[pid] / ref.avgdl))
        if total:
            out[pid] = total
    return out


@pytest.mark.parametrize("query", ["graph routing", "graph routing w003 w003", "sparse network w010"])
def test_rm3_weights_match_the_plain_computation(corpus, query):
    db, docs = corpus
    ref, feedback, rm, weights = reference_rm3(docs, query)
    with RetrievalClient(db=db) as client, client.snapshot() as snap:
        fb = prf.rm3(snap, lexical.weigh(snap, Query.parse(query)))
    assert [pid for pid, _ in fb.docs] == feedback
    assert fb.model.keys() == rm.keys() and len(rm) == 10
    assert all(close(fb.model[t], rm[t]) for t in rm)
    assert math.isclose(sum(fb.model.values()), 1.0)
    assert fb.weights.keys() == weights.keys()
    assert all(close(fb.weights[t], weights[t]) for t in weights)
    assert len(fb.query.terms) > len(set(analysed(query)))  # the query did grow


@pytest.mark.parametrize("query", ["graph routing", "sparse network w010"])
def test_expanded_query_scores_equal_plain_bm25_with_the_weights(corpus, query):
    db, docs = corpus
    ref, _, _, weights = reference_rm3(docs, query)
    expected = reference_scores(ref, weights)
    ranked = sorted(expected.items(), key=lambda kv: (-round(kv[1], 10), kv[0]))
    with RetrievalClient(db=db) as client, client.snapshot() as snap:
        fb = prf.rm3(snap, lexical.weigh(snap, Query.parse(query)))
        got, _ = lexical.top_papers(snap, fb.query, 25)
        exhaustive, _ = lexical.top_papers(snap, fb.query, 25, exhaustive=True)
        given = lexical.scores_for(snap, fb.query, list(docs))
    assert [pid for pid, _ in got] == [pid for pid, _ in ranked[:25]] == [pid for pid, _ in exhaustive]
    assert all(close(score, expected[pid]) for pid, score in got)
    assert all(close(given[pid], expected.get(pid, 0.0)) or given[pid] == expected.get(pid, 0.0) for pid in docs)


def test_search_with_prf_ranks_by_the_expanded_query(corpus):
    db, docs = corpus
    ref, _, _, weights = reference_rm3(docs, "graph routing")
    expected = sorted(reference_scores(ref, weights).items(), key=lambda kv: (-round(kv[1], 10), kv[0]))
    cfg = RetrievalConfig(prf="rm3", expand="never", w_recency=0.0)
    with RetrievalClient(db=db) as client:
        plain = client.search("graph routing", RetrievalConfig(expand="never", w_recency=0.0), limit=20)
        result = client.search("graph routing", cfg, limit=20)
    assert [r.paper.id for r in result.ranked] == [pid for pid, _ in expected[:20]]
    assert [r.paper.id for r in result.ranked] != [r.paper.id for r in plain.ranked]


def test_prf_setting_is_checked():
    with pytest.raises(Exception, match="prf"):
        RetrievalConfig(prf="rm4")
