"""The lexical pass over the postings BLOBs (``retrieval.store.postings``), scored exactly in NumPy: the path for
queries whose lists are long (pasted abstracts, drafts, common terms, deep top k), where SQL pays per posting row.

Okapi BM25 as ``retrieval.bm25`` defines it (Lucene's idf, k1 and b read from the index), each posting's part
computed with the same operations in the same order as the SQL (``weight * count * (k1 + 1) / (count + k1 *
(1 - b + b * length / avgdl))``), so every part is the same double; only the order of a paper's additions differs,
which the ranking's rounding to ``SCORE_DECIMALS`` places absorbs. One statement reads every chunk of every query
term (``POSTINGS_SQL``: one round trip on PostgreSQL too), and ``top_k`` runs term-at-a-time MaxScore over a dense
score array:

1. Each term's bound is its weight times the largest ``tf_norm(max_count, min_length)`` of its chunks (exact at
   any average length). Terms are scored whole, largest bound first, into the dense array.
2. After enough postings have been added, the k-th best partial score is a lower bound of the final k-th score
   (parts are positive): the *threshold*. Once the bounds of the terms not yet scored add up to less than it,
   a paper found in none of the scored terms cannot reach the top k, and those terms become non-essential.
3. The papers already found that can still reach the threshold are the candidates; each non-essential term's
   chunks are searched for them only (``searchsorted``), the candidates that fall behind dropped after each
   term.
4. The best k candidates by score rounded to ``SCORE_DECIMALS`` places, ties by paper id (every paper tied with
   the k-th is looked up, so the tie breaks as in SQL).

Bounds carry a relative slack of ``BOUND_SLACK`` and the threshold an absolute ``TIE_SLACK``, as in the SQL path,
so a paper left out provably ranks below the k-th: the result equals the plain aggregation (tested).

Where the time goes: per posting added whole, the arithmetic and the scattered add into the dense array (a chunk,
or a batch of short ones, is decoded into scratch arrays this thread keeps: a fresh array costs the kernel a page
fault per page, more than the arithmetic); per threshold, a pass over the dense array (a bound of the k-th score
read off the maxima of strided groups, then a partition of the few values that reach it)."""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict

import numpy as np

from ..bm25 import BOUND_SLACK, SCORE_DECIMALS, TIE_SLACK
from ..errors import ConfigError, NotAnIndexError
from ..store import postings
from ..store.database import build_command, located, shown
from ..store.postings import decode, docs_into, offsets, unpack
from ..store.sql.dialect import statement
from ..store.sql.executor import Snapshot
from .costs import SPARSE_ACCUMULATION
from .filters import Passing
from .query import WeightedQuery

#: A chunk's row, as ``_Chunk`` reads it.
_CHUNK_COLUMNS = """\
SELECT p.term_id,
       p.first_doc,
       p.last_doc,
       p.df,
       p.max_count,
       p.min_length,
       p.doc_ids,
       p.counts,
       p.lengths"""

# The lists are looked up by key (``Dialect.any_of``: an index lookup per value on PostgreSQL too).
POSTINGS_SQL = statement(
    lambda d: (
        f"""\
{_CHUNK_COLUMNS}
FROM postings AS p
WHERE p.term_id {d.any_of("term_ids", "integer")}
ORDER BY p.term_id, p.first_doc"""
    )
)
POSTINGS_STATEMENT = "lexical: the query terms' postings (BLOBs)"

PAPER_IDS_SQL = statement(
    lambda d: (
        f"""\
SELECT dl.doc_id,
       dl.paper_id
FROM doc_len AS dl
WHERE dl.doc_id {d.any_of("doc_ids", "integer")}"""
    ),
    scatter="concat",  # sharded: each shard names its own papers (a foreign table's list is not pushed down)
)

DOC_IDS_SQL = statement(
    lambda d: (
        f"""\
SELECT dl.paper_id,
       dl.doc_id
FROM doc_len AS dl
WHERE dl.paper_id {d.any_of("paper_ids")}"""
    ),
    scatter="concat",
)


class ChunkError(NotAnIndexError):
    """A row of ``postings`` that disagrees with itself: its widths, range or bounds are not its postings'."""

    def __init__(self, chunk: _Chunk, what: str) -> None:
        super().__init__(
            f"the index is damaged: the postings row of term {chunk.term_id} at document {chunk.first} {what}; "
            "`retrieval check` reports every problem, `retrieval build` rebuilds it"
        )


def _damaged(snap: Snapshot, what: str) -> NotAnIndexError:
    where = shown(snap.executor.path)
    return NotAnIndexError(
        f"{where} is damaged: {what}; `retrieval check --db {where}` reports every problem, "
        f"`{build_command(where, snap.stats.info)}` rebuilds it"
    )


#: The threshold is first taken once the terms added whole hold this share of the dense array's size in postings
#: (taking it reads the whole array), then each time they have grown ``THRESHOLD_GROWTH``-fold; each time, the
#: terms left may turn out non-essential, and the candidates few enough to search for.
FIRST_THRESHOLD_SHARE = 0.125
THRESHOLD_GROWTH = 2
#: A non-essential term is searched for the candidates (a binary search each) rather than added whole once its
#: postings outnumber them this many times.
SPARSE_RATIO = 8
#: Chunks shorter than this are scored together, in one pass over all of them, or over batches of at least
#: ``SHORT_BATCH`` postings (a draft's hundreds of short lists: the arrays of a batch stay small enough for the
#: allocator to reuse from one batch to the next, where arrays of them all cost the kernel a fresh page per 4 KB).
SHORT_CHUNK = 4096
SHORT_BATCH = 16384


class _Chunk:
    """One row of ``postings``: its range, bounds and packed columns, and when kept (``keep``, set by ``CACHE`` for
    a term read again) once a scoring has read it whole, its doc ids, counts (as doubles) and tf_norm
    denominators, ``count + k1 * (1 - b + b * length / avgdl)``, which hold for every query of the index's state
    it was read at (they make a repeated term cheap).

    A row is checked as it is read (its columns' widths against its df) and as it is first decoded (its range and
    bounds against its postings): ``NotAnIndexError``, not a wrong score, for a row edited by hand; the bounds
    ``lexical.TERMS_SQL`` took from it are then those of its postings."""

    __slots__ = ("term_id", "first", "last", "df", "max_count", "min_length", "packed", "whole", "keep", "checked")

    def __init__(self, row: tuple) -> None:
        self.term_id = row[0]
        self.first, self.last, self.df, self.max_count, self.min_length = row[1:6]
        problem = postings.shape_problem(self.first, self.last, self.df, *row[6:9])  # the writers' check
        if problem is not None:
            raise ChunkError(self, problem)
        self.packed = bytes(row[6]), bytes(row[7]), bytes(row[8])  # (or memoryviews)
        self.whole: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self.keep = False
        self.checked = False

    def decoded(self, scoring: _Scoring) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Doc ids (int64), counts (float64) and denominators: kept ones, else fresh arrays, kept if ``keep`` (one
        tuple, set at once: two threads that decode a chunk together compute the same arrays)."""
        whole = self.whole
        if whole is None:
            docs, counts, lengths = decode(self.first, self.last, self.df, *self.packed)
            if not self.checked:
                self._check(docs, counts, lengths)
            c = counts.astype(np.float64)
            denominators = scoring.norms_for(lengths)
            denominators += c  # norm + count: addition commutes, the same double as count + norm
            whole = (docs, c, denominators)
            if self.keep:
                self.whole = whole
        return whole

    def add_to(self, acc: np.ndarray, weight: float, scoring: _Scoring) -> None:
        """Add the part of the score the chunk gives every paper it holds to the dense array ``acc``: from its
        kept arrays, else decoded into this thread's scratch arrays (``_Scratch``). The parts are
        ``_Scoring.parts``', operation for operation."""
        if self.whole is None and self.keep:
            self.decoded(scoring)
        whole = self.whole
        df = self.df
        scratch = _scratch()
        if whole is not None:
            docs, counts, denominators = whole
        else:
            packed_counts, lengths = unpack(self.packed[1], df), unpack(self.packed[2], df)
            docs = docs_into(self.packed[0], df, self.first, self.last - self.first, scratch.docs[:df])
            if not self.checked:
                self._check(docs, packed_counts, lengths)
            counts = scratch.counts[:df]
            np.copyto(counts, packed_counts)
            denominators = scoring.norms_into(lengths, scratch.denominators[:df])
            denominators += counts
        parts = np.multiply(counts, weight, out=scratch.parts[:df])  # count * weight: the double weight * count
        parts *= scoring.k1 + 1.0
        parts /= denominators
        np.add.at(acc, docs, parts)  # a chunk's doc ids are distinct: as exact as acc[docs] += parts, and faster

    def _check(self, docs: np.ndarray, counts: np.ndarray, lengths: np.ndarray) -> None:
        """The row's range and bounds (what the pruning trusted) are those of its postings: two reductions over
        the packed columns, a few percent of a decode. (The BLOBs themselves, binary, are checked against
        ``term_freq`` by ``retrieval check``.)"""
        if int(docs[0]) != self.first or int(docs[-1]) != self.last:
            raise ChunkError(self, f"says it ends at document {self.last!r}, its doc ids at {int(docs[-1])}")
        self._check_bounds(counts, lengths)

    def _check_bounds(self, counts: np.ndarray, lengths: np.ndarray) -> None:
        if int(counts.max()) != self.max_count or int(lengths.min()) != self.min_length:
            raise ChunkError(
                self,
                f"gives max_count {self.max_count!r} and min_length {self.min_length!r}, its postings "
                f"{int(counts.max())} and {int(lengths.min())}",
            )
        self.checked = True

    def check_found(self, counts: np.ndarray, lengths: np.ndarray) -> None:
        """Postings found in the row as stored (not decoded whole) are within its bounds."""
        if len(counts) and (int(counts.max()) > self.max_count or int(lengths.min()) < self.min_length):
            raise ChunkError(
                self,
                f"gives max_count {self.max_count!r} and min_length {self.min_length!r}, below a posting's count or "
                "above its paper's length",
            )


def _packed_bytes(chunks: list[_Chunk]) -> int:
    """What a term's chunks hold in memory as read (``CACHE``'s count of them)."""
    return sum(sum(len(b) for b in chunk.packed) + 200 for chunk in chunks)


#: What a chunk kept decoded holds besides: 8 bytes a posting for each of its doc ids, counts and denominators.
DECODED_BYTES = 24


class _Term:
    """A query term's chunks, weight and bound (``QueryTerm.bound``: the largest tf_norm its chunks allow, times
    its weight, as ``lexical.TERMS_SQL`` computed it)."""

    __slots__ = ("chunks", "weight", "bound", "df")

    def __init__(self, chunks: list[_Chunk], weight: float, bound: float) -> None:
        self.chunks = chunks
        self.weight = weight
        self.bound = bound
        self.df = sum(chunk.df for chunk in chunks)


class _Scoring:
    """BM25's parameters for one query, and each paper length's part of the tf_norm denominator, ``k1 * (1.0 - b
    + b * length / avgdl)``, computed once per length (the same doubles as computed per posting)."""

    __slots__ = ("k1", "b", "avgdl", "norms")

    def __init__(self, k1: float, b: float, avgdl: float) -> None:
        self.k1, self.b, self.avgdl = k1, b, avgdl
        self.norms = np.empty(0)

    def norms_for(self, lengths: np.ndarray) -> np.ndarray:
        return self._covering(lengths).take(lengths)  # (a fancy index of small ints first widens them: slower)

    def norms_into(self, lengths: np.ndarray, out: np.ndarray) -> np.ndarray:
        """``norms_for`` into ``out``."""
        return np.take(self._covering(lengths), lengths, out=out, mode="clip")  # clip: unchecked, all covered

    def _covering(self, lengths: np.ndarray) -> np.ndarray:
        """The norms of every length up to the longest of ``lengths`` (and more)."""
        longest = int(lengths.max()) if len(lengths) else 0
        if len(self.norms) <= longest:
            every = np.arange(max(longest + 1, 2 * len(self.norms)), dtype=np.float64)
            self.norms = self.k1 * (1.0 - self.b + self.b * every / self.avgdl)
        return self.norms

    def parts(self, weight: float | np.ndarray, counts: np.ndarray, denominators: np.ndarray) -> np.ndarray:
        """Each posting's part of the score: the SQL's ``weight * count * (k1 + 1.0) / (count + k1 * (1.0 - b + b
        * length / avgdl))``, operation for operation (``weight``: the term's, or one per posting; ``counts`` as
        doubles; ``denominators``, ``_Chunk.decoded``'s)."""
        return weight * counts * (self.k1 + 1.0) / denominators

    def raw_parts(self, weight: float, counts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """``parts`` of packed counts and lengths."""
        c = counts.astype(np.float64)
        return self.parts(weight, c, c + self.norms_for(lengths))


class _Cache:
    """Postings this process keeps between queries, per index state (``index_info.generation``, which every write
    renews) and term, least recently used first out past ``limit`` bytes. A term is kept as read (its packed
    columns); once read again, its chunks are kept decoded too (``_Chunk.keep``), and counted so: a term most
    queries share is cheap, and a list read once does not cost a fresh decoded copy."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._terms: OrderedDict[tuple[str, int], tuple[list[_Chunk], int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, int]) -> list[_Chunk] | None:
        with self._lock:
            entry = self._terms.get(key)
            if entry is None:
                return None
            self._terms.move_to_end(key)
            chunks, size = entry
            if not chunks[0].keep:  # read again: kept decoded from now on, if it fits
                decoded = size + DECODED_BYTES * sum(chunk.df for chunk in chunks)
                if decoded <= self.limit:
                    for chunk in chunks:
                        chunk.keep = True
                    self._terms[key] = (chunks, decoded)
                    self.held += decoded - size
                    self._evict()
            return chunks

    def put(self, key: tuple[str, int], chunks: list[_Chunk]) -> None:
        size = _packed_bytes(chunks)
        with self._lock:
            if not chunks or size > self.limit or key in self._terms:
                return
            self._terms[key] = (chunks, size)
            self.held += size
            self._evict()

    def _evict(self) -> None:
        while self.held > self.limit:
            _, (_, size) = self._terms.popitem(last=False)
            self.held -= size

    def has(self, key: tuple[str, int]) -> bool:
        """Whether ``key`` is kept (not counted as a use)."""
        with self._lock:
            return key in self._terms

    def clear(self) -> None:
        with self._lock:
            self._terms.clear()
            self.held = 0


def _cache_limit(value: str) -> int:
    """``RETRIEVAL_POSTINGS_CACHE_MB`` in bytes."""
    try:
        megabytes = float(value)
    except ValueError:
        megabytes = -1.0
    if not 0 <= megabytes < 2**40:
        raise ConfigError(
            f"RETRIEVAL_POSTINGS_CACHE_MB is {value!r}: give the megabytes of postings lists a process may keep, "
            "for example 256 (0 keeps none)"
        )
    return int(megabytes * 2**20)


#: The postings kept by this process (``RETRIEVAL_POSTINGS_CACHE_MB``, default 256; 0 keeps none).
CACHE = _Cache(_cache_limit(os.environ.get("RETRIEVAL_POSTINGS_CACHE_MB", "256")))


#: Every paper's doc id, as ``_best`` reads them once ``PaperIds`` keeps them.
ALL_PAPER_IDS_SQL = statement(
    lambda d: (
        """\
SELECT dl.doc_id,
       dl.paper_id
FROM doc_len AS dl"""
    ),
    scatter="concat",  # sharded: each shard names its own papers
)
ALL_PAPER_IDS_STATEMENT = "lexical: every paper's doc id, kept by this process"
#: A process that looks up the best papers' ids this many times at one index state reads every paper's at once
#: (``PaperIds``) and answers the later lookups from memory: a long-lived process (a server, an evaluation, an
#: agent's session) saves a statement per query, on PostgreSQL a round trip; a command of one query never reads
#: them.
IDS_AFTER = 8
#: The share of ``CACHE``'s limit the kept ids may take, at an estimated ``ID_BYTES`` per paper beside its id's
#: characters (the array's slot and the string's header): a corpus too large for it keeps looking them up.
IDS_SHARE = 0.25
ID_BYTES = 64


class PaperIds:
    """The paper id of every doc id at an index state (``index_info.generation``), which this process keeps once it
    has looked them up ``IDS_AFTER`` times there (``of``); the states kept are bounded by ``IDS_SHARE`` of
    ``CACHE``'s limit, least recently read first out. A write renews the state, so kept ids are never stale."""

    def __init__(self) -> None:
        self._held: OrderedDict[str, tuple[np.ndarray, int]] = OrderedDict()
        self._asked: dict[str, int] = {}
        self._lock = threading.Lock()

    def of(self, snap: Snapshot) -> np.ndarray | None:
        """An object array by doc id of the paper ids at ``snap``'s index state (None where a doc id names no
        paper), when kept; else None, and this lookup is counted (the ``IDS_AFTER``-th reads them all)."""
        generation = snap.stats.info.get("generation")
        budget = int(IDS_SHARE * CACHE.limit)
        if not generation or snap.stats.n_papers * ID_BYTES > budget:
            return None
        with self._lock:
            held = self._held.get(generation)
            if held is not None:
                self._held.move_to_end(generation)
                return held[0]
            if len(self._asked) > 1000:  # index states seen once and never again
                self._asked.clear()
            asked = self._asked[generation] = self._asked.get(generation, 0) + 1
        if asked < IDS_AFTER:
            return None
        rows = snap.rows(ALL_PAPER_IDS_STATEMENT, ALL_PAPER_IDS_SQL, {})
        ids = np.full(max((doc for doc, _ in rows), default=-1) + 1, None, dtype=object)
        size = 8 * len(ids)
        for doc, pid in rows:
            ids[doc] = pid
            size += ID_BYTES + len(pid)
        with self._lock:
            self._asked.pop(generation, None)
            if size <= budget:
                self._held[generation] = (ids, size)
                while sum(held for _, held in self._held.values()) > budget:
                    self._held.popitem(last=False)
        return ids

    def clear(self) -> None:
        with self._lock:
            self._held.clear()
            self._asked.clear()


#: The paper ids kept by this process (bounded by ``RETRIEVAL_POSTINGS_CACHE_MB`` as ``CACHE``; 0 keeps none).
PAPER_IDS = PaperIds()


def holds(generation: str | None, term_id: int | None) -> bool:
    """Whether this process keeps the lists of ``term_id`` at the index state ``generation`` (``CACHE``)."""
    return bool(generation and CACHE.limit) and term_id is not None and CACHE.has((generation, term_id))


#: On a server, a search sends with its snapshot's beginning (``lexical.TermsAhead``) the chunks of those of its
#: terms whose lists are short (at most this many postings, a few hundred KB in binary) and not kept by this
#: process: a short query is then scored with no round trip of its own for its lists. A query that goes to SQL
#: leaves them unread; a longer list is read when needed. Up to this length, a list's bytes cost less than the
#: second round trip that reading it later would take.
AHEAD_MAX_DF = 50_000
POSTINGS_AHEAD_STATEMENT = "lexical: the query terms' short postings lists (BLOBs), sent ahead"
#: ``POSTINGS_SQL``'s columns, the terms named by their text (the term ids are not known yet).
POSTINGS_AHEAD_SQL = statement(
    lambda d: (
        f"""\
{_CHUNK_COLUMNS}
FROM doc_freq AS d
{d.cross_join} postings AS p ON p.term_id = d.term_id
WHERE d.term {d.any_of("terms")}
  AND d.df <= :most
ORDER BY p.term_id, p.first_doc"""
    )
)


#: Term ids by (index generation, term) of the lists this process has read: which of a query's terms
#: ``postings_ahead`` need not send (their lists are in ``CACHE``), known before the query's terms are looked up.
_TERM_IDS: dict[tuple[str, str], int] = {}
_TERM_IDS_MAX = 100_000


def postings_ahead(generation: str | None, terms: list[str]) -> list[tuple[str, str, dict]]:
    """The statement a snapshot sends ahead for a query's ``terms``: the short lists of those this process does
    not keep (none when it keeps them all)."""
    wanted = [term for term in terms if not holds(generation, _TERM_IDS.get((generation, term)))]
    if not wanted:
        return []
    params = {"terms": json.dumps(wanted, ensure_ascii=False), "most": AHEAD_MAX_DF}
    return [(POSTINGS_AHEAD_STATEMENT, POSTINGS_AHEAD_SQL, params)]


def read(snap: Snapshot, wq: WeightedQuery) -> tuple[list[_Term], int]:
    """The query's terms with their chunks, largest bound first (ties by term id), and the dense array's size
    (the largest doc id read, plus one). Terms this process has read at the same index state come from
    ``CACHE``; the others in one statement."""
    weights = {t.term_id: t.weight for t in wq.terms}
    term_ids = json.dumps(sorted(weights))
    chunks = snap.kept.get(("postings", term_ids))
    if chunks is None:  # read once per snapshot: scoring the graph's candidates reads the same lists again
        generation = wq.stats.info.get("generation") if CACHE.limit else None
        chunks = {}
        missing = []
        for term_id in sorted(weights):
            held = CACHE.get((generation, term_id)) if generation else None
            if held is None:
                missing.append(term_id)
            else:
                chunks[term_id] = held
        if missing:
            sent = snap.take(POSTINGS_AHEAD_SQL)  # a term's rows there are all its chunks, read in this snapshot
            if sent is not None:
                wanted = set(missing)
                for row in sent[1]:
                    if row[0] in wanted:
                        chunks.setdefault(row[0], []).append(_Chunk(row))
            asked = [term_id for term_id in missing if term_id not in chunks]
            if asked:
                params = {"term_ids": json.dumps(asked)}
                for row in snap.rows(POSTINGS_STATEMENT, POSTINGS_SQL, params):
                    chunks.setdefault(row[0], []).append(_Chunk(row))
            if generation:
                for term_id in missing:
                    if term_id in chunks:
                        CACHE.put((generation, term_id), chunks[term_id])
                if len(_TERM_IDS) > _TERM_IDS_MAX:
                    _TERM_IDS.clear()
                _TERM_IDS.update(((generation, t.term), t.term_id) for t in wq.terms)
        snap.kept.clear()
        snap.kept[("postings", term_ids)] = chunks
    bounds = {t.term_id: t.bound for t in wq.terms}
    terms = [(term_id, _Term(held, weights[term_id], bounds[term_id])) for term_id, held in chunks.items()]
    terms.sort(key=lambda item: (-item[1].bound, item[0]))
    size = max((held[-1].last + 1 for held in chunks.values()), default=0)
    return [term for _, term in terms], size


def _mask(passing: Passing, size: int) -> np.ndarray:
    if passing.allowed is not None:
        mask = np.zeros(size, dtype=bool)
        allowed = np.asarray(passing.allowed, dtype=np.int64)
        mask[allowed[allowed < size]] = True
    else:
        mask = np.ones(size, dtype=bool)
        rejected = np.asarray(passing.rejected, dtype=np.int64)
        mask[rejected[rejected < size]] = False
    return mask


_local = threading.local()


class _Scratch:
    """A thread's scratch arrays of a chunk's size, for a chunk scored whole (``_Chunk.add_to``), kept from query
    to query."""

    __slots__ = ("docs", "counts", "denominators", "parts")

    def __init__(self, size: int) -> None:
        self.docs = np.empty(size, dtype=np.int64)
        self.counts = np.empty(size, dtype=np.float64)
        self.denominators = np.empty(size, dtype=np.float64)
        self.parts = np.empty(size, dtype=np.float64)


def _scratch(size: int = 0) -> _Scratch:
    """This thread's scratch arrays, of at least a chunk's size and ``size``."""
    size = max(size, postings.CHUNK)
    scratch = getattr(_local, "scratch", None)
    if scratch is None or len(scratch.docs) < size:
        scratch = _local.scratch = _Scratch(size)
    return scratch


def _dense(size: int) -> np.ndarray:
    """A zeroed score array of ``size`` papers, this thread's own and kept from query to query: a fresh one costs
    the kernel a page fault per page on first touch, more than zeroing a kept one (``top_k`` returns it zeroed)."""
    acc = getattr(_local, "acc", None)
    if acc is None or len(acc) < size:
        acc = _local.acc = np.zeros(size, dtype=np.float64)
    return acc[:size]


#: ``_kth_bound``'s groups: each of this many values, strided.
KTH_GROUP = 64


def _kth(values: np.ndarray, k: int, floor: float = 0.0) -> float:
    """The threshold from partial scores: their k-th largest less the slack (0 if fewer than k are positive), at
    least ``floor``, a threshold taken earlier. Partial scores only grow, so the k-th largest is among those that
    reach ``floor``, and among those that reach ``_kth_bound``'s lower bound of it: only they are partitioned (a
    compare over the array costs a fraction of a partition, and a partition of an array of mostly zeros, the
    dense array early on, costs many)."""
    bound = _kth_bound(values, k) if len(values) >= KTH_GROUP * k else 0.0
    if bound > floor:
        values = values[values >= bound]
    elif floor > 0:
        values = values[values >= floor]
    else:
        values = values[values > 0.0]  # the k-th largest, if positive, is among the positive values
    if len(values) < k:
        return floor
    kth = float(np.partition(values, len(values) - k)[len(values) - k])
    return max(floor, kth * (1.0 - BOUND_SLACK) - TIE_SLACK)


def _kth_bound(values: np.ndarray, k: int) -> float:
    """A lower bound of the k-th largest of ``values`` (at least ``KTH_GROUP * k`` of them): the k-th largest of
    the maxima of disjoint groups of them (each of the k groups with the largest maxima holds a value that reaches
    it), one pass over ``values`` (a maximum of rows, elementwise) and a partition of a sixty-fourth of them."""
    rows = len(values) // KTH_GROUP
    maxima = values[: rows * KTH_GROUP].reshape(KTH_GROUP, rows).max(axis=0)
    if rows * KTH_GROUP < len(values):
        maxima = np.concatenate([maxima, values[rows * KTH_GROUP :]])
    return float(np.partition(maxima, len(maxima) - k)[len(maxima) - k])


def top_k(snap: Snapshot, wq: WeightedQuery, k: int, passing: Passing | None = None) -> list[tuple[str, float]]:
    """The top ``k`` ``(paper id, score)`` pairs of ``wq``, best first (scores rounded to ``SCORE_DECIMALS``
    places, ties by paper id), among the papers ``passing`` lets through (all when None)."""
    try:
        return _top_k(snap, wq, k, passing)
    except ChunkError as exc:
        raise located(exc, shown(snap.executor.path), snap.stats.info) from None


def _top_k(snap: Snapshot, wq: WeightedQuery, k: int, passing: Passing | None) -> list[tuple[str, float]]:
    scoring = _Scoring(wq.stats.k1, wq.stats.b, wq.stats.avgdl)
    terms, size = read(snap, wq)
    if not terms or k <= 0:
        return []
    mask = _mask(passing, size) if passing is not None else None
    if sum(term.df for term in terms) * SPARSE_ACCUMULATION <= size:
        docs, found = _add_sparse(terms, scoring)
        if mask is not None:
            docs, found = docs[mask[docs]], found[mask[docs]]
        return _best(snap, docs, found, k)
    acc = _dense(size)
    try:
        return _best(snap, *_max_score(terms, k, acc, mask, scoring), k)
    finally:
        acc.fill(0.0)


def _max_score(
    terms: list[_Term], k: int, acc: np.ndarray, mask: np.ndarray | None, scoring: _Scoring
) -> tuple[np.ndarray, np.ndarray]:
    """Term-at-a-time MaxScore over the zeroed dense array ``acc`` (steps 1-3 of the module's docstring): the
    candidates (doc ids, ascending) that can reach the top k, with their scores."""
    size = len(acc)
    rest = [0.0] * (len(terms) + 1)  # rest[i]: the bounds of terms i, i + 1, ... added up
    for i in range(len(terms) - 1, -1, -1):
        rest[i] = rest[i + 1] + terms[i].bound
    threshold = 0.0
    scored = 0
    check = FIRST_THRESHOLD_SHARE * size
    sparse: tuple[np.ndarray, np.ndarray] | None = None  # the candidates and their partial scores, once few
    i = 0
    while i < len(terms) and sparse is None:
        # The terms up to the next threshold, added whole in one pass (a group, not a term at a time: a short
        # list costs NumPy more per call than per posting).
        group = i
        while group < len(terms):
            scored += terms[group].df
            group += 1
            if scored >= check:
                break
        _add_whole(terms[i:group], acc, scoring)
        i = group
        if i == len(terms):
            break
        threshold = _kth(acc if mask is None else acc[mask], k, threshold)
        check = THRESHOLD_GROWTH * scored
        if threshold > 0 and rest[i] < threshold:
            # The terms left are non-essential: a paper none of the terms scored so far holds cannot reach the
            # threshold, nor can one whose partial score plus their bounds falls short of it.
            candidates = np.flatnonzero(acc >= threshold - rest[i])
            if mask is not None:
                candidates = candidates[mask[candidates]]
            if len(candidates) * SPARSE_RATIO <= terms[i].df:  # else adding the next term whole is cheaper
                sparse = candidates, acc[candidates]
    for j in range(i, len(terms)):  # the non-essential terms, searched for the candidates only
        candidates, found = sparse
        _add_found(terms[j], candidates, found, scoring)
        keep = found + rest[j + 1] >= threshold
        candidates, found = candidates[keep], found[keep]
        threshold = _kth(found, k, threshold)  # the candidates' partial scores are lower bounds too
        sparse = candidates, found
    if sparse is None:
        # Compared first: NumPy finds a boolean array's nonzero entries several times faster than a float one's.
        candidates = np.flatnonzero(acc != 0.0)
        if mask is not None:
            candidates = candidates[mask[candidates]]
        sparse = candidates, acc[candidates]
    return sparse


def _add_whole(terms: list[_Term], acc: np.ndarray, scoring: _Scoring) -> None:
    """Add the part of the score each of ``terms`` gives every paper it holds to the dense array ``acc``: a long
    chunk straight in, the short ones gathered into batches (NumPy costs more per call than per posting there)."""
    short: list[tuple[float, _Chunk]] = []
    gathered = 0
    for term in terms:
        for chunk in term.chunks:
            if chunk.df >= SHORT_CHUNK:
                chunk.add_to(acc, term.weight, scoring)
                continue
            short.append((term.weight, chunk))
            gathered += chunk.df
            if gathered >= SHORT_BATCH:
                np.add.at(acc, *_gathered(short, scoring, _scratch(gathered)))
                short, gathered = [], 0
    if short:
        np.add.at(acc, *_gathered(short, scoring, _scratch(gathered)))


def _add_sparse(terms: list[_Term], scoring: _Scoring) -> tuple[np.ndarray, np.ndarray]:
    """Every paper ``terms`` hold (ascending doc ids) and its score, accumulated over the sorted doc ids: for
    queries whose postings are few beside the papers of the index."""
    docs, parts = _gathered([(term.weight, chunk) for term in terms for chunk in term.chunks], scoring)
    unique, at = np.unique(docs, return_inverse=True)
    return unique, np.bincount(at, weights=parts, minlength=len(unique))


def _gathered(
    chunks: list[tuple[float, _Chunk]], scoring: _Scoring, into: _Scratch | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The doc id and part of every posting of ``(weight, chunk)`` pairs, in one array each (one pass of NumPy
    over all of them), in the pairs' order: the chunks kept decoded from their arrays, the others from their packed
    columns, all unpacked together (short chunks cost NumPy more per call than per posting). The order is the
    pairs' whatever the cache holds, so a paper's parts are added in the same order, to the same sum, however often
    its terms were read. ``into``: scratch arrays to hold them (large enough; fresh arrays cost a page fault a
    page), for a caller done with them before it asks again."""
    if not chunks:
        return np.empty(0, dtype=np.int64), np.empty(0)
    # Which chunks are unpacked together, decided once: another thread's search may mark a chunk kept (``CACHE``)
    # or keep its arrays meanwhile, and the spans of the batch must stay those of the chunks it unpacked.
    fresh = [chunk.whole is None and not chunk.keep for _, chunk in chunks]
    packed = [chunk for (_, chunk), new in zip(chunks, fresh, strict=True) if new]
    spans = iter(())
    if packed:
        batch = _unpacked(packed, scoring)
        ends = np.cumsum([chunk.df for chunk in packed]).tolist()
        spans = (tuple(a[end - chunk.df : end] for a in batch) for chunk, end in zip(packed, ends, strict=True))
    arrays = [next(spans) if new else chunk.decoded(scoring) for (_, chunk), new in zip(chunks, fresh, strict=True)]
    n = sum(chunk.df for _, chunk in chunks)
    if into is None:
        into = _Scratch(n)
    all_docs = np.concatenate([d for d, _, _ in arrays], out=into.docs[:n])
    all_counts = np.concatenate([c for _, c, _ in arrays], out=into.counts[:n])
    all_denominators = np.concatenate([den for _, _, den in arrays], out=into.denominators[:n])
    parts = into.parts[:n]
    at = 0
    for weight, chunk in chunks:  # ``_Scoring.parts``, operation for operation: weight * count first
        np.multiply(all_counts[at : at + chunk.df], weight, out=parts[at : at + chunk.df])
        at += chunk.df
    parts *= scoring.k1 + 1.0
    parts /= all_denominators
    return all_docs, parts


def _unpacked(chunks: list[_Chunk], scoring: _Scoring) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``_Chunk.decoded`` of several chunks at once, concatenated (each chunk's range and bounds checked)."""
    dfs = np.array([chunk.df for chunk in chunks], dtype=np.int64)
    ends = np.cumsum(dfs)
    starts = ends - dfs
    docs = np.concatenate([offsets(chunk.packed[0], chunk.df, chunk.last - chunk.first) for chunk in chunks])
    counts = np.concatenate([unpack(chunk.packed[1], chunk.df) for chunk in chunks])
    lengths = np.concatenate([unpack(chunk.packed[2], chunk.df) for chunk in chunks])
    firsts = np.array([chunk.first for chunk in chunks], dtype=np.int64)
    docs = docs.astype(np.int64)
    wrong = docs[starts] != 0
    docs += np.repeat(firsts, dfs)
    ranges = np.array([(chunk.last, chunk.max_count, chunk.min_length) for chunk in chunks], dtype=np.int64)
    wrong = (
        wrong
        | (docs[ends - 1] != ranges[:, 0])
        | (np.maximum.reduceat(counts, starts) != ranges[:, 1])
        | (np.minimum.reduceat(lengths, starts) != ranges[:, 2])
    )
    if wrong.any():
        chunk = chunks[int(np.flatnonzero(wrong)[0])]
        chunk._check(*decode(chunk.first, chunk.last, chunk.df, *chunk.packed))  # raises its ChunkError
    c = counts.astype(np.float64)
    denominators = scoring.norms_for(lengths)
    denominators += c  # norm + count: addition commutes, the same double as count + norm
    return docs, c, denominators


def _add_found(term: _Term, docs: np.ndarray, acc: np.ndarray, scoring: _Scoring) -> None:
    """Add ``term``'s part of the score of each of ``docs`` (ascending doc ids) that it holds to ``acc`` (aligned
    with ``docs``): each chunk is searched for the docs in its range only, decoded if it was, else as stored;
    the parts of all the postings found computed together."""
    chunks = term.chunks
    if not chunks or not len(docs):
        return
    spans = np.searchsorted(docs, [(chunk.first, chunk.last + 1) for chunk in chunks]).tolist()
    where, counts, denominators, packed_at = [], [], [], []  # packed_at: (chunk, counts, lengths) found as stored
    for chunk, (lo, hi) in zip(chunks, spans, strict=True):
        if lo == hi:
            continue
        whole, df = chunk.whole, chunk.df
        if whole is not None:
            at = np.minimum(np.searchsorted(whole[0], docs[lo:hi]), df - 1)
            hit = np.flatnonzero(whole[0][at] == docs[lo:hi])
            if len(hit):
                at = at[hit]
                where.append(hit + lo)
                counts.append(whole[1][at])
                denominators.append(whole[2][at])
            continue
        # Searched as stored (offsets from first_doc, in their own width; gaps summed first): no decode.
        stored = offsets(chunk.packed[0], df, chunk.last - chunk.first)
        wanted = (docs[lo:hi] - chunk.first).astype(stored.dtype)
        at = np.minimum(np.searchsorted(stored, wanted), df - 1)
        hit = np.flatnonzero(stored[at] == wanted)
        if len(hit):
            at = at[hit]
            packed_at.append((chunk, unpack(chunk.packed[1], df)[at], unpack(chunk.packed[2], df)[at], hit + lo))
    if packed_at:
        found_counts = np.concatenate([c for _, c, _, _ in packed_at])
        found_lengths = np.concatenate([n for _, _, n, _ in packed_at])
        sizes = [len(c) for _, c, _, _ in packed_at]
        most = np.repeat([chunk.max_count for chunk, _, _, _ in packed_at], sizes)
        least = np.repeat([chunk.min_length for chunk, _, _, _ in packed_at], sizes)
        if (found_counts > most).any() or (found_lengths < least).any():
            for chunk, c, n, _ in packed_at:
                chunk.check_found(c, n)  # raises the first chunk's ChunkError
        c = found_counts.astype(np.float64)
        where += [w for _, _, _, w in packed_at]
        counts.append(c)
        denominators.append(c + scoring.norms_for(found_lengths))
    if where:
        at = np.concatenate(where)
        acc[at] += scoring.parts(term.weight, np.concatenate(counts), np.concatenate(denominators))


def scores(snap: Snapshot, wq: WeightedQuery, paper_ids: list[str]) -> dict[str, float]:
    """The BM25 score of each paper in ``paper_ids`` (0.0 for one that shares no term with the query, or is not
    in the index), each term's chunks searched for the papers' doc ids."""
    try:
        return _scores(snap, wq, paper_ids)
    except ChunkError as exc:
        raise located(exc, shown(snap.executor.path), snap.stats.info) from None


def _scores(snap: Snapshot, wq: WeightedQuery, paper_ids: list[str]) -> dict[str, float]:
    result = dict.fromkeys(paper_ids, 0.0)
    if not result or not wq.terms:
        return result
    found = snap.rows("lexical: the given papers' doc ids", DOC_IDS_SQL, {"paper_ids": json.dumps(list(result))})
    if not found:
        return result
    found.sort(key=lambda row: row[1])
    docs = np.array([doc for _, doc in found], dtype=np.int64)
    acc = np.zeros(len(docs), dtype=np.float64)
    scoring = _Scoring(wq.stats.k1, wq.stats.b, wq.stats.avgdl)
    terms, _ = read(snap, wq)
    for term in terms:
        _add_found(term, docs, acc, scoring)
    result.update(zip((pid for pid, _ in found), acc.tolist(), strict=True))
    return result


def _best(snap: Snapshot, docs: np.ndarray, scores: np.ndarray, k: int) -> list[tuple[str, float]]:
    """The best ``k`` of ``docs`` by score rounded to ``SCORE_DECIMALS`` places, then paper id: every doc whose
    score is within the rounding of the k-th is looked up, so ties break on the id as SQL breaks them."""
    if len(docs) > k:
        kth = np.partition(scores, len(scores) - k)[len(scores) - k]
        near = scores >= kth - 10.0**-SCORE_DECIMALS
        docs, scores = docs[near], scores[near]
    if not len(docs):
        return []
    score_of = dict(zip(docs.tolist(), scores.tolist(), strict=True))
    kept = PAPER_IDS.of(snap)
    if kept is None:
        rows = snap.rows("lexical: the best papers' ids", PAPER_IDS_SQL, {"doc_ids": json.dumps(sorted(score_of))})
    else:
        rows = [(doc, kept[doc]) for doc in score_of if doc < len(kept) and kept[doc] is not None]
    if len(rows) != len(score_of):  # a doc_len row deleted by hand: its paper would silently drop out
        lacking = sorted(set(score_of) - {doc for doc, _ in rows})
        raise _damaged(snap, f"the postings name the document {lacking[0]}, which doc_len lacks")
    ranked = sorted(((pid, score_of[doc]) for doc, pid in rows), key=lambda h: (-round(h[1], SCORE_DECIMALS), h[0]))
    return ranked[:k]
