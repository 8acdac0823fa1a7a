"""Building on a real PostgreSQL server: the migrated schema itself, the COPY'd rows against the SQLite build of
the same corpus, and the atomic swap (a failed build leaves the previous index as it was)."""

from __future__ import annotations

import json
import sqlite3

import pytest

from retrieval.commands import build
from retrieval.errors import InputError
from retrieval.store.postgres import build as pgbuild
from retrieval.store.schema import catalogue
from tests.helpers import paper, to_0009, write_jsonl

psycopg = pytest.importorskip("psycopg")
#: Each table a build copies, with its columns.
COPIED_COLUMNS = [(t.name, t.columns) for t in catalogue.COPIED]


def _pg_tables(url: str) -> dict[str, list[tuple]]:
    with psycopg.connect(url) as conn:
        conn.execute('SET search_path TO "retrieval"')
        out = {}
        for table, columns in COPIED_COLUMNS:
            cols = ", ".join(f'"{c}"' for c in columns)
            rows = conn.execute(f'SELECT {cols} FROM "{table}"').fetchall()
            out[table] = sorted(tuple(_plain(v) for v in row) for row in rows)
        return out


def _lite_tables(path) -> dict[str, list[tuple]]:
    with sqlite3.connect(path) as conn:
        out = {}
        for table, columns in COPIED_COLUMNS:
            cols = ", ".join(f'"{c}"' for c in columns)
            rows = conn.execute(f'SELECT {cols} FROM "{table}"').fetchall()
            out[table] = sorted(tuple(_plain(v) for v in row) for row in rows)
        return out


def _plain(value):
    return int(value) if isinstance(value, bool) else value


def _without_times(tables: dict) -> dict:
    info = [
        row for row in tables["index_info"] if row[0] not in ("built_at", "updated_at", "build_seconds", "generation")
    ]
    return {**tables, "index_info": info}


def test_the_migrated_schema_on_postgresql_matches_the_models(pg_database):
    from alembic import command
    from alembic.util.exc import CommandError

    from retrieval.store.schema.migrate import alembic_config

    url = pg_database("schema")
    cfg = alembic_config()
    cfg.set_main_option("sqlalchemy.url", "postgresql+psycopg://" + url.split("://", 1)[1])
    command.upgrade(cfg, "head")
    try:
        command.check(cfg)  # raises when the models and the migrated schema differ
    except CommandError as exc:  # pragma: no cover - the failure is the message
        pytest.fail(str(exc))
    with psycopg.connect(url) as conn:
        storage = conn.execute(
            "SELECT attname, attstorage FROM pg_attribute WHERE attrelid = 'postings'::regclass AND attnum > 0"
        ).fetchall()
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    # The packed postings are stored out of line and uncompressed (they do not compress; a read should not try).
    assert {name: kind for name, kind in storage if name in ("doc_ids", "counts", "lengths")} == dict.fromkeys(
        ("doc_ids", "counts", "lengths"), "e"
    )
    assert {t.name for t in catalogue.COPIED} <= tables


def test_a_postgresql_build_holds_the_rows_of_the_sqlite_build(tmp_path, pg_database):
    url = pg_database("rows")
    build(db=url)
    build(db=tmp_path / "demo.db")
    assert _without_times(_pg_tables(url)) == _without_times(_lite_tables(tmp_path / "demo.db"))
    with psycopg.connect(url) as conn:  # psql sees the tables by their names: the database's search_path
        assert conn.execute("SELECT count(*) FROM doc_freq").fetchone()[0] > 0


def test_a_postgresql_build_leaves_its_tables_vacuumed_and_analysed(pg_database):
    """A reader's index-only scans answer from the index alone once a table's pages are marked all-visible, which
    a VACUUM does (autovacuum would, at some later time): the build vacuums and analyses every table it made."""
    url = pg_database("vacuumed")
    build(db=url)
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT c.relname, c.relpages, c.relallvisible, c.reltuples FROM pg_class AS c "
            "JOIN pg_namespace AS n ON n.oid = c.relnamespace WHERE n.nspname = 'retrieval' AND c.relkind = 'r'"
        ).fetchall()
    tables = {name: (pages, visible, tuples) for name, pages, visible, tuples in rows}
    assert {"papers", "paper_keys", "citation_links", "term_freq", "doc_len", "postings"} <= tables.keys()
    for name, (pages, visible, tuples) in tables.items():
        assert visible == pages, (name, pages, visible)
        assert tuples >= 0, name  # -1: never analysed
    assert tables["citation_links"][0] > 0 and tables["paper_keys"][0] > 0


def test_a_failed_build_leaves_the_previous_index_and_no_schema_behind(tmp_path, pg_database, monkeypatch):
    url = pg_database("atomic")
    good = write_jsonl(tmp_path / "good.jsonl", [paper("a", "black hole entropy"), paper("b", "string theory")])
    build(db=url, source=good)
    before = _pg_tables(url)
    bad = write_jsonl(tmp_path / "bad.jsonl", [paper("c", "gauge theory"), {"id": "d"}])
    with pytest.raises(InputError, match="bad.jsonl:2"):
        build(db=url, source=bad)
    assert _pg_tables(url) == before

    def broken(*args, **kwargs):
        raise OSError("the disk filled up during the copy")

    monkeypatch.setattr(pgbuild, "copy_tables", broken)
    other = write_jsonl(tmp_path / "other.jsonl", [paper("e", "lattice gauge theory")])
    with pytest.raises(OSError, match="disk filled"):
        build(db=url, source=other)
    assert _pg_tables(url) == before
    with psycopg.connect(url) as conn:
        schemas = {r[0] for r in conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'retrieval%'")}
    assert schemas == {"retrieval"}  # the half-built schema was dropped


def test_a_stop_during_the_copy_to_the_server_stops_the_build_and_keeps_the_index(tmp_path, pg_database, monkeypatch,
                                                                                    capsys):  # fmt: skip
    """The file a PostgreSQL build copies from is swapped in first, which counted as the change being saved: a
    Ctrl-C during the copy was only remembered, and the new index replaced the old one (exit 0)."""
    from retrieval.interfaces.cli import main
    from tests.helpers import stop_before

    url = pg_database("stopped")
    build(db=url, source=write_jsonl(tmp_path / "good.jsonl", [paper("a", "black hole entropy")]))
    before = _pg_tables(url)
    stop_before(monkeypatch, pgbuild, "copy_tables")
    other = write_jsonl(tmp_path / "other.jsonl", [paper("e", "lattice gauge theory")])
    assert main(["build", "--from", str(other), "--db", url]) == 130
    assert capsys.readouterr().err.splitlines() == ["retrieval: interrupted; nothing was changed"]
    assert _pg_tables(url) == before
    with psycopg.connect(url) as conn:
        schemas = {r[0] for r in conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'retrieval%'")}
    assert schemas == {"retrieval"}


def test_an_index_of_the_previous_revision_on_a_server_names_the_upgrade_and_is_rebuilt(tmp_path, pg_database,
                                                                                        capsys):  # fmt: skip
    """A search locks every table of the schema as its snapshot begins: on an index of the previous revision it
    failed on the table added since ("relation paper_vectors does not exist"), and so did a rebuild's swap. An
    upgrade on the server numbers the citations' ids as a file's does."""
    from retrieval.interfaces.cli import main
    from retrieval.store.database import HEAD_REVISION

    url = pg_database("previous")
    records = [paper("a", "black hole entropy", references=["b", "elsewhere"]), paper("b", "string theory")]
    corpus = write_jsonl(tmp_path / "c.jsonl", records)
    build(db=url, source=corpus)

    def citations():
        with psycopg.connect(url) as conn:
            return sorted(conn.execute("SELECT * FROM retrieval.citations").fetchall())

    rows = citations()
    assert len(rows) == 2
    assert main(["search", "black", "--db", url, "--json"]) == 0
    found = [r["id"] for r in json.loads(capsys.readouterr().out)["results"]]
    assert found[0] == "a"
    to_0009(url)
    assert main(["search", "black", "--db", url]) == 1
    err = capsys.readouterr().err
    assert f"has schema revision '0009', older than this version's '{HEAD_REVISION}': upgrade it once with `retr" in err
    assert main(["build", "--from", str(corpus), "--db", url]) == 0  # the swap locks the tables it has
    capsys.readouterr()
    assert main(["search", "black", "--db", url, "--json"]) == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)["results"]] == found
    to_0009(url)
    with psycopg.connect(url, autocommit=True) as conn:  # a user's own view over the table the upgrade replaces
        conn.execute("CREATE VIEW public.my_citers AS SELECT citing_id FROM retrieval.citations")
    capsys.readouterr()
    assert main(["upgrade", "--db", url]) == 1
    err = capsys.readouterr().err
    assert "objects of yours depend on a table the upgrade replaces (view public.my_citers depends on table" in err
    assert "nothing was changed" in err and "Traceback" not in err
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT version_num FROM retrieval.alembic_version").fetchone() == ("0009",)
        conn.execute("DROP VIEW public.my_citers")
    assert main(["upgrade", "--db", url]) == 0
    assert citations() == rows
    capsys.readouterr()
    assert main(["search", "black", "--db", url, "--json"]) == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)["results"]] == found


def test_a_role_that_may_not_use_the_index_schema_is_told_so(tmp_path, pg_database, capsys):
    """Connected as a role without USAGE on the index's schema, a search said "the database has no schema
    'retrieval': build one", and a build printed psycopg's InsufficientPrivilege traceback."""
    import uuid
    from urllib.parse import urlsplit, urlunsplit

    from retrieval.interfaces.cli import main

    url = pg_database("grants")
    corpus = write_jsonl(tmp_path / "c.jsonl", [paper("a", "black hole entropy")])
    build(db=url, source=corpus)
    role = f"retrieval_reader_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
    try:
        parts = urlsplit(url)
        other = urlunsplit(parts._replace(netloc=f"{role}@{parts.netloc.rsplit('@', 1)[-1]}"))
        assert main(["search", "black", "--db", other]) == 1
        err = capsys.readouterr().err
        assert "the role it connects as may not use the schema 'retrieval' that holds the index" in err, err
        assert main(["build", "--from", str(corpus), "--db", other]) == 1
        err = capsys.readouterr().err
        assert "permission denied for schema retrieval: connect as a role that may" in err, err
        assert "Traceback" not in err
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP OWNED BY "{role}"')
            conn.execute(f'DROP ROLE "{role}"')
    assert [row[0] for row in _pg_tables(url)["papers"]] == ["a"]


def test_a_rebuild_replaces_the_index_in_one_swap(tmp_path, pg_database):
    url = pg_database("swap")
    first = write_jsonl(tmp_path / "one.jsonl", [paper("a", "black hole entropy")])
    second = write_jsonl(tmp_path / "two.jsonl", [paper("x", "entanglement"), paper("y", "holography")])
    build(db=url, source=first)
    build(db=url, source=second)
    assert [row[0] for row in _pg_tables(url)["papers"]] == ["x", "y"]


def test_a_build_that_an_add_overtook_refuses_to_swap_in(tmp_path, pg_database, monkeypatch):
    """An add committed while a rebuild ran would be lost by the swap: the build refuses, the add stays."""
    from retrieval.commands import add
    from retrieval.errors import StoreError

    url = pg_database("race")
    build(db=url, source=write_jsonl(tmp_path / "one.jsonl", [paper("a", "black hole entropy")]))
    late = write_jsonl(tmp_path / "late.jsonl", [paper("late", "an add during the build")])
    real = pgbuild.copy_tables

    def copy_while_someone_adds(*args, **kwargs):
        add(late, db=url)
        return real(*args, **kwargs)

    monkeypatch.setattr(pgbuild, "copy_tables", copy_while_someone_adds)
    rebuild = write_jsonl(tmp_path / "two.jsonl", [paper("x", "entanglement")])
    with pytest.raises(StoreError, match="another writer changed the index"):
        build(db=url, source=rebuild)
    assert [row[0] for row in _pg_tables(url)["papers"]] == ["a", "late"]


def test_upgrade_brings_an_older_revision_on_the_server_to_the_head(tmp_path, pg_database, capsys):
    from alembic import command
    from sqlalchemy import create_engine, pool, text

    from retrieval import RetrievalClient
    from retrieval.errors import SchemaVersionError
    from retrieval.interfaces.cli import main
    from retrieval.store.database import HEAD_REVISION
    from retrieval.store.schema.migrate import alembic_config

    url = pg_database("upgrade")
    corpus = write_jsonl(tmp_path / "a.jsonl", [paper("a", "black hole entropy", authors=["Juan Maldacena"])])
    build(db=url, source=corpus)
    engine = create_engine("postgresql+psycopg://" + url.split("://", 1)[1], poolclass=pool.NullPool)
    with engine.begin() as connection:  # the index as revision 0005 left it: no author keys
        connection.execute(text('SET LOCAL search_path TO "retrieval"'))
        cfg = alembic_config()
        cfg.attributes["connection"] = connection
        command.downgrade(cfg, "0005")
    engine.dispose()
    with pytest.raises(SchemaVersionError, match="retrieval upgrade"):
        RetrievalClient(url)
    assert main(["upgrade", "--db", url]) == 0
    assert f"from schema revision 0005 to {HEAD_REVISION}" in capsys.readouterr().out
    with RetrievalClient(url) as client:
        assert [r.paper.id for r in client.search("entropy", authors=["Maldacena"]).ranked] == ["a"]
    assert main(["upgrade", "--db", url]) == 0 and "nothing to do" in capsys.readouterr().out


def test_the_upgrade_to_0011_packs_a_wide_chunks_doc_ids_as_gaps_on_the_server(tmp_path, pg_database, capsys):
    """Past 65,536 papers a term's chunk keeps its doc ids as 2-byte gaps (0011); the index as 0010 left it (4-byte
    offsets) is still read as it is, and ``retrieval upgrade`` on the server gives the bytes a build writes."""
    import random

    from alembic import command
    from sqlalchemy import create_engine, pool, text

    from retrieval import RetrievalClient
    from retrieval.interfaces.cli import main
    from retrieval.store.schema.migrate import alembic_config

    rng = random.Random(5)
    n = 70_000
    words = [f"{w}{i}" for w in ("quark", "gluon", "brane", "flux", "moduli") for i in range(10)]
    records = [paper(f"p{i:05d}", " ".join(rng.choices(words, k=2))
                     + (" farapart" if i in (0, n - 1) else "")) for i in range(n)]  # fmt: skip
    url = pg_database("gaps")
    build(db=url, source=write_jsonl(tmp_path / "wide.jsonl", records))
    layout = "SELECT count(*) FROM retrieval.postings WHERE length(doc_ids) = {} * df AND last_doc - first_doc >= 65536"

    def state():
        with psycopg.connect(url) as conn:
            rows = conn.execute("SELECT * FROM retrieval.postings ORDER BY term_id, first_doc").fetchall()
            return rows, conn.execute(layout.format(2)).fetchone()[0], conn.execute(layout.format(4)).fetchone()[0]

    def found():
        with RetrievalClient(url) as client:
            return [(p, round(s, 9)) for p, s in client.lexical.search("quark1 flux7 farapart", 20)]

    built, gapped, wide = state()
    assert gapped >= 40 and wide == 1  # farapart's two papers 69,999 apart
    expected = found()
    assert expected[0][0] in ("p00000", "p69999")
    engine = create_engine("postgresql+psycopg://" + url.split("://", 1)[1], poolclass=pool.NullPool)
    with engine.begin() as connection:
        connection.execute(text('SET LOCAL search_path TO "retrieval"'))
        cfg = alembic_config()
        cfg.attributes["connection"] = connection
        command.downgrade(cfg, "0010")
    engine.dispose()
    old, *layouts = state()
    assert layouts == [0, gapped + wide] and old != built
    assert found() == expected  # a 0010 index is read as it is
    assert main(["upgrade", "--db", url]) == 0
    assert "from schema revision 0010 to 0011" in capsys.readouterr().out
    assert state() == (built, gapped, wide)
    assert found() == expected


def test_the_query_log_on_the_server(tmp_path, pg_database, capsys):
    """`retrieval log on|off` and the rows of searches and similar, on PostgreSQL as on a file."""
    from retrieval import commands
    from retrieval.interfaces.cli import main

    url = pg_database("log")
    build(
        db=url,
        source=write_jsonl(tmp_path / "a.jsonl", [paper("a", "black hole"), paper("b", "hole", references=["a"])]),
    )
    assert commands.log_status(db=url) is False
    commands.search("black hole", db=url)
    assert commands.log_entries(db=url) == []
    assert main(["log", "on", "--db", url]) == 0
    first = commands.search("black hole", db=url)
    commands.similar(["a"], db=url)
    rows = commands.log_entries(db=url)
    assert [r["kind"] for r in rows] == ["search", "similar"]
    assert rows[0]["result_ids"] == [r.paper.id for r in first.ranked] and rows[0]["gate_fired"] in (True, False)
    assert commands.log_enable(False, db=url) is True
    commands.search("black hole", db=url)
    assert len(commands.log_entries(db=url)) == 2
    out = tmp_path / "log.png"
    assert commands.log_plot(out, db=url) == 2  # the title names the server (a URL has no file name)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    capsys.readouterr()


def test_a_build_refuses_a_retrieval_schema_that_is_not_an_index_and_leaves_it(pg_database, tmp_path, capsys):
    """A build replaces the schema ``retrieval`` whole: one that holds someone's tables (and no index) was dropped
    with them. It is refused, as a SQLite build refuses a file that is not an index, and searches say what it is."""
    from retrieval import RetrievalClient
    from retrieval.errors import NotAnIndexError
    from retrieval.interfaces.cli import main

    url = pg_database("foreign")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA retrieval")
        conn.execute("CREATE TABLE retrieval.notes (id int PRIMARY KEY, body text)")
        conn.execute("INSERT INTO retrieval.notes VALUES (1, 'keep me')")
    with pytest.raises(NotAnIndexError, match="holds tables that are not a retrieval index"):
        build(db=url)
    assert main(["build", "--db", url]) == 1
    err = capsys.readouterr().err
    assert "notes" in err and "nothing was changed" in err and "Traceback" not in err
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT body FROM retrieval.notes").fetchall() == [("keep me",)]
    with pytest.raises(NotAnIndexError, match="holds tables but is not a retrieval index"):
        RetrievalClient(url)
