"""The recursive CTE walk against a plain-Python BFS."""

import random

import pytest

from retrieval import ConfigError, RetrievalClient, RetrievalConfig, build_corpus, read_jsonl
from retrieval.commands import build
from tests.helpers import paper, write_jsonl
from tests.reference import bfs


@pytest.mark.parametrize("hops", [0, 1, 2])
@pytest.mark.parametrize("seeds", [["p001"], ["p003"], ["p006", "p050"], ["p100", "p021", "p041"]])
def test_demo_walk_matches_bfs(demo_db, seeds, hops):
    refs = {p.id: p.references for p in build_corpus()}
    with RetrievalClient(db=demo_db) as client:
        assert client.graph.expand(seeds, hops) == bfs(refs, seeds, hops)


def test_one_hop_reaches_references_and_citing_papers(demo_db):
    with RetrievalClient(db=demo_db) as client:
        reached = client.graph.expand(["p006"], 1)
    # p006 cites p001, p002 and p021 (the next topic's first paper); nothing cites p006
    assert reached == {"p006": 0, "p001": 1, "p002": 1, "p021": 1}


def test_real_graph_matches_bfs(cacm_db):
    db, corpus = cacm_db
    refs = {p.id: p.references for _, p in read_jsonl(corpus)}
    rng = random.Random(3)
    ids = sorted(refs)
    with RetrievalClient(db=db) as client:
        for _ in range(25):
            seeds = rng.sample(ids, rng.randint(1, 10))
            for hops in (1, 2):
                assert client.graph.expand(seeds, hops) == bfs(refs, seeds, hops)


@pytest.mark.parametrize("seed", range(6))
def test_random_graphs_with_dangling_references_match_bfs(tmp_path, seed):
    rng = random.Random(seed)
    n = rng.randint(5, 60)
    ids = [f"n{i:02d}" for i in range(n)]
    records = [paper(pid, references=rng.sample(ids + ["ghost1", "ghost2"], rng.randint(0, min(5, n)))) for pid in ids]
    build(db=tmp_path / "g.db", source=write_jsonl(tmp_path / "g.jsonl", records))
    refs = {r["id"]: r["references"] for r in records}
    with RetrievalClient(db=tmp_path / "g.db") as client:
        for _ in range(10):
            seeds = rng.sample(ids, rng.randint(1, 4))
            for hops in (0, 1, 2):
                assert client.graph.expand(seeds, hops) == bfs(refs, seeds, hops)


def test_hops_clamp_to_two_and_negative_is_an_error(demo_db):
    with RetrievalClient(db=demo_db) as client:
        assert client.graph.expand(["p006"], 5) == client.graph.expand(["p006"], 2)
        with pytest.raises(ConfigError, match="max_hops"):
            client.graph.expand(["p006"], -1)
    with pytest.warns(UserWarning, match="max_hops 7 is more than 2: clamped to 2"):
        assert RetrievalConfig(max_hops=7).max_hops == 2
    with pytest.raises(ConfigError, match="max_hops"):
        RetrievalConfig(max_hops=-1)


def test_unknown_seeds_and_no_seeds(demo_db):
    with RetrievalClient(db=demo_db) as client:
        assert client.graph.expand([], 2) == {}
        assert client.graph.expand(["nope"], 2) == {}
        assert client.graph.expand(["nope", "p001"], 0) == {"p001": 0}
