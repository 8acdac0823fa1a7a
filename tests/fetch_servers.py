"""Loopback HTTP servers that answer as OpenAlex, Semantic Scholar and arXiv do, for ``tests/test_fetch.py``.

Each is a real ``http.server`` on a free 127.0.0.1 port, in a thread, speaking HTTP/1.1 (keep-alive, as the client
expects), with a small corpus and scripted faults for the next requests (a status with headers, a body cut off
after its headers promised more, a sleep past the client's timeout). Every request is logged (method, path, query,
headers, body) so that tests can assert what was asked for.

The shapes follow the APIs' documentation:

- OpenAlex ``GET /works``: ``search``, ``filter`` (``key:value`` pairs joined by ``,``, values OR-ed by ``|``),
  ``per_page`` (at most 200), ``cursor`` (``*`` then ``meta.next_cursor``), ``select`` (top-level fields); the
  answer ``{"meta": {"count", "per_page", "page": null, "next_cursor"}, "results": [work, ...]}``, a null
  ``next_cursor`` and empty results after the last page; an error as ``{"error", "message"}`` with a 400.
  Works carry ``id`` (``https://openalex.org/W...``), ``doi`` (``https://doi.org/...``), ``title``,
  ``display_name``, ``publication_year``, ``publication_date``, ``authorships[].author.display_name``,
  ``abstract_inverted_index``, ``referenced_works``, ``locations[].landing_page_url``.
- Semantic Scholar ``GET /graph/v1/paper/search/bulk``: ``query``, ``fields``, ``token``, filters; the answer
  ``{"total", "token", "data": [{"paperId"}]}`` (token null on the last page; pages of 1,000 in the real API, of
  ``bulk_page`` here so that a small corpus has several); ``POST /graph/v1/paper/batch?fields=...`` with
  ``{"ids": [...]}`` (S2 ids, ``ARXIV:``, ``DOI:``; at most 500) answered by a list in the same order, null for an
  unknown id, with ``references`` / ``citations`` as lists of ``{"paperId"}``, ``externalIds``
  (``{"DOI", "ArXiv"}``), ``authors`` (``[{"authorId", "name"}]``).
- arXiv ``GET /api/query``: ``search_query`` (``cat:``, ``all:``, ``submittedDate:[YYYYMMDDHHMM TO ...]``, joined
  by ``AND``/``OR``), ``start``, ``max_results``, ``sortBy``, ``sortOrder``; an Atom feed with
  ``opensearch:totalResults`` and ``<entry>`` elements (``id`` ``http://arxiv.org/abs/<id>v1``, ``title``,
  ``summary``, ``published``, ``author/name``, ``arxiv:doi``); a malformed query a 400 whose one entry is an error.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit
from xml.sax.saxutils import escape

_OA = "https://openalex.org/"


class Fault:
    """What to do instead of answering one request: ``status`` (with ``headers`` and ``body``), ``truncate`` (the
    headers promise the whole body, half of it is sent, the connection closes) or ``sleep`` seconds first."""

    def __init__(
        self, status: int | None = None, headers=None, body: bytes = b"", truncate=False, sleep=0.0, path: str = ""
    ) -> None:
        self.status = status
        self.headers = headers or {}
        self.body = body
        self.truncate = truncate
        self.sleep = sleep
        self.path = path  # only requests whose path contains this


class Server:
    """A loopback server answering with ``app(request) -> (status, headers, body)``; ``faults`` are applied to the
    next requests (first in, first out), ``delay`` seconds are slept before each answer."""

    def __init__(self, app) -> None:
        self.app = app
        self.faults: list[Fault] = []
        self.log: list[dict] = []
        self.delay = 0.0
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                self._answer()

            def do_POST(self) -> None:
                self._answer()

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                parts = urlsplit(self.path)
                request = {
                    "method": self.command,
                    "path": parts.path,
                    "query": {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()},
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "body": body,
                    "time": time.monotonic(),
                }
                with server.lock:
                    server.log.append(request)
                    fault = next((f for f in server.faults if f.path in parts.path), None)
                    if fault is not None:
                        server.faults.remove(fault)
                if server.delay:
                    time.sleep(server.delay)
                try:
                    if fault is not None and fault.sleep:
                        time.sleep(fault.sleep)
                    if fault is not None and fault.status is not None:
                        self._send(fault.status, {"Content-Type": "application/json", **fault.headers}, fault.body)
                        return
                    status, headers, payload = server.app(request)
                    if fault is not None and fault.truncate:
                        self.send_response(status)
                        for key, value in headers.items():
                            self.send_header(key, value)
                        self.send_header("Content-Length", str(len(payload)))
                        self.send_header("Connection", "close")
                        self.end_headers()
                        self.wfile.write(payload[: len(payload) // 2])
                        self.wfile.flush()
                        self.close_connection = True
                        return
                    self._send(status, headers, payload)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout): fine
                    self.close_connection = True

            def _send(self, status: int, headers: dict, payload: bytes) -> None:
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> Server:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def requests(self, path: str = "") -> list[dict]:
        with self.lock:
            return [r for r in self.log if path in r["path"]]


def _json(status: int, value) -> tuple[int, dict, bytes]:
    return status, {"Content-Type": "application/json"}, json.dumps(value).encode("utf-8")


def inverted(text: str) -> dict:
    """An abstract as OpenAlex's ``abstract_inverted_index`` (word -> positions)."""
    index: dict[str, list[int]] = {}
    for position, word in enumerate(text.split()):
        index.setdefault(word, []).append(position)
    return index


# -- OpenAlex ---------------------------------------------------------------------------------------------------
def work(
    n: int,
    title: str,
    abstract: str = "",
    year=2020,
    refs=(),
    doi=None,
    authors=("Ada Lovelace",),
    date=None,
    arxiv=None,
) -> dict:
    """An OpenAlex work as the API gives it."""
    return {
        "id": f"{_OA}W{n}",
        "doi": f"https://doi.org/{doi}" if doi else None,
        "title": title,
        "display_name": title,
        "publication_year": year,
        "publication_date": date or (f"{year}-06-01" if isinstance(year, int) and 1000 <= year <= 2100 else None),
        "authorships": [
            {"author_position": "first", "author": {"id": f"{_OA}A{i}", "display_name": a}}
            for i, a in enumerate(authors)
        ],
        "abstract_inverted_index": inverted(abstract) if abstract else None,
        "referenced_works": [f"{_OA}W{r}" for r in refs],
        "locations": [{"landing_page_url": f"https://arxiv.org/abs/{arxiv}v2", "pdf_url": None}] if arxiv else [],
        "cited_by_count": 0,
        "type": "article",
    }


def openalex_corpus() -> list[dict]:
    """23 works on sparse attention (W1-W23), the works they cite (W901-W906, not about it) and works that cite them
    (W801-W804). W22 is W5 again under another id (one DOI); W7's year is impossible; W3 is on arXiv."""
    works = []
    for n in range(1, 24):
        refs = [r for r in (n - 1, n - 2) if r >= 1] + [901 + n % 3, 904]
        if n == 10:
            refs.append(22)  # cites the duplicate: rewritten to W5 when the two are merged
        works.append(
            work(
                n,
                f"Sparse attention study {n}",
                f"We study sparse attention patterns, variant {n} of block routing.",
                year=9999 if n == 7 else 2000 + n % 20,
                refs=refs,
                doi=f"10.1000/sa{5 if n == 22 else n}",
                arxiv="2101.0000" + str(n) if n == 3 else None,
            )
        )
    works[21]["abstract_inverted_index"] = None  # W22, the duplicate, has no abstract: W5's is kept
    works[21]["referenced_works"] = [f"{_OA}W905"]
    works.append(work(901, "Dense kernels for convolution", "Convolution kernels on dense tensors.", year=2010))
    works.append(work(902, "Graph walks in citation networks", "Random walks over citations.", year=2011))
    works.append(work(903, "Hashing for retrieval", "Locality sensitive hashing.", year=2012))
    works.append(work(904, "Transformers", "Attention is what the layers compute.", year=2017, refs=[906]))
    works.append(work(905, "Routing networks", "Routing between experts.", year=2015))
    works.append(work(906, "Recurrent networks", "Recurrent networks for sequences.", year=1997))
    for n, cited in ((801, 1), (802, 2), (803, 1), (804, 23)):
        works.append(
            work(
                n,
                f"A survey citing work {cited}",
                "A survey of efficient transformers.",
                year=2024,
                refs=[cited],
                date="2024-03-01",
            )
        )
    return works


def _oa_id(value: str) -> str:
    return value.strip().removeprefix(_OA).upper()


class OpenAlexAPI:
    """``GET /works`` over ``works`` (see the module docstring)."""

    def __init__(self, works: list[dict]) -> None:
        self.works = works

    def __call__(self, request: dict):
        if request["path"] != "/works":
            return _json(404, {"error": "Not found", "message": f"no route {request['path']}"})
        q = request["query"]
        per_page = int(q.get("per_page", q.get("per-page", 25)))
        if not 1 <= per_page <= 200:
            return _json(400, {"error": "Invalid query parameters", "message": "per_page must be between 1 and 200"})
        matches = self.works
        search = q.get("search")
        if search:
            words = search.lower().split()
            matches = [w for w in matches if all(x in (w["title"] + " " + _text(w)).lower() for x in words)]
            matches = [w for w in matches if not w["title"].startswith("A survey")]
        for part in filter(None, (q.get("filter") or "").split(",")):
            key, _, value = part.partition(":")
            values = value.split("|")
            if key in ("openalex", "ids.openalex", "openalex_id"):
                wanted = {_oa_id(v) for v in values}
                matches = [w for w in matches if _oa_id(w["id"]) in wanted]
            elif key == "cites":
                wanted = {_oa_id(v) for v in values}
                matches = [w for w in matches if wanted & {_oa_id(r) for r in w["referenced_works"]}]
            elif key in ("from_publication_date", "from_created_date"):
                matches = [w for w in matches if (w["publication_date"] or "") >= value]
            elif key == "from_updated_date":
                return _json(403, {"error": "Forbidden", "message": "from_updated_date requires a paid plan"})
            elif key not in ("publication_year", "is_oa", "type", "topics.id", "authorships.author.id", "language"):
                return _json(400, {"error": "Invalid query parameters", "message": f"{key} is not a valid filter"})
        cursor = q.get("cursor")
        offset = 0 if cursor in (None, "*") else int(base64.b64decode(cursor))
        page = matches[offset : offset + per_page]
        select = [f for f in (q.get("select") or "").split(",") if f]
        if select:
            page = [{k: w[k] for k in select if k in w} for w in page]
        following = base64.b64encode(str(offset + per_page).encode()).decode() if page else None
        meta = {
            "count": len(matches),
            "db_response_time_ms": 3,
            "page": None,
            "per_page": per_page,
            "next_cursor": following if cursor else None,
        }
        return _json(200, {"meta": meta, "results": page, "group_by": []})


def _text(w: dict) -> str:
    index = w.get("abstract_inverted_index") or {}
    return " ".join(index)


# -- Semantic Scholar ---------------------------------------------------------------------------------------------
def s2_id(n: int) -> str:
    return f"{n:040x}"


def s2_paper(
    n: int, title: str, abstract: str | None = "", year=2020, refs=(), doi=None, arxiv=None, authors=("Grace Hopper",)
) -> dict:
    return {
        "paperId": s2_id(n),
        "title": title,
        "abstract": abstract,
        "year": year,
        "publicationDate": f"{year}-05-01" if year else None,
        "authors": [{"authorId": str(100 + i), "name": a} for i, a in enumerate(authors)],
        "externalIds": {k: v for k, v in (("DOI", doi), ("ArXiv", arxiv), ("CorpusId", n)) if v},
        "references": [{"paperId": s2_id(r) if r else None} for r in refs],
    }


def s2_corpus() -> list[dict]:
    """Ten papers on graph retrieval (1-10; 4 has no abstract, as some publishers' papers), the papers they cite
    (50-53) and papers citing them (60-63); 9 and 10 are the arXiv e-prints 2301.00009 and 2302.00010."""
    papers = []
    for n in range(1, 11):
        refs = [r for r in (n - 1,) if r >= 1] + [50 + n % 2, 52, 0]  # 0: a reference S2 could not resolve
        papers.append(
            s2_paper(
                n,
                f"Graph retrieval paper {n}",
                None if n == 4 else f"Graph retrieval methods {n}.",
                year=2015 + n,
                refs=refs,
                doi=f"10.2000/gr{n}",
                arxiv={9: "2301.00009", 10: "2302.00010"}.get(n),
            )
        )
    for n in range(50, 54):
        papers.append(s2_paper(n, f"Cited foundation {n}", "Foundations.", year=2005, refs=[53] if n != 53 else []))
    for n, cited in ((60, 1), (61, 2), (62, 2), (63, 10)):
        papers.append(s2_paper(n, f"Later work {n}", "Builds on graph retrieval.", year=2025, refs=[cited]))
    return papers


class S2API:
    """``/graph/v1/paper/search/bulk`` and ``/graph/v1/paper/batch`` over ``papers`` (see the module docstring).
    A batch asking for ``citations`` with more than ``citations_most`` ids is refused with 400 (too large)."""

    def __init__(self, papers: list[dict], bulk_page: int = 4, citations_most: int = 500) -> None:
        self.papers = papers
        self.by_id = {p["paperId"]: p for p in papers}
        for p in papers:
            ext = p["externalIds"]
            if "ArXiv" in ext:
                self.by_id[f"ARXIV:{ext['ArXiv']}"] = p
            if "DOI" in ext:
                self.by_id[f"DOI:{ext['DOI'].lower()}"] = p
        self.bulk_page = bulk_page
        self.citations_most = citations_most

    def __call__(self, request: dict):
        path = request["path"]
        if path == "/graph/v1/paper/search/bulk":
            return self._bulk(request["query"])
        if path == "/graph/v1/paper/batch" and request["method"] == "POST":
            return self._batch(request["query"], json.loads(request["body"] or b"{}"))
        return _json(404, {"error": f"Path not found: {path}"})

    def _bulk(self, q: dict):
        words = (q.get("query") or "").lower().split()
        matches = [p for p in self.papers if all(w in p["title"].lower() for w in words)]
        since = q.get("publicationDateOrYear")
        if since:
            first = since.split(":")[0]
            matches = [p for p in matches if (p["publicationDate"] or "") >= first]
        if "year" in q:
            lo, dash, hi = q["year"].partition("-")
            first, last = int(lo or 0), int(hi) if hi else (9999 if dash else int(lo))
            matches = [p for p in matches if first <= p["year"] <= last]
        offset = int(q["token"]) if q.get("token") else 0
        page = matches[offset : offset + self.bulk_page]
        following = str(offset + self.bulk_page) if offset + self.bulk_page < len(matches) else None
        return _json(
            200, {"total": len(matches), "token": following, "data": [{"paperId": p["paperId"]} for p in page]}
        )

    def _batch(self, q: dict, body: dict):
        ids = body.get("ids")
        if not isinstance(ids, list) or len(ids) > 500:
            return _json(400, {"error": "ids must be a list of at most 500 ids"})
        fields = (q.get("fields") or "paperId,title").split(",")
        if any(f.startswith("citations") for f in fields) and len(ids) > self.citations_most:
            return _json(400, {"error": "Response would exceed maximum size"})
        out = []
        for pid in ids:
            paper = self.by_id.get(pid if pid.startswith(("ARXIV:", "DOI:")) else pid.lower())
            if paper is None:
                out.append(None)
                continue
            answer = {"paperId": paper["paperId"]}
            for field in fields:
                top = field.split(".")[0]
                if top == "citations":
                    answer["citations"] = [
                        {"paperId": p["paperId"]}
                        for p in self.papers
                        if paper["paperId"] in {r["paperId"] for r in p["references"]}
                    ]
                elif top in paper:
                    answer[top] = paper[top]
            out.append(answer)
        return _json(200, out)


# -- arXiv ------------------------------------------------------------------------------------------------------
def eprint(aid: str, title: str, abstract: str, submitted: str, authors=("Alan Turing",), doi=None, cat="cs.IR"):
    return {
        "id": aid,
        "title": title,
        "summary": abstract,
        "published": submitted,
        "authors": list(authors),
        "doi": doi,
        "category": cat,
    }


def arxiv_corpus() -> list[dict]:
    """Nine cs.IR e-prints over January and February 2023 (two of them the S2 corpus's papers 9 and 10, one with a
    journal DOI), and one hep-th e-print."""
    out = []
    for i in range(1, 10):
        month = 1 if i <= 5 else 2
        aid = {9: "2301.00009"}.get(i, f"230{month}.{i:05d}")
        out.append(
            eprint(
                aid,
                f"Graph  retrieval\n  e-print {i}",
                f"We retrieve with graphs,\n  method {i}.",
                f"2023-0{month}-{10 + i:02d}T12:00:00Z",
                doi="10.9999/j.ir.7" if i == 7 else None,
            )
        )
    out.append(eprint("2302.00010", "Graph retrieval paper 10", "An e-print S2 knows.", "2023-02-27T08:00:00Z"))
    out.append(eprint("hep-th/9901001", "Black holes", "Strings.", "1999-01-02T00:00:00Z", cat="hep-th"))
    return out


class ArxivAPI:
    """``GET /api/query`` over ``eprints`` (see the module docstring)."""

    def __init__(self, eprints: list[dict]) -> None:
        self.eprints = eprints

    def __call__(self, request: dict):
        if request["path"] != "/api/query":
            return 404, {"Content-Type": "text/plain"}, b"not found"
        q = request["query"]
        query = q.get("search_query", "")
        if query.count("(") != query.count(")"):
            return self._error("malformed query: unbalanced parentheses")
        matches = list(self.eprints)
        cats = re.findall(r"cat:([\w.-]+)", query)
        if cats:
            matches = [e for e in matches if e["category"] in cats]
        for word in re.findall(r"all:([\w-]+)", query):
            matches = [e for e in matches if word.lower() in (e["title"] + " " + e["summary"]).lower()]
        dates = re.search(r"submittedDate:\[(\d{12}) TO (\d{12})\]", query)
        if dates:
            lo, hi = dates.groups()
            stamp = lambda e: re.sub(r"\D", "", e["published"])[:12]  # noqa: E731
            matches = [e for e in matches if lo <= stamp(e) <= hi]
        matches.sort(key=lambda e: e["published"], reverse=q.get("sortOrder") == "descending")
        start, size = int(q.get("start", 0)), int(q.get("max_results", 10))
        return 200, {"Content-Type": "application/atom+xml"}, self._feed(matches[start : start + size], len(matches))

    @staticmethod
    def _feed(entries: list[dict], total: int) -> bytes:
        items = []
        for e in entries:
            authors = "".join(f"<author><name>{escape(a)}</name></author>" for a in e["authors"])
            doi = f"<arxiv:doi>{escape(e['doi'])}</arxiv:doi>" if e["doi"] else ""
            items.append(
                f"<entry><id>http://arxiv.org/abs/{e['id']}v1</id><updated>{e['published']}</updated>"
                f"<published>{e['published']}</published><title>{escape(e['title'])}</title>"
                f"<summary>{escape(e['summary'])}</summary>{authors}{doi}"
                f'<arxiv:primary_category term="{e["category"]}"/><category term="{e["category"]}"/></entry>'
            )
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n<feed xmlns="http://www.w3.org/2005/Atom" '
            'xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/" xmlns:arxiv="http://arxiv.org/schemas/atom">'
            f"<title>arXiv Query</title><id>http://arxiv.org/api/x</id><opensearch:totalResults>{total}"
            "</opensearch:totalResults><opensearch:startIndex>0</opensearch:startIndex>"
            f"<opensearch:itemsPerPage>{len(entries)}</opensearch:itemsPerPage>{''.join(items)}</feed>"
        ).encode()

    @staticmethod
    def _error(message: str):
        body = (
            '<?xml version="1.0" encoding="UTF-8"?><feed xmlns="http://www.w3.org/2005/Atom" '
            'xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/"><title>arXiv Query</title>'
            "<opensearch:totalResults>1</opensearch:totalResults><entry>"
            "<id>http://arxiv.org/api/errors#malformed</id><title>Error</title>"
            f"<summary>{escape(message)}</summary></entry></feed>"
        ).encode()
        return 400, {"Content-Type": "application/atom+xml"}, body
