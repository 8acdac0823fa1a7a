"""The JSON API of ``retrieval serve`` through FastAPI's ASGI test client (httpx), on a real index file: every
endpoint answers what the library answers for the same request, and bad requests get the documented status
and the library's own message."""

from __future__ import annotations

import json
import logging
import threading

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402

from retrieval import RetrievalClient  # noqa: E402
from retrieval.commands import build  # noqa: E402
from retrieval.commands import stats as library_stats  # noqa: E402
from retrieval.errors import ConfigError, PaperNotFoundError, TooLargeError  # noqa: E402
from retrieval.evidence.config import EvidenceConfig  # noqa: E402
from retrieval.evidence.pipeline import explain as library_explain  # noqa: E402
from retrieval.interfaces.http.app import MAX_BODY, create_app  # noqa: E402
from retrieval.interfaces.http.limits import SEARCH_THREADS  # noqa: E402
from retrieval.interfaces.service import BOUNDS, Service  # noqa: E402
from tests.helpers import paper, write_jsonl  # noqa: E402

MALDACENA, STROMINGER, VAFA, WITTEN, SEN = (
    "Juan M. Maldacena", "Andrew Strominger", "Cumrun Vafa", "Edward Witten", "Ashoke Sen"
)  # fmt: skip
CORPUS = [
    paper("hep-th/9601029", "Microscopic origin of the Bekenstein-Hawking entropy",
          "The black hole entropy is counted from string states. D-branes give the microstates of the black hole.",
          1996, authors=[STROMINGER, VAFA]),
    paper("hep-th/9602043", "Black hole entropy in M-theory",
          "We count the entropy of black holes in M-theory. The counting agrees with the area law.",
          1997, ["hep-th/9601029"], [MALDACENA, STROMINGER]),
    paper("hep-th/9711200", "The large N limit of superconformal field theories and supergravity",
          "We show that the large N limit of conformal field theories is described by supergravity on anti de Sitter "
          "space. Black hole entropy is reproduced.", 1997, ["hep-th/9601029"], [MALDACENA]),
    paper("hep-th/9802109", "Gauge theory correlators from non-critical string theory",
          "Correlators of the gauge theory are computed from string theory on anti de Sitter space.",
          1998, ["hep-th/9711200"], ["Steven Gubser", "Igor Klebanov", "Alexander Polyakov"]),
    paper("hep-th/9802150", "Anti de Sitter space and holography",
          "Holography relates the gauge theory to gravity in anti de Sitter space. Black hole entropy follows.",
          1998, ["hep-th/9711200"], [WITTEN]),
    paper("hep-th/9803131", "Anti de Sitter space, thermal phase transition and confinement",
          "The black hole in anti de Sitter space describes the thermal phase of the gauge theory.",
          1998, ["hep-th/9802150", "hep-th/9711200"], [WITTEN]),
    paper("hep-th/9805112", "Entropy of near extremal black holes",
          "The entropy of near extremal black holes is computed from D-branes and strings.",
          1998, ["hep-th/9601029", "hep-th/9602043"], [SEN]),
    paper("hep-th/9904207", "Tachyon condensation in string field theory",
          "Tachyon condensation is studied in open string field theory. The brane decays.", 1999, [], [SEN]),
    paper("hep-th/9905111", "Large N field theories, string theory and gravity",
          "A review of the correspondence between large N gauge theories and string theory on anti de Sitter space, "
          "black hole entropy included.", 1999, ["hep-th/9711200", "hep-th/9802109", "hep-th/9802150"],
          ["Ofer Aharony", "Steven Gubser", MALDACENA, "Hirosi Ooguri", "Yaron Oz"]),
    paper("hep-th/0001001", "Black hole entropy and the holographic principle",
          "The holographic principle bounds the entropy of a black hole by its area.", 2000,
          ["hep-th/9802150", "hep-th/9601029"], [STROMINGER]),
    paper("hep-th/0002002", "Cosmological constant and inflation",
          "Inflation in a universe with a small cosmological constant.", 2000, [], ["Andrei Linde"]),
]  # fmt: skip


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    folder = tmp_path_factory.mktemp("serve")
    path = folder / "hep.db"
    build(db=path, source=write_jsonl(folder / "papers.jsonl", CORPUS))
    return path


@pytest.fixture(scope="module")
def service(db):
    service = Service(db)
    yield service
    service.close()


@pytest.fixture(scope="module")
def api(service):
    with TestClient(create_app(service)) as client:  # with: runs the lifespan (the bounded thread pool)
        yield client


@pytest.fixture(scope="module")
def library(db):
    with RetrievalClient(db) as client:
        yield client


def plain(data: dict) -> dict:
    """``data`` as it comes back from JSON, without the wall times (which differ between two runs)."""
    data = json.loads(json.dumps(data))
    data.get("metrics", {}).pop("wall_time_ms", None)
    data.pop("timings_ms", None)
    return data


def answer(response, status: int = 200) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    return plain(response.json())


# -- each endpoint equals the library ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "params, kwargs",
    [
        ({"q": "black hole entropy"}, {}),
        ({"q": "black hole entropy", "limit": 3}, {"limit": 3}),
        ({"q": "black hole entropy", "limit": 3, "offset": 2}, {"limit": 3, "offset": 2}),
        ({"q": "anti de sitter", "year": "1998-1999"}, {"year": "1998-1999"}),
        ({"q": "entropy", "author": ["Maldacena", "Strominger"]}, {"authors": ["Maldacena", "Strominger"]}),
        ({"q": '"black hole" -holographic'}, {}),
    ],
)
def test_search_answers_what_the_library_answers(api, library, params, kwargs):
    got = answer(api.get("/search", params=params))
    result = library.search(params["q"], limit=kwargs.pop("limit", 10), **kwargs)
    expected = result.to_dict()
    for entry, ranked in zip(expected["results"], result.ranked, strict=True):
        entry["abstract"] = ranked.paper.abstract  # the API adds each result's abstract
    assert got == plain(expected)
    assert got["results"], "a request that finds nothing would prove little"


def test_search_filters_and_offset_work(api):
    everything = answer(api.get("/search", params={"q": "black hole entropy", "limit": 100}))["results"]
    assert len(everything) >= 6
    page = answer(api.get("/search", params={"q": "black hole entropy", "limit": 3, "offset": 3}))
    assert [e["id"] for e in page["results"]] == [e["id"] for e in everything[3:6]]
    assert [e["rank"] for e in page["results"]] == [4, 5, 6] and page["offset"] == 3
    years = answer(api.get("/search", params={"q": "black hole entropy", "year": "1998-1999"}))
    assert years["results"] and all(1998 <= e["year"] <= 1999 for e in years["results"])
    assert years["filters"] is not None
    both = answer(api.get("/search", params=[("q", "entropy"), ("author", "Maldacena"), ("author", "Strominger")]))
    assert [e["id"] for e in both["results"]] == ["hep-th/9602043"]  # the one paper by both


def test_similar_answers_what_the_library_answers(api, library):
    pid = "hep-th/9711200"  # an id with a slash, in the path
    got = answer(api.get(f"/similar/{pid}", params={"limit": 4}))
    assert got == plain(library.similar([pid], 4).to_dict())
    assert got["results"]
    params = [("limit", 3), ("offset", 1), ("exclude", "hep-th/9802109"), ("exclude", "hep-th/9802150"),
              ("year", "1998-"), ("author", "Witten")]  # fmt: skip
    got = answer(api.get(f"/similar/{pid}", params=params))
    expected = library.similar(
        [pid], 3, offset=1, exclude=["hep-th/9802109", "hep-th/9802150"], year="1998-", authors=["Witten"]
    )
    assert got == plain(expected.to_dict())
    assert all(e["id"] not in ("hep-th/9802109", "hep-th/9802150") for e in got["results"])


def test_paper_answers_what_the_library_answers(api, library):
    got = answer(api.get("/papers/hep-th/9711200"))
    assert got == plain(library.show("hep-th/9711200", limit=20).to_dict())
    assert got["authors"] == [MALDACENA] and got["references"][0]["id"] == "hep-th/9601029"
    assert {c["id"] for c in got["citations"]} >= {"hep-th/9802109", "hep-th/9802150"}
    paged = answer(api.get("/papers/hep-th/9711200", params={"limit": 1, "sort": "id", "citations_offset": 1}))
    assert paged == plain(library.show("hep-th/9711200", limit=1, sort="id", citations_offset=1).to_dict())
    # an empty sort= (a form's) is the default, as on /search (it was a 400 here)
    assert answer(api.get("/papers/hep-th/9711200", params={"sort": ""})) == got


def test_explain_answers_what_the_library_answers(api, library):
    body = {"query": "black hole entropy", "subqueries": ["anti de sitter space"], "settings": {"top_k": 4}}
    got = answer(api.post("/explain", json=body))
    run = library_explain(
        library, body["query"], subqueries=body["subqueries"], config=EvidenceConfig(top_k=4)
    )  # max_nodes: the library's default, which is within the server's bound
    expected = run.to_dict()
    expected["graph"] = {
        "nodes": [node.to_dict() for node in run.nodes.values()],
        "edges": [edge.to_dict() for edge in run.edges.values()],
    }
    assert got == plain(expected)
    assert got["run_id"] is None  # never saved
    assert got["graph"]["nodes"] and got["graph"]["edges"] and len(got["results"]) <= 4


def test_stats_and_health(api, db):
    assert answer(api.get("/stats")) == plain(library_stats(db))
    health = answer(api.get("/health"))
    assert health["status"] == "ok" and health["papers"] == len(CORPUS)


# -- bad requests: the status and the library's message -----------------------------------------------------------
LONG = "entropy " * 3_750  # 30,000 characters


@pytest.mark.parametrize(
    "path, params, status, kind, call",
    [
        ("/search", {"q": ""}, 400, ConfigError, lambda s: s.search("")),
        ("/search", {"q": "   "}, 400, ConfigError, lambda s: s.search("   ")),
        ("/search", {"q": "entropy", "limit": 0}, 400, ConfigError, lambda s: s.search("entropy", limit=0)),
        ("/search", {"q": "entropy", "limit": 10_000}, 400, ConfigError, lambda s: s.search("entropy", limit=10_000)),
        ("/search", {"q": "entropy", "offset": -1}, 400, ConfigError, lambda s: s.search("entropy", offset=-1)),
        ("/search", {"q": LONG}, 413, TooLargeError, lambda s: s.search(LONG)),
        ("/papers/hep-th/0000000", {}, 404, PaperNotFoundError, lambda s: s.paper("hep-th/0000000")),
        ("/similar/hep-th/0000000", {}, 404, PaperNotFoundError, lambda s: s.similar(["hep-th/0000000"])),
        ("/similar/hep-th/9711200", {"limit": 101}, 400, ConfigError, lambda s: s.similar("hep-th/9711200", 101)),
    ],
)
def test_bad_requests_get_the_status_and_the_library_message(api, service, path, params, status, kind, call):
    with pytest.raises(kind) as raised:
        call(service)
    got = answer(api.get(path, params=params), status)
    assert got == {"error": str(raised.value), "kind": kind.__name__}


def test_the_long_query_bound_is_the_documented_one(api):
    assert BOUNDS["query_chars"] < len(LONG)
    assert api.get("/search", params={"q": "x" * BOUNDS["query_chars"]}).status_code == 200
    assert api.get("/search", params={"q": "x" * (BOUNDS["query_chars"] + 1)}).status_code == 413


@pytest.mark.parametrize(
    "path, message",
    [
        ("/search", "q: Field required"),
        ("/search?q=entropy&limit=ten", "limit: Input should be a valid integer"),
        ("/search?q=entropy&offset=1.5", "offset: Input should be a valid integer"),
    ],
)
def test_parameters_of_the_wrong_type_are_400_in_the_same_shape(api, path, message):
    got = answer(api.get(path), 400)
    assert got["kind"] == "RequestValidationError" and got["error"].startswith(message)


@pytest.mark.parametrize(
    "path, message",
    [
        ("/search?q=entropy&q=black", "the query parameter 'q' is given 2 times and takes one value: give it once"),
        ("/search?q=entropy&limit=2&limit=5", "the query parameter 'limit' is given 2 times"),
        ("/search?q=entropy&lmit=5", "'/search' takes no query parameter 'lmit' (it takes: author, limit, offset, q,"),
        ("/papers/hep-th/9711200?offset=3", "'/papers/hep-th/9711200' takes no query parameter 'offset'"),
        ("/similar/hep-th/9711200?sort=year&sort=citations", "the query parameter 'sort' is given 2 times"),
        ("/stats?verbose=1", "'/stats' takes no query parameter 'verbose' (it takes: none)"),
        ("/search?" + "q=x&" * 2_000 + "limit=2", "the query parameter 'q' is given 2,000 times"),
    ],
)
def test_a_parameter_given_twice_or_not_taken_is_refused_naming_it(api, path, message):
    """FastAPI keeps the last of a repeated parameter and drops one it does not know: `q=entropy&q=black` searched
    for 'black' and `lmit=5` answered 10 results, each a 200 for a request that was not the one sent."""
    got = answer(api.get(path), 400)
    assert got == {"error": got["error"], "kind": "ConfigError"} and got["error"].startswith(message)


def test_the_parameters_that_take_several_values_still_do(api, library):
    got = answer(api.get("/similar/hep-th/9711200?exclude=hep-th/9802150&exclude=hep-th/9802109&limit=30"))
    ids = [r["id"] for r in got["results"]]
    assert ids and "hep-th/9802150" not in ids and "hep-th/9802109" not in ids
    both = answer(api.get("/search?q=entropy&author=Maldacena&author=Witten"))
    assert both["filters"]["authors"] == ["Maldacena", "Witten"]
    assert answer(api.get("/health?_=1712"))["papers"] > 0  # a probe's cache-buster


@pytest.mark.parametrize("path", ["/papers/a%0Ab", "/similar/a%0Ab"])
def test_an_id_with_a_line_break_is_named_in_the_404(api, path):
    """Starlette's path convertor stops at a line break: the route was not matched, a bare "Not Found"."""
    got = answer(api.get(path), 404)
    assert got["kind"] == "PaperNotFoundError" and got["error"].startswith("no paper 'a\\nb' in the index")


def test_explain_refuses_bad_bodies(api, service):
    with pytest.raises(ConfigError) as raised:
        service.explain("entropy", settings={"bogus": 1})
    got = answer(api.post("/explain", json={"query": "entropy", "settings": {"bogus": 1}}), 400)
    assert got == {"error": str(raised.value), "kind": "ConfigError"} and "unknown settings ['bogus']" in got["error"]
    got = answer(api.post("/explain", json={"query": "entropy", "settings": {"max_nodes": 10_000}}), 400)
    assert got["kind"] == "ConfigError" and "max_nodes must be between 1 and 5,000" in got["error"]
    got = answer(api.post("/explain", json={"query": "", "subqueries": []}), 400)
    assert got["error"].startswith("query is empty")
    got = answer(api.post("/explain", json={"query": "entropy", "subqueries": ["a"] * 11}), 413)
    assert got["kind"] == "TooLargeError"
    got = answer(api.post("/explain", json={"query": "entropy", "limit": 3}), 400)  # not a field of the body
    assert got["kind"] == "RequestValidationError" and got["error"].startswith("limit: Extra inputs")
    got = answer(api.post("/explain", content=b"{not json", headers={"content-type": "application/json"}), 400)
    assert got["error"].startswith("the body is not valid JSON")
    for body, kind in (
        (b'{"query": "\xff\xfe"}', "application/json"),
        (b'{"query": "\xe9"}', "application/json; charset=latin-1"),
    ):
        got = answer(api.post("/explain", content=body, headers={"content-type": kind}), 400)
        assert (
            got["error"] == "the body is not valid JSON text (it must be UTF-8): send the JSON object encoded as UTF-8"
        )
    assert answer(api.get("/explain"), 405)["kind"] == "HTTPException"
    # A key given twice ran the last ("tachyon") without a word, where a repeated query parameter is refused; JSON
    # nested thousands deep was said to be "not valid JSON text (it must be UTF-8)".
    for body, said in (
        (b'{"query": "black hole", "query": "tachyon"}', "the body gives the key 'query' twice in one object"),
        (b'{"query": "x", "settings": {"seeds": 3, "seeds": 4}}', "the body gives the key 'seeds' twice"),
        (b'{"query": "x", "subqueries": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", "the body's JSON is nested too"),
    ):
        got = answer(api.post("/explain", content=body, headers={"content-type": "application/json"}), 400)
        assert got["kind"] == "RequestValidationError" and got["error"].startswith(said), got


@pytest.mark.parametrize(
    "body, message",
    [
        ({}, "query: Field required"),
        ({"query": 5}, "query: Input should be a valid string"),
        ({"query": None}, "query: Input should be a valid string"),
        ({"subqueries": ["a"]}, "query: Field required"),
        ({"query": "entropy", "subqueries": "a"}, "subqueries: Input should be a valid list"),
        ({"query": "entropy", "subqueries": [1]}, "subqueries.0: Input should be a valid string"),
        ({"query": "entropy", "settings": []}, "settings: Input should be a valid dictionary"),
    ],
)
def test_a_bad_field_of_the_explain_body_is_named(api, body, message):
    # the body's field is named (``query``), not where FastAPI found it (``body``), even where the field is
    # called like a location
    got = answer(api.post("/explain", json=body), 400)
    assert got["kind"] == "RequestValidationError" and got["error"].startswith(message), got


@pytest.mark.parametrize(
    "params, message",
    [
        ({"year": "abc"}, "year 'abc' is not a year range: give 1998, 1998-2001, 1998- or -2001"),
        ({"year": "2001-1999"}, "year '2001-1999' ends before it starts"),
        ({"year": "3000"}, "year '3000': years run from 1000 to 2100"),
        ({"author": "  "}, "author '  ' has no letters: give a surname, such as author=Maldacena"),
        ({"author": ["Witten", ","]}, "author ',' has no letters"),
    ],
)
@pytest.mark.parametrize(("path", "given"), [("/search", {"q": "entropy"}), ("/similar/hep-th/9711200", {})])
def test_a_bad_filter_names_the_http_parameter_not_the_cli_option(api, path, given, params, message):
    # the library's check, in the HTTP API's words: ``year``, ``author`` (the command line says --year, --author)
    got = answer(api.get(path, params={**given, **params}), 400)
    assert got["kind"] == "ConfigError" and got["error"].startswith(message), got
    assert "--" not in got["error"]


def test_the_search_page_names_the_http_parameter_too(api):
    page = api.get("/", params={"q": "entropy", "year": "abc"})
    assert page.status_code == 400 and "year &#x27;abc&#x27; is not a year range" in page.text
    assert "--year" not in page.text
    page = api.get("/", params={"q": "entropy", "author": ","})
    assert page.status_code == 400 and "author &#x27;,&#x27; has no letters" in page.text
    assert "--author" not in page.text


def test_a_huge_body_is_refused_before_it_is_parsed(api):
    huge = json.dumps({"query": "entropy " * (MAX_BODY // 8 + 10)}).encode()
    got = answer(api.post("/explain", content=huge, headers={"content-type": "application/json"}), 413)
    assert got["kind"] == "TooLargeError" and f"{MAX_BODY:,} bytes" in got["error"]

    def chunks():  # no Content-Length: counted as it arrives
        for _ in range(40):
            yield b" " * 10_000

    got = answer(api.post("/explain", content=chunks(), headers={"content-type": "application/json"}), 413)
    assert got["kind"] == "TooLargeError"
    small = json.dumps({"query": "entropy"}).encode()  # under the bound, sent in chunks too
    small = answer(
        api.post("/explain", content=iter([small[:5], small[5:]]), headers={"content-type": "application/json"})
    )
    assert small["query"] == "entropy"


def test_head_answers_as_get_without_the_body(api):
    for path in ("/search?q=entropy&limit=2", "/stats", "/health", "/"):
        got, head = api.get(path), api.head(path)
        assert head.status_code == got.status_code == 200, path
        assert head.content == b"" and int(head.headers["content-length"]) > 0, path  # GET's (a search's timing
        assert head.headers["content-type"] == got.headers["content-type"], path  # makes its length vary)
    assert api.head("/explain").status_code == 405  # a route without GET has no HEAD either


def test_an_unknown_path_is_a_json_404(api):
    assert answer(api.get("/nothing/here"), 404) == {"error": "Not Found", "kind": "HTTPException"}


def test_an_index_that_stops_being_one_is_503(tmp_path, db):
    copy = tmp_path / "copy.db"
    copy.write_bytes(db.read_bytes())
    service = Service(copy)  # checked: it is an index now
    copy.write_bytes(b"this is not a database any more" * 100)
    try:
        with TestClient(create_app(service)) as client:
            got = answer(client.get("/search", params={"q": "entropy"}), 503)
    finally:
        service.close()
    assert got["kind"] == "NotAnIndexError" and str(copy) in got["error"]


class _Broken(Service):
    """A service with a bug: the error is no library error, so the client is told nothing of it."""

    def stats(self) -> dict:
        raise RuntimeError("a secret detail of the server")


def test_an_unexpected_error_is_a_generic_500_and_its_traceback_is_logged(db, caplog):
    service = _Broken(db)
    try:
        with caplog.at_level(logging.INFO, logger="retrieval.serve"), TestClient(create_app(service)) as client:
            response = client.get("/stats")
    finally:
        service.close()
    got = answer(response, 500)
    assert got["kind"] == "InternalError" and "secret" not in response.text
    failures = [r for r in caplog.records if r.exc_info]
    assert failures and "a secret detail" in str(failures[0].exc_info[1])


# -- the OpenAPI description, the log, the threads ------------------------------------------------------------------
def test_openapi_lists_every_route_with_its_bounds(api):
    spec = answer(api.get("/openapi.json"))
    assert set(spec["paths"]) == {
        "/search", "/similar/{paper_id}", "/papers/{paper_id}", "/explain", "/stats", "/health"
    }  # fmt: skip
    assert "post" in spec["paths"]["/explain"]
    params = {p["name"]: p for p in spec["paths"]["/search"]["get"]["parameters"]}
    assert set(params) == {"q", "limit", "offset", "year", "author", "sort"}
    assert params["sort"]["schema"]["enum"] == ["relevance", "citations", "year"]
    assert params["q"]["required"] and params["q"]["schema"]["maxLength"] == BOUNDS["query_chars"]
    assert params["limit"]["schema"]["maximum"] == BOUNDS["limit"]
    assert spec["paths"]["/papers/{paper_id}"]["get"]["responses"]["404"]
    assert api.get("/docs").status_code == 404  # Swagger UI would load its JavaScript from a CDN: off


def test_every_request_is_one_log_line(api, caplog):
    with caplog.at_level(logging.INFO, logger="retrieval.serve"):
        api.get("/health")
        api.get("/search", params={"q": ""})
    lines = [r.getMessage() for r in caplog.records if r.name == "retrieval.serve"]
    assert len(lines) == 2
    assert lines[0].startswith("GET /health 200 ") and lines[0].endswith(" ms")
    assert lines[1].startswith("GET /search?q= 400 ")


def test_the_thread_pool_is_bounded(api):
    from anyio import to_thread

    async def tokens() -> float:
        return to_thread.current_default_thread_limiter().total_tokens

    assert api.portal.call(tokens) == SEARCH_THREADS  # with the slow pool, at most THREADS connections


def test_clients_of_ended_threads_are_closed(db):
    service = Service(db)
    try:
        for _ in range(3):  # a thread pool retiring idle threads
            thread = threading.Thread(target=lambda: service.client().stats)
            thread.start()
            thread.join()
        service.client()
        assert len(service._clients) == 1  # this thread's; the three of the ended threads are closed
    finally:
        service.close()


def test_an_unknown_id_is_never_echoed_whole(api, service):
    """An id of any length gets a short answer: the library's message quotes at most 60 characters of it, and the
    server refuses one longer than ``BOUNDS["id_chars"]`` (413) before reading anything."""
    for length in (500, BOUNDS["id_chars"]):
        got = answer(api.get("/papers/" + "x" * length), 404)
        assert len(got["error"]) < 250 and f"({length:,} characters)" in got["error"]
        assert "x" * 60 in got["error"] and "x" * 61 not in got["error"]
    got = answer(api.get("/search", params={"q": "attention", "year": "1" * 5_000}), 400)
    assert "1" * 61 not in got["error"] and "(5,000 characters)" in got["error"]
    got = answer(api.get("/papers/" + "x" * 10_000), 413)
    assert len(got["error"]) < 250 and got["kind"] == "TooLargeError"
    with pytest.raises(TooLargeError):
        service.similar(["hep-th/9711200", "y" * 1_000_000])
    with pytest.raises(PaperNotFoundError) as raised:
        service.client().similar(["z" * 100_000], 10)
    assert len(str(raised.value)) < 250


def test_a_request_is_one_log_line_whatever_its_path_holds(api, caplog):
    """A CR or LF in a request's path (sent percent-encoded, decoded by the server) is escaped in its log line:
    nobody can write a line of their own into the log."""
    with caplog.at_level(logging.INFO, logger="retrieval.serve"):
        api.get("/papers/x%0d%0aGET%20/admin%20200%200.1%20ms")
        api.get("/search", params={"q": "entropy\r\nforged line"})
    lines = [r.getMessage() for r in caplog.records if r.name == "retrieval.serve"]
    assert len(lines) == 2 and all("\n" not in line and "\r" not in line for line in lines)
    assert "\\x0d\\x0a" in lines[0]


def test_slow_endpoints_queue_on_their_own_pool_and_are_refused_beyond_their_share():
    """``Limits.slow``: at most ``slow_requests`` admitted (the next is an ``OverloadedError``, a JSON 503), run on
    a pool of ``SLOW_THREADS`` threads, while the searches' pool stays free."""
    import anyio

    from retrieval.errors import OverloadedError
    from retrieval.interfaces.http.limits import SLOW_THREADS, Limits

    limits = Limits(slow_requests=SLOW_THREADS + 1)
    gate = threading.Event()
    running: list[int] = []

    def work(i: int) -> int:
        running.append(i)
        gate.wait(10)
        return i

    slow_work = limits.slow(work)
    answers: list[object] = []

    async def call(i: int) -> None:
        try:
            answers.append(await slow_work(i))
        except OverloadedError as exc:
            answers.append(type(exc).__name__)

    async def main() -> tuple:
        async with anyio.create_task_group() as group:
            for i in range(SLOW_THREADS + 2):
                group.start_soon(call, i)
                await anyio.sleep(0.05)
            await anyio.sleep(0.2)
            seen = (len(running), limits.slow_in_flight, list(answers))
            free = await anyio.to_thread.run_sync(lambda: "searched")  # the default pool is not the slow one
            gate.set()
        return seen, free

    (started, admitted, early), free = anyio.run(main)
    assert (started, admitted, early, free) == (SLOW_THREADS, SLOW_THREADS + 1, ["OverloadedError"], "searched")
    assert sorted(a for a in answers if isinstance(a, int)) == list(range(SLOW_THREADS + 1))
    assert limits.slow_in_flight == 0


@pytest.mark.parametrize("headers", [{}, {"content-type": "text/plain"}])
def test_a_json_body_sent_without_the_json_content_type_says_so(api, headers):
    got = answer(api.post("/explain", content=b'{"query": "attention"}', headers=headers), 400)
    assert "application/json" in got["error"] and "valid dictionary" not in got["error"]


@pytest.mark.parametrize("path", ["/papers/%20", "/similar/%20"])
def test_an_empty_id_is_called_empty(api, path):
    got = answer(api.get(path), 400)
    assert "empty" in got["error"] and got["kind"] == "ConfigError"
