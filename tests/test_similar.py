"""``similar`` and ``show`` against plain-Python computations over the same corpus."""

from __future__ import annotations

import math
import random

import pytest

from retrieval import RetrievalClient
from retrieval.corpus.paper import Paper
from retrieval.errors import ConfigError, InputError
from retrieval.search import similar as similar_module
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


def _expected(papers: dict, seeds: list[str], exclude=()) -> list[tuple[str, float]]:
    """The module's definition, from the reference lists alone."""
    refs = {pid: set(p.references) for pid, p in papers.items()}
    cited_by: dict[str, set[str]] = {}
    for pid, rs in refs.items():
        for r in rs:
            cited_by.setdefault(r, set()).add(pid)
    text = " ".join(f"{papers[s].title} {papers[s].abstract}" for s in seeds)
    bm25 = ReferenceBM25({pid: p.text for pid, p in papers.items()}).scores(text)
    skip = set(seeds) | set(exclude)
    depth = similar_module.TEXT_DEPTH + len(seeds) + len(exclude)
    top = sorted(bm25.items(), key=lambda kv: (-round(kv[1], 10), kv[0]))[:depth]
    text_scores = {pid: s for pid, s in top if pid not in skip}
    best = max(text_scores.values(), default=0.0)
    out = {}
    for c in papers:
        if c in skip:
            continue
        ins = {p: cited_by.get(p, set()) for p in (*seeds, c)}
        co = sum(len(ins[s] & ins[c]) / math.sqrt(max(1, len(ins[s])) * max(1, len(ins[c]))) for s in seeds)
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


def test_similar_excludes_pages_filters_and_explains(corpus):
    db, papers = corpus
    with RetrievalClient(db) as client:
        first = client.similar("p003", limit=10)
        mine = [e.paper.id for e in first.ranked[:4]]
        without = client.similar("p003", limit=10, exclude=mine)
        page = client.similar("p003", limit=5, offset=5)
        recent = client.similar("p003", limit=10, year="2000-")
    assert [e.paper.id for e in without.ranked][:6] == [e.paper.id for e in first.ranked][4:10]
    assert [e.paper.id for e in page.ranked] == [e.paper.id for e in first.ranked[5:10]]
    assert recent.ranked and all(e.paper.year >= 2000 for e in recent.ranked)
    top = first.ranked[0]
    assert top.paper.authors and "text" in top.why() and top.to_dict()["why"] == top.why()
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
