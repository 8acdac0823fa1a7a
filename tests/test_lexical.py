"""BM25 in SQL against the plain-Python reference (to a relative 1e-9) and against bm25s (method="lucene")."""

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval import RetrievalClient, Trace, build_corpus, read_jsonl
from retrieval.commands import build
from tests.helpers import BACKENDS, index_on, paper, write_jsonl
from tests.reference import ReferenceBM25, analysed, close


def _check_against_reference(client: RetrievalClient, ref: ReferenceBM25, query: str, k: int) -> None:
    got = client.lexical.search(query, k)
    expected = ref.top(query, k)
    assert [pid for pid, _ in got] == [pid for pid, _ in expected], query
    for (_, a), (_, b) in zip(got, expected, strict=True):
        assert close(a, b), (query, a, b)


@pytest.mark.parametrize(
    "query",
    ["attention sparsity", "retrieval augmentation embedding", "study 12", "low rank low rank", "topic 3 accuracy"],
)
def test_demo_corpus_matches_reference(demo_index, query):
    ref = ReferenceBM25({p.id: p.text for p in build_corpus()})
    with RetrievalClient(db=demo_index) as client:
        _check_against_reference(client, ref, query, 100)


def test_real_corpus_matches_reference(cacm_index):
    db, corpus = cacm_index
    ref = ReferenceBM25({p.id: p.text for _, p in read_jsonl(corpus)})
    queries_file = corpus.parent / "queries-dev.jsonl"
    queries = [json.loads(line)["query"] for line in queries_file.read_text(encoding="utf-8").splitlines()]
    rng = random.Random(7)
    titles = [p.title for _, p in read_jsonl(corpus)]
    queries += rng.sample(titles, 20)
    with RetrievalClient(db=db) as client:
        for query in queries:
            _check_against_reference(client, ref, query, 50)
            # every paper's score, not only the top: the restricted statement used for walked papers
            some = sorted(ref.scores(query))[:40] + ["not-a-paper"]
            scores = client.lexical.scores(query, some)
            for pid in some:
                assert close(scores[pid], ref.score(pid, query) if pid in ref.tf else 0.0)


def test_agrees_with_bm25s_lucene(cacm_index):
    """bm25s's "lucene" variant has the same idf and omits the (k1 + 1) factor, so ours is (k1 + 1) times it."""
    bm25s = pytest.importorskip("bm25s")
    db, corpus = cacm_index
    papers = [p for _, p in read_jsonl(corpus)]
    retriever = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
    retriever.index([analysed(p.text) for p in papers], show_progress=False)  # the index's default analysis
    with RetrievalClient(db=db) as client:
        for query in ["parallel sorting algorithms", "time sharing operating system", "matrix inversion error"]:
            theirs = retriever.get_scores(sorted(set(analysed(query))))
            ours = client.lexical.scores(query, [p.id for p in papers])
            for i, p in enumerate(papers):
                assert ours[p.id] == pytest.approx(2.5 * float(theirs[i]), rel=1e-5, abs=1e-6)


def test_ties_break_on_paper_id_and_repeated_query_tokens_count(tmp_path):
    corpus = write_jsonl(
        tmp_path / "c.jsonl",
        [paper(pid, title="graph walk", abstract="same words") for pid in ["d", "b", "c", "a"]]
        + [paper("e", title="walk walk", abstract="other words")],
    )
    build(db=tmp_path / "x.db", source=corpus)
    with RetrievalClient(db=tmp_path / "x.db") as client:
        hits = client.lexical.search("graph walk", 10)
        assert [pid for pid, _ in hits[:4]] == ["a", "b", "c", "d"]
        once = dict(client.lexical.search("graph", 10))
        twice = dict(client.lexical.search("graph graph", 10))
        assert close(twice["a"], 2 * once["a"])


def test_query_with_no_known_token_or_no_token(demo_db):
    with RetrievalClient(db=demo_db) as client:
        assert client.lexical.search("graphene", 5) == []
        assert client.lexical.search("", 5) == []
        assert client.lexical.search("?!", 5) == []
        assert client.lexical.scores("?!", ["p001"]) == {"p001": 0.0}


def test_sql_is_parameterised(demo_db):
    hostile = "x'); DROP TABLE papers; --"
    with RetrievalClient(db=demo_db) as client:
        assert client.lexical.search(hostile, 5) == []
        assert client.paper("p001") is not None
    trace = Trace()
    hostile = hostile.replace("x'", "y'")  # a word this process has not read, so the terms statement runs
    with RetrievalClient(db=demo_db, tracer=trace) as client:
        client.search(hostile)
    assert trace.statements and all(hostile not in s.sql and "drop" not in s.sql.lower() for s in trace.statements)
    terms = next(s for s in trace.statements if s.name == "lexical: the query's terms")
    assert '"drop"' in terms.params["terms"]
    with RetrievalClient(db=demo_db) as client:
        assert client.paper("p001") is not None


@pytest.mark.parametrize("backend", BACKENDS)
def test_terms_read_before_at_this_index_state_are_weighed_without_the_statement(request, backend):
    """A process keeps the rows of the terms it has read, by the index's generation (which every writer draws
    anew): a query of known terms runs no terms statement (on a server: none sent with the snapshot's
    beginning) and scores the same; after an add, the new state's terms are read again, and the scores are
    the new corpus's."""
    from retrieval.commands import add
    from retrieval.corpus.paper import Paper

    papers = [
        Paper(p["id"], p["title"], p["abstract"], p["year"], [], [], source="t")
        for p in (
            paper(f"p{i:02d}", f"attention topic {i % 5}", "sparsity " * (i % 4) + f"study {i}") for i in range(30)
        )
    ]
    db = index_on(request, backend, papers, f"terms-{backend}")
    query, name = "attention sparsity study", "lexical: the query's terms"

    def traced(text: str) -> tuple[list, list[str]]:
        trace = Trace()
        with RetrievalClient(db=db, tracer=trace) as client:
            return client.lexical.search(text, 10), [s.name for s in trace.statements]

    first, ran = traced(query)
    assert name in ran
    again, ran = traced(query)
    assert again == first and name not in ran and ran  # the snapshot was still read
    assert name in traced(query + " zzz")[1]  # one term not read before: the statement, for all of them
    more = [Paper("q01", "attention sparsity study", "sparsity study of attention", 2001, [], [], source="t")]
    add(more, db=db)
    after, ran = traced(query)
    assert name in ran
    ref = ReferenceBM25({p.id: p.text for p in papers + more})
    expected = ref.top(query, 10)
    assert [pid for pid, _ in after] == [pid for pid, _ in expected] and "q01" in dict(after)
    assert all(close(a, b) for (_, a), (_, b) in zip(after, expected, strict=True))


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["add", "replace", "remove"]), st.integers(0, 39)), min_size=1,
                max_size=6), st.randoms(use_true_random=False))  # fmt: skip
def test_a_long_lived_client_scores_each_state_of_the_index_as_the_reference(tmp_path_factory, steps, rng):
    """One client, kept open, searching the same queries while other calls add, replace and remove papers: what
    the process keeps (the terms' rows, the postings lists, the ids, by the index's generation) never answers for
    a state it was not read at."""
    from retrieval.commands import add, remove
    from retrieval.corpus.paper import Paper

    words = ["black", "hole", "entropy", "string", "brane", "gauge", "field", "duality"]

    def made(pid: str) -> Paper:
        text = " ".join(rng.choices(words, k=rng.randint(3, 12)))
        return Paper(pid, text[:20], text, 2000, [], [], source="t")

    db = tmp_path_factory.mktemp("kept") / "kept.db"
    corpus = {f"p{i:02d}": made(f"p{i:02d}") for i in range(20)}
    build(db=db, source=list(corpus.values()))
    queries = ["black hole entropy", "string duality", "gauge field brane hole"]

    def check(client: RetrievalClient) -> None:
        ref = ReferenceBM25({pid: p.text for pid, p in corpus.items()})
        for query in queries:  # read at this state: kept by the process for the next searches
            expected, got = ref.top(query, 10), client.lexical.search(query, 10)
            assert [pid for pid, _ in got] == [pid for pid, _ in expected], query
            assert all(close(a, b) for (_, a), (_, b) in zip(got, expected, strict=True))

    with RetrievalClient(db=db) as client:
        for kind, i in steps:
            check(client)
            pid = f"p{i:02d}"
            if kind == "remove" and pid in corpus and len(corpus) > 1:
                remove([pid], db=db)
                del corpus[pid]
            elif kind != "remove":
                corpus[pid] = made(pid)
                add([corpus[pid]], db=db, replace=True)
        check(client)


_WORDS = ["attention", "sparsity", "retrieval", "low", "rank", "study", "1", "12", "topic", "the", "zzz"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=6), st.integers(1, 30))
def test_top_k_is_a_prefix_of_the_full_ranking(demo_db_path, words, k):
    query = " ".join(words)
    with RetrievalClient(db=demo_db_path) as client:
        full = client.lexical.search(query, 100)
        top = client.lexical.search(query, k)
        exhaustive = client.lexical.search(query, k, exhaustive=True)
    # Pruned queries with different k add the same terms in different orders: scores agree to rounding.
    assert [p for p, _ in top] == [p for p, _ in full[:k]] == [p for p, _ in exhaustive]
    assert all(close(a, b) and close(a, c) for (_, a), (_, b), (_, c) in zip(top, full, exhaustive, strict=False))
    assert all(round(a[1], 10) >= round(b[1], 10) for a, b in zip(top, top[1:], strict=False))


@pytest.fixture(scope="module")
def demo_db_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("lexical") / "demo.db"
    build(db=path)
    return path


@pytest.mark.parametrize("ratio", [0, 16, 10**9])
def test_scores_of_given_papers_read_whole_or_looked_up_match_the_reference(demo_db, monkeypatch, ratio):
    # 0: every term looked up per paper; 10**9: every term read whole and checked against the papers.
    from retrieval.search import lexical

    monkeypatch.setattr(lexical, "READ_WHOLE_RATIO", ratio)
    ref = ReferenceBM25({p.id: p.text for p in build_corpus()})
    with RetrievalClient(db=demo_db) as client:
        for query in ("attention sparsity", "retrieval augmentation embedding low rank low rank", "the of graph"):
            some = sorted(ref.tf)[::7] + ["not-a-paper"]
            scores = client.lexical.scores(query, some)
            assert set(scores) == set(some)
            for pid in some:
                assert close(scores[pid], ref.score(pid, query) if pid in ref.tf else 0.0), (ratio, query, pid)
