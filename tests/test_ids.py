"""Ids as people write them (``arXiv:ID``, arxiv.org addresses with a version, DOIs and doi.org addresses) resolve
to the paper wherever an id is taken: the pure normalisation (``retrieval.search.papers.id_forms``, with hypothesis)
and the library, the CLI, the HTTP API and the web page on a real index of both backends."""

from __future__ import annotations

import json
import re
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrieval.corpus.paper import Paper
from retrieval.errors import PaperNotFoundError
from retrieval.interfaces.cli import main
from retrieval.search.client import RetrievalClient
from retrieval.search.papers import ARXIV_DOI_PREFIX, id_forms
from tests.helpers import BACKENDS, index_on

# -- the pure part -----------------------------------------------------------------------------------------------
NEW_STYLE = st.from_regex(r"\A[0-9]{4}\.[0-9]{4,5}\Z")
OLD_STYLE = st.builds(
    lambda archive, cls, number: f"{archive}{cls}/{number}",
    st.sampled_from(["hep-th", "hep-ph", "gr-qc", "math", "cond-mat", "astro-ph", "quant-ph", "cs"]),
    st.sampled_from(["", ".AG", ".DG", ".LG"]),
    st.from_regex(r"\A[0-9]{7}\Z"),
)
ARXIV_IDS = st.one_of(NEW_STYLE, OLD_STYLE)
VERSIONS = st.one_of(st.just(""), st.integers(1, 12).map(lambda v: f"v{v}"))
SCHEMES = st.sampled_from(["https://", "http://", ""])
HOSTS = st.sampled_from(["arxiv.org", "www.arxiv.org", "export.arxiv.org"])
DOIS = st.builds(
    lambda registrant, suffix: f"10.{registrant}/{suffix}",
    st.from_regex(r"\A[0-9]{4,9}\Z"),
    st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9.()_;:-]{0,30}\Z"),
)


@given(st.text(max_size=80))
def test_the_text_itself_comes_first_and_every_form_is_a_nonempty_string_once(text):
    forms = id_forms(text)
    assert len(forms) == len(set(forms))
    assert all(isinstance(f, str) and f for f in forms)
    assert all(f == f.strip() for f in forms[1:])  # only the text as given may keep its spaces
    if text.strip():
        assert forms[0] == text and text.strip() in forms[:2]


@given(ARXIV_IDS, VERSIONS, SCHEMES, HOSTS, st.sampled_from(["abs", "pdf", "format"]), st.booleans(), st.booleans())
def test_every_arxiv_address_names_the_bare_id(arxiv, version, scheme, host, kind, dot_pdf, query):
    url = f"{scheme}{host}/{kind}/{arxiv}{version}" + (".pdf" if dot_pdf and kind == "pdf" else "")
    url += "?context=hep-th#top" if query else ""
    forms = id_forms(url)
    assert arxiv in forms
    assert forms[0] == url  # the literal is tried first: an index whose ids are addresses keeps them
    if version:
        assert forms.index(arxiv + version) < forms.index(arxiv)  # the version as given, before without it


@given(ARXIV_IDS, VERSIONS, st.sampled_from(["arXiv:", "arxiv:", "ARXIV:", "arXiv: "]))
def test_an_arxiv_prefix_and_a_version_are_taken_off(arxiv, version, prefix):
    forms = id_forms(f"  {prefix}{arxiv}{version} ")
    assert arxiv in forms and forms[-1] == arxiv
    assert id_forms(arxiv) == [arxiv]  # a bare id is its only form


@given(ARXIV_IDS, VERSIONS, st.sampled_from(["", "https://doi.org/", "doi:", "http://dx.doi.org/"]), st.booleans())
def test_arxivs_own_doi_names_the_e_print(arxiv, version, prefix, encoded):
    doi = f"10.48550/arXiv.{arxiv}{version}"
    text = prefix + (quote(doi, safe="") if encoded and prefix.startswith("http") else doi)
    forms = id_forms(text)
    assert arxiv in forms and doi.lower() in forms
    assert doi.lower().startswith(ARXIV_DOI_PREFIX)


@given(DOIS, st.sampled_from(["", "doi:", "DOI:", "https://doi.org/", "http://dx.doi.org/", "doi.org/"]), st.booleans())
def test_a_doi_is_found_as_written_and_in_lower_case(doi, prefix, encoded):
    text = prefix + (quote(doi, safe="") if encoded and "doi.org" in prefix else doi)
    forms = id_forms(text)
    assert doi in forms and doi.lower() in forms
    assert forms.index(doi) <= forms.index(doi.lower())


@given(st.from_regex(r"\AW[0-9]{1,10}\Z"), st.from_regex(r"\A[0-9a-f]{40}\Z"))
def test_openalex_and_semantic_scholar_addresses_name_their_ids(work, sha):
    assert id_forms(f"https://openalex.org/{work}")[-1] == work
    assert id_forms(f"https://www.semanticscholar.org/paper/Some-Title-Here/{sha}")[-1] == sha


def test_what_is_not_an_address_or_a_prefix_is_left_as_it_is():
    for text in ["hep-th/9711200", "p001", "a/b/c", "10.1/short", "https://example.org/abs/hep-th/9711200"]:
        assert id_forms(text) == [text]


# -- the doors ---------------------------------------------------------------------------------------------------
MALDACENA = "hep-th/9711200"
NEW = "1234.5678"
DOI = "10.1103/physrevd.1.1"  # a corpus whose ids are DOIs (in lower case, as the fetchers write them)

PAPERS = [
    Paper(MALDACENA, "The Large N Limit of Superconformal Field Theories", "supergravity and large N", 1997,
          ["Juan Maldacena"], []),
    Paper(NEW, "A new style e-print", "large N gauge theory", 2012, ["A. Author"], [MALDACENA]),
    Paper(DOI, "A journal article", "large N gauge theory and supergravity", 1970, ["B. Author"], [MALDACENA]),
    Paper("hep-th/9802109", "Gauge theory correlators", "large N supergravity", 1998, ["S. Gubser"],
          [MALDACENA, NEW, DOI]),
]  # fmt: skip

#: Each way of writing an id, and the paper it names.
WRITTEN = {
    "arXiv:hep-th/9711200": MALDACENA,
    "https://arxiv.org/abs/hep-th/9711200v2": MALDACENA,
    "http://arxiv.org/pdf/hep-th/9711200v1.pdf": MALDACENA,
    "10.48550/arXiv.hep-th/9711200": MALDACENA,
    "http://arxiv.org/pdf/1234.5678v1": NEW,
    "arXiv:1234.5678v3": NEW,
    "https://doi.org/10.1103/PhysRevD.1.1": DOI,
    "doi:10.1103/PhysRevD.1.1": DOI,
    "10.1103/PHYSREVD.1.1": DOI,
}


@pytest.fixture(scope="module", params=BACKENDS)
def ids_db(request):
    return index_on(request, request.param, [Paper(p.id, p.title, p.abstract, p.year, list(p.authors),
                                                   list(p.references)) for p in PAPERS], "ids")  # fmt: skip


def test_the_library_resolves_every_written_form(ids_db):
    with RetrievalClient(ids_db) as client:
        assert client.resolve(list(WRITTEN)) == list(WRITTEN.values())
        for text, pid in WRITTEN.items():
            page = client.show(text)
            assert page.paper.id == pid, text
            assert client.paper(text).id == pid
        exact = client.similar(MALDACENA).to_dict()
        for text in ("arXiv:hep-th/9711200", "https://arxiv.org/abs/hep-th/9711200v2"):
            same = client.similar(text).to_dict()
            assert same["seeds"] == [MALDACENA] and same["results"] == exact["results"]
        left_out = client.similar(MALDACENA, exclude=["https://doi.org/10.1103/PhysRevD.1.1", "no-such-id"])
        assert DOI in {e["id"] for e in exact["results"]}
        assert DOI not in {e.paper.id for e in left_out.ranked}


def test_an_id_of_no_paper_is_refused_and_a_doi_is_said_to_be_found_only_as_an_id(ids_db):
    with RetrievalClient(ids_db) as client:
        with pytest.raises(PaperNotFoundError, match=r"no paper 'arXiv:hep-th/0000000v2' in the index") as caught:
            client.show("arXiv:hep-th/0000000v2")
        assert "keeps no DOIs" not in str(caught.value)
        with pytest.raises(PaperNotFoundError, match=r"keeps no DOIs: a DOI finds a paper only where it is"):
            client.show("https://doi.org/10.1000/elsewhere.1")
        with pytest.raises(PaperNotFoundError, match=r"no paper 'x1', 'x2' in the index"):
            client.similar(["x1", MALDACENA, "x2"])
        assert client.paper("10.1000/elsewhere.1") is None


def test_a_blank_id_is_called_empty_not_looked_up(ids_db, capsys):
    """An empty or blank id is a usage error that says so, on the CLI (exit 2) and in the library, not a search
    for a paper named ''."""
    with RetrievalClient(ids_db) as client:
        for call in (lambda: client.similar(""), lambda: client.similar([MALDACENA, " "]), lambda: client.show("")):
            with pytest.raises(PaperNotFoundError, match=r"a paper id is empty: give ids as") as caught:
                call()
            assert "no paper" not in str(caught.value)
    for argv in (["similar", ""], ["similar", MALDACENA, "  "], ["show", ""]):
        with pytest.raises(SystemExit) as stopped:
            main([*argv, "--db", str(ids_db)])
        assert stopped.value.code == 2, argv
        err = capsys.readouterr().err
        assert "a paper id is empty" in err and "no paper" not in err, argv


def test_the_cli_takes_every_written_form(ids_db, capsys):
    for text, pid in WRITTEN.items():
        assert main(["show", text, "--db", str(ids_db), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["id"] == pid
    assert main(["similar", "arXiv:hep-th/9711200", "--db", str(ids_db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["seeds"] == [MALDACENA]
    assert main(["show", "https://doi.org/10.1000/elsewhere.1", "--db", str(ids_db)]) == 1
    assert "keeps no DOIs" in capsys.readouterr().err


def test_the_api_and_the_web_page_take_every_written_form(request):
    """Addresses in a path (``/papers/https://arxiv.org/abs/...``, ``//`` and all) and escaped ones."""
    from fastapi.testclient import TestClient

    from retrieval.interfaces.http.app import create_app
    from retrieval.interfaces.service import Service

    db = index_on(request, "sqlite", [Paper(p.id, p.title, p.abstract, p.year, list(p.authors), list(p.references))
                                      for p in PAPERS], "ids_http")  # fmt: skip
    service = Service(db)
    try:
        with TestClient(create_app(service)) as api:
            for text, pid in WRITTEN.items():
                for path in (text, quote(text, safe="")):
                    got = api.get(f"/papers/{path}")
                    assert got.status_code == 200 and got.json()["id"] == pid, (path, got.text[:200])
                    page = api.get(f"/paper/{path}")
                    assert page.status_code == 200, path
                    assert re.search(rf'<h1 data-id="{re.escape(pid)}"', page.text), path
                    assert f'href="/paper/{pid}.bib"' in page.text  # the page links by the index's own id
            similar = api.get("/similar/arXiv:hep-th/9711200").json()
            assert similar["seeds"] == [MALDACENA] and similar["results"]
            missing = api.get("/papers/https://doi.org/10.1000/elsewhere.1")
            assert missing.status_code == 404 and "keeps no DOIs" in missing.json()["error"]
    finally:
        service.close()


def test_an_id_with_spaces_at_its_ends_is_found_as_given_before_trimmed(tmp_path, capsys):
    """An id of a corpus file is kept as written, spaces included: ``show " lead"`` answered with the paper ``lead``,
    and ``show " only"`` found nothing, though searches list it."""
    from retrieval.commands import build

    db = tmp_path / "spaces.db"
    build(db, [Paper(" lead", "Spaced lead", "", 2001), Paper("lead", "Plain lead", "", 2002),
               Paper(" only", "Spaced only", "", 2003, [], ["lead"])])  # fmt: skip
    with RetrievalClient(db) as client:
        assert client.show(" lead").paper.title == "Spaced lead"
        assert client.show("lead").paper.title == "Plain lead"
        assert client.show(" only").paper.title == "Spaced only"
        similar = client.similar([" only"], 5)
        assert similar.seeds == [" only"] and " only" not in [e.paper.id for e in similar.ranked]
    assert main(["show", " only", "--db", str(db)]) == 0
    assert "Spaced only" in capsys.readouterr().out


@given(st.lists(st.sampled_from(["/", ".pdf", ".PDF", "?", "#", "a", "1", "."]), max_size=12).map("".join))
def test_an_arxiv_address_names_what_the_lazy_pattern_named(path):
    """What an arXiv address names (``papers._arxiv_path``): as the pattern with a lazy group before ``/*`` read
    it, which tried every run of slashes at every position (16,000 slashes: 9 s for `show`)."""
    from retrieval.search.papers import _ARXIV_URL, _arxiv_path

    old = re.compile(
        r"(?:https?://)?(?:www\.|export\.)?arxiv\.org/(?:abs|pdf|format|ps|html)/([^?#]+?)(?:\.pdf)?/*(?:[?#].*)?",
        re.I,
    )
    address = "https://arxiv.org/abs/" + path
    before, now = old.fullmatch(address), _ARXIV_URL.fullmatch(address)
    assert (before is None) == (now is None)
    if now is not None:
        assert _arxiv_path(now.group(1)) == before.group(1)


def test_an_address_of_thousands_of_slashes_is_read_at_once():
    from retrieval.corpus.fetch.records import arxiv_id
    from retrieval.search.papers import id_forms
    from tests.helpers import finishes

    assert "hep-th/9711200" in id_forms("https://arxiv.org/abs/hep-th/9711200v2//")
    assert arxiv_id("https://arxiv.org/abs/2101.00001v2") == "2101.00001"
    assert arxiv_id("arxiv.org/abs/x" * 1000 + "?") is None
    finishes(
        "from retrieval.search.papers import id_forms; from retrieval.corpus.fetch.records import arxiv_id;"
        "id_forms('https://arxiv.org/abs/a' + '/' * 100_000 + 'b'); arxiv_id('arxiv.org/abs/x' * 30_000 + '?')"
    )
