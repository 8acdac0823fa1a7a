"""The web pages (``retrieval.interfaces.http.web``) through FastAPI's test client, and the evidence drawing
(``retrieval.interfaces.http.svg``) as a pure function: what each page shows, TeX rendered, escaping, errors as HTML
pages with the API's status codes, the downloads for reference managers, the paper pages' meta tags read as
Zotero's Embedded Metadata translator reads them, and the graph's views, links, caps, classes, tooltips and
deterministic layout. The same pages in a real browser: ``tests/test_browser.py``."""

from __future__ import annotations

import math
import random
import re
import shutil
from html.parser import HTMLParser

import bibtexparser
import pytest
import rispy

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402

from retrieval import RetrievalClient  # noqa: E402
from retrieval.interfaces.http import svg  # noqa: E402
from retrieval.interfaces.http.app import create_app  # noqa: E402
from retrieval.interfaces.output import export  # noqa: E402
from retrieval.interfaces.service import Service  # noqa: E402
from tests.test_display import S2_ID, output_db  # noqa: E402, F401 (a fixture)

QUERY = "attention sparsity"


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs) -> None:
        self.found.append((tag, {k: v or "" for k, v in attrs}))

    handle_startendtag = handle_starttag


def elements(html: str, *classes: str, tag: str | None = None) -> list[dict]:
    """The attributes of every element of ``html`` (of ``tag``, if given) whose class list holds all of
    ``classes``, in document order."""
    parser = _Elements()
    parser.feed(html)
    out = []
    for name, attrs in parser.found:
        if tag is not None and name != tag:
            continue
        if set(classes) <= set(attrs.get("class", "").split()):
            out.append(attrs)
    return out


def listed_links(html: str) -> list[str]:
    """The ids a paper page lists as references or citing papers (not its similar papers)."""
    return [li["data-id"] for li in elements(html, tag="li") if li.get("data-id") and "result" not in li["class"]]


def by_id(html: str, element_id: str) -> dict:
    found = [attrs for attrs in elements(html) if attrs.get("id") == element_id]
    assert len(found) == 1, f"expected one element #{element_id}, found {len(found)}"
    return found[0]


@pytest.fixture(scope="module")
def service(demo_db):
    service = Service(demo_db)
    yield service
    service.close()


@pytest.fixture(scope="module")
def web(service):
    with TestClient(create_app(service)) as client:
        yield client


# -- the search page ---------------------------------------------------------------------------------------------


def test_home_page_is_a_search_form(web):
    page = web.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    form = elements(page.text, "search", tag="form")[0]
    assert form["method"] == "get" and form["action"] == "/"
    names = {attrs.get("name") for attrs in elements(page.text, tag="input")}
    assert {"q", "year", "author"} <= names
    assert "<script" not in page.text and "http://" not in page.text.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_search_page_shows_the_ranking_with_why_and_links(web, demo_db):
    page = web.get("/", params={"q": QUERY})
    assert page.status_code == 200
    with RetrievalClient(demo_db) as client:
        result = client.search(QUERY, limit=10)
    shown = elements(page.text, "result", tag="li")
    assert [r["data-id"] for r in shown] == [e.paper.id for e in result.ranked]
    first = result.ranked[0]
    assert first.why() in page.text.replace("&gt;", ">")
    assert f'href="/paper/{first.paper.id}"' in page.text
    assert f'href="/paper/{first.paper.id}#similar"' in page.text
    assert "/explain-view?q=attention+sparsity&amp;focus=" in page.text
    assert by_id(page.text, "summary")["data-matched"] == str(result.matched)
    lead = " ".join(first.paper.lead(2))
    if lead:
        assert lead.replace("&", "&amp;")[:40] in page.text
    for author in first.paper.authors[:3]:
        assert author.replace("&", "&amp;").replace("'", "&#x27;") in page.text


def test_search_page_pages_through_the_same_ranking(web, demo_db):
    first = web.get("/", params={"q": "study", "limit": 5})
    second = web.get("/", params={"q": "study", "limit": 5, "offset": 5})
    with RetrievalClient(demo_db) as client:
        ranked = [e.paper.id for e in client.search("study", limit=10).ranked]
    ids = [r["data-id"] for r in elements(first.text, "result", tag="li")]
    ids += [r["data-id"] for r in elements(second.text, "result", tag="li")]
    assert ids == ranked and len(ranked) == 10
    assert 'rel="next"' in first.text and "offset=5" in first.text
    assert 'rel="prev"' in second.text
    assert [r["data-rank"] for r in elements(second.text, "result", tag="li")][0] == "6"


def test_pages_go_past_the_matched_papers_to_the_end_of_the_ranking(web, demo_db):
    """The "next" link stopped at the papers holding a query word (``matched``); the papers the graph added
    after them were never offered (hep-th's "zanelli": 24 matched, a ranking of 362)."""
    with RetrievalClient(demo_db) as client:
        whole = client.search("retrieval", limit=100)
    ranked = [e.paper.id for e in whole.ranked]
    assert whole.matched < whole.length == len(ranked)  # the graph adds papers holding no query word
    assert web.get("/search", params={"q": "retrieval", "limit": 5}).json()["length"] == whole.length
    assert paged_ids(web, "/?q=retrieval&limit=5") == ranked


def paged_ids(web, href: str) -> list[str]:
    """The ids of every page from ``href`` on, following each page's "next" link."""
    ids: list[str] = []
    while href:
        page = web.get(href.replace("&amp;", "&")).text
        ids += [r["data-id"] for r in elements(page, "result", tag="li")]
        found = re.search(r'rel="next" href="([^"]+)"', page)
        href = found.group(1) if found else None
    return ids


def test_pages_go_past_the_ranked_candidates_to_the_rest_of_the_bm25_list(tmp_path):
    """A page near the top reports the ranking as deep as it asked (``length``: the ranked candidates), shorter
    than the papers that match: the "next" link must go on to the BM25 list past them."""
    from retrieval.commands import build
    from tests.helpers import corpus

    db = tmp_path / "many.db"
    build(db=db, source=corpus(tmp_path / "many.jsonl", 1500))
    with RetrievalClient(db) as client:
        first = client.search("w1 w2 w3", limit=50)
        whole = [e.paper.id for e in client.search("w1 w2 w3", limit=1000).ranked]
    assert first.length < first.matched <= len(whole)
    service = Service(db)
    try:
        with TestClient(create_app(service)) as web:
            ids = paged_ids(web, "/?q=w1+w2+w3&limit=50")
    finally:
        service.close()
    assert ids == whole


def test_a_page_past_the_end_links_to_the_last_page(web, demo_db):
    """An edited address (or an index that shrank) past the results linked "previous" to another empty page."""
    with RetrievalClient(demo_db) as client:
        matched = client.search("study", limit=1).matched
    page = web.get("/", params={"q": "study", "limit": 5, "offset": 1000})
    assert not elements(page.text, "result", tag="li")
    prev = re.search(r'rel="prev" href="([^"]+)">([^<]+)<', page.text)
    assert prev.group(2) == "← the last page"
    last = web.get(prev.group(1).replace("&amp;", "&"))
    ranks = [int(r["data-rank"]) for r in elements(last.text, "result", tag="li")]
    assert ranks and ranks[-1] == matched and len(ranks) <= 5


def test_search_page_applies_the_filters_and_shows_warnings(web, demo_db):
    with RetrievalClient(demo_db) as client:
        expected = client.search(QUERY, limit=10, year="2020-")
    page = web.get("/", params={"q": QUERY, "year": "2020-"})
    assert [r["data-id"] for r in elements(page.text, "result", tag="li")] == [e.paper.id for e in expected.ranked]
    assert 'value="2020-"' in page.text
    warned = web.get("/", params={"q": "attention qqqzzzunknownword"})
    assert warned.status_code == 200 and 'class="warnings"' in warned.text and "qqqzzzunknownword" in warned.text


def test_everything_from_a_request_or_the_index_is_escaped(web):
    page = web.get("/", params={"q": '<script>alert("x")</script> attention'})
    assert page.status_code == 200
    assert "<script>" not in page.text and "&lt;script&gt;" in page.text
    assert "<script>" not in web.get("/explain-view", params={"q": "<script>attention"}).text


# -- the paper page ----------------------------------------------------------------------------------------------


def _paper_with(demo_db, kind: str) -> str:
    """A paper of the demo corpus with references (``kind="references"``) or citing papers (``"citations"``)."""
    with RetrievalClient(demo_db) as client:
        for entry in client.search("study", limit=100).ranked:
            if getattr(client.show(entry.paper.id).paper, kind):
                return entry.paper.id
    pytest.fail(f"no paper of the demo corpus has {kind}")


@pytest.mark.parametrize("kind", ["references", "citations"])
def test_paper_page_lists_references_citing_papers_and_similar_ones(web, service, demo_db, kind):
    pid = _paper_with(demo_db, kind)
    page = web.get(f"/paper/{pid}")
    assert page.status_code == 200
    data = service.paper(pid)
    assert data[kind]
    assert by_id(page.text, "references") and by_id(page.text, "citations") and by_id(page.text, "similar")
    listed = listed_links(page.text)
    for ref in data["references"] + data["citations"]:
        assert ref["id"] in listed
        if ref["in_corpus"]:
            assert f'href="/paper/{ref["id"]}"' in page.text
            assert (ref["title"] or "").replace("&", "&amp;").replace("'", "&#x27;") in page.text
    similar = service.similar([pid], limit=10)["results"]
    shown = [li["data-id"] for li in elements(page.text, "result", tag="li")]
    assert shown == [r["id"] for r in similar]
    assert data["abstract"][:40].replace("&", "&amp;").replace("'", "&#x27;") in page.text


def test_a_long_list_is_paged_and_its_next_links_walk_all_of_it(web, service, demo_db, monkeypatch):
    from retrieval.interfaces.http import web as pages

    pid = _paper_with(demo_db, "citations")
    monkeypatch.setattr(pages, "LIST_CAP", 1)
    citing = service.paper(pid, limit=100)["citations"]
    assert len(citing) > 1
    page = web.get(f"/paper/{pid}")
    listed = listed_links(page.text)
    assert citing[0]["id"] in listed and citing[1]["id"] not in listed
    assert f"1-1 of {len(citing)}" in page.text
    walked, href = [], f"/paper/{pid}"
    while href:  # each page's "next" link, as a reader would follow it
        text = web.get(href.replace("&amp;", "&")).text
        found = re.search(r'<ul class="links citations"><li[^>]* data-id="([^"]+)"', text)
        walked.append(found.group(1))
        following = re.search(r'rel="next" href="([^"]+#citations)"', text)
        href = following.group(1).split("#")[0] if following else None
    assert walked == [c["id"] for c in citing]
    past = web.get(f"/paper/{pid}?citations_offset={len(citing) + 5}").text  # past the end: to the last one
    back = re.search(r'rel="prev" href="([^"]+#citations)">([^<]+)<', past)
    assert back.group(2) == "← the last 1"
    text = web.get(back.group(1).split("#")[0].replace("&amp;", "&")).text
    assert re.search(r'<ul class="links citations"><li[^>]* data-id="([^"]+)"', text).group(1) == citing[-1]["id"]


# -- TeX, downloads and meta tags for reference managers ---------------------------------------------------------


@pytest.fixture(scope="module")
def output_web(output_db):  # noqa: F811
    """The pages over papers whose titles and names are TeX and whose ids are arXiv, OpenAlex and S2 ids."""
    service = Service(output_db)
    with TestClient(create_app(service)) as client:
        yield client
    service.close()


def test_a_title_searched_from_its_page_finds_its_paper(tmp_path):
    """The page's "search for this title" link read "M -theory on AdS_4" as "leave out theory": the paper was not
    among the results of a search for its own title."""
    from retrieval.commands import build
    from retrieval.corpus.paper import Paper

    papers = [Paper("m1", "M -theory on AdS_4 and Self -dual branes", "branes", 2000, [], [], source="t")]
    papers += [Paper(f"p{i}", f"theory of branes {i}", "theory", 2000, [], [], source="t") for i in range(5)]
    db = tmp_path / "titles.db"
    build(db=db, source=papers)
    service = Service(db)
    try:
        with TestClient(create_app(service)) as client:
            page = client.get("/paper/m1").text
            href = re.search(r'<a href="([^"]+)">search for this title</a>', page).group(1)
            results = client.get(href.replace("&amp;", "&")).text
    finally:
        service.close()
    assert "/paper/m1" in results


def test_pages_show_tex_rendered(output_web):
    page = output_web.get("/", params={"q": "black hole entropy", "limit": 20}).text
    assert "Hyperkähler black hole entropy" in page and "Hyperk\\&quot;ahler" not in page
    assert "The Large N Limit of Superconformal" in page and "$N$" not in page
    paper = output_web.get(f"/paper/{S2_ID}").text
    assert re.search(r"<h1[^>]*>Hyperkähler black hole entropy:", paper)
    assert "\\cal" not in paper.split("<main")[1]


def test_search_page_offers_each_result_and_the_page_as_bibtex_and_ris(output_web, output_db):  # noqa: F811
    params = {"q": "black hole entropy", "limit": 3, "offset": 1}
    page = output_web.get("/", params=params).text
    ids = [r["data-id"] for r in elements(page, "result", tag="li")]
    downloads = [a["href"] for a in elements(page, "download", tag="a")]
    assert downloads[:2] == [f"/export.bib?{_query(params)}", f"/export.ris?{_query(params)}"]
    assert downloads[2:] == [f"/paper/{pid}.{ext}" for pid in ids for ext in ("bib", "ris")]
    bib = output_web.get(downloads[0])
    assert bib.status_code == 200 and bib.headers["content-type"] == "application/x-bibtex; charset=utf-8"
    assert bib.headers["content-disposition"] == 'attachment; filename="black-hole-entropy-2-4.bib"'
    with RetrievalClient(output_db) as client:
        papers = [e.paper for e in client.search("black hole entropy", limit=3, offset=1).ranked]
    assert [p.id for p in papers] == ids
    assert bib.text == export.to_bibtex(papers) and len(bibtexparser.parse_string(bib.text).entries) == 3
    ris = output_web.get(downloads[1])
    assert ris.headers["content-type"] == "application/x-research-info-systems; charset=utf-8"
    assert ris.headers["content-disposition"].endswith('filename="black-hole-entropy-2-4.ris"')
    assert [r["id"] for r in rispy.loads(ris.text)] == ids


def _query(params: dict) -> str:
    from urllib.parse import urlencode

    return urlencode({k: str(v) for k, v in params.items()})


def test_a_paper_downloads_as_bibtex_and_ris(output_web):
    bib = output_web.get("/paper/hep-th/9711200.bib")
    assert bib.status_code == 200 and bib.headers["content-type"].startswith("application/x-bibtex")
    assert bib.headers["content-disposition"] == 'attachment; filename="hep-th-9711200.bib"'
    (entry,) = bibtexparser.parse_string(bib.text).entries
    assert entry.key == "maldacena1997large" and entry["eprint"] == "hep-th/9711200"
    assert entry["title"] == "The Large $N$ Limit of Superconformal Field Theories and Supergravity"  # TeX kept
    ris = output_web.get("/paper/hep-th/9711200.ris")
    (record,) = rispy.loads(ris.text)
    assert record["type_of_reference"] == "UNPB" and record["authors"] == ["Maldacena, Juan M."]
    assert record["title"] == "The Large N Limit of Superconformal Field Theories and Supergravity"  # rendered
    page = output_web.get("/paper/hep-th/9711200").text
    assert {a["href"] for a in elements(page, "download", tag="a")} == {
        "/paper/hep-th/9711200.bib", "/paper/hep-th/9711200.ris"
    }  # fmt: skip


def test_downloads_are_pages_not_api_and_fail_as_pages(output_web):
    missing = output_web.get("/paper/no/such/paper.bib")
    assert missing.status_code == 404 and elements(missing.text, "error")[0]["data-status"] == "404"
    empty = output_web.get("/export.ris")
    assert empty.status_code == 400 and "give a query" in empty.text
    schema = output_web.get("/openapi.json").json()
    assert not [path for path in schema["paths"] if "export" in path or path.endswith((".bib", ".ris"))]


#: Zotero's item types (its schema), for the Dublin Core type the RDF translator accepts (``ZU.itemTypeExists``).
ZOTERO_ITEM_TYPES = {
    "artwork", "audioRecording", "bill", "blogPost", "book", "bookSection", "case", "computerProgram",
    "conferencePaper", "dataset", "dictionaryEntry", "document", "email", "encyclopediaArticle", "film",
    "forumPost", "hearing", "instantMessage", "interview", "journalArticle", "letter", "magazineArticle",
    "manuscript", "map", "newspaperArticle", "patent", "podcast", "preprint", "presentation", "radioBroadcast",
    "report", "standard", "statute", "thesis", "tvBroadcast", "videoRecording", "webpage",
}  # fmt: skip
#: Embedded Metadata.js's HIGHWIRE_MAPPINGS (zotero/translators, "lastUpdated" of 2025): meta name -> field.
HIGHWIRE_MAPPINGS = {
    "citation_title": "title", "citation_publication_date": "date", "citation_cover_date": "date",
    "citation_date": "date", "citation_journal_title": "publicationTitle",
    "citation_journal_abbrev": "journalAbbreviation", "citation_inbook_title": "publicationTitle",
    "citation_book_title": "bookTitle", "citation_volume": "volume", "citation_issue": "issue",
    "citation_series_title": "series", "citation_conference_title": "conferenceName",
    "citation_conference": "conferenceName", "citation_dissertation_institution": "university",
    "citation_technical_report_institution": "institution", "citation_technical_report_number": "number",
    "citation_publisher": "publisher", "citation_isbn": "ISBN", "citation_abstract": "abstractNote",
    "citation_doi": "DOI", "citation_public_url": "url", "citation_language": "language",
}  # fmt: skip
HW_TYPES = {
    "citation_journal_title": "journalArticle", "citation_technical_report_institution": "report",
    "citation_conference_title": "conferencePaper", "citation_conference": "conferencePaper",
    "citation_book_title": "bookSection", "citation_inbook_title": "bookSection",
    "citation_dissertation_institution": "thesis",
}  # fmt: skip


class _Meta(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, str]] = []

    def handle_starttag(self, tag, attrs) -> None:
        attrs = dict(attrs)
        name = attrs.get("name") or attrs.get("property")
        if tag == "meta" and name and attrs.get("content"):
            self.tags.append((name, attrs["content"]))


def zotero_embedded_metadata(html: str) -> dict:
    """A page's meta tags read as Zotero's Embedded Metadata translator reads them (zotero/translators, "Embedded
    Metadata.js"): the item type from the Highwire tags (``citation_journal_title`` and the like set it;
    ``citation_title`` only guesses journalArticle), unless Dublin Core's type names a Zotero item type, which its
    RDF translator prefers to the guess; each field by ``HIGHWIRE_MAPPINGS`` (the last of a field's tags wins);
    each ``citation_author`` one creator, split at its comma into lastName and firstName (``ZU.cleanAuthor``
    with useComma), or at its last space without one, a lone tag with spaces on both sides of a comma split into
    two authors; ``citation_pdf_url`` a PDF attachment."""
    parser = _Meta()
    parser.feed(html)
    tags = parser.tags
    names = [name for name, _ in tags]
    hw_type = next((HW_TYPES[n] for n in names if n in HW_TYPES), None)
    guess = "journalArticle" if "citation_title" in names or "citation_series_title" in names else None
    dc_type = next((v for n, v in tags if re.split(r"[.:_]", n)[0].lower() == "dc" and n[3:] == "type"), None)
    dc = dc_type if dc_type in ZOTERO_ITEM_TYPES else None
    item: dict = {"itemType": hw_type or dc or guess or "webpage", "creators": [], "attachments": []}
    for meta, field in HIGHWIRE_MAPPINGS.items():
        value = next((v for n, v in tags if n == meta), None)
        if value and value.strip():
            item[field] = " ".join(value.split())
    authors = [v for n, v in tags if n == "citation_author"]
    if len(authors) == 1 and len(authors[0].split(";")) == 1:
        halves = re.split(r"\s*,\s*", authors[0])
        if len(halves) > 1 and " " in halves[0] and " " in halves[1]:
            authors = halves  # read as two authors
    for author in authors:
        if "," in author:
            last, _, first = author.partition(",")
        else:
            first, _, last = author.rpartition(" ")
        item["creators"].append({"lastName": last.strip(), "firstName": first.strip(), "creatorType": "author"})
    pdf = next((v for n, v in tags if n == "citation_pdf_url"), None)
    if pdf:
        item["attachments"].append({"title": "Full Text PDF", "url": pdf, "mimeType": "application/pdf"})
    return item


def test_paper_pages_carry_the_meta_tags_zotero_saves_a_preprint_from(output_web):
    page = output_web.get("/paper/hep-th/9802109").text
    item = zotero_embedded_metadata(page)
    assert item["itemType"] == "preprint"
    assert item["title"] == "Gauge Theory Correlators from Non-Critical String Theory"
    assert [(c["lastName"], c["firstName"]) for c in item["creators"]] == [
        ("Gubser", "S. S."), ("Klebanov", "I. R."), ("Polyakov", "A. M."),
    ]  # fmt: skip
    assert item["date"] == "1998" and item["abstractNote"] == "Correlators and black hole entropy."
    assert item["publisher"] == "arXiv" and item["url"] == "https://arxiv.org/abs/hep-th/9802109"
    assert item["attachments"] == [
        {"title": "Full Text PDF", "url": "https://arxiv.org/pdf/hep-th/9802109", "mimeType": "application/pdf"}
    ]
    tags = dict(_meta_tags(page))
    assert tags["citation_arxiv_id"] == "hep-th/9802109" and tags["DC.type"] == "preprint"
    # TeX rendered, names with their particles and accents, one author each.
    tex = zotero_embedded_metadata(output_web.get(f"/paper/{S2_ID}").text)
    assert tex["title"].startswith("Hyperkähler black hole entropy:") and tex["itemType"] == "journalArticle"
    assert [(c["lastName"], c["firstName"]) for c in tex["creators"]] == [("Smith", "John"), ("Jones", "Jr.")]
    assert "DOI" not in tex and tex["url"] == f"https://www.semanticscholar.org/paper/{S2_ID}"
    accents = zotero_embedded_metadata(output_web.get("/paper/1234.5678").text)
    assert [(c["lastName"], c["firstName"]) for c in accents["creators"]] == [("Brézin", "Édouard"),
                                                                              ("Ørsted", "Zoë")]  # fmt: skip


def _meta_tags(html: str) -> list[tuple[str, str]]:
    parser = _Meta()
    parser.feed(html)
    return parser.tags


def test_a_sole_author_with_a_comma_is_not_read_as_two():
    """Zotero splits a lone ``citation_author`` at its comma when both sides have a space ("van der Berg, Jan
    Hendrik"): such a name is written given names first."""
    from retrieval.interfaces.http.web import citation_meta

    html = citation_meta({"id": "hep-th/0001001", "title": "T", "authors": ["Jan Hendrik van der Berg"]})
    creators = zotero_embedded_metadata(html)["creators"]
    assert len(creators) == 1 and creators[0]["lastName"] == "Berg"
    two = citation_meta({"id": "x", "title": "T", "authors": ["Jan Hendrik van der Berg", "Gerard 't Hooft"]})
    assert [c["lastName"] for c in zotero_embedded_metadata(two)["creators"]] == ["van der Berg", "'t Hooft"]


# -- errors ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url, status, words",
    [
        ("/paper/no/such/paper", 404, "no paper 'no/such/paper' in the index"),
        ("/?q=attention&offset=abc", 400, "offset must be a whole number"),
        ("/?q=attention&limit=1000", 400, "limit must be between 1 and 100"),
        ("/?q=attention&year=19x", 400, "is not a year range"),
        ("/?q=" + "a" * 20_001, 413, "more than 20,000"),
        ("/explain-view?q=" + "a" * 20_001, 413, "more than 20,000"),
        ("/explain-view?q=attention&view=bogus", 400, "view is top (the seeds and the top papers) or all"),
        ("/paper/a%0Ab", 404, "no paper 'a\\nb' in the index"),
    ],
)
def test_errors_are_pages_with_the_message_and_the_status(web, url, status, words):
    page = web.get(url)
    assert page.status_code == status
    assert page.headers["content-type"].startswith("text/html")
    error = elements(page.text, "error")[0]
    assert error["data-status"] == str(status)
    assert words in page.text.replace("&#x27;", "'")


def test_every_library_error_has_a_status_of_its_own():
    """The pages and the API share one table (``retrieval.interfaces.service.STATUS``); every error the library raises
    on purpose is a 4xx, a 502 (an upstream API) or a 503 there, never the 500 of an unexpected failure."""
    from retrieval import errors
    from retrieval.interfaces.service import status_of

    kinds = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.RetrievalError)]
    assert len(kinds) >= 9
    for kind in kinds:
        if kind is not errors.RetrievalError:
            assert status_of(kind.__new__(kind)) in (400, 404, 413, 502, 503), kind.__name__


def test_an_index_that_went_away_is_503(demo_db, tmp_path):
    copy = tmp_path / "gone.db"
    shutil.copyfile(demo_db, copy)
    service = Service(copy)
    copy.unlink()
    with TestClient(create_app(service)) as client:
        page = client.get("/", params={"q": QUERY})
    assert page.status_code == 503 and "no index at" in page.text and "<html" in page.text


# -- the evidence view -------------------------------------------------------------------------------------------


def test_evidence_view_draws_every_node_and_edge_of_the_run(web, service):
    page = web.get("/explain-view", params={"q": QUERY, "view": "all"})
    assert page.status_code == 200
    graph = service.explain(QUERY)["graph"]
    nodes = elements(page.text, "node", tag="circle")
    edges = elements(page.text, "edge", tag="path")
    drawn = by_id(page.text, "drawn")
    assert len(nodes) == len(graph["nodes"]) == int(drawn["data-nodes"]) == int(drawn["data-nodes-total"])
    assert len(edges) == len(graph["edges"]) == int(drawn["data-edges"])
    assert {n["data-id"] for n in nodes} == {n["paper_id"] for n in graph["nodes"]}
    seeds = {n["data-id"] for n in elements(page.text, "node", "seed", tag="circle")}
    assert seeds == {n["paper_id"] for n in graph["nodes"] if n["role"] == "seed"}
    assert int(drawn["data-seeds"]) == len(seeds)
    kept = elements(page.text, "edge", "kept", tag="path")
    assert len(kept) == sum(e["kept"] for e in graph["edges"]) == int(drawn["data-kept"])
    assert len(elements(page.text, "edge", "pruned", tag="path")) == int(drawn["data-pruned"])
    ranked = [li["data-id"] for li in elements(page.text, "result", tag="li")]
    assert ranked == [r["paper_id"] for r in service.explain(QUERY)["results"]]


def test_evidence_view_shows_the_top_papers_first_and_the_rest_behind_a_link(web, service):
    """By default the seeds, the ranked papers and the kept edges among them; ``view=all`` (the link) draws the
    whole graph. Every paper drawn is a link to its page."""
    data = service.explain(QUERY)
    graph = data["graph"]
    page = web.get("/explain-view", params={"q": QUERY})
    drawn = by_id(page.text, "drawn")
    nodes = {n["data-id"] for n in elements(page.text, "node", tag="circle")}
    seeds = {n["paper_id"] for n in graph["nodes"] if n["role"] == "seed"}
    assert nodes == seeds | {r["paper_id"] for r in data["results"]} and drawn["data-view"] == "top"
    assert int(drawn["data-nodes"]) == len(nodes) < int(drawn["data-nodes-total"]) == len(graph["nodes"])
    edges = {(e["data-citing"], e["data-cited"]) for e in elements(page.text, "edge", tag="path")}
    kept_among = {(e["citing"], e["cited"]) for e in graph["edges"] if e["kept"] and {e["citing"], e["cited"]} <= nodes}
    assert edges == kept_among and not elements(page.text, "edge", "pruned", tag="path")
    links = [a["href"] for a in elements(page.text, "paper-link", tag="a")]
    assert sorted(links) == sorted(f"/paper/{pid}" for pid in nodes)
    toggle = by_id(page.text, "view-toggle")
    assert toggle["href"] == "/explain-view?q=attention+sparsity&amp;view=all".replace("&amp;", "&")
    whole = web.get(toggle["href"])
    assert by_id(whole.text, "drawn")["data-view"] == "all"
    assert len(elements(whole.text, "node", tag="circle")) == len(graph["nodes"])
    assert by_id(whole.text, "view-toggle")["href"] == "/explain-view?q=attention+sparsity"


def test_evidence_view_rings_and_labels_the_paper_asked_about(web, service):
    data = service.explain(QUERY)
    ranked = {r["paper_id"] for r in data["results"]}
    pid = next(n["paper_id"] for n in reversed(data["graph"]["nodes"]) if n["paper_id"] not in ranked)
    for view in ("top", "all"):  # drawn in both views, though not among the top papers
        page = web.get("/explain-view", params={"q": QUERY, "focus": pid, "view": view})
        assert [n["data-id"] for n in elements(page.text, "node", "focus", tag="circle")] == [pid]
        assert len(elements(page.text, "focus-ring", tag="circle")) == 1 and ">asked about</text>" in page.text
        assert by_id(page.text, "focus") and f'href="/paper/{pid}"' in page.text
    missing = web.get("/explain-view", params={"q": QUERY, "focus": "not/a/paper"})
    assert "not in the drawn graph" in missing.text


def test_evidence_view_without_a_query_is_a_form(web):
    page = web.get("/explain-view")
    assert page.status_code == 200 and 'action="/explain-view"' in page.text
    assert "<svg" not in page.text.split("<main")[1]


# -- the drawing, as a pure function -----------------------------------------------------------------------------


def synthetic_graph(n_seeds: int, n_others: int, n_edges: int, seed: int = 7) -> dict:
    rng = random.Random(seed)
    nodes = []
    for i in range(n_seeds):
        nodes.append(
            dict(paper_id=f"s{i:03d}", title=f"Seed <{i}> & co", year=2000 + i % 10, role="seed",
                 seed={"relevance": 1.0 - i / 100}, links=[], kept=True, score=rng.random())
        )  # fmt: skip
    for i in range(n_others):
        links = [{"seed": f"s{rng.randrange(n_seeds):03d}", "relation": rng.choice(["reference", "citing"])}]
        kept = rng.random() > 0.1
        nodes.append(
            dict(paper_id=f"p{i:04d}", title=f"Paper {i}", year=None if i % 17 == 0 else 1990 + i % 30,
                 role=links[0]["relation"], seed=None, links=links, kept=kept,
                 reason=None if kept else "no edge left after pruning", score=rng.random() * 0.1)
        )  # fmt: skip
    ids = [n["paper_id"] for n in nodes]
    edges = {}
    while len(edges) < n_edges:
        a, b = rng.sample(ids, 2)
        kept = rng.random() > 0.3
        edges[(a, b)] = dict(
            citing=a, cited=b, delta=1.0 if kept else 0.0, weight=rng.random() if kept else 0.0, kept=kept,
            reason=None if kept else "Delta 0.000 < tau 0.3",
        )  # fmt: skip
    return {"nodes": nodes, "edges": list(edges.values())}


def test_a_large_graph_is_capped_to_the_seeds_and_the_best_papers():
    graph = synthetic_graph(12, 400, 1500)
    drawing = svg.draw(graph)
    best = sorted((n for n in graph["nodes"] if n["role"] != "seed"), key=lambda n: (-n["score"], n["paper_id"]))
    expected = {n["paper_id"] for n in graph["nodes"] if n["role"] == "seed"} | {
        n["paper_id"] for n in best[: svg.MAX_NODES]
    }
    assert drawing.drawn_ids == expected
    assert (drawing.nodes_drawn, drawing.nodes_total, drawing.seeds_drawn) == (12 + svg.MAX_NODES, 412, 12)
    among = [e for e in graph["edges"] if e["citing"] in expected and e["cited"] in expected]
    assert drawing.edges_drawn == len(among) < drawing.edges_total == 1500
    assert drawing.kept_drawn == sum(e["kept"] for e in among)
    assert len(elements(drawing.svg, "node", tag="circle")) == drawing.nodes_drawn
    assert len(elements(drawing.svg, "node", "seed", tag="circle")) == 12
    assert len(elements(drawing.svg, "edge", "kept", tag="path")) == drawing.kept_drawn
    assert len(elements(drawing.svg, "edge", "pruned", tag="path")) == drawing.pruned_drawn
    assert not drawing.complete


def test_the_edge_cap_keeps_kept_edges_by_weight():
    graph = synthetic_graph(5, 40, 600)
    drawing = svg.draw(graph, max_edges=100)
    assert drawing.edges_drawn == 100
    kept = sorted((e for e in graph["edges"] if e["kept"]), key=lambda e: -e["weight"])
    drawn = {(a["data-citing"], a["data-cited"]) for a in elements(drawing.svg, "edge", tag="path")}
    assert {(e["citing"], e["cited"]) for e in kept[:100]} == drawn


def test_every_node_and_edge_has_a_tooltip_and_the_text_is_escaped():
    graph = synthetic_graph(3, 20, 40)
    drawing = svg.draw(graph)
    titles = re.findall(r"<title>(.*?)</title>", drawing.svg, flags=re.S)
    assert len(titles) == drawing.nodes_drawn + drawing.edges_drawn
    assert "Seed &lt;0&gt; &amp; co (2000)" in drawing.svg
    assert "<0>" not in drawing.svg
    pruned = [t for t in titles if "pruned" in t]
    assert pruned and all("Delta 0.000" in t for t in pruned)
    assert any("no year" in t for t in titles)


def test_the_layout_is_deterministic_and_inside_the_view():
    graph = synthetic_graph(10, 150, 800)
    assert svg.draw(graph).svg == svg.draw(graph).svg
    shuffled = {"nodes": list(reversed(graph["nodes"])), "edges": list(reversed(graph["edges"]))}
    assert svg.layout(shuffled["nodes"]) == svg.layout(graph["nodes"])
    positions = svg.layout(graph["nodes"])
    for node in graph["nodes"]:
        x, y = positions[node["paper_id"]]
        r = math.hypot(x - svg.CENTRE, y - svg.CENTRE)
        if node["role"] == "seed":
            assert r == pytest.approx(svg.RADII["seed"])
        else:
            assert svg.RADII["reference"] - 1 <= r <= svg.RADII["citing"] + svg.STAGGER + 1
    box = [float(v) for v in re.search(r'viewBox="([^"]+)"', svg.draw(graph).svg).group(1).split()]
    for x, y in positions.values():
        assert box[0] < x < box[0] + box[2] and box[1] < y < box[1] + box[3]


def test_node_size_grows_with_score_and_an_empty_graph_draws():
    graph = synthetic_graph(2, 10, 5)
    radii = {a["data-id"]: float(a["r"]) for a in elements(svg.draw(graph).svg, "node", tag="circle")}
    ordered = sorted(graph["nodes"], key=lambda n: n["score"])
    assert [radii[n["paper_id"]] for n in ordered] == sorted(radii.values())
    empty = svg.draw({"nodes": [], "edges": []})
    assert empty.nodes_drawn == empty.edges_drawn == 0 and empty.svg.startswith("<svg")
    single = svg.draw({"nodes": graph["nodes"][:1], "edges": []})
    assert single.seeds_drawn == 1


ODD_IDS = ["..", "a/./b", "notes.bib", "x/../y", "plain/9901001"]


def test_an_id_a_path_cannot_carry_is_linked_by_query_and_its_page_and_downloads_open(tmp_path):
    """A browser resolves ``.`` and ``..`` segments of a link before asking (percent-encoded too), and an id ending
    in ``.bib`` would ask for a download: such ids are linked as ``/paper?id=``, which opens their page."""
    from urllib.parse import urlsplit

    from retrieval import Paper, build

    papers = [
        Paper(pid, f"Entropy of black holes, note {n}", "Black hole entropy counted by strings.", 2000 + n,
              ["A. Strominger"], [ODD_IDS[-1]] if pid != ODD_IDS[-1] else [])
        for n, pid in enumerate(ODD_IDS)
    ]  # fmt: skip
    db = tmp_path / "odd.db"
    build(db, papers)
    service = Service(db)
    try:
        with TestClient(create_app(service)) as client:
            page = client.get("/", params={"q": "black hole entropy", "limit": 10})
            assert page.status_code == 200
            links = [a["href"] for a in elements(page.text, tag="a") if a.get("href", "").startswith("/paper")]
            hrefs = {}
            for href in links:
                parts = urlsplit(href)
                segments = parts.path.split("/")[2:]
                assert not {".", ".."} & set(segments), href  # nothing for the browser to resolve away
                if not parts.fragment and not parts.path.endswith((".bib", ".ris")):
                    hrefs.setdefault(href, None)
            opened = {}
            for href in hrefs:
                got = client.get(href)
                assert got.status_code == 200, (href, got.text[:300])
                opened[href] = [
                    attrs["data-id"] for tag, attrs in _parsed(got.text) if tag == "h1" and "data-id" in attrs
                ][0]
            assert sorted(set(opened.values())) == sorted(ODD_IDS), opened
            # The paper page of each odd id offers downloads that open as that paper's record.
            for pid in ODD_IDS:
                href = next(h for h, got in opened.items() if got == pid)
                paper_page = client.get(href).text
                for a in elements(paper_page, "download", tag="a"):
                    download = client.get(a["href"])
                    assert download.status_code == 200, (pid, a["href"])
                    assert f"note {ODD_IDS.index(pid)}" in download.text, (pid, a["href"], download.text[:200])
            assert client.get("/paper", params={"id": " "}).status_code == 400
    finally:
        service.close()


def _parsed(html: str) -> list[tuple[str, dict]]:
    parser = _Elements()
    parser.feed(html)
    return parser.found
