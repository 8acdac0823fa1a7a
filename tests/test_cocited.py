"""The default ranking's co-citation feedback (``retrieval.search.cocited``), against its definition computed in
plain Python from the papers' reference lists."""

from __future__ import annotations

import json
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval import RetrievalClient, RetrievalConfig
from retrieval.bm25 import SCORE_DECIMALS
from retrieval.corpus.paper import Paper
from retrieval.interfaces.cli import main
from retrieval.search import adjacency, cocited
from retrieval.search.blend import RankedPaper
from retrieval.store.sql.executor import Trace
from tests.helpers import BACKENDS, index_on

TOPICS = [[f"t{k}w{i}" for i in range(12)] for k in range(3)]
QUERIES = ["t0w1 t0w2 t0w3", "t1w4 t1w5", "t2w0 t2w7 t2w9 t0w1", "t0w5 t1w5 t2w5"]


def _papers(seed: int = 3, n: int = 300) -> list[Paper]:
    """Three topics; each paper cites earlier papers, mostly of its topic (a dense graph, as citation corpora
    have), and some references outside the corpus."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        topic = i % 3
        pool = [j for j in range(i) if j % 3 == topic or rng.random() < 0.1]
        refs = [f"p{j:03d}" for j in rng.sample(pool, min(len(pool), rng.randint(2, 9)))]
        refs += [f"ext{rng.randint(0, 9)}" for _ in range(rng.randint(0, 2))]
        words = rng.choices(TOPICS[topic], k=rng.randint(3, 20)) + rng.choices(TOPICS[(topic + 1) % 3], k=2)
        out.append(Paper(f"p{i:03d}", " ".join(words[:3]), " ".join(words[3:]), 1990 + i // 10,
                         [f"Author {i % 5}"], list(dict.fromkeys(refs)), source="t"))  # fmt: skip
    return out


@pytest.fixture(scope="module", params=BACKENDS)
def corpus(request):
    """The synthetic corpus on each backend in turn: (index, id -> paper)."""
    papers = _papers()
    return index_on(request, request.param, papers, "cocited"), {p.id: p for p in papers}


def _citers(papers: dict[str, Paper], excluded: frozenset[str] = frozenset()) -> dict[str, set[str]]:
    """Each id's citing papers (not ``excluded``), from the reference lists."""
    out: dict[str, set[str]] = {}
    for pid, p in papers.items():
        if pid in excluded:
            continue
        for ref in p.references:
            if ref != pid:
                out.setdefault(ref, set()).add(pid)
    return out


def _definition(first, together, cited, weight):
    """The definition, in plain Python: the first ranking's top 100 re-scored by co-citation with its top 10 (from
    the pairs' counts ``together`` and the in-degrees ``cited``), then the rest; and the papers raised. None for
    the ranking where none is (the ranking stays as it was)."""
    top, rest = first[: cocited.DEPTH], first[cocited.DEPTH :]
    sums, reached = dict.fromkeys((pid for pid, _ in top), 0.0), set()
    if len(top) < 2 or top[0][1] <= top[-1][1]:
        return None, reached
    last, spread = top[-1][1], top[0][1] - top[-1][1]
    for source, score in top[: cocited.FEEDBACK]:
        for pid in sorted(sums):
            n = together.get((source, pid), 0)
            if n and score > last:
                reached.add(pid)
                inn = max(1, cited.get(source, 0)) * max(1, cited.get(pid, 0))
                sums[pid] += (score - last) / spread * n / math.sqrt(inn)
    best = max(sums.values())
    if best <= 0:
        return None, reached
    scored = [(pid, score + weight * spread * sums[pid] / best) for pid, score in top]
    scored.sort(key=lambda h: (-round(h[1], SCORE_DECIMALS), h[0]))
    return scored + rest, reached


def _expected(papers, first: list[tuple[str, float]], weight: float, cap: int = cocited.MAX_CITED) -> list:
    """The definition with the pairs' counts and in-degrees taken from the papers' reference lists; a paper cited
    more than ``cap`` times counts no pair."""
    citers = _citers(papers)
    ids = [pid for pid, _ in first[: cocited.DEPTH] if len(citers.get(pid, ())) <= cap]
    together = {(f, p): len(citers.get(f, set()) & citers.get(p, set())) for f in ids for p in ids if f != p}
    want, _ = _definition(first, together, {pid: len(c) for pid, c in citers.items()}, weight)
    return first if want is None else want  # no pair at all: the ranking as it was


def _ranking(client, query, cfg):
    return [(e.paper.id, e.final_score) for e in client.search(query, cfg, limit=None, full=False).ranked]


def _same(got, want):
    assert [pid for pid, _ in got] == [pid for pid, _ in want]
    for (_, a), (_, b) in zip(got, want, strict=True):
        assert a == pytest.approx(b, abs=1e-9)


def test_the_default_reranks_its_top_by_co_citation_with_its_best_as_defined(corpus):
    """Each query's default ranking is its ranking without the feedback, the top 100 re-scored as the definition
    says; the feedback moves papers on every query, and each entry says what it added."""
    db, papers = corpus
    moved = 0
    with RetrievalClient(db) as client:
        for query in QUERIES:
            first = _ranking(client, query, RetrievalConfig(w_cocited=0.0))
            assert len(first) > cocited.DEPTH  # the rest keeps its places below
            want = _expected(papers, first, 0.3)
            result = client.search(query, limit=None, full=False)
            _same([(e.paper.id, e.final_score) for e in result.ranked], want)
            moved += [pid for pid, _ in want] != [pid for pid, _ in first]
            base = dict(first)
            for entry in result.ranked[: cocited.DEPTH]:
                assert entry.final_score == pytest.approx(base[entry.paper.id] + entry.cocited, abs=1e-9)
                assert entry.to_dict()["cocited"] == entry.cocited
            assert all(e.cocited is None for e in result.ranked[cocited.DEPTH :])
            assert result.expansion["cocited"]["raised"] > 0
            _same(_ranking(client, query, RetrievalConfig(w_cocited=0.6)), _expected(papers, first, 0.6))
    assert moved == len(QUERIES)


def test_papers_cited_more_than_the_cap_neither_vouch_nor_are_vouched_for(corpus, monkeypatch):
    """Above ``MAX_CITED`` a paper takes no part: the ranking is the definition's with that cap, which differs
    from the uncapped one, and the statement is never given such a paper."""
    db, papers = corpus
    citers = _citers(papers)
    cap = sorted(len(c) for c in citers.values())[len(citers) // 2]  # the median in-degree: the cap bites
    monkeypatch.setattr(cocited, "MAX_CITED", cap)
    monkeypatch.setattr(adjacency, "GRAPH_RENT", 10**9)  # by statement, so what it is given is seen
    adjacency.GRAPHS.clear()
    trace = Trace()
    bitten = 0
    with RetrievalClient(db, tracer=trace) as client:
        for query in QUERIES:
            first = _ranking(client, query, RetrievalConfig(w_cocited=0.0))
            want = _expected(papers, first, 0.3, cap)
            _same(_ranking(client, query, RetrievalConfig()), want)
            bitten += [pid for pid, _ in want] != [pid for pid, _ in _expected(papers, first, 0.3, 10**9)]
            said = client.search(query, limit=None, full=False).expansion["cocited"]  # what --why and --json say
            top = [pid for pid, _ in first[: cocited.DEPTH]]
            assert said["left_out"] == sum(len(citers.get(pid, ())) > cap for pid in top) and said["max_cited"] == cap
    assert bitten > 0
    named = [s for s in trace.statements if s.name == cocited.COCITATIONS_STATEMENT]
    assert named
    for statement in named:
        for side in ("sources", "candidates"):
            assert all(len(citers.get(pid, ())) <= cap for pid in json.loads(statement.params[side]))


def test_the_feedback_is_in_the_why_and_its_contributions_sum_to_the_score(corpus):
    db, _ = corpus
    with RetrievalClient(db) as client:
        for entry in client.search(QUERIES[0], limit=10).ranked:
            if hasattr(entry, "contributions"):  # the learned ranking's entries
                assert sum(entry.contributions.values()) == pytest.approx(entry.final_score, abs=1e-9)
                assert entry.contributions["cocited"] == entry.cocited
            else:
                assert f"+ cocited {entry.cocited:.3f} =" in entry.why()


@pytest.mark.parametrize("cfg", [RetrievalConfig(ranking="learned"), RetrievalConfig(ranking="expansion"),
                                 RetrievalConfig(max_hops=2), RetrievalConfig.lesson()])  # fmt: skip
def test_rankings_asked_for_by_name_or_by_their_settings_take_no_second_look(corpus, cfg):
    db, _ = corpus
    with RetrievalClient(db) as client:
        for query in QUERIES:
            result = client.search(query, cfg, limit=None, full=False)
            assert "cocited" not in result.expansion
            assert all(e.cocited is None for e in result.ranked)
            assert _ranking(client, query, cfg.replace(w_cocited=0.9)) == _ranking(client, query, cfg)


def test_the_kept_graph_counts_what_the_statement_counts_and_ranks_the_same(corpus, monkeypatch):
    """Once the process keeps the citation graph, the counts come from its arrays (no statement runs) and every
    ranking and score is the statement's."""
    db, papers = corpus
    sources = ["p003", "p010", "p011", "p299", "ext1", "nowhere"]
    candidates = sorted(papers)
    with RetrievalClient(db) as client:
        by_statement = [_ranking(client, q, RetrievalConfig()) for q in QUERIES]
        with client.snapshot() as snap:
            counted = cocited.cocitations(snap, sources, candidates)
            graph = adjacency.Graph.read(snap)
    citers = _citers(papers)
    want = {(s, p): len(citers.get(s, set()) & citers[p]) for s in sources for p in citers if p in papers and p != s}
    assert counted == {pair: n for pair, n in want.items() if n}
    assert graph.cocitations(sources, candidates) == counted
    monkeypatch.setattr(adjacency, "GRAPH_RENT", 1e-9)
    trace = Trace()
    with RetrievalClient(db, tracer=trace) as client:
        _ranking(client, QUERIES[0], RetrievalConfig())  # reads the graph after the answer
        trace.statements.clear()
        assert [_ranking(client, q, RetrievalConfig()) for q in QUERIES] == by_statement
    assert cocited.COCITATIONS_STATEMENT not in {s.name for s in trace.statements}


def test_a_citing_paper_left_out_counts_for_nothing(corpus):
    """Under an exclusion (the time-honest protocol's newer papers) the pairs are counted over the citing papers
    left in, by the statement (the kept graph would count them all)."""
    db, papers = corpus
    excluded = frozenset(f"p{i:03d}" for i in range(200, 300))
    sources, candidates = ["p003", "p010", "p030"], sorted(papers)
    citers = _citers(papers, excluded)
    want = {(s, p): len(citers.get(s, set()) & citers[p]) for s in sources for p in citers if p in papers and p != s}
    with RetrievalClient(db) as client, client.snapshot() as snap:
        assert cocited.cocitations(snap, sources, candidates, excluded) == {k: n for k, n in want.items() if n}
        everyone = cocited.cocitations(snap, sources, candidates)
        assert everyone != cocited.cocitations(snap, sources, candidates, excluded)


def test_the_cli_sets_the_weight_and_checks_it(corpus, capsys):
    db, _ = corpus
    assert main(["search", "--db", str(db), QUERIES[0], "--json", "--limit", "5", "--cocited-weight", "0"]) == 0
    off = json.loads(capsys.readouterr().out)
    assert main(["search", "--db", str(db), QUERIES[0], "--json", "--limit", "5"]) == 0
    on = json.loads(capsys.readouterr().out)
    assert all("cocited" not in r for r in off["results"])
    assert any(r["cocited"] > 0 for r in on["results"])
    for bad in ("nan", "-1", "heavy"):
        with pytest.raises(SystemExit) as exit_:
            main(["search", "--db", str(db), QUERIES[0], "--cocited-weight", bad])
        assert exit_.value.code == 2
        assert "--cocited-weight" in capsys.readouterr().err


def test_why_says_the_feedback_ran_and_what_it_added(corpus, capsys):
    db, _ = corpus
    assert main(["search", "--db", str(db), QUERIES[0], "--why", "--limit", "5"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the summary wraps to the terminal's width
    assert "co-citation feedback: the top 100 re-ranked by how often they are cited beside the top 10 (weight" in out
    assert "cocited +" in out or "+ cocited " in out  # the learned model's contributions, or the policy's terms
    assert "took no part" not in out  # no paper of this corpus is cited more than MAX_CITED times
    assert main(["search", "--db", str(db), QUERIES[0], "--why", "--limit", "5", "--cocited-weight", "0"]) == 0
    assert "co-citation feedback" not in capsys.readouterr().out


def test_why_says_how_many_papers_were_cited_too_often_to_take_part(corpus, capsys, monkeypatch):
    db, papers = corpus
    monkeypatch.setattr(cocited, "MAX_CITED", 2)
    adjacency.GRAPHS.clear()
    with RetrievalClient(db) as client:
        top = [e.paper.id for e in client.search(QUERIES[0], RetrievalConfig(w_cocited=0.0), limit=None).ranked]
    hubs = sum(len(c) > 2 for pid, c in _citers(papers).items() if pid in top[: cocited.DEPTH])
    assert hubs > 0
    assert main(["search", "--db", str(db), QUERIES[0], "--why", "--limit", "5"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"; {hubs} papers cited more than 2 times took no part: cited beside everything)" in out


def test_postgresql_may_hash_join_the_two_sides():
    """Read sessions on PostgreSQL plan joins as lookups; the two sides' thousands of citation rows, compared pair
    by pair, took seconds a search (1.7 s p50 on hep-th titles against 55 ms hashed: bench/cocited.py)."""
    from retrieval.store.sql.dialect import HASH_JOINS

    assert {cocited.COCITATIONS_SQL, cocited.COCITATIONS_SQL_EXCLUDING} <= HASH_JOINS


def _entries(scores: list[float]) -> list[RankedPaper]:
    papers = [Paper(f"q{i:03d}", "t", "", 2000, [], [], source="t") for i in range(len(scores))]
    ranked = [RankedPaper(p, 0.0, None, 0.0, s) for p, s in zip(papers, scores, strict=True)]
    ranked.sort(key=lambda e: (-round(e.final_score, SCORE_DECIMALS), e.paper.id))
    return ranked


@settings(max_examples=200, deadline=None)
@given(
    scores=st.lists(st.floats(0, 10, allow_nan=False), min_size=0, max_size=130),
    counts=st.dictionaries(st.tuples(st.integers(0, 12), st.integers(0, 129)), st.integers(1, 6), max_size=80),
    degrees=st.dictionaries(st.integers(0, 129), st.integers(0, 50), max_size=60),
    weight=st.sampled_from([0.3, 1.0, 2.5]),
)
def test_apply_is_the_definition_and_only_raises_the_top(scores, counts, degrees, weight):
    """``cocited.apply`` on any ranking, pair counts and in-degrees equals the plain definition (``_expected``'s
    arithmetic), raises only the top ``DEPTH``, never lowers a score, and leaves the rest in place."""
    ranked = _entries(scores)
    ids = [e.paper.id for e in ranked]
    if not ids:
        assert cocited.apply(ranked, {}, {}, weight) == ([], 0)
        return
    together = {
        (ids[f % len(ids)], ids[p % len(ids)]): n for (f, p), n in counts.items() if f % len(ids) != p % len(ids)
    }
    cited = {ids[i % len(ids)]: d for i, d in degrees.items()}
    before = [(e.paper.id, e.final_score) for e in ranked]
    top, rest = before[: cocited.DEPTH], before[cocited.DEPTH :]
    want, reached = _definition(before, together, cited, weight)
    after, raised = cocited.apply(ranked, together, cited, weight)
    if want is None:
        assert [(e.paper.id, e.final_score) for e in after] == before and raised == 0
        assert all(e.cocited is None for e in after)
        return
    want = want[: len(top)]
    got = [(e.paper.id, e.final_score) for e in after]
    assert [pid for pid, _ in got] == [pid for pid, _ in want] + [pid for pid, _ in rest]
    assert got[len(top) :] == rest
    for (_, a), (_, b) in zip(got[: len(want)], want, strict=True):
        assert a == pytest.approx(b, rel=1e-12, abs=1e-12)
    assert raised == len(reached)
    old = dict(before)
    assert all(e.final_score >= old[e.paper.id] and e.cocited is not None for e in after[: len(top)])
