"""Expansion policies: each relation against a plain-Python computation, the gate, the caps, hub weighting."""

import json
import math

import pytest

from retrieval import ConfigError, RetrievalClient, RetrievalConfig
from retrieval.commands import build
from retrieval.search import adjacency, expansion, lexical
from retrieval.search.query import Query
from tests.helpers import paper, write_jsonl
from tests.reference import relation_weights

# A small graph, hand-built: the seed "s" cites a, b and the hub "h"; c and d cite s; d and c also cite x;
# e cites a; f cites a and b; eight papers h1..h8 cite the hub; "z" cites a paper outside the corpus.
REFS = {
    "s": ["a", "b", "h"],
    "a": [],
    "b": [],
    "h": [],
    "c": ["s", "x"],
    "d": ["s", "x", "b"],
    "x": [],
    "e": ["a"],
    "f": ["a", "b"],
    **{f"h{i}": ["h"] for i in range(1, 9)},
    "z": ["outside"],
}
HAND_CHECKED = {
    "references": {"a": 1, "b": 1, "h": 1},
    "citing": {"c": 1, "d": 1},
    "cocitation": {"x": 2, "b": 1},  # c and d cite x with s; d cites b with s
    "coupling": {"e": 1, "f": 2, "d": 1, **{f"h{i}": 1 for i in range(1, 9)}},  # shared a / b / h
}


@pytest.fixture(scope="module")
def graph_db(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("expansion")
    records = [paper(pid, title=f"paper {pid}", abstract="graph", references=refs) for pid, refs in REFS.items()]
    records[0]["title"] = "seed sparse routing"
    build(db=tmp / "g.db", source=write_jsonl(tmp / "g.jsonl", records))
    return tmp / "g.db"


def _neighbours(client, relation, source="s", cap=None, fanout=100):
    params = {"sources": f'["{source}"]', "fanout": fanout, "max_neighbours": -1 if cap is None else cap}
    with client.snapshot() as snap:
        return [(p, w) for _, p, w in snap.rows("test", expansion.relation_sql(relation), params)]


@pytest.mark.parametrize("relation", ["references", "citing", "cocitation", "coupling"])
def test_each_relation_matches_hand_checked_answers_and_the_reference(graph_db, relation):
    with RetrievalClient(db=graph_db) as client:
        got = dict(_neighbours(client, relation))
    assert got == HAND_CHECKED[relation]
    assert got == relation_weights(REFS, "s", relation)


@pytest.mark.parametrize("relation", ["cocitation", "coupling"])
def test_fanout_bounds_the_intermediate_papers(graph_db, relation):
    with RetrievalClient(db=graph_db) as client:
        got = dict(_neighbours(client, relation, fanout=1))
    assert got == relation_weights(REFS, "s", relation, fanout=1)
    assert len(got) < len(HAND_CHECKED[relation])


def test_per_node_cap_keeps_the_strongest_then_most_cited_then_by_id(graph_db):
    with RetrievalClient(db=graph_db) as client:
        capped = _neighbours(client, "coupling", cap=3)
        refs = _neighbours(client, "references", cap=2)
    assert capped[0] == ("f", 2)  # the heaviest first
    assert len(capped) == 3 and capped[1:] == [("d", 1), ("e", 1)]  # equal weight and citations: by id
    # h is cited 9 times; a (by s, e, f) and b (by s, d, f) 3 times each, so the tie goes to the id: a
    assert refs == [("h", 1), ("a", 1)]


def test_evidence_is_strength_times_weight_over_log_degree(graph_db):
    cfg = RetrievalConfig(expand="always", max_neighbours=None, max_candidates=None)
    with RetrievalClient(db=graph_db) as client:
        seeds = [("s", 2.0)]
        with client.snapshot() as snap:
            gate = expansion.decide(lexical.weigh(snap, Query.parse("seed")), seeds, cfg)
            grown = expansion.expand(snap, seeds, cfg, gate)
    degree_s = 3 + 2  # cites a, b, h; cited by c, d
    assert grown.evidence["a"] == pytest.approx(1.0 / math.log(math.e + degree_s))
    assert grown.distance == {"a": 1, "b": 1, "h": 1, "c": 1, "d": 1}
    assert grown.reaches["c"][0].source == "s" and grown.reaches["c"][0].relation == "citing"
    assert grown.to_dict()["new_per_relation"] == {"citing": 2, "references": 3}
    with RetrievalClient(db=graph_db) as client, client.snapshot() as snap:
        plain = expansion.expand(snap, seeds, RetrievalConfig(expand="always", hub_weighting=False), gate)
    assert plain.evidence["a"] == pytest.approx(1.0)


def test_max_candidates_and_max_neighbours_are_never_exceeded(graph_db):
    cfg = RetrievalConfig(expand="always", relations=("coupling",), max_neighbours=4, max_candidates=2)
    with RetrievalClient(db=graph_db) as client:
        result = client.search("seed sparse routing", cfg)
    added = [r for r in result.ranked if r.graph_distance not in (0, None)]
    assert len(added) <= 2
    assert result.expansion["dropped_by_candidate_cap"] == 2  # four kept per node, two of them dropped
    assert result.expansion["edges_per_relation"]["coupling"] <= 4


def test_two_hops_reach_further(graph_db):
    with RetrievalClient(db=graph_db) as client:
        one = client.search("seed sparse routing", RetrievalConfig(expand="always", top_k_lexical=1))
        two = client.search("seed sparse routing", RetrievalConfig(expand="always", top_k_lexical=1, max_hops=2))
    reached_one = {r.paper.id for r in one.ranked if r.graph_distance == 1}
    reached_two = {r.paper.id for r in two.ranked if r.graph_distance == 2}
    assert reached_one == {"a", "b", "h", "c", "d"}
    assert {"x", "e", "f"} <= reached_two and not reached_two & reached_one


def test_gate_fires_only_when_seeds_are_thin(demo_db):
    gate = RetrievalConfig(ranking="expansion", expand="auto")
    with RetrievalClient(db=demo_db) as client:
        strong = client.search("attention sparsity", gate)
        assert strong.expansion["gate"]["fired"] is False and strong.expansion["gate"]["survivors"] >= 3
        forced = client.search("attention sparsity", RetrievalConfig(expand="always"))
        assert forced.expansion["gate"]["fired"] is True
        # The policy's default expands always: the gate decides only when asked for (docs/eval/gate.md).
        default = client.search("attention sparsity", RetrievalConfig(ranking="expansion"))
        assert default.expansion["gate"]["fired"] is True and default.expansion["gate"]["mode"] == "always"
        # a long query that every paper matches only in part: no seed reaches 30% of its attainable score
        thin = client.search("attention retrieval adapter distillation harness " * 3, gate)
        assert thin.expansion["gate"]["fired"] is True
        off = client.search("attention retrieval adapter distillation harness", RetrievalConfig(expand="never"))
        assert off.expansion["gate"]["fired"] is False and off.expansion["candidates_added"] == 0


def test_seeds_without_edges_leave_the_lexical_ranking_unchanged(tmp_path):
    records = [paper(f"p{i}", title=f"graph walk {'deep ' * i}", year=2000) for i in range(6)]
    # No text vectors (a corpus without citations gets them by default where the model is installed): the
    # policy's blend is then BM25's ranking alone.
    build(db=tmp_path / "x.db", source=write_jsonl(tmp_path / "x.jsonl", records), semantic="none")
    with RetrievalClient(db=tmp_path / "x.db") as client:
        lexical = [pid for pid, _ in client.lexical.search("graph walk deep", 100)]
        for expand in ("always", "never", "auto"):
            result = client.search("graph walk deep", RetrievalConfig(expand=expand, relations=("references",
                                   "citing", "cocitation", "coupling")))  # fmt: skip
            assert [r.paper.id for r in result.ranked] == lexical
            assert result.expansion["candidates_added"] == 0


def test_policy_settings_are_checked():
    with pytest.raises(ConfigError, match="relations"):
        RetrievalConfig(relations=("friends",))
    with pytest.raises(ConfigError, match="expand"):
        RetrievalConfig(expand="sometimes")
    with pytest.raises(ConfigError, match="max_neighbours"):
        RetrievalConfig(max_neighbours=0)
    assert RetrievalConfig(relations=("citing", "citing")).relations == ("citing",)


@pytest.mark.parametrize("cap", [None, 2, 1, 0])
def test_the_kept_graph_gives_the_direct_relations_rows_and_degrees_as_the_statements_do(graph_db, cap):
    """``adjacency.Graph`` answers the references and citing papers of any sources (live edges only: a reference
    outside the corpus is none; the most cited first, then by id, at most ``cap``) and their degrees with the
    very rows of ``relation_sql`` and ``DEGREE_SQL``, in their order."""
    sources = sorted([*REFS, "outside", "nowhere"])  # in id order, as the callers give them
    params = {"sources": json.dumps(sources), "fanout": 0, "max_neighbours": -1 if cap is None else cap}
    with RetrievalClient(db=graph_db) as client, client.snapshot() as snap:
        graph = adjacency.Graph.read(snap)
        for relation in expansion.DIRECT:
            rows = [tuple(row) for row in snap.rows("test", expansion.relation_sql(relation), params)]
            assert graph.live_neighbours(relation, sources, cap) == rows, relation
        degrees = dict(snap.rows("test", expansion.DEGREE_SQL, {"sources": json.dumps(sources)}))
    assert graph.live_degrees(sources) == degrees
    assert degrees["s"] == 5 and degrees["z"] == 0


def test_searches_rank_the_same_from_the_kept_graph_and_read_no_edge_statement(cacm_index, monkeypatch):
    """Once the process keeps the citation graph, the default, learned and expansion rankings and the seeds' vote
    take their references, citing papers and degrees from it, and the learned ranking its candidates' in-degrees:
    every CACM query's ranking and scores are the statements' exactly, and none of those statements runs."""
    from retrieval.store.sql.executor import Trace

    index, corpus = cacm_index
    queries = [json.loads(line)["query"] for line in corpus.with_name("queries-dev.jsonl").read_text().splitlines()]
    configs = [RetrievalConfig(), RetrievalConfig(ranking="learned"), RetrievalConfig(ranking="expansion")]

    def rankings(trace=None):
        with RetrievalClient(index, tracer=trace) as client:
            return [[(e.paper.id, e.final_score) for e in client.search(q, cfg, limit=20, full=False).ranked]
                    for cfg in configs for q in queries]  # fmt: skip

    by_statements = rankings()
    monkeypatch.setattr(adjacency, "GRAPH_RENT", 1e-9)  # one search's rows are a graph's worth
    rankings()
    trace = Trace()
    assert rankings(trace) == by_statements
    edges = {"expansion: references, hop 1", "expansion: citing, hop 1", "expansion: degrees of the hop-1 sources",
             "vote: what the seeds cite", "vote: what cites the seeds",
             "learned: the candidates' in-degrees"}  # fmt: skip
    assert not edges & {s.name for s in trace.statements}
    assert any(ranking for ranking in by_statements)


def test_the_candidate_cap_breaks_ties_on_the_id_whatever_the_order_of_the_sums(tmp_path):
    # "y" gathers 0.1 + 0.2 from two seeds, "x" 0.3 from one: the same evidence but for the summation's last bit
    # (0.30000000000000004 against 0.3), so the cap of one keeps the smaller id, as a tie.
    refs = {"p1": [], "p2": ["y"], "p3": ["y"], "p4": ["x"], "x": [], "y": []}
    records = [paper(pid, title=f"paper {pid}", abstract="graph", references=r) for pid, r in refs.items()]
    build(db=tmp_path / "t.db", source=write_jsonl(tmp_path / "t.jsonl", records))
    seeds = [("p1", 1.0), ("p2", 0.1), ("p3", 0.2), ("p4", 0.3)]
    plain = dict(expand="always", relations=("references",), hub_weighting=False)
    with RetrievalClient(db=tmp_path / "t.db") as client, client.snapshot() as snap:
        gate = expansion.decide(lexical.weigh(snap, Query.parse("paper")), seeds, RetrievalConfig(**plain))
        whole = expansion.expand(snap, seeds, RetrievalConfig(**plain, max_candidates=None), gate)
        capped = expansion.expand(snap, seeds, RetrievalConfig(**plain, max_candidates=1), gate)
    assert whole.evidence["y"] > whole.evidence["x"] == 0.3  # the raw floats differ...
    assert round(whole.evidence["y"], 10) == round(whole.evidence["x"], 10)  # ...equal as scores are compared
    assert set(capped.evidence) == {"x"} and capped.capped == 1
