"""The time-honest protocol: on a generated corpus with years and (for some papers) days, no paper newer than the
query paper appears anywhere in a query's ranking, none is reached or walked through by the expansion, and the
relevant lists lose exactly the newer papers, each checked against a plain-Python computation."""

from __future__ import annotations

import json
import math
import random

import pytest

from retrieval import RetrievalClient, RetrievalConfig
from retrieval.commands import build
from retrieval.errors import ConfigError, InputError
from retrieval.eval import run_eval
from retrieval.eval.protocol import TIME_HONEST
from retrieval.eval.runner import prepare
from retrieval.eval.timehonest import Chronology, read_dates
from retrieval.search import expansion
from retrieval.search.cutoff import Exclusion, doc_ids
from tests.helpers import BACKENDS, write_jsonl
from tests.reference import relation_weights

pytest.importorskip("ir_measures", reason="the eval extra (ir-measures) is not installed")
pytest.importorskip("matplotlib", reason="the eval extra (matplotlib) is not installed")

TOPICS = ("quark gluon plasma", "neural network pruning", "citation graph walk", "protein folding energy")
PER_TOPIC = 12
HONEST_MODES = ["bm25", "policy", "rel-references", "rel-all", "policy-2hop", "rm3", "policy-rm3", "learned-cv", "auto"]


def pid(t: int, i: int) -> str:
    return f"t{t}p{i:02d}"


def records_and_dates(seed: int = 3) -> tuple[list[dict], dict[str, str]]:
    """Paper i of a topic is from 1995 + i // 2 (two papers a year); even papers have a day, odd ones only the
    year. Each paper cites a few papers of its topic, older and newer (newer ones as revised versions do)."""
    rng = random.Random(seed)
    records, dates = [], {}
    for t, words in enumerate(TOPICS):
        for i in range(PER_TOPIC):
            year = 1995 + i // 2
            others = [pid(t, j) for j in range(PER_TOPIC) if j != i]
            refs = sorted(rng.sample(others, 4)) + ([pid((t + 1) % len(TOPICS), i)] if i % 3 == 0 else [])
            records.append(
                {
                    "id": pid(t, i),
                    "title": f"{words.title()} study {i}",
                    "abstract": f"We examine {words} with method m{t}x{i} and {rng.choice(TOPICS)}.",
                    "year": year,
                    "authors": [],
                    "references": refs,
                }
            )
            if i % 2 == 0:
                dates[pid(t, i)] = f"{year}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    return records, dates


def queries_of(records: list[dict]) -> list[dict]:
    by_id = {r["id"]: r for r in records}
    out = []
    for t in range(len(TOPICS)):
        for i in (6, 8, 9):
            paper = by_id[pid(t, i)]
            out.append(
                {"qid": paper["id"], "query": f"{paper['title']}. {paper['abstract']}", "relevant": paper["references"]}
            )
    return out


def newer_than(pid_: str, qid: str, years: dict, dates: dict) -> bool:
    """The reference rule, written from the protocol's definition: by day when both have one, else by year."""
    if pid_ in dates and qid in dates:
        return dates[pid_] > dates[qid]
    return years[pid_] > years[qid]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    base = tmp_path_factory.mktemp("time-honest")
    records, dates = records_and_dates()
    corpus = write_jsonl(base / "papers.jsonl", records)
    queries = write_jsonl(base / "queries.jsonl", queries_of(records))
    (base / "dates.tsv").write_text("".join(f"{k}\t{v}\n" for k, v in sorted(dates.items())), encoding="utf-8")
    return base, corpus, queries, records, dates


@pytest.fixture(scope="module")
def honest_run(files):
    base, corpus, queries, _, _ = files
    report = run_eval(corpus, queries, base / "out", cache_dir=base / "cache", modes=HONEST_MODES, protocol=TIME_HONEST)
    return base / "out", report


def test_no_newer_paper_appears_in_any_ranking(files, honest_run):
    _, _, _, records, dates = files
    out, report = honest_run
    years = {r["id"]: r["year"] for r in records}
    qids = {q["qid"] for q in queries_of(records)}
    seen = 0
    for mode in HONEST_MODES:
        ranked: dict[str, list[str]] = {}
        for line in (out / f"run.{mode}.trec").read_text().splitlines():
            qid, _, doc, *_ = line.split()
            ranked.setdefault(qid, []).append(doc)
        assert ranked, mode
        for qid, docs in ranked.items():
            leaked = [d for d in docs if newer_than(d, qid, years, dates)]
            assert leaked == [], (mode, qid, leaked)
            assert not set(docs) & qids
            seen += len(docs)
    assert seen > 0
    # and the same queries under the citation protocol do rank newer papers: the exclusion is what removed them
    citation = run_eval(files[1], files[2], out.parent / "citation", cache_dir=out.parent / "cache", modes=["policy"])
    assert citation.protocol["kind"] == "citation"
    leaked = 0
    for line in (out.parent / "citation" / "run.policy.trec").read_text().splitlines():
        qid, _, doc, *_ = line.split()
        leaked += newer_than(doc, qid, years, dates)
    assert leaked > 0


def test_relevant_lists_lose_exactly_the_newer_papers(files, honest_run):
    _, corpus, queries, records, dates = files
    _, report = honest_run
    years = {r["id"]: r["year"] for r in records}
    qids = {q["qid"] for q in queries_of(records)}
    evalset = prepare(corpus, queries, TIME_HONEST, None).evalset
    expected, dropped = {}, 0
    for q in queries_of(records):
        kept = {r for r in q["relevant"] if r not in qids}
        newer = {r for r in kept if newer_than(r, q["qid"], years, dates)}
        dropped += len(newer)
        if kept - newer:
            expected[q["qid"]] = kept - newer
    assert {q.qid: set(q.relevant) for q in evalset.queries} == expected
    assert dropped > 0 and evalset.relevant_newer == dropped
    assert report.protocol["relevant_newer_than_query_dropped"] == dropped
    assert report.protocol["dates_file"].endswith("dates.tsv")


def test_the_chronology_matches_the_pairwise_rule(files):
    _, _, _, records, dates = files
    years = {r["id"]: r["year"] for r in records}
    clock = Chronology(years, dates)
    for qid in years:
        assert clock.newer(qid) == {p for p in years if newer_than(p, qid, years, dates)}
        assert all(clock.is_newer(p, qid) == newer_than(p, qid, years, dates) for p in years)
    by_year = Chronology(years)
    assert by_year.newer(pid(0, 6)) == {p for p, y in years.items() if y > years[pid(0, 6)]}


@pytest.fixture(scope="module", params=BACKENDS)
def whole_index(request, files):
    """The whole generated corpus (no protocol) indexed on each backend in turn."""
    base, corpus, _, _, _ = files
    db = base / "whole.db" if request.param == "sqlite" else request.getfixturevalue("pg_database")("honest")
    build(db=db, source=corpus)
    return db


@pytest.mark.parametrize("relation", ["references", "citing", "cocitation", "coupling"])
def test_the_walk_neither_reaches_nor_crosses_an_excluded_paper(files, whole_index, relation):
    _, corpus, _, records, _ = files
    db = whole_index
    refs = {r["id"]: r["references"] for r in records}
    excluded = frozenset(p for p in refs if int(p[-2:]) >= 8)  # the four newest papers of each topic
    kept = {p: [r for r in rs if r not in excluded] for p, rs in refs.items() if p not in excluded}
    with RetrievalClient(db=db) as client, client.snapshot() as snap:
        for source in (pid(0, 2), pid(1, 5), pid(2, 7)):
            params = {"sources": json.dumps([source]), "fanout": 100, "max_neighbours": -1}
            rows = snap.rows(
                "test", expansion.relation_sql_excluding(relation), {**params, "excluded": json.dumps(sorted(excluded))}
            )
            got = {p: w for _, p, w in rows}
            assert got == relation_weights(kept, source, relation)
            everything = {p: w for _, p, w in snap.rows("test", expansion.relation_sql(relation), params)}
            assert everything == relation_weights(refs, source, relation)
        exclusion = Exclusion.make(excluded, doc_ids(snap), snap.stats.n_papers)
    assert exclusion.passing.count == len(refs) - len(excluded)


def test_the_learned_ranking_counts_no_excluded_paper_or_citation(files, whole_index):
    # the learned ranking under an exclusion: no excluded candidate, seed or voter, and in-degrees that count only
    # the citations of papers left in (a plain count over the records)
    _, _, _, records, _ = files
    refs = {r["id"]: r["references"] for r in records}
    excluded = frozenset(p for p in refs if int(p[-2:]) >= 8)
    cited_by = {p: sum(1 for q, rs in refs.items() if p in rs and q not in excluded) for p in refs}
    text = f"{TOPICS[1]} {TOPICS[2]} method"
    with RetrievalClient(db=whole_index) as client:
        with client.snapshot() as snap:
            exclusion = Exclusion.make(excluded, doc_ids(snap), snap.stats.n_papers)
        hits = [(p, s) for p, s in client.lexical.search(text, 100) if p not in excluded]
        for ranking in ("learned", "auto"):
            result = client.rank(
                text, hits, RetrievalConfig(ranking=ranking), limit=None, full=False, exclude=exclusion
            )
            assert result.ranked and not {e.paper.id for e in result.ranked} & excluded
            for entry in result.ranked:
                if "in_degree" in getattr(entry, "features", {}):
                    assert entry.features["in_degree"] == pytest.approx(math.log1p(cited_by[entry.paper.id]))
        whole = client.rank(text, hits, RetrievalConfig(ranking="learned"), limit=None, full=False)
    # without the exclusion the newer papers' citations count, and some of them are candidates
    assert any(e.features["in_degree"] > math.log1p(cited_by[e.paper.id]) + 1e-12 for e in whole.ranked)


def test_training_under_the_time_honest_protocol_sees_no_newer_paper(files, tmp_path):
    # `retrieval train --protocol time-honest`: every query's candidates leave its newer papers out, as the eval's
    from retrieval.eval.judged import extract

    _, corpus, queries, records, dates = files
    years = {r["id"]: r["year"] for r in records}
    honest = extract(corpus, queries, cache_dir=tmp_path / "cache", protocol=TIME_HONEST)
    citation = extract(corpus, queries, cache_dir=tmp_path / "cache", protocol="citation")
    assert honest.queries and len(honest.queries) == len(citation.queries)
    for q in honest.queries:
        assert not [p for p in q.ids if newer_than(p, q.qid, years, dates)], q.qid
    # the citation protocol's candidates do include newer papers: the two feature caches are not one
    assert any(newer_than(p, q.qid, years, dates) for q in citation.queries for p in q.ids)


def test_modes_that_cannot_honour_it_are_refused(files, tmp_path):
    _, corpus, queries, _, _ = files
    with pytest.raises(ConfigError, match="blend-1hop"):
        run_eval(corpus, queries, tmp_path / "out", cache_dir=tmp_path / "cache", modes=["bm25", "blend-1hop"],
                 protocol=TIME_HONEST)  # fmt: skip


def test_without_modes_it_runs_every_mode_that_can_honour_it(files, tmp_path):
    """Without --modes the default was every mode, and the protocol refused the 18 that cannot leave newer papers
    out: the command as the README gave it failed."""
    from retrieval.eval.modes import MODES

    _, corpus, queries, _, _ = files
    report = run_eval(corpus, queries, tmp_path / "out", cache_dir=tmp_path / "cache", protocol=TIME_HONEST,
                      limit_queries=2, jobs=1)  # fmt: skip
    honest = [name for name, mode in MODES.items() if getattr(mode, "honours_exclusion", False)]
    assert honest and len(honest) < len(MODES)
    assert list(report.modes) == honest


def test_a_bad_dates_file_names_its_line(files, tmp_path):
    _, corpus, queries, _, _ = files
    bad = tmp_path / "dates.tsv"
    bad.write_text("t0p00\t1995-01-02\nt0p01 1995\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"dates.tsv:2"):
        read_dates(bad)
    with pytest.raises(InputError, match="no dates file"):
        prepare(corpus, queries, TIME_HONEST, None, tmp_path / "missing.tsv")
    # A byte order mark was kept in the first id, so that paper went undated and stayed among the relevant; a
    # date no calendar has, or an id dated twice (the last line won), was taken.
    marked = tmp_path / "marked.tsv"
    marked.write_text("\ufefft0p00\t1995-01-02\nt0p01\t1995-01-03\n", encoding="utf-8")
    assert read_dates(marked) == {"t0p00": "1995-01-02", "t0p01": "1995-01-03"}
    for text, said in (
        ("t0p00\t1995-01-02\nt0p01\t2000-13-45\n", r"dates.tsv:2: '2000-13-45' is no date"),
        ("t0p00\t1995-02-29\n", r"dates.tsv:1: '1995-02-29' is no date"),
        ("t0p00\t1995-01-02\n\nt0p00\t1996-01-02\n", r"dates.tsv:3: 't0p00' is dated again \(first on line 1\)"),
    ):
        bad.write_text(text, encoding="utf-8")
        with pytest.raises(InputError, match=said):
            read_dates(bad)


def test_an_empty_dates_file_or_dates_under_another_protocol_is_refused(files, tmp_path):
    base, corpus, queries, _, _ = files
    empty = tmp_path / "empty.tsv"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(InputError, match="holds no dates"):  # every query compared by year, silently, before
        prepare(corpus, queries, TIME_HONEST, None, empty)
    with pytest.raises(ConfigError, match="--dates applies to the time-honest protocol, and this run's is citation"):
        prepare(corpus, queries, "auto", None, base / "dates.tsv")  # ignored before
    assert prepare(corpus, queries, TIME_HONEST, None, base / "dates.tsv").evalset.chronology is not None


def test_dates_under_a_protocol_named_otherwise_are_a_usage_error(files, tmp_path, capsys):
    """``--protocol judged --dates FILE`` exited 1, as a runtime error: the command line contradicts itself."""
    from retrieval.interfaces.cli import main

    base, corpus, queries, _, _ = files
    with pytest.raises(SystemExit) as usage:
        main(["eval", "--corpus", str(corpus), "--queries", str(queries), "--protocol", "judged",
              "--dates", str(base / "dates.tsv"), "--out", str(tmp_path / "out")])  # fmt: skip
    assert usage.value.code == 2
    assert "--dates applies to the time-honest protocol, not --protocol judged" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_judged_queries_numbered_like_papers_are_told_to_take_the_judged_protocol(tmp_path):
    """CACM's queries are numbered 1, 2, ... as its papers are: the time-honest protocol read them as query papers
    and said only that no relevant paper was left; the message now says what the queries are and what to use."""
    from tests.helpers import shared_corpus

    corpus = shared_corpus("cacm")
    queries = corpus.parent / "queries-dev.jsonl"
    with pytest.raises(InputError) as caught:
        prepare(corpus, queries, TIME_HONEST, None)
    message = str(caught.value)
    assert "no query's text starts with its paper's title" in message and "--protocol judged" in message
    assert prepare(corpus, queries, "auto", None).evalset.kind == "judged"
    # Asked for by name, the citation protocol runs, and says what it removed and why that may be wrong.
    cited = prepare(corpus, queries, "citation", None).evalset
    assert cited.kind == "citation" and len(cited.removed) == 26
    assert len(cited.warnings) == 1 and "26 papers removed by --protocol citation" in cited.warnings[0]
    assert cited.to_dict()["warnings"] == cited.warnings
    assert prepare(corpus, queries, "judged", None).evalset.warnings == []


def test_a_citation_set_draws_no_warning(tmp_path):
    from tests.helpers import shared_corpus

    corpus = shared_corpus("hepth")
    queries = tmp_path / "q.jsonl"
    lines = (corpus.parent / "queries-dev.jsonl").read_text(encoding="utf-8").splitlines()[:20]
    queries.write_text("\n".join(lines) + "\n", encoding="utf-8")
    evalset = prepare(corpus, queries, "citation", None).evalset
    assert evalset.kind == "citation" and len(evalset.queries) > 0 and evalset.warnings == []
