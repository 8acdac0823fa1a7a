import gzip
import json

import pytest

from retrieval import ArxivMockClient, InputError, SemanticScholarMockClient, build_corpus, read_jsonl
from retrieval.corpus import merge_clients
from retrieval.corpus.jsonl import read_papers
from retrieval.corpus.mock import TOPICS
from tests.helpers import paper, write_jsonl


def test_demo_corpus_shape():
    corpus = build_corpus()
    assert [p.id for p in corpus] == [f"p{i:03d}" for i in range(1, 101)]
    assert corpus[0].title == "Attention Sparsity study 1"
    assert corpus[20].title == "Retrieval Augmentation study 1"
    assert {p.year for p in corpus} == set(range(2018, 2026))
    assert corpus[0].authors == ["Author 1-1", "Coauthor 1-1"]
    assert build_corpus() == corpus  # deterministic


def test_demo_corpus_citations_follow_the_rules():
    by_id = {p.id: p for p in build_corpus()}
    for t in range(len(TOPICS)):
        first, second = f"p{t * 20 + 1:03d}", f"p{t * 20 + 2:03d}"
        next_first = f"p{(t + 1) % 5 * 20 + 1:03d}"
        for i in range(20):
            refs = by_id[f"p{t * 20 + i + 1:03d}"].references
            expected = ([first, second] if i >= 2 else []) + ([next_first] if i == 5 else [])
            assert refs == expected
    # references and citations agree
    for p in by_id.values():
        for ref in p.references:
            assert p.id in by_id[ref].citations
        for citer in p.citations:
            assert p.id in by_id[citer].references


def test_mock_clients_expose_different_fields():
    corpus = build_corpus()
    arxiv, s2 = ArxivMockClient(corpus), SemanticScholarMockClient(corpus)
    hits = arxiv.search("retrieval augmentation")
    assert hits and all(h.source == "arxiv" and h.references == [] and h.citations == [] for h in hits)
    assert any(h.references for h in s2.search("attention sparsity"))
    assert s2.fetch("p003").references == ["p001", "p002"]
    assert s2.fetch("nope") is None
    merged = merge_clients(arxiv, s2)
    assert [p.id for p in merged] == [p.id for p in corpus]
    assert merged[2].references == ["p001", "p002"] and merged[2].title == corpus[2].title


def test_reads_records_with_line_numbers(tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [paper("a", references=["b"]), "", paper("b", year=None)])
    out = list(read_jsonl(path))
    assert [(n, p.id) for n, p in out] == [(1, "a"), (3, "b")]
    assert out[0][1].references == ["b"] and out[1][1].year is None
    assert out[0][1].source == "c.jsonl"


def test_a_byte_order_mark_starting_any_line_is_read_and_a_cr_only_file_is_named(tmp_path):
    """A mark was taken on line 1 only: after a blank first line, or where files saved with one were joined with
    `cat`, it was refused with Python's "decode using utf-8-sig". A file of CR-only line ends (old Mac) was one
    line with "Extra data at column ..."."""
    joined = tmp_path / "joined.jsonl"
    joined.write_bytes(b"\n" + b"\xef\xbb\xbf" + json.dumps(paper("a")).encode() + b"\n\xef\xbb\xbf"
                       + json.dumps(paper("b")).encode() + b"\n")  # fmt: skip
    assert [(n, p.id) for n, p in read_jsonl(joined)] == [(2, "a"), (3, "b")]
    cr = tmp_path / "cr.jsonl"
    cr.write_bytes(json.dumps(paper("a")).encode() + b"\r" + json.dumps(paper("b")).encode() + b"\r")
    with pytest.raises(InputError, match=r"cr.jsonl:1: invalid JSON \(Extra data at column \d+\); the lines end with a "
                       r"carriage return alone \(CR\): convert them"):  # fmt: skip
        list(read_jsonl(cr))


def test_reads_gzip(tmp_path):
    path = tmp_path / "c.jsonl.gz"
    with gzip.open(path, "wt") as handle:
        handle.write(json.dumps(paper("a")) + "\n")
    assert [p.id for _, p in read_jsonl(path)] == ["a"]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("{not json", "invalid JSON"),
        ('{"id": "x\t", "title": "t"}', "invalid JSON (Invalid control character at column 10)"),  # not "at at"
        ("[1, 2]", "expected a JSON object"),
        # json keeps the last of two values silently: which one the writer meant is unknown
        ('{"id": "x", "title": "t", "id": "y"}', "the key 'id' is written twice in one object: keep the one you"),
        ('{"id": "x", "title": "t", "authors": [{"n": 1, "n": 2}]}', "the key 'n' is written twice"),
        (json.dumps({"title": "x"}), "missing 'id'"),
        (json.dumps({"id": "x"}), "has no 'title'"),
        (json.dumps({"id": "x", "title": "t", "year": "1999"}), "'year' must be an integer"),
        (json.dumps({"id": "x", "title": "t", "year": 1999.5}), "'year' must be an integer"),
        (json.dumps({"id": "x", "title": "t", "year": True}), "'year' must be an integer"),
        (json.dumps({"id": "x", "title": "t", "references": "y"}), "'references' must be a list"),
        (json.dumps({"id": "x", "title": "t", "authors": [1]}), "'authors' must be a list"),
        (json.dumps({"id": "x", "title": "t", "authors": ["A", ""]}), "'authors' entry 2 is blank: leave an unknown"),
        (json.dumps({"id": "x", "title": "t", "authors": ["  "]}), "'authors' entry 1 is blank"),
        (json.dumps({"id": "x", "title": "t", "authors": ["A\tB"]}), "'authors' entry 1 'A\\tB' holds a control"),
        (json.dumps(paper("a")), "duplicate id 'a'"),
        (json.dumps(paper("a\u2028b")), r"'id' 'a\u2028b' holds a control character"),
        (json.dumps(paper("a\u0085b")), r"'id' 'a\x85b' holds a control character"),
        # a reference with a NUL was cut at it by the build: "A\u0000B" became a citation of paper A
        (json.dumps({"id": "x", "title": "t", "references": ["a\u0000b"]}), r"'references' entry 1 'a\x00b' holds"),
        (json.dumps({"id": "x", "title": "t", "references": ["a", " "]}), "'references' entry 2 is blank"),
        (json.dumps({"id": "x", "title": "t", "references": ["a1\n"]}), r"'references' entry 1 'a1\n' holds a"),
        (
            json.dumps({"id": "W1", "title": "t", "referenced_works": ["https://openalex.org/"]}),
            "'referenced_works' entry 1 is blank",
        ),
        (
            json.dumps(
                {
                    "id": "https://openalex.org/W1",
                    "title": "t",
                    "authorships": [{"author": {"display_name": "Jane\tDoe"}}],
                }
            ),
            r"'authors' entry 1 'Jane\tDoe' holds a control character",
        ),
        (
            json.dumps({"paperId": "s1", "title": "t", "references": [{"paperId": "  "}]}),
            "'references' entry 1 is blank",
        ),
        (
            json.dumps({"paperId": "s1", "title": "t", "authors": [{"name": "Jane\nDoe"}]}),
            r"'authors' entry 1 'Jane\nDoe' holds a control character",
        ),
    ],
)
def test_bad_records_name_file_and_line(tmp_path, line, reason):
    from retrieval.corpus.jsonl import detect_format

    try:
        kind = detect_format(json.loads(line))
    except (ValueError, AttributeError):  # not JSON, or not an object: the project's format is asked for
        kind = None
    first = [paper("a"), paper("b")]
    if kind == "openalex":
        first = [{"id": f"https://openalex.org/W{i}", "title": "t"} for i in (7, 8)]
    elif kind == "s2":
        first = [{"paperId": f"s{i}", "title": "t"} for i in (7, 8)]
    path = write_jsonl(tmp_path / "bad.jsonl", [*first, line])
    with pytest.raises(InputError) as info:
        list(read_papers(path, kind if kind in ("openalex", "s2") else "jsonl"))
    assert info.value.line == 3
    assert str(info.value).startswith(f"{path}:3: ")
    assert reason in str(info.value)
