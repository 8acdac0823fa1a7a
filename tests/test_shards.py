"""The index sharded over PostgreSQL servers (``retrieval.store.postgres.shards``), against three real servers (a
coordinator and two shards, started by .ci/run): the layout itself, every row on the shard PostgreSQL's hash
assigns it, adds and removes through the coordinator landing on the right shard with the global statistics
exact, and a failed build that leaves the previous index, shards included, as it was. That searches on the
coordinator equal a single server's is checked in tests/test_postgres_read.py (the ``pair`` fixture)."""

from __future__ import annotations

import json
import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrieval.bm25 import SCORE_DECIMALS
from retrieval.commands import add, build, check, remove, stats
from retrieval.errors import ConfigError, IndexNotFoundError, InputError, StoreError
from retrieval.interfaces.cli import main
from retrieval.search.client import RetrievalClient
from retrieval.store.postgres.shards import INTEGER_KEYS, parse_shards
from retrieval.store.schema import catalogue
from retrieval.store.schema.catalogue import COORDINATOR, DISTRIBUTED
from retrieval.store.sql.executor import merge
from tests.helpers import paper, write_jsonl

psycopg = pytest.importorskip("psycopg")  # (the merge tests at the end need no server)
#: Each table a build copies, with its columns.
COPIED_COLUMNS = [(t.name, t.columns) for t in catalogue.COPIED]

TOLERANCE = 1e-9


def _corpus(tmp_path, n: int = 60):
    records = [
        paper(
            f"p{i:03d}",
            f"Paper {i} on {'black holes' if i % 3 else 'string duality'}",
            f"We study {'entropy' if i % 2 else 'branes'} and {'gauge' if i % 5 else 'gravity'} number {i}.",
            year=1995 + i % 9,
            references=[f"p{j:03d}" for j in range(max(0, i - 3), i)],
            authors=[f"A. Author{i % 7}"],
        )
        for i in range(n)
    ]
    return write_jsonl(tmp_path / "corpus.jsonl", records), records


def _rows(url: str, schema: str, table: str, columns) -> list[tuple]:
    with psycopg.connect(url) as conn:
        cols = ", ".join(f'"{c}"' for c in columns)
        return sorted(tuple(int(v) if isinstance(v, bool) else v for v in row)
                      for row in conn.execute(f'SELECT {cols} FROM "{schema}"."{table}"'))  # fmt: skip


def _layout(url: str) -> list[dict]:
    with psycopg.connect(url) as conn:
        return json.loads(conn.execute("SELECT value FROM retrieval.index_info WHERE key = 'shards'").fetchone()[0])


def _ranking(db: str, query: str = "black holes") -> list[tuple[str, float]]:
    """The ids and scores of ``query``'s ranking on the index at ``db``, read by a client of its own."""
    with RetrievalClient(db) as client:
        return [(r.paper.id, r.final_score) for r in client.search(query).ranked]


def _schemas(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'retrieval%'")]


def _expected_shard(coordinator: str, table: str, key) -> int:
    """The partition PostgreSQL's own hash gives ``key`` in ``table`` (asked of the coordinator)."""
    with psycopg.connect(coordinator) as conn:
        n = conn.execute(
            "SELECT count(*) FROM pg_inherits WHERE inhparent = %s::regclass", (f"retrieval.{table}",)
        ).fetchone()[0]
        kind = "integer" if DISTRIBUTED[table] in INTEGER_KEYS else "text"
        for i in range(n):
            ok = conn.execute(
                f"SELECT satisfies_hash_partition(%s::regclass::oid, %s, %s, %s::{kind})",
                (f"retrieval.{table}", n, i, key),
            ).fetchone()[0]
            if ok:
                return i
    raise AssertionError(f"no partition for {key!r}")


def _check_placement(coordinator: str, shards: list[str]) -> None:
    """Every row of every distributed table is on the shard its key hashes to, and on no other."""
    layout = _layout(coordinator)
    columns = dict(COPIED_COLUMNS)
    for table, key in DISTRIBUTED.items():
        for i, entry in enumerate(layout):
            rows = _rows(shards[i], entry["schema"], table, [key])
            for (value,) in rows[:: max(1, len(rows) // 25)]:  # a sample of each shard's keys
                assert _expected_shard(coordinator, table, value) == i, (table, value)
        total = sum(len(_rows(shards[i], e["schema"], table, columns[table])) for i, e in enumerate(layout))
        assert total == len(_rows(coordinator, "retrieval", table, columns[table]))


def _same_index(lite_path, coordinator: str) -> None:
    """The sharded index holds exactly the rows (statistics included) of the SQLite index of the same corpus."""
    with sqlite3.connect(lite_path) as conn:
        for table, columns in COPIED_COLUMNS:
            cols = ", ".join(f'"{c}"' for c in columns)
            lite = sorted(conn.execute(f'SELECT {cols} FROM "{table}"').fetchall())
            pg = _rows(coordinator, "retrieval", table, columns)
            if table == "index_info":
                skip = ("built_at", "updated_at", "build_seconds", "generation", "shards", "source")
                lite = [r for r in lite if r[0] not in skip]
                pg = [r for r in pg if r[0] not in skip]
            assert lite == pg, table


def _same_searches(lite_path, coordinator: str, queries) -> None:
    from retrieval.search import lexical

    with RetrievalClient(lite_path) as lite, RetrievalClient(coordinator) as sharded:
        for query in queries:
            for exhaustive in (False, True):
                a = lite.lexical.search(query, 20, exhaustive=exhaustive)
                b = sharded.lexical.search(query, 20, exhaustive=exhaustive)
                assert [p for p, _ in a] == [p for p, _ in b]
                assert all(abs(x - y) <= TOLERANCE for (_, x), (_, y) in zip(a, b, strict=True))
            x, y = lite.search(query), sharded.search(query)
            assert [(r.paper.id, round(r.final_score, 9)) for r in x.ranked] == [
                (r.paper.id, round(r.final_score, 9)) for r in y.ranked
            ]
            assert (x.matched, x.matched_exact) == (y.matched, y.matched_exact)
            # Filtered, the papers that pass scored together in SQL (as where few pass, in a process without
            # NumPy): each shard counted its own matches, and the count shown was the first shard's.
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(lexical, "OVERFETCH_MAX", 0)
                patch.setattr(lexical, "blob_path", lambda *args: False)
                for filters in (
                    {"year": "1996-1999"},
                    {"authors": ["Author3"]},
                    {"year": "1997-", "authors": ["Author1"]},
                ):
                    for offset in (0, 5):
                        x = lite.search(query, limit=3, offset=offset, **filters)
                        y = sharded.search(query, limit=3, offset=offset, **filters)
                        assert [r.paper.id for r in x.ranked] == [r.paper.id for r in y.ranked], filters
                        assert (x.matched, x.matched_exact) == (y.matched, y.matched_exact), (query, filters)


QUERIES = ["black holes entropy", "string duality branes", "gauge gravity", "paper number 7"]


def test_the_layout_partitions_every_distributed_table_over_the_shards(sharded_database, tmp_path):
    corpus, _ = _corpus(tmp_path)
    coordinator, shards = sharded_database("layout")
    summary = build(db=coordinator, source=corpus, shards=shards)
    assert [s["url"] for s in summary.shards] == shards
    assert all(s["rows"]["papers"] > 0 and s["rows"]["term_freq"] > 0 for s in summary.shards)  # both hold rows
    with psycopg.connect(coordinator) as conn:
        partitioned = {
            r[0]
            for r in conn.execute(
                "SELECT c.relname FROM pg_partitioned_table AS p JOIN pg_class AS c ON c.oid = p.partrelid "
                "JOIN pg_namespace AS n ON n.oid = c.relnamespace WHERE n.nspname = 'retrieval'"
            )
        }
        assert partitioned == set(DISTRIBUTED)
        foreign = conn.execute(
            "SELECT c.relname, s.srvname FROM pg_foreign_table AS f JOIN pg_class AS c ON c.oid = f.ftrelid "
            "JOIN pg_foreign_server AS s ON s.oid = f.ftserver ORDER BY c.relname"
        ).fetchall()
        assert len(foreign) == 2 * len(DISTRIBUTED)
        plain = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'retrieval'")}
        assert set(COORDINATOR) <= plain  # the corpus-wide statistics live on the coordinator
        # The views read the partitioned tables (the coordinator had lost term_counts with the tables it replaced).
        for view, table in (("term_counts", "term_freq"), ("citations", "citation_links")):
            shown, stored = (
                conn.execute(f"SELECT count(*) FROM retrieval.{name}").fetchone()[0] for name in (view, table)
            )
            assert shown == stored > 0, view
    for url, entry in zip(shards, _layout(coordinator), strict=True):
        with psycopg.connect(url) as conn:
            there = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s",
                                                (entry["schema"],))}  # fmt: skip
            # Vacuumed and analysed, as the server counts it: how many pages VACUUM could mark all-visible (for
            # index-only scans) depends on what else the server runs at that moment, so that is not asserted.
            vacuumed = conn.execute(
                "SELECT relname FROM pg_stat_user_tables WHERE schemaname = %s AND vacuum_count > 0 "
                "AND analyze_count > 0",
                (entry["schema"],),
            ).fetchall()
        assert there == set(DISTRIBUTED)  # no statistics of its own on a shard
        assert {r[0] for r in vacuumed} == there  # each table vacuumed and analysed
    _check_placement(coordinator, shards)
    lite = tmp_path / "single.db"
    build(db=lite, source=corpus)
    _same_index(lite, coordinator)
    _same_searches(lite, coordinator, QUERIES)


def test_adds_and_removes_through_the_coordinator_land_on_the_right_shard(sharded_database, tmp_path):
    corpus, records = _corpus(tmp_path)
    coordinator, shards = sharded_database("writes")
    build(db=coordinator, source=corpus, shards=shards)
    new = [
        paper("n1", "Black holes and string duality", "New entropy counting.", year=2004, references=["p001", "p002"]),
        paper(
            "n2", "Zyzzyva gravity", "A new word, zyzzyva.", year=2004, references=["n1", "p010"], authors=["B. Writer"]
        ),  # fmt: skip
        paper("p005", "Paper 5 replaced", "Entirely new text about branes.", year=1999, references=["p001"]),
    ]
    add(write_jsonl(tmp_path / "new.jsonl", new), db=coordinator, replace=True)
    remove(["p007", "p030"], db=coordinator)
    _check_placement(coordinator, shards)
    layout = _layout(coordinator)
    for pid in ("n1", "n2"):
        home = _expected_shard(coordinator, "papers", pid)
        for i, entry in enumerate(layout):
            found = _rows(shards[i], entry["schema"], "papers", ["id"])
            assert ((pid,) in found) == (i == home), (pid, i)
    with psycopg.connect(coordinator) as conn:
        doc = conn.execute("SELECT doc_id FROM retrieval.doc_len WHERE paper_id = 'n2'").fetchone()[0]
    home = _expected_shard(coordinator, "term_freq", doc)
    for i, entry in enumerate(layout):
        postings = [r for r in _rows(shards[i], entry["schema"], "term_freq", ["doc_id"]) if r[0] == doc]
        assert bool(postings) == (i == home)
    # The global statistics equal a rebuild's from the corpus as it now is.
    current = [r for r in records if r["id"] not in ("p007", "p030", "p005")] + new
    lite = tmp_path / "rebuilt.db"
    build(db=lite, source=write_jsonl(tmp_path / "current.jsonl", current))
    _same_searches(lite, coordinator, [*QUERIES, "zyzzyva", "entirely new branes"])
    with RetrievalClient(lite) as a, RetrievalClient(coordinator) as b:
        sa, sb = a.stats, b.stats
        assert (sa.n_papers, sa.total_tokens) == (sb.n_papers, sb.total_tokens)
        assert abs(sa.avgdl - sb.avgdl) <= TOLERANCE
    with sqlite3.connect(lite) as conn:
        lite_df = sorted(conn.execute("SELECT term, df FROM doc_freq WHERE df > 0").fetchall())
    assert lite_df == [r for r in _rows(coordinator, "retrieval", "doc_freq", ["term", "df"]) if r[1] > 0]


def test_a_remove_asks_the_shards_for_the_removed_papers_rows_only(sharded_database, tmp_path):
    """Every statement a remove runs on a distributed table sends the shards its condition (a key array): an
    ``IN`` over a subquery stayed on the coordinator as a filter, so a remove of one paper read every citation
    and every author row of every shard (1.55 s to 0.7 s for one hep-th paper over two shards)."""
    from retrieval.store import vectors, writer
    from retrieval.store.postgres.connection import convert, numbered
    from retrieval.store.sql.dialect import SHARDED, text_for

    corpus, _ = _corpus(tmp_path)
    coordinator, shards = sharded_database("remove_reads")
    build(db=coordinator, source=corpus, shards=shards)
    statements = [writer.EXISTING_SQL, writer.REMOVED_TEXT_SQL, writer.TOUCHED_SQL, *writer.REMOVE_STATEMENTS,
                  *writer.RECOUNT_STATEMENTS, vectors.DELETE_VECTORS]  # fmt: skip
    remote = []
    with psycopg.connect(coordinator) as conn:
        conn.execute("SET search_path TO retrieval")
        for sql in statements:
            text = text_for(sql, SHARDED)
            values = dict.fromkeys(numbered(text)[1], json.dumps(["p007"]))
            plan = [row[0] for row in conn.execute(f"EXPLAIN (VERBOSE, COSTS OFF) {convert(text)}", values)]
            remote += [(sql, line.strip()) for line in plan if "Remote SQL:" in line]
        conn.rollback()
    tables = [t for t in DISTRIBUTED if t != "term_freq"]  # a posting is removed by its key, one at a time
    asked = [(sql, line) for sql, line in remote if any(f".{t} " in f"{line} " for t in tables)]
    assert {sql for sql, _ in asked} == set(statements)  # each reads or changes a distributed table
    unbounded = [(sql.split()[0:4], line) for sql, line in asked if " WHERE " not in line]
    assert not unbounded, unbounded


def _s2(pid: str, title: str, year: int, references=(), citations=()) -> dict:
    """A Semantic Scholar record: the format whose papers list their citing papers too."""
    return {
        "paperId": pid,
        "title": title,
        "abstract": f"Entropy of branes in {title}.",
        "year": year,
        "references": [{"paperId": r} for r in references],
        "citations": [{"paperId": c} for c in citations],
    }


def _dangling_corpus(tmp_path, n: int = 30):
    """Papers whose links leave the corpus: references to ids outside it (several cited by many papers), and
    citing papers outside it named by the cited paper's record."""
    records = [
        _s2(
            f"d{i:02d}",
            f"Dangling {i} black holes",
            2000 + i % 6,
            references=[f"d{j:02d}" for j in range(max(0, i - 2), i)] + [f"out{i % 5}", f"out{5 + i % 7}"],
            citations=[f"citer{i % 4}", f"d{(i + 1) % n:02d}"] if i % 3 == 0 else (),
        )
        for i in range(n)
    ]
    return write_jsonl(tmp_path / "dangling.jsonl", records)


def _links(url, table: str) -> list[tuple]:
    columns = dict(COPIED_COLUMNS).get(table) or ("citing_id", "cited_id", "listed_by_citing", "listed_by_cited")
    if not isinstance(url, str):
        with sqlite3.connect(url) as conn:
            return sorted(conn.execute(f'SELECT {", ".join(columns)} FROM "{table}"').fetchall())
    return _rows(url, "retrieval", table, columns)


def _same_links(lite, coordinator: str, shown: list[str]) -> None:
    """The citation rows and in-degrees of both, and what a user sees of them: stats, check, show's counts."""
    for table in ("citations", "cited_counts"):
        assert _links(lite, table) == _links(coordinator, table), table
    keys = ("papers", "edges", "dangling_references")
    a, b = stats(db=lite), stats(db=coordinator)
    assert {k: a[k] for k in keys} == {k: b[k] for k in keys}
    report = check(db=coordinator)
    assert report.ok, report
    with RetrievalClient(lite) as x, RetrievalClient(coordinator) as y:
        for pid in shown:
            p, q = x.show(pid), y.show(pid)
            assert (p.paper.references, p.paper.citations, p.cited_by) == (q.paper.references, q.paper.citations,
                                                                              q.cited_by), pid  # fmt: skip
            assert (p.references_total, p.references_in_corpus, p.citations_total) == (
                q.references_total, q.references_in_corpus, q.citations_total)  # fmt: skip
        for sort in ("citations", None):
            r, s = x.search("black holes entropy", sort=sort), y.search("black holes entropy", sort=sort)
            assert [(e.paper.id, e.citations) for e in r.ranked] == [(e.paper.id, e.citations) for e in s.ranked]


def test_a_sharded_index_keeps_the_citations_and_in_degrees_of_ids_outside_the_corpus(sharded_database, tmp_path):
    # A citation row or an in-degree whose key (the citing id, the cited id) names no paper of the corpus was
    # placed on no shard, and lost: counts then differed from a single server's, and recounts after a write too.
    corpus = _dangling_corpus(tmp_path)
    lite = tmp_path / "lite.db"
    build(db=lite, source=corpus)
    with sqlite3.connect(lite) as conn:  # the corpus has both kinds of dangling rows
        assert conn.execute("SELECT count(*) FROM cited_counts WHERE paper_id LIKE 'out%'").fetchone()[0] == 12
        assert conn.execute("SELECT count(*) FROM citations WHERE citing_id LIKE 'citer%'").fetchone()[0] == 10
    coordinator, shards = sharded_database("dangling")
    build(db=coordinator, source=corpus, shards=shards)
    _check_placement(coordinator, shards)
    _same_index(lite, coordinator)
    _same_links(lite, coordinator, ["d03", "d04", "d12"])
    # Writes recount in-degrees from the citation rows: the same adds and removes on both agree.
    new = [
        _s2("n1", "Black holes beyond", 2004, references=["out0", "out6", "d05", "gone1"], citations=["citer0"]),
        _s2("d04", "Dangling 4 replaced", 2003, references=["out1"], citations=["citer9", "d12"]),
    ]
    for db in (lite, coordinator):
        add(write_jsonl(tmp_path / "new.jsonl", new), db=db, replace=True)
        remove(["d06", "d09"], db=db)
    _check_placement(coordinator, shards)
    _same_links(lite, coordinator, ["n1", "d04", "d05", "d12"])


def test_a_search_that_sees_a_write_half_committed_is_read_again_not_called_damage(
    sharded_database, tmp_path, monkeypatch
):
    """A search's shard snapshots begin after the coordinator's: a write committing in between showed the shards'
    new rows beside the coordinator's old statistics, and the search said the index was damaged (a year outside
    the years index_info gives, postings of a document doc_len lacks)."""
    from retrieval.store.sql.executor import Executor

    corpus, _ = _corpus(tmp_path, 30)
    coordinator, shards = sharded_database("halfway")
    build(db=coordinator, source=corpus, shards=shards)
    new = [paper(f"n{i}", "Black holes far ahead", "Entropy of black holes.", year=2050 + i) for i in range(6)]
    add(write_jsonl(tmp_path / "new.jsonl", new), db=coordinator)
    real = Executor.begin_shards
    writes = []

    def begin_then_write(self, info):
        if not writes:  # the coordinator's snapshot has begun: the remove commits before the shards' do
            writes.append("remove")
            remove([r["id"] for r in new], db=coordinator)
        return real(self, info)

    with RetrievalClient(coordinator) as client:
        client.stats  # noqa: B018 - the index is known to be sharded from its first snapshot on
        monkeypatch.setattr(Executor, "begin_shards", begin_then_write)
        found = client.search("black holes entropy", limit=50)
    assert writes == ["remove"]
    monkeypatch.undo()
    with RetrievalClient(coordinator) as fresh:
        expected = fresh.search("black holes entropy", limit=50)
    assert [(r.paper.id, r.final_score) for r in found.ranked] == [(r.paper.id, r.final_score) for r in expected.ranked]
    assert not any(r.paper.id.startswith("n") for r in found.ranked)


@pytest.mark.parametrize("write", ["add", "remove"])
def test_an_explanation_across_a_write_half_committed_is_a_new_clients(sharded_database, tmp_path, monkeypatch, write):
    """``explain``'s snapshot on the coordinator begins before a write commits and its shards' after it (the case
    a search is read again for, above): the run neither calls the index damaged nor differs from a new client's,
    since its seeds are read from the coordinator's postings and named on the shards, and its graph from the
    shards alone."""
    from retrieval.evidence.pipeline import explain
    from retrieval.store.sql.executor import Executor

    corpus, records = _corpus(tmp_path, 30)
    coordinator, shards = sharded_database(f"halfway-explain-{write}")
    build(db=coordinator, source=corpus, shards=shards)
    cited = [r["id"] for r in records[:10]]
    new = [
        paper(f"n{i}", "Black holes far ahead", "Entropy of black holes.", year=2050 + i, references=cited)
        for i in range(6)
    ]
    new_file = write_jsonl(tmp_path / "new.jsonl", new)
    if write == "remove":
        add(new_file, db=coordinator)
    real = Executor.begin_shards
    writes = []

    def begin_then_write(self, info):
        if not writes:  # the coordinator's snapshot has begun: the write commits before the shards' snapshots
            writes.append(write)
            if write == "add":
                add(new_file, db=coordinator)
            else:
                remove([r["id"] for r in new], db=coordinator)
        return real(self, info)

    with RetrievalClient(coordinator) as client:
        client.stats  # noqa: B018 - the index is known to be sharded from its first snapshot on
        monkeypatch.setattr(Executor, "begin_shards", begin_then_write)
        run = explain(client, "black holes entropy")
    assert writes == [write]
    monkeypatch.undo()
    with RetrievalClient(coordinator) as fresh:
        expected = explain(fresh, "black holes entropy")
    assert run.top and run.top == expected.top and sorted(run.nodes) == sorted(expected.nodes)
    assert any(pid.startswith("n") for pid in run.nodes) is (write == "add")


def test_a_failed_build_leaves_the_previous_sharded_index_as_it_was(sharded_database, tmp_path):
    corpus, _ = _corpus(tmp_path, 30)
    coordinator, shards = sharded_database("failed")
    build(db=coordinator, source=corpus, shards=shards)
    before = [_schemas(u) for u in [coordinator, *shards]]
    expected = _ranking(coordinator)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(corpus.read_text() + '{"id": "x", "title": \n', encoding="utf-8")
    with pytest.raises(InputError, match=r"bad\.jsonl:31"):
        build(db=coordinator, source=bad)  # a rebuild without --shards keeps the shards: and fails here
    assert [_schemas(u) for u in [coordinator, *shards]] == before
    with psycopg.connect(coordinator) as conn:
        servers = conn.execute("SELECT count(*) FROM pg_foreign_server").fetchone()[0]
    assert servers == len(shards)  # the failed build's own servers are gone
    assert _ranking(coordinator) == expected


def test_a_stop_while_a_shard_is_loaded_stops_the_build_and_keeps_the_index(sharded_database, tmp_path, monkeypatch,
                                                                             capsys):  # fmt: skip
    """As on one server: the build's own file swapped in counted as the change saved, so a Ctrl-C while the
    shards were loaded was only remembered, and the new index replaced the old one (exit 0)."""
    from retrieval.interfaces.cli import main
    from retrieval.store.postgres import shards as shards_module
    from tests.helpers import stop_before

    corpus, _ = _corpus(tmp_path, 30)
    coordinator, shards = sharded_database("stopped")
    build(db=coordinator, source=corpus, shards=shards)
    before = [_schemas(u) for u in [coordinator, *shards]]
    expected = _ranking(coordinator)
    stop_before(monkeypatch, shards_module, "_load_shard")
    (tmp_path / "other").mkdir()
    other, _ = _corpus(tmp_path / "other", 12)
    assert main(["build", "--from", str(other), "--db", coordinator]) == 130
    assert capsys.readouterr().err.splitlines() == ["retrieval: interrupted; nothing was changed"]
    assert [_schemas(u) for u in [coordinator, *shards]] == before
    assert _ranking(coordinator) == expected


def test_a_sharded_index_of_the_previous_revision_names_the_rebuild_that_brings_it_up(sharded_database, tmp_path,
                                                                                      capsys):  # fmt: skip
    """A search failed on the table added since ("relation paper_vectors does not exist"), `upgrade` printed a
    traceback (its migration cannot partition a table over the shards) and a rebuild failed in its swap."""
    from retrieval.interfaces.cli import main
    from tests.helpers import to_0009

    corpus, _ = _corpus(tmp_path, 30)
    coordinator, shards = sharded_database("previous")
    build(db=coordinator, source=corpus, shards=shards)
    expected = _ranking(coordinator)
    to_0009(coordinator)
    for argv in (["search", "black holes"], ["upgrade"]):
        assert main([*argv, "--db", coordinator]) == 1
        err = capsys.readouterr().err
        assert "revision '0009'" in err and "building it again: `retrieval build --db" in err, err
        assert "Traceback" not in err
    assert main(["build", "--from", str(corpus), "--db", coordinator]) == 0
    assert _ranking(coordinator) == expected


def test_a_shard_url_s_connection_settings_are_kept_by_its_foreign_server_and_by_a_rebuild(sharded_database, tmp_path):
    """Only host, port, database, user and password of a shard's URL reached its foreign server: ``?sslmode=``,
    ``connect_timeout`` or ``application_name`` were dropped silently, and a rebuild on the recorded shards lost
    them for good."""
    from retrieval.config import DatabaseURL
    from retrieval.store.postgres.shards import recorded_shards

    corpus, _ = _corpus(tmp_path, 30)
    coordinator, shards = sharded_database("settings")
    settings = "?connect_timeout=7&application_name=retrieval_shard_test"
    build(db=coordinator, source=corpus, shards=[url + settings for url in shards])
    expected = _ranking(coordinator)
    for _ in range(2):
        with psycopg.connect(coordinator) as conn:
            options = [set(row[0]) for row in conn.execute("SELECT srvoptions FROM pg_foreign_server")]
        assert len(options) == len(shards)
        assert all({"connect_timeout=7", "application_name=retrieval_shard_test"} <= o for o in options), options
        recorded = recorded_shards(DatabaseURL(coordinator))
        assert [str(url).split("?")[1] for url in recorded] == [
            "application_name=retrieval_shard_test&connect_timeout=7"
        ] * 2
        build(db=coordinator, source=corpus)  # on the recorded shards: their settings with them
    assert _ranking(coordinator) == expected
    assert DatabaseURL("postgresql://u@h/d?sslpassword=s3cret&sslmode=require").shown == (
        "postgresql://u@h/d?sslpassword=***&sslmode=require"
    )


def test_a_rebuild_keeps_the_shards_and_drops_the_replaced_tables(sharded_database, tmp_path):
    corpus, _ = _corpus(tmp_path, 30)
    coordinator, shards = sharded_database("rebuild")
    build(db=coordinator, source=corpus, shards=shards)
    first = _layout(coordinator)
    summary = build(db=coordinator, source=corpus)  # no --shards: the recorded shards
    second = _layout(coordinator)
    assert [e["url"] for e in second] == [e["url"] for e in first] and second[0]["schema"] != first[0]["schema"]
    assert summary.warnings == []
    for url, entry in zip(shards, second, strict=True):
        assert [s for s in _schemas(url) if s.startswith("retrieval")] == [entry["schema"]]
    _check_placement(coordinator, shards)


def test_a_sharded_build_over_an_index_of_one_server_keeps_its_foreign_servers(sharded_database, tmp_path):
    # The one-server index set the database's search_path to its schema; the fdw extension created there went
    # with the replaced schema's DROP ... CASCADE, and the index was left with empty distributed tables.
    corpus, _ = _corpus(tmp_path, 40)
    lite = tmp_path / "lite.db"
    build(db=lite, source=corpus)
    coordinator, shards = sharded_database("over-one-server")
    build(db=coordinator, source=corpus)
    build(db=coordinator, source=corpus, shards=shards)
    assert len(_layout(coordinator)) == len(shards)
    _check_placement(coordinator, shards)
    _same_index(lite, coordinator)
    _same_searches(lite, coordinator, QUERIES)


def test_shard_options_are_checked_before_anything_is_written(sharded_database, tmp_path, capsys):
    coordinator, shards = sharded_database("options")
    with pytest.raises(ConfigError, match="PostgreSQL coordinator"):
        build(db=tmp_path / "file.db", shards=shards)
    with pytest.raises(ConfigError, match="same database twice"):
        parse_shards([shards[0], shards[0]])
    with pytest.raises(ConfigError, match="PostgreSQL URLs"):
        parse_shards(f"{shards[0]},shard.db")
    with pytest.raises(ConfigError, match="coordinator's own database"):
        build(db=coordinator, shards=[coordinator, shards[0]])
    # One database under two names (127.0.0.1 and localhost): the build waited on its own lock there for ever.
    alias = shards[1].replace("127.0.0.1", "localhost", 1)
    assert alias != shards[1]
    with pytest.raises(ConfigError, match=r"shard 1 \(.*\) is the same database as shard 0 \(.*\), under another name"):
        build(db=coordinator, shards=[shards[1], alias])
    with pytest.raises(ConfigError, match="is the same database as the index's database"):
        build(db=coordinator, shards=[shards[0], coordinator.replace("127.0.0.1", "localhost", 1)])
    missing = shards[1].rsplit("/", 1)[0] + "/no_such_database"
    with pytest.raises(IndexNotFoundError, match="shard 1 of --shards has no database"):
        build(db=coordinator, shards=[shards[0], missing])
    assert _schemas(coordinator) == [] and _schemas(shards[0]) == []  # nothing was written anywhere
    with pytest.raises(SystemExit) as usage:  # a usage error (it was exit 1, as a runtime error)
        main(["build", "--db", coordinator, "--shards", ","])
    assert usage.value.code == 2
    assert "argument --shards: needs at least one PostgreSQL URL" in capsys.readouterr().err
    assert main(["build", "--db", coordinator, "--shards", ",".join(shards)]) == 0
    out = capsys.readouterr().out
    assert "over 2 shards" in out
    assert main(["search", "attention sparsity", "--db", coordinator]) == 0
    assert "Attention Sparsity study" in capsys.readouterr().out
    assert main(["stats", "--db", coordinator]) == 0
    out = capsys.readouterr().out
    assert all(url in out for url in shards)  # stats names the shards
    # In JSON a list (it was one comma-joined string), and the size counts the shards' tables (it was the
    # coordinator's alone, whose distributed tables are foreign ones of no size there).
    assert main(["stats", "--db", coordinator, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["shards"] == shards
    with psycopg.connect(coordinator) as conn:
        own = conn.execute(
            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class AS c JOIN pg_namespace AS n "
            "ON n.oid = c.relnamespace WHERE n.nspname = 'retrieval' AND c.relkind IN ('r', 'p', 'm')"
        ).fetchone()[0]
    own = int(own)
    layout = _layout(coordinator)
    on_shards = 0
    for url, entry in zip(shards, layout, strict=True):
        with psycopg.connect(url) as conn:
            on_shards += int(
                conn.execute(
                    "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class AS c JOIN pg_namespace AS n "
                    "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'm')",
                    (entry["schema"],),
                ).fetchone()[0]
            )
    # (autovacuum may add a page map between the two reads: near, not equal)
    assert on_shards > 0 and info["file_bytes"] > own
    assert abs(info["file_bytes"] - (own + on_shards)) <= 0.1 * (own + on_shards)


def test_a_shard_whose_database_is_gone_is_named_by_its_number_and_cause(sharded_database, tmp_path):
    # postgres_fdw named the build's internal foreign server ("retrieval_<tag>_s1") and the cause was cut off.
    corpus, _ = _corpus(tmp_path)
    coordinator, shards = sharded_database("gone")
    build(db=coordinator, source=corpus, shards=shards)
    server, name = shards[1].rsplit("/", 1)
    with psycopg.connect(server + "/postgres", autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{name}" RENAME TO "{name}_away"')
    try:
        with pytest.raises(StoreError) as failed:
            RetrievalClient(coordinator).search("black holes")
        message = str(failed.value)
        assert "its shard 1 cannot be reached" in message and f'database "{name}" does not exist' in message
        assert "_s1" not in message
        # A rebuild without --shards reuses the shards the index records: it said "shard 1 of --shards".
        with pytest.raises(IndexNotFoundError, match="shard 1 of the shards the index records has no database"):
            build(db=coordinator, source=corpus)
    finally:
        with psycopg.connect(server + "/postgres", autocommit=True) as conn:
            conn.execute(f'ALTER DATABASE "{name}_away" RENAME TO "{name}"')
    with RetrievalClient(coordinator) as client:  # back: the index was never touched
        assert client.search("black holes").ranked


def test_a_shard_whose_schema_was_dropped_says_so_and_a_rebuild_on_the_recorded_shards_mends_it(
    sharded_database, tmp_path, capsys
):
    """The read said only 'relation "retrieval_shard_<tag>.doc_len" does not exist' (postgres_fdw's remote
    error), naming no shard and no way out."""
    corpus, _ = _corpus(tmp_path)
    coordinator, shards = sharded_database("dropped")
    build(db=coordinator, source=corpus, shards=shards)
    (schema,) = _schemas(shards[1])
    with psycopg.connect(shards[1], autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    assert main(["search", "black holes", "--db", coordinator]) == 1
    err = capsys.readouterr().err
    assert "a shard no longer holds its tables" in err and f"`retrieval build --db {coordinator}`" in err
    assert "Traceback" not in err
    build(db=coordinator, source=corpus)  # as the message says: on the shards the index records
    with RetrievalClient(coordinator) as client:
        assert client.search("black holes").ranked


def _shard_sessions(shard_url: str) -> list[int]:
    """The server processes of the sessions open on a shard's database, other than the asker's."""
    server, name = shard_url.rsplit("/", 1)
    with psycopg.connect(server + "/postgres", autocommit=True) as conn:
        sql = "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()"
        return [pid for (pid,) in conn.execute(sql, (name,))]


def test_a_long_lived_client_recovers_when_a_shard_ends_its_session(sharded_database, tmp_path):
    """A shard's session ended (a restart, ``pg_terminate_backend``): the read that meets it says which shard
    could not be read (it was an AttributeError), and the next search opens the shards again (it failed for
    ever after), as the coordinator's own connection does."""
    corpus, _ = _corpus(tmp_path)
    coordinator, shards = sharded_database("lost")
    build(db=coordinator, source=corpus, shards=shards, stem="english", stopwords="english")
    with RetrievalClient(coordinator) as client:
        expected = [(r.paper.id, r.final_score) for r in client.search("black holes").ranked]
        sessions = _shard_sessions(shards[1])
        assert sessions
        server = shards[1].rsplit("/", 1)[0]
        with psycopg.connect(server + "/postgres", autocommit=True) as conn:
            for pid in sessions:
                conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        try:
            first = [(r.paper.id, r.final_score) for r in client.search("black holes").ranked]
        except StoreError as exc:  # the read that met the ended session: named, with the shard's server
            assert shards[1].rsplit("/", 1)[1] in str(exc)
        else:
            assert first == expected
        assert [(r.paper.id, r.final_score) for r in client.search("black holes").ranked] == expected


def test_a_read_budget_holds_on_the_shards_too(sharded_database, tmp_path):
    """A shard's table locked by another session: a client with a time budget is stopped within it with a
    ``QueryTimeoutError``, as on a single server (the shards' sessions had no budget: the read waited the lock out)."""
    import threading
    import time

    from retrieval.errors import QueryTimeoutError

    corpus, _ = _corpus(tmp_path)
    coordinator, shards = sharded_database("budget")
    build(db=coordinator, source=corpus, shards=shards)
    schema = next(entry["schema"] for entry in _layout(coordinator) if entry["shard"] == 0)
    with RetrievalClient(coordinator, timeout=0.5) as client:
        client.search("black holes")
        holder = psycopg.connect(shards[0])
        holder.execute(f'LOCK TABLE "{schema}".term_freq IN ACCESS EXCLUSIVE MODE')
        release = threading.Timer(20, holder.close)  # a read that waits the lock out ends the test, not hangs it
        release.start()
        try:
            began = time.monotonic()
            with pytest.raises(QueryTimeoutError):
                client.search("black holes entropy")
            assert time.monotonic() - began < 10
        finally:
            release.cancel()
            holder.close()
        assert client.search("black holes").ranked  # the lock gone, the client goes on


# -- the merge of a scattered statement's results: pure, no server ----------------------------------------------
def _best(rows, k):
    return sorted(rows, key=lambda r: (-round(r[1], SCORE_DECIMALS), r[0].encode()))[:k]


@given(
    st.dictionaries(st.text(min_size=1, max_size=4), st.sampled_from([0.5, 1.0, 1.25, 2.0, 3.0]), max_size=40),
    st.integers(1, 4),
    st.integers(1, 12),
    st.randoms(use_true_random=False),
)
def test_the_best_k_of_each_shards_best_k_are_the_corpus_best_k(scores, n_shards, k, rnd):
    """Papers spread over shards in any way: the merged per-shard top k equals the top k of all, ties by id."""
    rows = list(scores.items())
    shards = [[] for _ in range(n_shards)]
    for row in rows:
        shards[rnd.randrange(n_shards)].append(row)
    parts = [_best(part, k) for part in shards]
    assert merge("top_k", parts, {"k": k}) == _best(rows, k)
    counted = [[(pid, score, len(part)) for pid, score in _best(part, k)] for part in shards]
    assert merge("top_k_counted", counted, {"k": k}) == [(pid, score, len(rows)) for pid, score in _best(rows, k)]
    counts = [[(len(part),)] for part in shards]
    assert merge("sum", counts, {}) == [(len(rows),)]
    assert merge("concat", shards, {}) == [row for part in shards for row in part]


def test_a_lower_bound_merged_from_shards_is_the_largest():
    assert merge("max", [[(1.5,)], [], [(2.5,)], [(None,)]], {}) == [(2.5,)]
    assert merge("max", [[], [(None,)]], {}) == []


def test_a_sharded_search_runs_registered_texts_the_postings_statements_on_every_shard(sharded_database, tmp_path):
    """What ``--sql`` shows on a coordinator: each postings statement once per shard, in shard order, every text
    a registered one (PostgreSQL's or the coordinator's own), and the shards' snapshots begun and ended."""
    from retrieval.store.sql.dialect import POSTGRESQL, SCATTERED, SHARDED, registered
    from retrieval.store.sql.executor import Trace

    corpus, _ = _corpus(tmp_path)
    coordinator, shards = sharded_database("trace")
    build(db=coordinator, source=corpus, shards=shards)
    trace = Trace()
    with RetrievalClient(coordinator, tracer=trace) as client:
        client.search("black holes entropy gauge")
    texts = set(registered(POSTGRESQL).values()) | set(registered(SHARDED).values()) | {"COMMIT"}
    assert all(s.sql in texts for s in trace.statements), [s.name for s in trace.statements if s.sql not in texts]
    names = [s.name for s in trace.statements]
    scattered = {registered(POSTGRESQL)[sql] for sql in SCATTERED}
    on_shards = [s for s in trace.statements if s.sql in scattered]
    assert on_shards and len(on_shards) % len(shards) == 0
    for i in range(0, len(on_shards), len(shards)):  # each once per shard, in shard order
        assert [s.name.rsplit(" (shard ", 1)[1] for s in on_shards[i : i + len(shards)]] == ["0)", "1)"]
    assert [n for n in names if n.startswith(("begin the read snapshot", "end the read snapshot"))] == [
        "begin the read snapshot", "begin the read snapshot (shard 0)", "begin the read snapshot (shard 1)",
        "end the read snapshot (shard 0)", "end the read snapshot (shard 1)", "end the read snapshot",
    ]  # fmt: skip
    assert any(s.sql in registered(SHARDED).values() for s in trace.statements)  # the coordinator's own texts ran


def test_similar_on_a_sharded_index_reads_each_foreign_table_by_a_key_array(sharded_database, tmp_path, monkeypatch):
    """On a coordinator ``similar`` reads the seeds, their degrees, the co-cited papers and the papers sharing
    references with texts of its own (``register_sharded``: each foreign table read once per statement by a key
    array, where a lookup per id or per citing paper is a round trip to every shard), and its page, scores and
    count equal a single file's of the same corpus, also once the process keeps the citation graph."""
    from retrieval.search import adjacency
    from retrieval.store.sql.dialect import SHARDED, registered
    from retrieval.store.sql.executor import Trace

    corpus, _ = _corpus(tmp_path)
    coordinator, shards = sharded_database("similar")
    build(db=coordinator, source=corpus, shards=shards)
    lite = tmp_path / "single.db"
    build(db=lite, source=corpus)

    def same_as_a_file() -> tuple[set[str], set[str]]:
        """The coordinator's pages, scores and counts against the file's: the names of the statements it ran
        with texts of their own, and of all it ran."""
        trace = Trace()
        with RetrievalClient(coordinator, tracer=trace) as sharded, RetrievalClient(lite) as single:
            for seeds in (["p030"], ["p010", "p020", "p045"]):
                a, b = sharded.similar(seeds, limit=20), single.similar(seeds, limit=20)
                assert [e.paper.id for e in a.ranked] == [e.paper.id for e in b.ranked]
                assert all(abs(x.score - y.score) <= TOLERANCE for x, y in zip(a.ranked, b.ranked, strict=True))
                assert a.matched == b.matched > 20
        own = set(registered(SHARDED).values())
        return {s.name for s in trace.statements if s.sql in own}, {s.name for s in trace.statements}

    ran, _ = same_as_a_file()
    reads = {"the seed papers", "degrees", "co-cited papers", "papers sharing references", "the candidates"}
    assert {f"similar: {read}" for read in reads} <= ran, ran
    # a process that keeps the graph reads every shard's citations once (in pages) and answers the same
    monkeypatch.setattr(adjacency, "GRAPH_RENT", 1e-9)
    trace = Trace()
    with RetrievalClient(coordinator, tracer=trace) as sharded:
        sharded.similar(["p030"])
    assert adjacency.CITATIONS_STATEMENT in {s.name for s in trace.statements}
    _, names = same_as_a_file()
    assert not {"similar: co-cited papers", "similar: papers sharing references"} & names


def test_an_explanation_on_a_sharded_index_is_a_single_servers(sharded_database, tmp_path):
    """The evidence graph's nodes and edges are read on a coordinator by key arrays (``citations_by``): through
    the view, the edges were one round trip to each shard per node. The same graph, scores and order as SQLite."""
    from retrieval.evidence import graph
    from retrieval.evidence.pipeline import explain
    from retrieval.store.sql.dialect import _SHARDED

    assert {graph.NODES_SQL, graph.EDGES_SQL, graph.EDGE_COUNT_SQL} <= set(_SHARDED)
    corpus, _ = _corpus(tmp_path)
    lite = tmp_path / "lite.db"
    build(db=lite, source=corpus)
    coordinator, shards = sharded_database("explain")
    build(db=coordinator, source=corpus, shards=shards)

    def graph_of(db):
        with RetrievalClient(db) as client:
            run = explain(client, "black holes entropy", subqueries=["string duality branes"])
        return (sorted(run.nodes), sorted(run.edges), [(pid, round(score, 9)) for pid, score in run.top])

    nodes, edges, top = graph_of(lite)
    assert len(nodes) > 5 and edges and top
    assert graph_of(coordinator) == (nodes, edges, top)
