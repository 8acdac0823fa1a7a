"""An index that refuses what it cannot trust: each hand edit of the tables a search answers from is refused by an
open or by the query that reads it (a ``NotAnIndexError`` naming the table, the row and what to do), or answered as
the index was written, never answered wrongly; ``retrieval check`` reports every one of them, on SQLite and on
PostgreSQL. Each edit is made on a copy of a real index (the demo corpus's)."""

from __future__ import annotations

import json
import sqlite3
from contextlib import contextmanager

import pytest

from retrieval import RetrievalClient, RetrievalConfig
from retrieval.commands import build, check, remove
from retrieval.errors import NotAnIndexError
from retrieval.interfaces.cli import main
from retrieval.search import blobs
from retrieval.store.database import SEAL_KEY, seal

QUERY = "attention sparsity"
PATHS = ("sql", "blobs")  # the lexical pass's two paths: SQL over term_freq, and the postings BLOBs in NumPy
# The demo corpus: 'attention' (term_freq of p001..p020) and 'sparsity' are in 20 papers each, p001 has
# 'attention' 3 times in 38 tokens; p001 is cited 19 times, years run from 2018 to 2025.
ATTENTION = "(SELECT term_id FROM doc_freq WHERE term = 'attention')"


@pytest.fixture(autouse=True)
def _no_kept_postings(monkeypatch):
    """A copy shares its original's ``index_info.generation``, the key under which a process keeps decoded
    postings: each test reads its copy's own BLOBs."""
    monkeypatch.setattr(blobs, "CACHE", blobs._Cache(0))


def cite(citing: str, cited: str, by_citing: int, by_cited: int) -> tuple[str, ...]:
    """The statements that add the citation ``citing -> cited`` by hand, numbering its ids as needed."""
    return (
        f"INSERT OR IGNORE INTO paper_keys (paper_id) VALUES ('{citing}'), ('{cited}')",
        "INSERT INTO citation_links (citing_key, cited_key, listed_by_citing, listed_by_cited) "
        f"SELECT a.key, b.key, {by_citing}, {by_cited} FROM paper_keys AS a, paper_keys AS b "
        f"WHERE a.paper_id = '{citing}' AND b.paper_id = '{cited}'",
    )


def copy_of(demo_db, tmp_path, *edits: str, name: str = "edited.db"):
    """A copy of the demo index (SQLite's backup: whatever its WAL holds) with the statements ``edits`` applied,
    foreign keys off, as the ``sqlite3`` shell applies a hand edit."""
    db = tmp_path / name
    source = sqlite3.connect(f"file:{demo_db}?mode=ro", uri=True)
    target = sqlite3.connect(db)
    try:
        source.backup(target)
        target.execute("PRAGMA foreign_keys = OFF")
        for sql in edits:
            target.execute(sql)
        target.commit()
    finally:
        source.close()
        target.close()
    return db


def lexical(db, path: str, query: str = QUERY, k: int = 10) -> list[tuple[str, float]]:
    with RetrievalClient(db) as client:
        client.lexical.path = path
        return [(pid, round(score, 9)) for pid, score in client.lexical.search(query, k)]


def refused(db, match: str, paths=PATHS, query: str = QUERY) -> None:
    """Every path's top k of ``query`` is refused with a message matching ``match`` that names what to do."""
    for path in paths:
        with pytest.raises(NotAnIndexError, match=match) as caught:
            lexical(db, path, query)
        assert "retrieval check --db" in str(caught.value) and "retrieval build --db" in str(caught.value), path


# -- index_info: the seal, avgdl ------------------------------------------------------------------------------------
def test_every_writer_seals_the_statistics_it_writes(demo_db, tmp_path):
    """A build, an add and a remove each leave a seal that matches what they wrote; an index without one (written
    before seals) opens and answers as before."""
    db = copy_of(demo_db, tmp_path)
    for step in ("built", "removed", "added"):
        if step == "removed":
            remove(["p100"], db=db)
        if step == "added":
            from retrieval.commands import add
            from retrieval.corpus.paper import Paper

            add([Paper("x1", "attention sparsity revisited", "attention", year=2020, source="t")], db=db)
        with sqlite3.connect(db) as conn:
            info = dict(conn.execute("SELECT key, value FROM index_info"))
        assert info[SEAL_KEY] == seal(info), step
    expected = lexical(db, "sql")
    unsealed = copy_of(db, tmp_path, f"DELETE FROM index_info WHERE key = '{SEAL_KEY}'", name="unsealed.db")
    assert lexical(unsealed, "sql") == expected
    report = check(unsealed)
    assert report.ok and any("no seal" in note for note in report.notes)
    # a seal of another kind (a later version's, or "v2:" written by hand) is read as it is, and `check` said
    # nothing of it: it says it cannot tell now
    other = copy_of(db, tmp_path, f"UPDATE index_info SET value = 'v2:x' WHERE key = '{SEAL_KEY}'", name="v2.db")
    assert lexical(other, "sql") == expected
    report = check(other)
    assert report.ok and any("seal is not of the kind this version writes (v1:)" in note for note in report.notes)


def test_an_upgrade_seals_an_older_index_only_where_the_tables_agree(demo_db, tmp_path):
    from retrieval.store.schema.migrate import downgrade, upgrade_index

    for name, edit in (
        ("agree.db", None),
        ("edited.db", "UPDATE index_info SET value = '2017' WHERE key = 'min_year'"),
    ):
        db = copy_of(demo_db, tmp_path, f"DELETE FROM index_info WHERE key = '{SEAL_KEY}'", name=name)
        downgrade(db, "0007")
        if edit:
            with sqlite3.connect(db) as conn:
                conn.execute(edit)
        upgrade_index(db)
        with sqlite3.connect(db) as conn:
            info = dict(conn.execute("SELECT key, value FROM index_info"))
        if edit is None:
            assert info[SEAL_KEY] == seal(info)
        else:  # left unsealed, and reported
            assert SEAL_KEY not in info
            problems = {p.invariant: p for p in check(db).problems}
            assert problems["index_info vs doc_len and papers"].examples == [
                "index_info.min_year is '2017', the tables give 2018"
            ]


def test_n_papers_edited_is_refused_by_the_seal(demo_db, tmp_path):
    """N one too large, with avgdl edited to agree (after a remove, the last doc id exceeds N, and no term is in
    every paper: no other check can see it): every idf changes; the seal refuses the open."""
    db = copy_of(demo_db, tmp_path)
    remove(["p100"], db=db)
    with sqlite3.connect(db) as conn:
        tokens = int(conn.execute("SELECT value FROM index_info WHERE key = 'total_tokens'").fetchone()[0])
        conn.execute("UPDATE index_info SET value = '100' WHERE key = 'n_papers'")
        conn.execute("UPDATE index_info SET value = ? WHERE key = 'avgdl'", (repr(tokens / 100),))
    with pytest.raises(NotAnIndexError, match=r"index_info was changed after the index was written.*retrieval check"):
        RetrievalClient(db)
    assert "index_info.n_papers is '100', the tables give 99" in json.dumps(check(db).to_dict())


@pytest.mark.parametrize(
    ("key", "value"),
    [("n_papers", "99"), ("total_tokens", "4000"), ("k1", "1.2"), ("b", "0.5"), ("min_year", "1990"),
     ("max_year", "2030"), ("stemmer", "english")],
)  # fmt: skip
def test_each_sealed_statistic_edited_is_refused_on_open(demo_db, tmp_path, key, value):
    db = copy_of(demo_db, tmp_path, f"UPDATE index_info SET value = '{value}' WHERE key = '{key}'")
    with pytest.raises(NotAnIndexError, match=r"index_info.*retrieval check --db .*retrieval build --db"):
        RetrievalClient(db)


def test_a_text_avgdl_is_refused_although_no_search_reads_it(demo_db, tmp_path):
    db = copy_of(demo_db, tmp_path, "UPDATE index_info SET value = 'abc' WHERE key = 'avgdl'")
    with pytest.raises(NotAnIndexError, match=r"index_info.avgdl is 'abc', not a number"):
        RetrievalClient(db)
    # Without the seal too: avgdl must be total_tokens / n_papers.
    db = copy_of(demo_db, tmp_path, "UPDATE index_info SET value = '40.0' WHERE key = 'avgdl'",
                 f"DELETE FROM index_info WHERE key = '{SEAL_KEY}'", name="unsealed.db")  # fmt: skip
    with pytest.raises(NotAnIndexError, match=r"index_info.avgdl is '40.0', but total_tokens / n_papers is 37.8"):
        RetrievalClient(db)


# -- per query: df, bounds, counts, lengths, documents ---------------------------------------------------------------
@pytest.mark.parametrize("delta", [1, -1])
def test_a_df_off_by_one_is_refused_on_both_paths(demo_db, tmp_path, delta):
    db = copy_of(demo_db, tmp_path, f"UPDATE doc_freq SET df = df + {delta} WHERE term = 'attention'")
    refused(db, rf"doc_freq gives the term 'attention' df {20 + delta}, but its postings chunks hold 20 postings")


@pytest.mark.parametrize("edit", ["max_count = 1", "min_length = 999", "max_count = 0"])
def test_understated_chunk_bounds_are_refused_not_pruned_by(demo_db, tmp_path, edit):
    """The postings chunks' bounds (what ``doc_freq.max_impact`` was): understated, the pruned top k would drop
    papers (or return none at all: a bound of 0)."""
    db = copy_of(demo_db, tmp_path, f"UPDATE postings SET {edit}")
    refused(db, r"postings|max_count|bound")


@pytest.mark.parametrize("count", ["-3", "0", "'abc'", "50"])  # negative, zero, text, above the paper's length (38)
def test_a_count_that_cannot_be_is_refused_by_the_sql_path_and_the_blobs_answer_as_written(demo_db, tmp_path, count):
    clean = {path: lexical(demo_db, path) for path in PATHS}
    db = copy_of(demo_db, tmp_path, f"UPDATE term_freq SET count = {count} WHERE term_id = {ATTENTION} AND doc_id = 1")
    refused(db, r"a posting of the paper 'p001' .* count or a length that cannot be", paths=("sql",))
    assert lexical(db, "blobs") == clean["blobs"]  # the BLOBs hold the postings as the writer wrote them
    problems = {p.invariant for p in check(db).problems}
    assert {"term_freq.count", "postings vs term_freq and doc_len"} <= problems


@pytest.mark.parametrize("length", ["-5", "'abc'", "2"])  # negative, text, below a count of the paper (3)
def test_a_length_that_cannot_be_is_refused(demo_db, tmp_path, length):
    db = copy_of(demo_db, tmp_path, f"UPDATE doc_len SET length = {length} WHERE doc_id = 1")
    refused(db, r"a posting of the paper 'p001' .* count or a length that cannot be", paths=("sql",))
    assert "doc_len.length" in {p.invariant for p in check(db).problems}


def test_a_plausible_length_edited_is_reported_by_check(demo_db, tmp_path):
    """A length that could be (38 -> 68) disagrees only with what whole tables say (the paper's term_freq counts,
    the postings' lengths, total_tokens): an open and a query cannot afford to read those; ``retrieval check``
    does."""
    db = copy_of(demo_db, tmp_path, "UPDATE doc_len SET length = length + 30 WHERE doc_id = 1")
    problems = {p.invariant: p for p in check(db).problems}
    assert "document 1 ('p001') has length 68, its term_freq counts add up to 38" in problems["doc_len.length"].examples
    assert {"index_info vs doc_len and papers", "postings vs term_freq and doc_len"} <= set(problems)


def test_a_document_deleted_from_doc_len_is_refused_on_both_paths(demo_db, tmp_path):
    """Its postings stay; today's joins would drop the paper from every ranking silently."""
    db = copy_of(demo_db, tmp_path, "DELETE FROM doc_len WHERE doc_id = 1")
    refused(db, r"(a document that doc_len lacks|the document 1, which doc_len lacks)")
    assert {"papers vs doc_len", "term_freq.count"} <= {p.invariant for p in check(db).problems}


# -- per paper loaded: years, citation counts --------------------------------------------------------------------------
@pytest.mark.parametrize(("year", "match"), [("'abc'", "is 'abc', not a year"), ("-3", "is -3, outside the years"),
                                              ("3000", "is 3000, outside the years 2018-2025")])  # fmt: skip
def test_a_year_that_cannot_be_is_refused_with_the_paper(demo_db, tmp_path, year, match):
    db = copy_of(demo_db, tmp_path, f"UPDATE papers SET year = {year} WHERE id = 'p001'")
    with RetrievalClient(db) as client:
        for config in (RetrievalConfig(ranking="learned"), RetrievalConfig(ranking="expansion")):
            with pytest.raises(NotAnIndexError, match=rf"papers.year of 'p001' {match}.*retrieval check --db"):
                client.search(QUERY, config=config)
    # the evidence graph reads its seeds' and nodes' years by statements of its own: a TypeError there
    from retrieval.evidence import explain_index

    with pytest.raises(NotAnIndexError, match=rf"papers.year of 'p001' {match}.*retrieval check --db"):
        explain_index(QUERY, db=db)
    assert check(db).problems


@pytest.mark.parametrize("count", ["-7", "'abc'"])
def test_a_citation_count_that_cannot_be_is_refused_with_the_paper(demo_db, tmp_path, count):
    """``cited_counts.cited_by`` negative or text: the learned ranking took its logarithm (a math domain error),
    ``similar`` divided by its square root."""
    db = copy_of(demo_db, tmp_path, f"UPDATE cited_counts SET cited_by = {count} WHERE paper_id = 'p001'")
    match = rf"cited_counts.cited_by of 'p001' is '{count.strip(chr(39))}', not a count.*retrieval check --db"
    with RetrievalClient(db) as client:
        with pytest.raises(NotAnIndexError, match=match):
            client.search(QUERY, config=RetrievalConfig(ranking="learned"))
        with pytest.raises(NotAnIndexError, match=match):
            client.similar(["p002"])
    problems = {p.invariant: p for p in check(db).problems}
    assert problems["cited_counts.cited_by"].count == 1


# -- retrieval check ---------------------------------------------------------------------------------------------------
def test_check_on_a_clean_index_exits_0(demo_db, capsys):
    assert main(["check", "--db", str(demo_db)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{demo_db} is consistent: ") and "invariants checked" in out
    assert main(["check", "--db", str(demo_db), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True and report["problems"] == [] and "integrity_check" in report["checked"]


def test_check_on_a_damaged_index_lists_each_problem_and_exits_1(demo_db, tmp_path, capsys):
    db = copy_of(
        demo_db,
        tmp_path,
        "UPDATE doc_freq SET df = df + 1 WHERE term IN ('attention', 'sparsity', 'routing')",
        "UPDATE cited_counts SET cited_by = cited_by + 40 WHERE paper_id = 'p001'",
        "DELETE FROM term_freq WHERE term_id = (SELECT term_id FROM doc_freq WHERE term = 'block') AND doc_id = 5",
    )
    assert main(["check", "--db", str(db), "--examples", "2"]) == 1
    out = capsys.readouterr().out
    assert "doc_freq.df: 4 problems\n  term 1 'attention' has df 21, 20 postings in term_freq\n" in out
    assert "  ... and 2 more\n" in out
    assert "cited_counts.cited_by: 1 problem\n  paper 'p001': cited_counts gives 59, citations name it 19 times" in out
    assert "'block': document 5 is in the postings chunks, not in term_freq" in out
    assert out.rstrip().endswith(f"rebuild it with `retrieval build --db {db}`")
    assert main(["check", "--db", str(db), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False
    assert {p["invariant"] for p in report["problems"]} == {
        "doc_freq.df", "cited_counts.cited_by", "doc_len.length", "postings vs term_freq and doc_len",
    }  # fmt: skip


def test_check_of_a_missing_index_says_how_to_build_one(tmp_path, capsys):
    assert main(["check", "--db", str(tmp_path / "none.db")]) == 1
    assert "retrieval build --db" in capsys.readouterr().err


# -- PostgreSQL: the edits a server's types let through ----------------------------------------------------------------
@pytest.fixture(scope="module")
def pg_index(pg_database):
    """The demo corpus on a server of its own, edited and mended again by each test (``edited_pg``)."""
    url = pg_database("check")
    build(db=url)
    return url


@contextmanager
def edited_pg(url: str, edit: str, undo: str):
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET search_path TO retrieval")
        conn.execute(edit)
        try:
            yield
        finally:
            conn.execute(undo)


PG_EDITS = {
    "n_papers": (
        "UPDATE index_info SET value = '99' WHERE key = 'n_papers'",
        "UPDATE index_info SET value = '100' WHERE key = 'n_papers'",
        r"index_info",
        "index_info vs doc_len and papers",
    ),
    "avgdl": (
        "UPDATE index_info SET value = 'abc' WHERE key = 'avgdl'",
        "UPDATE index_info SET value = '37.8' WHERE key = 'avgdl'",
        r"index_info.avgdl is 'abc', not a number",
        "index_info",
    ),
    "df": (
        "UPDATE doc_freq SET df = df + 1 WHERE term = 'attention'",
        "UPDATE doc_freq SET df = df - 1 WHERE term = 'attention'",
        r"doc_freq gives the term 'attention' df 21, but its postings chunks hold 20",
        "doc_freq.df",
    ),
    "bounds": (  # every chunk's bound understated (a paper's length can be no less than min_length)
        "UPDATE postings SET min_length = min_length + 1000",
        "UPDATE postings SET min_length = min_length - 1000",
        r"postings|max_count",
        "postings.max_count, min_length, df and range",
    ),
    "count": (
        f"UPDATE term_freq SET count = -count WHERE term_id = {ATTENTION} AND doc_id = 1",
        f"UPDATE term_freq SET count = -count WHERE term_id = {ATTENTION} AND doc_id = 1",
        r"a posting of the paper 'p001' .* count or a length that cannot be",
        "term_freq.count",
    ),
    "length": (
        "UPDATE doc_len SET length = -length WHERE doc_id = 1",
        "UPDATE doc_len SET length = -length WHERE doc_id = 1",
        r"a posting of the paper 'p001' .* count or a length that cannot be",
        "doc_len.length",
    ),
}


@pytest.mark.parametrize("name", sorted(PG_EDITS))
def test_hand_edits_on_postgresql_are_refused_and_checked(pg_index, name):
    edit, undo, match, invariant = PG_EDITS[name]
    paths = ("sql",) if name in ("count", "length") else PATHS  # the BLOBs hold the postings as written
    with edited_pg(pg_index, edit, undo):
        if name in ("n_papers", "avgdl"):
            with pytest.raises(NotAnIndexError, match=match):
                RetrievalClient(pg_index)
        else:
            refused(pg_index, match, paths=paths)
        report = check(pg_index)
        assert invariant in {p.invariant for p in report.problems}, report.to_dict()
    assert check(pg_index).ok


def test_years_and_citation_counts_on_postgresql(pg_index):
    with edited_pg(pg_index, "UPDATE papers SET year = 3000 WHERE id = 'p001'",
                   "UPDATE papers SET year = 2018 WHERE id = 'p001'"):  # fmt: skip
        with RetrievalClient(pg_index) as client, pytest.raises(NotAnIndexError, match=r"is 3000, outside"):
            client.search(QUERY)
        assert "index_info vs doc_len and papers" in {p.invariant for p in check(pg_index).problems}
    with edited_pg(pg_index, "UPDATE cited_counts SET cited_by = -cited_by WHERE paper_id = 'p001'",
                   "UPDATE cited_counts SET cited_by = -cited_by WHERE paper_id = 'p001'"):  # fmt: skip
        with RetrievalClient(pg_index) as client, pytest.raises(NotAnIndexError, match=r"cited_by of 'p001' is '-19'"):
            client.search(QUERY, config=RetrievalConfig(ranking="learned"))
        assert "cited_counts.cited_by" in {p.invariant for p in check(pg_index).problems}
    assert check(pg_index).ok


def test_author_keys_edited_on_postgresql_are_checked_across_pages(pg_index, monkeypatch):
    from retrieval.store import integrity

    monkeypatch.setattr(integrity, "AUTHORS_PAGE", 7)  # the demo's 200 authors over many pages
    ids = "('p002', 'p050', 'p100')"
    edit = f"UPDATE paper_authors SET name_key = name_key || ' x' WHERE paper_id IN {ids}"
    undo = f"UPDATE paper_authors SET name_key = substr(name_key, 1, length(name_key) - 2) WHERE paper_id IN {ids}"
    with edited_pg(pg_index, edit, undo):
        problems = {p.invariant: p for p in check(pg_index).problems}
        wrong = problems["paper_authors.surname and name_key"]
        assert wrong.count == 6 and wrong.examples[0].startswith("paper 'p002', author 0 'Author 1-2'")
    assert check(pg_index).ok


def test_an_older_revision_is_not_called_damaged(demo_db, tmp_path, capsys):
    """``check`` on an index that wants ``retrieval upgrade`` said it was damaged and to rebuild it."""
    from retrieval.store.schema.migrate import downgrade

    db = copy_of(demo_db, tmp_path, name="old.db")
    downgrade(db, "0004")
    assert main(["check", "--db", str(db)]) == 1
    out = capsys.readouterr().out
    assert f"`retrieval upgrade --db {db}`" in out
    assert "damaged" not in out and "retrieval build" not in out
    assert "was not checked further" in out


def test_an_index_without_a_schema_revision_is_not_called_consistent(demo_db, tmp_path, capsys):
    """With ``alembic_version`` emptied, every command refused the index and ``check`` called it consistent."""
    import sqlite3

    db = copy_of(demo_db, tmp_path, name="norev.db")
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM alembic_version")
    assert main(["check", "--db", str(db)]) == 1
    out = capsys.readouterr().out
    assert "records no schema revision (alembic_version is empty): rebuild it" in out and "consistent" not in out
    assert main(["search", "attention", "--db", str(db)]) == 1
    assert "schema revision" in capsys.readouterr().err
    # the table dropped: `check` called it consistent, and the other commands "not a retrieval index (no
    # index_info/papers tables)", which it has
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE alembic_version")
    assert main(["check", "--db", str(db)]) == 1
    out = capsys.readouterr().out
    assert "records no schema revision (its alembic_version table is gone): rebuild it" in out
    assert "consistent" not in out
    assert main(["search", "attention", "--db", str(db)]) == 1
    err = capsys.readouterr().err
    assert "is damaged: it has an index's tables but no alembic_version table" in err and "no index_info" not in err


def test_a_file_that_holds_no_index_is_said_to_be_none_not_a_damaged_one(tmp_path, capsys):
    """A 0-byte file was "damaged ... rebuild it from its corpus" (18 tables missing) where every other command
    says it is not a retrieval index."""
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    assert main(["check", "--db", str(empty)]) == 1
    err = capsys.readouterr().err
    assert "is a SQLite file but not a retrieval index" in err and "damaged" not in err
    assert main(["search", "x", "--db", str(empty)]) == 1
    assert capsys.readouterr().err == err


@pytest.mark.parametrize(
    "edit, invariant, words",
    [
        ("INSERT INTO doc_freq VALUES (9999, 'zzz', 0)", "doc_freq.df", "term 9999 'zzz' has df 0"),
        (
            cite("ghost", "p001", 1, 0),
            "citations.listed_by",
            "citation 'ghost' -> 'p001': declared by the record of a paper the index lacks",
        ),
        (
            cite("p001", "elsewhere", 0, 0),
            "citations.listed_by",
            "citation 'p001' -> 'elsewhere': declared by neither paper's record",
        ),
        (  # `show p001` listed the paper as its own reference and its own citing paper; check said consistent
            cite("p001", "p001", 1, 0),
            "citations.listed_by",
            "citation 'p001' -> 'p001': a paper citing itself, which no writer keeps (a build drops self-citations)",
        ),
        (  # the view citations showed none of p001's citations; check said consistent
            "DELETE FROM paper_keys WHERE paper_id = 'p001'",
            "citation_links vs paper_keys",
            "citation_links names the number",
        ),
        (
            "INSERT INTO paper_keys (key, paper_id) VALUES (99999, 'lonely')",
            "citation_links vs paper_keys",
            "paper_keys numbers 'lonely' as 99999, which no citation uses",
        ),
        (
            "INSERT INTO paper_authors VALUES ('nope', 0, 'A B', 'b', 'a b')",
            "paper_authors and field_sources vs papers",
            "paper_authors has a row of 'nope', which papers lacks",
        ),
        (  # --author Maldacena would find p001, whose page names no such author
            "UPDATE paper_authors SET surname = 'maldacena', name_key = 'juan maldacena' WHERE paper_id = 'p001' "
            "AND position = 0",
            "paper_authors.surname and name_key",
            "paper 'p001', author 0 'Author 1-1': surname and name_key ('maldacena', 'juan maldacena'), its name "
            "gives ('1', 'author 1 1')",
        ),
    ],
)
def test_rows_no_writer_leaves_are_reported(demo_db, tmp_path, edit, invariant, words):
    """Hand edits that ``check`` called consistent though ``stats`` then differed from a rebuild's."""
    db = copy_of(demo_db, tmp_path, *([edit] if isinstance(edit, str) else edit))
    problems = {p.invariant: p for p in check(db).problems}
    assert invariant in problems, problems
    assert any(words in example for example in problems[invariant].examples), problems[invariant].examples
    assert check(copy_of(demo_db, tmp_path, name="clean.db")).ok


@pytest.mark.parametrize("field", ["references", "citations"])
def test_a_paper_listing_only_itself_gets_no_number_and_the_build_is_consistent(tmp_path, field, capsys):
    """A record whose list held its own id alone (dropped as a self-citation) still had its id numbered by the
    build, which no citation used: `check` called a fresh build damaged, and the rebuild it advised did the same."""
    from tests.helpers import paper, write_jsonl

    records = [paper("A", "alpha strings"), paper("B", "beta branes", references=["C"]), paper("C", "gamma gauge")]
    records[0][field] = ["A"]
    db = tmp_path / "self.db"
    build(db=db, source=write_jsonl(tmp_path / "self.jsonl", records))
    assert check(db).ok
    with sqlite3.connect(db) as conn:
        assert {pid for (pid,) in conn.execute("SELECT paper_id FROM paper_keys")} == {"B", "C"}
    remove(["B"], db=db)
    assert check(db).ok
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM paper_keys").fetchone() == (0,)


def test_a_new_id_never_takes_a_number_a_citation_still_names(demo_db, tmp_path):
    """A paper_keys row deleted by hand left its number in citation_links; the next add numbered a new id from
    the largest number paper_keys had, took that number over with its citations, and `check` then called the
    index consistent."""
    from retrieval.commands import add
    from tests.helpers import paper, write_jsonl

    edit = "DELETE FROM paper_keys WHERE key = (SELECT max(key) FROM paper_keys)"
    db = copy_of(demo_db, tmp_path, edit)
    assert "citation_links vs paper_keys" in {p.invariant for p in check(db).problems}
    add(write_jsonl(tmp_path / "new.jsonl", [paper("zz-new", "new", references=["p001", "yy-new"])]), db=db)
    assert "citation_links vs paper_keys" in {p.invariant for p in check(db).problems}
    with sqlite3.connect(db) as conn:
        assert sorted(conn.execute("SELECT cited_id FROM citations WHERE citing_id = 'zz-new'")) == [
            ("p001",), ("yy-new",)]  # fmt: skip
        assert conn.execute("SELECT count(*) FROM citations WHERE citing_id = 'yy-new'").fetchone() == (0,)


def test_a_number_typed_as_text_is_a_damaged_index_for_a_writer(demo_db, tmp_path, capsys):
    """SQLite keeps a text typed into a number's column: the writer's next number would have been that text
    plus one (a traceback)."""
    from tests.helpers import paper, write_jsonl

    db = copy_of(demo_db, tmp_path, "INSERT INTO citation_links VALUES ('x', 'x', 1, 0)")
    new = write_jsonl(tmp_path / "new.jsonl", [paper("zz-new", "new", references=["p001"])])
    assert main(["add", str(new), "--db", str(db)]) == 1
    err = capsys.readouterr().err
    assert "is damaged: paper_keys or citation_links holds 'x' where a number belongs; nothing was changed" in err
    assert "Traceback" not in err
    assert "citation_links vs paper_keys" in {p.invariant for p in check(db).problems}
