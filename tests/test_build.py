import io
import json
import os
import sqlite3
import sys
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval import InputError, RetrievalClient, RetrievalError, read_jsonl
from retrieval.commands import build, stats
from retrieval.interfaces.cli import main
from retrieval.store import progress as progress_module
from retrieval.store.database import HEAD_REVISION, edge_counts
from retrieval.store.progress import (
    CITATIONS,
    INDEXING,
    LOADING,
    PHASES,
    READING,
    SORTING,
    STATISTICS,
    BuildProgress,
)
from retrieval.store.schema.migrate import downgrade, migrate
from retrieval.store.sqlite import bulk
from retrieval.store.sqlite.build import build_index
from retrieval.text import tokenise
from tests.helpers import paper, write_jsonl


def _rows(db, sql, params=()):
    with sqlite3.connect(db) as conn:
        return conn.execute(sql, params).fetchall()


def test_demo_build_summary_and_index_info(tmp_path):
    summary = build(db=tmp_path / "demo.db")
    assert (summary.papers, summary.edges, summary.dangling_references) == (100, 185, 0)
    info = dict(_rows(tmp_path / "demo.db", "SELECT key, value FROM index_info"))
    assert info["n_papers"] == "100"
    assert info["tokeniser"] == "unicode-alnum-lower" and info["tokeniser_version"] == "2"
    assert (info["stemmer"], info["stopwords"]) == ("", "")  # neither by default
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


def test_a_build_without_a_corpus_does_not_replace_an_index_of_another(tmp_path, capsys):
    """``retrieval build --db x.db`` without ``--from`` builds the demo corpus: over an index of the user's own
    papers it replaced them with the demo's hundred, and the damage messages advised exactly that command."""
    db = tmp_path / "mine.db"
    corpus = write_jsonl(tmp_path / "my papers.jsonl", [paper(f"m{i}", f"title {i}") for i in range(3)])
    build(db=db, source=corpus, stem="english", semantic="none")  # the hint names --semantic where vectors are kept
    before = db.read_bytes()
    assert main(["build", "--db", str(db)]) == 1
    err = capsys.readouterr().err
    assert f"{db} holds an index of my papers.jsonl (3 papers): a build without --from builds the demo" in err
    assert f"`retrieval build --db {db} --from 'my papers.jsonl' --stem english`" in err
    assert db.read_bytes() == before
    build(db=db, source=corpus, semantic="none")  # with its corpus it is rebuilt as asked
    demo = tmp_path / "demo.db"
    build(db=demo)
    build(db=demo)  # the demo over the demo: nothing of the user's to keep
    with sqlite3.connect(db) as conn:  # damaged: the advice names the corpus the index records
        conn.execute("UPDATE index_info SET value = '2' WHERE key = 'n_papers'")
    with pytest.raises(RetrievalError, match=r"`retrieval build --db .*mine\.db --from 'my papers\.jsonl'`"):
        RetrievalClient(db).search("title")


def test_a_build_without_a_corpus_does_not_replace_an_older_or_damaged_index(tmp_path, capsys):
    """An index this version cannot read as it is (an older revision, statistics edited) still holds the user's
    papers: the demo build replaced it, since only an index that opened was looked at."""
    db = tmp_path / "mine.db"
    build(db=db, source=write_jsonl(tmp_path / "mine.jsonl", [paper(f"m{i}", f"title {i}") for i in range(3)]))
    downgrade(db, "0008")
    before = db.read_bytes()
    assert main(["build", "--db", str(db)]) == 1
    err = capsys.readouterr().err
    assert f"{db} holds an index of mine.jsonl (3 papers): a build without --from builds the demo" in err
    assert db.read_bytes() == before
    migrate(db)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE index_info SET value = 'x' WHERE key = 'n_papers'")
    assert main(["build", "--db", str(db)]) == 1
    assert f"{db} holds an index of mine.jsonl: a build without --from" in capsys.readouterr().err
    demo = tmp_path / "demo.db"
    build(db=demo)
    downgrade(demo, "0008")
    build(db=demo)  # an older demo index is rebuilt as the demo: nothing of the user's in it
    assert RetrievalClient(demo).stats.n_papers == 100


def test_a_folder_is_no_index_to_build_over(tmp_path, capsys):
    folder = tmp_path / "dir.db"
    folder.mkdir()
    assert main(["build", "--db", str(folder)]) == 1
    assert f"{folder} is a folder, not an index file: give the index file's path" in capsys.readouterr().err


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


# -- the phases a build reports, and what the bulk path writes ---------------------------------------------------


class Recorder(BuildProgress):
    """Every phase a build reports: its name, total and unit, the counts it reached, and how many ticks."""

    def __init__(self, fail_in: str | None = None) -> None:
        self.phases: list[dict] = []
        self.open = False
        self.fail_in = fail_in

    def start(self, phase, total=None, unit=""):
        assert not self.open, "a phase started before the last one finished"
        self.phases.append({"name": phase, "total": total, "unit": unit, "done": [], "ticks": 0})
        self.open = True

    def update(self, done=None):
        current = self.phases[-1]
        if done is None:
            current["ticks"] += 1
            if current["name"] == self.fail_in:
                raise KeyboardInterrupt  # as a Ctrl-C arrives in the middle of a long statement
        else:
            current["done"].append(done)

    def finish(self):
        self.open = False


def _corpus(tmp_path, n=300):
    records = [
        paper(f"p{i:04d}", f"title {i % 7} word{i % 11}", f"abstract {i % 13} and more {i}", authors=[f"A{i % 5}"],
              references=[f"p{(i * 7) % n:04d}", "elsewhere"])
        for i in range(n)
    ]  # fmt: skip
    return write_jsonl(tmp_path / "c.jsonl", records)


def test_a_build_reports_every_phase_in_order_with_its_progress(tmp_path):
    recorder = Recorder()
    summary = build(db=tmp_path / "x.db", source=_corpus(tmp_path), progress=recorder, semantic="none")
    assert [p["name"] for p in recorder.phases] == list(PHASES)
    assert not recorder.open
    phases = {p["name"]: p for p in recorder.phases}
    assert phases[READING]["unit"] == "papers" and phases[READING]["done"][-1] == 300
    assert phases[LOADING]["total"] == summary.postings == phases[LOADING]["done"][-1]
    assert phases[INDEXING]["total"] == 3 and phases[INDEXING]["done"][-1] == 3  # names, surnames, years
    assert phases[CITATIONS]["total"] == 1 and phases[CITATIONS]["done"][-1] == 1


def test_long_steps_tick_the_progress_of_their_phase(tmp_path, monkeypatch):
    monkeypatch.setattr(progress_module, "TICK_STEPS", 1)
    recorder = Recorder()
    build(db=tmp_path / "x.db", source=_corpus(tmp_path), progress=recorder)
    ticks = {p["name"]: p["ticks"] for p in recorder.phases}
    assert all(ticks[name] > 0 for name in (SORTING, LOADING, STATISTICS)), ticks


def test_a_plain_callable_is_told_the_papers_read(tmp_path):
    seen = []
    build(db=tmp_path / "x.db", source=_corpus(tmp_path, 50), progress=seen.append)
    assert seen and seen[-1] == 50 and seen == sorted(seen)


@pytest.mark.parametrize("where", [SORTING, LOADING])  # while the indexes are built beside it; in a statement
def test_ctrl_c_stops_the_build_and_keeps_the_previous_index(tmp_path, monkeypatch, where):
    db = tmp_path / "x.db"
    build(db=db)
    before = db.read_bytes()
    monkeypatch.setattr(progress_module, "TICK_STEPS", 1)
    with pytest.raises(KeyboardInterrupt):
        build(db=db, source=_corpus(tmp_path), progress=Recorder(fail_in=where))
    assert db.read_bytes() == before
    assert not list(tmp_path.glob(".x.db.*"))


def test_a_build_counts_live_and_dangling_edges_as_a_join_with_papers_does(tmp_path):
    """The bulk path counts from cited_counts instead of joining every citation with papers twice: the counts
    are the same, with references out of the corpus and citing papers named only by a cited paper's list."""
    records = [
        {"paperId": "a", "title": "t", "references": [{"paperId": "b"}, {"paperId": "out1"}, {"paperId": None}],
         "citations": [{"paperId": "c"}, {"paperId": "citer1"}, {"paperId": "citer2"}]},
        {"paperId": "b", "title": "t", "references": [{"paperId": "a"}], "citations": [{"paperId": "a"}]},
        {"paperId": "c", "title": "t", "references": [{"paperId": "a"}, {"paperId": "out1"}, {"paperId": "out2"}]},
    ]  # fmt: skip
    summary = build(db=tmp_path / "s2.db", source=write_jsonl(tmp_path / "s2.jsonl", records))
    with sqlite3.connect(tmp_path / "s2.db") as conn:
        assert (summary.edges, summary.dangling_references) == edge_counts(conn) == (3, 5)


def test_the_bulk_path_leaves_full_pages_in_the_tables_and_indexes_it_loads(tmp_path):
    """term_freq's pages are written whole, and the secondary indexes created after the load (a sort) rather
    than grown by inserts in random order, which leave pages partly empty."""
    records = [
        paper(f"p{i:05d}", " ".join(f"w{(i * j) % 997}" for j in range(1, 40)), year=1950 + i * 37 % 70,
              authors=[f"Author {(i * 5 + j) * 7919 % 3001}" for j in range(3)])
        for i in range(3000)
    ]  # fmt: skip
    db = tmp_path / "x.db"
    build(db=db, source=write_jsonl(tmp_path / "c.jsonl", records))
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        fill = dict(conn.execute("SELECT name, 1.0 - 1.0 * sum(unused) / sum(pgsize) FROM dbstat GROUP BY name"))
    assert fill["term_freq"] > 0.98
    assert fill["ix_paper_authors_name"] > 0.95  # about 0.9 when the load inserts into it


def test_the_terminal_shows_each_phase_of_a_build(tmp_path, monkeypatch, capsys):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    assert main(["build", "--from", str(_corpus(tmp_path)), "--db", str(tmp_path / "x.db")]) == 0
    shown = screen.getvalue()
    for name in PHASES:
        assert name in shown, name
    assert "300/300" in shown and "papers/s" in shown  # the reading bar: its count and its rate
    assert "built " in capsys.readouterr().out


def test_postings_too_wide_for_one_sort_key_are_sorted_the_same(tmp_path):
    """The postings are sorted as packed int64 keys when (term, doc, count) fit in 63 bits, else with a stable
    argsort."""
    rng = np.random.default_rng(4)
    n = 5000
    for scale in (1, 2**52):  # packed keys; too wide for them
        loader = bulk.BulkLoader(sqlite3.connect(":memory:"), workers=0)
        docs = np.sort(rng.integers(1, 400, n)).astype(np.int32)
        terms = rng.integers(1, 300, n) * scale
        keep = np.unique(docs.astype(np.int64) * 2**40 + terms, return_index=True)[1]  # one posting per pair
        loader.term_parts, loader.doc_parts = [terms[keep]], [docs[keep]]
        loader.count_parts, loader.length_parts = [rng.integers(1, 9, len(keep)).astype(np.int32)], [np.full(400, 7)]
        loader.total_tokens, loader.n_papers = 400 * 7, 400
        got = loader._sorted_postings()
        order = np.lexsort((docs[keep], terms[keep]))
        assert got[0].tolist() == terms[keep][order].tolist() and got[1].tolist() == docs[keep][order].tolist()


def test_off_a_terminal_the_build_neither_draws_nor_reads_its_input_twice(tmp_path, monkeypatch, capsys):
    from retrieval.interfaces import cli

    def counted(path):
        raise AssertionError("the input's lines were counted for a bar nobody sees")

    monkeypatch.setattr(cli, "_count_lines", counted)
    assert main(["build", "--from", str(_corpus(tmp_path)), "--db", str(tmp_path / "x.db")]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("built ") and err == ""


def test_a_ctrl_c_during_the_swap_waits_for_it_and_then_counts_only_if_it_failed(tmp_path, monkeypatch):
    """The swap is held against Ctrl-C and SIGTERM: a signal that arrives while the new index is copied in is
    dropped when the copy succeeded (the build is done: "interrupted, nothing changed" would be false), and
    raised as the interrupt it was when the copy failed."""
    import os
    import signal

    from retrieval.store.sqlite import files

    db = tmp_path / "x.db"
    build(db=db)
    real = files._lock_waited
    before = signal.getsignal(signal.SIGINT)  # Python's own, or SIG_IGN under a runner started in the background

    def signalled(target, arrived):
        progress = real(target, arrived)

        def copying(status, remaining, total):
            os.kill(os.getpid(), signal.SIGINT)  # delivered now, in the middle of the copy
            progress(status, remaining, total)

        return copying

    monkeypatch.setattr(files, "_lock_waited", signalled)
    summary = build(db=db, source=_corpus(tmp_path, 40))
    assert summary.papers == 40 and stats(db)["papers"] == 40

    monkeypatch.setattr(files, "_lock_waited", real)
    fingerprint = files.fingerprint

    def signalled_then_failed(conn):
        if sys._getframe(1).f_code.co_name != "_swap_in":
            return fingerprint(conn)
        os.kill(os.getpid(), signal.SIGTERM)  # in the swap, before the copy: which then fails
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files, "fingerprint", signalled_then_failed)
    with pytest.raises(KeyboardInterrupt):
        build(db=db, source=_corpus(tmp_path, 50))
    assert stats(db)["papers"] == 40
    assert signal.getsignal(signal.SIGINT) is before  # the handlers are back


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet="abcXYZ019_-. \t\nÉéßıİﬁ٣²ⅫΣσς😀\x00", max_size=40), max_size=8))
def test_the_build_tokenises_as_the_query_path_does(texts):
    """The workers tokenise ASCII text as bytes and count with numpy: the terms and counts are those of
    retrieval.text.tokenise, text by text, whatever the characters."""
    vocabulary_of, first, new, terms, counts, distinct, lengths = bulk.tokenise_chunk(texts, build=repr(texts))
    assert first == 0
    at = 0
    for text, n, length in zip(texts, distinct.tolist(), lengths.tolist(), strict=True):
        expected = Counter(tokenise(text))
        got = {new[t]: c for t, c in zip(terms[at : at + n].tolist(), counts[at : at + n].tolist(), strict=True)}
        assert got == expected and length == sum(expected.values())
        at += n
    assert new == list(dict.fromkeys(token for text in texts for token in tokenise(text)))  # first-seen order


@pytest.mark.parametrize(("bad", "duplicate", "reported"), [(260, 230, 230), (180, 230, 180)])
def test_the_workers_report_the_first_bad_record_of_the_file(tmp_path, monkeypatch, bad, duplicate, reported):
    """Parsed in the workers, a file's first bad record (malformed, or an id seen before) is the one reported,
    with its line, as read_papers reports it; the previous index stays."""
    monkeypatch.setattr(bulk, "CHUNK", 50)
    monkeypatch.setattr(bulk, "PARALLEL_MIN_PAPERS", 100)
    lines = [json.dumps(paper(f"p{i:04d}")) for i in range(1, 301)]
    lines[duplicate - 1] = json.dumps(paper("p0007"))
    lines[bad - 1] = '{"id": "broken", "title": 5}'
    corpus = write_jsonl(tmp_path / "c.jsonl", lines)
    db = tmp_path / "x.db"
    build(db=db)
    before = db.read_bytes()
    with pytest.raises(InputError, match=rf"c\.jsonl:{reported}: ") as info:
        build(db=db, source=corpus, workers=2)
    expected = "duplicate id 'p0007'" if reported == duplicate else "has no 'title'"
    assert expected in str(info.value)
    assert db.read_bytes() == before


def test_a_fault_of_the_page_writer_fails_the_build_and_keeps_the_previous_index(tmp_path, monkeypatch):
    # The postings' pages are written straight into the file; SQLite's quick_check on them must catch a bad
    # page before the file is swapped in. Here the writer's last page is damaged after it wrote it.
    db = tmp_path / "x.db"
    build(db=db)
    before = db.read_bytes()
    real = bulk.write_sorted_table

    def damaging(conn, path, *args, **kwargs):
        written = real(conn, path, *args, **kwargs)
        assert written, "the demo corpus is written as pages"
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        with open(path, "r+b") as handle:
            handle.seek(0, 2)
            last = handle.tell() - page_size
            handle.seek(last + 3)  # the page's cell count and first cell offset
            handle.write(b"\xff\xff\x00\x01")
        return written

    monkeypatch.setattr(bulk, "write_sorted_table", damaging)
    with pytest.raises(RetrievalError, match="wrote a damaged term_freq table"):
        build(db=db)
    assert db.read_bytes() == before
    assert not list(tmp_path.glob(".x.db.*"))


def test_a_check_of_the_written_pages_stopped_by_ctrl_c_is_an_interruption_not_damage(demo_db):
    # A build stopped late (Ctrl-C, SIGTERM: the connection interrupted) said "the build wrote a damaged
    # term_freq table ... a bug in retrieval's bulk loader", exit 1, instead of "interrupted", exit 130.
    conn = sqlite3.connect(demo_db)
    try:
        bulk.verify_written(conn, "term_freq")  # a whole table checks clean
        conn.set_progress_handler(lambda: 1, 1)  # every step stopped, as conn.interrupt() stops it
        with pytest.raises(KeyboardInterrupt):
            bulk.verify_written(conn, "term_freq")
    finally:
        conn.close()


def test_an_index_path_that_is_not_utf8_builds_and_opens(tmp_path):
    """Before: the build read its own file's name back from SQLite as UTF-8 and called the index damaged."""
    db = tmp_path / os.fsdecode(b"caf\xe9.db")  # a Latin-1 name, as an older system's folder may hold
    summary = build(db=db, semantic="none")
    assert summary.added == 100 and db.exists()
    assert stats(db)["papers"] == 100
    with RetrievalClient(db) as client:
        assert client.search("attention").ranked
