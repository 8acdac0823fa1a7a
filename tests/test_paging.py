"""Paging over the whole ranking: a page at any offset is the slice of one longer ranking (the ranked candidates,
then the rest of the BM25 list in BM25 order), on each backend. The depth used to stop at the candidates (about
100 papers plus what the graph added): ``--offset 100`` said there was nothing more while thousands matched."""

from __future__ import annotations

import random

import pytest

from retrieval import RetrievalClient, build
from tests.helpers import BACKENDS, paper, write_jsonl

WORDS = [
    "field",
    "theory",
    "string",
    "gauge",
    "black",
    "hole",
    "entropy",
    "brane",
    "duality",
    "quantum",
    "gravity",
    "conformal",
    "lattice",
]


@pytest.fixture(scope="module", params=BACKENDS)
def deep(request, tmp_path_factory):
    """1,500 papers that share a few words, citing each other: a query matches most of them."""
    rng = random.Random(7)
    records = []
    for i in range(1500):
        words = rng.sample(WORDS, 4) + [f"w{rng.randrange(400)}" for _ in range(6)]
        refs = [f"p{j}" for j in rng.sample(range(i), min(i, 3))]
        records.append(paper(f"p{i}", " ".join(words[:4]), " ".join(words), 1990 + i % 20, refs))
    source = write_jsonl(tmp_path_factory.mktemp("deep") / "papers.jsonl", records)
    db = tmp_path_factory.mktemp("deep") / "d.db"
    if request.param == "postgresql":
        db = request.getfixturevalue("pg_database")("paging")
    build(db=db, source=source)
    return db


@pytest.mark.parametrize("query", ["field theory", "black hole entropy"])
def test_every_page_is_a_slice_of_one_longer_ranking(deep, query):
    with RetrievalClient(deep) as client:
        whole = [r.paper.id for r in client.search(query, limit=1000, full=False).ranked]
        matched = client.search(query, limit=1, full=False).matched
        # every matching paper, and the papers the citation graph added to the ranked candidates
        assert len(whole) >= min(matched, 1000) and len(set(whole)) == len(whole) and len(whole) > 300
        for offset in (0, 95, 100, 150, 300, len(whole) - 10):
            page = client.search(query, limit=10, offset=offset, full=False)
            assert [r.paper.id for r in page.ranked] == whole[offset : offset + 10], offset
        past = client.search(query, limit=5, offset=len(whole) - 5, full=False).ranked
        assert past and "past the" in past[-1].why() and past[-1].to_dict()["past_ranking"] is True


def test_paging_past_the_ranking_keeps_the_filters(deep):
    with RetrievalClient(deep) as client:
        whole = client.search("field theory", limit=1000, year="2000-2004", full=False)
        assert whole.ranked and all(2000 <= r.paper.year <= 2004 for r in whole.ranked)
        ids = [r.paper.id for r in whole.ranked]
        assert len(ids) >= whole.matched and len(ids) > 150
        page = client.search("field theory", limit=20, offset=130, year="2000-2004", full=False)
        assert [r.paper.id for r in page.ranked] == ids[130:150]
