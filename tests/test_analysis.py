"""An index's analysis (folding, ``--stem``, ``--stopwords``) end to end, on real SQLite files: SQL BM25 equals
the plain-Python reference with the same analysis, adds and queries use the index's analyser, and an index of
the version-1 tokeniser is refused and then re-indexed by ``retrieval upgrade`` into what a fresh build gives."""

import json
import re
import sqlite3

import pytest

from retrieval import NotAnIndexError, RetrievalClient, SchemaVersionError, build_corpus, read_jsonl
from retrieval.commands import add, build, upgrade
from retrieval.interfaces.cli import main
from retrieval.search.query import Query, analyser_of
from retrieval.store.sqlite import bulk
from retrieval.text import Analyser
from tests.helpers import paper, shared_corpus, write_jsonl
from tests.reference import ReferenceBM25, close

STEM_STOP = {"stem": "english", "stopwords": "english"}


def _check(client: RetrievalClient, ref: ReferenceBM25, query: str, k: int) -> None:
    got = client.lexical.search(query, k)
    expected = ref.top(query, k)
    assert [pid for pid, _ in got] == [pid for pid, _ in expected], query
    for (_, a), (_, b) in zip(got, expected, strict=True):
        assert close(a, b), (query, a, b)
    exhaustive = client.lexical.search(query, k, exhaustive=True)
    assert [pid for pid, _ in exhaustive] == [pid for pid, _ in got], query


@pytest.mark.parametrize(
    "options",
    [STEM_STOP, {"stem": "english"}, {"stopwords": "english"}, {"stem": "none", "stopwords": "none"}, {}],
)  # fmt: skip
def test_a_stemmed_build_without_stop_words_scores_as_the_reference(tmp_path, options):
    db = tmp_path / "demo.db"
    build(db=db, **options)
    named = {k: None if v == "none" else v for k, v in options.items()}  # "none" asks for none, as None does
    ref = ReferenceBM25({p.id: p.text for p in build_corpus()}, **named)
    with RetrievalClient(db=db) as client:
        assert client.stats.analyser == Analyser(**named)  # the default ({}): neither
        for query in ["the attention of sparsity", "retrieving augmented embeddings", "study 12", "models model"]:
            _check(client, ref, query, 100)


def test_cacm_with_stemming_and_stop_words_scores_as_the_reference(tmp_path):
    corpus = shared_corpus("cacm")
    db = tmp_path / "cacm.db"
    build(db=db, source=corpus, **STEM_STOP)
    papers = [p for _, p in read_jsonl(corpus)]
    ref = ReferenceBM25({p.id: p.text for p in papers}, **STEM_STOP)
    queries_file = corpus.parent / "queries-dev.jsonl"
    queries = [json.loads(line)["query"] for line in queries_file.read_text(encoding="utf-8").splitlines()]
    with RetrievalClient(db=db) as client:
        for query in queries + [p.title for p in papers[:: len(papers) // 15]]:
            _check(client, ref, query, 50)
        some = [p.id for p in papers[:60]]
        scores = client.lexical.scores(queries[0], some)
        for pid in some:
            assert close(scores[pid], ref.score(pid, queries[0]))


def test_a_query_made_only_of_stop_words_has_no_terms_and_says_why(tmp_path):
    db = tmp_path / "demo.db"
    build(db=db, stopwords="english")
    with RetrievalClient(db=db) as client:
        with client.snapshot() as snap:
            query = Query.parse("The of AND to", analyser_of(snap))
        assert (query.tokens, query.stopped) == ((), ("the", "of", "and", "to"))
        assert not query
        assert client.lexical.search("The of AND to", 10) == []
        assert client.search("the of and to", limit=10).ranked == []
        assert client.lexical.search("the attention", 5) == client.lexical.search("attention", 5)


def test_queries_are_analysed_as_the_index_was(tmp_path):
    db = tmp_path / "demo.db"
    build(db=db, **STEM_STOP)
    with RetrievalClient(db=db) as client:
        # a query parsed with the default analyser is analysed again for this index, so stems match
        assert client.lexical.search(Query.parse("attentions"), 5) == client.lexical.search("attention", 5) != []
        assert [e.paper.id for e in client.search("the attentions").ranked] == [
            e.paper.id for e in client.search("attention").ranked
        ]


def test_the_query_warnings_read_the_words_as_the_index_does(tmp_path):
    # on a stemmed index the words the search finds are not reported missing; on a stop-word index a stop word is
    # neither missing nor searched, and a query made only of them says so; a word in no paper is still named
    stemmed, stopped = tmp_path / "stem.db", tmp_path / "stop.db"
    build(db=stemmed, stem="english")
    build(db=stopped, stopwords="english")
    with RetrievalClient(db=stemmed) as client:
        found = client.search("attention sparsity", limit=3)
        assert found.ranked and found.warnings == []
        partly = client.search("zzzqx attentions", limit=3)
        assert partly.ranked and partly.warnings == ["no paper contains 'zzzqx': ranked on the other words"]
    with RetrievalClient(db=stopped) as client:
        assert client.search("the attention", limit=3).warnings == []
        only = client.search("the of", limit=3)
        assert only.ranked == [] and only.warnings == [
            "the query has only stop words ('the', 'of'), which this index does not search: nothing to rank"
        ]


def test_excluded_words_and_phrases_read_the_words_as_the_index_does(tmp_path):
    # On a stemmed index "-attention" must exclude the papers holding "attention" (the index holds "attent"), and
    # the phrase "attention sparsity" must find the paper that says it; on a stop-word index a phrase with a stop
    # word in it matches the text with the stop word dropped, as the index reads it. Before, the words of a
    # filter were analysed with the plain tokeniser: the exclusion excluded nothing and the phrase found nothing.
    records = [
        paper("a", "Sparse attention heads", "Attention sparsity in transformers.", year=2001),
        paper("b", "Sparsity of graphs", "Sparsity without the other word.", year=2002),
        paper("c", "Attentive readers", "Attention is studied; sparsity is not the point.", year=2003),
        paper("d", "Unrelated", "Nothing here.", year=2004),
    ]
    corpus = write_jsonl(tmp_path / "papers.jsonl", records)
    for options in ({}, {"stem": "english"}, {"stopwords": "english"}, STEM_STOP):
        db = tmp_path / f"{'-'.join(options.values()) or 'plain'}.db"
        build(db=db, source=corpus, **options)
        with RetrievalClient(db=db) as client:
            assert [e.paper.id for e in client.search("sparsity -attention").ranked] == ["b"], options
            assert [e.paper.id for e in client.search('"attention sparsity"').ranked] == ["a"], options
            if options.get("stopwords"):
                assert [e.paper.id for e in client.search('"the attention sparsity" -the').ranked] == ["a"]


def _tables(db):
    with sqlite3.connect(db) as conn:
        terms = set(conn.execute("SELECT term, df FROM doc_freq"))
        postings = set(
            conn.execute(
                "SELECT d.term, l.paper_id, t.count, l.length FROM term_freq AS t "
                "JOIN doc_freq AS d USING (term_id) JOIN doc_len AS l USING (doc_id)"
            )
        )
        lengths = set(conn.execute("SELECT paper_id, length FROM doc_len"))
        info = dict(conn.execute("SELECT key, value FROM index_info"))
    keys = ("n_papers", "total_tokens", "tokeniser", "tokeniser_version", "stemmer", "stopwords")
    return terms, postings, lengths, {key: info.get(key) for key in keys}


def _records():
    texts = [
        ('Schr\\"odinger black holes', "The Schrödinger equation of running strings."),
        ('Reissner-Nordstr\\"{o}m holes', "K\\\"ahler manifolds and the Poincar\\'e group are studied."),
        ("Kähler geometry", 'Poincaré and Schr{\\"o}dinger; the naïve models of Erd\\H{o}s.'),
        ("Strings", "The model of the strings is a model of the running holes."),
    ]
    return [paper(f"p{i}", title, abstract, year=2000 + i) for i, (title, abstract) in enumerate(texts * 3)]


def test_adds_use_the_index_analyser(tmp_path):
    records = _records()
    whole = write_jsonl(tmp_path / "whole.jsonl", records)
    first, rest = write_jsonl(tmp_path / "a.jsonl", records[:5]), write_jsonl(tmp_path / "b.jsonl", records[5:])
    build(db=tmp_path / "whole.db", source=whole, **STEM_STOP)
    build(db=tmp_path / "grown.db", source=first, **STEM_STOP)
    add(rest, db=tmp_path / "grown.db")
    assert _tables(tmp_path / "grown.db") == _tables(tmp_path / "whole.db")
    with sqlite3.connect(tmp_path / "grown.db") as conn:
        assert conn.execute("SELECT count(*) FROM doc_freq WHERE term IN ('the', 'of', 'running')").fetchone() == (0,)


_V1 = re.compile(r"[^\W_]+")


def _v1_words(text: str) -> list[bytes]:
    """The version-1 tokeniser: lowercase, then runs of alphanumerics (no folding)."""
    return [word.encode("utf-8") for word in _V1.findall(text.lower())]


def _v1_index(tmp_path, monkeypatch, records):
    """An index as version 1 wrote it: built with the old tokeniser, and saying so in index_info."""
    corpus = write_jsonl(tmp_path / "c.jsonl", records)
    db = tmp_path / "old.db"
    with monkeypatch.context() as patched:
        patched.setattr(bulk, "text_words", _v1_words)
        build(db=db, source=corpus, workers=0)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE index_info SET value = '1' WHERE key = 'tokeniser_version'")
        conn.execute("DELETE FROM index_info WHERE key IN ('stemmer', 'stopwords', 'seal')")  # none in version 1
        assert conn.execute("SELECT count(*) FROM doc_freq WHERE term IN ('schr', 'odinger')").fetchone() == (2,)
    return corpus, db


def test_a_version_1_index_is_refused_then_upgraded_into_a_fresh_build(tmp_path, monkeypatch, capsys):
    corpus, db = _v1_index(tmp_path, monkeypatch, _records())
    with sqlite3.connect(db) as conn:
        kept = {
            table: sorted(conn.execute(f"SELECT * FROM {table}"))
            for table in ("papers", "citations", "paper_authors", "field_sources")
        }
    before = db.read_bytes()
    with pytest.raises(SchemaVersionError, match=r"tokenised by unicode-alnum-lower v1.*`retrieval upgrade --db"):
        RetrievalClient(db=db)
    assert main(["search", "Schrödinger", "--db", str(db)]) == 1
    assert "retrieval upgrade" in capsys.readouterr().err
    assert db.read_bytes() == before  # a read never writes

    assert main(["upgrade", "--db", str(db), "--json"]) == 0  # the CLI says what it did
    shown = json.loads(capsys.readouterr().out)
    assert shown["reindexed_from_tokeniser"] == "1" and shown["from_revision"] == shown["to_revision"]
    assert shown["upgraded"] is True
    fresh = tmp_path / "fresh.db"
    build(db=fresh, source=corpus)
    assert _tables(db) == _tables(fresh)
    with sqlite3.connect(db) as conn:
        assert {table: sorted(conn.execute(f"SELECT * FROM {table}")) for table in kept} == kept
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    queries = ["Schrödinger", 'Schr\\"odinger', "schrodinger holes", "Kähler Poincaré", "the naive models"]
    with RetrievalClient(db=db) as upgraded, RetrievalClient(db=fresh) as built:
        for query in queries:
            assert upgraded.lexical.search(query, 10) == built.lexical.search(query, 10) != [], query
            ours = [(e.paper.id, round(e.final_score, 9)) for e in upgraded.search(query).ranked]
            assert ours == [(e.paper.id, round(e.final_score, 9)) for e in built.search(query).ranked]
        assert dict(upgraded.lexical.search("schrodinger", 20)).keys() == {"p0", "p2", "p4", "p6", "p8", "p10"}
    assert upgrade(db=db).reindexed is None  # the second time there is nothing to do
    assert main(["upgrade", "--db", str(db)]) == 0 and "nothing to do" in capsys.readouterr().out


def test_reindexing_keeps_the_analyser_an_index_records(tmp_path):
    """A re-index (what ``upgrade`` runs on its copy) analyses with the index's own stemmer and stop words."""
    from retrieval.store.sqlite.reindex import reindex

    corpus = write_jsonl(tmp_path / "c.jsonl", _records())
    db, fresh = tmp_path / "x.db", tmp_path / "fresh.db"
    build(db=db, source=corpus, **STEM_STOP)
    build(db=fresh, source=corpus, **STEM_STOP)
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        reindex(conn)
    finally:
        conn.close()
    assert _tables(db) == _tables(fresh)


def test_the_cli_builds_with_stemming_and_stop_words_and_stats_shows_them(tmp_path, capsys):
    db = str(tmp_path / "x.db")
    assert main(["build", "--stem", "english", "--stopwords", "english", "--db", db]) == 0
    capsys.readouterr()
    assert main(["stats", "--db", db, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["stemmer"], shown["stopwords"], shown["tokeniser"]) == (
        "english",
        "english",
        "unicode-alnum-lower v2",
    )
    with pytest.raises(SystemExit) as usage:  # a usage error, as an unknown --stopwords is (it was exit 1)
        main(["build", "--stem", "klingon", "--db", db])
    assert usage.value.code == 2 and "argument --stem: no stemmer 'klingon'" in capsys.readouterr().err
    with RetrievalClient(db=db) as client:  # the failed build left the index as it was
        assert client.stats.analyser == Analyser(**STEM_STOP)


# -- what a stemmed index counts, warns of and advises, in the user's words --------------------------------------


@pytest.fixture(scope="module")
def stemmed_demo(tmp_path_factory):
    db = tmp_path_factory.mktemp("stemmed") / "demo.db"
    build(db=db, **STEM_STOP)
    return db


def _wide_words(n: int) -> list[str]:
    """``n`` distinct words whose plurals stem to them: 2n distinct words, n stems."""
    letters = "bcdfgklmnprstvz"
    out = []
    for i in range(n):
        a, b, c = letters[i % 15], letters[(i // 15) % 15], letters[(i // 225) % 15]
        out.append(f"{a}a{b}e{c}an")
    return out


def test_the_term_limit_counts_the_terms_the_index_searches(stemmed_demo, tmp_path, capsys):
    """2,400 distinct words that a stemmed index reads as 1,200 terms are a query it takes (the limit is 2,000
    distinct terms, counted as the index analyses text); the plain tokens would be too many."""
    from retrieval.search.query import MAX_QUERY_TERMS

    words = _wide_words(1200)
    text = "attention " + " ".join(w + s for w in words for s in ("", "s"))
    assert len(set(Analyser().analyse(text))) > MAX_QUERY_TERMS  # as written
    assert len(set(Analyser(**STEM_STOP).analyse(text))) <= MAX_QUERY_TERMS  # as the index reads it
    with RetrievalClient(db=stemmed_demo) as client:
        assert client.search(text).ranked
    assert main(["search", text, "--db", str(stemmed_demo)]) == 0
    plain = tmp_path / "plain.db"
    build(db=plain)
    with pytest.raises(SystemExit) as usage:  # on a plain index the same words are too many: a usage error
        main(["search", text, "--db", str(plain)])
    assert usage.value.code == 2 and "distinct terms" in capsys.readouterr().err


def test_similar_reads_the_first_terms_of_seeds_too_wide_for_one_query(stemmed_demo, monkeypatch):
    """The seeds' texts together may hold more distinct terms than a query may: the user gave papers, so the text
    signal reads their first terms instead of refusing."""
    from retrieval.search import similar
    from retrieval.search.similar import seeds_query

    monkeypatch.setattr(similar, "MAX_QUERY_TERMS", 5)
    analyser = Analyser(**STEM_STOP)
    query = seeds_query("the sparse attention of routed transformers with blocks and gates", analyser)
    assert list(query.qtf) == ["spars", "attent", "rout", "transform", "block"]
    with RetrievalClient(db=stemmed_demo) as client:
        assert client.similar(["p001", "p002", "p003"]).ranked


def test_a_filter_of_stop_words_only_is_said_not_dropped_silently(stemmed_demo):
    with RetrievalClient(db=stemmed_demo) as client:
        plain = client.search("attention")
        for query, named in [("attention -the", "-the"), ('attention -"of the"', '-"of the"'),
                             ('"the" attention', '"the"')]:  # fmt: skip
            result = client.search(query)
            assert result.matched == plain.matched, query
            assert any(w.startswith(f"{named}: only stop words") for w in result.warnings), result.warnings
        assert not any("only stop words" in w for w in client.search("attention -sparsity").warnings)


def test_the_filters_a_result_shows_are_the_words_as_written(stemmed_demo, capsys):
    """A stemmed index filters by stems ("attent"); the result (``--json``, the API, the query log) shows the
    words the user wrote, in the lists they filter as, and not the stop words that filter nothing."""
    query = 'Transformers -attention -"routing layers" "sparse blocks" -the -block-sparse'
    with RetrievalClient(db=stemmed_demo) as client:
        result = client.search(query)
    assert result.filters.exclude == ("attent",)  # what it filters by
    assert result.filters.to_dict() == {
        "year": None,
        "authors": [],
        "exclude": ["attention"],
        "phrases": ["sparse blocks"],
        "exclude_phrases": ["routing layers", "block-sparse"],
    }
    assert result.query == "Transformers sparse blocks"  # the searched text, its spaces collapsed
    assert main(["search", query, "--db", str(stemmed_demo), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["filters"] == result.filters.to_dict()


def test_explain_on_stop_words_alone_names_them(stemmed_demo, capsys):
    """``explain`` said "neither the query nor a sub-query matches a paper" where ``search`` names the stop words."""
    from retrieval.evidence import explain

    with RetrievalClient(db=stemmed_demo) as client:
        run = explain(client, "the of and")
        unknown = explain(client, "zzzqqq")
    assert run.health.status == unknown.health.status == "no-seeds"
    assert run.health.warnings[0].startswith("no seed: the query has only stop words ('the', 'of', 'and')")
    assert unknown.health.warnings[0].startswith("no seed: neither the query")  # a word in no paper: no such reason
    assert main(["explain", "the of and", "--db", str(stemmed_demo)]) == 0
    assert "only stop words" in capsys.readouterr().out


def _copy(source, target):
    target.write_bytes(source.read_bytes())
    return target


def test_the_advice_at_open_and_in_the_postings_checks_keeps_the_index_analysis(stemmed_demo, tmp_path, monkeypatch):
    """The checks made as an index opens (its seal) and as a search reads the postings BLOBs named a plain
    ``retrieval build``, which would rebuild a stemmed index unstemmed."""
    from retrieval.search import blobs
    from retrieval.store.database import build_command

    rebuild = "--stem english --stopwords english`"
    sealed = _copy(stemmed_demo, tmp_path / "sealed.db")
    with sqlite3.connect(sealed) as conn:
        conn.execute("UPDATE index_info SET value = CAST(value AS INTEGER) - 1 WHERE key = 'n_papers'")
    with pytest.raises(NotAnIndexError) as opened:
        RetrievalClient(db=sealed).search("attention")
    assert f"`retrieval build --db {sealed} {rebuild}" in str(opened.value)

    monkeypatch.setattr(blobs, "CACHE", blobs._Cache(0))
    chunks = _copy(stemmed_demo, tmp_path / "chunks.db")
    with sqlite3.connect(chunks) as conn:
        conn.execute("UPDATE postings SET max_count = max_count - 1 WHERE max_count > 1")
    with RetrievalClient(db=chunks) as client:
        client.lexical.path = "blobs"
        with pytest.raises(NotAnIndexError) as read:
            client.lexical.search("attention sparsity retrieval passage index perplexity", 10, exhaustive=False)
    assert f"`retrieval build --db {chunks} {rebuild}" in str(read.value)

    info = {"stemmer": "", "stopwords": "", "semantic_model": "wordllama"}  # vectors are rebuilt when asked for
    assert build_command("x.db", info) == "retrieval build --db x.db --from FILE --semantic wordllama"
    assert build_command("x.db", {**info, "source": "my corpus.jsonl"}).startswith(
        "retrieval build --db x.db --from 'my corpus.jsonl' --semantic"
    )


def test_rebuild_advice_keeps_the_index_analysis(stemmed_demo, tmp_path, capsys):
    db = tmp_path / "damaged.db"
    db.write_bytes(stemmed_demo.read_bytes())
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE doc_len SET length = length + 1 WHERE doc_id = 1")
    assert main(["check", "--db", str(db)]) == 1
    out = capsys.readouterr().out
    assert f"rebuild it with `retrieval build --db {db} --stem english --stopwords english`" in out
    with sqlite3.connect(db) as conn:  # a stored text changed by hand: a remove names the term and the same build
        conn.execute("UPDATE doc_len SET length = length - 1 WHERE doc_id = 1")
        conn.execute("UPDATE papers SET title = 'changed entirely' WHERE id = 'p001'")
    assert main(["remove", "p001", "--db", str(db)]) == 1
    err = capsys.readouterr().err
    assert "holds the term 'chang'" in err and "--stem english --stopwords english`" in err
