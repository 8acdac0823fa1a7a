"""The three input formats, from small hand-written files, through build and search."""

import gzip
import json
import sqlite3
from pathlib import Path

import pytest

from retrieval import (
    ArxivMockClient,
    InputError,
    RetrievalClient,
    SemanticScholarMockClient,
    build_from_clients,
    read_papers,
)
from retrieval.commands import build, stats
from retrieval.corpus import Paper, merge_clients, merge_records
from retrieval.interfaces.cli import main
from tests.helpers import write_jsonl

FIXTURES = Path(__file__).parent / "fixtures"


def test_openalex_works():
    papers = [p for _, p in read_papers(FIXTURES / "openalex-works.jsonl")]
    a, b, c = papers
    assert (a.id, a.title, a.year) == ("W2000000001", "Sparse attention by block routing", 2019)
    assert a.abstract == "We route attention heads to sparse attention blocks."  # rebuilt by position
    assert a.authors == ["Ada Lovelace", "Alan Turing"]
    assert (b.title, b.abstract) == ("Routing heads revisited", "")  # display_name when title is null
    assert b.references == ["W2000000001", "W9999999999"]
    assert c.year is None and c.source == "openalex-works.jsonl"


def test_semantic_scholar_papers():
    a, b, c = [p for _, p in read_papers(FIXTURES / "s2-papers.jsonl")]
    assert (a.id, a.year, a.authors) == ("a1b2c3", 2019, ["Ada Lovelace", "Alan Turing"])
    assert a.citations == ["d4e5f6", "outside1"]
    assert b.abstract == "" and b.references == ["a1b2c3"]  # the unresolved reference is skipped
    assert c.references == ["d4e5f6", "a1b2c3", "0789ab"]


@pytest.mark.parametrize(
    ("name", "fmt", "ids"),
    [
        ("papers.jsonl", "jsonl", ("x1", "x2", "x3")),
        ("openalex-works.jsonl", "openalex", ("W2000000001", "W2000000002", "W2000000003")),
        ("s2-papers.jsonl", "s2", ("a1b2c3", "d4e5f6", "0789ab")),
    ],
)
def test_each_format_round_trips_through_build_and_search(tmp_path, name, fmt, ids):
    """The same three papers in three formats give the same index, up to the ids."""
    src = tmp_path / (name + ".gz")
    src.write_bytes(gzip.compress((FIXTURES / name).read_bytes()))
    for given in (None, fmt):
        summary = build(db=tmp_path / "x.db", source=src, format=given)
        assert (summary.papers, summary.edges) == (3, 3)
    first, second, third = ids
    with RetrievalClient(db=tmp_path / "x.db") as client:
        hits = client.lexical.search("sparse attention blocks", 3)
        assert hits[0][0] == first
        assert client.graph.expand([first], 1) == {first: 0, second: 1, third: 1}
        assert client.paper(third).references == sorted([first, second])
        assert client.paper(first).authors == ["Ada Lovelace", "Alan Turing"]
        assert sorted(client.paper(first).citations) == sorted([second, third])
        assert client.stats.max_year == 2021


def test_s2_citations_lists_make_edges_and_keep_outside_citers(tmp_path):
    summary = build(db=tmp_path / "x.db", source=FIXTURES / "s2-papers.jsonl")
    assert summary.self_citations_dropped == 1
    with sqlite3.connect(tmp_path / "x.db") as conn:
        rows = conn.execute(
            "SELECT citing_id, cited_id, listed_by_citing, listed_by_cited FROM citations ORDER BY 1, 2"
        ).fetchall()
    assert ("d4e5f6", "a1b2c3", 1, 1) in rows  # declared by both records
    assert ("outside1", "a1b2c3", 0, 1) in rows  # kept: counts as an edge when outside1 arrives
    assert summary.dangling_references == 1
    info = stats(tmp_path / "x.db")  # stats counts edges as the build does: both ends must be papers
    assert (info["edges"], info["dangling_references"]) == (summary.edges, 1)


@pytest.mark.parametrize(
    ("fmt", "line", "reason"),
    [
        ("openalex", {"id": "W1", "title": "t", "publication_year": "2020"}, "'publication_year' must be an integer"),
        ("openalex", {"id": "W1", "abstract_inverted_index": {"a": ["x"]}}, "positions of 'a'"),
        ("openalex", {"title": "no id", "referenced_works": []}, "missing 'id'"),
        ("s2", {"paperId": "p", "references": "nope"}, "'references' must be a list"),
        ("s2", {"paperId": "", "title": "t"}, "missing 'paperId'"),
        ("s2", {"paperId": "p", "year": 2020.5}, "'year' must be an integer"),
        # a field of the wrong type, at any depth, as the project's own format refuses one
        ("openalex", {"id": "W1", "title": "T", "authorships": "x"}, "'authorships' must be a list of objects"),
        ("openalex", {"id": "W1", "title": "T", "authorships": ["x"]}, "'authorships' must be a list of objects"),
        ("openalex", {"id": "W1", "title": "T", "authorships": [None]}, "'authorships' must be a list of objects"),
        ("openalex", {"id": "W1", "title": "T", "authorships": [{"author": "x"}]}, "'author' must be an object"),
        ("openalex", {"id": "W1", "authorships": [{"author": {"display_name": 5}}]}, "'display_name' must be a"),
        ("openalex", {"id": "W1", "title": 5}, "'title' must be a string or null"),
        ("openalex", {"id": "W1", "title": ["T"]}, "'title' must be a string or null"),
        ("openalex", {"id": "W1", "title": None, "display_name": 5}, "'display_name' must be a string or null"),
        ("openalex", {"id": "W1", "title": "T", "referenced_works": "W2"}, "'referenced_works' must be a list"),
        ("openalex", {"id": "W1", "title": "T", "referenced_works": [2]}, "'referenced_works' must be a list"),
        ("openalex", {"id": "W1", "title": "T", "abstract_inverted_index": ["a"]}, "'abstract_inverted_index' must"),
        ("openalex", {"id": "W1", "title": "T", "publication_year": True}, "'publication_year' must be an integer"),
        ("openalex", {"id": 1, "title": "T"}, "missing 'id'"),
        ("s2", {"paperId": "p1", "title": "T", "authors": "x"}, "'authors' must be a list of objects"),
        ("s2", {"paperId": "p1", "title": "T", "authors": ["x"]}, "'authors' must be a list of objects"),
        ("s2", {"paperId": "p1", "title": "T", "authors": [{"name": 5}]}, "'name' must be a string or null"),
        ("s2", {"paperId": "p1", "title": "T", "citations": [{"paperId": 5}]}, "'paperId' must be a string or null"),
        ("s2", {"paperId": "p1", "title": "T", "references": [{"paperId": ["x"]}]}, "'paperId' must be a string"),
        ("s2", {"paperId": "p1", "title": "T", "citations": "x"}, "'citations' must be a list"),
        ("s2", {"paperId": "p1", "title": 5}, "'title' must be a string or null"),
        ("s2", {"paperId": "p1", "title": "T", "abstract": 5}, "'abstract' must be a string or null"),
        (
            "s2",
            {"id": "x1", "title": "T"},
            "missing 'paperId'.*it looks like the project's own format: give --format jsonl",
        ),
    ],
)
def test_malformed_records_name_file_and_line_and_write_nothing(tmp_path, fmt, line, reason):
    good = [json.loads(x) for x in (FIXTURES / ("s2-papers.jsonl" if fmt == "s2" else "openalex-works.jsonl")).open()]
    src = write_jsonl(tmp_path / "bad.jsonl", [*good[:2], line])
    with pytest.raises(InputError, match=rf"bad\.jsonl:3: .*{reason}"):
        build(db=tmp_path / "x.db", source=src, format=fmt)
    assert not (tmp_path / "x.db").exists()


def test_a_number_too_long_for_python_is_a_line_s_message_not_a_traceback(tmp_path, capsys):
    # json.loads raises a plain ValueError past 4,300 digits (Python's guard against slow conversions).
    from retrieval.interfaces.cli import main

    bad = tmp_path / "big.jsonl"
    lines = [
        '{"id": "a", "title": "alpha"}',
        '{"id": "b", "title": "beta"}',
        '{"id": "d", "title": "t", "year": 1' + "0" * 5000 + "}",
    ]
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"big\.jsonl:3: a number has too many digits to read"):
        build(db=tmp_path / "x.db", source=bad)
    assert not (tmp_path / "x.db").exists()
    index = tmp_path / "demo.db"
    build(db=index)
    before = index.read_bytes()
    assert main(["add", str(bad), "--db", str(index)]) == 1
    err = capsys.readouterr().err
    assert "big.jsonl:3: a number has too many digits" in err and "Traceback" not in err
    assert index.read_bytes() == before


def test_nulls_and_gaps_the_sources_allow_are_accepted(tmp_path):
    """What OpenAlex and Semantic Scholar give as null (or leave out) is read as absent, not refused."""
    openalex = [
        {"id": "https://openalex.org/W1", "title": None, "display_name": None, "publication_year": None,
         "authorships": None, "referenced_works": None, "abstract_inverted_index": None},
        {"id": "W2", "title": "Two", "authorships": [{"author": None}, {"author": {"display_name": None}},
         {"author": {"id": None, "display_name": ""}}, {"author_position": "first"},
         {"author": {"display_name": "  "}}, {"author": {"display_name": "A"}}]},
        {"id": "https://openalex.org/W3", "title": None, "display_name": "Three", "referenced_works": []},
    ]  # fmt: skip
    a, b, c = [p for _, p in read_papers(write_jsonl(tmp_path / "oa.jsonl", openalex), "openalex")]
    assert (a.id, a.title, a.abstract, a.year, a.authors, a.references) == ("W1", "", "", None, [], [])
    assert (b.id, b.authors) == ("W2", ["A"])
    assert c.title == "Three"
    s2 = [
        {"paperId": "p1", "title": None, "abstract": None, "year": None, "authors": None, "references": None,
         "citations": None},
        {"paperId": "p2", "title": "Two", "authors": [{"authorId": None, "name": None}, {"authorId": "1"},
         {"name": ""}, {"name": " "}, {"name": "B"}],
         "references": [{"paperId": None}, {"title": "unresolved"}, {"paperId": "p1"}],
         "citations": [{"paperId": None, "title": "unresolved"}]},
    ]  # fmt: skip
    a, b = [p for _, p in read_papers(write_jsonl(tmp_path / "s2.jsonl", s2), "s2")]
    assert (a.title, a.abstract, a.year, a.authors, a.references, a.citations) == ("", "", None, [], [], [])
    assert (b.authors, b.references, b.citations) == (["B"], ["p1"], [])


@pytest.mark.parametrize(
    "line",
    [
        '{"id":"https://openalex.org/W1","title":"T","authorships":"x"}',
        '{"id":"https://openalex.org/W1","title":"T","authorships":["x"]}',
        '{"id":"https://openalex.org/W1","title":"T","authorships":[{"author":"x"}]}',
    ],
)
@pytest.mark.parametrize("command", ["build", "add"])
def test_cli_openalex_authorships_of_the_wrong_shape_are_a_message_not_a_traceback(tmp_path, capsys, line, command):
    src = tmp_path / "oa1.jsonl"
    src.write_text(line + "\n", encoding="utf-8")
    db = tmp_path / "t.db"
    if command == "add":
        build(db=db, source=FIXTURES / "openalex-works.jsonl")
    before = db.read_bytes() if db.exists() else None
    code = main([command, *(["--from"] if command == "build" else []), str(src), "--db", str(db)])
    err = capsys.readouterr().err
    assert code == 1
    assert f"{src}:1: 'authorships' must be a list of objects" in err or f"{src}:1: 'authorships' entry 1:" in err
    assert "Traceback" not in err
    assert (db.read_bytes() if db.exists() else None) == before


def test_fetch_openalex_skips_a_work_whose_authorships_are_malformed(tmp_path):
    """A work of an OpenAlex answer that the reader would refuse is skipped with its reason, never a traceback."""
    pytest.importorskip("httpx")
    from retrieval.corpus.fetch import Policy, fetch_openalex
    from tests.fetch_servers import OpenAlexAPI, Server, work

    works = [work(1, "Sparse attention one"), work(2, "Sparse attention two"), work(3, "Sparse attention three")]
    works[1]["authorships"] = ["x"]
    works[2]["authorships"] = [{"author": "x"}]
    out = tmp_path / "papers.jsonl"
    with Server(OpenAlexAPI(works)) as server:
        summary = fetch_openalex(
            out, search="sparse attention", base_url=server.url, policy=Policy(tries=2, backoff=0.01, interval=0.0)
        )
    assert [json.loads(x)["id"] for x in out.read_text(encoding="utf-8").splitlines()] == ["W1"]
    assert summary.skipped == 2
    assert any("'authorships'" in reason for reason in map(str, summary.skip_reasons))


@pytest.mark.parametrize(
    ("record", "suggested"),
    [
        ({"id": "1", "title": "Preliminary Report", "abstract": "", "year": 1958, "authors": ["Perlis, A. J."],
          "references": []}, "--format jsonl"),  # CACM's first line
        ({"id": "hep-th/9201001", "title": "T", "year": 1992}, "--format jsonl"),
        # a set fetched from OpenAlex, written in the project's format: OpenAlex ids, but not an OpenAlex work
        ({"id": "W3", "title": "T", "abstract": "A.", "year": 2003, "authors": ["Ada Lovelace"],
          "references": ["W2"], "doi": "10.1000/sa3"}, "--format jsonl"),
        ({"paperId": "a1b2c3", "title": "T"}, "--format s2"),
        ({"id": "https://openalex.org/A5023888391", "display_name": "Ada Lovelace"}, "an OpenAlex work id"),
    ],
)  # fmt: skip
def test_a_record_that_is_not_an_openalex_work_is_refused_with_the_format_to_give(tmp_path, record, suggested):
    good = [json.loads(x) for x in (FIXTURES / "openalex-works.jsonl").open()]
    src = write_jsonl(tmp_path / "bad.jsonl", [*good[:2], record])
    with pytest.raises(InputError, match=r"bad\.jsonl:3: .*not .*an OpenAlex work") as info:
        build(db=tmp_path / "x.db", source=src, format="openalex")
    assert suggested in str(info.value)
    assert not (tmp_path / "x.db").exists()


def test_cli_wrong_format_openalex_on_the_projects_own_format_is_refused(tmp_path, capsys):
    """The project's own records read as OpenAlex works would make an index without abstracts, years, authors or
    edges: refused at the first line, with the format to give."""
    code = main(
        ["build", "--from", str(FIXTURES / "papers.jsonl"), "--format", "openalex", "--db", str(tmp_path / "x.db")]
    )
    err = capsys.readouterr().err
    assert code == 1 and "papers.jsonl:1: " in err and "--format jsonl" in err and "Traceback" not in err
    assert not (tmp_path / "x.db").exists()
    assert main(["build", "--from", str(FIXTURES / "papers.jsonl"), "--db", str(tmp_path / "x.db")]) == 0


@pytest.mark.parametrize(("fixture", "fmt"), [("openalex-works.jsonl", "openalex"), ("s2-papers.jsonl", "s2")])
def test_cli_format_jsonl_on_openalex_works_or_s2_papers_is_refused(fixture, fmt, tmp_path, capsys):
    """OpenAlex works read as the project's own records lost their abstracts, years, authors and references (the
    build succeeded with titles alone), and S2 papers were refused for a missing 'id': refused at the first line
    with the format to give."""
    code = main(["build", "--from", str(FIXTURES / fixture), "--format", "jsonl", "--db", str(tmp_path / "x.db")])
    err = capsys.readouterr().err
    assert code == 1 and f"{fixture}:1: not a record of the project's own format" in err
    assert f"give --format {fmt}" in err and "Traceback" not in err
    assert not (tmp_path / "x.db").exists()


def test_undetectable_format_asks_for_format(tmp_path):
    src = write_jsonl(tmp_path / "odd.jsonl", [{"name": "no id here"}])
    with pytest.raises(InputError, match=r"odd\.jsonl:1: cannot tell the format .* --format"):
        build(db=tmp_path / "x.db", source=src)


def test_cli_format_option(tmp_path, capsys):
    code = main(
        ["build", "--from", str(FIXTURES / "s2-papers.jsonl"), "--format", "s2", "--db", str(tmp_path / "x.db")]
    )
    assert code == 0 and "3 papers" in capsys.readouterr().out
    with pytest.raises(SystemExit) as info:
        main(["build", "--from", "x", "--format", "bibtex"])
    assert info.value.code == 2


def test_mock_clients_merge_by_rule_when_they_disagree(tmp_path):
    arxiv_view = [Paper("p1", "Title from arXiv", "", 2020, ["A. Author"])]
    s2_view = [
        Paper("p1", "Title from S2", "Abstract from S2.", 2019, ["Author, A."], ["p2"], [], "s2"),
        Paper("p2", "Only in S2", "Cited paper.", 2018, ["B. Author"], [], ["p1"], "s2"),
    ]
    merged = merge_clients(ArxivMockClient(arxiv_view), SemanticScholarMockClient(s2_view))
    p1, p2 = merged
    assert (p1.title, p1.abstract, p1.year, p1.authors) == (
        "Title from arXiv",
        "Abstract from S2.",
        2019,
        ["A. Author"],
    )
    assert p1.references == ["p2"] and p1.source == "arxiv+s2"
    assert p1.field_sources == {
        "title": "arxiv", "abstract": "s2", "authors": "arxiv", "year": "s2", "references": "s2", "citations": "s2",
    }  # fmt: skip
    assert p2.source == "s2" and p2.field_sources["title"] == "s2"
    db = build_from_clients(ArxivMockClient(arxiv_view), SemanticScholarMockClient(s2_view), db=tmp_path / "m.db")
    with RetrievalClient(db=db) as c:
        assert c.paper("p1").title == "Title from arXiv"
    with sqlite3.connect(tmp_path / "m.db") as conn:
        who = dict(conn.execute("SELECT field, source FROM field_sources WHERE paper_id = 'p1'"))
    assert who["abstract"] == "s2" and who["title"] == "arxiv"
    with pytest.raises(ValueError):
        merge_records(None, None)
