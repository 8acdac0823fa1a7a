"""The B-tree pages the bulk build writes itself (``retrieval.store.sqlite.pages``) are a table SQLite reads, checks and
updates like any other, holding exactly the rows it was given; anything the writer does not handle is refused
with nothing written."""

import sqlite3

import numpy as np
import pytest

from retrieval.store.sqlite import pages
from retrieval.store.sqlite.pages import write_sorted_table

COLUMNS = "a INTEGER NOT NULL, b INTEGER NOT NULL, c INTEGER NOT NULL, d INTEGER NOT NULL, e INTEGER NOT NULL"
TABLE = f"({COLUMNS}, PRIMARY KEY (a, b)) WITHOUT ROWID"


def make_db(path, page_size=4096):
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA page_size = {page_size}")
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("CREATE TABLE before_it (x)")  # the table is not the only one, nor on page 2
    conn.execute("INSERT INTO before_it VALUES (1)")
    conn.execute(f"CREATE TABLE t {TABLE}")
    conn.execute(f"CREATE TABLE expected {TABLE}")
    return conn


def rows(n: int, seed: int) -> list[np.ndarray]:
    """``n`` unique rows sorted by (a, b), with values of every width the writer encodes (0 and 1 included)."""
    rng = np.random.default_rng(seed)
    keys = np.unique(rng.integers(0, 300_000, n) * 1_000_000 + rng.integers(0, 1_000_000, n))
    a, b = keys // 1_000_000, keys % 1_000_000
    extra = [rng.integers(0, high, len(a)) for high in (3, 40_000, 2**31)]
    if len(a) >= 4:
        extra[0][:4] = [0, 1, 2**31 - 1, 127]
    return [a, b, *extra]


def insert_expected(conn, columns) -> None:
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO expected VALUES (?, ?, ?, ?, ?)", zip(*(c.tolist() for c in columns), strict=True))
    conn.execute("COMMIT")


def check_table(conn, columns) -> None:
    insert_expected(conn, columns)
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert conn.execute("SELECT * FROM t").fetchall() == conn.execute("SELECT * FROM expected").fetchall()
    probe = conn.execute("SELECT * FROM expected ORDER BY random() LIMIT 50").fetchall()
    for row in probe:  # seeks through the interior pages find every row
        assert conn.execute("SELECT * FROM t WHERE a = ? AND b = ?", row[:2]).fetchone() == row


SHAPES = [(1, 4096), (7, 4096), (900, 4096), (40_000, 4096), (30_000, 512), (5_000, 1024), (60_000, 65536)]


@pytest.mark.parametrize(("n", "page_size"), SHAPES)
def test_written_pages_hold_the_rows_and_pass_integrity_check(tmp_path, n, page_size):
    db = tmp_path / "t.db"
    conn = make_db(db, page_size)
    columns = rows(n, seed=n)
    assert write_sorted_table(conn, db, "t", columns)
    check_table(conn, columns)
    conn.close()


def test_a_written_table_takes_inserts_and_deletes_and_stays_sound(tmp_path):
    db = tmp_path / "t.db"
    conn = make_db(db, 1024)  # a three-level tree: interior pages above interior pages
    columns = rows(20_000, seed=4)
    assert write_sorted_table(conn, db, "t", columns)
    depth = conn.execute("SELECT max(length(path) - length(replace(path, '/', ''))) FROM dbstat WHERE name = 't'")
    assert depth.fetchone()[0] >= 2
    conn.execute("INSERT INTO t SELECT a, b + 2000000, c, d, e FROM t WHERE a % 5 = 0")
    conn.execute("DELETE FROM t WHERE a % 3 = 0")
    conn.execute("UPDATE t SET e = e + 1 WHERE a % 7 = 0")
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    given = list(zip(*(x.tolist() for x in columns), strict=True))
    kept = [(a, b, c, d, e + (a % 7 == 0)) for a, b, c, d, e in given if a % 3]
    expected = sorted(kept + [(a, b + 2000000, c, d, e) for a, b, c, d, e in kept if a % 5 == 0])
    assert conn.execute("SELECT * FROM t").fetchall() == expected
    conn.close()
    reopened = sqlite3.connect(db)  # another connection reads the file as it is on disk
    assert reopened.execute("SELECT count(*) FROM t").fetchone()[0] == len(expected)
    reopened.close()


def test_pages_are_full(tmp_path):
    db = tmp_path / "t.db"
    conn = make_db(db)
    columns = rows(50_000, seed=9)
    assert write_sorted_table(conn, db, "t", columns)
    insert_expected(conn, columns)
    fill = dict(conn.execute("SELECT name, 1.0 - 1.0 * sum(unused) / sum(pgsize) FROM dbstat GROUP BY name"))
    assert fill["t"] > 0.98 > fill["expected"] + 0.05  # SQL inserts in key order leave pages about 88% full


def test_what_the_writer_does_not_handle_is_refused_with_nothing_written(tmp_path):
    db = tmp_path / "t.db"
    conn = make_db(db)
    columns = rows(100, seed=1)

    def refused(table: str, values) -> bool:
        before = db.read_bytes()
        written = write_sorted_table(conn, db, table, values)
        return not written and db.read_bytes() == before

    assert refused("t", [*columns[:4], columns[4] + 2**31])  # too wide for the serial types written
    negative = columns[4].copy()
    negative[5] = -1
    assert refused("t", [*columns[:4], negative])
    assert refused("before_it", columns)  # a rowid table
    conn.execute("CREATE INDEX ix_t_e ON t (e)")
    assert refused("t", columns)  # an index would need the rows too
    conn.execute("DROP INDEX ix_t_e")
    conn.execute("INSERT INTO t VALUES (0, 0, 0, 0, 0)")
    assert refused("t", columns)  # not empty
    conn.execute("DELETE FROM t")
    conn.execute("BEGIN")
    with pytest.raises(RuntimeError, match="outside a transaction"):
        write_sorted_table(conn, db, "t", columns)
    conn.execute("COMMIT")
    conn.execute("PRAGMA journal_mode = WAL")  # the file may be behind its WAL
    assert refused("t", columns)
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 0
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    conn.close()


def test_the_pages_skip_sqlites_lock_byte_page_at_one_gigabyte(tmp_path):
    """SQLite never uses the page holding the byte at offset 2**30 (it locks that byte): a table whose pages
    would cross it leaves that page out and is still sound."""
    db = tmp_path / "big.db"
    conn = make_db(db, 65536)
    conn.execute("CREATE TABLE filler (x)")
    quarter = (2**30 - 2**22) // 4  # the file ends a few MiB short of it
    conn.executemany("INSERT INTO filler VALUES (zeroblob(?))", [(quarter,)] * 4)
    lock_page = 2**30 // 65536 + 1
    assert conn.execute("PRAGMA page_count").fetchone()[0] < lock_page
    columns = rows(400_000, seed=2)  # about 100 pages of 64 KiB
    assert write_sorted_table(conn, db, "t", columns)
    assert conn.execute("PRAGMA page_count").fetchone()[0] > lock_page
    assert conn.execute("SELECT count(*) FROM dbstat WHERE name = 't' AND pageno = ?", (lock_page,)).fetchone()[0] == 0
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert conn.execute("SELECT count(*), sum(b), sum(e) FROM t").fetchone() == (
        len(columns[0]),
        int(columns[1].sum()),
        int(columns[4].sum()),
    )
    conn.close()


def test_a_table_and_its_partial_index_are_written_together_in_several_processes(tmp_path, monkeypatch):
    """A table with a partial index: the index's entries are its columns then the key's column it lacks, only for
    the rows its WHERE covers (integrity_check compares them with the rows)."""
    monkeypatch.setattr(pages, "BATCH", 2000)  # many batches of leaves, shared by the processes
    db = tmp_path / "t.db"
    conn = make_db(db, 1024)
    conn.execute("CREATE INDEX ix_t_head ON t (a, e, c) WHERE e >= 1000000000")
    columns = rows(60_000, seed=5)
    a, b, c, d, e = columns
    covered = e >= 1_000_000_000
    order = np.lexsort((b[covered], c[covered], e[covered], a[covered]))
    entries = [x[covered][order] for x in (a, e, c, b)]
    seen = []
    assert write_sorted_table(conn, db, "t", columns, seen.append, {"ix_t_head": entries}, processes=3)
    assert seen[-1] == len(a) + len(entries[0])
    check_table(conn, columns)
    plan = conn.execute("EXPLAIN QUERY PLAN SELECT b FROM t WHERE a = 5 AND e >= 1000000000").fetchall()
    assert "ix_t_head" in str(plan)
    for key in np.unique(a[covered])[:20].tolist():
        got = conn.execute("SELECT b, e FROM t WHERE a = ? AND e >= 1000000000 ORDER BY e, c, b", (key,)).fetchall()
        mine = (a == key) & covered
        assert sorted(got) == sorted(zip(b[mine].tolist(), e[mine].tolist(), strict=True))
    assert not write_sorted_table(conn, db, "t", columns)  # not empty now; nor would it be without the index
    conn.close()


def test_every_index_of_the_table_must_be_given(tmp_path):
    db = tmp_path / "t.db"
    conn = make_db(db)
    conn.execute("CREATE INDEX ix_one ON t (e)")
    conn.execute("CREATE INDEX ix_two ON t (c)")
    columns = rows(50, seed=3)
    entries = [columns[4], columns[0], columns[1]]
    assert not write_sorted_table(conn, db, "t", columns, indexes={"ix_one": entries})
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 0
    conn.close()
