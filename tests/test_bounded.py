"""Answers about a much-cited paper stay bounded and fast on every door (issue 26): ``show``'s pages of references
and citing papers (library, CLI, HTTP API, web page, MCP tools), the agent's bounded ``explain`` summary,
co-citation read from a sample of a hub's citing papers, and ``stats`` from cheap counts that equal the full ones.

A generated corpus stands in for hepth's most cited paper (2,414 citing papers): a hub cited by 3,000 papers,
which also cite 30 topic papers, topic i with probability 1 / (i + 1); the hub cites 5 older papers of the corpus
(which nobody else cites) and 40 papers outside it, and shares no word with the others (so its similar papers are
the co-cited ones)."""

from __future__ import annotations

import json
import math
import random
import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrieval.commands import add, remove, stats
from retrieval.corpus.paper import Paper
from retrieval.errors import ConfigError
from retrieval.interfaces.cli import main
from retrieval.search import similar as similar_module
from retrieval.search.client import RetrievalClient
from retrieval.search.papers import LINK_SORTS
from retrieval.search.similar import COCITATION_FANOUT, cocitation_estimate, sampled_citers
from tests.helpers import BACKENDS, index_on

HUB = "hub"
N_CITING = 3_000
TOPICS = [f"t{i:02d}" for i in range(30)]
OLD = [f"o{i}" for i in range(5)]
OUTSIDE = [f"ext{i:02d}" for i in range(40)]
WORDS = ["entropy", "brane", "duality", "gauge", "string", "horizon", "anomaly", "moduli", "instanton"]


def _text(rnd: random.Random, n: int) -> str:
    return " ".join(rnd.choice(WORDS) for _ in range(n))


def hub_corpus() -> list[Paper]:
    rnd = random.Random(26)
    papers = [
        Paper(HUB, "The hub: holography", "correspondence " * 30, 1997, ["Juan Hub"], OLD + OUTSIDE),
        *(Paper(pid, f"Older paper {pid}", _text(rnd, 30), 1990, ["O. Old"]) for pid in OLD),
    ]  # fmt: skip
    for i, topic in enumerate(TOPICS):
        papers.append(Paper(topic, f"Topic paper {i}: {_text(rnd, 6)}", _text(rnd, 40), 1990 + i % 7, ["T. Topic"]))
    for j in range(N_CITING):
        refs = [HUB] + [t for i, t in enumerate(TOPICS) if rnd.random() < 1 / (i + 1)]
        papers.append(
            Paper(f"c{j:04d}", f"Citing paper {j} on {_text(rnd, 8)}", _text(rnd, 45), 1998 + j % 6,
                  ["X. Author", "Y. Author"], refs)
        )  # fmt: skip
    return papers


@pytest.fixture(scope="module", params=BACKENDS)
def hub_db(request):
    return index_on(request, request.param, hub_corpus(), "hub")


@pytest.fixture(scope="module")
def hub_file(request):
    return index_on(request, "sqlite", hub_corpus(), "hubfile")


def expected_order(ids: list[str], sort: str) -> list[str]:
    """``ids`` in ``sort``'s order, computed from the corpus: the most cited first, the newest first, or by id; ties
    by id."""
    papers = {p.id: p for p in hub_corpus()}
    cited = {pid: 0 for pid in ids}
    for paper in papers.values():
        for ref in paper.references:
            if ref in cited:
                cited[ref] += 1
    year = {pid: papers[pid].year if pid in papers else None for pid in ids}
    keys = {
        "citations": lambda pid: (-cited[pid], pid),
        "year": lambda pid: (-(year[pid] if year[pid] is not None else -1), pid),
        "id": lambda pid: (0, pid),
    }
    return sorted(ids, key=keys[sort])


# -- show: pages, in each order, that concatenate to the whole list ------------------------------------------------
@pytest.mark.parametrize("sort", LINK_SORTS)
def test_show_pages_concatenate_to_each_list_in_the_order_asked(hub_db, sort):
    citing = [f"c{j:04d}" for j in range(N_CITING)]
    refs = OLD + OUTSIDE
    with RetrievalClient(hub_db) as client:
        pages = [client.show(HUB, limit=700, sort=sort, citations_offset=o, references_offset=o // 70)
                 for o in range(0, N_CITING + 700, 700)]  # fmt: skip
        whole = client.show(HUB, sort=sort)
    got = [pid for page in pages for pid in page.paper.citations]
    assert got == expected_order(citing, sort) == whole.paper.citations
    assert whole.paper.references == expected_order(refs, sort)
    assert [len(p.paper.citations) for p in pages] == [700, 700, 700, 700, 200, 0]
    first = pages[0]
    assert (first.citations_total, first.references_total, first.references_in_corpus) == (N_CITING, 45, 5)
    data = first.to_dict()
    assert data["citations_total"] == N_CITING and data["references_total"] == 45
    assert data["links"] == {"sort": sort, "limit": 700, "references_offset": 0, "references_returned": 45,
                             "citations_offset": 0, "citations_returned": 700}  # fmt: skip
    inside = [link for link in data["references"] if link["in_corpus"]]
    assert len(inside) == 5 and all(link["title"] and link["authors"] == ["O. Old"] for link in inside)
    outside = [link for link in data["references"] if not link["in_corpus"]]
    assert len(outside) == 40 and all(link["title"] is None and link["authors"] == [] for link in outside)
    assert all(link["cited_by"] == 1 for link in data["references"])  # the hub alone cites them
    assert all(link["cited_by"] == 0 for link in data["citations"])  # nobody cites a citing paper here
    with RetrievalClient(hub_db) as client:
        topics = client.show("c0000", sort=sort).to_dict()["references"]
    counts = {link["id"]: link["cited_by"] for link in topics}
    assert counts[HUB] == N_CITING and counts.get("t00") == N_CITING  # every citing paper cites t00 too
    if sort == "citations":
        assert list(counts.values()) == sorted(counts.values(), reverse=True) and list(counts)[:2] == ["hub", "t00"]


def test_show_checks_its_paging_with_the_parameters_names(hub_db):
    with RetrievalClient(hub_db) as client:
        for kwargs, name in [({"limit": 0}, "limit"), ({"sort": "relevance"}, "sort"),
                             ({"references_offset": -1}, "references_offset"),
                             ({"citations_offset": 10**12}, "citations_offset")]:  # fmt: skip
            with pytest.raises(ConfigError, match=name):
                client.show(HUB, **kwargs)


# -- every door's default is a page, with the totals ---------------------------------------------------------------
#: What the whole answer was before pages (every citing paper with its title, year and authors): the default page
#: must be a small part of it.
def _whole_size(db) -> int:
    with RetrievalClient(db) as client:
        return len(json.dumps(client.show(HUB).to_dict()))


def test_the_cli_shows_a_page_with_the_totals_and_how_to_see_more(hub_file, capsys):
    assert main(["show", HUB, "--db", str(hub_file)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert len(lines) < 70, len(lines)
    assert "cited by 3,000 papers of the corpus; 1-20, the most cited first" in out
    assert "  and 2,980 more (--citations-offset 20)" in lines
    assert "references: 45 (5 in the corpus); 1-20, the most cited first" in out
    assert "  and 25 more (--references-offset 20)" in lines
    assert main(["show", HUB, "--db", str(hub_file), "--json"]) == 0
    text = capsys.readouterr().out
    data = json.loads(text)
    assert len(text) < 20_000 < _whole_size(hub_file) / 20
    assert (len(data["citations"]), data["citations_total"], len(data["references"])) == (20, N_CITING, 20)
    args = ["show", HUB, "--db", str(hub_file), "--json", "--sort", "id", "--citations-offset", "2990", "--limit", "50"]
    assert main(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert [c["id"] for c in data["citations"]] == [f"c{j:04d}" for j in range(2990, 3000)]
    assert data["links"]["citations_returned"] == 10 and data["links"]["references_returned"] == 45
    for bad in (["--sort", "bogus"], ["--citations-offset", "-1"], ["--limit", "0"]):
        with pytest.raises(SystemExit) as stopped:  # a usage error, as argparse says it
            main(["show", HUB, "--db", str(hub_file), *bad])
        assert stopped.value.code == 2 and bad[0] in capsys.readouterr().err


@pytest.fixture(scope="module")
def api(hub_file):
    from fastapi.testclient import TestClient

    from retrieval.interfaces.http.app import create_app
    from retrieval.interfaces.service import Service

    service = Service(hub_file)
    with TestClient(create_app(service)) as client:
        yield client
    service.close()


def test_the_api_answers_a_page_and_says_what_it_is_out_of(api, hub_file):
    got = api.get(f"/papers/{HUB}")
    assert got.status_code == 200
    assert len(got.content) < 20_000 < _whole_size(hub_file) / 20
    data = got.json()
    assert (len(data["citations"]), data["citations_total"], data["links"]["limit"]) == (20, N_CITING, 20)
    with RetrievalClient(hub_file) as client:
        assert data == json.loads(json.dumps(client.show(HUB, limit=20).to_dict()))
    params = {"limit": 100, "sort": "id", "citations_offset": 2950, "references_offset": 44}
    data = api.get(f"/papers/{HUB}", params=params).json()
    assert [c["id"] for c in data["citations"]] == [f"c{j:04d}" for j in range(2950, 3000)]
    assert [r["id"] for r in data["references"]] == ["o4"]
    for params, status in [({"limit": 101}, 400), ({"sort": "bogus"}, 400), ({"citations_offset": -1}, 400),
                           ({"limit": "x"}, 400)]:  # fmt: skip
        answer = api.get(f"/papers/{HUB}", params=params)
        assert answer.status_code == status and answer.json()["error"], params
    spec = api.get("/openapi.json").json()["paths"]["/papers/{paper_id}"]["get"]["parameters"]
    assert {p["name"] for p in spec} == {"paper_id", "limit", "sort", "references_offset", "citations_offset"}


def test_the_paper_page_lists_a_page_of_each_with_links_to_the_next(api):
    page = api.get(f"/paper/{HUB}")
    assert page.status_code == 200 and len(page.content) < 120_000
    html = page.text
    assert html.count('data-id="c') >= 100  # the first 100 citing papers (and similar papers)
    assert "1-100 of 3,000" in html and "1-45 of 45" in html
    assert f'href="/paper/{HUB}?citations_offset=100#citations" rel' not in html  # rel comes first
    assert f'rel="next" href="/paper/{HUB}?citations_offset=100#citations"' in html
    assert f'href="/paper/{HUB}?sort=year#citations"' in html  # another order, from the first page
    second = api.get(f"/paper/{HUB}", params={"citations_offset": 100, "sort": "id"}).text
    assert "101-200 of 3,000" in second and 'data-id="c0100"' in second and 'data-id="c0099"' not in second
    assert f'rel="prev" href="/paper/{HUB}?sort=id#citations"' in second
    assert f'rel="next" href="/paper/{HUB}?sort=id&amp;citations_offset=200#citations"' in second
    assert api.get(f"/paper/{HUB}", params={"sort": "bogus"}).status_code == 400


# -- co-citation of a hub from a sample of its citing papers -----------------------------------------------------
def sample_size(citing: int, fanout: int | None) -> int:
    """How many of ``citing`` papers co-citation reads (``sampled_citers``' sample of ids that sort as numbers)."""
    return len(sampled_citers([f"{i:06d}" for i in range(citing)], fanout))


@given(st.integers(0, 100_000), st.integers(1, 5_000))
def test_a_sample_is_every_kth_citing_paper_and_at_most_the_fanout(citing, fanout):
    read = sample_size(citing, fanout)
    step = -(-citing // fanout) if citing else 1
    assert read == len(range(0, citing, step)) <= max(fanout, 0)
    assert (read == citing) == (citing <= fanout)
    assert sample_size(citing, None) == citing


@given(st.integers(0, 500), st.integers(1, 10_000), st.integers(1, 10_000), st.integers(0, 10_000))
def test_an_estimate_scales_a_sample_up_within_what_either_paper_allows(together, citing, read, cited_by):
    read = min(read, citing)
    together = min(together, read, cited_by)
    estimate = cocitation_estimate(together, citing, read, cited_by)
    assert together <= estimate <= max(together, min(cited_by, citing))
    if read == citing:
        assert estimate == together


def test_similar_reads_a_sample_of_a_hubs_citing_papers_and_keeps_its_best(hub_db):
    with RetrievalClient(hub_db) as client:
        capped = client.similar(HUB, limit=10)
        with client.snapshot() as snap:
            exact = similar_module.similar(snap, [HUB], 10, fanout=None)
    assert capped.cocitation_read == {HUB: {"citing": N_CITING, "read": COCITATION_FANOUT}}
    assert capped.to_dict()["cocitation_read"] == capped.cocitation_read and exact.cocitation_read == {}
    top = [e.paper.id for e in exact.ranked[:5]]
    assert [e.paper.id for e in capped.ranked[:5]] == top == TOPICS[:5]
    for entry in capped.ranked[:5]:  # the scaled-up counts are near the true ones
        truth = next(e for e in exact.ranked if e.paper.id == entry.paper.id).together[HUB]
        assert math.isclose(entry.together[HUB], truth, rel_tol=0.3), (entry.paper.id, entry.together, truth)
        assert entry.estimated == {HUB} and f"co-cited ~{entry.together[HUB]} with {HUB}" in entry.why()
    assert not exact.ranked[0].estimated and "~" not in exact.ranked[0].why()


def test_a_paper_cited_less_than_the_fanout_is_ranked_exactly_as_before(hub_db):
    """Below the fan-out every citing paper is read: the ranking is the exact one, to the last bit."""
    with RetrievalClient(hub_db) as client:
        for pid, citing in (("c0001", 0), ("t09", None), ("t02", None)):
            with client.snapshot() as snap:
                default = similar_module.similar(snap, [pid], 20).to_dict()
                exact = similar_module.similar(snap, [pid], 20, fanout=None).to_dict()
            default.pop("metrics"), exact.pop("metrics")
            cited = client.show(pid, limit=1).citations_total
            if citing is not None:
                assert cited == citing
            if cited <= COCITATION_FANOUT:
                assert default == exact and default["cocitation_read"] == {}, pid
            else:
                assert default["cocitation_read"] == {pid: {"citing": cited, "read": sample_size(cited, 100)}}


def test_the_sample_is_the_same_on_both_backends(request):
    """Which citing papers are read depends on the order of their ids: by their bytes on both dialects."""
    lite = index_on(request, "sqlite", hub_corpus(), "hub_lite")
    pg = index_on(request, "postgresql", hub_corpus(), "hub_pg")
    with RetrievalClient(lite) as a, RetrievalClient(pg) as b:
        x, y = a.similar([HUB, "t07"], limit=30).to_dict(), b.similar([HUB, "t07"], limit=30).to_dict()
    x.pop("metrics"), y.pop("metrics")
    assert x == y and x["cocitation_read"][HUB]["read"] == COCITATION_FANOUT


# -- the agent tools: a page, and a bounded summary of an evidence run ---------------------------------------------
def test_the_agent_tools_answer_a_hub_within_their_stated_budget(hub_file, tmp_path):
    pytest.importorskip("anyio")
    pytest.importorskip("mcp.server.mcpserver")
    from retrieval.interfaces.service import EXPLAIN_BUDGET
    from tests.test_mcp import calls, data

    shown, last, explained, widest = calls(
        hub_file, tmp_path,
        ("show", {"paper_id": HUB}),
        ("show", {"paper_id": HUB, "sort": "id", "citations_offset": 2990, "limit": 100}),
        ("explain", {"query": "entropy brane duality"}),
        ("explain", {"query": "entropy brane duality", "top_k": 50, "edges": 20, "pruned": 200}),
    )  # fmt: skip
    page = data(shown)
    assert len(json.dumps(page)) < 20_000 < _whole_size(hub_file) / 20
    assert (len(page["citations"]), page["citations_total"], page["references_total"]) == (20, N_CITING, 45)
    assert [c["id"] for c in data(last)["citations"]] == [f"c{j:04d}" for j in range(2990, 3000)]
    summary = data(explained)
    assert len(json.dumps(summary)) <= EXPLAIN_BUDGET and summary["results"] and not summary["detail"]["cut"]
    for paper in summary["results"]:
        assert len(paper["in_edges"]) <= 3 and paper["in_edges_total"] >= len(paper["in_edges"])
        assert all(edge["kept"] for edge in paper["in_edges"] + paper["out_edges"])
    assert summary["pruned_edges"] == [] and summary["pruned_total"] == sum(summary["pruned_reasons"].values())
    wide = data(widest)
    assert len(json.dumps(wide)) <= EXPLAIN_BUDGET and len(wide["results"]) > len(summary["results"])
    detail = wide["detail"]
    assert not detail["cut"] and (detail["edges"], detail["pruned"], detail["results"]) == (
        20,
        200,
        len(wide["results"]),
    )
    assert len(wide["pruned_edges"]) == min(detail["pruned"], wide["pruned_total"])


@pytest.mark.parametrize("budget", [4_000, 8_000, 12_000])
def test_a_summary_longer_than_its_budget_lists_less_and_says_so(hub_file, budget):
    """Down to its fixed part (the query, seeds, health, size, config: 3,000 characters here, at most some 20,000
    with ten sub-queries), which every budget the tool uses exceeds."""
    from retrieval.evidence.config import EvidenceConfig
    from retrieval.evidence.pipeline import explain
    from retrieval.interfaces.service import summarise

    with RetrievalClient(hub_file) as client:
        run = explain(client, "entropy brane duality", config=EvidenceConfig(top_k=20))
    whole = summarise(run, 20, 200, budget=10**9)
    assert not whole["detail"]["cut"] and len(json.dumps(whole)) > 12_000
    cut = summarise(run, 20, 200, budget=budget)
    assert len(json.dumps(cut)) <= budget and cut["detail"]["cut"] and cut["detail"]["budget_chars"] == budget
    assert [r["paper_id"] for r in cut["results"]] == [r["paper_id"] for r in whole["results"]][: len(cut["results"])]
    assert cut["pruned_total"] == whole["pruned_total"] and cut["pruned_reasons"] == whole["pruned_reasons"]


# -- stats: cheap counts, equal to the full ones ------------------------------------------------------------------
def _full_counts(db) -> tuple[int, int, int]:
    """Live edges, dangling references and postings counted the slow way: every citation row joined with papers
    at both ends, and every ``term_freq`` row."""
    from retrieval.store.database import EDGE_COUNTS_SQL

    with RetrievalClient(db) as client, client.snapshot() as snap:
        total, edges = snap.rows("test: citation rows and edges", EDGE_COUNTS_SQL)[0]
    if str(db).startswith("postgresql"):
        import psycopg

        with psycopg.connect(str(db)) as conn:
            conn.execute("SET search_path TO retrieval")
            postings = conn.execute("SELECT count(*) FROM term_freq").fetchone()[0]
    else:
        with sqlite3.connect(db) as conn:
            postings = conn.execute("SELECT count(*) FROM term_freq").fetchone()[0]
    return edges or 0, total - (edges or 0), postings


def stats_corpus() -> list[Paper]:
    """Dangling references of both kinds: to papers outside the corpus, and from citing papers outside it."""
    return [
        Paper("a", "Gauge duality", "gauge duality strings", 2000, ["A"], ["b", "out1", "out2"]),
        Paper("b", "Brane entropy", "brane entropy", 1999, ["B"], ["out1"], citations=["outciter", "c", "a"]),
        Paper("c", "Horizon moduli", "horizon moduli", 2001, ["C"], ["a"], citations=["outciter2"]),
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_stats_counts_equal_the_full_counts_through_adds_and_removes(request, backend, tmp_path):
    """Dangling references of both kinds (a reference to a paper outside the corpus; a citing paper outside it,
    from a paper's list of citing papers), through a remove and an add."""
    db = index_on(request, backend, stats_corpus(), f"stats_{backend}")
    steps = [
        lambda: None,
        lambda: remove(["b"], db=db),
        lambda: add(
            [Paper("d", "Anomaly", "anomaly lattice", 2002, ["D"], ["a", "b", "out3"], citations=["outciter3", "c"])],
            db=db,
        ),  # fmt: skip
        lambda: add([Paper("b", "Brane entropy again", "brane", 1999, ["B"], ["c"])], db=db),
    ]
    seen = []
    for step in steps:
        step()
        info = stats(db)
        edges, dangling, postings = _full_counts(db)
        assert (info["edges"], info["dangling_references"], info["postings"]) == (edges, dangling, postings)
        seen.append((edges, dangling))
    assert all(dangling for _, dangling in seen) and len(set(seen)) > 2  # the steps changed both counts


def test_a_sharded_index_pages_resolves_and_samples_as_a_file_does(sharded_database, tmp_path):
    """The coordinator's own texts of the new statements (``register_sharded``) answer what SQLite's do."""
    from retrieval.commands import build

    papers = hub_corpus()[: 1 + len(OLD) + len(TOPICS) + 400]  # the hub cited 400 times
    # Without the references outside the corpus: a sharded build keeps no cited_counts row of an id outside it,
    # where a file's has one (``cited_by`` of such a link is 0 there, 1 here).
    papers[0].references = list(OLD)
    lite = tmp_path / "hub.db"
    build(db=lite, source=papers)
    coordinator, shards = sharded_database("bounded")
    build(db=coordinator, source=papers, shards=shards)
    with RetrievalClient(lite) as a, RetrievalClient(coordinator) as b:
        for kwargs in ({"limit": 20}, {"limit": 50, "sort": "year", "citations_offset": 30}, {"sort": "id"}):
            assert a.show(HUB, **kwargs).to_dict() == b.show(HUB, **kwargs).to_dict(), kwargs
        assert b.show(HUB).citations_total == 400 and b.resolve(["arXiv:hub"]) == [HUB]
        x, y = a.similar(HUB, limit=20).to_dict(), b.similar(HUB, limit=20).to_dict()
    x.pop("metrics"), y.pop("metrics")
    assert x == y and x["cocitation_read"] == {HUB: {"citing": 400, "read": 100}}
    lite_stats, sharded_stats = stats(lite), stats(coordinator)
    for key in ("papers", "edges", "dangling_references", "terms", "postings"):
        assert lite_stats[key] == sharded_stats[key], key
    dangling, _ = sharded_database("bounded_stats")  # references outside the corpus: the coordinator's own count
    build(db=dangling, source=stats_corpus(), shards=shards)
    info = stats(dangling)
    assert (info["edges"], info["dangling_references"], info["postings"]) == _full_counts(dangling)
    assert info["dangling_references"] >= 2
