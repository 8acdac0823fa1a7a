"""The index behind ``retrieval serve`` and ``retrieval mcp``: every request checked against ``BOUNDS``, answered
through the library's read-only client, and returned as the same JSON objects as ``--json``.

Read-only: clients open the index read-only, ``explain`` never saves a run, and nothing is written to the query
log (a server that wrote on every request would hold the writers' lock against ``retrieval add``). One client per
thread (a SQLite connection serves one thread), each opened on first use: under WAL, readers on different
connections run side by side, and see each add whole, as every search does.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time

from ..config import QUERY_TIMEOUT, RetrievalConfig, resolve_db
from ..errors import (
    ConfigError,
    FetchError,
    IndexNotFoundError,
    InputError,
    NotAnIndexError,
    OverloadedError,
    PaperNotFoundError,
    RetrievalError,
    SchemaVersionError,
    StoreError,
    TooLargeError,
)
from ..evidence.config import EvidenceConfig
from ..evidence.pipeline import explain
from ..search.client import RetrievalClient
from ..store.database import check_index
from ..validate import check_int
from .params import BOUNDS, LINKS_LIMIT, LINKS_SORT, filter_values

#: The evidence settings a request may change (``POST /explain``'s ``settings``).
EXPLAIN_SETTINGS = (
    "seeds_per_subquery", "seed_pool", "max_nodes", "theta", "tau", "prune", "beta", "recency", "query_year",
    "ranker", "alpha", "top_k",
)  # fmt: skip


def check_query(text: object, name: str = "q") -> str:
    """A query's text: a non-blank string of at most ``BOUNDS['query_chars']`` characters."""
    if not isinstance(text, str):
        raise ConfigError(f"{name} must be a string, got {type(text).__name__}")
    if not text.strip():
        raise ConfigError(f"{name} is empty: give the words to search for")
    if len(text) > BOUNDS["query_chars"]:
        raise TooLargeError(
            f"{name} has {len(text):,} characters, more than {BOUNDS['query_chars']:,}: shorten it (a whole abstract "
            "fits; paste its first paragraphs)"
        )
    return text


def _paper_ids(ids: object, name: str) -> list[str]:
    if isinstance(ids, str):
        ids = [ids]
    if not isinstance(ids, (list, tuple)) or not all(isinstance(i, str) for i in ids):
        raise ConfigError(f"{name} must be a list of paper ids")
    if not all(i.strip() for i in ids):
        raise ConfigError(f"{name}: a paper id is empty: give ids as search results show them (such as hep-th/9711200)")
    if len(ids) > BOUNDS["ids"]:
        raise TooLargeError(f"{name} has {len(ids):,} ids, more than {BOUNDS['ids']:,}")
    longest = max(ids, key=len, default="")
    if len(longest) > BOUNDS["id_chars"]:
        raise TooLargeError(
            f"{name}: an id of {len(longest):,} characters, more than {BOUNDS['id_chars']:,}: give ids as search "
            "results show them"
        )
    return list(ids)


#: ``explain_summary``'s defaults: edges listed per list of each paper, and its bound on the answer's length in
#: characters (``summarise``).
EXPLAIN_EDGES = 3
EXPLAIN_BUDGET = 40_000


def _edge(edge) -> dict:
    """An edge of a summary: its ends, Delta, weight, and kept or pruned and why (not the claim-level support)."""
    return {"citing": edge.citing, "cited": edge.cited, "delta": edge.delta, "weight": edge.weight,
            "kept": edge.kept, "reason": edge.reason}  # fmt: skip


def _strongest(edges, most: int) -> list[dict]:
    """The ``most`` edges of highest weight (kept ones first: a pruned edge weighs 0), then Delta, then ends."""
    ordered = sorted(edges, key=lambda e: (not e.kept, -e.weight, -e.delta, e.citing, e.cited))
    return [_edge(e) for e in ordered[:most]]


def _reason_kind(reason: str | None) -> str:
    """What a pruned edge's reason says without its numbers (``Delta < tau 0.1``), to count edges by it."""
    head = (reason or "none").split(":", 1)[0]
    return re.sub(r"^Delta [-\d.]+ ", "Delta ", head)


def summarise(run, edges: int = EXPLAIN_EDGES, pruned: int = 0, budget: int = EXPLAIN_BUDGET) -> dict:
    """An evidence run in at most ``budget`` characters of JSON, for a reader with little room (an agent's context):
    the ranking (``results``: each paper's rank, score, role, title and year) with, per paper, its ``edges``
    strongest seed edges (``via``) and kept edges into and out of it (``in_edges``, ``out_edges``), each list's
    total beside it; the ``pruned`` strongest pruned edges, their total and their count per kind of reason; the
    seeds (id, relevance, sub-queries); health, size, config, timings. ``EvidenceRun.to_dict`` lists every edge of
    every returned paper and every pruned edge: over a million characters for a question about much-cited papers
    on hepth.

    Should the summary still be longer than ``budget``, its lists get shorter (fewer pruned edges, then fewer edges
    per paper, down to none, then fewer papers, the lowest ranked first); ``detail`` says what was listed and
    whether anything was cut."""
    explanations = run.explanations()
    pruned_edges = run.pruned_edges
    reasons: dict[str, int] = {}
    for edge in pruned_edges:
        kind = _reason_kind(edge.reason)
        reasons[kind] = reasons.get(kind, 0) + 1
    seeds = [{"paper_id": s.paper_id, "relevance": s.relevance, "subqueries": list(s.subqueries)} for s in run.seeds]

    def paper(explanation, per_list: int) -> dict:
        node = explanation.node
        via = sorted(explanation.via, key=lambda link: (not link.edge.kept, -link.edge.weight, link.seed))
        return {
            "paper_id": node.paper_id,
            "title": node.title,
            "year": node.year,
            "role": node.role,
            "score": node.score,
            "rank": node.rank,
            "via": [
                {"seed": link.seed, "relation": link.relation, "edge": _edge(link.edge)} for link in via[:per_list]
            ],
            "via_total": len(explanation.via),
            "in_edges": _strongest(explanation.in_edges, per_list),
            "in_edges_total": len(explanation.in_edges),
            "out_edges": _strongest(explanation.out_edges, per_list),
            "out_edges_total": len(explanation.out_edges),
        }

    def build(per_list: int, listed_pruned: int, papers: int) -> dict:
        return {
            "query": run.query,
            "subqueries": list(run.subqueries),
            "health": run.health.to_dict(),
            "results": [paper(explanation, per_list) for explanation in explanations[:papers]],
            "seeds": seeds,
            "pruned_edges": _strongest(pruned_edges, listed_pruned),
            "pruned_total": len(pruned_edges),
            "pruned_reasons": dict(sorted(reasons.items())),
            "dropped_nodes_total": len(run.dropped_nodes),
            "size": run.size.to_dict(),
            "config": run.config.to_dict(),
            "timings_ms": run.timings_ms,
            "detail": {
                "edges": per_list,
                "pruned": listed_pruned,
                "results": papers,
                "budget_chars": budget,
                "cut": (per_list, listed_pruned, papers) != (edges, pruned, len(explanations)),
            },
        }

    per_list, listed_pruned, papers = edges, pruned, len(explanations)
    data = build(per_list, listed_pruned, papers)
    while len(json.dumps(data)) > budget and (per_list or listed_pruned or papers):
        if listed_pruned:
            listed_pruned //= 2
        elif per_list:
            per_list -= 1
        else:
            papers -= 1
        data = build(per_list, listed_pruned, papers)
    return data


class Service:
    """Answers requests on the index at ``db`` (resolved as everywhere); checked on construction, so a server
    that starts is a server whose index opens."""

    def __init__(self, db: str | os.PathLike[str] | None = None, timeout: float | None = QUERY_TIMEOUT) -> None:
        self.path = resolve_db(db)  # a file or a PostgreSQL server
        self.timeout = timeout  # seconds a read may take (``RetrievalClient``'s)
        check_index(self.path)
        self._local = threading.local()
        self._clients: list[tuple[threading.Thread, RetrievalClient]] = []
        self._lock = threading.Lock()
        self.started = time.time()

    def client(self) -> RetrievalClient:
        """This thread's client (opened on first use). The clients of threads that have ended (a thread pool
        retires idle threads: anyio's after 10 s) are closed then, so connections do not pile up."""
        client = getattr(self._local, "client", None)
        if client is None:
            client = RetrievalClient(self.path, timeout=self.timeout)
            self._local.client = client
            with self._lock:
                ended = [c for t, c in self._clients if not t.is_alive()]
                self._clients = [(t, c) for t, c in self._clients if t.is_alive()]
                self._clients.append((threading.current_thread(), client))
            for old in ended:  # connections are opened with check_same_thread=False, and their thread is gone
                old.close()
        return client

    def interrupt(self) -> None:
        """Stop what every client is reading now (a server's stop, once its grace period is over): each such
        read raises in its own thread; the clients stay usable."""
        with self._lock:
            clients = [c for _, c in self._clients]
        for client in clients:
            with contextlib.suppress(Exception):  # a connection already closed has nothing to stop
                client.interrupt()

    def close(self) -> None:
        with self._lock:
            clients, self._clients = [c for _, c in self._clients], []
        for client in clients:
            with contextlib.suppress(Exception):  # a connection SQLite will not close now: the process ends
                client.close()

    # -- requests ---------------------------------------------------------------------------------------------
    def search(self, q: str, limit: int = 10, offset: int = 0, **filters) -> dict:
        """``GET /search``: ``RetrievalResult.to_dict()``, papers with authors and abstracts; ``filters``, those
        of ``retrieval.interfaces.params.FILTERS`` by their library names."""
        check_query(q)
        check_int("limit", limit, 1, BOUNDS["limit"])
        check_int("offset", offset, 0, BOUNDS["offset"])
        result = self.client().search(q, limit=limit, offset=offset, **filter_values(filters))
        data = result.to_dict()
        for entry, ranked in zip(data["results"], result.ranked, strict=True):
            entry["abstract"] = ranked.paper.abstract
        return data

    def similar(
        self, ids: list[str] | str, limit: int = 10, offset: int = 0, exclude: list[str] | None = None, **filters
    ) -> dict:
        """``GET /similar/{id}``: ``SimilarResult.to_dict()``."""
        seeds = _paper_ids(ids, "ids")
        check_int("limit", limit, 1, BOUNDS["limit"])
        check_int("offset", offset, 0, BOUNDS["offset"])
        result = self.client().similar(
            seeds, limit, offset=offset, exclude=_paper_ids(exclude or [], "exclude"), **filter_values(filters)
        )
        return result.to_dict()

    def paper(
        self,
        paper_id: str,
        limit: int = LINKS_LIMIT.default,
        sort: str = LINKS_SORT.default,
        references_offset: int = 0,
        citations_offset: int = 0,
    ) -> dict:
        """``GET /papers/{id}``: ``PaperPage.to_dict()``: the paper, ``limit`` (at most ``BOUNDS['limit']``) of its
        references and of its citing papers from each list's offset, in the order ``sort`` asks, with titles, and
        the totals they are out of. A much-cited paper's every citing paper is thousands of links (400 KB for
        hepth's most cited): a page at a time, never the whole list."""
        pid = _paper_ids(paper_id, "id")[0]
        check_int("limit", limit, 1, BOUNDS["limit"])
        page = self.client().show(
            pid, limit=limit, sort=sort, references_offset=references_offset, citations_offset=citations_offset
        )
        return page.to_dict()

    def explain(self, query: str, subqueries: list[str] | None = None, settings: dict | None = None) -> dict:
        """``POST /explain``: ``EvidenceRun.to_dict()`` and the whole graph (``graph``: every node and edge, with
        Delta, weight, kept or pruned and why). Never saved."""
        run = self._explain(query, subqueries, settings)
        data = run.to_dict()
        data["graph"] = {
            "nodes": [node.to_dict() for node in run.nodes.values()],
            "edges": [edge.to_dict() for edge in run.edges.values()],
        }
        return data

    def explain_summary(
        self,
        query: str,
        subqueries: list[str] | None = None,
        settings: dict | None = None,
        edges: int = EXPLAIN_EDGES,
        pruned: int = 0,
        budget: int = EXPLAIN_BUDGET,
    ) -> dict:
        """The evidence run of ``explain`` as a bounded summary (the agent tool's answer): ``summarise``."""
        check_int("edges", edges, 0, BOUNDS["explain_edges"])
        check_int("pruned", pruned, 0, BOUNDS["explain_pruned"])
        return summarise(self._explain(query, subqueries, settings), edges, pruned, budget)

    def _explain(self, query: str, subqueries: list[str] | None, settings: dict | None):
        """The checked request's evidence run (``retrieval.evidence.pipeline.explain``), never saved."""
        check_query(query, "query")
        subs = subqueries or []
        if not isinstance(subs, list):
            raise ConfigError(f"subqueries must be a list of texts, got {type(subs).__name__}")
        if len(subs) > BOUNDS["subqueries"]:
            raise TooLargeError(f"subqueries must be a list of at most {BOUNDS['subqueries']} texts, got {len(subs)}")
        subs = [check_query(s, "subqueries") for s in subs]
        given = dict(settings or {})
        unknown = sorted(set(given) - set(EXPLAIN_SETTINGS))
        if unknown:
            raise ConfigError(f"unknown settings {unknown}: the settings are {', '.join(EXPLAIN_SETTINGS)}")
        given.setdefault("max_nodes", EvidenceConfig().max_nodes)
        check_int("max_nodes", given["max_nodes"], 1, BOUNDS["max_nodes"])
        check_int("top_k", given.get("top_k", EvidenceConfig().top_k), 1, BOUNDS["top_k"])
        try:
            config = EvidenceConfig(**given)
        except TypeError as exc:  # a value of the wrong type the dataclass could not take
            raise ConfigError(f"settings: {exc}") from None
        return explain(self.client(), query, subqueries=subs, config=config)

    def stats(self) -> dict:
        """``GET /stats``: what ``retrieval stats --json`` prints."""
        from ..commands import stats  # the command's own function, so both say the same

        return stats(self.path)

    def health(self) -> dict:
        """``GET /health``: the index opens and answers; its size and the server's uptime."""
        client = self.client()
        stats = client.stats
        return {
            "status": "ok",
            "index": str(getattr(self.path, "shown", self.path)),
            "papers": stats.n_papers,
            "tokeniser": f"{stats.tokeniser} v{stats.tokeniser_version}",
            "uptime_s": round(time.time() - self.started, 1),
        }


#: The HTTP status of each error the library raises on purpose (the most specific class that matches wins): bad
#: input 400, beyond the bounds 413, an unknown paper 404, an index that cannot be read 503.
STATUS = {
    TooLargeError: 413,
    ConfigError: 400,
    PaperNotFoundError: 404,
    InputError: 400,
    IndexNotFoundError: 503,
    NotAnIndexError: 503,
    SchemaVersionError: 503,
    StoreError: 503,
    OverloadedError: 503,
    FetchError: 502,  # an upstream API failed (not served today, but every error has its status)
    RetrievalError: 500,
}
#: What a client is told of an unexpected error (500); the traceback goes to the server's log only.
INTERNAL = "internal error: the server's log has the details"


def status_of(exc: BaseException) -> int:
    """The HTTP status of an error: that of the first class in its MRO that ``STATUS`` names, else 500."""
    return next((STATUS[cls] for cls in type(exc).__mro__ if cls in STATUS), 500)


def default_config() -> RetrievalConfig:
    """The search settings the server uses (the library's defaults)."""
    return RetrievalConfig()
