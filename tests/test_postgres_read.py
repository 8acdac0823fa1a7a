"""The read path on PostgreSQL, against a real server: every search gives what SQLite gives (the same ids in the
same order, scores equal to 1e-9), on the demo corpus, CACM and (slow) hepth; every statement a search runs is a
registered PostgreSQL text; ``--sql``, ``stats``, the open checks, and a reader across a rebuild.

Needs ``$RETRIEVAL_TEST_POSTGRES`` (the fixtures in ``tests/conftest.py``); no mocks."""

from __future__ import annotations

import json
import re

import pytest

from retrieval import RetrievalConfig
from retrieval.bm25 import TF_NORM_SQL_POSTGRESQL, tf_norm
from retrieval.commands import add, build, stats
from retrieval.errors import IndexNotFoundError, NotAnIndexError, PaperNotFoundError
from retrieval.interfaces.cli import main
from retrieval.search.client import RetrievalClient
from retrieval.search.filters import Filters
from retrieval.store.sql.dialect import registered
from retrieval.store.sql.executor import Trace
from tests.helpers import paper, shared_corpus, write_jsonl

psycopg = pytest.importorskip("psycopg")

TOLERANCE = 1e-9

DEMO_QUERIES = [
    "attention sparsity",  # ties: papers of equal score, ordered by id
    "retrieval augmentation passage index",
    "low rank adapters fine tuning",
    "dataset distillation synthetic compact training",
    "evaluation harnesses benchmark task",
    "this study reports perplexity accuracy wall time",  # every paper matches
    "attention attention routing",  # a repeated token
    "nothing matches zyzzyva",
]


def _queries(name: str, count: int) -> list[str]:
    path = shared_corpus(name).parent / "queries-dev.jsonl"
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line)["query"] for line in handle][:count]


CACM_SHORT = ["parallel algorithms", "computer programming language", "operating system time sharing",
              "sorting", "matrix inversion", "compiler optimization loops"]  # fmt: skip


@pytest.fixture(scope="module")
def cacm_pg(pg_database, cacm_db) -> str:
    """CACM on PostgreSQL (the URL), from the same corpus file as ``cacm_db``."""
    url = pg_database("cacm")
    build(db=url, source=cacm_db[1])
    return url


@pytest.fixture(scope="module")
def cacm_sharded(sharded_database, cacm_db) -> str:
    """CACM on a coordinator and two shard servers (the coordinator's URL)."""
    url, shards = sharded_database("cacm")
    build(db=url, source=cacm_db[1], shards=shards)
    return url


@pytest.fixture(scope="module", params=["demo", "cacm", "demo, sharded", "cacm, sharded"])
def pair(request, demo_db, demo_pg, cacm_db):
    """(SQLite client, PostgreSQL client, queries) over the same corpus: the PostgreSQL index on one server, or
    sharded over two (retrieval.store.postgres.shards), which must give what one server gives."""
    corpus, _, sharded = request.param.partition(", ")
    if corpus == "demo":
        lite, queries = demo_db, DEMO_QUERIES
        pg = request.getfixturevalue("demo_sharded") if sharded else demo_pg
    else:
        lite = cacm_db[0]
        pg = request.getfixturevalue("cacm_sharded" if sharded else "cacm_pg")
        queries = CACM_SHORT + _queries("cacm", 12)
    with RetrievalClient(lite) as a, RetrievalClient(pg) as b:
        yield a, b, queries


def same_hits(a: list[tuple[str, float]], b: list[tuple[str, float]]) -> None:
    assert [pid for pid, _ in a] == [pid for pid, _ in b]
    for (pid, x), (_, y) in zip(a, b, strict=True):
        assert abs(x - y) <= TOLERANCE, (pid, x, y)


def same_result(a, b) -> None:
    """Two ``RetrievalResult``s rank the same papers with the same numbers."""
    assert [r.paper.id for r in a.ranked] == [r.paper.id for r in b.ranked]
    for x, y in zip(a.ranked, b.ranked, strict=True):
        for field in ("final_score", "bm25_score", "bm25_norm", "graph_score", "recency_score"):
            assert abs(getattr(x, field) - getattr(y, field)) <= TOLERANCE, (x.paper.id, field)
        assert x.graph_distance == y.graph_distance
        assert (x.paper.title, x.paper.year, x.paper.abstract) == (y.paper.title, y.paper.year, y.paper.abstract)
        assert x.paper.authors == y.paper.authors
        assert x.paper.references == y.paper.references and x.paper.citations == y.paper.citations
        assert [(r.source, r.relation, r.hop) for r in x.reached] == [(r.source, r.relation, r.hop) for r in y.reached]
    assert (a.matched, a.matched_exact, a.hit_count) == (b.matched, b.matched_exact, b.hit_count)
    assert abs(a.top_score - b.top_score) <= TOLERANCE and abs(a.average_score - b.average_score) <= TOLERANCE
    assert a.expansion == b.expansion
    assert a.warnings == b.warnings


# -- the lexical pass ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [1, 10, 100])
def test_lexical_top_k_is_the_same_on_both_pruned_and_exhaustive(pair, k):
    lite, pg, queries = pair
    for query in queries:
        for exhaustive in (False, True):
            same_hits(lite.lexical.search(query, k, exhaustive=exhaustive), pg.lexical.search(query, k, exhaustive))
        assert lite.lexical.matched(query) == pg.lexical.matched(query)


def test_the_pruned_statement_runs_on_postgresql_and_agrees_with_the_plain_aggregation(cacm_db, cacm_pg):
    """The pruned top k (TOP_K_SQL with its lookup stages) ran, not only the plain aggregation, and each plan
    is the same on both (the same thresholds from the same samples)."""
    trace = Trace()
    with RetrievalClient(cacm_db[0]) as lite, RetrievalClient(cacm_pg, tracer=trace) as pg:
        pg.lexical.path = "sql"  # the SQL plan is what this test looks at (the cost model may choose the BLOBs)
        for query in CACM_SHORT + _queries("cacm", 12):
            assert lite.lexical.plan(query, 10) == pg.lexical.plan(query, 10)
            same_hits(pg.lexical.search(query, 10), pg.lexical.search(query, 10, exhaustive=True))
    names = [s.name for s in trace.statements]
    assert "lexical: top-k" in names and "lexical: top-k (plain aggregation)" in names


def test_scores_of_given_papers_are_the_same(pair):
    lite, pg, queries = pair
    ids = [pid for pid, _ in lite.lexical.search(queries[0], 30, exhaustive=True)] + ["no-such-paper"]
    for query in queries[:4]:
        a, b = lite.lexical.scores(query, ids), pg.lexical.scores(query, ids)
        assert list(a) == list(b)
        assert all(abs(a[pid] - b[pid]) <= TOLERANCE for pid in a)


def test_the_postgresql_tf_norm_text_computes_the_same_doubles(demo_pg):
    """``TF_NORM_SQL_POSTGRESQL`` on the server gives exactly ``retrieval.bm25.tf_norm`` (no float4, no numeric)."""
    sql = "SELECT " + TF_NORM_SQL_POSTGRESQL.replace("tf.count", "%(count)s").replace("dl.length", "%(length)s")
    sql = re.sub(r":(\w+)", r"%(\1)s", sql)
    with psycopg.connect(demo_pg) as conn:
        for count, length, avgdl in [(1, 100, 109.39204872272035), (3, 7, 87.5), (12, 1000, 3.3), (2, 1, 1e-3)]:
            got = conn.execute(sql, {"count": count, "length": length, "avgdl": avgdl, "k1": 1.5, "b": 0.75})
            assert got.fetchone()[0] == tf_norm(count, length, avgdl)


# -- filters ---------------------------------------------------------------------------------------------------
def _filters(name: str) -> list[dict]:
    if name == "demo":
        return [{"year": "2020-"}, {"year": "-2019"}, {"year": "2021"}, {"authors": ["Author 1-1"]}]
    return [{"year": "1970-1975"}, {"year": "1960-"}, {"year": "-1962"}, {"authors": ["Smith"]},
            {"authors": ["D. E. Knuth"]}]  # fmt: skip


@pytest.mark.parametrize("corpus", ["demo", "cacm"])
def test_filtered_searches_are_the_same(corpus, request, demo_db, demo_pg, cacm_db):
    lite_db, pg_db = (demo_db, demo_pg) if corpus == "demo" else (cacm_db[0], request.getfixturevalue("cacm_pg"))
    queries = DEMO_QUERIES[:5] if corpus == "demo" else CACM_SHORT
    syntax = (
        ['attention -sparsity', '"low rank" adapters', '"attention sparsity" -routing -head']
        if corpus == "demo"
        else ['programming -language', '"operating system"', '"time sharing" system -ibm', 'sorting year:1965-1970']
    )  # fmt: skip
    with RetrievalClient(lite_db) as lite, RetrievalClient(pg_db) as pg:
        for query in queries:
            for options in _filters(corpus):
                same_result(lite.search(query, **options), pg.search(query, **options))
                filters = Filters.make(year=options.get("year"), authors=options.get("authors", ()))
                for exhaustive in (False, True):
                    same_hits(
                        lite.lexical.search(query, 20, exhaustive, filters),
                        pg.lexical.search(query, 20, exhaustive, filters),
                    )
                assert lite.lexical.matched(query, filters) == pg.lexical.matched(query, filters)
        for query in syntax:
            same_result(lite.search(query), pg.search(query))
            same_result(lite.search(query, offset=5, limit=5), pg.search(query, offset=5, limit=5))


# -- the whole search: the blend, the expansion, the lesson's walk ---------------------------------------------
CONFIGS = {
    "default": RetrievalConfig(),
    "expand always": RetrievalConfig(expand="always"),
    "every relation, two hops": RetrievalConfig(
        expand="always", max_hops=2, relations=("references", "citing", "cocitation", "coupling"), fanout=5
    ),
    "lesson": RetrievalConfig.lesson(),
    "learned": RetrievalConfig(ranking="learned"),  # the shipped model: every relation, always expanding
}


@pytest.mark.parametrize("config", list(CONFIGS))
def test_full_searches_are_the_same(pair, config):
    lite, pg, queries = pair
    cfg = CONFIGS[config]
    for query in queries:
        same_result(lite.search(query, cfg), pg.search(query, cfg))
    same_result(lite.search(queries[0], cfg, limit=3, offset=2), pg.search(queries[0], cfg, limit=3, offset=2))


def test_the_lesson_walk_is_the_same(pair):
    lite, pg, queries = pair
    seeds = [pid for pid, _ in lite.lexical.search(queries[0], 10)]
    for hops in (0, 1, 2):
        a, b = lite.graph.expand(seeds, hops), pg.graph.expand(seeds, hops)
        assert list(a.items()) == list(b.items())
    assert pg.graph.expand(["no-such-paper"], 2) == {}


def test_similar_and_show_are_the_same(pair):
    lite, pg, queries = pair
    top = [pid for pid, _ in lite.lexical.search(queries[1], 5)]
    for seeds, options in (
        (top[:1], {}),
        (top[:3], {"exclude": top[3:5]}),
        (top[:1], {"year": "1970-", "limit": 5, "offset": 2}),
    ):
        a, b = lite.similar(seeds, **options), pg.similar(seeds, **options)
        assert [e.paper.id for e in a.ranked] == [e.paper.id for e in b.ranked]
        for x, y in zip(a.ranked, b.ranked, strict=True):
            assert abs(x.score - y.score) <= TOLERANCE and x.together == y.together and x.shared == y.shared
            assert x.paper.authors == y.paper.authors
        assert (a.matched, a.warnings) == (b.matched, b.warnings)
    for pid in top:
        assert lite.show(pid).to_dict() == pg.show(pid).to_dict()
    with pytest.raises(PaperNotFoundError):
        pg.show("no-such-paper")
    assert lite.papers(top[::-1]).keys() == pg.papers(top[::-1]).keys()


# -- what runs on PostgreSQL -----------------------------------------------------------------------------------
def test_cocitation_and_coupling_alone_are_hash_joined_on_a_single_server(demo_pg):
    """Read sessions plan joins as lookups; the co-citation and coupling statements are allowed hash joins (seconds
    against tenths on hepth), for themselves only."""
    trace = Trace()
    with RetrievalClient(demo_pg, tracer=trace) as pg:
        pg.search("attention sparsity", CONFIGS["every relation, two hops"])
    names = [s.name for s in trace.statements]
    hashed = [i for i, n in enumerate(names) if n.startswith(("expansion: cocitation", "expansion: coupling"))]
    assert hashed
    for i in hashed:
        assert names[i - 1] == "planner: hash joins for the next statement" and names[i + 1] == "planner: lookups again"
    others = [i for i, n in enumerate(names) if n.startswith(("expansion: references", "expansion: citing"))]
    assert others and all(names[i - 1] != "planner: hash joins for the next statement" for i in others)


def test_every_statement_a_search_runs_is_a_registered_postgresql_text(demo_pg, cacm_pg, monkeypatch):
    from retrieval.search import adjacency, blobs

    monkeypatch.setattr(blobs, "IDS_AFTER", 3)  # the best papers' ids looked up, then kept (every paper's read)
    monkeypatch.setattr(adjacency, "GRAPH_RENT", 1e9)  # the edges read by statements until the end
    trace = Trace()
    with RetrievalClient(cacm_pg, tracer=trace) as pg:  # the demo corpus is too small to prune
        for query in CACM_SHORT:
            pg.search(query, RetrievalConfig(top_k_lexical=10, lexical_depth=10), limit=10)
            pg.search(_queries("cacm", 1)[0] + " " + query, limit=10)  # long: scored from the BLOBs
            pg.lexical.path = "sql"
            pg.lexical.search(query, 10)
            pg.lexical.path = None
    with RetrievalClient(demo_pg, tracer=trace) as pg:
        for cfg in CONFIGS.values():
            pg.search("attention sparsity", cfg, year="2019-", authors=["Author 1-1"])
            pg.search('"attention sparsity" -routing', cfg)
            pg.search("this study reports", cfg, year="2020")
            pg.search("attention", cfg)
        pg.lexical.search("attention sparsity", 5, exhaustive=True)
        pg.lexical.scores("attention", ["p001", "p002"])
        pg.similar(["p001", "p002"], exclude=["p003"], year="2019-")
        pg.show("p001")
        monkeypatch.setattr(adjacency, "GRAPH_RENT", 1e-9)  # and the citation graph's reads, once it is kept
        pg.similar(["p001", "p002"])
    texts = set(registered().values())
    ran = {s.name for s in trace.statements}
    assert {"lexical: top-k", "lexical: threshold", "lexical: top-k (plain aggregation)",
            "citation walk (recursive CTE)", "expansion: cocitation, hop 2", "similar: co-cited papers",
            "show: citations", "show: references", "lexical: the query terms' postings (BLOBs)",
            "lexical: the best papers' ids", blobs.ALL_PAPER_IDS_STATEMENT, adjacency.CITATION_COUNT_STATEMENT,
            adjacency.CITATIONS_STATEMENT, adjacency.PAPERS_IN_GRAPH_STATEMENT} <= ran  # fmt: skip
    for statement in trace.statements:
        assert statement.sql in texts, statement.name
    for sqlite, postgresql in registered().items():
        for sqlite_only in ("json_each", "INDEXED BY", "sqlite_master", "json_group_array", "CROSS JOIN term_freq"):
            assert sqlite_only not in postgresql, (sqlite_only, sqlite[:60])
        assert not re.search(r"CROSS JOIN \w+ AS \w+ ON", postgresql), sqlite[:60]


def test_sql_prints_the_postgresql_text(demo_pg, capsys):
    assert main(["search", "attention sparsity", "--sql", "--db", demo_pg, "--expand", "always"]) == 0
    out = capsys.readouterr().out
    assert "jsonb_array_elements" in out and 'COLLATE "C"' in out and "REPEATABLE READ READ ONLY" in out
    assert "json_each" not in out and "INDEXED BY" not in out and "sqlite_master" not in out


def test_stats_on_postgresql_match_the_file(demo_db, demo_pg, capsys):
    a, b = stats(demo_db), stats(demo_pg)
    differ = {"path", "built_at", "file_bytes"}
    assert {k: v for k, v in a.items() if k not in differ} == {k: v for k, v in b.items() if k not in differ}
    assert b["path"] == demo_pg and b["file_bytes"] > 0
    assert main(["stats", "--db", demo_pg, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["papers"] == 100


def test_opening_what_is_not_an_index_says_what_to_do(pg_database, pg_server):
    empty = pg_database("empty")
    with pytest.raises(IndexNotFoundError, match="retrieval build --db"):
        RetrievalClient(empty)
    with psycopg.connect(empty, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA retrieval")
        conn.execute("CREATE TABLE retrieval.other (x integer)")
    with pytest.raises(NotAnIndexError, match="not a retrieval index"):
        RetrievalClient(empty)
    missing = pg_server.rsplit("/", 1)[0] + "/retrieval_no_such_database"
    with pytest.raises(IndexNotFoundError, match="createdb"):
        RetrievalClient(missing)
    secret = missing.replace("://postgres@", "://postgres:hunter2@")
    with pytest.raises(IndexNotFoundError) as error:
        RetrievalClient(secret)
    assert "hunter2" not in str(error.value) and "***" in str(error.value)
    assert main(["search", "x", "--db", empty]) == 1


def test_a_reader_keeps_answering_across_a_rebuild_and_then_sees_the_new_index(pg_database, tmp_path):
    """A rebuild swaps a new schema in under the name ``retrieval``: a client opened before it keeps answering
    (its statements name the tables by the search path) and, from its next snapshot on, reads the new index."""
    url = pg_database("swap")
    old = write_jsonl(tmp_path / "old.jsonl", [paper(f"o{i}", "black hole entropy", "old papers") for i in range(5)])
    new = write_jsonl(
        tmp_path / "new.jsonl",
        [paper(f"n{i}", "black hole entropy", "new papers " * (i + 1), references=["n0"]) for i in range(8)],
    )
    build(db=url, source=old)
    with RetrievalClient(url) as reader:
        assert {r.paper.id for r in reader.search("black hole").ranked} == {f"o{i}" for i in range(5)}
        build(db=url, source=new)
        after = reader.search("black hole", RetrievalConfig(expand="always"))
        assert {r.paper.id for r in after.ranked} == {f"n{i}" for i in range(8)}
        assert reader.stats.n_papers == 8
        assert reader.show("n1").paper.references == ["n0"]
        lite = tmp_path / "new.db"
        build(db=lite, source=new)
        with RetrievalClient(lite) as fresh:
            same_result(fresh.search("black hole entropy new"), reader.search("black hole entropy new"))


READER = """
import json, sys, time
from retrieval.search.client import RetrievalClient
url, seconds = sys.argv[1], float(sys.argv[2])
out = {"searches": 0, "errors": [], "mixed": [], "worst": 0.0}
with RetrievalClient(url) as client:
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        began = time.monotonic()
        try:
            ids = [r.paper.id for r in client.search("black hole entropy", limit=50).ranked]
            if len({pid[0] for pid in ids}) != 1 or len(ids) != 50:
                out["mixed"].append(ids[:5])
        except Exception as exc:
            out["errors"].append(repr(exc)[:200])
        out["worst"] = max(out["worst"], time.monotonic() - began)
        out["searches"] += 1
print(json.dumps(out))
"""


def test_rebuilds_while_a_reader_process_searches_fail_neither(pg_database, tmp_path):
    """A reader process searches throughout four rebuilds that alternate two corpora: every rebuild succeeds
    (no deadlock between its swap and a search in flight), every search answers from one corpus, never a mix."""
    import subprocess
    import sys

    url = pg_database("rebuilds")
    corpora = [
        write_jsonl(tmp_path / f"{letter}.jsonl",
                    [paper(f"{letter}{i}", "black hole entropy", f"entropy {i} " * (i % 7 + 1), 1990 + i % 10,
                           [f"{letter}{i // 2}"] if i else []) for i in range(300)])
        for letter in "ab"
    ]  # fmt: skip
    build(db=url, source=corpora[0])
    reader = subprocess.Popen([sys.executable, "-c", READER, url, "12"], stdout=subprocess.PIPE, text=True)
    try:
        for i in range(4):
            build(db=url, source=corpora[(i + 1) % 2])
        out, _ = reader.communicate(timeout=120)
    finally:
        reader.kill()
    result = json.loads(out)
    assert result["searches"] > 20 and result["errors"] == [] and result["mixed"] == []
    assert result["worst"] < 5.0


# -- the evidence pipeline (explain) ---------------------------------------------------------------------------
def same_data(a, b, where: str = "") -> None:
    """Two JSON-like values are equal, floats to ``TOLERANCE`` (timings aside)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for key in a:
            if key != "timings_ms":
                same_data(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same_data(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert abs(a - b) <= TOLERANCE, (where, a, b)
    else:
        assert a == b, (where, a, b)


def test_explain_runs_are_the_same(pair, capsys):
    from retrieval.evidence.config import EvidenceConfig
    from retrieval.evidence.pipeline import explain, explain_index

    lite, pg, queries = pair
    for query in queries[:6]:
        for cfg in (EvidenceConfig(), EvidenceConfig(ranker="salsa", max_nodes=20, cap_policy="trim")):
            same_data(explain(lite, query, config=cfg).to_dict(), explain(pg, query, config=cfg).to_dict())
        same_data(explain(lite, query, subqueries=queries[6:8]).to_dict(),
                  explain(pg, query, subqueries=queries[6:8]).to_dict())  # fmt: skip
    db = pg._executor.path
    explain_index(queries[0], db=db)
    assert capsys.readouterr().err == ""  # no query-log warning: the log is off, read from the snapshot's info
    assert main(["explain", queries[0], "--db", db, "--json"]) == 0
    capsys.readouterr()
    assert main(["explain", queries[0], "--db", db, "--save"]) == 1
    assert "not supported yet" in capsys.readouterr().err


# -- hepth (slow) ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def hepth_pair(tmp_path_factory, pg_database):
    corpus = shared_corpus("hepth")
    lite = tmp_path_factory.mktemp("hepth") / "hepth.db"
    build(db=lite, source=corpus)
    url = pg_database("hepth")
    build(db=url, source=corpus)
    with RetrievalClient(lite) as a, RetrievalClient(url) as b:
        yield a, b


HEPTH_SHORT = ["black hole entropy", "string theory duality", "supersymmetric gauge theories", "d-branes",
               "noncommutative geometry", "matrix model", "ads/cft correspondence", "tachyon condensation"]  # fmt: skip


@pytest.mark.slow
def test_hepth_is_the_same_on_both(hepth_pair):
    lite, pg = hepth_pair
    for query in HEPTH_SHORT + _queries("hepth", 10):
        for exhaustive in (False, True):
            same_hits(lite.lexical.search(query, 100, exhaustive), pg.lexical.search(query, 100, exhaustive))
    for query in HEPTH_SHORT:
        for cfg in CONFIGS.values():
            same_result(lite.search(query, cfg), pg.search(query, cfg))
        same_result(lite.search(query, year="1998-2001"), pg.search(query, year="1998-2001"))
        same_result(lite.search(query, authors=["Maldacena"]), pg.search(query, authors=["Maldacena"]))
    for seeds in (["hep-th/9711200"], ["hep-th/9802150", "hep-th/9802109"]):
        a, b = lite.similar(seeds), pg.similar(seeds)
        assert [e.paper.id for e in a.ranked] == [e.paper.id for e in b.ranked]
        assert all(abs(x.score - y.score) <= TOLERANCE for x, y in zip(a.ranked, b.ranked, strict=True))
    assert lite.show("hep-th/9711200").to_dict() == pg.show("hep-th/9711200").to_dict()
    from retrieval.evidence.pipeline import explain

    for query in HEPTH_SHORT[:4]:
        same_data(explain(lite, query).to_dict(), explain(pg, query).to_dict())


def _every_statement() -> None:
    """Import every module that defines statements, so the registry is complete."""
    import importlib
    import pkgutil

    import retrieval

    for module in pkgutil.walk_packages(retrieval.__path__, "retrieval."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)


_PLACEHOLDER = re.compile(r"'[^']*'|(?<![:\w]):([A-Za-z_]\w*)|\?")


def _numbered(sql: str) -> tuple[str, int]:
    """``sql`` with its placeholders (``:name``, ``?``) as ``$1``, ``$2``, ... (a name keeps its number)."""
    numbers: dict[str, int] = {}

    def number(m: re.Match) -> str:
        if m.group(0).startswith("'"):
            return m.group(0)
        key = m.group(1) or f"?{len(numbers)}"
        numbers.setdefault(key, len(numbers) + 1)
        return f"${numbers[key]}"

    return _PLACEHOLDER.sub(number, sql), len(numbers)


def test_every_statement_is_one_template_and_compiles_on_both_dialects(demo_db, demo_pg):
    """Each registered statement, rendered for each dialect, is prepared by SQLite (``EXPLAIN``) and by the server
    (``PREPARE``): a text that drifted from the schema or from its dialect fails here, not in a user's search.
    Texts written out for PostgreSQL stay few (each says why its plan differs)."""
    import sqlite3

    from retrieval.store.sql.dialect import OVERRIDES, POSTGRESQL_ONLY, SHARDED

    _every_statement()
    pairs = registered()
    assert len(pairs) > 90
    assert len(OVERRIDES) <= 15, sorted(s[:60] for s in OVERRIDES)
    lite = sqlite3.connect(demo_db)
    failed = []
    for sqlite_text in pairs:
        if sqlite_text in POSTGRESQL_ONLY or sqlite_text in ("BEGIN", "COMMIT", "ROLLBACK"):
            continue
        names = set(re.findall(r"(?<![:\w]):([A-Za-z_]\w*)", sqlite_text))
        params = dict.fromkeys(names) if names else (None,) * sqlite_text.count("?")
        try:
            lite.execute("EXPLAIN " + sqlite_text, params).fetchall()
        except sqlite3.Error as exc:
            failed.append(("sqlite", sqlite_text[:60], str(exc)))
    lite.close()
    with psycopg.connect(demo_pg, autocommit=True) as conn:
        conn.execute("SET search_path TO retrieval")
        texts = list(pairs.values()) + list(registered(SHARDED).values())
        for i, text in enumerate(texts):
            if ";" in text or text.startswith(("BEGIN", "COMMIT", "ROLLBACK", "SET ", "LOCK ")):
                continue  # several statements in one message, or not plannable: run by every PostgreSQL search
            numbered, _ = _numbered(text)
            try:
                conn.execute(f"PREPARE drift_{i} AS {numbered}")
                conn.execute(f"DEALLOCATE drift_{i}")
            except psycopg.Error as exc:
                failed.append(("postgresql", text[:60], str(exc).splitlines()[0]))
    assert not failed, failed


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://postgres:hunter2@[::1:54329/hepth",  # malformed: the driver quotes the URL whole
        "postgresql://postgres:hunter2%zz@127.0.0.1:{port}/hepth",  # a bad escape: the driver quotes the password
        "postgresql://postgres:hunter%32@127.0.0.1:{port}/hepth",  # percent-encoded
        "postgresql://postgres@127.0.0.1:{port}/hepth?password=hunter2",
    ],
)
def test_a_password_in_the_url_is_never_printed(url, capsys):
    """Whatever the driver's message quotes of the URL, the password is shown as *** (a closed local port: the
    connection is refused, or the URL is refused before any connection)."""
    code = main(["search", "black hole", "--db", url.format(port=_closed_port())])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("retrieval: error: cannot open the index at postgresql://postgres")
    assert "hunter2" not in err and "hunter%32" not in err and "***" in err


def test_a_server_that_never_answers_is_given_up_on(monkeypatch, capsys):
    """A host that accepts the connection and never answers (a loopback socket here) is given up on after the
    connect timeout, with a message, not waited for without end."""
    import socket
    import threading
    import time

    from retrieval.store.postgres import connection

    monkeypatch.setattr(connection, "CONNECT_TIMEOUT", 2)  # libpq's least
    held: list[socket.socket] = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]

        def accept() -> None:
            try:
                while True:
                    held.append(listener.accept()[0])  # never answered
            except OSError:
                pass

        threading.Thread(target=accept, daemon=True).start()
        started = time.monotonic()
        code = main(["search", "black hole", "--db", f"postgresql://postgres@127.0.0.1:{port}/hepth"])
        took = time.monotonic() - started
    for conn in held:
        conn.close()
    err = capsys.readouterr().err
    assert code == 1 and took < 15 and "cannot open the index at postgresql://postgres@127.0.0.1" in err
    assert "timeout" in err.lower()


def test_a_client_recovers_when_the_server_drops_its_connection(demo_pg):
    """A long-lived client (as ``retrieval serve`` keeps one per thread) whose session the server ends (a restart,
    ``pg_terminate_backend``) opens a new connection at its next search, with the same answers."""
    with RetrievalClient(demo_pg) as client:
        before = [(r.paper.id, r.final_score) for r in client.search("attention sparsity").ranked]
        raw = client._executor.conn.raw
        with psycopg.connect(demo_pg, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (raw.info.backend_pid,))
        after = [(r.paper.id, r.final_score) for r in client.search("attention sparsity").ranked]
        assert client._executor.conn.raw is not raw and after == before
        assert [(r.paper.id, r.final_score) for r in client.search("attention sparsity").ranked] == before


# -- Round trips: the query's terms sent with the snapshot's beginning, the snapshot's end not waited for ---------
def _terms_runs(trace: Trace, since: int) -> int:
    return sum(s.name == "lexical: the query's terms" for s in trace.statements[since:])


def test_the_terms_sent_with_the_beginning_answer_only_when_the_statistics_are_unchanged(pg_database, tmp_path):
    """A long-lived client sends a search's terms statement with the snapshot's beginning, made from the last
    snapshot's statistics: once per search while the index stays as it was; after an add (N and avgdl change) and
    a rebuild with another analyser (the query's terms change) the guess is dropped and the statement runs again,
    and every answer is what a new client (which guesses nothing) gives."""
    url = pg_database("ahead")
    first = [paper(f"a{i}", "black hole entropy", "horizon area " * (i + 1)) for i in range(6)]
    more = [paper(f"b{i}", "black holes and strings", "entropy counting " * (i + 2)) for i in range(5)]
    build(db=url, source=write_jsonl(tmp_path / "first.jsonl", first))
    trace = Trace()
    with RetrievalClient(url, tracer=trace) as client:

        def check(query: str, runs: int) -> None:
            since = len(trace.statements)
            result = client.search(query)
            assert _terms_runs(trace, since) == runs
            with RetrievalClient(url) as fresh:
                same_result(fresh.search(query), result)

        check("black hole entropy", 1)  # nothing to guess from: the statement runs after the beginning
        check("black hole entropy", 0)  # its terms read at this state of the index: kept by the process
        check("horizon entropy", 1)  # a term not read yet: guessed, and the guess answers
        check("horizon area", 1)
        add(write_jsonl(tmp_path / "more.jsonl", more), db=url)
        check("entropy counting", 2)  # guessed with N and avgdl of before the add: dropped, run again
        check("black hole entropy", 1)  # the kept terms are of the old state: guessed from the new one, answers
        check("black hole entropy", 0)
        build(db=url, source=write_jsonl(tmp_path / "all.jsonl", first + more), stem="english")
        check("black holes entropy", 2)  # stems now: other terms than the guess's
        check("black holes entropy", 0)
        check("entropy area", 1)
        since = len(trace.statements)
        assert client.lexical.search("entropy counting", 3) == fresh_lexical(url, "entropy counting", 3)
        assert _terms_runs(trace, since) == 1


def fresh_lexical(url: str, query: str, k: int) -> list[tuple[str, float]]:
    with RetrievalClient(url) as fresh:
        return fresh.lexical.search(query, k)


def test_a_guess_that_fails_leaves_the_snapshot_to_begin_without_it(demo_pg):
    """A statement sent with the beginning that fails (here: parameters the server refuses) ends that
    transaction; the snapshot begins again without it, and the read answers as it would have."""
    from retrieval.search.lexical import TERMS_SQL

    with RetrievalClient(demo_pg) as client:
        expected = client.lexical.search("attention sparsity", 5)
        executor = client._executor
        refused = {"terms": "not json", "k1": 1.5, "b": 0.75, "avgdl": 1.0}
        with executor.snapshot(lambda stats: [("lexical: the query's terms", TERMS_SQL, refused)]) as snap:
            assert snap.ahead == {} and snap.stats.n_papers == 100
            assert client.lexical.search("attention sparsity", 5) == expected  # joins this snapshot
        assert client.lexical.search("attention sparsity", 5) == expected


def test_a_search_does_not_hold_its_locks_after_it_returns(demo_pg):
    """The snapshot's COMMIT is sent as the search returns, its answer read at the next statement: the server has
    ended the transaction, so a rebuild's swap (ACCESS EXCLUSIVE) is not kept waiting by an idle client."""
    with RetrievalClient(demo_pg) as client:
        expected = [r.paper.id for r in client.search("attention sparsity").ranked]
        pid = client._executor.conn.raw.info.backend_pid
        with psycopg.connect(demo_pg, autocommit=True) as admin:
            admin.execute("SET lock_timeout = '10s'")
            with admin.transaction():
                admin.execute("LOCK TABLE retrieval.papers, retrieval.term_freq IN ACCESS EXCLUSIVE MODE")
            state = admin.execute("SELECT state FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()[0]
        assert state == "idle"
        assert [r.paper.id for r in client.search("attention sparsity").ranked] == expected


def test_short_lists_sent_ahead_score_the_query_without_a_statement_of_their_own(demo_pg, monkeypatch):
    """In a process that has NumPy, a search sends the short lists of its terms with the snapshot's beginning: a
    query scored from the BLOBs reads no list of its own unless one is longer than ``AHEAD_MAX_DF`` or kept by the
    process already (not sent again), and every answer equals a new client's (which sends nothing ahead)."""
    from retrieval.search import blobs

    monkeypatch.setattr(blobs.CACHE, "limit", 0)  # nothing kept: every list is read or sent
    queries = ["attention sparsity", "low rank adapters fine tuning", "retrieval augmentation passage index"]
    with RetrievalClient(demo_pg) as fresh:
        fresh.lexical.path = "blobs"
        expected = {q: fresh.lexical.search(q, 5) for q in queries}
    trace = Trace()
    with RetrievalClient(demo_pg, tracer=trace) as client:
        client.lexical.path = "blobs"
        client.lexical.search("warm up", 5)  # the statistics to guess from
        for query in queries:
            since = len(trace.statements)
            assert client.lexical.search(query, 5) == expected[query]
            names = [s.name for s in trace.statements[since:]]
            assert blobs.POSTINGS_AHEAD_STATEMENT in names and blobs.POSTINGS_STATEMENT not in names, names
        monkeypatch.setattr(blobs, "AHEAD_MAX_DF", 3)  # the demo's lists are longer: read when needed
        for query in queries:
            since = len(trace.statements)
            assert client.lexical.search(query, 5) == expected[query]
            assert blobs.POSTINGS_STATEMENT in [s.name for s in trace.statements[since:]]
        monkeypatch.setattr(blobs.CACHE, "limit", 1 << 30)  # kept: then not sent again
        client.lexical.search("attention sparsity", 5)
        since = len(trace.statements)
        assert client.lexical.search("attention sparsity", 5) == expected["attention sparsity"]
        names = [s.name for s in trace.statements[since:]]
        assert blobs.POSTINGS_AHEAD_STATEMENT not in names and blobs.POSTINGS_STATEMENT not in names, names


def test_given_papers_look_each_common_term_up_rather_than_read_every_posting_of_each_paper(cacm_pg):
    """Scoring given papers (the graph's candidates) in SQL looks a common term's posting up per paper and term
    (``Dialect.count_of``). Without the lookup forced, the planner (expecting 50 query terms where there are a
    few) read every posting of each given paper through ``ix_term_freq_doc_id``: 30 ms where the lookups take 5
    on the 100K corpus. The scores are the SQLite file's (``test_scores_of_given_papers_are_the_same``)."""
    from retrieval.search.lexical import FILTERED_TOP_K_SQL, SCORES_FOR_SQL
    from retrieval.store.postgres.connection import convert

    text = registered()[SCORES_FOR_SQL]
    for given in (text, registered()[FILTERED_TOP_K_SQL]):  # the lookup forced (the planner's choice is the corpus's)
        assert "JOIN LATERAL (SELECT tf.doc_id, tf.count FROM term_freq AS tf" in given and "OFFSET 0" in given
    with RetrievalClient(cacm_pg) as client:
        ids = [r.paper.id for r in client.search("computer programs", limit=200).ranked]
    with psycopg.connect(cacm_pg, autocommit=True) as conn:
        conn.execute("SET search_path TO retrieval")
        term_ids = [r[0] for r in conn.execute("SELECT term_id FROM doc_freq ORDER BY df DESC LIMIT 3").fetchall()]
    params = {
        "weights": json.dumps([[t, 1.0, 0] for t in term_ids]),  # every term looked up per paper
        "paper_ids": json.dumps(ids), "k1": 1.5, "b": 0.75, "avgdl": 10.0,
    }  # fmt: skip
    with psycopg.connect(cacm_pg, autocommit=True) as conn:
        conn.execute("SET search_path TO retrieval")
        conn.execute("SET enable_hashjoin = off")
        conn.execute("SET enable_mergejoin = off")
        plan = "\n".join(row[0] for row in conn.execute("EXPLAIN " + convert(text), params).fetchall())
    assert "pk_term_freq" in plan and "ix_term_freq_doc_id" not in plan, plan


def test_reads_come_back_in_binary_and_several_statements_in_one_text_still_run(demo_pg):
    """A read's rows travel in binary: a postings BLOB as its bytes, not as hex text of twice its size that the
    client decodes again (on the 100K corpus a common term's list took 2.2 ms as text, 0.5 ms as bytes). Only a
    text of several statements (the snapshot's beginning, as one message) goes by the simple protocol, in text."""
    from retrieval.config import DatabaseURL
    from retrieval.search.blobs import POSTINGS_SQL
    from retrieval.store.postgres import connection
    from retrieval.store.sql.dialect import POSTGRESQL, text_for
    from retrieval.store.sql.executor import BEGIN_READ_SQL

    conn = connection.connect(DatabaseURL(demo_pg))
    try:
        term_ids = [row[0] for row in conn.execute("SELECT term_id FROM doc_freq ORDER BY df DESC LIMIT 3")]
        cursor = conn.execute(text_for(POSTINGS_SQL, POSTGRESQL), {"term_ids": json.dumps(term_ids)})
        rows = cursor.fetchall()
        assert rows and {row[0] for row in rows} == set(term_ids)
        formats = [cursor.pgresult.fformat(i) for i in range(cursor.pgresult.nfields)]
        assert formats == [1] * len(formats)  # every column, the BLOBs among them, in binary
        hexed = conn.execute(
            "SELECT term_id, first_doc, encode(doc_ids, 'hex') FROM postings WHERE term_id = ANY(:ids)",
            {"ids": term_ids},
        ).fetchall()
        assert {(r[0], r[1]): bytes.fromhex(r[2]) for r in hexed} == {(r[0], r[1]): r[6] for r in rows}
        assert connection.several(BEGIN_READ_SQL) and not connection.several(text_for(POSTINGS_SQL, POSTGRESQL))
        begun = conn.execute(BEGIN_READ_SQL)
        assert int(dict(begun.fetchall())["n_papers"]) > 0  # the snapshot's statistics, read in the same message
        conn.end_read()
    finally:
        conn.raw.close()


def test_statements_sent_together_are_prepared_once_and_read_as_one_at_a_time(demo_pg):
    """Reads go through libpq's pipeline (a snapshot's beginning, several statements in one round trip), each
    text prepared on the server at its first run on the connection (in that same round trip) and run by name
    after: together or one at a time, the rows are the same (a BLOB as its bytes, NULL, text, numbers), a refused
    statement raises the server's error and leaves the connection usable, and a text whose PREPARE the refusal
    cut short is prepared at its next run."""
    import psycopg

    from retrieval.config import DatabaseURL
    from retrieval.search.blobs import POSTINGS_SQL
    from retrieval.store.postgres import connection
    from retrieval.store.sql.dialect import POSTGRESQL, text_for
    from retrieval.store.sql.executor import BEGIN_READ_PARTS

    conn = connection.connect(DatabaseURL(demo_pg))
    mine = "SELECT name, statement FROM pg_prepared_statements WHERE name LIKE 'retrieval%'"
    try:
        term_ids = [row[0] for row in conn.execute("SELECT term_id FROM doc_freq ORDER BY df DESC LIMIT 3")]
        values = "SELECT :word || '!' AS word, :n + 1 AS n, :x * 2 AS x, :none AS none, NOT :yes AS no"
        statements = [(part, {}) for part in BEGIN_READ_PARTS]
        statements += [
            (text_for(POSTINGS_SQL, POSTGRESQL), {"term_ids": json.dumps(term_ids)}),
            (values, {"word": "entropía", "n": 41, "x": 0.1, "none": None, "yes": True}),
        ]
        one_at_a_time = []
        for sql, params in statements:
            cursor = conn.execute(sql, params)
            one_at_a_time.append(cursor.fetchall() if cursor.description is not None else [])
        conn.execute("COMMIT")
        assert one_at_a_time[-1] == [("entropía!", 42, 0.2, None, False)]
        assert any(isinstance(row[6], bytes) and row[6] for row in one_at_a_time[3])
        prepared = set(conn.execute(mine).fetchall())
        assert {connection.numbered(sql)[0] for sql, _ in statements} <= {text for _, text in prepared}
        for _ in range(2):
            assert conn.execute_together(statements) == one_at_a_time
            conn.execute("COMMIT")
            assert set(conn.execute(mine).fetchall()) == prepared  # prepared at their first run, not again
        fresh = "SELECT :a * 10 AS tenfold"
        with pytest.raises(psycopg.errors.DivisionByZero):
            conn.execute_together([*statements[:1], ("SELECT 1 / (:z - :z) AS never", {"z": 1}), (fresh, {"a": 4})])
        assert not conn.lost and conn.in_transaction
        conn.execute("ROLLBACK")
        assert conn.execute_together([(fresh, {"a": 4})]) == [[(40,)]]  # prepared now, the refusal's PREPARE lost
    finally:
        conn.raw.close()
    timed = connection.connect(DatabaseURL(demo_pg), timeout=0.05)
    try:
        with pytest.raises(psycopg.errors.QueryCanceled, match="statement timeout"):
            timed.execute_together([("SELECT pg_sleep(:s)", {"s": 2.0})])
        assert not timed.lost and timed.execute_together([("SELECT 1 AS one", {})]) == [[(1,)]]
    finally:
        timed.raw.close()


def test_a_coordinator_reads_terms_in_degrees_and_co_citations_by_texts_of_its_own(demo_db, demo_sharded, monkeypatch):
    """A coordinator plans its joins hashed: the query terms' rows (joined to the whole of ``postings``), the
    candidates' in-degrees and the co-citation feedback's counts (every citation pulled through the foreign tables,
    then the two sides joined by nested loop) have texts of its own, and each gives a file's rows: the counts with
    and without citing papers excluded, sources among the candidates (a paper is not its own co-citation)."""
    import sqlite3

    from retrieval.search import adjacency, cocited, learned, lexical
    from retrieval.store.sql.dialect import SHARDED

    monkeypatch.setattr(cocited, "GRAPHS", adjacency.Graphs())  # no kept graph: the statements answer
    with sqlite3.connect(demo_db) as conn:
        ids = [pid for (pid,) in conn.execute("SELECT paper_id FROM cited_counts ORDER BY cited_by DESC, paper_id")]
        citing = [pid for (pid,) in conn.execute("SELECT DISTINCT citing_id FROM citations ORDER BY citing_id")]
        words = [t for (t,) in conn.execute("SELECT term FROM doc_freq ORDER BY df DESC, term LIMIT 3")]
    sources, candidates, excluded = ids[:6], ids[3:], frozenset(citing[::3])
    terms = json.dumps([*words, "zzzunknown"])
    trace = Trace()
    a, b = RetrievalClient(demo_db), RetrievalClient(demo_sharded, tracer=trace)
    with a, b, a._executor.snapshot() as lite, b._executor.snapshot() as shard:
        for left_out in (frozenset(), excluded):
            counts = cocited.cocitations(lite, sources, candidates, left_out)
            assert counts and cocited.cocitations(shard, sources, candidates, left_out) == counts
        assert sum(counts.values()) < sum(cocited.cocitations(lite, sources, candidates).values())  # it counted
        assert learned.in_degrees(shard, candidates) == learned.in_degrees(lite, candidates)
        rows = lexical.terms_of(lite, terms)
        assert len(rows) == 3 and lexical.terms_of(shard, terms) == rows
    own = set(registered(SHARDED).values())
    ran = {s.name for s in trace.statements if s.sql in own}
    assert {cocited.COCITATIONS_STATEMENT, lexical.TERMS_NAME, "learned: the candidates' in-degrees"} <= ran, ran


def test_a_coordinator_reads_the_kept_graph_page_by_page_from_the_shards(demo_db, demo_sharded, monkeypatch):
    """The citation graph a process keeps is read in pages from where the last ended: on a coordinator that start
    is sent to the shards (a text of its own: postgres_fdw keeps a row comparison for itself, so each page read
    every shard's citations whole), and the graph read in many pages is a file's, node for node."""
    from retrieval.search import adjacency
    from retrieval.store.sql.dialect import SHARDED

    monkeypatch.setattr(adjacency, "PAGE_ROWS", 7)
    trace = Trace()
    a, b = RetrievalClient(demo_db), RetrievalClient(demo_sharded, tracer=trace)
    with a, b, a._executor.snapshot() as lite, b._executor.snapshot() as shard:
        file, sharded = adjacency.Graph.read(lite), adjacency.Graph.read(shard)
    assert list(sharded.ids) == list(file.ids) and sharded.papers == file.papers
    for part in ("references", "references_at", "citers", "citers_at"):
        assert getattr(sharded, part).tolist() == getattr(file, part).tolist(), part
    pages = [s for s in trace.statements if s.name == adjacency.CITATIONS_STATEMENT]
    assert len(pages) > 3 and all(s.sql == registered(SHARDED).get(adjacency.CITATIONS_PAGE_SQL) for s in pages[1:])
