"""The postings BLOBs (``retrieval.store.postings``) and the lexical pass over them (``retrieval.search.blobs``):
every writer keeps the BLOBs equal to ``term_freq`` (build, add, replace, remove, reindex, the migration), and
the NumPy top k equals the plain SQL aggregation and the plain-Python reference, unfiltered and filtered, on
SQLite and PostgreSQL, with chunks small enough that every list spans several rows."""

from __future__ import annotations

import json
import math
import random
import sqlite3
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval import Paper, RetrievalClient, Trace
from retrieval.bm25 import TF_NORM_SQL
from retrieval.errors import ConfigError, NotAnIndexError
from retrieval.interfaces.cli import main
from retrieval.search import costs, lexical
from retrieval.search.filters import Filters
from retrieval.search.query import Query, QueryTerm, WeightedQuery
from retrieval.store import postings
from retrieval.store.schema.migrate import downgrade, upgrade_index
from retrieval.store.sqlite.build import build_index
from retrieval.store.writer import add_papers, remove_papers
from tests.reference import ReferenceBM25, close

VOCAB = [f"v{i}" for i in range(120)]
WEIGHTS = [1.0 / (i + 1) for i in range(120)]
POSTINGS_STATEMENT = "lexical: the query terms' postings (BLOBs)"


def zipf_paper(rng: random.Random, pid: str, length=(4, 60), year: int = 2000) -> Paper:
    words = rng.choices(VOCAB, weights=WEIGHTS, k=rng.randint(*length))
    return Paper(pid, " ".join(words[:4]), " ".join(words[4:]), year=year, source="t")


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 5 postings: every common list spans rows, and adds and removes cross chunk boundaries."""
    monkeypatch.setattr(postings, "CHUNK", 5)


def assert_blobs_match(db) -> None:
    with sqlite3.connect(db) as conn:
        assert postings.check(conn) == []


def assert_exact(db, papers: dict[str, Paper], queries: list[str], ks=(1, 5, 20)) -> None:
    """The BLOB path's top k equals the plain aggregation's and the reference's, id for id, to 1e-9."""
    ref = ReferenceBM25({pid: p.text for pid, p in papers.items()})
    with RetrievalClient(db=db) as client:
        client.lexical.path = "blobs"
        for query in queries:
            for k in ks:
                got = client.lexical.search(query, k)
                full = client.lexical.search(query, k, exhaustive=True)
                expected = ref.top(query, k)
                assert [p for p, _ in got] == [p for p, _ in full] == [p for p, _ in expected], (query, k)
                assert all(close(a, b) for (_, a), (_, b) in zip(got, expected, strict=True)), (query, k)


def some_queries(rng: random.Random, papers: dict[str, Paper]) -> list[str]:
    short = [" ".join(rng.choices(VOCAB, k=rng.randint(1, 4))) for _ in range(4)]
    long = [" ".join(rng.choices(VOCAB, weights=WEIGHTS, k=rng.randint(30, 200))) for _ in range(2)]
    pasted = papers[rng.choice(sorted(papers))].text if papers else "v1"
    return [*short, *long, pasted.upper() + " (see [1])."]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 10_000))
def test_every_writer_keeps_the_blobs_equal_to_term_freq_and_the_top_k_exact(tmp_path, small_chunks, seed):
    rng = random.Random(seed)
    papers = {f"p{i:03d}": zipf_paper(rng, f"p{i:03d}") for i in range(rng.randint(3, 60))}
    db = tmp_path / f"w{seed}.db"
    build_index(papers.values(), db)
    assert_blobs_match(db)
    assert_exact(db, papers, some_queries(rng, papers))
    # An add appends to each term's last chunk (or opens new ones); longer papers move avgdl.
    added = {f"x{i:03d}": zipf_paper(rng, f"x{i:03d}", (40, 120)) for i in range(rng.randint(1, 25))}
    add_papers(added.values(), db)
    papers.update(added)
    assert_blobs_match(db)
    # A replace removes the old postings and appends the new ones, in one transaction.
    swapped = {pid: zipf_paper(rng, pid, (2, 30)) for pid in rng.sample(sorted(papers), min(5, len(papers)))}
    add_papers(swapped.values(), db, replace=True)
    papers.update(swapped)
    assert_blobs_match(db)
    assert_exact(db, papers, some_queries(rng, papers))
    gone = rng.sample(sorted(papers), len(papers) // 2)
    remove_papers(gone, db)
    for pid in gone:
        del papers[pid]
    assert_blobs_match(db)
    assert_exact(db, papers, some_queries(rng, papers))


# Settings that drive every branch of the NumPy top k: a threshold after every term, non-essential terms searched
# for the candidates as soon as they exist (or never), short chunks batched (or each on its own).
BRANCHES = {
    "searched at once": {"FIRST_THRESHOLD_SHARE": 0.0, "THRESHOLD_GROWTH": 1, "SPARSE_RATIO": 0},
    "added whole": {"FIRST_THRESHOLD_SHARE": 0.0, "THRESHOLD_GROWTH": 1, "SPARSE_RATIO": 10**9},
    "no batching": {"SHORT_CHUNK": 0},
    "summed by paper": {"SPARSE_ACCUMULATION": 10**9},
    "always dense": {"SPARSE_ACCUMULATION": 0},
    "all batched": {"SHORT_CHUNK": 10**9},
    "a batch a chunk": {"SHORT_CHUNK": 10**9, "SHORT_BATCH": 1},
}


@pytest.mark.parametrize("branch", sorted(BRANCHES))
@pytest.mark.parametrize("seed", [11, 12])
def test_every_branch_of_the_numpy_top_k_is_exact(tmp_path, monkeypatch, small_chunks, branch, seed):
    from retrieval.search import blobs

    for name, value in BRANCHES[branch].items():
        monkeypatch.setattr(blobs, name, value)
    searched = []
    add_found = blobs._add_found
    monkeypatch.setattr(blobs, "_add_found", lambda *args: searched.append(1) or add_found(*args))
    rng = random.Random(seed)
    papers = {f"p{i:03d}": zipf_paper(rng, f"p{i:03d}", year=1990 + i % 20) for i in range(160)}
    db = tmp_path / "b.db"
    build_index(papers.values(), db)
    assert_exact(db, papers, some_queries(rng, papers), ks=(1, 4, 15, 200))
    ref = ReferenceBM25({pid: p.text for pid, p in papers.items()})
    with RetrievalClient(db=db) as client:
        client.lexical.path = "blobs"
        for query in some_queries(rng, papers):
            expected = [hit for hit in ref.top(query, len(papers)) if papers[hit[0]].year >= 2000][:10]
            got = client.lexical.search(query, 10, filters=Filters(years=(2000, None)))
            assert [p for p, _ in got] == [p for p, _ in expected], (query, branch)
        client.lexical.search("v100 v0 v1", 3)  # a rare term and two common ones: the common ones non-essential
    if branch in ("searched at once", "added whole"):
        assert bool(searched) == (branch == "searched at once")


def test_a_long_list_is_chunked_and_an_add_fills_the_last_chunk(tmp_path, small_chunks):
    papers = [Paper(f"p{i:02d}", "common", f"w{i}", source="t") for i in range(12)]
    db = tmp_path / "c.db"
    build_index(papers, db)
    chunks = "SELECT first_doc, last_doc, p.df FROM postings AS p JOIN doc_freq USING (term_id) WHERE term = 'common'"
    with sqlite3.connect(db) as conn:
        assert conn.execute(chunks).fetchall() == [(1, 5, 5), (6, 10, 5), (11, 12, 2)]
    add_papers([Paper(f"q{i}", "common", "", source="t") for i in range(4)], db)
    with sqlite3.connect(db) as conn:
        assert conn.execute(chunks).fetchall() == [(1, 5, 5), (6, 10, 5), (11, 15, 5), (16, 16, 1)]
    remove_papers(["p05", "p06", "p07", "p08", "p09"], db)  # every paper of the middle chunk (docs 6-10)
    with sqlite3.connect(db) as conn:
        assert conn.execute(chunks).fetchall() == [(1, 5, 5), (11, 15, 5), (16, 16, 1)]
    assert_blobs_match(db)


@pytest.mark.parametrize("seed", [4, 5])
def test_scores_of_given_papers_from_the_blobs_equal_sql_and_the_reference(tmp_path, small_chunks, seed):
    rng = random.Random(seed)
    papers = {f"p{i:03d}": zipf_paper(rng, f"p{i:03d}") for i in range(90)}
    db = tmp_path / "g.db"
    build_index(papers.values(), db)
    ref = ReferenceBM25({pid: p.text for pid, p in papers.items()})
    given = rng.sample(sorted(papers), 30) + ["not-in-the-index"]
    with RetrievalClient(db=db) as client:
        for query in some_queries(rng, papers):
            expected = {pid: ref.score(pid, query) if pid in papers else 0.0 for pid in given}
            for path in ("blobs", "sql"):
                client.lexical.path = path
                got = client.lexical.scores(query, given)
                assert list(got) == given
                assert all(close(got[pid], expected[pid]) for pid in given), (query, path)


def test_widths_follow_the_values(tmp_path):
    # A count over 255 and a paper over 65,535 tokens take wider columns; doc ids stay offsets from first_doc.
    papers = [Paper("a", "big", " ".join(["big"] * 300), source="t"), Paper("b", "big small", "", source="t")]
    papers.append(Paper("c", "huge", " ".join(f"w{i % 7}" for i in range(70_000)), source="t"))
    db = tmp_path / "wide.db"
    build_index(papers, db)
    with sqlite3.connect(db) as conn:
        rows = dict(
            (term, (df, len(d), len(c), len(n)))
            for term, df, d, c, n in conn.execute(
                "SELECT term, p.df, doc_ids, counts, lengths FROM postings AS p JOIN doc_freq USING (term_id)"
            )
        )
    assert rows["big"] == (2, 4, 4, 4)  # count 301: uint16; lengths 301 and 2: uint16
    assert rows["small"] == (1, 2, 1, 2)
    assert rows["w0"] == (1, 2, 2, 4)  # 10,000 occurrences (uint16) in a 70,000-token paper (uint32)
    assert_blobs_match(db)
    assert_exact(db, {p.id: p for p in papers}, ["big", "big small huge w0 w1"], ks=(1, 3))


def test_the_migration_derives_the_blobs_of_an_existing_index(tmp_path, small_chunks):
    rng = random.Random(7)
    papers = {f"p{i:03d}": zipf_paper(rng, f"p{i:03d}") for i in range(80)}
    db = tmp_path / "old.db"
    build_index(papers.values(), db)
    with sqlite3.connect(db) as conn:
        built = conn.execute(postings.ALL_CHUNKS_SQL).fetchall()
    downgrade(db, "0006")
    with sqlite3.connect(db) as conn:
        assert not conn.execute("SELECT name FROM sqlite_master WHERE name = 'postings'").fetchall()
    upgrade_index(db)
    with sqlite3.connect(db) as conn:
        assert conn.execute(postings.ALL_CHUNKS_SQL).fetchall() == built
    assert_exact(db, papers, some_queries(rng, papers))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_filtered_searches_on_the_blobs_equal_sql_and_the_reference(tmp_path, small_chunks, seed):
    rng = random.Random(seed)
    papers = {f"p{i:03d}": zipf_paper(rng, f"p{i:03d}", year=1990 + i % 20) for i in range(150)}
    db = tmp_path / "f.db"
    build_index(papers.values(), db)
    ref = ReferenceBM25({pid: p.text for pid, p in papers.items()})
    for years in ((1990, 1991), (1995, None), (None, 2008)):
        lo, hi = years[0] or 0, years[1] or 9999
        passing = {pid: p.text for pid, p in papers.items() if lo <= p.year <= hi}
        for query in some_queries(rng, papers):
            expected = [hit for hit in ref.top(query, len(papers)) if hit[0] in passing][:10]
            with RetrievalClient(db=db) as client:
                for path in ("blobs", "sql"):
                    client.lexical.path = path
                    got = client.lexical.search(query, 10, filters=Filters(years=years))
                    assert [p for p, _ in got] == [p for p, _ in expected], (query, years, path)
                    assert all(close(a, b) for (_, a), (_, b) in zip(got, expected, strict=True))


def _weighted(dfs: list[int], n_papers: int) -> WeightedQuery:
    from retrieval.store.database import IndexStats

    stats = IndexStats(n_papers, 100 * n_papers, 2000, 2000, 1.5, 0.75, "t", 1, {})
    terms = tuple(QueryTerm(f"t{i}", i, df, 1, 1.0, 1.0) for i, df in enumerate(dfs))
    return WeightedQuery(Query.parse("x"), terms, stats)


def _plan(wq: WeightedQuery, read: set[int], pruned: bool = True) -> lexical.Plan:
    reads = {t.term_id: t.term_id in read for t in wq.terms}
    return lexical.Plan(1.0, reads, 0.5, pruned)


def test_the_cost_model_plans_short_queries_first_and_sends_long_ones_to_the_blobs(monkeypatch):
    assert "numpy" in sys.modules  # as in a server or an evaluation that has scored a long query
    # A few terms, one rare: planned in SQL first, the path chosen once the plan says what SQL would read...
    assert lexical.blob_path(_weighted([300, 90_000, 200_000], 500_000)) is None
    # ... unless the BLOBs cost less than any SQL plan's two statements.
    assert lexical.blob_path(_weighted([3, 40], 500_000)) is True
    # Many terms, or only common ones: costed before any plan.
    assert lexical.blob_path(_weighted([20_000] * 40, 500_000)) is True
    assert lexical.blob_path(_weighted([90_000, 200_000], 500_000)) is True
    # Once planned: a plan that only looks the common terms up stays in SQL, one that reads them goes to the
    # blobs, and so does one whose pruning is not worth it (the plain aggregation over every posting).
    wq = _weighted([300, 90_000, 200_000], 500_000)
    assert not lexical.blobs_after_plan(wq, _plan(wq, {0}))
    assert lexical.blobs_after_plan(wq, _plan(wq, {0, 1}))
    assert lexical.blobs_after_plan(wq, _plan(wq, {0}, pruned=False))
    # A process without NumPy pays its import first: a rare query is planned and stays in SQL, and so does one
    # SQL reads in less than that time, or a query of a few common terms; long queries and SQL's whole reads of
    # common lists still go to the blobs.
    monkeypatch.setattr(costs, "NUMPY", costs.Import("numpy", costs.NUMPY_IMPORT_COST))
    monkeypatch.delitem(sys.modules, "numpy")
    small = _weighted([3, 40], 500_000)
    assert lexical.blob_path(small) is None
    assert not lexical.blobs_after_plan(small, _plan(small, {0, 1}, pruned=False))
    medium = _weighted([300, 9_000], 500_000)
    assert not lexical.blobs_after_plan(medium, _plan(medium, {0, 1}))
    assert lexical.blobs_after_plan(wq, _plan(wq, {0, 1}))
    assert lexical.blob_path(_weighted([5_000, 6_000], 500_000)) is False
    assert lexical.blob_path(_weighted([20_000] * 40, 500_000)) is True
    # ... until the queries the import's charge kept in SQL have cost, as the model expects them, the import more
    # than the BLOBs would have: the next such query goes to the BLOBs.
    already = costs.NUMPY.forgone
    assert 0 < already < costs.NUMPY_IMPORT_COST
    each = costs.sql_unplanned(11_000, 2, False) - costs.blobs_imported(11_000, 2, 500_000)
    kept = 0
    while lexical.blob_path(_weighted([5_000, 6_000], 500_000)) is False:
        kept += 1
        assert kept < 1000
    assert kept == math.ceil((costs.NUMPY_IMPORT_COST - already) / each)
    assert lexical.blob_path(small) is True and costs.NUMPY.charge() == 0.0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1e5), st.floats(0, 1e5)), max_size=60), st.floats(1, 1e5))
def test_an_import_is_charged_until_what_it_kept_away_has_cost_as_much(choices, cost):
    """The break-even rule: the charge stops once the forgone differences reach the import's cost, and what was
    forgone never exceeds it by more than the last query's difference (at most twice the import in all)."""
    from retrieval.search.costs import Import

    module = Import("retrieval_no_such_module", cost)
    forgone = 0.0
    for taken, imported in choices:
        before = module.charge()
        assert before == (cost if forgone < cost else 0.0)
        module.forgo(taken, imported)
        if before and taken > imported:
            assert module.forgone <= max(forgone, cost) + (taken - imported)
            forgone += taken - imported
        assert module.forgone == pytest.approx(forgone, abs=1e-6)
    assert Import("json", cost).charge() == 0.0  # a module imported costs nothing


_LONG_LIVED = """\
import json, sys
from retrieval import RetrievalClient, Trace
from retrieval.search import costs
query, runs, trace = sys.argv[2], [], Trace()
with RetrievalClient(sys.argv[1], tracer=trace) as client:
    while len(runs) < 2000:
        ran = len(trace.statements)
        hits = client.lexical.search(query, 5)
        runs.append({"numpy": "numpy" in sys.modules, "statements": [s.name for s in trace.statements[ran:]],
                     "hits": [[p, round(x, 9)] for p, x in hits]})
        if runs[-1]["numpy"]:
            break
print(json.dumps({"runs": runs, "forgone": costs.NUMPY.forgone, "cost": costs.NUMPY_IMPORT_COST}))
"""


def test_a_long_lived_process_of_short_queries_imports_numpy_once_sql_has_cost_as_much(demo_db, tmp_path):
    """A process that never imported NumPy answered every short query in SQL for its whole life (the import's
    charge outweighed any one query's saving): a command of one query still does, a long-lived one goes to the
    BLOBs once the queries kept in SQL have cost the import, as the cost model expects them."""
    import subprocess

    query = "perplexity of the retrieval index"
    done = subprocess.run(
        [sys.executable, "-c", _LONG_LIVED, str(demo_db), query], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    runs = out["runs"]
    assert 2 < len(runs) < 2000, len(runs)
    assert not any(run["numpy"] for run in runs[:-1])  # the first queries: SQL, no import
    assert not any(POSTINGS_STATEMENT in run["statements"] for run in runs[:-1])
    assert runs[-1]["numpy"] and POSTINGS_STATEMENT in runs[-1]["statements"]
    assert out["forgone"] >= out["cost"]
    with RetrievalClient(demo_db) as client:
        expected = [[p, round(x, 9)] for p, x in client.lexical.search(query, 5, exhaustive=True)]
    assert expected and all(run["hits"] == expected for run in runs)


def test_a_planned_query_takes_the_path_its_plan_costs_least(demo_db, monkeypatch):
    query = "perplexity of the retrieval index"
    with RetrievalClient(demo_db) as client:
        expected = client.lexical.search(query, 5, exhaustive=True)
    # The BLOBs cost more than SQL's least (so the query is planned first), then either path costs the most.
    for dearer, absent in (
        ({"BLOB_FIXED_COST": 20_000.0, "SQL_PLANNED_COST": 1e9, "SQL_POSTING_COST": 1e9}, "lexical: top-k"),
        ({"BLOB_FIXED_COST": 1e9}, POSTINGS_STATEMENT),
    ):
        for name, value in {
            "BLOB_FIXED_COST": 200.0,
            "SQL_PLANNED_COST": 0.5,
            "SQL_POSTING_COST": 1.0,
            **dearer,
        }.items():
            monkeypatch.setattr(costs, name, value)
        trace = Trace()
        with RetrievalClient(demo_db, tracer=trace) as client:
            assert client.lexical.search(query, 5) == expected
        names = [s.name for s in trace.statements]
        assert names.count("lexical: threshold") == 1, names  # planned first either way
        assert not any(name.startswith(absent) for name in names), (dearer, names)


def test_on_a_postgresql_server_the_cost_model_counts_sql_dearer(demo_db, demo_pg, demo_sharded, monkeypatch):
    # Each of SQL's statements is a round trip there (on a sharded index, to every shard): a query SQLite plans
    # first and keeps in SQL goes straight to the BLOBs on a server and on a coordinator (which counted SQL as
    # SQLite does, and ran the file's statements on every shard).
    wq = _weighted([300, 40_000, 60_000], 100_000)
    assert lexical.blob_path(wq) is None and not lexical.blobs_after_plan(wq, _plan(wq, {0}))
    assert lexical.blob_path(wq, costs.sql_factor("postgresql")) is True
    assert costs.sql_factor("sqlite") == 1.0
    # Each backend's searches take its own factor: with the server's made huge, a query SQLite plans and answers
    # in SQL is answered from the BLOBs there, unplanned, with the same top 5.
    query = "perplexity of the retrieval index"
    with RetrievalClient(demo_db) as client:
        expected = client.lexical.search(query, 5, exhaustive=True)
    for name, value in {"BLOB_FIXED_COST": 20_000.0, "SQL_PLANNED_COST": 0.5, "SQL_POSTING_COST": 1.0}.items():
        monkeypatch.setattr(costs, name, value)
    monkeypatch.setitem(costs.SQL_FACTOR, "postgresql", 1e6)
    for db, planned in ((demo_db, True), (demo_pg, False), (demo_sharded, False)):
        trace = Trace()
        with RetrievalClient(db, tracer=trace) as client:
            got = client.lexical.search(query, 5)
            with client._executor.snapshot() as snap:
                assert lexical.sql_factor(snap) == (1.0 if planned else 1e6)
        assert [p for p, _ in got] == [p for p, _ in expected]
        assert all(abs(a - b) <= 1e-9 for (_, a), (_, b) in zip(got, expected, strict=True))
        names = [s.name for s in trace.statements]
        assert ("lexical: threshold" in names) is planned, (db, names)
        assert any(name.startswith("lexical: top-k") for name in names) is planned, (db, names)


def test_search_sql_shows_the_blob_read_of_a_long_query(demo_db, capsys, monkeypatch):
    from retrieval.search import blobs

    monkeypatch.setattr(blobs, "CACHE", blobs._Cache(2**30))  # as in a fresh process: nothing kept yet
    # Every demo paper has these words: the cost model sends the query to the blobs (numpy is loaded here).
    query = "this study reports perplexity accuracy wall time attention sparsity retrieval passage index"
    trace = Trace()
    with RetrievalClient(demo_db, tracer=trace) as client:
        client.lexical.search(query, 10)
    names = [s.name for s in trace.statements]
    assert POSTINGS_STATEMENT in names and "lexical: the best papers' ids" in names
    assert not any(name.startswith("lexical: top-k") for name in names)
    blobs.CACHE.clear()  # a fresh `retrieval search` process
    main(["search", query, "--db", str(demo_db), "--sql", "--expand", "never"])
    out = capsys.readouterr().out
    assert "FROM postings AS p" in out and "lexical: top-k" not in out


def test_blob_scores_are_the_sql_parts_operation_for_operation():
    from retrieval.search.blobs import _Chunk, _Scoring

    rng = np.random.default_rng(0)
    counts = rng.integers(1, 40, 500).astype(np.uint16)
    lengths = rng.integers(1, 3000, 500).astype(np.uint16)
    conn = sqlite3.connect(":memory:")
    params = {"k1": 1.5, "b": 0.75, "avgdl": 123.456, "w": 2.75}
    sql = f"SELECT :w * {TF_NORM_SQL} FROM (SELECT :c AS count) AS tf, (SELECT :l AS length) AS dl"
    pairs = zip(counts.tolist(), lengths.tolist(), strict=True)
    expected = [conn.execute(sql, {**params, "c": c, "l": n}).fetchone()[0] for c, n in pairs]
    got = _Scoring(1.5, 0.75, 123.456).raw_parts(2.75, counts, lengths)
    assert got.tolist() == expected  # the same doubles, not merely close ones
    scoring = _Scoring(1.5, 0.75, 123.456)  # and from a decoded chunk's counts and denominators
    _, c, n = _Chunk(postings.encode(7, np.arange(500), counts, lengths)).decoded(scoring)
    assert scoring.parts(2.75, c, n).tolist() == expected


def test_decoded_postings_are_kept_for_one_generation_of_the_index(tmp_path, small_chunks, monkeypatch):
    from retrieval.search import blobs

    monkeypatch.setattr(blobs, "CACHE", blobs._Cache(2**30))
    rng = random.Random(3)
    papers = {f"p{i:03d}": zipf_paper(rng, f"p{i:03d}") for i in range(80)}
    db = tmp_path / "g.db"
    build_index(papers.values(), db)
    query = "v0 v1 v2 v3 v5 v8 v13"

    def search() -> tuple[list, int]:
        trace = Trace()
        with RetrievalClient(db, tracer=trace) as client:
            client.lexical.path = "blobs"
            hits = client.lexical.search(query, 10)
        ref = ReferenceBM25({pid: p.text for pid, p in papers.items()})
        assert [p for p, _ in hits] == [p for p, _ in ref.top(query, 10)]
        return hits, sum(s.name == POSTINGS_STATEMENT for s in trace.statements)

    first, reads = search()
    assert reads == 1 and blobs.CACHE.held > 0
    again, reads = search()  # a new client, the same index state: nothing read
    assert again == first and reads == 0
    more = {f"x{i:03d}": zipf_paper(rng, f"x{i:03d}", (30, 90)) for i in range(20)}
    add_papers(more.values(), db)  # a new generation: read again, and the answer follows the add
    papers.update(more)
    after, reads = search()
    assert reads == 1 and after != first
    gone = sorted(papers)[::3]
    remove_papers(gone, db)
    for pid in gone:
        del papers[pid]
    assert search()[1] == 1
    with pytest.raises(ConfigError, match="RETRIEVAL_POSTINGS_CACHE_MB is 'lots'"):
        blobs._cache_limit("lots")
    assert blobs._cache_limit("0") == 0 and blobs._cache_limit("1.5") == 3 * 2**19
    # Past its limit the cache lets its least recently used terms go.
    small = blobs._Cache(4_000)
    monkeypatch.setattr(blobs, "CACHE", small)
    search()
    assert 0 < small.held <= 4_000


def _reference_kth(values: np.ndarray, k: int, floor: float = 0.0) -> float:
    """The threshold as a partition of every value that reaches ``floor`` takes it (what ``_kth`` must equal)."""
    from retrieval.bm25 import BOUND_SLACK, TIE_SLACK

    if floor > 0:
        values = values[values >= floor]
    if len(values) < k:
        return floor
    kth = float(np.partition(values, len(values) - k)[len(values) - k])
    return max(floor, kth * (1.0 - BOUND_SLACK) - TIE_SLACK)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(1, 12),
    st.integers(0, 3_000),
    st.sampled_from([0.0, 0.5, 0.9, 0.999, 1.0]),
    st.sampled_from([0.0, 0.3, 2.0, 50.0]),
)
def test_the_threshold_equals_a_partition_of_every_partial_score(seed, k, size, zeros, floor):
    """``_kth`` partitions only the values that reach a bound of the k-th largest (the maxima of strided groups):
    the same threshold as a partition of them all, on arrays of mostly zeros (the dense array early on), of ties
    (few distinct parts), and under a floor."""
    from retrieval.search.blobs import KTH_GROUP, _kth

    rng = np.random.default_rng(seed)
    values = rng.choice([0.25, 0.5, 1.0, 1.5, 3.0], size) if seed % 3 == 0 else rng.random(size) * 10
    values[rng.random(size) < zeros] = 0.0
    assert _kth(values, k, floor) == _reference_kth(values, k, floor), (size, k, floor)
    if size >= KTH_GROUP * k:  # the grouped bound's own claim: at least k values reach it
        from retrieval.search.blobs import _kth_bound

        assert (values >= _kth_bound(values, k)).sum() >= k


def test_a_chunk_marked_kept_by_another_thread_while_gathered_leaves_the_batch_aligned():
    """Short chunks are unpacked in one batch, each chunk then taking its span of it; another thread's search may
    mark a chunk kept (``CACHE``) while this one gathers. Which chunks the batch holds is decided once: the
    spans stay those of the chunks unpacked (they were decided twice, and a chunk marked in between shifted every
    span after it: a wrong-shape error under threads, or parts given to the wrong papers)."""
    from retrieval.search.blobs import _Chunk, _gathered, _Scoring

    class MarkedMidway(_Chunk):
        """A chunk that another thread marks kept right after this one first asks."""

        __slots__ = ("asked",)

        @property
        def keep(self) -> bool:
            self.asked = getattr(self, "asked", 0) + 1
            return self.asked > 1

        @keep.setter
        def keep(self, value: bool) -> None:
            pass

    rng = np.random.default_rng(11)
    docs = np.sort(rng.choice(np.arange(1, 50_000), 2_100, replace=False))
    counts = rng.integers(1, 9, len(docs))
    lengths = rng.integers(20, 400, len(docs))
    scoring = _Scoring(1.5, 0.75, 120.0)
    rows = [postings.encode(7, docs[a : a + 700], counts[a : a + 700], lengths[a : a + 700]) for a in (0, 700, 1400)]
    weights = [1.0, 2.0, 3.0]
    expected = _gathered(list(zip(weights, [_Chunk(row) for row in rows], strict=True)), scoring)
    chunks = [_Chunk(rows[0]), MarkedMidway(rows[1]), _Chunk(rows[2])]
    got = _gathered(list(zip(weights, chunks, strict=True)), scoring)
    assert chunks[1].asked >= 1  # asked while gathered (kept from its second ask on)
    assert got[0].tolist() == expected[0].tolist() == docs.tolist()
    assert got[1].tolist() == expected[1].tolist()


# Doc ids of a chunk: spanning more than 65,535 with every gap below (2-byte gaps), with one gap above (4-byte
# offsets), or spanning less (2-byte offsets).
LAYOUTS = {
    "gaps": lambda rng: np.sort(rng.choice(np.arange(3, 200_000), 3_000, replace=False)),
    "wide": lambda rng: (
        np.sort(rng.choice(np.arange(3, 60_000), 3_000, replace=False)) + np.repeat([0, 140_000], 1_500)
    ),
    "narrow": lambda rng: np.sort(rng.choice(np.arange(3, 60_000), 3_000, replace=False)),
}


@pytest.mark.parametrize("layout, width", [("gaps", 2), ("wide", 4), ("narrow", 2)])
@pytest.mark.parametrize("keep", [False, True])
def test_a_chunk_scored_whole_adds_the_sql_parts_whichever_way_it_is_decoded(keep, layout, width):
    """A chunk scored whole adds to the dense array the doubles ``_Scoring.parts`` gives (the SQL's, operation for
    operation): decoded into the thread's scratch arrays, or kept decoded; its doc ids in each layout (2-byte gaps,
    4-byte or 2-byte offsets), counts above 255 and lengths above 65,535 (wider columns). Short chunks unpacked
    together (of mixed layouts), and postings found in chunks as stored or decoded, give the same doubles."""
    from retrieval.search.blobs import _add_found, _Chunk, _Scoring, _Term, _unpacked

    rng = np.random.default_rng(5)
    docs = LAYOUTS[layout](rng)
    counts = rng.integers(1, 400, len(docs))
    lengths = rng.integers(400, 90_000, len(docs))
    scoring = _Scoring(1.5, 0.75, 5432.1)
    chunk = _Chunk(postings.encode(7, docs, counts, lengths))
    assert [len(b) // len(docs) for b in chunk.packed] == [width, 2, 4]
    assert postings.gapped(chunk.packed[0], chunk.df, chunk.last - chunk.first) == (layout == "gaps")
    chunk.keep = keep
    expected = scoring.raw_parts(1.7, counts, lengths)
    acc = np.zeros(200_001)
    chunk.add_to(acc, 1.7, scoring)
    assert acc[docs].tolist() == expected.tolist()  # the same doubles
    assert np.count_nonzero(acc) == len(docs)
    assert (chunk.whole is not None) == keep  # kept decoded only when the cache says the term is read again
    again = np.zeros(200_001)
    chunk.add_to(again, 1.7, scoring)  # from the kept arrays, or decoded again
    assert again.tolist() == acc.tolist()
    # Several short chunks at once: the same doc ids, counts as doubles and denominators as each decoded alone.
    cuts = [(0, 1500), (1500, 2200), (2200, 3000)]  # of mixed layouts: a long piece of "gaps" spans over 65,535
    pieces = [_Chunk(postings.encode(7, docs[a:z], counts[a:z], lengths[a:z])) for a, z in cuts]
    together = _unpacked(pieces, scoring)
    alone = [piece.decoded(scoring) for piece in pieces]
    for got, parts in zip(together, zip(*alone, strict=True), strict=True):
        assert got.tolist() == np.concatenate(parts).tolist()
    # Short chunks of terms of different weights gathered (some kept decoded), into fresh arrays or scratch ones
    # smaller than the batch (grown) and then larger (a prefix): each posting's part is the SQL's.
    from retrieval.search.blobs import _gathered, _Scratch, _scratch

    weights = [1.7 * (1 + i % 3) for i in range(len(pieces))]
    pairs = list(zip(weights, pieces, strict=True))
    sql = np.concatenate(
        [scoring.raw_parts(w, counts[a:z], lengths[a:z]) for w, (a, z) in zip(weights, cuts, strict=True)]
    )
    for into in (None, _scratch(len(docs)), _Scratch(len(docs) + 5_000)):
        got_docs, got_parts = _gathered(pairs, scoring, into)
        assert got_docs.tolist() == docs.tolist() and got_parts.tolist() == sql.tolist()
    pieces[1].keep = True
    got_docs, got_parts = _gathered(pairs, scoring, _scratch(len(docs)))  # in the pairs' order, one kept or not
    assert got_docs.tolist() == docs.tolist() and got_parts.tolist() == sql.tolist()
    pieces[1].keep, pieces[1].whole = False, None
    # Postings found for some papers (and some the chunks lack), as stored and once kept decoded.
    wanted = np.unique(np.concatenate([docs[::7], docs[::11] + 1]))
    term = _Term(pieces, 1.7, 1e9)
    found = np.zeros(len(wanted))
    _add_found(term, wanted, found, scoring)
    holds = np.isin(wanted, docs)
    assert found[holds].tolist() == expected[np.isin(docs, wanted)].tolist()
    assert not found[~holds].any()
    for piece in pieces:
        piece.keep = True
        piece.decoded(scoring)
    decoded = np.zeros(len(wanted))
    _add_found(term, wanted, decoded, scoring)
    assert decoded.tolist() == found.tolist()


@pytest.mark.parametrize("short", [0, 10**9])
def test_a_chunk_whose_bounds_are_not_its_postings_is_refused_however_it_is_scored(demo_db, tmp_path, monkeypatch,
                                                                                   short):  # fmt: skip
    """Decoded whole alone (``SHORT_CHUNK`` 0) or unpacked with the other short chunks, a row whose max_count
    understates its postings is a damaged index, not a wrong score."""
    from retrieval.search import blobs

    monkeypatch.setattr(blobs, "SHORT_CHUNK", short)
    monkeypatch.setattr(blobs, "CACHE", blobs._Cache(0))
    db = tmp_path / "edited.db"
    source = sqlite3.connect(f"file:{demo_db}?mode=ro", uri=True)
    target = sqlite3.connect(db)
    source.backup(target)
    target.execute("UPDATE postings SET max_count = max_count - 1 WHERE max_count > 1")
    target.commit()
    source.close()
    target.close()
    query = "this study reports perplexity accuracy wall time attention sparsity retrieval passage index"
    with RetrievalClient(db) as client:
        client.lexical.path = "blobs"
        with pytest.raises(NotAnIndexError, match=r"gives max_count .* its postings|below a posting's count"):
            client.lexical.search(query, 10, exhaustive=False)


@pytest.mark.parametrize("column", ["first_doc", "last_doc"])
def test_a_chunk_whose_range_is_not_numbers_is_a_damaged_index(demo_db, tmp_path, monkeypatch, column):
    """A row's ``last_doc`` edited to text raised Python's TypeError (a traceback) once the range said how the
    doc ids are packed; ``first_doc`` as text did from the first. Either is a damaged index, named."""
    from retrieval.search import blobs

    monkeypatch.setattr(blobs, "CACHE", blobs._Cache(0))
    db = tmp_path / "edited.db"
    source = sqlite3.connect(f"file:{demo_db}?mode=ro", uri=True)
    target = sqlite3.connect(db)
    source.backup(target)
    target.execute(f"UPDATE postings SET {column} = 'x' || {column}")  # a column of this module's, not user input
    target.commit()
    source.close()
    target.close()
    with RetrievalClient(db) as client:
        client.lexical.path = "blobs"
        with pytest.raises(NotAnIndexError, match=r"the index is damaged: .* gives documents .*, not numbers"):
            client.lexical.search("attention retrieval index", 10)
    assert main(["check", "--db", str(db)]) == 1


def test_a_querys_scores_are_the_same_doubles_whichever_of_its_terms_the_process_keeps(tmp_path, monkeypatch):
    """A paper's parts are added in the query's order of terms whether a chunk comes kept decoded or packed, so a
    query scores the same doubles (not only the same rounded ranking) on a fresh process and after other queries
    left some of its terms kept."""
    from retrieval.search import blobs

    rng = random.Random(11)
    papers = {f"p{i:04d}": zipf_paper(rng, f"p{i:04d}", length=(30, 90)) for i in range(1500)}
    db = tmp_path / "same.db"
    build_index(papers.values(), db)
    query = " ".join(VOCAB[::2] + VOCAB[1:40:3])

    def scores(*first: str) -> list:
        monkeypatch.setattr(blobs, "CACHE", blobs._Cache(2**30))
        with RetrievalClient(db) as client:
            client.lexical.path = "blobs"
            for text in first:
                client.lexical.search(text, 10)
            return client.lexical.search(query, 200)

    fresh = scores()
    some_kept = " ".join(VOCAB[1:40:3] + VOCAB[60::4])  # read twice: kept decoded; the query's others packed
    assert scores(some_kept, some_kept) == fresh
    assert scores(query, query) == fresh  # every term kept decoded


def test_the_cache_keeps_a_term_decoded_once_it_is_read_again(tmp_path, small_chunks, monkeypatch):
    """A list read once is kept as read (its packed columns, counted so); read again, its chunks are kept decoded
    too (counted at 24 bytes a posting more) and the next scoring reads them from the kept arrays; past the
    limit the least recently used terms go."""
    from retrieval.search import blobs

    cache = blobs._Cache(2**30)
    monkeypatch.setattr(blobs, "CACHE", cache)
    monkeypatch.setattr(blobs, "SHORT_CHUNK", 0)  # every chunk scored whole on its own
    rng = random.Random(9)
    papers = {f"p{i:03d}": zipf_paper(rng, f"p{i:03d}") for i in range(120)}
    db = tmp_path / "k.db"
    build_index(papers.values(), db)
    query = " ".join(VOCAB[:40])

    def search() -> list:
        with RetrievalClient(db) as client:
            client.lexical.path = "blobs"
            return client.lexical.search(query, 10)

    first = search()
    held = dict(cache._terms)
    assert held and all(not chunk.keep and chunk.whole is None for chunks, _ in held.values() for chunk in chunks)
    packed = cache.held
    assert packed == sum(size for _, size in held.values())
    generation = next(iter(held))[0]
    assert blobs.holds(generation, next(iter(held))[1]) and not blobs.holds("other", next(iter(held))[1])
    assert not blobs.holds(None, 1) and not blobs.holds(generation, None)
    assert search() == first
    decoded = sum(chunk.df for chunks, _ in held.values() for chunk in chunks)
    assert cache.held == packed + blobs.DECODED_BYTES * decoded  # every term of the query read again
    assert all(chunk.keep for chunks, _ in cache._terms.values() for chunk in chunks)
    assert any(chunk.whole is not None for chunks, _ in cache._terms.values() for chunk in chunks)
    assert search() == first
    # A limit that holds the packed lists but not all of them decoded: promoted terms push the oldest out.
    small = blobs._Cache(packed + blobs.DECODED_BYTES * decoded // 2)
    monkeypatch.setattr(blobs, "CACHE", small)
    assert search() == first and small.held == packed
    assert search() == first
    assert 0 < small.held <= small.limit and len(small._terms) < len(held)
    assert small.held == sum(size for _, size in small._terms.values())


# -- PostgreSQL: the same table as bytea, written by the same writer, read by the same code ---------------------
def test_postgresql_keeps_the_blobs_and_scores_them_as_sqlite(request, tmp_path, pg_database):
    import psycopg

    from retrieval.config import resolve_db
    from retrieval.store.postgres.build import build_postgres

    rng = random.Random(11)
    papers = {f"p{i:03d}": zipf_paper(rng, f"p{i:03d}") for i in range(120)}
    url = pg_database("blobs")
    build_postgres(papers.values(), resolve_db(url))
    lite = tmp_path / "lite.db"
    build_index(papers.values(), lite)

    def check_server():
        with psycopg.connect(url) as conn:
            conn.execute("SET search_path TO retrieval")
            assert postings.check(conn) == []

    def compare():
        queries = some_queries(rng, papers)
        with RetrievalClient(db=url) as server, RetrievalClient(db=lite) as local:
            server.lexical.path = "blobs"
            for query in queries:
                got = server.lexical.search(query, 10)
                expected = local.lexical.search(query, 10, exhaustive=True)
                assert [p for p, _ in got] == [p for p, _ in expected], query
                assert all(close(a, b) for (_, a), (_, b) in zip(got, expected, strict=True))

    check_server()
    compare()
    added = {f"x{i:03d}": zipf_paper(rng, f"x{i:03d}", (40, 120)) for i in range(20)}
    for target in (url, lite):
        add_papers(added.values(), resolve_db(target) if target == url else target)
    papers.update(added)
    gone = rng.sample(sorted(papers), 40)
    for target in (url, lite):
        remove_papers(gone, resolve_db(target) if target == url else target)
    for pid in gone:
        del papers[pid]
    check_server()
    compare()
    trace = Trace()
    with RetrievalClient(db=url, tracer=trace) as server:
        server.lexical.path = "blobs"
        server.lexical.search(papers[sorted(papers)[0]].text, 10)
    assert sum(s.name == POSTINGS_STATEMENT for s in trace.statements) == 1  # one round trip for every list
    assert json.loads(json.dumps([s.params for s in trace.statements if s.name == POSTINGS_STATEMENT]))


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_process_keeps_every_papers_id_after_repeated_lookups_and_never_past_a_write(
    request, tmp_path, small_chunks, monkeypatch, backend
):
    """From the ``IDS_AFTER``-th lookup of the best papers' ids at one index state, the process reads every
    paper's id once and looks them up in memory: the answers stay the reference's, the statement stops running;
    an add or a remove is a new state, looked up by statement again and never answered from the old ids; a
    budget too small for them keeps none."""
    from retrieval.config import resolve_db
    from retrieval.search import blobs
    from retrieval.store.postgres.build import build_postgres

    monkeypatch.setattr(blobs, "CACHE", blobs._Cache(2**30))
    monkeypatch.setattr(blobs, "PAPER_IDS", blobs.PaperIds())
    monkeypatch.setattr(blobs, "IDS_AFTER", 3)
    rng = random.Random(5)
    papers = {f"p{i:03d}": zipf_paper(rng, f"p{i:03d}") for i in range(90)}
    if backend == "sqlite":
        db = target = tmp_path / "ids.db"
        build_index(papers.values(), db)
    else:
        db = request.getfixturevalue("pg_database")("blobids")
        target = resolve_db(db)
        build_postgres(papers.values(), target)
    queries = [" ".join(rng.choices(VOCAB, weights=WEIGHTS, k=rng.randint(3, 40))) for _ in range(6)]

    def run(query: str) -> list[str]:
        """The statements of one search (a new client each time, as new requests of one process), its answer
        checked against the reference."""
        trace = Trace()
        with RetrievalClient(db, tracer=trace) as client:
            client.lexical.path = "blobs"
            hits = client.lexical.search(query, 10)
        expected = ReferenceBM25({pid: p.text for pid, p in papers.items()}).top(query, 10)
        assert [p for p, _ in hits] == [p for p, _ in expected], query
        assert all(close(a, b) for (_, a), (_, b) in zip(hits, expected, strict=True)), query
        return [s.name for s in trace.statements]

    lookup = "lexical: the best papers' ids"
    names = [run(q) for q in queries]
    assert [lookup in n for n in names] == [True, True, False, False, False, False]
    assert [n.count(blobs.ALL_PAPER_IDS_STATEMENT) for n in names] == [0, 0, 1, 0, 0, 0]
    newcomer = Paper("z-new", "v119 v119 v118", "v117 v119 v118 v116", 2001, source="t")
    add_papers([newcomer], target)  # a new state: its ids looked up again, the new paper among them
    papers[newcomer.id] = newcomer
    after = run("v119 v118 v117")
    assert lookup in after and blobs.ALL_PAPER_IDS_STATEMENT not in after
    for q in queries[:3]:
        run(q)
    remove_papers([newcomer.id, "p000"], target)
    del papers[newcomer.id], papers["p000"]
    assert lookup in run("v119 v118 v117")  # the ids kept before the remove name a paper no longer there
    monkeypatch.setattr(blobs, "PAPER_IDS", blobs.PaperIds())
    monkeypatch.setattr(blobs, "CACHE", blobs._Cache(blobs.ID_BYTES * len(papers)))  # a quarter is too little
    assert all(lookup in run(q) for q in queries)


@pytest.mark.parametrize("value", ["'xx'", "12345", "100000000000000"])
def test_a_postings_column_that_is_no_blob_is_damage_not_a_traceback(demo_db, tmp_path, monkeypatch, capsys, value):
    """A TEXT value was ``TypeError: string argument without an encoding`` (in `check` and a search), an integer
    n became n zero bytes (a MemoryError for a large one)."""
    from retrieval.interfaces.cli import main
    from retrieval.search import blobs

    monkeypatch.setattr(blobs, "CACHE", blobs._Cache(0))
    db = tmp_path / "edited.db"
    db.write_bytes(demo_db.read_bytes())
    with sqlite3.connect(db) as conn:
        conn.execute(f"UPDATE postings SET counts = {value}")  # every row: whichever terms a query reads
    assert main(["check", "--db", str(db)]) == 1
    assert "values where its columns are BLOBs" in capsys.readouterr().out
    query = "this study reports perplexity accuracy wall time attention sparsity retrieval passage index"
    with RetrievalClient(db) as client:
        client.lexical.path = "blobs"
        with pytest.raises(NotAnIndexError, match="values where its columns are BLOBs"):
            client.lexical.search(query, 10, exhaustive=False)


@given(
    st.lists(st.integers(0, 2**31), min_size=1, max_size=300, unique=True),
    st.sampled_from([1, 100, 40_000, 70_000]),
)
def test_a_chunks_doc_ids_round_trip_in_the_narrowest_layout(ids, scale):
    """Any ascending doc ids come back from their ``doc_ids`` column as they went in, in 2 bytes each where the
    span (offsets) or every gap (gaps) fits in 16 bits, else 4; the layout is told by the width and the span."""
    docs = np.unique(np.array(ids, dtype=np.int64) // scale)
    ones = np.ones(len(docs), dtype=np.int64)
    row = postings.encode(3, docs, ones, ones)
    span, gaps = int(docs[-1] - docs[0]), np.diff(docs)
    fits = span < postings.GAPS_FROM or int(gaps.max()) < postings.GAPS_FROM
    assert len(row[6]) == (2 if fits else 4) * len(docs)
    assert postings.gapped(row[6], len(docs), span) == (fits and span >= postings.GAPS_FROM)
    assert postings.decode(row[1], row[2], row[3], *row[6:9])[0].tolist() == docs.tolist()
    assert (postings.offsets(row[6], len(docs), span) + docs[0]).tolist() == docs.tolist()


def _layouts(db) -> dict[str, int]:
    """How many rows of ``postings`` keep their doc ids in each layout."""
    out = {"gaps": 0, "wide": 0, "narrow": 0}
    with sqlite3.connect(db) as conn:
        for first, last, df, doc_ids in conn.execute("SELECT first_doc, last_doc, df, doc_ids FROM postings"):
            if postings.gapped(doc_ids, df, last - first):
                out["gaps"] += 1
            else:
                out["wide" if len(doc_ids) == 4 * df else "narrow"] += 1
    return out


def _all_postings(db) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT * FROM postings ORDER BY term_id, first_doc").fetchall()
    return [(r[0], postings.decode(r[1], r[2], r[3], *r[6:9])[0].tolist()) for r in rows]


def test_a_corpus_of_more_than_65536_papers_keeps_gaps_exact_through_every_writer_and_the_upgrade(tmp_path):
    """Past 65,536 papers a common term's chunk spans more doc ids than 2-byte offsets hold: it keeps 2-byte gaps
    (schema 0011), and a term whose papers lie further apart than that keeps 4-byte offsets. The top k stays the
    SQL's and the reference's through a build, an add (appending to gapped chunks), a remove (rewriting them), and
    a downgrade to 0010 (4-byte offsets again) and back, which restores the same bytes."""
    rng = random.Random(3)
    n = 70_000
    papers = {}
    for i in range(n):
        words = rng.choices(VOCAB, weights=WEIGHTS, k=3) + (["farapart"] if i in (0, n - 1) else [])
        papers[f"p{i:05d}"] = Paper(f"p{i:05d}", " ".join(words), "", year=2000, source="t")
    db = tmp_path / "wide.db"
    build_index(papers.values(), db)
    layouts = _layouts(db)
    assert layouts["gaps"] >= 100 and layouts["wide"] >= 1, layouts  # farapart: a gap of 69,999
    queries = ["v0 v3 v7", "v2 farapart", " ".join(VOCAB[::2]), "v119 v118 v1"]
    assert_blobs_match(db)
    assert_exact(db, papers, queries, ks=(10,))
    added = {f"x{i:03d}": zipf_paper(rng, f"x{i:03d}", (3, 8)) for i in range(30)}
    add_papers(added.values(), db)
    papers.update(added)
    gone = [f"p{i:05d}" for i in range(0, n, 997)]  # p00000 among them: farapart left with one paper
    remove_papers(gone, db)
    for pid in gone:
        del papers[pid]
    assert_blobs_match(db)
    assert_exact(db, papers, queries, ks=(10,))
    assert main(["check", "--db", str(db)]) == 0
    with sqlite3.connect(db) as conn:
        before = conn.execute("SELECT * FROM postings ORDER BY term_id, first_doc").fetchall()
    decoded = _all_postings(db)
    downgrade(db, "0010")
    assert _layouts(db)["gaps"] == 0 and _all_postings(db) == decoded
    upgrade_index(db)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT * FROM postings ORDER BY term_id, first_doc").fetchall() == before


@pytest.mark.parametrize(
    "edit",
    [
        "df = 0",  # no postings
        "df = 1000000",  # more than a row holds
        "doc_ids = x'00'",  # a column too short for its df
        "counts = 7",  # a number where a BLOB belongs
        "first_doc = 'a'",  # text where a number belongs
    ],
)
def test_a_damaged_postings_row_is_named_alike_by_check_a_search_and_an_add(demo_db, tmp_path, monkeypatch, edit):
    """One check of a row's shape (``postings.shape_problem``) serves the writers, a search and ``retrieval check``:
    each names the row's problem in the same words (a search that reads an edited df sees first that it no
    longer sums to ``doc_freq``'s, and says so). ``check`` had a copy of its own that said a df of 0 as "columns
    of [...] bytes"."""
    from retrieval.search import blobs

    monkeypatch.setattr(blobs, "CACHE", blobs._Cache(0))
    db = tmp_path / "edited.db"
    db.write_bytes(demo_db.read_bytes())
    with sqlite3.connect(db) as conn:
        term_id = conn.execute("SELECT term_id FROM doc_freq WHERE term = 'attention'").fetchone()[0]
        conn.execute(f"UPDATE postings SET {edit} WHERE term_id = :t", {"t": term_id})  # edits of this test's own
        row = conn.execute(
            "SELECT first_doc, last_doc, df, doc_ids, counts, lengths FROM postings WHERE term_id = :t", {"t": term_id}
        ).fetchone()
    problem = postings.shape_problem(*row)
    assert problem, row
    checked = tmp_path / "check.txt"
    with open(checked, "w", encoding="utf-8") as out:
        monkeypatch.setattr(sys, "stdout", out)
        assert main(["check", "--db", str(db)]) == 1
    monkeypatch.undo()
    assert problem in checked.read_text(encoding="utf-8")
    with RetrievalClient(db) as client:
        client.lexical.path = "blobs"
        with pytest.raises(NotAnIndexError) as searched:
            client.lexical.search("attention", 10)
    assert problem in str(searched.value) or (edit.startswith("df") and "doc_freq" in str(searched.value))
    if edit == "df = 1000000":  # a row that says it is full: an add starts the next row and rewrites none
        return
    paper = Paper(id="new-1", title="Attention again", abstract="attention attention", year=2024)
    with pytest.raises(Exception) as added:  # the row the new paper's posting joins
        add_papers([paper], db)
    assert problem in str(added.value)
