"""Adds, removes and replaces on a real PostgreSQL server: every table equals a rebuild of the final corpus (and
the SQLite index of the same sequence), concurrent writers lose no update, and readers never wait for a writer
nor see a part of an add. Needs ``$RETRIEVAL_TEST_POSTGRES`` (see ``tests/conftest.py``)."""

from __future__ import annotations

import contextlib
import json
import math
import multiprocessing
import random
import sqlite3
import subprocess
import sys
import time

import pytest

from retrieval import Paper, RetrievalClient, RetrievalError
from retrieval.config import DatabaseURL
from retrieval.corpus.mock import build_corpus
from retrieval.interfaces.cli import main
from retrieval.store.postgres import write as pgwrite
from retrieval.store.postgres.build import build_postgres
from retrieval.store.schema import catalogue
from retrieval.store.sqlite.build import build_index
from retrieval.store.writer import add_papers, remove_papers
from tests.helpers import paper, write_jsonl
from tests.reference import K1, B, analysed, close
from tests.test_incremental import POOL, make_pool, snapshot

psycopg = pytest.importorskip("psycopg")
#: Each table a build copies, with its columns.
COPIED_COLUMNS = [(t.name, t.columns) for t in catalogue.COPIED]

# Distinct words per query: the reference below weighs each query term once.
QUERIES = ["graph walk", "sparse attention", "black hole entropy", "low rank adapter routing"]
SNAPSHOT_SQL = {
    "papers": "SELECT id, title, abstract, year, source FROM papers",
    "authors": "SELECT paper_id, position, name FROM paper_authors",
    "sources": "SELECT paper_id, field, source FROM field_sources",
    "citations": "SELECT citing_id, cited_id, listed_by_citing, listed_by_cited FROM citations",
    "paper_keys": "SELECT paper_id FROM paper_keys",
    "doc_freq": "SELECT term, df FROM doc_freq",
    "term_counts": "SELECT term, paper_id, count FROM term_counts",
    "doc_len": "SELECT paper_id, length FROM doc_len",
    "cited_counts": "SELECT paper_id, cited_by FROM cited_counts",
}
INFO_KEYS = ("n_papers", "total_tokens", "avgdl", "min_year", "max_year")
TIMES = ("built_at", "updated_at", "build_seconds", "generation")
WAIT = 180  # seconds any process of these tests may take before the test fails


def _plain(value):
    return int(value) if isinstance(value, bool) else value


def _pg(url: str):
    conn = psycopg.connect(url, autocommit=True)
    conn.execute('SET search_path TO "retrieval"')
    conn.execute("SET statement_timeout = '60s'")  # no wait of a test is unbounded
    return conn


def _open(db):
    """A connection to the index ``db`` (a URL or a file) and its placeholder."""
    if isinstance(db, str) and "://" in db:
        return _pg(db), "%s"
    return sqlite3.connect(db), "?"


def build(db) -> None:
    """``retrieval build`` of the demo corpus at ``db``."""
    from retrieval.commands import build as build_command

    build_command(db=db)


def build_corpus_papers() -> list[Paper]:
    """The built-in demo corpus, as ``retrieval build`` indexes it."""
    from retrieval.corpus.mock import ArxivMockClient, SemanticScholarMockClient, merge_clients

    corpus = build_corpus()
    return list(merge_clients(ArxivMockClient(corpus), SemanticScholarMockClient(corpus)))


def pg_snapshot(url: str) -> dict:
    """``tests.test_incremental.snapshot`` of the index on PostgreSQL: every table, words for term ids."""
    with _pg(url) as conn:

        def rows(sql):
            return sorted((tuple(_plain(v) for v in row) for row in conn.execute(sql).fetchall()), key=repr)

        out = {name: rows(sql) for name, sql in SNAPSHOT_SQL.items()}
        info = dict(conn.execute("SELECT key, value FROM index_info").fetchall())
    return {**out, "info": {k: info.get(k) for k in INFO_KEYS}}


def raw_tables(db) -> dict[str, list[tuple]]:
    """Every column of every table as stored (ids and bounds too), times aside, from either backend."""
    conn, _ = _open(db)
    try:
        out = {}
        for table, columns in COPIED_COLUMNS:
            cols = ", ".join(columns)
            rows = [tuple(_plain(v) for v in row) for row in conn.execute(f"SELECT {cols} FROM {table}").fetchall()]
            if table == "index_info":
                rows = [row for row in rows if row[0] not in TIMES]
            out[table] = sorted(rows, key=repr)
        return out
    finally:
        conn.close()


def bm25_from_tables(db, query: str, ids: list[str]) -> dict[str, float]:
    """Okapi BM25 of ``ids`` computed in Python from the stored statistics (N, total tokens, df, tf, lengths)."""
    conn, mark = _open(db)
    try:
        info = dict(conn.execute("SELECT key, value FROM index_info").fetchall())
        n, avgdl = int(info["n_papers"]), int(info["total_tokens"]) / int(info["n_papers"])
        scores = dict.fromkeys(ids, 0.0)
        for term in sorted(set(analysed(query))):
            postings = conn.execute(
                "SELECT l.paper_id, t.count, l.length FROM term_freq AS t JOIN doc_freq AS d ON d.term_id = t.term_id "
                f"JOIN doc_len AS l ON l.doc_id = t.doc_id WHERE d.term = {mark}",
                (term,),
            ).fetchall()
            (df,) = conn.execute(f"SELECT coalesce(max(df), 0) FROM doc_freq WHERE term = {mark}", (term,)).fetchone()
            assert df == len(postings), term
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            for pid, tf, length in postings:
                if pid in scores:
                    scores[pid] += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avgdl))
        return scores
    finally:
        conn.close()


def assert_bounds(url: str) -> None:
    """Each term's postings chunks bound its postings' counts (what a query's bound is made of)."""
    with _pg(url) as conn:
        below = conn.execute(
            "SELECT d.term FROM doc_freq AS d JOIN term_freq AS t ON t.term_id = d.term_id "
            "GROUP BY d.term_id, d.term "
            "HAVING max(t.count) > (SELECT max(p.max_count) FROM postings AS p WHERE p.term_id = d.term_id)"
        ).fetchall()
        last_doc, last_term, next_doc, next_term = conn.execute(
            "SELECT (SELECT max(doc_id) FROM doc_len), (SELECT max(term_id) FROM doc_freq), "
            "nextval(pg_get_serial_sequence('doc_len', 'doc_id')), "
            "nextval(pg_get_serial_sequence('doc_freq', 'term_id'))"
        ).fetchone()
    assert below == []
    assert next_doc > last_doc and next_term > last_term  # the sequences follow the writer's ids


def assert_same_as_rebuild(url: str, papers: list[Paper], tmp_path, pg_database) -> None:
    """The index at ``url`` equals a PostgreSQL rebuild and a SQLite rebuild of ``papers``, and BM25 agrees."""
    rebuilt_pg = pg_database("rebuilt")
    build_postgres(papers, DatabaseURL(rebuilt_pg))
    rebuilt = tmp_path / "rebuilt.db"
    build_index(papers, rebuilt)
    mine = pg_snapshot(url)
    assert mine == pg_snapshot(rebuilt_pg)
    assert mine == snapshot(rebuilt)
    ids = sorted(p.id for p in papers)
    with RetrievalClient(db=url) as a, RetrievalClient(db=rebuilt) as b:  # the search path on either backend
        for query in QUERIES:
            expected = b.lexical.scores(query, ids)
            from_tables = bm25_from_tables(url, query, ids)
            assert all(close(from_tables[i], expected[i]) for i in ids), query
        for query in [*QUERIES, "sparse attention attention"]:
            expected, got = b.lexical.scores(query, ids), a.lexical.scores(query, ids)
            assert all(close(got[i], expected[i]) for i in ids), query
            assert [p for p, _ in a.lexical.search(query, 20)] == [p for p, _ in b.lexical.search(query, 20)]
        for seed in ids[:3]:
            assert a.graph.expand([seed], 2) == b.graph.expand([seed], 2)
    assert_bounds(url)


# -- a sequence of adds, removes and replaces ---------------------------------------------------------------
@pytest.mark.parametrize("seed", range(4))
def test_a_sequence_of_adds_removes_and_replaces_equals_a_rebuild(tmp_path, pg_database, seed):
    """Random operations applied to an index on PostgreSQL and to a SQLite file: afterwards the server's tables
    hold exactly the file's rows (ids and bounds included), and both equal a rebuild of the final
    corpus on either backend."""
    rng = random.Random(seed)
    pool = POOL if seed % 2 == 0 else make_pool(seed, size=20)
    names = sorted(pool)
    url = DatabaseURL(pg_database("seq"))
    lite = tmp_path / "seq.db"
    present = set(rng.sample(names, rng.randint(1, 8)))
    build_postgres([pool[i] for i in sorted(present)], url)
    build_index([pool[i] for i in sorted(present)], lite)
    for _ in range(8):
        op, ids = rng.choice(["add", "remove", "replace"]), set(rng.sample(names, rng.randint(1, 5)))
        if op == "add" and ids - present:
            for db in (url, lite):
                add_papers([pool[i] for i in sorted(ids - present)], db)
            present |= ids
        elif op == "remove" and ids & present and present - ids:
            for db in (url, lite):
                remove_papers(sorted(ids & present), db)
            present -= ids
        elif op == "replace" and ids & present:
            for db in (url, lite):
                add_papers([pool[i] for i in sorted(ids & present)], db, replace=True)
        assert raw_tables(url) == raw_tables(lite), (op, sorted(ids))
    assert_same_as_rebuild(url, [pool[i] for i in sorted(present)], tmp_path, pg_database)


def test_references_become_live_and_removes_leave_dangling_references(pg_database, tmp_path):
    url = DatabaseURL(pg_database("edges"))
    build_postgres([Paper("a", "graph", references=["b"]), Paper("c", "walk", citations=["b"])], url)
    add_papers([Paper("b", "black hole", references=["a"])], url)
    with _pg(url) as conn:
        rows = conn.execute("SELECT citing_id, cited_id, listed_by_citing, listed_by_cited FROM citations").fetchall()
        counts = dict(conn.execute("SELECT paper_id, cited_by FROM cited_counts").fetchall())
    assert sorted(rows) == [("a", "b", True, False), ("b", "a", True, False), ("b", "c", False, True)]
    assert counts == {"a": 1, "b": 1, "c": 1}
    remove_papers(["b"], url)
    with _pg(url) as conn:
        # what a's and c's records declared stays (dangling), what b's declared goes
        assert sorted(conn.execute("SELECT citing_id, cited_id FROM citations").fetchall()) == [("a", "b"), ("b", "c")]
        assert dict(conn.execute("SELECT paper_id, cited_by FROM cited_counts").fetchall()) == {"b": 1, "c": 1}
    final = [Paper("a", "graph", references=["b"]), Paper("c", "walk", citations=["b"])]
    assert_same_as_rebuild(url, final, tmp_path, pg_database)


# -- failures leave the index untouched ----------------------------------------------------------------------
def test_a_failed_add_or_remove_leaves_the_index_untouched(tmp_path, pg_database, capsys):
    url = pg_database("fail")
    build_postgres([Paper("a", "graph"), Paper("b", "walk")], DatabaseURL(url))
    before = raw_tables(url)
    bad = write_jsonl(tmp_path / "bad.jsonl", [paper("c", "new words"), "{not json"])
    assert main(["add", str(bad), "--db", url]) == 1
    assert f"{bad}:2: invalid JSON" in capsys.readouterr().err
    dup = write_jsonl(tmp_path / "dup.jsonl", [paper("c", "new"), paper("a", "graph again")])
    assert main(["add", str(dup), "--db", url]) == 1
    assert "already in the index ('a'): pass --replace" in capsys.readouterr().err
    with pytest.raises(RetrievalError, match=r"not in the index \('zz'\): nothing was removed"):
        remove_papers(["b", "zz"], DatabaseURL(url))
    with pytest.raises(RetrievalError, match="appears twice"):
        add_papers([Paper("c", "new"), Paper("c", "new")], DatabaseURL(url))

    def stream():
        for i in range(5000):  # more than one batch is written before the interruption
            yield Paper(f"n{i}", "graph walk", "sparse attention")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        add_papers(stream(), DatabaseURL(url))
    assert raw_tables(url) == before
    summary = add_papers([Paper("a", "graph again")], DatabaseURL(url), replace=True)
    assert (summary.added, summary.replaced, summary.papers) == (1, 1, 2)


def test_no_index_and_an_older_revision_are_refused_with_what_to_do(pg_database):
    url = DatabaseURL(pg_database("none"))
    with pytest.raises(RetrievalError, match=r"no index at postgresql://.*: build one with `retrieval build --db"):
        add_papers([Paper("a", "graph")], url)
    build_postgres([Paper("a", "graph")], url)
    with _pg(url) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0005'")
    # `retrieval upgrade` brings a server's index up (it said to rebuild it, from a corpus the user may not have)
    with pytest.raises(RetrievalError, match=r"revision .0005., older than .*: upgrade it once with `retrieval up"):
        remove_papers(["a"], url)


def test_cli_add_replace_and_remove_on_postgresql(tmp_path, pg_database, capsys):
    url = pg_database("cli")
    src = write_jsonl(tmp_path / "more.jsonl", [paper("p101", "Attention sparsity addendum", references=["p001"])])
    assert main(["build", "--db", url]) == 0
    assert main(["add", str(src), "--db", url]) == 0
    out = capsys.readouterr().out
    assert "added 1 paper to postgresql://" in out and "101 papers" in out
    assert main(["add", str(src), "--db", url]) == 1
    assert "--replace" in capsys.readouterr().err
    assert main(["add", str(src), "--db", url, "--replace", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["replaced"] == 1
    assert main(["remove", "p101", "p100", "--db", url]) == 0
    assert "99 papers now" in capsys.readouterr().out
    assert main(["remove", "nope", "--db", url]) == 1
    demo = [p for p in build_corpus_papers() if p.id != "p100"]
    assert_same_as_rebuild(url, demo, tmp_path, pg_database)


# -- writers wait for each other; readers never wait ---------------------------------------------------------
def test_a_writer_waits_for_another_and_gives_up_with_a_message(pg_database, monkeypatch):
    url = DatabaseURL(pg_database("lock"))
    build_postgres([Paper("a", "graph")], url)
    holder = _pg(url)
    holder.execute("BEGIN")
    holder.execute("SELECT pg_advisory_xact_lock(%s)", (pgwrite.WRITER_LOCK_KEY,))
    monkeypatch.setattr(pgwrite, "LOCK_TIMEOUT", 0.5)
    started = time.monotonic()
    with pytest.raises(RetrievalError, match=r"another process has been writing to postgresql://.* nothing was"):
        add_papers([Paper("b", "walk")], url)
    assert 0.4 < time.monotonic() - started < 10
    holder.execute("ROLLBACK")
    holder.close()
    assert add_papers([Paper("b", "walk")], url).papers == 2


def test_a_reader_does_not_wait_for_an_open_add_nor_see_any_of_it(pg_database):
    """An add holds its transaction open (under the writers' lock, half its rows written): a reader answers at
    once, from the index as it was; after the commit it sees all of the add."""
    from retrieval.store.rows import WriteSummary
    from retrieval.store.writer import IndexWriter

    url = DatabaseURL(pg_database("open"))
    build_postgres([Paper("a", "graph walk")], url)
    with _pg(url) as reader:
        reader.execute("SET statement_timeout = '2s'")  # a reader that waited would fail here
        with pgwrite.write_transaction(url) as conn:
            writer = IndexWriter(conn, WriteSummary(path=url.shown))
            writer.add([Paper(f"n{i}", "graph sparse", "walk") for i in range(50)])
            writer.finish()
            assert read_state(reader, ["graph"])[:2] == (1, 1)
        assert read_state(reader, ["graph"])[:2] == (51, 51)


# -- reader processes during adds ----------------------------------------------------------------------------
READ_STATE_SQL = [
    "SELECT CAST(value AS integer) FROM index_info WHERE key = 'n_papers'",
    "SELECT count(DISTINCT t.doc_id) FROM term_freq AS t JOIN doc_freq AS d ON d.term_id = t.term_id "
    "WHERE d.term = ANY(%s)",
    "SELECT count(*) FROM doc_len",
    "SELECT coalesce(sum(df), 0) FROM doc_freq",
    "SELECT count(*) FROM term_freq",
    "SELECT CAST(value AS integer) FROM index_info WHERE key = 'total_tokens'",
    "SELECT coalesce(sum(length), 0) FROM doc_len",
]
# Rounded before it is ordered: a float sum's last bits depend on the order the plan adds in, and equal papers
# must tie (then order by id) in every plan.
TOP_SQL = """\
SELECT l.paper_id, round(CAST(sum(ln(1 + (n.v - d.df + 0.5) / (d.df + 0.5)) * t.count * 2.5
                                  / (t.count + 1.5 * (0.25 + 0.75 * l.length / a.v))) AS numeric), 9) AS score
FROM doc_freq AS d
JOIN term_freq AS t ON t.term_id = d.term_id
JOIN doc_len AS l ON l.doc_id = t.doc_id
CROSS JOIN (SELECT CAST(value AS double precision) AS v FROM index_info WHERE key = 'n_papers') AS n
CROSS JOIN (SELECT CAST(value AS double precision) AS v FROM index_info WHERE key = 'avgdl') AS a
WHERE d.term = ANY(%s)
GROUP BY l.paper_id
ORDER BY score DESC, l.paper_id COLLATE "C"
LIMIT 10"""


def read_state(conn, terms: list[str]) -> tuple:
    """In one repeatable-read snapshot (as a search reads): (N, papers with a query term, top 10), after checking
    that the statistics agree with the tables they summarise."""
    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    try:
        n, hits, docs, sum_df, postings, tokens, lengths = (
            conn.execute(sql, (terms,) if "%s" in sql else None).fetchone()[0] for sql in READ_STATE_SQL
        )
        top = tuple((pid, str(score)) for pid, score in conn.execute(TOP_SQL, (terms,)).fetchall())
    finally:
        conn.execute("COMMIT")
    if (n, sum_df, tokens) != (docs, postings, lengths):
        raise AssertionError(f"a mixed snapshot: N {n} / {docs} papers, df {sum_df} / {postings}, {tokens} / {lengths}")
    return n, hits, top


def search_state(client: RetrievalClient, terms: list[str]) -> tuple:
    """What a search answers (as ``tests/test_incremental.py``'s reader compares): hits and the ranked top 20."""
    r = client.search(" ".join(terms), limit=20, full=False)
    return r.hit_count, tuple((e.paper.id, round(e.final_score, 12)) for e in r.ranked)


def _read_loop(url: str, terms: list[str], seconds: float, out, searching: bool = False) -> None:
    """Read without pause for ``seconds``: SQL in one snapshot (``read_state``), or searches through a
    ``RetrievalClient`` when ``searching``; report the answers, the errors and the slowest read."""
    results, errors, slowest = [], [], 0.0
    deadline = time.monotonic() + seconds
    try:
        with contextlib.ExitStack() as stack:
            if searching:
                client = stack.enter_context(RetrievalClient(db=url))
                read = lambda: search_state(client, terms)  # noqa: E731
            else:
                conn = stack.enter_context(_pg(url))
                read = lambda: read_state(conn, terms)  # noqa: E731
            while time.monotonic() < deadline:
                began = time.monotonic()
                try:
                    results.append(read())
                except Exception as exc:  # noqa: BLE001 - the test reports any error a reader sees
                    errors.append(repr(exc))
                slowest = max(slowest, time.monotonic() - began)
    except Exception as exc:  # noqa: BLE001
        errors.append(repr(exc))
    out.put((searching, results, errors, slowest))


def _batch(step: int, size: int = 600) -> list[Paper]:
    return [
        Paper(f"n{step}-{i:04d}", "attention sparsity study", "attention routing block " * step, 2025 + step,
              references=["p001", "p003"])
        for i in range(size)
    ]  # fmt: skip


def _states(url: str, terms: list[str]) -> tuple:
    """(``read_state``, ``search_state``) of the index at ``url`` now."""
    with _pg(url) as conn, RetrievalClient(db=url) as client:
        return read_state(conn, terms), search_state(client, terms)


def _readers(url: str, terms: list[str], seconds: float, kinds: list[bool]):
    """Start a reader process per entry of ``kinds`` (True: searches, False: SQL); returns them and their queue."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_read_loop, args=(str(url), terms, seconds, out, kind)) for kind in kinds]
    for proc in procs:
        proc.start()
    return procs, out


def _stop(procs) -> None:
    for proc in procs:
        proc.join(timeout=WAIT)
        if proc.is_alive():
            proc.kill()


def test_readers_see_the_old_or_the_new_state_never_a_mix(pg_database):
    """Two reader processes read without pause while five adds commit, one searching through a
    ``RetrievalClient``, one in SQL checking that each snapshot's statistics agree with its tables: every answer
    equals the answer at one of the six states the index went through, and no read waits for the writer."""
    url = DatabaseURL(pg_database("live"))
    build(db=url)
    terms = ["attention", "sparsity", "routing"]
    states = [_states(url, terms)]
    procs, out = _readers(url, terms, 8.0, [False, True])
    try:
        time.sleep(1.5)
        for step in range(1, 6):
            add_papers(_batch(step), url)
            states.append(_states(url, terms))
            time.sleep(0.7)
        answers = [out.get(timeout=WAIT) for _ in procs]
    finally:
        _stop(procs)
    assert len(set(states)) == 6
    for searching, results, errors, slowest in answers:
        assert errors == []
        seen = set(results)
        assert seen <= {state[searching] for state in states}, "a read saw a state the index never went through"
        assert len(seen) >= 3, "the reader should have read across several adds"
        assert slowest < 5.0, f"a read took {slowest:.2f} s while adds ran: readers must not wait for writers"


def test_eight_reader_processes_while_a_writer_adds(pg_database):
    """Eight processes search (six through ``RetrievalClient``, two in SQL) while three adds commit: no errors,
    every answer one of the index's states."""
    url = DatabaseURL(pg_database("eight"))
    build(db=url)
    terms = ["attention", "routing"]
    states = [_states(url, terms)]
    procs, out = _readers(url, terms, 6.0, [True] * 6 + [False] * 2)
    try:
        time.sleep(1.0)
        for step in range(1, 4):
            add_papers(_batch(step, 300), url)
            states.append(_states(url, terms))
        answers = [out.get(timeout=WAIT) for _ in procs]
    finally:
        _stop(procs)
    assert [errors for _, _, errors, _ in answers] == [[]] * 8
    assert all(results for _, results, _, _ in answers), "every reader should have read"
    for searching, results, _, _ in answers:
        assert set(results) <= {state[searching] for state in states}
    assert states[-1][0][0] == 100 + 900


# -- concurrent writers --------------------------------------------------------------------------------------
def _writer_records(prefix: str, other: str, n: int, seed: int) -> list[dict]:
    """Papers sharing words (so doc_freq rows) and citing the demo corpus and the other writer's papers (so
    cited_counts rows) with the other writer's batch."""
    rng = random.Random(seed)
    words = ["attention", "sparse", "routing", "graph", "walk", "entropy", "block", f"only{prefix}"]
    return [
        paper(f"{prefix}{i:04d}", " ".join(rng.choices(words, k=4)), " ".join(rng.choices(words, k=12)),
              year=rng.choice([None, 1999, 2030 if prefix == "w" else 2031]),
              references=sorted({f"p{rng.randint(1, 100):03d}", f"{other}{rng.randrange(n):04d}", "elsewhere"}))
        for i in range(n)
    ]  # fmt: skip


def _waiting_writers(url: str) -> int:
    """Sessions waiting for the writers' advisory lock in the database of ``url``."""
    with _pg(url) as conn:
        (n,) = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        ).fetchone()
    return n


def test_two_writer_processes_adding_at_once_both_succeed_and_lose_nothing(tmp_path, pg_database):
    """Two ``retrieval add`` processes start together with disjoint papers that share terms, cite each other and
    the same papers: both succeed (one waits for the other's transaction) and the index equals a rebuild."""
    url = pg_database("writers")
    build(db=url)
    a = write_jsonl(tmp_path / "a.jsonl", _writer_records("w", "v", 1500, 1))
    b = write_jsonl(tmp_path / "b.jsonl", _writer_records("v", "w", 1500, 2))
    command = [sys.executable, "-m", "retrieval", "add", "--json", "--db", url]
    holder = _pg(url)  # holds the writers' lock until both processes wait for it: then they run at once
    holder.execute("BEGIN")
    holder.execute("SELECT pg_advisory_xact_lock(%s)", (pgwrite.WRITER_LOCK_KEY,))
    procs = [subprocess.Popen([*command, str(f)], stdout=subprocess.PIPE, stderr=subprocess.PIPE) for f in (a, b)]
    outs = []
    try:
        deadline = time.monotonic() + WAIT
        while _waiting_writers(url) < 2:
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "the writers should wait"
            time.sleep(0.05)
        holder.execute("ROLLBACK")
        for proc in procs:
            stdout, stderr = proc.communicate(timeout=WAIT)
            assert proc.returncode == 0, stderr.decode()
            outs.append(json.loads(stdout))
    finally:
        holder.close()
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    assert sorted(o["added"] for o in outs) == [1500, 1500]
    assert sorted(o["papers"] for o in outs) == [1600, 3100]  # the second saw the first's commit
    from retrieval.corpus.jsonl import read_papers

    papers = build_corpus_papers() + [p for f in (a, b) for _, p in read_papers(f)]
    assert_same_as_rebuild(url, papers, tmp_path, pg_database)


def _holding_writers(url: str) -> int:
    """Sessions holding the writers' advisory lock in the database of ``url``."""
    with _pg(url) as conn:
        (n,) = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        ).fetchone()
    return n


def test_a_killed_writer_leaves_the_index_as_it_was_and_releases_the_lock(tmp_path, pg_database):
    url = pg_database("killed")
    build(db=url)
    before = raw_tables(url)
    big = write_jsonl(tmp_path / "big.jsonl", _writer_records("k", "k", 20000, 3))
    command = [sys.executable, "-m", "retrieval", "add", "--db", url, str(big)]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + WAIT
        while _holding_writers(url) < 1:
            assert time.monotonic() < deadline and proc.poll() is None, "the writer should take the lock"
            time.sleep(0.02)
        time.sleep(0.5)  # some of its rows are written
    finally:
        proc.kill()
        proc.wait(timeout=WAIT)
    assert raw_tables(url) == before
    started = time.monotonic()
    assert add_papers([Paper("after", "graph walk")], DatabaseURL(url)).papers == 101  # the lock is free
    assert time.monotonic() - started < 10
