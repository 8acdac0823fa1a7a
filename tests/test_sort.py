"""``sort`` on search and similar (relevance, citations, year) and each result's citation count, exact with filters
and paging, on each backend, and through every front door."""

from __future__ import annotations

import json

import pytest

from retrieval import RetrievalClient
from retrieval.errors import ConfigError
from retrieval.interfaces.cli import main
from tests.test_paging import deep  # noqa: F401  (the fixture: 1,500 papers citing each other, on each backend)


def _cited(db) -> dict[str, int]:
    """Citation counts from the citations table, counted here (the reference the results are held to)."""
    import sqlite3

    if str(db).startswith("postgresql"):
        import psycopg

        with psycopg.connect(str(db)) as conn:
            rows = conn.execute("SELECT cited_id, count(*) FROM retrieval.citations GROUP BY cited_id").fetchall()
    else:
        with sqlite3.connect(db) as conn:
            rows = conn.execute("SELECT cited_id, count(*) FROM citations GROUP BY cited_id").fetchall()
    return dict(rows)


@pytest.mark.parametrize("sort", ["citations", "year"])
def test_a_sorted_search_is_the_ranking_reordered_and_pages_are_its_slices(deep, sort):  # noqa: F811
    cited = _cited(deep)
    with RetrievalClient(deep) as client:
        plain = client.search("field theory", limit=400)
        ranked = [r.paper for r in plain.ranked if not r.to_dict().get("past_ranking")]
        order = {p.id: i for i, p in enumerate(ranked)}
        key = (lambda p: -cited.get(p.id, 0)) if sort == "citations" else (lambda p: -(p.year or -(10**6)))
        expected = sorted(ranked, key=lambda p: (key(p), order[p.id]))
        got = client.search("field theory", limit=len(ranked), sort=sort)
        assert [r.paper.id for r in got.ranked] == [p.id for p in expected]
        assert all(r.citations == cited.get(r.paper.id, 0) for r in got.ranked)
        page = client.search("field theory", limit=10, offset=20, sort=sort)
        assert [r.paper.id for r in page.ranked] == [p.id for p in expected[20:30]]
        filtered = client.search("field theory", limit=50, sort=sort, year="2000-2004")
        assert all(2000 <= r.paper.year <= 2004 for r in filtered.ranked)
        values = [key(r.paper) for r in filtered.ranked]
        assert values == sorted(values)


@pytest.mark.parametrize("sort", [None, "citations"])
def test_the_learned_ranking_counts_citations_from_the_in_degrees_it_ranked_on(deep, sort):  # noqa: F811
    """The learned ranking reads every candidate's in-degree; the results' citation counts come from them (one
    statement for both), past the ranking too."""
    from retrieval import RetrievalConfig, Trace

    cited = _cited(deep)
    trace = Trace()
    with RetrievalClient(deep, tracer=trace) as client:
        got = client.search("field theory", RetrievalConfig(ranking="learned"), limit=400, sort=sort)
    past = [r for r in got.ranked if r.to_dict().get("past_ranking")]
    assert past and len(past) < len(got.ranked)
    assert all(r.citations == cited.get(r.paper.id, 0) for r in got.ranked)
    reads = [s.params["paper_ids"] for s in trace.statements if s.name == "learned: the candidates' in-degrees"]
    assert len(reads) == 2  # the candidates, then only the papers past the ranking
    assert set(json.loads(reads[1])) == {r.paper.id for r in past}


def test_similar_sorts_and_counts_citations(deep):  # noqa: F811
    cited = _cited(deep)
    with RetrievalClient(deep) as client:
        plain = client.similar("p700", 1000)
        by_cites = client.similar("p700", 1000, sort="citations")
        assert len(plain.ranked) < 1000  # the whole list: the same papers in another order
        assert sorted(e.paper.id for e in by_cites.ranked) == sorted(e.paper.id for e in plain.ranked)
        assert [e.paper.id for e in client.similar("p700", 10, offset=5, sort="citations").ranked] == [
            e.paper.id for e in by_cites.ranked[5:15]
        ]
        counts = [e.citations for e in by_cites.ranked]
        assert counts == sorted(counts, reverse=True)
        assert all(e.citations == cited.get(e.paper.id, 0) for e in by_cites.ranked)
        assert by_cites.ranked[0].to_dict()["citations"] == counts[0]


def test_an_unknown_sort_is_refused_by_the_library_and_a_usage_error_on_the_command_line(deep, capsys):  # noqa: F811
    with RetrievalClient(deep) as client, pytest.raises(ConfigError, match="sort"):
        client.search("field theory", sort="popularity")
    with pytest.raises(SystemExit) as usage:
        main(["search", "field theory", "--db", str(deep), "--sort", "popularity"])
    assert usage.value.code == 2
    capsys.readouterr()
    assert main(["search", "field theory", "--db", str(deep), "--sort", "citations", "--json", "--limit", "3"]) == 0
    counts = [r["citations"] for r in json.loads(capsys.readouterr().out)["results"]]
    assert counts == sorted(counts, reverse=True)


def test_an_empty_sort_is_the_default_order_through_the_library_and_http(deep):  # noqa: F811
    # `sort=` in a URL (or "" from a form or an agent) ranked by year, newest first, silently.
    from fastapi.testclient import TestClient

    from retrieval.interfaces.http.app import create_app
    from retrieval.interfaces.service import Service

    with RetrievalClient(deep) as client:
        default = [e.paper.id for e in client.search("field theory", limit=20).ranked]
        assert [e.paper.id for e in client.search("field theory", limit=20, sort="").ranked] == default
        assert default != [e.paper.id for e in client.search("field theory", limit=20, sort="year").ranked]
        similar = [e.paper.id for e in client.similar("p700", 20).ranked]
        assert [e.paper.id for e in client.similar("p700", 20, sort="").ranked] == similar
    service = Service(deep)
    try:
        http = TestClient(create_app(service))
        got = http.get("/search", params={"q": "field theory", "limit": 20, "sort": ""}).json()
        assert [r["id"] for r in got["results"]] == default
        got = http.get("/similar/p700", params={"limit": 20, "sort": ""}).json()
        assert [r["id"] for r in got["results"]] == similar
    finally:
        service.close()


def test_citation_counts_are_in_the_table_the_csv_and_the_web_page(deep, capsys):  # noqa: F811
    import csv
    import io

    from fastapi.testclient import TestClient

    from retrieval.interfaces.http.app import create_app
    from retrieval.interfaces.service import Service

    cited = _cited(deep)
    assert main(["search", "field theory", "--db", str(deep), "--limit", "3", "--sort", "citations"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:4] == ["#", "id", "year", "cited"]
    first = table[1].split()
    assert int(first[3].replace(",", "")) == cited.get(first[1], 0)
    assert main(["search", "field theory", "--db", str(deep), "--limit", "3", "--format", "csv"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert all(int(row[5]) == cited.get(row[1], 0) for row in rows[1:])
    service = Service(deep)
    try:
        page = TestClient(create_app(service)).get("/", params={"q": "field theory", "sort": "citations"}).text
    finally:
        service.close()
    top = max(cited.values())
    assert f"cited by {top:,} papers" in page and '<select name="sort"' in page
