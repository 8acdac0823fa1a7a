"""``retrieval mcp --db PATH``: the index as Model Context Protocol tools over stdio, for a research agent.

Four tools, each a thin call of ``retrieval.interfaces.service.Service`` (so every argument is checked against
``BOUNDS`` and every result is the JSON object ``--json`` prints): ``search`` (papers on a topic), ``similar``
(papers like given ones), ``show`` (one paper with its references and citing papers) and ``explain`` (the
evidence graph behind a ranking). Served with the official SDK's ``MCPServer`` (``mcp`` 2), whose type hints and
``Field`` descriptions are the tools' input schemas and whose ``dict`` returns are structured content.

stdout is the protocol channel: the SDK points file descriptor 1 at stderr while it serves, and ``sys.stdout`` is
``sys.stderr`` for the same time, so a stray ``print`` or warning can never corrupt a message. A library error
(``RetrievalError``: an empty query, a limit out of range, an unknown id) becomes a tool error whose text is the
library's message, never a traceback. A line that is no JSON-RPC message is answered as JSON-RPC 2.0 says
(``rejection``), where the SDK alone answers nothing and a client waits. Read-only: nothing is written to the
index (no query log, no saved runs).

The main CLI imports this module only when ``retrieval mcp`` runs; the SDK is imported when the server starts.
"""

# No ``from __future__ import annotations``: the SDK reads the tools' signatures, whose annotations name local
# descriptions and pydantic's ``Field``, so they must be objects when each function is defined.
import argparse
import asyncio
import functools
import inspect
import json
import logging
import operator
import sys
import time
import types
import typing
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

from ..errors import ConfigError, RetrievalError
from ..evidence.config import EvidenceConfig
from ..search.similar import COCITATION_FANOUT
from ..validate import shown_value
from .cli.options import DB_HELP, add_query_timeout
from .params import (
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
    with_filters,
)
from .service import BOUNDS, EXPLAIN_BUDGET, EXPLAIN_EDGES, Service, _paper_ids, check_query

log = logging.getLogger("retrieval.mcp")

#: What ``--help`` and the README say the command does.
DESCRIPTION = (
    "Serve the index as Model Context Protocol tools over stdio (search, similar, show, explain) for a research "
    "agent: register `retrieval mcp --db PATH` as a stdio server in the MCP client. Read-only."
)

MISSING_SDK = (
    "retrieval mcp needs the Model Context Protocol SDK (the `mcp` package, version 2 or later): "
    "install retrieval[serve] (`pip install 'retrieval[serve]'`)"
)

INSTRUCTIONS = (
    "A literature index of {papers:,} papers (title, abstract, year, authors, citations). Start with `search` "
    "to find papers on a topic; read one with `show` (abstract, references, citing papers); grow a set of "
    "papers with `similar`; use `explain` to see which papers support which through citations. Paper ids come "
    "from these tools' results: pass them exactly as given."
)

DEFAULTS = EvidenceConfig()

#: Threads that answer calls (a client may send several at once): each holds one read-only connection.
WORKERS = 4


def _bounds(low: int, high: int) -> dict:
    """Bounds shown in the input schema but checked by ``Service``, so that a value outside them gets the
    library's message (the same as the CLI's and the HTTP API's) rather than a schema validator's."""
    return {"minimum": low, "maximum": high}


# -- the tools' descriptions: what each returns, when to use it rather than another, its bounds ----------------
SEARCH = f"""Find papers on a topic from words: BM25 over title and abstract, a walk of the citation graph from the
best hits, and recency, blended into one score.

Use it first, for any topical question ("papers on black hole entropy"); use `similar` instead for "more like
this paper" or to extend a reading list, `show` to read one paper. The `id` of each result is what `similar`,
`show` and `explain` take.

Returns JSON: `results`, best first, each with `rank`, `id`, `title`, `year`, `authors`, `abstract`,
`final_score` (with its parts `bm25_score`, `graph_score`, `recency_score`, `graph_distance`, `reached`) and
`why` (one line that says why the paper is where it is); `matched` (papers containing a query word and passing
the filters; `matched_exact` false when estimated), `warnings` (read them: a word in no paper, a word that is an
author's surname), `filters`, `offset`, `metrics`, `expansion`. No results and a warning when no paper has the
words.

Query syntax: "a phrase", -word (leave out papers with it), author:NAME, year:1998-2001. Paging: `offset`
walks one ranking (pages concatenate). Bounds: query at most {BOUNDS["query_chars"]:,} characters, `limit` 1 to
{BOUNDS["limit"]}, `offset` 0 to {BOUNDS["offset"]:,}."""

SIMILAR = f"""Papers like the given ones: "more like this paper", or what a reading list is missing. Scores each
paper by co-citation (cited together with the given papers), bibliographic coupling (shared references) and the
text similarity of title and abstract, a third each; the given papers and `exclude` are left out.

Use it once you have ids (from `search`, `show` or an earlier `similar`); use `search` to find papers from words.

Returns JSON: `seeds`, `results`, best first, each with `rank`, `id`, `title`, `year`, `authors`, `score`,
`cocitation`, `coupling`, `text`, `cocited_with` and `shared_references_with` (counts per given paper) and `why`;
`matched` (papers with any signal; `matched_exact` false when estimated), `warnings`, `filters`, `offset`,
`metrics`, `cocitation_read` (a given paper cited by more than {COCITATION_FANOUT} papers is read through an even
sample of {COCITATION_FANOUT} of them: its `cocited_with` counts are estimates, `~` in `why`). An arXiv id may also
be given as arXiv:ID or an arxiv.org address. An id not in the index is an error. Bounds: at most {BOUNDS["ids"]}
ids in `paper_ids` and in `exclude`, `limit` 1 to {BOUNDS["limit"]}, `offset` 0 to {BOUNDS["offset"]:,}."""

SHOW = f"""One paper, to read it and follow its citations by hand: its abstract and a page of its references
and of the papers citing it.

Use it on an id from `search`, `similar` or `explain` results, or on a reference of another paper (when
`in_corpus` is true); use `similar` to rank the papers around it instead. An arXiv id may also be given as
arXiv:ID, an arxiv.org address (with or without a version) or arXiv's DOI.

Returns JSON: `id`, `title`, `abstract`, `year`, `authors`; `references` (the papers it cites) and `citations`
(the papers that cite it), each a page of at most `limit` links (default {LINKS_LIMIT.default}, at most
{BOUNDS["limit"]}) ordered by `sort` (default {LINKS_SORT.default}: the most cited first; or year, id), each link
with `id`, `in_corpus`, `cited_by` and the linked paper's `title`, `year` and `authors` when it is in the index;
`references_total`, `references_in_corpus` and `citations_total` (how many there are: a much-cited paper has
thousands of citing papers) and `links` (what this page holds). For more, call again with `references_offset` or
`citations_offset`. Size: about 10,000 characters with the default page, 400 more per link. An id not in the
index is an error that says so."""

EXPLAIN = f"""Why papers connect through citations (the evidence graph of a question): seeds from BM25 for the
query and each sub-query, their 1.5-hop citation graph, each edge weighted by how well the cited paper supports
the citing one (`delta`, and `weight` = delta x age discount) and pruned below a threshold, then a random walk
(personalised PageRank `ppr`, or `salsa`) over the edges kept.

Use it when the citation evidence matters: which papers support which, why a paper ranks where it does, whether
a result is only a lexical match. It is slower and its answer larger than `search`, which is the tool for a plain
topical search. Split a question into sub-queries for its aspects.

Returns JSON, a bounded summary: `results` (the `top_k` papers: `paper_id`, `title`, `year`, `role` (seed,
reference, citing), `score`, `rank`, and the strongest `edges` of each list (default {EXPLAIN_EDGES}): `via`
(the seed edges that brought it in), `in_edges` and `out_edges` (the kept edges the walk used), each with its
total (`via_total`, ...); each edge with `citing`, `cited`, `delta`, `weight`, `kept`, `reason`), `seeds`,
`pruned_edges` (the strongest `pruned` of them, default none, with why), `pruned_total`, `pruned_reasons`
(count per reason), `dropped_nodes_total`, `health` (`status` and `warnings`: read them), `size`, `config`,
`timings_ms`, `detail` (what was listed). The whole graph of a question about much-cited papers is hundreds of
thousands of characters: the answer is at most {EXPLAIN_BUDGET:,} characters (about 10,000 with the defaults);
beyond that the lists are cut shorter and `detail.cut` says so. Never saved. Bounds: query and each sub-query at
most {BOUNDS["query_chars"]:,} characters, at most {BOUNDS["subqueries"]} sub-queries, `top_k` 1 to
{BOUNDS["top_k"]}, `max_nodes` 1 to {BOUNDS["max_nodes"]:,}, `edges` 0 to {BOUNDS["explain_edges"]}, `pruned` 0
to {BOUNDS["explain_pruned"]}."""


def _bounds_of(param: Param) -> dict:
    """``param``'s bounds as JSON schema, its null default among the values of an ``enum`` (a schema's default
    must be one of them; an agent may send null for "not given", where a query string has no null)."""
    bounds = param.schema_bounds()
    if "enum" in bounds and param.default is None:
        return {**bounds, "enum": [*bounds["enum"], None]}
    return bounds


def _strict(kind):
    """``kind`` with its numbers strict: an agent's ``true`` or ``"5"`` is not a number of results (pydantic's lax
    mode took both)."""
    from pydantic import Strict

    if kind in (int, float):
        return Annotated[kind, Strict()]
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
        return functools.reduce(operator.or_, (_strict(arg) for arg in typing.get_args(kind)))
    return kind


def _tools(service: Service) -> list[tuple[Callable[..., dict], str, str]]:
    """The four tools as (function, title, description): typed functions over ``service``."""
    from pydantic import Field

    def field(param: Param):
        """``param`` (``retrieval.interfaces.params``) as a tool's input: its type, description and bounds."""
        return Annotated[
            _strict(param.kind), Field(description=param.server_help(), json_schema_extra=_bounds_of(param))
        ]

    Limit, Offset = field(LIMIT), field(OFFSET)

    # The filters (``params.FILTERS``) join each signature (``with_filters``).
    def search(
        query: Annotated[
            str,
            Field(
                description=f"the words to search for, or a pasted abstract; at most {BOUNDS['query_chars']:,} "
                "characters",
                json_schema_extra={"maxLength": BOUNDS["query_chars"]},
            ),
        ],
        limit: Limit = LIMIT.default,
        offset: Offset = OFFSET.default,
        **filters: Any,
    ) -> dict[str, Any]:
        check_query(query, "query")  # the message names this tool's parameter (the HTTP API's is `q`)
        check_filters(filters, renamed=False)
        return service.search(query, limit=limit, offset=offset, **filters)

    def similar(
        paper_ids: Annotated[
            list[str],
            Field(
                description=f"the papers to find more like (1 to {BOUNDS['ids']} ids, exactly as search results "
                "give them): one paper, or a reading list",
                json_schema_extra={"minItems": 1, "maxItems": BOUNDS["ids"]},
            ),
        ],
        limit: Limit = LIMIT.default,
        offset: Offset = OFFSET.default,
        exclude: Annotated[
            list[str] | None,
            Field(
                description=f"{EXCLUDE.help} (at most {BOUNDS['ids']})", json_schema_extra={"maxItems": BOUNDS["ids"]}
            ),
        ] = None,
        **filters: Any,
    ) -> dict[str, Any]:
        _paper_ids(paper_ids, "paper_ids")  # the message names this tool's parameter (the HTTP API's is `ids`)
        check_filters(filters, renamed=False)
        return service.similar(paper_ids, limit=limit, offset=offset, exclude=exclude, **filters)

    def show(
        paper_id: Annotated[str, Field(description=PAPER_ID.help)],
        limit: field(LINKS_LIMIT) = LINKS_LIMIT.default,
        sort: field(LINKS_SORT) = LINKS_SORT.default,
        references_offset: field(REFERENCES_OFFSET) = REFERENCES_OFFSET.default,
        citations_offset: field(CITATIONS_OFFSET) = CITATIONS_OFFSET.default,
    ) -> dict[str, Any]:
        _paper_ids(paper_id, "paper_id")  # the message names this tool's parameter (the HTTP API's is `id`)
        return service.paper(
            paper_id, limit=limit, sort=sort, references_offset=references_offset, citations_offset=citations_offset
        )

    def explain(
        query: Annotated[
            str,
            Field(
                description=f"the question, in words (sub-query 0); at most {BOUNDS['query_chars']:,} characters",
                json_schema_extra={"maxLength": BOUNDS["query_chars"]},
            ),
        ],
        subqueries: Annotated[
            list[str] | None,
            Field(
                description=f"more aspects of the question, each seeding the graph too (at most "
                f"{BOUNDS['subqueries']})",
                json_schema_extra={"maxItems": BOUNDS["subqueries"]},
            ),
        ] = None,
        top_k: Annotated[
            int,
            Field(
                description=f"papers to return, 1 to {BOUNDS['top_k']}",
                json_schema_extra=_bounds(1, BOUNDS["top_k"]),
                strict=True,
            ),
        ] = DEFAULTS.top_k,
        max_nodes: Annotated[
            int,
            Field(
                description=f"cap on the graph's papers (the work per call), 1 to {BOUNDS['max_nodes']:,}; over it "
                "the graph is trimmed",
                json_schema_extra=_bounds(1, BOUNDS["max_nodes"]),
                strict=True,
            ),
        ] = DEFAULTS.max_nodes or BOUNDS["max_nodes"],
        ranker: Annotated[
            Literal["vote", "ppr", "salsa"],
            Field(
                description="the ranking: the seeds' vote (vote, the default), personalised PageRank (ppr) or SALSA "
                "(hubs and authorities)"
            ),
        ] = DEFAULTS.ranker,
        edges: Annotated[
            int,
            Field(
                description=f"edges to list per list of each paper (via, in_edges, out_edges), the strongest first, "
                f"0 to {BOUNDS['explain_edges']}",
                json_schema_extra=_bounds(0, BOUNDS["explain_edges"]),
                strict=True,
            ),
        ] = EXPLAIN_EDGES,
        pruned: Annotated[
            int,
            Field(
                description=f"pruned edges to list, the strongest first, with why each was pruned, 0 to "
                f"{BOUNDS['explain_pruned']} (their total and count per reason are always given)",
                json_schema_extra=_bounds(0, BOUNDS["explain_pruned"]),
                strict=True,
            ),
        ] = 0,
    ) -> dict[str, Any]:
        settings = {"top_k": top_k, "max_nodes": max_nodes, "ranker": ranker}
        return service.explain_summary(query, subqueries=subqueries, settings=settings, edges=edges, pruned=pruned)

    def annotate(param: Param):
        return Annotated[
            _strict(param.kind), Field(description=param.help, json_schema_extra=_bounds_of(param) or None)
        ]

    return [
        (with_filters(search, annotate), "Search papers", SEARCH),
        (with_filters(similar, annotate), "Papers like these", SIMILAR),
        (show, "Show one paper", SHOW),
        (explain, "Explain by citation evidence", EXPLAIN),
    ]


def _flow(text: str) -> str:
    """A description's paragraphs each on one line (the source wraps them at 120 columns)."""
    return "\n\n".join(" ".join(paragraph.split()) for paragraph in text.split("\n\n"))


def _tool_call(name: str, fn: Callable[..., dict], workers: ThreadPoolExecutor) -> Callable[..., Awaitable[dict]]:
    """``fn`` run on one of ``workers``, with a log line per call on stderr, and a library error turned into the
    SDK's ``ToolError`` (the agent reads its message; anything else is a crash, whose text the SDK keeps from the
    client). The workers are threads that live as long as the server: each keeps the index open on its own
    connection (``Service.client``), where the SDK's own threads for a plain function end after 10 s idle and
    would leave a connection behind for every one."""
    from mcp.server.mcpserver.exceptions import ToolError

    @functools.wraps(fn)
    async def call(**kwargs: Any) -> dict:
        start = time.perf_counter()
        try:
            data = await asyncio.wrap_future(workers.submit(functools.partial(fn, **kwargs)))
        except RetrievalError as exc:  # the SDK logs the refusal
            raise ToolError(str(exc)) from None
        count = len(data["results"]) if "results" in data else 1
        log.info("retrieval mcp: %s: %d result(s), %.1f ms", name, count, (time.perf_counter() - start) * 1000)
        return data

    return call


def arguments_message(exc) -> str:
    """A pydantic ``ValidationError`` of a tool's arguments as one line, one part per argument: what it must be
    and what it got (a union's branches reported once, under the argument's name)."""
    parts: dict[str, str] = {}
    for error in exc.errors():
        loc = [str(part) for part in error.get("loc", ())]
        name = loc[0] if loc else "arguments"
        if name in parts:
            continue
        if error.get("type") == "missing":
            parts[name] = f"{name} is required"
            continue
        where = ".".join([name, *(part for part in loc[1:] if part.isdigit())])  # a list's index, not a branch
        message = str(error.get("msg", "is not valid"))
        parts[name] = f"{where}: {message[:1].lower()}{message[1:]}, got {shown_value(error.get('input'))}"
    return "; ".join(parts.values()) or "the arguments are not valid"


PARSE_MESSAGE = (
    "Parse error: the line is not JSON the server can read: send one JSON-RPC 2.0 message per line, in UTF-8, "
    "with no lone surrogate escape such as \\ud800 in a string"
)
INVALID_MESSAGE = (
    'Invalid Request: the line is JSON but no JSON-RPC 2.0 message: a request is an object with "jsonrpc": "2.0", '
    'an "id" (a string or a number) and a "method"'
)


def rejection(exc: Exception):
    """The JSON-RPC 2.0 error answering a line the SDK could not read as a message (``exc``, its pydantic
    ``ValidationError``): a parse error (-32700) for text that is not JSON to it, else an invalid request (-32600);
    under the line's ``id`` where one can be read, so that the client waiting on it is answered, else null."""
    from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError

    try:
        errors = exc.errors()
    except Exception:  # not pydantic's, or an input it cannot show
        errors = []
    unreadable = not errors or any(error.get("type") == "json_invalid" for error in errors)
    request_id = None
    for error in errors:
        line = error.get("input")
        if isinstance(line, str):  # the raw line: JSON to Python, not to the SDK (a lone surrogate)
            try:
                line = json.loads(line)
            except ValueError:
                continue
        value = line.get("id") if isinstance(line, dict) else None
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            request_id = value
            break
    error = (
        ErrorData(code=PARSE_ERROR, message=PARSE_MESSAGE)
        if unreadable
        else ErrorData(code=INVALID_REQUEST, message=INVALID_MESSAGE)
    )
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=error)


def make_server(service: Service, workers: ThreadPoolExecutor):
    """The MCP server (``mcp.server.mcpserver.MCPServer``) with the four tools over ``service``, each call run on
    one of ``workers``."""
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.types import ToolAnnotations
    except ImportError:
        raise ConfigError(MISSING_SDK) from None
    from .. import __version__

    @asynccontextmanager
    async def stdout_to_stderr(_server):
        # While the server runs, the SDK owns the real stdout; Python's goes to stderr with every stray write.
        stdout, sys.stdout = sys.stdout, sys.stderr
        try:
            yield None
        finally:
            sys.stdout = stdout

    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import ValidationError

    tools = _tools(service)
    taken = {fn.__name__: set(inspect.signature(fn).parameters) for fn, _, _ in tools}

    class Server(MCPServer):
        """The SDK's server, with its checks of a call's arguments said as the library says things: an unknown
        argument named (the SDK drops it silently), a wrong type as one line per argument (pydantic's report, with
        its links, before); and every line on stdin answered (``rejection``)."""

        async def run_stdio_async(self) -> None:
            lowlevel = getattr(self, "_lowlevel_server", None)
            if lowlevel is None:  # another layout of the SDK: its own loop, an unreadable line unanswered
                return await super().run_stdio_async()
            import anyio
            from mcp.server.stdio import stdio_server
            from mcp.shared.message import SessionMessage

            async with stdio_server() as (read_stream, write_stream):
                send, receive = anyio.create_memory_object_stream(0)

                async def sieve():  # the SDK's read stream, its unreadable lines answered here
                    async with send:
                        async for item in read_stream:
                            if isinstance(item, Exception):
                                log.warning("retrieval mcp: answered a line that is no JSON-RPC message")
                                await write_stream.send(SessionMessage(rejection(item)))
                            else:
                                await send.send(item)

                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(sieve)
                    await lowlevel.run(receive, write_stream, lowlevel.create_initialization_options())
                    tasks.cancel_scope.cancel()

        async def call_tool(self, name: str, arguments: dict[str, Any], context=None):
            unknown = sorted(set(arguments) - taken.get(name, set(arguments)))
            if unknown:
                raise ToolError(
                    f"Error executing tool {name}: unknown argument(s) {', '.join(unknown)}: it takes "
                    f"{', '.join(sorted(taken[name]))}"
                )
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                if not isinstance(exc.__cause__, ValidationError):
                    raise
                raise ToolError(f"Error executing tool {name}: {arguments_message(exc.__cause__)}") from exc

    server = Server(
        "retrieval",
        title="retrieval: a literature index",
        instructions=INSTRUCTIONS.format(papers=service.client().stats.n_papers),
        version=__version__,
        log_level="INFO",
        lifespan=stdout_to_stderr,
    )
    read_only = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
    for fn, title, description in tools:
        server.add_tool(
            _tool_call(fn.__name__, fn, workers), name=fn.__name__, title=title, description=_flow(description),
            annotations=read_only, structured_output=True,
        )  # fmt: skip
    return server


# -- the command --------------------------------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``retrieval mcp`` on its parser ``p``."""
    p.description = DESCRIPTION
    p.add_argument("--db", help=DB_HELP)
    add_query_timeout(p)
    p.set_defaults(func=_cmd_mcp)


def _cmd_mcp(args: argparse.Namespace) -> int:
    try:
        import mcp.server.mcpserver  # noqa: F401  (the SDK first: without it there is nothing to serve)
    except ImportError:
        raise ConfigError(MISSING_SDK) from None
    # The index checked before serving: a missing one is the usual message, exit 1.
    service = Service(args.db, args.query_timeout)
    workers = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="retrieval-mcp")
    try:
        server = make_server(service, workers)
        where = getattr(service.path, "shown", service.path)  # a server URL without its password
        print(f"retrieval mcp: serving {where} over stdio (read-only)", file=sys.stderr)
        server.run("stdio")
    finally:
        workers.shutdown(wait=False, cancel_futures=True)
        service.close()
    return 0
