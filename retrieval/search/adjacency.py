"""The citation graph as adjacency arrays, kept by a long-lived process (a server, an agent's session, an
evaluation) for the statements that read edges on every query.

``similar`` reads a seed's graph signals with statements (``retrieval.search.similar``): its citing papers, their
references, and the papers citing its references, each row an id that Python counts; for a much-cited paper that
is thousands of rows a call, most of the call. A search reads its seeds' references and citing papers for the
expansion and for the seeds' vote (``retrieval.search.expansion``, ``retrieval.search.vote``). A process whose
statements have read about a graph's worth of such rows at one index state (``GRAPH_RENT`` per paper: a corpus
lists some 10 to 40 references a paper) reads every citation once and keeps the graph as arrays (compressed
sparse rows: each node's references and its citing papers), which then answer those reads. That is the
rent-or-buy rule: the process never pays much more than twice what the better choice in hindsight would have
cost, and a command's one call rarely reaches the rent. What it keeps is bounded by ``GRAPH_SHARE`` of the
postings cache's limit (``RETRIEVAL_POSTINGS_CACHE_MB``), estimated from the citation count before anything is
read; a graph too large for it is never read. Every write renews the index state (``index_info.generation``), so
a kept graph never answers past one. Reads that leave papers out (``retrieval.search.cutoff``) stay statements.

The statements stay what these reads are (and what the tests hold the arrays to): the arrays give the same rows
and counts, so the same rankings and scores. NumPy is imported only once a graph is read.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from ..errors import QueryTimeoutError
from ..store.sql.dialect import register_sharded, statement
from ..store.sql.executor import Snapshot

#: Citation rows read by statements, per paper of the index, at which a process reads the whole graph.
GRAPH_RENT = 10
#: The share of the postings cache's limit a kept graph may take.
GRAPH_SHARE = 0.25
#: Estimated bytes a kept graph takes per citation (two int32 neighbour lists) and per node or paper (its id, the
#: id -> node entry or the set's, the offsets), for the decision before reading it.
EDGE_BYTES = 8
NODE_BYTES = 160
#: Citation rows read per statement while the graph is read (the rows are Python tuples until numbered).
PAGE_ROWS = 65_536

CITATION_COUNT_SQL = statement(
    lambda d: (
        """\
SELECT count(*)
FROM citation_links AS l"""
    ),
    scatter="sum",  # sharded: each shard holds its papers' reference lists
)
CITATION_COUNT_STATEMENT = "similar: how many citations, before the process keeps them"


def _citations_page(d, first: bool) -> str:
    after = "" if first else "(l.citing_key, l.cited_key) > (:after_citing, :after_cited)\n  AND "
    return f"""\
SELECT l.citing_key,
       l.cited_key
FROM citation_links AS l
WHERE {after}{d.whole("l.citing_key")}
  AND {d.whole("l.cited_key")}
ORDER BY l.citing_key,
         l.cited_key
LIMIT :page"""


#: The graph read in pages of numbers, in key order (the primary key's: an index range per page), from the first
#: (numbers are any integers a hand edit gave) on. A value typed into a number's column by hand (SQLite keeps it)
#: is no number: its row is left out, as the view leaves it out.
CITATIONS_FIRST_PAGE_SQL = statement(lambda d: _citations_page(d, first=True))
CITATIONS_PAGE_SQL = statement(lambda d: _citations_page(d, first=False))
CITATIONS_STATEMENT = "similar: every citation, kept by this process"
# A sharded coordinator: the page's start as comparisons the shards are sent (postgres_fdw keeps a row comparison
# on the coordinator, so each page read every shard's citations whole).
register_sharded(
    CITATIONS_PAGE_SQL,
    """\
SELECT l.citing_key,
       l.cited_key
FROM citation_links AS l
WHERE (l.citing_key > :after_citing OR (l.citing_key = :after_citing AND l.cited_key > :after_cited))
  AND l.citing_key IS NOT NULL
  AND l.cited_key IS NOT NULL
ORDER BY l.citing_key,
         l.cited_key
LIMIT :page""",
)

#: The ids the numbers stand for, in the ids' byte order.
PAPER_KEYS_SQL = statement(
    lambda d: (
        f"""\
SELECT k.key,
       k.paper_id
FROM paper_keys AS k
ORDER BY k.paper_id{d.bytes_order}"""
    )
)
PAPER_KEYS_STATEMENT = "similar: the ids of the kept citations"

PAPERS_IN_GRAPH_SQL = statement(
    lambda d: (
        """\
SELECT p.id
FROM papers AS p"""
    ),
    scatter="concat",
)
PAPERS_IN_GRAPH_STATEMENT = "similar: every paper's id, beside the kept citations"


class Graph:
    """The citation graph at one index state: a node per id at either end of a citation (in the order first
    read), each node's references and citing papers (compressed sparse rows, each list in the order read), and
    every paper's id."""

    def __init__(self, citing, cited, ids: list[str], papers: frozenset[str]) -> None:
        import numpy as np

        n = len(ids)
        self.node = {pid: i for i, pid in enumerate(ids)}
        self.ids = np.array(ids, dtype=object)
        by_citing = np.argsort(citing, kind="stable")
        self.references = cited[by_citing]
        self.references_at = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(citing, minlength=n), out=self.references_at[1:])
        by_cited = np.argsort(cited, kind="stable")
        self.citers = citing[by_cited]
        self.citers_at = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(cited, minlength=n), out=self.citers_at[1:])
        #: Every paper's id (a node may be a reference outside the corpus, or a citing paper a record names).
        self.papers = papers
        self.size = (
            self.references.nbytes + self.citers.nbytes + self.references_at.nbytes + self.citers_at.nbytes
            + self.ids.nbytes + sum(NODE_BYTES // 2 + len(pid) for pid in ids)
            + sum(NODE_BYTES // 2 + len(pid) for pid in papers)
        )  # fmt: skip

    @classmethod
    def read(cls, snap: Snapshot) -> Graph:
        """Every citation of ``snap``'s index state, read in pages of ``PAGE_ROWS`` numbers, then their ids.

        The nodes and lists come out as reading the citations by id would give them (each list in its ids' byte
        order, the nodes numbered as first met, page by page), whatever order the ids were numbered in."""
        import numpy as np

        citing_parts, cited_parts = [], []
        after = None
        while True:
            if after is None:
                rows = snap.rows(CITATIONS_STATEMENT, CITATIONS_FIRST_PAGE_SQL, {"page": PAGE_ROWS})
            else:
                params = {"after_citing": after[0], "after_cited": after[1], "page": PAGE_ROWS}
                rows = snap.rows(CITATIONS_STATEMENT, CITATIONS_PAGE_SQL, params)
            if rows:
                pairs = np.array(rows, dtype=np.int64)
                citing_parts.append(pairs[:, 0])
                cited_parts.append(pairs[:, 1])
            if len(rows) < PAGE_ROWS:
                break
            after = rows[-1]
        keyed = snap.rows(PAPER_KEYS_STATEMENT, PAPER_KEYS_SQL, {})
        papers = frozenset(pid for (pid,) in snap.rows(PAPERS_IN_GRAPH_STATEMENT, PAPERS_IN_GRAPH_SQL, {}))
        empty = np.zeros(0, dtype=np.int64)
        citing = np.concatenate(citing_parts) if citing_parts else empty
        cited = np.concatenate(cited_parts) if cited_parts else empty
        # Each number as its id's place in byte order (numbers as paper_keys has them: any integers), the citations
        # then in (citing id, cited id) order. A number paper_keys lacks (a row deleted by hand, which `check`
        # reports) leaves its citation out, as the view does.
        keys = np.fromiter((key for key, _ in keyed), dtype=np.int64, count=len(keyed))
        by_key = np.argsort(keys, kind="stable")
        sorted_keys = keys[by_key]

        def places(numbers):
            if not len(sorted_keys):
                return np.full(len(numbers), -1, dtype=np.int64)
            at = np.minimum(np.searchsorted(sorted_keys, numbers), len(sorted_keys) - 1)
            return np.where(sorted_keys[at] == numbers, by_key[at], -1)

        citing, cited = places(citing), places(cited)
        named = (citing >= 0) & (cited >= 0)
        citing, cited = citing[named], cited[named]
        by_id = np.lexsort((cited, citing))
        citing, cited = citing[by_id], cited[by_id]
        # Numbered as first met: each page's citing ids, then its cited ids.
        met = np.concatenate(
            [part for start in range(0, len(citing), PAGE_ROWS) for part in
             (citing[start : start + PAGE_ROWS], cited[start : start + PAGE_ROWS])]
        ) if len(citing) else empty  # fmt: skip
        places, first = np.unique(met, return_index=True)
        order = places[np.argsort(first, kind="stable")]
        node = np.zeros(len(keys), dtype=np.int64)
        node[order] = np.arange(len(order))
        ids = [keyed[i][1] for i in order.tolist()]
        return cls(node[citing].astype(np.int32), node[cited].astype(np.int32), ids, papers)

    def _gathered(self, nodes, at, lists):
        """The lists of ``nodes`` (an array of node numbers), one after another."""
        import numpy as np

        starts, ends = at[nodes], at[nodes + 1]
        lengths = ends - starts
        total = int(lengths.sum())
        if not total:
            return np.zeros(0, dtype=lists.dtype)
        offsets = np.repeat(starts - np.cumsum(lengths) + lengths, lengths)
        return lists[offsets + np.arange(total)]

    @staticmethod
    def _counted(nodes, skip: int):
        """The distinct nodes of ``nodes`` but ``skip`` (ascending) and how many times each is there."""
        import numpy as np

        return np.unique(nodes[nodes != skip], return_counts=True)

    def as_ids(self, counted) -> dict[str, int]:
        """``(nodes, counts)`` as id -> count (what a statement's list, counted, gives)."""
        nodes, counts = counted
        return dict(zip(self.ids[nodes].tolist(), counts.tolist(), strict=True))

    def citing(self, pid: str) -> list[str]:
        """The papers citing ``pid`` (``CITERS_SQL``'s list)."""
        n = self.node.get(pid)
        if n is None:
            return []
        return self.ids[self.citers[self.citers_at[n] : self.citers_at[n + 1]]].tolist()

    def cocited(self, pid: str, citers: list[str]):
        """The nodes ``citers`` cite, ``pid`` aside, and how many of them cite each (``COCITED_SQL``'s list,
        counted): ``(nodes, counts)``."""
        import numpy as np

        nodes = np.fromiter((self.node[c] for c in citers), dtype=np.int64, count=len(citers))
        return self._counted(self._gathered(nodes, self.references_at, self.references), self.node[pid])

    def coupled(self, pid: str):
        """The nodes citing a reference of ``pid``, ``pid`` aside, and how many of its references each cites
        (``COUPLED_SQL``'s list, counted): ``(nodes, counts)``."""
        import numpy as np

        n = self.node.get(pid)
        if n is None:
            return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int64)
        refs = self.references[self.references_at[n] : self.references_at[n + 1]].astype(np.int64)
        return self._counted(self._gathered(refs, self.citers_at, self.citers), n)

    def live_neighbours(self, relation: str, sources: list[str], most: int | None) -> list[tuple[str, str, int]]:
        """``expansion.relation_sql``'s rows for ``references`` or ``citing`` (live edges: both ends papers): per
        source, in the order given, its neighbours that are papers, the most cited first and then by id, at most
        ``most`` of them (None: all), each of weight 1."""
        at, lists = (self.references_at, self.references) if relation == "references" else (self.citers_at, self.citers)
        in_degree, papers, out = self.citers_at, self.papers, []
        for source in sources:
            n = self.node.get(source)
            if n is None:
                continue
            nodes = lists[at[n] : at[n + 1]]
            cited = (in_degree[nodes + 1] - in_degree[nodes]).tolist()
            live = [(-c, pid) for pid, c in zip(self.ids[nodes].tolist(), cited, strict=True) if pid in papers]
            live.sort()
            out += [(source, pid, 1) for _, pid in live[:most]]
        return out

    def live_degrees(self, sources: list[str]) -> dict[str, int]:
        """``expansion.DEGREE_SQL``'s rows: each source's references and citing papers that are papers."""
        papers, out = self.papers, {}
        for source in sources:
            n = self.node.get(source)
            if n is None:
                out[source] = 0
                continue
            ends = (self.references[self.references_at[n] : self.references_at[n + 1]],
                    self.citers[self.citers_at[n] : self.citers_at[n + 1]])  # fmt: skip
            out[source] = sum(pid in papers for nodes in ends for pid in self.ids[nodes].tolist())
        return out

    def cocitations(self, sources: list[str], candidates: list[str]) -> dict[tuple[str, str], int]:
        """``cocited.COCITATIONS_SQL``'s rows: for each of ``sources`` and each of ``candidates`` but itself, how
        many papers cite both (left out where none does). Each source's citing papers are marked, and the
        candidates' citing papers looked up in the marks: the sources' and candidates' in-degrees, as the
        statement reads."""
        import numpy as np

        known = [(c, self.node[c]) for c in candidates if c in self.node]
        if not known:
            return {}
        nodes = np.array([n for _, n in known], dtype=np.int64)
        lengths = self.citers_at[nodes + 1] - self.citers_at[nodes]
        citers = self._gathered(nodes, self.citers_at, self.citers)
        owner = np.repeat(np.arange(len(known)), lengths)
        marks = np.zeros(len(self.ids), dtype=bool)
        out: dict[tuple[str, str], int] = {}
        for source in sources:
            n = self.node.get(source)
            if n is None:
                continue
            theirs = self.citers[self.citers_at[n] : self.citers_at[n + 1]]
            marks[theirs] = True
            counts = np.bincount(owner[marks[citers]], minlength=len(known))
            marks[theirs] = False
            for i in np.flatnonzero(counts).tolist():
                if known[i][1] != n:
                    out[(source, known[i][0])] = int(counts[i])
        return out

    def in_degrees(self, ids) -> dict[str, int]:
        """How many citation rows name each of ``ids`` (``cited_counts``' count), those never cited left out."""
        at, node, out = self.citers_at, self.node, {}
        for pid in ids:
            n = node.get(pid)
            if n is not None and (count := int(at[n + 1] - at[n])):
                out[pid] = count
        return out


class Graphs:
    """The graphs this process keeps, one per index state (``index_info.generation``), least recently read first
    out past the budget; the rows each state's statements have read (``paid``) until its graph is due; the states
    whose graph is too large or too slow to read, never tried again."""

    def __init__(self) -> None:
        self._held: OrderedDict[str, Graph] = OrderedDict()
        self._paid: dict[str, int] = {}
        self._refused: set[str] = set()
        self._due: set[str] = set()
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self._held.clear()
            self._paid.clear()
            self._refused.clear()
            self._due.clear()

    def of(self, snap: Snapshot, excluded: frozenset[str] = frozenset()) -> Graph | None:
        """The graph of ``snap``'s index state, when this process keeps it; never for a read that leaves
        ``excluded`` papers out (``retrieval.search.cutoff``), which its statements answer."""
        generation = snap.stats.info.get("generation")
        if excluded:
            return None
        with self._lock:
            graph = self._held.get(generation) if generation else None
            if graph is not None:
                self._held.move_to_end(generation)
            return graph

    def paid(self, snap: Snapshot, rows: int, excluded: frozenset[str] = frozenset()) -> None:
        """Count ``rows`` citation rows read by statements at ``snap``'s index state; once they reach the rent,
        the state is ``due``: its graph is read by the next ``keep`` at that state. Rows read leaving
        ``excluded`` papers out do not count: the graph would not answer them."""
        generation = snap.stats.info.get("generation")
        if not generation or rows <= 0 or excluded:
            return
        with self._lock:
            if generation in self._refused or generation in self._held:
                return
            if len(self._paid) > 1000:  # index states seen a few times and never again
                self._paid.clear()
            paid = self._paid[generation] = self._paid.get(generation, 0) + rows
            if paid >= GRAPH_RENT * max(1, snap.stats.n_papers):
                self._due.add(generation)

    @property
    def due(self) -> bool:
        """Whether some index state's graph is to be read (``keep``)."""
        return bool(self._due)

    def keep(self, snap: Snapshot) -> Graph | None:
        """Read and keep the graph of ``snap``'s index state, if it is due and fits the budget (and return it);
        else, or if reading it outlasts the read's time budget, never try again at that state. Called in a
        snapshot of its own, once the answer that made it due is made: a slow read never costs an answer."""
        generation = snap.stats.info.get("generation")
        with self._lock:
            if generation not in self._due:
                return None
            self._due.discard(generation)
        from .blobs import CACHE  # NumPy, needed from here on

        budget = int(GRAPH_SHARE * CACHE.limit)
        graph = None
        try:
            if budget > 0:
                count = snap.rows(CITATION_COUNT_STATEMENT, CITATION_COUNT_SQL, {})[0][0]
                if count * EDGE_BYTES + snap.stats.n_papers * NODE_BYTES <= budget:
                    graph = Graph.read(snap)
        except QueryTimeoutError:  # a graph too slow to read is only not kept
            graph = None
        with self._lock:
            self._paid.pop(generation, None)
            if graph is None or graph.size > budget:
                self._refused.add(generation)
                return None
            self._held[generation] = graph
            while sum(held.size for held in self._held.values()) > budget:
                self._held.popitem(last=False)
        return graph


#: The graphs kept by this process.
GRAPHS = Graphs()
