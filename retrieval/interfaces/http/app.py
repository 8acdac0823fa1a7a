"""The JSON API of ``retrieval serve``: ``create_app(service)`` is a FastAPI application over a ``Service``.

FastAPI (on Starlette, served by uvicorn) because it derives the OpenAPI description (``/openapi.json``) from the
routes' typed parameters and checks those types before a route runs, so the description and the checks cannot
drift apart; what a value may be beyond its type (a limit's range, a query's length) is checked once, by
``Service`` against ``BOUNDS`` with the library's messages, and only described here. The interactive docs pages
are off: FastAPI's Swagger UI and ReDoc load their JavaScript from a CDN, and the server needs no network.

Routes (each returns the object ``--json`` prints): ``GET /search``, ``GET /similar/{id}``, ``GET /papers/{id}``
(ids may contain ``/``: ``hep-th/9711200``), ``POST /explain``, ``GET /stats``, ``GET /health``; and the web pages
of ``retrieval.interfaces.http.web`` (``/``, ``/paper/{id}``, ``/explain-view``), which are not in the OpenAPI
description.

Errors are JSON, ``{"error": message, "kind": name}``: a ``ConfigError`` or ``InputError`` is 400, a
``TooLargeError`` (a request beyond ``BOUNDS``, or a body over ``MAX_BODY`` bytes, refused before it is parsed)
413, a ``PaperNotFoundError`` 404, an index that cannot be read (missing, not an index, another schema revision,
locked or damaged) 503, and anything else 500 with a generic message (the traceback goes to the server's log
only). A parameter of the wrong type or a missing one (FastAPI's own check) is 400 too, kind
``RequestValidationError``: for a client it is the same mistake as a limit out of range; each names the parameter or
the body's field (``limit``, ``query``). A bad filter names the query parameter (``year``, ``author``:
``params.check_filters``), not the command line's option. A query parameter an API route does not take, or one
that takes one value given twice, is a 400 ``ConfigError`` naming it (``/health`` takes a cache-buster). An
unknown path is 404 and a wrong method 405, kind
``HTTPException``.

Routes are plain functions, which Starlette runs in its thread pool; each thread reads through its own client
(``Service.client()``). How the server bounds its work (requests in flight, a pool of its own for the slow
endpoints, deadlines for a request's head and body, open connections) is ``retrieval.interfaces.http.limits``;
beyond a limit the answer is a JSON 503 of kind ``OverloadedError`` with ``Retry-After``. A request still running
when a stop's grace period ends is answered the same way (kind ``ServerStopping``), without a traceback. Every
request is logged as one line on the ``retrieval.serve`` logger: method, path and query, status, milliseconds.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from ... import __version__
from ...corpus.jsonl import RepeatedKey, unique_keys
from ...errors import ConfigError, OverloadedError, RetrievalError
from ...validate import quoted
from ..params import (
    AUTHORS,
    CITATIONS_OFFSET,
    EXCLUDE,
    LIMIT,
    LINKS_LIMIT,
    LINKS_SORT,
    OFFSET,
    PAPER_ID,
    REFERENCES_OFFSET,
    Param,
    check_filters,
    library_names,
    with_filters,
)
from ..service import BOUNDS, EXPLAIN_SETTINGS, INTERNAL, STATUS, Service, status_of
from . import limits as bounds
from .ids import ID

__all__ = ["INTERNAL", "MAX_BODY", "STATUS", "create_app", "status_of"]  # the status table lives in .service

log = logging.getLogger("retrieval.serve")

#: The largest request body accepted (``POST /explain``), in bytes: a query and ten sub-queries of the longest
#: allowed fit (in ASCII); a larger body is refused with 413 before it is read whole or parsed.
MAX_BODY = 256 * 1024
#: Threads that answer requests (each with its own read-only connection): searches', and the slow endpoints'.
THREADS = bounds.SEARCH_THREADS + bounds.SLOW_THREADS
#: Characters of a request's path and query kept in its log line.
LOG_TARGET_CHARS = 200
#: Control characters as the log shows them (a request's path may hold a decoded CR or LF: one line per request).
_ESCAPED = {c: f"\\x{c:02x}" for c in (*range(32), 127)}


def _printable(text: str) -> str:
    """``text`` with its control characters escaped (``\\x0d``), so it stays one log line."""
    return text.translate(_ESCAPED)


def error_body(message: str, kind: str) -> dict:
    return {"error": message, "kind": kind}


class ErrorBody(BaseModel):
    """Every error response."""

    error: str = Field(description="what went wrong and what to do, as the CLI says it")
    kind: str = Field(description="the error's class: ConfigError, TooLargeError, PaperNotFoundError, ...")


def _errors(*codes: int) -> dict:
    reasons = {
        400: "a parameter is missing, of the wrong type or out of range",
        404: "no paper with this id in the index",
        413: "the request asks for more work than the bounds allow, or its body is too large",
        503: "the index cannot be read (missing, not an index, another schema revision, locked), or the server is "
        "busy (kind OverloadedError) or stopping (ServerStopping): both with Retry-After",
    }
    return {code: {"model": ErrorBody, "description": reasons[code]} for code in (*codes, 503)}


class ExplainRequest(BaseModel):
    """The body of ``POST /explain``."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(description="the question", json_schema_extra={"maxLength": BOUNDS["query_chars"]})
    subqueries: list[str] = Field(
        default_factory=list,
        description="sub-questions, each seeding the graph too",
        json_schema_extra={"maxItems": BOUNDS["subqueries"]},
    )
    settings: dict[str, Any] = Field(
        default_factory=dict,
        description=f"evidence settings to change: any of {', '.join(EXPLAIN_SETTINGS)} "
        f"(max_nodes at most {BOUNDS['max_nodes']:,}, top_k at most {BOUNDS['top_k']})",
    )


def _query(param: Param):
    """``param`` (``retrieval.interfaces.params``) as a query parameter: its type, description and bounds."""
    return Annotated[param.kind, Query(description=param.server_help(), json_schema_extra=param.schema_bounds())]


#: The query parameters that take several values, each given once per value (``?author=A&author=B``).
REPEATABLE = frozenset({AUTHORS.query_name, EXCLUDE.query_name})

Limit = _query(LIMIT)
Offset = _query(OFFSET)
Exclude = _query(EXCLUDE)
PaperId = Annotated[str, Path(description=f"{PAPER_ID.help} (may contain /: hep-th/9711200)")]
LinksLimit = _query(LINKS_LIMIT)
LinksSort = _query(LINKS_SORT)
ReferencesOffset = _query(REFERENCES_OFFSET)
CitationsOffset = _query(CITATIONS_OFFSET)


class _Guard:
    """ASGI middleware around the application: one log line per request; requests in flight counted against
    ``limits.max_requests`` (a JSON 503 beyond); a request body of at most ``MAX_BODY`` bytes, read within
    ``BODY_TIMEOUT`` seconds (413, 408 before the route sees it); a generic 500 for an unexpected error, whose
    traceback is logged; and a JSON 503 for a request the server's stop cut short."""

    def __init__(self, app, limits: bounds.Limits, max_body: int = MAX_BODY) -> None:
        self.app = app
        self.limits = limits
        self.max_body = max_body

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        target = scope.get("path", "")
        if scope.get("query_string"):
            target += "?" + scope["query_string"].decode("latin-1")
        if len(target) > LOG_TARGET_CHARS:
            target = target[: LOG_TARGET_CHARS - 3] + "..."
        target = _printable(target)
        status = 500
        started = False
        head = scope["method"] == "HEAD"
        if head:  # HEAD is GET without the body (link checkers, proxies): every GET route answers it
            scope = {**scope, "method": "GET"}

        async def sending(message) -> None:
            nonlocal status, started
            if message["type"] == "http.response.start":
                status, started = message["status"], True
            elif head and message["type"] == "http.response.body":
                message = {**message, "body": b""}  # the headers (its length too) as GET's
            await send(message)

        limits = self.limits
        if limits.in_flight >= limits.max_requests:
            await _send_raw(sending, 503, bounds.overloaded_body(f"{limits.max_requests} requests in flight"),
                            retry=True)  # fmt: skip
            log.info("%s %s %d %.1f ms", scope["method"], target, status, (time.perf_counter() - start) * 1000.0)
            return
        limits.in_flight += 1
        try:
            replay = await self._body(scope, receive)
            if replay is None:
                await _send_json(sending, 413, error_body(
                    f"the request body is larger than {self.max_body:,} bytes: send a shorter query", "TooLargeError"
                ))  # fmt: skip
            elif replay is _SLOW_BODY:
                await _send_json(sending, 408, error_body(
                    f"the request body did not arrive within {bounds.BODY_TIMEOUT:g} s: send it again", "TimeoutError"
                ))  # fmt: skip
            elif (problem := _json_problem(scope, getattr(replay, "body", b""))) is not None:
                await _send_json(sending, 400, error_body(problem, "RequestValidationError"))
            else:
                await self.app(scope, replay, sending)
        except asyncio.CancelledError:
            # The server's stop ended its grace period with this request still running: a clean refusal, which
            # a client may retry elsewhere or later, rather than uvicorn's 500 and a traceback.
            log.warning("%s %s: cut short by the server's stop", scope["method"], target)
            if not started:
                await _send_json(sending, 503, error_body(STOPPING, "ServerStopping"), retry=True)
        except Exception:
            if limits.stopping:  # a read the stop interrupted
                log.warning("%s %s: cut short by the server's stop", scope["method"], target)
                if not started:
                    await _send_json(sending, 503, error_body(STOPPING, "ServerStopping"), retry=True)
            else:
                log.exception("%s %s failed", scope["method"], target)
                if not started:
                    await _send_json(sending, 500, error_body(INTERNAL, "InternalError"))
        finally:
            limits.in_flight -= 1
            ms = (time.perf_counter() - start) * 1000.0
            log.info("%s %s %d %.1f ms", scope["method"], target, status, ms)

    async def _body(self, scope, receive):
        """``receive`` replaying the whole body once read; None when it is larger than ``max_body``,
        ``_SLOW_BODY`` when it took longer than ``BODY_TIMEOUT`` seconds."""
        if scope["method"] in ("GET", "HEAD", "OPTIONS", "DELETE"):
            return receive
        headers = dict(scope.get("headers") or ())
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body:
            return None
        chunks, size = [], 0
        deadline = time.monotonic() + bounds.BODY_TIMEOUT
        while True:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                return _SLOW_BODY
            if message["type"] != "http.request":  # the client went away
                first = message
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_body:
                return None
            if not message.get("more_body", False):
                first = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
                break
        pending = [first]

        async def replay():
            return pending.pop() if pending else await receive()

        replay.body = first.get("body", b"")  # read by ``_json_problem``
        return replay


#: The header of a 503 a client may retry.
_RETRY = {"retry-after": str(bounds.RETRY_AFTER)}
#: What ``_Guard._body`` returns for a body that did not arrive in time.
_SLOW_BODY = object()


def _json_problem(scope, body: bytes) -> str | None:
    """What is wrong with a JSON body that a JSON parser reads without a word (None: nothing, or something
    FastAPI's own reading names): a key given twice, of which the last was taken silently (a query parameter
    given twice is refused); nesting too deep to read, which was called "not valid JSON text (it must be
    UTF-8)"."""
    kind = dict(scope.get("headers") or ()).get(b"content-type", b"")
    if not body or b"json" not in kind.lower():
        return None
    try:
        json.loads(body, object_pairs_hook=unique_keys)  # the corpus reader's refusal of a repeated key
    except RepeatedKey as exc:
        return f"the body gives the key {quoted(exc.args[0])} twice in one object, and takes one value: give it once"
    except RecursionError:
        return "the body's JSON is nested too deeply to read: send the object of the documented fields"
    except (ValueError, UnicodeDecodeError):  # FastAPI's reading says what is wrong
        return None
    return None


#: What a request cut short by the server's stop is told.
STOPPING = "the server stopped before this request finished: send it again (to this server once it is back)"


async def _send_json(send, status: int, body: dict, retry: bool = False) -> None:
    await _send_raw(send, status, json.dumps(body, separators=(",", ":")).encode(), retry=retry)


async def _send_raw(send, status: int, payload: bytes, retry: bool = False) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    if retry:
        headers.append((b"retry-after", str(bounds.RETRY_AFTER).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


#: FastAPI's detail for a body it could not decode (bytes that are not UTF-8, a charset it does not read).
_UNDECODED_BODY = "There was an error parsing the body"
#: Where FastAPI says it found a bad value: the first part of an error's ``loc``, before the parameter's name.
_LOCATIONS = ("query", "path", "body", "header", "cookie")


def _validation_message(exc: RequestValidationError, request: Request | None = None) -> str:
    """FastAPI's errors as one message, each naming the parameter or the body's field (``limit``, ``query``,
    ``subqueries.0``) by its ``loc`` without the location it was found in (only the first part of ``loc`` is a
    location: ``("body", "query")`` is the body's field ``query``)."""
    parts = []
    for error in exc.errors():
        if error.get("type") == "model_attributes_type" and tuple(error.get("loc", ())) == ("body",):
            kind = request.headers.get("content-type") if request is not None else None
            sent = f"it was sent as {quoted(kind)}" if kind else "it was sent without a Content-Type"
            parts.append(f"the body must be a JSON object sent as application/json ({sent})")
            continue
        if error.get("type") == "json_invalid":
            parts.append(f"the body is not valid JSON ({error.get('ctx', {}).get('error', 'JSON decode error')})")
            continue
        loc = [str(p) for p in error.get("loc", ())]
        if loc and loc[0] in _LOCATIONS:
            loc = loc[1:]
        parts.append(f"{'.'.join(loc) or 'body'}: {error.get('msg', 'invalid')}")
    return "; ".join(parts) or "the request is not valid"


def create_app(service: Service, limits: bounds.Limits | None = None) -> FastAPI:
    """The API over ``service``, and the web pages, bounded by ``limits`` (``retrieval.interfaces.http.limits``'s
    defaults when None)."""
    limits = limits or bounds.Limits()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        from anyio import to_thread

        # This event loop's default pool: the searches' (the slow endpoints have their own, limits.slow).
        to_thread.current_default_thread_limiter().total_tokens = bounds.SEARCH_THREADS
        yield
        # The stop's grace period is over (uvicorn runs the lifespan's end after it): the reads still running
        # are interrupted, those of requests already answered 503 too (their threads would hold the process),
        # and each request still open is answered 503 by the guard before the loop closes.
        limits.stopping = True
        service.interrupt()
        deadline = time.monotonic() + bounds.STOP_WAIT
        while limits.in_flight and time.monotonic() < deadline:
            await asyncio.sleep(0.02)

    taken: dict[object, frozenset[str]] = {}  # each API route's function: the query parameters it takes

    def one_of_each(request: Request) -> None:
        """A query parameter an API route does not take (a misspelt ``lmit``), or one that takes one value given
        twice, is refused naming it: FastAPI would drop the first and keep the last, and answer another request
        than the one sent."""
        names = taken.get(request.scope.get("endpoint"))
        if names is None:  # a web page: its form's parameters are read by the page
            return
        given = Counter(key for key, _ in request.query_params.multi_items())  # in the order first given
        unknown = next((key for key in given if key not in names), None)
        if unknown is not None:
            takes = ", ".join(sorted(names)) or "none"
            raise ConfigError(
                f"{quoted(request.url.path)} takes no query parameter {quoted(unknown)} (it takes: {takes}): "
                "check its spelling"
            )
        twice = next((key for key, n in given.items() if n > 1 and key not in REPEATABLE), None)
        if twice is not None:
            raise ConfigError(
                f"the query parameter {quoted(twice)} is given {given[twice]:,} times and takes one value: give it once"
            )

    app = FastAPI(
        dependencies=[Depends(one_of_each)],
        title="retrieval",
        version=__version__,
        description="An embedded literature-retrieval index over HTTP: BM25 in SQL, a citation-graph walk, and "
        "evidence graphs; read-only. Every response is the JSON object `retrieval ... --json` prints.",
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.service = service
    app.add_middleware(_Guard, limits=limits)

    @app.exception_handler(RetrievalError)
    async def retrieval_error(request: Request, exc: RetrievalError) -> JSONResponse:
        if limits.stopping:  # an interrupted read: the stop's doing, not the index's
            return JSONResponse(error_body(STOPPING, "ServerStopping"), status_code=503, headers=_RETRY)
        status = status_of(exc)
        if status == 500:
            log.error("%s %s: %s: %s", request.method, _printable(request.url.path[:LOG_TARGET_CHARS]),
                      type(exc).__name__, _printable(str(exc)))  # fmt: skip
            return JSONResponse(error_body(INTERNAL, "InternalError"), status_code=500)
        headers = _RETRY if isinstance(exc, OverloadedError) else None
        return JSONResponse(error_body(str(exc), type(exc).__name__), status_code=status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(error_body(_validation_message(exc, request), "RequestValidationError"), status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = str(exc.detail)
        if exc.status_code == 400 and detail == _UNDECODED_BODY:  # FastAPI's words for bytes it could not decode
            detail = "the body is not valid JSON text (it must be UTF-8): send the JSON object encoded as UTF-8"
        return JSONResponse(error_body(detail, "HTTPException"), status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))  # fmt: skip

    # The filters (``params.FILTERS``) join each signature as query parameters (``with_filters``).
    def search(
        q: Annotated[str, Query(description="the query: words, \"a phrase\", -word, author:NAME, year:1998-2001",
                                json_schema_extra={"maxLength": BOUNDS["query_chars"]})],
        limit: Limit = LIMIT.default,
        offset: Offset = OFFSET.default,
        **filters: Any,
    ) -> JSONResponse:  # fmt: skip
        """Rank papers for a query (`retrieval search --json`): each result with its authors, abstract, scores
        and why it is where it is; the metrics, the filters and the expansion's report."""
        values = library_names(filters)
        check_filters(values)
        return JSONResponse(service.search(q, limit=limit, offset=offset, **values))

    def similar(
        paper_id: PaperId,
        limit: Limit = LIMIT.default,
        offset: Offset = OFFSET.default,
        exclude: Exclude = None,
        **filters: Any,
    ) -> JSONResponse:
        """Papers like this one (`retrieval similar --json`): co-citation, shared references and text similarity,
        each with the seeds it is co-cited with, the references it shares and its text score."""
        values = library_names(filters)
        check_filters(values)
        data = service.similar([paper_id], limit=limit, offset=offset, exclude=exclude, **values)
        return JSONResponse(data)

    app.get("/search", tags=["api"], responses=_errors(400, 413))(with_filters(search, _query, rename=True))
    app.get(f"/similar/{{paper_id:{ID}}}", tags=["api"], responses=_errors(400, 404, 413))(
        limits.slow(with_filters(similar, _query, rename=True))
    )

    @app.get(f"/papers/{{paper_id:{ID}}}", tags=["api"], responses=_errors(400, 404))
    @limits.slow
    def paper(
        paper_id: PaperId,
        limit: LinksLimit = LINKS_LIMIT.default,
        sort: LinksSort = LINKS_SORT.default,
        references_offset: ReferencesOffset = REFERENCES_OFFSET.default,
        citations_offset: CitationsOffset = CITATIONS_OFFSET.default,
    ) -> JSONResponse:
        """One paper (`retrieval show --json`): authors, year, abstract, and a page of its references and of its
        citing papers (`limit` of each, ordered by `sort`, from `references_offset` and `citations_offset`), with
        the totals they are out of (`references_total`, `citations_total`) and what the page holds (`links`)."""
        return JSONResponse(
            service.paper(
                paper_id, limit=limit, sort=sort, references_offset=references_offset, citations_offset=citations_offset
            )
        )

    @app.post("/explain", tags=["api"], responses=_errors(400, 413))
    @limits.slow
    def explain(body: ExplainRequest) -> JSONResponse:
        """Rank papers by the evidence graph of the query's seeds (`retrieval explain --json`, never saved), with
        the whole graph (`graph`: every node, and every edge with its Delta, weight, kept or pruned and why)."""
        return JSONResponse(service.explain(body.query, subqueries=body.subqueries, settings=body.settings))

    @app.get("/stats", tags=["api"], responses=_errors())
    @limits.slow
    def stats() -> JSONResponse:
        """What the index holds (`retrieval stats --json`)."""
        return JSONResponse(service.stats())

    @app.get("/health", tags=["api"], responses=_errors())
    def health() -> JSONResponse:
        """The index opens and answers: its paper count, tokeniser and the server's uptime."""
        return JSONResponse(service.health())

    for route in app.routes:
        if isinstance(route, APIRoute) and route.path != "/health":  # a probe's cache-buster is no mistake
            taken[route.endpoint] = frozenset(field.alias for field in route.dependant.query_params)

    from .web import pages  # here, not above: the pages import this module's neighbours

    app.include_router(pages(service, limits))
    return app
