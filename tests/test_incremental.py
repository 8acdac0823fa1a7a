"""Adds and removes keep the index equal to a full rebuild of the same final corpus."""

import json
import multiprocessing
import random
import sqlite3
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval import Paper, RetrievalClient, RetrievalError, SchemaVersionError
from retrieval.commands import add, build
from retrieval.interfaces.cli import main
from retrieval.store.database import HEAD_REVISION
from retrieval.store.schema.migrate import migrate
from retrieval.store.sqlite.build import build_index
from retrieval.store.writer import add_papers, remove_papers
from tests.reference import close

WORDS = ["graph", "walk", "sparse", "attention", "retrieval", "rank", "low", "adapter", "block", "routing"]
WORDS += ["entropy", "black", "hole"]


def make_pool(seed: int = 0, size: int = 14) -> dict[str, Paper]:
    rng = random.Random(seed)
    ids = [f"q{i:02d}" for i in range(size)]
    pool = {}
    for pid in ids:
        pool[pid] = Paper(
            id=pid,
            title=" ".join(rng.choices(WORDS, k=rng.randint(1, 4))),
            abstract=" ".join(rng.choices(WORDS, k=rng.randint(0, 12))),
            year=rng.choice([None, 2001, 2005, 2010, 2020]),
            authors=[f"Author {rng.randint(1, 5)}"] * rng.randint(0, 2),
            references=rng.sample(ids + ["outside"], rng.randint(0, 4)),
            citations=rng.sample(ids + ["citer"], rng.randint(0, 2)),  # as a Semantic Scholar record lists them
            source="pool",
        )
    return pool


POOL = make_pool()
QUERIES = ["graph walk", "sparse attention attention", "black hole entropy", "low rank adapter routing"]


def snapshot(db) -> dict:
    """Every table's content, with words instead of term ids and paper ids instead of their numbers (surrogate
    keys)."""
    with sqlite3.connect(db) as conn:

        def rows(sql):
            return sorted(conn.execute(sql).fetchall(), key=repr)

        info = dict(conn.execute("SELECT key, value FROM index_info"))
        return {
            "papers": rows("SELECT id, title, abstract, year, source FROM papers"),
            "authors": rows("SELECT paper_id, position, name FROM paper_authors"),
            "sources": rows("SELECT paper_id, field, source FROM field_sources"),
            "citations": rows("SELECT citing_id, cited_id, listed_by_citing, listed_by_cited FROM citations"),
            "paper_keys": rows("SELECT paper_id FROM paper_keys"),  # the ids numbered (the numbers are surrogate)
            "doc_freq": rows("SELECT term, df FROM doc_freq"),
            "term_counts": rows("SELECT term, paper_id, count FROM term_counts"),
            "doc_len": rows("SELECT paper_id, length FROM doc_len"),
            "cited_counts": rows("SELECT paper_id, cited_by FROM cited_counts"),
            "info": {k: info.get(k) for k in ("n_papers", "total_tokens", "avgdl", "min_year", "max_year")},
        }


def assert_same_as_rebuild(db, final_ids, tmp_path) -> None:
    rebuilt = tmp_path / "rebuilt.db"
    build_index([POOL[i] for i in sorted(final_ids)], rebuilt)
    assert snapshot(db) == snapshot(rebuilt)
    with RetrievalClient(db=db) as a, RetrievalClient(db=rebuilt) as b:
        for query in QUERIES:
            sa = a.lexical.scores(query, sorted(final_ids))
            sb = b.lexical.scores(query, sorted(final_ids))
            assert all(close(sa[i], sb[i]) for i in final_ids), query
            assert [p for p, _ in a.lexical.search(query, 20)] == [p for p, _ in b.lexical.search(query, 20)]
        for seed in sorted(final_ids)[:3]:
            assert a.graph.expand([seed], 2) == b.graph.expand([seed], 2)


operations = st.lists(
    st.tuples(st.sampled_from(["add", "remove", "replace"]), st.sets(st.sampled_from(sorted(POOL)), max_size=5)),
    max_size=6,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sets(st.sampled_from(sorted(POOL)), min_size=1, max_size=8), operations)
def test_any_sequence_of_adds_and_removes_equals_a_rebuild(tmp_path, initial, ops):
    db = tmp_path / "inc.db"
    build_index([POOL[i] for i in sorted(initial)], db)
    present = set(initial)
    for op, ids in ops:
        if op == "add" and ids - present:
            add_papers([POOL[i] for i in sorted(ids - present)], db)
            present |= ids
        elif op == "remove" and ids & present and present - ids:
            remove_papers(sorted(ids & present), db)
            present -= ids
        elif op == "replace" and ids & present:
            add_papers([POOL[i] for i in sorted(ids & present)], db, replace=True)
    assert_same_as_rebuild(db, present, tmp_path)


def test_adding_a_paper_makes_earlier_dangling_references_live(tmp_path):
    db = tmp_path / "x.db"
    build_index([Paper("a", "graph", references=["b"]), Paper("c", "walk")], db)
    with RetrievalClient(db=db) as client:
        assert client.graph.expand(["a"], 1) == {"a": 0}
    add_papers([Paper("b", "black hole")], db)
    with RetrievalClient(db=db) as client:
        assert client.graph.expand(["a"], 1) == {"a": 0, "b": 1}
        assert client.stats.n_papers == 3


def test_removing_keeps_other_papers_references_as_dangling(tmp_path):
    db = tmp_path / "x.db"
    build_index([Paper("a", "graph", references=["b"]), Paper("b", "walk", references=["a"])], db)
    remove_papers(["b"], db)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT citing_id, cited_id FROM citations").fetchall() == [("a", "b")]
    with RetrievalClient(db=db) as client:
        assert client.graph.expand(["a"], 2) == {"a": 0}


def test_existing_id_needs_replace_and_unknown_id_cannot_be_removed(tmp_path):
    db = tmp_path / "x.db"
    build_index([Paper("a", "graph"), Paper("b", "walk")], db)
    before = snapshot(db)
    with pytest.raises(RetrievalError, match=r"already in the index \('a'\): pass --replace"):
        add_papers([Paper("c", "new"), Paper("a", "graph again")], db)
    with pytest.raises(RetrievalError, match=r"not in the index \('zz'\): nothing was removed"):
        remove_papers(["b", "zz"], db)
    with pytest.raises(RetrievalError, match="appears twice"):
        add_papers([Paper("c", "new"), Paper("c", "new")], db)
    assert snapshot(db) == before
    summary = add_papers([Paper("a", "graph again")], db, replace=True)
    assert (summary.added, summary.replaced, summary.papers) == (1, 1, 2)


def test_interrupted_add_leaves_the_index_as_it_was(tmp_path):
    db = tmp_path / "x.db"
    build_index([POOL[i] for i in sorted(POOL)[:5]], db)
    before = snapshot(db)

    def stream():
        for i in range(5000):  # more than one batch is written before the interruption
            yield Paper(f"n{i}", "graph walk", "sparse attention")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        add_papers(stream(), db)
    assert snapshot(db) == before


def test_cli_add_and_remove(tmp_path, capsys):
    db = str(tmp_path / "x.db")
    src = tmp_path / "more.jsonl"
    src.write_text(json.dumps({"id": "p101", "title": "Attention sparsity addendum", "references": ["p001"]}) + "\n")
    assert main(["build", "--db", db]) == 0
    assert main(["add", str(src), "--db", db]) == 0
    assert "added 1 paper to" in capsys.readouterr().out
    assert main(["add", str(src), "--db", db]) == 1
    assert "--replace" in capsys.readouterr().err
    assert main(["add", str(src), "--db", db, "--replace"]) == 0
    assert main(["remove", "p101", "p100", "--db", db]) == 0
    assert "99 papers now" in capsys.readouterr().out
    assert main(["remove", "nope", "--db", db]) == 1
    capsys.readouterr()
    with pytest.raises(SystemExit) as usage:  # an empty id is a usage error, as `show ''` has it (was exit 1)
        main(["remove", "p050", "", "--db", db])
    assert usage.value.code == 2 and "a paper id is empty" in capsys.readouterr().err
    assert main(["show", "p050", "--db", db]) == 0  # nothing was removed


def test_an_index_at_revision_0001_is_refused_on_read_and_upgraded_on_request(tmp_path, capsys):
    db = tmp_path / "old.db"
    migrate(db, "0001")
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO papers VALUES ('a', 'graph walk', '', 2001, 'old')")
        conn.execute("INSERT INTO papers VALUES ('b', 'walk', '', 2002, 'old')")
        conn.execute("INSERT INTO citations VALUES ('b', 'a')")
        conn.execute("INSERT INTO doc_freq VALUES (1, 'graph', 1), (2, 'walk', 2)")
        conn.execute("INSERT INTO term_freq VALUES (1, 'a', 1), (2, 'a', 1), (2, 'b', 1)")
        conn.execute("INSERT INTO doc_len VALUES ('a', 2), ('b', 1)")
        info = {"n_papers": 2, "total_tokens": 3, "avgdl": 1.5, "min_year": 2001, "max_year": 2002, "k1": 1.5}
        info |= {"b": 0.75, "tokeniser": "unicode-alnum-lower", "tokeniser_version": "1", "schema_revision": "0001"}
        conn.executemany("INSERT INTO index_info VALUES (?, ?)", [(k, str(v)) for k, v in info.items()])
    before = db.read_bytes()
    with pytest.raises(SchemaVersionError, match=r"revision '0001'.*`retrieval upgrade --db .*old\.db`"):
        RetrievalClient(db=db)
    assert main(["search", "graph", "--db", str(db)]) == 1
    assert "retrieval upgrade" in capsys.readouterr().err
    assert db.read_bytes() == before  # a read never writes
    assert main(["upgrade", "--db", str(db)]) == 0
    assert f"from schema revision 0001 to {HEAD_REVISION}" in capsys.readouterr().out
    with RetrievalClient(db=db) as client:
        assert [p for p, _ in client.lexical.search("graph", 5)] == ["a"]
        assert client.graph.expand(["a"], 1) == {"a": 0, "b": 1}
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == (HEAD_REVISION,)
        assert conn.execute("SELECT listed_by_citing, listed_by_cited FROM citations").fetchall() == [(1, 0)]
        assert conn.execute("SELECT value FROM index_info WHERE key = 'schema_revision'").fetchone() == (HEAD_REVISION,)
        # 0004: integer document ids in paper-id order; 0008: the postings keep (term, document, count) only
        rows = conn.execute("SELECT term, paper_id, count FROM term_counts ORDER BY 1, 2").fetchall()
        assert rows == [("graph", "a", 1), ("walk", "a", 1), ("walk", "b", 1)]
        assert [row[1] for row in conn.execute("PRAGMA table_info(term_freq)")] == ["term_id", "doc_id", "count"]
        assert conn.execute("SELECT doc_id, paper_id, length FROM doc_len ORDER BY 1").fetchall() == [
            (1, "a", 2),
            (2, "b", 1),
        ]
        assert conn.execute("SELECT term, df FROM doc_freq ORDER BY 1").fetchall() == [("graph", 1), ("walk", 2)]
    add_papers([Paper("c", "graph", references=["a"])], db)  # and it can be written to afterwards
    with RetrievalClient(db=db) as client:
        assert client.stats.n_papers == 3


# -- readers during a writer --------------------------------------------------------------------------------
def _search_loop(db: str, query: str, seconds: float, out) -> None:
    results, errors = [], []
    deadline = time.monotonic() + seconds
    with RetrievalClient(db=db) as client:
        while time.monotonic() < deadline:
            try:
                r = client.search(query, limit=20, full=False)
                results.append((r.hit_count, [(e.paper.id, round(e.final_score, 12)) for e in r.ranked]))
            except Exception as exc:  # noqa: BLE001 - the test reports any error a reader sees
                errors.append(repr(exc))
    out.put((results, errors))


def _state(db, query):
    with RetrievalClient(db=db) as client:
        r = client.search(query, limit=20, full=False)
    return r.hit_count, tuple((e.paper.id, round(e.final_score, 12)) for e in r.ranked)


def test_readers_see_the_old_or_the_new_state_never_a_mix(tmp_path):
    """A reader searches without pause while five adds commit; every answer it gets must equal the answer of
    one of the six states the file went through (copied aside after each add)."""
    db = tmp_path / "live.db"
    build(db=db)
    query = "attention sparsity routing"
    copies = [tmp_path / "state0.db"]
    with sqlite3.connect(db) as src, sqlite3.connect(copies[0]) as dst:
        src.backup(dst)
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    reader = ctx.Process(target=_search_loop, args=(str(db), query, 8.0, out))
    reader.start()
    time.sleep(1.5)
    for step in range(1, 6):
        extra = [Paper(f"n{step}-{i:04d}", "attention sparsity study", "attention routing block " * step,
                       2025 + step, references=["p001", "p003"]) for i in range(600)]  # fmt: skip
        add_papers(extra, db)
        copies.append(tmp_path / f"state{step}.db")
        with sqlite3.connect(db) as src, sqlite3.connect(copies[-1]) as dst:
            src.backup(dst)
        time.sleep(0.7)
    results, errors = out.get(timeout=60)
    reader.join(timeout=60)
    states = {_state(copy, query) for copy in copies}
    assert len(states) == 6
    assert errors == []
    seen = {(hits, tuple(ranked)) for hits, ranked in results}
    assert seen <= states, "a search saw a state that is none of those the file went through"
    assert len(seen) >= 3, "the reader should have searched across several adds"


def test_one_public_name_per_operation_and_the_old_names_still_work_with_a_warning(tmp_path):
    """``build``, ``add``, ``remove`` and ``upgrade`` take papers as well as files; the names of earlier releases
    (``build_index``, ``add_papers``, ``remove_papers``, ``upgrade_index``) do the same and say what to use."""
    import retrieval

    pool = make_pool(3)
    ids = sorted(pool)
    db = tmp_path / "one.db"
    assert retrieval.build(db, (pool[i] for i in ids[:8])).papers == 8
    assert retrieval.add([pool[i] for i in ids[8:]], db).added == len(ids) - 8
    assert retrieval.remove(ids[:2], db).removed == 2
    assert retrieval.upgrade(db) == (HEAD_REVISION, HEAD_REVISION)
    old = tmp_path / "old.db"
    with pytest.warns(DeprecationWarning, match=r"use retrieval\.build\(path, papers\)"):
        retrieval.build_index((pool[i] for i in ids[:8]), old, source="papers")
    with pytest.warns(DeprecationWarning, match=r"use retrieval\.add"):
        retrieval.add_papers([pool[i] for i in ids[8:]], old)
    with pytest.warns(DeprecationWarning, match=r"use retrieval\.remove"):
        retrieval.remove_papers(ids[:2], old)
    with pytest.warns(DeprecationWarning, match=r"use retrieval\.upgrade"):
        retrieval.upgrade_index(old)
    assert snapshot(old) == snapshot(db)  # the same index either way


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (Paper("x\x00y", "attention sparsity"), "'id' 'x\\x00y' holds a control character"),
        (Paper("", "attention sparsity"), "missing 'id'"),
        (Paper(5, "attention sparsity"), "missing 'id'"),
        (Paper("z1", 5), "'title' must be a string, got int"),
        (Paper("z2", "t", abstract=b"x"), "'abstract' must be a string, got bytes"),
        (Paper("z3", "t\ud800"), "'title' holds a lone surrogate"),
        (Paper("z4", "t", authors="Bob Smith"), "'authors' must be a list of strings, got \"Bob Smith\""),
        (Paper("z5", "t", references="p001"), "'references' must be a list of strings"),
        (Paper("z6", "t", year=3000), "'year' 3000 is not a year between"),
        (Paper("z8", "t", authors=["Ann Lee", " "]), "'authors' entry 2 is blank"),
        (Paper("z9", "t", references=["p001\x00x"]), "'references' entry 1 'p001\\x00x' holds a control"),
        (Paper("z10", "t", citations=[" "]), "'citations' entry 1 is blank"),
        ({"id": "z7", "title": "t"}, "item 2 is a dict, not a Paper"),
    ],
)
def test_papers_a_program_hands_over_are_checked_as_a_files_records_are(given, says, tmp_path):
    """``add`` and ``build`` from ``Paper`` objects check each as the readers check a record (an id with a NUL
    was stored, and the index then refused every search as damaged, while ``remove`` could not find the paper;
    a string of authors became one author per letter): ``InputError`` naming the paper, nothing written."""
    from retrieval import add

    db = tmp_path / "x.db"
    build(db=db)
    before = db.read_bytes()
    papers = [Paper("ok1", "a fine paper"), given]
    with pytest.raises(RetrievalError) as raised:
        add(papers, db=db)
    assert says in str(raised.value) and "the papers given" in str(raised.value)
    assert db.read_bytes() == before
    with pytest.raises(RetrievalError, match="the papers given"):
        build(db=tmp_path / "new.db", source=papers)
    assert not (tmp_path / "new.db").exists()
    with RetrievalClient(db) as client:
        assert client.search("attention sparsity").ranked


def test_remove_takes_one_id_as_a_string(tmp_path):
    """``remove("p001")`` removes that paper (it read the string as the ids 'p', '0' and '1')."""
    from retrieval import remove

    db = tmp_path / "x.db"
    build(db=db)
    assert remove("p001", db=db).removed == 1
    with RetrievalClient(db) as client:
        assert client.paper("p001") is None and client.paper("p002") is not None


def test_adding_papers_already_there_counts_all_of_them(tmp_path, capsys):
    """An add of papers already in the index names how many of those given are there (it counted only the first
    batch of 2,000 that held one), and changes nothing."""
    from tests.helpers import paper, write_jsonl

    db = tmp_path / "x.db"
    build(db=db)
    more = write_jsonl(tmp_path / "more.jsonl", [paper(f"n{i:05d}", f"new paper {i}", "") for i in range(2_500)])
    assert main(["add", str(more), "--db", str(db)]) == 0
    capsys.readouterr()
    before = db.read_bytes()
    assert main(["add", str(more), "--db", str(db)]) == 1
    err = capsys.readouterr().err
    assert "2,500 paper(s) already in the index ('n00000', 'n00001'" in err and "--replace" in err
    assert db.read_bytes() == before


def _revision(db) -> str:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT version_num FROM alembic_version").fetchone()[0]


def test_a_write_upgrades_an_older_index_with_its_change_or_not_at_all(tmp_path, capsys):
    """An add or remove on an index of an older revision upgrades it in the same swap as its change: a write that
    fails leaves the file at its old revision, byte for byte (an older install can still open it); one that
    succeeds says it upgraded, and leaves what an upgrade followed by the write leaves."""
    from retrieval.store.schema.migrate import downgrade, upgrade_index

    pool = make_pool(5)
    db = tmp_path / "old.db"
    build_index(list(pool.values())[:-1], db)
    downgrade(db, "0004")
    before = db.read_bytes()
    with pytest.raises(RetrievalError, match="not in the index"):
        remove_papers(["nonexistent"], db)
    assert main(["add", str(_jsonl(tmp_path, [list(pool.values())[0]])), "--db", str(db)]) == 1  # already there
    assert _revision(db) == "0004" and db.read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".old.db.")]  # no copy left behind

    reference = tmp_path / "reference.db"
    reference.write_bytes(before)
    upgrade_index(reference)
    remove_papers([next(iter(pool))], reference)
    summary = remove_papers([next(iter(pool))], db)
    assert summary.upgraded_from == "0004" and _revision(db) == HEAD_REVISION
    with RetrievalClient(db) as got, RetrievalClient(reference) as expected:
        for query in ("graph", "entropy black hole", "sparse attention"):
            assert [(h, round(s, 9)) for h, s in got.lexical.search(query, 10)] == [
                (h, round(s, 9)) for h, s in expected.lexical.search(query, 10)
            ]
        assert got.stats.n_papers == expected.stats.n_papers == len(pool) - 2
    # The command line says so; an index already at this revision says nothing of it.
    downgrade(db, "0004")
    capsys.readouterr()
    assert main(["add", str(_jsonl(tmp_path, [list(pool.values())[-1]])), "--db", str(db)]) == 0
    assert f"upgraded {db} from schema revision 0004 to {HEAD_REVISION} first" in capsys.readouterr().out
    assert remove_papers([list(pool)[-1]], db).upgraded_from is None


def _jsonl(tmp_path, papers):
    """``papers`` as a JSONL file in ``tmp_path`` (a new name each time)."""
    path = tmp_path / f"add-{len(list(tmp_path.iterdir()))}.jsonl"
    records = ({"id": p.id, "title": p.title, "abstract": p.abstract, "year": p.year} for p in papers)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _papers_counted_by_the_planner(db) -> int:
    with sqlite3.connect(db) as conn:
        return max(
            int(stat.split()[0]) for (stat,) in conn.execute("SELECT stat FROM sqlite_stat1 WHERE tbl = 'papers'")
        )


def test_writes_keep_the_planner_statistics_near_the_index_they_leave(tmp_path):
    """A build of 20 papers grown to 2,020 by an add kept the planner's statistics of 20 papers: SQLite then joined
    the graph's tables in the wrong order and a search took ten times a rebuild's. An add or remove that changes
    the papers by half or more gathers them again (from a sample); a small one leaves them as they are."""
    from tests.helpers import shared_corpus

    lines = shared_corpus("hepth").read_text(encoding="utf-8").splitlines()[:2020]
    small, rest = tmp_path / "small.jsonl", tmp_path / "rest.jsonl"
    small.write_text("\n".join(lines[:20]) + "\n", encoding="utf-8")
    rest.write_text("\n".join(lines[20:]) + "\n", encoding="utf-8")
    db = tmp_path / "grown.db"
    build(db, small)
    assert _papers_counted_by_the_planner(db) <= 40
    add(rest, db)
    assert 1010 <= _papers_counted_by_the_planner(db) <= 4040
    with sqlite3.connect(db) as conn:
        before = conn.execute("SELECT * FROM sqlite_stat1 ORDER BY tbl, idx").fetchall()
    remove_papers([json.loads(lines[-1])["id"]], db)  # one paper of 2,020: the statistics still hold
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT * FROM sqlite_stat1 ORDER BY tbl, idx").fetchall() == before
    remove_papers([json.loads(line)["id"] for line in lines[20:2000]], db)  # down to 39: gathered again
    assert _papers_counted_by_the_planner(db) <= 80


def test_removing_a_paper_whose_stored_text_was_changed_by_hand_is_a_message_and_changes_nothing(
    demo_db, tmp_path, capsys
):
    db = tmp_path / "edited.db"
    db.write_bytes(demo_db.read_bytes())
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE papers SET title = 'changed entirely' WHERE id = 'p001'")
    before = db.read_bytes()
    with pytest.raises(RetrievalError, match=r"'p001' holds the term '(changed|entirely)'.*nothing was changed"):
        remove_papers(["p001"], db)
    assert main(["remove", "p001", "--db", str(db)]) == 1
    err = capsys.readouterr().err
    assert "is damaged" in err and "retrieval build" in err and "Traceback" not in err
    assert db.read_bytes() == before


@pytest.mark.parametrize(
    "damage",
    [
        "UPDATE postings SET counts = substr(counts, 1, length(counts) - 1) WHERE term_id = :t",  # a byte short
        "UPDATE postings SET counts = 'abc' WHERE term_id = :t",  # text
        "UPDATE postings SET doc_ids = 7 WHERE term_id = :t",  # a number
        "UPDATE postings SET last_doc = 'x' || last_doc WHERE term_id = :t",  # a range of text
    ],
)
def test_a_write_over_a_postings_row_changed_by_hand_is_a_message_and_changes_nothing(
    demo_db, tmp_path, capsys, damage
):
    """An add or a remove that rewrote such a row failed with a Python traceback (KeyError, TypeError)."""
    db = tmp_path / "edited.db"
    db.write_bytes(demo_db.read_bytes())
    with sqlite3.connect(db) as conn:
        (term,) = conn.execute("SELECT term_id FROM doc_freq WHERE term = 'attention'").fetchone()
        conn.execute(damage, {"t": term})
    before = db.read_bytes()
    more = tmp_path / "more.jsonl"
    more.write_text(json.dumps({"id": "zz1", "title": "attention again", "year": 2020}) + "\n")
    for argv in (["add", str(more)], ["remove", "p001"]):
        assert main([*argv, "--db", str(db)]) == 1, argv
        err = capsys.readouterr().err
        assert f"{db} is damaged: the postings row of term {term} at document" in err, err
        assert "retrieval check --db" in err and "Traceback" not in err
        assert db.read_bytes() == before


def test_removing_every_paper_says_an_index_keeps_one_and_changes_nothing(demo_db, tmp_path, capsys):
    db = tmp_path / "all.db"
    db.write_bytes(demo_db.read_bytes())
    with sqlite3.connect(db) as conn:
        ids = [pid for (pid,) in conn.execute("SELECT id FROM papers")]
    before = db.read_bytes()
    assert main(["remove", *ids, "--db", str(db)]) == 1
    err = capsys.readouterr().err
    assert f"removing {len(ids)} paper(s) would leave" in err and "nothing was removed" in err
    assert "check the input" not in err
    assert db.read_bytes() == before
    assert remove_papers(ids[1:], db).papers == 1  # all but one: fine


def test_an_add_says_what_it_dropped_and_warns_of_an_empty_file(demo_db, tmp_path, capsys):
    db = tmp_path / "d.db"
    db.write_bytes(demo_db.read_bytes())
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    info = dict(sqlite3.connect(db).execute("SELECT key, value FROM index_info").fetchall())
    assert main(["add", str(empty), "--db", str(db)]) == 0
    captured = capsys.readouterr()
    assert "added 0 papers" in captured.out and f"{empty} holds no papers: nothing was added" in captured.err
    assert "100 papers, 70 terms now" in captured.out
    # nothing written: the generation (what long-lived readers keep decoded) and the update time stay
    assert dict(sqlite3.connect(db).execute("SELECT key, value FROM index_info").fetchall()) == info
    cites = tmp_path / "cites.jsonl"
    cites.write_text(json.dumps({"id": "s1", "title": "self", "references": ["s1", "p001", "p001"]}) + "\n")
    assert main(["add", str(cites), "--db", str(db)]) == 0
    captured = capsys.readouterr()
    assert "1 self-citation dropped; 1 repeated reference dropped" in captured.out and not captured.err
