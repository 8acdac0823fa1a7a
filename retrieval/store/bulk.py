"""The full build's fast path: tokenising in worker processes while the main process writes the papers, then
every posting sorted in memory and loaded in key order.

Why it is shaped so: row-at-a-time inserts into a B-tree keyed by ``(term_id, doc_id)`` arrive in random key
order and cost a Python call each. Here the postings are gathered as numpy arrays (about 12 bytes each), sorted
once by term (documents are numbered in input order, so a stable sort leaves each term's documents in order),
their impacts computed with the final average length, and handed to SQLite a million at a time as one JSON
array of packed integers that a single ``INSERT ... SELECT FROM json_each`` unpacks. The citations' second index
is dropped during the load and created once at the end, a sort instead of ten million random inserts.

The result is the same index the incremental writer makes from the same papers (the tests compare them).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sqlite3
import sys
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from itertools import islice

import numpy as np

from ..bm25 import HEAD_IMPACT, impacts
from ..corpus.paper import Paper
from ..text import tokenise
from .rows import (
    INSERT_AUTHOR,
    INSERT_DOC_LEN,
    INSERT_PAPER,
    INSERT_SOURCE,
    CorpusCounts,
    ReferenceCleaner,
    UniqueIds,
    add_paper_rows,
)

#: Papers handed to a worker at a time.
CHUNK = 4000
#: Postings per INSERT statement in the final load.
LOAD_ROWS = 1_000_000
#: Below this many papers the build stays in one process (starting workers costs more than it saves).
PARALLEL_MIN_PAPERS = 2 * CHUNK

INSERT_TERM_WITH_DF = "INSERT INTO doc_freq (term_id, term, df, max_impact) VALUES (?, ?, ?, ?)"
# One statement per paper; an edge another record declared already only gets its flag set.
INSERT_REFERENCES = """\
INSERT INTO citations (citing_id, cited_id, listed_by_citing, listed_by_cited)
SELECT :paper_id, value, 1, 0
FROM json_each(:ids)
WHERE true
ON CONFLICT (citing_id, cited_id) DO UPDATE SET listed_by_citing = 1"""
INSERT_CITED_BY = """\
INSERT INTO citations (citing_id, cited_id, listed_by_citing, listed_by_cited)
SELECT value, :paper_id, 0, 1
FROM json_each(:ids)
WHERE true
ON CONFLICT (citing_id, cited_id) DO UPDATE SET listed_by_cited = 1"""
# Each JSON number packs (term_id, doc_id, count, length, impact) into bit fields whose widths fit this build.
LOAD_POSTINGS = """\
INSERT INTO term_freq (term_id, doc_id, count, length, impact)
SELECT value >> :term_shift,
       (value >> :doc_shift) & :doc_mask,
       (value >> :count_shift) & :count_mask,
       (value >> :length_shift) & :length_mask,
       value & :impact_mask
FROM json_each(:postings)"""
LOAD_POSTINGS_ROWS = "INSERT INTO term_freq (term_id, doc_id, count, length, impact) VALUES (?, ?, ?, ?, ?)"
CITATIONS_INDEX = "ix_citations_cited_citing"
HEAD_INDEX = "ix_term_freq_head"
# Every in-degree at once, reading the (cited_id, citing_id) index in order.
COUNT_CITED = "INSERT INTO cited_counts (paper_id, cited_by) SELECT cited_id, count(*) FROM citations GROUP BY cited_id"
# As migration 0004 creates it (the tests check the schema after a build equals the migrated one).
HEAD_INDEX_SQL = (
    f"CREATE INDEX {HEAD_INDEX} ON term_freq (term_id, impact, count, length) WHERE impact >= {HEAD_IMPACT}"
)


def tokenise_chunk(texts: list[str]) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Tokenise ``texts`` against a vocabulary local to the chunk.

    Returns ``(vocabulary, term, count, distinct, length)``: the chunk's terms in first-seen order; for every
    posting, in document order, its local term number and count; for every document, its number of distinct
    terms and its length in tokens. Runs in a worker process.
    """
    vocabulary: dict[str, int] = {}
    terms: list[int] = []
    counts: list[int] = []
    distinct: list[int] = []
    lengths: list[int] = []
    for text in texts:
        tokens = tokenise(text)
        bag = Counter(tokens)
        for term, count in bag.items():
            local = vocabulary.get(term)
            if local is None:
                local = vocabulary[term] = len(vocabulary)
            terms.append(local)
            counts.append(count)
        distinct.append(len(bag))
        lengths.append(len(tokens))
    return (
        list(vocabulary),
        np.array(terms, dtype=np.int32),
        np.array(counts, dtype=np.int32),
        np.array(distinct, dtype=np.int64),
        np.array(lengths, dtype=np.int64),
    )


def json_ints(values: np.ndarray) -> str:
    """``values`` as a JSON array (runs in a worker process during the final load)."""
    return "[" + ",".join(map(str, values.tolist())) + "]"


def _context():
    # Fork where there is fork: workers start in milliseconds and, unlike spawn, do not re-run the caller's
    # main module (a script without a __main__ guard would otherwise recurse). Workers never touch SQLite.
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


_PR_SET_PDEATHSIG = 1


def _worker_init(parent: int) -> None:
    """In each worker: die with the build (Linux sends SIGKILL when the parent dies, however it dies), and
    leave Ctrl-C to the build, which shuts the pool down and reports once (no traceback per worker)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):  # pragma: no cover - no libc prctl
            pass
    if os.getppid() != parent:  # the build died before the request above took effect
        os._exit(1)


def default_workers() -> int:
    """Worker processes for tokenising: one per core, at most two beside the writing process's own work."""
    return min(2, os.cpu_count() or 1)


@dataclass
class BulkResult:
    """What a bulk load wrote, for the statistics and the summary: the corpus counts, the papers and terms,
    the references dropped, and the seconds per stage."""

    counts: CorpusCounts
    papers: int
    terms: int
    cleaner: ReferenceCleaner
    stages: dict[str, float]


class BulkLoader:
    """Loads papers into the empty index on ``conn`` (inside the caller's transaction) and returns what it wrote;
    the tables end as the incremental writer would leave them."""

    def __init__(self, conn: sqlite3.Connection, workers: int | None = None) -> None:
        self.conn = conn
        self.workers = default_workers() if workers is None else workers
        self.pool: ProcessPoolExecutor | None = None
        self.unique = UniqueIds()
        self.cleaner = ReferenceCleaner()
        self.stages: dict[str, float] = {}
        self.vocabulary: dict[str, int] = {}
        self.next_term_id = 1
        self.n_papers = 0
        self.total_tokens = 0
        self.term_parts: list[np.ndarray] = []
        self.count_parts: list[np.ndarray] = []
        self.doc_parts: list[np.ndarray] = []
        self.length_parts: list[np.ndarray] = []

    # -- papers, in chunks ----------------------------------------------------------------------------------
    def load(self, papers: Iterable[Paper], progress: Callable[[int], None] | None = None) -> BulkResult:
        """Write every paper, its citations and postings, the vocabulary and the in-degrees."""
        self.conn.execute(f"DROP INDEX IF EXISTS {CITATIONS_INDEX}")
        stages = self.stages
        mark = time.perf_counter()
        pending: deque[tuple[Future | tuple, list[str], int]] = deque()
        iterator = iter(papers)
        done = 0
        next_doc = 1
        try:
            while chunk := list(islice(iterator, CHUNK)):
                ids = self._write_papers(chunk)
                texts = [paper.text for paper in chunk]
                if self.pool is None and self.workers > 1 and next_doc > PARALLEL_MIN_PAPERS - CHUNK:
                    self.pool = ProcessPoolExecutor(
                        self.workers, mp_context=_context(), initializer=_worker_init, initargs=(os.getpid(),)
                    )
                job = self.pool.submit(tokenise_chunk, texts) if self.pool else tokenise_chunk(texts)
                pending.append((job, ids, next_doc))
                next_doc += len(chunk)
                while len(pending) > max(1, self.workers):
                    done += self._collect(*pending.popleft())
                    if progress:
                        progress(done)
            while pending:
                done += self._collect(*pending.popleft())
                if progress:
                    progress(done)
            stages["papers and tokens"] = time.perf_counter() - mark
            impact_avgdl = self._load_postings()
        finally:
            if self.pool is not None:
                self.pool.shutdown(cancel_futures=True)
        mark = time.perf_counter()
        self.conn.execute(f"CREATE INDEX {CITATIONS_INDEX} ON citations (cited_id, citing_id)")
        self.conn.execute(COUNT_CITED)
        stages["citations index"] = time.perf_counter() - mark
        counts = CorpusCounts(self.n_papers, self.total_tokens, impact_avgdl)
        return BulkResult(counts, done, len(self.vocabulary), self.cleaner, stages)

    def _write_papers(self, chunk: list[Paper]) -> list[str]:
        clean = self.cleaner.clean
        papers, authors, sources, references, cited_by = [], [], [], [], []
        for paper in chunk:
            self.unique.add(paper.id)
            add_paper_rows(paper, papers, authors, sources)
            if paper.references:
                references.append({"paper_id": paper.id, "ids": json.dumps(clean(paper.id, paper.references))})
            if paper.citations:
                cited_by.append({"paper_id": paper.id, "ids": json.dumps(clean(paper.id, paper.citations))})
        conn = self.conn
        conn.executemany(INSERT_PAPER, papers)
        conn.executemany(INSERT_AUTHOR, authors)
        conn.executemany(INSERT_SOURCE, sources)
        conn.executemany(INSERT_REFERENCES, references)
        conn.executemany(INSERT_CITED_BY, cited_by)
        return [paper.id for paper in chunk]

    def _collect(self, job, ids: list[str], first_doc: int) -> int:
        """Map a tokenised chunk's local terms to the index's term ids and keep its postings."""
        vocabulary, local_terms, counts, distinct, lengths = job.result() if isinstance(job, Future) else job
        known = self.vocabulary
        mapping = np.empty(len(vocabulary), dtype=np.int32)
        for local, term in enumerate(vocabulary):
            term_id = known.get(term)
            if term_id is None:
                term_id = known[term] = self.next_term_id
                self.next_term_id += 1
            mapping[local] = term_id
        doc_ids = np.arange(first_doc, first_doc + len(ids), dtype=np.int64)
        self.term_parts.append(mapping[local_terms])
        self.count_parts.append(counts)
        self.doc_parts.append(np.repeat(doc_ids.astype(np.int32), distinct))
        self.length_parts.append(lengths)
        self.conn.executemany(INSERT_DOC_LEN, zip(doc_ids.tolist(), ids, lengths.tolist(), strict=True))
        self.n_papers += len(ids)
        self.total_tokens += int(lengths.sum())
        return len(ids)

    # -- postings, at the end ---------------------------------------------------------------------------------
    def _load_postings(self) -> float:
        """Sort and load every posting; returns the average length the impacts were written at."""
        if self.n_papers == 0:
            return 0.0
        stages = self.stages
        mark = time.perf_counter()
        terms = np.concatenate(self.term_parts)
        counts = np.concatenate(self.count_parts)
        docs = np.concatenate(self.doc_parts)
        lengths = np.concatenate([np.zeros(1, dtype=np.int64), *self.length_parts])  # indexed by doc_id
        self.term_parts = self.count_parts = self.doc_parts = self.length_parts = []
        impact_avgdl = max(self.total_tokens / self.n_papers, 1e-9)
        # Documents were numbered in input order, so a stable sort by term keeps each term's documents sorted.
        order = np.argsort(terms, kind="stable")
        terms, docs, counts = terms[order], docs[order], counts[order]
        del order
        lengths = lengths[docs]
        weights = impacts(counts, lengths, impact_avgdl)
        n_terms = self.next_term_id
        df = np.bincount(terms, minlength=n_terms)
        starts = np.flatnonzero(np.r_[True, terms[1:] != terms[:-1]])
        max_impact = np.zeros(n_terms, dtype=np.int64)
        max_impact[terms[starts]] = np.maximum.reduceat(weights, starts)
        names = sorted(self.vocabulary.items(), key=lambda item: item[1])
        self.conn.executemany(
            INSERT_TERM_WITH_DF,
            ((term_id, term, int(df[term_id]), int(max_impact[term_id])) for term, term_id in names),
        )
        stages["postings sorted"] = time.perf_counter() - mark
        mark = time.perf_counter()
        self.conn.execute(f"DROP INDEX IF EXISTS {HEAD_INDEX}")
        self._insert_postings(terms, docs, counts, lengths, weights)
        stages["postings loaded"] = time.perf_counter() - mark
        mark = time.perf_counter()
        self.conn.execute(HEAD_INDEX_SQL)
        stages["head index"] = time.perf_counter() - mark
        return impact_avgdl

    def _insert_postings(self, terms, docs, counts, lengths, weights) -> None:
        columns = (terms, docs, counts, lengths, weights)
        widths = [max(1, int(a.max()).bit_length()) for a in columns]
        if sum(widths) > 63:  # too many papers or terms to pack into one integer: row by row
            self.conn.executemany(LOAD_POSTINGS_ROWS, zip(*(a.tolist() for a in columns), strict=True))
            return
        _, d_bits, c_bits, l_bits, i_bits = widths
        params = {
            "term_shift": d_bits + c_bits + l_bits + i_bits,
            "doc_shift": c_bits + l_bits + i_bits,
            "doc_mask": (1 << d_bits) - 1,
            "count_shift": l_bits + i_bits,
            "count_mask": (1 << c_bits) - 1,
            "length_shift": i_bits,
            "length_mask": (1 << l_bits) - 1,
            "impact_mask": (1 << i_bits) - 1,
        }
        packed = terms.astype(np.int64) << params["term_shift"]
        packed |= docs.astype(np.int64) << params["doc_shift"]
        packed |= counts.astype(np.int64) << params["count_shift"]
        packed |= lengths.astype(np.int64) << params["length_shift"]
        packed |= weights
        slices = [packed[i : i + LOAD_ROWS] for i in range(0, len(packed), LOAD_ROWS)]
        if self.pool is None:
            for part in slices:
                self.conn.execute(LOAD_POSTINGS, {**params, "postings": json_ints(part)})
            return
        # The workers format the next slices while this process inserts one (a few slices in memory at once).
        window: deque[Future] = deque()
        for part in slices:
            window.append(self.pool.submit(json_ints, part))
            if len(window) > self.workers:
                self.conn.execute(LOAD_POSTINGS, {**params, "postings": window.popleft().result()})
        while window:
            self.conn.execute(LOAD_POSTINGS, {**params, "postings": window.popleft().result()})
