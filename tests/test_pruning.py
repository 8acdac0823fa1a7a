"""The pruned top k is exact, on SQL and on the postings BLOBs: equal to the exhaustive aggregation and to the
plain-Python reference, before and after adds and removes move avgdl and the postings chunks' bounds; and the bulk
build (in one process or with workers) writes what the row-by-row writer writes."""

import math
import random
import sqlite3

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval import Paper, RetrievalClient, SchemaVersionError, Trace
from retrieval.bm25 import BOUND_SLACK, tf_norm
from retrieval.search.lexical import LOOKUP_STAGES, below, choose_reads, stages
from retrieval.search.query import QueryTerm
from retrieval.store import postings
from retrieval.store.schema.migrate import migrate
from retrieval.store.sqlite import bulk
from retrieval.store.sqlite.build import build_index
from retrieval.store.writer import add_papers, remove_papers
from tests.reference import ReferenceBM25, close

# A Zipf-like vocabulary: a few words in most papers, many in few, so queries mix common and rare terms.
VOCAB = [f"w{i}" for i in range(60)]
WEIGHTS = [1.0 / (i + 1) for i in range(60)]


def random_paper(rng: random.Random, pid: str, length: tuple[int, int] = (3, 40)) -> Paper:
    words = rng.choices(VOCAB, weights=WEIGHTS, k=rng.randint(*length))
    return Paper(pid, " ".join(words[:3]), " ".join(words[3:]), year=2000 + rng.randint(0, 20), source="t")


def check_exact(db, papers: dict[str, Paper], queries: list[str], ks=(1, 3, 10, 25)) -> None:
    """Every path's top k (SQL pruned, the postings BLOBs, the cost model's choice) equals the plain aggregation
    and the plain-Python reference, and the BLOBs hold exactly what ``term_freq`` holds."""
    ref = ReferenceBM25({pid: p.text for pid, p in papers.items()})
    with sqlite3.connect(db) as conn:
        assert postings.check(conn) == []
    with RetrievalClient(db=db) as client:
        for query in queries:
            for k in ks:
                full = client.lexical.search(query, k, exhaustive=True)
                expected = ref.top(query, k)
                for path in ("sql", "blobs", None):
                    client.lexical.path = path
                    pruned = client.lexical.search(query, k)
                    assert [p for p, _ in pruned] == [p for p, _ in expected] == [p for p, _ in full], (query, k, path)
                    for (_, a), (_, b), (_, c) in zip(pruned, expected, full, strict=True):
                        assert close(a, b) and close(c, b), (query, k, path, a, b, c)


def queries_for(rng: random.Random, n: int = 12) -> list[str]:
    return [" ".join(rng.choices(VOCAB, k=rng.randint(1, 6))) for _ in range(n)]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 10_000))
def test_pruned_top_k_equals_exhaustive_and_reference(tmp_path, seed):
    rng = random.Random(seed)
    papers = {f"p{i:03d}": random_paper(rng, f"p{i:03d}") for i in range(rng.randint(5, 120))}
    db = tmp_path / f"i{seed}.db"
    build_index(papers.values(), db)
    check_exact(db, papers, queries_for(rng))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 10_000))
def test_pruning_stays_exact_when_adds_and_removes_move_avgdl(tmp_path, seed):
    rng = random.Random(seed)
    papers = {f"p{i:03d}": random_paper(rng, f"p{i:03d}", (3, 12)) for i in range(60)}
    db = tmp_path / f"d{seed}.db"
    build_index(papers.values(), db)
    # Much longer papers: avgdl grows (every bound moves with it), and new chunks' bounds are written; then
    # removes rewrite the chunks that held the removed papers.
    with sqlite3.connect(db) as conn:
        before = float(dict(conn.execute("SELECT key, value FROM index_info"))["avgdl"])
    longer = {f"x{i:03d}": random_paper(rng, f"x{i:03d}", (40, 90)) for i in range(40)}
    add_papers(longer.values(), db)
    papers.update(longer)
    with sqlite3.connect(db) as conn:
        info = dict(conn.execute("SELECT key, value FROM index_info"))
    assert float(info["avgdl"]) > 1.5 * before
    check_exact(db, papers, queries_for(rng))
    gone = rng.sample(sorted(papers), 30)
    remove_papers(gone, db)
    for pid in gone:
        del papers[pid]
    check_exact(db, papers, queries_for(rng))


def test_a_common_term_is_looked_up_not_read_and_the_answer_is_still_exact(tmp_path):
    # "common" is in every paper, twice in a few: the SQL plan reads "rare" and looks "common" up.
    papers = {}
    for i in range(400):
        words = ["common"] * (3 if i % 50 == 0 else 1) + ["filler"] * (20 + i % 7) + (["rare"] if i % 40 == 0 else [])
        papers[f"p{i:03d}"] = Paper(f"p{i:03d}", "t", " ".join(words), source="t")
    db = tmp_path / "h.db"
    build_index(papers.values(), db)
    with RetrievalClient(db=db) as client:
        plan = client.lexical.plan("rare common", 5)
    with sqlite3.connect(db) as conn:
        terms = dict(conn.execute("SELECT term_id, term FROM doc_freq"))
    by_term = {terms[t]: read for t, read in plan.reads.items()}
    assert plan.threshold > 0
    assert by_term["rare"] is True and by_term["common"] is False
    check_exact(db, papers, ["rare common", "common", "common rare rare", "filler common"])


def test_choose_reads_keeps_the_unread_bound_below_the_threshold():
    terms = [
        QueryTerm("a", 1, 10, 1, 8.0, 16.0),
        QueryTerm("b", 2, 5000, 1, 1.0, 2.4),
        QueryTerm("c", 3, 900, 1, 3.0, 3.3),
    ]
    for threshold in (0.0, 0.5, 3.0, 9.0, 20.0, 60.0):
        chosen = choose_reads(terms, threshold)
        unread = sum(below(t, chosen[t.term_id]) for t in terms)
        assert threshold == 0 and all(chosen.values()) or unread < threshold
    # With a high threshold the rare, heavy term is read whole and the common one not at all.
    chosen = choose_reads(terms, 9.0)
    assert chosen[1] is True and chosen[2] is False


@given(
    st.lists(st.tuples(st.integers(1, 50), st.integers(1, 2000)), min_size=1, max_size=30),
    st.floats(1, 400),
)
def test_a_chunk_bound_bounds_every_posting_of_the_chunk_at_any_average(postings, avgdl):
    # What TERMS_SQL and the BLOB path take as a term's bound: tf_norm at the chunk's largest count and smallest
    # length, whatever the average length is when the query runs.
    bound = tf_norm(max(c for c, _ in postings), min(n for _, n in postings), avgdl) * (1 + BOUND_SLACK)
    assert all(tf_norm(c, n, avgdl) <= bound for c, n in postings)


def _tables(db):
    with sqlite3.connect(db) as conn:
        return {
            table: conn.execute(sql).fetchall()
            for table, sql in {
                "term_counts": "SELECT term, paper_id, count FROM term_counts ORDER BY term, paper_id",
                "term_freq": "SELECT term_id, doc_id, count FROM term_freq ORDER BY 1, 2",
                "doc_freq": "SELECT term_id, term, df FROM doc_freq ORDER BY term_id",
                "doc_len": "SELECT doc_id, paper_id, length FROM doc_len ORDER BY doc_id",
                "postings": "SELECT * FROM postings ORDER BY term_id, first_doc",
                "citations": "SELECT * FROM citations ORDER BY 1, 2",
                "papers": "SELECT * FROM papers ORDER BY id",
            }.items()
        }


def test_bulk_build_with_workers_writes_the_same_index(tmp_path, monkeypatch):
    rng = random.Random(3)
    papers = [random_paper(rng, f"p{i:04d}") for i in range(900)]
    for p in papers:
        p.references = [f"p{rng.randrange(900):04d}" for _ in range(3)] + ["elsewhere"]
    one = build_index(papers, tmp_path / "one.db", workers=0)
    monkeypatch.setattr(bulk, "CHUNK", 100)
    monkeypatch.setattr(bulk, "PARALLEL_MIN_PAPERS", 200)
    monkeypatch.setattr(bulk, "LOAD_ROWS", 1000)
    two = build_index(papers, tmp_path / "two.db", workers=2)
    assert _tables(tmp_path / "one.db") == _tables(tmp_path / "two.db")
    assert (one.papers, one.postings, one.edges) == (two.papers, two.postings, two.edges)


def test_postings_too_wide_to_pack_are_loaded_row_by_row(tmp_path):
    db = tmp_path / "wide.db"
    migrate(db)
    conn = sqlite3.connect(db, isolation_level=None)
    loader = bulk.BulkLoader(conn, workers=0)
    terms = np.array([1, 1, 2**40], dtype=np.int64)
    docs = np.array([1, 2**30, 5], dtype=np.int64)
    counts = np.array([1, 2, 2**40])
    loader._insert_postings(terms, docs, counts)
    rows = conn.execute("SELECT term_id, doc_id, count FROM term_freq ORDER BY 1, 2").fetchall()
    conn.close()
    assert rows == [(1, 1, 1), (1, 2**30, 2), (2**40, 5, 2**40)]


def test_each_terms_bound_is_the_largest_tf_norm_of_its_postings(tmp_path):
    # The bound TERMS_SQL reads from the postings chunks is at least every posting's tf_norm (a bound) and, on a
    # fresh build whose chunks each hold the posting with the largest count and the smallest length, equal to it.
    rng = random.Random(11)
    papers = [random_paper(rng, f"p{i:03d}") for i in range(80)]
    db = tmp_path / "b.db"
    build_index(papers, db)
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT d.term, t.count, l.length FROM term_freq AS t JOIN doc_len AS l USING (doc_id) "
            "JOIN doc_freq AS d USING (term_id)"
        ).fetchall()
        avgdl = float(conn.execute("SELECT value FROM index_info WHERE key = 'avgdl'").fetchone()[0])
    with RetrievalClient(db=db) as client, client.snapshot() as snap:
        from retrieval.search.lexical import weigh
        from retrieval.search.query import Query

        terms = {t.term: t for t in weigh(snap, Query.parse(" ".join(VOCAB))).terms}
    for term, count, length in rows:
        assert terms[term].weight * tf_norm(count, length, avgdl) <= terms[term].bound
    assert any(
        math.isclose(terms[term].bound, terms[term].weight * tf_norm(c, n, avgdl) * (1 + BOUND_SLACK))
        for term, c, n in rows
    )


@pytest.fixture
def always_pruned(monkeypatch):
    """Every plan runs the pruned statement, however it is costed, so its exactness is what is tested."""
    from retrieval.search import lexical

    monkeypatch.setattr(lexical, "READ_COST", 0.0)
    monkeypatch.setattr(lexical, "LOOKUP_COST", 0.0)


def lexical_statements(db, query: str, k: int) -> list[str]:
    """The names of the statements a lexical top-k search ran, in order (from the client's tracer)."""
    trace = Trace()
    with RetrievalClient(db, tracer=trace) as client:
        client.lexical.path = "sql"  # the SQL plan is what these tests look at
        client.lexical.search(query, k)
    return [s.name for s in trace.statements if not s.name.startswith("open: ")]


def test_a_pruned_search_runs_terms_threshold_and_top_k(tmp_path, always_pruned):
    rng = random.Random(5)
    papers = [random_paper(rng, f"p{i:03d}") for i in range(50)]
    db = tmp_path / "s.db"
    build_index(papers, db)
    assert lexical_statements(db, "w1 w30", 10) == [
        "begin the read snapshot",
        "index statistics",
        "lexical: the query's terms",
        "lexical: threshold",
        "lexical: top-k",
        "end the read snapshot",
    ]


@pytest.fixture(autouse=True)
def _small_chunks_are_fine(monkeypatch):
    # Builds here are small; keep them in one process unless a test asks for workers.
    monkeypatch.setattr(bulk, "PARALLEL_MIN_PAPERS", 10**9)


# A larger Zipf vocabulary for long queries: a whole abstract has tens to hundreds of distinct terms.
LONG_VOCAB = [f"v{i}" for i in range(400)]
LONG_WEIGHTS = [1.0 / (i + 1) ** 1.05 for i in range(400)]


def zipf_paper(rng: random.Random, pid: str, length: tuple[int, int] = (20, 120)) -> Paper:
    words = rng.choices(LONG_VOCAB, weights=LONG_WEIGHTS, k=rng.randint(*length))
    return Paper(pid, " ".join(words[:8]), " ".join(words[8:]), year=2000, source="t")


def long_queries(rng: random.Random, papers: dict[str, Paper], n: int = 4) -> list[str]:
    """Random bags of up to 300 tokens (repeats included, some not in the index) and pasted texts: a paper's
    own title and abstract, with punctuation and case as a user pastes them."""
    queries = []
    for _ in range(n):
        tokens = rng.choices(LONG_VOCAB, weights=LONG_WEIGHTS, k=rng.randint(1, 300))
        tokens += ["unindexed"] * rng.randint(0, 2)
        queries.append(" ".join(tokens))
    pasted = papers[rng.choice(sorted(papers))]
    queries.append(f"{pasted.title.upper()}. {pasted.abstract.replace(' ', ', ', 3)} (see [1]).")
    return queries


def plans_used(db, queries: list[str], k: int) -> list[str]:
    """The name of the top-k statement each query ran."""
    names = []
    for query in queries:
        ran = lexical_statements(db, query, k)
        names.append(next(name for name in ran if name.startswith("lexical: top-k")))
    return names


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 10_000))
def test_long_and_pasted_queries_are_exact_before_and_after_adds_and_removes(tmp_path, always_pruned, seed):
    rng = random.Random(seed)
    papers = {f"p{i:03d}": zipf_paper(rng, f"p{i:03d}") for i in range(rng.randint(20, 150))}
    db = tmp_path / f"l{seed}.db"
    build_index(papers.values(), db)
    queries = long_queries(rng, papers)
    check_exact(db, papers, queries, ks=(1, 10, 30))
    assert set(plans_used(db, queries, 10)) == {"lexical: top-k"}
    longer = {f"x{i:03d}": zipf_paper(rng, f"x{i:03d}", (100, 250)) for i in range(rng.randint(1, 40))}
    add_papers(longer.values(), db)
    papers.update(longer)
    check_exact(db, papers, queries, ks=(1, 10, 30))
    gone = rng.sample(sorted(papers), len(papers) // 3)
    remove_papers(gone, db)
    for pid in gone:
        del papers[pid]
    check_exact(db, papers, long_queries(rng, papers), ks=(1, 10, 30))


def test_a_whole_abstract_as_the_query_runs_the_pruned_plan_and_is_exact(tmp_path):
    # Costed as shipped. Every abstract has the same thirty function words (as "the", "of" and "a" are in nearly
    # every real one) and a few topical words: a pasted abstract's common terms cover most of its postings but
    # weigh almost nothing, so the plan looks them up instead of reading them. A silent fallback to the plain
    # aggregation fails this test.
    rng = random.Random(21)
    function_words = [f"f{i}" for i in range(30)]
    topical = [f"t{i}" for i in range(1500)]
    papers = {}
    for i in range(1200):
        words = rng.sample(function_words, 28) + rng.choices(topical, k=12) + rng.choices(function_words, k=10)
        rng.shuffle(words)
        papers[f"p{i:04d}"] = Paper(f"p{i:04d}", " ".join(words[:6]), " ".join(words[6:]), source="t")
    db = tmp_path / "long.db"
    build_index(papers.values(), db)
    queries = [papers["p0007"].text, papers["p0100"].text + " " + papers["p0200"].text]
    with RetrievalClient(db=db) as client:
        for query in queries:
            plan = client.lexical.plan(query, 10)
            assert plan.pruned and sum(1 for read in plan.reads.values() if not read) >= 20, plan
    assert plans_used(db, queries, 10) == ["lexical: top-k", "lexical: top-k"]
    check_exact(db, papers, queries, ks=(10, 50))


def test_a_plan_dearer_than_reading_everything_runs_the_plain_aggregation(tmp_path, monkeypatch):
    from retrieval.search import lexical

    rng = random.Random(4)
    papers = {f"p{i:03d}": zipf_paper(rng, f"p{i:03d}") for i in range(200)}
    db = tmp_path / "dear.db"
    build_index(papers.values(), db)
    query = papers["p0001" if "p0001" in papers else "p001"].text
    monkeypatch.setattr(lexical, "READ_COST", 1e9)
    with RetrievalClient(db=db) as client:
        assert not client.lexical.plan(query, 10).pruned
    assert plans_used(db, [query], 10) == ["lexical: top-k (plain aggregation)"]
    check_exact(db, papers, [query])


@given(
    st.lists(
        st.tuples(st.integers(1, 10**6), st.floats(0.01, 20), st.floats(0.01, 2.5), st.booleans()),
        max_size=60,
        unique_by=lambda t: t[0],
    )
)
def test_lookup_stages_partition_the_looked_up_terms_largest_bound_first(spec):
    terms = tuple(QueryTerm(f"t{i}", i, 10, 1, w, w * m) for i, w, m, _ in spec)
    reads = {i: read for i, _, _, read in spec}
    groups = stages(terms, reads)
    assert len(groups) == LOOKUP_STAGES
    flat = [t for group in groups for t in group]
    assert sorted(t.term_id for t in flat) == sorted(i for i, _, _, read in spec if not read)
    bounds = [below(t, reads[t.term_id]) for t in flat]
    assert bounds == sorted(bounds, reverse=True)


def test_a_second_threshold_sample_keeps_the_answer_exact(tmp_path, monkeypatch):
    from retrieval.search import lexical

    monkeypatch.setattr(lexical, "REFINE_ABOVE", 0)  # every plan draws the second sample
    rng = random.Random(8)
    papers = {f"p{i:03d}": random_paper(rng, f"p{i:03d}") for i in range(200)}
    db = tmp_path / "r.db"
    build_index(papers.values(), db)
    queries = queries_for(rng, 20)
    check_exact(db, papers, queries)
    with RetrievalClient(db=db) as client:
        client.lexical.path = "sql"
        for query in queries:
            client.lexical.search(query, 5)
        assert client.lexical.refined > 0
    assert "lexical: threshold, second sample" in lexical_statements(db, queries[0], 5)


def test_the_upgrade_from_0007_drops_the_impacts_and_gives_the_file_back(tmp_path):
    # An index of revision 0007 carries term_freq.length and .impact, doc_freq.max_impact and impact_avgdl; a
    # search names `retrieval upgrade` (since 0010 numbers the citations' ids), which drops them, rewrites the file
    # without their pages, and changes no answer.
    from retrieval.store.schema.migrate import downgrade, upgrade_index

    rng = random.Random(5)
    papers = {f"p{i:03d}": random_paper(rng, f"p{i:03d}", (20, 60)) for i in range(400)}
    db = tmp_path / "old.db"
    build_index(papers.values(), db)
    queries = queries_for(rng)
    downgrade(db, "0007")
    with sqlite3.connect(db) as conn:
        conn.execute("VACUUM")
        columns = [row[1] for row in conn.execute("PRAGMA table_info(term_freq)")]
        info = dict(conn.execute("SELECT key, value FROM index_info"))
        bounded = conn.execute(
            "SELECT count(*) FROM term_freq AS t JOIN doc_freq AS d USING (term_id) WHERE t.impact > d.max_impact"
        ).fetchone()[0]
    assert columns == ["term_id", "doc_id", "count", "length", "impact"] and "impact_avgdl" in info
    assert bounded == 0
    with pytest.raises(SchemaVersionError, match="retrieval upgrade"):
        RetrievalClient(db)
    before = db.stat().st_size
    upgrade_index(db)
    with sqlite3.connect(db) as conn:
        assert [row[1] for row in conn.execute("PRAGMA table_info(term_freq)")] == ["term_id", "doc_id", "count"]
        assert [row[1] for row in conn.execute("PRAGMA table_info(doc_freq)")] == ["term_id", "term", "df"]
        assert conn.execute("SELECT count(*) FROM index_info WHERE key = 'impact_avgdl'").fetchone() == (0,)
        assert "WITHOUT ROWID" in conn.execute("SELECT sql FROM sqlite_master WHERE name = 'term_freq'").fetchone()[0]
    assert db.stat().st_size < before
    check_exact(db, papers, queries)
