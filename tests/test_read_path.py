"""The read path: a query is tokenised once and read in one snapshot with one set of statistics; every
statement goes through the executor; reading never writes; upgrading is explicit and atomic."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st

import retrieval.search.query as query_module
from retrieval import RetrievalClient, RetrievalConfig, RetrievalError, SchemaVersionError, Trace
from retrieval.bm25 import TF_NORM_SQL, tf_norm
from retrieval.commands import build
from retrieval.search import lexical
from retrieval.store.database import HEAD_REVISION, index_revision
from retrieval.store.schema import migrate as migrate_module
from retrieval.store.schema.migrate import upgrade_index


@pytest.mark.parametrize("config", [RetrievalConfig(expand="always", max_hops=2), RetrievalConfig.lesson()])
def test_a_search_tokenises_once_and_reads_the_statistics_once(demo_db, monkeypatch, config):
    calls = []
    real = query_module.Analyser.analyse  # a query is analysed (tokenised) by its index's analyser
    monkeypatch.setattr(query_module.Analyser, "analyse", lambda self, text: calls.append(text) or real(self, text))
    trace = Trace()
    with RetrievalClient(demo_db, config, tracer=trace) as client:
        result = client.search("attention sparsity routing")
    assert calls == ["attention sparsity routing"]
    names = [s.name for s in trace.statements]
    assert names.count("index statistics") == 1 and names.count("lexical: the query's terms") == 1
    assert names[-1] == "end the read snapshot"
    assert all(n.startswith("open: ") for n in names[: names.index("begin the read snapshot")])
    assert names.count("begin the read snapshot") == 1  # one snapshot for the whole search
    assert result.ranked and result.expansion["gate"]["fired"]


def test_returned_papers_are_the_candidates_completed_not_built_again(demo_db):
    with RetrievalClient(demo_db) as client:
        result = client.search("attention sparsity", limit=3, links=True)
        full = client.papers([r.paper.id for r in result.ranked])
    for entry in result.ranked:
        assert entry.paper == full[entry.paper.id]  # abstract, authors, references and citing papers filled in


def test_a_paper_read_back_says_who_supplied_its_record(tmp_path, capsys):
    """``show --json``'s ``source`` (and every paper the library returned) said "merged" whatever the index
    records: the corpus file a build read, or the sources a record was merged from."""
    import json

    from retrieval.interfaces.cli import main
    from tests.helpers import paper, write_jsonl

    db = tmp_path / "mine.db"
    build(db=db, source=write_jsonl(tmp_path / "mine.jsonl", [paper("a", "black hole"), paper("b", "black")]))
    with RetrievalClient(db) as client:
        assert {p.source for p in client.papers(["a", "b"]).values()} == {"mine.jsonl"}
        assert {r.paper.source for r in client.search("black").ranked} == {"mine.jsonl"}
    assert main(["show", "a", "--db", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["source"] == "mine.jsonl"
    demo = tmp_path / "demo.db"
    build(db=demo)
    with RetrievalClient(demo) as client:
        assert client.papers(["p001"])["p001"].source == "arxiv+s2"


@given(st.integers(1, 60), st.integers(1, 5000), st.floats(1.0, 500.0), st.floats(0.0, 3.0), st.floats(0.0, 1.0))
def test_the_sql_tf_norm_is_the_python_one(count, length, avgdl, k1, b):
    with sqlite3.connect(":memory:") as conn:
        sql = f"SELECT {TF_NORM_SQL} FROM (SELECT :count AS count) AS tf, (SELECT :length AS length) AS dl"
        value = conn.execute(sql, {"count": count, "length": length, "avgdl": avgdl, "k1": k1, "b": b}).fetchone()[0]
    assert value == pytest.approx(tf_norm(count, length, avgdl, k1, b), rel=1e-12)


def _old_index(tmp_path):
    db = tmp_path / "old.db"
    build(db=db)
    migrate_module.downgrade(db, "0003")
    assert index_revision(db) == "0003"
    return db


def test_an_older_index_is_refused_on_read_without_being_written(tmp_path):
    db = _old_index(tmp_path)
    before = db.read_bytes()
    db.chmod(0o444)  # a user who may only read: the refusal needs no write either
    try:
        with pytest.raises(SchemaVersionError, match=r"`retrieval upgrade --db .*old\.db`"):
            RetrievalClient(db)
    finally:
        db.chmod(0o644)
    assert db.read_bytes() == before


def test_a_failed_upgrade_leaves_the_old_index_as_it_was(tmp_path, monkeypatch):
    db = _old_index(tmp_path)
    before = db.read_bytes()

    def interrupted(path, revision="head", sql=False):
        raise KeyboardInterrupt

    monkeypatch.setattr(migrate_module, "migrate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        upgrade_index(db)
    assert db.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith("old.db")] == []  # no temporary file left
    monkeypatch.undo()
    assert upgrade_index(db) == ("0003", HEAD_REVISION)
    assert upgrade_index(db) == (HEAD_REVISION, HEAD_REVISION)  # nothing to do the second time
    with RetrievalClient(db) as client:
        assert client.search("attention sparsity").ranked


@pytest.mark.parametrize(
    ("failure", "says"),
    [
        ("database or disk is full", "the disk is full"),
        ("attempt to write a readonly database", "read-only"),
        ("no such column: papers.venue", "its tables are not those of that revision"),
    ],
)
def test_an_upgrade_that_fails_for_the_machine_says_so_not_that_the_tables_are_wrong(tmp_path, monkeypatch, failure,
                                                                                     says):  # fmt: skip
    """A full disk while migrating the copy was reported as tables "not those of that revision", with advice to
    rebuild the index."""
    from sqlalchemy.exc import OperationalError

    db = _old_index(tmp_path)
    before = db.read_bytes()

    def failed(path, revision="head", sql=False):
        raise OperationalError("ALTER TABLE ...", {}, sqlite3.OperationalError(failure))

    monkeypatch.setattr(migrate_module, "migrate", failed)
    with pytest.raises(RetrievalError) as raised:
        upgrade_index(db)
    assert says in str(raised.value) and str(db) in str(raised.value)
    assert ("Rebuild the index" in str(raised.value)) == (says.startswith("its tables"))
    assert db.read_bytes() == before


def test_a_statement_cache_answers_repeated_reads_and_says_what_it_saved(demo_db):
    from retrieval.store.sql.executor import StatementCache

    trace = Trace()
    with RetrievalClient(demo_db, tracer=trace) as client:
        client.search("warm up", full=False)  # the index is opened (and checked) on first use
        trace.statements.clear()
        expected = client.search("citation graph ranking", full=False)
        ran = len(trace.statements)
        cache = StatementCache()
        client.cache_statements(cache)
        lexical._TERMS.clear()  # the terms the process kept forgotten: every statement runs, as the first time
        first = client.search("citation graph ranking", full=False)
        assert len(trace.statements) == 2 * ran  # the first time every statement runs
        second = client.search("citation graph ranking", full=False)
        # The second time only the transaction's begin and end run; every read comes from the cache.
        assert [s.name for s in trace.statements[2 * ran :]] == ["begin the read snapshot", "end the read snapshot"]
        assert cache.saved > 0
        client.cache_statements(None)
        lexical._TERMS.clear()
        client.search("citation graph ranking", full=False)
        assert len(trace.statements) == 3 * ran + 2
    for result in (first, second):
        assert [(r.paper.id, r.final_score) for r in result.ranked] == [
            (r.paper.id, r.final_score) for r in expected.ranked
        ]


def test_a_paper_deleted_by_hand_is_a_damaged_index_not_a_crash(demo_db, tmp_path, capsys):
    """A row of ``papers`` deleted by hand while its postings stay: a search that reaches the paper says the index
    is damaged and how to mend it (exit 1 on the command line, 503 over HTTP), on both rankings."""
    import shutil
    import sqlite3

    from retrieval.errors import NotAnIndexError
    from retrieval.interfaces.cli import main

    db = tmp_path / "edited.db"
    shutil.copy(demo_db, db)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute("DELETE FROM papers WHERE id = 'p001'")
    with RetrievalClient(db) as client:
        for config in (RetrievalConfig(), RetrievalConfig(ranking="expansion")):
            with pytest.raises(NotAnIndexError, match=r"is damaged: .*'p001'.*retrieval build"):
                client.search("attention sparsity", config)
    assert main(["search", "attention sparsity", "--db", str(db)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("retrieval: error: ") and "damaged" in err and "Traceback" not in err
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from retrieval.interfaces.http.app import create_app
    from retrieval.interfaces.service import Service

    service = Service(db)
    try:
        with TestClient(create_app(service)) as api:
            response = api.get("/search", params={"q": "attention sparsity"})
    finally:
        service.close()
    assert response.status_code == 503 and response.json()["kind"] == "NotAnIndexError"


def test_a_year_edited_into_text_is_a_damaged_index_not_a_crash(demo_db, tmp_path):
    """``papers.year`` set to text by hand (SQLite takes it): the ranking, which computes with years, says the
    index is damaged rather than failing to compare a text with a number."""
    import shutil
    import sqlite3

    from retrieval.errors import NotAnIndexError

    db = tmp_path / "edited.db"
    shutil.copy(demo_db, db)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE papers SET year = 'abc' WHERE id = 'p002'")
    with RetrievalClient(db) as client:
        for config in (RetrievalConfig(), RetrievalConfig(ranking="expansion")):
            with pytest.raises(NotAnIndexError, match=r"papers.year of 'p002' is 'abc', not a year"):
                client.search("attention sparsity", config)


def test_reads_sort_in_memory_not_in_temporary_files(demo_db):
    """A read connection keeps its temporary b-trees in memory (``temp_store`` 2): ``similar`` and paper pages
    on hub papers wrote about 10 MB of temporary files per request to the system's temp folder."""
    from retrieval.store.database import connect

    conn = connect(demo_db, readonly=True)
    try:
        assert conn.execute("PRAGMA temp_store").fetchone() == (2,)
    finally:
        conn.close()
    with RetrievalClient(demo_db) as client:
        assert client._executor.conn.execute("PRAGMA temp_store").fetchone() == (2,)
