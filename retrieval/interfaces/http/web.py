"""The web pages of ``retrieval serve``, rendered on the server: plain HTML with its CSS inline, no JavaScript and
nothing loaded from the network. ``pages(service)`` is the router ``create_app`` includes.

- ``/``: a search box with year and author filters; each result with its authors, year, the first sentences of
  its abstract and the line that says why it is where it is, linked to its paper page, to papers like it, to the
  evidence view and to its BibTeX and RIS; the matched count, warnings, paging, and the page's results as BibTeX
  and RIS.
- ``/paper/{id}``: the paper (authors, year, abstract), its references and citing papers (titles, linked when in
  the corpus), and papers like it; BibTeX and RIS buttons, and Highwire ``citation_*`` meta tags (with
  ``DC.type`` preprint for an arXiv e-print), which Zotero's connector and Google Scholar read. An id that a
  path cannot carry (a ``.`` or ``..`` segment, which a browser resolves away, or a download's extension) is
  linked as ``/paper?id={id}`` (and ``/paper.bib?id=``, ``/paper.ris?id=``).
- ``/paper/{id}.bib``, ``/paper/{id}.ris``, ``/export.bib?q=...``, ``/export.ris?q=...``: the downloads, with their
  content type and a file name (``export.to_bibtex``, ``export.to_ris``); the search's parameters as ``/``'s.
- ``/explain-view?q=...``: the evidence graph of ``explain`` drawn as SVG (``retrieval.interfaces.http.svg``):
  first the seeds, the top papers and the kept edges among them, each paper a link to its page; ``view=all``
  draws the whole graph. The counts drawn, and the ranked papers with how each came in.

Text from the index is shown with its TeX rendered (``reading.text``) and escaped (``html.escape``). Parameters
are read as text and checked here or by ``Service``, so a bad one is an HTML page with the library's message and
the status the JSON API gives it (400, 404, 413, 503), never a JSON error in a browser.
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from ...corpus.paper import Paper
from ...errors import ConfigError, RetrievalError
from ...search.syntax import plain
from ...text import sentences
from ...validate import quoted
from .. import params as parameters
from ..output.display import count, matched_clause
from ..output.export import arxiv_id, doi_of, paper_url, to_bibtex, to_ris
from ..output.reading import authors as joined_authors
from ..output.reading import last_first
from ..output.reading import text as readable
from ..service import BOUNDS, INTERNAL, Service, status_of
from . import svg
from .ids import ID
from .limits import Limits

PAGE_SIZE = 10
#: References or citing papers listed before "show all".
LIST_CAP = 100
#: Authors named in a result before "et al.".
AUTHORS_SHOWN = 6
SIMILAR_SHOWN = 10
#: The downloads: (media type, file extension) per format.
DOWNLOADS = {"bibtex": ("application/x-bibtex", "bib"), "ris": ("application/x-research-info-systems", "ris")}

CSS = """
:root { --accent: #e8590c; --ink: #212529; --muted: #6c757d; --line: #dee2e6; --link: #1864ab; }
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: var(--ink);
       margin: 0; background: #f8f9fa; }
header { background: #fff; border-bottom: 1px solid var(--line); padding: 10px 24px; display: flex; gap: 24px;
         align-items: center; }
header .brand { font-weight: 700; font-size: 18px; color: var(--ink); text-decoration: none; }
header .brand span { color: var(--accent); }
main { max-width: 980px; margin: 0 auto; padding: 16px 24px 48px; }
main.wide { max-width: 1240px; }
header nav a { margin-left: 14px; font-size: 14px; }
a { color: var(--link); text-decoration: none; }
a:hover { text-decoration: underline; }
h1 { font-size: 22px; margin: 8px 0 4px; }
h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
form.search { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; margin: 8px 0 12px; }
form.search input { font: inherit; padding: 6px 8px; border: 1px solid #adb5bd; border-radius: 4px; }
form.search input[name=q] { flex: 1 1 360px; }
form.search input[name=year] { width: 150px; }
form.search input[name=author] { width: 170px; }
form.search button { font: inherit; padding: 6px 14px; border: 0; border-radius: 4px; background: var(--accent);
                     color: #fff; cursor: pointer; }
header form.search { margin: 0; flex: 1; }
.summary { color: var(--muted); margin: 4px 0 12px; }
.warnings { background: #fff3bf; border: 1px solid #ffe066; border-radius: 4px; padding: 6px 12px 6px 28px;
            margin: 8px 0; }
.error { background: #ffe3e3; border: 1px solid #ffa8a8; border-radius: 4px; padding: 10px 14px; }
ol.results { padding-left: 0; list-style: none; margin: 0; }
li.result { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; margin: 0 0 10px; }
li.result .title { font-size: 16px; font-weight: 600; }
li.result .rank { color: var(--muted); font-weight: 400; margin-right: 6px; }
.meta { color: var(--muted); font-size: 13px; }
.meta .pid { font-family: ui-monospace, "DejaVu Sans Mono", monospace; }
.lead { margin: 4px 0; }
.why { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12px; color: #495057;
       background: #f1f3f5; border-radius: 3px; padding: 2px 6px; display: inline-block; margin: 2px 0; }
.actions { font-size: 13px; }
.actions a { margin-right: 14px; }
.actions a.download { border: 1px solid var(--line); border-radius: 3px; padding: 0 6px; background: #fff; }
p.exports { font-size: 13px; color: var(--muted); margin: 4px 0 10px; }
nav.paging { display: flex; gap: 16px; margin: 12px 0; }
.abstract { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; }
ul.links { padding-left: 20px; margin: 4px 0; }
ul.links li { margin: 2px 0; }
.absent { color: var(--muted); }
.legend { list-style: none; padding: 0; font-size: 13px; color: #495057; margin: 10px 0; }
.legend li { margin: 0 0 6px; display: flex; gap: 8px; align-items: flex-start; }
.legend svg { flex: none; margin-top: 3px; }
aside h3 { font-size: 15px; margin: 16px 0 4px; }
ol.top { padding-left: 26px; font-size: 14px; margin: 6px 0; }
ol.top li { margin: 0 0 3px; }
ol.top .meta { font-size: 12px; }
.explain-grid { display: grid; grid-template-columns: minmax(0, 760px) minmax(260px, 1fr); gap: 20px;
                align-items: start; }
.explain-grid figure { margin: 0; }
@media (max-width: 900px) { .explain-grid { grid-template-columns: 1fr; } }
h1 .q { color: var(--accent); }
.drawn { font-size: 14px; }
figure.graph { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 6px; }
ol.ranked li { margin: 0 0 8px; }
ol.ranked li.focus { background: #fff3bf; }
footer { color: var(--muted); font-size: 12px; text-align: center; padding: 12px; }
"""


def _page(
    title: str, body: str, *, header: str | None = None, wide: bool = False, status: int = 200, head: str = ""
) -> HTMLResponse:
    """A whole page: ``header`` is the form in the top bar (by default an empty search box), ``wide`` for the
    evidence view, ``head`` more of the ``<head>`` (a paper's meta tags)."""
    form = _search_form(compact=True) if header is None else header
    html = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)} · retrieval</title>
{head}<style>{CSS}{svg.CSS}</style>
</head>
<body>
<header><a class="brand" href="/">re<span>trieval</span></a>{form}<nav><a href="/">search</a>
<a href="/explain-view">evidence view</a></nav></header>
<main{' class="wide"' if wide else ""}>
{body}
</main>
<footer>retrieval · read-only · the same data as JSON: <a href="/openapi.json">/openapi.json</a></footer>
</body>
</html>
"""
    return HTMLResponse(html, status_code=status)


def _filter_input(f: parameters.Param, text: str) -> str:
    """One filter's input: a choice of its few values, or a text box."""
    if f.choices:
        options = "".join(
            f'<option value="{escape(c)}"{" selected" if c == (text or f.choices[0]) else ""}>{escape(c)}</option>'
            for c in f.choices
        )
        return f'<select name="{f.query_name}" aria-label="{f.query_name}">{options}</select>'
    return (
        f'<input name="{f.query_name}" value="{escape(text)}" placeholder="{f.query_name}: {escape(f.example)}" '
        f'aria-label="{f.query_name}">'
    )


def _search_form(q: str = "", given: dict[str, str] | None = None, *, compact: bool = False) -> str:
    """The search box, and unless ``compact`` an input per filter (``params.FILTERS``; ``given``: their texts)."""
    filters = ""
    if not compact:
        given = given or {}
        filters = "".join(_filter_input(f, given.get(f.query_name, "")) for f in parameters.FILTERS)
    return (
        f'<form class="search" method="get" action="/" role="search">'
        f'<input type="search" name="q" value="{escape(q)}" placeholder="search papers: black hole entropy"'
        f' aria-label="query"{"" if compact or q else " autofocus"}>{filters}'
        '<button type="submit">Search</button></form>'
    )


def _error(exc: Exception, q: str = "") -> HTMLResponse:
    status = status_of(exc)
    message = INTERNAL if status == 500 else str(exc)
    body = (
        f'<h1>{status} · {escape(type(exc).__name__)}</h1><p class="error" data-status="{status}">{escape(message)}</p>'
        f'<p><a href="/">Back to the search</a></p>'
    )
    return _page(f"error {status}", body, header=_search_form(q[:200], compact=True), status=status)


def _guarded(render: Callable[[], Response], q: str = "") -> Response:
    try:
        return render()
    except RetrievalError as exc:
        return _error(exc, q)


#: The downloads' extensions, which an id in a path must not end with (the download's route would take it).
_EXTENSIONS = tuple(f".{extension}" for _, extension in DOWNLOADS.values())


def _paper_href(pid: str, extension: str = "", query: dict | None = None) -> str:
    """The paper page of ``pid`` (or its download, ``extension`` ``.bib`` or ``.ris``) with ``query``: the id in
    the path (``/paper/hep-th/9711200``), or as ``?id=`` where a path cannot carry it: a browser resolves a ``.``
    or ``..`` segment (percent-encoded too) before asking, and an id ending in a download's extension would ask
    for the download."""
    query = dict(query or {})
    segments = pid.split("/")
    if any(segment in ("", ".", "..") for segment in segments) or pid.endswith(_EXTENSIONS):
        return f"/paper{extension}?" + urlencode({"id": pid, **query})
    return "/paper/" + quote(pid, safe="/") + extension + (f"?{urlencode(query)}" if query else "")


def _explain_href(q: str, focus: str | None = None, view: str | None = None, subs: list[str] | None = None) -> str:
    params = [("q", q)] + [("sub", sub) for sub in subs or []]
    params += ([("focus", focus)] if focus else []) + ([("view", view)] if view else [])
    return "/explain-view?" + urlencode(params)


def _int_param(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw.strip())
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, got {raw[:40]!r}") from None


def _authors(names: list[str]) -> str:
    names = joined_authors(names)
    if not names:
        return ""
    shown = ", ".join(escape(readable(n)) for n in names[:AUTHORS_SHOWN])
    return shown + (" et al." if len(names) > AUTHORS_SHOWN else "")


def _title(item: dict, key: str = "id") -> str:
    """An entry's title as a reader sees it (TeX rendered), escaped; its id when it has none."""
    return escape(readable(item.get("title")) or item[key])


def _id_param(request: Request) -> str:
    """The ``id`` of a ``/paper?id=`` address (``_paper_href``)."""
    pid = request.query_params.get("id", "")
    if not pid.strip():
        raise ConfigError("give a paper id: /paper?id=hep-th/9711200, or /paper/hep-th/9711200")
    return pid


def _download_links(pid: str) -> str:
    bib, ris = escape(_paper_href(pid, ".bib")), escape(_paper_href(pid, ".ris"))
    return (
        f'<a class="download" href="{bib}" download title="BibTeX of this paper">BibTeX</a>'
        f'<a class="download" href="{ris}" download title="RIS of this paper (Zotero, EndNote, Mendeley)">RIS</a>'
    )


def _year(year: int | None) -> str:
    return "no year" if year is None else str(year)


def _meta(pid: str, year: int | None, authors: list[str], cited: int | None = None) -> str:
    parts = [f'<span class="pid">{escape(pid)}</span>', escape(_year(year))]
    if cited is not None:
        parts.append(f'<span class="cited">cited by {count(cited, "paper")}</span>')
    if authors:
        parts.append(_authors(authors))
    return '<div class="meta">' + " · ".join(parts) + "</div>"


# -- search ------------------------------------------------------------------------------------------------------


def _filters(request: Request) -> tuple[dict[str, str], dict[str, object]]:
    """Each filter's text as typed (a repeated one may list its values separated by ';'), and its values."""
    params = request.query_params
    texts, values = {}, {}
    for f in parameters.FILTERS:
        if f.repeat:
            listed = [v.strip() for text in params.getlist(f.query_name) for v in text.split(";") if v.strip()]
            texts[f.query_name], values[f.name] = "; ".join(listed), listed or None
        else:
            text = params.get(f.query_name, "").strip()
            texts[f.query_name], values[f.name] = text, text or None
    return texts, values


def _search(service: Service, request: Request, values: dict) -> tuple[int, int, dict]:
    """The search a page (or its download) asks for: ``(offset, limit, Service.search's dict)``."""
    offset = _int_param(request, "offset", 0)
    limit = _int_param(request, "limit", PAGE_SIZE)
    q = request.query_params.get("q", "")
    # Messages that name the form's fields (year, author), not the command line's options.
    parameters.check_filters(values)
    return offset, limit, service.search(q, limit=limit, offset=offset, **values)


def _search_body(service: Service, request: Request) -> tuple[str, str]:
    q = request.query_params.get("q", "")
    texts, values = _filters(request)
    form = _search_form(q, texts)
    if not q.strip():
        health = service.health()
        body = (
            f"<h1>Search the index</h1>{form}"
            f'<p class="summary">{health["papers"]:,} papers. Words rank papers by BM25, a walk of the citation '
            'graph from the best hits, and recency; <code>"a phrase"</code>, <code>-word</code>, '
            "<code>author:NAME</code> and <code>year:1998-2001</code> work in the query. Each result says why it "
            "is where it is; <em>explain</em> draws the evidence graph of a query.</p>"
        )
        return "retrieval", body
    offset, limit, data = _search(service, request, values)
    results = data["results"]
    matched = data.get("matched") or 0
    out = [f"<h1>Search</h1>{form}"]
    if results:
        first, last = results[0]["rank"], results[-1]["rank"]
        shown = f"Result {first:,}" if first == last else f"Results {first:,}–{last:,}"
    else:
        shown = "No results" + (" on this page" if offset else "")
    gate = (data.get("expansion") or {}).get("gate") or {}
    graph = "graph expanded" if gate.get("fired") else "graph not expanded"
    if gate.get("reason"):
        graph += f" ({gate['reason']})"
    ms = (data.get("metrics") or {}).get("wall_time_ms") or 0.0
    out.append(
        f'<p class="summary" id="summary" data-matched="{matched}" data-shown="{len(results)}">{shown} · '
        f"{matched_clause(matched, data.get('matched_exact', True))} · {escape(graph)} · {ms:.0f} ms</p>"
    )
    base = {"q": q, **{name: text for name, text in texts.items() if text}}
    if limit != PAGE_SIZE:
        base["limit"] = str(limit)
    if results:
        here = urlencode({**base, **({"offset": str(offset)} if offset else {})})
        these = "this result" if len(results) == 1 else f"these {len(results)} results"
        out.append(
            f'<p class="exports" id="exports">Save {these} for a reference manager: <a class="download" '
            f'href="/export.bib?{escape(here)}" download>BibTeX</a> · '
            f'<a class="download" href="/export.ris?{escape(here)}" download>RIS</a></p>'
        )
    if data.get("warnings"):
        items = "".join(f"<li>{escape(w)}</li>" for w in data["warnings"])
        out.append(f'<ul class="warnings">{items}</ul>')
    out.append(f'<ol class="results" start="{offset + 1}">')
    for entry in results:
        pid = entry["id"]
        lead = readable(" ".join(sentences(entry.get("abstract") or "", 2)))
        out.append(
            f'<li class="result" data-id="{escape(pid)}" data-rank="{entry["rank"]}">'
            f'<div class="title"><span class="rank">{entry["rank"]}.</span>'
            f'<a href="{escape(_paper_href(pid))}">{_title(entry)}</a></div>'
            f"{_meta(pid, entry.get('year'), entry.get('authors') or [], entry.get('citations'))}"
            + (f'<p class="lead">{escape(lead)}</p>' if lead else "")
            + f'<div><span class="why" title="why it is here">{escape(entry.get("why") or "")}</span></div>'
            f'<div class="actions"><a href="{escape(_paper_href(pid))}">paper</a>'
            f'<a href="{escape(_paper_href(pid))}#similar">similar</a>'
            f'<a href="{escape(_explain_href(q, pid))}">explain</a>{_download_links(pid)}</div></li>'
        )
    out.append("</ol>")
    links = []
    # Pages go to the ranking's end: past the papers holding a query word (``matched``) to those the graph added,
    # and past the ranked candidates (``length``, as deep as this page asked) to the rest of the BM25 list.
    length = max(data.get("length") or 0, matched)
    if offset > 0 and not results and length:  # past the end (an edited address, an index that shrank)
        last = (min(length, BOUNDS["offset"] + 1) - 1) // limit * limit
        links.append(f'<a rel="prev" href="/?{escape(urlencode({**base, "offset": last}))}">← the last page</a>')
    elif offset > 0:
        prev = max(0, offset - limit)
        links.append(f'<a rel="prev" href="/?{escape(urlencode({**base, "offset": prev}))}">← previous {limit}</a>')
    if len(results) == limit and offset + limit < min(length, BOUNDS["offset"] + 1):
        nxt = offset + limit
        links.append(f'<a rel="next" href="/?{escape(urlencode({**base, "offset": nxt}))}">next {limit} →</a>')
    if links:
        out.append('<nav class="paging">' + "".join(links) + "</nav>")
    return f"{q[:60]} · search", "\n".join(out)


def _paper_of(entry: dict) -> Paper:
    """A result or a paper page's dict as the ``Paper`` the exporters take."""
    return Paper(
        entry["id"], entry.get("title") or "", entry.get("abstract") or "", entry.get("year"),
        list(entry.get("authors") or []),
    )  # fmt: skip


def _slug(text: str, most: int = 40) -> str:
    """``text`` as a file name's part: ASCII letters, digits and dashes."""
    from ..output.export import ascii_word

    words = [ascii_word(w) for w in text.replace("/", " ").replace("-", " ").split()]
    return "-".join(w for w in words if w)[:most].strip("-") or "papers"


def _download(papers: list[Paper], fmt: str, name: str) -> Response:
    """``papers`` as a ``fmt`` file (``DOWNLOADS``) named ``name`` plus its extension, to save."""
    media, extension = DOWNLOADS[fmt]
    body = (to_bibtex if fmt == "bibtex" else to_ris)(papers)
    disposition = f'attachment; filename="{name}.{extension}"'
    return Response(body, media_type=f"{media}; charset=utf-8", headers={"Content-Disposition": disposition})


def _search_download(service: Service, request: Request, fmt: str) -> Response:
    q = request.query_params.get("q", "")
    if not q.strip():
        raise ConfigError("give a query: /export.bib?q=black+hole+entropy (the parameters of the search page)")
    _, values = _filters(request)
    offset, _, data = _search(service, request, values)
    papers = [_paper_of(entry) for entry in data["results"]]
    span = f"{offset + 1}-{offset + len(papers)}" if papers else "none"
    return _download(papers, fmt, f"{_slug(q)}-{span}")


def _paper_download(service: Service, pid: str, fmt: str) -> Response:
    return _download([_paper_of(service.paper(pid))], fmt, _slug(pid))


# -- one paper ---------------------------------------------------------------------------------------------------


#: How the paper page names each order of its lists (``params.LINK_SORTS``).
_LINK_ORDERS = {"citations": "most cited", "year": "newest", "id": "id"}


def _links_href(pid: str, paging: dict, kind: str, **changed) -> str:
    """The paper page with ``paging`` (sort and both lists' offsets) as changed, at the list ``kind``."""
    query = {k: v for k, v in {**paging, **changed}.items() if v not in (0, parameters.LINKS_SORT.default)}
    return _paper_href(pid, query=query) + f"#{kind}"


def _link_list(items: list[dict], kind: str, pid: str, total: int, paging: dict) -> str:
    """One of a paper's lists: the page of ``items`` (a ``Service.paper`` list, from ``paging[kind + '_offset']``
    on) out of ``total``, the orders it can be shown in, and links to the pages before and after it."""
    offset = paging[f"{kind}_offset"]
    if not total:
        return f'<p class="absent">No {kind} in the index.</p>'
    orders = " · ".join(
        f"<strong>{label}</strong>" if sort == paging["sort"]
        else f'<a href="{escape(_links_href(pid, paging, kind, sort=sort, **{f"{kind}_offset": 0}))}">{label}</a>'
        for sort, label in _LINK_ORDERS.items()
    )  # fmt: skip
    span = f"{offset + 1:,}-{offset + len(items):,} of {total:,}" if items else f"none from {offset + 1:,} on"
    rows = []
    for item in items:
        other = item["id"]
        if item.get("in_corpus"):
            authors = joined_authors(item.get("authors") or [])
            who = f" · {_authors(authors[:2])}{' et al.' if len(authors) > 2 else ''}" if authors else ""
            cited = f" · cited by {item['cited_by']:,}" if item.get("cited_by") else ""
            rows.append(
                f'<li class="in-corpus" data-id="{escape(other)}"><a href="{escape(_paper_href(other))}">'
                f"{_title(item)}</a> "
                f'<span class="meta"><span class="pid">{escape(other)}</span> · {_year(item.get("year"))}{who}'
                f"{cited}</span></li>"
            )
        else:
            rows.append(
                f'<li class="absent" data-id="{escape(other)}"><span class="pid">{escape(other)}</span>'
                " (not in the index)</li>"
            )
    links = []
    if offset > 0 and not items and total:  # past the end of the list
        start = (total - 1) // LIST_CAP * LIST_CAP
        last = _links_href(pid, paging, kind, **{f"{kind}_offset": start})
        links.append(f'<a rel="prev" href="{escape(last)}">← the last {total - start:,}</a>')
    elif offset > 0:
        prev = _links_href(pid, paging, kind, **{f"{kind}_offset": max(0, offset - LIST_CAP)})
        links.append(f'<a rel="prev" href="{escape(prev)}">← previous {LIST_CAP}</a>')
    if offset + len(items) < total:
        nxt = _links_href(pid, paging, kind, **{f"{kind}_offset": offset + len(items)})
        links.append(f'<a rel="next" href="{escape(nxt)}">next {min(LIST_CAP, total - offset - len(items)):,} →</a>')
    return (
        f'<p class="meta">{span}, by {orders}</p>'
        + (f'<ul class="links {kind}">' + "".join(rows) + "</ul>" if rows else "")
        + ('<nav class="paging">' + "".join(links) + "</nav>" if links else "")
    )


def citation_meta(data: dict) -> str:
    """The Highwire Press ``citation_*`` meta tags of a paper page (``data``: ``Service.paper``'s dict), which
    Zotero's Embedded Metadata translator and Google Scholar read: the title and abstract rendered, one
    ``citation_author`` per author as "Family, Given", the year, the DOI, arXiv id, abstract and PDF addresses the
    id gives; and for an arXiv e-print ``citation_publisher`` arXiv and ``DC.type`` preprint (the Zotero item type
    the translator takes from Dublin Core's type; with the Highwire tags alone it saves a journal article)."""
    pid = data["id"]
    tags = [("citation_title", readable(data.get("title")) or pid)]
    names = [last_first(a) for a in joined_authors(data.get("authors") or [])]
    names = [n for n in names if n]
    if len(names) == 1 and "," in names[0]:
        family, _, given = names[0].partition(", ")
        if " " in family and " " in given:  # one tag with spaces both sides of a comma is read as two authors
            names = [f"{given} {family}"]
    tags += [("citation_author", name) for name in names]
    if data.get("year") is not None:
        tags.append(("citation_publication_date", str(data["year"])))
    doi, arxiv, url = doi_of(pid), arxiv_id(pid), paper_url(pid)
    if doi:
        tags.append(("citation_doi", doi))
    if arxiv:
        tags += [("citation_arxiv_id", arxiv), ("citation_publisher", "arXiv"),
                 ("citation_pdf_url", f"https://arxiv.org/pdf/{arxiv}")]  # fmt: skip
    if url:
        tags.append(("citation_public_url", url))
    if data.get("abstract"):
        tags.append(("citation_abstract", readable(data["abstract"])))
    if arxiv:
        tags.append(("DC.type", "preprint"))
    return "".join(f'<meta name="{name}" content="{escape(value)}">\n' for name, value in tags)


def _paper_body(service: Service, asked: str, request: Request) -> tuple[str, str, str]:
    """The paper page of the paper ``asked`` names (an id as the index has it, or as people write it: ``arXiv:``,
    an arxiv.org address, a DOI), its lists a page of ``LIST_CAP`` at a time in the order ``sort`` asks, from the
    request's ``references_offset`` and ``citations_offset``."""
    paging = {
        "sort": request.query_params.get("sort") or parameters.LINKS_SORT.default,
        "references_offset": _int_param(request, "references_offset", 0),
        "citations_offset": _int_param(request, "citations_offset", 0),
    }
    data = service.paper(asked, limit=LIST_CAP, **paging)
    pid = data["id"]
    title = readable(data.get("title")) or pid
    url = paper_url(pid)
    abstract = readable(data.get("abstract"))
    refs, cites = data.get("references") or [], data.get("citations") or []
    n_refs, n_cites = data["references_total"], data["citations_total"]
    out = [
        f'<h1 data-id="{escape(pid)}">{escape(title)}</h1>',
        '<div class="meta">'
        + " · ".join(
            p
            for p in (
                f'<span class="pid">{escape(pid)}</span>',
                escape(_year(data.get("year"))),
                ", ".join(escape(readable(a)) for a in joined_authors(data.get("authors") or [])),
                f'<a href="{escape(url)}">{escape(url)}</a>' if url else "",
            )
            if p
        )
        + "</div>",
        f'<p class="actions"><a href="#references">{count(n_refs, "reference")}</a><a href="#citations">'
        f'{count(n_cites, "citing paper")}</a><a href="#similar">similar papers</a>{_download_links(pid)}</p>',
        f'<h2>Abstract</h2><div class="abstract">{escape(abstract) if abstract else "<em>No abstract.</em>"}</div>',
        f'<p class="actions"><a href="{escape(_explain_href(title, pid))}">evidence graph for this title</a>'
        f'<a href="{escape("/?" + urlencode({"q": plain(title)}))}">search for this title</a></p>',
        f'<h2 id="references">References <span class="meta">{n_refs:,} ({data["references_in_corpus"]:,} in the '
        "index)</span></h2>",
        _link_list(refs, "references", pid, n_refs, paging),
        f'<h2 id="citations">Citing papers <span class="meta">{n_cites:,}</span></h2>',
        _link_list(cites, "citations", pid, n_cites, paging),
        '<h2 id="similar">Similar papers <span class="meta">co-citation, shared references, text</span></h2>',
    ]
    try:
        similar = service.similar([pid], limit=SIMILAR_SHOWN)
    except RetrievalError as exc:  # the page is still worth showing without them
        out.append(f'<p class="error">{escape(str(exc))}</p>')
    else:
        if not similar["results"]:
            out.append('<p class="absent">No paper shares citations, references or words with this one.</p>')
        out.append('<ol class="results similar">')
        for entry in similar["results"]:
            other = entry["id"]
            out.append(
                f'<li class="result" data-id="{escape(other)}"><div class="title">'
                f'<span class="rank">{entry["rank"]}.</span><a href="{escape(_paper_href(other))}">'
                f"{_title(entry)}</a></div>"
                f"{_meta(other, entry.get('year'), entry.get('authors') or [], entry.get('citations'))}"
                f'<div><span class="why">{escape(entry.get("why") or "")}</span></div></li>'
            )
        out.append("</ol>")
    return title, "\n".join(out), citation_meta(data)


# -- the evidence view -------------------------------------------------------------------------------------------


def _legend() -> str:
    def dot(fill: str, stroke: str = "#fff", dash: str = "") -> str:
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        return (
            f'<svg width="16" height="16" aria-hidden="true"><circle cx="8" cy="8" r="6" fill="{fill}" '
            f'stroke="{stroke}" stroke-width="1.2"{extra}/></svg>'
        )

    def line(stroke: str, dash: str = "") -> str:
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        return (
            f'<svg width="28" height="10" aria-hidden="true"><line x1="1" y1="5" x2="27" y2="5" stroke="{stroke}" '
            f'stroke-width="2"{extra}/></svg>'
        )

    return (
        '<ul class="legend">'
        f"<li>{dot(svg.SEED_FILL)}seed: one of the query's best BM25 hits (inner circle)</li>"
        f"<li>{dot(svg.KEPT_FILL)}a paper the seeds cite (middle ring) or that cites them (outer ring)</li>"
        f"<li>{dot('#fff', '#868e96', '2 2')}dropped: no edge left after pruning</li>"
        f"<li>{line(svg.KEPT_EDGE)}kept edge, darker and wider with more weight</li>"
        f"<li>{line(svg.PRUNED_EDGE, '4 3')}pruned edge: the citing paper's claims are not supported</li>"
        '</ul><p class="meta">Area grows with the walk\'s score; numbers are ranks. Hover a paper for its title '
        "and year, an edge for its Delta, weight and why it was kept or pruned.</p>"
    )


def _how(entry: dict) -> str:
    """How a ranked paper came into the graph: as a seed, or through which seeds' edges."""
    seed = entry.get("seed")
    if seed:
        hits = seed.get("hits") or []
        best = min(hits, key=lambda h: h.get("rank") or 0) if hits else None
        where = f"BM25 rank {best['rank']}" if best else "given"
        return f"seed: {where}, relevance {seed.get('relevance') or 0.0:.3f}"
    parts = []
    for link in entry.get("via") or []:
        edge = link.get("edge") or {}
        verb = "cited by seed" if link.get("relation") == "reference" else "cites seed"
        state = "kept" if edge.get("kept") else "pruned"
        parts.append(
            f"{verb} {link.get('seed')} (Delta {edge.get('delta') or 0.0:.2f}, weight {edge.get('weight') or 0.0:.3f}, "
            f"{state})"
        )
    shown = "; ".join(parts[:4]) + (f"; and {len(parts) - 4} more" if len(parts) > 4 else "")
    return shown or "reached through the graph"


def _explain_form(q: str = "") -> str:
    return (
        f'<form class="search" method="get" action="/explain-view"><input type="search" name="q" value="{escape(q)}" '
        f'placeholder="a question: black hole entropy" aria-label="query"{"" if q else " autofocus"}>'
        '<button type="submit">Explain</button></form>'
    )


def _explain_body(service: Service, request: Request) -> tuple[str, str]:
    params = request.query_params
    q = params.get("q", "")
    subs = [s for s in params.getlist("sub") if s.strip()]
    focus = params.get("focus") or None
    if not q.strip():
        body = (
            "<h1>Evidence view</h1><p class='summary'>Ask a question in the box above: the view draws the 1.5-hop "
            "citation graph of its best BM25 hits (the seeds), each edge kept or pruned by how well the cited "
            "paper supports the citing paper's claims, and ranks the papers by a walk of what is left.</p>"
        )
        return "evidence view", body
    view = params.get("view") or "top"
    if view not in ("top", "all"):
        raise ConfigError(
            f"view is top (the seeds and the top papers) or all (the whole graph), got {quoted(view[:40])}"
        )
    whole = view == "all"
    data = service.explain(q, subqueries=subs)
    graph = data.get("graph") or {"nodes": [], "edges": []}
    results = data.get("results") or []
    core = None if whole else [entry["paper_id"] for entry in results]
    drawing = svg.draw(graph, focus=focus, core=core, link=_paper_href)
    size = data.get("size") or {}
    config = data.get("config") or {}
    subs_note = f" with {count(len(subs), 'sub-query', 'sub-queries')}" if subs else ""
    out = [f'<h1>Evidence for <span class="q">{escape(q[:120])}</span>{subs_note}</h1>', '<div class="explain-grid">']
    out.append(f'<figure class="graph">{drawing.svg}</figure><aside>')
    nodes_note = f"{drawing.nodes_drawn:,} of {count(drawing.nodes_total, 'paper')}"
    if not whole:
        asked = focus and focus in drawing.drawn_ids and focus not in core
        nodes_note += f" (the seeds and the top {len(results)}" + (" and the paper asked about)" if asked else ")")
    elif drawing.nodes_drawn < drawing.nodes_total:
        nodes_note += f" (the seeds and the {svg.MAX_NODES} others of highest score)"
    edges_note = f"{drawing.edges_drawn:,} of {count(drawing.edges_total, 'edge')}"
    if not whole:
        edges_note += " (the kept edges among the papers drawn)"
    elif drawing.edges_drawn < drawing.edges_total:
        edges_note += " (those among the papers drawn" + (
            f", at most {svg.MAX_EDGES:,})" if drawing.edges_drawn >= svg.MAX_EDGES else ")"
        )
    trimmed = f" The graph was trimmed to {size.get('cap'):,} papers." if size.get("trimmed") else ""
    if whole:
        toggle = f'<a id="view-toggle" href="{escape(_explain_href(q, focus, subs=subs))}">Show the top papers only</a>'
    else:
        toggle = (
            f'<a id="view-toggle" href="{escape(_explain_href(q, focus, "all", subs))}">Show the whole graph</a> '
            f"({count(drawing.nodes_total, 'paper')}, {count(drawing.edges_total, 'edge')}, pruned ones too)"
        )
    out.append(
        f'<p class="drawn" id="drawn" data-view="{"all" if whole else "top"}" data-nodes="{drawing.nodes_drawn}" '
        f'data-nodes-total="{drawing.nodes_total}" '
        f'data-seeds="{drawing.seeds_drawn}" data-edges="{drawing.edges_drawn}" '
        f'data-edges-total="{drawing.edges_total}" data-kept="{drawing.kept_drawn}" '
        f'data-pruned="{drawing.pruned_drawn}"><strong>Drawn:</strong> {nodes_note}, {drawing.seeds_drawn:,} of them '
        f"seeds; {edges_note}: {drawing.kept_drawn:,} kept, {drawing.pruned_drawn:,} pruned "
        f"(Delta below tau {config.get('tau', 0.0):g}).{trimmed} {toggle}. Click a paper to open its page.</p>"
    )
    health = data.get("health") or {}
    if health.get("warnings"):
        items = "".join(f"<li>{escape(w)}</li>" for w in health["warnings"])
        out.append(f'<ul class="warnings"><li>evidence: {escape(str(health.get("status")))}</li>{items}</ul>')
    if focus and focus not in drawing.drawn_ids:
        out.append(f'<p class="warnings">{escape(focus)} is not in the drawn graph of this query.</p>')
    elif focus:
        out.append(
            f'<p class="summary" id="focus">Ringed in black, "asked about": <a href="{escape(_paper_href(focus))}">'
            f"{escape(focus)}</a>.</p>"
        )
    out.append(_legend())
    if results:
        out.append('<h3>Top papers</h3><ol class="top">')
        for entry in results:
            out.append(
                f'<li><a href="#rank-{entry.get("rank")}">{_title(entry, "paper_id")}</a> '
                f'<span class="meta">{_year(entry.get("year"))}{" · seed" if entry.get("seed") else ""}</span></li>'
            )
        out.append("</ol>")
    out.append("</aside></div>")
    out.append(
        f"<h2>Ranked by the evidence walk <span class='meta'>top {len(results)} ({escape(str(config.get('ranker')))}"
        f", alpha {config.get('alpha', 0.0):g}, beta {config.get('beta', 0.0):g})</span></h2>"
    )
    out.append('<ol class="ranked results">')
    for entry in results:
        pid = entry["paper_id"]
        focus_class = " focus" if pid == focus else ""
        ins = sum(1 for e in entry.get("in_edges") or [] if e.get("kept"))
        outs = sum(1 for e in entry.get("out_edges") or [] if e.get("kept"))
        out.append(
            f'<li class="result{focus_class}" id="rank-{entry.get("rank")}" data-id="{escape(pid)}">'
            f'<div class="title"><span class="rank">{entry.get("rank")}.</span><a href="{escape(_paper_href(pid))}">'
            f"{_title(entry, 'paper_id')}</a></div>"
            f'<div class="meta"><span class="pid">{escape(pid)}</span> · {_year(entry.get("year"))} · '
            f"{escape(entry.get('role') or '')} · score {entry.get('score') or 0.0:.4f} · "
            f"{count(ins, 'kept edge')} in, {outs} out</div>"
            f'<div><span class="why">{escape(_how(entry))}</span></div></li>'
        )
    out.append("</ol>")
    dropped = [n for n in graph["nodes"] if not n.get("kept", True)]
    if dropped:
        out.append(f"<h2>Dropped <span class='meta'>{count(len(dropped), 'paper')}</span></h2><ul class='links'>")
        for node in dropped[:LIST_CAP]:
            out.append(
                f'<li><a href="{escape(_paper_href(node["paper_id"]))}">{_title(node, "paper_id")}</a> '
                f'<span class="meta">{escape(node.get("reason") or "")}</span></li>'
            )
        out.append("</ul>")
    return f"{q[:60]} · evidence", "\n".join(out)


def pages(service: Service, limits: Limits | None = None) -> APIRouter:
    """The HTML pages over ``service``: ``/``, ``/paper/{id}``, ``/explain-view`` (the last two on the slow
    endpoints' pool of ``limits``), and the downloads (``/paper/{id}.bib`` and ``.ris`` on the slow pool, as the
    paper page; ``/export.bib`` and ``/export.ris``, a search's). A download that cannot be made is an error page,
    as a page is."""
    slow = (limits or Limits()).slow
    router = APIRouter(include_in_schema=False)  # pages, not API: left out of the OpenAPI description

    @router.get("/", response_class=HTMLResponse)
    def search_page(request: Request) -> HTMLResponse:
        q = request.query_params.get("q", "")

        def render() -> HTMLResponse:
            title, body = _search_body(service, request)
            return _page(title, body, header="")

        return _guarded(render, q)

    def search_download(fmt: str):
        def download(request: Request) -> Response:
            return _guarded(lambda: _search_download(service, request, fmt), request.query_params.get("q", ""))

        return download

    def paper_download(fmt: str):
        def download(paper_id: str) -> Response:
            return _guarded(lambda: _paper_download(service, paper_id, fmt))

        return download

    def paper_download_by_query(fmt: str):
        def download(request: Request) -> Response:
            return _guarded(lambda: _paper_download(service, _id_param(request), fmt))

        return download

    # Before the paper page's route, whose path takes anything, ".bib" and ".ris" included.
    for fmt, (_, extension) in DOWNLOADS.items():
        router.get(f"/export.{extension}")(search_download(fmt))
        router.get(f"/paper.{extension}")(slow(paper_download_by_query(fmt)))
        router.get(f"/paper/{{paper_id:{ID}}}.{extension}")(slow(paper_download(fmt)))

    @router.get("/paper", response_class=HTMLResponse)
    @slow
    def paper_page_by_query(request: Request) -> HTMLResponse:
        """The paper page of ``?id=``: the address of an id that a path cannot carry (``_paper_href``)."""

        def render() -> HTMLResponse:
            title, body, head = _paper_body(service, _id_param(request), request)
            return _page(title, body, head=head)

        return _guarded(render)

    @router.get(f"/paper/{{paper_id:{ID}}}", response_class=HTMLResponse)
    @slow
    def paper_page(paper_id: str, request: Request) -> HTMLResponse:
        def render() -> HTMLResponse:
            title, body, head = _paper_body(service, paper_id, request)
            return _page(title, body, head=head)

        return _guarded(render)

    @router.get("/explain-view", response_class=HTMLResponse)
    @slow
    def explain_page(request: Request) -> HTMLResponse:
        q = request.query_params.get("q", "")

        def render() -> HTMLResponse:
            title, body = _explain_body(service, request)
            return _page(title, body, header=_explain_form(q), wide=True)

        return _guarded(render, q)

    return router
