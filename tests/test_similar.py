"""``similar`` and ``show`` against plain-Python computations over the same corpus."""

from __future__ import annotations

import json
import math
import random
from collections import Counter

import pytest

from retrieval import RetrievalClient
from retrieval.commands import build
from retrieval.corpus.paper import Paper
from retrieval.errors import ConfigError, InputError
from retrieval.interfaces.cli import main
from retrieval.interfaces.output.export import export
from retrieval.search import adjacency
from retrieval.search import similar as similar_module
from retrieval.store.sql.executor import Trace
from retrieval.validate import LIMITS
from tests.helpers import BACKENDS, index_on
from tests.reference import ReferenceBM25

WORDS = [f"w{i}" for i in range(30)]


def _papers(seed: int = 11, n: int = 120) -> list[Paper]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        refs = [f"p{j:03d}" for j in rng.sample(range(n), rng.randint(0, 8)) if j != i]
        refs += [f"ext{rng.randint(0, 20)}" for _ in range(rng.randint(0, 2))]  # references outside the corpus
        words = rng.choices(WORDS, k=rng.randint(4, 25))
        out.append(Paper(f"p{i:03d}", " ".join(words[:3]), " ".join(words[3:]), 1990 + i % 15,
                         [f"Author {i % 7}"], list(dict.fromkeys(refs)), source="t"))  # fmt: skip
    return out


@pytest.fixture(scope="module", params=BACKENDS)
def corpus(request):
    """The synthetic corpus on each backend in turn."""
    papers = _papers()
    return index_on(request, request.param, papers, "similar"), {p.id: p for p in papers}


def _edges(papers: dict) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Each id's references and citing papers, from the records' lists alone (each reference, and each citing
    paper a record names, is an edge; either end may be outside the corpus)."""
    refs: dict[str, set[str]] = {pid: set() for pid in papers}
    for pid, p in papers.items():
        refs[pid] |= set(p.references)
        for citer in p.citations:
            refs.setdefault(citer, set()).add(pid)
    cited_by: dict[str, set[str]] = {}
    for pid, rs in refs.items():
        for r in rs:
            cited_by.setdefault(r, set()).add(pid)
    return refs, cited_by


def _read(cited_by: dict[str, set[str]], seed: str, fanout: int) -> list[str]:
    """The citing papers of ``seed`` co-citation reads: every k-th by id, ``k = ceil(n / fanout)``."""
    citers = sorted(cited_by.get(seed, set()))
    return citers[:: -(-len(citers) // fanout) if fanout and len(citers) > fanout else 1]


def _expected(papers: dict, seeds: list[str], exclude=(), fanout=similar_module.COCITATION_FANOUT, passes=None):
    """The module's definition, from the records' lists alone (each reference, and each citing paper a record
    names, is an edge): co-citation over every k-th citing paper by id, ``k = ceil(n / fanout)``, scaled up
    (``cocitation_estimate``: at most either paper's citing papers), when a seed has more than ``fanout``.
    ``passes``: the filter, a predicate on a paper (the text signal's depth counts only those that pass)."""
    refs, cited_by = _edges(papers)
    read = {s: set(_read(cited_by, s, fanout)) for s in seeds}
    text = " ".join(f"{papers[s].title} {papers[s].abstract}" for s in seeds)
    bm25 = ReferenceBM25({pid: p.text for pid, p in papers.items()}).scores(text)
    skip = set(seeds) | set(exclude)
    if passes is not None:
        skip |= {pid for pid, p in papers.items() if not passes(p)}
    ranked = sorted(bm25.items(), key=lambda kv: (-round(kv[1], 10), kv[0]))
    text_scores = dict([(pid, s) for pid, s in ranked if pid not in skip][: similar_module.TEXT_DEPTH])
    best = max(text_scores.values(), default=0.0)
    out = {}
    for c in papers:
        if c in skip:
            continue
        ins = {p: cited_by.get(p, set()) for p in (*seeds, c)}
        co = 0.0
        for s in seeds:
            n = len(read[s] & ins[c])
            if n and len(read[s]) < len(ins[s]):
                n = min(n * len(ins[s]) / len(read[s]), len(ins[c]), len(ins[s]))
            co += n / math.sqrt(max(1, len(ins[s])) * max(1, len(ins[c])))
        cp = sum(len(refs[s] & refs[c]) / math.sqrt(max(1, len(refs[s])) * max(1, len(refs[c]))) for s in seeds)
        tx = text_scores.get(c, 0.0) / best if best else 0.0
        score = (co / len(seeds) + cp / len(seeds) + tx) / 3.0
        if co or cp or c in text_scores:
            out[c] = score
    return sorted(out.items(), key=lambda kv: (-round(kv[1], 10), kv[0]))


@pytest.mark.parametrize("seeds", [["p000"], ["p005"], ["p010", "p011", "p012"]])
def test_similar_equals_the_definition(corpus, seeds):
    db, papers = corpus
    expected = _expected(papers, seeds)
    with RetrievalClient(db) as client:
        result = client.similar(seeds, limit=25)
    assert [e.paper.id for e in result.ranked] == [pid for pid, _ in expected[:25]]
    assert all(math.isclose(e.score, s, rel_tol=1e-9) for e, (_, s) in zip(result.ranked, expected, strict=False))
    assert result.matched == len(expected)
    assert not set(seeds) & {e.paper.id for e in result.ranked}


@pytest.mark.parametrize("seeds", [["p000"], ["p005"], ["p010", "p011", "p012"], ["p003", "p007"]])
def test_similar_from_the_kept_citation_graph_equals_the_definition(corpus, seeds, monkeypatch):
    """The same signals counted from the kept arrays (references outside the corpus among the nodes): the
    definition's ranking, its scores, its reasons and its count."""
    db, papers = corpus
    monkeypatch.setattr(adjacency, "GRAPH_RENT", 1e-9)  # the first call's rows are a graph's worth
    expected = _expected(papers, seeds)
    asks = ({}, {"year": "1995-2001"}, {"sort": "citations"}, {"offset": 7, "limit": 5})
    with RetrievalClient(db) as client:
        by_statements = [client.similar(seeds, **({"limit": 25} | ask)) for ask in asks]
    trace = Trace()
    with RetrievalClient(db, tracer=trace) as client:  # the process keeps the graph: another request reads none
        kept = [client.similar(seeds, **({"limit": 25} | ask)) for ask in asks]
    assert not _graph_statements(trace)
    assert [e.paper.id for e in kept[0].ranked] == [pid for pid, _ in expected[:25]]
    assert all(math.isclose(e.score, s, rel_tol=1e-9) for e, (_, s) in zip(kept[0].ranked, expected, strict=False))
    assert kept[0].matched == len(expected)
    for a, b in zip(kept, by_statements, strict=True):  # filtered and sorted too: what the statements answer
        assert [(e.paper.id, e.score, e.together, e.shared) for e in a.ranked] == [
            (e.paper.id, e.score, e.together, e.shared) for e in b.ranked
        ]
        assert a.matched == b.matched


@pytest.fixture(scope="module", params=BACKENDS)
def lone_corpus(request):
    """A small synthetic corpus with one paper that neither cites nor is cited, on each backend in turn."""
    papers = [*_papers(seed=5, n=40), Paper("lone", "w1 w2 w3", "w4 w5 w6 w7 w1", 2000, ["A"], [], source="t")]
    return index_on(request, request.param, papers, "similarlone"), {p.id: p for p in papers}


def test_a_seed_without_citations_is_ranked_by_its_text_and_says_so(lone_corpus):
    """A seed with no citation rows has no list of citing papers, co-cited papers or papers sharing references
    (each a subquery per seed, whose empty answer is ``[]`` on SQLite and NULL on PostgreSQL): ranked by text
    alone, with the warning, and beside a cited seed the definition's ranking all the same."""
    db, papers = lone_corpus
    cited = next(
        pid for pid, p in sorted(papers.items()) if p.references and any(pid in q.references for q in papers.values())
    )
    with RetrievalClient(db) as client:
        alone = client.similar("lone", limit=25)
        both = client.similar(["lone", cited], limit=25)
    assert alone.warnings == ["the seeds have no citations in the index: ranked by text similarity only"]
    assert alone.ranked and all(not e.together and not e.shared for e in alone.ranked)
    assert not both.warnings
    for result, seeds in ((alone, ["lone"]), (both, ["lone", cited])):
        expected = _expected(papers, seeds)
        assert [e.paper.id for e in result.ranked] == [pid for pid, _ in expected[:25]]
        assert all(math.isclose(e.score, s, rel_tol=1e-9) for e, (_, s) in zip(result.ranked, expected, strict=False))
        assert result.matched == len(expected)


def test_excluding_ids_of_no_paper_changes_nothing_and_real_ones_only_leave(corpus, monkeypatch):
    """The text signal read ``TEXT_DEPTH + len(exclude)`` deep: 50 ids of no paper let other papers into it, which
    changed their scores and raised ``matched`` (20,000 real ids raised it by half on hep-th)."""
    db, papers = corpus
    monkeypatch.setattr(similar_module, "TEXT_DEPTH", 10)  # fewer than the corpus's papers, as on a real index
    with RetrievalClient(db) as client:
        plain = client.similar("p003", limit=200)
        fake = client.similar("p003", limit=200, exclude=[f"nope{i}" for i in range(50)])
        gone = [e.paper.id for e in plain.ranked[-5:]]  # the last ones: the others' normalisation is unchanged
        fewer = client.similar("p003", limit=200, exclude=gone)
        with pytest.raises(ConfigError, match="at most 10,000 paper ids"):
            client.similar("p003", exclude=[f"x{i}" for i in range(10_001)])
    as_scores = lambda r: [(e.paper.id, round(e.score, 12)) for e in r.ranked]  # noqa: E731
    assert as_scores(fake) == as_scores(plain) and fake.matched == plain.matched
    assert fewer.matched <= plain.matched and not set(gone) & {e.paper.id for e in fewer.ranked}
    for result, exclude in ((plain, ()), (fake, ()), (fewer, gone)):  # each the definition's, at that depth
        expected = _expected(papers, ["p003"], exclude)
        assert [e.paper.id for e in result.ranked] == [pid for pid, _ in expected[:200]]
        assert result.matched == len(expected)


def test_a_filtered_similar_reads_the_text_signal_among_the_papers_that_pass(corpus, monkeypatch):
    """The text signal was the unfiltered top ``TEXT_DEPTH`` with the failing papers dropped: a paper of the asked
    years whose text was just below that depth had no text signal at all (on hep-th, a seed's two best papers by
    Witten ranked 637th and 663rd unfiltered and were not found with ``--author Witten``)."""
    db, papers = corpus
    monkeypatch.setattr(similar_module, "TEXT_DEPTH", 5)  # fewer than the papers that pass, as on a real index
    with RetrievalClient(db) as client:
        for year, passes in (("1992-1993", lambda p: 1992 <= p.year <= 1993), ("2003-", lambda p: p.year >= 2003)):
            result = client.similar("p003", limit=200, year=year)
            expected = _expected(papers, ["p003"], passes=passes)
            assert [e.paper.id for e in result.ranked] == [pid for pid, _ in expected]
            assert [round(e.score, 9) for e in result.ranked] == [round(score, 9) for _, score in expected]
            assert result.matched == len(expected)
            bm25 = ReferenceBM25({pid: p.text for pid, p in papers.items()}).scores(papers["p003"].text)
            ordered = sorted(bm25.items(), key=lambda kv: (-round(kv[1], 10), kv[0]))
            by_text = [pid for pid, _ in ordered if pid != "p003"]
            among = [pid for pid in by_text if passes(papers[pid])][:5]
            assert set(among) - set(by_text[:5])  # papers the unfiltered depth leaves without a text signal


def test_similar_excludes_pages_filters_and_explains(corpus):
    db, papers = corpus
    with RetrievalClient(db) as client:
        first = client.similar("p003", limit=10)
        mine = [e.paper.id for e in first.ranked[:4]]
        without = client.similar("p003", limit=10, exclude=mine)
        page = client.similar("p003", limit=5, offset=5)
        recent = client.similar("p003", limit=10, year="2000-")
    assert [e.paper.id for e in without.ranked][:6] == [e.paper.id for e in first.ranked][4:10]
    # a reading list read twice (the ids repeated past the cap): the same papers, counted once
    with RetrievalClient(db) as client:
        again = client.similar("p003", limit=10, exclude=mine * (LIMITS["exclude"] // len(mine) + 1))
    assert [e.paper.id for e in again.ranked] == [e.paper.id for e in without.ranked]
    assert [e.paper.id for e in page.ranked] == [e.paper.id for e in first.ranked[5:10]]
    assert recent.ranked and all(e.paper.year >= 2000 for e in recent.ranked)
    top = first.ranked[0]
    assert top.paper.authors and "text" in top.why() and top.to_dict()["why"] == top.why()
    # each result carries its abstract, as a search's does: its BibTeX and RIS exports lacked it
    assert all(e.paper.abstract == papers[e.paper.id].abstract for e in first.ranked)
    assert top.to_dict()["abstract"] == papers[top.paper.id].abstract
    assert f"AB  - {papers[top.paper.id].abstract}" in export(first.ranked, "ris")
    if top.together:
        assert "co-cited" in top.why()


def test_similar_refuses_unknown_ids_and_bad_limits(corpus):
    db, _ = corpus
    with RetrievalClient(db) as client:
        with pytest.raises(InputError, match="'nope'"):
            client.similar(["p001", "nope"])
        with pytest.raises(ConfigError):
            client.similar("p001", limit=0)
        with pytest.raises(ConfigError):
            client.similar([])


def test_show_gives_references_and_citing_papers_with_titles(corpus):
    db, papers = corpus
    pid = next(p for p in papers if any(r.startswith("ext") for r in papers[p].references))
    citing = sorted(q for q, p in papers.items() if pid in p.references)
    with RetrievalClient(db) as client:
        page = client.show(pid)
        with pytest.raises(InputError, match="no paper 'nope'"):
            client.show("nope")
    data = page.to_dict()
    assert sorted(r["id"] for r in data["references"]) == sorted(papers[pid].references)
    assert sorted(c["id"] for c in data["citations"]) == citing
    for link in data["references"] + data["citations"]:
        if link["id"] in papers:
            assert link["in_corpus"] and link["title"] == papers[link["id"]].title and link["authors"]
        else:
            assert not link["in_corpus"] and link["title"] is None


HUB = "hub"
HUB_WORDS = [f"h{i}" for i in range(12)]
CROWD_WORDS = [f"x{i}" for i in range(40)]


def _hub_papers(seed: int = 5) -> list[Paper]:
    """A hub whose neighbourhood is mostly noise: ``hub`` cites 12 of 40 classics that the crowd (400 papers,
    3 classics each) cites too, so coupling reaches most of the corpus; 130 papers cite it (co-citation reads 65
    of them), each with two close papers and two of the crowd. 15 close papers share most of its references and
    its words (no one else has them). A classic names three citing papers outside the corpus (candidates that
    are not results), and the hub two references outside it."""
    rng = random.Random(seed)
    classics = [f"k{i:02d}" for i in range(40)]
    close = [f"c{i:02d}" for i in range(15)]
    crowd = [f"x{i:03d}" for i in range(400)]

    def words(vocabulary: list[str], k: int) -> str:
        return " ".join(rng.choices(vocabulary, k=k))

    out = [Paper(HUB, " ".join(HUB_WORDS[:4]), " ".join(HUB_WORDS), 1998, ["Hub Author"], [*classics[:12], "e1", "e2"])]
    for i, pid in enumerate(classics):
        out.append(Paper(pid, words(CROWD_WORDS, 3), words(CROWD_WORDS, 10), 1990, ["Old Author"],
                         citations=["o1", "o2", "o3"] if i == 0 else []))  # fmt: skip
    for pid in close:
        refs = rng.sample(classics[:12], rng.randint(6, 12)) + rng.sample(classics[12:], 2)
        out.append(Paper(pid, words(HUB_WORDS, 3), words(HUB_WORDS, 4) + " " + words(CROWD_WORDS, 10), 1999,
                         ["Close Author"], refs))  # fmt: skip
    for pid in crowd:
        out.append(Paper(pid, words(CROWD_WORDS, 3), words(CROWD_WORDS, 12), 2000, ["Crowd Author"],
                         rng.sample(classics, 3)))  # fmt: skip
    for j in range(130):
        refs = [HUB, *rng.sample(close, 2), *rng.sample(crowd, 2)]
        out.append(Paper(f"y{j:03d}", words(CROWD_WORDS, 3), words(CROWD_WORDS, 12), 2001, ["Citing Author"], refs))
    return out


@pytest.fixture(scope="module", params=BACKENDS)
def hub_corpus(request):
    """The hub corpus on each backend in turn."""
    papers = _hub_papers()
    return index_on(request, request.param, papers, "similarhub"), {p.id: p for p in papers}


@pytest.mark.parametrize(("seeds", "offset"), [([HUB], 0), ([HUB], 10), ([HUB], 35), ([HUB, "c03"], 0)])
def test_a_hub_is_ranked_exactly_from_the_few_candidates_that_can_reach_the_page(hub_corpus, seeds, offset):
    """Only the candidates whose bound reaches the page are read in full (titles, degrees); the page, its scores
    and ``matched`` are the definition's all the same."""
    db, papers = hub_corpus
    expected = _expected(papers, seeds)
    trace = Trace()
    with RetrievalClient(db, tracer=trace) as client:
        result = client.similar(seeds, limit=10, offset=offset)
    assert [e.paper.id for e in result.ranked] == [pid for pid, _ in expected[offset : offset + 10]]
    page = expected[offset : offset + 10]
    assert all(math.isclose(e.score, s, rel_tol=1e-9) for e, (_, s) in zip(result.ranked, page, strict=True))
    assert result.matched == len(expected) > 300
    assert result.cocitation_read == {HUB: {"citing": 130, "read": 65}}
    scored = [pid for st in trace.statements if st.name == "similar: the candidates"
              for pid in json.loads(st.params["paper_ids"])]  # fmt: skip
    assert len(scored) == len(set(scored)) <= max(60, 3 * (offset + 10)), len(scored)
    assert not {"o1", "o2", "o3"} & {e.paper.id for e in result.ranked}


def test_a_hubs_co_citation_and_coupling_come_back_as_a_list_per_seed(hub_corpus):
    """Co-citation joins only the sampled citing papers (every second of the hub's 130), and both graph signals
    come back as one row per seed, whose ids Python counts, not a row per candidate."""
    db, papers = hub_corpus
    trace = Trace()
    with RetrievalClient(db, tracer=trace) as client:
        client.similar(HUB)
        with client.snapshot() as snap:
            coupled = snap.rows("coupling", similar_module.COUPLED_SQL, {"seeds": json.dumps([HUB, "c03"])})
    [cocited] = [st for st in trace.statements if st.name == "similar: co-cited papers"]
    citing = sorted(pid for pid, p in papers.items() if HUB in p.references)
    assert json.loads(cocited.params["sampled"]) == {HUB: citing[::2]}
    assert sorted(seed for seed, _ in coupled) == ["c03", HUB]
    counts = {seed: Counter(json.loads(ids)) for seed, ids in coupled}
    expected = Counter(pid for pid, p in papers.items() for ref in p.references if ref in papers[HUB].references)
    expected.update(["o1", "o2", "o3"])  # they cite k00, which the hub cites
    assert counts[HUB] == expected - Counter({HUB: len(papers[HUB].references)})


def _candidates(papers: dict, seeds: list[str], fanout=similar_module.COCITATION_FANOUT) -> tuple[set, set]:
    """Every id with a signal, papers of the corpus or not (co-cited by a citing paper read, citing a seed's
    reference, or among the text's best), and those of the text, from the records' lists alone."""
    refs, cited_by = _edges(papers)
    out = set()
    for s in seeds:
        out |= {r for citer in _read(cited_by, s, fanout) for r in refs[citer]} | {
            c for r in refs[s] for c in cited_by[r]
        }
    text = " ".join(f"{papers[s].title} {papers[s].abstract}" for s in seeds)
    bm25 = ReferenceBM25({pid: p.text for pid, p in papers.items()}).scores(text)
    top = sorted(bm25.items(), key=lambda kv: (-round(kv[1], 10), kv[0]))[: similar_module.TEXT_DEPTH + len(seeds)]
    texts = {pid for pid, _ in top} - set(seeds)
    return (out | texts) - set(seeds), texts


def test_a_hubs_count_of_papers_not_scored_is_estimated_from_an_even_sample_and_said_to_be(
    hub_corpus, monkeypatch, capsys
):
    """Past ``MATCHED_EXACT_MAX`` candidates not scored (and not known papers from the text pass), ``matched``
    looks up every k-th of them by id (``MATCHED_SAMPLE``) and scales the share of papers up, as ``matched_exact``
    false says, and the CLI as "about"; within the limit it is the exact count."""
    db, papers = hub_corpus
    monkeypatch.setattr(similar_module, "MATCHED_EXACT_MAX", 50)
    monkeypatch.setattr(similar_module, "MATCHED_SAMPLE", 40)
    trace = Trace()
    with RetrievalClient(db, tracer=trace) as client:
        result = client.similar(HUB, limit=10)
    everything, texts = _candidates(papers, [HUB])
    scored = {pid for st in trace.statements if st.name == "similar: the candidates"
              for pid in json.loads(st.params["paper_ids"])}  # fmt: skip
    unknown = sorted(everything - scored - texts)
    step = -(-len(unknown) // 40)
    sample = unknown[::step]
    assert len(unknown) > 300 and step > 1
    [looked_up] = [json.loads(st.params["paper_ids"]) for st in trace.statements
                   if st.name == "similar: candidates not scored"]  # fmt: skip
    assert looked_up == sample
    estimate = round(sum(pid in papers for pid in sample) * len(unknown) / len(sample))
    assert result.matched == len(scored & papers.keys()) + len(texts - scored) + estimate
    assert not result.matched_exact and result.to_dict()["matched_exact"] is False
    exact = len(_expected(papers, [HUB]))
    assert abs(result.matched - exact) <= 0.05 * exact
    assert main(["similar", HUB, "--db", str(db)]) == 0
    assert f"of about {result.matched:,} papers like {HUB}" in capsys.readouterr().out
    monkeypatch.setattr(similar_module, "MATCHED_EXACT_MAX", len(unknown))
    with RetrievalClient(db) as client:
        again = client.similar(HUB, limit=10)
    assert again.matched == exact and again.matched_exact


def test_a_hubs_similar_papers_sorted_by_citations_score_every_candidate(hub_corpus):
    """Another order than relevance needs every candidate's score and citations: the page is the definition's."""
    db, papers = hub_corpus
    expected = _expected(papers, [HUB])
    cited = Counter(ref for p in papers.values() for ref in p.references)
    cited.update(pid for p in papers.values() for pid in [p.id] * len(p.citations))
    order = sorted(expected, key=lambda kv: -cited[kv[0]])  # stable: ties keep the relevance order
    with RetrievalClient(db) as client:
        result = client.similar(HUB, limit=15, sort="citations")
    assert [e.paper.id for e in result.ranked] == [pid for pid, _ in order[:15]]
    assert result.matched == len(expected)


def _graph_statements(trace: Trace) -> list[str]:
    """The names of ``similar``'s graph statements and the kept graph's reads, in the order they ran."""
    reads = (adjacency.CITATION_COUNT_STATEMENT, adjacency.CITATIONS_STATEMENT, adjacency.PAPERS_IN_GRAPH_STATEMENT)
    return [st.name for st in trace.statements if st.name.startswith("similar: ") and (
        st.name in reads or "cit" in st.name or "sharing" in st.name or "not scored" in st.name)]  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_process_keeps_the_citation_graph_after_a_graphs_worth_of_rows_and_ranks_as_the_statements_do(
    request, backend, monkeypatch
):
    """Once ``similar``'s statements have read ``GRAPH_RENT`` rows per paper at one index state, the process reads
    every citation once (in pages, after the answer) and counts the same signals from arrays: the same pages and
    scores as the definition, ``matched`` exact where the statements estimate it, no graph statement run; a write
    is a new state, read by statements again (its answer the new definition's); a budget too small keeps none."""
    from retrieval.config import resolve_db
    from retrieval.search import blobs
    from retrieval.store.writer import add_papers, remove_papers

    papers = {p.id: p for p in _hub_papers()}
    db = index_on(request, backend, list(papers.values()), "similarkept")
    target = resolve_db(db) if backend != "sqlite" else db
    monkeypatch.setattr(similar_module, "MATCHED_EXACT_MAX", 50)  # the statements estimate the hub's count
    monkeypatch.setattr(adjacency, "PAGE_ROWS", 500)

    def run(seeds, offset=0, limit=10):
        """One ``similar`` of a process that keeps asking: its page checked against the definition's."""
        trace = Trace()
        with RetrievalClient(db, tracer=trace) as client:
            result = client.similar(seeds, limit=limit, offset=offset)
        page = _expected(papers, seeds)[offset : offset + limit]
        assert [e.paper.id for e in result.ranked] == [pid for pid, _ in page], seeds
        assert all(math.isclose(e.score, s, rel_tol=1e-9) for e, (_, s) in zip(result.ranked, page, strict=True))
        return result, _graph_statements(trace)

    first, names = run([HUB])
    assert "similar: co-cited papers" in names and adjacency.CITATIONS_STATEMENT not in names
    assert not first.matched_exact
    # the rent: a graph's worth of rows, here what two calls on the hub read
    monkeypatch.setattr(adjacency, "GRAPH_RENT", 1.5 * adjacency.GRAPHS._paid[_generation(db)] / len(papers))
    _, names = run([HUB])
    assert adjacency.CITATIONS_STATEMENT in names, names
    edges = sum(map(len, _edges(papers)[0].values()))
    pages = names.count(adjacency.CITATIONS_STATEMENT)
    assert pages == edges // adjacency.PAGE_ROWS + 1 and names.index(adjacency.CITATION_COUNT_STATEMENT) > names.index(
        "similar: papers sharing references")  # fmt: skip
    for seeds, offset in (([HUB], 0), ([HUB], 35), ([HUB, "c03"], 0), (["c05"], 0), (["x007"], 3)):
        result, names = run(seeds, offset)
        assert names == [], names  # no graph statement, nothing estimated
        exact = len(_expected(papers, seeds))
        assert (result.matched, result.matched_exact) == (exact, True)
    newcomer = Paper("z-new", " ".join(HUB_WORDS[:3]), " ".join(HUB_WORDS), 2002, ["New Author"], [HUB, "k00", "k01"])
    add_papers([newcomer], target)
    papers[newcomer.id] = newcomer
    result, names = run([HUB])  # a new state: read by statements, and the new paper is among the answers
    assert "similar: co-cited papers" in names and "z-new" in {e.paper.id for e in run([HUB], limit=40)[0].ranked}
    remove_papers(["z-new"], target)
    del papers["z-new"]
    assert "similar: co-cited papers" in run([HUB])[1]
    adjacency.GRAPHS.clear()
    monkeypatch.setattr(adjacency, "GRAPH_RENT", 0.001)
    monkeypatch.setattr(blobs, "CACHE", blobs._Cache(4 * adjacency.EDGE_BYTES * edges))  # a quarter of it: too little
    for _ in range(3):
        _, names = run([HUB])
        assert "similar: co-cited papers" in names and adjacency.CITATIONS_STATEMENT not in names


def _generation(db) -> str:
    with RetrievalClient(db) as client:
        return client.stats.info["generation"]


def test_similar_with_nothing_to_show_says_so_in_the_table(demo_db, capsys):
    """A page past the end, or filters that let no paper through: one line that says which, exit 0 (it printed
    a traceback: the table's "no results" line asked the result for a search's metrics)."""
    with RetrievalClient(demo_db) as client:
        matched = client.similar("p001", limit=10).matched
    assert matched > 0
    cases = [
        (["--offset", "9000"], f"no papers like p001 past 9,000 (the list ends at {matched:,};"),
        (["--year", "2050"], "no papers like p001 pass the filters ("),
        (["--author", "Nobody Atall"], "no papers like p001 pass the filters ("),
    ]
    for extra, expected in cases:
        assert main(["similar", "p001", "--db", str(demo_db), *extra]) == 0
        out, err = capsys.readouterr()
        assert out.startswith(expected) and err == ""


def test_a_file_of_ids_saved_with_a_byte_order_mark_reads_its_first_id(tmp_path):
    # "\ufeffp001" was no paper (--from), or excluded nothing, silently (--exclude).
    from retrieval.commands import read_ids

    listed = tmp_path / "ids.txt"
    listed.write_bytes("\ufeffp001\np002  # the second\n\n".encode())
    assert read_ids(listed) == ["p001", "p002"]
    # a "#" inside an id is the id's (it cut "W2#3" to "W2"); a comment starts a line or follows a space
    listed.write_text("# my reading list\nW2#3\np#4\t# tab then note\n  #indented comment\np5 #\n")
    assert read_ids(listed) == ["W2#3", "p#4", "p5"]


def test_a_seed_with_citations_but_no_neighbour_is_not_said_to_have_none(tmp_path):
    """A cites B and C cites A, but no paper is cited beside A or shares its reference: the warning said "the
    seeds have no citations in the index"."""
    papers = [Paper("A", "gauge alpha", "gauge", 2000, [], ["B"], source="t"),
              Paper("B", "gauge beta", "gauge", 1999, [], [], source="t"),
              Paper("C", "gauge gamma", "gauge", 2001, [], ["A"], source="t")]  # fmt: skip
    db = tmp_path / "nosig.db"
    build(db=db, source=papers)
    with RetrievalClient(db) as client:
        result = client.similar("A")
    assert result.warnings == [
        "no paper is cited beside the seeds or shares a reference with them: ranked by text similarity only"
    ]
    assert {e.paper.id for e in result.ranked} == {"B", "C"}


def test_the_kept_graph_reads_any_numbers_and_leaves_out_the_rows_the_view_leaves_out(tmp_path, monkeypatch):
    """The kept graph reads the citations as numbers. Numbers renumbered by hand in both tables (negative, past
    2**40: an index ``check`` calls consistent) made it ask for terabytes or mix two ids up; a citation_links row
    whose number paper_keys lacks, or a text typed where a number belongs, failed every later call of the
    process. The view leaves such rows out of every statement, and the graph now does the same."""
    import sqlite3

    from retrieval.store.sqlite.build import build_index

    db = tmp_path / "numbers.db"
    build_index(_hub_papers(), db)
    with sqlite3.connect(db) as conn:
        keys = [key for (key,) in conn.execute("SELECT key FROM paper_keys ORDER BY key")]
        for old, new in ((keys[0], -5), (keys[1], -1), (keys[2], 2**40)):
            conn.execute("UPDATE paper_keys SET key = ? WHERE key = ?", (new, old))
            conn.execute("UPDATE citation_links SET citing_key = ? WHERE citing_key = ?", (new, old))
            conn.execute("UPDATE citation_links SET cited_key = ? WHERE cited_key = ?", (new, old))
        conn.execute("INSERT INTO citation_links VALUES (?, ?, 1, 0)", (keys[-1] + 1000, keys[5]))
        conn.execute("INSERT INTO citation_links VALUES ('abc', ?, 1, 0)", (keys[6],))
    asked = [[HUB], ["c03"], ["c05"], ["x007"], [HUB, "c03"]]

    def answers():
        trace = Trace()
        with RetrievalClient(db, tracer=trace) as client:
            got = [[(e.paper.id, round(e.score, 9)) for e in client.similar(s, limit=10).ranked] for s in asked]
        return got, _graph_statements(trace)

    adjacency.GRAPHS.clear()
    try:
        by_statements, names = answers()
        assert "similar: co-cited papers" in names
        monkeypatch.setattr(adjacency, "GRAPH_RENT", 0)  # the first call makes the graph due; it is read after
        answers()
        by_graph, names = answers()
        assert names == [], names  # answered from the kept graph
        assert by_graph == by_statements
    finally:
        adjacency.GRAPHS.clear()
