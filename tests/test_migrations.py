"""The schema as the migrations make it: equal to the models, reversible, and guarded on open."""

import sqlite3

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect

from retrieval import IndexNotFoundError, NotAnIndexError, RetrievalClient, SchemaVersionError
from retrieval.commands import build, stats
from retrieval.store.database import HEAD_REVISION, KNOWN_REVISIONS
from retrieval.store.schema.migrate import downgrade, head_revision, migrate, script_revisions
from retrieval.store.schema.models import Base

TABLES = {
    "papers", "paper_authors", "paper_keys", "citation_links", "doc_freq", "term_freq", "doc_len", "index_info",
    "query_log",
}  # fmt: skip


def _diff(path):
    engine = create_engine(f"sqlite:///{path}")
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    engine.dispose()
    return diff


def test_revision_constants_match_the_scripts():
    assert head_revision() == HEAD_REVISION
    assert script_revisions() == list(KNOWN_REVISIONS) and KNOWN_REVISIONS[-1] == HEAD_REVISION


def test_migration_messages_go_to_the_stream_of_the_moment(tmp_path):
    """Alembic's default stream is sys.stdout as it was when alembic.config was first imported: under a stream
    replaced since (a test's capture, closed after it; a caller's redirect), a migration's messages must go to
    the stream in place now, not to a closed one ("I/O operation on closed file" when a server's index was
    upgraded after such a test)."""
    import contextlib
    import io

    import alembic.config  # noqa: F401  (imported under the stream of the moment: its default is bound now)
    from alembic import command

    from retrieval.store.schema.migrate import alembic_config

    caught = io.StringIO()
    with contextlib.redirect_stdout(caught):
        cfg = alembic_config()
        command.history(cfg)
    assert cfg.stdout is caught
    assert HEAD_REVISION in caught.getvalue()


def test_upgrade_from_empty_gives_the_models_schema(tmp_path):
    db = tmp_path / "m.db"
    migrate(db)
    assert _diff(db) == []
    inspector = inspect(create_engine(f"sqlite:///{db}"))
    assert set(inspector.get_table_names()) >= TABLES
    assert {"term_counts", "citations"} <= set(inspector.get_view_names())
    assert {ix["name"] for ix in inspector.get_indexes("citation_links")} == {"ix_citation_links_cited_citing"}
    assert {ix["name"] for ix in inspector.get_indexes("paper_keys")} == {"ix_paper_keys_paper_id"}
    pk = inspector.get_pk_constraint("term_freq")
    assert pk["name"] == "pk_term_freq" and pk["constrained_columns"] == ["term_id", "doc_id"]


def test_the_catalogue_is_the_models(tmp_path):
    # retrieval.store.schema.catalogue repeats the models' tables and columns (a query process never imports
    # SQLAlchemy): the same tables, the same columns in record order, booleans where the models have them, and
    # each table and checked index added by the revision the catalogue says.
    from retrieval.store.schema import catalogue

    models = {name: table for name, table in Base.metadata.tables.items()}
    assert set(catalogue.BY_NAME) - {"alembic_version"} - {t.name for t in catalogue.TABLES if t.until} == set(models)
    for name, table in models.items():
        entry = catalogue.BY_NAME[name]
        assert entry.columns == tuple(c.name for c in table.columns), name
        assert set(entry.booleans) == {c.name for c in table.columns if str(c.type) == "BOOLEAN"}, name
        if entry.shard_key:
            assert entry.shard_key in entry.columns
    for revision in KNOWN_REVISIONS[KNOWN_REVISIONS.index("0003") :]:
        db = tmp_path / f"r{revision}.db"
        migrate(db, revision)
        with sqlite3.connect(db) as conn:
            names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert set(catalogue.required(revision)) <= names, revision
        later = [t.name for t in catalogue.TABLES if t.since > revision]
        assert not set(later) & names, revision
        gone = [t.name for t in catalogue.TABLES if t.until and t.until <= revision]
        assert not set(gone) & tables, revision


def test_the_read_locks_cover_every_table_a_search_reads(tmp_path):
    # A PostgreSQL read snapshot locks catalogue.LOCKED as it begins (a rebuild's swap takes the same locks): a
    # search, a similar, a paper page or an explanation that read a table outside them could meet a half-swapped
    # index.
    import re

    from retrieval import Trace
    from retrieval.store.schema import catalogue

    build(db=tmp_path / "d.db")
    trace = Trace()
    with RetrievalClient(db=tmp_path / "d.db", tracer=trace) as client:
        hits = client.search("attention sparsity", limit=5).ranked
        client.search('"attention" retrieval', limit=5, year=(2000, 2030), authors="1")
        client.similar([hits[0].paper.id])
        client.show(hits[0].paper.id)
    read = {
        name
        for statement in trace.statements
        if not statement.name.startswith("open:")  # the check an open makes, before any snapshot
        for named in re.findall(r"\b(?:FROM|JOIN)\s+(\w+)", statement.sql)
        for name in (catalogue.VIEWS[named].tables if named in catalogue.VIEWS else (named,))
        if name in catalogue.BY_NAME
    }
    assert read and read <= set(catalogue.LOCKED), read - set(catalogue.LOCKED)


def test_downgrade_to_base_and_back(tmp_path):
    db = tmp_path / "m.db"
    migrate(db)
    downgrade(db, "base")
    with sqlite3.connect(db) as conn:
        left = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
    assert left == {"alembic_version"}
    migrate(db)
    assert _diff(db) == []


def test_offline_mode_emits_sql(tmp_path, capsys):
    migrate(tmp_path / "m.db", sql=True)
    out = capsys.readouterr().out
    assert "CREATE TABLE papers" in out and "CREATE VIEW term_counts" in out
    assert not (tmp_path / "m.db").exists()


def test_missing_file_suggests_build(tmp_path):
    with pytest.raises(IndexNotFoundError, match=r"no index at .*nope\.db: build one with `retrieval build"):
        RetrievalClient(db=tmp_path / "nope.db")


def test_non_sqlite_file_is_refused(tmp_path):
    path = tmp_path / "notes.db"
    path.write_text("just some text, not a database\n" * 100)
    with pytest.raises(NotAnIndexError, match="not a retrieval index"):
        stats(path)


def test_other_sqlite_file_is_refused(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE things (x)")
    with pytest.raises(NotAnIndexError, match="not a retrieval index"):
        RetrievalClient(db=path)


def test_unknown_revision_is_refused(tmp_path):
    db = tmp_path / "x.db"
    build(db=db)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE alembic_version SET version_num = 'f00d'")
    with pytest.raises(SchemaVersionError, match="revision 'f00d'.*rebuild the index"):
        RetrievalClient(db=db)


def test_index_from_another_tokeniser_is_refused(tmp_path):
    db = tmp_path / "x.db"
    build(db=db)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE index_info SET value = '3' WHERE key = 'tokeniser_version'")
    with pytest.raises(SchemaVersionError, match="tokenised by .* v3.*upgrade retrieval, or rebuild"):
        RetrievalClient(db=db)


def test_a_bulk_build_leaves_the_migrated_schema(tmp_path):
    """The bulk build drops and recreates two indexes around its load: they must come back as migrated."""
    built, migrated = tmp_path / "built.db", tmp_path / "migrated.db"
    build(db=built)
    migrate(migrated)
    assert _diff(built) == []

    def indexes(path):
        with sqlite3.connect(path) as conn:
            rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
            return {name: " ".join(sql.replace('"', "").split()) for name, sql in rows}

    assert indexes(built) == indexes(migrated)


def test_an_index_whose_tables_are_not_its_recorded_revision_is_refused_with_a_message(tmp_path, capsys):
    """A file that records an older revision than its tables are (edited by hand, or written by something else):
    the migration fails on a table that already exists. The upgrade says so and what to do, exit 1, and leaves
    the file as it was (it printed SQLAlchemy's traceback)."""
    from retrieval.interfaces.cli import main

    db = tmp_path / "x.db"
    build(db=db)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE alembic_version SET version_num = '0004'")
    conn.commit()
    conn.close()
    before = db.read_bytes()
    assert main(["upgrade", "--db", str(db)]) == 1
    err = capsys.readouterr().err
    assert f"cannot upgrade {db} from schema revision 0004: its tables are not those of that revision" in err
    assert "already exists" in err and "retrieval build --from" in err and "Traceback" not in err
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_the_upgrade_to_0010_numbers_the_citations_and_keeps_every_row(tmp_path):
    """0010 stores each citation as two numbers (``citation_links``) and each id once (``paper_keys``); the view
    ``citations`` shows the same rows as 0009's table held, flags included, dangling ends too, and the answers
    that read them do not change."""
    from retrieval.commands import check
    from retrieval.corpus.paper import Paper
    from retrieval.store.schema.migrate import upgrade_index
    from retrieval.store.sqlite.build import build_index

    papers = [
        Paper("a", "graph walk", references=["b", "outside-1"]),
        Paper("b", "walk on graphs", references=["c"], citations=["a", "outside-2"]),
        Paper("c", "random walk graph", citations=["b", "d"]),
        Paper("d", "graph", references=["c", "a", "outside-1"]),
    ]
    db = tmp_path / "c.db"
    build_index(papers, db)

    def citations():
        with sqlite3.connect(db) as conn:
            return sorted(conn.execute("SELECT citing_id, cited_id, listed_by_citing, listed_by_cited FROM citations"))

    def answers():
        with RetrievalClient(db) as client:
            ranked = client.search("graph walk", limit=10).ranked
            return [e.to_dict() for e in ranked], client.show("b").to_dict()

    def mine():  # a user's own view over citations, made with sqlite3
        with sqlite3.connect(db) as conn:
            return sorted(conn.execute("SELECT * FROM my_edges"))

    rows, before = citations(), answers()
    assert ("b", "outside-1") not in {r[:2] for r in rows} and ("outside-2", "b", 0, 1) in rows
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE VIEW my_edges AS SELECT citing_id, cited_id FROM citations WHERE listed_by_citing")
    edges = mine()
    assert edges and len(edges) < len(rows)
    downgrade(db, "0009")
    assert mine() == edges
    with sqlite3.connect(db) as conn:
        kinds = dict(conn.execute("SELECT name, type FROM sqlite_master WHERE name LIKE '%citation%'"))
    assert kinds == {"citations": "table", "ix_citations_cited_citing": "index"}, kinds
    assert citations() == rows
    with pytest.raises(SchemaVersionError, match="retrieval upgrade"):
        RetrievalClient(db)
    upgrade_index(db)
    assert citations() == rows
    assert mine() == edges  # the upgrade renamed the table away from under it ("no such table: citations_0009")
    with sqlite3.connect(db) as conn:
        numbered = conn.execute("SELECT paper_id FROM paper_keys ORDER BY key").fetchall()
        assert conn.execute("SELECT type FROM sqlite_master WHERE name = 'citations'").fetchone() == ("view",)
    assert [pid for (pid,) in numbered] == sorted({pid for row in rows for pid in row[:2]})  # in id order
    assert answers() == before
    assert check(db).ok
