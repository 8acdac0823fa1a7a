import sqlite3

import pytest

from retrieval import InputError, RetrievalClient, RetrievalError, build_index, read_jsonl
from retrieval.commands import build, stats
from retrieval.store.database import HEAD_REVISION
from tests.helpers import paper, write_jsonl


def _rows(db, sql, params=()):
    with sqlite3.connect(db) as conn:
        return conn.execute(sql, params).fetchall()


def test_demo_build_summary_and_index_info(tmp_path):
    summary = build(db=tmp_path / "demo.db")
    assert (summary.papers, summary.edges, summary.dangling_references) == (100, 185, 0)
    info = dict(_rows(tmp_path / "demo.db", "SELECT key, value FROM index_info"))
    assert info["n_papers"] == "100"
    assert info["tokeniser"] == "unicode-alnum-lower" and info["tokeniser_version"] == "1"
    assert (info["k1"], info["b"]) == ("1.5", "0.75")
    assert (info["min_year"], info["max_year"]) == ("2018", "2025")
    assert info["schema_revision"] == HEAD_REVISION
    total = _rows(tmp_path / "demo.db", "SELECT sum(length) FROM doc_len")[0][0]
    assert float(info["avgdl"]) == total / 100
    assert summary.terms == _rows(tmp_path / "demo.db", "SELECT count(*) FROM doc_freq")[0][0]


def test_tables_are_readable_with_plain_sqlite(demo_db):
    top = _rows(demo_db, "SELECT term, df FROM doc_freq ORDER BY df DESC, term LIMIT 3")
    assert top[0][1] == 100 and all(isinstance(term, str) for term, _ in top)
    words = _rows(demo_db, "SELECT term, count FROM term_counts WHERE paper_id = 'p001' AND term = 'attention'")
    assert words == [("attention", 3)]  # once in the title, twice in the abstract
    authors = _rows(demo_db, "SELECT name FROM paper_authors WHERE paper_id = 'p001' ORDER BY position")
    assert authors == [("Author 1-1",), ("Coauthor 1-1",)]


def test_dangling_references_are_kept_and_self_citations_dropped(tmp_path):
    corpus = write_jsonl(
        tmp_path / "c.jsonl",
        [
            paper("a", references=["b", "zzz", "a", "b"]),  # zzz not in the corpus; a is a self-citation
            paper("b", references=["a"]),
        ],
    )
    summary = build(db=tmp_path / "x.db", source=corpus)
    assert summary.edges == 2
    assert summary.dangling_references == 1
    assert summary.self_citations_dropped == 1
    assert summary.duplicate_references_dropped == 1
    assert _rows(tmp_path / "x.db", "SELECT cited_id FROM citations WHERE citing_id = 'a' ORDER BY 1") == [
        ("b",),
        ("zzz",),
    ]
    with RetrievalClient(db=tmp_path / "x.db") as client:
        assert client.paper("a").references == ["b", "zzz"]
        assert client.graph.expand(["a"], 2) == {"a": 0, "b": 1}  # the walk never passes through zzz


def test_a_dangling_reference_becomes_an_edge_when_its_paper_arrives(tmp_path):
    first = write_jsonl(tmp_path / "1.jsonl", [paper("a", references=["c"]), paper("b")])
    assert build(db=tmp_path / "x.db", source=first).dangling_references == 1
    second = write_jsonl(tmp_path / "2.jsonl", [paper("a", references=["c"]), paper("b"), paper("c")])
    summary = build(db=tmp_path / "x.db", source=second)
    assert (summary.edges, summary.dangling_references) == (1, 0)
    with RetrievalClient(db=tmp_path / "x.db") as client:
        assert client.graph.expand(["c"], 1) == {"c": 0, "a": 1}


def test_bad_record_stops_the_build_and_keeps_the_previous_index(tmp_path):
    db = tmp_path / "x.db"
    build(db=db)
    before = db.read_bytes()
    bad = write_jsonl(tmp_path / "bad.jsonl", [paper("a"), paper("b", year="soon")])
    with pytest.raises(InputError, match=r"bad\.jsonl:2: .*'year' must be an integer"):
        build(db=db, source=bad)
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl", "x.db"]  # no temporary file left


def test_interrupted_build_keeps_the_previous_index(tmp_path):
    db = tmp_path / "x.db"
    build(db=db)
    before = db.read_bytes()

    def papers():
        yield from (p for _, p in read_jsonl(write_jsonl(tmp_path / "c.jsonl", [paper("a"), paper("b")])))
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_index(papers(), db)
    assert db.read_bytes() == before
    assert stats(db)["papers"] == 100
    assert not list(tmp_path.glob(".x.db.*"))


def test_failed_first_build_writes_nothing(tmp_path):
    bad = write_jsonl(tmp_path / "bad.jsonl", ["{oops"])
    with pytest.raises(InputError, match=r"bad\.jsonl:1: invalid JSON"):
        build(db=tmp_path / "x.db", source=bad)
    assert not (tmp_path / "x.db").exists()


def test_empty_corpus_is_refused(tmp_path):
    empty = write_jsonl(tmp_path / "empty.jsonl", [])
    with pytest.raises(RetrievalError, match="no papers"):
        build(db=tmp_path / "x.db", source=empty)
    assert not (tmp_path / "x.db").exists()


def test_missing_corpus_file_is_named(tmp_path):
    with pytest.raises(RetrievalError, match="no corpus file at .*nowhere.jsonl"):
        build(db=tmp_path / "x.db", source=tmp_path / "nowhere.jsonl")


def test_stats(demo_db):
    info = stats(demo_db)
    assert (info["papers"], info["edges"], info["dangling_references"]) == (100, 185, 0)
    assert (info["min_year"], info["max_year"]) == (2018, 2025)
    assert info["schema_revision"] == HEAD_REVISION
    assert info["file_bytes"] == demo_db.stat().st_size
    assert info["avgdl"] == pytest.approx(37.8)
