"""The index behind ``retrieval serve`` and ``retrieval mcp``: every request checked against ``BOUNDS``, answered
through the library's read-only client, and returned as the same JSON objects as ``--json``.

Read-only: clients open the index read-only, ``explain`` never saves a run, and nothing is written to the query
log (a server that wrote on every request would hold the writers' lock against ``retrieval add``). One client per
thread (a SQLite connection serves one thread), each opened on first use: under WAL, readers on different
connections run side by side, and see each add whole, as every search does.
"""

from __future__ import annotations

import contextlib
import os
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
from .params import BOUNDS, filter_values

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

    def paper(self, paper_id: str) -> dict:
        """``GET /papers/{id}``: ``PaperPage.to_dict()`` (references and citing papers with titles)."""
        return self.client().show(_paper_ids(paper_id, "id")[0]).to_dict()

    def explain(self, query: str, subqueries: list[str] | None = None, settings: dict | None = None) -> dict:
        """``POST /explain``: ``EvidenceRun.to_dict()`` and the whole graph (``graph``: every node and edge, with
        Delta, weight, kept or pruned and why). Never saved."""
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
        run = explain(self.client(), query, subqueries=subs, config=config)
        data = run.to_dict()
        data["graph"] = {
            "nodes": [node.to_dict() for node in run.nodes.values()],
            "edges": [edge.to_dict() for edge in run.edges.values()],
        }
        return data

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
